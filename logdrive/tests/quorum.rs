//! The quorum LogDrive in the scenarios of docs/composition.md ("Quorums"), over in-memory
//! replicas with faults: the window scan's three quorums of LD-7 with their repairs, read
//! repair (LD-8), availability by quorum sizes (LD-9), fencing against a zombie writer
//! (BK-1, ZW-1), seal with fill and the rejoin of a replica that missed it (AZ-1..AZ-3),
//! damaged slots (the cascade: one, two or all holders damaged), scrub with its figures,
//! and hedging past a slow replica.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use sealog_logdrive::quorum::ScrubPace;
use sealog_logdrive::{
    wait, Clock, Length, LogDrive, LogDriveError, MemLogDrive, OpFuture, QuorumLogDrive,
    QuorumOptions, ReadOutcome, SystemClock, TailDesc,
};

fn value(address: u64) -> Bytes {
    Bytes::from(format!("value at {address}"))
}

/// `replicas` empty in-memory replicas.
fn replicas(replicas: usize) -> Vec<Arc<MemLogDrive>> {
    (0..replicas)
        .map(|_| Arc::new(MemLogDrive::new()))
        .collect()
}

fn quorum(children: &[Arc<MemLogDrive>], write_quorum: usize) -> QuorumLogDrive {
    let children = children
        .iter()
        .map(|child| Arc::clone(child) as Arc<dyn LogDrive>)
        .collect();
    QuorumLogDrive::new(children, write_quorum, QuorumOptions::default()).expect("quorum")
}

/// Writes `addresses` straight onto one replica, at epoch 0.
fn put(child: &MemLogDrive, addresses: impl IntoIterator<Item = u64>) {
    for address in addresses {
        wait(child.write(address, 0, value(address))).expect("replica write");
    }
}

fn read(drive: &dyn LogDrive, address: u64) -> ReadOutcome {
    wait(drive.read(address)).expect("read")
}

fn tail(drive: &dyn LogDrive, k: u64) -> TailDesc {
    wait(drive.weak_tail(k)).expect("weak_tail")
}

fn holes(addresses: &[u64]) -> BTreeSet<u64> {
    addresses.iter().copied().collect()
}

/// How many replicas hold `address` (damaged or not).
fn holding(children: &[Arc<MemLogDrive>], address: u64) -> usize {
    children
        .iter()
        .filter(|child| child.contents().contains_key(&address))
        .count()
}

fn bring_all_up(children: &[Arc<MemLogDrive>]) {
    for child in children {
        child.set_down(None);
    }
}

/// LD-7's start: R0 {0..9, 11, 12}, R1 {0..9, 12}, R2 {0..8, 10}.
fn ld_7_replicas() -> Vec<Arc<MemLogDrive>> {
    let children = replicas(3);
    put(&children[0], (0..10).chain([11, 12]));
    put(&children[1], (0..10).chain([12]));
    put(&children[2], (0..9).chain([10]));
    children
}

/// LD-7 with replica `down` down: the scan answers `expected` (N, holes); then every slot
/// below T is on Qw replicas, a later scan (everyone up) answers no smaller T, and a quorum
/// read of every slot below T returns its bytes.
fn ld_7_case(down: usize, expected: (u64, &[u64])) {
    let children = ld_7_replicas();
    let drive = quorum(&children, 2);
    children[down].set_down(Some("outside the quorum"));
    let scanned = tail(&drive, 4);
    assert_eq!(
        (scanned.n, scanned.holes.clone()),
        (expected.0, holes(expected.1))
    );
    let t = scanned.t();
    for address in 0..t {
        assert!(
            holding(&children, address) >= 2,
            "slot {address} below T {t}"
        );
    }
    bring_all_up(&children);
    for _ in 0..3 {
        assert!(tail(&drive, 4).t() >= t, "a later scan went below {t}");
    }
    for address in 0..t {
        assert_eq!(read(&drive, address), ReadOutcome::Value(value(address)));
    }
}

