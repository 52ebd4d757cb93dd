//! Judging a record at the head of a walk: garbage, needed (the walk stops), held (the walk
//! cannot pass it now), or needed and copied forward when the step relocates; damaged
//! records the open accounted for are carried forward as damage.

use std::sync::Arc;

use bytes::Bytes;
use sealog::LogEntry;

use super::copy::{queue_copy, Carried, Creation, Queued};
use super::policy::Mode;
use super::reclaimer::Pin;
use crate::inner::Inner;
use crate::live::Shared;
use crate::record::{Record, RecordType};
use crate::state::{Control, Suspect};
use crate::sync::lock;

/// A record judged.
pub(crate) enum Verdict {
    /// Nothing needs it.
    Garbage,
    /// Copied; its copies are in flight.
    Copied(Vec<Queued>),
    /// A creation to copy with the others the walk meets, in one group
    /// ([`queue_creations`]).
    Deferred(Creation),
    /// Needed, and not copied (advancing only): the walk stops here.
    Needed,
    /// The walk cannot pass it now; with the pin that says, without a read, while it still
    /// cannot.
    Hold(Option<Pin>),
    /// Its copy found no room (the copies it made before are in flight).
    Full(Vec<Queued>),
}

/// Who a record belongs to.
pub(crate) enum Owner {
    Live(Shared),
    Dying((u64, u64)),
    None,
}

pub(crate) fn logdrive_of(inner: &Inner, record: &Record) -> Owner {
    let registry = lock(&inner.registry);
    let key = (record.id, record.generation);
    if registry.dying.contains_key(&key) {
        return Owner::Dying(key);
    }
    match registry.live.get(&record.id) {
        Some(shared) => Owner::Live(Arc::clone(shared)),
        None => Owner::None,
    }
}

/// Judges a record at the head of the walk, and copies it when it is needed and the step
/// relocates.
pub(crate) fn judge(inner: &Inner, entry: LogEntry, mode: Mode) -> Verdict {
    let Some(record) = Record::decode(entry.kind, &entry.header) else {
        return Verdict::Garbage;
    };
    if matches!(
        record.record_type,
        RecordType::Delete | RecordType::Generation
    ) {
        return Verdict::Garbage;
    }
    let summary = |payload: &[u8]| {
        let len = crate::state::slot_len(payload.len() as u64);
        (crc32c::crc32c(payload), len)
    };
    let shared = match logdrive_of(inner, &record) {
        Owner::Live(shared) => shared,
        Owner::Dying(key) => {
            return Verdict::Hold(Some(Pin::Dying {
                lsn: entry.lsn,
                key,
            }))
        }
        Owner::None => return Verdict::Garbage,
    };
    let mut live = lock(&shared);
    live.take_in(inner);
    if !live
        .state
        .needs(entry.lsn, &record, || summary(&entry.payload))
    {
        return Verdict::Garbage;
    }
    if mode == Mode::Advance {
        return Verdict::Needed;
    }
    // A deletion queued and not yet durable: copying now would put a creation after it.
    if live.state.deleted {
        return Verdict::Hold(None);
    }
    if record.record_type == RecordType::Create {
        return Verdict::Deferred(Creation {
            live: Arc::clone(&shared),
            from: entry.lsn,
            record: record.relocated(),
        });
    }
    let carried = carried_by(&record);
    let payload = match carried {
        Carried::Write { .. } => Bytes::from(entry.payload),
        _ => Bytes::new(),
    };
    match queue_copy(
        inner,
        Some(&shared),
        entry.lsn,
        record.relocated(),
        payload,
        carried,
    ) {
        Some(queued) => Verdict::Copied(vec![queued]),
        None => Verdict::Full(Vec::new()),
    }
}

/// What the copy of a needed record carries forward to its LogDrive (creations are copied
/// in groups, and deletions and generation records are never needed, so neither comes here).
fn carried_by(record: &Record) -> Carried {
    match record.record_type {
        RecordType::Write => Carried::Write {
            address: record.value,
        },
        RecordType::Seal | RecordType::Fence | RecordType::Trim => {
            Carried::Control(Control::of(record).expect("a control record"))
        }
        RecordType::Damaged => Carried::Damaged {
            address: record.value,
        },
        RecordType::Suspect => Carried::Suspect,
        RecordType::Create => Carried::Create,
        RecordType::Delete | RecordType::Generation => unreachable!("never needed"),
    }
}

