//! What a failed check is, and why replay knows the data it failed on was acknowledged: the
//! [`Check`] a record, batch or segment header failed, the [`Evidence`] that damaged data was
//! acknowledged, and the [`Corruption`] the two make. Replay, the validator, quarantine's
//! report and the error types all name these, so they sit below all of them and name none.

use crate::format::Position;

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
    pub(crate) fn is_never_written(self) -> bool {
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
