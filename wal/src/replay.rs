//! Replay: reads a ring through a [`RingSource`] and decides what the log is. It owns the
//! recovery rules and invariants I-1..I-15 of docs/recovery.md as far as
//! a single read-only pass can keep them; the writes that recovery implies (making a cut durable,
//! invalidating the dirty region, bumping the incarnation) are the engine's, driven by the
//! [`RecoveryReport`] this returns.
//!
//! The pass:
//! 1. Read both control copies and take the newest valid one: identity, geometry, trim point
//!    and the head (the batch boundary where the log starts).
//! 2. Walk batches from the head. At each batch boundary, gather the facts and look them up in
//!    the decision table ([`crate::decision`]): accept the batch, move on to the next segment,
//!    or stop.
//! 3. At the first boundary that does not continue the log (the "break" at position `E`, where
//!    LSN `e` was expected), probe every block from `E` to the head's segment on the next lap (or,
//!    when nothing before `E` is live, to `E`'s segment on the next lap: the head moves to `E`) for
//!    valid records of this log. Their watermarks and positions tell a torn tail (only
//!    never-acknowledged data lost, within the in-flight window) from corruption (a later
//!    watermark covers `e`, or valid data lies beyond the window). Blocks the probe cannot read
//!    are corruption where no crash explains them (a run at the break longer than the window,
//!    or any run with the log going on after it) and are otherwise only reported.
//! 4. In quarantine mode ([`RecoveryMode::Quarantine`]), a break the table would fail on is
//!    stepped over instead: the damaged batch is walked record by record (intact records are
//!    live entries, a record whose header survived is damage with that header), the LSNs from
//!    the first header lost to the first batch after the damage whose segment header and first
//!    header check out (found by the same probe, in position order) are one damaged range,
//!    and the walk goes on there. With no such batch, the log ends after everything found and
//!    the damage runs to the highest LSN shown acknowledged. Nothing is cut there: the writer's
//!    next batch goes after it, so every later open finds the same damage.
//!
//! Memory is bounded by the read chunk and the ring's batch limit (itself capped by
//! [`BATCH_SIZE_LIMIT_BYTES`](crate::format::BATCH_SIZE_LIMIT_BYTES)), never by what a length
//! field on disk claims: every length is checked against the geometry before it is used.
//!
//! Cost: the walk reads the live entries. The probe after the break reads, in a full scan, every
//! block up to the head's segment on the next lap: the whole ring. With a tail hint it can
//! trust (the control block's [`TailHint`], see [`trusted_hint`]) it reads only to the later of
//! the hint's limit and one in-flight window past the break ([`Scan::Hinted`]), so an open
//! costs the live data plus a bounded margin, not the ring. That is exact, not a guess: the
//! writer never ends a batch past a durable hint, and every recovery covers what it found of older
//! incarnations with its first hint (see below), so every valid record a full scan could find
//! after the break lies before the hint. The walk itself never
//! looks at the hint: it follows valid batches wherever they go, and a log that ends past the
//! hint proves the hint wrong (the newest control block was lost), so the probe then reads
//! the whole ring after all ([`FullScan::HintCrossed`]). A hint is also ignored when another
//! incarnation set it, when it names no place at or after the head, or when the other control
//! copy, of the same incarnation, records a further one ([`FullScan`]). The probe after a
//! hinted break reaches a window past the break whatever the hint says, so a batch whose
//! watermark proves a hole at the break was acknowledged is found: the first batch built
//! after the hole's acknowledgement lies within one window of it.
//!
//! Why no older incarnation's record lies past a trusted hint: a writable open writes its
//! hint in the same control block as its new incarnation, at the later of a margin past the
//! cut and the end of the region after the cut it is about to zero. So once that block is
//! durable, whatever an older incarnation left past the cut that this open found (it probed
//! at least to that incarnation's own hint) lies before the new hint, zeroed or not yet; and
//! nothing of this log was written past the older hint.

use std::io;
use std::ops::Range;

use crate::decision::{decide, Decision, Facts, ROWS};
use crate::error::ReplayError;
use crate::format::{
    ControlBlock, ControlDefect, EmbedderHeader, EntryHeader, Geometry, Kind, Position, RingId,
    SegmentDefect, SegmentHeader, TailHint, BATCH_SIZE_LIMIT_BYTES, BLOCK_SIZE_MAX_BYTES,
    BLOCK_SIZE_MIN_BYTES, CONTROL_COPIES, CONTROL_SEQUENCE_LIMIT, ENTRY_HEADER_SIZE, ENTRY_MAGIC,
    FORMAT_VERSION,
};
use crate::layout::WriteCursor;
use crate::quarantine::{self, Damaged, DamagedHeader, DamagedRange};
use crate::source::RingSource;
use crate::validate::{
    self, BatchExpectation, BatchFailure, CheckedBatch, IncarnationRule, WalkedRecord,
};

/// What replay does when it finds damaged acknowledged data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum RecoveryMode {
    /// Fail with [`ReplayError::Corruption`] naming the damaged LSN and where it is. The default.
    #[default]
    Strict,
    /// Opt-in salvage: cut the log at the damage and report exactly what was dropped.
    TruncateAtCorruption,
    /// Opt-in quarantine: neither fail nor cut. Record the damage (every intact record of a
    /// damaged batch is a live entry, a record whose header survived is reported with it, the
    /// LSNs lost with their headers as a range: see [`crate::quarantine`]) and go on with the
    /// log at the next valid batch after it. Nothing in or around the damage is zeroed or
    /// rewritten, so every later open finds it again, until a trim passes it. Torn tails are
    /// cut exactly as in strict mode.
    Quarantine,
}

/// Whether replay may bound its probe after the log's end with the control block's tail hint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ScanPolicy {
    /// Use the tail hint when it can be trusted (the default): the probe reads to the later of
    /// the hint and one in-flight window past the break, and the report says so
    /// ([`Scan::Hinted`]); otherwise scan fully and say why ([`Scan::Full`]).
    #[default]
    Hinted,
    /// Ignore the hint and probe to the head's segment on the next lap (the whole ring): for
    /// tests that compare both scans, and checks that want every block of the ring looked at.
    Full,
}

/// How replay runs.
#[derive(Clone, Copy, Debug)]
pub struct ReplayOptions {
    /// Strict (the default) or truncating.
    pub mode: RecoveryMode,
    /// Bytes read at a time while scanning (rounded up to the ring's batch limit).
    pub read_chunk_bytes: u32,
    /// Hinted (the default) or full.
    pub scan: ScanPolicy,
}

impl Default for ReplayOptions {
    fn default() -> ReplayOptions {
        ReplayOptions {
            mode: RecoveryMode::Strict,
            read_chunk_bytes: 1 << 20,
            scan: ScanPolicy::Hinted,
        }
    }
}

/// Which scan replay made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scan {
    /// The tail hint was trusted: the probe after the break stopped at `probe_end`, the later
    /// of the hint's `limit` (normalized) and one in-flight window past the break (never past
    /// where a full scan stops).
    Hinted {
        /// The hint's limit, as a batch boundary.
        limit: Position,
        /// Where the probe stopped.
        probe_end: Position,
    },
    /// The probe read to the head's segment on the next lap (the whole ring), for `reason`.
    Full {
        /// Why the hint was not used.
        reason: FullScan,
    },
}

impl Scan {
    /// `hinted` or `full`.
    pub fn name(&self) -> &'static str {
        match self {
            Scan::Hinted { .. } => "hinted",
            Scan::Full { .. } => "full",
        }
    }
}

impl std::fmt::Display for Scan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Scan::Hinted { limit, probe_end } => write!(
                f,
                "hinted scan: the tail hint ({limit}) was trusted; the probe stopped at \
                 {probe_end}"
            ),
            Scan::Full { reason } => write!(f, "full scan: {reason}"),
        }
    }
}

/// Why replay scanned the whole ring rather than trust the tail hint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FullScan {
    /// The caller asked for a full scan ([`ScanPolicy::Full`]).
    Requested,
    /// The hint was set by another incarnation than the control block's. A writable open
    /// writes its first hint in the same block as its incarnation, so only a crafted block,
    /// or a writer that broke that rule, leaves one.
    HintIncarnation {
        /// The incarnation that set the hint.
        hint_incarnation: u32,
        /// The control block's incarnation.
        incarnation: u32,
    },
    /// The hint's limit names no place of this ring at or after the head.
    HintInvalid {
        /// The limit recorded.
        limit: Position,
    },
    /// The other control copy, of the same incarnation, records a further limit than the
    /// current one: within an incarnation a hint never moves back, so one of the copies is not
    /// what the writer wrote (a control write lost or misdirected, or a crafted block).
    HintsDisagree {
        /// The current copy's limit.
        limit: Position,
        /// The older copy's limit.
        other_limit: Position,
    },
    /// The log runs past the hint: the writer never ends a batch past a durable hint, so the
    /// hint is not the newest one written (its control block was lost or damaged), and
    /// nothing bounds where the log's records lie.
    HintCrossed {
        /// The hint's limit.
        limit: Position,
        /// Where the log ends.
        log_end: Position,
    },
}

impl std::fmt::Display for FullScan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FullScan::Requested => f.write_str("requested"),
            FullScan::HintIncarnation {
                hint_incarnation,
                incarnation,
            } => write!(
                f,
                "the tail hint is of incarnation {hint_incarnation}, the control block of \
                 {incarnation}"
            ),
            FullScan::HintInvalid { limit } => {
                write!(
                    f,
                    "the tail hint ({limit}) is not a place at or after the head"
                )
            }
            FullScan::HintsDisagree { limit, other_limit } => write!(
                f,
                "the control copies disagree: the older records a further tail hint \
                 ({other_limit}) than the current ({limit})"
            ),
            FullScan::HintCrossed { limit, log_end } => write!(
                f,
                "the log runs past the tail hint: it ends at {log_end}, the hint is {limit}"
            ),
        }
    }
}

/// A check a record, batch or segment header failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Check {
    /// The source returned an error reading this block.
    ReadError,
    /// The header bytes are all zero: never written.
    NotWritten,
    /// No entry magic (for the first block of a batch: never written on this lap).
    Magic,
    /// Another format version.
    Version,
    /// The header names another ring.
    RingId,
    /// The header CRC does not match.
    HeaderCrc,
    /// Unknown kind or non-zero flags.
    Kind,
    /// The header records another position than where it was found: a misdirected write.
    Position,
    /// The header was written on an earlier lap at this same place: stale.
    StaleLap,
    /// The batch's length, the record's index in it, or a field every record of a batch shares
    /// does not agree.
    BatchLayout,
    /// The LSN is not the next one expected.
    LsnGap,
    /// The record belongs to an older incarnation than records before it: stale.
    StaleIncarnation,
    /// The batch was written by another incarnation than the one its reader expected (the
    /// ring changed since the reader indexed it).
    Incarnation,
    /// The watermark is not below the batch's first LSN.
    Watermark,
    /// The payload length runs past the batch or the ring's payload limit.
    PayloadLength,
    /// The payload CRC does not match.
    PayloadCrc,
    /// The bytes after the last record are not a padding record or zeros.
    Padding,
    /// The segment header block is all zeros: the segment was never started.
    SegmentNotStarted,
    /// The segment header is damaged (magic, version or CRC).
    SegmentHeader,
    /// The segment header is from an earlier lap.
    SegmentStaleLap,
    /// The segment header's index, lap, first LSN or incarnation do not continue the log.
    SegmentMismatch,
}

impl Check {
    /// The check's name in reports and JSON (snake case).
    pub fn name(self) -> &'static str {
        match self {
            Check::ReadError => "read_error",
            Check::NotWritten => "not_written",
            Check::Magic => "magic",
            Check::Version => "version",
            Check::RingId => "ring_id",
            Check::HeaderCrc => "header_crc",
            Check::Kind => "kind",
            Check::Position => "position",
            Check::StaleLap => "stale_lap",
            Check::BatchLayout => "batch_layout",
            Check::LsnGap => "lsn_gap",
            Check::StaleIncarnation => "stale_incarnation",
            Check::Incarnation => "incarnation",
            Check::Watermark => "watermark",
            Check::PayloadLength => "payload_length",
            Check::PayloadCrc => "payload_crc",
            Check::Padding => "padding",
            Check::SegmentNotStarted => "segment_not_started",
            Check::SegmentHeader => "segment_header",
            Check::SegmentStaleLap => "segment_stale_lap",
            Check::SegmentMismatch => "segment_mismatch",
        }
    }

    /// Whether failing this check at a batch's first block means "nothing of this lap and
    /// incarnation was ever written here" (zeros, another lap's bytes, an older incarnation's
    /// leftovers) rather than damage to something written.
    fn is_never_written(self) -> bool {
        matches!(
            self,
            Check::NotWritten
                | Check::Magic
                | Check::StaleLap
                | Check::StaleIncarnation
                | Check::SegmentNotStarted
                | Check::SegmentStaleLap
        )
    }
}

