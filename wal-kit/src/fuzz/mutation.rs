//! What a mutation did, as a value: [`Mutation`] names the kind of damage and exactly where it
//! went, with the fields a crafted control block, segment header or entry header set
//! ([`ControlField`], [`SegmentField`], [`EntryField`]), so that a failing case's report says
//! what was done. Both the block damage of [`super::mutate`] and the crafting of
//! [`super::craft`] return it; it lies apart from both so that neither imports the other's
//! values.

use super::choices::mix64;
use sealog_wal::format::{ControlBlock, RingId};

/// A control block field a crafted control block sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ControlField {
    /// `sequence`.
    Sequence,
    /// `incarnation`.
    Incarnation,
    /// `trim_lsn`.
    TrimLsn,
    /// `head_lsn`.
    HeadLsn,
    /// `head.lap`.
    HeadLap,
    /// `head.segment`.
    HeadSegment,
    /// `head.offset`.
    HeadOffset,
    /// `head_incarnation`.
    HeadIncarnation,
    /// `cut.lap`.
    CutLap,
    /// `cut.segment`.
    CutSegment,
    /// `cut.offset`.
    CutOffset,
    /// `cut_incarnation`.
    CutIncarnation,
    /// `geometry.block_size_bytes`.
    BlockSize,
    /// `geometry.segment_size_bytes`.
    SegmentSize,
    /// `geometry.segment_count`.
    SegmentCount,
    /// `geometry.batch_size_max_bytes`.
    BatchSize,
    /// `geometry.window_batches_max`.
    WindowBatches,
    /// `geometry.window_bytes_max`.
    WindowBytes,
    /// `ring_id`, derived from the value.
    RingId,
}

impl ControlField {
    /// Every field.
    pub const ALL: [ControlField; 19] = [
        ControlField::Sequence,
        ControlField::Incarnation,
        ControlField::TrimLsn,
        ControlField::HeadLsn,
        ControlField::HeadLap,
        ControlField::HeadSegment,
        ControlField::HeadOffset,
        ControlField::HeadIncarnation,
        ControlField::CutLap,
        ControlField::CutSegment,
        ControlField::CutOffset,
        ControlField::CutIncarnation,
        ControlField::BlockSize,
        ControlField::SegmentSize,
        ControlField::SegmentCount,
        ControlField::BatchSize,
        ControlField::WindowBatches,
        ControlField::WindowBytes,
        ControlField::RingId,
    ];

    /// The field's value (the ring id's first eight bytes).
    pub fn get(self, control: &ControlBlock) -> u64 {
        let g = &control.geometry;
        match self {
            ControlField::Sequence => control.sequence,
            ControlField::Incarnation => u64::from(control.incarnation),
            ControlField::TrimLsn => control.trim_lsn,
            ControlField::HeadLsn => control.head_lsn,
            ControlField::HeadLap => u64::from(control.head.lap),
            ControlField::HeadSegment => u64::from(control.head.segment),
            ControlField::HeadOffset => u64::from(control.head.offset),
            ControlField::HeadIncarnation => u64::from(control.head_incarnation),
            ControlField::CutLap => u64::from(control.cut.lap),
            ControlField::CutSegment => u64::from(control.cut.segment),
            ControlField::CutOffset => u64::from(control.cut.offset),
            ControlField::CutIncarnation => u64::from(control.cut_incarnation),
            ControlField::BlockSize => u64::from(g.block_size_bytes),
            ControlField::SegmentSize => g.segment_size_bytes,
            ControlField::SegmentCount => u64::from(g.segment_count),
            ControlField::BatchSize => u64::from(g.batch_size_max_bytes),
            ControlField::WindowBatches => u64::from(g.window_batches_max),
            ControlField::WindowBytes => g.window_bytes_max,
            ControlField::RingId => {
                let mut first = [0u8; 8];
                first.copy_from_slice(&control.ring_id.0[..8]);
                u64::from_le_bytes(first)
            }
        }
    }

