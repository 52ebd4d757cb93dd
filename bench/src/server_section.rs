//! The server section: the replicated log of `sealog-server` (a client appending through a
//! sequencer, its values written to three LogDrive servers over gRPC on loopback, Qw = 2)
//! beside the AtomicLog over a local quorum of the same three rings and the raw engine's
//! append, in the same run, in interleaved rounds, at 1 and 256 in flight, 4 KiB payloads.
//! The replicated log runs with TLS on and off (its cost), and with TLS over two quorum
//! groups striped (the same three servers, six LogDrives). Each run starts its servers and
//! sequencer on the rings, measures through the poll loop of `inflight.rs`, and stops them;
//! everything runs in this process, so the CPU figures are the whole system's.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use sealog_logdrive::{LogDriveStore, MemLogDrive};
use sealog_server::log_client::{LogClient, LogClientOptions};
use sealog_server::sequencer_host::{Host, HostConfig};
use sealog_server::sequencer_service::SequencerServer;
use sealog_server::{
    CertAuthority, ClientTls, Leaf, LogServer, RemoteOptions, Role, ServerOptions, TlsPem,
};
use sealog_vlog::{AtomicOptions, LogDriveMetaStore, MetaStore, VirtualOptions};

use crate::cells::{cell_options, fresh_ring};
use crate::compose::{self, measured_cell, open_store, payload, Run, DEEP};
use crate::compose_figures::{ComposeEngine, WINDOW_K, WRITE_QUORUM};
use crate::inflight::{Load, Op, Ops};
use crate::logdrive::empty_store_and_close;
use crate::progress::progress;
use crate::rounds::interleave;
use crate::run_context::RunContext;
use crate::server_report::{ServerFigures, ServerRow, ENGINES};

/// The shortest measured window of a run: at 256 in flight an append of the replicated log
/// takes some 50 ms, so a window of a few tens of milliseconds (a run with `--seconds 0.3`)
/// would see none complete.
const RUN_MIN: std::time::Duration = std::time::Duration::from_millis(300);

/// One engine of the section.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServerEngine {
    /// The raw engine's append on the first ring.
    Raw,
    /// An AtomicLog over a local quorum of three LogDrives, one on each ring.
    LocalQuorum,
    /// The replicated log, plain HTTP/2.
    LogPlain,
    /// The replicated log over TLS.
    LogTls,
    /// The replicated log over TLS, two quorum groups striped.
    LogTls2,
}

impl ServerEngine {
    /// Its name in the table and the JSON.
    pub fn name(self) -> &'static str {
        match self {
            ServerEngine::Raw => "engine append",
            ServerEngine::LocalQuorum => "AtomicLog, local quorum",
            ServerEngine::LogPlain => "replicated log, no TLS",
            ServerEngine::LogTls => "replicated log, TLS",
            ServerEngine::LogTls2 => "replicated log, TLS, 2 groups",
        }
    }
}

