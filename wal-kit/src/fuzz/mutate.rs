//! The mutations the structure-aware fuzzer stacks on a valid ring, and the choice among them:
//! damage a drive or a crash could do (bit flips, zeroed, garbage, swapped, duplicated, torn and
//! stale blocks, a short device, runs of blocks that cannot be read), and metadata crafted with
//! valid CRCs ([`super::craft`]). Each mutation is chosen and applied in one go and returned as
//! a value whose `Debug` form says exactly what was done, for the report of a failing case. It
//! owns no checks.

use super::choices::Choices;
use super::craft::{
    craft_control, craft_segment_header, reseal_entry_header, reseal_payload, ControlField,
    EntryField, SegmentField,
};
use super::rings::Ring;
use super::source::Image;
use crate::model::{fill_garbage, TEAR_SECTOR_BYTES};

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
    /// At a block [`pick_block`] chose (control copies included).
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

/// Chooses one mutation of any kind and applies it to `image` (`ring.image`, perhaps already
/// mutated).
pub fn mutate(ring: &Ring, image: &mut Image, choices: &mut Choices<'_>) -> Mutation {
    // Weights out of 54: crafted metadata 20, block damage 27, unreadable blocks 6, a short
    // image 1 (most short images are refused at once as too small for their geometry).
    let bytes = &mut image.bytes;
    match choices.below(54) {
        0..=5 => craft_control(ring, bytes, choices),
        6..=11 => craft_segment_header(ring, bytes, choices),
        12..=17 => reseal_entry_header(ring, bytes, choices),
        18 | 19 => reseal_payload(ring, bytes, choices),
        20..=25 => flip_bits(ring, bytes, choices),
        26..=29 => {
            let block = pick_block(ring, bytes, choices);
            apply_to_block(
                ring,
                bytes,
                block,
                |bytes| bytes.fill(0),
                || Mutation::ZeroBlock { block },
            )
        }
        30 | 31 => {
            let block = pick_block(ring, bytes, choices);
            let seed = choices.next_u64();
            apply_to_block(
                ring,
                bytes,
                block,
                |bytes| fill_garbage(bytes, seed),
                || Mutation::GarbageBlock { block, seed },
            )
        }
        32 | 33 => swap_blocks(ring, bytes, choices),
        34..=37 => duplicate_block(ring, bytes, choices),
        38..=42 => tear_block(ring, bytes, choices),
        43..=46 => stale_block(ring, bytes, choices),
        47..=52 => unreadable_run(ring, image, choices),
        _ => {
            let block = u64::from(ring.geometry.block_size_bytes);
            let len = bytes.len() as u64;
            let len_bytes = if choices.chance(1, 2) {
                len.saturating_sub(block * choices.between(1, 3))
            } else {
                choices.below(len)
            };
            bytes.truncate(len_bytes as usize);
            Mutation::Truncate { len_bytes }
        }
    }
}

