//! The one record validator: every rule a batch read back from a ring must keep, as pure
//! functions over the batch's bytes. Replay calls them for every batch it walks, and the
//! engine's reads call them for every batch they serve, so a record that replay would refuse
//! is never served and the two cannot drift apart. What lies outside one batch is the caller's:
//! segment headers, the incarnation floor replay keeps along the log (passed in as an
//! [`IncarnationRule`]), read errors and their subdivision, and what to do about a failure.
//!
//! The checks, in the order they run (the first that fails is the one reported):
//!
//! 1. the first header: integrity (magic, version, ring, header CRC, kind), place (a header of
//!    an earlier lap at this very place is [`Check::StaleLap`]; one recording any other place
//!    was misdirected, [`Check::Position`]), LSN ([`Check::LsnGap`]), the batch's layout
//!    (index 0, a length that is a non-zero block multiple within the batch limit and the
//!    segment, [`Check::BatchLayout`]), the incarnation rule, and a watermark below the first
//!    LSN ([`Check::Watermark`]);
//! 2. the batch's length: the bytes handed in are exactly what the first header records;
//! 3. every record: header integrity, place, the fields every record of a batch shares
//!    (length, incarnation, watermark) and its index ([`Check::BatchLayout`]), LSN continuity,
//!    payload length (within the batch and the ring's payload limit), payload CRC, and the
//!    padding that ends the batch (a padding record filling it with zeros, or fewer than 64 zero
//!    bytes).

use std::ops::Range;

use crate::format::{
    EmbedderHeader, EntryHeader, Geometry, HeaderDefect, Kind, Position, RingId, ENTRY_HEADER_SIZE,
};
use crate::replay::check::Check;

/// Which incarnations a batch may carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IncarnationRule {
    /// Any incarnation (the caller compares [`CheckedBatch::incarnation`] itself).
    Any,
    /// At least this one: replay's floor (the lineage so far, the head's, the last cut's). An
    /// older batch fails [`Check::StaleIncarnation`].
    AtLeast(u32),
    /// Exactly this one: a reader that indexed the batch knows who wrote it. Any other fails
    /// [`Check::Incarnation`] (the ring changed since it was indexed).
    Exactly(u32),
}

/// What a batch read from the ring is expected to be.
#[derive(Clone, Copy, Debug)]
pub struct BatchExpectation {
    /// The ring's identity (every header CRC is seeded with it).
    pub ring_id: RingId,
    /// The ring's geometry (block size, segment size, batch and payload limits).
    pub geometry: Geometry,
    /// Where the batch's first byte was read from.
    pub position: Position,
    /// The LSN its first record must carry.
    pub first_lsn: u64,
    /// Which incarnations it may carry.
    pub incarnation: IncarnationRule,
}

/// A check a batch failed: which, where, and the LSN expected there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchFailure {
    /// Where the failed check is: the record's header, or the padding.
    pub position: Position,
    /// The LSN expected there.
    pub lsn: u64,
    /// The check that failed.
    pub check: Check,
    /// The batch's first header checked out and the failure lies after it: the batch was
    /// written here (at least its start), so the failure is damage whatever the check.
    pub inside_batch: bool,
}

/// A batch that passed every check.
#[derive(Clone, Copy, Debug)]
pub struct CheckedBatch<'b> {
    /// Where it starts.
    pub position: Position,
    /// Its length in bytes (a block multiple).
    pub bytes: u32,
    /// The LSN of its first record (the next LSN, for a batch with none: a tail marker).
    pub first_lsn: u64,
    /// Number of LSN-consuming records (padding excluded).
    pub records: u32,
    /// The incarnation that wrote it.
    pub incarnation: u32,
    /// The watermark every record carries.
    pub watermark: u64,
    ring_id: RingId,
    batch: &'b [u8],
}

/// A record of a checked batch.
#[derive(Clone, Debug)]
pub struct CheckedRecord<'b> {
    /// Its LSN.
    pub lsn: u64,
    /// Its kind (never padding).
    pub kind: Kind,
    /// The embedder's header (checked with the entry header).
    pub embedder: EmbedderHeader,
    /// Its payload (checked against its CRC).
    pub payload: &'b [u8],
    /// Where the payload lies within the batch's bytes.
    pub payload_range: Range<usize>,
    /// Where its header lies.
    pub position: Position,
    /// The incarnation that wrote it.
    pub incarnation: u32,
    /// Its batch's watermark.
    pub watermark: u64,
}

