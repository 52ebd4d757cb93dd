//! Quarantine mode (`RecoveryMode::Quarantine`), one test per quarantine row of the decision
//! table and per promise of the mode: where strict replay fails on damaged acknowledged data,
//! quarantine neither fails nor cuts. It serves every intact record (those of a damaged batch
//! included), reports a damaged record whose header survived with that header and the LSNs
//! lost with their headers as one range, goes on at the next valid batch, and leaves the
//! damage as it is: a writer's reopen finds it again, strict replay still fails on it after new
//! appends, and only a trim past it makes it go away. Every replay here is made hinted and full,
//! and both must find the same log and the same damage.

mod common;

use common::*;
use sealog_wal::batch::{BatchBuilder, BatchStart};
use sealog_wal::format::ENTRY_HEADER_SIZE;
use sealog_wal::{
    replay_visiting, Check, Damaged, DamagedRange, Evidence, Kind, Outcome, Position,
    RecoveryReport, ReplayError, ReplayOptions, RingSource, ScanPolicy, Visit,
};
use sealog_wal_kit::model::{BlockFate, ModelWriter};

/// What a quarantine replay found: the report, the live entries and the damage visited.
struct Found {
    report: RecoveryReport,
    entries: Vec<(u64, Vec<u8>)>,
    damaged: Vec<Damaged>,
}

fn visit_all<S: RingSource>(source: &mut S, options: &ReplayOptions) -> Result<Found, ReplayError> {
    let mut entries = Vec::new();
    let mut damaged = Vec::new();
    let mut order = Vec::new();
    let report = replay_visiting(source, options, &mut |visited| match visited {
        Visit::Entry(entry) => {
            order.push((entry.lsn, entry.lsn));
            entries.push((entry.lsn, entry.payload.to_vec()));
        }
        Visit::Damaged(range) => {
            order.push((range.first_lsn, range.last_lsn));
            damaged.push(*range);
        }
    })?;
    // Every LSN from the trim point to the next one, once, in order: live or damaged.
    let mut next = report.trim_lsn + 1;
    for (first, last) in order {
        assert_eq!(first, next, "visits in LSN order without a gap: {report:?}");
        assert!(last >= first);
        next = last + 1;
    }
    assert_eq!(next, report.next_lsn, "the visits reach the next LSN");
    assert_eq!(report.entries, entries.len() as u64);
    let lsns: u64 = damaged
        .iter()
        .map(|range| range.last_lsn - range.first_lsn + 1)
        .sum();
    assert_eq!(report.damaged_lsns, lsns);
    assert_eq!(report.damaged_ranges, damaged.len() as u64);
    let listed: Vec<DamagedRange> = damaged
        .iter()
        .take(sealog_wal::DAMAGED_REPORTED)
        .map(|range| DamagedRange {
            first_lsn: range.first_lsn,
            last_lsn: range.last_lsn,
            position: range.position,
            ring_offset: report.control.geometry.ring_offset(range.position),
            check: range.check,
            header_known: range.header.is_some(),
        })
        .collect();
    assert_eq!(report.damaged, listed, "the report lists what was visited");
    Ok(Found {
        report,
        entries,
        damaged,
    })
}

/// Replays `source` in quarantine mode, hinted and full: both find the same.
fn quarantined_source<S: RingSource>(source: &mut S, full_source: &mut S) -> Found {
    let hinted = visit_all(source, &quarantine()).expect("quarantine never fails on damage");
    let full = visit_all(full_source, &full(quarantine())).expect("nor does a full scan");
    assert_eq!(
        hinted.entries, full.entries,
        "hinted and full serve the same"
    );
    assert_eq!(
        hinted.damaged, full.damaged,
        "hinted and full find the same damage"
    );
    let comparable = RecoveryReport {
        scan: full.report.scan,
        scan_end: full.report.scan_end,
        bytes_read: full.report.bytes_read,
        ..hinted.report.clone()
    };
    assert_eq!(comparable, full.report, "hinted and full report the same");
    hinted
}

