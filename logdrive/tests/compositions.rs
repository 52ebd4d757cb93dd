//! One property for every composition, on LogDrives of three stores on three file rings (a
//! drive thread each): a single LogDrive, stripes of two and three, quorums of three with
//! every write quorum, stripes of quorums and quorums of stripes. Writes go through the top
//! in the order a sequencer with window K lets them complete (any slot of the window, never
//! past T + K), and after every write the composition's window scan equals a brute-force scan
//! of what was written; at the end every address reads its value.

mod common;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use proptest::prelude::*;
use sealog_logdrive::{
    wait, LogDrive, LogDriveStore, QuorumLogDrive, QuorumOptions, ReadOutcome, StripedLogDrive,
    TailDesc,
};

const RINGS: usize = 3;

/// The stores every case shares, and the next LogDrive id.
fn stores() -> &'static (Vec<common::Ring>, Vec<LogDriveStore>, AtomicU64) {
    static STORES: OnceLock<(Vec<common::Ring>, Vec<LogDriveStore>, AtomicU64)> = OnceLock::new();
    STORES.get_or_init(|| {
        let rings: Vec<_> = (0..RINGS).map(|_| common::ring()).collect();
        let stores = rings.iter().map(common::open).collect();
        (rings, stores, AtomicU64::new(1))
    })
}

/// A fresh LogDrive on ring `ring`.
fn leaf(ring: usize) -> Arc<dyn LogDrive> {
    let (_, stores, next) = stores();
    let id = next.fetch_add(1, Ordering::Relaxed);
    Arc::new(common::create(&stores[ring % RINGS], id))
}

fn stripe(children: Vec<Arc<dyn LogDrive>>) -> Arc<dyn LogDrive> {
    Arc::new(StripedLogDrive::new(children).expect("stripes"))
}

fn quorum(children: Vec<Arc<dyn LogDrive>>, write_quorum: usize) -> Arc<dyn LogDrive> {
    let options = QuorumOptions::default();
    Arc::new(QuorumLogDrive::new(children, write_quorum, options).expect("quorum"))
}

/// The compositions, by number: the top and the unit its window must be a multiple of.
fn composition(which: u8, write_quorum: usize) -> (Arc<dyn LogDrive>, u64) {
    match which % 6 {
        0 => (leaf(0), 1),
        1 => (stripe((0..2).map(leaf).collect()), 2),
        2 => (stripe((0..3).map(leaf).collect()), 3),
        3 => (quorum((0..3).map(leaf).collect(), write_quorum), 1),
        4 => {
            let quorums = (0..2)
                .map(|_| quorum((0..3).map(leaf).collect(), write_quorum))
                .collect();
            (stripe(quorums), 2)
        }
        _ => {
            let stripes = (0..3)
                .map(|replica| stripe(vec![leaf(replica), leaf(replica + 1)]))
                .collect();
            (quorum(stripes, write_quorum), 2)
        }
    }
}

/// What a scan of the written set says for window `k`.
fn scan(written: &BTreeSet<u64>, k: u64) -> TailDesc {
    let n = written.last().map_or(0, |last| last + 1);
    let start = n.saturating_sub(k);
    TailDesc {
        n,
        holes: (start..n).filter(|a| !written.contains(a)).collect(),
        holes_below_window: (0..start).any(|a| !written.contains(&a)),
    }
}

fn payload(address: u64) -> bytes::Bytes {
    bytes::Bytes::from(format!("composed {address}"))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn every_composition_scans_what_a_brute_force_scan_of_its_writes_says(
        which in 0u8..6,
        write_quorum in 1usize..=3,
        k_times in prop::sample::select(vec![1u64, 2, 4]),
        picks in prop::collection::vec(any::<u16>(), 12..40),
    ) {
        let (top, unit) = composition(which, write_quorum);
        let k = unit * k_times;
        let mut written = BTreeSet::new();
        let mut in_flight: Vec<u64> = Vec::new();
        let mut next = 0u64;
        for pick in picks {
            // Acquire while the window allows, then complete one slot of it.
            let t = (0..).find(|a| !written.contains(a)).unwrap_or(0);
            while next < t + k {
                in_flight.push(next);
                next += 1;
            }
            let address = in_flight.swap_remove(pick as usize % in_flight.len());
            wait(top.write(address, 1, payload(address))).expect("write");
            written.insert(address);
            let found = wait(top.weak_tail(k)).expect("weak_tail");
            prop_assert_eq!(found, scan(&written, k), "composition {} k {}", which % 6, k);
        }
        for &address in &written {
            let read = wait(top.read(address)).expect("read");
            prop_assert_eq!(read, ReadOutcome::Value(payload(address)));
        }
    }
}
