//! The example's types: the openraft type configuration, the command replicated through
//! the log and what applying it answers. Every other part of the example speaks in these.

use std::fmt;
use std::io::Cursor;

use serde::{Deserialize, Serialize};

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
