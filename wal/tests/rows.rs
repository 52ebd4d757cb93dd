//! One test per row of replay's decision table, and per recovery rule of docs/recovery.md: each
//! builds a ring with the reference writer, does the one thing the row or rule is about, and checks
//! both the outcome and the row the report says ended the scan, so a refactor cannot quietly
//! disconnect a test from the branch it was written for.

mod common;

use common::*;
use sealog_wal::batch::{BatchBuilder, BatchStart};
use sealog_wal::format::{CONTROL_SIZE, ENTRY_HEADER_SIZE};
use sealog_wal::{Check, Evidence, Geometry, Kind, Outcome, Position, ReplayError};
use sealog_wal_kit::model::{BlockFate, ModelWriter};

fn flushed_batches(writer: &mut ModelWriter, batches: usize, records: usize, len: usize) {
    for _ in 0..batches {
        append(writer, records, len, 1);
        writer.flush();
    }
}

fn corruption(result: Result<sealog_wal::RecoveryReport, ReplayError>) -> sealog_wal::Corruption {
    match result {
        Err(ReplayError::Corruption(corruption)) => *corruption,
        other => panic!("expected corruption, got {other:?}"),
    }
}

#[test]
fn row_accept_and_end_a_clean_ring_replays_every_entry() {
    let mut writer = new_writer(small_geometry());
    flushed_batches(&mut writer, 5, 3, 200);
    let (result, entries) = replay_image(writer.durable(), &strict());
    let report = result.expect("a clean ring replays");
    assert_eq!(report.outcome, Outcome::Clean);
    assert_eq!(report.end_row, "@end");
    assert_eq!(report.hits("@accept"), 5);
    assert_eq!(report.end_check, Check::NotWritten);
    assert_eq!(entries.len(), 15);
    assert_contiguous(&entries);
    for (lsn, bytes) in &entries {
        assert_eq!(bytes, &payload(*lsn, 1, 200));
    }
    assert_eq!(
        (report.first_lsn, report.last_lsn, report.next_lsn),
        (Some(1), Some(15), 16)
    );
    assert!(report.invalidate.is_none());
}

#[test]
fn row_skip_the_unused_rest_of_a_segment_is_crossed() {
    let mut writer = new_writer(small_geometry());
    // Records of two blocks: 7 fit in a segment's 15 data blocks, the 8th moves on.
    let len = 2 * BLOCK - ENTRY_HEADER_SIZE;
    flushed_batches(&mut writer, 12, 1, len);
    let (result, entries) = replay_image(writer.durable(), &strict());
    let report = result.expect("replays");
    assert!(report.hits("@skip") >= 1, "row hits {:?}", report.row_hits);
    assert_eq!(report.segments_skipped, report.hits("@skip"));
    assert_eq!(entries.len(), 12);
    assert_eq!(report.end_row, "@end");
}

