//! A restart rebuilds exactly the same LogDrives in the open's one replay pass: the same ids
//! and generations (deleted and recreated ones included), reads, lengths, seals, fences,
//! trim points and tails, and the same answers to writes the state decides; replay refuses
//! what the live path would have refused; writers racing a fence or a seal are replayed to
//! the decisions they were given.

mod common;

use common::{create, open, payload, ring, write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use sealog_logdrive::{
    wait, Length, LocalLogDrive, LogDrive, LogDriveError, LogDriveStore, ReadOutcome, TailDesc,
};

/// Everything a LogDrive answers, read through the trait.
#[derive(Debug, PartialEq)]
struct Snapshot {
    id: u64,
    generation: u64,
    length: Length,
    tail: Result<(u64, Vec<u64>), LogDriveError>,
    reads: Vec<ReadOutcome>,
}

fn snapshot(store: &LogDriveStore) -> Vec<Snapshot> {
    store
        .ids()
        .expect("ids")
        .into_iter()
        .map(|id| {
            let drive = store.get(id).unwrap();
            let length = wait(drive.length()).unwrap();
            let tail =
                wait(drive.weak_tail(4)).map(|tail| (tail.n, tail.holes.into_iter().collect()));
            let reads = (0..length.n + 3)
                .map(|address| wait(drive.read(address)).unwrap())
                .collect();
            Snapshot {
                id,
                generation: drive.generation(),
                length,
                tail,
                reads,
            }
        })
        .collect()
}

/// Writes `addresses` of `drive` at `epoch`.
fn fill(drive: &dyn LogDrive, id: u64, addresses: impl IntoIterator<Item = u64>, epoch: u64) {
    for address in addresses {
        write(drive, address, epoch, &payload(id, address)).unwrap();
    }
}

/// Builds LogDrives in every state the first slice knows.
fn build(store: &LogDriveStore) {
    let plain = create(store, 1);
    fill(&plain, 1, [0, 1, 2, 4, 6], 0);
    let sealed = create(store, 2);
    fill(&sealed, 2, 0..12, 3);
    wait(sealed.seal(9, 0)).unwrap();
    let fenced = create(store, 3);
    fill(&fenced, 3, 0..5, 1);
    wait(fenced.fence(4)).unwrap();
    fill(&fenced, 3, [5, 7], 9);
    assert!(write(&fenced, 6, 2, b"zombie").is_err());
    let trimmed = create(store, 4);
    fill(&trimmed, 4, (0..10).chain([11]), 0);
    wait(trimmed.trim(6)).unwrap();
    let deleted = create(store, 5);
    fill(&deleted, 5, 0..3, 0);
    wait(store.delete(5)).unwrap();
    let recreated = create(store, 6);
    fill(&recreated, 6, 0..4, 2);
    wait(recreated.fence(2)).unwrap();
    wait(store.delete(6)).unwrap();
    let recreated = create(store, 6);
    fill(&recreated, 6, [0, 2], 0);
    wait(recreated.seal(3, 2)).unwrap();
    let wide = create(store, 7);
    fill(&wide, 7, [0, 9], 0);
}

#[test]
fn a_restart_rebuilds_exactly_the_same_state() {
    let ring = ring();
    let store = open(&ring);
    build(&store);
    let before = snapshot(&store);
    assert_eq!(
        before.iter().map(|s| s.id).collect::<Vec<_>>(),
        [1, 2, 3, 4, 6, 7]
    );
    store.close();
    drop(store);
    for _ in 0..2 {
        let store = open(&ring);
        assert_eq!(snapshot(&store), before);
        store.close();
    }
    let store = open(&ring);
    // Generations are the store's: ids 1 to 7 took 1 to 8 (6 twice), and a creation after the
    // restart takes the next one, whatever its id.
    let recreated = store.get(6).unwrap();
    assert_eq!(recreated.generation(), 7);
    assert_eq!(wait(recreated.length()).unwrap().fence, 0);
    assert_eq!(wait(store.create(5, 8)).unwrap().generation(), 9);
    let fenced = store.get(3).unwrap();
    assert_eq!(
        write(&fenced, 6, 3, b"zombie"),
        Err(LogDriveError::Fenced { current: 4 })
    );
    assert_eq!(
        write(&store.get(2).unwrap(), 9, 3, b"x"),
        Err(LogDriveError::Sealed { length: 9 })
    );
    let wide = store.get(7).unwrap();
    // A window smaller than N - T answers the window's holes and says more lie below.
    assert_eq!(
        wait(wide.weak_tail(4)),
        Ok(TailDesc {
            n: 10,
            holes: [6, 7, 8].into(),
            holes_below_window: true
        })
    );
    assert_eq!(store.skipped_records(), 0);
}

/// Replay makes the live path's decisions itself: a log crafted with records the live path
/// would have refused (a zombie below the fence, a conflicting rewrite, a write at the seal,
/// a second seal, a lower fence, a seal below the fence, a trim beyond N, another
/// generation's write, an entry that is no record) opens to the state the accepted records
/// alone make.
#[test]
fn replay_refuses_what_the_live_path_would_have_refused() {
    use sealog_logdrive::record::{Record, RecordType};
    let ring = ring();
    {
        let drive = sealog::Drive::open(&ring.path, sealog::DriveOptions::default()).unwrap();
        let append = |record: Record, payload: &'static [u8]| {
            let entry = sealog::NewEntry {
                kind: record.record_type.kind(),
                header: record.header(),
                payload: bytes::Bytes::from_static(payload),
            };
            drive.append(entry).unwrap().wait().unwrap();
        };
        let record = |record_type, value, epoch| Record::new(record_type, 1, 1, value, epoch);
        append(record(RecordType::Create, 100, 0), b"");
        append(record(RecordType::Write, 0, 5), b"first");
        append(record(RecordType::Fence, 0, 6), b"");
        append(record(RecordType::Write, 1, 5), b"zombie");
        append(record(RecordType::Write, 0, 6), b"other");
        append(record(RecordType::Write, 2, 7), b"later");
        append(record(RecordType::Seal, 3, 5), b"");
        append(record(RecordType::Seal, 3, 6), b"");
        append(record(RecordType::Write, 3, 7), b"sealed");
        append(record(RecordType::Seal, 4, 6), b"");
        append(record(RecordType::Fence, 0, 5), b"");
        append(record(RecordType::Trim, 4, 0), b"");
        let other_generation = Record {
            generation: 2,
            ..record(RecordType::Write, 1, 9)
        };
        append(other_generation, b"wrong generation");
        drive.append(b"no record".to_vec()).unwrap().wait().unwrap();
    }
    let store = open(&ring);
    let drive = store.get(1).unwrap();
    let reads: Vec<_> = (0..4)
        .map(|address| wait(drive.read(address)).unwrap())
        .collect();
    assert_eq!(
        reads,
        [
            common::value(b"first"),
            ReadOutcome::Unwritten,
            common::value(b"later"),
            ReadOutcome::Unwritten
        ]
    );
    let length = wait(drive.length()).unwrap();
    assert_eq!(
        length,
        Length {
            n: 3,
            t: 1,
            sealed: Some(3),
            fence: 6,
            first: 0
        }
    );
    assert_eq!(store.skipped_records(), 9);
}

