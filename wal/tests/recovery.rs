//! The one recovery protocol (`sealog_wal::recovery::plan`) and the ring space it keeps for a
//! tail marker:
//! - the plan's steps, in order: flush every segment replay looked at (a hinted replay of a
//!   fresh ring: only the first; a full one: all), the new control block (with the new
//!   incarnation's first tail hint) and its flush, then the dirty region zeroed range by
//!   range and flushed, then (when live entries are not covered by a recovered watermark) a
//!   tail marker and its flush;
//! - a crash after any step, with any fate for a write not yet flushed, recovers the same log;
//! - after the marker, damage to the newest acknowledged entry is corruption, not a torn tail
//!   (before it, the model's open wrote no marker and the same damage was cut as a torn tail);
//! - a control block whose sequence or incarnation cannot be bumped is a typed error;
//! - data batches leave the block before a segment they cannot enter for a marker, so a ring
//!   filled until appends are refused still takes one;
//! - the sync choice format recorded survives every rewrite of the control block (each open's
//!   plan, each trim) unchanged, and so does the ring's purpose, unless the open's plan is
//!   asked to record another (`plan_with_purpose`); a purpose byte no version writes refuses
//!   the ring, naming the byte.

mod common;

use common::*;
use sealog_wal::format::{
    ControlBlock, RingPurpose, SyncChoice, SyncMeasurement, SyncMethod, CONTROL_SEQUENCE_LIMIT,
    CONTROL_SIZE, ENTRY_HEADER_SIZE,
};
use sealog_wal::recovery::Written;
use sealog_wal::{
    plan, plan_with_purpose, scan, Check, Evidence, Geometry, Outcome, PlanError, Position,
    RecoveryReport, ReplayError, RingFull, Scan, SequenceExhausted, Step, TailHint, TailMarker,
    WriteCursor,
};
use sealog_wal_kit::disk::{BlockFate, FlushCover, SimDisk, WriteDurability};
use sealog_wal_kit::model::{ModelError, ModelWriter};

fn report_of(image: &[u8]) -> RecoveryReport {
    scan(&mut &image[..], &strict()).expect("replays")
}

/// Three acknowledged batches of two records (each flushed alone: the last is covered by no
/// watermark), then B and C pending; B tears after two sectors, C lands.
fn torn_image() -> Vec<u8> {
    let mut writer = new_writer(small_geometry());
    for _ in 0..3 {
        append(&mut writer, 2, 300, 1);
        writer.flush();
    }
    append(&mut writer, 3, 1000, 2);
    append(&mut writer, 3, 1000, 2);
    writer.crash(&mut |write, _| {
        if write == 0 {
            BlockFate::PartlyNew(2)
        } else {
            BlockFate::New
        }
    })
}

/// Carries out `steps` on a disk holding `image`: each write as a plain write, each flush as a
/// flush of everything completed.
fn carry_out(disk: &mut SimDisk, steps: &[Step]) {
    for step in steps {
        match step {
            Step::Flush { .. } => {
                disk.flush(FlushCover::All);
            }
            Step::Write {
                ring_offset, bytes, ..
            } => {
                disk.write(*ring_offset, bytes, WriteDurability::Volatile)
                    .expect("inside the ring");
            }
            Step::Zero {
                ring_offset,
                len_bytes,
            } => {
                disk.write(
                    *ring_offset,
                    &vec![0u8; *len_bytes as usize],
                    WriteDurability::Volatile,
                )
                .expect("inside the ring");
            }
        }
    }
}