#[test]
fn row_skip_is_not_taken_over_an_older_incarnations_segment_header() {
    //! The shrunk property case `a871db5b` (tests/props.proptest-regressions):
    //! 1. incarnation 1 acknowledges LSNs 1-6 in segment 0, then has LSNs 7 and 8 in flight
    //!    in segment 0 and LSN 9 in segment 1 (it did not fit segment 0's rest);
    //! 2. power fails: only segment 1's header block lands (first LSN 9, incarnation 1); the
    //!    replay ends clean at LSN 7's place and zeroes nothing;
    //! 3. incarnation 2 writes LSNs 7-8, 9-10 and 11 (watermark 10) in segment 0, all flushed:
    //!    LSN 9 is again the first of a batch, with more than a batch of room after it;
    //! 4. a bit flips in LSN 9's magic. The stale header of segment 1 names LSN 9, the LSN
    //!    expected there: it must not read as "the writer moved on to segment 1" (it is of an
    //!    older incarnation than the floor), or the walk skips LSNs 9-11 and ends clean.
    let geometry = Geometry {
        batch_size_max_bytes: 3 * BLOCK as u32,
        window_batches_max: 3,
        window_bytes_max: 9 * BLOCK as u64,
        ..small_geometry()
    };
    let mut writer = new_writer(geometry);
    let header = ENTRY_HEADER_SIZE;
    // A record of a block and a byte (a 2-block batch), one of 2 blocks and a byte (3 blocks),
    // then four of a header alone (a block each).
    for len in [BLOCK - header + 1, 2 * BLOCK - header + 1, 0, 0, 0, 0] {
        append(&mut writer, 1, len, 1);
    }
    writer.flush();
    assert_eq!(writer.acked_lsn(), 6);
    // A header alone, a record filling a 3-block batch (2 blocks of segment 0 left after it),
    // and one of 2 blocks and a byte, which moves on to segment 1.
    for len in [0, 3 * BLOCK - header, 2 * BLOCK - header + 1] {
        append(&mut writer, 1, len, 1);
    }
    let lsn_9 = writer.written().last().expect("submitted").clone();
    assert_eq!((lsn_9.lsns.start, lsn_9.position.segment), (9, 1));
    let image = writer.crash(&mut |write, block| match (write, block) {
        (2, 0) => BlockFate::New,
        _ => BlockFate::Zero,
    });
    let stale = sealog_wal::format::SegmentHeader::decode(
        ring_id(),
        &image[geometry.segment_ring_offset(1) as usize..],
    )
    .expect("segment 1's header landed");
    assert_eq!((stale.first_lsn, stale.incarnation), (9, 1));
    let (mut second, report, _) = ModelWriter::open(image, &strict()).expect("reopens");
    assert_eq!((report.outcome, report.next_lsn), (Outcome::Clean, 7));
    append(&mut second, 2, 0, 2);
    let first = second.next_lsn();
    append(&mut second, 2, 300, 2);
    second.flush();
    append(&mut second, 1, 64, 2);
    second.flush();
    let damaged = second
        .written()
        .iter()
        .find(|batch| batch.lsns.start == first)
        .expect("LSN 9's batch")
        .clone();
    assert_eq!((first, damaged.position.segment), (9, 0));
    let room = geometry.segment_size_bytes - u64::from(damaged.position.offset);
    assert!(room >= u64::from(geometry.batch_size_max_bytes));
    let mut image = second.durable().to_vec();
    image[damaged.records[0].0 as usize] ^= 1;
    let found = corruption(replay_image(&image, &strict()).0);
    assert_eq!((found.lsn, found.check), (9, Check::Magic), "{found}");
    assert!(
        matches!(found.evidence, Evidence::WatermarkCovers { watermark, lsn: 11, .. }
        if watermark >= 9),
        "{found}"
    );
}

#[test]
fn row_skip_to_a_header_the_last_recovery_accepted_is_taken_again_after_its_cut() {
    //! The floor of the skip's incarnation check is the one at the header block, before the
    //! cut a recovery that skipped there makes at the segment's first batch: a crash right
    //! after that recovery's control block (the cut, incarnation 2) recovers the same log
    //! (rule 5), skipping to segment 1 again rather than ending in segment 0's unused rest.
    let mut writer = new_writer(small_geometry());
    // Records of two blocks: 7 fit in a segment's 15 data blocks, the 8th moves on, and the
    // power fails with only segment 1's header of its write landed.
    let len = 2 * BLOCK - ENTRY_HEADER_SIZE;
    flushed_batches(&mut writer, 7, 1, len);
    append(&mut writer, 1, len, 1);
    let image = writer.crash(&mut |_, block| match block {
        0 => BlockFate::New,
        _ => BlockFate::Zero,
    });
    let (result, entries) = replay_image(&image, &strict());
    let first = result.expect("replays");
    assert_eq!((first.hits("@skip"), entries.len()), (1, 7));
    let segment_1 = Position {
        lap: 1,
        segment: 1,
        offset: BLOCK as u32,
    };
    assert_eq!((first.next_lsn, first.next_position), (8, segment_1));
    let plan = sealog_wal::plan(&first).expect("a plan");
    assert_eq!((plan.incarnation, plan.control.cut), (2, segment_1));
    let mut crashed = image.clone();
    for step in &plan.steps {
        if let sealog_wal::Step::Write {
            ring_offset,
            bytes,
            what,
        } = step
        {
            let at = *ring_offset as usize;
            crashed[at..at + bytes.len()].copy_from_slice(bytes);
            if *what == sealog_wal::recovery::Written::ControlBlock {
                break;
            }
        }
    }
    let (result, again) = replay_image(&crashed, &strict());
    let second = result.expect("replays after the crash");
    assert_eq!(again, entries);
    assert_eq!(second.hits("@skip"), 1, "row hits {:?}", second.row_hits);
    assert_eq!(
        (second.outcome, second.next_lsn, second.next_position),
        (first.outcome, first.next_lsn, first.next_position)
    );
}

