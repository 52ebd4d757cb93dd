//! What a recovered [`LogDriveStore`] may hold, given what was acknowledged before the crash,
//! and the check of a store against it.
//!
//! The model is a *base* (the exact state a previous recovery was seen to hold, or nothing
//! for a fresh ring) and the *facts* since: every operation issued before the crash, in the
//! order it was issued, either acknowledged or in flight (maybe done, maybe not: its outcome
//! came after the crash, or was indeterminate). Operations refused with a definite error did
//! nothing and are not facts. A recovered log is a prefix of the LSNs holding every
//! acknowledged record, so after a crash:
//!
//! - a LogDrive whose creation was acknowledged is live with its generation, unless its
//!   deletion was issued (then it may be gone, and must be if the deletion was
//!   acknowledged); one whose creation was in flight may be live; nothing else is;
//! - its seal, fence and trim point are each the newest acknowledged one or one in flight
//!   after it (never older, never a value no operation carried);
//! - every address below the trim point reads `Trimmed`, every address at or past the seal
//!   `Unwritten`; any other address whose write was acknowledged reads its bytes, one whose
//!   write was in flight its bytes or `Unwritten`, and every other address `Unwritten`;
//!   never other bytes: the payload names its LogDrive, generation and address, so a value
//!   (or a relocated copy) under another address or LogDrive is caught;
//! - weak_tail and length answer N, H and T as the reads say;
//! - a write below the fence is refused `Fenced`, one at the seal `Sealed`.
//!
//! [`check`] returns what it saw (the [`Observation`] a second recovery must repeat exactly)
//! and the new base. A *lenient* model is for recoveries after the drive damaged data (lost,
//! misdirected or bit-flipped writes): an acknowledged fact may then be lost, so only "never
//! other bytes, never a value no operation wrote" is checked.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use sealog_logdrive::{
    wait, Length, LocalLogDrive, LogDrive, LogDriveError, LogDriveStore, ReadOutcome, TailDesc,
};

/// The capacity every LogDrive of the workloads is created with.
pub const CAPACITY: u64 = 1 << 20;

/// The payload the workloads write at `address` of LogDrive `id`'s generation `generation`:
/// it names all three (so a value read under another address or LogDrive is caught), and its
/// length, from 300 bytes to 9 KiB, varies with them.
pub fn payload(id: u64, generation: u64, address: u64) -> Bytes {
    let mut state = (id.wrapping_mul(0x9e37_79b9_7f4a_7c15)
        ^ generation.wrapping_mul(0xc2b2_ae3d_27d4_eb4f)
        ^ address.wrapping_mul(0x1656_67b1_9e37_79f9))
        | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let len = match next() % 10 {
        0..=3 => 300 + next() % 1200,
        4..=7 => 1500 + next() % 2500,
        _ => 4000 + next() % 5000,
    } as usize;
    let name = format!("logdrive {id} generation {generation} address {address};");
    let mut bytes = Vec::with_capacity(len + 8);
    bytes.extend_from_slice(name.as_bytes());
    while bytes.len() < len {
        bytes.extend_from_slice(&next().to_le_bytes());
    }
    bytes.truncate(len.max(name.len()));
    Bytes::from(bytes)
}

/// What a payload read back says it is (its name), for messages.
fn named(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&byte| byte == b';').unwrap_or(0);
    match std::str::from_utf8(&bytes[..end]) {
        Ok(name) if name.starts_with("logdrive ") => format!("\"{name}\""),
        _ => format!("{} bytes naming nothing", bytes.len()),
    }
}

/// An operation of a workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Create LogDrive `id` (its generation is the outcome's).
    Create {
        /// The id.
        id: u64,
        /// Addresses below it.
        capacity: u64,
    },
    /// Write [`payload`] at `address`.
    Write {
        /// The LogDrive.
        id: u64,
        /// Its generation.
        generation: u64,
        /// The address.
        address: u64,
        /// The writer's epoch.
        epoch: u64,
    },
    /// Seal at `length`.
    Seal {
        /// The LogDrive.
        id: u64,
        /// Its generation.
        generation: u64,
        /// The sealed length.
        length: u64,
    },
    /// Fence at `epoch`.
    Fence {
        /// The LogDrive.
        id: u64,
        /// Its generation.
        generation: u64,
        /// The fence epoch.
        epoch: u64,
    },
    /// Trim below `upto`.
    Trim {
        /// The LogDrive.
        id: u64,
        /// Its generation.
        generation: u64,
        /// The trim point.
        upto: u64,
    },
    /// Delete the LogDrive.
    Delete {
        /// The LogDrive.
        id: u64,
        /// Its generation.
        generation: u64,
    },
    /// Run the reclaimer (`reclaim_now`): no state of its own, a window in the trace.
    Reclaim,
}