impl std::fmt::Display for Check {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Why replay knows damaged data was acknowledged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Evidence {
    /// A valid later record's watermark covers the damaged LSN.
    WatermarkCovers {
        /// The watermark found.
        watermark: u64,
        /// Where the record carrying it lies.
        at: Position,
        /// That record's LSN.
        lsn: u64,
    },
    /// A valid later record lies outside the in-flight window from the damage.
    BeyondWindow {
        /// Where it lies.
        at: Position,
        /// Its LSN.
        lsn: u64,
        /// Bytes from the damage to its end.
        distance_bytes: u64,
    },
    /// The durable trim point is at or past the damaged LSN (only acknowledged entries are
    /// ever trimmed).
    TrimPoint {
        /// The control block's trim LSN.
        trim_lsn: u64,
    },
    /// Blocks the log needs cannot be read (EIO), where no crash could explain it: the run of
    /// unreadable blocks starting at the break is longer than the in-flight window, or a valid
    /// record of this log lies after the run. (A crash never makes a block unreadable; only a
    /// short run at the very end of the log is treated like a torn block.)
    Unreadable {
        /// The run's first unreadable block.
        at: Position,
        /// Batch bytes in the run (segment header blocks in it not counted: the window bounds
        /// batch bytes).
        run_bytes: u64,
        /// The first LSN at risk: the first a cut here would drop.
        first_lsn: u64,
        /// The last LSN at risk, when a readable record after the run names one.
        last_lsn: Option<u64>,
        /// Where the first valid record of this log after the run lies, if one does.
        log_after: Option<Position>,
    },
}

impl std::fmt::Display for Evidence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Evidence::WatermarkCovers { watermark, at, lsn } => {
                write!(f, "LSN {lsn} at {at} records watermark {watermark}")
            }
            Evidence::BeyondWindow {
                at,
                lsn,
                distance_bytes,
            } => write!(
                f,
                "LSN {lsn} at {at} lies {distance_bytes} bytes on, beyond the in-flight window"
            ),
            Evidence::TrimPoint { trim_lsn } => write!(f, "the durable trim point is {trim_lsn}"),
            Evidence::Unreadable {
                at,
                run_bytes,
                first_lsn,
                last_lsn,
                log_after,
            } => {
                write!(
                    f,
                    "{run_bytes} bytes from {at} cannot be read (LSN {first_lsn}"
                )?;
                match last_lsn {
                    Some(last) => write!(f, "..={last} at risk)")?,
                    None => write!(f, " on at risk)")?,
                }
                match log_after {
                    Some(after) => write!(f, "; the log goes on after them at {after}"),
                    None => write!(f, ", more than the in-flight window"),
                }
            }
        }
    }
}

/// Damage to acknowledged data: what failed, where, and how replay knows it was acknowledged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Corruption {
    /// Where the failed check is (segment and offset inside it).
    pub position: Position,
    /// The same place as a ring offset.
    pub ring_offset: u64,
    /// The LSN of the damaged record (the one expected there when its header is unreadable).
    pub lsn: u64,
    /// The check that failed.
    pub check: Check,
    /// Why the data counts as acknowledged.
    pub evidence: Evidence,
}

impl std::fmt::Display for Corruption {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "acknowledged data is corrupt at segment {} offset {} (ring offset {}): LSN {} \
             failed the {} check; {}",
            self.position.segment,
            self.position.offset,
            self.ring_offset,
            self.lsn,
            self.check,
            self.evidence
        )
    }
}

/// A torn tail that replay cut: never-acknowledged batches, damaged by a crash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TornTail {
    /// Where the cut is: the next batch goes here.
    pub start: Position,
    /// The first LSN cut.
    pub first_lsn: u64,
    /// The highest LSN seen in the cut region (`first_lsn` when none was readable).
    pub last_lsn: u64,
    /// Bytes from the cut to the end of the last damaged block or valid record seen.
    pub bytes: u64,
    /// What failed at the cut.
    pub check: Check,
}

/// What the truncating mode dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dropped {
    /// The first LSN dropped.
    pub first_lsn: u64,
    /// The highest LSN seen among dropped records (`first_lsn` when none was readable).
    pub last_lsn: u64,
    /// Bytes from the cut to the end of the last record seen after it.
    pub bytes: u64,
}

/// A region after the cut that a writer must overwrite with zeros, durably, before its first
/// append, so nothing written there before the cut can ever line up behind new entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Invalidate {
    /// First byte (the cut).
    pub start: Position,
    /// One past the last byte; never in the head's segment on the next lap (the head the
    /// writer's plan leaves: the cut, when nothing before it is live).
    pub end: Position,
}

impl Invalidate {
    /// The region as `(ring offset, bytes)` ranges, one per segment it touches. A segment after
    /// the first is covered from its offset 0, its header block included.
    pub fn ranges(&self, geometry: &Geometry) -> Vec<(u64, u64)> {
        let mut ranges = Vec::new();
        let mut at = self.start;
        while at < self.end {
            let segment_start = geometry.segment_ring_offset(at.segment);
            let from = segment_start + u64::from(at.offset);
            let same_segment = (self.end.lap, self.end.segment) == (at.lap, at.segment);
            let to = if same_segment {
                segment_start + u64::from(self.end.offset)
            } else {
                segment_start + geometry.segment_size_bytes
            };
            if to > from {
                ranges.push((from, to - from));
            }
            if same_segment {
                break;
            }
            at = Position {
                offset: 0,
                ..geometry.next_segment_start(at)
            };
        }
        ranges
    }
}

/// How replay ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The log ends where nothing more was written.
    Clean,
    /// A torn tail of never-acknowledged data was cut.
    TornTail,
    /// Truncating mode cut acknowledged data (see `dropped`).
    Truncated,
    /// Quarantine mode found damaged acknowledged data with no valid batch of the log after
    /// it: the damage is recorded, and the log ends after everything found (the writer goes
    /// on there, the damage left as it is).
    Quarantined,
}

impl Outcome {
    /// `clean`, `torn_tail`, `truncated` or `quarantined`.
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Clean => "clean",
            Outcome::TornTail => "torn_tail",
            Outcome::Truncated => "truncated",
            Outcome::Quarantined => "quarantined",
        }
    }
}

/// What replay found: the recovered log's extent, where the writer goes next, and what was cut.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecoveryReport {
    /// The current control block.
    pub control: ControlBlock,
    /// The trim point in effect (the control block's, lowered below the cut in truncating mode).
    pub trim_lsn: u64,
    /// First live LSN recovered (above the trim point), if any.
    pub first_lsn: Option<u64>,
    /// Last LSN recovered, if any live one.
    pub last_lsn: Option<u64>,
    /// The LSN the next record takes.
    pub next_lsn: u64,
    /// Where the next batch goes (at a segment's first data block, with a segment header).
    pub next_position: Position,
    /// Where a writer's new incarnation starts its floor (its control block's cut): every
    /// record of an older incarnation at or after it is stale once that block is durable.
    /// `next_position`, but after quarantined damage at the log's end, the damaged batch's end
    /// (or its first block's, when none of its headers passed): nothing between there and the
    /// writer's next position was accepted, and nothing there may be later (a record a misread
    /// hid from this replay, or one stale only by the last cut's floor, which the new cut
    /// replaces).
    pub cut: Position,
    /// The highest watermark among recovered batches.
    pub watermark_max: u64,
    /// The highest incarnation in the control block (its head and cut incarnations included),
    /// any recovered batch, or any record of this log (not stale) found after the log's end;
    /// a writer opens with one more, so once its control block (with the cut) is durable,
    /// every record replay found at or after the cut is of an older incarnation, and stale,
    /// even before the region after the cut is zeroed (a crash in the middle of recovery
    /// recovers the same log: rule 5, I-6).
    pub incarnation_max: u32,
    /// Batches recovered (tail markers and batches below the trim point included).
    pub batches: u64,
    /// Live records recovered (above the trim point, padding excluded).
    pub entries: u64,
    /// Their payload bytes.
    pub payload_bytes: u64,
    /// Segments whose unused rest the writer skipped.
    pub segments_skipped: u64,
    /// How the scan ended.
    pub outcome: Outcome,
    /// The torn tail cut, if any.
    pub torn: Option<TornTail>,
    /// In truncating mode: the damage found at the cut.
    pub corruption: Option<Corruption>,
    /// In truncating mode: what was dropped.
    pub dropped: Option<Dropped>,
    /// In quarantine mode: the corruption of acknowledged data at each break the scan stepped
    /// over (or ended at), as strict mode would have failed with it, in log order: the first
    /// [`DAMAGED_REPORTED`](crate::quarantine::DAMAGED_REPORTED) of them.
    pub quarantined: Vec<Corruption>,
    /// How many breaks quarantine stepped over or ended at (all of them).
    pub quarantined_breaks: u64,
    /// In quarantine mode: the damaged LSNs above the trim point, in LSN order, as ranges (one
    /// per damaged record whose header survived, one per run of LSNs lost with their
    /// headers): the first [`DAMAGED_REPORTED`](crate::quarantine::DAMAGED_REPORTED) of them.
    /// Every LSN below `next_lsn` and above the trim point is either a live entry or in one of
    /// these.
    pub damaged: Vec<DamagedRange>,
    /// How many damaged ranges there are (all of them).
    pub damaged_ranges: u64,
    /// How many damaged LSNs there are (all of them: `entries + damaged_lsns` is every LSN
    /// from the trim point to `next_lsn`).
    pub damaged_lsns: u64,
    /// The region a writer must zero durably before appending, if any.
    pub invalidate: Option<Invalidate>,
    /// Valid records of an older incarnation found after the log's end, ignored as stale.
    pub stale_records: u64,
    /// Blocks after the log's end that could not be read while probing (the break's segment
    /// header block included, when that is what failed). In quarantine mode the probes after
    /// the damage it stepped over count theirs too, so a block two probes met counts twice.
    pub unreadable_blocks: u64,
    /// Where they are: the first [`UNREADABLE_RUNS_REPORTED`] runs of consecutive unreadable
    /// blocks, in log order (in quarantine mode, probe by probe). Unreadable blocks with
    /// nothing of this log after them (free or trimmed space) are reported here and do not
    /// fail the open.
    pub unreadable_runs: Vec<UnreadableRun>,
    /// The decision-table row that ended the scan.
    pub end_row: &'static str,
    /// What failed where the scan ended (for a clean end: "not written" or an older lap).
    pub end_check: Check,
    /// How often each decision-table row was taken, in [`ROWS`] order.
    pub row_hits: [u64; ROWS.len()],
    /// Which scan was made: hinted (the probe bounded by the tail hint) or full, and why.
    pub scan: Scan,
    /// Where replay's probe after the log's end stopped (for a full scan, the head's segment
    /// on the next lap, or the cut's when nothing before the cut is live): with the head, the
    /// stretch of the ring replay looked at, and the only one a writer's open must flush.
    pub scan_end: Position,
    /// Bytes replay read from its source (control blocks, segment headers, batches, probe).
    pub bytes_read: u64,
}

impl RecoveryReport {
    /// How often the row with this label was taken.
    pub fn hits(&self, label: &str) -> u64 {
        crate::decision::row_index(label).map_or(0, |index| self.row_hits[index])
    }
}

/// A recovered record, borrowed from replay's buffer.
#[derive(Clone, Copy, Debug)]
pub struct Entry<'a> {
    /// Its LSN.
    pub lsn: u64,
    /// Its kind (never padding).
    pub kind: Kind,
    /// The embedder's header (checked with the entry header).
    pub embedder: EmbedderHeader,
    /// Its payload, checked against its CRC.
    pub payload: &'a [u8],
    /// Where its header lies.
    pub position: Position,
    /// Where its batch starts.
    pub batch: Position,
    /// The LSN of its batch's first record (a batch's head may hold trimmed records that
    /// replay does not visit).
    pub batch_first_lsn: u64,
    /// Its batch's length in bytes.
    pub batch_bytes: u32,
    /// The incarnation that wrote it.
    pub incarnation: u32,
}

/// Reads the ring's current control block: the newest of the two copies that checks out.
pub fn read_control<S: RingSource + ?Sized>(source: &mut S) -> Result<ControlBlock, ReplayError> {
    read_controls(source).map(|(current, _)| current)
}

/// Reads both control copies: the current one (the newest that checks out), and the other
/// one when it checks out too (for the tail hint's cross-check, [`trusted_hint`]).
fn read_controls<S: RingSource + ?Sized>(
    source: &mut S,
) -> Result<(ControlBlock, Option<ControlBlock>), ReplayError> {
    let mut block = vec![0u8; BLOCK_SIZE_MIN_BYTES as usize];
    let first = read_control_copy(source, 0, &mut block)?;
    // Copy 1 sits one block in; the block size is in copy 0, or, if copy 0 is damaged, is one
    // of the few sizes the format allows: try each.
    let second_offsets: Vec<u64> = match first {
        Ok(control) => vec![u64::from(control.geometry.block_size_bytes)],
        Err(_) => {
            let sizes =
                BLOCK_SIZE_MIN_BYTES.trailing_zeros()..=BLOCK_SIZE_MAX_BYTES.trailing_zeros();
            sizes.map(|shift| 1u64 << shift).collect()
        }
    };
    let mut second = Err(ControlDefect::Magic);
    for &offset in &second_offsets {
        if offset + block.len() as u64 > source.size_bytes() {
            break;
        }
        let found = match read_control_copy(source, offset, &mut block)? {
            Ok(control) if u64::from(control.geometry.block_size_bytes) == offset => {
                second = Ok(control);
                break;
            }
            Ok(_) => Err(ControlDefect::Crc),
            Err(defect) => Err(defect),
        };
        // Keep the most telling defect seen over the candidate places: a damaged copy (or one
        // of another version) says more than a missing one.
        if defect_rank(found) > defect_rank(second) {
            second = found;
        }
    }
    // A copy must sit in the slot its sequence number names; one that does not was misdirected.
    let first = first.and_then(|c| {
        if c.copy() == 0 {
            Ok(c)
        } else {
            Err(ControlDefect::Crc)
        }
    });
    let second = second.and_then(|c| {
        if c.copy() == 1 {
            Ok(c)
        } else {
            Err(ControlDefect::Crc)
        }
    });
    let (control, other) = match (first, second) {
        (Ok(a), Ok(b)) => {
            if a.sequence >= b.sequence {
                (a, Some(b))
            } else {
                (b, Some(a))
            }
        }
        // An intact copy of another format version means the ring is not ours to read, even
        // when an older copy of this version survives beside it.
        (Err(ControlDefect::Version(found)), _) | (_, Err(ControlDefect::Version(found))) => {
            return Err(ReplayError::UnsupportedVersion {
                found,
                supported: FORMAT_VERSION,
            })
        }
        (Ok(a), Err(_)) => (a, None),
        (Err(_), Ok(b)) => (b, None),
        (Err(ControlDefect::Magic), Err(ControlDefect::Magic)) => {
            return Err(ReplayError::NotARing {
                second_offset: second_offsets[0],
            })
        }
        (
            Err(ControlDefect::SyncChoice {
                method_byte,
                source_byte,
            }),
            Err(_),
        )
        | (
            Err(_),
            Err(ControlDefect::SyncChoice {
                method_byte,
                source_byte,
            }),
        ) => {
            return Err(ReplayError::ControlSyncChoice {
                method_byte,
                source_byte,
            })
        }
        (Err(ControlDefect::Purpose { purpose_byte }), Err(_))
        | (Err(_), Err(ControlDefect::Purpose { purpose_byte })) => {
            return Err(ReplayError::ControlPurpose { purpose_byte })
        }
        (Err(_), Err(_)) => return Err(ReplayError::ControlCorrupt),
    };
    validate_control(&control, source.size_bytes())?;
    Ok((control, other))
}