#[test]
fn row_torn_a_torn_final_window_is_cut_and_reported() {
    let mut writer = new_writer(small_geometry());
    flushed_batches(&mut writer, 3, 2, 300);
    let acked = writer.acked_lsn();
    append(&mut writer, 3, 1000, 2);
    append(&mut writer, 3, 1000, 2);
    // The first pending batch tears after two sectors; the second lands whole.
    let image = writer.crash(&mut |write, _| {
        if write == 0 {
            BlockFate::PartlyNew(2)
        } else {
            BlockFate::New
        }
    });
    let (result, entries) = replay_image(&image, &strict());
    let report = result.expect("a torn tail is not an error");
    assert_eq!(report.end_row, "@torn");
    assert_eq!(report.outcome, Outcome::TornTail);
    let torn = report.torn.expect("reported");
    assert_eq!(torn.first_lsn, acked + 1);
    assert_eq!(torn.last_lsn, acked + 6);
    assert_eq!(entries.last().map(|entry| entry.0), Some(acked));
    assert!(
        report.invalidate.is_some(),
        "the dirty region is handed to the writer"
    );
}

#[test]
fn row_acked_a_bit_flip_in_covered_data_fails_naming_its_lsn() {
    let mut writer = new_writer(small_geometry());
    flushed_batches(&mut writer, 6, 3, 300);
    let target = writer.written()[2].clone();
    let (record_offset, _) = target.records[1];
    let mut image = writer.durable().to_vec();
    image[record_offset as usize + ENTRY_HEADER_SIZE + 17] ^= 0x04;
    let found = corruption(replay_image(&image, &strict()).0);
    assert_eq!(found.lsn, target.lsns.start + 1);
    assert_eq!(found.check, Check::PayloadCrc);
    assert_eq!(found.ring_offset, record_offset);
    assert!(
        matches!(found.evidence, Evidence::WatermarkCovers { watermark, .. }
        if watermark >= target.lsns.start)
    );
}

#[test]
fn row_hole_valid_data_beyond_the_window_makes_a_gap_corruption() {
    let geometry = small_geometry();
    let mut writer = new_writer(geometry);
    flushed_batches(&mut writer, 2, 1, 100);
    let next = writer.next_lsn();
    // A record far beyond the window (segment 2) whose watermark claims nothing after the tail
    // was acknowledged: only a lost run of writes longer than the window explains it.
    let far = Position {
        lap: 1,
        segment: 2,
        offset: 4 * BLOCK as u32,
    };
    let mut image = writer.durable().to_vec();
    let mut buf = vec![0u8; BLOCK];
    let mut builder = BatchBuilder::new(
        &mut buf,
        BatchStart {
            ring_id: ring_id(),
            position: far,
            first_lsn: next + 40,
            watermark: next - 1,
            incarnation: writer.incarnation(),
            block_size_bytes: BLOCK as u32,
            capacity_bytes: BLOCK as u32,
            payload_size_max_bytes: geometry.payload_size_max_bytes(),
        },
    );
    builder.push(Kind::Data, b"far away").expect("fits");
    let batch = builder.finish();
    let at = geometry.ring_offset(far) as usize;
    image[at..at + batch.bytes as usize].copy_from_slice(&buf[..batch.bytes as usize]);
    // The record lies past the tail hint, where no writer of this log wrote: a hinted replay
    // does not look there (a writer that had reached segment 2 would have moved its hint
    // there first, see `tests/hints.rs`), a full one does.
    let (hinted, _) = replay_once(&image, &strict());
    assert_eq!(hinted.expect("the log ends clean").outcome, Outcome::Clean);
    let found = corruption(replay_image(&image, &full(strict())).0);
    assert_eq!(found.lsn, next);
    assert!(matches!(found.evidence, Evidence::BeyondWindow { lsn, .. } if lsn == next + 40));

    let (result, entries) = replay_image(&image, &full(salvage()));
    let report = result.expect("salvage cuts");
    assert_eq!(report.end_row, "@salvage_hole");
    assert_eq!(report.outcome, Outcome::Truncated);
    assert_eq!(entries.len(), 2);
    let invalidate = report.invalidate.expect("the cut region is invalidated");
    assert!(
        invalidate.end > far,
        "invalidation reaches the stray record"
    );
}

