//! The LogDrive workload the crash tests run: one long-lived LogDrive (the ledger, id 1)
//! written all along and trimmed behind, so its records pin the ring's head, while others
//! (ids 2 to 8) are created, written, sealed, fenced, trimmed and deleted around it, ids
//! reused so that creations take new generations, and now and then all of them deleted at
//! once (so the ring's head can pass every record of the newest generations). Operations go
//! in groups of one to six, pipelined (a seal or fence, or a trim, may race writes of its
//! LogDrive), and the group is waited for before the next; the reclaimer runs between
//! groups (the caller's) and sometimes while a group is in flight (a deletion not yet
//! durable among it). Every operation is told to a [`Journal`] when issued and when done:
//! the trace of a simulated drive, or the lines a writer process prints for its parent.

use std::collections::BTreeMap;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sealog_logdrive::{
    wait, LocalLogDrive, LogDrive, LogDriveError, LogDriveStore, OpFuture, ReclaimStats,
};

use super::model::{payload, Fact, Op, Status, CAPACITY};

/// The ledger's id.
pub const LEDGER: u64 = 1;
/// The other LogDrives' ids: 2 to this.
const ID_MAX: u64 = 8;
/// LogDrives live besides the ledger, at most.
const OTHERS_MAX: usize = 4;
/// Addresses the ledger keeps behind its contiguous tail before it trims.
const LEDGER_KEPT: u64 = 48;
/// The chance a group starts by deleting every LogDrive but the ledger.
const SWEEP_CHANCE: f64 = 0.015;
/// Groups after a sweep without creations.
const QUIET_GROUPS: u32 = 12;
/// The chance a group runs the reclaimer while its operations are in flight.
const RECLAIM_IN_FLIGHT_CHANCE: f64 = 0.15;

/// How an operation ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Acknowledged.
    Done,
    /// A creation acknowledged, with its generation.
    Created(u64),
    /// Refused or failed.
    Failed(LogDriveError),
}

impl Outcome {
    /// Whether the operation may have taken effect without being acknowledged.
    pub fn indeterminate(&self) -> bool {
        matches!(self, Outcome::Failed(error) if !error.is_definite())
    }
}

/// Hears of every operation issued and done.
pub trait Journal {
    /// Operation `index` is about to be issued.
    fn issued(&mut self, index: usize, op: &Op);
    /// Operation `index` ended with `outcome`.
    fn done(&mut self, index: usize, op: &Op, outcome: &Outcome);
}

/// An operation and how it ended (`None` while in flight).
#[derive(Clone, Debug)]
pub struct Logged {
    /// The operation.
    pub op: Op,
    /// Its outcome.
    pub outcome: Option<Outcome>,
}

/// How a group went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// Every operation answered as the store should.
    Going,
    /// The store stopped (a failed drive): nothing more will be acknowledged.
    Stopped,
}

/// A live LogDrive as the workload drives it.
struct Active {
    handle: LocalLogDrive,
    generation: u64,
    /// The next address never written.
    next: u64,
    /// Addresses below `next` left unwritten to be written later (holes).
    holes: Vec<u64>,
    /// The epoch writes carry (the fence's, once fenced).
    epoch: u64,
    /// A seal was issued.
    sealed: bool,
    /// The highest trim point issued (a seal below it is refused).
    first: u64,
    /// Writes issued.
    writes: u64,
}

/// The workload's state and its log of operations.
pub struct Workload {
    rng: ChaCha8Rng,
    drives: BTreeMap<u64, Active>,
    /// Every operation issued, in order.
    pub log: Vec<Logged>,
    /// The highest generation this workload knows issued: a creation must take more.
    generation_floor: u64,
    /// A write found the ring full, or a group deleted every LogDrive but the ledger:
    /// reclaim before the next group.
    pub ring_full: bool,
    /// A create, delete, seal, fence or trim failed indeterminately, or a write did: the
    /// store stopped.
    stopped: bool,
    /// Groups left without creations (after a sweep).
    quiet: u32,
    /// The first operation that failed as if the drive stopped: none after it may be
    /// acknowledged (fail-stop).
    failed_at: Option<usize>,
    /// The LogDrives (id, generation) a seal was issued for.
    sealed: std::collections::BTreeSet<(u64, u64)>,
    /// LogDrives whose deletion is in flight, by the deletion's index (back to `drives` if
    /// it is refused).
    deleting: BTreeMap<usize, (u64, Active)>,
    /// What the reclaimer did, summed over this workload's calls.
    pub relocated_records: u64,
    /// Ring trims the reclaimer made in this workload's calls.
    pub ring_trims: u64,
}

