//! Damage is a state, not a crash loop and not "unwritten" (issue 13, item 6;
//! docs/logdrive.md, quarantine): a ring with a byte flipped in one acknowledged record
//! fails a strict open and opens in quarantine mode, serving every other record and
//! reporting the address as `Damaged`, which only a write of the same bytes repairs; a
//! restart reads the repaired value. Damage whose header is gone makes the unwritten
//! addresses in [T, N + K) of every unsealed LogDrive `Damaged` (weak_tail cannot be
//! answered) until written or sealed. Unrepaired damage is carried forward by relocation, so
//! it stays `Damaged` once the ring's head has passed the damaged record (and the ring opens
//! strictly again).

mod common;

use std::path::Path;

use bytes::Bytes;
use common::read;
use sealog::{DriveOptions, RecoveryMode};
use sealog_logdrive::{
    wait, LocalLogDrive, LogDrive, LogDriveError, LogDriveStore, ReadOutcome, ReclaimPolicy,
    StoreOpenError, StoreOptions,
};

const WINDOW: u64 = 8;

fn ring() -> common::Ring {
    let directory = tempfile::tempdir().expect("temporary directory");
    let path = directory.path().join("ring");
    let options = sealog::FormatOptions::new(16 << 20)
        .segment_size_bytes(1 << 20)
        .batch_size_max_bytes(256 << 10);
    sealog::format(&path, &options).expect("format");
    common::Ring::from_parts(directory, path)
}

fn options(recovery: RecoveryMode) -> StoreOptions {
    StoreOptions::default()
        .drive(DriveOptions::default().recovery(recovery))
        .reclaim(
            ReclaimPolicy::default()
                .background(false)
                .space_amplification_max(1.0)
                .bandwidth_share(1.0),
        )
        .write_window_max(WINDOW)
}

fn open(ring: &common::Ring, recovery: RecoveryMode) -> Result<LogDriveStore, StoreOpenError> {
    LogDriveStore::open_with_options(&ring.path, options(recovery))
}

fn quarantined(ring: &common::Ring) -> LogDriveStore {
    open(ring, RecoveryMode::Quarantine).expect("a quarantined open")
}

/// A 2 KiB payload that names its LogDrive and address (and is found in the ring by it).
fn page(id: u64, address: u64) -> Bytes {
    let name = format!("<logdrive {id:04} address {address:06}>");
    let mut bytes = name.repeat(2048 / name.len() + 1).into_bytes();
    bytes.truncate(2048);
    Bytes::from(bytes)
}

fn write_all(drive: &LocalLogDrive, addresses: impl IntoIterator<Item = u64>) {
    for address in addresses {
        wait(drive.write(address, 1, page(drive.id(), address))).expect("write");
    }
}

/// Flips one byte of the ring's bytes at `distance` from the first place `payload` is found
/// (negative: into the entry header before it). Returns the file and offset changed.
fn flip(ring: &Path, payload: &[u8], distance: i64) {
    let mut files: Vec<_> = std::fs::read_dir(ring)
        .expect("the ring's directory")
        .map(|entry| entry.expect("an entry").path())
        .filter(|path| path.file_name().is_some_and(|n| n != "control"))
        .collect();
    files.sort();
    let needle = &payload[..64];
    for file in files {
        let mut bytes = std::fs::read(&file).expect("read a segment");
        let Some(at) = bytes.windows(needle.len()).position(|w| w == needle) else {
            continue;
        };
        let target = usize::try_from(at as i64 + distance).expect("inside the file");
        bytes[target] ^= 0x40;
        std::fs::write(&file, &bytes).expect("write the segment back");
        return;
    }
    panic!("payload not found in the ring");
}