/// Whether a fact's operation is known to have happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Status {
    /// Issued and not acknowledged before the crash: it may or may not have happened.
    Maybe,
    /// Acknowledged before the crash.
    Acked,
}

/// An operation issued before the crash that may have taken effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fact {
    /// The operation.
    pub op: Op,
    /// For a creation, the generation it took, where known.
    pub created: Option<u64>,
    /// Acknowledged or in flight.
    pub status: Status,
}

/// One LogDrive as a recovery was seen to hold it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BaseDrive {
    /// Its generation.
    pub generation: u64,
    /// Its capacity.
    pub capacity: u64,
    /// Its seal.
    pub sealed: Option<u64>,
    /// Its fence.
    pub fence: u64,
    /// Its trim point.
    pub first: u64,
    /// The addresses that read as their value.
    pub written: BTreeSet<u64>,
}

/// The exact state a recovery was seen to hold (empty for a fresh ring).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Base {
    /// The live LogDrives by id.
    pub drives: BTreeMap<u64, BaseDrive>,
    /// The highest generation known issued: every later creation must take a higher one.
    pub generation_max: u64,
}

/// What to check a recovered store against.
#[derive(Clone, Debug, Default)]
pub struct Model {
    /// The state before the facts.
    pub base: Base,
    /// What was issued since, acknowledged or in flight, in issue order.
    pub facts: Vec<Fact>,
    /// The drive damaged data: an acknowledged fact may be lost.
    pub lenient: bool,
}

/// One LogDrive as a recovered store answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seen {
    /// Its generation.
    pub generation: u64,
    /// Its lengths.
    pub length: Length,
    /// weak_tail, over the window from the trim point to N where the store answers one
    /// that wide.
    pub tail: TailDesc,
    /// Every address read, and what it read as.
    pub reads: Vec<(u64, ReadOutcome)>,
}

/// What a recovered store answered, LogDrive by LogDrive: a second recovery must answer
/// exactly the same.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Observation {
    /// The live LogDrives by id.
    pub drives: BTreeMap<u64, Seen>,
}

/// What [`check`] found.
#[derive(Clone, Debug)]
pub struct Checked {
    /// What the store answered.
    pub observation: Observation,
    /// The state it holds, as the base of what comes next.
    pub base: Base,
    /// Acknowledged facts checked to hold.
    pub acked_facts: u64,
    /// Addresses read.
    pub reads: u64,
}

/// One generation of one id, as the facts build it.
#[derive(Clone, Debug)]
struct Instance {
    generation: Option<u64>,
    capacity: u64,
    created: Status,
    deleted: Option<Status>,
    base: Option<BaseDrive>,
    seals: Vec<(u64, Status)>,
    fences: Vec<(u64, Status)>,
    trims: Vec<(u64, Status)>,
    writes: BTreeMap<u64, Status>,
}

impl Instance {
    fn new(generation: Option<u64>, capacity: u64, created: Status) -> Instance {
        Instance {
            generation,
            capacity,
            created,
            deleted: None,
            base: None,
            seals: Vec::new(),
            fences: Vec::new(),
            trims: Vec::new(),
            writes: BTreeMap::new(),
        }
    }
}

fn best(slot: &mut Option<Status>, status: Status) {
    *slot = Some(slot.map_or(status, |held| held.max(status)));
}

