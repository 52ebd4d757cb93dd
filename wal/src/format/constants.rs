//! The format's constants: its version and magics, the limits of a geometry, and every field's
//! offset in the control block, the segment header and the entry header (the layout the module
//! doc of `format` draws), with compile-time checks that they fit.

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
pub(crate) const CONTROL_MAGIC_OFFSET: usize = 0;
pub(crate) const CONTROL_VERSION_OFFSET: usize = CONTROL_MAGIC_OFFSET + 4;
pub(crate) const CONTROL_RESERVED0_OFFSET: usize = CONTROL_VERSION_OFFSET + 2;
pub(crate) const CONTROL_CRC_OFFSET: usize = CONTROL_RESERVED0_OFFSET + 2;
pub(crate) const CONTROL_INCARNATION_OFFSET: usize = CONTROL_CRC_OFFSET + 4;
pub(crate) const CONTROL_SEQUENCE_OFFSET: usize = CONTROL_INCARNATION_OFFSET + 4;
pub(crate) const CONTROL_RING_ID_OFFSET: usize = CONTROL_SEQUENCE_OFFSET + 8;
pub(crate) const CONTROL_BLOCK_SIZE_OFFSET: usize = CONTROL_RING_ID_OFFSET + 16;
pub(crate) const CONTROL_SEGMENT_COUNT_OFFSET: usize = CONTROL_BLOCK_SIZE_OFFSET + 4;
pub(crate) const CONTROL_SEGMENT_SIZE_OFFSET: usize = CONTROL_SEGMENT_COUNT_OFFSET + 4;
pub(crate) const CONTROL_BATCH_MAX_OFFSET: usize = CONTROL_SEGMENT_SIZE_OFFSET + 8;
pub(crate) const CONTROL_WINDOW_BATCHES_OFFSET: usize = CONTROL_BATCH_MAX_OFFSET + 4;
pub(crate) const CONTROL_WINDOW_BYTES_OFFSET: usize = CONTROL_WINDOW_BATCHES_OFFSET + 4;
pub(crate) const CONTROL_TRIM_LSN_OFFSET: usize = CONTROL_WINDOW_BYTES_OFFSET + 8;
pub(crate) const CONTROL_HEAD_LSN_OFFSET: usize = CONTROL_TRIM_LSN_OFFSET + 8;
pub(crate) const CONTROL_HEAD_LAP_OFFSET: usize = CONTROL_HEAD_LSN_OFFSET + 8;
pub(crate) const CONTROL_HEAD_SEGMENT_OFFSET: usize = CONTROL_HEAD_LAP_OFFSET + 4;
pub(crate) const CONTROL_HEAD_OFFSET_OFFSET: usize = CONTROL_HEAD_SEGMENT_OFFSET + 4;
pub(crate) const CONTROL_HEAD_INCARNATION_OFFSET: usize = CONTROL_HEAD_OFFSET_OFFSET + 4;
pub(crate) const CONTROL_CUT_LAP_OFFSET: usize = CONTROL_HEAD_INCARNATION_OFFSET + 4;
pub(crate) const CONTROL_CUT_SEGMENT_OFFSET: usize = CONTROL_CUT_LAP_OFFSET + 4;
pub(crate) const CONTROL_CUT_OFFSET_OFFSET: usize = CONTROL_CUT_SEGMENT_OFFSET + 4;
pub(crate) const CONTROL_CUT_INCARNATION_OFFSET: usize = CONTROL_CUT_OFFSET_OFFSET + 4;
pub(crate) const CONTROL_SYNC_METHOD_OFFSET: usize = CONTROL_CUT_INCARNATION_OFFSET + 4;
pub(crate) const CONTROL_SYNC_SOURCE_OFFSET: usize = CONTROL_SYNC_METHOD_OFFSET + 1;
pub(crate) const CONTROL_SYNC_FLAGS_OFFSET: usize = CONTROL_SYNC_SOURCE_OFFSET + 1;
pub(crate) const CONTROL_SYNC_MARGIN_OFFSET: usize = CONTROL_SYNC_FLAGS_OFFSET + 1;
pub(crate) const CONTROL_PROBE_BYTES_OFFSET: usize = CONTROL_SYNC_MARGIN_OFFSET + 1;
pub(crate) const CONTROL_PROBE_ROUNDS_OFFSET: usize = CONTROL_PROBE_BYTES_OFFSET + 4;
pub(crate) const CONTROL_PROBE_WRITES_OFFSET: usize = CONTROL_PROBE_ROUNDS_OFFSET + 2;
pub(crate) const CONTROL_FDATASYNC_P50_OFFSET: usize = CONTROL_PROBE_WRITES_OFFSET + 2;
pub(crate) const CONTROL_FDATASYNC_P99_OFFSET: usize = CONTROL_FDATASYNC_P50_OFFSET + 4;
pub(crate) const CONTROL_DSYNC_P50_OFFSET: usize = CONTROL_FDATASYNC_P99_OFFSET + 4;
pub(crate) const CONTROL_DSYNC_P99_OFFSET: usize = CONTROL_DSYNC_P50_OFFSET + 4;
pub(crate) const CONTROL_HINT_LAP_OFFSET: usize = CONTROL_DSYNC_P99_OFFSET + 4;
pub(crate) const CONTROL_HINT_SEGMENT_OFFSET: usize = CONTROL_HINT_LAP_OFFSET + 4;
pub(crate) const CONTROL_HINT_OFFSET_OFFSET: usize = CONTROL_HINT_SEGMENT_OFFSET + 4;
pub(crate) const CONTROL_HINT_INCARNATION_OFFSET: usize = CONTROL_HINT_OFFSET_OFFSET + 4;
pub(crate) const CONTROL_PURPOSE_OFFSET: usize = CONTROL_HINT_INCARNATION_OFFSET + 4;
pub(crate) const CONTROL_RESERVED_OFFSET: usize = CONTROL_PURPOSE_OFFSET + 1;
/// Bytes of a control block that carry fields (the rest of its block is zero).
pub const CONTROL_SIZE: usize = CONTROL_RESERVED_OFFSET + 11;
/// Bytes a version 1 control block's CRC covered (it had no tail hint).
pub const CONTROL_SIZE_V1: usize = 160;
/// Bytes a version 1 control block's CRC covered when it was written before the sync choice
/// was recorded: such a block has zeros from byte 120 (the sync choice's first) on.
pub const CONTROL_SIZE_V1_BEFORE_SYNC: usize = 128;
/// Bit of the sync flags byte: the device reported FUA when the methods were measured.
pub(crate) const SYNC_FLAG_FUA: u8 = 1;

