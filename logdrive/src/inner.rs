//! What a LogDrive store's parts share: [`Inner`] (the engine drive, the registry of
//! LogDrives, the ring's room, the reclaimer's signals, the options, the stop flag) and the
//! steps every operation takes through it (admission into the ring's room, parking a record
//! that found none, queueing a record's entry). The store, its handles, the completions and
//! the reclaimer all hold an `Arc<Inner>`; this module imports none of them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::Instant;

use bytes::Bytes;
use sealog::{Drive, Entry, NewEntry, SummedBytes, Ticket};

use crate::api::{ready, LogDriveError, OpFuture};
use crate::errors::append_error;
use crate::live::{PendingDelete, Shared, Stop};
use crate::options::StoreOptions;
use crate::reclaim::reclaimer::Reclaimer;
use crate::record::Record;
use crate::replay::DamageFound;
use crate::space::{record_bytes, Admission, Class, Space};
use crate::sync::lock;
use crate::waiting::{Deferred, Parked};

/// The live LogDrives, the deleted ones whose deletion is not yet known durable, and the
/// generations.
#[derive(Default)]
pub(crate) struct Registry {
    pub live: HashMap<u64, Shared>,
    /// Deleted, by (id, generation), until the deletion is durable: the reclaimer must not
    /// take their records for garbage before then (a crash could still bring them back).
    pub dying: HashMap<(u64, u64), Shared>,
    pub deletes: Vec<PendingDelete>,
    /// The highest generation issued; the next creation takes one more.
    pub generation_max: u64,
}

impl Registry {
    /// Takes in the deletions that completed since the last look.
    pub(crate) fn take_in(&mut self) {
        let Registry { dying, deletes, .. } = self;
        deletes.retain(|pending| match pending.ticket.try_outcome() {
            Some(outcome) => {
                if outcome.is_ok() {
                    dying.remove(&pending.key);
                }
                false
            }
            None => true,
        });
    }
}

pub(crate) struct Inner {
    pub drive: Drive,
    pub registry: Mutex<Registry>,
    pub stopped: OnceLock<String>,
    pub skipped: u64,
    pub space: Arc<Space>,
    pub reclaimer: Arc<Reclaimer>,
    pub options: StoreOptions,
    /// What the open found damaged (a quarantined open).
    pub quarantine: Vec<DamageFound>,
    pub reclaim_thread: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("LogDriveStore")
            .field("path", &self.drive.path())
            .finish_non_exhaustive()
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.reclaimer.stop();
        let thread = lock(&self.reclaim_thread).take();
        if let Some(thread) = thread {
            // The reclaimer's own last reference may be the one dropped: it is ending.
            if thread.thread().id() != std::thread::current().id() {
                let _ = thread.join();
            }
        }
    }
}

impl Stop for Inner {
    fn stop(&self, reason: String) {
        Inner::stop(self, reason);
    }
}

impl Inner {
    pub(crate) fn check_running(&self) -> Result<(), LogDriveError> {
        match self.stopped.get() {
            Some(reason) => Err(LogDriveError::Stopped {
                reason: reason.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Stops the store: every operation answers `Stopped` from now on, and every record
    /// waiting for room is refused so.
    pub(crate) fn stop(&self, reason: String) {
        let _ = self.stopped.set(reason);
        self.reclaimer.wake();
        let reason = self.stopped.get().cloned().unwrap_or_default();
        self.space.fail_all(|| LogDriveError::Stopped {
            reason: reason.clone(),
        });
    }

    /// Admits a record of `payload_len` bytes of this class into the ring's room now, if it
    /// fits; `None` (counted as a refusal, which wakes the reclaimer) when it does not.
    pub(crate) fn admit(&self, payload_len: u64, class: Class) -> Option<Admission> {
        let room = || self.drive.room();
        let admitted = self.space.admit(&room, record_bytes(payload_len), class);
        if admitted.is_none() {
            self.reclaimer.refused(class);
        }
        admitted
    }

    /// Grants room to the records waiting for it, as far as the ring's room allows now.
    pub(crate) fn grant(&self) -> usize {
        self.space.grant(&|| self.drive.room())
    }

    /// Parks an operation whose record of `payload_len` bytes found no room: `resume` runs
    /// once room is granted (with the admission) or refused (with the error), and its future
    /// is what the returned future yields. Refused at once when the store does not wait
    /// ([`StoreOptions::full_wait`] or [`StoreOptions::control_wait`] zero). The caller
    /// holds no LogDrive's mutex and not the registry's: `resume` may run on this thread,
    /// now.
    pub(crate) fn park<T, F>(&self, payload_len: u64, class: Class, resume: F) -> OpFuture<T>
    where
        T: Send + 'static,
        F: FnOnce(Result<Admission, LogDriveError>) -> OpFuture<T> + Send + 'static,
    {
        match self.park_with(payload_len, class, resume) {
            Some(parked) => Deferred::boxed(parked),
            None => ready(Err(LogDriveError::RingFull)),
        }
    }

    /// [`Inner::park`]'s slot, for a caller that waits on it itself; `None` when the store
    /// does not wait for this class. The store's thread refuses the waiter at its deadline.
    pub(crate) fn park_with<T, F>(
        &self,
        payload_len: u64,
        class: Class,
        resume: F,
    ) -> Option<Arc<Parked<T>>>
    where
        T: Send + 'static,
        F: FnOnce(Result<Admission, LogDriveError>) -> T + Send + 'static,
    {
        let wait = match class {
            Class::Write => self.options.full_wait,
            Class::Control | Class::Release | Class::Relocation => self.options.control_wait,
        };
        if wait.is_zero() {
            return None;
        }
        let deadline = Instant::now().checked_add(wait)?;
        let parked = Parked::new();
        let slot = Arc::clone(&parked);
        let resume = Box::new(move |admitted| slot.fill(resume(admitted)));
        let room = || self.drive.room();
        self.space
            .wait(&room, (class, record_bytes(payload_len)), deadline, resume);
        // The store's thread wakes for the deadline it may not have known of.
        self.reclaimer.wake();
        Some(parked)
    }

    /// Queues a record with the room `admission` holds for it.
    pub(crate) fn append(
        &self,
        record: &Record,
        payload: Bytes,
        admission: Admission,
    ) -> Result<Ticket, LogDriveError> {
        self.check_running()?;
        let ticket = self
            .drive
            .append(record.entry(payload))
            .map_err(append_error)?;
        admission.sent();
        Ok(ticket)
    }

    /// Queues entries of records as one all-or-nothing group, at consecutive LSNs, with the
    /// room `admission` holds for all of them.
    pub(crate) fn append_group(
        &self,
        entries: Vec<NewEntry>,
        admission: Admission,
    ) -> Result<Ticket, LogDriveError> {
        self.check_running()?;
        let ticket = self.drive.append_group(entries).map_err(append_error)?;
        admission.sent();
        Ok(ticket)
    }

    /// Queues a record whose payload's CRC was computed already.
    pub(crate) fn append_summed(
        &self,
        record: &Record,
        payload: SummedBytes,
        admission: Admission,
    ) -> Result<Ticket, LogDriveError> {
        self.check_running()?;
        let (kind, header) = (record.record_type.kind(), record.header());
        let ticket = self
            .drive
            .append(Entry::from(payload).with_kind(kind).with_header(header))
            .map_err(append_error)?;
        admission.sent();
        Ok(ticket)
    }
}