/// The tail hint's limit (normalized, [`TailHint::normalized_limit`]) when replay may trust
/// it, or why not: a full scan was asked for; the hint was set by another incarnation than
/// the control block's; its limit is no place of this ring at or after the head; or the other
/// copy, written by the same incarnation, records a further limit (a hint never moves back
/// within an incarnation, so the copies disagree). Whether the log stays within the limit is
/// checked when the walk ends ([`FullScan::HintCrossed`]).
pub fn trusted_hint(
    control: &ControlBlock,
    other: Option<&ControlBlock>,
    policy: ScanPolicy,
) -> Result<Position, FullScan> {
    if policy == ScanPolicy::Full {
        return Err(FullScan::Requested);
    }
    let hint: TailHint = control.tail_hint;
    if hint.incarnation != control.incarnation {
        return Err(FullScan::HintIncarnation {
            hint_incarnation: hint.incarnation,
            incarnation: control.incarnation,
        });
    }
    let geometry = &control.geometry;
    let limit = hint
        .normalized_limit(geometry)
        .filter(|limit| *limit >= control.head)
        .ok_or(FullScan::HintInvalid { limit: hint.limit })?;
    if let Some(other) = other {
        let same_writer = other.incarnation == control.incarnation
            && other.tail_hint.incarnation == control.incarnation;
        // An older copy's limit that names no place is no evidence either way: the current
        // copy's CRC, identity and limit all check out.
        let other_limit = other.tail_hint.normalized_limit(geometry);
        if let Some(other_limit) =
            other_limit.filter(|other_limit| same_writer && *other_limit > limit)
        {
            return Err(FullScan::HintsDisagree { limit, other_limit });
        }
    }
    Ok(limit)
}

/// Counts the bytes replay reads (the report's `bytes_read`).
struct CountingSource<'s, S: RingSource + ?Sized> {
    inner: &'s mut S,
    bytes_read: u64,
}

impl<S: RingSource + ?Sized> RingSource for CountingSource<'_, S> {
    fn size_bytes(&self) -> u64 {
        self.inner.size_bytes()
    }

    fn read_at(&mut self, ring_offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.bytes_read = self.bytes_read.saturating_add(buf.len() as u64);
        self.inner.read_at(ring_offset, buf)
    }

    fn read_ahead(&mut self, ring_offset: u64, len: usize) {
        self.inner.read_ahead(ring_offset, len);
    }
}

/// How much a control copy's defect says: version (intact, another format) over CRC or an
/// unknown sync choice or purpose (ours, damaged or crafted) over magic (nothing there).
fn defect_rank(copy: Result<ControlBlock, ControlDefect>) -> u8 {
    match copy {
        Ok(_) => 3,
        Err(ControlDefect::Version(_)) => 2,
        Err(
            ControlDefect::Crc | ControlDefect::SyncChoice { .. } | ControlDefect::Purpose { .. },
        ) => 1,
        Err(ControlDefect::Magic) => 0,
    }
}

fn read_control_copy<S: RingSource + ?Sized>(
    source: &mut S,
    offset: u64,
    block: &mut [u8],
) -> Result<Result<ControlBlock, ControlDefect>, ReplayError> {
    if offset + block.len() as u64 > source.size_bytes() {
        return Ok(Err(ControlDefect::Magic));
    }
    source
        .read_at(offset, block)
        .map_err(|source| ReplayError::ControlIo { offset, source })?;
    Ok(ControlBlock::decode(block))
}

fn validate_control(control: &ControlBlock, source_size_bytes: u64) -> Result<(), ReplayError> {
    let geometry = &control.geometry;
    geometry.validate()?;
    let ring_size_bytes = geometry
        .ring_size_bytes()
        .expect("validated geometry has a size");
    if ring_size_bytes > source_size_bytes {
        return Err(ReplayError::SourceTooSmall {
            ring_size_bytes,
            source_size_bytes,
        });
    }
    // Every writer takes its next sequence from `ControlBlock::next_sequence`, which stays at
    // or below the limit: a copy past it was never written by a writer.
    if control.sequence > CONTROL_SEQUENCE_LIMIT {
        return Err(ReplayError::ControlSequence {
            sequence: control.sequence,
        });
    }
    let head = control.head;
    // The bounds every later arithmetic on these fields relies on:
    // - head lap <= u32::MAX - 2: a walk moves at most one lap past its head, and the probe's
    //   end is one lap on, so `lap + 1` never overflows in replay;
    // - trim LSN < u64::MAX / 2 and head LSN <= trim LSN + 1: `trim_lsn + 1`, the walk's LSN
    //   (head LSN plus at most one record per 64 bytes of one lap of the ring) and the plan's
    //   `next_lsn` all stay far below u64::MAX;
    // - head LSN >= 1: `next_lsn - 1` (the durable LSN after recovery) never underflows.
    let head_ok = head.lap >= 1
        && head.lap <= u32::MAX - 2
        && head.segment < geometry.segment_count
        && head.offset >= geometry.segment_data_offset()
        && u64::from(head.offset) < geometry.segment_size_bytes
        && head.offset % geometry.block_size_bytes == 0
        && control.head_lsn >= 1
        && control.head_lsn <= control.trim_lsn.saturating_add(1)
        && control.trim_lsn < u64::MAX / 2;
    if !head_ok {
        return Err(ReplayError::ControlHead {
            head,
            head_lsn: control.head_lsn,
            trim_lsn: control.trim_lsn,
        });
    }
    debug_assert_eq!(CONTROL_COPIES, 2);
    Ok(())
}

/// Replays the ring without visiting entries: the report alone.
pub fn scan<S: RingSource + ?Sized>(
    source: &mut S,
    options: &ReplayOptions,
) -> Result<RecoveryReport, ReplayError> {
    replay(source, options, &mut |_| {})
}

/// Replays the ring, calling `visit` with every recovered live entry in LSN order, and returns
/// the report. In strict mode, damaged acknowledged data is [`ReplayError::Corruption`] (the
/// entries visited before it are then not a recovered log). In quarantine mode the damage is
/// in the report; [`replay_visiting`] also hands it to the visitor, in LSN order.
pub fn replay<S: RingSource + ?Sized>(
    source: &mut S,
    options: &ReplayOptions,
    visit: &mut dyn FnMut(&Entry<'_>),
) -> Result<RecoveryReport, ReplayError> {
    replay_visiting(source, options, &mut |visited| {
        if let Visit::Entry(entry) = visited {
            visit(entry);
        }
    })
}

/// What [`replay_visiting`] hands its visitor, in LSN order.
#[derive(Clone, Copy, Debug)]
pub enum Visit<'v, 'a> {
    /// A live entry (in a valid batch, or an intact record of a damaged one).
    Entry(&'v Entry<'a>),
    /// Damage quarantine stepped over: a damaged record whose header survived, or a range of
    /// LSNs lost with their headers (only in [`RecoveryMode::Quarantine`]).
    Damaged(&'v Damaged),
}

/// [`replay`], handing the visitor every live entry and, in quarantine mode, every damaged
/// record or range above the trim point, in one LSN order: each LSN from the trim point to
/// the report's `next_lsn` exactly once, as an entry or inside a damaged range.
pub fn replay_visiting<S: RingSource + ?Sized>(
    source: &mut S,
    options: &ReplayOptions,
    visit: &mut dyn FnMut(Visit<'_, '_>),
) -> Result<RecoveryReport, ReplayError> {
    let mut counting = CountingSource {
        inner: source,
        bytes_read: 0,
    };
    let (control, other) = read_controls(&mut counting)?;
    let hint = trusted_hint(&control, other.as_ref(), options.scan);
    let report = {
        let mut scanner = Scanner::new(&mut counting, control, options);
        scanner.hint = hint;
        if let Ok(limit) = hint {
            // While the walk reads the live entries, reads ahead stop at the hint: a log that
            // runs past it is followed all the same, with reads of just what it needs.
            scanner.read_ahead_until(limit);
        }
        scanner.run(visit)?
    };
    Ok(RecoveryReport {
        bytes_read: counting.bytes_read,
        ..report
    })
}

/// A recovered entry, owned: what [`entries`] yields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecoveredEntry {
    /// Its LSN.
    pub lsn: u64,
    /// Its kind (never padding).
    pub kind: Kind,
    /// The embedder's header (checked with the entry header).
    pub embedder: EmbedderHeader,
    /// Its payload, checked against its CRC.
    pub payload: Vec<u8>,
    /// Where its header lies.
    pub position: Position,
    /// Where its batch starts.
    pub batch: Position,
    /// The LSN of its batch's first record.
    pub batch_first_lsn: u64,
    /// The incarnation that wrote it.
    pub incarnation: u32,
}

/// Iterates over the live entries a replay recovered, in LSN order, reading them again from
/// the source batch by batch (memory stays bounded by one batch, whatever the ring's size) and
/// checking them again. Yields [`ReplayError::Changed`] if the ring no longer holds what the
/// report describes. In quarantine mode it steps over the damage as replay did (probing it
/// again), with the intact records of a damaged batch among the entries.
pub fn entries<'s, S: RingSource + ?Sized>(
    source: &'s mut S,
    report: &RecoveryReport,
    options: &ReplayOptions,
) -> RecoveredEntries<'s, S> {
    let control = ControlBlock {
        trim_lsn: report.trim_lsn,
        ..report.control
    };
    RecoveredEntries {
        scanner: Scanner::new(source, control, options),
        cursor: control.head,
        expected_lsn: control.head_lsn,
        end_lsn: report.next_lsn,
        lineage_incarnation: control.head_incarnation,
        batch: std::collections::VecDeque::new(),
        failed: false,
    }
}

/// The iterator [`entries`] returns.
pub struct RecoveredEntries<'s, S: RingSource + ?Sized> {
    scanner: Scanner<'s, S>,
    cursor: Position,
    expected_lsn: u64,
    end_lsn: u64,
    lineage_incarnation: u32,
    batch: std::collections::VecDeque<RecoveredEntry>,
    failed: bool,
}

impl<S: RingSource + ?Sized> RecoveredEntries<'_, S> {
    /// Reads the next batch into `self.batch`, skipping unused segment tails as replay did.
    fn fill(&mut self) -> Result<(), ReplayError> {
        let geometry = self.scanner.geometry;
        let trim_lsn = self.scanner.control.trim_lsn;
        // Bounded: each turn accepts a batch or moves to the next segment, at most one ring.
        for _ in 0..=u64::from(geometry.segment_count) * 2 {
            let checked =
                self.scanner
                    .check_batch(self.cursor, self.expected_lsn, self.lineage_incarnation);
            match checked {
                Ok(good) => {
                    let batch = &mut self.batch;
                    self.scanner
                        .for_each_record(self.cursor, good, &mut |entry| {
                            if entry.lsn > trim_lsn {
                                batch.push_back(RecoveredEntry::from(entry));
                            }
                        });
                    self.lineage_incarnation = good.incarnation;
                    // Bounded as in the walk (see `validate_control`).
                    self.expected_lsn += u64::from(good.records);
                    self.cursor = self.scanner.after_batch(self.cursor, good.bytes);
                    return Ok(());
                }
                Err(failure) => {
                    let skip = self.cursor.offset != geometry.segment_data_offset()
                        && self.scanner.next_segment_continues(
                            self.cursor,
                            self.expected_lsn,
                            self.lineage_incarnation,
                        );
                    if skip {
                        self.cursor = geometry.next_segment_start(self.cursor);
                        continue;
                    }
                    let changed = ReplayError::Changed {
                        position: failure.position,
                        lsn: failure.lsn,
                        check: failure.check,
                    };
                    if self.scanner.mode != RecoveryMode::Quarantine {
                        return Err(changed);
                    }
                    // Damage quarantine stepped over when it replayed: step over it again the
                    // same way (the same probe and the same table), taking the damaged batch's
                    // intact records on the way.
                    return self.step_over(failure).ok_or(changed);
                }
            }
        }
        Err(ReplayError::Changed {
            position: self.cursor,
            lsn: self.expected_lsn,
            check: Check::SegmentMismatch,
        })
    }
}

impl<S: RingSource + ?Sized> RecoveredEntries<'_, S> {
    /// Steps over the quarantined damage the walk broke at (`failure`), queueing the damaged
    /// batch's intact records: `Some` once it did (the walk goes on at the batch the log
    /// resumes at, or the log ends there), `None` when the damage is not what replay stepped
    /// over (the ring changed).
    fn step_over(&mut self, failure: Failure) -> Option<()> {
        let at = BreakAt {
            cut: self.cursor,
            expected_lsn: self.expected_lsn,
            lineage_incarnation: self.lineage_incarnation,
            failure: self
                .scanner
                .named_failure(self.cursor, self.expected_lsn, failure),
            cut_failure: failure,
        };
        let mut scratch = self.scanner.empty_report();
        let batch = &mut self.batch;
        let stepped = self
            .scanner
            .finish_at_break(&at, &mut scratch, &mut |visited| {
                if let Visit::Entry(entry) = visited {
                    batch.push_back(RecoveredEntry::from(entry));
                }
            });
        match stepped {
            Ok(Some(resume)) => {
                self.cursor = resume.position;
                self.expected_lsn = resume.first_lsn;
                Some(())
            }
            Ok(None) if scratch.outcome == Outcome::Quarantined => {
                // The log ends at this damage: what the damaged batch held was the last.
                self.expected_lsn = self.end_lsn;
                Some(())
            }
            _ => None,
        }
    }
}

