//! Metadata crafted to pass its checksum, so that it reaches replay's logic rather than its CRC
//! checks: control blocks and segment headers re-encoded with [`ControlBlock::encode`] and
//! [`SegmentHeader::encode`], entry headers re-sealed with [`EntryHeader::encode`] (CRC32C
//! seeded with the ring id over the 64 header bytes), payloads changed with both CRCs
//! recomputed. Fields go to their edges: sequence 0, at and around `CONTROL_SEQUENCE_LIMIT`
//! (the highest replay reads; one below it is the last a writer can bump) or `u64::MAX`, LSNs
//! near the limits, positions and laps at and past the ends, windows and batch sizes of zero or
//! huge, incarnation `u32::MAX`, segment headers off by one. Each crafting is returned as a
//! [`Mutation`] that lists the fields set. Block damage and the choice among mutations are
//! [`super::mutate`]'s.

use super::blocks::{block_bytes, flip_bits, pick_block};
use super::choices::Choices;
use super::mutation::{derived_ring_id, ControlField, EntryField, Mutation, SegmentField};
use super::rings::Ring;
use sealog_wal::format::{
    payload_crc, ControlBlock, EntryHeader, Kind, SegmentHeader, CONTROL_SEQUENCE_LIMIT,
    ENTRY_HEADER_SIZE, ENTRY_MAGIC,
};

/// The newest control copy of the image that decodes and sits in its slot, else the one the
/// ring was replayed with.
fn current_control(ring: &Ring, image: &[u8]) -> ControlBlock {
    let size = block_bytes(ring);
    (0..2u64)
        .filter_map(|slot| {
            let at = slot as usize * size;
            let control = ControlBlock::decode(image.get(at..at + size)?).ok()?;
            (control.copy() == slot).then_some(control)
        })
        .max_by_key(|control| control.sequence)
        .unwrap_or(ring.report.control)
}

/// Generic edge values for a field whose value is now `current`.
fn edges(current: u64, choices: &mut Choices<'_>) -> u64 {
    let values = [
        0,
        1,
        2,
        current.wrapping_sub(1),
        current.wrapping_add(1),
        current.wrapping_mul(2),
        u64::MAX,
        u64::MAX - 1,
        u64::MAX / 2,
        u64::from(u32::MAX),
        1 << 32,
    ];
    match choices.below(6) {
        0..=4 => choices.pick(&values),
        _ => choices.next_u64(),
    }
}

/// A value for a control block field: one of the field's own edges, or a generic one.
fn control_value(
    field: ControlField,
    control: &ControlBlock,
    ring: &Ring,
    choices: &mut Choices<'_>,
) -> u64 {
    let current = field.get(control);
    let g = &ring.geometry;
    let report = &ring.report;
    let block = u64::from(g.block_size_bytes);
    let segment = g.segment_size_bytes;
    let count = u64::from(g.segment_count);
    let batch = u64::from(g.batch_size_max_bytes);
    let max32 = u64::from(u32::MAX);
    let incarnation = u64::from(report.incarnation_max);
    let next = report.next_position;
    let own: Vec<u64> = match field {
        ControlField::Sequence => SEQUENCE_EDGES.to_vec(),
        ControlField::Incarnation
        | ControlField::HeadIncarnation
        | ControlField::CutIncarnation => {
            vec![0, 1, incarnation, incarnation + 1, max32, max32 - 1]
        }
        ControlField::TrimLsn => trim_lsn_edges(ring, control),
        ControlField::HeadLsn => head_lsn_edges(ring, control),
        ControlField::HeadLap | ControlField::CutLap => lap_edges(ring),
        ControlField::HeadSegment | ControlField::CutSegment => {
            vec![
                0,
                1,
                count - 1,
                count,
                count + 1,
                u64::from(next.segment),
                max32,
            ]
        }
        ControlField::HeadOffset | ControlField::CutOffset => offset_edges(ring),
        ControlField::BlockSize => vec![0, 512, 2048, 4096, 4097, 8192, 65536, 131072, max32],
        ControlField::SegmentSize => segment_size_edges(ring),
        ControlField::SegmentCount => vec![0, 1, 2, count - 1, count + 1, 2 * count, max32],
        ControlField::BatchSize => batch_size_edges(ring),
        ControlField::WindowBatches => vec![0, 1, 2, current + 1, 1 << 16, max32],
        ControlField::WindowBytes => {
            let data = (segment - block) * count;
            vec![0, batch - 1, batch, data, data + 1, u64::MAX]
        }
        ControlField::RingId => vec![0, choices.next_u64()],
    };
    let value = if choices.chance(3, 4) {
        choices.pick(&own)
    } else {
        edges(current, choices)
    };
    if field.is_u32() {
        value & max32
    } else {
        value
    }
}