#[test]
fn row_salvage_acked_truncating_mode_cuts_and_says_what_it_dropped() {
    let mut writer = new_writer(small_geometry());
    flushed_batches(&mut writer, 6, 3, 300);
    let target = writer.written()[3].clone();
    let mut image = writer.durable().to_vec();
    // Zero the block holding the batch's first header.
    let at = target.ring_offset as usize;
    image[at..at + BLOCK].fill(0);
    let found = corruption(replay_image(&image, &strict()).0);
    assert_eq!(
        (found.lsn, found.check),
        (target.lsns.start, Check::NotWritten)
    );

    let (result, entries) = replay_image(&image, &salvage());
    let report = result.expect("salvage cuts");
    assert_eq!(report.end_row, "@salvage_acked");
    assert_eq!(entries.len() as u64, target.lsns.start - 1);
    let dropped = report.dropped.expect("reported");
    assert_eq!(dropped.first_lsn, target.lsns.start);
    assert_eq!(dropped.last_lsn, 18);
    assert_eq!(report.corruption.map(|c| c.lsn), Some(target.lsns.start));
    assert_eq!(report.next_lsn, target.lsns.start);
}

#[test]
fn rule_2_entries_of_an_earlier_lap_are_never_accepted() {
    let mut writer = new_writer(small_geometry());
    // Wrap the 4-segment ring about three times, trimming behind.
    for round in 0..150u64 {
        append(&mut writer, 2, 3000, round);
        writer.flush();
        writer.trim(writer.acked_lsn().saturating_sub(6));
    }
    let (result, entries) = replay_image(writer.durable(), &strict());
    let report = result.expect("replays");
    assert!(
        report.next_position.lap >= 3,
        "wrapped: {}",
        report.next_position
    );
    assert_eq!(report.outcome, Outcome::Clean);
    assert_eq!(entries.first().map(|e| e.0), Some(writer.acked_lsn() - 5));
    assert_eq!(entries.last().map(|e| e.0), Some(writer.acked_lsn()));
    // What follows the tail is the previous lap's data, valid but stale.
    assert!(
        matches!(
            report.end_check,
            Check::StaleLap | Check::Magic | Check::SegmentStaleLap
        ),
        "end check {:?}",
        report.end_check
    );
}

#[test]
fn rule_2_an_old_incarnation_behind_a_newer_one_is_stale_even_without_invalidation() {
    //! The ghost-entry hazard (rule 6) with the writer's invalidation deliberately skipped:
    //! 1. incarnation 1 acknowledges batch A, then has batches B and C in flight;
    //! 2. power fails: B tears, C lands; replay cuts at B (torn tail);
    //! 3. incarnation 2 writes B' with the same sizes as B, so C lines up behind it with the
    //!    very LSN that comes next;
    //! 4. replay must stop at C: it is of an older incarnation than B' before it.
    //!
    //! (A tail marker covers A, so the reopen plans no marker of its own and B' takes B's
    //! place exactly.)
    let mut writer = new_writer(small_geometry());
    append(&mut writer, 2, 500, 1);
    writer.flush();
    writer.tail_marker().expect("room");
    writer.flush();
    append(&mut writer, 3, 1200, 1);
    append(&mut writer, 2, 500, 1);
    let image = writer.crash(&mut |write, _| match write {
        0 => BlockFate::Zero,
        _ => BlockFate::New,
    });
    let (result, _) = replay_image(&image, &strict());
    assert_eq!(result.expect("torn").end_row, "@torn");
    let (mut second, _, _) =
        ModelWriter::open_without_invalidation(image, &strict()).expect("opens");
    append(&mut second, 3, 1200, 2);
    second.flush();
    let (result, entries) = replay_image(second.durable(), &strict());
    let report = result.expect("replays");
    assert_eq!(report.end_check, Check::StaleIncarnation);
    assert_eq!(report.outcome, Outcome::Clean);
    assert!(report.stale_records >= 1);
    assert_eq!(entries.len(), 5, "A and B' only");
    assert_eq!(entries[2].1, payload(3, 2, 1200), "B' is incarnation 2's");
}

