//! Relocated copies: what each carries forward ([`Carried`]), queueing them (one at a time, or
//! a LogDrive creation group at a time), applying them to their LogDrive's state once durable,
//! and the generation record that carries the highest generation issued past a trim.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use sealog::Ticket;

use super::reclaimer::Marker;
use crate::inner::Inner;
use crate::live::Shared;
use crate::record::{Record, RecordType, RECORD_HEADER_BYTES};
use crate::space::Class;
use crate::state::Control;
use crate::sync::lock;

/// What a copy carries forward, to apply to its LogDrive once durable.
#[derive(Clone, Debug)]
pub(crate) enum Carried {
    Write { address: u64 },
    Create,
    Control(Control),
    Damaged { address: u64 },
    Suspect,
    Generation(u64),
}

/// A relocated copy in flight.
pub(crate) struct Copy {
    /// The LogDrive it belongs to (none for a generation record).
    pub(crate) live: Option<Shared>,
    /// The LSN of the record copied.
    pub(crate) from: u64,
    pub(crate) carried: Carried,
    pub(crate) bytes: u64,
}

/// Copies queued as one group: all of them durable or none, at consecutive LSNs from the
/// one the ticket yields, in order.
pub(crate) struct Queued {
    pub(crate) ticket: Ticket,
    pub(crate) copies: Vec<Copy>,
}

/// A LogDrive's creation record the walk found needed, to be copied in a group with the
/// other creations it meets. Relocating every long-lived LogDrive's creation once per lap
/// of the ring is the reclaimer's steady work when many LogDrives live long (a bookie's
/// ledgers): copied one by one, the copies interleave with the clients' writes, and the
/// next lap reads that garbage to reach them; copied as a group, they stay together and the
/// next lap reads them alone.
pub(crate) struct Creation {
    pub(crate) live: Shared,
    pub(crate) from: u64,
    pub(crate) record: Record,
}

/// Creations copied per group at most: a sixteenth of a batch of headers (64 KiB in a
/// 1 MiB batch), so that a group never keeps the clients' records out of a batch.
pub(crate) fn creation_group_max(batch_size_max_bytes: u32) -> usize {
    let headers = u64::from(batch_size_max_bytes) / RECORD_HEADER_BYTES / 16;
    usize::try_from(headers).unwrap_or(usize::MAX).max(1)
}

/// Queues a relocated copy under its LogDrive's mutex (held by the caller for LogDrive
/// records): `None` when it found no room.
pub(crate) fn queue_copy(
    inner: &Inner,
    live: Option<&Shared>,
    from: u64,
    record: Record,
    payload: Bytes,
    carried: Carried,
) -> Option<Queued> {
    let bytes = RECORD_HEADER_BYTES + payload.len() as u64;
    let admission = inner.admit(payload.len() as u64, Class::Relocation)?;
    let ticket = inner.append(&record, payload, admission).ok()?;
    let copy = Copy {
        live: live.cloned(),
        from,
        carried,
        bytes,
    };
    Some(Queued {
        ticket,
        copies: vec![copy],
    })
}