/// Control block sequences: the first two, at and around `CONTROL_SEQUENCE_LIMIT` (the
/// highest replay reads; one below it is the last a writer can bump), and the largest.
const SEQUENCE_EDGES: [u64; 8] = [
    0,
    1,
    CONTROL_SEQUENCE_LIMIT - 2,
    CONTROL_SEQUENCE_LIMIT - 1,
    CONTROL_SEQUENCE_LIMIT,
    CONTROL_SEQUENCE_LIMIT + 1,
    u64::MAX - 1,
    u64::MAX,
];

/// Trim points: none, around the log's next LSN, just below the head's, around half the LSN
/// space, and the largest.
fn trim_lsn_edges(ring: &Ring, control: &ControlBlock) -> Vec<u64> {
    let report = &ring.report;
    vec![
        0,
        report.next_lsn - 1,
        report.next_lsn,
        report.next_lsn + 1,
        control.head_lsn.wrapping_sub(1),
        u64::MAX / 2 - 1,
        u64::MAX / 2,
        u64::MAX,
    ]
}

/// Head LSNs: the first two, at and just past the trim point, the log's next LSN, and the
/// largest.
fn head_lsn_edges(ring: &Ring, control: &ControlBlock) -> Vec<u64> {
    vec![
        0,
        1,
        control.trim_lsn,
        control.trim_lsn.wrapping_add(1),
        control.trim_lsn.wrapping_add(2),
        ring.report.next_lsn,
        u64::MAX,
    ]
}

/// Laps: the first three, the log's next position's and the one after, and the last four.
fn lap_edges(ring: &Ring) -> Vec<u64> {
    let next = ring.report.next_position;
    let max32 = u64::from(u32::MAX);
    vec![
        0,
        1,
        2,
        u64::from(next.lap),
        u64::from(next.lap) + 1,
        max32 - 3,
        max32 - 2,
        max32 - 1,
        max32,
    ]
}

/// Offsets in a segment: its start, around its first and second blocks, around its end and
/// past it, the log's next position's, and the largest.
fn offset_edges(ring: &Ring) -> Vec<u64> {
    let block = u64::from(ring.geometry.block_size_bytes);
    let segment = ring.geometry.segment_size_bytes;
    vec![
        0,
        block - 1,
        block,
        block + 1,
        2 * block,
        segment - block,
        segment - 1,
        segment,
        segment + block,
        u64::from(ring.report.next_position.offset),
        u64::from(u32::MAX),
    ]
}

/// Segment sizes: none, one or two blocks, a block off the ring's own, twice it, around 4 GiB,
/// and the largest.
fn segment_size_edges(ring: &Ring) -> Vec<u64> {
    let block = u64::from(ring.geometry.block_size_bytes);
    let segment = ring.geometry.segment_size_bytes;
    vec![
        0,
        block,
        2 * block,
        segment - block,
        segment + block,
        2 * segment,
        (1 << 32) - block,
        1 << 32,
        u64::MAX,
    ]
}

/// Batch sizes: none, around a block, two blocks, a segment's data or all of it, 64 MiB, and
/// the largest.
fn batch_size_edges(ring: &Ring) -> Vec<u64> {
    let block = u64::from(ring.geometry.block_size_bytes);
    let segment = ring.geometry.segment_size_bytes;
    vec![
        0,
        block - 1,
        block,
        2 * block,
        segment - block,
        segment,
        64 << 20,
        u64::from(u32::MAX),
    ]
}

