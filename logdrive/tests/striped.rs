//! The striped LogDrive against a brute-force scan of its global address space: for random
//! sets of written addresses over 1 to 4 stripes, every window scan (N, the holes in the
//! window, whether a hole lies below it), every read and the lengths equal what a scan of the
//! written set says; the counterexample to "the largest tail and the union of the holes" is a
//! test of its own; and seals and trims map to each child's share of the global length.

mod common;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use proptest::prelude::*;
use sealog_logdrive::{
    wait, Length, LogDrive, LogDriveError, LogDriveStore, MemLogDrive, OpFuture, ReadOutcome,
    StripedLogDrive, TailDesc,
};

/// One store for every case (a ring each would cost a format per case), and the next id.
fn store() -> &'static (common::Ring, LogDriveStore, AtomicU64) {
    static STORE: OnceLock<(common::Ring, LogDriveStore, AtomicU64)> = OnceLock::new();
    STORE.get_or_init(|| {
        let ring = common::ring();
        let store = common::open(&ring);
        (ring, store, AtomicU64::new(1))
    })
}

/// A striped LogDrive over `stripes` fresh LogDrives of the shared store.
fn striped(stripes: u64) -> StripedLogDrive {
    let (_, store, next) = store();
    let children = (0..stripes)
        .map(|_| {
            let id = next.fetch_add(1, Ordering::Relaxed);
            Arc::new(common::create(store, id)) as Arc<dyn LogDrive>
        })
        .collect();
    StripedLogDrive::new(children).expect("children")
}

/// What a scan of the global space says for window `k`.
fn scan(written: &BTreeSet<u64>, k: u64) -> TailDesc {
    let n = written.last().map_or(0, |last| last + 1);
    let start = n.saturating_sub(k);
    TailDesc {
        n,
        holes: (start..n)
            .filter(|address| !written.contains(address))
            .collect(),
        holes_below_window: (0..start).any(|address| !written.contains(&address)),
    }
}