/// Makes a run of blocks unreadable (a latent sector error, or a dead stretch of a drive),
/// aimed where replay meets it differently: a break near the log's end (as long as the window
/// or shorter, it may be a torn tail; longer, or with the log going on after it, it is
/// corruption), inside the log, in free or trimmed space (only reported), or at a segment
/// header. The run is as long as the in-flight window or shorter, a little longer, or up to two
/// segments.
fn unreadable_run(ring: &Ring, image: &mut Image, choices: &mut Choices<'_>) -> Mutation {
    let g = &ring.geometry;
    let block = u64::from(g.block_size_bytes);
    let image_blocks = image.bytes.len() as u64 / block;
    if image_blocks == 0 {
        return Mutation::Nothing;
    }
    let end_block = g.ring_offset(ring.report.next_position) / block;
    let window_blocks = (g.window_bytes_max / block).max(1);
    let batches = &ring.batches;
    let place = match choices.below(8) {
        0..=2 => UnreadablePlace::NearEnd,
        3 | 4 => UnreadablePlace::InsideLog,
        5 => UnreadablePlace::FreeSpace,
        6 => UnreadablePlace::SegmentHeader,
        _ => UnreadablePlace::Picked,
    };
    let first = match place {
        UnreadablePlace::NearEnd => {
            // One of the batches a window (and one more) holds back from the end, or the end.
            let recent = (g.window_batches_max as usize + 1).min(batches.len());
            let back = choices.below(recent as u64 + 1) as usize;
            if back == recent {
                end_block
            } else {
                batches[batches.len() - 1 - back].0 / block
            }
        }
        UnreadablePlace::InsideLog if !batches.is_empty() => {
            let (at, bytes) = batches[choices.below(batches.len() as u64) as usize];
            let inside = if choices.chance(1, 2) {
                0
            } else {
                choices.below(u64::from(bytes).div_ceil(block))
            };
            at / block + inside
        }
        UnreadablePlace::InsideLog => end_block,
        UnreadablePlace::FreeSpace => {
            if choices.chance(1, 2) {
                end_block + choices.between(1, window_blocks + 2)
            } else {
                choices.below(image_blocks)
            }
        }
        UnreadablePlace::SegmentHeader => {
            g.segment_ring_offset(choices.below(u64::from(g.segment_count)) as u32) / block
        }
        UnreadablePlace::Picked => pick_block(ring, &image.bytes, choices),
    };
    let segment_blocks = g.segment_size_bytes / block;
    let count = match choices.below(8) {
        0..=3 => choices.between(1, window_blocks),
        4..=6 => window_blocks + choices.between(1, 3),
        _ => choices.between(
            window_blocks + 1,
            (2 * segment_blocks).max(window_blocks + 1),
        ),
    };
    let first = first.min(image_blocks - 1);
    let blocks = count.min(image_blocks - first);
    image.unreadable.add_run(first, blocks);
    Mutation::Unreadable {
        block: first,
        blocks,
        place,
        longer_than_window: blocks > window_blocks,
    }
}

/// Chooses a control block or a segment header to craft, with a valid CRC, and writes it: the
/// metadata the engine's open does arithmetic on.
pub fn craft_metadata(ring: &Ring, image: &mut [u8], choices: &mut Choices<'_>) -> Mutation {
    if choices.chance(1, 2) {
        craft_control(ring, image, choices)
    } else {
        craft_segment_header(ring, image, choices)
    }
}

pub(super) fn block_bytes(ring: &Ring) -> usize {
    ring.geometry.block_size_bytes as usize
}

/// A block index worth damaging: a control copy, a segment header, the blocks around the log's
/// end and its head, or any block.
pub(super) fn pick_block(ring: &Ring, image: &[u8], choices: &mut Choices<'_>) -> u64 {
    let g = &ring.geometry;
    let block = g.block_size_bytes as u64;
    let blocks = (image.len() as u64 / block).max(1);
    let report = &ring.report;
    let around = |position: sealog_wal::format::Position, choices: &mut Choices<'_>| {
        let at = g.ring_offset(position) / block;
        (at + choices.below(4)).saturating_sub(choices.below(3))
    };
    let chosen = match choices.below(8) {
        0 => choices.below(2),
        1 | 2 => g.segment_ring_offset(choices.below(u64::from(g.segment_count)) as u32) / block,
        3 | 4 => around(report.next_position, choices),
        5 => around(report.control.head, choices),
        _ => choices.below(blocks),
    };
    chosen.min(blocks - 1)
}

fn apply_to_block(
    ring: &Ring,
    image: &mut [u8],
    block: u64,
    change: impl FnOnce(&mut [u8]),
    mutation: impl FnOnce() -> Mutation,
) -> Mutation {
    let size = block_bytes(ring);
    let at = block as usize * size;
    match image.get_mut(at..at + size) {
        Some(bytes) => {
            change(bytes);
            mutation()
        }
        None => Mutation::Nothing,
    }
}