#[test]
fn ld_7_quorum_weak_tail_r0_r1() {
    ld_7_case(2, (13, &[10]));
}

#[test]
fn ld_7_quorum_weak_tail_r1_r2() {
    ld_7_case(0, (13, &[11]));
}

#[test]
fn ld_7_quorum_weak_tail_r0_r2() {
    ld_7_case(1, (13, &[]));
}

/// LD-8: slot 20 only on R0 (the writer crashed after one ack).
#[test]
fn ld_8_read_repair_makes_a_partial_write_durable() {
    let children = replicas(3);
    let drive = quorum(&children, 2);
    put(&children[0], [20]);
    children[0].set_down(Some("R0 outside the quorum"));
    assert_eq!(read(&drive, 20), ReadOutcome::Unwritten);
    bring_all_up(&children);
    children[2].set_down(Some("R2 outside the quorum"));
    assert_eq!(read(&drive, 20), ReadOutcome::Value(value(20)));
    assert!(holding(&children, 20) >= 2);
    for down in 0..3 {
        bring_all_up(&children);
        children[down].set_down(Some("one replica down"));
        for _ in 0..3 {
            assert_eq!(read(&drive, 20), ReadOutcome::Value(value(20)));
        }
    }
}

/// Writes 0..4 through a (Qw, 3) quorum with everyone up and scans the tail (as an
/// AtomicLog's checkTail would: reads below it need no repair), then takes R2 down.
fn with_r2_down(write_quorum: usize) -> (Vec<Arc<MemLogDrive>>, QuorumLogDrive) {
    let children = replicas(3);
    let drive = quorum(&children, write_quorum);
    for address in 0..4 {
        wait(drive.write(address, 0, value(address))).expect("write");
    }
    assert_eq!(tail(&drive, 4).t(), 4);
    children[2].set_down(Some("R2 down"));
    (children, drive)
}

#[test]
fn ld_9_availability_qw3_n3_one_down() {
    let (children, drive) = with_r2_down(3);
    for _ in 0..3 {
        assert_eq!(read(&drive, 1), ReadOutcome::Value(value(1)));
        assert_eq!(read(&drive, 9), ReadOutcome::Unwritten);
    }
    // A value on fewer than Qw replicas cannot be repaired to three: such a read fails
    // rather than answer a value a later read might not see.
    put(&children[0], [6]);
    for _ in 0..3 {
        match wait(drive.read(6)) {
            Ok(ReadOutcome::Unwritten) | Err(_) => {}
            other => panic!("a partial write read as {other:?}"),
        }
    }
    let failed = wait(drive.write(4, 0, value(4))).expect_err("a write needs all three");
    assert!(!failed.is_definite(), "two replicas took it: {failed:?}");
    assert!(wait(drive.weak_tail(4)).is_err(), "a scan needs all three");
}

#[test]
fn ld_9_availability_qw1_n3_one_down() {
    let (_children, drive) = with_r2_down(1);
    wait(drive.write(4, 0, value(4))).expect("a write needs one");
    assert!(
        wait(drive.read(9)).is_err(),
        "unwritten needs all three to say so"
    );
    assert!(wait(drive.weak_tail(4)).is_err(), "a scan needs all three");
}

#[test]
fn ld_9_availability_qw2_n3_one_down() {
    for down in 0..3 {
        let children = replicas(3);
        let drive = quorum(&children, 2);
        children[down].set_down(Some("one down"));
        for address in 0..4 {
            wait(drive.write(address, 0, value(address))).expect("write");
        }
        assert_eq!(read(&drive, 2), ReadOutcome::Value(value(2)));
        assert_eq!(read(&drive, 9), ReadOutcome::Unwritten);
        assert_eq!(tail(&drive, 4).t(), 4);
        assert_eq!(wait(drive.length()).expect("length").n, 4);
    }
}