impl From<&Entry<'_>> for RecoveredEntry {
    fn from(entry: &Entry<'_>) -> RecoveredEntry {
        RecoveredEntry {
            lsn: entry.lsn,
            kind: entry.kind,
            embedder: entry.embedder,
            payload: entry.payload.to_vec(),
            position: entry.position,
            batch: entry.batch,
            batch_first_lsn: entry.batch_first_lsn,
            incarnation: entry.incarnation,
        }
    }
}

impl<S: RingSource + ?Sized> Iterator for RecoveredEntries<'_, S> {
    type Item = Result<RecoveredEntry, ReplayError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(entry) = self.batch.pop_front() {
                return Some(Ok(entry));
            }
            if self.failed || self.expected_lsn >= self.end_lsn {
                return None;
            }
            if let Err(error) = self.fill() {
                self.failed = true;
                return Some(Err(error));
            }
        }
    }
}

/// A check that failed at a batch boundary: where, the LSN involved, and which check (the
/// validator's failure, or one of replay's own: segment header, read error).
type Failure = BatchFailure;

impl BatchFailure {
    /// Whether the failure shows that something this log wrote is here (rather than nothing
    /// of this lap and incarnation ever was).
    fn is_damage(&self) -> bool {
        self.inside_batch || !self.check.is_never_written()
    }
}

/// A batch that checked out.
#[derive(Clone, Copy, Debug)]
struct GoodBatch {
    first_lsn: u64,
    bytes: u32,
    records: u32,
    incarnation: u32,
    watermark: u64,
}

/// Counts the distinct batches the probe's records belong to, in O(1) time and space per
/// record. The probe finds records in position order and a batch's records are contiguous, so
/// a record starts a new batch exactly when its batch identity (first LSN, incarnation)
/// differs from the last record's. (A batch identity seen again after another batch is counted
/// again: that only happens when a write was misdirected, and counting it makes the window
/// rule stricter, never looser.)
#[derive(Clone, Copy, Debug, Default)]
struct BatchCounter {
    last: Option<(u64, u32)>,
    batches: u64,
}

impl BatchCounter {
    /// Notes a record of the batch `(first_lsn, incarnation)` and returns the batches so far.
    fn note(&mut self, first_lsn: u64, incarnation: u32) -> u64 {
        let identity = (first_lsn, incarnation);
        if self.last != Some(identity) {
            self.last = Some(identity);
            self.batches = self.batches.saturating_add(1);
        }
        self.batches
    }
}

/// Where the walk broke: the cut, the LSN expected there, the first live LSN a cut there
/// drops, the check that failed, where the invalidation after the cut stops (and a full
/// scan's probe: [`Scanner::break_end`]), and where this scan's probe stops (`end`, or
/// sooner when the tail hint is trusted: [`Scanner::probe_stop`]).
#[derive(Clone, Copy, Debug)]
struct Break {
    cut: Position,
    expected_lsn: u64,
    drop_lsn: u64,
    failure: Failure,
    end: Position,
    probe_end: Position,
    /// In quarantine mode: the batch the log may resume at, to look for among the records the
    /// probe finds.
    resume: Option<ResumeSearch>,
}

/// Where the walk broke, as the walk knew it: the cut, the LSN expected there, the
/// incarnation floor it kept, and the check that failed.
#[derive(Clone, Copy, Debug)]
struct BreakAt {
    cut: Position,
    expected_lsn: u64,
    lineage_incarnation: u32,
    /// The failure the break names ([`Scanner::named_failure`]).
    failure: Failure,
    /// The failure found at the cut itself (the same, unless the break names the next
    /// segment's header instead).
    cut_failure: Failure,
}

/// What walking a damaged batch's headers found ([`Scanner::walk_damaged`]).
#[derive(Clone, Debug)]
struct DamagedWalk {
    /// Where the damaged batch starts.
    start: Position,
    /// Its first header, when that passed (so its length and writer are known).
    first: Option<EntryHeader>,
    /// The LSN after the last record whose header passed: where damage without a header
    /// begins (the LSN expected at the break, when the first header failed).
    next_lsn: u64,
    /// Where damage without a header begins: the header that failed, the batch's end when
    /// every header passed, or the batch's start.
    stop: Position,
    /// A batch the log resumes at starts here or later: the damaged batch's end, or the block
    /// after its start when its length is not known.
    resume_after: Position,
    /// The end of what the walk looked at (a block boundary).
    end: Position,
    /// The first header of the batch that failed, if one did (its first one, when `first` is
    /// `None`).
    header_failure: Option<Failure>,
    /// The batch as it was read, when its first header passed.
    walked: Option<WalkedBatch>,
}

/// A damaged batch as it was read, to walk (and walk again, the same) without reading it again.
#[derive(Clone, Debug)]
struct WalkedBatch {
    expect: BatchExpectation,
    first: EntryHeader,
    bytes: Vec<u8>,
    /// Byte ranges of `bytes` that could not be read (zeros there).
    holes: Vec<Range<usize>>,
}

impl WalkedBatch {
    fn walk<'b>(&'b self, each: &mut dyn FnMut(WalkedRecord<'b>)) -> validate::WalkEnd {
        let unreadable = |range: Range<usize>| {
            self.holes
                .iter()
                .any(|hole| range.start < hole.end && hole.start < range.end)
        };
        validate::walk_batch(&self.expect, &self.first, &self.bytes, &unreadable, each)
    }
}

impl DamagedWalk {
    /// Where the batch the log resumes at may be, after the break `at` whose damaged batch
    /// this walk is.
    fn search(&self, at: &BreakAt, geometry: &Geometry) -> ResumeSearch {
        // A break that names the next segment's header (nothing written at the cut, the writer
        // may have left the segment) walks that segment's first batch. A valid batch in the
        // rest of the cut's segment shows the writer did not leave it after all: the log
        // resumes there, before the walk's batch, and the damage is at the cut (a later write
        // of the next segment's header must not move it).
        let named_elsewhere =
            (at.failure.position.lap, at.failure.position.segment) != (at.cut.lap, at.cut.segment);
        let early = named_elsewhere.then(|| {
            (
                Position {
                    // A block inside the segment (the break is before its end).
                    offset: at.cut.offset + geometry.block_size_bytes,
                    ..at.cut
                },
                Position {
                    offset: u32::try_from(geometry.segment_size_bytes).unwrap_or(u32::MAX),
                    ..at.cut
                },
            )
        });
        ResumeSearch {
            after: self.resume_after,
            next_lsn: self.next_lsn,
            stop: self.stop,
            early,
            // A walked batch whose first header failed may be where the log resumes after all
            // (its LSN past the one expected: the LSNs before it lost, at the cut).
            at_start: self.first.is_none().then_some(self.start),
            cut: at.cut,
            expected_lsn: at.expected_lsn,
        }
    }
}

/// What a batch the log resumes at must be: a batch start at or after `after`, with a first
/// LSN at or after `next_lsn`, and no further on than the records between `stop` and it could
/// have taken (each LSN takes at least one entry header's bytes), so a crafted LSN far ahead
/// cannot make a range of damage of any size.
///
/// `early`, when set, is a stretch before the damaged batch (the rest of the cut's segment)
/// where a batch may resume the log too, continuing the LSN expected at the cut `cut`.
#[derive(Clone, Copy, Debug)]
struct ResumeSearch {
    after: Position,
    next_lsn: u64,
    stop: Position,
    early: Option<(Position, Position)>,
    /// The walked batch's start, when its first header failed: a batch there may resume the
    /// log too, as one in `early` does.
    at_start: Option<Position>,
    cut: Position,
    expected_lsn: u64,
}

/// The batch the log resumes at after quarantined damage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Resume {
    position: Position,
    first_lsn: u64,
    /// It lies before the damaged batch the walk looked at (see [`ResumeSearch`]): that batch
    /// is not part of the damage.
    before_walk: bool,
}

/// Whether `count` LSNs fit between two places `distance_bytes` apart: each takes at least an
/// entry header.
fn lsns_fit(count: u64, distance_bytes: u64) -> bool {
    u128::from(count) * ENTRY_HEADER_SIZE as u128 <= u128::from(distance_bytes)
}

/// How many runs of unreadable blocks a report lists (the count covers them all).
pub const UNREADABLE_RUNS_REPORTED: usize = 8;

/// A run of consecutive unreadable blocks, in log order (the probe's order: a segment's data
/// blocks, then the next segment's header and data blocks). A run that holds a segment header
/// starts at it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnreadableRun {
    /// Its first block.
    pub start: Position,
    /// How many blocks it holds.
    pub blocks: u64,
}

/// The first unreadable run the probe met, with what the decision needs to know of it.
#[derive(Clone, Copy, Debug)]
struct FirstRun {
    start: Position,
    /// One past its last block.
    end: Position,
    /// Batch bytes in it (segment header blocks not counted).
    data_bytes: u64,
    /// It starts at the break: the walk failed there with a read error.
    at_break: bool,
}

/// What the probe learnt about unreadable blocks.
#[derive(Clone, Debug, Default)]
struct UnreadableFound {
    blocks: u64,
    runs: Vec<UnreadableRun>,
    first_run: Option<FirstRun>,
    /// The first valid record of this log (not stale, not of the batch broken at the break)
    /// found after an unreadable block.
    log_after: Option<Position>,
}

impl UnreadableFound {
    /// The evidence that unreadable blocks hold what the log needs (the `unread` fact): the
    /// run at the break is longer than the window, or the log goes on after a run.
    fn evidence(&self, window_bytes_max: u64, drop_lsn: u64, lsn_max: u64) -> Option<Evidence> {
        let run = self.first_run?;
        let too_long = run.at_break && run.data_bytes > window_bytes_max;
        (too_long || self.log_after.is_some()).then_some(Evidence::Unreadable {
            at: run.start,
            run_bytes: run.data_bytes,
            first_lsn: drop_lsn,
            last_lsn: (lsn_max >= drop_lsn).then_some(lsn_max),
            log_after: self.log_after,
        })
    }
}

/// Follows the probe block by block (readable or not) and the valid records it finds, and
/// keeps [`UnreadableFound`]: O(1) per block, and a bounded list of runs.
struct UnreadableTracker {
    block_bytes: u64,
    /// Where the walk's read error at the break is, when that is how it failed inside a batch:
    /// the run that starts there is the break's.
    break_block: Option<Position>,
    /// The last block the probe met was unreadable.
    in_run: bool,
    /// The run being extended is the first one.
    first_run_open: bool,
    /// The run being extended is in `found.runs`.
    run_listed: bool,
    found: UnreadableFound,
}

impl UnreadableTracker {
    fn new(failure: &Failure, geometry: Geometry) -> UnreadableTracker {
        let block_bytes = u64::from(geometry.block_size_bytes);
        let mut tracker = UnreadableTracker {
            block_bytes,
            break_block: None,
            in_run: false,
            first_run_open: false,
            run_listed: false,
            found: UnreadableFound::default(),
        };
        if failure.check == Check::ReadError {
            if failure.position.offset == 0 {
                // The break's segment header could not be read: the run starts there, and the
                // probe's first block (the segment's first data block) continues it.
                let start = failure.position;
                tracker.found.blocks = 1;
                tracker.found.runs.push(UnreadableRun { start, blocks: 1 });
                tracker.found.first_run = Some(FirstRun {
                    start,
                    end: Position {
                        offset: geometry.segment_data_offset(),
                        ..start
                    },
                    data_bytes: 0,
                    at_break: true,
                });
                tracker.in_run = true;
                tracker.first_run_open = true;
                tracker.run_listed = true;
            } else {
                tracker.break_block = Some(failure.position);
            }
        }
        tracker
    }

    /// The probe could not read the block at `here`.
    fn unreadable(&mut self, here: Position) {
        let found = &mut self.found;
        found.blocks += 1;
        let end = Position {
            // A block inside its segment: the sum is at most the segment size, a u32.
            offset: here.offset + self.block_bytes as u32,
            ..here
        };
        if self.in_run {
            if self.run_listed {
                if let Some(run) = found.runs.last_mut() {
                    run.blocks += 1;
                }
            }
            if self.first_run_open {
                if let Some(run) = found.first_run.as_mut() {
                    run.end = end;
                    run.data_bytes += self.block_bytes;
                }
            }
        } else {
            self.run_listed = found.runs.len() < UNREADABLE_RUNS_REPORTED;
            if self.run_listed {
                found.runs.push(UnreadableRun {
                    start: here,
                    blocks: 1,
                });
            }
            if found.first_run.is_none() {
                found.first_run = Some(FirstRun {
                    start: here,
                    end,
                    data_bytes: self.block_bytes,
                    at_break: self.break_block == Some(here),
                });
                self.first_run_open = true;
            }
        }
        self.in_run = true;
    }

    /// The probe could not read the segment header at `here` (offset 0 of a segment). It
    /// starts a listed run of its own (a run is walked from its start block by block, and the
    /// block after a segment's last data block is the next segment's first data block), and
    /// extends the first run without adding batch bytes.
    fn unreadable_header(&mut self, here: Position) {
        debug_assert_eq!(here.offset, 0);
        let found = &mut self.found;
        found.blocks += 1;
        self.run_listed = found.runs.len() < UNREADABLE_RUNS_REPORTED;
        if self.run_listed {
            found.runs.push(UnreadableRun {
                start: here,
                blocks: 1,
            });
        }
        let end = Position {
            // The header block lies inside its segment.
            offset: self.block_bytes as u32,
            ..here
        };
        if self.first_run_open {
            if let Some(run) = found.first_run.as_mut() {
                run.end = end;
            }
        } else if found.first_run.is_none() {
            found.first_run = Some(FirstRun {
                start: here,
                end,
                data_bytes: 0,
                at_break: false,
            });
            self.first_run_open = true;
        }
        self.in_run = true;
    }

    /// The probe read the block it is at.
    fn readable(&mut self) {
        self.in_run = false;
        self.first_run_open = false;
    }

    /// A valid record of this log (of a later batch than the broken one) lies at `place`.
    fn log_goes_on(&mut self, place: Position) {
        if self.found.blocks > 0 && self.found.log_after.is_none() {
            self.found.log_after = Some(place);
        }
    }