/// Queues copies of the creations the walk found needed, as one group, and empties
/// `creations`; also the LSN of the first creation it could not queue (its LogDrive's
/// deletion was queued since it was judged, or the ring had no room), before which the head
/// must stay.
///
/// The copies are queued under the registry's mutex, which a deletion holds while it
/// queues its record: so a creation's copy either lands before its LogDrive's deletion
/// (which replay then applies after it) or is not made, and never lands after it (which
/// replay would take for the LogDrive created again). The LogDrive's other records may land
/// on either side of the copy: replay keeps the records it meets before a creation.
pub(crate) fn queue_creations(
    inner: &Inner,
    creations: &mut Vec<Creation>,
) -> (Option<Queued>, Option<u64>) {
    let registry = lock(&inner.registry);
    let mut copies = Vec::with_capacity(creations.len());
    let mut entries = Vec::with_capacity(creations.len());
    let mut unqueued = None;
    let mut room: Option<crate::space::Admission> = None;
    for creation in creations.drain(..) {
        let current = registry
            .live
            .get(&creation.record.id)
            .is_some_and(|live| Arc::ptr_eq(live, &creation.live) && !lock(live).state.deleted);
        let admission = if current {
            inner.admit(0, Class::Relocation)
        } else {
            None
        };
        let Some(admission) = admission else {
            unqueued = unqueued.or(Some(creation.from));
            continue;
        };
        match room.as_mut() {
            Some(room) => room.merge(admission),
            None => room = Some(admission),
        }
        entries.push(creation.record.entry(Bytes::new()));
        copies.push(Copy {
            live: Some(creation.live),
            from: creation.from,
            carried: Carried::Create,
            bytes: RECORD_HEADER_BYTES,
        });
    }
    let Some(room) = room else {
        return (None, unqueued);
    };
    match inner.append_group(entries, room) {
        Ok(ticket) => (Some(Queued { ticket, copies }), unqueued),
        // Not queued (the drive stopped: the next look says so): none of them was made.
        Err(_) => {
            let first = copies.iter().map(|copy| copy.from).min();
            (None, first.into_iter().chain(unqueued).min())
        }
    }
}

/// A copy is durable at `to`: its LogDrive's state (or the generation marker) moves to it.
pub(crate) fn apply(inner: &Inner, live: &Option<Shared>, from: u64, carried: &Carried, to: u64) {
    if let Carried::Generation(generation) = carried {
        *lock(&inner.reclaimer.marker) = Some(Marker {
            lsn: to,
            generation: *generation,
        });
        return;
    }
    let Some(live) = live else {
        return;
    };
    let mut live = lock(live);
    let state = &mut live.state;
    match carried {
        Carried::Write { address } => state.relocated_write(*address, from, to),
        Carried::Create => state.hold_create(to),
        Carried::Control(control) => state.relocated_control(*control, to),
        Carried::Damaged { address } => state.relocated_damage(*address, from, to),
        Carried::Suspect => state.relocated_suspect(from, to),
        Carried::Generation(_) => {}
    }
}

