//! The replicated simulation harness on toy logs: a correct one (a sequencer in memory whose
//! appends are written to three held replicas with a write quorum of two, one at a time)
//! must pass every seed, and broken ones (a check_tail that sometimes answers a stale tail;
//! an append acknowledged before its writes land) must be caught within 200 seeds, with the
//! command that replays the seed. `SEALOG_SIM_SEED` replays one seed, `SEALOG_SIM_SEEDS`
//! raises the count (docs/testing.md).

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use sealog_fault::replicated::{
    payload, run_seed, run_seeds, seeds, value_of, HeldLogDrive, LocalBoxFuture, SimClock,
    SimConfig, SimContext, SimError, SimFaults, SimLog,
};
use sealog_logdrive::{Clock, LogDrive, MemLogDrive, OpFuture, ReadOutcome};

/// How a toy log is broken, if it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Flaw {
    None,
    /// Every third check_tail answers the tail the one before it answered.
    StaleTail,
    /// An append is acknowledged once its writes are sent, before any lands.
    AckBeforeWrite,
}

/// A log of value ids at positions written to three replicas with a write quorum of two.
struct ToyLog {
    replicas: Vec<HeldLogDrive>,
    clock: SimClock,
    flaw: Flaw,
    state: RefCell<ToyState>,
}

#[derive(Default)]
struct ToyState {
    /// Positions below are in the log.
    committed: u64,
    /// An append that failed indeterminately: its position and value, to settle first.
    unsettled: Option<(u64, u64)>,
    /// Whether an append holds the turn, and who waits for it.
    busy: bool,
    waiting: Vec<Waker>,
    tail_calls: u64,
    last_tail: u64,
}

const WRITE_QUORUM: usize = 2;

fn build(flaw: Flaw) -> impl Fn(&mut SimContext<'_>) -> Vec<Rc<dyn SimLog>> {
    move |context| {
        let drives = (0..3).map(|_| Arc::new(MemLogDrive::new())).collect();
        let log = Rc::new(ToyLog {
            replicas: HeldLogDrive::replica_set(context.network, drives, WRITE_QUORUM),
            clock: context.clock.clone(),
            flaw,
            state: RefCell::new(ToyState::default()),
        });
        vec![Rc::new(ToyHandle(log)) as Rc<dyn SimLog>]
    }
}

/// The append turn: one append at a time.
struct Turn(Rc<ToyLog>);

impl Future for Turn {
    type Output = TurnHeld;

    fn poll(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<TurnHeld> {
        let mut state = self.0.state.borrow_mut();
        if state.busy {
            state.waiting.push(context.waker().clone());
            return Poll::Pending;
        }
        state.busy = true;
        Poll::Ready(TurnHeld(Rc::clone(&self.0)))
    }
}

struct TurnHeld(Rc<ToyLog>);

impl Drop for TurnHeld {
    fn drop(&mut self) {
        let mut state = self.0.state.borrow_mut();
        state.busy = false;
        for waker in state.waiting.drain(..) {
            waker.wake();
        }
    }
}

/// Ready once `quorum` of the writes succeeded (true) or too many failed (false).
struct Quorum {
    writes: Vec<Option<OpFuture<()>>>,
    acked: Vec<bool>,
    quorum: usize,
}

impl Future for Quorum {
    type Output = Vec<bool>;

    fn poll(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Vec<bool>> {
        let this = &mut *self;
        for (index, slot) in this.writes.iter_mut().enumerate() {
            if let Some(write) = slot {
                if let Poll::Ready(outcome) = write.as_mut().poll(context) {
                    this.acked[index] = outcome.is_ok();
                    *slot = None;
                }
            }
        }
        let acked = this.acked.iter().filter(|acked| **acked).count();
        let open = this.writes.iter().filter(|write| write.is_some()).count();
        if acked >= this.quorum || acked + open < this.quorum {
            return Poll::Ready(this.acked.clone());
        }
        Poll::Pending
    }
}

impl ToyLog {
    /// Writes `value` at `position` until a write quorum holds it, retrying the replicas
    /// that failed once: whether it got there.
    async fn write_quorum(&self, position: u64, value: u64) -> bool {
        let mut acked = vec![false; self.replicas.len()];
        for _ in 0..2 {
            let writes = self
                .replicas
                .iter()
                .zip(&acked)
                .map(|(replica, done)| (!done).then(|| replica.write(position, 0, payload(value))))
                .collect();
            let quorum = WRITE_QUORUM - acked.iter().filter(|done| **done).count();
            let round = Quorum {
                writes,
                acked: vec![false; acked.len()],
                quorum,
            };
            for (done, now) in acked.iter_mut().zip(round.await) {
                *done |= now;
            }
            if acked.iter().filter(|done| **done).count() >= WRITE_QUORUM {
                return true;
            }
            self.clock.sleep(Duration::from_millis(1)).await;
        }
        false
    }

    async fn append_one(self: Rc<Self>, value: u64) -> Result<u64, SimError> {
        let _turn = Turn(Rc::clone(&self)).await;
        let unsettled = self.state.borrow().unsettled;
        if let Some((position, earlier)) = unsettled {
            if !self.write_quorum(position, earlier).await {
                let reason = "an earlier append is still unsettled".to_owned();
                return Err(SimError::Definite(reason));
            }
            let mut state = self.state.borrow_mut();
            (state.committed, state.unsettled) = (position + 1, None);
        }
        let position = self.state.borrow().committed;
        if self.flaw == Flaw::AckBeforeWrite {
            for replica in &self.replicas {
                drop(replica.write(position, 0, payload(value)));
            }
            self.state.borrow_mut().committed = position + 1;
            return Ok(position);
        }
        self.state.borrow_mut().unsettled = Some((position, value));
        if !self.write_quorum(position, value).await {
            return Err(SimError::Indeterminate("no write quorum".to_owned()));
        }
        let mut state = self.state.borrow_mut();
        (state.committed, state.unsettled) = (position + 1, None);
        Ok(position)
    }