    fn finish(self) -> UnreadableFound {
        self.found
    }
}

/// What the probe after a break found.
#[derive(Debug, Default)]
struct Probe {
    acked: Option<Evidence>,
    beyond: Option<Evidence>,
    /// Valid records of this log found after the break (within the window or not).
    records: u64,
    lsn_max: u64,
    /// End of the furthest record found, as a position.
    end_max: Option<Position>,
    stale_records: u64,
    /// End of the furthest stale record (older incarnation) found: invalidation covers it.
    stale_end_max: Option<Position>,
    /// The highest incarnation among the valid records found (stale ones excluded).
    incarnation_max: u32,
    unreadable: UnreadableFound,
    /// Where a hinted probe ended, when valid records found near its end carried it past the
    /// end it started with (see [`Scanner::probe`]).
    extended_to: Option<Position>,
    /// The highest watermark among valid records of this log found after the break whose LSN
    /// could lie where it was found (see [`lsns_fit`]): the highest LSN shown to be
    /// acknowledged, bounded by the ring's size.
    acked_lsn_max: u64,
    /// In quarantine mode: the first whole valid batch of this log after the damage.
    resume: Option<Resume>,
}

/// Reads through a chunk buffer so that a scan makes large sequential reads. A read never
/// crosses `limit` (the end of the segment or control block being read). When a read starts
/// inside the chunk held but runs past it (a batch straddling the chunk's end), the held tail
/// moves to the front and only what follows it is read, so a sequential scan reads every byte
/// once. Every source read is `chunk` bytes (less only at a limit), starting where the last one
/// ended, and the source is told what comes next (`RingSource::read_ahead`, the next few reads
/// with exactly their offsets and lengths), so a device can fetch them while this chunk is
/// checked. `buf` holds twice `chunk`: a kept tail (under one batch) plus a whole read.
/// How many chunks past the one just read replay hints: enough reads in flight to keep a device
/// streaming (a sequential read reaches its bandwidth at a few reads of 1 MiB in flight).
const READ_AHEAD_CHUNKS: usize = 3;

struct Reader<'s, S: RingSource + ?Sized> {
    source: &'s mut S,
    buf: Vec<u8>,
    chunk: usize,
    start: u64,
    len: usize,
    /// Where reading ahead stops in one segment: `(the segment's end, the ring offset)`. A
    /// read in that segment that starts before the offset takes no more than up to it (but
    /// always what was asked for), one at or after it only what was asked for, and no read
    /// is hinted past it. For a hinted scan, so that an open reads what the walk and the
    /// probe need and not a chunk or three beyond them.
    ahead_stop: Option<(u64, u64)>,
    /// One block read aside ([`Reader::read_aside`]): a segment header, so the chunk held
    /// (and the reads hinted after it) stays where the scan goes on.
    aside: Vec<u8>,
}

impl<'s, S: RingSource + ?Sized> Reader<'s, S> {
    fn new(source: &'s mut S, chunk: usize) -> Self {
        Reader {
            source,
            buf: vec![0u8; 2 * chunk],
            chunk,
            start: 0,
            len: 0,
            ahead_stop: None,
            aside: vec![0u8; BLOCK_SIZE_MAX_BYTES as usize],
        }
    }

    /// Reads `len` bytes (at most a block) at `offset` into the aside buffer, leaving the
    /// chunk held as it is: for a segment header looked at between reads of the log, which
    /// would otherwise make the scan read its chunk (and the reads hinted after it) again.
    fn read_aside(&mut self, offset: u64, len: usize) -> io::Result<&[u8]> {
        debug_assert!(len <= self.aside.len());
        self.source.read_at(offset, &mut self.aside[..len])?;
        Ok(&self.aside[..len])
    }

    /// How far a read from `from` in the segment ending at `limit` may reach beyond what it
    /// needs: the segment's end, or the read-ahead stop in that segment.
    fn ahead_limit(&self, from: u64, limit: u64) -> u64 {
        match self.ahead_stop {
            Some((segment_end, stop)) if segment_end == limit => stop.max(from).min(limit),
            _ => limit,
        }
    }

    fn read(&mut self, offset: u64, len: usize, limit: u64) -> io::Result<&[u8]> {
        debug_assert!(offset + len as u64 <= limit);
        debug_assert!(len <= self.chunk);
        let held_end = self.start + self.len as u64;
        let cached = offset >= self.start && offset + len as u64 <= held_end;
        if !cached {
            // Bytes of the held chunk that the new one begins with (same segment: a chunk never
            // crosses its limit, so an offset inside it shares that limit).
            let kept = if offset >= self.start && offset < held_end {
                (held_end - offset) as usize
            } else {
                0
            };
            if kept > 0 {
                let at = (offset - self.start) as usize;
                self.buf.copy_within(at..self.len, 0);
            }
            self.start = offset;
            self.len = 0;
            let from = offset + kept as u64;
            let needed = len - kept;
            let ahead_limit = self.ahead_limit(from, limit);
            let whole = (self.chunk as u64).min(ahead_limit - from) as usize;
            let read = whole.max(needed);
            let filled = match self.source.read_at(from, &mut self.buf[kept..kept + read]) {
                Ok(()) => read,
                // Retry just what was asked for: a latent sector error elsewhere in the chunk
                // must not hide readable blocks (I-13).
                Err(_) if read > needed => {
                    self.source.read_at(from, &mut self.buf[kept..len])?;
                    needed
                }
                Err(error) => return Err(error),
            };
            self.len = kept + filled;
            if filled == read {
                // The reads that will follow, in order, within this segment (a source that
                // already has one of them in flight ignores the repeated hint).
                let mut ahead_at = from + filled as u64;
                for _ in 0..READ_AHEAD_CHUNKS {
                    if ahead_at >= ahead_limit {
                        break;
                    }
                    let ahead = (self.chunk as u64).min(ahead_limit - ahead_at) as usize;
                    self.source.read_ahead(ahead_at, ahead);
                    ahead_at += ahead as u64;
                }
            }
        }
        let at = (offset - self.start) as usize;
        Ok(&self.buf[at..at + len])
    }
}

struct Scanner<'s, S: RingSource + ?Sized> {
    reader: Reader<'s, S>,
    control: ControlBlock,
    geometry: Geometry,
    ring_id: RingId,
    mode: RecoveryMode,
    row_hits: [u64; ROWS.len()],
    /// The trusted tail hint's limit, or why there is none ([`trusted_hint`]).
    hint: Result<Position, FullScan>,
}

impl<'s, S: RingSource + ?Sized> Scanner<'s, S> {
    fn new(source: &'s mut S, control: ControlBlock, options: &ReplayOptions) -> Self {
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
    fn read_ahead_until(&mut self, until: Position) {
        let geometry = self.geometry;
        let segment_end = self.segment_end(until);
        let stop =
            (geometry.ring_offset(until) + u64::from(geometry.block_size_bytes)).min(segment_end);
        self.reader.ahead_stop = Some((segment_end, stop));
    }

    /// Looks the facts up in the decision table and counts the row taken.
    fn decide(&mut self, facts: Facts) -> &'static crate::decision::Row {
        let row = decide(&facts);
        let index = crate::decision::row_index(row.label).expect("a row of the table");
        self.row_hits[index] += 1;
        row
    }

    fn segment_end(&self, position: Position) -> u64 {
        self.geometry.segment_ring_offset(position.segment) + self.geometry.segment_size_bytes
    }

