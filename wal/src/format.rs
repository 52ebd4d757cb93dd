//! The on-disk format of a sealog ring: the one place where its bytes are drawn, encoded and
//! decoded. Everything else in the workspace goes through the types here; nothing else knows
//! an offset. Integers are little-endian with explicit widths (never `usize`), every offset is a
//! constant derived from the one before it, and the sizes are pinned by compile-time asserts. A
//! golden-bytes test (`tests/golden.rs`) pins the encoding, and `docs/format.md` carries the hash
//! of this file so the two cannot drift apart.
//!
//! # The ring's address space
//!
//! A ring is one linear space of bytes (a raw block device, or the engine's concatenation of
//! segment files). `B` is the ring's block size, `S` the segment size:
//!
//! ```text
//!  ring offset 0        B               2B               2B+S             2B+N*S
//!  +---------------+---------------+----------------+----------------+---+
//!  | control copy 0| control copy 1|   segment 0    |   segment 1    |...|
//!  +---------------+---------------+----------------+----------------+---+
//!
//!  one segment (S bytes, a multiple of B):
//!  +----------------+------------------------------------------------------+
//!  | segment header | batch | batch | ... | batch |   (unwritten / older lap) |
//!  |   (block 0)    |  starts at a block boundary, ends at one             |
//!  +----------------+------------------------------------------------------+
//! ```
//!
//! A batch is written with one O_DIRECT write; the first batch a writer puts into a segment on a
//! lap is written together with the segment header in front of it. Writes are whole blocks, so no
//! write ever shares a block (and so a physical sector) with an earlier batch: the tail block is
//! never rewritten in place.
//!
//! # Control block (two copies, each in its own block; 176 bytes used, the rest zero)
//!
//! ```text
//!  0       4       8       12      16              24
//!  +-------+---+---+-------+-------+---------------+
//!  | magic |ver|rsv|  crc  | incar.|   sequence    |
//!  +-------+---+---+-------+-------+---------------+
//!  24                              40      44      48              56      60      64
//!  +-------------------------------+-------+-------+---------------+-------+-------+
//!  |           ring id             | block | seg.  | segment size  | batch | window|
//!  |          (16 bytes)           | size  | count |    (bytes)    |  max  |batches|
//!  +-------------------------------+-------+-------+---------------+-------+-------+
//!  64              72              80              88      92      96      100     104
//!  +---------------+---------------+---------------+-------+-------+-------+-------+
//!  | window bytes  |   trim LSN    |   head LSN    | head  | head  | head  | head  |
//!  |     max       |               |               | lap   | seg.  | offset| incar.|
//!  +---------------+---------------+---------------+-------+-------+-------+-------+
//!  104     108     112     116     120 121 122 123 124     128     130     132
//!  +-------+-------+-------+-------+---+---+---+---+-------+-------+-------+
//!  |  cut  |  cut  |  cut  |  cut  |syn|syn|syn|mar| probe |probe  |writes |
//!  |  lap  | seg.  | offset| incar.|mth|src|flg|gin| bytes |rounds |/round |
//!  +-------+-------+-------+-------+---+---+---+---+-------+-------+-------+
//!  132     136     140     144     148     152     156     160     164 165         176
//!  +-------+-------+-------+-------+-------+-------+-------+-------+---+-----------+
//!  |fdsync |fdsync | dsync | dsync | hint  | hint  | hint  | hint  |pur| reserved  |
//!  |p50 us |p99 us |p50 us |p99 us |  lap  | seg.  | offset| incar.|pos|           |
//!  +-------+-------+-------+-------+-------+-------+-------+-------+---+-----------+
//! ```
//!
//! `crc` is CRC32C over the 176 bytes with the crc field zeroed. The copy with the highest
//! `sequence` whose CRC checks out is current; copy `sequence % 2` is the one rewritten next, so a
//! torn control write leaves the other copy intact. `trim LSN` is inclusive: entries with
//! `lsn <= trim LSN` are released. `head` is the batch boundary where replay starts; `head LSN` is
//! the LSN of the first record of the batch there (`head LSN <= trim LSN + 1`), and
//! `head incar.` the incarnation that wrote it (or, when nothing is live, the incarnation of the
//! writer that wrote the block): replay accepts nothing older after the head, so a record of an
//! older incarnation can never line up at the head after a trim. `cut` is where the last
//! recovery ended the log and `cut incar.` the incarnation it opened: nothing of an older
//! incarnation is accepted at or after the cut. A writable open writes this block before it
//! zeroes anything past the cut, so a crash in the middle of recovery finds the same log.
//!
//! `sync` (bytes 120 to 148) records how format chose the ring's default durability: `syn mth`
//! the method (1 write + linked fdatasync, 2 write with RWF_DSYNC; 0 none recorded), `syn src`
//! how it was chosen (1 measured, 2 named by the operator; 0 none recorded), `syn flg` bit 0 set
//! when the device reported FUA, `margin` the percentage by which RWF_DSYNC had to beat the
//! fdatasync at both p50 and p99 to be chosen, and the measurement behind a measured choice:
//! the size of each timed write, the rounds and writes per method per round, and each method's
//! p50 and p99 in microseconds (all zero unless measured). Every rewrite of the control block
//! carries these bytes over unchanged.
//!
//! `hint` (bytes 148 to 164) is the tail hint: how far the log can reach. No batch of the
//! incarnation `hint incar.` ends past the position `hint lap`/`hint seg.`/`hint offset`; the
//! writer makes a control block with a further limit durable before it writes past the one
//! in force, and within one incarnation the limit never moves back. Replay trusts the hint
//! only when `hint incar.` is the block's own `incar.` (a new incarnation's open writes its
//! first hint in the same block as the incarnation, so there is never a durable incarnation
//! without its hint), the limit is a position of this ring at or after the head, and the
//! other copy, if it is of the same incarnation, does not record a further limit. It then
//! scans the live entries and probes past their end only to the later of the limit and an
//! in-flight window (`replay/mod.rs`, "the pass"). A freshly formatted ring records the head with
//! incarnation 0: nothing is written before the first writable open.
//!
//! `purpose` (byte 164, added in version 4) says what the ring holds ([`RingPurpose`]): 0 a
//! plain log, 1 a LogDrive store's records. A tool that appends or trims raw entries reads it
//! first, because a store's reclaimer owns the head of such a ring and its records are
//! otherwise ordinary entries. Any other value is refused ([`ControlDefect::Purpose`]). Every
//! rewrite of the control block carries the byte over unchanged, as it does the sync choice,
//! but for a writable open asked to record a purpose, which sets it in the block it writes
//! for its new incarnation anyway.
//!
//! Version 1 blocks (160 bytes used, no hint; or, written before the sync choice existed, a
//! CRC over the first 128 bytes and zeros after) are recognised as intact blocks of version
//! 1 by their CRC, so a version 1 ring is refused with an error naming both versions rather
//! than reported as damaged. Version 2 and 3 blocks have this layout with the purpose byte
//! zero, and a CRC over the same 176 bytes, so their version field names them.
//!
//! # Segment header (block 0 of every segment; 64 bytes used, the rest zero)
//!
//! ```text
//!  0       4       8       12      16      20      24              32
//!  +-------+---+---+-------+-------+-------+-------+---------------+
//!  | magic |ver|rsv|  crc  |segment|  lap  | incar.|   first LSN   |
//!  +-------+---+---+-------+-------+-------+-------+---------------+
//!  32                              48                              64
//!  +-------------------------------+-------------------------------+
//!  |           ring id             |           reserved            |
//!  +-------------------------------+-------------------------------+
//! ```
//!
//! `crc` is CRC32C seeded with the ring id, over the 64 bytes with the crc field zeroed.
//! `first LSN` is the LSN of the first record of the first batch in this segment on this lap.
//!
//! # Entry header (96 bytes, in front of every record's payload)
//!
//! ```text
//!  0       4   6   7   8       12      16      20      24              32
//!  +-------+---+---+---+-------+-------+-------+-------+---------------+
//!  | magic |ver|knd|flg|hdr crc|pay len|pay crc| incar.|      LSN      |
//!  +-------+---+---+---+-------+-------+-------+-------+---------------+
//!  32              40      44      48      52      56      60      64
//!  +---------------+-------+-------+-------+-------+-------+-------+
//!  |   watermark   |  lap  |segment|offset | batch | batch | ring  |
//!  | (durable LSN) |       |       |       | bytes | index |  tag  |
//!  +---------------+-------+-------+-------+-------+-------+-------+
//!  64              72              80              88              96
//!  +---------------+---------------+---------------+---------------+
//!  |    log id     |    address    |     epoch     |     extra     |
//!  +---------------+---------------+---------------+---------------+
//!  \____________________ embedder header (32 bytes) ________________/
//! ```
//!
//! - `hdr crc`: CRC32C seeded with the 16-byte ring id, over the 96 header bytes with this field
//!   zeroed. It covers every field, the payload's length and CRC among them, and through the seed
//!   the full ring identity: an entry of another ring never passes.
//! - `pay crc`: CRC32C of the payload. `pay len` is at most the ring's payload limit.
//! - `LSN`: contiguous from 1. A padding record consumes none: it carries the LSN the next record
//!   will take.
//! - `watermark`: the highest LSN acknowledged when the batch was built. Always below the batch's
//!   first LSN. Everything at or below it was durable before this batch existed.
//! - `lap`, `segment`, `offset`: where this header was written (offset within the segment), so a
//!   misdirected write or a record left from an earlier lap is caught.
//! - `batch bytes`: the length of the batch this record belongs to (a multiple of the block
//!   size); `batch index`: this record's index within the batch (0 for the first), so the batch's
//!   first LSN is `LSN - batch index`.
//! - `ring tag`: CRC32C of the ring id, so a record of another ring is named as such rather than
//!   as a checksum failure.
//! - `embedder header` (added in version 3): the layer above's own 32 bytes for the entry
//!   ([`EmbedderHeader`]), zeros when it gives none. In the header, so under the header CRC
//!   rather than the payload's: a damaged payload still names the embedder's record.
//!
//! Records follow each other without gaps inside a batch. The bytes after the last record up to
//! the batch's end are a padding record when at least [`ENTRY_HEADER_SIZE`] bytes remain (its
//! payload is zeros), else zeros.