impl<'b> CheckedBatch<'b> {
    /// A batch replay checked before, from the same bytes (its buffer still holds them).
    pub(crate) fn rechecked_from(
        ring_id: RingId,
        batch: &'b [u8],
        position: Position,
        first_lsn: u64,
        records: u32,
        incarnation: u32,
        watermark: u64,
    ) -> CheckedBatch<'b> {
        debug_assert!(batch.len() >= ENTRY_HEADER_SIZE);
        CheckedBatch {
            position,
            bytes: u32::try_from(batch.len()).expect("a batch is within the batch limit"),
            first_lsn,
            records,
            incarnation,
            watermark,
            ring_id,
            batch,
        }
    }

    /// The LSN after its last record. No overflow: [`check_batch`] reached it one checked
    /// `+ 1` per record.
    pub fn next_lsn(&self) -> u64 {
        self.first_lsn + u64::from(self.records)
    }

    /// Its records in LSN order, padding excluded.
    pub fn records(&self) -> CheckedRecords<'b> {
        CheckedRecords {
            batch: *self,
            offset: 0,
            index: 0,
        }
    }
}

/// The records of a [`CheckedBatch`], in LSN order.
#[derive(Clone, Debug)]
pub struct CheckedRecords<'b> {
    batch: CheckedBatch<'b>,
    offset: usize,
    index: u32,
}

impl<'b> Iterator for CheckedRecords<'b> {
    type Item = CheckedRecord<'b>;

    fn next(&mut self) -> Option<CheckedRecord<'b>> {
        if self.index >= self.batch.records {
            return None;
        }
        let bytes = self.batch.batch;
        // The batch passed `check_batch` (or replay's identical pass over these very bytes),
        // so every header up to `records` decodes and every payload lies inside the batch.
        let header = EntryHeader::decode(self.batch.ring_id, &bytes[self.offset..]);
        let header = header.expect("a checked batch's headers decode");
        let start = self.offset + ENTRY_HEADER_SIZE;
        let end = start + header.payload_len as usize;
        self.offset = end;
        self.index += 1;
        Some(CheckedRecord {
            lsn: header.lsn,
            kind: header.kind,
            embedder: header.embedder,
            payload: &bytes[start..end],
            payload_range: start..end,
            position: header.position,
            incarnation: header.incarnation,
            watermark: header.watermark,
        })
    }
}

/// What one record read from the ring (for a point read) is expected to be: a reader's index
/// recorded where the record's header lies, which batch it belongs to, and who wrote it.
#[derive(Clone, Copy, Debug)]
pub struct RecordExpectation {
    /// The ring's identity (every header CRC is seeded with it).
    pub ring_id: RingId,
    /// The ring's geometry (the payload limit).
    pub geometry: Geometry,
    /// Where the record's header was read from.
    pub position: Position,
    /// The LSN it must carry.
    pub lsn: u64,
    /// The first LSN of its batch (so its index in the batch is `lsn - batch_first_lsn`).
    pub batch_first_lsn: u64,
    /// Its batch's length in bytes.
    pub batch_bytes: u32,
    /// The incarnation that wrote it.
    pub incarnation: u32,
}

/// Checks one record read on its own: `bytes` starts at the record's header and holds at
/// least the header and its payload. Every check [`check_batch`] runs on a record runs here
/// (integrity, place, LSN, batch membership, incarnation, payload length and CRC); what only
/// the whole batch can show (padding, the other records) is left to replay, which checked the
/// batch when it was written or recovered. A failure names the record's position and LSN.
pub fn check_record<'b>(
    expect: &RecordExpectation,
    bytes: &'b [u8],
) -> Result<CheckedRecord<'b>, BatchFailure> {
    let fail = |check| BatchFailure {
        position: expect.position,
        lsn: expect.lsn,
        check,
        inside_batch: true,
    };
    if bytes.len() < ENTRY_HEADER_SIZE {
        return Err(fail(Check::PayloadLength));
    }
    let header =
        EntryHeader::decode(expect.ring_id, bytes).map_err(|defect| fail(header_check(defect)))?;
    if let Some(check) = place_check(header.position, expect.position) {
        return Err(fail(check));
    }
    if header.lsn != expect.lsn {
        return Err(fail(Check::LsnGap));
    }
    if header.kind == Kind::Padding
        || header.batch_bytes != expect.batch_bytes
        || expect.lsn.checked_sub(expect.batch_first_lsn) != Some(u64::from(header.batch_index))
    {
        return Err(fail(Check::BatchLayout));
    }
    if header.incarnation != expect.incarnation {
        return Err(fail(Check::Incarnation));
    }
    if header.watermark >= expect.batch_first_lsn {
        return Err(fail(Check::Watermark));
    }
    let record_end = header.record_bytes();
    let payload_max = u64::from(expect.geometry.payload_size_max_bytes());
    if u64::from(header.payload_len) > payload_max || record_end > bytes.len() as u64 {
        return Err(fail(Check::PayloadLength));
    }
    let payload_range = ENTRY_HEADER_SIZE..record_end as usize;
    let payload = &bytes[payload_range.clone()];
    if crc32c::crc32c(payload) != header.payload_crc {
        return Err(fail(Check::PayloadCrc));
    }
    Ok(CheckedRecord {
        lsn: header.lsn,
        kind: header.kind,
        embedder: header.embedder,
        payload,
        payload_range,
        position: header.position,
        incarnation: header.incarnation,
        watermark: header.watermark,
    })
}

