//! Where damage goes in a ring: its block size, a block worth damaging (a control copy, a
//! segment header, the blocks around the log's end and its head, or any block), and bits
//! flipped in one. The block damage of [`super::mutate`] and the crafting of [`super::craft`]
//! (which flips bits where it finds no valid record) both use them.

use super::choices::Choices;
use super::mutation::Mutation;
use super::rings::Ring;

/// The ring's block size.
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

/// Flips one bit, or (one time in four) several, of one byte of a block [`pick_block`] chose.
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