use crate::error::{GeometryError, SequenceExhausted};

/// The format version this crate writes and the only one it reads. Version 2 added the tail
/// hint to the control block, version 3 the embedder header to every entry header, version 4
/// the ring's purpose to the control block; rings of earlier versions are refused
/// (`ReplayError::UnsupportedVersion` names both versions).
pub const FORMAT_VERSION: u16 = 4;

/// Magic of a control block: the bytes `SLGC`.
pub const CONTROL_MAGIC: u32 = u32::from_le_bytes(*b"SLGC");
/// Magic of a segment header: the bytes `SLGS`.
pub const SEGMENT_MAGIC: u32 = u32::from_le_bytes(*b"SLGS");
/// Magic of an entry header: the bytes `SLGE`.
pub const ENTRY_MAGIC: u32 = u32::from_le_bytes(*b"SLGE");

/// The smallest ring block size: no write is smaller than a 4 KiB physical sector.
pub const BLOCK_SIZE_MIN_BYTES: u32 = 4096;
/// The largest ring block size this format accepts.
pub const BLOCK_SIZE_MAX_BYTES: u32 = 65536;
/// The largest batch the format accepts: bounds the replay buffer whatever a header says.
pub const BATCH_SIZE_LIMIT_BYTES: u32 = 64 << 20;
/// Number of control block copies at the start of the ring.
pub const CONTROL_COPIES: u64 = 2;
/// The most batches a ring's in-flight window may hold. Recovery's probe keeps per-batch
/// bookkeeping bounded by the window, and a torn tail reaches at most this many batches; a
/// control block recording more is refused (a crafted `u32::MAX` made replay crawl).
pub const WINDOW_BATCHES_LIMIT: u32 = 64;
/// The highest sequence number a control block may carry. Every control write adds one, so a
/// ring opened at or below this has 2^63 rewrites of headroom before any `+ 1` could overflow;
/// a copy recording more (a crafted block with a valid CRC) is refused when the ring is read.
pub const CONTROL_SEQUENCE_LIMIT: u64 = u64::MAX / 2;

// Control block field offsets, each derived from the one before it.
const CONTROL_MAGIC_OFFSET: usize = 0;
const CONTROL_VERSION_OFFSET: usize = CONTROL_MAGIC_OFFSET + 4;
const CONTROL_RESERVED0_OFFSET: usize = CONTROL_VERSION_OFFSET + 2;
const CONTROL_CRC_OFFSET: usize = CONTROL_RESERVED0_OFFSET + 2;
const CONTROL_INCARNATION_OFFSET: usize = CONTROL_CRC_OFFSET + 4;
const CONTROL_SEQUENCE_OFFSET: usize = CONTROL_INCARNATION_OFFSET + 4;
const CONTROL_RING_ID_OFFSET: usize = CONTROL_SEQUENCE_OFFSET + 8;
const CONTROL_BLOCK_SIZE_OFFSET: usize = CONTROL_RING_ID_OFFSET + 16;
const CONTROL_SEGMENT_COUNT_OFFSET: usize = CONTROL_BLOCK_SIZE_OFFSET + 4;
const CONTROL_SEGMENT_SIZE_OFFSET: usize = CONTROL_SEGMENT_COUNT_OFFSET + 4;
const CONTROL_BATCH_MAX_OFFSET: usize = CONTROL_SEGMENT_SIZE_OFFSET + 8;
const CONTROL_WINDOW_BATCHES_OFFSET: usize = CONTROL_BATCH_MAX_OFFSET + 4;
const CONTROL_WINDOW_BYTES_OFFSET: usize = CONTROL_WINDOW_BATCHES_OFFSET + 4;
const CONTROL_TRIM_LSN_OFFSET: usize = CONTROL_WINDOW_BYTES_OFFSET + 8;
const CONTROL_HEAD_LSN_OFFSET: usize = CONTROL_TRIM_LSN_OFFSET + 8;
const CONTROL_HEAD_LAP_OFFSET: usize = CONTROL_HEAD_LSN_OFFSET + 8;
const CONTROL_HEAD_SEGMENT_OFFSET: usize = CONTROL_HEAD_LAP_OFFSET + 4;
const CONTROL_HEAD_OFFSET_OFFSET: usize = CONTROL_HEAD_SEGMENT_OFFSET + 4;
const CONTROL_HEAD_INCARNATION_OFFSET: usize = CONTROL_HEAD_OFFSET_OFFSET + 4;
const CONTROL_CUT_LAP_OFFSET: usize = CONTROL_HEAD_INCARNATION_OFFSET + 4;
const CONTROL_CUT_SEGMENT_OFFSET: usize = CONTROL_CUT_LAP_OFFSET + 4;
const CONTROL_CUT_OFFSET_OFFSET: usize = CONTROL_CUT_SEGMENT_OFFSET + 4;
const CONTROL_CUT_INCARNATION_OFFSET: usize = CONTROL_CUT_OFFSET_OFFSET + 4;
const CONTROL_SYNC_METHOD_OFFSET: usize = CONTROL_CUT_INCARNATION_OFFSET + 4;
const CONTROL_SYNC_SOURCE_OFFSET: usize = CONTROL_SYNC_METHOD_OFFSET + 1;
const CONTROL_SYNC_FLAGS_OFFSET: usize = CONTROL_SYNC_SOURCE_OFFSET + 1;
const CONTROL_SYNC_MARGIN_OFFSET: usize = CONTROL_SYNC_FLAGS_OFFSET + 1;
const CONTROL_PROBE_BYTES_OFFSET: usize = CONTROL_SYNC_MARGIN_OFFSET + 1;
const CONTROL_PROBE_ROUNDS_OFFSET: usize = CONTROL_PROBE_BYTES_OFFSET + 4;
const CONTROL_PROBE_WRITES_OFFSET: usize = CONTROL_PROBE_ROUNDS_OFFSET + 2;
const CONTROL_FDATASYNC_P50_OFFSET: usize = CONTROL_PROBE_WRITES_OFFSET + 2;
const CONTROL_FDATASYNC_P99_OFFSET: usize = CONTROL_FDATASYNC_P50_OFFSET + 4;
const CONTROL_DSYNC_P50_OFFSET: usize = CONTROL_FDATASYNC_P99_OFFSET + 4;
const CONTROL_DSYNC_P99_OFFSET: usize = CONTROL_DSYNC_P50_OFFSET + 4;
const CONTROL_HINT_LAP_OFFSET: usize = CONTROL_DSYNC_P99_OFFSET + 4;
const CONTROL_HINT_SEGMENT_OFFSET: usize = CONTROL_HINT_LAP_OFFSET + 4;
const CONTROL_HINT_OFFSET_OFFSET: usize = CONTROL_HINT_SEGMENT_OFFSET + 4;
const CONTROL_HINT_INCARNATION_OFFSET: usize = CONTROL_HINT_OFFSET_OFFSET + 4;
const CONTROL_PURPOSE_OFFSET: usize = CONTROL_HINT_INCARNATION_OFFSET + 4;
const CONTROL_RESERVED_OFFSET: usize = CONTROL_PURPOSE_OFFSET + 1;
/// Bytes of a control block that carry fields (the rest of its block is zero).
pub const CONTROL_SIZE: usize = CONTROL_RESERVED_OFFSET + 11;
/// Bytes a version 1 control block's CRC covered (it had no tail hint).
pub const CONTROL_SIZE_V1: usize = 160;
/// Bytes a version 1 control block's CRC covered when it was written before the sync choice
/// was recorded: such a block has zeros from byte 120 (the sync choice's first) on.
pub const CONTROL_SIZE_V1_BEFORE_SYNC: usize = 128;
/// Bit of the sync flags byte: the device reported FUA when the methods were measured.
const SYNC_FLAG_FUA: u8 = 1;

