//! One node of the example: opens its log store, starts openraft on it with the key-value
//! state machine and the gRPC network, and serves the `Raft` and `KV` services on a TCP
//! listener. The log store is picked by [`StoreKind`], and that choice is the only thing that
//! differs between runs on different stores: the same config, state machine, network and
//! server are used for all of them.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use openraft::{Config, SnapshotPolicy};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::transport::server::TcpIncoming;
use tonic::transport::Server;

use super::network::{KvNetwork, MAX_MESSAGE_BYTES};
use super::pb::kv_server::KvServer;
use super::pb::raft_server::RaftServer;
use super::server::{KvService, RaftService};
use super::state_machine::{KvStateMachine, SnapshotFileError};
use super::types::{KvRaft, NodeId, TypeConfig};
use crate::mem::MemLogStore;
use crate::{GroupLogStore, RaftStoreOptions, SealogRaftStore};

/// Which log store a node runs openraft on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreKind {
    /// sealog: a ring file, formatted on first start, one Raft group in it.
    Sealog,
    /// In memory: nothing survives a restart.
    Mem,
    /// raft-engine (TiKV's log store), in a directory at the ring's path.
    #[cfg(feature = "peers")]
    RaftEngine,
}

impl std::str::FromStr for StoreKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "sealog" => Ok(StoreKind::Sealog),
            "mem" => Ok(StoreKind::Mem),
            #[cfg(feature = "peers")]
            "raft-engine" => Ok(StoreKind::RaftEngine),
            other => Err(format!("unknown store {other:?}: expected sealog or mem")),
        }
    }
}

/// How to start a node.
#[derive(Clone, Debug)]
pub struct NodeConfig {
    /// This node's id in the cluster.
    pub id: NodeId,
    /// The address to listen on; port 0 picks a free one ([`Node::addr`] tells which).
    pub listen: SocketAddr,
    /// The ring (sealog) or directory (raft-engine); the snapshot file is kept next to it,
    /// at `<ring>.snapshot`.
    pub ring: PathBuf,
    /// The log store.
    pub store: StoreKind,
    /// The size a new ring is formatted with.
    pub ring_bytes: u64,
    /// openraft's configuration ([`NodeConfig::default_raft_config`] unless changed).
    pub raft: Config,
    /// How the sealog store opens (the drive's waiting among them), for `StoreKind::Sealog`.
    pub sealog: RaftStoreOptions,
}

/// The sealog store's options for an example node: the drive blocks at once rather than
/// spinning 250 us for completions, and does not hold a batch back to gather writers. The
/// example runs three nodes (three drive threads) on machines with few CPUs, where a spinning
/// drive thread takes the CPU the other nodes' Raft and network need: on this project's
/// 2-CPU machine, `sealog-bench --quick --section raft` with one client measured 2,052 and
/// 2,100 CPU us per write with the engine's defaults against 1,049 and 1,125 without spinning
/// or gathering, and 723 and 753 writes/s against 939 and 1,039 (raft-engine: 880 to 962).
/// At 256 clients the setting made no difference beyond the noise (spinning 0, 50 or 250 us:
/// 0.90 to 0.99 of raft-engine's writes/s, interleaved runs).
pub fn example_sealog_options() -> RaftStoreOptions {
    let drive = sealog::DriveOptions::default()
        .spin_before_block_us(0)
        .group_gather_us(0);
    RaftStoreOptions {
        store: sealog_logdrive::StoreOptions::default().drive(drive),
        ..RaftStoreOptions::default()
    }
}

impl NodeConfig {
    /// A node with the default ring size and openraft configuration.
    pub fn new(id: NodeId, listen: SocketAddr, ring: PathBuf, store: StoreKind) -> Self {
        let raft = Self::default_raft_config();
        NodeConfig {
            id,
            listen,
            ring,
            store,
            ring_bytes: 256 << 20,
            raft,
            sealog: example_sealog_options(),
        }
    }

    /// Timeouts with room for a loaded machine (a heartbeat every 100 ms, elections after
    /// 400 to 800 ms of silence), and a snapshot every 5000 entries keeping 1000 entries
    /// behind it, so followers that lag a little catch up from the log.
    pub fn default_raft_config() -> Config {
        Config {
            cluster_name: "sealog-kv".into(),
            heartbeat_interval: 100,
            election_timeout_min: 400,
            election_timeout_max: 800,
            snapshot_policy: SnapshotPolicy::LogsSinceLast(5000),
            max_in_snapshot_log_to_keep: 1000,
            max_payload_entries: 1000,
            ..Config::default()
        }
    }