#[test]
fn a_bad_write_quorum_is_refused() {
    let children = replicas(3);
    for write_quorum in [0, 4] {
        let children = children
            .iter()
            .map(|child| Arc::clone(child) as Arc<dyn LogDrive>)
            .collect();
        match QuorumLogDrive::new(children, write_quorum, QuorumOptions::default()) {
            Err(LogDriveError::OutOfRange { .. }) => {}
            Ok(_) => panic!("Qw {write_quorum} of 3 was accepted"),
            Err(other) => panic!("Qw {write_quorum} of 3 answered {other:?}"),
        }
    }
    assert!(QuorumLogDrive::new(Vec::new(), 1, QuorumOptions::default()).is_err());
}

/// Every replica's contents, for byte-identity checks.
fn contents(children: &[Arc<MemLogDrive>]) -> Vec<std::collections::BTreeMap<u64, Bytes>> {
    children.iter().map(|child| child.contents()).collect()
}

fn lengths(children: &[Arc<MemLogDrive>]) -> Vec<Length> {
    children
        .iter()
        .map(|child| wait(child.length()).expect("length"))
        .collect()
}

/// Replicas A, B, C (Qw = N = 3): 0..8 on all, `long` replicas hold 8..10 too.
fn az_replicas(long: &[usize]) -> (Vec<Arc<MemLogDrive>>, QuorumLogDrive) {
    let children = replicas(3);
    for child in &children {
        put(child, 0..8);
    }
    for &child in long {
        put(&children[child], 8..10);
    }
    let drive = quorum(&children, 3);
    (children, drive)
}

/// AZ-1: A, B at 10, C at 8, all reachable. The scan of the fenced replicas says T 8 (8
/// and 9 are on two of three: unwritten for Qr = 1), the seal drops 8..10 on A and B.
#[test]
fn az_1_all_reachable_seal_at_the_shortest() {
    let (children, drive) = az_replicas(&[0, 1]);
    wait(drive.fence(2)).expect("fence");
    let stop = tail(&drive, 4).t();
    assert_eq!(stop, 8);
    wait(drive.seal(stop, 2)).expect("seal");
    let all = contents(&children);
    assert!(all.iter().all(|held| *held == all[0] && held.len() == 8));
    assert!(lengths(&children)
        .iter()
        .all(|length| length.sealed == Some(8)));
    let late = wait(drive.write(9, 1, value(9))).expect_err("a stale write past the seal");
    assert!(matches!(late.cause(), LogDriveError::Fenced { .. }));
    assert_eq!(wait(drive.length()).expect("length").sealed, Some(8));
}

/// AZ-2: C (at 8) unreachable. The scan needs all three and fails; the coordinator takes
/// the reachable lengths (10, 10) as the stop, A and B are sealed at 10, C is owed the seal
/// and, once back, is filled to 10 and sealed: all three byte-identical.
#[test]
fn az_2_unreachable_short_replica_is_filled_when_it_returns() {
    let (children, drive) = az_replicas(&[0, 1]);
    children[2].set_down(Some("C unreachable"));
    wait(drive.fence(2)).expect("a fence needs Qr = 1");
    assert!(wait(drive.weak_tail(4)).is_err(), "a scan needs Qf = 3");
    let stop = reachable_stop(&children);
    assert_eq!(stop, 10);
    wait(drive.seal(stop, 2)).expect("seal");
    assert_eq!(drive.owed_seal(), vec![2]);
    assert_eq!(children[0].contents(), children[1].contents());
    children[2].set_down(None);
    wait(drive.rejoin(2)).expect("rejoin");
    assert!(drive.owed_seal().is_empty());
    let all = contents(&children);
    assert!(all.iter().all(|held| *held == all[0] && held.len() == 10));
    let c = wait(children[2].length()).expect("length");
    assert_eq!((c.sealed, c.fence), (Some(10), 2));
}

