//! The replicated key-value example: a small service that runs openraft over a pluggable log
//! store, so the same three-node cluster can be driven on sealog, in memory, or (feature
//! `peers`) on raft-engine, the log store being the only difference between runs.
//!
//! Its children, from the bottom up: [`types`] the example's types (the openraft
//! [`TypeConfig`], the replicated [`Request`] and its [`Response`]), [`pb`] the generated
//! gRPC code, [`state_machine`] the key-value map and its snapshots,
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
pub mod types;

pub use client::{ClientError, KvClient};
pub use cluster::{Cluster, ClusterError};
pub use node::{Node, NodeConfig, NodeError, StoreKind};
pub use types::{KvRaft, NodeId, Request, Response, TypeConfig};