/// The operations of one group in flight: creations apart, for they answer with a handle.
#[derive(Default)]
struct Group {
    /// Operations issued, by their index in the log.
    flying: Vec<(usize, OpFuture<()>)>,
    /// Creations issued: the id, the index in the log, and the creation.
    creating: Vec<(u64, usize, OpFuture<LocalLogDrive>)>,
}

/// One of `ids`, drawn.
fn pick(rng: &mut ChaCha8Rng, ids: &[u64]) -> u64 {
    ids[rng.gen_range(0..ids.len())]
}

fn violation(what: String) -> String {
    format!("the store misbehaved live: {what}")
}

impl Workload {
    /// A workload on `store`, which may hold LogDrives already (a reopened ring): it goes on
    /// with them. `generation_floor` is the highest generation known issued before.
    pub fn resume(store: &LogDriveStore, seed: u64, generation_floor: u64) -> Workload {
        let mut drives = BTreeMap::new();
        let mut floor = generation_floor;
        for id in store.ids().unwrap_or_default() {
            let Ok(handle) = store.get(id) else {
                continue;
            };
            let Ok(length) = wait(handle.length()) else {
                continue;
            };
            let k = super::model::tail_window(length.n, length.first);
            let Ok(tail) = wait(handle.weak_tail(k)) else {
                continue;
            };
            // Holes below the window (more than the store answers for, never in these
            // workloads) are left unwritten: the workload only fills the ones it knows.
            floor = floor.max(handle.generation());
            let holes = tail.holes.into_iter().collect();
            drives.insert(
                id,
                Active {
                    generation: handle.generation(),
                    handle,
                    next: length.n,
                    holes,
                    epoch: length.fence.max(1),
                    sealed: length.sealed.is_some(),
                    first: length.first,
                    writes: 0,
                },
            );
        }
        Workload {
            rng: ChaCha8Rng::seed_from_u64(seed),
            drives,
            log: Vec::new(),
            generation_floor: floor,
            ring_full: false,
            stopped: false,
            deleting: BTreeMap::new(),
            sealed: std::collections::BTreeSet::new(),
            failed_at: None,
            quiet: 0,
            relocated_records: 0,
            ring_trims: 0,
        }
    }

    fn issue(&mut self, op: Op, journal: &mut dyn Journal) -> usize {
        let index = self.log.len();
        journal.issued(index, &op);
        self.log.push(Logged { op, outcome: None });
        index
    }

    fn finish(
        &mut self,
        index: usize,
        outcome: Outcome,
        journal: &mut dyn Journal,
    ) -> Result<(), String> {
        let op = self.log[index].op;
        journal.done(index, &op, &outcome);
        self.log[index].outcome = Some(outcome.clone());
        if let Some((id, active)) = self.deleting.remove(&index) {
            if matches!(&outcome, Outcome::Failed(error) if error.is_definite()) {
                self.drives.insert(id, active);
            }
        }
        // (A reclaim_now that finds nothing to do answers Ok on a stopped drive: it makes
        // nothing durable.)
        let acknowledged =
            matches!(outcome, Outcome::Done | Outcome::Created(_)) && op != Op::Reclaim;
        if let Some(failed) = self
            .failed_at
            .filter(|failed| acknowledged && index > *failed)
        {
            return Err(violation(format!(
                "{op:?} was acknowledged after operation {failed} found the drive stopped"
            )));
        }
        let error = match outcome {
            Outcome::Done => return Ok(()),
            Outcome::Created(generation) => {
                if generation <= self.generation_floor {
                    return Err(violation(format!(
                        "a creation took generation {generation}, not above {}",
                        self.generation_floor
                    )));
                }
                self.generation_floor = generation;
                return Ok(());
            }
            Outcome::Failed(error) => error,
        };
        self.failed(index, op, &error)
    }