#[test]
fn a_fresh_ring_plans_flushes_then_a_control_block_and_nothing_more() {
    let geometry = small_geometry();
    let image = ModelWriter::format(geometry, ring_id());
    let report = report_of(&image);
    let plan = plan(&report).expect("a fresh ring opens");
    let start = Position {
        lap: 1,
        segment: 0,
        offset: BLOCK as u32,
    };
    // Format writes sequences 0 and 1: the next control block is 2, in copy 0. Its hint lies
    // three windows (24 blocks) past the cut: 15 blocks left in segment 0, segment 1's header,
    // then 8 blocks into segment 1 (block 9).
    assert!(
        matches!(report.scan, Scan::Hinted { .. }),
        "{:?}",
        report.scan
    );
    let expected = ControlBlock {
        sequence: 2,
        incarnation: 1,
        trim_lsn: 0,
        head: start,
        head_lsn: 1,
        head_incarnation: 1,
        cut: start,
        cut_incarnation: 1,
        tail_hint: TailHint {
            limit: Position {
                lap: 1,
                segment: 1,
                offset: 9 * BLOCK as u32,
            },
            incarnation: 1,
        },
        ..report.control
    };
    assert_eq!(plan.control, expected);
    assert_eq!(plan.incarnation, 1);
    assert_eq!(
        plan.cursor,
        WriteCursor {
            position: start,
            next_lsn: 1
        }
    );
    assert_eq!(plan.lsn_durable, 0);
    assert_eq!(plan.tail_marker, TailMarker::NotNeeded);
    let mut control_block = vec![0u8; BLOCK];
    expected.encode(&mut control_block);
    // The hinted replay of a fresh ring (its hint is the head) looked as far as the first
    // hint its writer records, block 9 of segment 1: segments 0 and 1 are flushed.
    let steps = vec![
        Step::Flush {
            ring_offset: geometry.segment_ring_offset(0),
        },
        Step::Flush {
            ring_offset: geometry.segment_ring_offset(1),
        },
        Step::Write {
            ring_offset: 0,
            bytes: control_block,
            what: Written::ControlBlock,
        },
        Step::Flush { ring_offset: 0 },
    ];
    assert_eq!(plan.steps, steps);
    // A full scan looked at every segment: each is flushed, the rest of the plan the same.
    let full_report = scan(&mut &image[..], &full(strict())).expect("replays");
    let full_plan = plan_of(&full_report);
    let mut full_steps: Vec<Step> = (0..geometry.segment_count)
        .map(|segment| Step::Flush {
            ring_offset: geometry.segment_ring_offset(segment),
        })
        .collect();
    full_steps.extend(steps[2..].iter().cloned());
    assert_eq!(full_plan.steps, full_steps);
}

fn plan_of(report: &RecoveryReport) -> sealog_wal::RecoveryPlan {
    plan(report).expect("a plan")
}

