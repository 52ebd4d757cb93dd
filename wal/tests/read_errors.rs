//! Read errors (EIO) at open, and where they may and may not be taken for a torn tail.
//!
//! The bug (issue defect 4): replay counted the blocks it could not read while probing past the
//! break, but the count never reached the decision table. So:
//! 1. a ring with an in-flight window of 2 batches / 8 blocks holds thirty acknowledged
//!    one-block batches, the last fifteen in segment 1;
//! 2. the drive returns EIO for all of segment 1 (16 blocks, header included);
//! 3. replay broke at segment 1's header, found nothing readable after it, and called it a torn
//!    tail: the engine would then zero fifteen acknowledged entries and hand their LSNs out
//!    again.
//!
//! A crash never makes a block unreadable, so an unreadable run is treated like a torn block only
//! where a torn block could be: at the break, no longer (in batch bytes) than the in-flight
//! window, with nothing of the log after it. A longer run at the break, or any run with a valid
//! batch of the log after it, is corruption (named at the first unreadable block, with the LSNs
//! at risk); unreadable blocks in free or trimmed space are only reported, so one bad sector
//! there never makes a ring unopenable.

mod common;

use std::io;
use std::ops::Range;

use common::*;
use sealog_wal::{
    scan, Check, Corruption, Evidence, Geometry, Outcome, Position, RecoveryReport, ReplayError,
    ReplayOptions, RingSource, Scan, UnreadableRun,
};
use sealog_wal_kit::model::{BlockFate, ModelWriter};

/// A ring image whose reads fail with EIO whenever they overlap one of `bad` (ring offsets).
/// Replay's reader retries a failed chunk with just what it needs, and the probe reads two
/// blocks and then one, so every readable block is still read.
struct FailingSource<'a> {
    bytes: &'a [u8],
    bad: Vec<Range<u64>>,
}

impl RingSource for FailingSource<'_> {
    fn size_bytes(&self) -> u64 {
        self.bytes.len() as u64
    }

    fn read_at(&mut self, ring_offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let end = ring_offset + buf.len() as u64;
        if self
            .bad
            .iter()
            .any(|bad| ring_offset < bad.end && bad.start < end)
        {
            return Err(io::Error::from_raw_os_error(5));
        }
        let mut bytes = self.bytes;
        bytes.read_at(ring_offset, buf)
    }
}

fn scan_failing(
    image: &[u8],
    bad: Vec<Range<u64>>,
    options: &ReplayOptions,
) -> Result<RecoveryReport, ReplayError> {
    let mut source = FailingSource { bytes: image, bad };
    scan(&mut source, options)
}

fn corruption(result: Result<RecoveryReport, ReplayError>) -> Corruption {
    match result {
        Err(ReplayError::Corruption(found)) => *found,
        other => panic!("expected corruption, got {other:?}"),
    }
}

/// The reproduction's ring: window of 2 batches / 8 blocks, thirty acknowledged one-block
/// batches (LSN 1-15 in segment 0, 16-30 in segment 1).
fn thirty_batches() -> (ModelWriter, Geometry) {
    let geometry = small_geometry();
    assert_eq!(
        (geometry.window_batches_max, geometry.window_bytes_max),
        (2, 8 * BLOCK as u64)
    );
    let mut writer = new_writer(geometry);
    for _ in 0..30 {
        append(&mut writer, 1, 100, 1);
        writer.flush();
    }
    assert_eq!(writer.written()[29].position.segment, 1);
    (writer, geometry)
}

fn block_range(at: u64, blocks: u64) -> Range<u64> {
    at..at + blocks * BLOCK as u64
}

#[test]
fn an_unreadable_segment_longer_than_the_window_is_corruption_not_a_torn_tail() {
    let (writer, geometry) = thirty_batches();
    let image = writer.durable().to_vec();
    let segment_1 = geometry.segment_ring_offset(1);
    let header = Position {
        lap: 1,
        segment: 1,
        offset: 0,
    };
    let found = corruption(scan_failing(
        &image,
        vec![block_range(segment_1, 16)],
        &strict(),
    ));
    assert_eq!(found.check, Check::ReadError);
    assert_eq!((found.position, found.ring_offset), (header, segment_1));
    assert_eq!(
        found.lsn, 16,
        "the first acknowledged LSN the cut would drop"
    );
    assert_eq!(
        found.evidence,
        Evidence::Unreadable {
            at: header,
            run_bytes: 15 * BLOCK as u64,
            first_lsn: 16,
            last_lsn: None,
            log_after: None,
        }
    );

    // Truncating mode cuts there and says what it cut.
    let report =
        scan_failing(&image, vec![block_range(segment_1, 16)], &salvage()).expect("salvage cuts");
    assert_eq!(report.outcome, Outcome::Truncated);
    assert_eq!(report.end_row, "@salvage_unreadable");
    assert_eq!(report.next_lsn, 16);
    assert_eq!(report.last_lsn, Some(15));
    assert_eq!(report.dropped.map(|dropped| dropped.first_lsn), Some(16));
    assert_eq!(
        report.corruption.map(|c| (c.position, c.check)),
        Some((header, Check::ReadError))
    );
    assert_eq!(report.unreadable_blocks, 16);
    assert_eq!(
        report.unreadable_runs,
        vec![UnreadableRun {
            start: header,
            blocks: 16
        }]
    );
    let invalidate = report.invalidate.expect("the cut region is invalidated");
    assert!(
        invalidate.end.segment >= 2,
        "it covers the unreadable segment"
    );

    // The header readable, the fifteen data blocks not: the same, named at the first of them.
    let data = segment_1 + BLOCK as u64;
    let found = corruption(scan_failing(&image, vec![block_range(data, 15)], &strict()));
    assert_eq!(
        (found.ring_offset, found.lsn, found.check),
        (data, 16, Check::ReadError)
    );
}

