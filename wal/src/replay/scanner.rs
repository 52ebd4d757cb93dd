//! The scanner replay walks a ring with (the control block it reads under, its reader, the
//! recovery mode, the decision-table rows taken, the tail hint it may trust), the shapes its
//! steps hand each other (a batch that checked out, a failure at a boundary, where the walk
//! broke), and the arithmetic of places they share: batch and segment ends, how far an
//! in-flight window reaches, where the walk and the probe must stop, the incarnation floor.

use crate::decision::{decide, Facts, Row, ROWS};
use crate::format::{
    ControlBlock, EntryHeader, Geometry, Position, RingId, BATCH_SIZE_LIMIT_BYTES,
};
use crate::replay::check::Check;
use crate::replay::reader::Reader;
use crate::replay::report::{FullScan, Outcome, RecoveryMode, RecoveryReport, ReplayOptions, Scan};
use crate::source::RingSource;
use crate::validate::BatchFailure;

/// A check that failed at a batch boundary: where, the LSN involved, and which check (the
/// validator's failure, or one of replay's own: segment header, read error).
pub(super) type Failure = BatchFailure;

impl BatchFailure {
    /// Whether the failure shows that something this log wrote is here (rather than nothing
    /// of this lap and incarnation ever was).
    pub(super) fn is_damage(&self) -> bool {
        self.inside_batch || !self.check.is_never_written()
    }
}

/// A batch that checked out.
#[derive(Clone, Copy, Debug)]
pub(super) struct GoodBatch {
    pub(super) first_lsn: u64,
    pub(super) bytes: u32,
    pub(super) records: u32,
    pub(super) incarnation: u32,
    pub(super) watermark: u64,
}

/// Where the walk broke, as the walk knew it: the cut, the LSN expected there, the
/// incarnation floor it kept, and the check that failed.
#[derive(Clone, Copy, Debug)]
pub(super) struct BreakAt {
    pub(super) cut: Position,
    pub(super) expected_lsn: u64,
    pub(super) lineage_incarnation: u32,
    /// The failure the break names ([`Scanner::named_failure`]).
    pub(super) failure: Failure,
    /// The failure found at the cut itself (the same, unless the break names the next
    /// segment's header instead).
    pub(super) cut_failure: Failure,
}

/// Replay's walk over one ring: the control block it reads under and its geometry, the
/// reader, the recovery mode, the decision-table rows taken so far, and the tail hint.
pub(super) struct Scanner<'s, S: RingSource + ?Sized> {
    pub(super) reader: Reader<'s, S>,
    pub(super) control: ControlBlock,
    pub(super) geometry: Geometry,
    pub(super) ring_id: RingId,
    pub(super) mode: RecoveryMode,
    pub(super) row_hits: [u64; ROWS.len()],
    /// The trusted tail hint's limit, or why there is none
    /// ([`trusted_hint`](crate::replay::control::trusted_hint)).
    pub(super) hint: Result<Position, FullScan>,
}

impl<'s, S: RingSource + ?Sized> Scanner<'s, S> {
    /// A scanner of `source` under `control`, as `options` ask, with no tail hint trusted yet.
    pub(super) fn new(source: &'s mut S, control: ControlBlock, options: &ReplayOptions) -> Self {
        let geometry = control.geometry;
        // Bounded whatever the caller asks: at least one batch, at most the format's batch limit.
        let block = u64::from(geometry.block_size_bytes);
        let chunk = u64::from(options.read_chunk_bytes).clamp(
            u64::from(geometry.batch_size_max_bytes),
            u64::from(BATCH_SIZE_LIMIT_BYTES),
        );
        let chunk = chunk.div_ceil(block) * block;
        Scanner {
            reader: Reader::new(source, chunk as usize),
            control,
            geometry,
            ring_id: control.ring_id,
            mode: options.mode,
            row_hits: [0; ROWS.len()],
            hint: Err(FullScan::Requested),
        }
    }

