//! sealog as openraft's log store (docs/raft.md): many Raft groups on one sealog drive, each
//! with its own index range, vote and committed index, appends of every group sharing the
//! drive's group commit, and the ring's space coming back as groups purge.
//!
//! From the top down (a module imports only modules below it):
//!
//! - [`kv`]: a replicated key-value example over openraft, with its gRPC network (tonic)
//!   and a three-node cluster the tests and the bench start, on any of the stores below;
//! - [`store`]: [`SealogRaftStore`], a node's groups on one ring: format, open, a group's
//!   log storage, close;
//! - [`log_store`]: [`GroupLogStore`], one group's `RaftLogStorage` and `RaftLogReader`;
//! - `recover`: a store's groups rebuilt from their LogDrives when it opens;
//! - `control`: truncation, purge and creation, which change a group's map of segments;
//! - `group`: a group's state, appends, reads and metadata writes;
//! - `codec`: entries and metadata as register bytes; `ids`: which LogDrive ids a group
//!   owns; [`error`]: [`RaftStoreError`];
//! - [`mem`]: [`mem::MemLogStore`], a log store in memory, the no-storage ceiling the bench
//!   runs the same cluster on; `raft_engine` (feature `peers`): TiKV's raft-engine as
//!   openraft's log store, the peer the bench measures sealog against.

#![forbid(unsafe_code)]

mod codec;
mod control;
pub mod error;
mod group;
mod ids;
pub mod kv;
pub mod log_store;
pub mod mem;
#[cfg(feature = "peers")]
pub mod raft_engine;
mod recover;
pub mod store;

pub use error::RaftStoreError;

/// The openraft type configurations a store serves: any whose entries can be cloned (the
/// store hands out copies of the entries it keeps in memory), which openraft's own `Entry`
/// can.
pub trait StoreTypes: openraft::RaftTypeConfig<Entry: Clone> {}

impl<C> StoreTypes for C
where
    C: openraft::RaftTypeConfig,
    C::Entry: Clone,
{
}

pub use ids::GROUP_ID_MAX;
pub use log_store::GroupLogStore;
pub use store::{RaftStoreOptions, SealogRaftStore};
