//! What quarantine mode ([`RecoveryMode::Quarantine`]) tells of damaged acknowledged data: the
//! damage a replay stepped over, as its visitor sees it ([`Damaged`], once per damaged record
//! whose header survived and once per range of LSNs lost with their headers) and as its
//! report lists it ([`DamagedRange`], the first [`DAMAGED_REPORTED`] of them, with counts that
//! are never capped), and the bound that keeps the report's lists short (the report fills
//! them itself, `RecoveryReport::note_damaged`, so that these types stay below the report
//! that lists them). The decisions (when to step over damage, where the log goes on)
//! are replay's, in `replay/` and the decision table; this module owns only what they produce.
//!
//! Why the two shapes: a damaged record whose entry header passed its CRC still says what it
//! was (its kind, the embedder's header, its payload's length and CRC), so the layer above can
//! name the record it lost and fetch it from a peer; once a header fails, nothing after it in
//! the batch can be placed, and the LSNs from there to where the log goes on are known only as
//! a range (the LSN the log expected at the damage up to the first LSN of the batch it resumes
//! at).
//!
//! [`RecoveryMode::Quarantine`]: crate::replay::RecoveryMode::Quarantine

use crate::format::{EmbedderHeader, Kind, Position};
use crate::replay::check::Check;

/// How many damaged ranges, and how many quarantined breaks, a report lists (its counts cover
/// them all), so a ring full of rot makes a report of bounded size.
pub const DAMAGED_REPORTED: usize = 32;

/// What a damaged record's entry header, which passed its checks, recorded: what the record
/// was, though its payload is lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DamagedHeader {
    /// Its kind.
    pub kind: Kind,
    /// The embedder's header it was appended with.
    pub embedder: EmbedderHeader,
    /// Its payload's length in bytes.
    pub payload_len: u32,
    /// Its payload's CRC32C as written (`crc32c(payload)`, as `format::payload_crc` computes).
    pub payload_crc: u32,
}

/// Damage a quarantine replay stepped over, as its visitor sees it, in LSN order among the
/// live entries: one damaged record whose header survived (`first_lsn == last_lsn`, `header`
/// set), or a range of LSNs whose headers are lost (`header` is `None`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Damaged {
    /// Its first LSN.
    pub first_lsn: u64,
    /// Its last LSN (inclusive).
    pub last_lsn: u64,
    /// Where the failed check is: the damaged record's header, or for a range, the header (or
    /// segment header, or block) that failed first.
    pub position: Position,
    /// The check that failed.
    pub check: Check,
    /// The record's header, when it survived.
    pub header: Option<DamagedHeader>,
    /// A batch boundary from which a replay reaches the damage (the damaged batch's start, or
    /// where the log broke): where a writer's head goes while the damage is the oldest thing
    /// it keeps, so that a later open finds it again.
    pub batch: Position,
    /// The LSN a replay starting at `batch` expects there.
    pub batch_first_lsn: u64,
    /// The incarnation floor a replay starting at `batch` keeps (the damaged batch's writer,
    /// or the log's lineage where the batch's header is lost).
    pub incarnation: u32,
}

/// A damaged range in the report: which LSNs, where, what failed, and whether the header
/// survived (then the range is the one record it describes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DamagedRange {
    /// Its first LSN.
    pub first_lsn: u64,
    /// Its last LSN (inclusive).
    pub last_lsn: u64,
    /// Where the failed check is (segment and offset inside it).
    pub position: Position,
    /// The same place as a ring offset.
    pub ring_offset: u64,
    /// The check that failed.
    pub check: Check,
    /// The record's entry header survived (its payload did not): `first_lsn == last_lsn`.
    pub header_known: bool,
}

impl DamagedRange {
    /// How many LSNs it holds.
    pub fn lsns(&self) -> u64 {
        self.last_lsn - self.first_lsn + 1
    }
}

impl std::fmt::Display for DamagedRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.first_lsn == self.last_lsn {
            write!(f, "LSN {}", self.first_lsn)?;
        } else {
            write!(f, "LSNs {}..={}", self.first_lsn, self.last_lsn)?;
        }
        write!(
            f,
            " at segment {} offset {} (ring offset {}) failed the {} check ({})",
            self.position.segment,
            self.position.offset,
            self.ring_offset,
            self.check,
            if self.header_known {
                "its header survived"
            } else {
                "no header survived"
            }
        )
    }
}
