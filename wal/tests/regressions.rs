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
//!
//! And by the structure-aware fuzzer (`fuzz_rings`, seed 20261130, case 296730: recovery was
//! not idempotent, rule 5 and I-6):
//!
//! 9. when a cut left nothing live, the writer's plan moved the head to the cut, and the next
//!    open probed further than this one had (to the cut's segment on the next lap, not the old
//!    head's): valid records there that no incarnation rule made stale (written under a newer
//!    control block since lost, or crafted with incarnation u32::MAX) were never seen, never
//!    zeroed, and made the next open fail (or this one end clean with acknowledged data lost);
//! 10. a writer's new incarnation was one above the control block's and the recovered
//!     batches', not above the records the probe found after the cut (nor a crafted control
//!     block's head or cut incarnation, floors replay applied): after a crash right after the
//!     recovery's control block, before the region after the cut was zeroed, those records
//!     counted again and the next open recovered another log, or failed (found once the
//!     fuzzer checked that crash too).

mod common;

use common::*;
use sealog_wal::format::{
    ControlBlock, Position, CONTROL_SEQUENCE_LIMIT, CONTROL_SIZE, ENTRY_HEADER_SIZE,
    FORMAT_VERSION, WINDOW_BATCHES_LIMIT,
};
use sealog_wal::recovery::Written;
use sealog_wal::{
    Check, Evidence, Geometry, GeometryError, Outcome, ReplayError, ReplayOptions, Step,
};
use sealog_wal_kit::fuzz::{case_seed, run_case, Bases, CaseResult, Choices};
use sealog_wal_kit::model::{BlockFate, ModelWriter};

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
    // A newer copy written by a future version (of this layout) into the other slot.
    let future = ControlBlock {
        sequence: current.sequence + 1,
        ..current
    };
    let at = future.copy() as usize * BLOCK;
    future.encode(&mut image[at..at + BLOCK]);
    let future_version = FORMAT_VERSION + 1;
    image[at + 4..at + 6].copy_from_slice(&future_version.to_le_bytes());
    image[at + 8..at + 12].fill(0);
    let crc = crc32c::crc32c(&image[at..at + CONTROL_SIZE]);
    image[at + 8..at + 12].copy_from_slice(&crc.to_le_bytes());
    assert!(matches!(
        replay_image(&image, &strict()).0,
        Err(ReplayError::UnsupportedVersion { found, supported })
            if found == future_version && supported == FORMAT_VERSION
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
        append(&mut writer, 1, 2 * BLOCK - ENTRY_HEADER_SIZE, 1);
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

/// Two segments of three data blocks, batches of up to two blocks.
fn two_segment_geometry() -> Geometry {
    Geometry {
        block_size_bytes: BLOCK as u32,
        segment_size_bytes: 4 * BLOCK as u64,
        segment_count: 2,
        batch_size_max_bytes: 2 * BLOCK as u32,
        window_batches_max: 1,
        window_bytes_max: 3 * BLOCK as u64,
    }
}

/// A ring whose newest control block is lost (a misdirected write or rot zeroed its copy), so
/// replay reads the copy before it, whose head lags behind where the writer went since; and
/// the first block of the batch after that head is zeroed. Two blocks of damage, no crafted
/// field. What it holds, on the two-segment ring:
///
/// - segment 0, lap 1: LSN 1 (blocks 1-2), trimmed; the older control block's head is block 3
///   (incarnation 1, LSN 2 next);
/// - segment 1, lap 1: LSN 2 (blocks 1-2, its first block zeroed), written by incarnation 2,
///   whose (lost) control block had moved the head here;
/// - segment 0, lap 2: LSN 3 (blocks 1-2), incarnation 2, watermark 2: LSN 2 was acknowledged.
///
/// The older head's segment on the next lap is segment 0, lap 2, so the walk from it cannot
/// reach LSN 3; but nothing is live at the break (segment 1, block 1), so a writer's plan moves
/// the head there, and the next open reads on to segment 1, lap 2: LSN 3 included.
fn lost_control_block_and_a_zeroed_block() -> Vec<u8> {
    let geometry = two_segment_geometry();
    let mut first = new_writer(geometry); // incarnation 1
    first.append(&[&payload(1, 1, 5000)]).expect("room"); // LSN 1: blocks 1-2
    first.flush();
    // Nothing live after this trim: the head is the cursor, block 3.
    first.trim(1);
    // LSN 2 does not fit the one block left: the writer moves to segment 1, whose header says
    // the log goes on there at LSN 2, and the power fails with only that header written.
    first.append(&[&payload(2, 1, 5000)]).expect("room");
    let image = first.crash(&mut |_, block| {
        if block == 0 {
            BlockFate::New
        } else {
            BlockFate::Zero
        }
    });
    // Incarnation 2 finds nothing live after a skip to segment 1: its control block moves the
    // head to the cut there.
    let (mut second, report, entries) = ModelWriter::open(image, &strict()).expect("opens");
    assert!(entries.is_empty());
    let segment_1 = Position {
        lap: 1,
        segment: 1,
        offset: BLOCK as u32,
    };
    assert_eq!(report.next_position, segment_1);
    second.append(&[&payload(2, 2, 5000)]).expect("room"); // LSN 2: segment 1, blocks 1-2
    second.flush();
    second.append(&[&payload(3, 2, 5000)]).expect("room"); // LSN 3: segment 0, lap 2
    second.flush();
    let written = second.written();
    assert_eq!(written[1].position.lap, 2);
    assert_eq!(written[1].watermark, 2);
    let mut image = second.durable().to_vec();
    let newest = sealog_wal::read_control(&mut &image[..]).expect("valid");
    assert_eq!((newest.incarnation, newest.head), (2, segment_1));
    let at = newest.copy() as usize * BLOCK;
    image[at..at + BLOCK].fill(0);
    let at = written[0].ring_offset as usize;
    image[at..at + BLOCK].fill(0);
    let older = sealog_wal::read_control(&mut &image[..]).expect("the older copy");
    assert_eq!(older.incarnation, 1);
    assert!(older.head < segment_1);
    image
}

#[test]
fn a_cut_that_leaves_nothing_live_probes_as_far_as_the_next_open_reads() {
    let image = lost_control_block_and_a_zeroed_block();
    // LSN 3's watermark says LSN 2 was acknowledged: strict replay names the loss (it used to
    // stop probing at the older head's segment on the next lap, end clean with nothing, and
    // leave LSN 3 for the next open to find).
    match replay_image(&image, &strict()).0 {
        Err(ReplayError::Corruption(found)) => {
            assert_eq!(found.lsn, 2, "{found}");
            assert!(
                matches!(
                    found.evidence,
                    Evidence::WatermarkCovers {
                        lsn: 3,
                        watermark: 2,
                        ..
                    }
                ),
                "{found}"
            );
        }
        other => panic!("the loss of acknowledged LSN 2 must be reported, got {other:?}"),
    }
    // Truncating mode cuts there, and what its writer leaves is a clean log that any later
    // open recovers the same (rule 5): LSN 3 was seen, so it was zeroed.
    let (writer, report, entries) = ModelWriter::open(image, &salvage()).expect("salvage opens");
    assert_eq!(report.outcome, Outcome::Truncated);
    assert_eq!((entries.len(), report.next_lsn), (0, 2));
    for options in [strict(), salvage()] {
        let (again, entries) = replay_image(writer.durable(), &options);
        let again = again.expect("a second open recovers the same log");
        assert_eq!((entries.len(), again.next_lsn), (0, 2));
        assert_eq!(again.outcome, Outcome::Clean);
    }
}

/// `image` after a crash in the middle of a writable open of it that replay reported as
/// `report`: the recovery plan (checked to take `incarnation`) carried out up to its control
/// block (the steps before it only flush), nothing after it; the region after the cut is not
/// zeroed yet.
fn crashed_after_control_block(
    image: &[u8],
    report: &sealog_wal::RecoveryReport,
    incarnation: u32,
) -> Vec<u8> {
    let plan = sealog_wal::plan(report).expect("a plan");
    assert_eq!(plan.incarnation, incarnation);
    let (ring_offset, bytes) = plan
        .steps
        .iter()
        .find_map(|step| match step {
            Step::Write {
                ring_offset,
                bytes,
                what: Written::ControlBlock,
            } => Some((*ring_offset as usize, bytes)),
            _ => None,
        })
        .expect("the plan writes a control block");
    let mut crashed = image.to_vec();
    crashed[ring_offset..ring_offset + bytes.len()].copy_from_slice(bytes);
    crashed
}

#[test]
fn a_crash_right_after_the_recovery_control_block_recovers_the_same_log() {
    let image = lost_control_block_and_a_zeroed_block();
    let (result, _) = replay_image(&image, &salvage());
    let report = result.expect("salvage cuts");
    assert_eq!(report.outcome, Outcome::Truncated);
    // LSN 3, found after the cut, was written by incarnation 2: the next one is 3, so the cut
    // makes it stale as soon as the control block is durable.
    assert_eq!(report.incarnation_max, 2);
    let crashed = crashed_after_control_block(&image, &report, 3);
    for options in [strict(), salvage()] {
        let (again, entries) = replay_image(&crashed, &options);
        let again = again.expect("the open after the crash recovers the same log");
        assert_eq!((entries.len(), again.next_lsn), (0, 2));
        assert_eq!(again.outcome, Outcome::Clean);
        assert_eq!(again.end_check, Check::NotWritten);
    }
}

#[test]
fn the_next_incarnation_is_above_every_floor_the_control_block_sets() {
    // Three batches of incarnation 3 at the head.
    let mut writer = new_writer(small_geometry());
    for _ in 0..2 {
        writer = ModelWriter::open(writer.durable().to_vec(), &strict())
            .expect("reopens")
            .0;
    }
    assert_eq!(writer.incarnation(), 3);
    for _ in 0..3 {
        append(&mut writer, 2, 300, 1);
        writer.flush();
    }
    // A control block (valid CRC) whose cut, at the head, names incarnation 10, above its own
    // (1) and its head's (1): replay takes the batches there for stale, and the log is empty.
    let mut image = writer.durable().to_vec();
    patch_control(&mut image, |control| {
        control.incarnation = 1;
        control.head_incarnation = 1;
        control.cut = control.head;
        control.cut_incarnation = 10;
    });
    let (result, entries) = replay_image(&image, &strict());
    let report = result.expect("replays");
    assert_eq!((entries.len(), report.next_lsn), (0, 1));
    assert!(report.stale_records >= 6, "{report:?}");
    assert_eq!(report.incarnation_max, 10);
    // A writer's control block (incarnation 11, with its own cut there) then the power fails:
    // the batches of incarnation 3 are still stale (with incarnation 2 they were the log).
    let crashed = crashed_after_control_block(&image, &report, 11);
    let (again, entries) = replay_image(&crashed, &strict());
    let again = again.expect("the open after the crash recovers the same log");
    assert_eq!((entries.len(), again.next_lsn), (0, 1));
}

/// The fuzzer's case itself, as the harness built it for format version 2: a stale block broke
/// the first live batch (LSN 111's watermark said LSN 106 was acknowledged), a data block
/// copied over segment 1's header and then over control copy 0 made replay read the older copy
/// (whose head lagged a segment behind), and a record in segment 1 beyond that head's reach was
/// crafted with incarnation u32::MAX. The truncating open's writer cut with nothing live; the
/// next open probed on into segment 1 and took that record's watermark for proof of a loss.
/// Now the first open probes as far and finds it: no incarnation is left above it, so a
/// writer's open is refused with a typed error, never a second open that fails. Version 3's
/// larger entry header moves the records, so the same seed now draws other mutations (the
/// scenario itself is rebuilt by hand in
/// `a_cut_that_leaves_nothing_live_probes_as_far_as_the_next_open_reads`); the case still
/// must pass the model check.
#[test]
fn fuzz_case_296730_of_seed_20261130_is_recovered_idempotently_or_refused() {
    let seed = 20_261_130;
    let case = run_case(
        &mut Bases::new(seed, 512),
        &mut Choices::from_seed(case_seed(seed, 296_730)),
    );
    assert_eq!(case.base, "workload 719641491313560711");
    match case.result {
        CaseResult::Passed(_) => {}
        other => panic!("{other:?}"),
    }
}

/// A fuzz case of format version 3: a padding record crafted with the next writer's
/// incarnation, lap 4 and an LSN (88) below the log's end (113), a window past where the
/// first open's probe stopped. The open after that writer's first block (the recovery's tail
/// marker) probed a block further, met it, and took it for acknowledged data beyond the
/// window: corrupt. A record below the LSN the log expects at its break is no continuation of
/// it, so it proves nothing; the reopen recovers the same log.
#[test]
fn fuzz_case_476483_of_seed_20261130_a_record_below_the_logs_lsn_proves_no_loss() {
    let seed = 20_261_130;
    let case = run_case(
        &mut Bases::new(seed, 512),
        &mut Choices::from_seed(case_seed(seed, 476_483)),
    );
    assert_eq!(case.base, "workload 11312830504240882416");
    match case.result {
        CaseResult::Passed(_) => {}
        other => panic!("{other:?}"),
    }
}
