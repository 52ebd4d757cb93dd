//! sealog as openraft's log store (docs/raft.md): many Raft groups on one sealog drive, each
//! with its own index range, vote and committed index, appends of every group sharing the
//! drive's group commit, and the ring's space coming back as groups purge.
//!
//! From the top down (a module imports only modules below it):

#![forbid(unsafe_code)]

pub mod kv;
