//! The replicated key-value example: a small service that runs openraft over a pluggable log
//! store, so the same three-node cluster can be driven on sealog, in memory, or (feature
//! `peers`) on raft-engine, the log store being the only difference between runs.
//!
//! This module owns the example's types (the openraft [`TypeConfig`], the replicated
//! [`Request`] and its [`Response`]); its children own the rest, from the bottom up:
//! [`pb`] the generated gRPC code, [`state_machine`] the key-value map and its snapshots,
//! [`network`] openraft's RPCs over tonic, [`server`] the gRPC services around a `Raft`,
//! [`node`] one node (store + raft + server), [`client`] the leader-finding client and
//! [`cluster`] an in-process cluster for tests and the benchmark.

pub mod client;
pub mod cluster;
pub mod network;
pub mod node;
pub mod pb;
pub mod server;
pub mod state_machine;

use std::fmt;
use std::io::Cursor;

use serde::{Deserialize, Serialize};

pub use client::{ClientError, KvClient};
pub use cluster::{Cluster, ClusterError};
pub use node::{Node, NodeConfig, NodeError, StoreKind};

openraft::declare_raft_types!(
    /// The example's openraft types: node ids are `u64`, a node is known by its gRPC address
    /// (`BasicNode::addr`), and snapshots travel as in-memory byte buffers.
    pub TypeConfig:
        D = Request,
        R = Response,
        NodeId = u64,
        Node = openraft::BasicNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = Cursor<Vec<u8>>,
        AsyncRuntime = openraft::TokioRuntime,
);

/// The id of a node in the example cluster.
pub type NodeId = u64;

/// The openraft handle of a node of the example.
pub type KvRaft = openraft::Raft<TypeConfig>;

/// A command replicated through the log and applied to every state machine.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// Set `key` to `value`.
    Set {
        /// The key.
        key: String,
        /// Its new value.
        value: String,
    },
}

impl fmt::Display for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Request::Set { key, value } => write!(f, "set {key}={value}"),
        }
    }
}

/// What applying a [`Request`] returned: the key's previous value, if any.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Response {
    /// The value the key had before the write.
    pub previous: Option<String>,
}