#[test]
fn rule_6_invalidation_leaves_nothing_to_line_up_behind_new_entries() {
    let mut writer = new_writer(small_geometry());
    append(&mut writer, 2, 500, 1);
    writer.flush();
    append(&mut writer, 3, 1200, 1);
    append(&mut writer, 2, 500, 1);
    let image = writer.crash(&mut |write, _| match write {
        0 => BlockFate::Zero,
        _ => BlockFate::New,
    });
    let (mut second, report, _) = ModelWriter::open(image, &strict()).expect("opens");
    assert_eq!(report.outcome, Outcome::TornTail);
    append(&mut second, 3, 1200, 2);
    second.flush();
    let (result, entries) = replay_image(second.durable(), &strict());
    let report = result.expect("replays");
    assert_eq!(
        report.stale_records, 0,
        "the old batch C was zeroed before new appends"
    );
    assert_eq!(entries.len(), 5);
}

#[test]
fn rule_5_replay_is_idempotent_and_a_reopen_recovers_the_same_log() {
    let mut writer = new_writer(small_geometry());
    flushed_batches(&mut writer, 4, 3, 700);
    append(&mut writer, 2, 700, 9);
    let image = writer.crash(&mut |_, block| {
        if block == 0 {
            BlockFate::Garbage(7)
        } else {
            BlockFate::New
        }
    });
    let first = replay_image(&image, &strict());
    let second = replay_image(&image, &strict());
    assert_eq!(first.0.as_ref().ok(), second.0.as_ref().ok());
    assert_eq!(first.1, second.1);
    // A writer opens (cut, invalidate, new incarnation), writes nothing, and crashes.
    let (reopened, _, recovered) = ModelWriter::open(image, &strict()).expect("opens");
    let (again, entries) = replay_image(reopened.durable(), &strict());
    assert_eq!(again.expect("replays").outcome, Outcome::Clean);
    assert_eq!(entries, recovered);
    assert_eq!(entries, first.1);
}

#[test]
fn trimmed_entries_are_hidden_and_the_head_moves() {
    let mut writer = new_writer(small_geometry());
    flushed_batches(&mut writer, 5, 4, 100);
    writer.trim(10);
    let (result, entries) = replay_image(writer.durable(), &strict());
    let report = result.expect("replays");
    assert_eq!(report.first_lsn, Some(11));
    assert_eq!(entries.first().map(|e| e.0), Some(11));
    assert_eq!(entries.len(), 10);
}

#[test]
fn a_tail_marker_covers_the_last_batch_so_its_loss_is_detected() {
    let mut writer = new_writer(small_geometry());
    flushed_batches(&mut writer, 3, 2, 100);
    let last = writer.written().last().cloned().expect("written");
    writer.tail_marker().expect("room");
    writer.flush();
    let (result, entries) = replay_image(writer.durable(), &strict());
    let report = result.expect("replays");
    assert_eq!(entries.len(), 6);
    assert_eq!(report.watermark_max, 6, "the marker carries the watermark");
    // The drive loses the last data batch: without the marker this would be the residual risk.
    let mut image = writer.durable().to_vec();
    image[last.ring_offset as usize..last.ring_offset as usize + BLOCK].fill(0);
    let found = corruption(replay_image(&image, &strict()).0);
    assert_eq!(found.lsn, last.lsns.start);
}