// Segment header field offsets.
const SEGMENT_MAGIC_OFFSET: usize = 0;
const SEGMENT_VERSION_OFFSET: usize = SEGMENT_MAGIC_OFFSET + 4;
const SEGMENT_RESERVED0_OFFSET: usize = SEGMENT_VERSION_OFFSET + 2;
const SEGMENT_CRC_OFFSET: usize = SEGMENT_RESERVED0_OFFSET + 2;
const SEGMENT_INDEX_OFFSET: usize = SEGMENT_CRC_OFFSET + 4;
const SEGMENT_LAP_OFFSET: usize = SEGMENT_INDEX_OFFSET + 4;
const SEGMENT_INCARNATION_OFFSET: usize = SEGMENT_LAP_OFFSET + 4;
const SEGMENT_FIRST_LSN_OFFSET: usize = SEGMENT_INCARNATION_OFFSET + 4;
const SEGMENT_RING_ID_OFFSET: usize = SEGMENT_FIRST_LSN_OFFSET + 8;
const SEGMENT_RESERVED1_OFFSET: usize = SEGMENT_RING_ID_OFFSET + 16;
/// Bytes of a segment header that carry fields (the rest of its block is zero).
pub const SEGMENT_HEADER_SIZE: usize = SEGMENT_RESERVED1_OFFSET + 16;

// Entry header field offsets.
const ENTRY_MAGIC_OFFSET: usize = 0;
const ENTRY_VERSION_OFFSET: usize = ENTRY_MAGIC_OFFSET + 4;
const ENTRY_KIND_OFFSET: usize = ENTRY_VERSION_OFFSET + 2;
const ENTRY_FLAGS_OFFSET: usize = ENTRY_KIND_OFFSET + 1;
const ENTRY_HEADER_CRC_OFFSET: usize = ENTRY_FLAGS_OFFSET + 1;
const ENTRY_PAYLOAD_LEN_OFFSET: usize = ENTRY_HEADER_CRC_OFFSET + 4;
const ENTRY_PAYLOAD_CRC_OFFSET: usize = ENTRY_PAYLOAD_LEN_OFFSET + 4;
const ENTRY_INCARNATION_OFFSET: usize = ENTRY_PAYLOAD_CRC_OFFSET + 4;
const ENTRY_LSN_OFFSET: usize = ENTRY_INCARNATION_OFFSET + 4;
const ENTRY_WATERMARK_OFFSET: usize = ENTRY_LSN_OFFSET + 8;
const ENTRY_LAP_OFFSET: usize = ENTRY_WATERMARK_OFFSET + 8;
const ENTRY_SEGMENT_OFFSET: usize = ENTRY_LAP_OFFSET + 4;
const ENTRY_OFFSET_OFFSET: usize = ENTRY_SEGMENT_OFFSET + 4;
const ENTRY_BATCH_BYTES_OFFSET: usize = ENTRY_OFFSET_OFFSET + 4;
const ENTRY_BATCH_INDEX_OFFSET: usize = ENTRY_BATCH_BYTES_OFFSET + 4;
const ENTRY_RING_TAG_OFFSET: usize = ENTRY_BATCH_INDEX_OFFSET + 4;
const ENTRY_EMBEDDER_OFFSET: usize = ENTRY_RING_TAG_OFFSET + 4;
/// Size of the embedder header every record carries (four little-endian u64 words).
pub const EMBEDDER_HEADER_SIZE: usize = 32;
/// Size of the header in front of every record (the engine's 64 bytes and the embedder's
/// 32): the per-entry overhead, in bytes.
pub const ENTRY_HEADER_SIZE: usize = ENTRY_EMBEDDER_OFFSET + EMBEDDER_HEADER_SIZE;

const _: () = assert!(CONTROL_SIZE == 176);
const _: () = assert!(CONTROL_SYNC_METHOD_OFFSET == 120);
const _: () = assert!(CONTROL_HINT_LAP_OFFSET == CONTROL_SIZE_V1 - 12);
const _: () = assert!(CONTROL_SYNC_METHOD_OFFSET < CONTROL_SIZE_V1_BEFORE_SYNC);
const _: () = assert!(CONTROL_SIZE_V1_BEFORE_SYNC < CONTROL_SIZE_V1);
const _: () = assert!(CONTROL_SIZE_V1 < CONTROL_SIZE);
const _: () = assert!(CONTROL_PURPOSE_OFFSET == 164);
const _: () = assert!(CONTROL_PURPOSE_OFFSET >= CONTROL_SIZE_V1);
const _: () = assert!(CONTROL_RESERVED_OFFSET < CONTROL_SIZE);
const _: () = assert!(SEGMENT_HEADER_SIZE == 64);
const _: () = assert!(ENTRY_EMBEDDER_OFFSET == 64);
const _: () = assert!(ENTRY_HEADER_SIZE == 96);
const _: () = assert!(CONTROL_SIZE <= BLOCK_SIZE_MIN_BYTES as usize);
const _: () = assert!(BLOCK_SIZE_MIN_BYTES.is_power_of_two());
const _: () = assert!(BLOCK_SIZE_MAX_BYTES.is_power_of_two());
const _: () = assert!(BATCH_SIZE_LIMIT_BYTES % BLOCK_SIZE_MAX_BYTES == 0);

/// A ring's identity: 16 random bytes chosen at format time (a UUID).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RingId(pub [u8; 16]);

impl RingId {
    /// The 32-bit tag stored in every entry header: CRC32C of the id.
    pub fn tag(&self) -> u32 {
        crc32c::crc32c(&self.0)
    }

    /// The CRC32C state after the id, the seed of every header checksum.
    fn crc_seed(&self) -> u32 {
        crc32c::crc32c(&self.0)
    }
}

impl std::fmt::Display for RingId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (index, byte) in self.0.iter().enumerate() {
            if matches!(index, 4 | 6 | 8 | 10) {
                f.write_str("-")?;
            }
            write!(f, "{byte:02x}")?;
        }
        Ok(())
    }
}

impl std::fmt::Debug for RingId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RingId({self})")
    }
}

/// The kind of a record. Zero is not a kind, so zeroed memory never parses as a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Kind {
    /// An embedder's payload.
    Data = 1,
    /// Fills a batch up to its block boundary; consumes no LSN, never returned.
    Padding = 2,
    /// Reserved for the LogDrive layer: a trim record in the log.
    Trim = 3,
    /// Reserved for the LogDrive layer: a seal record.
    Seal = 4,
    /// Reserved for the LogDrive layer: a fence record.
    Fence = 5,
}

impl Kind {
    /// Decodes a kind byte; `None` for a byte that names no kind.
    pub fn from_byte(byte: u8) -> Option<Kind> {
        match byte {
            1 => Some(Kind::Data),
            2 => Some(Kind::Padding),
            3 => Some(Kind::Trim),
            4 => Some(Kind::Seal),
            5 => Some(Kind::Fence),
            _ => None,
        }
    }

    /// Whether a record of this kind takes an LSN (every kind but padding).
    pub fn consumes_lsn(self) -> bool {
        self != Kind::Padding
    }

    /// Lower-case name, for reports.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Data => "data",
            Kind::Padding => "padding",
            Kind::Trim => "trim",
            Kind::Seal => "seal",
            Kind::Fence => "fence",
        }
    }
}

/// Where a batch or record lives: the lap of the ring, the segment, and the byte offset inside
/// the segment. Positions order by lap, then segment, then offset: the order of the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Position {
    /// Which pass over the ring (the first is lap 1; lap 0 is never written).
    pub lap: u32,
    /// Segment index, below the ring's segment count.
    pub segment: u32,
    /// Byte offset inside the segment.
    pub offset: u32,
}

