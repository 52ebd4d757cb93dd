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
use super::temp_mem_store::TempMemLogStore;
use super::{KvRaft, NodeId};

/// Which log store a node runs openraft on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreKind {
    /// sealog: a ring file, formatted on first start, one Raft group in it.
    Sealog,
    /// In memory: nothing survives a restart.
    Mem,
}

impl std::str::FromStr for StoreKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "sealog" => Ok(StoreKind::Sealog),
            "mem" => Ok(StoreKind::Mem),
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
    /// The ring file (sealog); its snapshot file is kept next to it, at `<ring>.snapshot`.
    pub ring: PathBuf,
    /// The log store.
    pub store: StoreKind,
    /// The size a new ring is formatted with.
    pub ring_bytes: u64,
    /// openraft's configuration ([`NodeConfig::default_raft_config`] unless changed).
    pub raft: Config,
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
        let (raft, state_machine) = start_raft(&config, raft_config).await?;
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
        let server = tokio::spawn(server);
        let (stop_server, server) = (Some(stop_server), Some(server));
        Ok(Node {
            id: config.id,
            addr,
            raft,
            state_machine,
            stop_server,
            server,
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

    /// Stops serving, then stops openraft (which closes the log store it owns).
    pub async fn shutdown(mut self) -> Result<(), NodeError> {
        if let Some(stop) = self.stop_server.take() {
            let _ = stop.send(());
        }
        if let Some(server) = self.server.take() {
            match server.await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Err(NodeError::Raft(format!("gRPC server: {e}"))),
                Err(e) => return Err(NodeError::Raft(format!("gRPC server task: {e}"))),
            }
        }
        self.raft
            .shutdown()
            .await
            .map_err(|e| NodeError::Raft(e.to_string()))
    }
}

/// Opens the log store `config.store` names and starts openraft on it.
async fn start_raft(
    config: &NodeConfig,
    raft_config: Arc<Config>,
) -> Result<(KvRaft, KvStateMachine), NodeError> {
    let network = KvNetwork::default();
    let raft_err = |e: openraft::error::Fatal<NodeId>| NodeError::Raft(e.to_string());
    match config.store {
        StoreKind::Mem => {
            let sm = KvStateMachine::in_memory();
            let store = TempMemLogStore::default();
            let raft = KvRaft::new(config.id, raft_config, network, store, sm.clone()).await;
            Ok((raft.map_err(raft_err)?, sm))
        }
        StoreKind::Sealog => Err(NodeError::Store {
            kind: config.store,
            path: config.ring.clone(),
            message: "the sealog log store is not on main yet".into(),
        }),
    }
}
