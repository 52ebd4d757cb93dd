//! The one recovery protocol: what a writer does after replay and before its first append, as
//! a pure plan computed from the [`RecoveryReport`]. The engine carries it out on its device
//! and the reference writer (`sealog-wal-kit`'s model) on the simulated disk, step by step, in
//! order, so both run the same protocol; neither computes any of it itself.
//!
//! The steps (each a write of whole blocks at a ring offset, or a flush of the file holding a
//! ring offset; a writer waits for each before the next). Flushes are listed per ring offset;
//! a writer whose files hold several of them (a block device holds the whole ring) skips a
//! flush of a file it has flushed since it last wrote to it, so an open flushes each file or
//! device once per step, not once per segment:
//!
//! 1. flush every segment replay looked at (from the head's to the one its scan ended in,
//!    [`RecoveryReport::scan_end`]: the whole ring after a full scan, a few segments after a
//!    hinted one): entries that survived in the drive's volatile cache (written, never
//!    acknowledged) become durable before anyone reads them. Nothing outside that stretch is
//!    part of the log or was evidence for it;
//! 2. write the new control block (the new incarnation, the cut
//!    ([`RecoveryReport::cut`]), the trim point and head, and the new incarnation's first tail
//!    hint) to the copy not current, then flush it: from then on nothing of an older
//!    incarnation at or after the cut counts, and the new incarnation
//!    is above every one replay found or applied ([`RecoveryReport::incarnation_max`]), so a
//!    crash in the steps after it recovers the same log. The hint lies
//!    [`crate::layout::HINT_AHEAD_WINDOWS`] windows past the cut: it covers the tail marker
//!    and every batch until the writer writes a further one, and a replay that trusts it
//!    (after a crash in the steps below) probes no further than the one that made the plan;
//! 3. zero each range of the dirty region after the cut ([`Invalidate::ranges`]), then flush
//!    them: nothing written there before the cut can line up behind new entries (rule 6);
//! 4. when live acknowledged entries are not covered by any recovered watermark, a tail
//!    marker (a batch with no records, carrying the watermark `next_lsn - 1`, written by the
//!    new incarnation at the cut) and a flush: from then on damage to any of them is
//!    corruption, never a torn tail (I-16). When the ring has no room for it the plan says so
//!    and goes on without it; it never fails an open. After quarantined damage
//!    ([`RecoveryReport::quarantined_breaks`]) the marker comes first, right after step 1, and
//!    step 3 zeroes from its end: the damage may be known to be acknowledged only by a record
//!    past the cut, which step 2 makes stale, and the marker's watermark must be durable
//!    before it is (else a crash in between would leave the damage looking like a torn tail).
//!    A ring with no room for the marker then leaves that damage uncovered, the residual risk
//!    of docs/recovery.md, until the writer's first batch.
//!
//! The writer then starts from [`RecoveryPlan::control`], [`RecoveryPlan::incarnation`],
//! [`RecoveryPlan::cursor`] and [`RecoveryPlan::lsn_durable`]. Its index of live batches is
//! built from replay's `visit` callback, as before; the plan needs only the report.
//!
//! [`Invalidate::ranges`]: crate::replay::Invalidate::ranges

use crate::batch::{BatchBuilder, BatchStart};
use crate::error::RingFull;
use crate::format::{ControlBlock, Geometry, Position, RingPurpose, TailHint};
use crate::layout::WriteCursor;
use crate::replay::{Invalidate, RecoveryReport};

// Why no writer may open the ring: defined with the crate's other errors (a writable open's
// `ReplayError` carries it), so that the errors need nothing of this module.
pub use crate::error::PlanError;

/// One step of the plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Flush the file (or device) that holds this ring offset, and wait for it.
    Flush {
        /// A ring offset inside the file to flush.
        ring_offset: u64,
    },
    /// Write these whole blocks at this ring offset.
    Write {
        /// Where the write starts (block-aligned).
        ring_offset: u64,
        /// The blocks to write.
        bytes: Vec<u8>,
        /// What they are.
        what: Written,
    },
    /// Write zeros over this range (whole blocks, inside one segment).
    Zero {
        /// Where the range starts.
        ring_offset: u64,
        /// Its length.
        len_bytes: u64,
    },
}

/// What a [`Step::Write`] writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Written {
    /// The new control block (one block).
    ControlBlock,
    /// The tail marker (one block, after the segment header block when it starts a segment).
    TailMarker,
}

/// Whether the plan writes a tail marker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TailMarker {
    /// Nothing live, or every live entry is covered by a recovered watermark.
    NotNeeded,
    /// Written by the plan's steps.
    Planned {
        /// Where the marker batch starts.
        position: Position,
        /// The watermark it carries: every recovered entry.
        watermark: u64,
    },
    /// Needed, but the ring has no room for it: the newest entries stay uncovered (the
    /// residual risk of docs/recovery.md) until the writer has room and writes one.
    NoRoom(RingFull),
}