impl std::fmt::Display for Position {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "lap {} segment {} offset {}",
            self.lap, self.segment, self.offset
        )
    }
}

/// The ring's geometry, fixed at format time and recorded in the control block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// The unit of every write and read: the largest of 4096 and the device's logical and
    /// physical block sizes.
    pub block_size_bytes: u32,
    /// Size of one segment, its header block included.
    pub segment_size_bytes: u64,
    /// Number of segments in the ring (at least 2).
    pub segment_count: u32,
    /// The largest batch the writer builds, in bytes (a multiple of the block size).
    pub batch_size_max_bytes: u32,
    /// At most this many batches are written but not yet covered by a completed flush.
    pub window_batches_max: u32,
    /// At most this many batch bytes are written but not yet covered by a completed flush.
    pub window_bytes_max: u64,
}

impl Geometry {
    /// Checks every rule the format relies on; the writer and replay assume them.
    pub fn validate(&self) -> Result<(), GeometryError> {
        let block = self.block_size_bytes;
        if !block.is_power_of_two()
            || !(BLOCK_SIZE_MIN_BYTES..=BLOCK_SIZE_MAX_BYTES).contains(&block)
        {
            return Err(GeometryError::BlockSize {
                block_size_bytes: block,
            });
        }
        let block = u64::from(block);
        if self.segment_size_bytes % block != 0
            || self.segment_size_bytes < 2 * block
            || self.segment_size_bytes > u64::from(u32::MAX) - block + 1
        {
            return Err(GeometryError::SegmentSize {
                segment_size_bytes: self.segment_size_bytes,
                block_size_bytes: self.block_size_bytes,
            });
        }
        if self.segment_count < 2 {
            return Err(GeometryError::SegmentCount {
                segment_count: self.segment_count,
            });
        }
        let batch = u64::from(self.batch_size_max_bytes);
        if batch % block != 0
            || batch < block
            || batch > u64::from(BATCH_SIZE_LIMIT_BYTES)
            || batch > self.segment_data_bytes()
        {
            return Err(GeometryError::BatchSize {
                batch_size_max_bytes: self.batch_size_max_bytes,
                segment_data_bytes: self.segment_data_bytes(),
            });
        }
        let data_bytes = self
            .segment_data_bytes()
            .saturating_mul(u64::from(self.segment_count));
        if self.window_batches_max == 0
            || self.window_batches_max > WINDOW_BATCHES_LIMIT
            || self.window_bytes_max < batch
            || self.window_bytes_max > data_bytes
        {
            return Err(GeometryError::Window {
                window_batches_max: self.window_batches_max,
                window_bytes_max: self.window_bytes_max,
                batch_size_max_bytes: self.batch_size_max_bytes,
            });
        }
        self.ring_size_bytes().ok_or(GeometryError::TooLarge)?;
        Ok(())
    }

    /// Bytes of a segment available to batches (all but its header block).
    pub fn segment_data_bytes(&self) -> u64 {
        self.segment_size_bytes
            .saturating_sub(u64::from(self.block_size_bytes))
    }

    /// Offset inside a segment where its first batch starts (right after the header block).
    pub fn segment_data_offset(&self) -> u32 {
        self.block_size_bytes
    }

    /// Total bytes the ring occupies: the control copies plus every segment.
    pub fn ring_size_bytes(&self) -> Option<u64> {
        let segments = self
            .segment_size_bytes
            .checked_mul(u64::from(self.segment_count))?;
        segments.checked_add(self.control_area_bytes())
    }

    /// Bytes taken by the control block copies at the start of the ring.
    pub fn control_area_bytes(&self) -> u64 {
        CONTROL_COPIES * u64::from(self.block_size_bytes)
    }

    /// Ring offset of control block copy `copy` (0 or 1).
    pub fn control_offset(&self, copy: u64) -> u64 {
        debug_assert!(copy < CONTROL_COPIES);
        copy * u64::from(self.block_size_bytes)
    }

    /// Ring offset of the first byte of `segment`.
    pub fn segment_ring_offset(&self, segment: u32) -> u64 {
        debug_assert!(segment < self.segment_count);
        self.control_area_bytes() + u64::from(segment) * self.segment_size_bytes
    }

    /// Ring offset of a position.
    pub fn ring_offset(&self, position: Position) -> u64 {
        debug_assert!(u64::from(position.offset) <= self.segment_size_bytes);
        self.segment_ring_offset(position.segment) + u64::from(position.offset)
    }

    /// The largest payload one record may carry: a batch holding that record alone.
    pub fn payload_size_max_bytes(&self) -> u32 {
        self.batch_size_max_bytes - ENTRY_HEADER_SIZE as u32
    }

    /// The first data position of the segment after `position`'s, on the lap it is on then;
    /// `None` when that would be a lap past `u32::MAX` (a writer there must stop, never wrap).
    pub fn checked_next_segment_start(&self, position: Position) -> Option<Position> {
        let (segment, lap) = if position.segment.checked_add(1)? >= self.segment_count {
            (0, position.lap.checked_add(1)?)
        } else {
            (position.segment + 1, position.lap)
        };
        Some(Position {
            lap,
            segment,
            offset: self.segment_data_offset(),
        })
    }

    /// The first data position of the segment after `position`'s, on the lap it is on then.
    pub fn next_segment_start(&self, position: Position) -> Position {
        // Replay refuses heads within two laps of u32::MAX, and a walk moves at most one lap
        // past its head; a writer asks `checked_next_segment_start` (through the layout's
        // slots) before it moves on. So this never overflows.
        self.checked_next_segment_start(position)
            .expect("lap below u32::MAX")
    }

    /// A position's segment in one count over all laps: `lap * segment_count + segment`.
    pub fn linear_segment(&self, position: Position) -> u64 {
        u64::from(position.lap) * u64::from(self.segment_count) + u64::from(position.segment)
    }

    /// Bytes from `from` to `to` along the log (`to` at or after `from`), counting every byte in
    /// between: segment headers and unused segment tails included. Saturates at `u64::MAX`
    /// (a distance that large is beyond any window), so positions decoded from disk can never
    /// make it overflow.
    pub fn distance_bytes(&self, from: Position, to: Position) -> u64 {
        debug_assert!(from <= to);
        let segments = self
            .linear_segment(to)
            .saturating_sub(self.linear_segment(from));
        segments
            .saturating_mul(self.segment_size_bytes)
            .saturating_add(u64::from(to.offset))
            .saturating_sub(u64::from(from.offset))
    }
}

fn put_u16(buf: &mut [u8], offset: usize, value: u16) {
    buf[offset..offset + 2].copy_from_slice(&value.to_le_bytes());
}

fn put_u32(buf: &mut [u8], offset: usize, value: u32) {
    buf[offset..offset + 4].copy_from_slice(&value.to_le_bytes());
}

fn put_u64(buf: &mut [u8], offset: usize, value: u64) {
    buf[offset..offset + 8].copy_from_slice(&value.to_le_bytes());
}

fn get_u16(buf: &[u8], offset: usize) -> u16 {
    u16::from_le_bytes([buf[offset], buf[offset + 1]])
}

fn get_u32(buf: &[u8], offset: usize) -> u32 {
    let mut bytes = [0u8; 4];
    bytes.copy_from_slice(&buf[offset..offset + 4]);
    u32::from_le_bytes(bytes)
}

fn get_u64(buf: &[u8], offset: usize) -> u64 {
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&buf[offset..offset + 8]);
    u64::from_le_bytes(bytes)
}

/// CRC32C over `bytes` with the 4-byte crc field at `crc_offset` taken as zero, starting from
/// `seed` (0 for none, or the ring id's CRC state).
fn crc_skipping_field(seed: u32, bytes: &[u8], crc_offset: usize) -> u32 {
    let crc = crc32c::crc32c_append(seed, &bytes[..crc_offset]);
    let crc = crc32c::crc32c_append(crc, &[0u8; 4]);
    crc32c::crc32c_append(crc, &bytes[crc_offset + 4..])
}

