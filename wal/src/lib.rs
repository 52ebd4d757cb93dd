//! sealog's on-disk format and replay, as pure code over bytes: no syscalls, no threads, no
//! unsafe. The engine (`sealog`) writes what [`batch`] encodes where [`layout`] places it, and
//! opens a ring by running [`replay`] over its device; the fault-injection crate runs the same
//! replay over simulated crash images.
//!
//! - [`format`]: the byte layout, drawn once, with its encoders and decoders;
//! - [`batch`]: packs records into block-aligned batches;
//! - [`layout`]: where the next batch goes, segment changes, laps, ring-full;
//! - [`decision`]: replay's decision table;
//! - [`replay`]: the scan, the torn-tail/corruption decision and the [`RecoveryReport`];
//! - [`quarantine`]: what quarantine mode reports of the damage it steps over;
//! - [`validate`]: the one record validator, which replay and the engine's reads share;
//! - [`source`]: the read-only source replay reads through;
//! - [`recovery`]: the one recovery protocol, a plan computed from replay's report.
//!
//! What tests need and embedders do not (a reference writer over memory, a simulated disk with
//! crash fates, the structure-aware fuzzer) is the `sealog-wal-kit` crate beside this one, so
//! that none of it is compiled into an embedder's build.

#![forbid(unsafe_code)]

pub mod batch;
pub mod decision;
pub mod error;
pub mod format;
pub mod layout;
pub mod quarantine;
pub mod recovery;
pub mod replay;
pub mod source;
pub mod validate;

pub use batch::{BatchBuilder, BatchStart, EncodedBatch};
pub use error::{EncodeError, GeometryError, ReplayError, RingFull, SequenceExhausted};
pub use format::{
    ControlBlock, EmbedderHeader, EntryHeader, Geometry, Kind, Position, RingId, RingPurpose,
    SegmentHeader, TailHint,
};
pub use layout::{BatchSlot, WriteCursor};
pub use quarantine::{Damaged, DamagedHeader, DamagedRange, DAMAGED_REPORTED};
pub use recovery::{plan, plan_with_purpose, PlanError, RecoveryPlan, Step, TailMarker};
pub use replay::{
    entries, read_control, replay, replay_visiting, scan, trusted_hint, Check, Corruption, Entry,
    Evidence, FullScan, Outcome, RecoveredEntries, RecoveredEntry, RecoveryMode, RecoveryReport,
    ReplayOptions, Scan, ScanPolicy, TornTail, UnreadableRun, Visit,
};
pub use source::RingSource;
pub use validate::{
    check_batch, check_batch_start, check_record, walk_batch, BatchExpectation, BatchFailure,
    CheckedBatch, CheckedRecord, IncarnationRule, RecordExpectation, WalkEnd, WalkedRecord,
};