/// What a writer does after replay, and where it starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecoveryPlan {
    /// The steps, to carry out in order.
    pub steps: Vec<Step>,
    /// The control block the steps make durable: the writer's from then on.
    pub control: ControlBlock,
    /// The incarnation the writer writes with (the control block's).
    pub incarnation: u32,
    /// Where the writer's next batch goes (after the tail marker, when one is planned).
    pub cursor: WriteCursor,
    /// The highest LSN durable and acknowledged once the steps are done: every recovered entry.
    pub lsn_durable: u64,
    /// Whether a tail marker is written.
    pub tail_marker: TailMarker,
}

/// The first tail hint of the incarnation that opens at `cursor` (the cut): a margin past it
/// ([`WriteCursor::hint_limit`]), which covers the plan's tail marker and the writer's first
/// batches. It need not cover the dirty region the plan zeroes: what an older incarnation
/// left past the cut is stale by the cut's incarnation whether it is zeroed yet or not, and a
/// replay after a crash before the zeroing is done probes as far as the one that made this
/// plan (which always probes at least this margin past the cut), so it finds nothing new.
fn first_hint(report: &RecoveryReport, cursor: &WriteCursor, incarnation: u32) -> TailHint {
    TailHint {
        limit: cursor.hint_limit(&report.control.geometry),
        incarnation,
    }
}

/// A ring offset in each segment replay looked at, from the head's through the one holding
/// `scan_end` (the head's segment is never listed twice, even when a full scan ends at it on
/// the next lap), in log order.
fn scanned_segments(geometry: &Geometry, head: Position, scan_end: Position) -> Vec<u64> {
    let first = geometry.linear_segment(head);
    let mut last = geometry.linear_segment(scan_end);
    if scan_end.offset <= geometry.segment_data_offset() && last > first {
        // The scan ended at that segment's start: nothing of it was looked at.
        last -= 1;
    }
    let count = (last.saturating_sub(first) + 1).min(u64::from(geometry.segment_count));
    (0..count)
        .map(|index| {
            let segment = (u64::from(head.segment) + index) % u64::from(geometry.segment_count);
            // Below the segment count, a u32.
            geometry.segment_ring_offset(segment as u32)
        })
        .collect()
}

/// The plan for a writable open of the ring `report` describes; its control block keeps the
/// ring's purpose.
pub fn plan(report: &RecoveryReport) -> Result<RecoveryPlan, PlanError> {
    plan_with_purpose(report, report.control.purpose)
}

/// [`plan`], with the new incarnation's control block recording `purpose`: a writer that
/// knows what the ring holds marks it in the block the open writes anyway, so marking a ring
/// costs no control write of its own.
pub fn plan_with_purpose(
    report: &RecoveryReport,
    purpose: RingPurpose,
) -> Result<RecoveryPlan, PlanError> {
    let old = report.control;
    let incarnation =
        report
            .incarnation_max
            .checked_add(1)
            .ok_or(PlanError::IncarnationExhausted {
                incarnation_max: report.incarnation_max,
            })?;
    let sequence = old.next_sequence()?;
    // Replay's head LSN is at least 1 and the log only grows from it: `next_lsn >= 1`.
    debug_assert!(report.next_lsn >= 1);
    let lsn_durable = report.next_lsn - 1;
    let mut cursor = WriteCursor {
        position: report.next_position,
        next_lsn: report.next_lsn,
    };
    let control = new_control(report, &cursor, sequence, incarnation, purpose);
    let (tail_marker, marker_steps) = plan_marker(report, &control, &mut cursor, lsn_durable);
    let steps = ordered_steps(report, &control, &cursor, marker_steps);
    Ok(RecoveryPlan {
        steps,
        control,
        incarnation,
        cursor,
        lsn_durable,
        tail_marker,
    })
}

/// Whether the log keeps anything live: entries, or damaged LSNs quarantine stepped over
/// (part of the log too: the head stays where a replay finds them again, until a trim
/// passes them).
fn keeps_live(report: &RecoveryReport) -> bool {
    report.entries > 0 || report.damaged_lsns > 0
}

/// The control block the new incarnation writes: its sequence and incarnation, the cut and
/// trim point, the head (kept while anything is live, else moved to the cut), the first tail
/// hint, and the ring's purpose.
fn new_control(
    report: &RecoveryReport,
    cursor: &WriteCursor,
    sequence: u64,
    incarnation: u32,
    purpose: RingPurpose,
) -> ControlBlock {
    let old = report.control;
    let lsn_durable = report.next_lsn - 1;
    // Nothing live: the head moves to the cut, where this incarnation writes next.
    let (head, head_lsn, head_incarnation) = if keeps_live(report) {
        // The last cut's floor holds for everything at or after it. This plan moves the cut to
        // the log's end, so a head at or after the old cut takes that floor with it: a batch
        // the old floor made stale can lie before the new cut (damage that quarantine stepped
        // over is such a place), and must stay stale. A writer's head after its cut is of its
        // incarnation or a later one, so on rings writers made this changes nothing.
        let floor = if old.cut.lap > 0 && old.head >= old.cut {
            old.head_incarnation.max(old.cut_incarnation)
        } else {
            old.head_incarnation
        };
        (old.head, old.head_lsn, floor)
    } else {
        (report.next_position, report.next_lsn, incarnation)
    };
    ControlBlock {
        sequence,
        incarnation,
        trim_lsn: report.trim_lsn.min(lsn_durable),
        head,
        head_lsn,
        head_incarnation,
        cut: report.cut,
        cut_incarnation: incarnation,
        tail_hint: first_hint(report, cursor, incarnation),
        purpose,
        ..old
    }
}