// Segment header field offsets.
pub(crate) const SEGMENT_MAGIC_OFFSET: usize = 0;
pub(crate) const SEGMENT_VERSION_OFFSET: usize = SEGMENT_MAGIC_OFFSET + 4;
pub(crate) const SEGMENT_RESERVED0_OFFSET: usize = SEGMENT_VERSION_OFFSET + 2;
pub(crate) const SEGMENT_CRC_OFFSET: usize = SEGMENT_RESERVED0_OFFSET + 2;
pub(crate) const SEGMENT_INDEX_OFFSET: usize = SEGMENT_CRC_OFFSET + 4;
pub(crate) const SEGMENT_LAP_OFFSET: usize = SEGMENT_INDEX_OFFSET + 4;
pub(crate) const SEGMENT_INCARNATION_OFFSET: usize = SEGMENT_LAP_OFFSET + 4;
pub(crate) const SEGMENT_FIRST_LSN_OFFSET: usize = SEGMENT_INCARNATION_OFFSET + 4;
pub(crate) const SEGMENT_RING_ID_OFFSET: usize = SEGMENT_FIRST_LSN_OFFSET + 8;
pub(crate) const SEGMENT_RESERVED1_OFFSET: usize = SEGMENT_RING_ID_OFFSET + 16;
/// Bytes of a segment header that carry fields (the rest of its block is zero).
pub const SEGMENT_HEADER_SIZE: usize = SEGMENT_RESERVED1_OFFSET + 16;

// Entry header field offsets.
pub(crate) const ENTRY_MAGIC_OFFSET: usize = 0;
pub(crate) const ENTRY_VERSION_OFFSET: usize = ENTRY_MAGIC_OFFSET + 4;
pub(crate) const ENTRY_KIND_OFFSET: usize = ENTRY_VERSION_OFFSET + 2;
pub(crate) const ENTRY_FLAGS_OFFSET: usize = ENTRY_KIND_OFFSET + 1;
pub(crate) const ENTRY_HEADER_CRC_OFFSET: usize = ENTRY_FLAGS_OFFSET + 1;
pub(crate) const ENTRY_PAYLOAD_LEN_OFFSET: usize = ENTRY_HEADER_CRC_OFFSET + 4;
pub(crate) const ENTRY_PAYLOAD_CRC_OFFSET: usize = ENTRY_PAYLOAD_LEN_OFFSET + 4;
pub(crate) const ENTRY_INCARNATION_OFFSET: usize = ENTRY_PAYLOAD_CRC_OFFSET + 4;
pub(crate) const ENTRY_LSN_OFFSET: usize = ENTRY_INCARNATION_OFFSET + 4;
pub(crate) const ENTRY_WATERMARK_OFFSET: usize = ENTRY_LSN_OFFSET + 8;
pub(crate) const ENTRY_LAP_OFFSET: usize = ENTRY_WATERMARK_OFFSET + 8;
pub(crate) const ENTRY_SEGMENT_OFFSET: usize = ENTRY_LAP_OFFSET + 4;
pub(crate) const ENTRY_OFFSET_OFFSET: usize = ENTRY_SEGMENT_OFFSET + 4;
pub(crate) const ENTRY_BATCH_BYTES_OFFSET: usize = ENTRY_OFFSET_OFFSET + 4;
pub(crate) const ENTRY_BATCH_INDEX_OFFSET: usize = ENTRY_BATCH_BYTES_OFFSET + 4;
pub(crate) const ENTRY_RING_TAG_OFFSET: usize = ENTRY_BATCH_INDEX_OFFSET + 4;
pub(crate) const ENTRY_EMBEDDER_OFFSET: usize = ENTRY_RING_TAG_OFFSET + 4;
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