fn write_all(drive: &StripedLogDrive, written: &BTreeSet<u64>) {
    for &address in written {
        let payload = common::payload(0, address);
        wait(drive.write(address, 0, payload)).expect("write");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn window_scans_reads_and_lengths_match_a_scan_of_the_global_space(
        stripes in 1u64..=4,
        written in proptest::collection::btree_set(0u64..40, 0..30),
    ) {
        let drive = striped(stripes);
        write_all(&drive, &written);
        for multiple in [1, 2, 4, 8] {
            let k = stripes * multiple;
            prop_assert_eq!(common::tail(&drive, k), scan(&written, k), "k = {}", k);
        }
        for address in 0..44 {
            let expected = if written.contains(&address) {
                sealog_logdrive::ReadOutcome::Value(common::payload(0, address))
            } else {
                sealog_logdrive::ReadOutcome::Unwritten
            };
            prop_assert_eq!(common::read(&drive, address), expected);
        }
        let length = wait(drive.length()).expect("length");
        let n = written.last().map_or(0, |last| last + 1);
        let t = (0..).find(|address| !written.contains(address)).expect("a hole");
        prop_assert_eq!((length.n, length.t), (n, t));
    }
}

/// Two stripes, written {0..6, 8}: stripe 0 holds {0, 2, 4, 6, 8} (local N 5), stripe 1
/// {1, 3, 5} (local N 3). The global answer is N 9 with a hole at 7, so T is 7; taking the
/// largest mapped tail with the union of the children's holes (none) would say T 9 or 10.
#[test]
fn ld_5_the_tail_gaps_no_child_reports_are_holes() {
    let drive = striped(2);
    let written: BTreeSet<u64> = (0..=6).chain([8]).collect();
    write_all(&drive, &written);
    let tail = common::tail(&drive, 4);
    assert_eq!((tail.n, tail.t()), (9, 7));
    assert_eq!(tail.holes, common::holes(&[7]));
    assert!(!tail.holes_below_window);
}

/// LD-6: with three stripes, global 7 is stripe 1's local 2 and stripe 2's local 4 is global
/// 14; a window of 4 cannot be split among three children.
#[test]
fn ld_6_the_mapping_and_a_window_that_is_not_a_multiple_of_the_stripes() {
    let children: Vec<Arc<MemLogDrive>> = (0..3).map(|_| Arc::new(MemLogDrive::new())).collect();
    let dyn_children = children
        .iter()
        .map(|c| c.clone() as Arc<dyn LogDrive>)
        .collect();
    let mem = StripedLogDrive::new(dyn_children).expect("children");
    wait(mem.write(7, 0, Bytes::from_static(b"seven"))).expect("write 7");
    assert!(children[1].contents().contains_key(&2));
    wait(children[2].write(4, 0, Bytes::from_static(b"fourteen"))).expect("local 4");
    assert_eq!(
        wait(mem.read(14)).expect("read 14"),
        ReadOutcome::Value(Bytes::from_static(b"fourteen"))
    );
    let drive = striped(3);
    match wait(drive.weak_tail(4)) {
        Err(LogDriveError::InvalidWindow { k: 4, .. }) => {}
        other => panic!("weak_tail(4) over 3 stripes answered {other:?}"),
    }
}

/// A seal at global length L seals child i at ceil((L - i) / S): every address below L stays
/// writable, none at or above it is, and a conflict names the global address.
#[test]
fn a_seal_and_a_trim_map_to_each_childs_share() {
    let drive = striped(3);
    let written: BTreeSet<u64> = (0..7).collect();
    write_all(&drive, &written);
    wait(drive.seal(10, 1)).expect("seal");
    for address in 7..10 {
        wait(drive.write(address, 1, common::payload(0, address))).expect("below the seal");
    }
    for address in 10..16 {
        match wait(drive.write(address, 1, Bytes::from_static(b"late"))) {
            Err(LogDriveError::Sealed { .. }) => {}
            other => panic!("a write at {address}, past the seal at 10, answered {other:?}"),
        }
    }
    let length = wait(drive.length()).expect("length");
    assert_eq!((length.n, length.t, length.sealed), (10, 10, Some(10)));
    match wait(drive.write(4, 1, Bytes::from_static(b"other"))) {
        Err(LogDriveError::Conflict { address: 4 }) => {}
        other => panic!("a conflicting write at 4 answered {other:?}"),
    }
    wait(drive.trim(5)).expect("trim");
    for address in 0..5 {
        assert!(
            matches!(
                common::read(&drive, address),
                sealog_logdrive::ReadOutcome::Trimmed { .. }
            ),
            "address {address} below the trim point"
        );
    }
    assert_eq!(
        common::read(&drive, 5),
        sealog_logdrive::ReadOutcome::Value(common::payload(0, 5))
    );
    assert_eq!(wait(drive.length()).expect("length").first, 5);
}

/// A child whose window scan runs when first polled, after a hook: the scan of one child
/// then happens after writes the other child's scan missed.
struct LateScan {
    inner: Arc<MemLogDrive>,
    before_scan: std::sync::Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

impl LogDrive for LateScan {
    fn write(&self, address: u64, epoch: u64, payload: Bytes) -> OpFuture<()> {
        self.inner.write(address, epoch, payload)
    }
    fn read(&self, address: u64) -> OpFuture<ReadOutcome> {
        self.inner.read(address)
    }
    fn weak_tail(&self, k: u64) -> OpFuture<TailDesc> {
        let inner = self.inner.clone();
        let hook = self.before_scan.lock().unwrap().take();
        Box::pin(async move {
            if let Some(hook) = hook {
                hook();
            }
            inner.weak_tail(k).await
        })
    }
    fn seal(&self, length: u64, epoch: u64) -> OpFuture<()> {
        self.inner.seal(length, epoch)
    }
    fn fence(&self, epoch: u64) -> OpFuture<()> {
        self.inner.fence(epoch)
    }
    fn trim(&self, upto: u64) -> OpFuture<()> {
        self.inner.trim(upto)
    }
    fn length(&self) -> OpFuture<Length> {
        self.inner.length()
    }
    fn write_window_max(&self) -> u64 {
        self.inner.write_window_max()
    }
}

/// LD-2: write(1) and then write(0) race a window scan over two stripes. Stripe 1 is scanned
/// before write(1), stripe 0 after write(0): the scan sees 1 unwritten and 0 written and
/// answers T = 1, which no instant of the drive had (T went from 0 to 2), yet lies between
/// the T before the scan and the T after it, which is all weakTail promises.
#[test]
fn ld_2_a_scan_racing_two_writes_answers_a_tail_between_start_and_stop() {
    let even = Arc::new(MemLogDrive::new());
    let odd = Arc::new(MemLogDrive::new());
    let hook = {
        let (even, odd) = (even.clone(), odd.clone());
        move || {
            wait(odd.write(0, 0, Bytes::from_static(b"one"))).expect("write(1)");
            wait(even.write(0, 0, Bytes::from_static(b"zero"))).expect("write(0)");
        }
    };
    let late = Arc::new(LateScan {
        inner: even.clone(),
        before_scan: std::sync::Mutex::new(Some(Box::new(hook))),
    });
    let drive = StripedLogDrive::new(vec![late, odd.clone()]).expect("children");
    let t_start = 0;
    let observed = wait(drive.weak_tail(2)).expect("weak_tail").t();
    let t_stop = wait(drive.weak_tail(2)).expect("weak_tail").t();
    assert_eq!((observed, t_stop), (1, 2));
    assert!((t_start..=t_stop).contains(&observed));
}
