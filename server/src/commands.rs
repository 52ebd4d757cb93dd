//! What `sealog-server`'s log commands do, apart from parsing their arguments: run a
//! sequencer until killed, and the client's `create`, `append`, `read`, `tail`, `seal`,
//! `reconfigure`, `status` and `repair`, each printing one JSON object on stdout.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use sealog_vlog::{AtomicOptions, Chain, VirtualOptions};
use serde_json::{json, Value};

use crate::log_client::{LogClient, LogClientOptions};
use crate::loglet_spec::{LogletSpec, Pool, Replica};
use crate::meta_url::MetaUrl;
use crate::remote::{ClientTls, RemoteOptions};
use crate::repair::repair_sealed;
use crate::sequencer_host::{Host, HostConfig};
use crate::sequencer_service::SequencerServer;
use crate::tls::{TlsFiles, TlsPem};

/// How a command reaches the cluster.
#[derive(Clone, Debug)]
pub struct Reach {
    /// The MetaStore, as `MetaUrl` parses it.
    pub meta: String,
    /// The sequencers' addresses.
    pub sequencers: Vec<String>,
    /// The directory `certs` wrote; `None`: plain connections.
    pub tls_dir: Option<PathBuf>,
    /// This caller's name in `tls_dir`.
    pub name: String,
    /// The longest one call may take.
    pub deadline: Duration,
}

impl Reach {
    /// Connection options for this caller.
    pub fn remote(&self) -> Result<RemoteOptions, String> {
        let tls = match &self.tls_dir {
            None => None,
            Some(dir) => Some(ClientTls::from_dir(dir, &self.name).map_err(|e| e.to_string())?),
        };
        Ok(RemoteOptions {
            op_deadline: self.deadline,
            tls,
            ..RemoteOptions::default()
        })
    }

    /// This caller's TLS material as a server presents it (a sequencer).
    pub fn server_tls(&self) -> Result<Option<TlsPem>, String> {
        match &self.tls_dir {
            None => Ok(None),
            Some(dir) => Ok(Some(
                TlsFiles::in_dir(dir, &self.name)
                    .read()
                    .map_err(|e| e.to_string())?,
            )),
        }
    }

    async fn client(&self, create: bool) -> Result<LogClient, String> {
        let remote = self.remote()?;
        let meta = MetaUrl::parse(&self.meta)?
            .open(&remote)
            .await
            .map_err(|e| format!("the MetaStore {}: {e}", self.meta))?;
        let options = LogClientOptions {
            sequencers: self.sequencers.clone(),
            remote,
            atomic: AtomicOptions::default(),
            virtual_options: VirtualOptions::default(),
        };
        LogClient::open(meta, options, create)
            .await
            .map_err(|e| format!("opening the log: {e}"))
    }
}

/// Runs a sequencer of `config` on `listen` until the process is killed.
pub async fn run_sequencer(
    reach: &Reach,
    listen: SocketAddr,
    config: HostConfig,
) -> Result<(), String> {
    let remote = reach.remote()?;
    let meta = MetaUrl::parse(&reach.meta)?
        .open(&remote)
        .await
        .map_err(|e| format!("the MetaStore {}: {e}", reach.meta))?;
    let host = Arc::new(Host::reaching(config, meta, remote));
    let server = SequencerServer::start(host, listen, reach.server_tls()?)
        .await
        .map_err(|e| e.to_string())?;
    eprintln!(
        "sealog-server: sequencer {} serving on {}",
        reach.name,
        server.addr()
    );
    std::future::pending::<()>().await;
    Ok(())
}

/// A log command.
#[derive(Clone, Debug)]
pub enum LogCommand {
    /// Create the log (its first segment, on the first sequencer that answers).
    Create,
    /// Append a value.
    Append(Bytes),
    /// Read the entry at a position.
    Read(u64),
    /// The first position not written.
    Tail,
    /// Set the active segment's seal bit.
    Seal,
    /// Seal the active segment and install a new one.
    Reconfigure,
    /// The chain.
    Status,
    /// Bring every replica of every sealed segment to its sealed length.
    Repair,
}

/// Runs `command`: the JSON object to print.
pub async fn run_log_command(reach: &Reach, command: LogCommand) -> Result<Value, String> {
    let client = reach.client(matches!(command, LogCommand::Create)).await?;
    let failed = |what: &str, e: sealog_vlog::LogError| {
        let definite = if e.is_definite() {
            "definite"
        } else {
            "indeterminate"
        };
        format!("{what}: {e} ({definite})")
    };
    Ok(match command {
        LogCommand::Create => {
            let chain = client.chain().await.map_err(|e| failed("create", e))?;
            json!({ "loglet": chain.active().loglet.id })
        }
        LogCommand::Append(value) => {
            let position = client
                .append(value)
                .await
                .map_err(|e| failed("append", e))?;
            json!({ "position": position })
        }
        LogCommand::Read(position) => match client.read(position).await {
            Ok(Some(value)) => json!({
                "position": position,
                "value": String::from_utf8_lossy(&value),
                "len": value.len(),
            }),
            Ok(None) => json!({ "position": position, "value": null }),
            Err(e) => return Err(failed("read", e)),
        },
        LogCommand::Tail => json!({ "tail": client.tail().await.map_err(|e| failed("tail", e))? }),
        LogCommand::Seal => {
            let (loglet, epoch) = client.seal().await.map_err(|e| failed("seal", e))?;
            json!({ "sealed_loglet": loglet, "epoch": epoch })
        }
        LogCommand::Reconfigure => {
            let loglet = client
                .reconfigure()
                .await
                .map_err(|e| failed("reconfigure", e))?;
            json!({ "loglet": loglet })
        }
        LogCommand::Status => chain_json(&client.chain().await.map_err(|e| failed("status", e))?),
        LogCommand::Repair => {
            let chain = client.chain().await.map_err(|e| failed("repair", e))?;
            let pool = Arc::new(Pool::new(reach.remote()?));
            let done = repair_sealed(&pool, &chain)
                .await
                .map_err(|e| failed("repair", e))?;
            json!({
                "segments": done.segments,
                "replicas_repaired": done.replicas_repaired,
                "slots_written": done.slots_written,
                "unrepairable": done.unrepairable,
                "unreachable": done.unreachable,
                "created": done.created,
                "absent": done.absent,
            })
        }
    })
}

/// The chain as JSON: version, trim point, and each segment with its sequencer.
pub fn chain_json(chain: &Chain) -> Value {
    let segments: Vec<Value> = chain
        .segments
        .iter()
        .map(|segment| {
            let spec = LogletSpec::decode(&segment.loglet).ok();
            let replicas = spec.as_ref().map(|spec| {
                let addrs = |group: &Vec<_>| {
                    group
                        .iter()
                        .map(|r: &Replica| r.addr.clone())
                        .collect::<Vec<_>>()
                };
                spec.groups.iter().map(addrs).collect::<Vec<_>>()
            });
            json!({
                "start": segment.start,
                "stop": segment.stop,
                "epoch": segment.epoch,
                "sealing": segment.sealing,
                "loglet": segment.loglet.id,
                "sequencer": spec.as_ref().map(|s| s.sequencer.clone()),
                "replicas": replicas,
            })
        })
        .collect();
    json!({ "version": chain.version, "trimmed": chain.trimmed, "segments": segments })
}