    /// Operation `index` failed with `error`: a stopped drive, a full ring, or a refusal the
    /// workload asked for are expected (and remembered); anything else is a violation.
    fn failed(&mut self, index: usize, op: Op, error: &LogDriveError) -> Result<(), String> {
        match (&op, error) {
            (_, LogDriveError::Stopped { .. } | LogDriveError::Io { .. }) => {
                self.stopped = true;
                if op != Op::Reclaim {
                    self.failed_at = Some(self.failed_at.map_or(index, |failed| failed.min(index)));
                }
                Ok(())
            }
            (_, LogDriveError::RingFull) => {
                self.ring_full = true;
                if let Op::Write { id, address, .. } = op {
                    if let Some(active) = self.drives.get_mut(&id) {
                        active.holes.push(address);
                    }
                }
                Ok(())
            }
            // The workload wrote below its fence on purpose: the address is written later.
            (Op::Write { id, address, .. }, LogDriveError::Fenced { .. }) => {
                if let Some(active) = self.drives.get_mut(id) {
                    active.holes.push(*address);
                }
                Ok(())
            }
            // ... or past its seal.
            (Op::Write { .. }, LogDriveError::Sealed { .. }) => Ok(()),
            // A trim past a seal issued before it (at T, which was past the sealed length).
            (Op::Trim { id, generation, .. }, LogDriveError::OutOfRange { .. })
                if self.sealed.contains(&(*id, *generation)) =>
            {
                Ok(())
            }
            _ => Err(violation(format!("{op:?} answered {error}"))),
        }
    }

    /// Creates the ledger if the store has none, and waits for it.
    pub fn start(
        &mut self,
        store: &LogDriveStore,
        journal: &mut dyn Journal,
    ) -> Result<Progress, String> {
        if !self.drives.contains_key(&LEDGER) {
            let index = self.issue(
                Op::Create {
                    id: LEDGER,
                    capacity: CAPACITY,
                },
                journal,
            );
            let outcome = wait(store.create(LEDGER, CAPACITY));
            self.created(LEDGER, index, outcome, journal)?;
        }
        Ok(self.progress())
    }

    fn progress(&self) -> Progress {
        if self.stopped {
            Progress::Stopped
        } else {
            Progress::Going
        }
    }

    fn created(
        &mut self,
        id: u64,
        index: usize,
        outcome: Result<LocalLogDrive, LogDriveError>,
        journal: &mut dyn Journal,
    ) -> Result<(), String> {
        match outcome {
            Ok(handle) => {
                let generation = handle.generation();
                self.finish(index, Outcome::Created(generation), journal)?;
                self.drives.insert(
                    id,
                    Active {
                        handle,
                        generation,
                        next: 0,
                        holes: Vec::new(),
                        epoch: 1,
                        sealed: false,
                        first: 0,
                        writes: 0,
                    },
                );
                Ok(())
            }
            Err(error) => self.finish(index, Outcome::Failed(error), journal),
        }
    }

    /// One group of operations, issued together and waited for.
    pub fn step(
        &mut self,
        store: &LogDriveStore,
        journal: &mut dyn Journal,
    ) -> Result<Progress, String> {
        let mut group = Group::default();
        let sweep = self.rng.gen_bool(SWEEP_CHANCE);
        if sweep {
            self.sweep(store, journal, &mut group);
        }
        self.quiet = self.quiet.saturating_sub(1);
        let count = if sweep { 0 } else { self.rng.gen_range(1..=6) };
        for _ in 0..count {
            self.operation(store, journal, &mut group);
        }
        if self.rng.gen_bool(RECLAIM_IN_FLIGHT_CHANCE) {
            // The reclaimer walks while the group is in flight, as the background one does: a
            // deletion not yet known durable holds the walk.
            self.reclaim(store, journal)?;
        }
        for (index, future) in group.flying {
            let outcome = match wait(future) {
                Ok(()) => Outcome::Done,
                Err(error) => Outcome::Failed(error),
            };
            self.finish(index, outcome, journal)?;
        }
        for (id, index, future) in group.creating {
            self.created(id, index, wait(future), journal)?;
        }
        Ok(self.progress())
    }

    /// Every LogDrive but the ledger deleted, the ring reclaimed after and no creation for a
    /// while: the head passes every record of the newest generations, which only the
    /// generation record relocation writes then carries.
    fn sweep(&mut self, store: &LogDriveStore, journal: &mut dyn Journal, group: &mut Group) {
        for id in self.others() {
            group.flying.push(self.delete(id, store, journal));
        }
        // The ledger trimmed to its T: everything before the sweep is garbage.
        group.flying.extend(self.trim_to_tail(LEDGER, journal));
        self.ring_full = true;
        self.quiet = QUIET_GROUPS;
    }

