//! The one record validator (`sealog_wal::validate`), unit by unit: a well-formed batch passes
//! and yields its records; then each check is failed by one crafted change to an otherwise
//! valid batch (headers re-sealed with a valid CRC, so only the rule under test fails), and the
//! failure must name that check, the place and the LSN expected there.

mod common;

use common::*;
use sealog_wal::batch::{BatchBuilder, BatchStart};
use sealog_wal::format::ENTRY_HEADER_SIZE;
use sealog_wal::{
    check_batch, check_record, BatchExpectation, BatchFailure, Check, EntryHeader, IncarnationRule,
    Kind, Position, RecordExpectation, RingId,
};

const AT: Position = Position {
    lap: 2,
    segment: 1,
    offset: 3 * BLOCK as u32,
};
const FIRST_LSN: u64 = 10;
const INCARNATION: u32 = 3;

fn expectation() -> BatchExpectation {
    BatchExpectation {
        ring_id: ring_id(),
        geometry: small_geometry(),
        position: AT,
        first_lsn: FIRST_LSN,
        incarnation: IncarnationRule::Any,
    }
}

/// A valid batch at `AT` holding these payloads (LSN 10 on), watermark 9, incarnation 3.
fn batch(payloads: &[&[u8]]) -> Vec<u8> {
    let geometry = small_geometry();
    let mut buf = vec![0u8; geometry.batch_size_max_bytes as usize];
    let mut builder = BatchBuilder::new(
        &mut buf,
        BatchStart {
            ring_id: ring_id(),
            position: AT,
            first_lsn: FIRST_LSN,
            watermark: FIRST_LSN - 1,
            incarnation: INCARNATION,
            block_size_bytes: geometry.block_size_bytes,
            capacity_bytes: geometry.batch_size_max_bytes,
            payload_size_max_bytes: geometry.payload_size_max_bytes(),
        },
    );
    for payload in payloads {
        builder.push(Kind::Data, payload).expect("fits");
    }
    let batch = builder.finish();
    buf.truncate(batch.bytes as usize);
    buf
}

/// Two records of 100 and 200 bytes, then padding: record 2's header at offset 164.
fn two_records() -> Vec<u8> {
    batch(&[&[1u8; 100], &[2u8; 200]])
}

const SECOND: usize = ENTRY_HEADER_SIZE + 100;

/// Changes the header at `offset` and seals it again (valid header CRC).
fn reseal(bytes: &mut [u8], offset: usize, change: impl Fn(&mut EntryHeader)) {
    let mut header = EntryHeader::decode(ring_id(), &bytes[offset..]).expect("a valid header");
    change(&mut header);
    header.encode(ring_id(), &mut bytes[offset..]);
}

/// Re-seals the header at `offset` after its raw bytes were changed (a kind byte no encoder
/// writes, say): CRC32C seeded with the ring id, over the header with its CRC field zeroed.
fn reseal_raw(bytes: &mut [u8], offset: usize) {
    let header = &mut bytes[offset..offset + ENTRY_HEADER_SIZE];
    header[8..12].fill(0);
    let seed = crc32c::crc32c(&ring_id().0);
    let crc = crc32c::crc32c_append(seed, header);
    header[8..12].copy_from_slice(&crc.to_le_bytes());
}

fn failure(bytes: &[u8], expect: &BatchExpectation) -> BatchFailure {
    match check_batch(expect, bytes) {
        Err(failure) => failure,
        Ok(batch) => panic!("a crafted batch passed: {batch:?}"),
    }
}

/// The check a change to the first header fails, which must be reported at the batch's start
/// with the batch's first LSN, as not yet inside the batch.
fn first_fails(bytes: &[u8], expect: &BatchExpectation) -> Check {
    let found = failure(bytes, expect);
    assert_eq!((found.position, found.lsn), (AT, FIRST_LSN), "{found:?}");
    assert!(!found.inside_batch);
    found.check
}

/// The check a change at the second record fails, reported there with LSN 11, inside.
fn second_fails(bytes: &[u8]) -> Check {
    let found = failure(bytes, &expectation());
    let at = Position {
        offset: AT.offset + SECOND as u32,
        ..AT
    };
    assert_eq!(
        (found.position, found.lsn),
        (at, FIRST_LSN + 1),
        "{found:?}"
    );
    assert!(found.inside_batch);
    found.check
}

