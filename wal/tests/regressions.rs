//! Regressions found by an independent review of replay (each reproduced before its fix):
//!
//! 1. crafted control blocks (head lap near u32::MAX, an in-flight window of u64::MAX bytes)
//!    and a huge read chunk made replay overflow and panic;
//! 2. a record whose watermark covered damaged data was missed when it did not start on a
//!    block boundary, and replay returned a silently shortened log;
//! 3. once a trim moved the head past the batches of a newer incarnation, an older
//!    incarnation's leftovers lined up at the head and were accepted (without invalidation);
//! 4. an intact control copy of another format version was ignored in favour of an older one;
//! 5. damage to a segment header after a segment change was reported at the wrong place;
//! 6. two damaged control copies (one without magic) were reported as "not a ring";
//! 7. a control block (valid CRC) recording an in-flight window of u32::MAX batches was
//!    accepted, and the probe's per-record search of the batches seen made replay crawl;
//! 8. a control block (valid CRC) with a sequence near u64::MAX was accepted, and the next
//!    control write (`sequence + 1`, in the engine and the model) overflowed and panicked.

mod common;

use common::*;
use sealog_wal::format::{ControlBlock, CONTROL_SEQUENCE_LIMIT, WINDOW_BATCHES_LIMIT};
use sealog_wal::model::{BlockFate, ModelWriter};
use sealog_wal::{Check, Evidence, Geometry, GeometryError, Outcome, ReplayError, ReplayOptions};

/// Rewrites both control copies with `change` applied to the newest.
fn patch_control(image: &mut [u8], change: impl Fn(&mut ControlBlock)) {
    let mut control = sealog_wal::read_control(&mut &image[..]).expect("valid control");
    change(&mut control);
    for copy in 0..2u64 {
        control.sequence = control.sequence - control.sequence % 2 + 2 + copy;
        let at = copy as usize * BLOCK;
        control.encode(&mut image[at..at + BLOCK]);
    }
}

#[test]
fn crafted_geometry_and_options_are_typed_errors_not_panics() {
    let mut image = ModelWriter::format(small_geometry(), ring_id());
    patch_control(&mut image, |control| control.head.lap = u32::MAX);
    assert!(matches!(
        replay_image(&image, &strict()).0,
        Err(ReplayError::ControlHead { .. })
    ));

    let mut image = ModelWriter::format(small_geometry(), ring_id());
    patch_control(&mut image, |control| {
        control.geometry.window_bytes_max = u64::MAX
    });
    assert!(matches!(
        replay_image(&image, &strict()).0,
        Err(ReplayError::Geometry(_))
    ));

    let image = ModelWriter::format(small_geometry(), ring_id());
    let options = ReplayOptions {
        read_chunk_bytes: u32::MAX,
        ..strict()
    };
    assert!(replay_image(&image, &options).0.is_ok());
}

#[test]
fn a_covering_record_inside_a_block_is_found() {
    let mut writer = new_writer(small_geometry());
    append(&mut writer, 1, 100, 1); // A: LSN 1
    writer.flush();
    append(&mut writer, 1, 100, 1); // X: LSN 2
    writer.flush();
    // Y: LSN 3 (5000 bytes) and LSN 4, which starts inside Y's second block; its watermark
    // (2) covers X.
    let first = writer.next_lsn();
    let big = payload(first, 1, 5000);
    let small = payload(first + 1, 1, 100);
    writer.append(&[&big, &small]).expect("room");
    writer.flush();
    let x = writer.written()[1].clone();
    let mut image = writer.durable().to_vec();
    // One two-block fault: X's block and Y's first block read back as zeros.
    let at = x.ring_offset as usize;
    image[at..at + 2 * BLOCK].fill(0);
    match replay_image(&image, &strict()).0 {
        Err(ReplayError::Corruption(found)) => {
            assert_eq!(found.lsn, 2);
            assert!(matches!(
                found.evidence,
                Evidence::WatermarkCovers { lsn: 4, .. }
            ));
        }
        other => panic!("the loss of LSN 2 must be reported, got {other:?}"),
    }
}