    /// One operation of a group, drawn: a write (to the ledger or another LogDrive), a
    /// creation, a deletion, a seal (perhaps with a trim racing it), a fence or a trim.
    fn operation(&mut self, store: &LogDriveStore, journal: &mut dyn Journal, group: &mut Group) {
        let roll = self.rng.gen_range(0..100);
        let others = self.others();
        match roll {
            0..=39 if self.drives.contains_key(&LEDGER) => {
                group.flying.extend(self.write(LEDGER, journal));
            }
            40..=71 if !others.is_empty() => {
                let id = pick(&mut self.rng, &others);
                group.flying.extend(self.write(id, journal));
            }
            72..=77 if others.len() + group.creating.len() < OTHERS_MAX && self.quiet == 0 => {
                self.create_other(store, journal, group);
            }
            78..=81 if !others.is_empty() => {
                let id = pick(&mut self.rng, &others);
                if self.drives[&id].writes < 8 && self.rng.gen_bool(0.7) {
                    return;
                }
                group.flying.push(self.delete(id, store, journal));
            }
            82..=84 if !others.is_empty() => {
                let id = pick(&mut self.rng, &others);
                group.flying.extend(self.seal(id, journal));
                // A trim racing the seal (at T, which may lie past the sealed length).
                if self.rng.gen_bool(0.5) {
                    group.flying.extend(self.trim(id, journal));
                }
            }
            85..=89 => group.flying.extend(self.fence(journal)),
            90..=99 => {
                let ids: Vec<u64> = self.drives.keys().copied().collect();
                if ids.is_empty() {
                    return;
                }
                let id = if self.rng.gen_bool(0.5) && self.drives.contains_key(&LEDGER) {
                    LEDGER
                } else {
                    pick(&mut self.rng, &ids)
                };
                group.flying.extend(self.trim(id, journal));
            }
            _ => {}
        }
    }

    /// A creation of a LogDrive under a free id (none live, being deleted or created).
    fn create_other(
        &mut self,
        store: &LogDriveStore,
        journal: &mut dyn Journal,
        group: &mut Group,
    ) {
        let free: Vec<u64> = (2..=ID_MAX)
            .filter(|id| {
                !self.drives.contains_key(id)
                    && !self.deleting.values().any(|(deleting, _)| deleting == id)
                    && !group.creating.iter().any(|(creating, _, _)| creating == id)
            })
            .collect();
        if free.is_empty() {
            return;
        }
        let id = pick(&mut self.rng, &free);
        let index = self.issue(
            Op::Create {
                id,
                capacity: CAPACITY,
            },
            journal,
        );
        group.creating.push((id, index, store.create(id, CAPACITY)));
    }

    /// A deletion of live LogDrive `id`, which is set aside until it is answered (back to
    /// the live ones if it is refused).
    fn delete(
        &mut self,
        id: u64,
        store: &LogDriveStore,
        journal: &mut dyn Journal,
    ) -> (usize, OpFuture<()>) {
        let active = self.drives.remove(&id).expect("live");
        let generation = active.generation;
        let index = self.issue(Op::Delete { id, generation }, journal);
        let future = store.delete(id);
        self.deleting.insert(index, (id, active));
        (index, future)
    }

    /// A fence of a drawn live LogDrive at the epoch after its own.
    fn fence(&mut self, journal: &mut dyn Journal) -> Option<(usize, OpFuture<()>)> {
        let ids: Vec<u64> = self.drives.keys().copied().collect();
        if ids.is_empty() {
            return None;
        }
        let id = pick(&mut self.rng, &ids);
        let active = self.drives.get_mut(&id).expect("live");
        active.epoch += 1;
        let (epoch, handle) = (active.epoch, active.handle.clone());
        let op = Op::Fence {
            id,
            generation: active.generation,
            epoch,
        };
        let index = self.issue(op, journal);
        Some((index, handle.fence(epoch)))
    }

    /// A write to LogDrive `id`: a hole left earlier, the next address, or (now and then)
    /// the one after it, leaving a hole; past the seal or below the fence now and then, to
    /// be refused.
    fn write(&mut self, id: u64, journal: &mut dyn Journal) -> Option<(usize, OpFuture<()>)> {
        let rng = &mut self.rng;
        let active = self.drives.get_mut(&id)?;
        if active.sealed && !rng.gen_bool(0.1) {
            return None;
        }
        let address = if !active.holes.is_empty() && rng.gen_bool(0.6) {
            let index = rng.gen_range(0..active.holes.len());
            active.holes.swap_remove(index)
        } else if id != LEDGER && rng.gen_bool(0.1) {
            active.holes.push(active.next);
            active.next += 2;
            active.next - 1
        } else {
            active.next += 1;
            active.next - 1
        };
        let epoch = if active.epoch > 1 && rng.gen_bool(0.03) {
            active.epoch - 1
        } else {
            active.epoch
        };
        active.writes += 1;
        let op = Op::Write {
            id,
            generation: active.generation,
            address,
            epoch,
        };
        let (handle, bytes) = (
            active.handle.clone(),
            payload(id, active.generation, address),
        );
        // Told before it is issued: its record cannot reach the drive before the journal.
        let index = self.issue(op, journal);
        Some((index, handle.write(address, epoch, bytes)))
    }