#[test]
fn a_valid_batch_passes_and_yields_its_records() {
    let bytes = two_records();
    let checked = check_batch(&expectation(), &bytes).expect("valid");
    assert_eq!(
        (checked.position, checked.bytes, checked.first_lsn),
        (AT, BLOCK as u32, FIRST_LSN)
    );
    assert_eq!((checked.records, checked.next_lsn()), (2, 12));
    assert_eq!(
        (checked.incarnation, checked.watermark),
        (INCARNATION, FIRST_LSN - 1)
    );
    let records: Vec<_> = checked.records().collect();
    assert_eq!(records.len(), 2);
    assert_eq!((records[0].lsn, records[1].lsn), (10, 11));
    assert_eq!(records[0].payload, &[1u8; 100][..]);
    assert_eq!(records[1].payload, &[2u8; 200][..]);
    assert_eq!(
        records[1].payload_range,
        SECOND + ENTRY_HEADER_SIZE..SECOND + ENTRY_HEADER_SIZE + 200
    );
    assert_eq!(records[1].position.offset, AT.offset + SECOND as u32);
    assert_eq!(records[1].kind, Kind::Data);
    assert!(records
        .iter()
        .all(|r| r.incarnation == INCARNATION && r.watermark == 9));
    // A tail marker: no records, one block, still a valid batch.
    let marker = batch(&[]);
    let checked = check_batch(&expectation(), &marker).expect("valid");
    assert_eq!((checked.records, checked.records().count()), (0, 0));
    // The incarnation rules that hold.
    for rule in [
        IncarnationRule::AtLeast(INCARNATION),
        IncarnationRule::AtLeast(1),
        IncarnationRule::Exactly(INCARNATION),
    ] {
        let expect = BatchExpectation {
            incarnation: rule,
            ..expectation()
        };
        check_batch(&expect, &bytes).expect("the rule holds");
    }
}

#[test]
fn the_first_header_fails_integrity_checks_by_name() {
    let expect = expectation();
    let mut bytes = two_records();
    bytes[..ENTRY_HEADER_SIZE].fill(0);
    assert_eq!(first_fails(&bytes, &expect), Check::NotWritten);

    let mut bytes = two_records();
    bytes[0] ^= 1;
    assert_eq!(first_fails(&bytes, &expect), Check::Magic);

    let mut bytes = two_records();
    bytes[4] = 9;
    assert_eq!(first_fails(&bytes, &expect), Check::Version);

    let other = RingId(*b"another-ring-id!");
    let mut bytes = two_records();
    let header = EntryHeader::decode(ring_id(), &bytes).expect("valid");
    header.encode(other, &mut bytes);
    assert_eq!(first_fails(&bytes, &expect), Check::RingId);

    let mut bytes = two_records();
    bytes[40] ^= 1; // the watermark, under the header CRC
    assert_eq!(first_fails(&bytes, &expect), Check::HeaderCrc);

    let mut bytes = two_records();
    bytes[6] = 42; // no such kind
    reseal_raw(&mut bytes, 0);
    assert_eq!(first_fails(&bytes, &expect), Check::Kind);

    let short = &two_records()[..ENTRY_HEADER_SIZE - 1];
    assert_eq!(first_fails(short, &expect), Check::BatchLayout);
}