#[test]
fn a_flipped_byte_in_one_record_is_quarantined_served_around_and_repaired() {
    let ring = ring();
    let store = quarantined(&ring);
    let drive = wait(store.create(1, 1 << 20)).unwrap();
    let other = wait(store.create(2, 1 << 20)).unwrap();
    write_all(&drive, 0..20);
    write_all(&other, 0..20);
    drop((drive, other));
    store.close();
    drop(store);
    flip(&ring.path, &page(1, 7), 1000);
    // Strict: the open fails, naming the damage.
    let refused = open(&ring, RecoveryMode::Strict).unwrap_err();
    assert!(matches!(refused, StoreOpenError::Drive(_)), "{refused}");
    let store = quarantined(&ring);
    let report = store.quarantine_report().to_vec();
    assert_eq!(report.len(), 1, "{report:?}");
    let generation = store.get(1).unwrap().generation();
    assert_eq!(report[0].address, Some((1, generation, 7)));
    assert_eq!(report[0].lsns.start(), report[0].lsns.end());
    let drive = store.get(1).unwrap();
    let other = store.get(2).unwrap();
    // Every other record is served; the damaged address is Damaged, never unwritten.
    for address in 0..20 {
        let expected = match address {
            7 => ReadOutcome::Damaged,
            _ => ReadOutcome::Value(page(1, address)),
        };
        assert_eq!(read(&drive, address), expected, "address {address}");
        assert_eq!(read(&other, address), ReadOutcome::Value(page(2, address)));
    }
    assert_eq!(store.damaged().expect("damaged"), [(1, [7].into())]);
    // weak_tail counts it as written, not as a hole.
    let tail = wait(drive.weak_tail(4)).unwrap();
    assert_eq!((tail.n, tail.holes.len()), (20, 0));
    // Only its own bytes repair it; new writes go on behind the damage.
    assert_eq!(
        wait(drive.write(7, 1, page(1, 8))),
        Err(LogDriveError::Conflict { address: 7 })
    );
    write_all(&drive, 20..24);
    wait(drive.write(7, 1, page(1, 7))).expect("the repair");
    assert_eq!(read(&drive, 7), ReadOutcome::Value(page(1, 7)));
    assert!(store.damaged().expect("damaged").is_empty());
    drop((drive, other));
    store.close();
    drop(store);
    // A restart reads the repaired value (the damaged record is still in the ring).
    let store = quarantined(&ring);
    let drive = store.get(1).unwrap();
    for address in 0..24 {
        assert_eq!(read(&drive, address), ReadOutcome::Value(page(1, address)));
    }
    assert!(store.damaged().expect("damaged").is_empty());
    // Once the reclaimer moved the head past the damaged record (garbage since its repair),
    // the ring opens strictly again.
    churn_past(&store, *report[0].lsns.end());
    drop(drive);
    store.close();
    drop(store);
    let store = open(&ring, RecoveryMode::Strict).expect("a strict open after the trim");
    check_values(&store.get(1).unwrap(), 1, 0..24);
    check_values(&store.get(2).unwrap(), 2, 0..20);
}

/// Garbage (LogDrives written and deleted) and the reclaimer run by hand, until the ring's
/// head is past `lsn`.
fn churn_past(store: &LogDriveStore, lsn: u64) {
    let mut round = 0;
    while store.reclaim_stats().head_lsn <= lsn {
        let churn = wait(store.create(100 + round, 1 << 20)).unwrap();
        write_all(&churn, 0..64);
        drop(churn);
        wait(store.delete(100 + round)).unwrap();
        store.reclaim_now().unwrap();
        round += 1;
        assert!(round < 100, "{:?}", store.reclaim_stats());
    }
}

fn check_values(drive: &LocalLogDrive, id: u64, addresses: std::ops::Range<u64>) {
    for address in addresses {
        assert_eq!(read(drive, address), ReadOutcome::Value(page(id, address)));
    }
}