    /// A seal of LogDrive `id` at or a little below its next address (dropping what is
    /// written there).
    fn seal(&mut self, id: u64, journal: &mut dyn Journal) -> Option<(usize, OpFuture<()>)> {
        let active = self.drives.get_mut(&id)?;
        if active.sealed {
            return None;
        }
        let floor = active.first.max(active.next.saturating_sub(2));
        let target = self.rng.gen_range(floor..=active.next.max(floor));
        active.sealed = true;
        self.sealed.insert((id, active.generation));
        let op = Op::Seal {
            id,
            generation: active.generation,
            length: target,
        };
        let (handle, epoch) = (active.handle.clone(), active.epoch);
        let index = self.issue(op, journal);
        // Sealed by the newest epoch fenced: a seal below the fence is refused.
        Some((index, handle.seal(target, epoch)))
    }

    /// A trim of LogDrive `id` at or below its contiguous tail (the ledger keeps its last
    /// [`LEDGER_KEPT`] addresses).
    fn trim(&mut self, id: u64, journal: &mut dyn Journal) -> Option<(usize, OpFuture<()>)> {
        let kept = if id == LEDGER {
            LEDGER_KEPT
        } else {
            self.rng.gen_range(0..4)
        };
        self.trim_below(id, kept, journal)
    }

    /// The live LogDrives other than the ledger.
    fn others(&self) -> Vec<u64> {
        self.drives
            .keys()
            .copied()
            .filter(|id| *id != LEDGER)
            .collect()
    }

    /// A trim of LogDrive `id` at its contiguous tail.
    fn trim_to_tail(
        &mut self,
        id: u64,
        journal: &mut dyn Journal,
    ) -> Option<(usize, OpFuture<()>)> {
        self.trim_below(id, 0, journal)
    }

    /// A trim of LogDrive `id` keeping the last `kept` addresses below its contiguous tail.
    fn trim_below(
        &mut self,
        id: u64,
        kept: u64,
        journal: &mut dyn Journal,
    ) -> Option<(usize, OpFuture<()>)> {
        let active = self.drives.get_mut(&id)?;
        let length = wait(active.handle.length()).ok()?;
        let upto = length.t.saturating_sub(kept);
        if upto <= length.first.max(active.first) {
            return None;
        }
        active.first = upto;
        let op = Op::Trim {
            id,
            generation: active.generation,
            upto,
        };
        let handle = active.handle.clone();
        let index = self.issue(op, journal);
        Some((index, handle.trim(upto)))
    }

    /// Runs the reclaimer once (`reclaim_now`), as an operation of the log.
    pub fn reclaim(
        &mut self,
        store: &LogDriveStore,
        journal: &mut dyn Journal,
    ) -> Result<Option<ReclaimStats>, String> {
        let before = store.reclaim_stats();
        let index = self.issue(Op::Reclaim, journal);
        let outcome = store.reclaim_now();
        self.ring_full = false;
        match outcome {
            Ok(after) => {
                self.relocated_records += after.relocated_records - before.relocated_records;
                self.ring_trims += after.ring_trims - before.ring_trims;
                self.finish(index, Outcome::Done, journal)?;
                Ok(Some(after))
            }
            Err(error) => {
                self.finish(index, Outcome::Failed(error), journal)?;
                Ok(None)
            }
        }
    }

    /// The facts of the operations issued before a crash: `status(index)` says whether
    /// operation `index` was acknowledged before it (`Some(Acked)`), issued and not
    /// acknowledged (`Some(Maybe)`), or not issued yet (`None`). Refusals did nothing.
    pub fn facts(&self, status: impl Fn(usize) -> Option<Status>) -> Vec<Fact> {
        facts_of(&self.log, status)
    }
}

/// The facts of `log` at a crash (see [`Workload::facts`]).
pub fn facts_of(log: &[Logged], status: impl Fn(usize) -> Option<Status>) -> Vec<Fact> {
    log.iter()
        .enumerate()
        .filter_map(|(index, logged)| {
            let mut status = status(index)?;
            let created = match &logged.outcome {
                Some(Outcome::Created(generation)) => Some(*generation),
                _ => None,
            };
            match &logged.outcome {
                Some(Outcome::Failed(error)) if error.is_definite() => return None,
                Some(Outcome::Failed(_)) => status = Status::Maybe,
                _ => {}
            }
            Some(Fact {
                op: logged.op,
                created,
                status,
            })
        })
        .collect()
}