#[test]
fn the_first_header_fails_place_lsn_layout_incarnation_and_watermark_checks() {
    let expect = expectation();
    let mut bytes = two_records();
    reseal(&mut bytes, 0, |h| h.position.lap -= 1);
    assert_eq!(first_fails(&bytes, &expect), Check::StaleLap);

    let mut bytes = two_records();
    reseal(&mut bytes, 0, |h| h.position.offset += BLOCK as u32);
    assert_eq!(first_fails(&bytes, &expect), Check::Position);

    let mut bytes = two_records();
    reseal(&mut bytes, 0, |h| h.position.lap += 1);
    assert_eq!(first_fails(&bytes, &expect), Check::Position);

    let bytes = two_records();
    let later = BatchExpectation {
        first_lsn: FIRST_LSN + 1,
        ..expectation()
    };
    let found = failure(&bytes, &later);
    assert_eq!((found.check, found.lsn), (Check::LsnGap, FIRST_LSN + 1));

    for change in [
        (|h: &mut EntryHeader| h.batch_index = 1) as fn(&mut EntryHeader),
        |h| h.batch_bytes = 0,
        |h| h.batch_bytes = BLOCK as u32 + 512,
        |h| h.batch_bytes = 8 * BLOCK as u32, // over the batch limit (4 blocks)
    ] {
        let mut bytes = two_records();
        reseal(&mut bytes, 0, change);
        assert_eq!(first_fails(&bytes, &expect), Check::BatchLayout);
    }
    // Four blocks from 13 blocks into a 16-block segment run past its end.
    let near_end = Position {
        offset: 13 * BLOCK as u32,
        ..AT
    };
    let mut bytes = two_records();
    reseal(&mut bytes, 0, |h| {
        h.position = near_end;
        h.batch_bytes = 4 * BLOCK as u32;
    });
    let expect_end = BatchExpectation {
        position: near_end,
        ..expectation()
    };
    let found = failure(&bytes, &expect_end);
    assert_eq!(
        (found.check, found.position),
        (Check::BatchLayout, near_end)
    );

    let bytes = two_records();
    let newer_floor = BatchExpectation {
        incarnation: IncarnationRule::AtLeast(INCARNATION + 1),
        ..expectation()
    };
    assert_eq!(first_fails(&bytes, &newer_floor), Check::StaleIncarnation);
    for other in [INCARNATION - 1, INCARNATION + 1] {
        let exactly = BatchExpectation {
            incarnation: IncarnationRule::Exactly(other),
            ..expectation()
        };
        assert_eq!(first_fails(&bytes, &exactly), Check::Incarnation);
    }

    let mut bytes = two_records();
    reseal(&mut bytes, 0, |h| h.watermark = FIRST_LSN);
    assert_eq!(first_fails(&bytes, &expect), Check::Watermark);
}

#[test]
fn bytes_of_another_length_than_the_batch_fail_its_layout() {
    let bytes = two_records();
    let expect = expectation();
    assert_eq!(
        first_fails(&bytes[..BLOCK - 512], &expect),
        Check::BatchLayout
    );
    let mut longer = bytes.clone();
    longer.extend_from_slice(&[0u8; BLOCK]);
    assert_eq!(first_fails(&longer, &expect), Check::BatchLayout);
}

#[test]
fn a_later_record_fails_each_check_by_name() {
    let mut bytes = two_records();
    bytes[SECOND + 40] ^= 1;
    assert_eq!(second_fails(&bytes), Check::HeaderCrc);

    let mut bytes = two_records();
    bytes[SECOND..SECOND + ENTRY_HEADER_SIZE].fill(0);
    assert_eq!(second_fails(&bytes), Check::NotWritten);

    let mut bytes = two_records();
    reseal(&mut bytes, SECOND, |h| h.position.lap -= 1);
    assert_eq!(second_fails(&bytes), Check::StaleLap);

    let mut bytes = two_records();
    reseal(&mut bytes, SECOND, |h| h.position.offset += 8);
    assert_eq!(second_fails(&bytes), Check::Position);

    for change in [
        (|h: &mut EntryHeader| h.batch_index = 2) as fn(&mut EntryHeader),
        |h| h.batch_bytes = 2 * BLOCK as u32,
        |h| h.incarnation += 1,
        |h| h.watermark -= 1,
    ] {
        let mut bytes = two_records();
        reseal(&mut bytes, SECOND, change);
        assert_eq!(second_fails(&bytes), Check::BatchLayout);
    }

    let mut bytes = two_records();
    reseal(&mut bytes, SECOND, |h| h.lsn += 1);
    assert_eq!(second_fails(&bytes), Check::LsnGap);

    let mut bytes = two_records();
    reseal(&mut bytes, SECOND, |h| h.payload_len = BLOCK as u32);
    assert_eq!(second_fails(&bytes), Check::PayloadLength);

    let mut bytes = two_records();
    bytes[SECOND + ENTRY_HEADER_SIZE + 7] ^= 0x10;
    assert_eq!(second_fails(&bytes), Check::PayloadCrc);
}

