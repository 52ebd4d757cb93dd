//! [`Network`]: what stands between a simulation's logs and their replicas. Every operation
//! on a held replica is queued here when it is called, and completes only when the
//! simulation delivers it: the operation is applied to the replica then, and its outcome
//! resolves the caller's future. At each delivery the seed may instead lose the request,
//! answer EIO, or apply the operation and lose its reply; at each step it may crash a
//! replica (its pending operations fail; it is down for a while, then restarts holding what
//! it held), slow one (nothing is delivered to it for a while). A write whose reply is lost
//! on a replica that did not hold its address may be forgotten there at once, as a write
//! lost before it was durable, on fewer replicas of an address than its set's write quorum.
//! [`SimFaults`] gives each fault's probability, [`FaultCounts`] counts them.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use sealog_logdrive::{LogDriveError, MemLogDrive, OpFuture};

use crate::replicated::faults::{FaultCounts, SimFaults};
use crate::replicated::reply::reply;

/// How a pending operation ends.
#[derive(Clone, Debug)]
enum Fate {
    /// Not applied; the caller sees `Io { reason }`.
    Fail(&'static str),
    /// Applied; the caller sees its outcome, or an I/O error when the reply is lost.
    Apply { reply: bool },
}

/// A queued operation: it runs against its replica and answers whether it succeeded there.
type Run = Box<dyn FnOnce(&MemLogDrive, Fate) -> bool + Send>;

struct Pending {
    child: usize,
    /// The address, for a write.
    write: Option<u64>,
    run: Run,
}

struct Child {
    drive: Arc<MemLogDrive>,
    /// Its replica set.
    set: usize,
    down_until: Option<Duration>,
    slow_until: Duration,
}

#[derive(Default)]
struct NetState {
    faults: Option<SimFaults>,
    children: Vec<Child>,
    /// Each replica set's write quorum.
    quorums: Vec<usize>,
    pending: BTreeMap<u64, Pending>,
    submitted: u64,
    counts: FaultCounts,
    /// Writes forgotten, by (set, address).
    forgotten: BTreeMap<(usize, u64), usize>,
}

/// The simulation's network: see the module doc. One per simulation, shared in an `Arc`.
pub struct Network {
    state: Mutex<NetState>,
}

impl Network {
    /// A network with no replicas that injects `faults`.
    pub fn new(faults: SimFaults) -> Arc<Network> {
        let state = NetState {
            faults: Some(faults),
            ..NetState::default()
        };
        Arc::new(Network {
            state: Mutex::new(state),
        })
    }

    fn lock(&self) -> MutexGuard<'_, NetState> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Adds a replica set of `drives` written with `write_quorum`: the ids of its members.
    pub fn add_set(&self, drives: Vec<Arc<MemLogDrive>>, write_quorum: usize) -> Vec<usize> {
        let mut state = self.lock();
        let set = state.quorums.len();
        state.quorums.push(write_quorum);
        let first = state.children.len();
        for drive in drives {
            state.children.push(Child {
                drive,
                set,
                down_until: None,
                slow_until: Duration::ZERO,
            });
        }
        (first..state.children.len()).collect()
    }

    /// The replica `child`.
    pub fn drive(&self, child: usize) -> Arc<MemLogDrive> {
        Arc::clone(&self.lock().children[child].drive)
    }

    /// Queues `op` for `child` (`write`: the address, for a write): its future completes
    /// when the simulation delivers or fails it.
    pub fn submit<T: Send + 'static>(
        &self,
        child: usize,
        write: Option<u64>,
        op: impl FnOnce(&MemLogDrive) -> OpFuture<T> + Send + 'static,
    ) -> OpFuture<T> {
        let (sender, future) = reply();
        let run: Run = Box::new(move |drive, fate| {
            let outcome = match fate {
                Fate::Fail(reason) => Err(io(reason)),
                Fate::Apply { reply } => match (now_or_never(op(drive)), reply) {
                    (outcome, true) => outcome,
                    (outcome, false) => {
                        let applied = outcome.is_ok();
                        sender.send(Err(io("the reply was lost")));
                        return applied;
                    }
                },
            };
            let succeeded = outcome.is_ok();
            sender.send(outcome);
            succeeded
        });
        let mut state = self.lock();
        state.submitted += 1;
        let id = state.submitted;
        state.pending.insert(id, Pending { child, write, run });
        future
    }

    /// Sets the faults injected from now on.
    pub fn set_faults(&self, faults: SimFaults) {
        self.lock().faults = Some(faults);
    }