fn quarantined(image: &[u8]) -> Found {
    let found = quarantined_source(&mut &image[..], &mut &image[..]);
    // The re-reading iterator steps over the damage the same way.
    let mut source = image;
    let iterated: Vec<(u64, Vec<u8>)> =
        sealog_wal::entries(&mut source, &found.report, &quarantine())
            .map(|entry| entry.map(|entry| (entry.lsn, entry.payload)))
            .collect::<Result<_, _>>()
            .expect("the iterator follows the quarantined log");
    assert_eq!(iterated, found.entries);
    found
}

fn strict_corruption(image: &[u8]) -> sealog_wal::Corruption {
    match replay_image(image, &strict()).0 {
        Err(ReplayError::Corruption(corruption)) => *corruption,
        other => panic!("strict replay must fail on the damage: {other:?}"),
    }
}

fn flushed_batches(writer: &mut ModelWriter, batches: usize, records: usize, len: usize) {
    for _ in 0..batches {
        append(writer, records, len, 1);
        writer.flush();
    }
}

/// The entries 1..`through` but `missing`, with the payloads `flushed_batches` wrote.
fn expected(through: u64, missing: &[u64], len: usize) -> Vec<(u64, Vec<u8>)> {
    (1..=through)
        .filter(|lsn| !missing.contains(lsn))
        .map(|lsn| (lsn, payload(lsn, 1, len)))
        .collect()
}

/// Opens the image with the model writer in quarantine mode, appends `batches` more batches
/// of one record and flushes them: the writer and the LSNs it appended.
fn reopen_and_append(image: Vec<u8>, batches: usize) -> (ModelWriter, Vec<u64>) {
    let (mut writer, _, _) = ModelWriter::open(image, &quarantine()).expect("quarantine opens");
    let mut appended = Vec::new();
    for _ in 0..batches {
        appended.extend(append(&mut writer, 1, 500, 9));
        writer.flush();
    }
    (writer, appended)
}

#[test]
fn row_quarantine_acked_a_flipped_payload_is_reported_with_its_header_and_the_log_goes_on() {
    let mut writer = new_writer(small_geometry());
    flushed_batches(&mut writer, 6, 3, 300);
    let target = writer.written()[2].clone();
    let (record_offset, _) = target.records[1];
    let lsn = target.lsns.start + 1;
    let mut image = writer.durable().to_vec();
    image[record_offset as usize + ENTRY_HEADER_SIZE + 17] ^= 0x04;
    let strict_found = strict_corruption(&image);
    assert_eq!(
        (strict_found.lsn, strict_found.check),
        (lsn, Check::PayloadCrc)
    );

    let found = quarantined(&image);
    let report = &found.report;
    assert_eq!(report.outcome, Outcome::Clean);
    assert_eq!(report.end_row, "@end");
    assert_eq!(report.hits("@quarantine_acked"), 1);
    assert_eq!(report.next_lsn, 19);
    assert_eq!(found.entries, expected(18, &[lsn], 300));
    assert_eq!(report.quarantined, vec![strict_found]);
    assert_eq!(report.quarantined_breaks, 1);
    assert_eq!(found.damaged.len(), 1);
    let damaged = found.damaged[0];
    assert_eq!((damaged.first_lsn, damaged.last_lsn), (lsn, lsn));
    assert_eq!(damaged.check, Check::PayloadCrc);
    let geometry = small_geometry();
    assert_eq!(geometry.ring_offset(damaged.position), record_offset);
    let header = damaged.header.expect("the header survived");
    assert_eq!(header.kind, Kind::Data);
    assert_eq!(header.payload_len, 300);
    assert_eq!(
        header.payload_crc,
        sealog_wal::format::payload_crc(&payload(lsn, 1, 300))
    );
    assert!(report.damaged[0].header_known);
    // Nothing was cut: no region to zero, and the report says what strict mode would have.
    assert!(report.invalidate.is_none());
    assert!(report.torn.is_none() && report.dropped.is_none() && report.corruption.is_none());
}