/// Writes a control block crafted from the image's current one with up to three fields at
/// their edges (sometimes none: a plain rewrite with the next sequence). It goes to the slot
/// its sequence names, or now and then to the other one (a misdirected control write).
pub fn craft_control(ring: &Ring, image: &mut [u8], choices: &mut Choices<'_>) -> Mutation {
    let mut control = next_control(ring, image);
    let count = if choices.chance(1, 8) {
        0
    } else {
        choices.between(1, 3)
    };
    let mut edits = Vec::new();
    for _ in 0..count {
        let field = choices.pick(&ControlField::ALL);
        let value = control_value(field, &control, ring, choices);
        field.set(&mut control, value);
        edits.push((field, value));
    }
    let misdirected = choices.chance(1, 8);
    write_control(ring, image, control, edits, misdirected)
}

/// Writes the image's current control block with the next sequence and `edits` applied, with
/// a valid CRC, to the slot its sequence names: a crafted control block chosen by hand.
pub fn craft_control_with(
    ring: &Ring,
    image: &mut [u8],
    edits: &[(ControlField, u64)],
) -> Mutation {
    let mut control = next_control(ring, image);
    for &(field, value) in edits {
        field.set(&mut control, value);
    }
    write_control(ring, image, control, edits.to_vec(), false)
}

/// The image's current control block with the next sequence: what a writer would write next.
fn next_control(ring: &Ring, image: &[u8]) -> ControlBlock {
    let base = current_control(ring, image);
    ControlBlock {
        sequence: base.sequence.wrapping_add(1),
        ..base
    }
}

fn write_control(
    ring: &Ring,
    image: &mut [u8],
    control: ControlBlock,
    edits: Vec<(ControlField, u64)>,
    misdirected: bool,
) -> Mutation {
    let slot = if misdirected {
        1 - control.copy()
    } else {
        control.copy()
    };
    let size = block_bytes(ring);
    let at = slot as usize * size;
    match image.get_mut(at..at + size) {
        Some(bytes) => {
            control.encode(bytes);
            Mutation::Control {
                slot,
                sequence: control.sequence,
                edits,
            }
        }
        None => Mutation::Nothing,
    }
}

/// Writes a segment header with a valid CRC (now and then another ring's) over a segment's
/// header block: the one there with up to three fields off by one or at their edges, or, where
/// none decodes, one that would start the segment at the log's end.
pub fn craft_segment_header(ring: &Ring, image: &mut [u8], choices: &mut Choices<'_>) -> Mutation {
    let g = &ring.geometry;
    let report = &ring.report;
    let segment = match choices.below(4) {
        0 => report.next_position.segment,
        1 => report.control.head.segment,
        _ => choices.below(u64::from(g.segment_count)) as u32,
    };
    let size = block_bytes(ring);
    let at = g.segment_ring_offset(segment) as usize;
    let Some(bytes) = image.get_mut(at..at + size) else {
        return Mutation::Nothing;
    };
    let mut header = SegmentHeader::decode(ring.ring_id, bytes).unwrap_or(SegmentHeader {
        segment,
        lap: report.next_position.lap,
        incarnation: report.incarnation_max,
        first_lsn: report.next_lsn,
    });
    let count = if choices.chance(1, 8) {
        0
    } else {
        choices.between(1, 3)
    };
    let mut edits = Vec::new();
    for _ in 0..count {
        let field = choices.pick(&[
            SegmentField::Segment,
            SegmentField::Lap,
            SegmentField::Incarnation,
            SegmentField::FirstLsn,
        ]);
        let value = segment_value(field, &header, ring, choices);
        match field {
            SegmentField::Segment => header.segment = value as u32,
            SegmentField::Lap => header.lap = value as u32,
            SegmentField::Incarnation => header.incarnation = value as u32,
            SegmentField::FirstLsn => header.first_lsn = value,
        }
        edits.push((field, value));
    }
    let other_ring = choices.chance(1, 16);
    let ring_id = if other_ring {
        derived_ring_id(choices.next_u64())
    } else {
        ring.ring_id
    };
    header.encode(ring_id, bytes);
    Mutation::SegmentHeader {
        segment,
        other_ring,
        edits,
    }
}

/// One more or one less than `current`, even odds.
fn off_by_one(current: u64, choices: &mut Choices<'_>) -> u64 {
    if choices.chance(1, 2) {
        current.wrapping_add(1)
    } else {
        current.wrapping_sub(1)
    }
}