    /// Turns every fault off and brings every replica up and to speed, for a final check.
    pub fn heal(&self) {
        let mut state = self.lock();
        state.faults = Some(SimFaults::none());
        let state = &mut *state;
        for child in &mut state.children {
            if child.down_until.take().is_some() {
                child.drive.set_down(None);
                state.counts.restarts += 1;
            }
            child.slow_until = Duration::ZERO;
        }
    }

    /// Crashes every replica of `children` that is up, together (a server holding them all
    /// dies), until `until`: their pending operations fail, and they restart holding what
    /// they held. Counted as one crash.
    pub fn crash_together(&self, children: &[usize], until: Duration) {
        let mut state = self.lock();
        let mut failed = Vec::new();
        for &crashed in children {
            let child = &mut state.children[crashed];
            if child.down_until.is_some_and(|down| down >= until) {
                continue;
            }
            failed.extend(state.take_down(crashed, until, "the server is down"));
        }
        state.counts.crashes += 1;
        drop(state);
        for (pending, drive) in failed {
            (pending.run)(&drive, Fate::Fail("the server crashed"));
        }
    }

    /// Delivers nothing to `children` before `until` (a server cut off from the network
    /// whose requests wait, as TCP's retransmissions do, until the link is back). Counted
    /// as one slow spell.
    pub fn hold_back(&self, children: &[usize], until: Duration) {
        let mut state = self.lock();
        for &child in children {
            let child = &mut state.children[child];
            child.slow_until = child.slow_until.max(until);
        }
        state.counts.slowed += 1;
    }

    /// How many of each fault were injected so far.
    pub fn counts(&self) -> FaultCounts {
        self.lock().counts
    }

    /// Operations queued and not yet delivered.
    pub fn pending(&self) -> usize {
        self.lock().pending.len()
    }
}

fn io(reason: &str) -> LogDriveError {
    LogDriveError::Io {
        reason: reason.to_owned(),
    }
}

/// The outcome of an operation of a [`MemLogDrive`], whose futures are ready at once.
fn now_or_never<T>(mut future: OpFuture<T>) -> Result<T, LogDriveError> {
    let mut context = Context::from_waker(Waker::noop());
    match future.as_mut().poll(&mut context) {
        Poll::Ready(outcome) => outcome,
        Poll::Pending => Err(io("a held replica's operation did not complete at once")),
    }
}

/// The simulation's steps: what the driver calls to move the network on.
impl Network {
    /// Whether some pending operation can be delivered at `now` (restarting the replicas
    /// whose down time ended).
    pub fn can_deliver(&self, now: Duration) -> bool {
        let mut state = self.lock();
        state.restart_due(now);
        let children = &state.children;
        state
            .pending
            .values()
            .any(|pending| children[pending.child].slow_until <= now)
    }

    /// When something held back next happens: a restart, or a slow replica with pending
    /// operations catching up.
    pub fn next_event(&self, now: Duration) -> Option<Duration> {
        let state = self.lock();
        let restarts = state.children.iter().filter_map(|child| child.down_until);
        let slow = state.pending.values().filter_map(|pending| {
            let until = state.children[pending.child].slow_until;
            (until > now).then_some(until)
        });
        restarts.chain(slow).min()
    }

    /// Draws this step's faults on replicas: a crash, a slow spell.
    pub fn inject(&self, rng: &mut ChaCha8Rng, now: Duration) {
        let mut state = self.lock();
        let Some(faults) = state.faults.clone() else {
            return;
        };
        let failed = if rng.gen_bool(faults.crash) {
            state.crash_one(rng, now, &faults)
        } else {
            Vec::new()
        };
        if rng.gen_bool(faults.slow) && !state.children.is_empty() {
            let child = rng.gen_range(0..state.children.len());
            let spell = random_duration(rng, faults.slow_for_max);
            state.children[child].slow_until = now + spell;
            state.counts.slowed += 1;
        }
        drop(state);
        for (pending, drive) in failed {
            (pending.run)(&drive, Fate::Fail("the replica crashed"));
        }
    }