#[test]
fn damage_whose_header_is_gone_makes_the_window_damaged_until_written_or_sealed() {
    let ring = ring();
    let store = quarantined(&ring);
    let drive = wait(store.create(1, 1 << 20)).unwrap();
    let sealed = wait(store.create(2, 1 << 20)).unwrap();
    write_all(&sealed, 0..4);
    wait(sealed.seal(4, 0)).unwrap();
    // Address 5 is a hole; the flipped record is 9's, the last, which header goes.
    write_all(&drive, (0..5).chain(6..10));
    write_all(&drive, [10]);
    drop((drive, sealed));
    store.close();
    drop(store);
    // Into the entry header of address 9's record.
    flip(&ring.path, &page(1, 9), -40);
    let store = quarantined(&ring);
    let report = store.quarantine_report().to_vec();
    assert!(
        report.iter().any(|found| found.header.is_none()),
        "{report:?}"
    );
    let drive = store.get(1).unwrap();
    // T = 5 and, what replay met before the damage, N = 9: [5, 9 + K) unwritten reads Damaged.
    assert_eq!(read(&drive, 5), ReadOutcome::Damaged);
    assert_eq!(read(&drive, 9), ReadOutcome::Damaged);
    assert_eq!(read(&drive, 9 + WINDOW - 1), ReadOutcome::Damaged);
    assert_eq!(read(&drive, 9 + WINDOW), ReadOutcome::Unwritten);
    assert_eq!(read(&drive, 4), ReadOutcome::Value(page(1, 4)));
    assert!(matches!(
        wait(drive.weak_tail(64)),
        Err(LogDriveError::Damaged { .. })
    ));
    // The sealed LogDrive is not suspected.
    let sealed = store.get(2).unwrap();
    assert_eq!(read(&sealed, 3), ReadOutcome::Value(page(2, 3)));
    assert_eq!(read(&sealed, 4), ReadOutcome::Unwritten);
    assert!(wait(sealed.weak_tail(4)).is_ok());
    // A write repairs what it writes; a seal settles the rest.
    write_all(&drive, [5, 9]);
    assert_eq!(read(&drive, 9), ReadOutcome::Value(page(1, 9)));
    assert_eq!(read(&drive, 11), ReadOutcome::Damaged);
    wait(drive.seal(11, 0)).unwrap();
    assert_eq!(read(&drive, 11), ReadOutcome::Unwritten);
    let tail = wait(drive.weak_tail(64)).unwrap();
    assert_eq!((tail.n, tail.t()), (11, 11));
    drop((drive, sealed));
    store.close();
    drop(store);
    let store = quarantined(&ring);
    let drive = store.get(1).unwrap();
    check_values(&drive, 1, 0..11);
    assert_eq!(read(&drive, 12), ReadOutcome::Unwritten);
    assert!(store.damaged().expect("damaged").is_empty());
}

#[test]
fn unrepaired_damage_is_carried_forward_past_the_rings_head() {
    let ring = ring();
    let store = quarantined(&ring);
    let drive = wait(store.create(1, 1 << 20)).unwrap();
    write_all(&drive, 0..32);
    drop(drive);
    store.close();
    drop(store);
    flip(&ring.path, &page(1, 3), 500);
    let mut store = quarantined(&ring);
    let damaged_lsn = *store.quarantine_report()[0].lsns.end();
    // The reclaimer relocates LogDrive 1 (its damage as a damaged record).
    churn_past(&store, damaged_lsn);
    let drive = store.get(1).unwrap();
    assert_eq!(read(&drive, 3), ReadOutcome::Damaged);
    drop(drive);
    store.close();
    drop(store);
    // The damaged record has left the ring: a strict open works, and still says Damaged.
    store = open(&ring, RecoveryMode::Strict).expect("strict");
    let drive = store.get(1).unwrap();
    assert_eq!(read(&drive, 3), ReadOutcome::Damaged);
    assert_eq!(store.damaged().expect("damaged"), [(1, [3].into())]);
    for address in (0..32).filter(|a| *a != 3) {
        assert_eq!(read(&drive, address), ReadOutcome::Value(page(1, address)));
    }
    wait(drive.write(3, 1, page(1, 3))).expect("the repair");
    drop(drive);
    store.close();
    drop(store);
    let store = open(&ring, RecoveryMode::Strict).expect("strict");
    check_values(&store.get(1).unwrap(), 1, 0..32);
    assert!(store.damaged().expect("damaged").is_empty());
}