/// A value for a segment header field: one of the field's own edges, or its value in
/// `header` off by one.
fn segment_value(
    field: SegmentField,
    header: &SegmentHeader,
    ring: &Ring,
    choices: &mut Choices<'_>,
) -> u64 {
    let report = &ring.report;
    let max32 = u64::from(u32::MAX);
    match field {
        SegmentField::Segment => {
            let current = u64::from(header.segment);
            let own = [
                0,
                u64::from(ring.geometry.segment_count),
                max32,
                off_by_one(current, choices),
            ];
            choices.pick(&own) & max32
        }
        SegmentField::Lap => {
            let current = u64::from(header.lap);
            let own = [
                0,
                1,
                max32,
                max32 - 1,
                max32 - 2,
                off_by_one(current, choices),
            ];
            choices.pick(&own) & max32
        }
        SegmentField::Incarnation => {
            let current = u64::from(header.incarnation);
            let own = [0, max32, u64::from(report.incarnation_max) + 1];
            let own = [choices.pick(&own), off_by_one(current, choices)];
            choices.pick(&own) & max32
        }
        SegmentField::FirstLsn => {
            let current = header.first_lsn;
            let own = [
                0,
                1,
                report.next_lsn,
                report.trim_lsn,
                report.trim_lsn + 1,
                u64::MAX,
                u64::MAX / 2,
            ];
            let own = [choices.pick(&own), off_by_one(current, choices)];
            choices.pick(&own)
        }
    }
}

/// A valid entry header of this ring at or after a chosen block: (ring offset, header).
fn find_entry_header(
    ring: &Ring,
    image: &[u8],
    choices: &mut Choices<'_>,
) -> Option<(usize, EntryHeader)> {
    let start = pick_block(ring, image, choices) as usize * block_bytes(ring);
    let magic = ENTRY_MAGIC.to_le_bytes();
    let finder = memchr::memmem::Finder::new(&magic);
    let search = |from: usize| -> Vec<(usize, EntryHeader)> {
        let Some(bytes) = image.get(from..) else {
            return Vec::new();
        };
        finder
            .find_iter(bytes)
            .map(|offset| from + offset)
            .filter(|&at| at + ENTRY_HEADER_SIZE <= image.len())
            .filter_map(|at| Some((at, EntryHeader::decode(ring.ring_id, &image[at..]).ok()?)))
            .take(8)
            .collect()
    };
    let mut found = search(start);
    if found.is_empty() {
        found = search(0);
    }
    if found.is_empty() {
        return None;
    }
    Some(found[choices.below(found.len() as u64) as usize])
}

/// A value for an entry header field.
fn entry_value(
    field: EntryField,
    header: &EntryHeader,
    ring: &Ring,
    choices: &mut Choices<'_>,
) -> u64 {
    let report = &ring.report;
    let g = &ring.geometry;
    let block = u64::from(g.block_size_bytes);
    let max32 = u64::from(u32::MAX);
    let lsn = header.lsn;
    let own: Vec<u64> = match field {
        EntryField::Lsn => vec![0, 1, report.next_lsn, report.trim_lsn + 1, u64::MAX / 2],
        EntryField::Watermark => vec![
            lsn.wrapping_sub(1),
            lsn,
            header.batch_first_lsn(),
            report.next_lsn,
            report.watermark_max + 1,
        ],
        EntryField::Incarnation => vec![0, max32, u64::from(report.incarnation_max) + 1],
        EntryField::Lap => vec![0, 1, max32, u64::from(report.next_position.lap)],
        EntryField::Segment => vec![0, u64::from(g.segment_count), max32],
        EntryField::Offset => vec![
            0,
            u64::from(header.position.offset) + block,
            u64::from(header.position.offset).wrapping_sub(block),
            max32,
        ],
        EntryField::BatchBytes => vec![
            0,
            block,
            u64::from(header.batch_bytes) + block,
            u64::from(header.batch_bytes).wrapping_sub(block),
            u64::from(g.batch_size_max_bytes) + block,
            max32,
        ],
        EntryField::BatchIndex => vec![0, max32],
        EntryField::PayloadLen => {
            let limit = u64::from(g.payload_size_max_bytes());
            vec![0, limit, limit + 1, max32]
        }
        EntryField::PayloadCrc => vec![choices.next_u64()],
        EntryField::Kind => vec![1, 2, 3, 4, 5],
    };
    let current = match field {
        EntryField::Lsn => lsn,
        EntryField::Watermark => header.watermark,
        EntryField::Incarnation => u64::from(header.incarnation),
        EntryField::Lap => u64::from(header.position.lap),
        EntryField::Segment => u64::from(header.position.segment),
        EntryField::Offset => u64::from(header.position.offset),
        EntryField::BatchBytes => u64::from(header.batch_bytes),
        EntryField::BatchIndex => u64::from(header.batch_index),
        EntryField::PayloadLen => u64::from(header.payload_len),
        EntryField::PayloadCrc => u64::from(header.payload_crc),
        EntryField::Kind => header.kind as u64,
    };
    match choices.below(8) {
        0..=3 => choices.pick(&own),
        4..=6 => {
            if choices.chance(1, 2) {
                current.wrapping_add(1)
            } else {
                current.wrapping_sub(1)
            }
        }
        _ => edges(current, choices),
    }
}