/// The check a header defect fails.
pub(crate) fn header_check(defect: HeaderDefect) -> Check {
    match defect {
        HeaderDefect::Zeroed => Check::NotWritten,
        HeaderDefect::Magic => Check::Magic,
        HeaderDefect::Version => Check::Version,
        HeaderDefect::RingId => Check::RingId,
        HeaderDefect::HeaderCrc => Check::HeaderCrc,
        HeaderDefect::Kind => Check::Kind,
    }
}

/// The check a header found at `at` fails for recording `recorded` as its place: an earlier
/// lap's header at this very place is stale; any other place means a misdirected write (or
/// read).
fn place_check(recorded: Position, at: Position) -> Option<Check> {
    if recorded == at {
        return None;
    }
    let same_place = (recorded.segment, recorded.offset) == (at.segment, at.offset);
    Some(if same_place && recorded.lap < at.lap {
        Check::StaleLap
    } else {
        Check::Position
    })
}

/// Checks a batch's first header, read at `expect.position` (`first_block` holds at least the
/// header; a whole block, as replay reads it, or the whole batch): step 1 of the module doc.
/// Returns the header, whose `batch_bytes` says how much to read for [`check_batch`].
pub fn check_batch_start(
    expect: &BatchExpectation,
    first_block: &[u8],
) -> Result<EntryHeader, BatchFailure> {
    let at = expect.position;
    let fail = |check| BatchFailure {
        position: at,
        lsn: expect.first_lsn,
        check,
        inside_batch: false,
    };
    if first_block.len() < ENTRY_HEADER_SIZE {
        return Err(fail(Check::BatchLayout));
    }
    let geometry = &expect.geometry;
    let first = EntryHeader::decode(expect.ring_id, first_block)
        .map_err(|defect| fail(header_check(defect)))?;
    if let Some(check) = place_check(first.position, at) {
        return Err(fail(check));
    }
    if first.lsn != expect.first_lsn {
        return Err(fail(Check::LsnGap));
    }
    let block = u64::from(geometry.block_size_bytes);
    let batch_bytes = u64::from(first.batch_bytes);
    // u64 sums of u32 fields: no overflow.
    if first.batch_index != 0
        || batch_bytes == 0
        || batch_bytes % block != 0
        || batch_bytes > u64::from(geometry.batch_size_max_bytes)
        || u64::from(at.offset) + batch_bytes > geometry.segment_size_bytes
    {
        return Err(fail(Check::BatchLayout));
    }
    match expect.incarnation {
        IncarnationRule::Any => {}
        IncarnationRule::AtLeast(floor) if first.incarnation < floor => {
            return Err(fail(Check::StaleIncarnation));
        }
        IncarnationRule::AtLeast(_) => {}
        IncarnationRule::Exactly(expected) if first.incarnation != expected => {
            return Err(fail(Check::Incarnation));
        }
        IncarnationRule::Exactly(_) => {}
    }
    if first.watermark >= expect.first_lsn {
        return Err(fail(Check::Watermark));
    }
    Ok(first)
}

/// Checks a whole batch, `bytes` exactly as long as it is (as read from the ring at
/// `expect.position`): every step of the module doc. Returns the batch, whose
/// [`CheckedBatch::records`] yields its records, or the first check that failed.
pub fn check_batch<'b>(
    expect: &BatchExpectation,
    bytes: &'b [u8],
) -> Result<CheckedBatch<'b>, BatchFailure> {
    let first = check_batch_start(expect, bytes)?;
    let at = expect.position;
    if bytes.len() as u64 != u64::from(first.batch_bytes) {
        return Err(BatchFailure {
            position: at,
            lsn: expect.first_lsn,
            check: Check::BatchLayout,
            inside_batch: false,
        });
    }
    let records = check_records(expect, &first, bytes)?;
    Ok(CheckedBatch {
        position: at,
        bytes: first.batch_bytes,
        first_lsn: expect.first_lsn,
        records,
        incarnation: first.incarnation,
        watermark: first.watermark,
        ring_id: expect.ring_id,
        batch: bytes,
    })
}