/// What a control block records: identity, geometry, incarnation, trim point, how the ring's
/// default durability was chosen, and what the ring holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ControlBlock {
    /// Bumped on every rewrite; the valid copy with the highest sequence is current.
    pub sequence: u64,
    /// The ring's identity.
    pub ring_id: RingId,
    /// The ring's geometry.
    pub geometry: Geometry,
    /// The incarnation of the last writable open (0 on a freshly formatted ring).
    pub incarnation: u32,
    /// Entries with an LSN at or below this are released (trim is inclusive).
    pub trim_lsn: u64,
    /// The batch boundary where replay starts.
    pub head: Position,
    /// LSN of the first record of the batch at `head`.
    pub head_lsn: u64,
    /// The incarnation that wrote the batch at `head` (the writer's, when nothing is live):
    /// the oldest incarnation replay accepts.
    pub head_incarnation: u32,
    /// Where the last writable open ended the log (lap 0: no open yet).
    pub cut: Position,
    /// The incarnation that open began: the oldest accepted at or after `cut`.
    pub cut_incarnation: u32,
    /// How format chose the ring's default durability; every rewrite carries it over.
    pub sync: SyncChoice,
    /// How far the log can reach (see [`TailHint`]).
    pub tail_hint: TailHint,
    /// What the ring holds; every rewrite carries it over (a writable open may set it).
    pub purpose: RingPurpose,
}

/// What a ring holds, recorded in its control block so that a tool can tell, before it
/// appends or trims raw entries, whether a layer above owns the ring's head.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[repr(u8)]
pub enum RingPurpose {
    /// A plain log: the embedder appends and trims as it likes. The default.
    #[default]
    Log = 0,
    /// A LogDrive store's records: the store's reclaimer owns the ring's head, so raw trims
    /// (and raw appends, which the store's index would never know) are not the operator's.
    LogDriveStore = 1,
}

impl RingPurpose {
    /// Decodes a purpose byte; `None` for a byte that names no purpose.
    pub fn from_byte(byte: u8) -> Option<RingPurpose> {
        match byte {
            0 => Some(RingPurpose::Log),
            1 => Some(RingPurpose::LogDriveStore),
            _ => None,
        }
    }

    /// Lower-case name, for reports and the CLI's JSON.
    pub fn name(self) -> &'static str {
        match self {
            RingPurpose::Log => "log",
            RingPurpose::LogDriveStore => "logdrive_store",
        }
    }
}

/// How far the log can reach: the writer of `incarnation` never ends a batch past `limit`.
/// It is an upper bound made durable before it is relied on: a writer puts a further limit in
/// a control block, and waits for that block's flush, before it submits a batch that ends past
/// the limit in force. Within one incarnation the limit never moves back. Replay uses it to
/// bound its probe after the log's end (see the module doc and `replay/probe.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct TailHint {
    /// No batch of `incarnation` ends past this position. A limit at a segment's end is
    /// recorded as the next segment's first data position ([`TailHint::normalized_limit`]).
    pub limit: Position,
    /// The incarnation that set it. It counts only in a control block of the same incarnation.
    pub incarnation: u32,
}

impl TailHint {
    /// The limit as a batch boundary: a position at a segment's end (or inside its header
    /// block) becomes the first data position of the segment it leads into, so that a log
    /// whose last batch ends exactly at the limit has its end (the next batch's position) at
    /// the limit, not past it. `None` when the limit names no place of this ring (a segment
    /// past the count, an offset off a block boundary or past the segment, lap 0, or a lap
    /// that cannot be followed by another).
    pub fn normalized_limit(&self, geometry: &Geometry) -> Option<Position> {
        let limit = self.limit;
        let block = geometry.block_size_bytes;
        let in_ring = limit.lap >= 1
            && limit.segment < geometry.segment_count
            && limit.offset % block == 0
            && u64::from(limit.offset) <= geometry.segment_size_bytes;
        if !in_ring {
            return None;
        }
        if u64::from(limit.offset) == geometry.segment_size_bytes {
            return geometry.checked_next_segment_start(limit);
        }
        Some(Position {
            offset: limit.offset.max(geometry.segment_data_offset()),
            ..limit
        })
    }
}

/// How a write is made durable: the two methods a ring's default durability is chosen from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum SyncMethod {
    /// An O_DIRECT write, then an fdatasync linked behind it: one device flush per commit.
    Fdatasync = 1,
    /// An O_DIRECT write with RWF_DSYNC: durable when it completes (a FUA write where the
    /// device has FUA; else the kernel flushes after it).
    Dsync = 2,
}

impl SyncMethod {
    /// Decodes a method byte; `None` for a byte that names no method.
    pub fn from_byte(byte: u8) -> Option<SyncMethod> {
        match byte {
            1 => Some(SyncMethod::Fdatasync),
            2 => Some(SyncMethod::Dsync),
            _ => None,
        }
    }

    /// Lower-case name, for reports and the CLI.
    pub fn name(self) -> &'static str {
        match self {
            SyncMethod::Fdatasync => "fdatasync",
            SyncMethod::Dsync => "dsync",
        }
    }
}

/// What format measured to choose a sync method: both methods timed at queue depth 1, one
/// write at a time of the size a small append writes, in interleaved rounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct SyncMeasurement {
    /// Bytes of each timed write.
    pub write_size_bytes: u32,
    /// Rounds, each timing both methods.
    pub rounds: u16,
    /// Writes of each method per round.
    pub writes_per_round: u16,
    /// By how many percent RWF_DSYNC had to beat the fdatasync at both p50 and p99.
    pub margin_percent: u8,
    /// Whether the device reported FUA (RWF_DSYNC writes are FUA writes then).
    pub fua: bool,
    /// Write + linked fdatasync: median, microseconds.
    pub fdatasync_p50_us: u32,
    /// Write + linked fdatasync: 99th percentile, microseconds.
    pub fdatasync_p99_us: u32,
    /// Write with RWF_DSYNC: median, microseconds.
    pub dsync_p50_us: u32,
    /// Write with RWF_DSYNC: 99th percentile, microseconds.
    pub dsync_p99_us: u32,
}

/// How format chose a ring's default durability (the drive's own options may still override
/// it when it opens).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum SyncChoice {
    /// Nothing recorded: a ring formatted before the choice was recorded, or one made without
    /// a device to measure (simulated rings). Its default is fdatasync.
    #[default]
    NotRecorded,
    /// Named by the operator at format time; nothing was measured.
    Named(SyncMethod),
    /// Chosen by measuring the device at format time.
    Measured {
        /// The method chosen.
        method: SyncMethod,
        /// The figures it was chosen on.
        measurement: SyncMeasurement,
    },
}

impl SyncChoice {
    /// The ring's default method: the one chosen, or fdatasync when none was recorded.
    pub fn method(&self) -> SyncMethod {
        match *self {
            SyncChoice::NotRecorded => SyncMethod::Fdatasync,
            SyncChoice::Named(method) | SyncChoice::Measured { method, .. } => method,
        }
    }

    /// The measurement behind the choice, if it was measured.
    pub fn measurement(&self) -> Option<SyncMeasurement> {
        match *self {
            SyncChoice::Measured { measurement, .. } => Some(measurement),
            SyncChoice::NotRecorded | SyncChoice::Named(_) => None,
        }
    }
}

/// Why a control block copy was not accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ControlDefect {
    /// The copy does not start with the control magic: not a sealog control block.
    Magic,
    /// The magic is there but the CRC does not match: the copy is damaged or torn.
    Crc,
    /// The copy is intact but was written by another format version.
    Version(u16),
    /// The CRC matches but the sync choice's method or source byte names nothing this
    /// version writes (a crafted block, or one of a later writer).
    SyncChoice {
        /// The method byte found.
        method_byte: u8,
        /// The source byte found.
        source_byte: u8,
    },
    /// The CRC matches but the purpose byte names no [`RingPurpose`] this version knows (a
    /// crafted block, or one of a later writer).
    Purpose {
        /// The purpose byte found.
        purpose_byte: u8,
    },
}

impl ControlBlock {
    /// The control block of a freshly formatted ring: nothing written, head at segment 0.
    pub fn new_ring(ring_id: RingId, geometry: Geometry) -> ControlBlock {
        ControlBlock {
            sequence: 1,
            ring_id,
            geometry,
            incarnation: 0,
            trim_lsn: 0,
            head: Position {
                lap: 1,
                segment: 0,
                offset: geometry.segment_data_offset(),
            },
            head_lsn: 1,
            head_incarnation: 0,
            cut: Position::default(),
            cut_incarnation: 0,
            sync: SyncChoice::NotRecorded,
            // Nothing is written before the first writable open, which records its own hint:
            // until then the log reaches no further than the head.
            tail_hint: TailHint {
                limit: Position {
                    lap: 1,
                    segment: 0,
                    offset: geometry.segment_data_offset(),
                },
                incarnation: 0,
            },
            purpose: RingPurpose::Log,
        }
    }