#[test]
fn an_unreadable_run_at_the_break_is_torn_up_to_the_window_and_corruption_past_it() {
    let (writer, _) = thirty_batches();
    let image = writer.durable().to_vec();
    let written = writer.written();
    // The last eight blocks (LSN 23-30): exactly the window's bytes, nothing after: torn.
    let run = block_range(written[22].ring_offset, 8);
    let report = scan_failing(&image, vec![run.clone()], &strict()).expect("a torn tail");
    assert_eq!(report.outcome, Outcome::TornTail);
    assert_eq!(report.end_row, "@torn");
    assert_eq!(report.end_check, Check::ReadError);
    let torn = report.torn.expect("reported");
    assert_eq!((torn.start, torn.first_lsn), (written[22].position, 23));
    assert!(
        torn.bytes >= 8 * BLOCK as u64,
        "the cut covers the run: {torn:?}"
    );
    assert_eq!(report.next_lsn, 23);
    assert_eq!(report.unreadable_blocks, 8);

    // One block more (LSN 22-30) is longer than the window: corruption.
    let run = block_range(written[21].ring_offset, 9);
    let found = corruption(scan_failing(&image, vec![run], &strict()));
    assert_eq!((found.lsn, found.check), (22, Check::ReadError));
    assert_eq!(found.ring_offset, written[21].ring_offset);
    assert!(matches!(
        found.evidence,
        Evidence::Unreadable { run_bytes, log_after: None, .. } if run_bytes == 9 * BLOCK as u64
    ));
}

#[test]
fn an_unreadable_block_between_valid_batches_is_corruption() {
    //! Batch A is acknowledged; B and C are written together (so C's watermark does not cover
    //! B) and then acknowledged. B's block cannot be read, C can: the log goes on after the
    //! unreadable block, so B is not a torn tail (before the fix: cut as one, with C).
    let mut writer = new_writer(small_geometry());
    append(&mut writer, 2, 300, 1); // A: LSN 1-2
    writer.flush();
    append(&mut writer, 2, 300, 1); // B: LSN 3-4
    append(&mut writer, 2, 300, 1); // C: LSN 5-6, watermark 2
    writer.flush();
    let written = writer.written().to_vec();
    assert_eq!(written[2].watermark, 2);
    let image = writer.durable().to_vec();
    let bad = vec![block_range(written[1].ring_offset, 1)];
    let found = corruption(scan_failing(&image, bad.clone(), &strict()));
    assert_eq!((found.lsn, found.check), (3, Check::ReadError));
    assert_eq!(found.position, written[1].position);
    assert_eq!(
        found.evidence,
        Evidence::Unreadable {
            at: written[1].position,
            run_bytes: BLOCK as u64,
            first_lsn: 3,
            last_lsn: Some(6),
            log_after: Some(written[2].position),
        }
    );

    let report = scan_failing(&image, bad, &salvage()).expect("salvage cuts");
    assert_eq!(report.end_row, "@salvage_unreadable");
    assert_eq!(report.outcome, Outcome::Truncated);
    let dropped = report.dropped.expect("reported");
    assert_eq!((dropped.first_lsn, dropped.last_lsn), (3, 6));
    assert_eq!(report.next_lsn, 3);
}