/// Judges a damaged record at the head of the walk: the damage a quarantined open accounted
/// for is carried forward as a damaged or suspect record; damage nothing accounts for holds
/// the walk (reads of it already answer `Damaged`; a quarantined reopen will account for it).
pub(crate) fn judge_damaged(
    inner: &Inner,
    lsn: u64,
    header: Option<sealog::EmbedderHeader>,
    mode: Mode,
) -> Verdict {
    let unknown = || {
        inner.reclaimer.note_error(format!(
            "the record at LSN {lsn} is damaged and no LogDrive state accounts for it: the \
             ring's head stays before it until a quarantined reopen accounts for it"
        ));
        Verdict::Hold(Some(Pin::Unknown { lsn }))
    };
    let Some(header) = header else {
        return carry_suspects(inner, lsn, mode).unwrap_or_else(unknown);
    };
    // The header survived: which record it was is known.
    let decoded = [sealog::Kind::Data, sealog::Kind::Seal, sealog::Kind::Fence]
        .into_iter()
        .chain([sealog::Kind::Trim])
        .find_map(|kind| Record::decode(kind, &header));
    let Some(record) = decoded else {
        return Verdict::Garbage;
    };
    let shared = match logdrive_of(inner, &record) {
        Owner::Live(shared) => shared,
        Owner::Dying(key) => return Verdict::Hold(Some(Pin::Dying { lsn, key })),
        Owner::None => return Verdict::Garbage,
    };
    let mut live = lock(&shared);
    live.take_in(inner);
    if live.state.generation != record.generation {
        return Verdict::Garbage;
    }
    let known = live.state.damage_at(lsn);
    // Rot found since the open, in the record an address names: the address is damaged from
    // now on (reads already answer so), and the damage is carried forward like any other.
    let found = || match record.record_type {
        RecordType::Write if live.state.record_of(record.value) == Some(lsn) => Some(record.value),
        _ => None,
    };
    let damage = match (known, found()) {
        (Some(known), _) => Some(known),
        (None, Some(address)) => live.state.damage_found(address, lsn),
        (None, None) => None,
    };
    let Some((address, crc, len)) = damage else {
        // A damaged rewrite of a value held intact elsewhere: nothing to carry.
        if record.record_type == RecordType::Write && live.state.record_of(record.value).is_some() {
            return Verdict::Garbage;
        }
        drop(live);
        return unknown();
    };
    if mode == Mode::Advance {
        return Verdict::Needed;
    }
    if live.state.deleted {
        return Verdict::Hold(None);
    }
    let marker = Record::damaged(record.id, record.generation, address, crc, len);
    let carried = Carried::Damaged { address };
    match queue_copy(inner, Some(&shared), lsn, marker, Bytes::new(), carried) {
        Some(queued) => Verdict::Copied(vec![queued]),
        None => Verdict::Full(Vec::new()),
    }
}

/// A header-less damaged record at `lsn`: the suspect ranges it left on LogDrives, carried
/// forward, each copy queued under its LogDrive's mutex (`None` when no LogDrive accounts
/// for it).
pub(crate) fn carry_suspects(inner: &Inner, lsn: u64, mode: Mode) -> Option<Verdict> {
    let shared: Vec<Shared> = lock(&inner.registry).live.values().cloned().collect();
    let holders: Vec<Shared> = shared
        .into_iter()
        .filter(|live| {
            let mut live = lock(live);
            live.take_in(inner);
            !live.state.deleted && live.state.open_suspects().any(|suspect| suspect.lsn == lsn)
        })
        .collect();
    if holders.is_empty() {
        // A later damaged record of a range whose first LSN names its suspects, or one of a
        // range nothing was suspected of (every LogDrive sealed): nothing to carry.
        return was_damage_range(inner, lsn).then_some(Verdict::Garbage);
    }
    if mode == Mode::Advance {
        return Some(Verdict::Needed);
    }
    // Several LogDrives may hold suspects from one damaged range: a record each.
    let mut copies: Vec<Queued> = Vec::new();
    for live in holders {
        let guard = lock(&live);
        let (id, generation) = (guard.state.id, guard.state.generation);
        let suspects: Vec<Suspect> = guard
            .state
            .open_suspects()
            .filter(|suspect| suspect.lsn == lsn)
            .cloned()
            .collect();
        for suspect in suspects {
            let record = Record::new(
                RecordType::Suspect,
                id,
                generation,
                suspect.addresses.start,
                suspect.addresses.end,
            )
            .relocated();
            let carried = Carried::Suspect;
            match queue_copy(inner, Some(&live), lsn, record, Bytes::new(), carried) {
                Some(queued) => copies.push(queued),
                // The copies queued so far are waited for and applied; the head stays
                // before this record.
                None => return Some(Verdict::Full(copies)),
            }
        }
        drop(guard);
    }
    Some(Verdict::Copied(copies))
}

/// Whether `lsn` lies inside a header-less damaged range the open accounted for.
pub(crate) fn was_damage_range(inner: &Inner, lsn: u64) -> bool {
    inner
        .quarantine
        .iter()
        .any(|range| range.header.is_none() && range.lsns.contains(&lsn))
}