    /// The sequence number the next rewrite of this control block carries, or
    /// [`SequenceExhausted`] when it would pass [`CONTROL_SEQUENCE_LIMIT`] (a block the next
    /// read would refuse). Every writer of a control block takes its sequence from here, so
    /// none computes `sequence + 1` on a value read from disk.
    pub fn next_sequence(&self) -> Result<u64, SequenceExhausted> {
        self.sequence
            .checked_add(1)
            .filter(|&next| next <= CONTROL_SEQUENCE_LIMIT)
            .ok_or(SequenceExhausted {
                sequence: self.sequence,
            })
    }

    /// Which of the two copies this block is written to.
    pub fn copy(&self) -> u64 {
        self.sequence % CONTROL_COPIES
    }

    /// Encodes into the first [`CONTROL_SIZE`] bytes of `buf` and zeroes the rest.
    pub fn encode(&self, buf: &mut [u8]) {
        assert!(buf.len() >= CONTROL_SIZE);
        buf.fill(0);
        let g = &self.geometry;
        put_u32(buf, CONTROL_MAGIC_OFFSET, CONTROL_MAGIC);
        put_u16(buf, CONTROL_VERSION_OFFSET, FORMAT_VERSION);
        put_u32(buf, CONTROL_INCARNATION_OFFSET, self.incarnation);
        put_u64(buf, CONTROL_SEQUENCE_OFFSET, self.sequence);
        buf[CONTROL_RING_ID_OFFSET..CONTROL_RING_ID_OFFSET + 16].copy_from_slice(&self.ring_id.0);
        put_u32(buf, CONTROL_BLOCK_SIZE_OFFSET, g.block_size_bytes);
        put_u32(buf, CONTROL_SEGMENT_COUNT_OFFSET, g.segment_count);
        put_u64(buf, CONTROL_SEGMENT_SIZE_OFFSET, g.segment_size_bytes);
        put_u32(buf, CONTROL_BATCH_MAX_OFFSET, g.batch_size_max_bytes);
        put_u32(buf, CONTROL_WINDOW_BATCHES_OFFSET, g.window_batches_max);
        put_u64(buf, CONTROL_WINDOW_BYTES_OFFSET, g.window_bytes_max);
        put_u64(buf, CONTROL_TRIM_LSN_OFFSET, self.trim_lsn);
        put_u64(buf, CONTROL_HEAD_LSN_OFFSET, self.head_lsn);
        put_u32(buf, CONTROL_HEAD_LAP_OFFSET, self.head.lap);
        put_u32(buf, CONTROL_HEAD_SEGMENT_OFFSET, self.head.segment);
        put_u32(buf, CONTROL_HEAD_OFFSET_OFFSET, self.head.offset);
        put_u32(buf, CONTROL_HEAD_INCARNATION_OFFSET, self.head_incarnation);
        put_u32(buf, CONTROL_CUT_LAP_OFFSET, self.cut.lap);
        put_u32(buf, CONTROL_CUT_SEGMENT_OFFSET, self.cut.segment);
        put_u32(buf, CONTROL_CUT_OFFSET_OFFSET, self.cut.offset);
        put_u32(buf, CONTROL_CUT_INCARNATION_OFFSET, self.cut_incarnation);
        encode_sync(&self.sync, buf);
        put_u32(buf, CONTROL_HINT_LAP_OFFSET, self.tail_hint.limit.lap);
        put_u32(
            buf,
            CONTROL_HINT_SEGMENT_OFFSET,
            self.tail_hint.limit.segment,
        );
        put_u32(buf, CONTROL_HINT_OFFSET_OFFSET, self.tail_hint.limit.offset);
        put_u32(
            buf,
            CONTROL_HINT_INCARNATION_OFFSET,
            self.tail_hint.incarnation,
        );
        buf[CONTROL_PURPOSE_OFFSET] = self.purpose as u8;
        let crc = crc_skipping_field(0, &buf[..CONTROL_SIZE], CONTROL_CRC_OFFSET);
        put_u32(buf, CONTROL_CRC_OFFSET, crc);
    }

    /// Decodes a control block copy. The geometry and head are not validated here
    /// ([`Geometry::validate`] and the replay do that), only the bytes' integrity.
    pub fn decode(buf: &[u8]) -> Result<ControlBlock, ControlDefect> {
        if buf.len() < CONTROL_SIZE || get_u32(buf, CONTROL_MAGIC_OFFSET) != CONTROL_MAGIC {
            return Err(ControlDefect::Magic);
        }
        let bytes = &buf[..CONTROL_SIZE];
        let version = get_u16(bytes, CONTROL_VERSION_OFFSET);
        let crc_ok = crc_covers(bytes, CONTROL_SIZE);
        if !crc_ok {
            // Not a block of this version. An intact block of version 1 (either of its forms)
            // names its version, so the ring is refused as another version's, not as damaged.
            let v1_form = crc_covers(bytes, CONTROL_SIZE_V1)
                || crc_covers(bytes, CONTROL_SIZE_V1_BEFORE_SYNC);
            if v1_form && version != FORMAT_VERSION {
                return Err(ControlDefect::Version(version));
            }
            return Err(ControlDefect::Crc);
        }
        if version != FORMAT_VERSION {
            return Err(ControlDefect::Version(version));
        }
        let sync = decode_sync(bytes)?;
        let purpose_byte = bytes[CONTROL_PURPOSE_OFFSET];
        let purpose =
            RingPurpose::from_byte(purpose_byte).ok_or(ControlDefect::Purpose { purpose_byte })?;
        let mut ring_id = [0u8; 16];
        ring_id.copy_from_slice(&bytes[CONTROL_RING_ID_OFFSET..CONTROL_RING_ID_OFFSET + 16]);
        Ok(ControlBlock {
            sequence: get_u64(bytes, CONTROL_SEQUENCE_OFFSET),
            ring_id: RingId(ring_id),
            geometry: Geometry {
                block_size_bytes: get_u32(bytes, CONTROL_BLOCK_SIZE_OFFSET),
                segment_size_bytes: get_u64(bytes, CONTROL_SEGMENT_SIZE_OFFSET),
                segment_count: get_u32(bytes, CONTROL_SEGMENT_COUNT_OFFSET),
                batch_size_max_bytes: get_u32(bytes, CONTROL_BATCH_MAX_OFFSET),
                window_batches_max: get_u32(bytes, CONTROL_WINDOW_BATCHES_OFFSET),
                window_bytes_max: get_u64(bytes, CONTROL_WINDOW_BYTES_OFFSET),
            },
            incarnation: get_u32(bytes, CONTROL_INCARNATION_OFFSET),
            trim_lsn: get_u64(bytes, CONTROL_TRIM_LSN_OFFSET),
            head_lsn: get_u64(bytes, CONTROL_HEAD_LSN_OFFSET),
            head_incarnation: get_u32(bytes, CONTROL_HEAD_INCARNATION_OFFSET),
            cut: Position {
                lap: get_u32(bytes, CONTROL_CUT_LAP_OFFSET),
                segment: get_u32(bytes, CONTROL_CUT_SEGMENT_OFFSET),
                offset: get_u32(bytes, CONTROL_CUT_OFFSET_OFFSET),
            },
            cut_incarnation: get_u32(bytes, CONTROL_CUT_INCARNATION_OFFSET),
            head: Position {
                lap: get_u32(bytes, CONTROL_HEAD_LAP_OFFSET),
                segment: get_u32(bytes, CONTROL_HEAD_SEGMENT_OFFSET),
                offset: get_u32(bytes, CONTROL_HEAD_OFFSET_OFFSET),
            },
            sync,
            tail_hint: TailHint {
                limit: Position {
                    lap: get_u32(bytes, CONTROL_HINT_LAP_OFFSET),
                    segment: get_u32(bytes, CONTROL_HINT_SEGMENT_OFFSET),
                    offset: get_u32(bytes, CONTROL_HINT_OFFSET_OFFSET),
                },
                incarnation: get_u32(bytes, CONTROL_HINT_INCARNATION_OFFSET),
            },
            purpose,
        })
    }
}

/// Whether a control block's CRC covers its first `size` bytes, with every byte after them up
/// to [`CONTROL_SIZE`] zero (a block of a layout that used only `size` bytes).
fn crc_covers(bytes: &[u8], size: usize) -> bool {
    debug_assert!(size <= CONTROL_SIZE && bytes.len() >= CONTROL_SIZE);
    bytes[size..CONTROL_SIZE].iter().all(|&byte| byte == 0)
        && crc_skipping_field(0, &bytes[..size], CONTROL_CRC_OFFSET)
            == get_u32(bytes, CONTROL_CRC_OFFSET)
}