#[test]
fn after_a_torn_tail_the_control_block_is_durable_before_the_dirty_region_is_zeroed() {
    let geometry = small_geometry();
    let image = torn_image();
    let report = report_of(&image);
    assert_eq!(report.outcome, Outcome::TornTail);
    let invalidate = report.invalidate.expect("a dirty region");
    let plan = plan(&report).expect("opens");
    let steps = &plan.steps;
    // The segments replay looked at flushed first: the log's (segment 0) and those its probe
    // reached.
    let control_at = steps
        .iter()
        .position(|step| matches!(step, Step::Write { .. }))
        .expect("a control block write");
    assert!(control_at >= 1);
    for (segment, step) in steps[..control_at].iter().enumerate() {
        assert_eq!(
            step,
            &Step::Flush {
                ring_offset: geometry.segment_ring_offset(segment as u32)
            }
        );
    }
    assert!(matches!(
        &steps[control_at],
        Step::Write { what: Written::ControlBlock, ring_offset, .. }
            if *ring_offset == geometry.control_offset(plan.control.copy())
    ));
    assert!(matches!(steps[control_at + 1], Step::Flush { .. }));
    // Then the zeroing, exactly the invalidation's ranges, each flushed.
    let zeroed: Vec<(u64, u64)> = steps
        .iter()
        .filter_map(|step| match step {
            Step::Zero {
                ring_offset,
                len_bytes,
            } => Some((*ring_offset, *len_bytes)),
            _ => None,
        })
        .collect();
    assert_eq!(zeroed, invalidate.ranges(&geometry));
    let first_zero = steps
        .iter()
        .position(|step| matches!(step, Step::Zero { .. }))
        .expect("zero steps");
    assert!(first_zero > control_at + 1, "the control block goes first");
    // Every range zeroed, then each flushed, before anything else.
    let ranges = invalidate.ranges(&geometry);
    for (index, &(ring_offset, _)) in ranges.iter().enumerate() {
        assert_eq!(
            steps[first_zero + ranges.len() + index],
            Step::Flush { ring_offset }
        );
    }
    // The new incarnation's first hint lies three windows past the cut (in segment 1:
    // the cut is at block 4, the window 8 blocks), and the replay that planned it probed at
    // least that far. Three windows are 24 blocks: 12 left in segment 0, segment 1's header,
    // and 11 more.
    assert_eq!(report.next_position.offset, 4 * BLOCK as u32);
    assert_eq!(
        plan.control.tail_hint,
        TailHint {
            limit: Position {
                lap: 1,
                segment: 1,
                offset: 12 * BLOCK as u32,
            },
            incarnation: plan.incarnation,
        }
    );
    assert!(report.scan_end >= plan.control.tail_hint.limit);
    // The new control block records the cut and the new incarnation.
    assert_eq!(plan.control.cut, report.next_position);
    assert_eq!(plan.control.cut_incarnation, report.incarnation_max + 1);
    assert_eq!(plan.control.trim_lsn, report.trim_lsn);
    assert_eq!(plan.lsn_durable, report.next_lsn - 1);
    // The acknowledged batches were flushed alone: the last is uncovered, so a marker ends
    // the plan (after the zeroing, at the cut).
    assert!(matches!(
        plan.tail_marker,
        TailMarker::Planned { position, watermark: 6 } if position == report.next_position
    ));
    let marker_at = steps
        .iter()
        .position(|step| {
            matches!(
                step,
                Step::Write {
                    what: Written::TailMarker,
                    ..
                }
            )
        })
        .expect("a marker step");
    assert!(marker_at > first_zero);
    assert_eq!(
        marker_at + 2,
        steps.len(),
        "the marker and its flush end the plan"
    );
}

#[test]
fn a_crash_after_any_step_of_the_plan_recovers_the_same_log() {
    let image = torn_image();
    let (before, entries) = replay_image(&image, &strict());
    let before = before.expect("torn");
    let plan = plan(&before).expect("opens");
    let fates = [
        BlockFate::Old,
        BlockFate::New,
        BlockFate::Zero,
        BlockFate::Garbage(7),
        BlockFate::PartlyNew(1),
    ];
    for done in 0..=plan.steps.len() {
        for fate in fates {
            let mut disk = SimDisk::new(image.clone());
            carry_out(&mut disk, &plan.steps[..done]);
            let crashed = disk.crash(&[], BLOCK, &mut |_| fate);
            let (after, again) = replay_image(&crashed, &strict());
            let after = after.unwrap_or_else(|error| {
                panic!("after {done} steps, fate {fate:?}: {error}");
            });
            assert_eq!(again, entries, "after {done} steps, fate {fate:?}");
            assert_eq!(after.next_lsn, before.next_lsn);
        }
    }
}