/// AZ-3: A (at 10) unreachable, B = C = 8: sealed at 8; A is truncated to 8 on its return.
#[test]
fn az_3_unreachable_long_replica_is_truncated_when_it_returns() {
    let (children, drive) = az_replicas(&[0]);
    children[0].set_down(Some("A unreachable"));
    wait(drive.fence(2)).expect("fence");
    let stop = reachable_stop(&children);
    assert_eq!(stop, 8);
    wait(drive.seal(stop, 2)).expect("seal");
    assert_eq!(drive.owed_seal(), vec![0]);
    children[0].set_down(None);
    wait(drive.rejoin(0)).expect("rejoin");
    let all = contents(&children);
    assert!(all.iter().all(|held| *held == all[0] && held.len() == 8));
    assert_eq!(wait(children[0].length()).expect("length").sealed, Some(8));
}

/// What a stream manager takes as the stop when the scan cannot run (Qw = N): the shortest
/// N of the replicas it reaches (with Qw = N every acknowledged write is on each of them).
fn reachable_stop(children: &[Arc<MemLogDrive>]) -> u64 {
    children
        .iter()
        .filter_map(|child| wait(child.length()).ok())
        .map(|length| length.n)
        .min()
        .expect("a reachable replica")
}

/// BK-1 and ZW-1: a writer at epoch 5 wrote 0..10; recovery fences at 6 with R2 down (Qr =
/// 2 acks). The zombie's write at 10 reaches only R2, below Qw: indeterminate, `Fenced`.
/// The scan takes answers only from the fenced R0 and R1, so R2's zombie slot does not
/// count; the seal at T drops it; the fence survives a restart.
#[test]
fn bk_1_zw_1_a_zombie_write_after_a_fence_cannot_reach_a_write_quorum() {
    let children = replicas(3);
    let writer = quorum(&children, 2);
    for address in 0..10 {
        wait(writer.write(address, 5, value(address))).expect("write");
    }
    let recovery = quorum(&children, 2);
    children[2].set_down(Some("R2 partitioned"));
    wait(recovery.fence(6)).expect("fence");
    children[2].set_down(None);
    let zombie = wait(writer.write(10, 5, value(10))).expect_err("the zombie's write");
    assert!(!zombie.is_definite(), "R2 took it: {zombie:?}");
    assert_eq!(zombie.cause(), &LogDriveError::Fenced { current: 6 });
    children[0].set_down(Some("restart"));
    children[0].set_down(None);
    assert_eq!(wait(children[0].length()).expect("length").fence, 6);
    let scanned = tail(&recovery, 4);
    assert_eq!(scanned.t(), 10);
    wait(recovery.seal(10, 6)).expect("seal");
    assert_eq!(read(&recovery, 10), ReadOutcome::Unwritten);
    let all = contents(&children);
    assert!(all.iter().all(|held| *held == all[0] && held.len() == 10));
}

/// After a fence only two of three (Qw = N = 3) could take, a scan fences the others again
/// before it counts them, and fails while one is still unreachable.
#[test]
fn a_scan_after_a_fence_counts_only_fenced_replicas() {
    let children = replicas(3);
    let drive = quorum(&children, 3);
    for address in 0..4 {
        wait(drive.write(address, 1, value(address))).expect("write");
    }
    children[2].set_down(Some("down for the fence"));
    wait(drive.fence(2)).expect("fence with Qr = 1");
    assert!(wait(drive.weak_tail(4)).is_err());
    children[2].set_down(None);
    assert_eq!(tail(&drive, 4).t(), 4);
    assert_eq!(wait(children[2].length()).expect("length").fence, 2);
}

#[test]
fn a_conflict_on_any_replica_is_reported_as_conflict() {
    let children = replicas(3);
    let drive = quorum(&children, 2);
    wait(children[0].write(3, 0, value(99))).expect("replica write");
    wait(children[1].write(3, 0, value(99))).expect("replica write");
    let failed = wait(drive.write(3, 0, value(3))).expect_err("conflict");
    assert_eq!(failed.cause(), &LogDriveError::Conflict { address: 3 });
    assert!(!failed.is_definite(), "R2 took the write");
}