/// Writes the sync choice's bytes (zeros where it has no figures).
fn encode_sync(sync: &SyncChoice, buf: &mut [u8]) {
    debug_assert!(buf[CONTROL_SYNC_METHOD_OFFSET..CONTROL_SIZE]
        .iter()
        .all(|&byte| byte == 0));
    let (method, source, measurement) = match *sync {
        SyncChoice::NotRecorded => return,
        SyncChoice::Named(method) => (method, SYNC_SOURCE_NAMED, SyncMeasurement::default()),
        SyncChoice::Measured {
            method,
            measurement,
        } => (method, SYNC_SOURCE_MEASURED, measurement),
    };
    buf[CONTROL_SYNC_METHOD_OFFSET] = method as u8;
    buf[CONTROL_SYNC_SOURCE_OFFSET] = source;
    buf[CONTROL_SYNC_FLAGS_OFFSET] = if measurement.fua { SYNC_FLAG_FUA } else { 0 };
    buf[CONTROL_SYNC_MARGIN_OFFSET] = measurement.margin_percent;
    put_u32(
        buf,
        CONTROL_PROBE_BYTES_OFFSET,
        measurement.write_size_bytes,
    );
    put_u16(buf, CONTROL_PROBE_ROUNDS_OFFSET, measurement.rounds);
    put_u16(
        buf,
        CONTROL_PROBE_WRITES_OFFSET,
        measurement.writes_per_round,
    );
    put_u32(
        buf,
        CONTROL_FDATASYNC_P50_OFFSET,
        measurement.fdatasync_p50_us,
    );
    put_u32(
        buf,
        CONTROL_FDATASYNC_P99_OFFSET,
        measurement.fdatasync_p99_us,
    );
    put_u32(buf, CONTROL_DSYNC_P50_OFFSET, measurement.dsync_p50_us);
    put_u32(buf, CONTROL_DSYNC_P99_OFFSET, measurement.dsync_p99_us);
}

/// Source byte of a sync choice that was measured.
const SYNC_SOURCE_MEASURED: u8 = 1;
/// Source byte of a sync choice the operator named.
const SYNC_SOURCE_NAMED: u8 = 2;

/// Reads the sync choice of a control block whose CRC checked out. The method and source
/// bytes decide what the drive does, so a value this version never writes is a defect; the
/// figures are only reported, and are taken as they are.
fn decode_sync(bytes: &[u8]) -> Result<SyncChoice, ControlDefect> {
    let method_byte = bytes[CONTROL_SYNC_METHOD_OFFSET];
    let source = bytes[CONTROL_SYNC_SOURCE_OFFSET];
    let defect = ControlDefect::SyncChoice {
        method_byte,
        source_byte: source,
    };
    if (method_byte, source) == (0, 0) {
        return Ok(SyncChoice::NotRecorded);
    }
    let method = SyncMethod::from_byte(method_byte).ok_or(defect)?;
    match source {
        SYNC_SOURCE_NAMED => Ok(SyncChoice::Named(method)),
        SYNC_SOURCE_MEASURED => Ok(SyncChoice::Measured {
            method,
            measurement: SyncMeasurement {
                write_size_bytes: get_u32(bytes, CONTROL_PROBE_BYTES_OFFSET),
                rounds: get_u16(bytes, CONTROL_PROBE_ROUNDS_OFFSET),
                writes_per_round: get_u16(bytes, CONTROL_PROBE_WRITES_OFFSET),
                margin_percent: bytes[CONTROL_SYNC_MARGIN_OFFSET],
                fua: bytes[CONTROL_SYNC_FLAGS_OFFSET] & SYNC_FLAG_FUA != 0,
                fdatasync_p50_us: get_u32(bytes, CONTROL_FDATASYNC_P50_OFFSET),
                fdatasync_p99_us: get_u32(bytes, CONTROL_FDATASYNC_P99_OFFSET),
                dsync_p50_us: get_u32(bytes, CONTROL_DSYNC_P50_OFFSET),
                dsync_p99_us: get_u32(bytes, CONTROL_DSYNC_P99_OFFSET),
            },
        }),
        _ => Err(defect),
    }
}

/// A segment's header: which lap it is on and where its LSNs start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentHeader {
    /// The segment's index in the ring.
    pub segment: u32,
    /// The lap the segment was last started on.
    pub lap: u32,
    /// The incarnation of the writer that started it.
    pub incarnation: u32,
    /// LSN of the first record of the segment's first batch on this lap.
    pub first_lsn: u64,
}

/// Why a segment header was not accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SegmentDefect {
    /// The block is all zeros: the segment was never started.
    Zeroed,
    /// No segment magic.
    Magic,
    /// Another format version.
    Version,
    /// The CRC (seeded with this ring's id) does not match: damaged, torn or another ring's.
    Crc,
}

impl SegmentHeader {
    /// Encodes into the first [`SEGMENT_HEADER_SIZE`] bytes of `buf` and zeroes the rest.
    pub fn encode(&self, ring_id: RingId, buf: &mut [u8]) {
        assert!(buf.len() >= SEGMENT_HEADER_SIZE);
        buf.fill(0);
        put_u32(buf, SEGMENT_MAGIC_OFFSET, SEGMENT_MAGIC);
        put_u16(buf, SEGMENT_VERSION_OFFSET, FORMAT_VERSION);
        put_u32(buf, SEGMENT_INDEX_OFFSET, self.segment);
        put_u32(buf, SEGMENT_LAP_OFFSET, self.lap);
        put_u32(buf, SEGMENT_INCARNATION_OFFSET, self.incarnation);
        put_u64(buf, SEGMENT_FIRST_LSN_OFFSET, self.first_lsn);
        buf[SEGMENT_RING_ID_OFFSET..SEGMENT_RING_ID_OFFSET + 16].copy_from_slice(&ring_id.0);
        let crc = crc_skipping_field(
            ring_id.crc_seed(),
            &buf[..SEGMENT_HEADER_SIZE],
            SEGMENT_CRC_OFFSET,
        );
        put_u32(buf, SEGMENT_CRC_OFFSET, crc);
    }

    /// Decodes and checks a segment header against this ring's identity.
    pub fn decode(ring_id: RingId, buf: &[u8]) -> Result<SegmentHeader, SegmentDefect> {
        let bytes = &buf[..SEGMENT_HEADER_SIZE];
        if get_u32(bytes, SEGMENT_MAGIC_OFFSET) != SEGMENT_MAGIC {
            if bytes.iter().all(|&byte| byte == 0) {
                return Err(SegmentDefect::Zeroed);
            }
            return Err(SegmentDefect::Magic);
        }
        if get_u16(bytes, SEGMENT_VERSION_OFFSET) != FORMAT_VERSION {
            return Err(SegmentDefect::Version);
        }
        let crc = crc_skipping_field(ring_id.crc_seed(), bytes, SEGMENT_CRC_OFFSET);
        if crc != get_u32(bytes, SEGMENT_CRC_OFFSET) {
            return Err(SegmentDefect::Crc);
        }
        Ok(SegmentHeader {
            segment: get_u32(bytes, SEGMENT_INDEX_OFFSET),
            lap: get_u32(bytes, SEGMENT_LAP_OFFSET),
            incarnation: get_u32(bytes, SEGMENT_INCARNATION_OFFSET),
            first_lsn: get_u64(bytes, SEGMENT_FIRST_LSN_OFFSET),
        })
    }
}

/// A decoded entry header: every field of the 96 bytes but the checksums, which decoding checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryHeader {
    /// The record's kind.
    pub kind: Kind,
    /// Payload length in bytes.
    pub payload_len: u32,
    /// CRC32C of the payload.
    pub payload_crc: u32,
    /// The writer's incarnation.
    pub incarnation: u32,
    /// The record's LSN (for padding: the LSN the next record takes).
    pub lsn: u64,
    /// The highest LSN acknowledged when the batch was built.
    pub watermark: u64,
    /// Where the header was written.
    pub position: Position,
    /// Length of the record's batch in bytes.
    pub batch_bytes: u32,
    /// The record's index within its batch.
    pub batch_index: u32,
    /// The embedder's header: theirs, carried and checked (the header CRC covers it), never
    /// interpreted.
    pub embedder: EmbedderHeader,
}