#[test]
fn the_end_of_a_batch_must_be_padding_or_zeros() {
    // Padding (kind 2) whose payload is not zeros, under a matching payload CRC.
    let mut bytes = two_records();
    let padding = SECOND + ENTRY_HEADER_SIZE + 200;
    bytes[padding + ENTRY_HEADER_SIZE + 5] = 1;
    let crc = crc32c::crc32c(&bytes[padding + ENTRY_HEADER_SIZE..]);
    reseal(&mut bytes, padding, |h| h.payload_crc = crc);
    let found = failure(&bytes, &expectation());
    assert_eq!((found.check, found.lsn), (Check::Padding, FIRST_LSN + 2));
    assert_eq!(found.position.offset, AT.offset + padding as u32);

    // A record ending 30 bytes short of the block: those bytes must be zeros.
    let mut bytes = batch(&[&vec![5u8; BLOCK - ENTRY_HEADER_SIZE - 30]]);
    check_batch(&expectation(), &bytes).expect("zeros are fine");
    bytes[BLOCK - 3] = 1;
    let found = failure(&bytes, &expectation());
    assert_eq!((found.check, found.lsn), (Check::Padding, FIRST_LSN + 1));
    assert_eq!(found.position.offset, AT.offset + (BLOCK - 30) as u32);
}

/// What a point read of the second record of `two_records()` expects.
fn record_expectation() -> RecordExpectation {
    RecordExpectation {
        ring_id: ring_id(),
        geometry: small_geometry(),
        position: Position {
            offset: AT.offset + SECOND as u32,
            ..AT
        },
        lsn: FIRST_LSN + 1,
        batch_first_lsn: FIRST_LSN,
        batch_bytes: two_records().len() as u32,
        incarnation: INCARNATION,
    }
}

/// The check a point read of the second record fails, reported at its header with its LSN.
fn record_fails(bytes: &[u8], expect: &RecordExpectation) -> Check {
    match check_record(expect, &bytes[SECOND..]) {
        Err(found) => {
            assert_eq!((found.position, found.lsn), (expect.position, expect.lsn));
            found.check
        }
        Ok(record) => panic!("a crafted record passed: {record:?}"),
    }
}

#[test]
fn a_record_read_alone_passes_the_same_checks_as_its_batch() {
    let bytes = two_records();
    let expect = record_expectation();
    // Only the record's own bytes: the header and payload, not the padding after them.
    let record_bytes = &bytes[SECOND..SECOND + ENTRY_HEADER_SIZE + 200];
    let record = check_record(&expect, record_bytes).expect("valid");
    assert_eq!((record.lsn, record.kind), (FIRST_LSN + 1, Kind::Data));
    assert_eq!(record.payload, &[2u8; 200][..]);
    // One byte short of its payload is a length failure, not a panic.
    let short = &bytes[SECOND..SECOND + ENTRY_HEADER_SIZE + 199];
    assert_eq!(
        check_record(&expect, short).map(|_| ()).unwrap_err().check,
        Check::PayloadLength
    );
    assert_eq!(
        check_record(&expect, &bytes[SECOND..SECOND + 10])
            .map(|_| ())
            .unwrap_err()
            .check,
        Check::PayloadLength
    );
}