/// The generation record a trim to `trim_to` needs written first, if any (unless the last
/// one carries the highest generation issued and lies past the trim); `Err` when it found
/// no room, and the trim must wait.
pub(crate) fn generation_record(inner: &Inner, trim_to: u64) -> Option<Result<Queued, ()>> {
    let generation = lock(&inner.registry).generation_max;
    if generation == 0 {
        return None;
    }
    let marker = *lock(&inner.reclaimer.marker);
    if marker.is_some_and(|marker| marker.generation == generation && marker.lsn > trim_to) {
        return None;
    }
    let record = Record::new(RecordType::Generation, 0, generation, generation, 0);
    let carried = Carried::Generation(generation);
    let copy = queue_copy(inner, None, 0, record, Bytes::new(), carried).ok_or(());
    if copy.is_ok() {
        let counters = &inner.reclaimer.counters;
        counters.generation_records.fetch_add(1, Ordering::Relaxed);
    }
    Some(copy)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{wait, LogDrive, LogDriveStore, ReclaimPolicy, StoreOptions};

    /// A store on a fresh 16 MiB ring, its reclaimer run by hand only.
    fn store() -> (tempfile::TempDir, LogDriveStore) {
        let directory = tempfile::tempdir().expect("temporary directory");
        let path = directory.path().join("ring");
        let format = sealog::FormatOptions::new(16 << 20).segment_size_bytes(1 << 20);
        sealog::format(&path, &format).expect("format");
        let policy = ReclaimPolicy::default().background(false);
        let options = StoreOptions::default().reclaim(policy);
        let store = LogDriveStore::open_with_options(&path, options).expect("open");
        (directory, store)
    }

    /// LogDrive `id`'s creation as a walk defers it: its state and its record's LSN.
    fn creation_of(store: &LogDriveStore, id: u64) -> Creation {
        let live = Arc::clone(&lock(&store.inner().registry).live[&id]);
        let (from, record) = {
            let mut guard = lock(&live);
            guard.take_in(&**store.inner());
            let state = &guard.state;
            let record = Record::new(RecordType::Create, id, state.generation, 1 << 40, 0);
            (state.holders.create.expect("durable"), record.relocated())
        };
        Creation { live, from, record }
    }

    /// A creation judged needed whose LogDrive's deletion is queued before the group is: no
    /// copy is made (it would land after the deletion, and replay would take the LogDrive
    /// for created again), and the head must stay before the creation. The live one beside
    /// it is copied; after a reopen the deleted LogDrive stays deleted.
    #[test]
    fn a_creation_whose_deletion_was_queued_since_the_walk_met_it_is_not_copied() {
        let (directory, store) = store();
        let kept = wait(store.create(1, 1 << 40)).expect("create");
        let deleted = wait(store.create(2, 1 << 40)).expect("create");
        let mut creations = vec![creation_of(&store, 1), creation_of(&store, 2)];
        let deleted_from = creations[1].from;
        drop(deleted);
        wait(store.delete(2)).expect("delete");
        let (queued, unqueued) = queue_creations(store.inner(), &mut creations);
        assert_eq!(unqueued, Some(deleted_from));
        let queued = queued.expect("the live LogDrive's copy");
        assert_eq!(queued.copies.len(), 1);
        assert!(Arc::ptr_eq(
            queued.copies[0].live.as_ref().expect("a LogDrive's copy"),
            &lock(&store.inner().registry).live[&1]
        ));
        queued.ticket.wait().expect("the copy");
        drop(kept);
        let path = store.drive().path().to_path_buf();
        store.close();
        drop(store);
        let store = LogDriveStore::open(&path, sealog::DriveOptions::default()).expect("reopen");
        assert_eq!(store.ids().expect("ids"), [1]);
        drop(directory);
    }

    /// A LogDrive whose deletion is queued and not yet durable is still needed: a crash
    /// could lose the deletion and bring the LogDrive back, so the head must not pass its
    /// records, whether the counts would let it skip them or a relocating walk meets them.
    /// Its 600 records of 4 KiB lie at the head (two segments and more, so that relocation
    /// has a segment's worth to win), before a live LogDrive's creation; with the deletion
    /// durable, they are garbage and the head moves past them.
    #[test]
    fn a_logdrive_whose_deletion_is_not_yet_durable_holds_the_head() {
        let (directory, store) = store();
        let dying = wait(store.create(1, 1 << 40)).expect("create");
        let value = Bytes::from(vec![7u8; 4096]);
        let writes: Vec<_> = (0..600)
            .map(|address| dying.write(address, 1, value.clone()))
            .collect();
        for write in writes {
            wait(write).expect("write");
        }
        let kept = wait(store.create(2, 1 << 40)).expect("create");
        wait(kept.write(0, 1, Bytes::from_static(b"kept"))).expect("write");
        let first_record = creation_of(&store, 1).from;
        // The deletion as queued (the LogDrive out of the live set, its state deleted) and
        // its record not yet known durable: what `delete` leaves until its flush completes.
        let generation = {
            let mut registry = lock(&store.inner().registry);
            let shared = registry.live.remove(&1).expect("live");
            let generation = {
                let mut live = lock(&shared);
                live.state.deleted = true;
                live.state.generation
            };
            registry.dying.insert((1, generation), shared);
            generation
        };
        store.reclaim_now().expect("reclaim");
        let head = store.drive().first_live_lsn();
        assert!(
            head <= first_record,
            "the head moved to {head}, past the dying LogDrive's creation at {first_record}"
        );
        // Durable: nothing holds its records any more.
        lock(&store.inner().registry).dying.remove(&(1, generation));
        store.reclaim_now().expect("reclaim");
        let head = store.drive().first_live_lsn();
        assert!(head > first_record + 600, "the head stayed at {head}");
        assert_eq!(
            wait(kept.read(0)).expect("read"),
            crate::ReadOutcome::Value(Bytes::from_static(b"kept"))
        );
        drop((dying, kept));
        store.close();
        drop(directory);
    }
}