#[test]
fn a_write_every_replica_refuses_definitely_is_definite() {
    let children = replicas(3);
    let drive = quorum(&children, 2);
    wait(drive.fence(4)).expect("fence");
    let failed = wait(drive.write(0, 3, value(0))).expect_err("fenced everywhere");
    assert_eq!(failed, LogDriveError::Fenced { current: 4 });
}

/// The cascade of seed 002, one replica of three damaged: reads answer the value and repair
/// it, and appends go on.
#[test]
fn a_record_damaged_on_one_replica_is_read_and_repaired() {
    let children = replicas(3);
    let drive = quorum(&children, 2);
    for address in 0..6 {
        wait(drive.write(address, 0, value(address))).expect("write");
    }
    assert!(children[1].damage(2));
    for _ in 0..3 {
        assert_eq!(read(&drive, 2), ReadOutcome::Value(value(2)));
    }
    assert_eq!(read(&*children[1], 2), ReadOutcome::Value(value(2)));
    wait(drive.write(6, 0, value(6))).expect("appends go on");
    assert_eq!(tail(&drive, 4).t(), 7);
}

/// Two of three damaged, the third holds it: the read answers it and repairs both.
#[test]
fn a_record_damaged_on_two_replicas_is_repaired_from_the_third() {
    let children = replicas(3);
    let drive = quorum(&children, 2);
    for address in 0..6 {
        wait(drive.write(address, 0, value(address))).expect("write");
    }
    assert!(children[0].damage(3) && children[1].damage(3));
    assert_eq!(read(&drive, 3), ReadOutcome::Value(value(3)));
    for child in &children {
        assert_eq!(read(&**child, 3), ReadOutcome::Value(value(3)));
    }
}

/// The only two holders damaged (the third never got the write): reads answer `Damaged`,
/// never `Unwritten` nor another value, and writes elsewhere go on.
#[test]
fn a_record_damaged_on_all_its_holders_reads_damaged() {
    let children = replicas(3);
    let drive = quorum(&children, 2);
    for address in 0..6 {
        wait(drive.write(address, 0, value(address))).expect("write");
    }
    assert!(children[2].forget(4));
    assert!(children[0].damage(4) && children[1].damage(4));
    for _ in 0..3 {
        assert_eq!(read(&drive, 4), ReadOutcome::Damaged);
    }
    for address in 6..9 {
        wait(drive.write(address, 0, value(address))).expect("writes go on");
    }
    assert_eq!(read(&drive, 7), ReadOutcome::Value(value(7)));
    assert_eq!(tail(&drive, 8).t(), 9, "a damaged slot counts as written");
}

/// A scrub of R1: three damaged slots and one missing are repaired from peers, one damaged
/// everywhere it was held is unrepairable; the figures and the counters say so.
#[test]
fn a_scrub_repairs_damaged_and_missing_slots_and_counts_them() {
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};
    let children = replicas(3);
    let drive = quorum(&children, 2);
    for address in 0..20 {
        wait(drive.write(address, 0, value(address))).expect("write");
    }
    for address in [3, 5, 7] {
        assert!(children[1].damage(address));
    }
    assert!(children[1].forget(9));
    assert!(children[1].damage(11) && children[0].damage(11) && children[2].forget(11));
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let pace = ScrubPace {
        slots_per_step: 4,
        pause: Duration::from_millis(1),
    };
    let stats = metrics::with_local_recorder(&recorder, || {
        wait(drive.scrub(1, 0..20, pace)).expect("scrub")
    });
    assert_eq!(
        (stats.checked, stats.repaired, stats.unrepairable),
        (20, 4, 1)
    );
    for address in [3, 5, 7, 9] {
        assert_eq!(
            read(&*children[1], address),
            ReadOutcome::Value(value(address))
        );
    }
    assert_eq!(read(&*children[1], 11), ReadOutcome::Damaged);
    let counters: Vec<(String, u64)> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter_map(|(key, _, _, value)| match value {
            DebugValue::Counter(count) => Some((key.key().name().to_string(), count)),
            _ => None,
        })
        .collect();
    for (name, expected) in [
        ("sealog_quorum_scrub_checked_total", 20),
        ("sealog_quorum_scrub_repaired_total", 4),
        ("sealog_quorum_scrub_unrepairable_total", 1),
    ] {
        assert!(
            counters.contains(&(name.to_string(), expected)),
            "{name} in {counters:?}"
        );
    }
}