/// Writers at epoch 1 race a fence at epoch 2: every write is either acknowledged (and reads
/// back, before and after a restart) or refused as fenced (and reads unwritten, before and
/// after): no write checked against the old fence lands after the new one.
#[test]
fn writes_racing_a_fence_replay_to_the_same_decisions() {
    let ring = ring();
    let store = open(&ring);
    let drive = create(&store, 1);
    let outcomes = race(&drive, 1, || wait(drive.fence(2)).unwrap());
    let expected = |address: u64, outcome: &Result<(), LogDriveError>| match outcome {
        Ok(()) => common::value(&payload(1, address)),
        Err(error) => {
            assert_eq!(*error, LogDriveError::Fenced { current: 2 });
            ReadOutcome::Unwritten
        }
    };
    let check = |drive: &dyn LogDrive| read_as_decided(drive, &outcomes, expected);
    check_across_restart("fenced", &ring, store, drive, &outcomes, check);
}

/// Writers race a seal at 800: below it every acknowledged write reads back; at and beyond
/// it every write is refused as sealed or, acknowledged before the seal, dropped by it (AZ-1);
/// a restart reads the same.
#[test]
fn writes_racing_a_seal_replay_to_the_same_decisions() {
    let ring = ring();
    let store = open(&ring);
    let drive = create(&store, 1);
    let outcomes = race(&drive, 0, || wait(drive.seal(800, 0)).unwrap());
    let expected = |address: u64, outcome: &Result<(), LogDriveError>| match outcome {
        Ok(()) if address < 800 => common::value(&payload(1, address)),
        Ok(()) => ReadOutcome::Unwritten,
        Err(error) => {
            assert_eq!(*error, LogDriveError::Sealed { length: 800 });
            assert!(address >= 800);
            ReadOutcome::Unwritten
        }
    };
    let check = |drive: &dyn LogDrive| {
        read_as_decided(drive, &outcomes, expected);
        assert_eq!(wait(drive.length()).unwrap().sealed, Some(800));
    };
    check_across_restart("refused as sealed", &ring, store, drive, &outcomes, check);
}

