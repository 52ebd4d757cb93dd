//! Property tests against a brute-force model (docs/logdrive.md, "What a LogDrive promises"):
//! write-once, and weak_tail's window scan equal to a full scan. Random writes within a K
//! window across several LogDrives, some of them rewrites of the same bytes and some
//! conflicting; after every write, weak_tail equals a full scan of the model and the outcome
//! of the write is the model's; after a restart, every LogDrive reads and tails as the model
//! says. And under a concurrent writer, T lies within [T_start, T_stop].

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use common::{create, open, read, ring, tail, value};
use proptest::prelude::*;
use sealog_logdrive::{wait, LogDrive, LogDriveError, ReadOutcome, TailDesc};

const K: u64 = 8;
const DRIVES: usize = 3;

/// The full scan, seen through a window of k (LD.2): N, the holes in [N - k, N), and
/// whether any hole lies below that window, from the written set alone.
fn full_scan(written: &BTreeMap<u64, Vec<u8>>, k: u64) -> Result<TailDesc, LogDriveError> {
    let n = written.keys().next_back().map_or(0, |last| last + 1);
    let all: BTreeSet<u64> = (0..n).filter(|a| !written.contains_key(a)).collect();
    let window = n.saturating_sub(k);
    let holes = all.range(window..).copied().collect();
    Ok(TailDesc {
        n,
        holes,
        holes_below_window: all.first().is_some_and(|t| *t < window),
    })
}

fn contiguous(written: &BTreeMap<u64, Vec<u8>>) -> u64 {
    (0..).find(|a| !written.contains_key(a)).unwrap_or(0)
}

/// One write: which LogDrive, how far past its T, and which of three values.
fn operation() -> impl Strategy<Value = (usize, u64, u8)> {
    (0..DRIVES, 0..K, 0..3u8)
}

fn apply(drive: &dyn LogDrive, model: &mut BTreeMap<u64, Vec<u8>>, offset: u64, byte: u8) {
    let address = contiguous(model) + offset;
    let bytes = vec![byte; 4];
    let outcome = wait(drive.write(address, 0, Bytes::from(bytes.clone())));
    match model.get(&address) {
        Some(first) if *first == bytes => assert_eq!(outcome, Ok(())),
        Some(_) => assert_eq!(outcome, Err(LogDriveError::Conflict { address })),
        None => {
            assert_eq!(outcome, Ok(()));
            model.insert(address, bytes);
        }
    }
}

fn check(drive: &dyn LogDrive, model: &BTreeMap<u64, Vec<u8>>) {
    assert_eq!(wait(drive.weak_tail(K)), full_scan(model, K));
    assert_eq!(wait(drive.weak_tail(2)), full_scan(model, 2));
    let n = full_scan(model, K).map_or(0, |tail| tail.n);
    for address in 0..n + 2 {
        let expected = model
            .get(&address)
            .map_or(ReadOutcome::Unwritten, |bytes| value(bytes));
        assert_eq!(read(drive, address), expected);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn ld3_weak_tail_equals_a_full_scan_and_survives_restart(
        operations in proptest::collection::vec(operation(), 1..120)
    ) {
        let ring = ring();
        let store = open(&ring);
        let drives: Vec<_> = (0..DRIVES as u64).map(|id| create(&store, id)).collect();
        let mut models = vec![BTreeMap::new(); DRIVES];
        for (index, offset, byte) in operations {
            apply(&drives[index], &mut models[index], offset, byte);
            check(&drives[index], &models[index]);
        }
        drop(drives);
        store.close();
        drop(store);
        let store = open(&ring);
        for (id, model) in models.iter().enumerate() {
            check(&store.get(id as u64).unwrap(), model);
        }
    }
}

/// LD.1: a weakTail concurrent with writes (issued in a shuffled order within the window)
/// returns a T between the contiguous tail of what was acknowledged before it began and that
/// of what had been issued when it returned.
#[test]
fn ld2_weak_tail_t_lies_within_t_start_and_t_stop_under_a_concurrent_writer() {
    let ring = ring();
    let store = open(&ring);
    let drive = create(&store, 1);
    let acknowledged = Arc::new(Mutex::new(BTreeMap::new()));
    let issued = Arc::new(Mutex::new(BTreeMap::new()));
    let writer = {
        let (drive, acknowledged, issued) = (drive.clone(), acknowledged.clone(), issued.clone());
        std::thread::spawn(move || {
            for window in 0..200u64 {
                let base = window * 4;
                for address in [base + 2, base, base + 3, base + 1] {
                    issued.lock().unwrap().insert(address, Vec::new());
                    wait(drive.write(address, 0, Bytes::from(vec![1; 8]))).unwrap();
                    acknowledged.lock().unwrap().insert(address, Vec::new());
                }
            }
        })
    };
    let mut observed = 0;
    while !writer.is_finished() {
        let t_start = contiguous(&acknowledged.lock().unwrap());
        let t = tail(&drive, K).t();
        let t_stop = contiguous(&issued.lock().unwrap());
        assert!(t_start <= t && t <= t_stop, "{t_start} <= {t} <= {t_stop}");
        observed += 1;
    }
    writer.join().unwrap();
    assert_eq!(tail(&drive, K).t(), 800);
    println!("{observed} weak_tail calls during the writes");
}