    /// The report of a walk that has found nothing yet, at the head.
    fn empty_report(&self) -> RecoveryReport {
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

    fn run(&mut self, visit: &mut dyn FnMut(Visit<'_, '_>)) -> Result<RecoveryReport, ReplayError> {
        let geometry = self.geometry;
        let trim_lsn = self.control.trim_lsn;
        let mut cursor = self.control.head;
        let mut expected_lsn = self.control.head_lsn;
        // Nothing older than the head's incarnation is accepted after the head.
        let mut lineage_incarnation = self.control.head_incarnation;
        let mut report = self.empty_report();
        // The walk never passes the head's segment on the next lap: the writer cannot enter
        // it, so the segment-start checks there fail (older lap) and the walk stops.
        let walk_limit = u64::from(geometry.segment_count) + 1;
        let first_linear = geometry.linear_segment(cursor);
        loop {
            assert!(geometry.linear_segment(cursor) - first_linear <= walk_limit);
            // The writer never enters the head's segment on the next lap. A walk from the head
            // only gets there by a segment header of that lap, which the head's own segment
            // header (the same block) contradicts; but one that stepped over damage at the head
            // (quarantine mode) could, over a crafted header: it stops there all the same.
            let head_lap_over =
                geometry.linear_segment(cursor) >= geometry.linear_segment(self.probe_end());
            let checked = if head_lap_over {
                Err(Failure {
                    position: Position {
                        offset: 0,
                        ..cursor
                    },
                    lsn: expected_lsn,
                    check: Check::SegmentStaleLap,
                    inside_batch: false,
                })
            } else {
                self.check_batch(cursor, expected_lsn, lineage_incarnation)
            };
            let failure = match checked {
                Ok(good) => {
                    let decision = self.decide(Facts {
                        ok: true,
                        ..Facts::default()
                    });
                    debug_assert_eq!(decision.decision, Decision::Accept);
                    self.visit_batch(cursor, good, trim_lsn, &mut report, visit);
                    report.batches += 1;
                    report.watermark_max = report.watermark_max.max(good.watermark);
                    report.incarnation_max = report.incarnation_max.max(good.incarnation);
                    lineage_incarnation = good.incarnation;
                    // Starts at the head LSN (<= trim LSN + 1 < u64::MAX / 2, checked by
                    // `validate_control`) and the walk covers at most one lap plus a segment,
                    // at most one record per 64 bytes: far below u64::MAX.
                    expected_lsn += u64::from(good.records);
                    cursor = self.after_batch(cursor, good.bytes);
                    continue;
                }
                Err(failure) => failure,
            };
            let skip = cursor.offset != geometry.segment_data_offset()
                && self.next_segment_continues(cursor, expected_lsn, lineage_incarnation);
            if skip {
                let decision = self.decide(Facts {
                    skip: true,
                    ..Facts::default()
                });
                debug_assert_eq!(decision.decision, Decision::SkipToNextSegment);
                if failure.check == Check::ReadError {
                    // The next segment continues the log, so the writer left this segment's
                    // rest unused: an unreadable block there is free space, reported only.
                    report.unreadable_blocks += 1;
                    if report.unreadable_runs.len() < UNREADABLE_RUNS_REPORTED {
                        report.unreadable_runs.push(UnreadableRun {
                            start: failure.position,
                            blocks: 1,
                        });
                    }
                }
                report.segments_skipped += 1;
                cursor = geometry.next_segment_start(cursor);
                continue;
            }
            let at = BreakAt {
                cut: cursor,
                expected_lsn,
                lineage_incarnation,
                failure: self.named_failure(cursor, expected_lsn, failure),
                cut_failure: failure,
            };
            match self.finish_at_break(&at, &mut report, visit)? {
                // Quarantine stepped over damage: the walk goes on at the batch after it, with
                // the lineage it had (that batch passed the floor the probe kept, at least as
                // high as the walk's).
                Some(resume) => {
                    cursor = resume.position;
                    expected_lsn = resume.first_lsn;
                }
                None => return Ok(report),
            }
        }
    }

    /// The failure a break at `cursor` names: the one found there, unless nothing was ever
    /// written there and the writer may have moved on to the next segment, whose header is
    /// damaged or does not continue the log: then the damage is there, and that is what to name.
    fn named_failure(&mut self, cursor: Position, expected_lsn: u64, failure: Failure) -> Failure {
        if failure.check.is_never_written()
            && !failure.inside_batch
            && cursor.offset != self.geometry.segment_data_offset()
            && self.writer_may_have_left_the_segment(cursor)
        {
            self.next_segment_damage(cursor, expected_lsn)
                .unwrap_or(failure)
        } else {
            failure
        }
    }

    /// Decides what the break `at` is: completes the report (`None`) or fails, or in quarantine
    /// mode, where a valid batch of the log follows the damage, records the damage (visiting
    /// what of it lies above the trim point, in LSN order) and says where the walk goes on.
    fn finish_at_break(
        &mut self,
        at: &BreakAt,
        report: &mut RecoveryReport,
        visit: &mut dyn FnMut(Visit<'_, '_>),
    ) -> Result<Option<Resume>, ReplayError> {
        let BreakAt {
            cut,
            expected_lsn,
            lineage_incarnation,
            failure,
            ..
        } = *at;
        let geometry = self.geometry;
        let trim_lsn = self.control.trim_lsn;
        let quarantine = self.mode == RecoveryMode::Quarantine;
        // The first live LSN a cut here would drop (trim LSN < u64::MAX / 2: validated).
        let drop_lsn = expected_lsn.max(trim_lsn + 1);
        // Entries (or damaged LSNs) before the cut stay live exactly when the walk went past
        // one above the trim point (every row that ends the log ends it at the cut or after,
        // with `next_lsn` at most `trim_lsn + 1` when it did not).
        let live_before_cut = expected_lsn > trim_lsn + 1;
        let end = self.break_end(cut, live_before_cut);
        // Reads ahead as the walk had them: a walk that goes on after quarantined damage reads
        // ahead as before the probe moved their stop.
        let ahead_stop = self.reader.ahead_stop;
        let (mut scan, probe_end) = self.probe_stop(cut, end);
        let mut scan_end = probe_end.max(cut);
        // In quarantine mode the damaged batch's headers are walked first, visiting nothing:
        // the batch the log may resume at lies past them and continues their LSNs.
        let walk = quarantine.then(|| self.walk_damaged(at));
        let at_break = Break {
            cut,
            expected_lsn,
            drop_lsn,
            failure,
            end,
            probe_end,
            resume: walk.as_ref().map(|walk| walk.search(at, &geometry)),
        };
        let probe = self.probe(&at_break, lineage_incarnation);
        if let Some(extended) = probe.extended_to {
            if let Scan::Hinted { probe_end, .. } = &mut scan {
                *probe_end = extended;
            }
            scan_end = extended.max(cut);
        }
        // A writer's open flushes every segment a probe looked at (a quarantined break's too).
        report.scan_end = report.scan_end.max(scan_end);
        let unread = probe
            .unreadable
            .evidence(geometry.window_bytes_max, drop_lsn, probe.lsn_max);
        // Only acknowledged entries are ever trimmed: a cut at or below the trim point drops
        // acknowledged data whatever the watermarks say.
        let trim_evidence = (expected_lsn <= trim_lsn).then_some(Evidence::TrimPoint { trim_lsn });
        let acked = probe.acked.or(trim_evidence);
        let facts = Facts {
            ok: false,
            skip: false,
            acked: acked.is_some(),
            beyond: probe.beyond.is_some(),
            unread: unread.is_some(),
            damage: failure.is_damage() || probe.records > 0,
            trunc: self.mode == RecoveryMode::TruncateAtCorruption,
            quar: quarantine,
            resume: probe.resume.is_some(),
        };
        let row = self.decide(facts);
        let decision = row.decision;
        // A writer's new incarnation must be above every record found after a break, so that
        // its cut makes them all stale the moment its control block is durable.
        report.incarnation_max = report.incarnation_max.max(probe.incarnation_max);
        let corruption = matches!(
            decision,
            Decision::FailCorruption
                | Decision::CutCorruption
                | Decision::QuarantineAndContinue
                | Decision::QuarantineAtEnd
        )
        .then(|| self.corruption_at(&failure, acked.or(probe.beyond), unread));
        // Blocks a probe could not read are reported (after those the walk found in segment
        // tails it skipped, in log order), a quarantined break's among them: one may have
        // hidden a batch the log would have resumed at.
        report.unreadable_blocks += probe.unreadable.blocks;
        let room = UNREADABLE_RUNS_REPORTED.saturating_sub(report.unreadable_runs.len());
        report
            .unreadable_runs
            .extend(probe.unreadable.runs.iter().take(room).cloned());
        if decision == Decision::QuarantineAndContinue {
            let walk = walk.expect("quarantine mode walks the damaged batch");
            let resume = probe
                .resume
                .expect("the row is taken when a batch resumes the log");
            quarantine::note_break(report, corruption.expect("a quarantine row's corruption"));
            if resume.before_walk {
                // Nothing at the cut, and the log goes on in the rest of its segment: the LSNs
                // from the cut to there are lost, and the batch walked is not the damage.
                let at_cut = DamagedWalk {
                    start: cut,
                    first: None,
                    next_lsn: expected_lsn,
                    stop: cut,
                    resume_after: cut,
                    end: cut,
                    header_failure: Some(at.cut_failure),
                    walked: None,
                };
                self.note_lost(at, &at_cut, expected_lsn..resume.first_lsn, report, visit);
            } else {
                // The damaged batch, visited: its intact records are live entries, its records
                // whose header survived are damage with that header.
                self.visit_walked(&walk, at, report, visit);
                // From the first header lost to the batch the log resumes at, nothing is known
                // of the LSNs but that they were there.
                self.note_lost(at, &walk, walk.next_lsn..resume.first_lsn, report, visit);
            }
            self.reader.ahead_stop = ahead_stop;
            return Ok(Some(resume));
        }
        report.end_row = row.label;
        report.end_check = failure.check;
        report.row_hits = self.row_hits;
        report.scan = scan;
        report.stale_records = probe.stale_records;
        report.next_lsn = expected_lsn;
        report.next_position = cut;
        report.cut = cut;
        // End of what was found after the cut: the failing block, and every record seen.
        let block = geometry.block_size_bytes;
        let failure_end = Position {
            offset: (failure.position.offset / block + 1) * block,
            ..failure.position
        };
        let mut found_end = if failure.is_damage() {
            failure_end.max(cut)
        } else {
            cut
        };
        if let Some(end) = probe.end_max {
            found_end = found_end.max(end);
        }
        // An unreadable run at the break is cut with it (or, as corruption, dropped with it).
        if let Some(run) = probe.unreadable.first_run {
            if run.at_break || unread.is_some() {
                found_end = found_end.max(run.end);
            }
        }
        let found_bytes = geometry.distance_bytes(cut, found_end);
        let last_lsn = probe.lsn_max.max(expected_lsn);
        // Where the region a writer zeroes after the log's end stops (see `break_end`).
        let mut invalidate_limit = at_break.end;
        match decision {
            Decision::EndOfLog => {
                report.outcome = Outcome::Clean;
            }
            Decision::CutTornTail => {
                report.outcome = Outcome::TornTail;
                report.torn = Some(TornTail {
                    start: cut,
                    first_lsn: expected_lsn,
                    last_lsn,
                    bytes: found_bytes,
                    check: failure.check,
                });
            }
            Decision::FailCorruption => {
                let corruption = corruption.expect("a corruption row's corruption");
                return Err(ReplayError::Corruption(Box::new(corruption)));
            }
            Decision::CutCorruption => {
                report.outcome = Outcome::Truncated;
                report.corruption = corruption;
                report.dropped = Some(Dropped {
                    first_lsn: drop_lsn,
                    // A cut at or below the trim point, with nothing seen past it: the range
                    // starts and ends at the first LSN dropped, as the field's doc says.
                    last_lsn: last_lsn.max(drop_lsn),
                    bytes: found_bytes,
                });
                // Never hand out an LSN at or below the durable trim point again: when the cut
                // is at or below it, the log goes on at the cut with the LSN after the trim
                // point (nothing before the cut is live, so the head moves to the cut).
                report.next_lsn = expected_lsn.max(trim_lsn + 1);
            }
            Decision::QuarantineAtEnd => {
                let walk = walk.expect("quarantine mode walks the damaged batch");
                let corruption = corruption.expect("a quarantine row's corruption");
                quarantine::note_break(report, corruption);
                self.visit_walked(&walk, at, report, visit);
                // The writer goes on after everything of the log found (the damaged batch,
                // the failing block, every valid record), so nothing of the damage (nor the
                // records that proved it acknowledged) is overwritten or zeroed, and the next
                // open finds it again. Not after an unreadable run's whole extent: a hinted
                // probe sees less of it than a full one, and both must end the log alike.
                let mut log_end = if failure.is_damage() {
                    failure_end.max(cut)
                } else {
                    cut
                };
                log_end = log_end.max(probe.end_max.unwrap_or(cut)).max(walk.end);
                // No batch of the log follows: the damage runs to the highest LSN shown to be
                // acknowledged, and no LSN after it ever was. A watermark found after the
                // break, or the trim point, shows exactly how far; a valid record beyond the
                // window, or a readable one after unreadable blocks, shows the LSNs before it
                // were written; a run of unreadable blocks longer than the window shows only
                // the LSN strict mode names. Never more than the records between the break
                // and the writer's next position could hold (`room`), so neither a crafted
                // LSN nor a crafted trim point makes a range past the ring's size.
                let room = (expected_lsn - 1).saturating_add(
                    geometry.distance_bytes(cut, log_end) / ENTRY_HEADER_SIZE as u64,
                );
                let evidence_shows = match corruption.evidence {
                    Evidence::WatermarkCovers { .. }
                    | Evidence::TrimPoint { .. }
                    | Evidence::Unreadable {
                        log_after: None, ..
                    } => 0,
                    Evidence::BeyondWindow { lsn, .. } => lsn.saturating_sub(1),
                    Evidence::Unreadable {
                        log_after: Some(_),
                        last_lsn,
                        ..
                    } => last_lsn.map_or(0, |last| last.saturating_sub(1)),
                };
                let trim_shown = trim_evidence.map_or(0, |_| trim_lsn);
                let shown = evidence_shows
                    .max(probe.acked_lsn_max)
                    .max(trim_shown)
                    .max(corruption.lsn)
                    .min(room)
                    .max(walk.next_lsn - 1);
                self.note_lost(at, &walk, walk.next_lsn..shown + 1, report, visit);
                report.outcome = Outcome::Quarantined;
                // `shown` is at most `room`, far below u64::MAX (the walk's LSNs are, see
                // `validate_control`), or the LSN before the walk's next one.
                report.next_lsn = (shown + 1).max(trim_lsn + 1);
                // With nothing of the log above the trim point (the damage all trimmed), the
                // log ends at the break as any cut does: the writer's head moves there.
                let live = report.next_lsn > trim_lsn + 1;
                report.next_position = if live {
                    self.batch_boundary_at(log_end)
                } else {
                    cut
                };
                // The skipped stretch becomes stale with the new incarnation, from where a batch
                // resuming the log was looked for (the damaged batch's end, or the block after
                // its first when none of its headers passed): the damaged batch itself stays as
                // it was found, so a later open walks it and names it the same.
                report.cut = if live {
                    walk.resume_after.min(report.next_position)
                } else {
                    report.next_position
                };
                // The plan keeps the head while anything is live, the walk's records in the
                // damaged batch included, though none lay before the break.
                invalidate_limit = self.break_end(report.next_position, live);
                found_end = found_end.max(log_end);
            }
            Decision::Accept | Decision::SkipToNextSegment | Decision::QuarantineAndContinue => {
                unreachable!("a break is never a row that continues the walk here")
            }
        }
        if report.outcome != Outcome::Clean || probe.stale_records > 0 {
            let start = report.next_position;
            let dirty_end = found_end
                .max(probe.stale_end_max.unwrap_or(start))
                .max(start);
            report.invalidate = Some(self.invalidate_region(start, dirty_end, invalidate_limit));
        }
        // `next_lsn > trim_lsn + 1 >= 1` whenever `first_lsn` is set: no underflow.
        report.first_lsn = (report.next_lsn > report.trim_lsn + 1).then_some(report.trim_lsn + 1);
        report.last_lsn = report.first_lsn.map(|_| report.next_lsn - 1);
        Ok(None)
    }

    /// The corruption a row that ends in failure (or salvage, or quarantine) names: the failed
    /// check with the evidence that it held acknowledged data, or the unreadable run.
    fn corruption_at(
        &self,
        failure: &Failure,
        evidence: Option<Evidence>,
        unread: Option<Evidence>,
    ) -> Corruption {
        let geometry = self.geometry;
        match (evidence, unread) {
            (Some(evidence), _) => Corruption {
                position: failure.position,
                ring_offset: geometry.ring_offset(failure.position),
                lsn: failure.lsn,
                check: failure.check,
                evidence,
            },
            // Nothing else is wrong: the unreadable run is what the row names.
            (None, Some(evidence @ Evidence::Unreadable { at, first_lsn, .. })) => Corruption {
                position: at,
                ring_offset: geometry.ring_offset(at),
                lsn: first_lsn,
                check: Check::ReadError,
                evidence,
            },
            (None, _) => unreachable!("a corruption row has evidence"),
        }
    }

    /// The batch boundary at or after `at` (a block boundary the scan found): the next
    /// segment's first data block when `at` is its segment's end, the segment's first data
    /// block when it is inside the header block.
    fn batch_boundary_at(&self, at: Position) -> Position {
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

    /// Walks the damaged batch at the break `at` record by record (quarantine mode): from its
    /// first data block (the cut, or the first data block of the segment whose header failed),
    /// when its first header passes, every record is checked alone ([`validate::walk_batch`]).
    /// The batch is read once and kept in what this returns, which says where damage without a
    /// header begins and where the log may resume; [`Scanner::visit_walked`] visits it from
    /// those bytes, so what is visited is exactly what was walked (a device may answer a read
    /// differently the second time).
    fn walk_damaged(&mut self, at: &BreakAt) -> DamagedWalk {
        let geometry = self.geometry;
        let failure = at.failure;
        let start = if failure.position.offset == 0 {
            Position {
                offset: geometry.segment_data_offset(),
                ..failure.position
            }
        } else {
            at.cut
        };
        let block = geometry.block_size_bytes;
        // A block inside its segment, so its end fits the segment's u32 offsets.
        let after_first_block = Position {
            offset: start.offset + block,
            ..start
        };
        // Nothing of the log lies in the head's segment on the next lap (see `run`).
        let forbidden = geometry.linear_segment(start) >= geometry.linear_segment(self.probe_end());
        let headerless = |failure: BatchFailure| DamagedWalk {
            start,
            first: None,
            next_lsn: at.expected_lsn,
            stop: start,
            resume_after: after_first_block,
            end: after_first_block,
            header_failure: Some(failure),
            walked: None,
        };
        let expect = self.expectation(start, at.expected_lsn, at.lineage_incarnation);
        let ring_offset = geometry.ring_offset(start);
        let limit = self.segment_end(start);
        let first = match self.reader.read(ring_offset, block as usize, limit) {
            _ if forbidden => Err(failure),
            Ok(bytes) => validate::check_batch_start(&expect, bytes),
            Err(_) => Err(BatchFailure {
                position: start,
                lsn: at.expected_lsn,
                check: Check::ReadError,
                inside_batch: false,
            }),
        };
        let first = match first {
            Ok(first) => first,
            Err(failure) => return headerless(failure),
        };
        let batch_bytes = first.batch_bytes;
        let (bytes, holes) = self.read_with_holes(ring_offset, batch_bytes as usize, limit);
        let walked = WalkedBatch {
            expect,
            first,
            bytes,
            holes,
        };
        let end = walked.walk(&mut |_| {});
        // The batch lies inside its segment (`check_batch_start`): its end fits a u32.
        let batch_end = Position {
            offset: start.offset + batch_bytes,
            ..start
        };
        DamagedWalk {
            start,
            first: Some(first),
            next_lsn: end.next_lsn,
            stop: end
                .header_failure
                .map_or(batch_end, |failure| failure.position),
            resume_after: batch_end,
            end: batch_end,
            header_failure: end.header_failure,
            walked: Some(walked),
        }
    }

    /// Visits what [`Scanner::walk_damaged`] walked: intact records above the trim point are
    /// counted and visited as live entries, records whose header survived as damage.
    fn visit_walked(
        &self,
        walk: &DamagedWalk,
        at: &BreakAt,
        report: &mut RecoveryReport,
        visit: &mut dyn FnMut(Visit<'_, '_>),
    ) {
        let Some(walked) = &walk.walked else {
            return;
        };
        let geometry = self.geometry;
        let trim_lsn = self.control.trim_lsn;
        let start = walk.start;
        let batch_bytes = walked.first.batch_bytes;
        let incarnation = walked.first.incarnation;
        walked.walk(&mut |record| match record {
            WalkedRecord::Intact(record) if record.lsn > trim_lsn => {
                report.entries += 1;
                report.payload_bytes += record.payload.len() as u64;
                visit(Visit::Entry(&Entry {
                    lsn: record.lsn,
                    kind: record.kind,
                    embedder: record.embedder,
                    payload: record.payload,
                    position: record.position,
                    batch: start,
                    batch_first_lsn: at.expected_lsn,
                    batch_bytes,
                    incarnation: record.incarnation,
                }));
            }
            WalkedRecord::PayloadDamaged {
                position,
                check,
                header,
            } if header.lsn > trim_lsn => {
                quarantine::note_damaged(
                    report,
                    DamagedRange {
                        first_lsn: header.lsn,
                        last_lsn: header.lsn,
                        position,
                        ring_offset: geometry.ring_offset(position),
                        check,
                        header_known: true,
                    },
                );
                visit(Visit::Damaged(&Damaged {
                    first_lsn: header.lsn,
                    last_lsn: header.lsn,
                    position,
                    check,
                    header: Some(DamagedHeader {
                        kind: header.kind,
                        embedder: header.embedder,
                        payload_len: header.payload_len,
                        payload_crc: header.payload_crc,
                    }),
                    batch: start,
                    batch_first_lsn: at.expected_lsn,
                    incarnation,
                }));
            }
            // Below the trim point: released, neither visited nor reported.
            WalkedRecord::Intact(_) | WalkedRecord::PayloadDamaged { .. } => {}
        });
    }

    /// Reads `len` bytes at `ring_offset` (inside the segment ending at `limit`, at most a
    /// chunk): whole when it can, else block by block, the blocks that cannot be read left as
    /// zeros and named (as byte ranges of what is returned).
    fn read_with_holes(
        &mut self,
        ring_offset: u64,
        len: usize,
        limit: u64,
    ) -> (Vec<u8>, Vec<Range<usize>>) {
        if let Ok(bytes) = self.reader.read(ring_offset, len, limit) {
            return (bytes.to_vec(), Vec::new());
        }
        let block = self.geometry.block_size_bytes as usize;
        let mut bytes = vec![0u8; len];
        let mut holes = Vec::new();
        for from in (0..len).step_by(block) {
            let to = (from + block).min(len);
            match self
                .reader
                .read(ring_offset + from as u64, to - from, limit)
            {
                Ok(read) => bytes[from..to].copy_from_slice(read),
                Err(_) => holes.push(from..to),
            }
        }
        (bytes, holes)
    }

    /// Records the LSNs `lsns` (those above the trim point) as one range lost with its headers,
    /// and visits it: where the damaged batch's first header that failed is (its first one,
    /// which may be the break's own failure, or a read error behind a failed segment header),
    /// or the boundary after the damaged batch (an LSN gap) when every header of it passed
    /// (batches lost whole).
    fn note_lost(
        &mut self,
        at: &BreakAt,
        walk: &DamagedWalk,
        lsns: Range<u64>,
        report: &mut RecoveryReport,
        visit: &mut dyn FnMut(Visit<'_, '_>),
    ) {
        let first_lsn = lsns.start.max(self.control.trim_lsn + 1);
        if first_lsn >= lsns.end {
            return;
        }
        let last_lsn = lsns.end - 1;
        let (position, check) = match (walk.first, walk.header_failure) {
            (_, Some(failure)) => (failure.position, failure.check),
            (None, None) => (at.failure.position, at.failure.check),
            // Every header of the damaged batch passed: the LSNs after it are missing from the
            // boundary after it on. Named as such, not by what lies there now: a writer that
            // goes on after quarantined damage at the log's end writes there, and a later open
            // must name the same damage.
            (Some(first), None) => (
                self.after_batch(walk.start, first.batch_bytes),
                Check::LsnGap,
            ),
        };
        let (batch, incarnation) = match walk.first {
            Some(first) => (walk.start, first.incarnation),
            None => (at.cut, at.lineage_incarnation),
        };
        quarantine::note_damaged(
            report,
            DamagedRange {
                first_lsn,
                last_lsn,
                position,
                ring_offset: self.geometry.ring_offset(position),
                check,
                header_known: false,
            },
        );
        visit(Visit::Damaged(&Damaged {
            first_lsn,
            last_lsn,
            position,
            check,
            header: None,
            batch,
            batch_first_lsn: at.expected_lsn,
            incarnation,
        }));
    }

    /// Which scan this is and where its probe after the break at `cut` stops: at `end` (the
    /// full scan's stop, [`Scanner::break_end`]) unless the tail hint is trusted and the log
    /// did not run past it; then at the latest of the hint's limit, one in-flight window past
    /// the cut ([`Scanner::window_reach`]) and the first hint a writer opening at this cut
    /// records ([`crate::layout::WriteCursor::hint_limit`]), never past `end`. The last one
    /// makes a replay after a crash in the middle of that writer's recovery (its control block
    /// durable, nothing written yet) probe no further than this one did, so it finds nothing
    /// this one did not (rule 5, even for a ring crafted with records past the hint). Reads
    /// ahead stop there too.
    fn probe_stop(&mut self, cut: Position, end: Position) -> (Scan, Position) {
        let limit = match self.hint {
            Ok(limit) if cut > limit => {
                return (
                    Scan::Full {
                        reason: FullScan::HintCrossed {
                            limit,
                            log_end: cut,
                        },
                    },
                    end,
                );
            }
            Ok(limit) => limit,
            Err(reason) => return (Scan::Full { reason }, end),
        };
        let next_hint = WriteCursor {
            position: cut,
            next_lsn: 0,
        }
        .hint_limit(&self.geometry);
        let probe_end = limit
            .max(self.window_reach(cut, end))
            .max(next_hint)
            .min(end);
        if probe_end < end {
            self.read_ahead_until(probe_end);
        } else {
            self.reader.ahead_stop = None;
        }
        (Scan::Hinted { limit, probe_end }, probe_end)
    }

    /// How far an in-flight window reaches from `from`: the window's bytes walked forward
    /// segment by segment, with the probe's allowance per segment change (a skipped segment
    /// tail and a segment header), never past `limit`. A record whose end lies within the
    /// window's allowance from `from` ([`Scanner::account`]) starts before this position.
    fn window_reach(&self, from: Position, limit: Position) -> Position {
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

    /// The region after a cut that may hold bytes of this log: everything found, then an
    /// in-flight window (with room for segment changes) past it, never past `limit` (where a
    /// full scan's probe stops: [`Scanner::break_end`]; a hinted scan invalidates as far, so
    /// both plan the same writes).
    fn invalidate_region(&self, cut: Position, found_end: Position, limit: Position) -> Invalidate {
        // The writer's in-flight window at the crash ended its writes after the last record
        // found (in truncating mode that can be far past the cut): cover a window from there.
        let end = self.window_reach(found_end.max(cut), limit);
        let end = end.max(found_end).min(limit);
        Invalidate {
            start: cut,
            end: end.max(cut),
        }
    }

    /// The oldest incarnation accepted at `at`: the lineage so far, and at or after the last
    /// recovery's cut, the incarnation that recovery began (so a crash in the middle of
    /// recovery, before the region after the cut was zeroed, finds the same log).
    fn incarnation_floor(&self, at: Position, lineage_incarnation: u32) -> u32 {
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
    fn writer_may_have_left_the_segment(&self, cursor: Position) -> bool {
        let room = self.geometry.segment_size_bytes - u64::from(cursor.offset);
        room < u64::from(self.geometry.batch_size_max_bytes)
    }

    /// The head's segment on the next lap: the writer never enters it, so the walk stops there.
    fn probe_end(&self) -> Position {
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
    fn break_end(&self, cut: Position, live_before_cut: bool) -> Position {
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

    /// The failure of the segment header after `cursor`'s segment, when it is damaged or
    /// unreadable, or is of the expected lap and segment but does not start at `expected_lsn`.
    fn next_segment_damage(&mut self, cursor: Position, expected_lsn: u64) -> Option<Failure> {
        let next = self.geometry.next_segment_start(cursor);
        if next > self.probe_end() {
            return None;
        }
        let header_position = Position { offset: 0, ..next };
        let check = match self.read_segment_header(next) {
            Err(Check::SegmentHeader) => Check::SegmentHeader,
            // An unreadable header may be the one the writer skipped to: the break is there,
            // and the probe decides whether the log goes on behind it (corruption) or not (a
            // torn block at most). Taking it for "not written" would cut whatever follows.
            Err(Check::ReadError) => Check::ReadError,
            Ok(header)
                if header.lap == next.lap
                    && header.segment == next.segment
                    && header.first_lsn != expected_lsn =>
            {
                Check::SegmentMismatch
            }
            _ => return None,
        };
        Some(Failure {
            position: header_position,
            lsn: expected_lsn,
            check,
            inside_batch: false,
        })
    }

    /// Whether the segment after `cursor`'s starts, on the expected lap, at `expected_lsn`,
    /// with a header written by an incarnation the log accepts at the header's own place (the
    /// floor [`Scanner::incarnation_floor`] keeps there).
    ///
    /// The incarnation matters: a segment header is written with the segment's first batch,
    /// so one left by an older incarnation that a recovery cut short (its batch torn, the
    /// header not: a clean end zeroes nothing) can name the very LSN the newer incarnation
    /// goes on with in the rest of this segment. Taken as the log's continuation, it made the
    /// walk step over this segment's rest, and a damaged batch there, acknowledged and covered
    /// by the watermarks of valid batches after it in this segment, read as a clean end: the
    /// probe started in the next segment, after them (rule 4). Such a header is stale, as
    /// every record of its incarnation there is.
    ///
    /// The floor is taken at the header block (offset 0), not at the segment's first batch: a
    /// recovery that skipped to this segment and found nothing more puts its cut at that
    /// batch, after the header it accepted, so the cut's incarnation is no floor for the
    /// header, and a crash right after that recovery's control block skips here again
    /// (rule 5).
    fn next_segment_continues(
        &mut self,
        cursor: Position,
        expected_lsn: u64,
        lineage_incarnation: u32,
    ) -> bool {
        let next = self.geometry.next_segment_start(cursor);
        if next > self.probe_end() {
            return false;
        }
        let floor = self.incarnation_floor(Position { offset: 0, ..next }, lineage_incarnation);
        matches!(self.read_segment_header(next), Ok(header)
            if header.lap == next.lap
                && header.segment == next.segment
                && header.first_lsn == expected_lsn
                && header.incarnation >= floor)
    }

    fn read_segment_header(&mut self, first_data: Position) -> Result<SegmentHeader, Check> {
        let block = self.geometry.block_size_bytes;
        let offset = self.geometry.segment_ring_offset(first_data.segment);
        let limit = offset + u64::from(block);
        debug_assert!(limit <= self.reader.source.size_bytes());
        let bytes = self
            .reader
            .read_aside(offset, block as usize)
            .map_err(|_| Check::ReadError)?;
        SegmentHeader::decode(self.ring_id, bytes).map_err(|defect| match defect {
            SegmentDefect::Zeroed => Check::SegmentNotStarted,
            SegmentDefect::Magic | SegmentDefect::Version | SegmentDefect::Crc => {
                Check::SegmentHeader
            }
        })
    }

    /// Checks the whole batch at `cursor`: every rule a batch must keep to be part of the log.
    /// The segment header and the incarnation floor are replay's; everything about the batch
    /// itself is the one validator's ([`crate::validate`]).
    fn check_batch(
        &mut self,
        cursor: Position,
        expected_lsn: u64,
        lineage_incarnation: u32,
    ) -> Result<GoodBatch, Failure> {
        let first = self.check_batch_head(cursor, expected_lsn, lineage_incarnation)?;
        let expect = self.expectation(cursor, expected_lsn, lineage_incarnation);
        self.check_records(&expect, first.batch_bytes)
    }

    /// Checks the start of the batch at `cursor`: its segment header, when it starts a
    /// segment, and its first record's header, as [`Scanner::check_batch`] does before it
    /// reads the rest. Returns that header.
    fn check_batch_head(
        &mut self,
        cursor: Position,
        expected_lsn: u64,
        lineage_incarnation: u32,
    ) -> Result<EntryHeader, Failure> {
        let geometry = self.geometry;
        let fail = |position, lsn, check| Failure {
            position,
            lsn,
            check,
            inside_batch: false,
        };
        let header_position = Position {
            offset: 0,
            ..cursor
        };
        let segment_header = if cursor.offset == geometry.segment_data_offset() {
            let header = self
                .read_segment_header(cursor)
                .map_err(|check| fail(header_position, expected_lsn, check))?;
            if header.segment == cursor.segment && header.lap < cursor.lap {
                return Err(fail(header_position, expected_lsn, Check::SegmentStaleLap));
            }
            if header.segment != cursor.segment
                || header.lap != cursor.lap
                || header.first_lsn != expected_lsn
            {
                return Err(fail(header_position, expected_lsn, Check::SegmentMismatch));
            }
            Some(header)
        } else {
            None
        };
        let expect = self.expectation(cursor, expected_lsn, lineage_incarnation);
        let ring_offset = geometry.ring_offset(cursor);
        let limit = self.segment_end(cursor);
        let block = geometry.block_size_bytes as usize;
        let first = match self.reader.read(ring_offset, block, limit) {
            Ok(bytes) => validate::check_batch_start(&expect, bytes)?,
            Err(_) => return Err(fail(cursor, expected_lsn, Check::ReadError)),
        };
        if segment_header.is_some_and(|header| header.incarnation != first.incarnation) {
            return Err(fail(header_position, expected_lsn, Check::SegmentMismatch));
        }
        Ok(first)
    }

    /// What the validator expects of the batch at `cursor`: replay's incarnation floor there.
    fn expectation(
        &self,
        cursor: Position,
        expected_lsn: u64,
        lineage_incarnation: u32,
    ) -> BatchExpectation {
        BatchExpectation {
            ring_id: self.ring_id,
            geometry: self.geometry,
            position: cursor,
            first_lsn: expected_lsn,
            incarnation: IncarnationRule::AtLeast(
                self.incarnation_floor(cursor, lineage_incarnation),
            ),
        }
    }

    /// Reads the batch whose first header checked out (`batch_bytes` long, within the batch
    /// limit) and checks it whole.
    fn check_records(
        &mut self,
        expect: &BatchExpectation,
        batch_bytes: u32,
    ) -> Result<GoodBatch, Failure> {
        let geometry = self.geometry;
        let cursor = expect.position;
        let ring_offset = geometry.ring_offset(cursor);
        let limit = self.segment_end(cursor);
        let batch_bytes = batch_bytes as usize;
        if self.reader.read(ring_offset, batch_bytes, limit).is_err() {
            // Find the unreadable block so the report names it (I-13: subdivide).
            let block = geometry.block_size_bytes as usize;
            let bad = (0..batch_bytes / block)
                .find(|index| {
                    let offset = ring_offset + (index * block) as u64;
                    self.reader.read(offset, block, limit).is_err()
                })
                .unwrap_or(0);
            return Err(Failure {
                position: Position {
                    // Inside the batch, itself inside the segment: fits u32.
                    offset: cursor.offset + (bad * block) as u32,
                    ..cursor
                },
                lsn: expect.first_lsn,
                check: Check::ReadError,
                inside_batch: true,
            });
        }
        let bytes = self
            .reader
            .read(ring_offset, batch_bytes, limit)
            .expect("just read");
        let checked = validate::check_batch(expect, bytes)?;
        Ok(GoodBatch {
            first_lsn: checked.first_lsn,
            bytes: checked.bytes,
            records: checked.records,
            incarnation: checked.incarnation,
            watermark: checked.watermark,
        })
    }

    /// Hands every live record of an accepted batch to `visit` and counts it.
    fn visit_batch(
        &mut self,
        cursor: Position,
        good: GoodBatch,
        trim_lsn: u64,
        report: &mut RecoveryReport,
        visit: &mut dyn FnMut(Visit<'_, '_>),
    ) {
        self.for_each_record(cursor, good, &mut |entry| {
            if entry.lsn > trim_lsn {
                report.entries += 1;
                report.payload_bytes += entry.payload.len() as u64;
                visit(Visit::Entry(entry));
            }
        });
    }

    /// Calls `each` with every record (padding excluded) of a batch that checked out, through
    /// the validator's record iterator over the bytes the reader still holds.
    fn for_each_record(
        &mut self,
        cursor: Position,
        good: GoodBatch,
        each: &mut dyn FnMut(&Entry<'_>),
    ) {
        let ring_offset = self.geometry.ring_offset(cursor);
        let limit = self.segment_end(cursor);
        let ring_id = self.ring_id;
        let bytes = self
            .reader
            .read(ring_offset, good.bytes as usize, limit)
            .expect("cached");
        let first_lsn = good.first_lsn;
        let batch = CheckedBatch::rechecked_from(
            ring_id,
            bytes,
            cursor,
            first_lsn,
            good.records,
            good.incarnation,
            good.watermark,
        );
        for record in batch.records() {
            each(&Entry {
                lsn: record.lsn,
                kind: record.kind,
                embedder: record.embedder,
                payload: record.payload,
                position: record.position,
                batch: cursor,
                batch_first_lsn: first_lsn,
                batch_bytes: good.bytes,
                incarnation: record.incarnation,
            });
        }
    }

    /// The batch boundary after a batch of `bytes` at `cursor`.
    fn after_batch(&self, cursor: Position, bytes: u32) -> Position {
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

    /// Reads every block from the break `cut` to `end` ([`Scanner::break_end`]) and collects
    /// what valid records of this log say about the break. Records are packed at any byte
    /// offset, so each block is searched for the entry magic at every offset (including a
    /// header that runs into the next block); a hit counts only if its header checks out and
    /// records exactly the place it was found. One pass, linear in the bytes probed.
    fn probe(&mut self, at_break: &Break, mut lineage_incarnation: u32) -> Probe {
        let Break {
            cut,
            expected_lsn,
            drop_lsn,
            failure,
            probe_end: mut end,
            end: full_end,
            resume: resume_search,
        } = *at_break;
        let geometry = self.geometry;
        let block = geometry.block_size_bytes;
        let ring_id = self.ring_id;
        let payload_max = u64::from(geometry.payload_size_max_bytes());
        let magic = ENTRY_MAGIC.to_le_bytes();
        let finder = memchr::memmem::Finder::new(&magic);
        let mut probe = Probe::default();
        let mut batches = BatchCounter::default();
        let mut unreadable = UnreadableTracker::new(&failure, geometry);
        // The batch broken at the break: its own records after an unreadable block of it are
        // not "the log going on" (the failure is in the batch, not in a segment header).
        let broken_batch = (failure.position.offset != 0).then_some(expected_lsn);
        let mut found: Vec<(Position, EntryHeader)> = Vec::new();
        let mut at = cut;
        while at < end {
            if u64::from(at.offset) >= geometry.segment_size_bytes {
                at = geometry.next_segment_start(at);
                // The next segment's header: an unreadable one is part of what the log may
                // need (the writer may have moved on to it), so it counts in the runs; a
                // readable one is skipped over as before (records never lie in it).
                let header = Position { offset: 0, ..at };
                let already_named = failure.check == Check::ReadError && failure.position == header;
                if at < end && !already_named {
                    let header_offset = geometry.ring_offset(header);
                    if self
                        .reader
                        .read_aside(header_offset, block as usize)
                        .is_err()
                    {
                        unreadable.unreadable_header(header);
                    }
                }
                continue;
            }
            let here = at;
            at.offset += block;
            let ring_offset = geometry.ring_offset(here);
            let limit = self.segment_end(here);
            let span = (2 * u64::from(block)).min(limit - ring_offset) as usize;
            // Read this block and the next (for straddling headers); if that fails, this block
            // alone; if that fails too, the block is unreadable. A source may fail a read once
            // and serve it the next time (or the other way round), so the bytes come from the
            // one read that succeeded, which the chunk buffer now holds.
            let len = if self.reader.read(ring_offset, span, limit).is_ok() {
                span
            } else if self.reader.read(ring_offset, block as usize, limit).is_ok() {
                block as usize
            } else {
                unreadable.unreadable(here);
                continue;
            };
            let Ok(bytes) = self.reader.read(ring_offset, len, limit) else {
                unreadable.unreadable(here);
                continue;
            };
            unreadable.readable();
            found.clear();
            for offset in finder.find_iter(bytes) {
                if offset >= block as usize {
                    break;
                }
                if offset + ENTRY_HEADER_SIZE > bytes.len() {
                    continue;
                }
                let Ok(header) = EntryHeader::decode(ring_id, &bytes[offset..]) else {
                    continue;
                };
                let place = Position {
                    offset: here.offset + offset as u32,
                    ..here
                };
                if header.position == place && u64::from(header.payload_len) <= payload_max {
                    found.push((place, header));
                }
            }
            for (place, header) in found.drain(..) {
                // Rule 2: a record of an older incarnation found after a newer one's (or at or
                // after the last recovery's cut) is stale. So is a record below the LSN the log
                // expects at the break: every record this log, or a writer after it, put past
                // the break carries that LSN or a later one (a writer's LSNs only grow along
                // the ring, and a recovery's writer goes on from its cut's LSN; a padding
                // record carries the LSN after its batch's records), so a lower one is left
                // from before, or crafted, and proves nothing about the log's end. (A
                // crafted record of the next writer's incarnation with an old LSN, a window
                // past where one open's probe stopped, made the open after that writer's
                // first block fail as corrupt.)
                let below_the_log = header.lsn < expected_lsn;
                if below_the_log
                    || header.incarnation < self.incarnation_floor(place, lineage_incarnation)
                {
                    probe.stale_records += 1;
                    let stale_end = self.record_end(place, &header);
                    probe.stale_end_max = probe.stale_end_max.max(Some(stale_end));
                    continue;
                }
                lineage_incarnation = header.incarnation;
                probe.incarnation_max = probe.incarnation_max.max(header.incarnation);
                if broken_batch != Some(header.batch_first_lsn()) {
                    unreadable.log_goes_on(place);
                }
                self.account(cut, drop_lsn, place, &header, &mut batches, &mut probe);
                let fits = lsns_fit(
                    header.lsn.saturating_sub(expected_lsn),
                    geometry.distance_bytes(cut, place),
                );
                if fits && header.watermark < header.batch_first_lsn() {
                    probe.acked_lsn_max = probe.acked_lsn_max.max(header.watermark);
                }
                if let Some(search) = resume_search.filter(|_| probe.resume.is_none()) {
                    // The first batch start past the damage that checks out whole (segment
                    // header and floor included, as the walk will check it) is where the log
                    // resumes. Found in position order, so a hinted and a full probe, which
                    // find the same valid records of this log, resume at the same one.
                    // Batches start on block boundaries, never in the head's segment on the
                    // next lap (the writer never enters it).
                    let early = search.at_start == Some(place)
                        || search
                            .early
                            .is_some_and(|(from, until)| place >= from && place < until);
                    let (from_lsn, stop) = if early {
                        (search.expected_lsn, search.cut)
                    } else {
                        (search.next_lsn, search.stop)
                    };
                    let candidate = header.batch_index == 0
                        && place.offset % block == 0
                        && (early || place >= search.after)
                        && place < self.probe_end()
                        && header.lsn >= from_lsn
                        && lsns_fit(header.lsn - from_lsn, geometry.distance_bytes(stop, place));
                    // A batch start whose segment header and first header check out (as the
                    // walk checks them) resumes the log, whether the rest of the batch does or
                    // not: where it does not, the walk breaks there again and steps over that
                    // damage too (its intact records served, the read error or the damaged
                    // payload named), rather than folding a batch that is not lost whole into
                    // this range.
                    if candidate
                        && self
                            .check_batch_head(place, header.lsn, lineage_incarnation)
                            .is_ok()
                    {
                        probe.resume = Some(Resume {
                            position: place,
                            first_lsn: header.lsn,
                            before_walk: early,
                        });
                    }
                }
                // A hinted probe follows the log past its end: a valid record of this log
                // found within a window of that end may be followed by more, which a hint
                // lost by a lying drive (its write dropped, a later hole hiding that the log
                // ran past it) would otherwise hide; so the probe reads on to a window past
                // every such record. A full scan's end is never passed. The writer never
                // ends a batch past a durable hint, so on an honest drive this reads at most
                // one window more, and only when the log's last batches lie at the hint.
                let reach = self.window_reach(self.record_end(place, &header), full_end);
                if reach > end {
                    end = reach;
                    probe.extended_to = Some(end);
                    if end < full_end {
                        self.read_ahead_until(end);
                    } else {
                        self.reader.ahead_stop = None;
                    }
                }
            }
        }
        probe.unreadable = unreadable.finish();
        probe
    }

    /// The block boundary at or after the end of a record (header plus payload), inside its
    /// segment.
    fn record_end(&self, at: Position, header: &EntryHeader) -> Position {
        let geometry = self.geometry;
        let block = u64::from(geometry.block_size_bytes);
        let end = (u64::from(at.offset) + header.record_bytes()).div_ceil(block) * block;
        Position {
            offset: u32::try_from(end.min(geometry.segment_size_bytes)).expect("inside a segment"),
            ..at
        }
    }

    /// Records what one valid record found after the break says: its LSN and extent, whether
    /// its watermark covers the first LSN a cut would drop, and whether it lies beyond the
    /// in-flight window (in bytes, allowing for segment changes, or in batches).
    fn account(
        &self,
        cut: Position,
        drop_lsn: u64,
        at: Position,
        header: &EntryHeader,
        batches: &mut BatchCounter,
        probe: &mut Probe,
    ) {
        let geometry = self.geometry;
        probe.records += 1;
        let record_end = self.record_end(at, header);
        probe.end_max = probe.end_max.max(Some(record_end));
        if header.kind.consumes_lsn() {
            probe.lsn_max = probe.lsn_max.max(header.lsn);
        }
        if header.watermark >= drop_lsn && probe.acked.is_none() {
            probe.acked = Some(Evidence::WatermarkCovers {
                watermark: header.watermark,
                at,
                lsn: header.lsn,
            });
        }
        let window_batches = u64::from(geometry.window_batches_max);
        let batch_count = batches.note(header.batch_first_lsn(), header.incarnation);
        let distance_bytes = geometry.distance_bytes(cut, record_end);
        let crossings = geometry.linear_segment(record_end) - geometry.linear_segment(cut);
        let slack_per_segment =
            u64::from(geometry.batch_size_max_bytes) + u64::from(geometry.block_size_bytes);
        let allowance = geometry
            .window_bytes_max
            .saturating_add(crossings.saturating_mul(slack_per_segment));
        if (distance_bytes > allowance || batch_count > window_batches) && probe.beyond.is_none() {
            probe.beyond = Some(Evidence::BeyondWindow {
                at,
                lsn: header.lsn,
                distance_bytes,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::BatchCounter;

    /// The probe's window bookkeeping is a fixed-size value: however many batches it counts, it
    /// holds no list to search (the old `Vec::contains` made a crafted window of u32::MAX
    /// batches cost O(records x batches)). It counts exactly the changes of batch identity.
    #[test]
    fn the_probe_counts_window_batches_in_constant_space() {
        const _: () = assert!(std::mem::size_of::<BatchCounter>() <= 32);
        let mut counter = BatchCounter::default();
        let mut last = 0;
        // 200,000 records in 50,000 batches of four, then one more record of the last batch.
        for record in 0..200_000u64 {
            last = counter.note(1 + record / 4 * 4, 7);
        }
        assert_eq!(last, 50_000);
        assert_eq!(counter.note(1 + 49_999 * 4, 7), 50_000);
        // Same first LSN, another incarnation: another batch.
        assert_eq!(counter.note(1 + 49_999 * 4, 8), 50_001);
    }
}