pub(super) fn flip_bits(ring: &Ring, image: &mut [u8], choices: &mut Choices<'_>) -> Mutation {
    let block = pick_block(ring, image, choices);
    let at = block * block_bytes(ring) as u64 + choices.below(block_bytes(ring) as u64);
    let mask = if choices.chance(1, 4) {
        choices.between(1, 255) as u8
    } else {
        1u8 << choices.below(8)
    };
    match image.get_mut(at as usize) {
        Some(byte) => {
            *byte ^= mask;
            Mutation::FlipBits {
                ring_offset: at,
                mask,
            }
        }
        None => Mutation::Nothing,
    }
}

fn swap_blocks(ring: &Ring, image: &mut [u8], choices: &mut Choices<'_>) -> Mutation {
    let (a, b) = (
        pick_block(ring, image, choices),
        pick_block(ring, image, choices),
    );
    let size = block_bytes(ring);
    if a == b || (a.max(b) as usize + 1) * size > image.len() {
        return Mutation::Nothing;
    }
    let (low, high) = (a.min(b) as usize * size, a.max(b) as usize * size);
    let (front, back) = image.split_at_mut(high);
    front[low..low + size].swap_with_slice(&mut back[..size]);
    Mutation::SwapBlocks { a, b }
}

fn duplicate_block(ring: &Ring, image: &mut [u8], choices: &mut Choices<'_>) -> Mutation {
    let (from, to) = (
        pick_block(ring, image, choices),
        pick_block(ring, image, choices),
    );
    let size = block_bytes(ring);
    if from == to || (from.max(to) as usize + 1) * size > image.len() {
        return Mutation::Nothing;
    }
    let from_at = from as usize * size;
    image.copy_within(from_at..from_at + size, to as usize * size);
    Mutation::DuplicateBlock { from, to }
}

/// The bytes an earlier image had at `range`, when it has them.
fn old_bytes(ring: &Ring, snapshot: usize, range: std::ops::Range<usize>) -> Option<&[u8]> {
    ring.history.get(snapshot)?.get(range)
}

fn tear_block(ring: &Ring, image: &mut [u8], choices: &mut Choices<'_>) -> Mutation {
    let block = pick_block(ring, image, choices);
    let size = block_bytes(ring);
    let sectors = (size / TEAR_SECTOR_BYTES) as u64;
    let sectors_kept = choices.between(1, sectors - 1) as u32;
    let rest = match choices.below(3) {
        0 if !ring.history.is_empty() => TornRest::Old {
            snapshot: choices.below(ring.history.len() as u64) as usize,
        },
        1 => TornRest::Garbage {
            seed: choices.next_u64(),
        },
        _ => TornRest::Zero,
    };
    let at = block as usize * size + sectors_kept as usize * TEAR_SECTOR_BYTES;
    let end = (block as usize + 1) * size;
    if end > image.len() {
        return Mutation::Nothing;
    }
    match rest {
        TornRest::Old { snapshot } => match old_bytes(ring, snapshot, at..end) {
            Some(old) => image[at..end].copy_from_slice(old),
            None => return Mutation::Nothing,
        },
        TornRest::Zero => image[at..end].fill(0),
        TornRest::Garbage { seed } => fill_garbage(&mut image[at..end], seed),
    }
    Mutation::TearBlock {
        block,
        sectors_kept,
        rest,
    }
}

fn stale_block(ring: &Ring, image: &mut [u8], choices: &mut Choices<'_>) -> Mutation {
    if ring.history.is_empty() {
        return Mutation::Nothing;
    }
    let block = pick_block(ring, image, choices);
    let snapshot = choices.below(ring.history.len() as u64) as usize;
    let size = block_bytes(ring);
    let range = block as usize * size..(block as usize + 1) * size;
    match (
        old_bytes(ring, snapshot, range.clone()),
        image.get_mut(range),
    ) {
        (Some(old), Some(target)) => {
            target.copy_from_slice(old);
            Mutation::StaleBlock { block, snapshot }
        }
        _ => Mutation::Nothing,
    }
}