#[test]
fn a_record_read_alone_fails_each_check_by_name() {
    let expect = record_expectation();
    let mut bytes = two_records();
    bytes[SECOND + ENTRY_HEADER_SIZE + 7] ^= 1;
    assert_eq!(record_fails(&bytes, &expect), Check::PayloadCrc);
    let mut bytes = two_records();
    bytes[SECOND + 20] ^= 1;
    assert_eq!(record_fails(&bytes, &expect), Check::HeaderCrc);
    let mut bytes = two_records();
    bytes[SECOND..SECOND + ENTRY_HEADER_SIZE].fill(0);
    assert_eq!(record_fails(&bytes, &expect), Check::NotWritten);
    let other_ring = RecordExpectation {
        ring_id: RingId([9; 16]),
        ..expect
    };
    assert_eq!(record_fails(&two_records(), &other_ring), Check::RingId);
    type Change = dyn Fn(&mut EntryHeader);
    let cases: [(&Change, Check); 6] = [
        (&|h| h.lsn += 1, Check::LsnGap),
        (&|h| h.position.offset += 4096, Check::Position),
        (&|h| h.position.lap -= 1, Check::StaleLap),
        (&|h| h.incarnation += 1, Check::Incarnation),
        (&|h| h.batch_index = 0, Check::BatchLayout),
        (&|h| h.payload_len = 1 << 30, Check::PayloadLength),
    ];
    for (change, check) in cases {
        let mut bytes = two_records();
        reseal(&mut bytes, SECOND, change);
        assert_eq!(record_fails(&bytes, &expect), check);
    }
    // The index says another batch length than the header: not the batch indexed.
    let moved = RecordExpectation {
        batch_bytes: expect.batch_bytes + BLOCK as u32,
        ..expect
    };
    assert_eq!(record_fails(&two_records(), &moved), Check::BatchLayout);
    let mut bytes = two_records();
    reseal(&mut bytes, SECOND, |h| h.watermark = FIRST_LSN);
    assert_eq!(record_fails(&bytes, &expect), Check::Watermark);
}

/// Quarantine's walk of a damaged batch checks each record alone, as `check_batch` checks it in
/// the whole: an intact record is intact, one whose payload fails (or cannot be read) is damaged
/// with its header, and the walk stops at the first header that fails, naming it and the LSN
/// expected there; with every header intact it runs to the padding.
#[test]
fn a_damaged_batch_is_walked_record_by_record_up_to_its_first_failed_header() {
    use sealog_wal::{walk_batch, WalkedRecord};
    let payloads: [&[u8]; 4] = [&[1; 100], &[2; 200], &[3; 300], &[4; 50]];
    let mut bytes = batch(&payloads);
    let offsets: Vec<usize> = payloads
        .iter()
        .scan(0, |at, payload| {
            let here = *at;
            *at += ENTRY_HEADER_SIZE + payload.len();
            Some(here)
        })
        .collect();
    let first = EntryHeader::decode(ring_id(), &bytes).expect("a valid first header");
    // The second record's payload, and the fourth record's header.
    bytes[offsets[1] + ENTRY_HEADER_SIZE + 7] ^= 1;
    bytes[offsets[3] + 40] ^= 1;
    let mut seen = Vec::new();
    let end = walk_batch(&expectation(), &first, &bytes, &|_| false, &mut |record| {
        seen.push(match record {
            WalkedRecord::Intact(record) => (record.lsn, None),
            WalkedRecord::PayloadDamaged { check, header, .. } => (header.lsn, Some(check)),
        })
    });
    assert_eq!(
        seen,
        vec![
            (FIRST_LSN, None),
            (FIRST_LSN + 1, Some(Check::PayloadCrc)),
            (FIRST_LSN + 2, None)
        ]
    );
    assert_eq!(end.next_lsn, FIRST_LSN + 3);
    let failed = end.header_failure.expect("the fourth header failed");
    assert_eq!(
        (failed.lsn, failed.check),
        (FIRST_LSN + 3, Check::HeaderCrc)
    );
    assert_eq!(failed.position.offset, AT.offset + offsets[3] as u32);
    // A payload that cannot be read is damage with its header too; the rest is walked on.
    let whole = batch(&payloads);
    let payload_of_first = offsets[0] + ENTRY_HEADER_SIZE..offsets[1];
    let mut seen = Vec::new();
    let unreadable = |range: std::ops::Range<usize>| {
        range.start < payload_of_first.end && payload_of_first.start < range.end
    };
    let end = walk_batch(&expectation(), &first, &whole, &unreadable, &mut |record| {
        if let WalkedRecord::PayloadDamaged { check, header, .. } = record {
            seen.push((header.lsn, check));
        }
    });
    assert_eq!(seen, vec![(FIRST_LSN, Check::ReadError)]);
    assert_eq!((end.next_lsn, end.header_failure), (FIRST_LSN + 4, None));
}