    /// Reads ahead stop a block past `until` (a batch boundary), in its segment: the block
    /// after it is read with it, for a header that straddles the two.
    pub(super) fn read_ahead_until(&mut self, until: Position) {
        let geometry = self.geometry;
        let segment_end = self.segment_end(until);
        let stop =
            (geometry.ring_offset(until) + u64::from(geometry.block_size_bytes)).min(segment_end);
        self.reader.ahead_stop = Some((segment_end, stop));
    }

    /// Looks the facts up in the decision table and counts the row taken.
    pub(super) fn decide(&mut self, facts: Facts) -> &'static Row {
        let row = decide(&facts);
        let index = crate::decision::row_index(row.label).expect("a row of the table");
        self.row_hits[index] += 1;
        row
    }

    /// The ring offset where `position`'s segment ends.
    pub(super) fn segment_end(&self, position: Position) -> u64 {
        self.geometry.segment_ring_offset(position.segment) + self.geometry.segment_size_bytes
    }

    /// The report of a walk that has found nothing yet, at the head.
    pub(super) fn empty_report(&self) -> RecoveryReport {
        RecoveryReport {
            control: self.control,
            trim_lsn: self.control.trim_lsn,
            first_lsn: None,
            last_lsn: None,
            next_lsn: self.control.head_lsn,
            next_position: self.control.head,
            cut: self.control.head,
            watermark_max: 0,
            // Every incarnation the control block names, the floors it sets included: a
            // crafted block can record a head or cut incarnation above its own, and a writer's
            // new incarnation must be above every floor this replay applied, or its cut would
            // let records this replay found stale count again after a crash (rule 5).
            incarnation_max: self
                .control
                .incarnation
                .max(self.control.head_incarnation)
                .max(self.control.cut_incarnation),
            batches: 0,
            entries: 0,
            payload_bytes: 0,
            segments_skipped: 0,
            outcome: Outcome::Clean,
            torn: None,
            corruption: None,
            dropped: None,
            quarantined: Vec::new(),
            quarantined_breaks: 0,
            damaged: Vec::new(),
            damaged_ranges: 0,
            damaged_lsns: 0,
            invalidate: None,
            stale_records: 0,
            unreadable_blocks: 0,
            unreadable_runs: Vec::new(),
            end_row: "",
            end_check: Check::NotWritten,
            row_hits: [0; ROWS.len()],
            // Both set where the walk breaks (every replay that returns a report ends there).
            scan: Scan::Full {
                reason: FullScan::Requested,
            },
            scan_end: self.control.head,
            bytes_read: 0,
        }
    }

    /// The batch boundary after a batch of `bytes` at `cursor`.
    pub(super) fn after_batch(&self, cursor: Position, bytes: u32) -> Position {
        let end = u64::from(cursor.offset) + u64::from(bytes);
        if end == self.geometry.segment_size_bytes {
            self.geometry.next_segment_start(cursor)
        } else {
            Position {
                offset: u32::try_from(end).expect("inside a segment"),
                ..cursor
            }
        }
    }

    /// The batch boundary at or after `at` (a block boundary the scan found): the next
    /// segment's first data block when `at` is its segment's end, the segment's first data
    /// block when it is inside the header block.
    pub(super) fn batch_boundary_at(&self, at: Position) -> Position {
        let geometry = self.geometry;
        if u64::from(at.offset) >= geometry.segment_size_bytes {
            geometry.next_segment_start(at)
        } else if at.offset < geometry.segment_data_offset() {
            Position {
                offset: geometry.segment_data_offset(),
                ..at
            }
        } else {
            at
        }
    }

    /// The block boundary at or after the end of a record (header plus payload), inside its
    /// segment.
    pub(super) fn record_end(&self, at: Position, header: &EntryHeader) -> Position {
        let geometry = self.geometry;
        let block = u64::from(geometry.block_size_bytes);
        let end = (u64::from(at.offset) + header.record_bytes()).div_ceil(block) * block;
        Position {
            offset: u32::try_from(end.min(geometry.segment_size_bytes)).expect("inside a segment"),
            ..at
        }
    }

    /// How far an in-flight window reaches from `from`: the window's bytes walked forward
    /// segment by segment, with the probe's allowance per segment change (a skipped segment
    /// tail and a segment header), never past `limit`. A record whose end lies within the
    /// window's allowance from `from` ([`Scanner::account`]) starts before this position.
    pub(super) fn window_reach(&self, from: Position, limit: Position) -> Position {
        let geometry = self.geometry;
        let mut end = from;
        let mut budget = geometry.window_bytes_max;
        let slack_per_segment =
            u64::from(geometry.batch_size_max_bytes) + u64::from(geometry.block_size_bytes);
        while budget > 0 && end < limit {
            let room = geometry.segment_size_bytes - u64::from(end.offset);
            if budget < room {
                let offset = u64::from(end.offset) + budget;
                let offset = offset.div_ceil(u64::from(geometry.block_size_bytes))
                    * u64::from(geometry.block_size_bytes);
                let offset = offset.min(geometry.segment_size_bytes);
                end = Position {
                    offset: u32::try_from(offset).expect("inside a segment"),
                    ..end
                };
                break;
            }
            // `budget >= room` here; the window (<= the ring's data bytes) plus one slack per
            // segment of one lap cannot pass u64::MAX, but saturate rather than trust that.
            budget = (budget - room).saturating_add(slack_per_segment);
            end = geometry.next_segment_start(end);
        }
        end.min(limit)
    }

    /// The oldest incarnation accepted at `at`: the lineage so far, and at or after the last
    /// recovery's cut, the incarnation that recovery began (so a crash in the middle of
    /// recovery, before the region after the cut was zeroed, finds the same log).
    pub(super) fn incarnation_floor(&self, at: Position, lineage_incarnation: u32) -> u32 {
        let cut = self.control.cut;
        if cut.lap > 0 && at >= cut {
            lineage_incarnation.max(self.control.cut_incarnation)
        } else {
            lineage_incarnation
        }
    }

    /// Whether a writer at `cursor` could have moved on to the next segment rather than write
    /// here: only when the rest of the segment is smaller than a batch at its largest (a
    /// writer skips a segment's rest only when the next record does not fit it, and every
    /// record fits a batch). With more room left, the next segment's header was not written
    /// by this log after the break, so its state says nothing of the log's end (a garbage
    /// header a salvaged log had left there, half a segment on, made the next clean log read
    /// as torn).
    pub(super) fn writer_may_have_left_the_segment(&self, cursor: Position) -> bool {
        let room = self.geometry.segment_size_bytes - u64::from(cursor.offset);
        room < u64::from(self.geometry.batch_size_max_bytes)
    }

    /// The head's segment on the next lap: the writer never enters it, so the walk stops there.
    pub(super) fn probe_end(&self) -> Position {
        let head = self.control.head;
        Position {
            lap: head.lap + 1,
            segment: head.segment,
            offset: 0,
        }
    }

    /// Where the probe after a break at `cut`, and the region a writer invalidates after it,
    /// stop: as far as the next open, after a writer carried out the recovery plan, will probe,
    /// so that it finds nothing this replay did not account for (rule 5, I-6). While entries
    /// before the cut stay live, the plan keeps the head, and that is the head's segment on the
    /// next lap ([`Scanner::probe_end`]). When none does, the plan moves the head to the cut
    /// ([`crate::recovery::plan`]) and the next open probes to the cut's segment on the next
    /// lap: further, over the part of the ring this head kept the writer out of. That part
    /// can still hold valid records of this lap (written under a newer control block since
    /// lost, or crafted) of an incarnation no cut makes stale, so it is probed (and
    /// invalidated) here too.
    pub(super) fn break_end(&self, cut: Position, live_before_cut: bool) -> Position {
        let head_end = self.probe_end();
        if live_before_cut {
            return head_end;
        }
        // The head's lap is at most u32::MAX - 2 (`validate_control`) and the walk goes at most
        // a lap and a segment past it, so only a crafted ring of tail markers walked to lap
        // u32::MAX gets here with no next lap: it probes nothing after its cut.
        let cut_end = Position {
            lap: cut.lap.saturating_add(1),
            segment: cut.segment,
            offset: 0,
        };
        cut_end.max(head_end)
    }
}