#[test]
fn uncovered_entries_get_a_tail_marker_after_which_damage_to_the_newest_is_corruption() {
    let mut writer = new_writer(small_geometry());
    for _ in 0..4 {
        append(&mut writer, 2, 300, 1);
        writer.flush();
    }
    let newest = writer.written().last().cloned().expect("written");
    let image = writer.durable().to_vec();
    let report = report_of(&image);
    assert_eq!((report.last_lsn, report.watermark_max), (Some(8), 6));
    // Without a marker, damage to the newest batch is the residual risk: a torn tail.
    let mut damaged = image.clone();
    damaged[newest.records[1].0 as usize + ENTRY_HEADER_SIZE + 6] ^= 1;
    let (result, _) = replay_image(&damaged, &strict());
    assert_eq!(result.expect("torn").outcome, Outcome::TornTail);

    // The open writes the marker: every recovered entry is covered.
    assert!(matches!(
        plan(&report).expect("opens").tail_marker,
        TailMarker::Planned { watermark: 8, .. }
    ));
    let (reopened, _, recovered) = ModelWriter::open(image, &strict()).expect("opens");
    assert_eq!(recovered.len(), 8);
    assert_eq!(reopened.acked_lsn(), 8);
    let (result, entries) = replay_image(reopened.durable(), &strict());
    let after = result.expect("replays");
    assert_eq!(entries, recovered);
    assert_eq!(after.watermark_max, 8, "the marker covers LSN 8");
    assert_eq!(after.outcome, Outcome::Clean);
    let mut damaged = reopened.durable().to_vec();
    damaged[newest.records[1].0 as usize + ENTRY_HEADER_SIZE + 6] ^= 1;
    match replay_image(&damaged, &strict()).0 {
        Err(ReplayError::Corruption(found)) => {
            assert_eq!((found.lsn, found.check), (8, Check::PayloadCrc));
            assert!(matches!(
                found.evidence,
                Evidence::WatermarkCovers { watermark: 8, .. }
            ));
        }
        other => panic!("damage to a covered entry must be corruption, got {other:?}"),
    }
    // The writer goes on after the marker; a second open plans none.
    let mut reopened = reopened;
    append(&mut reopened, 1, 100, 3);
    reopened.flush();
    reopened.tail_marker().expect("room");
    reopened.flush();
    let report = report_of(reopened.durable());
    assert_eq!(
        plan(&report).expect("opens").tail_marker,
        TailMarker::NotNeeded
    );
}

#[test]
fn covered_entries_get_no_marker() {
    let mut writer = new_writer(small_geometry());
    // Two acknowledged batches, then a marker built once both were acknowledged.
    append(&mut writer, 2, 300, 1);
    writer.flush();
    append(&mut writer, 2, 300, 1);
    writer.flush();
    writer.tail_marker().expect("room");
    writer.flush();
    let report = report_of(writer.durable());
    assert_eq!((report.last_lsn, report.watermark_max), (Some(4), 4));
    let plan = plan(&report).expect("opens");
    assert_eq!(plan.tail_marker, TailMarker::NotNeeded);
    assert!(!plan.steps.iter().any(|step| matches!(
        step,
        Step::Write {
            what: Written::TailMarker,
            ..
        }
    )));
    assert_eq!(plan.cursor.position, report.next_position);
}

#[test]
fn a_marker_with_no_room_is_reported_and_the_open_goes_on() {
    let mut writer = new_writer(small_geometry());
    append(&mut writer, 2, 300, 1);
    writer.flush();
    let mut report = report_of(writer.durable());
    // As if the writer had filled the ring to the head: the next batch would enter segment 0
    // on lap 2, which still holds the head.
    let full = Position {
        lap: 2,
        segment: 0,
        offset: BLOCK as u32,
    };
    report.next_position = full;
    let plan = plan(&report).expect("a full ring still opens");
    assert_eq!(
        plan.tail_marker,
        TailMarker::NoRoom(RingFull {
            segment: 0,
            lap: 2,
            head: report.control.head
        })
    );
    assert!(!plan.steps.iter().any(|step| matches!(
        step,
        Step::Write {
            what: Written::TailMarker,
            ..
        }
    )));
    assert_eq!(plan.cursor.position, full);
}

/// Writes `control` into the copy its sequence names.
fn with_control(image: &[u8], control: ControlBlock) -> Vec<u8> {
    let mut image = image.to_vec();
    let at = control.copy() as usize * BLOCK;
    control.encode(&mut image[at..at + BLOCK]);
    image
}

