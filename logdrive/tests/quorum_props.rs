//! Property tests of the quorum LogDrive's window scan (Algorithm 3) over random replica
//! states, and of quorums and stripes nested either way against what was acknowledged.
//!
//! The states keep the K-window discipline: every address below T0 is on every replica
//! (but a replica that rejoined after missing writes, when the others still make a write
//! quorum), and partial writes lie only in [T0, T0 + K), so the abstract log (written =
//! held by at least Qw replicas) has N - T <= K.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use bytes::Bytes;
use proptest::prelude::*;
use sealog_logdrive::{
    wait, LogDrive, MemLogDrive, QuorumLogDrive, QuorumOptions, ReadOutcome, StripedLogDrive,
};

fn value(address: u64) -> Bytes {
    Bytes::from(format!("value at {address}"))
}

/// A small deterministic generator, so that one proptest seed draws a whole state.
struct Draw(u64);

impl Draw {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound.max(1)
    }
}

/// The abstract contiguous tail: the first address held by fewer than `qw` replicas.
fn abstract_t(children: &[Arc<MemLogDrive>], qw: usize) -> u64 {
    let held = holders(children);
    (0..)
        .find(|address| held.get(address).copied().unwrap_or(0) < qw)
        .expect("a first unwritten address")
}

/// How many replicas hold each address.
fn holders(children: &[Arc<MemLogDrive>]) -> BTreeMap<u64, usize> {
    let mut held = BTreeMap::new();
    for child in children {
        for address in child.contents().into_keys() {
            *held.entry(address).or_insert(0) += 1;
        }
    }
    held
}

/// A random state of `replicas` replicas for write quorum `qw` and window `k`.
fn state(draw: &mut Draw, replicas: usize, qw: usize, k: u64) -> Vec<Arc<MemLogDrive>> {
    let children: Vec<Arc<MemLogDrive>> = (0..replicas)
        .map(|_| Arc::new(MemLogDrive::new()))
        .collect();
    let t0 = draw.below(24);
    // One replica may have missed a range below T0 (it was down), when the others still
    // make a write quorum there.
    let rejoined = (qw < replicas && draw.below(2) == 0).then(|| draw.below(replicas as u64));
    let missed = {
        let start = draw.below(t0 + 1);
        start..start + draw.below(t0 - start + 1)
    };
    for (index, child) in children.iter().enumerate() {
        for address in 0..t0 {
            if rejoined == Some(index as u64) && missed.contains(&address) {
                continue;
            }
            wait(child.write(address, 0, value(address))).expect("write");
        }
    }
    for address in t0..t0 + k {
        let mask = draw.below(1 << replicas);
        for (index, child) in children.iter().enumerate() {
            if mask & (1 << index) != 0 {
                wait(child.write(address, 0, value(address))).expect("write");
            }
        }
    }
    children
}

fn quorum_over(children: &[Arc<MemLogDrive>], qw: usize) -> QuorumLogDrive {
    let drives = children
        .iter()
        .map(|child| Arc::clone(child) as Arc<dyn LogDrive>)
        .collect();
    QuorumLogDrive::new(drives, qw, QuorumOptions::default()).expect("quorum")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Theorem QLD.1 and LD.1 with repair: T_before <= T <= T_after, every slot below T is
    /// on Qw replicas after the scan, no hole was on Qw replicas before it, and with fewer
    /// than Qf replicas up the scan fails.
    #[test]
    fn a_quorum_window_scan_stays_between_the_tails_and_repairs_below_it(
        replicas in 1usize..=5,
        qw_pick in 0usize..5,
        k_pick in 0usize..4,
        seed in 1u64..u64::MAX,
        too_many_down in proptest::bool::weighted(0.2),
    ) {
        let qw = qw_pick % replicas + 1;
        let k = [1, 2, 4, 8][k_pick];
        let mut draw = Draw(seed);
        let children = state(&mut draw, replicas, qw, k);
        let drive = quorum_over(&children, qw);
        let qf = drive.tail_quorum();
        let down_most = replicas - qf;
        let down = if too_many_down { down_most + 1 } else { draw.below(down_most as u64 + 1) as usize };
        let start = draw.below(replicas as u64) as usize;
        for step in 0..down.min(replicas) {
            children[(start + step) % replicas].set_down(Some("down"));
        }
        let held_before = holders(&children);
        let t_before = abstract_t(&children, qw);
        let outcome = wait(drive.weak_tail(k));
        if too_many_down {
            prop_assert!(outcome.is_err(), "{} of {} down answered {:?}", down, replicas, outcome);
            return Ok(());
        }
        let tail = outcome.expect("the scan with Qf replicas up");
        let t_after = abstract_t(&children, qw);
        let t = tail.t();
        prop_assert!(t_before <= t && t <= t_after, "{} <= {} <= {}", t_before, t, t_after);
        let held_after = holders(&children);
        for address in 0..t {
            prop_assert!(held_after.get(&address).copied().unwrap_or(0) >= qw, "slot {}", address);
        }
        for hole in &tail.holes {
            prop_assert!(held_before.get(hole).copied().unwrap_or(0) < qw, "hole {}", hole);
            prop_assert!(*hole + k >= tail.n && *hole < tail.n);
        }
        prop_assert!(!tail.holes_below_window);
    }
}

