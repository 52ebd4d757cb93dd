//! What replay is asked to do and what it reports: the options (recovery mode, read chunk,
//! scan policy), the [`RecoveryReport`] and its parts (how the scan ended, the torn tail cut,
//! what truncating mode dropped, the region a writer zeroes, the runs of unreadable blocks,
//! which scan was made), and what a visitor is handed ([`Entry`], [`Visit`]). The report's
//! bounded lists of quarantined damage are kept by its own methods, so quarantine's types stay
//! below the report that lists them.

use crate::decision::ROWS;
use crate::format::{ControlBlock, EmbedderHeader, Geometry, Kind, Position};
use crate::quarantine::{Damaged, DamagedRange, DAMAGED_REPORTED};
use crate::replay::check::{Check, Corruption};

/// What replay does when it finds damaged acknowledged data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum RecoveryMode {
    /// Fail with [`ReplayError::Corruption`] naming the damaged LSN and where it is. The default.
    ///
    /// [`ReplayError::Corruption`]: crate::error::ReplayError::Corruption
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
    /// [`DAMAGED_REPORTED`] of them.
    pub quarantined: Vec<Corruption>,
    /// How many breaks quarantine stepped over or ended at (all of them).
    pub quarantined_breaks: u64,
    /// In quarantine mode: the damaged LSNs above the trim point, in LSN order, as ranges (one
    /// per damaged record whose header survived, one per run of LSNs lost with their
    /// headers): the first [`DAMAGED_REPORTED`] of them.
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

    /// Counts a quarantined break in the report (strict mode's error there), listing the first
    /// [`DAMAGED_REPORTED`].
    pub(crate) fn note_break(&mut self, corruption: Corruption) {
        self.quarantined_breaks += 1;
        if self.quarantined.len() < DAMAGED_REPORTED {
            self.quarantined.push(corruption);
        }
    }

    /// Counts a damaged range in the report, listing the first [`DAMAGED_REPORTED`].
    pub(crate) fn note_damaged(&mut self, range: DamagedRange) {
        debug_assert!(range.first_lsn <= range.last_lsn);
        debug_assert!(self
            .damaged
            .last()
            .is_none_or(|last| last.last_lsn < range.first_lsn));
        self.damaged_ranges += 1;
        self.damaged_lsns += range.lsns();
        if self.damaged.len() < DAMAGED_REPORTED {
            self.damaged.push(range);
        }
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

/// What [`replay_visiting`] hands its visitor, in LSN order.
///
/// [`replay_visiting`]: crate::replay::entry_points::replay_visiting
#[derive(Clone, Copy, Debug)]
pub enum Visit<'v, 'a> {
    /// A live entry (in a valid batch, or an intact record of a damaged one).
    Entry(&'v Entry<'a>),
    /// Damage quarantine stepped over: a damaged record whose header survived, or a range of
    /// LSNs lost with their headers (only in [`RecoveryMode::Quarantine`]).
    Damaged(&'v Damaged),
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