    /// Sets the field (a 32-bit field takes the value's low 32 bits).
    pub fn set(self, control: &mut ControlBlock, value: u64) {
        let low = value as u32;
        let g = &mut control.geometry;
        match self {
            ControlField::Sequence => control.sequence = value,
            ControlField::Incarnation => control.incarnation = low,
            ControlField::TrimLsn => control.trim_lsn = value,
            ControlField::HeadLsn => control.head_lsn = value,
            ControlField::HeadLap => control.head.lap = low,
            ControlField::HeadSegment => control.head.segment = low,
            ControlField::HeadOffset => control.head.offset = low,
            ControlField::HeadIncarnation => control.head_incarnation = low,
            ControlField::CutLap => control.cut.lap = low,
            ControlField::CutSegment => control.cut.segment = low,
            ControlField::CutOffset => control.cut.offset = low,
            ControlField::CutIncarnation => control.cut_incarnation = low,
            ControlField::BlockSize => g.block_size_bytes = low,
            ControlField::SegmentSize => g.segment_size_bytes = value,
            ControlField::SegmentCount => g.segment_count = low,
            ControlField::BatchSize => g.batch_size_max_bytes = low,
            ControlField::WindowBatches => g.window_batches_max = low,
            ControlField::WindowBytes => g.window_bytes_max = value,
            ControlField::RingId => control.ring_id = derived_ring_id(value),
        }
    }

    /// Whether the field is 32 bits wide (a value set takes its low 32 bits).
    pub(super) fn is_u32(self) -> bool {
        !matches!(
            self,
            ControlField::Sequence
                | ControlField::TrimLsn
                | ControlField::HeadLsn
                | ControlField::SegmentSize
                | ControlField::WindowBytes
                | ControlField::RingId
        )
    }
}

/// A segment header field a crafted header sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SegmentField {
    /// `segment`.
    Segment,
    /// `lap`.
    Lap,
    /// `incarnation`.
    Incarnation,
    /// `first_lsn`.
    FirstLsn,
}

/// An entry header field a re-sealed header sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryField {
    /// `lsn`.
    Lsn,
    /// `watermark`.
    Watermark,
    /// `incarnation`.
    Incarnation,
    /// `position.lap`.
    Lap,
    /// `position.segment`.
    Segment,
    /// `position.offset`.
    Offset,
    /// `batch_bytes`.
    BatchBytes,
    /// `batch_index`.
    BatchIndex,
    /// `payload_len`.
    PayloadLen,
    /// `payload_crc`.
    PayloadCrc,
    /// `kind` (the value is the kind byte, 1 to 5).
    Kind,
}

/// A ring id made from a number (all zeros from 0).
pub(super) fn derived_ring_id(value: u64) -> RingId {
    let mut id = [0u8; 16];
    id[..8].copy_from_slice(&value.to_le_bytes());
    id[8..].copy_from_slice(&mix64(value).to_le_bytes());
    RingId(id)
}

/// What replaces the old part of a torn block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TornRest {
    /// The bytes an earlier image (`Ring::history[snapshot]`) had there.
    Old {
        /// Which earlier image.
        snapshot: usize,
    },
    /// Zeros.
    Zero,
    /// Garbage from the seed.
    Garbage {
        /// The garbage's seed.
        seed: u64,
    },
}

/// Where a run of unreadable blocks was placed (the run itself is in the mutation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnreadablePlace {
    /// At one of the last batches' first block, or at the log's end: a break near the end.
    NearEnd,
    /// At or inside a batch of the log, with (usually) more of the log after it.
    InsideLog,
    /// In free space after the log's end, or anywhere (trimmed space, often).
    FreeSpace,
    /// At a segment's header block.
    SegmentHeader,
    /// At a block [`pick_block`](super::blocks::pick_block) chose (control copies included).
    Picked,
}