#[test]
fn an_old_incarnation_never_lines_up_at_a_trimmed_head() {
    let mut writer = new_writer(small_geometry());
    append(&mut writer, 2, 500, 1); // A: LSN 1-2
    writer.flush();
    // A marker covers A, so the reopen below plans no marker of its own and B' takes B's
    // place exactly (C lines up behind it).
    writer.tail_marker().expect("room");
    writer.flush();
    append(&mut writer, 3, 1200, 1); // B: LSN 3-5, torn
    append(&mut writer, 2, 500, 1); // C: LSN 6-7, lands
    let image = writer.crash(&mut |write, _| match write {
        0 => BlockFate::Zero,
        _ => BlockFate::New,
    });
    let (mut second, _, _) =
        ModelWriter::open_without_invalidation(image, &strict()).expect("opens");
    append(&mut second, 3, 1200, 2); // B': LSN 3-5, same size as B: C lines up behind it
    second.flush();
    second.trim(5); // nothing live: the head moves to C's place
    let (result, entries) = replay_image(second.durable(), &strict());
    let report = result.expect("replays");
    assert!(
        entries.is_empty(),
        "C's LSNs were cut by the first recovery: {entries:?}"
    );
    assert_eq!(report.next_lsn, 6);
    assert_eq!(report.end_check, Check::StaleIncarnation);
}

#[test]
fn an_intact_copy_of_another_version_refuses_the_ring() {
    let writer = new_writer(small_geometry());
    let mut image = writer.durable().to_vec();
    let current = sealog_wal::read_control(&mut &image[..]).expect("valid");
    // A newer copy written by a future version into the other slot.
    let future = ControlBlock {
        sequence: current.sequence + 1,
        ..current
    };
    let at = future.copy() as usize * BLOCK;
    future.encode(&mut image[at..at + BLOCK]);
    image[at + 4..at + 6].copy_from_slice(&2u16.to_le_bytes());
    image[at + 8..at + 12].fill(0);
    let crc = crc32c::crc32c(&image[at..at + 128]);
    image[at + 8..at + 12].copy_from_slice(&crc.to_le_bytes());
    assert!(matches!(
        replay_image(&image, &strict()).0,
        Err(ReplayError::UnsupportedVersion { found: 2, .. })
    ));
}

#[test]
fn damage_to_a_segment_header_after_a_segment_change_is_named_there() {
    let mut writer = new_writer(small_geometry());
    // Records of 3 blocks and a bit: batches of 4 blocks; the fourth does not fit segment 0's
    // 15 data blocks, so the writer moves on to segment 1.
    for _ in 0..6 {
        append(&mut writer, 1, 3 * BLOCK, 1);
        writer.flush();
    }
    let geometry = small_geometry();
    let mut image = writer.durable().to_vec();
    let segment_1 = geometry.segment_ring_offset(1) as usize;
    image[segment_1 + 20] ^= 1;
    match replay_image(&image, &strict()).0 {
        Err(ReplayError::Corruption(found)) => {
            assert_eq!(
                (found.position.segment, found.position.offset),
                (1, 0),
                "{found}"
            );
            assert_eq!(found.check, Check::SegmentHeader);
        }
        other => panic!("expected corruption at segment 1's header, got {other:?}"),
    }
}

#[test]
fn two_damaged_control_copies_are_corruption_not_a_missing_ring() {
    let writer = new_writer(small_geometry());
    let mut image = writer.durable().to_vec();
    image[0..4].fill(0); // copy 0: magic gone
    image[BLOCK + 20] ^= 1; // copy 1: CRC broken
    assert!(matches!(
        replay_image(&image, &strict()).0,
        Err(ReplayError::ControlCorrupt)
    ));
}