#[test]
fn a_misdirected_write_is_caught_by_the_recorded_position() {
    let mut writer = new_writer(small_geometry());
    flushed_batches(&mut writer, 6, 1, 100);
    let written = writer.written().to_vec();
    let mut image = writer.durable().to_vec();
    // Batch 4's write landed on batch 2's place (and batch 4's place kept old bytes: zeros).
    let (from, to) = (
        written[4].ring_offset as usize,
        written[2].ring_offset as usize,
    );
    let block: Vec<u8> = image[from..from + BLOCK].to_vec();
    image[to..to + BLOCK].copy_from_slice(&block);
    image[from..from + BLOCK].fill(0);
    let found = corruption(replay_image(&image, &strict()).0);
    assert_eq!(
        (found.lsn, found.check),
        (written[2].lsns.start, Check::Position)
    );
}

#[test]
fn a_record_of_another_ring_is_named_as_such() {
    let mut writer = new_writer(small_geometry());
    flushed_batches(&mut writer, 4, 1, 100);
    let image_a = writer.durable().to_vec();
    let other = sealog_wal::RingId(*b"another-ring-id!");
    let mut foreign = ModelWriter::open(ModelWriter::format(small_geometry(), other), &strict())
        .expect("opens")
        .0;
    for _ in 0..4 {
        let lsn = foreign.next_lsn();
        foreign.append(&[&payload(lsn, 1, 100)]).expect("room");
        foreign.flush();
    }
    let target = writer.written()[1].ring_offset as usize;
    let mut image = image_a;
    image[target..target + BLOCK].copy_from_slice(&foreign.durable()[target..target + BLOCK]);
    let found = corruption(replay_image(&image, &strict()).0);
    assert_eq!((found.lsn, found.check), (2, Check::RingId));
}

#[test]
fn a_latent_sector_error_is_torn_in_the_window_and_corruption_below_the_watermark() {
    struct FailingSource<'a> {
        bytes: &'a [u8],
        bad: std::ops::Range<u64>,
    }
    impl sealog_wal::RingSource for FailingSource<'_> {
        fn size_bytes(&self) -> u64 {
            self.bytes.len() as u64
        }
        fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
            let end = offset + buf.len() as u64;
            if offset < self.bad.end && self.bad.start < end {
                return Err(std::io::Error::from_raw_os_error(5));
            }
            let mut bytes = self.bytes;
            bytes.read_at(offset, buf)
        }
    }
    let mut writer = new_writer(small_geometry());
    flushed_batches(&mut writer, 5, 2, 3000);
    let written = writer.written().to_vec();
    let image = writer.durable().to_vec();
    let options = strict();
    // Inside acknowledged, covered data: corruption naming the unreadable block's record.
    let bad = written[1].ring_offset + BLOCK as u64;
    let mut source = FailingSource {
        bytes: &image,
        bad: bad..bad + BLOCK as u64,
    };
    match sealog_wal::scan(&mut source, &options) {
        Err(ReplayError::Corruption(found)) => {
            assert_eq!(found.check, Check::ReadError);
            assert_eq!(found.ring_offset, bad);
        }
        other => panic!("expected corruption, got {other:?}"),
    }
    // Inside the last batch, which nothing covers: treated like a torn block.
    let bad = written[4].ring_offset;
    let mut source = FailingSource {
        bytes: &image,
        bad: bad..bad + BLOCK as u64,
    };
    let report = sealog_wal::scan(&mut source, &options).expect("torn, not corrupt");
    assert_eq!(report.outcome, Outcome::TornTail);
    assert_eq!(report.end_check, Check::ReadError);
}