/// The instances of every id, oldest first.
fn instances(model: &Model) -> Result<BTreeMap<u64, Vec<Instance>>, String> {
    let demote = |status: Status| {
        if model.lenient {
            Status::Maybe
        } else {
            status
        }
    };
    let mut chains: BTreeMap<u64, Vec<Instance>> = BTreeMap::new();
    for (id, drive) in &model.base.drives {
        let mut instance = Instance::new(
            Some(drive.generation),
            drive.capacity,
            demote(Status::Acked),
        );
        instance.base = Some(drive.clone());
        chains.entry(*id).or_default().push(instance);
    }
    for fact in &model.facts {
        let status = demote(fact.status);
        let (id, generation) = match fact.op {
            Op::Create { id, capacity } => {
                let instance = Instance::new(fact.created, capacity, status);
                chains.entry(id).or_default().push(instance);
                continue;
            }
            Op::Reclaim => continue,
            Op::Write { id, generation, .. }
            | Op::Seal { id, generation, .. }
            | Op::Fence { id, generation, .. }
            | Op::Trim { id, generation, .. }
            | Op::Delete { id, generation } => (id, generation),
        };
        let instance = chains
            .get_mut(&id)
            .and_then(|chain| {
                chain
                    .iter_mut()
                    .rev()
                    .find(|instance| instance.generation == Some(generation))
            })
            .ok_or_else(|| {
                format!("the model has no LogDrive {id} generation {generation} for {fact:?}")
            })?;
        match fact.op {
            Op::Write { address, .. } => {
                let slot = instance.writes.entry(address).or_insert(status);
                *slot = (*slot).max(status);
            }
            Op::Seal { length, .. } => instance.seals.push((length, status)),
            Op::Fence { epoch, .. } => instance.fences.push((epoch, status)),
            Op::Trim { upto, .. } => instance.trims.push((upto, status)),
            Op::Delete { .. } => best(&mut instance.deleted, status),
            Op::Create { .. } | Op::Reclaim => unreachable!("handled above"),
        }
    }
    Ok(chains)
}

/// Which instance of an id may be live after the crash, given its chain (None: the id may
/// be absent).
fn allowed(chain: &[Instance]) -> (bool, Vec<usize>) {
    let acked = chain
        .iter()
        .rposition(|instance| instance.created == Status::Acked);
    let deletion_issued = |index: usize| chain[index].deleted.is_some();
    let absent = acked.is_none_or(deletion_issued);
    let mut live = Vec::new();
    for (index, instance) in chain.iter().enumerate() {
        let ok = match acked {
            Some(acked) if index < acked => false,
            Some(acked) if index == acked => instance.deleted != Some(Status::Acked),
            // A later creation lands only after the deletion before it.
            Some(acked) => deletion_issued(acked) && instance.deleted != Some(Status::Acked),
            None => instance.deleted != Some(Status::Acked),
        };
        if ok {
            live.push(index);
        }
    }
    (absent, live)
}

/// A control value's check: the newest acknowledged value or one in flight after it, never
/// a value no operation carried. `start` is what it was before the facts (the base's, or
/// the value a new LogDrive starts with).
fn check_control(
    what: &str,
    found: u64,
    start: u64,
    issued: &[(u64, Status)],
    lenient: bool,
) -> Result<(), String> {
    let acked = issued
        .iter()
        .filter(|(_, status)| *status == Status::Acked)
        .map(|(value, _)| *value)
        .max()
        .unwrap_or(start)
        .max(start);
    let known = found == start || issued.iter().any(|(value, _)| *value == found);
    let newest = issued
        .iter()
        .map(|(value, _)| *value)
        .max()
        .unwrap_or(start);
    let fine = if lenient {
        // Damage may have lost any of it, back to a value before the base.
        found <= newest.max(start)
    } else {
        known && found >= acked
    };
    if fine {
        Ok(())
    } else {
        Err(format!(
            "its {what} is {found}: it was {start}, acknowledged up to {acked}, and the \
             operations since carried {issued:?}"
        ))
    }
}

fn check_seal(found: Option<u64>, instance: &Instance, lenient: bool) -> Result<(), String> {
    let start = instance.base.as_ref().and_then(|base| base.sealed);
    let mut allowed: Vec<(Option<u64>, Status)> = Vec::new();
    if let Some(start) = start {
        allowed.push((Some(start), Status::Acked));
    }
    allowed.extend(
        instance
            .seals
            .iter()
            .map(|(length, status)| (Some(*length), *status)),
    );
    let acked: Vec<Option<u64>> = allowed
        .iter()
        .filter(|(_, status)| *status == Status::Acked && !lenient)
        .map(|(length, _)| *length)
        .collect();
    let fine = if acked.is_empty() {
        found.is_none() || allowed.iter().any(|(length, _)| *length == found)
    } else {
        acked.contains(&found)
    };
    if fine {
        Ok(())
    } else {
        Err(format!(
            "its seal is {found:?}: it was {start:?}, and the seals since were {:?}",
            instance.seals
        ))
    }
}