#[test]
fn a_sequence_or_incarnation_that_cannot_be_bumped_is_a_typed_error() {
    let mut writer = new_writer(small_geometry());
    append(&mut writer, 2, 300, 1);
    writer.flush();
    let image = writer.durable().to_vec();
    let current = report_of(&image).control;

    // At the limit: the ring reads, but no writer may open it.
    let at_limit = with_control(
        &image,
        ControlBlock {
            sequence: CONTROL_SEQUENCE_LIMIT,
            ..current
        },
    );
    let report = report_of(&at_limit);
    assert_eq!(
        plan(&report),
        Err(PlanError::Sequence(SequenceExhausted {
            sequence: CONTROL_SEQUENCE_LIMIT
        }))
    );
    assert!(matches!(
        ModelWriter::open(at_limit, &strict()),
        Err(ReplayError::Plan(PlanError::Sequence(_)))
    ));
    // Near u64::MAX (a crafted block with a valid CRC): refused by replay itself.
    let crafted = with_control(
        &image,
        ControlBlock {
            sequence: u64::MAX,
            ..current
        },
    );
    assert!(matches!(
        ModelWriter::open(crafted, &strict()),
        Err(ReplayError::ControlSequence { sequence: u64::MAX })
    ));

    // The incarnation counter at its end.
    let exhausted = with_control(
        &image,
        ControlBlock {
            sequence: current.sequence + 1,
            incarnation: u32::MAX,
            ..current
        },
    );
    let report = report_of(&exhausted);
    assert_eq!(
        plan(&report),
        Err(PlanError::IncarnationExhausted {
            incarnation_max: u32::MAX
        })
    );
    assert!(matches!(
        ModelWriter::open(exhausted, &strict()),
        Err(ReplayError::IncarnationExhausted)
    ));
}

/// Appends one record at a time, each flushed, until the ring refuses one; returns the LSNs
/// acknowledged.
fn fill(writer: &mut ModelWriter, len: usize, salt: u64) -> u64 {
    let mut appended = 0;
    loop {
        let lsn = writer.next_lsn();
        match writer.append(&[&payload(lsn, salt, len)]) {
            Ok(_) => {
                writer.flush();
                appended += 1;
            }
            Err(ModelError::RingFull { submitted, .. }) => {
                assert!(submitted.is_empty());
                return appended;
            }
            Err(error) => panic!("append failed: {error}"),
        }
    }
}

#[test]
fn a_ring_filled_until_appends_are_refused_still_takes_a_tail_marker() {
    for (segment_blocks, batch_blocks) in [(16u64, 4u32), (8, 2), (5, 4), (3, 2)] {
        let geometry = Geometry {
            segment_size_bytes: segment_blocks * BLOCK as u64,
            batch_size_max_bytes: batch_blocks * BLOCK as u32,
            window_bytes_max: u64::from(2 * batch_blocks) * BLOCK as u64,
            ..small_geometry()
        };
        let limit = geometry.payload_size_max_bytes() as usize;
        for len in [
            0usize,
            100,
            3000,
            BLOCK - ENTRY_HEADER_SIZE,
            BLOCK + 10,
            limit,
        ] {
            let case = format!("segments of {segment_blocks} blocks, payloads of {len}");
            let mut writer = new_writer(geometry);
            let mut acked = fill(&mut writer, len, 1);
            // Once more after trimming half, so the ring is full on a later lap too.
            writer.trim(acked / 2);
            acked += fill(&mut writer, len, 2);
            assert!(acked > 0, "{case}");
            assert_eq!(writer.acked_lsn(), acked, "{case}");
            writer.tail_marker().unwrap_or_else(|error| {
                panic!("{case}: no room for a marker: {error}");
            });
            writer.flush();
            let (result, entries) = replay_image(writer.durable(), &strict());
            let report = result.unwrap_or_else(|error| panic!("{case}: {error}"));
            assert_eq!(report.outcome, Outcome::Clean, "{case}");
            assert_eq!(entries.last().map(|entry| entry.0), Some(acked), "{case}");
            assert_eq!(report.watermark_max, acked, "{case}: the marker covers all");
            // Smaller records may still fit before the kept block; once they are refused too,
            // the last block still takes a marker (when there is anything new to cover: a
            // marker that took the last block already covers everything before it).
            let more = fill(&mut writer, 0, 3);
            acked += more;
            if more > 0 {
                writer.tail_marker().unwrap_or_else(|error| {
                    panic!("{case}: no room for a second marker: {error}");
                });
                writer.flush();
            }
            let report = replay_image(writer.durable(), &strict())
                .0
                .expect("replays");
            assert_eq!(
                (report.last_lsn, report.watermark_max),
                (Some(acked), acked),
                "{case}"
            );
            assert!(
                matches!(writer.append(&[b""]), Err(ModelError::RingFull { .. })),
                "{case}"
            );
        }
    }
}