/// Runs the section on three rings in the run's scratch directory.
pub fn server_section(
    context: &RunContext<'_>,
    sync_method: Option<sealog::SyncMethod>,
) -> Result<ServerFigures, String> {
    let started = Instant::now();
    let plan = crate::compose_section::plan(context, sync_method, "server");
    progress("server: formatting the section's three rings");
    for ring in &plan.rings {
        fresh_ring(ring, plan.shape)?;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("bench-server")
        .enable_all()
        .build()
        .map_err(|error| error.to_string())?;
    let mut rows = Vec::new();
    for (threads, in_flight) in [(1, 1), DEEP] {
        let load = Load {
            threads,
            in_flight,
            duration: plan.run.max(RUN_MIN),
            warmup: plan.warmup.max(RUN_MIN / 4),
            spin: std::time::Duration::from_micros(plan.options.client_spin_us),
        };
        rows.extend(comparison(&plan, &runtime, load)?);
    }
    for ring in &plan.rings {
        let _ = std::fs::remove_dir_all(ring);
    }
    Ok(ServerFigures {
        rows,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// Every engine under `load`, in interleaved rounds: a row each.
fn comparison(
    plan: &compose::Plan,
    runtime: &tokio::runtime::Runtime,
    load: Load,
) -> Result<Vec<ServerRow>, String> {
    let rounds = (ENGINES.len() * plan.rotations).max(4);
    let in_flight = load.total_in_flight();
    let runs = interleave(rounds, ENGINES.len(), |engine, round| {
        progress(&format!(
            "server at {in_flight} in flight, round {}/{rounds}: {}",
            round + 1,
            ENGINES[engine].name()
        ));
        match ENGINES[engine] {
            ServerEngine::Raw => compose::run(plan, ComposeEngine::Raw, load),
            ServerEngine::LocalQuorum => compose::run(plan, ComposeEngine::AtomicQuorum, load),
            remote => remote_run(plan, runtime, remote, load),
        }
    })?;
    Ok(ServerRow::from_rounds(&runs, in_flight))
}

/// The PKI of a run with TLS: the CA and the material of each party.
struct Pki(CertAuthority);

impl Pki {
    fn new() -> Result<Pki, String> {
        CertAuthority::new("bench CA")
            .map(Pki)
            .map_err(|error| error.to_string())
    }

    fn pem(&self, leaf: Leaf) -> Result<TlsPem, String> {
        let issued = self.0.issue(&leaf).map_err(|error| error.to_string())?;
        Ok(TlsPem {
            ca: self.0.pem().as_bytes().to_vec(),
            cert: issued.cert_pem.into_bytes(),
            key: issued.key_pem.into_bytes(),
        })
    }

    fn remote(&self, leaf: Leaf) -> Result<RemoteOptions, String> {
        let pem = self.pem(leaf)?;
        Ok(RemoteOptions {
            tls: Some(ClientTls {
                ca_pem: pem.ca,
                identity: Some((pem.cert, pem.key)),
                server_name: sealog_server::certs::SERVER_NAME.into(),
            }),
            ..RemoteOptions::default()
        })
    }
}

/// The replicated log's run: servers on the three rings' stores, a sequencer, a client
/// that creates the log; measured; the stores emptied and the servers stopped.
fn remote_run(
    plan: &compose::Plan,
    runtime: &tokio::runtime::Runtime,
    engine: ServerEngine,
    load: Load,
) -> Result<Run, String> {
    let options = cell_options(plan.options.clone());
    let stores = plan
        .rings
        .iter()
        .map(|ring| open_store(ring, options.clone()))
        .collect::<Result<Vec<_>, String>>()?;
    let pki = match engine {
        ServerEngine::LogPlain => None,
        _ => Some(Pki::new()?),
    };
    let groups = if engine == ServerEngine::LogTls2 {
        2
    } else {
        1
    };
    let started = runtime.block_on(start(&stores, pki.as_ref(), groups));
    let measured = started.map(|(servers, sequencer, client)| {
        let ops = AppendOps {
            client: Arc::new(client),
            payload: payload(),
        };
        let measured = measured_cell(&ops, engine.name(), load, stores[0].drive());
        drop(ops);
        runtime.block_on(sequencer.stop());
        (measured, servers)
    });
    let emptied = stores.iter().try_for_each(empty_store_and_close);
    let (measured, servers) = measured?;
    for server in servers {
        runtime.block_on(server.stop());
    }
    measured.and_then(|run| emptied.map(|()| run))
}

/// Starts a server on each store, a sequencer of `groups` quorum groups over them (its
/// chain on an in-memory LogDrive), and a client that creates the log.
async fn start(
    stores: &[LogDriveStore],
    pki: Option<&Pki>,
    groups: usize,
) -> Result<(Vec<LogServer>, SequencerServer, LogClient), String> {
    let loopback = "127.0.0.1:0".parse().expect("a socket address");
    let mut servers = Vec::new();
    for (index, store) in stores.iter().enumerate() {
        let tls = match pki {
            Some(pki) => Some(pki.pem(Leaf::server(&format!("s{index}"), &[]))?),
            None => None,
        };
        let server = LogServer::start(store.clone(), ServerOptions::new(loopback, tls));
        servers.push(server.await.map_err(|error| error.to_string())?);
    }
    let addrs: Vec<String> = servers.iter().map(|s| s.addr().to_string()).collect();
    let remote = |leaf: Leaf| match pki {
        Some(pki) => pki.remote(leaf),
        None => Ok(RemoteOptions::default()),
    };
    let meta: Arc<dyn MetaStore> =
        Arc::new(LogDriveMetaStore::new(Arc::new(MemLogDrive::new()), 1));
    let sequencer = sequencer(
        remote(Leaf::sequencer("q", &[]))?,
        pki,
        vec![addrs; groups],
        Arc::clone(&meta),
    )
    .await?;
    let options = LogClientOptions {
        sequencers: vec![sequencer.addr().to_string()],
        remote: remote(Leaf::client("bench", Role::Client))?,
        atomic: AtomicOptions::default(),
        virtual_options: VirtualOptions::default(),
    };
    let client = LogClient::open(meta, options, true)
        .await
        .map_err(|error| format!("creating the log: {error}"))?;
    // One append before the measured window: the connections and their TLS handshakes are
    // made, and the loglet opened, as a long-running client's would be.
    client
        .append(payload())
        .await
        .map_err(|error| format!("the first append: {error}"))?;
    Ok((servers, sequencer, client))
}

/// The sequencer, on a port the OS picks.
async fn sequencer(
    remote: RemoteOptions,
    pki: Option<&Pki>,
    groups: Vec<Vec<String>>,
    meta: Arc<dyn MetaStore>,
) -> Result<SequencerServer, String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    drop(listener);
    let config = HostConfig {
        name: "q".into(),
        advertise: addr.to_string(),
        index: 0,
        groups,
        write_quorum: WRITE_QUORUM,
        window: WINDOW_K,
        waiting_max: 4096,
        capacity: 1 << 40,
        virtual_options: VirtualOptions::default(),
        atomic: AtomicOptions::default(),
    };
    let host = Arc::new(Host::reaching(config, meta, remote));
    let tls = match pki {
        Some(pki) => Some(pki.pem(Leaf::sequencer("q", &[]))?),
        None => None,
    };
    SequencerServer::start(host, addr, tls)
        .await
        .map_err(|error| error.to_string())
}

/// The replicated log's appends. Nothing is released during a run: a run writes a few tens
/// of megabytes, and it ends by deleting every LogDrive on the rings.
struct AppendOps {
    client: Arc<LogClient>,
    payload: Bytes,
}

impl Ops for AppendOps {
    fn start(&self, _thread: usize) -> Op<'_> {
        let payload = self.payload.clone();
        Box::pin(async move {
            self.client
                .append(payload)
                .await
                .map(|_| ())
                .map_err(|error| error.to_string())
        })
    }

    fn release(&self, _keep_writes: u64) -> Result<(), String> {
        Ok(())
    }
}