/// Checks every record of a batch whose first header (`first`) and length passed (step 3 of
/// the module doc), and the padding that ends it. Returns how many LSN-consuming records it
/// holds, or the first check that failed.
fn check_records(
    expect: &BatchExpectation,
    first: &EntryHeader,
    bytes: &[u8],
) -> Result<u32, BatchFailure> {
    let at = expect.position;
    let batch_bytes = bytes.len();
    let fail = |offset: usize, lsn, check| BatchFailure {
        position: place_in_batch(at, offset),
        lsn,
        check,
        inside_batch: true,
    };
    let mut offset = 0usize;
    let mut next_lsn = expect.first_lsn;
    let mut index = 0u32;
    while offset < batch_bytes {
        let remaining = batch_bytes - offset;
        if remaining < ENTRY_HEADER_SIZE {
            if bytes[offset..].iter().any(|&byte| byte != 0) {
                return Err(fail(offset, next_lsn, Check::Padding));
            }
            break;
        }
        let expected = InBatch {
            offset,
            index,
            lsn: next_lsn,
        };
        let (header, record_end) = record_header(expect, first, bytes, expected)
            .map_err(|check| fail(offset, next_lsn, check))?;
        let payload = &bytes[offset + ENTRY_HEADER_SIZE..record_end];
        if crc32c::crc32c(payload) != header.payload_crc {
            return Err(fail(offset, next_lsn, Check::PayloadCrc));
        }
        if header.kind == Kind::Padding {
            // Padding is always the batch's last record and fills it to the end.
            if record_end != batch_bytes || payload.iter().any(|&byte| byte != 0) {
                return Err(fail(offset, next_lsn, Check::Padding));
            }
            break;
        }
        // An LSN of u64::MAX can never be followed: refuse the record that would need one.
        next_lsn = next_lsn
            .checked_add(1)
            .ok_or_else(|| fail(offset, next_lsn, Check::LsnGap))?;
        index += 1;
        offset = record_end;
    }
    Ok(index)
}

/// Where a record of a batch is expected: its offset in the batch, its index among the
/// batch's records, and its LSN.
#[derive(Clone, Copy, Debug)]
struct InBatch {
    offset: usize,
    index: u32,
    lsn: u64,
}

/// The place of the byte at `offset` of the batch at `at`. Offsets inside the batch are below
/// its length, itself within the segment (checked by `check_batch_start`), so
/// `at.offset + offset` fits the segment's u32 offsets.
fn place_in_batch(at: Position, offset: usize) -> Position {
    Position {
        offset: at.offset + offset as u32,
        ..at
    }
}

/// Checks the header of a record after a batch's first (`first`), where `expected` says: its
/// integrity, its place, the fields every record of a batch shares and its index, its LSN,
/// and a payload length within the batch and the ring's payload limit, in that order (the
/// order [`check_batch`] and [`walk_batch`] both keep). Returns the header and the offset in
/// the batch where the record ends, or the check that failed.
fn record_header(
    expect: &BatchExpectation,
    first: &EntryHeader,
    bytes: &[u8],
    expected: InBatch,
) -> Result<(EntryHeader, usize), Check> {
    let offset = expected.offset;
    let header = EntryHeader::decode(expect.ring_id, &bytes[offset..]).map_err(header_check)?;
    if let Some(check) = place_check(header.position, place_in_batch(expect.position, offset)) {
        return Err(check);
    }
    if header.batch_index != expected.index
        || header.batch_bytes != first.batch_bytes
        || header.incarnation != first.incarnation
        || header.watermark != first.watermark
    {
        return Err(Check::BatchLayout);
    }
    if header.lsn != expected.lsn {
        return Err(Check::LsnGap);
    }
    let record_end = offset as u64 + header.record_bytes();
    let payload_max = u64::from(expect.geometry.payload_size_max_bytes());
    // A header that passed its CRC but claims a length past the batch cannot be walked
    // past: nothing after it can be placed.
    if u64::from(header.payload_len) > payload_max || record_end > bytes.len() as u64 {
        return Err(Check::PayloadLength);
    }
    Ok((header, record_end as usize))
}

/// One record of a damaged batch, as [`walk_batch`] finds it.
#[derive(Clone, Debug)]
pub enum WalkedRecord<'b> {
    /// The record passes every check a record of a whole batch must pass: a live entry.
    Intact(CheckedRecord<'b>),
    /// Its header passes every check, its payload does not ([`Check::PayloadCrc`], or
    /// [`Check::ReadError`] where the payload could not be read): damaged, with the header
    /// known. The walk goes on after it (the header says how long the record is).
    PayloadDamaged {
        /// Where its header lies.
        position: Position,
        /// The check that failed.
        check: Check,
        /// The header, as it was written.
        header: EntryHeader,
    },
}