#[test]
fn data_slots_keep_the_block_before_a_segment_that_cannot_be_entered() {
    let geometry = small_geometry(); // 16-block segments, batches of up to 4 blocks
    let head = Position {
        lap: 1,
        segment: 1,
        offset: BLOCK as u32,
    };
    let at = |offset_blocks: u32| WriteCursor {
        position: Position {
            lap: 2,
            segment: 0,
            offset: offset_blocks * BLOCK as u32,
        },
        next_lsn: 100,
    };
    // Segment 1 on lap 2 still holds the head: it cannot be entered.
    assert!(!at(13).can_enter_next_segment(&geometry, head));
    let data = at(13).data_slot(&geometry, head, 5).expect("room");
    assert_eq!(
        data.capacity_bytes,
        2 * BLOCK as u32,
        "blocks 13-14, not 15"
    );
    let plain = at(13).slot(&geometry, head, 5).expect("room");
    assert_eq!(plain.capacity_bytes, 3 * BLOCK as u32);
    let full = RingFull {
        segment: 1,
        lap: 2,
        head,
    };
    assert_eq!(at(15).data_slot(&geometry, head, 5), Err(full.clone()));
    let marker = at(15)
        .marker_slot(&geometry, head, 5)
        .expect("the kept block");
    assert_eq!(marker.capacity_bytes, BLOCK as u32);
    let mut cursor = at(14);
    assert_eq!(cursor.skip_for_data(&geometry, head), Err(full));
    assert_eq!(cursor, at(14), "a refused skip leaves the cursor");
    // Once the head has moved past segment 1, data may use the whole segment.
    let later = Position { segment: 2, ..head };
    assert!(at(13).can_enter_next_segment(&geometry, later));
    let data = at(15).data_slot(&geometry, later, 5).expect("room");
    assert_eq!(data.capacity_bytes, BLOCK as u32);
    let mut cursor = at(14);
    cursor.skip_for_data(&geometry, later).expect("may enter");
    assert_eq!(cursor.position.segment, 1);
}

#[test]
fn the_sync_choice_survives_every_rewrite_of_the_control_block() {
    let sync = SyncChoice::Measured {
        method: SyncMethod::Dsync,
        measurement: SyncMeasurement {
            write_size_bytes: 2 * BLOCK as u32,
            rounds: 12,
            writes_per_round: 8,
            margin_percent: 10,
            fua: false,
            fdatasync_p50_us: 180,
            fdatasync_p99_us: 420,
            dsync_p50_us: 120,
            dsync_p99_us: 260,
        },
    };
    // A ring as format leaves it when it measured: both copies carry the choice.
    let image = format_recording(|control| ControlBlock { sync, ..control });
    assert_kept_by_every_rewrite(image, sync, |control| control.sync);
}

/// Rewrites both control copies of `image` with `edit` applied, as format would have written
/// them.
fn edit_controls(image: &mut [u8], geometry: &Geometry, edit: impl Fn(&mut [u8])) {
    for copy in 0..2u64 {
        let at = geometry.control_offset(copy) as usize;
        edit(&mut image[at..at + BLOCK]);
    }
}