/// A replica whose answers come `delay` late (its operations are issued at once).
struct Slow {
    inner: Arc<MemLogDrive>,
    delay: Duration,
}

impl Slow {
    fn late<T: Send + 'static>(&self, future: OpFuture<T>) -> OpFuture<T> {
        let sleep = SystemClock.sleep(self.delay);
        Box::pin(async move {
            sleep.await;
            future.await
        })
    }
}

impl LogDrive for Slow {
    fn write(&self, address: u64, epoch: u64, payload: Bytes) -> OpFuture<()> {
        self.late(self.inner.write(address, epoch, payload))
    }
    fn read(&self, address: u64) -> OpFuture<ReadOutcome> {
        self.late(self.inner.read(address))
    }
    fn weak_tail(&self, k: u64) -> OpFuture<TailDesc> {
        self.late(self.inner.weak_tail(k))
    }
    fn seal(&self, length: u64, epoch: u64) -> OpFuture<()> {
        self.late(self.inner.seal(length, epoch))
    }
    fn fence(&self, epoch: u64) -> OpFuture<()> {
        self.late(self.inner.fence(epoch))
    }
    fn trim(&self, upto: u64) -> OpFuture<()> {
        self.late(self.inner.trim(upto))
    }
    fn length(&self) -> OpFuture<Length> {
        self.late(self.inner.length())
    }
}

/// A (2, 3) quorum whose replica 1 answers 2 s late, with `hedge_after`.
fn with_a_slow_replica(hedge_after: Option<Duration>) -> QuorumLogDrive {
    let children = replicas(3);
    let drives: Vec<Arc<dyn LogDrive>> = children
        .iter()
        .enumerate()
        .map(|(index, child)| -> Arc<dyn LogDrive> {
            if index == 1 {
                Arc::new(Slow {
                    inner: Arc::clone(child),
                    delay: Duration::from_secs(2),
                })
            } else {
                Arc::clone(child) as Arc<dyn LogDrive>
            }
        })
        .collect();
    let options = QuorumOptions {
        hedge_after,
        clock: Arc::new(SystemClock),
    };
    QuorumLogDrive::new(drives, 2, options).expect("quorum")
}

/// Writes, reads (several, so the rotation puts the slow replica among the first asked)
/// and scans, each returning long before the slow replica answers.
fn none_waits_for_the_slow_replica(drive: &QuorumLogDrive) {
    let started = Instant::now();
    for address in 0..4 {
        wait(drive.write(address, 0, value(address))).expect("write");
    }
    for _ in 0..3 {
        for address in 0..5 {
            let _ = read(drive, address);
        }
        assert_eq!(tail(drive, 4).t(), 4);
    }
    let elapsed = started.elapsed();
    assert!(elapsed < Duration::from_millis(1500), "{elapsed:?}");
}

#[test]
fn hedging_reads_do_not_wait_for_a_slow_replica() {
    none_waits_for_the_slow_replica(&with_a_slow_replica(Some(Duration::from_millis(5))));
}

#[test]
fn without_hedging_every_replica_is_asked_and_the_first_answers_used() {
    none_waits_for_the_slow_replica(&with_a_slow_replica(None));
}