#[test]
fn a_damaged_header_in_the_middle_of_a_batch_loses_the_rest_of_it_without_headers() {
    let mut writer = new_writer(small_geometry());
    flushed_batches(&mut writer, 6, 3, 300);
    let target = writer.written()[2].clone();
    let (record_offset, _) = target.records[1];
    let mut image = writer.durable().to_vec();
    // A bit of the second record's header CRC'd fields.
    image[record_offset as usize + 40] ^= 0x10;
    let strict_found = strict_corruption(&image);
    assert_eq!(strict_found.check, Check::HeaderCrc);

    let found = quarantined(&image);
    let first = target.lsns.start;
    // The first record of the batch is intact and served; the second's header is gone, so
    // it and the third (which nothing places any more) are one range up to the next batch.
    assert_eq!(found.entries, expected(18, &[first + 1, first + 2], 300));
    assert_eq!(found.damaged.len(), 1);
    let lost = found.damaged[0];
    assert_eq!((lost.first_lsn, lost.last_lsn), (first + 1, first + 2));
    assert!(lost.header.is_none());
    assert_eq!(lost.check, Check::HeaderCrc);
    assert_eq!(small_geometry().ring_offset(lost.position), record_offset);
    // Where a replay reaches it from: the damaged batch's start.
    assert_eq!((lost.batch, lost.batch_first_lsn), (target.position, first));
    assert_eq!(found.report.hits("@quarantine_acked"), 1);
}

#[test]
fn a_batch_lost_whole_is_one_range_from_the_lsn_expected_to_the_next_batch() {
    let mut writer = new_writer(small_geometry());
    flushed_batches(&mut writer, 6, 3, 300);
    let lost_batches = [writer.written()[2].clone(), writer.written()[3].clone()];
    let mut image = writer.durable().to_vec();
    // Two batches' writes lost (zeros where they were): a run of LSNs with no header at all.
    for batch in &lost_batches {
        let at = batch.ring_offset as usize;
        image[at..at + batch.bytes as usize].fill(0);
    }
    let strict_found = strict_corruption(&image);
    assert_eq!(strict_found.check, Check::NotWritten);
    let found = quarantined(&image);
    let (first, last) = (lost_batches[0].lsns.start, lost_batches[1].lsns.end - 1);
    let missing: Vec<u64> = (first..=last).collect();
    assert_eq!(found.entries, expected(18, &missing, 300));
    assert_eq!(found.damaged.len(), 1);
    let lost = found.damaged[0];
    assert_eq!((lost.first_lsn, lost.last_lsn), (first, last));
    assert_eq!(lost.check, Check::NotWritten);
    assert_eq!(lost.position, lost_batches[0].position);
    assert_eq!(found.report.quarantined, vec![strict_found]);
}

#[test]
fn damage_stays_found_after_a_reopen_new_appends_and_a_clean_close_until_a_trim_passes_it() {
    let mut writer = new_writer(small_geometry());
    flushed_batches(&mut writer, 6, 3, 300);
    let target = writer.written()[1].clone();
    let (record_offset, _) = target.records[2];
    let mut image = writer.durable().to_vec();
    image[record_offset as usize + ENTRY_HEADER_SIZE + 3] ^= 0x80;
    let first_open = quarantined(&image);
    let strict_before = strict_corruption(&image);

    let (mut writer, appended) = reopen_and_append(image, 3);
    assert_eq!(
        appended,
        vec![19, 20, 21],
        "new appends go on after the log's end"
    );
    writer.tail_marker().expect("room");
    writer.flush();
    let again = quarantined(writer.durable());
    assert_eq!(
        again.damaged, first_open.damaged,
        "a reopen reports the same damage"
    );
    assert_eq!(again.report.damaged, first_open.report.damaged);
    assert_eq!(
        &again.entries[..first_open.entries.len()],
        &first_open.entries[..]
    );
    assert_eq!(again.report.next_lsn, 22);
    // Strict mode still fails, naming the same damage.
    let strict_after = strict_corruption(writer.durable());
    assert_eq!(
        (strict_after.lsn, strict_after.position, strict_after.check),
        (
            strict_before.lsn,
            strict_before.position,
            strict_before.check
        )
    );

    // A trim short of it keeps it; a trim past it releases it, and strict opens again.
    let damaged_lsn = first_open.damaged[0].first_lsn;
    writer.trim(damaged_lsn - 1);
    let kept = quarantined(writer.durable());
    assert_eq!(kept.damaged, first_open.damaged);
    strict_corruption(writer.durable());
    writer.trim(damaged_lsn);
    let (result, entries) = replay_image(writer.durable(), &strict());
    let report = result.expect("strict opens once the damage is trimmed");
    assert_eq!(report.outcome, Outcome::Clean);
    assert_eq!(entries.first().map(|entry| entry.0), Some(damaged_lsn + 1));
    assert_eq!(quarantined(writer.durable()).report.damaged_lsns, 0);
}