/// Whether the plan writes a tail marker, and if so its steps (the write and its flush), with
/// `cursor` moved past it: needed when live entries are not covered by any recovered
/// watermark, and written where the ring has room.
fn plan_marker(
    report: &RecoveryReport,
    control: &ControlBlock,
    cursor: &mut WriteCursor,
    lsn_durable: u64,
) -> (TailMarker, Vec<Step>) {
    let uncovered = keeps_live(report)
        && report
            .last_lsn
            .is_some_and(|last| last > report.watermark_max);
    if !uncovered {
        return (TailMarker::NotNeeded, Vec::new());
    }
    let geometry = control.geometry;
    let incarnation = control.incarnation;
    let slot = match cursor.marker_slot(&geometry, control.head, incarnation) {
        Err(ring_full) => return (TailMarker::NoRoom(ring_full), Vec::new()),
        Ok(slot) => slot,
    };
    let block = geometry.block_size_bytes as usize;
    let mut bytes = vec![0u8; block + slot.capacity_bytes as usize];
    let (header_block, batch_buf) = bytes.split_at_mut(block);
    if let Some(header) = slot.segment_header {
        header.encode(control.ring_id, header_block);
    }
    let marker = BatchBuilder::new(
        batch_buf,
        BatchStart {
            ring_id: control.ring_id,
            position: slot.position,
            first_lsn: report.next_lsn,
            watermark: lsn_durable,
            incarnation,
            block_size_bytes: geometry.block_size_bytes,
            capacity_bytes: slot.capacity_bytes,
            payload_size_max_bytes: geometry.payload_size_max_bytes(),
        },
    )
    .finish();
    debug_assert_eq!((marker.records, marker.bytes), (0, slot.capacity_bytes));
    if slot.segment_header.is_none() {
        bytes.drain(..block);
    }
    let ring_offset = slot.write_ring_offset(&geometry);
    let steps = vec![
        Step::Write {
            ring_offset,
            bytes,
            what: Written::TailMarker,
        },
        Step::Flush { ring_offset },
    ];
    cursor.advance(&geometry, marker.bytes, 0);
    let planned = TailMarker::Planned {
        position: slot.position,
        watermark: lsn_durable,
    };
    (planned, steps)
}

/// The plan's steps in order: flush what replay looked at, (the tail marker, after
/// quarantined damage), the control block, the zeroing of the dirty region, (the tail
/// marker, otherwise). `cursor` is the writer's, past the marker when one is planned.
fn ordered_steps(
    report: &RecoveryReport,
    control: &ControlBlock,
    cursor: &WriteCursor,
    mut marker_steps: Vec<Step>,
) -> Vec<Step> {
    let old = report.control;
    let geometry = old.geometry;
    // Quarantined damage is known to be acknowledged only by a watermark found after it, and
    // that record may lie past the cut, where the new control block makes every record of an
    // older incarnation stale (and the zeroing removes it): the marker, whose watermark covers
    // every LSN the log keeps, is durable first, so no crash in between leaves damage that a
    // later open would take for a torn tail. Written before the control block, it is a valid
    // batch of a newer incarnation at the log's end, which replay accepts as it accepts any
    // (the incarnation floor only rises), and every record of an older one after it is stale.
    let marker_first = report.quarantined_breaks > 0 && !marker_steps.is_empty();
    let mut steps = Vec::new();
    for ring_offset in scanned_segments(&geometry, old.head, report.scan_end) {
        steps.push(Step::Flush { ring_offset });
    }
    if marker_first {
        steps.append(&mut marker_steps);
    }
    let mut control_block = vec![0u8; geometry.block_size_bytes as usize];
    control.encode(&mut control_block);
    let control_offset = geometry.control_offset(control.copy());
    steps.push(Step::Write {
        ring_offset: control_offset,
        bytes: control_block,
        what: Written::ControlBlock,
    });
    steps.push(Step::Flush {
        ring_offset: control_offset,
    });
    if let Some(invalidate) = report.invalidate {
        // After a marker written first, the region starts where the marker ends.
        let region = Invalidate {
            start: if marker_first {
                cursor.position.max(invalidate.start)
            } else {
                invalidate.start
            },
            ..invalidate
        };
        zero_steps(&region, &geometry, &mut steps);
    }
    steps.append(&mut marker_steps);
    steps
}

/// Appends the steps that zero `region` durably: a write of zeros over each of its ranges,
/// then a flush of each.
fn zero_steps(region: &Invalidate, geometry: &Geometry, steps: &mut Vec<Step>) {
    let ranges = region.ranges(geometry);
    for &(ring_offset, len_bytes) in &ranges {
        steps.push(Step::Zero {
            ring_offset,
            len_bytes,
        });
    }
    for &(ring_offset, _) in &ranges {
        steps.push(Step::Flush { ring_offset });
    }
}