#[test]
fn truncating_mode_never_reuses_a_trimmed_lsn() {
    let mut writer = new_writer(small_geometry());
    for _ in 0..6 {
        append(&mut writer, 2, 300, 1);
        writer.flush();
    }
    writer.trim(7); // the head batch (LSN 7-8) is half trimmed
    let target = writer.written()[3].clone();
    assert_eq!(target.lsns, 7..9);
    let mut image = writer.durable().to_vec();
    image[target.ring_offset as usize + 70] ^= 1; // LSN 7's payload, at or below the trim point
    let (result, _) = replay_image(&image, &salvage());
    let report = result.expect("salvage cuts");
    assert_eq!(report.outcome, Outcome::Truncated);
    assert_eq!(
        report.next_lsn, 8,
        "the next LSN is past the trim point, never at or below it"
    );
    assert_eq!(report.trim_lsn, 7);
    let (mut reopened, _, _) = ModelWriter::open(image, &salvage()).expect("reopens");
    let lsns = reopened.append(&[b"after"]).expect("room");
    assert_eq!(lsns, vec![8]);
    reopened.flush();
    let (result, entries) = replay_image(reopened.durable(), &strict());
    assert_eq!(result.expect("clean").outcome, Outcome::Clean);
    assert_eq!(entries, vec![(8, b"after".to_vec())]);
}

#[test]
fn the_model_keeps_its_window_counting_segment_headers() {
    let geometry = Geometry {
        block_size_bytes: BLOCK as u32,
        segment_size_bytes: 8 * BLOCK as u64,
        segment_count: 3,
        batch_size_max_bytes: 2 * BLOCK as u32,
        window_batches_max: 2,
        window_bytes_max: 4 * BLOCK as u64,
    };
    let mut writer = new_writer(geometry);
    for _ in 0..4 {
        append(&mut writer, 1, 2 * BLOCK - 64, 1);
        let pending: u64 = writer
            .pending()
            .iter()
            .map(|write| write.bytes.len() as u64)
            .sum();
        assert!(
            pending <= geometry.window_bytes_max,
            "{pending} bytes in flight"
        );
    }
}

#[test]
fn a_window_over_the_limit_is_refused_at_format_and_at_open() {
    let over = Geometry {
        window_batches_max: WINDOW_BATCHES_LIMIT + 1,
        ..small_geometry()
    };
    assert!(matches!(
        over.validate(),
        Err(GeometryError::Window {
            window_batches_max,
            ..
        }) if window_batches_max == WINDOW_BATCHES_LIMIT + 1
    ));
    let at_limit = Geometry {
        window_batches_max: WINDOW_BATCHES_LIMIT,
        ..small_geometry()
    };
    assert_eq!(at_limit.validate(), Ok(()));
    for window_batches_max in [WINDOW_BATCHES_LIMIT + 1, u32::MAX] {
        let mut writer = new_writer(small_geometry());
        append(&mut writer, 3, 100, 1);
        writer.flush();
        let mut image = writer.durable().to_vec();
        patch_control(&mut image, |control| {
            control.geometry.window_batches_max = window_batches_max
        });
        match replay_image(&image, &strict()).0 {
            Err(ReplayError::Geometry(GeometryError::Window {
                window_batches_max: found,
                ..
            })) => assert_eq!(found, window_batches_max),
            other => panic!("a window of {window_batches_max} batches opened: {other:?}"),
        }
    }
}

#[test]
fn a_control_sequence_past_the_limit_is_a_typed_error_never_an_overflow() {
    let mut writer = new_writer(small_geometry());
    append(&mut writer, 2, 100, 1);
    writer.flush();
    let image = writer.durable().to_vec();
    for sequence in [CONTROL_SEQUENCE_LIMIT + 1, u64::MAX - 1, u64::MAX] {
        let mut crafted = image.clone();
        let current = sealog_wal::read_control(&mut &image[..]).expect("valid");
        let control = ControlBlock {
            sequence,
            ..current
        };
        let at = control.copy() as usize * BLOCK;
        control.encode(&mut crafted[at..at + BLOCK]);
        assert!(
            matches!(
                replay_image(&crafted, &strict()).0,
                Err(ReplayError::ControlSequence { sequence: found }) if found == sequence
            ),
            "sequence {sequence}"
        );
    }
    // At the limit the ring still reads, but no writer may bump it again.
    let current = sealog_wal::read_control(&mut &image[..]).expect("valid");
    let at_limit = ControlBlock {
        sequence: CONTROL_SEQUENCE_LIMIT,
        ..current
    };
    assert!(at_limit.next_sequence().is_err());
    assert_eq!(
        ControlBlock {
            sequence: 41,
            ..current
        }
        .next_sequence(),
        Ok(42)
    );
}