#[test]
fn a_trim_inside_a_lost_range_keeps_the_rest_of_it() {
    let mut writer = new_writer(small_geometry());
    flushed_batches(&mut writer, 6, 3, 300);
    let lost_batch = writer.written()[2].clone();
    let mut image = writer.durable().to_vec();
    let at = lost_batch.ring_offset as usize;
    image[at..at + BLOCK].fill(0);
    let (mut writer, _) = reopen_and_append(image, 1);
    // Trim into the range: the head stays at the lost batch, so it is found again from there.
    writer.trim(lost_batch.lsns.start);
    let found = quarantined(writer.durable());
    assert_eq!(found.damaged.len(), 1);
    let lost = found.damaged[0];
    assert_eq!(
        (lost.first_lsn, lost.last_lsn),
        (lost_batch.lsns.start + 1, lost_batch.lsns.end - 1)
    );
    let strict_found = strict_corruption(writer.durable());
    assert_eq!(strict_found.position, lost_batch.position);
}

#[test]
fn row_quarantine_end_acked_no_valid_batch_after_the_damage_ends_the_log_past_it() {
    // Two acknowledged batches, then one more written but not flushed whose watermark covers
    // them; the second's and the third's first headers rot: the third's other records are the
    // only evidence, and no batch of the log starts after the damage.
    let mut writer = new_writer(small_geometry());
    flushed_batches(&mut writer, 2, 3, 300);
    append(&mut writer, 3, 300, 1);
    let image_writes = writer.written().to_vec();
    let image = writer.crash(&mut |_, _| BlockFate::New);
    let mut image = image;
    let (second, third) = (&image_writes[1], &image_writes[2]);
    image[second.ring_offset as usize + 40] ^= 0x01;
    image[third.ring_offset as usize + 40] ^= 0x01;
    strict_corruption(&image);

    let found = quarantined(&image);
    let report = &found.report;
    assert_eq!(report.end_row, "@quarantine_end_acked");
    assert_eq!(report.outcome, Outcome::Quarantined);
    assert_eq!(found.entries, expected(3, &[], 300));
    assert_eq!(found.damaged.len(), 1);
    let lost = found.damaged[0];
    assert_eq!((lost.first_lsn, lost.last_lsn), (4, 6));
    assert!(lost.header.is_none());
    // The third batch was never acknowledged: its LSNs are handed out again, after it.
    assert_eq!(report.next_lsn, 7);
    assert!(report.next_position > third.position);
    let invalidate = report
        .invalidate
        .expect("the region after the log's end is zeroed");
    assert_eq!(invalidate.start, report.next_position);

    // The writer goes on past it (its tail marker there, then new batches), and every later
    // open steps over the same damage to them.
    let (writer, appended) = reopen_and_append(image, 2);
    assert_eq!(appended, vec![7, 8]);
    let again = quarantined(writer.durable());
    assert_eq!(again.damaged, found.damaged);
    assert_eq!(again.report.end_row, "@end");
    assert_eq!(again.report.hits("@quarantine_acked"), 1);
    assert_eq!(again.report.next_lsn, 9);
    strict_corruption(writer.durable());
}