/// What the reads of a LogDrive say N, H and T are.
fn tail_of(reads: &[(u64, ReadOutcome)], first: u64) -> TailDesc {
    let written: BTreeSet<u64> = reads
        .iter()
        .filter(|(address, outcome)| *address >= first && matches!(outcome, ReadOutcome::Value(_)))
        .map(|(address, _)| *address)
        .collect();
    let mut t = first;
    while written.contains(&t) {
        t += 1;
    }
    let n = written.last().map_or(t, |last| (last + 1).max(t));
    TailDesc {
        n,
        holes: (t..n)
            .filter(|address| !written.contains(address))
            .collect(),
        holes_below_window: false,
    }
}

/// The window a store answers weak_tail for that covers [first, N) when it can: k = N -
/// first, at most the store's most.
pub fn tail_window(n: u64, first: u64) -> u64 {
    n.saturating_sub(first)
        .min(sealog_logdrive::store::WEAK_TAIL_K_MAX_DEFAULT)
}

/// `full` (every hole from T on) as a weak_tail of window `k` sees it: the holes in
/// [N - k, N), and whether any lies below.
pub fn seen_through(full: &TailDesc, k: u64) -> TailDesc {
    let window = full.n.saturating_sub(k);
    TailDesc {
        n: full.n,
        holes: full.holes.range(window..).copied().collect(),
        holes_below_window: full.holes.first().is_some_and(|hole| *hole < window),
    }
}

fn answer<T>(what: &str, outcome: Result<T, LogDriveError>) -> Result<T, String> {
    outcome.map_err(|error| format!("{what} failed: {error}"))
}

/// Checks one live LogDrive against its instance; returns what it answered.
fn check_drive(
    id: u64,
    handle: &LocalLogDrive,
    instance: &Instance,
    lenient: bool,
    checked: &mut Checked,
) -> Result<Seen, String> {
    let generation = handle.generation();
    let fail = |what: String| format!("LogDrive {id} generation {generation}: {what}");
    let length = answer("length", wait(handle.length())).map_err(fail)?;
    check_controls(&length, instance, lenient, checked).map_err(fail)?;
    let reads = read_all(id, handle, instance, &length, lenient, checked).map_err(fail)?;
    checked.reads += reads.len() as u64;
    let tail = check_tail(handle, &length, &reads).map_err(fail)?;
    check_refusals(id, handle, &length, instance.capacity).map_err(fail)?;
    Ok(Seen {
        generation,
        length,
        tail,
        reads,
    })
}

/// The seal, fence and trim point a live LogDrive answered (`length`) are ones its instance
/// allows; counts the acknowledged ones.
fn check_controls(
    length: &Length,
    instance: &Instance,
    lenient: bool,
    checked: &mut Checked,
) -> Result<(), String> {
    let base = instance.base.as_ref();
    check_seal(length.sealed, instance, lenient)?;
    let fence_start = base.map_or(0, |base| base.fence);
    check_control(
        "fence",
        length.fence,
        fence_start,
        &instance.fences,
        lenient,
    )?;
    let first_start = base.map_or(0, |base| base.first);
    check_control(
        "trim point",
        length.first,
        first_start,
        &instance.trims,
        lenient,
    )?;
    checked.acked_facts += instance
        .seals
        .iter()
        .chain(&instance.fences)
        .chain(&instance.trims)
        .filter(|(_, status)| *status == Status::Acked)
        .count() as u64;
    Ok(())
}

/// Reads a live LogDrive from just below its trim point to just past the highest address
/// written, each read checked ([`check_read`]); returns what every address read as.
fn read_all(
    id: u64,
    handle: &LocalLogDrive,
    instance: &Instance,
    length: &Length,
    lenient: bool,
    checked: &mut Checked,
) -> Result<Vec<(u64, ReadOutcome)>, String> {
    let generation = handle.generation();
    let written_before = instance.base.as_ref().map(|base| &base.written);
    let highest = written_before
        .and_then(|written| written.last().copied())
        .into_iter()
        .chain(instance.writes.keys().last().copied())
        .max()
        .unwrap_or(0);
    let low = length.first.saturating_sub(2);
    let high = (highest.max(length.first) + 3).min(instance.capacity);
    let futures: Vec<_> = (low..high)
        .map(|address| (address, handle.read(address)))
        .collect();
    let mut reads = Vec::with_capacity(futures.len());
    for (address, future) in futures {
        let outcome = answer(&format!("the read of address {address}"), wait(future))?;
        let expected = payload(id, generation, address);
        let status = match (
            written_before.is_some_and(|w| w.contains(&address)),
            lenient,
        ) {
            (true, false) => Some(Status::Acked),
            (true, true) => Some(Status::Maybe),
            (false, _) => None,
        }
        .max(instance.writes.get(&address).copied());
        if check_read(address, &outcome, &expected, status, length)? {
            checked.acked_facts += 1;
        }
        reads.push((address, outcome));
    }
    Ok(reads)
}