/// One mutation, as applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mutation {
    /// Nothing could be applied (the image is too short for the place chosen).
    Nothing,
    /// Bits flipped in one byte.
    FlipBits {
        /// Where.
        ring_offset: u64,
        /// Which bits.
        mask: u8,
    },
    /// A block zeroed.
    ZeroBlock {
        /// Which block.
        block: u64,
    },
    /// A block filled with garbage.
    GarbageBlock {
        /// Which block.
        block: u64,
        /// The garbage's seed.
        seed: u64,
    },
    /// Two blocks swapped.
    SwapBlocks {
        /// One block.
        a: u64,
        /// The other.
        b: u64,
    },
    /// A block copied over another (a misdirected write).
    DuplicateBlock {
        /// The block copied.
        from: u64,
        /// The block overwritten.
        to: u64,
    },
    /// A block torn: its first sectors are what the image had, the rest replaced.
    TearBlock {
        /// Which block.
        block: u64,
        /// 512-byte sectors kept.
        sectors_kept: u32,
        /// What the other sectors hold.
        rest: TornRest,
    },
    /// A block replaced by what an earlier image had there: another lap's or incarnation's
    /// bytes, or a write that never happened.
    StaleBlock {
        /// Which block.
        block: u64,
        /// Which earlier image.
        snapshot: usize,
    },
    /// A run of blocks made unreadable: every read overlapping one fails with EIO.
    Unreadable {
        /// Its first block.
        block: u64,
        /// How many blocks.
        blocks: u64,
        /// Where it was aimed.
        place: UnreadablePlace,
        /// It has more blocks than the ring's in-flight window holds.
        longer_than_window: bool,
    },
    /// The image cut short.
    Truncate {
        /// Its new length.
        len_bytes: u64,
    },
    /// A control block crafted and written with a valid CRC.
    Control {
        /// The copy's slot it was written to (its sequence names `sequence % 2`).
        slot: u64,
        /// Its sequence.
        sequence: u64,
        /// The fields set, in order.
        edits: Vec<(ControlField, u64)>,
    },
    /// A segment header crafted and written with a valid CRC.
    SegmentHeader {
        /// The segment whose header block it was written to.
        segment: u32,
        /// Sealed with another ring's id.
        other_ring: bool,
        /// The fields set, in order.
        edits: Vec<(SegmentField, u64)>,
    },
    /// An entry header changed and re-sealed with a valid header CRC.
    EntryHeader {
        /// Where the header is.
        ring_offset: u64,
        /// The fields set, in order.
        edits: Vec<(EntryField, u64)>,
    },
    /// A payload byte changed, and the payload CRC and header CRC recomputed: a valid record
    /// with bytes that were never appended.
    PayloadResealed {
        /// Where the record's header is.
        ring_offset: u64,
        /// The payload byte changed.
        payload_offset: u32,
        /// The bits flipped in it.
        mask: u8,
    },
}

impl Mutation {
    /// The mutation's kind, for tallies.
    pub fn name(&self) -> &'static str {
        match self {
            Mutation::Nothing => "nothing",
            Mutation::FlipBits { .. } => "flip_bits",
            Mutation::ZeroBlock { .. } => "zero_block",
            Mutation::GarbageBlock { .. } => "garbage_block",
            Mutation::SwapBlocks { .. } => "swap_blocks",
            Mutation::DuplicateBlock { .. } => "duplicate_block",
            Mutation::TearBlock { .. } => "tear_block",
            Mutation::StaleBlock { .. } => "stale_block",
            Mutation::Unreadable { .. } => "unreadable_blocks",
            Mutation::Truncate { .. } => "truncate",
            Mutation::Control { .. } => "control_block",
            Mutation::SegmentHeader { .. } => "segment_header",
            Mutation::EntryHeader { .. } => "entry_header",
            Mutation::PayloadResealed { .. } => "payload_resealed",
        }
    }
}