/// A batch of one record at `at`, `first_lsn` and `watermark`, written into `image`.
fn craft_batch(
    image: &mut [u8],
    writer: &ModelWriter,
    at: Position,
    first_lsn: u64,
    watermark: u64,
) {
    craft_records(image, writer, at, (first_lsn, watermark), 1);
}

/// A batch of `records` records at `at`, with `(first_lsn, watermark)`, written into `image`.
fn craft_records(
    image: &mut [u8],
    writer: &ModelWriter,
    at: Position,
    (first_lsn, watermark): (u64, u64),
    records: usize,
) {
    let geometry = writer.geometry();
    let mut buf = vec![0u8; BLOCK];
    let mut builder = BatchBuilder::new(
        &mut buf,
        BatchStart {
            ring_id: ring_id(),
            position: at,
            first_lsn,
            watermark,
            incarnation: writer.incarnation(),
            block_size_bytes: BLOCK as u32,
            capacity_bytes: BLOCK as u32,
            payload_size_max_bytes: geometry.payload_size_max_bytes(),
        },
    );
    for _ in 0..records {
        builder.push(Kind::Data, b"far away").expect("fits");
    }
    let batch = builder.finish();
    let offset = geometry.ring_offset(at) as usize;
    image[offset..offset + batch.bytes as usize].copy_from_slice(&buf[..batch.bytes as usize]);
}

#[test]
fn rows_quarantine_hole_and_end_hole_a_batch_beyond_the_window_resumes_the_log_or_ends_it() {
    let geometry = small_geometry();
    let mut writer = new_writer(geometry);
    flushed_batches(&mut writer, 2, 1, 100);
    let next = writer.next_lsn();
    // Valid data beyond the window whose watermark covers nothing after the tail (as in the
    // strict row's test), twelve blocks on, in the same segment: within the hint's reach.
    let far = Position {
        lap: 1,
        segment: 0,
        offset: 15 * BLOCK as u32,
    };
    let mut image = writer.durable().to_vec();
    craft_batch(&mut image, &writer, far, next + 40, next - 1);
    let strict_found = strict_corruption(&image);
    assert!(matches!(
        strict_found.evidence,
        Evidence::BeyondWindow { .. }
    ));
    let found = quarantined(&image);
    assert_eq!(found.report.hits("@quarantine_hole"), 1);
    assert_eq!(found.damaged.len(), 1);
    assert_eq!(
        (found.damaged[0].first_lsn, found.damaged[0].last_lsn),
        (next, next + 39)
    );
    assert_eq!(found.entries.last().map(|entry| entry.0), Some(next + 40));

    // The same batch with a second record and its first header damaged: no batch of the log
    // starts after the damage, which the second record, beyond the window, shows was
    // acknowledged. The log ends after it, every LSN before it taken as lost.
    craft_records(&mut image, &writer, far, (next + 40, next - 1), 2);
    let offset = geometry.ring_offset(far) as usize + 40;
    image[offset] ^= 0x20;
    let ended = quarantined(&image);
    assert_eq!(ended.report.end_row, "@quarantine_end_hole");
    assert_eq!(ended.report.outcome, Outcome::Quarantined);
    assert_eq!(
        (ended.damaged[0].first_lsn, ended.damaged[0].last_lsn),
        (next, next + 40)
    );
    assert_eq!(ended.report.next_lsn, next + 41);
    assert!(ended.report.next_position > far);
}

/// Reads fail (EIO) where they touch `bad`.
struct FailingSource<'a> {
    bytes: &'a [u8],
    bad: std::ops::Range<u64>,
}

impl RingSource for FailingSource<'_> {
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