/// One composition under test with the memory replicas it is made of.
struct Nested {
    top: Arc<dyn LogDrive>,
    leaves: Vec<Arc<MemLogDrive>>,
    /// Windows must be a multiple of this (the stripes' count).
    k_unit: u64,
}

fn leaves(count: usize) -> Vec<Arc<MemLogDrive>> {
    (0..count).map(|_| Arc::new(MemLogDrive::new())).collect()
}

/// Stripes of quorums (RAID-01) when `stripes_on_top`, else a quorum of stripes (RAID-10).
fn nested(stripes_on_top: bool, outer: usize, inner: usize, qw_pick: usize) -> Nested {
    let all = leaves(outer * inner);
    let as_dyn = |drive: &Arc<MemLogDrive>| Arc::clone(drive) as Arc<dyn LogDrive>;
    if stripes_on_top {
        let qw = qw_pick % inner + 1;
        let quorums = all
            .chunks(inner)
            .map(|group| {
                let drives = group.iter().map(as_dyn).collect();
                let quorum = QuorumLogDrive::new(drives, qw, QuorumOptions::default());
                Arc::new(quorum.expect("quorum")) as Arc<dyn LogDrive>
            })
            .collect();
        let top = StripedLogDrive::new(quorums).expect("stripes");
        return Nested {
            top: Arc::new(top),
            leaves: all,
            k_unit: outer as u64,
        };
    }
    let qw = qw_pick % outer + 1;
    let stripes = all
        .chunks(inner)
        .map(|group| {
            let drives = group.iter().map(as_dyn).collect();
            Arc::new(StripedLogDrive::new(drives).expect("stripes")) as Arc<dyn LogDrive>
        })
        .collect();
    let top = QuorumLogDrive::new(stripes, qw, QuorumOptions::default()).expect("quorum");
    Nested {
        top: Arc::new(top),
        leaves: all,
        k_unit: inner as u64,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// Random windowed writes through the top, with a random leaf down for some of them:
    /// then, everyone up, the composition's scan has every acknowledged address written
    /// (below N, not a hole), T at least the acknowledged contiguous prefix, and reads
    /// return every acknowledged value.
    #[test]
    fn nested_quorums_and_stripes_scan_and_read_what_was_acknowledged(
        stripes_on_top in proptest::bool::ANY,
        outer in 1usize..=3,
        inner in 1usize..=3,
        qw_pick in 0usize..3,
        multiple in 1u64..=4,
        seed in 1u64..u64::MAX,
        writes in 1usize..40,
    ) {
        let nested = nested(stripes_on_top, outer, inner, qw_pick);
        let k = nested.k_unit * multiple;
        let mut draw = Draw(seed);
        let mut acked = BTreeSet::new();
        let mut tried = BTreeSet::new();
        for _ in 0..writes {
            let prefix = (0..).find(|address| !acked.contains(address)).expect("prefix");
            let address = prefix + draw.below(k);
            if !tried.insert(address) {
                continue;
            }
            let down = (draw.below(3) == 0).then(|| draw.below(nested.leaves.len() as u64));
            if let Some(leaf) = down {
                nested.leaves[leaf as usize].set_down(Some("down for one write"));
            }
            if wait(nested.top.write(address, 0, value(address))).is_ok() {
                acked.insert(address);
            }
            if let Some(leaf) = down {
                nested.leaves[leaf as usize].set_down(None);
            }
        }
        let tail = wait(nested.top.weak_tail(k)).expect("scan with everyone up");
        let prefix = (0..).find(|address| !acked.contains(address)).expect("prefix");
        prop_assert!(tail.t() >= prefix, "T {} below the acknowledged prefix {}", tail.t(), prefix);
        for &address in &acked {
            prop_assert!(address < tail.n && !tail.holes.contains(&address), "{}", address);
            let read = wait(nested.top.read(address)).expect("read");
            prop_assert_eq!(read, ReadOutcome::Value(value(address)));
        }
        for address in 0..tail.t() {
            let read = wait(nested.top.read(address)).expect("read");
            prop_assert_eq!(read, ReadOutcome::Value(value(address)), "below T");
        }
    }
}
