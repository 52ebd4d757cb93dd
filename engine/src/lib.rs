//! sealog, the engine: rings on raw block devices or directories of pre-allocated segment
//! files, one thread per drive owning its io_uring, registered O_DIRECT buffers and ring, group
//! commit with a write and a linked datasync per batch and several batches in flight, recovery
//! on open with the `sealog-wal` scanner, reads, durable trim, ring-full backpressure, and
//! fail-stop on any I/O error.
//!
//! - [`drive`]: one drive, its thread and its state machine (group commit, reads, trims,
//!   tail markers, recovery); [`drive::metrics`]: what a drive reports through the `metrics`
//!   facade;
//! - [`engine`]: several drives opened together;
//! - [`storage`]: formatting and opening rings, locks, the block size rule;
//! - [`sync_probe`]: the format-time measurement that chooses a ring's default durability;
//! - [`io`]: the completion-based I/O seam; [`uring`] its io_uring backend (the only module
//!   with `unsafe`); the simulated device that tests run the engine on is the
//!   fault-injection crate's (`sealog-fault`);
//! - [`ticket`]: append outcomes, waitable and awaitable, from a per-drive pool, parked on one
//!   futex per drive;
//! - [`pool`]: the aligned buffer pool;
//! - [`reply`]: one-shot answers to reads and trims, blocking or awaited;
//! - [`reader`]: read-only access for verify, dump and inspect;
//! - [`stat`]: a ring's shape read without its lock, while a writer holds it;
//! - [`signature`]: what format looks for on a block device before it writes (mounts,
//!   partitions, file systems, partition tables, rings).

#![deny(unsafe_code)]

pub mod drive;
pub mod engine;
pub mod error;
pub mod io;
pub mod pool;
pub mod reader;
pub mod reply;
pub mod signature;
pub mod stat;
pub mod storage;
pub mod sync_probe;
pub mod ticket;
// The one module allowed `unsafe`: the io_uring backend and its raw system calls.
#[allow(unsafe_code)]
pub mod uring;

pub use drive::{
    AppendRoom, Clock, DamagedEntry, Drive, DriveCore, DriveFuture, DriveOptions, DriveState,
    Durability, DurableFuture, Entry, EntryIter, EntryRef, LogEntry, LogShape, ManualClock,
    NewEntry, PayloadFuture, QueueDepths, ReadReply, ReadStats, RecoveryVisitor, Request, Stats,
    SummedBytes, SystemClock, TrimReply, Wait, WhenFull,
};
pub use engine::Engine;
pub use error::{
    AppendError, DriveClosed, DriveFailure, FormatError, IoOperation, OpenError, ReadError,
    TrimError, WaitError,
};
// The types of the format and of recovery that this crate's API names, so that an embedder
// needs no second dependency to name them.
pub use sealog_wal::format::{
    EmbedderHeader, RingPurpose, SyncChoice, SyncMeasurement, EMBEDDER_HEADER_SIZE,
    ENTRY_HEADER_SIZE,
};
pub use sealog_wal::{
    Check, ControlBlock, Corruption, DamagedRange, Evidence, FullScan, Geometry, Kind, Outcome,
    Position, RecoveryMode, RecoveryReport, ReplayError, RingId, Scan, ScanPolicy, TornTail,
    UnreadableRun,
};

/// The ring's recorded choice of how appends are made durable, with its on-disk encoding: the
/// first of three sync types that are three different things (the wal format's type,
/// re-exported). Format records it in the control block (its byte, 1 for fdatasync and 2 for
/// dsync, inside the control block's [`SyncChoice`]), measured on the device ([`sync_probe`])
/// or named by the operator, and every later control block carries it. A drive opened without
/// an override takes its [`Durability`] from it, one to one; a drive's durability, the no-sync
/// benchmark mode among them, is never written back into it. The flag of one write is
/// [`io::WriteSync`], which a drive's durability decides per write.
pub use sealog_wal::format::SyncMethod;

pub use signature::Signature;
pub use storage::{format, FormatOptions, FormatProgress};
pub use ticket::{AppendOutcome, Ticket};

// The README's embedding example is compiled and run as a doctest, so it cannot drift from the
// API it shows.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeExample;