#[test]
fn rows_quarantine_unreadable_and_end_unreadable_blocks_that_cannot_be_read_are_stepped_over() {
    // Two batches in flight together (the second's watermark does not cover the first) land
    // whole, then the first cannot be read: the log goes on after the unreadable run.
    let mut writer = new_writer(small_geometry());
    flushed_batches(&mut writer, 2, 2, 300);
    append(&mut writer, 2, 300, 1);
    append(&mut writer, 2, 300, 1);
    let written = writer.written().to_vec();
    let image = writer.crash(&mut |_, _| BlockFate::New);
    let bad = written[2].ring_offset..written[2].ring_offset + u64::from(written[2].bytes);
    let source = || FailingSource {
        bytes: &image,
        bad: bad.clone(),
    };
    match sealog_wal::scan(&mut source(), &strict()) {
        Err(ReplayError::Corruption(found)) => assert_eq!(found.check, Check::ReadError),
        other => panic!("strict replay fails on the unreadable run: {other:?}"),
    }
    let found = quarantined_source(&mut source(), &mut source());
    assert_eq!(found.report.hits("@quarantine_unreadable"), 1);
    assert_eq!(found.damaged.len(), 1);
    let lost = found.damaged[0];
    assert_eq!((lost.first_lsn, lost.last_lsn), (5, 6));
    assert_eq!(lost.check, Check::ReadError);
    assert_eq!(found.entries.last().map(|entry| entry.0), Some(8));

    // From the third batch to the ring's end nothing reads: longer than the window, with
    // nothing after it. The log ends at its first block, the LSN strict mode names lost.
    let end = image.len() as u64;
    let ended_source = || FailingSource {
        bytes: &image,
        bad: written[2].ring_offset..end,
    };
    let ended = visit_all(&mut ended_source(), &quarantine()).expect("quarantine opens");
    assert_eq!(ended.report.end_row, "@quarantine_end_unreadable");
    assert_eq!(ended.entries.len(), 4);
    assert_eq!(ended.damaged.len(), 1);
    assert_eq!(
        (ended.damaged[0].first_lsn, ended.damaged[0].last_lsn),
        (5, 5)
    );
    assert_eq!(ended.report.next_lsn, 6);
    assert_eq!(
        ended.report.next_position.offset,
        written[2].position.offset + BLOCK as u32
    );
    let full = visit_all(
        &mut ended_source(),
        &ReplayOptions {
            scan: ScanPolicy::Full,
            ..quarantine()
        },
    )
    .expect("a full scan opens too");
    assert_eq!(full.damaged, ended.damaged);
}

#[test]
fn a_torn_tail_is_cut_in_quarantine_mode_exactly_as_in_strict_mode() {
    let mut writer = new_writer(small_geometry());
    flushed_batches(&mut writer, 3, 2, 300);
    append(&mut writer, 3, 1000, 2);
    append(&mut writer, 3, 1000, 2);
    let image = writer.crash(&mut |write, _| {
        if write == 0 {
            BlockFate::PartlyNew(2)
        } else {
            BlockFate::New
        }
    });
    let (strict_result, strict_entries) = replay_image(&image, &strict());
    let strict_report = strict_result.expect("a torn tail is not an error");
    assert_eq!(strict_report.outcome, Outcome::TornTail);
    let found = quarantined(&image);
    assert_eq!(found.entries, strict_entries);
    assert!(found.damaged.is_empty());
    assert_eq!(found.report, strict_report, "the same report, row for row");
}

#[test]
fn damage_that_is_all_the_log_holds_keeps_the_head_where_the_next_open_finds_it() {
    let mut writer = new_writer(small_geometry());
    flushed_batches(&mut writer, 3, 3, 300);
    // Everything before the last batch trimmed, and a tail marker after it covering it.
    writer.trim(6);
    writer.tail_marker().expect("room");
    writer.flush();
    let lost = writer.written()[2].clone();
    let mut image = writer.durable().to_vec();
    let at = lost.ring_offset as usize;
    image[at..at + lost.bytes as usize].fill(0);
    let found = quarantined(&image);
    assert_eq!(found.report.entries, 0);
    assert_eq!(found.damaged.len(), 1);
    assert_eq!(
        (found.damaged[0].first_lsn, found.damaged[0].last_lsn),
        (7, 9)
    );
    // The writer's open keeps its head at the damage (nothing else is live), so the next open
    // walks to it again, rather than moving the head past it to the log's end.
    let (writer, _) = reopen_and_append(image, 0);
    let again = quarantined(writer.durable());
    assert_eq!(again.damaged, found.damaged);
    strict_corruption(writer.durable());
}