    /// Where the node keeps its snapshot: next to its ring.
    pub fn snapshot_path(&self) -> PathBuf {
        let mut name = self.ring.clone().into_os_string();
        name.push(".snapshot");
        name.into()
    }
}

/// Why a node could not start or stop cleanly.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// What the OS said.
        source: std::io::Error,
    },
    /// openraft's configuration is invalid.
    #[error("invalid raft configuration: {0}")]
    Config(#[from] openraft::ConfigError),
    /// The log store could not be opened.
    #[error("cannot open the {kind:?} log store at {path}: {message}")]
    Store {
        /// Which store.
        kind: StoreKind,
        /// Its path.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// The snapshot file could not be read.
    #[error(transparent)]
    Snapshot(#[from] SnapshotFileError),
    /// openraft failed to start or stop.
    #[error("raft failed: {0}")]
    Raft(String),
}

/// A running node: its raft, state machine and gRPC server.
pub struct Node {
    id: NodeId,
    addr: SocketAddr,
    raft: KvRaft,
    state_machine: KvStateMachine,
    stop_server: Option<oneshot::Sender<()>>,
    server: Option<JoinHandle<Result<(), tonic::transport::Error>>>,
    store: Option<StoreHandle>,
}

impl Node {
    /// Opens the store, starts openraft and serves gRPC until [`Node::shutdown`].
    pub async fn start(config: NodeConfig) -> Result<Node, NodeError> {
        let listener =
            TcpListener::bind(config.listen)
                .await
                .map_err(|source| NodeError::Listen {
                    addr: config.listen,
                    source,
                })?;
        let addr = listener.local_addr().map_err(|source| NodeError::Listen {
            addr: config.listen,
            source,
        })?;
        let raft_config = Arc::new(config.raft.clone().validate()?);
        let (raft, state_machine, store) = start_raft(&config, raft_config).await?;
        let (stop_server, stopped) = oneshot::channel::<()>();
        let raft_service = RaftServer::new(RaftService::new(raft.clone()))
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        let kv_service = KvServer::new(KvService::new(raft.clone(), state_machine.clone()));
        let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
        let server = Server::builder()
            .add_service(raft_service)
            .add_service(kv_service)
            .serve_with_incoming_shutdown(incoming, async {
                // A dropped sender stops the server as a sent value does.
                let _ = stopped.await;
            });
        let server = Some(tokio::spawn(server));
        let (stop_server, store) = (Some(stop_server), Some(store));
        Ok(Node {
            id: config.id,
            addr,
            raft,
            state_machine,
            stop_server,
            server,
            store,
        })
    }

    /// This node's id.
    pub fn id(&self) -> NodeId {
        self.id
    }

    /// The address the node serves on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The openraft handle.
    pub fn raft(&self) -> &KvRaft {
        &self.raft
    }

    /// The state machine openraft applies to on this node.
    pub fn state_machine(&self) -> &KvStateMachine {
        &self.state_machine
    }

    /// Stops serving, then stops openraft, then closes the log store.
    pub async fn shutdown(mut self) -> Result<(), NodeError> {
        if let Some(stop) = self.stop_server.take() {
            let _ = stop.send(());
        }
        // Every step runs even when one before it failed: the store must be closed last.
        let served = match self.server.take() {
            Some(server) => match server.await {
                Ok(result) => result.map_err(|e| NodeError::Raft(format!("gRPC server: {e}"))),
                Err(e) => Err(NodeError::Raft(format!("gRPC server task: {e}"))),
            },
            None => Ok(()),
        };
        let stopped = self
            .raft
            .shutdown()
            .await
            .map_err(|e| NodeError::Raft(e.to_string()));
        if let Some(store) = self.store.take() {
            store.close();
        }
        served.and(stopped)
    }
}

/// The group the example's one Raft group is on, in stores that hold many.
pub const KV_GROUP: u64 = 1;

/// What a node must close after openraft stops: the store under its log storage.
enum StoreHandle {
    Mem,
    Sealog(SealogRaftStore<TypeConfig>),
    #[cfg(feature = "peers")]
    RaftEngine(crate::raft_engine::RaftEngineNode),
}

impl StoreHandle {
    fn close(self) {
        match self {
            StoreHandle::Mem => {}
            StoreHandle::Sealog(store) => store.close(),
            // raft-engine closes when its last handle (openraft's log store's among them)
            // is dropped: this one goes now.
            #[cfg(feature = "peers")]
            StoreHandle::RaftEngine(engine) => drop(engine),
        }
    }
}

/// Opens the log store `config.store` names and starts openraft on it.
async fn start_raft(
    config: &NodeConfig,
    raft_config: Arc<Config>,
) -> Result<(KvRaft, KvStateMachine, StoreHandle), NodeError> {
    let network = KvNetwork::default();
    let raft_err = |e: openraft::error::Fatal<NodeId>| NodeError::Raft(e.to_string());
    match config.store {
        StoreKind::Mem => {
            let sm = KvStateMachine::in_memory();
            let log = MemLogStore::<TypeConfig>::new();
            let raft = KvRaft::new(config.id, raft_config, network, log, sm.clone()).await;
            Ok((raft.map_err(raft_err)?, sm, StoreHandle::Mem))
        }
        StoreKind::Sealog => {
            let (store, log) = open_sealog(config).await?;
            let sm = KvStateMachine::open(config.snapshot_path())?;
            match KvRaft::new(config.id, raft_config, network, log, sm.clone()).await {
                Ok(raft) => Ok((raft, sm, StoreHandle::Sealog(store))),
                Err(e) => {
                    store.close();
                    Err(raft_err(e))
                }
            }
        }
        #[cfg(feature = "peers")]
        StoreKind::RaftEngine => {
            let (engine, log) = open_raft_engine(config).await?;
            let sm = KvStateMachine::open(config.snapshot_path())?;
            let raft = KvRaft::new(config.id, raft_config, network, log, sm.clone()).await;
            Ok((raft.map_err(raft_err)?, sm, StoreHandle::RaftEngine(engine)))
        }
    }
}

/// Runs the blocking `open` off the async runtime's threads.
async fn blocking<T: Send + 'static>(
    config: &NodeConfig,
    open: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, NodeError> {
    let error = |message| NodeError::Store {
        kind: config.store,
        path: config.ring.clone(),
        message,
    };
    match tokio::task::spawn_blocking(open).await {
        Ok(result) => result.map_err(error),
        Err(e) => Err(error(format!("the opening task failed: {e}"))),
    }
}

/// A snapshot left beside a ring that is not there any more belongs to a log that is gone:
/// starting from it would claim entries the new log does not have.
fn drop_stale_snapshot(config: &NodeConfig) -> Result<(), String> {
    match std::fs::remove_file(config.snapshot_path()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("cannot remove the stale snapshot: {e}")),
    }
}

/// Formats the ring if it does not exist, opens it and the example's group in it.
async fn open_sealog(
    config: &NodeConfig,
) -> Result<(SealogRaftStore<TypeConfig>, GroupLogStore<TypeConfig>), NodeError> {
    let (ring, bytes, snapshot) = (config.ring.clone(), config.ring_bytes, config.clone());
    let sealog_options = config.sealog.clone();
    blocking(config, move || {
        if !ring.exists() {
            drop_stale_snapshot(&snapshot)?;
            SealogRaftStore::<TypeConfig>::format(&ring, bytes).map_err(|e| e.to_string())?;
        }
        let options = sealog_options;
        let store =
            SealogRaftStore::<TypeConfig>::open(&ring, options).map_err(|e| e.to_string())?;
        match store.group(KV_GROUP) {
            Ok(group) => Ok((store, group)),
            Err(e) => {
                store.close();
                Err(e.to_string())
            }
        }
    })
    .await
}

/// Opens (creating it if new) the raft-engine directory at the ring's path, and the group.
#[cfg(feature = "peers")]
async fn open_raft_engine(
    config: &NodeConfig,
) -> Result<
    (
        crate::raft_engine::RaftEngineNode,
        crate::raft_engine::RaftEngineLogStore<TypeConfig>,
    ),
    NodeError,
> {
    let (dir, snapshot) = (config.ring.clone(), config.clone());
    blocking(config, move || {
        if !dir.exists() {
            drop_stale_snapshot(&snapshot)?;
        }
        let engine_config = raft_engine::Config {
            dir: dir.display().to_string(),
            ..Default::default()
        };
        let engine = crate::raft_engine::RaftEngineNode::open(engine_config, 1)
            .map_err(|e| e.to_string())?;
        let group = engine
            .group::<TypeConfig>(KV_GROUP)
            .map_err(|e| e.to_string())?;
        Ok((engine, group))
    })
    .await
}
