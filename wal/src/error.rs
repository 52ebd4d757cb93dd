//! Typed errors of the `wal` crate, one enum per operation: geometry validation, batch
//! encoding, write planning, replay and the recovery plan ([`PlanError`], which
//! [`crate::recovery`] re-exports). Each variant carries what and where (segment, offset,
//! LSN); nothing is a string to be matched on.

use crate::format::Position;
use crate::replay::check::{Check, Corruption};

/// A geometry that breaks a rule of the format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GeometryError {
    /// The block size is not a power of two between 4096 and 65536.
    #[error("block size {block_size_bytes} is not a power of two between 4096 and 65536")]
    BlockSize {
        /// The rejected block size.
        block_size_bytes: u32,
    },
    /// The segment size is not a multiple of the block size, or too small or too large.
    #[error(
        "segment size {segment_size_bytes} must be a multiple of the block size \
         {block_size_bytes}, hold at least two blocks and stay below 4 GiB"
    )]
    SegmentSize {
        /// The rejected segment size.
        segment_size_bytes: u64,
        /// The ring's block size.
        block_size_bytes: u32,
    },
    /// Fewer than two segments.
    #[error("a ring needs at least 2 segments, not {segment_count}")]
    SegmentCount {
        /// The rejected count.
        segment_count: u32,
    },
    /// The batch limit is not a block multiple, or does not fit in a segment.
    #[error(
        "batch size limit {batch_size_max_bytes} must be a block multiple of at most 64 MiB \
         that fits in a segment's {segment_data_bytes} data bytes"
    )]
    BatchSize {
        /// The rejected batch limit.
        batch_size_max_bytes: u32,
        /// Bytes of a segment available to batches.
        segment_data_bytes: u64,
    },
    /// The in-flight window cannot hold one batch, is larger than the ring, or holds more
    /// than [`WINDOW_BATCHES_LIMIT`](crate::format::WINDOW_BATCHES_LIMIT) batches.
    #[error(
        "in-flight window of {window_batches_max} batches / {window_bytes_max} bytes must hold \
         one batch of {batch_size_max_bytes} bytes, fit in the ring and count at most {} \
         batches",
        crate::format::WINDOW_BATCHES_LIMIT
    )]
    Window {
        /// The rejected batch bound.
        window_batches_max: u32,
        /// The rejected byte bound.
        window_bytes_max: u64,
        /// The ring's batch limit.
        batch_size_max_bytes: u32,
    },
    /// The ring's total size overflows 64 bits.
    #[error("the ring's total size overflows 64 bits")]
    TooLarge,
}

/// Why a record could not be added to a batch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// The payload is over the ring's limit; it can never be appended.
    #[error("payload of {payload_len} bytes is over the ring's limit of {payload_size_max_bytes}")]
    PayloadTooLarge {
        /// The payload's length.
        payload_len: u64,
        /// The ring's payload limit.
        payload_size_max_bytes: u32,
    },
    /// The batch has no room left for this record; finish it and start another.
    #[error("the batch has {free_bytes} bytes free, the record needs {record_bytes}")]
    BatchFull {
        /// Bytes still free in the batch.
        free_bytes: u64,
        /// Bytes the record needs, header included.
        record_bytes: u64,
    },
    /// Padding is not a record an embedder appends.
    #[error("padding records are written by the encoder only")]
    PaddingKind,
}

/// A control block's sequence number cannot be bumped again without passing
/// [`CONTROL_SEQUENCE_LIMIT`](crate::format::CONTROL_SEQUENCE_LIMIT).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the control block's sequence {sequence} cannot be bumped again")]
pub struct SequenceExhausted {
    /// The sequence of the control block that was to be rewritten.
    pub sequence: u64,
}

/// The writer cannot place the next batch without overwriting live (untrimmed) entries.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "ring full: the next batch would enter segment {segment} on lap {lap}, which still holds \
     live entries from the head at {head}; trim to make room"
)]
pub struct RingFull {
    /// The segment the writer needs.
    pub segment: u32,
    /// The lap it would start there.
    pub lap: u32,
    /// The oldest live batch.
    pub head: Position,
}