    async fn read_one(self: Rc<Self>, position: u64) -> Result<Option<u64>, SimError> {
        if position >= self.state.borrow().committed {
            return Ok(None);
        }
        let mut failed = 0;
        for offset in 0..self.replicas.len() {
            let replica = &self.replicas[(position as usize + offset) % self.replicas.len()];
            match replica.read(position).await {
                Ok(ReadOutcome::Value(bytes)) => return Ok(value_of(&bytes)),
                Ok(_) => {}
                Err(_) => failed += 1,
            }
        }
        if failed > 0 {
            return Err(SimError::Definite("no replica answered".to_owned()));
        }
        Ok(None)
    }

    fn tail(&self) -> u64 {
        let mut state = self.state.borrow_mut();
        state.tail_calls += 1;
        let tail = if self.flaw == Flaw::StaleTail && state.tail_calls % 3 == 0 {
            state.last_tail
        } else {
            state.committed
        };
        state.last_tail = state.committed;
        tail
    }
}

/// A client's handle on the shared toy log.
struct ToyHandle(Rc<ToyLog>);

impl SimLog for ToyHandle {
    fn append(&self, value: u64) -> LocalBoxFuture<Result<u64, SimError>> {
        Box::pin(Rc::clone(&self.0).append_one(value))
    }

    fn check_tail(&self) -> LocalBoxFuture<Result<u64, SimError>> {
        let tail = self.0.tail();
        Box::pin(async move { Ok(tail) })
    }

    fn read(&self, position: u64) -> LocalBoxFuture<Result<Option<u64>, SimError>> {
        Box::pin(Rc::clone(&self.0).read_one(position))
    }

    fn reconfigure(&self) -> LocalBoxFuture<Result<(), SimError>> {
        let sleep = self.0.clock.sleep(Duration::from_micros(500));
        Box::pin(async move {
            sleep.await;
            Ok(())
        })
    }
}

fn config(test: &str) -> SimConfig {
    let mut config = SimConfig::new("replicated", test);
    config.clients = 8;
    config.mix.reconfigure = 1;
    config
}

#[test]
fn a_correct_toy_log_passes_every_seed() {
    let config = config("a_correct_toy_log_passes_every_seed");
    let started = Instant::now();
    let report = run_seeds(&seeds(1000), &config, &build(Flaw::None))
        .unwrap_or_else(|failure| panic!("{failure}"));
    println!("toy log: {report} in {:?}", started.elapsed());
    if report.seeds >= 100 {
        assert!(report.indeterminate > 0 && report.reconfigurations > 0);
        let faults = report.faults;
        assert!(faults.dropped > 0 && faults.eio > 0 && faults.replies_lost > 0);
        assert!(faults.crashes > 0 && faults.slowed > 0 && faults.forgotten > 0);
        assert!(report.histories_checked + report.checker_unknown == report.seeds);
    }
}

#[test]
fn a_perfect_network_fails_no_operation() {
    let mut config = config("a_perfect_network_fails_no_operation");
    config.faults = SimFaults::none();
    let report = run_seeds(&seeds(50), &config, &build(Flaw::None))
        .unwrap_or_else(|failure| panic!("{failure}"));
    assert_eq!((report.indeterminate, report.definite), (0, 0));
    assert_eq!(report.faults.crashes + report.faults.dropped, 0);
}

#[test]
fn a_seed_replays_bit_for_bit() {
    let config = config("a_seed_replays_bit_for_bit");
    for seed in [3, 41] {
        let first = run_seed(seed, &config, &build(Flaw::None)).expect("passes");
        let again = run_seed(seed, &config, &build(Flaw::None)).expect("passes");
        assert_eq!(first.history, again.history);
        assert_eq!(first.report, again.report);
        assert!(first.history.operations.len() > 100);
    }
    let other = run_seed(4, &config, &build(Flaw::None)).expect("passes");
    let first = run_seed(3, &config, &build(Flaw::None)).expect("passes");
    assert_ne!(first.history, other.history);
}

/// Runs `flaw`'s toy log on up to 200 seeds: the first failure, which must come.
fn caught(test: &str, flaw: Flaw) -> String {
    let config = config(test);
    for seed in seeds(200) {
        if let Err(failure) = run_seed(seed, &config, &build(flaw)) {
            let message = failure.to_string();
            println!("{message}");
            let replay = format!("SEALOG_SIM_SEED={seed} cargo test -p sealog-fault");
            assert!(message.contains(&replay), "{message}");
            assert!(message.contains(&format!("--test replicated -- {test}")));
            assert!(failure.history.is_some_and(|path| path.exists()));
            return message;
        }
    }
    panic!("{flaw:?} was not caught in 200 seeds");
}

#[test]
fn a_stale_check_tail_is_caught() {
    let message = caught("a_stale_check_tail_is_caught", Flaw::StaleTail);
    assert!(message.contains("linearizable") || message.contains("went back"));
}

#[test]
fn an_append_acknowledged_before_its_writes_is_caught() {
    caught(
        "an_append_acknowledged_before_its_writes_is_caught",
        Flaw::AckBeforeWrite,
    );
}
