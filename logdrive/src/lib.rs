//! LogDrives on a sealog drive (docs/logdrive.md): many durable address
//! spaces of write-once registers sharing one engine ring, with weakTail, seal, fence,
//! prefix trim, reclamation of the ring's space, and a quarantine for damaged records.
//!
//! From the top down (a module imports only modules below it):
//!
//! - [`api`]: the object-safe [`LogDrive`] trait every LogDrive implements (local, striped,
//!   quorum, remote), its outcomes and its typed errors, definite or indeterminate; the
//!   compositions built on the trait live beside the store and see it only through the trait;
//! - [`striped`]: [`StripedLogDrive`], one address space striped over child LogDrives;
//! - [`quorum`]: [`QuorumLogDrive`], one address space replicated over child LogDrives with
//!   read, write and window-scan quorums, repair, fencing, seal-and-fill and scrub;
//! - [`scrubber`]: [`Scrubber`], a quorum's background scrub on a thread of its own;
//! - [`clock`]: [`Clock`], the time compositions read and sleep on, and the real one;
//! - [`mem`]: [`MemLogDrive`], a LogDrive in memory with switches for a replica's faults,
//!   which the compositions' tests and simulations run on;
//! - [`view`]: [`StoreView`], a ring's store read-only (replayed under the shared lock,
//!   nothing written, no reclaimer), for an operator's tools;
//! - [`store`]: [`LogDriveStore`], many LogDrives on one [`sealog::Drive`]: open, create,
//!   delete, close;
//! - `handle`: their [`LocalLogDrive`] handles and the operations on them;
//! - `complete`: how each queued record's outcome comes back to its LogDrive;
//! - [`reclaim`]: the reclaimer, which moves the ring's head past what no LogDrive needs and
//!   relocates what pins it, with its policy and figures;
//! - `inner`: what the store, its handles, the completions and the reclaimer share (the
//!   drive, the registry of LogDrives, admission into the ring's room, the stop flag);
//! - `live`: one LogDrive's live state and the mailbox its completions leave outcomes in;
//! - `replay`: the recovery visitor that rebuilds every LogDrive in the open's one pass;
//! - `state`: one LogDrive's state and the checks the live path and replay share; `index`:
//!   the two indexes every write touches, slots by address and needed records by LSN;
//! - `space`: the ring room kept for relocation and for control records, and the records
//!   waiting for room; `waiting`: an operation parked until then;
//! - `options`: [`StoreOptions`]; [`geometry`]: which rings a store can live on, and how to
//!   format one; [`record`]: how each record sits in a WAL entry;
//! - `errors`: the engine's errors as LogDrive errors; `sync`: the store's one way to lock;
//!   [`wait`](mod@wait): blocking on an operation's future from a plain thread.

#![forbid(unsafe_code)]

pub mod api;
pub mod clock;
mod complete;
mod errors;
pub mod geometry;
mod handle;
mod index;
mod inner;
mod live;
pub mod mem;
mod options;
pub mod quorum;
pub mod reclaim;
pub mod record;
mod replay;
pub mod scrubber;
mod space;
mod state;
pub mod store;
pub mod striped;
mod sync;
pub mod view;
pub mod wait;
mod waiting;

pub use api::{Length, LogDrive, LogDriveError, OpFuture, ReadOutcome, TailDesc};
pub use clock::{Clock, Sleep, SystemClock};
pub use geometry::GeometryError;
pub use handle::{LocalLogDrive, PendingWrite};
pub use mem::{MemLogDrive, MEM_WEAK_TAIL_K_MAX};
pub use quorum::{QuorumLogDrive, QuorumOptions, ScrubStats};
pub use reclaim::{ReclaimPolicy, ReclaimStats};
pub use replay::DamageFound;
pub use scrubber::{Scrubber, ScrubberFigures};
pub use store::{LogDriveStore, StoreOpenError, StoreOptions};
pub use striped::StripedLogDrive;
pub use view::{DriveSummary, StoreView, ViewError};
pub use wait::{wait, wait_deadline};