/// Why replay could not produce a recovered log.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// Reading a control block failed; nothing about the ring is known.
    #[error("reading the control block at ring offset {offset} failed: {source}")]
    ControlIo {
        /// Ring offset of the failed read.
        offset: u64,
        /// The source's error.
        #[source]
        source: std::io::Error,
    },
    /// Neither control copy carries the control magic: this is not a sealog ring.
    #[error("not a sealog ring: no control block magic at ring offsets 0 and {second_offset}")]
    NotARing {
        /// Where the second copy was looked for.
        second_offset: u64,
    },
    /// Both control copies carry the magic but neither checks out.
    #[error("both control block copies are damaged (CRC mismatch): the ring cannot be opened")]
    ControlCorrupt,
    /// A control copy checks out but records a sync choice this version never writes (a
    /// method or source byte it does not know), and no other copy checks out.
    #[error(
        "the control block records an unknown sync choice (method byte {method_byte}, source \
         byte {source_byte}): the ring cannot be opened"
    )]
    ControlSyncChoice {
        /// The method byte found.
        method_byte: u8,
        /// The source byte found.
        source_byte: u8,
    },
    /// A control copy checks out but records a purpose byte this version does not know, and
    /// no other copy checks out.
    #[error(
        "the control block records an unknown ring purpose (byte {purpose_byte}): the ring \
         cannot be opened"
    )]
    ControlPurpose {
        /// The purpose byte found.
        purpose_byte: u8,
    },
    /// The ring was written by another format version.
    #[error("ring format version {found} is not supported (this build reads version {supported})")]
    UnsupportedVersion {
        /// The version on disk.
        found: u16,
        /// The version this build reads.
        supported: u16,
    },
    /// The control block's geometry breaks a rule of the format.
    #[error("the control block's geometry is invalid: {0}")]
    Geometry(#[from] GeometryError),
    /// The control block's head or trim point is impossible for its geometry.
    #[error("the control block's head {head} (LSN {head_lsn}, trim {trim_lsn}) is invalid")]
    ControlHead {
        /// The recorded head.
        head: Position,
        /// The recorded head LSN.
        head_lsn: u64,
        /// The recorded trim LSN.
        trim_lsn: u64,
    },
    /// The source is smaller than the geometry says the ring is.
    #[error("the ring needs {ring_size_bytes} bytes but the source holds {source_size_bytes}")]
    SourceTooSmall {
        /// Bytes the geometry needs.
        ring_size_bytes: u64,
        /// Bytes the source has.
        source_size_bytes: u64,
    },
    /// While iterating over a replayed ring, a batch the report counted no longer checks out:
    /// the ring changed underneath (or the drive returned other bytes the second time).
    #[error(
        "the ring changed since it was replayed: at {position}, LSN {lsn} failed the {check} check"
    )]
    Changed {
        /// Where.
        position: Position,
        /// The LSN expected there.
        lsn: u64,
        /// The check that failed.
        check: Check,
    },
    /// The current control block's sequence number is past
    /// [`CONTROL_SEQUENCE_LIMIT`](crate::format::CONTROL_SEQUENCE_LIMIT): no writer ever writes
    /// one, so the block was crafted or damaged in a way its CRC did not catch.
    #[error(
        "the control block's sequence {sequence} is past the limit {}",
        crate::format::CONTROL_SEQUENCE_LIMIT
    )]
    ControlSequence {
        /// The sequence found.
        sequence: u64,
    },
    /// The ring's incarnation counter is exhausted: no writer can open it again.
    #[error(
        "the ring's incarnation counter is exhausted (u32::MAX); it cannot be opened for writing"
    )]
    IncarnationExhausted,
    /// Acknowledged data is damaged (strict mode): the log cannot be recovered without loss.
    #[error("{0}")]
    Corruption(Box<Corruption>),
    /// The ring replays, but no writer may open it (see [`PlanError`]).
    #[error("the ring cannot be opened for writing: {0}")]
    Plan(PlanError),
}

/// A writable open (replay, then the recovery plan) fails with the plan's error; an exhausted
/// incarnation keeps its own variant.
impl From<PlanError> for ReplayError {
    fn from(error: PlanError) -> ReplayError {
        match error {
            PlanError::IncarnationExhausted { .. } => ReplayError::IncarnationExhausted,
            other => ReplayError::Plan(other),
        }
    }
}

/// Why no writer may open the ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// The incarnation counter is exhausted: no new incarnation exists.
    #[error("the ring's incarnation counter is exhausted ({incarnation_max} is the last)")]
    IncarnationExhausted {
        /// The highest incarnation found.
        incarnation_max: u32,
    },
    /// The control block's sequence cannot be bumped again.
    #[error(transparent)]
    Sequence(#[from] SequenceExhausted),
}