/// What `address` read as (`outcome`) is what its write's `status`, the trim point and the
/// seal allow, and never other bytes than `expected`; returns whether it is an acknowledged
/// write read back.
fn check_read(
    address: u64,
    outcome: &ReadOutcome,
    expected: &Bytes,
    status: Option<Status>,
    length: &Length,
) -> Result<bool, String> {
    let below_trim = address < length.first;
    let sealed_off = length.sealed.is_some_and(|sealed| address >= sealed);
    let fine = match outcome {
        ReadOutcome::Trimmed { first } => below_trim && *first == length.first,
        _ if below_trim => false,
        ReadOutcome::Unwritten => sealed_off || status != Some(Status::Acked),
        ReadOutcome::Value(bytes) => !sealed_off && status.is_some() && bytes == expected,
        ReadOutcome::Damaged => false,
    };
    if !fine {
        let found = match outcome {
            ReadOutcome::Value(bytes) if bytes != expected => named(bytes),
            other => format!("{other:?}").chars().take(80).collect(),
        };
        return Err(format!(
            "address {address} reads {found}; its write was {status:?}, the trim point \
             is {}, the seal {:?}",
            length.first, length.sealed
        ));
    }
    Ok(status == Some(Status::Acked) && !sealed_off && !below_trim)
}

/// weak_tail and length answer N, H and T as the reads say; returns the tail they say.
fn check_tail(
    handle: &LocalLogDrive,
    length: &Length,
    reads: &[(u64, ReadOutcome)],
) -> Result<TailDesc, String> {
    let tail = tail_of(reads, length.first);
    let k = tail_window(tail.n, length.first);
    let answered = answer("weak_tail", wait(handle.weak_tail(k)))?;
    let seen = seen_through(&tail, k);
    if answered != seen || length.n != tail.n || length.t != tail.t() {
        return Err(format!(
            "weak_tail({k}) answers N {} H {:?} and length N {} T {}, but the reads say N {} \
             H {:?}",
            answered.n, answered.holes, length.n, length.t, tail.n, seen.holes
        ));
    }
    Ok(tail)
}

/// A write below the fence is refused `Fenced`, one at the seal `Sealed` (refusals write
/// nothing).
fn check_refusals(
    id: u64,
    handle: &LocalLogDrive,
    length: &Length,
    capacity: u64,
) -> Result<(), String> {
    let generation = handle.generation();
    if length.fence > 0 {
        let address = length.first;
        let stale = wait(handle.write(address, length.fence - 1, payload(id, generation, address)));
        let expected = Err(LogDriveError::Fenced {
            current: length.fence,
        });
        if stale != expected {
            return Err(format!(
                "a write at epoch {} below its fence {} answered {stale:?}",
                length.fence - 1,
                length.fence
            ));
        }
    }
    if let Some(sealed) = length.sealed.filter(|sealed| *sealed < capacity) {
        let late = wait(handle.write(sealed, u64::MAX, payload(id, generation, sealed)));
        if late != Err(LogDriveError::Sealed { length: sealed }) {
            return Err(format!(
                "a write at its sealed length {sealed} answered {late:?}"
            ));
        }
    }
    Ok(())
}

/// Checks a recovered store against `model`.
pub fn check(store: &LogDriveStore, model: &Model) -> Result<Checked, String> {
    let chains = instances(model)?;
    let mut checked = Checked {
        observation: Observation::default(),
        base: Base {
            drives: BTreeMap::new(),
            generation_max: model.base.generation_max,
        },
        acked_facts: 0,
        reads: 0,
    };
    let ids = store.ids().map_err(|error| format!("ids: {error}"))?;
    for id in ids {
        if !chains.contains_key(&id) {
            let generation = store.get(id).map(|drive| drive.generation());
            return Err(format!(
                "LogDrive {id} (generation {generation:?}) is live but was never created"
            ));
        }
    }
    for (id, chain) in &chains {
        check_chain(store, *id, chain, model, &mut checked)?;
    }
    if !model.lenient {
        let acked_generations = model.facts.iter().filter_map(|fact| match fact.op {
            Op::Create { .. } if fact.status == Status::Acked => fact.created,
            _ => None,
        });
        let highest = acked_generations.max().unwrap_or(0);
        checked.base.generation_max = checked.base.generation_max.max(highest);
    }
    Ok(checked)
}

