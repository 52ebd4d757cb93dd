//! LogDrives on a sealog drive (issue 13, SEMANTICS.md section 1): many durable address
//! spaces of write-once registers sharing one engine ring, with weakTail, seal, fence and
//! prefix trim.
//!
//! - [`api`]: the object-safe [`LogDrive`] trait every LogDrive implements (local, striped,
//!   quorum, remote), its outcomes and its typed errors, definite or indeterminate;
//! - [`store`]: [`LogDriveStore`], many LogDrives on one [`sealog::Drive`], and their
//!   [`LocalLogDrive`] handles;
//! - [`record`]: how each record sits in a WAL entry (kind and embedder header);
//! - `state`: one LogDrive's index and the checks the live path and replay share;
//! - `replay`: the recovery visitor that rebuilds every LogDrive in the open's one pass;
//! - [`wait`](mod@wait): blocking on an operation's future from a plain thread.

#![forbid(unsafe_code)]

pub mod api;
pub mod record;
mod replay;
mod state;
pub mod store;
pub mod wait;

pub use api::{Length, LogDrive, LogDriveError, OpFuture, ReadOutcome, TailDesc};
pub use store::{LocalLogDrive, LogDriveStore};
pub use wait::wait;