/// A freshly formatted ring whose control copies record what `record` makes of them.
fn format_recording(record: impl Fn(ControlBlock) -> ControlBlock) -> Vec<u8> {
    let geometry = small_geometry();
    let mut image = ModelWriter::format(geometry, ring_id());
    edit_controls(&mut image, &geometry, |block| {
        let control = ControlBlock::decode(block).expect("a formatted copy");
        record(control).encode(block);
    });
    image
}

/// Opens `image`, appends, trims and reopens it: what `field` reads of the current control
/// block is `expected` at the start, after the open, after the trim, in the reopen's report
/// and after the reopen. Returns the ring's durable bytes after the reopen.
fn assert_kept_by_every_rewrite<T: PartialEq + std::fmt::Debug>(
    image: Vec<u8>,
    expected: T,
    field: fn(&ControlBlock) -> T,
) -> Vec<u8> {
    let current = |image: &[u8]| field(&sealog_wal::read_control(&mut &image[..]).expect("reads"));
    assert_eq!(current(&image), expected, "the formatted ring");
    let (mut writer, _, _) = ModelWriter::open(image, &strict()).expect("opens");
    assert_eq!(
        current(writer.durable()),
        expected,
        "the open's control block"
    );
    for _ in 0..6 {
        append(&mut writer, 2, 500, 7);
        writer.flush();
    }
    writer.trim(5);
    assert_eq!(
        current(writer.durable()),
        expected,
        "a trim's control block"
    );
    let (writer, report, _) =
        ModelWriter::open(writer.durable().to_vec(), &strict()).expect("reopens");
    assert_eq!(field(&report.control), expected, "replay's report");
    assert_eq!(
        current(writer.durable()),
        expected,
        "the reopen's control block"
    );
    writer.durable().to_vec()
}

#[test]
fn the_purpose_survives_every_rewrite_unless_the_open_records_another() {
    let store = RingPurpose::LogDriveStore;
    let image = format_recording(|control| ControlBlock {
        purpose: store,
        ..control
    });
    let kept = plan(&report_of(&image)).expect("plans");
    assert_eq!(kept.control.purpose, store, "a plan keeps the purpose");
    let image = assert_kept_by_every_rewrite(image, store, |control| control.purpose);
    // An open asked for another purpose records it in the block it writes anyway: the plan
    // has one control block write, and it carries the new purpose.
    let marked = plan_with_purpose(&report_of(&image), RingPurpose::Log).expect("plans");
    assert_eq!(marked.control.purpose, RingPurpose::Log);
    let written: Vec<&Vec<u8>> = marked
        .steps
        .iter()
        .filter_map(|step| match step {
            Step::Write {
                bytes,
                what: Written::ControlBlock,
                ..
            } => Some(bytes),
            _ => None,
        })
        .collect();
    assert_eq!(written.len(), 1, "one control block write");
    let decoded = ControlBlock::decode(written[0]).expect("the plan's block decodes");
    assert_eq!(decoded, marked.control);
}

#[test]
fn a_purpose_byte_no_version_writes_refuses_the_ring_naming_it() {
    let geometry = small_geometry();
    let mut image = ModelWriter::format(geometry, ring_id());
    edit_controls(&mut image, &geometry, |block| {
        block[164] = 7;
        block[8..12].fill(0);
        let crc = crc32c::crc32c(&block[..CONTROL_SIZE]);
        block[8..12].copy_from_slice(&crc.to_le_bytes());
    });
    let refused = scan(&mut &image[..], &strict()).map(|_| ());
    assert!(
        matches!(
            refused,
            Err(ReplayError::ControlPurpose { purpose_byte: 7 })
        ),
        "{refused:?}"
    );
    let text = refused.expect_err("refused").to_string();
    assert!(text.contains("purpose (byte 7)"), "{text}");
}