#[test]
fn an_unreadable_block_past_the_end_of_the_log_is_reported_and_the_ring_opens() {
    let mut writer = new_writer(small_geometry());
    for _ in 0..5 {
        append(&mut writer, 1, 100, 1);
        writer.flush();
    }
    let image = writer.durable().to_vec();
    let end = writer.written()[4].ring_offset + BLOCK as u64;
    // Two zero blocks after the log's end (readable, nothing of the log), then a bad one.
    let bad_at = end + 2 * BLOCK as u64;
    let report = scan_failing(&image, vec![block_range(bad_at, 1)], &strict())
        .expect("a bad block in free space never fails the open");
    assert_eq!(report.outcome, Outcome::Clean);
    assert_eq!(report.end_row, "@end");
    assert_eq!((report.entries, report.next_lsn), (5, 6));
    assert_eq!(report.unreadable_blocks, 1);
    let bad = Position {
        offset: writer.written()[4].position.offset + 3 * BLOCK as u32,
        ..writer.written()[4].position
    };
    assert_eq!(small_geometry().ring_offset(bad), bad_at);
    assert_eq!(
        report.unreadable_runs,
        vec![UnreadableRun {
            start: bad,
            blocks: 1
        }]
    );

    // The same after a torn tail: a batch torn after two sectors at the break (its payload
    // fails its CRC), the bad block after it.
    append(&mut writer, 1, 3000, 2);
    let torn = writer.crash(&mut |_, _| BlockFate::PartlyNew(2));
    let report = scan_failing(&torn, vec![block_range(bad_at, 1)], &strict())
        .expect("torn, and a bad block after it");
    assert_eq!(report.outcome, Outcome::TornTail);
    assert_eq!(report.end_check, Check::PayloadCrc);
    assert_eq!((report.entries, report.next_lsn), (5, 6));
    assert_eq!(report.unreadable_runs.len(), 1);
}

#[test]
fn an_unreadable_block_in_trimmed_space_is_reported_and_the_ring_opens() {
    let geometry = small_geometry();
    let mut writer = new_writer(geometry);
    // Fifty one-block batches (segments 0-2 full, five in segment 3), all but the last five
    // trimmed: segments 0-2 hold only released entries of lap 1, ahead of the tail.
    for _ in 0..50 {
        append(&mut writer, 1, 100, 1);
        writer.flush();
    }
    writer.trim(45);
    let image = writer.durable().to_vec();
    let report = scan(&mut image.as_slice(), &strict()).expect("replays");
    assert_eq!(report.control.head.segment, 3);
    assert_eq!((report.first_lsn, report.last_lsn), (Some(46), Some(50)));
    // LSN 20's block, released, in segment 1.
    let released = writer.written()[19].clone();
    assert_eq!((released.position.segment, released.lsns.start), (1, 20));
    // A full scan probes the trimmed space and finds the bad block; a hinted one stops at the
    // tail hint, well before it, and finds the same log without reading it.
    let hinted = scan_failing(
        &image,
        vec![block_range(released.ring_offset, 1)],
        &strict(),
    )
    .expect("hinted: the bad block is never read");
    assert!(
        matches!(hinted.scan, Scan::Hinted { .. }),
        "{:?}",
        hinted.scan
    );
    assert_eq!(hinted.outcome, Outcome::Clean);
    assert_eq!((hinted.entries, hinted.next_lsn), (5, 51));
    assert_eq!(hinted.unreadable_blocks, 0);
    let report = scan_failing(
        &image,
        vec![block_range(released.ring_offset, 1)],
        &full(strict()),
    )
    .expect("a bad block in trimmed space never fails the open");
    assert_eq!(report.outcome, Outcome::Clean);
    assert_eq!((report.entries, report.next_lsn), (5, 51));
    assert_eq!(report.unreadable_blocks, 1);
    // The probe names the place as the writer will next use it: lap 2.
    assert_eq!(
        report.unreadable_runs,
        vec![UnreadableRun {
            start: Position {
                lap: 2,
                ..released.position
            },
            blocks: 1
        }]
    );
}

/// Found by the structure-aware fuzzer: where the writer skipped the rest of a segment, an
/// unreadable header of the next segment was taken for "nothing written there" (the skip's
/// read error was dropped, and the probe does not read header blocks), so the acknowledged
/// entries behind it were cut as a torn tail without a word about the bad block. The header
/// is part of the log when the log goes on after it: corruption, named at the header.
#[test]
fn an_unreadable_segment_header_where_the_writer_skipped_is_corruption_not_a_cut() {
    let geometry = small_geometry();
    let mut writer = new_writer(geometry);
    for _ in 0..14 {
        append(&mut writer, 1, 100, 1);
        writer.flush();
    }
    // Too large for what segment 0 has left: the writer skips to segment 1.
    let skipped = append(&mut writer, 1, 5000, 2);
    writer.flush();
    let last = *skipped.last().expect("appended");
    let batch = writer.written().last().expect("written").clone();
    assert_eq!(batch.position.segment, 1, "the last batch starts segment 1");
    let image = writer.durable().to_vec();
    let clean = scan_failing(&image, Vec::new(), &strict()).expect("replays");
    assert_eq!(clean.segments_skipped, 1);
    assert_eq!(clean.last_lsn, Some(last));
    let header = block_range(geometry.segment_ring_offset(1), 1);
    let found = corruption(scan_failing(&image, vec![header.clone()], &strict()));
    assert_eq!(found.check, Check::ReadError);
    assert_eq!((found.position.segment, found.position.offset), (1, 0));
    assert_eq!(found.lsn, last);
    let salvaged = scan_failing(&image, vec![header], &salvage()).expect("truncates");
    assert_eq!(salvaged.outcome, Outcome::Truncated);
    assert_eq!(salvaged.next_lsn, last);
}