/// Checks LogDrive `id` against the instances the model builds for it (`chain`): absent only
/// where they allow it, else live as one of them ([`check_drive`]), which becomes its base.
fn check_chain(
    store: &LogDriveStore,
    id: u64,
    chain: &[Instance],
    model: &Model,
    checked: &mut Checked,
) -> Result<(), String> {
    let (absent, live) = allowed(chain);
    let Ok(handle) = store.get(id) else {
        if !absent {
            let instance = live.last().map(|index| &chain[*index]);
            return Err(format!(
                "LogDrive {id} is missing: its creation (generation {:?}) was \
                 acknowledged and no deletion of it was issued",
                instance.and_then(|instance| instance.generation)
            ));
        }
        let acked_deletion = chain
            .iter()
            .any(|instance| instance.deleted == Some(Status::Acked));
        checked.acked_facts += u64::from(acked_deletion);
        return Ok(());
    };
    let generation = handle.generation();
    let index = live_instance(id, generation, chain, &live, model.base.generation_max)?;
    let instance = &chain[index];
    if instance.created == Status::Acked && instance.base.is_none() {
        checked.acked_facts += 1;
    }
    let seen = check_drive(id, &handle, instance, model.lenient, checked)?;
    checked.base.generation_max = checked.base.generation_max.max(generation);
    checked.base.drives.insert(
        id,
        BaseDrive {
            generation,
            capacity: instance.capacity,
            sealed: seen.length.sealed,
            fence: seen.length.fence,
            first: seen.length.first,
            written: seen
                .reads
                .iter()
                .filter(|(_, outcome)| matches!(outcome, ReadOutcome::Value(_)))
                .map(|(address, _)| *address)
                .collect(),
        },
    );
    checked.observation.drives.insert(id, seen);
    Ok(())
}

/// Which of the instances of `chain` that may be live (`live`, indexes into it) LogDrive
/// `id`, live with `generation`, is; `generation_max` is the highest the base knew issued.
fn live_instance(
    id: u64,
    generation: u64,
    chain: &[Instance],
    live: &[usize],
    generation_max: u64,
) -> Result<usize, String> {
    let known_before = |index: usize| {
        chain[..index]
            .iter()
            .filter_map(|instance| instance.generation)
            .max()
            .unwrap_or(0)
    };
    let matched = live.iter().copied().find(|index| {
        let instance = &chain[*index];
        match instance.generation {
            Some(known) => known == generation,
            // A creation whose outcome never came: any generation after the ones before.
            None => generation > known_before(*index).max(generation_max),
        }
    });
    let Some(index) = matched else {
        let generations: Vec<_> = chain
            .iter()
            .map(|instance| (instance.generation, instance.created, instance.deleted))
            .collect();
        return Err(format!(
            "LogDrive {id} is live with generation {generation}, which the operations \
             cannot leave live: (generation, created, deleted) {generations:?}"
        ));
    };
    Ok(index)
}

/// Creates LogDrive `id` (never used by the workloads) on a recovered store and checks that
/// it takes a generation above `floor` (every generation known issued): generations are
/// never issued twice, even once every record of the old ones has left the ring.
pub fn check_next_generation(store: &LogDriveStore, id: u64, floor: u64) -> Result<u64, String> {
    let mut created = wait(store.create(id, CAPACITY));
    if matches!(created, Err(LogDriveError::RingFull)) {
        // The crash left a ring clients had filled: reclaimed, it takes a creation.
        answer("reclaiming a full ring", store.reclaim_now())?;
        created = wait(store.create(id, CAPACITY));
    }
    let drive = answer("a creation after recovery", created)?;
    if drive.generation() <= floor {
        return Err(format!(
            "a creation after recovery took generation {}, but generation {floor} was issued \
             before the crash",
            drive.generation()
        ));
    }
    Ok(drive.generation())
}