/// Why an entry header was not accepted, in the order the checks run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeaderDefect {
    /// All 96 bytes are zero: nothing was written here.
    Zeroed,
    /// No entry magic.
    Magic,
    /// Another format version.
    Version,
    /// The ring tag names another ring.
    RingId,
    /// The header CRC does not match.
    HeaderCrc,
    /// The kind byte names no kind, or the flags are not zero.
    Kind,
}

impl EntryHeader {
    /// The LSN of the first record of this record's batch. Wrapping on purpose: both fields
    /// come from disk, and a header whose index exceeds its LSN is garbage that replay refuses
    /// by LSN continuity; here it only yields an identity no real batch has.
    pub fn batch_first_lsn(&self) -> u64 {
        self.lsn.wrapping_sub(u64::from(self.batch_index))
    }

    /// Bytes of this record: header (the embedder's included) plus payload.
    pub fn record_bytes(&self) -> u64 {
        ENTRY_HEADER_SIZE as u64 + u64::from(self.payload_len)
    }

    /// Encodes into the first [`ENTRY_HEADER_SIZE`] bytes of `buf`, header CRC included.
    pub fn encode(&self, ring_id: RingId, buf: &mut [u8]) {
        self.encode_unsealed(ring_id, buf);
        seal_entry_header(ring_id, buf, self.batch_bytes);
    }

    /// Encodes every field but the header CRC, which [`seal_entry_header`] computes once the
    /// batch's length is known (so the encoder computes each header CRC once).
    pub(crate) fn encode_unsealed(&self, ring_id: RingId, buf: &mut [u8]) {
        let header = &mut buf[..ENTRY_HEADER_SIZE];
        put_u32(header, ENTRY_MAGIC_OFFSET, ENTRY_MAGIC);
        put_u16(header, ENTRY_VERSION_OFFSET, FORMAT_VERSION);
        header[ENTRY_KIND_OFFSET] = self.kind as u8;
        header[ENTRY_FLAGS_OFFSET] = 0;
        put_u32(header, ENTRY_HEADER_CRC_OFFSET, 0);
        put_u32(header, ENTRY_PAYLOAD_LEN_OFFSET, self.payload_len);
        put_u32(header, ENTRY_PAYLOAD_CRC_OFFSET, self.payload_crc);
        put_u32(header, ENTRY_INCARNATION_OFFSET, self.incarnation);
        put_u64(header, ENTRY_LSN_OFFSET, self.lsn);
        put_u64(header, ENTRY_WATERMARK_OFFSET, self.watermark);
        put_u32(header, ENTRY_LAP_OFFSET, self.position.lap);
        put_u32(header, ENTRY_SEGMENT_OFFSET, self.position.segment);
        put_u32(header, ENTRY_OFFSET_OFFSET, self.position.offset);
        put_u32(header, ENTRY_BATCH_BYTES_OFFSET, self.batch_bytes);
        put_u32(header, ENTRY_BATCH_INDEX_OFFSET, self.batch_index);
        put_u32(header, ENTRY_RING_TAG_OFFSET, ring_id.tag());
        header[ENTRY_EMBEDDER_OFFSET..ENTRY_HEADER_SIZE].copy_from_slice(&self.embedder.to_bytes());
    }

    /// Decodes the header at the start of `buf` and checks its integrity and identity: magic,
    /// version, ring, header CRC, kind and flags. Where it was found, its lap and LSN are for the
    /// caller to check against what it expects.
    pub fn decode(ring_id: RingId, buf: &[u8]) -> Result<EntryHeader, HeaderDefect> {
        let header = &buf[..ENTRY_HEADER_SIZE];
        if get_u32(header, ENTRY_MAGIC_OFFSET) != ENTRY_MAGIC {
            if header.iter().all(|&byte| byte == 0) {
                return Err(HeaderDefect::Zeroed);
            }
            return Err(HeaderDefect::Magic);
        }
        if get_u16(header, ENTRY_VERSION_OFFSET) != FORMAT_VERSION {
            return Err(HeaderDefect::Version);
        }
        if get_u32(header, ENTRY_RING_TAG_OFFSET) != ring_id.tag() {
            return Err(HeaderDefect::RingId);
        }
        let crc = crc_skipping_field(ring_id.crc_seed(), header, ENTRY_HEADER_CRC_OFFSET);
        if crc != get_u32(header, ENTRY_HEADER_CRC_OFFSET) {
            return Err(HeaderDefect::HeaderCrc);
        }
        let kind = Kind::from_byte(header[ENTRY_KIND_OFFSET]).ok_or(HeaderDefect::Kind)?;
        if header[ENTRY_FLAGS_OFFSET] != 0 {
            return Err(HeaderDefect::Kind);
        }
        Ok(EntryHeader {
            kind,
            payload_len: get_u32(header, ENTRY_PAYLOAD_LEN_OFFSET),
            payload_crc: get_u32(header, ENTRY_PAYLOAD_CRC_OFFSET),
            incarnation: get_u32(header, ENTRY_INCARNATION_OFFSET),
            lsn: get_u64(header, ENTRY_LSN_OFFSET),
            watermark: get_u64(header, ENTRY_WATERMARK_OFFSET),
            position: Position {
                lap: get_u32(header, ENTRY_LAP_OFFSET),
                segment: get_u32(header, ENTRY_SEGMENT_OFFSET),
                offset: get_u32(header, ENTRY_OFFSET_OFFSET),
            },
            batch_bytes: get_u32(header, ENTRY_BATCH_BYTES_OFFSET),
            batch_index: get_u32(header, ENTRY_BATCH_INDEX_OFFSET),
            embedder: EmbedderHeader::from_bytes(&header[ENTRY_EMBEDDER_OFFSET..]),
        })
    }
}

/// The embedder's header of an entry: 32 bytes that the layer above sealog gives each entry
/// and gets back from reads, iterators and recovery, as four little-endian 64-bit words. It
/// lies in the entry header, so the header CRC covers it and the payload's does not: when a
/// payload is damaged, the layer above can still tell which of its records it was (a ledger's
/// id and entry id, a stream's extent and offset). sealog never interprets it. The field
/// names are a convention for log servers; any use of the 32 bytes is the embedder's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct EmbedderHeader {
    /// Which of the embedder's logs the entry belongs to (a ledger, a stream, a raft group).
    pub log_id: u64,
    /// The entry's address in that log (an entry id, a byte offset, a raft index).
    pub address: u64,
    /// The epoch, term or fencing token it was written under.
    pub epoch: u64,
    /// A fourth word, for whatever else the embedder needs (flags, a checksum of its own).
    pub extra: u64,
}

impl EmbedderHeader {
    /// All zeros: what entries appended without an embedder header carry.
    pub const ZERO: EmbedderHeader = EmbedderHeader {
        log_id: 0,
        address: 0,
        epoch: 0,
        extra: 0,
    };

    /// The header's bytes as they are stored.
    pub fn to_bytes(&self) -> [u8; EMBEDDER_HEADER_SIZE] {
        let mut bytes = [0u8; EMBEDDER_HEADER_SIZE];
        for (at, word) in [self.log_id, self.address, self.epoch, self.extra]
            .into_iter()
            .enumerate()
        {
            put_u64(&mut bytes, at * 8, word);
        }
        bytes
    }

    /// Decodes the header from its stored bytes (at least [`EMBEDDER_HEADER_SIZE`]).
    pub fn from_bytes(bytes: &[u8]) -> EmbedderHeader {
        EmbedderHeader {
            log_id: get_u64(bytes, 0),
            address: get_u64(bytes, 8),
            epoch: get_u64(bytes, 16),
            extra: get_u64(bytes, 24),
        }
    }
}

/// Sets the `batch bytes` field of the encoded header at the start of `buf`, computes its
/// header CRC, and returns the record's length (header plus payload) in bytes.
pub(crate) fn seal_entry_header(ring_id: RingId, buf: &mut [u8], batch_bytes: u32) -> u64 {
    let header = &mut buf[..ENTRY_HEADER_SIZE];
    put_u32(header, ENTRY_BATCH_BYTES_OFFSET, batch_bytes);
    put_u32(header, ENTRY_HEADER_CRC_OFFSET, 0);
    let crc = crc_skipping_field(ring_id.crc_seed(), header, ENTRY_HEADER_CRC_OFFSET);
    put_u32(header, ENTRY_HEADER_CRC_OFFSET, crc);
    ENTRY_HEADER_SIZE as u64 + u64::from(get_u32(header, ENTRY_PAYLOAD_LEN_OFFSET))
}

/// CRC32C of a payload, as stored in its header.
pub fn payload_crc(payload: &[u8]) -> u32 {
    crc32c::crc32c(payload)
}