#[test]
fn a_corrupted_length_never_reads_past_the_ring() {
    let geometry = small_geometry();
    let mut writer = new_writer(geometry);
    flushed_batches(&mut writer, 3, 1, 100);
    let next = writer.next_lsn();
    let at = writer.written()[2].ring_offset + BLOCK as u64;
    let position = Position {
        lap: 1,
        segment: 0,
        offset: (at - 2 * BLOCK as u64) as u32,
    };
    assert_eq!(geometry.ring_offset(position), at);
    // A header with a valid CRC claiming a 3 GiB payload and batch: checked, never followed.
    let header = sealog_wal::EntryHeader {
        kind: Kind::Data,
        payload_len: 3 << 30,
        payload_crc: 0,
        incarnation: writer.incarnation(),
        lsn: next,
        watermark: next - 1,
        position,
        batch_bytes: 3 << 30,
        batch_index: 0,
        embedder: sealog_wal::EmbedderHeader::ZERO,
    };
    let mut image = writer.durable().to_vec();
    header.encode(ring_id(), &mut image[at as usize..]);
    let (result, entries) = replay_image(&image, &strict());
    let report = result.expect("an unacknowledged bad header is a torn tail");
    assert_eq!(report.end_check, Check::BatchLayout);
    assert_eq!(entries.len(), 3);
}

#[test]
fn the_newest_valid_control_copy_wins_and_damage_to_both_is_typed() {
    let mut writer = new_writer(small_geometry());
    flushed_batches(&mut writer, 2, 1, 100);
    writer.trim(1);
    let image = writer.durable().to_vec();
    let report = replay_image(&image, &strict()).0.expect("replays");
    let newest = report.control.sequence;
    assert_eq!(report.control.trim_lsn, 1);
    // Tear the newest copy: the older one (trim 0) is used.
    let mut torn = image.clone();
    let copy = (newest % 2) as usize * BLOCK;
    torn[copy + 20] ^= 1;
    let report = replay_image(&torn, &strict())
        .0
        .expect("the other copy serves");
    assert_eq!(report.control.sequence, newest - 1);
    assert_eq!(report.control.trim_lsn, 0);
    // Tear both: a typed error.
    let other = ((newest + 1) % 2) as usize * BLOCK;
    torn[other + 20] ^= 1;
    assert!(matches!(
        replay_image(&torn, &strict()).0,
        Err(ReplayError::ControlCorrupt)
    ));
}

#[test]
fn bad_rings_are_typed_errors() {
    let zeros = vec![0u8; 1 << 20];
    assert!(matches!(
        replay_image(&zeros, &strict()).0,
        Err(ReplayError::NotARing { .. })
    ));
    let mut writer = new_writer(small_geometry());
    flushed_batches(&mut writer, 1, 1, 10);
    let image = writer.durable().to_vec();
    let short = &image[..image.len() - BLOCK];
    assert!(matches!(
        replay_image(short, &strict()).0,
        Err(ReplayError::SourceTooSmall { .. })
    ));
    // A control block of another format version, CRC intact.
    let mut control = sealog_wal::read_control(&mut image.as_slice()).expect("valid");
    let mut versioned = image.clone();
    for copy in 0..2usize {
        control.sequence = copy as u64;
        control.encode(&mut versioned[copy * BLOCK..(copy + 1) * BLOCK]);
        versioned[copy * BLOCK + 4] = 9;
        let crc = {
            let mut bytes = versioned[copy * BLOCK..copy * BLOCK + CONTROL_SIZE].to_vec();
            bytes[8..12].fill(0);
            crc32c::crc32c(&bytes)
        };
        versioned[copy * BLOCK + 8..copy * BLOCK + 12].copy_from_slice(&crc.to_le_bytes());
    }
    assert!(matches!(
        replay_image(&versioned, &strict()).0,
        Err(ReplayError::UnsupportedVersion { found: 9, .. })
    ));
}

#[test]
fn payload_limits_are_typed_errors() {
    let geometry = small_geometry();
    let mut writer = new_writer(geometry);
    let too_big = vec![0u8; geometry.payload_size_max_bytes() as usize + 1];
    let error = writer
        .append(&[b"fine", &too_big])
        .expect_err("over the limit");
    assert!(error.to_string().contains("over the ring's limit"));
    assert_eq!(writer.next_lsn(), 1, "nothing of the call was submitted");
    let biggest = vec![7u8; geometry.payload_size_max_bytes() as usize];
    writer.append(&[&biggest]).expect("exactly the limit fits");
    writer.flush();
    let (result, entries) = replay_image(writer.durable(), &strict());
    result.expect("replays");
    assert_eq!(entries[0].1, biggest);
}