    /// Delivers one pending operation that can be delivered, picked with `rng`, after
    /// drawing its fault; false when none can be.
    pub fn deliver_one(&self, rng: &mut ChaCha8Rng, now: Duration) -> bool {
        let mut state = self.lock();
        state.restart_due(now);
        let ready: Vec<u64> = state
            .pending
            .iter()
            .filter(|(_, pending)| state.children[pending.child].slow_until <= now)
            .map(|(id, _)| *id)
            .collect();
        if ready.is_empty() {
            return false;
        }
        let id = ready[rng.gen_range(0..ready.len())];
        let pending = state.pending.remove(&id).expect("a listed operation");
        let fate = state.draw_fate(rng);
        let drive = Arc::clone(&state.children[pending.child].drive);
        drop(state);
        let (child, write) = (pending.child, pending.write);
        let fresh = write.filter(|address| !drive.holds(*address));
        let succeeded = (pending.run)(&drive, fate.clone());
        if let (Some(address), true, Fate::Apply { reply: false }) = (fresh, succeeded, fate) {
            let mut state = self.lock();
            let forget = state.faults.as_ref().map_or(0.0, |faults| faults.forget);
            if rng.gen_bool(forget) {
                state.forget(child, address);
            }
        }
        true
    }
}

impl NetState {
    fn restart_due(&mut self, now: Duration) {
        for child in &mut self.children {
            if child.down_until.is_some_and(|until| until <= now) {
                child.down_until = None;
                child.drive.set_down(None);
                self.counts.restarts += 1;
            }
        }
    }

    fn draw_fate(&mut self, rng: &mut ChaCha8Rng) -> Fate {
        let faults = self.faults.clone().unwrap_or_else(SimFaults::none);
        let draw: f64 = rng.gen();
        let mut bound = faults.drop_request;
        if draw < bound {
            self.counts.dropped += 1;
            return Fate::Fail("the request was lost");
        }
        bound += faults.eio;
        if draw < bound {
            self.counts.eio += 1;
            return Fate::Fail("EIO");
        }
        bound += faults.lose_reply;
        if draw < bound {
            self.counts.replies_lost += 1;
            return Fate::Apply { reply: false };
        }
        self.counts.delivered += 1;
        Fate::Apply { reply: true }
    }

    /// Crashes a replica that is up, if fewer than the most are down: its pending
    /// operations, to fail once the lock is released.
    fn crash_one(
        &mut self,
        rng: &mut ChaCha8Rng,
        now: Duration,
        faults: &SimFaults,
    ) -> Vec<(Pending, Arc<MemLogDrive>)> {
        let up: Vec<usize> = (0..self.children.len())
            .filter(|child| self.children[*child].down_until.is_none())
            .collect();
        if up.is_empty() || self.children.len() - up.len() >= faults.down_max {
            return Vec::new();
        }
        let crashed = up[rng.gen_range(0..up.len())];
        let down_for = random_duration(rng, faults.down_for_max);
        self.counts.crashes += 1;
        self.take_down(crashed, now + down_for, "the replica is down")
    }

    /// Takes `crashed` down until `until`: its pending operations, to fail once the lock
    /// is released.
    fn take_down(
        &mut self,
        crashed: usize,
        until: Duration,
        reason: &str,
    ) -> Vec<(Pending, Arc<MemLogDrive>)> {
        let child = &mut self.children[crashed];
        child.down_until = Some(until);
        child.drive.set_down(Some(reason));
        let drive = Arc::clone(&child.drive);
        let ids: Vec<u64> = self
            .pending
            .iter()
            .filter(|(_, pending)| pending.child == crashed)
            .map(|(id, _)| *id)
            .collect();
        self.counts.failed_by_crash += ids.len() as u64;
        ids.into_iter()
            .filter_map(|id| self.pending.remove(&id))
            .map(|pending| (pending, Arc::clone(&drive)))
            .collect()
    }

    /// Forgets the write at `address` that `child` just took, where its set allows one more
    /// replica of the address to forget.
    fn forget(&mut self, child: usize, address: u64) {
        let set = self.children[child].set;
        let forgotten = self.forgotten.get(&(set, address)).copied().unwrap_or(0);
        if forgotten + 1 >= self.quorums[set] {
            return;
        }
        if self.children[child].drive.forget(address) {
            *self.forgotten.entry((set, address)).or_insert(0) += 1;
            self.counts.forgotten += 1;
        }
    }
}

/// A duration in (0, `most`], to the microsecond (zero when `most` is).
fn random_duration(rng: &mut ChaCha8Rng, most: Duration) -> Duration {
    let micros = most.as_micros().min(u128::from(u64::MAX)) as u64;
    if micros == 0 {
        return Duration::ZERO;
    }
    Duration::from_micros(rng.gen_range(1..=micros))
}