/// Every raced write reads as `expected` says its outcome makes it.
fn read_as_decided(
    drive: &dyn LogDrive,
    outcomes: &[(u64, Result<(), LogDriveError>)],
    expected: impl Fn(u64, &Result<(), LogDriveError>) -> ReadOutcome,
) {
    for (address, outcome) in outcomes {
        let wanted = expected(*address, outcome);
        assert_eq!(
            wait(drive.read(*address)).unwrap(),
            wanted,
            "address {address}"
        );
    }
}

/// Some of the raced writes were refused, and `check` holds before a restart and after it.
fn check_across_restart(
    refused_as: &str,
    ring: &common::Ring,
    store: LogDriveStore,
    drive: LocalLogDrive,
    outcomes: &[(u64, Result<(), LogDriveError>)],
    check: impl Fn(&dyn LogDrive),
) {
    let refused = outcomes
        .iter()
        .filter(|(_, outcome)| outcome.is_err())
        .count();
    println!("{refused} of {} writes {refused_as}", outcomes.len());
    assert!(refused > 0);
    check(&drive);
    drop(drive);
    store.close();
    drop(store);
    let store = open(ring);
    check(&store.get(1).unwrap());
    assert_eq!(store.skipped_records(), 0);
}

/// Four writers pipelining writes of `drive` (addresses interleaved, 16 in flight each) at
/// `epoch`, with `control` run once half of them are acknowledged: the writers go on as
/// soon as it starts, so their writes race it and the rest come after it. Every write's
/// address and outcome.
fn race(
    drive: &LocalLogDrive,
    epoch: u64,
    control: impl FnOnce(),
) -> Vec<(u64, Result<(), LogDriveError>)> {
    let acknowledged = AtomicU64::new(0);
    let started = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let writers: Vec<_> = (0..4u64)
            .map(|writer| {
                let (drive, acknowledged, started) = (drive.clone(), &acknowledged, &started);
                scope.spawn(move || {
                    let mut outcomes = Vec::new();
                    for round in 0..25u64 {
                        if round == 13 {
                            while !started.load(Ordering::SeqCst) {
                                std::thread::yield_now();
                            }
                        }
                        let addresses: Vec<u64> =
                            (0..16).map(|i| (round * 16 + i) * 4 + writer).collect();
                        let futures: Vec<_> = addresses
                            .iter()
                            .map(|&address| drive.write(address, epoch, payload(1, address)))
                            .collect();
                        outcomes.extend(addresses.into_iter().zip(futures.into_iter().map(wait)));
                        acknowledged.fetch_add(16, Ordering::SeqCst);
                    }
                    outcomes
                })
            })
            .collect();
        while acknowledged.load(Ordering::SeqCst) < 4 * 16 * 13 {
            std::thread::yield_now();
        }
        started.store(true, Ordering::SeqCst);
        control();
        let joined = writers
            .into_iter()
            .flat_map(|writer| writer.join().unwrap());
        joined.collect()
    })
}

/// A trim queued while a seal below its point is still in flight: replay applies the seal
/// first (LSN order) and finds the trim beyond T, so the live path must refuse it too, as
/// beyond the T the queued seal leaves. It accepted it once (T counted what the seal was
/// about to drop), and a restart then lost the acknowledged trim point. Found by the
/// crash-state enumeration of LogDrive workloads (`sealog-fault`).
#[test]
fn a_trim_racing_a_seal_below_it_is_decided_as_replay_decides_it() {
    let ring = ring();
    let store = open(&ring);
    let drive = create(&store, 1);
    fill(&drive, 1, 0..10, 0);
    let seal = drive.seal(5, 0);
    let trim = drive.trim(8);
    assert_eq!(wait(seal), Ok(()));
    assert_eq!(
        wait(trim),
        Err(LogDriveError::OutOfRange {
            address: 8,
            valid: 0..6
        })
    );
    // A trim at the sealed length is still T.
    wait(drive.trim(5)).unwrap();
    let before = snapshot(&store);
    drop(drive);
    store.close();
    drop(store);
    let store = open(&ring);
    assert_eq!(snapshot(&store), before);
    assert_eq!(wait(store.get(1).unwrap().length()).unwrap().first, 5);
}
