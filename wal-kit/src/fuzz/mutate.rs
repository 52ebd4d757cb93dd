//! The mutations the structure-aware fuzzer stacks on a valid ring, and the choice among them:
//! damage a drive or a crash could do (bit flips, zeroed, garbage, swapped, duplicated, torn and
//! stale blocks, a short device, runs of blocks that cannot be read), and metadata crafted with
//! valid CRCs ([`super::craft`]). Each mutation is chosen and applied in one go and returned as
//! a value ([`Mutation`]) whose `Debug` form says exactly what was done, for the report of a
//! failing case. It owns no checks.

use super::blocks::{block_bytes, flip_bits, pick_block};
use super::choices::Choices;
use super::craft::{craft_control, craft_segment_header, reseal_entry_header, reseal_payload};
use super::mutation::{Mutation, TornRest, UnreadablePlace};
use super::rings::Ring;
use super::source::Image;
use crate::model::{fill_garbage, TEAR_SECTOR_BYTES};

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