/// Where [`walk_batch`] stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WalkEnd {
    /// The LSN after the last record whose header passed: where damage without a header
    /// begins, when it does.
    pub next_lsn: u64,
    /// Offset in the batch where the walk stopped: the header that failed, or the batch's end.
    pub stop_offset: u32,
    /// The first header that failed (the records from it on have no header to go by), if one
    /// did; `None` when every record's header passed (the damage was in payloads or padding).
    pub header_failure: Option<BatchFailure>,
}

/// Walks a batch that failed [`check_batch`] record by record, for quarantine: every record
/// whose header and payload pass is handed to `each` as intact, every record whose header
/// passes but whose payload does not as damaged with its header, and the walk stops at the
/// first header that fails (its position, the LSN expected there and the check are in the
/// [`WalkEnd`]), at the padding that ends the batch, or at the batch's end. `first` is the
/// batch's first header, which [`check_batch_start`] accepted; `bytes` is the batch as read
/// (as long as `first.batch_bytes` says), and `unreadable(range)` says whether any byte of a
/// range of it could not be read (those bytes are zeros here and never checked). Every check
/// is one of [`check_batch`]'s, record by record, so a record this calls intact is one a whole
/// batch would have served.
pub fn walk_batch<'b>(
    expect: &BatchExpectation,
    first: &EntryHeader,
    bytes: &'b [u8],
    unreadable: &dyn Fn(Range<usize>) -> bool,
    each: &mut dyn FnMut(WalkedRecord<'b>),
) -> WalkEnd {
    debug_assert_eq!(bytes.len() as u64, u64::from(first.batch_bytes));
    let at = expect.position;
    let batch_bytes = bytes.len();
    let mut offset = 0usize;
    let mut next_lsn = expect.first_lsn;
    let mut index = 0u32;
    let stop = |offset: usize, next_lsn: u64, check: Option<Check>| WalkEnd {
        next_lsn,
        stop_offset: offset as u32,
        header_failure: check.map(|check| BatchFailure {
            position: place_in_batch(at, offset),
            lsn: next_lsn,
            check,
            inside_batch: offset > 0,
        }),
    };
    while offset + ENTRY_HEADER_SIZE <= batch_bytes {
        let header_range = offset..offset + ENTRY_HEADER_SIZE;
        if unreadable(header_range) {
            return stop(offset, next_lsn, Some(Check::ReadError));
        }
        let expected = InBatch {
            offset,
            index,
            lsn: next_lsn,
        };
        let (header, record_end) = match record_header(expect, first, bytes, expected) {
            Ok(found) => found,
            Err(check) => return stop(offset, next_lsn, Some(check)),
        };
        if header.kind == Kind::Padding {
            // The batch's records end here, whatever the padding holds: no LSN lies past it.
            return stop(offset, next_lsn, None);
        }
        let Some(after) = next_lsn.checked_add(1) else {
            return stop(offset, next_lsn, Some(Check::LsnGap));
        };
        let payload_range = offset + ENTRY_HEADER_SIZE..record_end;
        each(walked_record(header, bytes, payload_range, unreadable));
        next_lsn = after;
        index += 1;
        offset = record_end;
    }
    stop(offset.min(batch_bytes), next_lsn, None)
}

/// A record whose header passed, as [`walk_batch`] hands it on: intact when its payload
/// (`payload_range` of `bytes`) was read and matches its CRC, else damaged with its header.
fn walked_record<'b>(
    header: EntryHeader,
    bytes: &'b [u8],
    payload_range: Range<usize>,
    unreadable: &dyn Fn(Range<usize>) -> bool,
) -> WalkedRecord<'b> {
    let payload = &bytes[payload_range.clone()];
    let payload_check = if unreadable(payload_range.clone()) {
        Some(Check::ReadError)
    } else if crc32c::crc32c(payload) != header.payload_crc {
        Some(Check::PayloadCrc)
    } else {
        None
    };
    match payload_check {
        None => WalkedRecord::Intact(CheckedRecord {
            lsn: header.lsn,
            kind: header.kind,
            embedder: header.embedder,
            payload,
            payload_range,
            position: header.position,
            incarnation: header.incarnation,
            watermark: header.watermark,
        }),
        Some(check) => WalkedRecord::PayloadDamaged {
            position: header.position,
            check,
            header,
        },
    }
}
