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
//! - [`disk`]: a simulated disk in memory (live, durable, unflushed writes, crash fates);
//! - [`recovery`]: the one recovery protocol, a plan computed from replay's report;
//! - [`model`]: a reference writer over memory, for tests, the example and the fuzz target;
//! - [`fuzz`]: structure-aware fuzzing of replay (valid rings, mutated; test support only).

#![forbid(unsafe_code)]

pub mod batch;
pub mod decision;
pub mod disk;
pub mod error;
pub mod format;
pub mod fuzz;
pub mod layout;
pub mod model;
pub mod quarantine;
pub mod recovery;
pub mod replay;
pub mod source;
pub mod validate;

pub use batch::{BatchBuilder, BatchStart, EncodedBatch};
pub use disk::SimDisk;
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

/// Feeds arbitrary bytes to replay as a ring, in every recovery mode, hinted and full; used by
/// the `replay` fuzz target and its stable-toolchain twin in the tests. Replay must return
/// `Ok` or a typed error for any input; a panic is a bug.
pub fn fuzz_replay(bytes: &[u8]) {
    for mode in [
        RecoveryMode::Strict,
        RecoveryMode::TruncateAtCorruption,
        RecoveryMode::Quarantine,
    ] {
        for scan in [ScanPolicy::Hinted, ScanPolicy::Full] {
            let options = ReplayOptions {
                mode,
                read_chunk_bytes: 1 << 16,
                scan,
            };
            let mut source: &[u8] = bytes;
            let mut visited = 0u64;
            if let Ok(report) = replay(&mut source, &options, &mut |_| visited += 1) {
                assert_eq!(report.entries, visited);
                assert!(report.first_lsn <= report.last_lsn);
                assert!(report.bytes_read <= bytes.len() as u64 * 4 + (1 << 20));
            }
        }
    }
}