fn set_entry_field(header: &mut EntryHeader, field: EntryField, value: u64) {
    let low = value as u32;
    match field {
        EntryField::Lsn => header.lsn = value,
        EntryField::Watermark => header.watermark = value,
        EntryField::Incarnation => header.incarnation = low,
        EntryField::Lap => header.position.lap = low,
        EntryField::Segment => header.position.segment = low,
        EntryField::Offset => header.position.offset = low,
        EntryField::BatchBytes => header.batch_bytes = low,
        EntryField::BatchIndex => header.batch_index = low,
        EntryField::PayloadLen => header.payload_len = low,
        EntryField::PayloadCrc => header.payload_crc = low,
        EntryField::Kind => header.kind = Kind::from_byte(value as u8).unwrap_or(Kind::Data),
    }
}

/// Changes up to three fields of a valid entry header and seals it again (CRC32C seeded with
/// the ring id over the 64 bytes), so replay's layout, LSN, lap, incarnation and watermark
/// rules see it rather than the header CRC check.
pub fn reseal_entry_header(ring: &Ring, image: &mut [u8], choices: &mut Choices<'_>) -> Mutation {
    let Some((at, mut header)) = find_entry_header(ring, image, choices) else {
        return flip_bits(ring, image, choices);
    };
    let fields = [
        EntryField::Lsn,
        EntryField::Watermark,
        EntryField::Incarnation,
        EntryField::Lap,
        EntryField::Segment,
        EntryField::Offset,
        EntryField::BatchBytes,
        EntryField::BatchIndex,
        EntryField::PayloadLen,
        EntryField::PayloadCrc,
        EntryField::Kind,
    ];
    let mut edits = Vec::new();
    for _ in 0..choices.between(1, 3) {
        let field = choices.pick(&fields);
        let value = entry_value(field, &header, ring, choices);
        set_entry_field(&mut header, field, value);
        let value = match field {
            EntryField::Lsn | EntryField::Watermark => value,
            EntryField::Kind => header.kind as u64,
            _ => value & u64::from(u32::MAX),
        };
        edits.push((field, value));
    }
    header.encode(ring.ring_id, &mut image[at..at + ENTRY_HEADER_SIZE]);
    Mutation::EntryHeader {
        ring_offset: at as u64,
        edits,
    }
}

/// Flips bits of one payload byte of a valid record and recomputes both of its CRCs.
pub(super) fn reseal_payload(ring: &Ring, image: &mut [u8], choices: &mut Choices<'_>) -> Mutation {
    let Some((at, mut header)) = find_entry_header(ring, image, choices) else {
        return flip_bits(ring, image, choices);
    };
    let start = at + ENTRY_HEADER_SIZE;
    let end = start + header.payload_len as usize;
    if header.payload_len == 0 || end > image.len() {
        return Mutation::Nothing;
    }
    let payload_offset = choices.below(u64::from(header.payload_len)) as u32;
    let mask = 1u8 << choices.below(8);
    image[start + payload_offset as usize] ^= mask;
    header.payload_crc = payload_crc(&image[start..end]);
    header.encode(ring.ring_id, &mut image[at..start]);
    Mutation::PayloadResealed {
        ring_offset: at as u64,
        payload_offset,
        mask,
    }
}
