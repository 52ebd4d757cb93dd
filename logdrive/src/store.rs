//! Many LogDrives on one engine drive: [`LogDriveStore`] owns a [`sealog::Drive`], rebuilds
//! every LogDrive in the open's replay pass (`replay`), creates and deletes them
//! durably, hands out [`LocalLogDrive`] handles (`handle`), each bound to one id and
//! generation, admits records into the ring's room (`space`) and runs the reclaimer
//! ([`crate::reclaim`]).
//!
//! Ordering: each LogDrive's checks and the queueing of its record happen under that
//! LogDrive's mutex, held until the engine has the append queued, so records of one LogDrive
//! take LSNs in the order they were checked: no write checked against an old fence or seal
//! lands after the new one, and replay, applying records in LSN order, reaches the same
//! decisions. Completions come from the engine's tickets (`complete`); no thread waits per
//! call. A record that finds no room waits for it outside every mutex (`space`, `waiting`)
//! and is checked again once admitted.
//!
//! A write's slot is indexed when its record is queued (so a second write of the address is
//! checked against it) but counts as written (reads, T, N) only once its record is
//! acknowledged. A seal, fence or trim is checked against and applied to the state as queued
//! at once, and to what reads answer once durable (`state`). A control record (create,
//! delete, seal, fence, trim) that the engine then fails leaves memory and log in doubt, so
//! the store stops: every later operation is `Stopped` until the drive is reopened. A closed
//! store answers `Stopped` to every operation, on every handle.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use sealog::io::IoBackend;
use sealog::{
    AppendError, Drive, DriveOptions, Geometry, NewEntry, OpenError, ReadError, SummedBytes,
    Ticket, WhenFull,
};

use crate::api::{LogDriveError, OpFuture};
use crate::complete::{
    Completing, ControlDone, ControlKind, CreateDone, DeleteDone, Live, PendingDelete, Shared,
};
use crate::geometry::GeometryError;
use crate::handle::LocalLogDrive;
use crate::reclaim::{ReclaimPolicy, ReclaimStats, Reclaimer};
use crate::record::{Record, RecordType, GENERATION_MAX};
use crate::replay::{DamageFound, Replay};
use crate::space::{record_bytes, Admission, Class, Space};
use crate::state::LogState;
use crate::waiting::{Deferred, Parked};

/// How a [`LogDriveStore`] opens and runs.
#[derive(Clone, Debug)]
pub struct StoreOptions {
    /// The engine drive's options (its recovery mode among them:
    /// `RecoveryMode::Quarantine` opens a ring with damaged acknowledged records). Its
    /// `when_full` must be `WhenFull::Fail`: records wait for room in the store, not in the
    /// engine's queue.
    pub drive: DriveOptions,
    /// When and how fast the ring's space is reclaimed.
    pub reclaim: ReclaimPolicy,
    /// The largest window K writers keep between T and N (an AtomicLog's K): how far past N a
    /// damaged record whose header is gone may have written, in a quarantined open.
    pub write_window_max: u64,
    /// The largest k a `weak_tail` call answers for ([`LogDriveError::InvalidWindow`] above
    /// it), so that one client call costs O(k) and no more; never below `write_window_max`.
    pub weak_tail_k_max: u64,
    /// How long a write that finds the ring full waits for the reclaimer to make room
    /// before it is refused with `RingFull` (zero: refused at once). Waiting writes are
    /// refused sooner when the ring holds nothing the reclaimer could free.
    pub full_wait: Duration,
    /// How long a control record (create, delete, seal, fence, trim) that finds even the
    /// control reserve spent waits for the reclaimer (zero: refused at once). Control
    /// records are what make room, so they wait longer than writes by default.
    pub control_wait: Duration,
}

/// The default [`StoreOptions::weak_tail_k_max`].
pub const WEAK_TAIL_K_MAX_DEFAULT: u64 = 4096;

/// The default [`StoreOptions::full_wait`].
pub const FULL_WAIT_DEFAULT: Duration = Duration::from_secs(10);

/// The default [`StoreOptions::control_wait`].
pub const CONTROL_WAIT_DEFAULT: Duration = Duration::from_secs(30);

impl Default for StoreOptions {
    fn default() -> StoreOptions {
        StoreOptions {
            drive: DriveOptions::default(),
            reclaim: ReclaimPolicy::default(),
            write_window_max: 64,
            weak_tail_k_max: WEAK_TAIL_K_MAX_DEFAULT,
            full_wait: FULL_WAIT_DEFAULT,
            control_wait: CONTROL_WAIT_DEFAULT,
        }
    }
}

impl StoreOptions {
    /// These options with `drive` for the engine drive.
    pub fn drive(mut self, drive: DriveOptions) -> StoreOptions {
        self.drive = drive;
        self
    }

    /// These options with `reclaim` as the reclamation policy.
    pub fn reclaim(mut self, reclaim: ReclaimPolicy) -> StoreOptions {
        self.reclaim = reclaim;
        self
    }

    /// These options with `write_window_max` as the largest window writers keep.
    pub fn write_window_max(mut self, write_window_max: u64) -> StoreOptions {
        self.write_window_max = write_window_max;
        self
    }

    /// These options answering `weak_tail` for k up to `weak_tail_k_max`.
    pub fn weak_tail_k_max(mut self, weak_tail_k_max: u64) -> StoreOptions {
        self.weak_tail_k_max = weak_tail_k_max;
        self
    }

    /// These options with writes waiting up to `full_wait` for room on a full ring.
    pub fn full_wait(mut self, full_wait: Duration) -> StoreOptions {
        self.full_wait = full_wait;
        self
    }

    /// These options with control records waiting up to `control_wait` for room once the
    /// control reserve is spent.
    pub fn control_wait(mut self, control_wait: Duration) -> StoreOptions {
        self.control_wait = control_wait;
        self
    }

    fn check(&self) -> Result<(), String> {
        if self.weak_tail_k_max < self.write_window_max {
            return Err(format!(
                "weak_tail_k_max {} is below write_window_max {}: writers could keep a window \
                 weak_tail would not answer for",
                self.weak_tail_k_max, self.write_window_max
            ));
        }
        self.reclaim.check()
    }
}

/// Why a store could not open.
#[derive(Debug, thiserror::Error)]
pub enum StoreOpenError {
    /// The engine drive did not open.
    #[error(transparent)]
    Drive(#[from] OpenError),
    /// The options or the reclamation policy cannot work on this ring.
    #[error("{path}: {reason}")]
    Policy {
        /// The ring.
        path: std::path::PathBuf,
        /// What is wrong with the policy.
        reason: String,
    },
    /// The ring's geometry cannot keep a store's reserves (too few segments for their
    /// size); the error names the smallest ring of its segment size that works.
    #[error("{path}: {source}")]
    Geometry {
        /// The ring.
        path: std::path::PathBuf,
        /// What the geometry lacks.
        source: GeometryError,
    },
    /// The drive's options make appends wait in the engine's queue on a full ring: the
    /// store's relocation copies and deletions would queue behind the writes waiting for the
    /// room only they can make.
    #[error(
        "{path}: a LogDrive store's drive must open with WhenFull::Fail (records wait for \
         room in the store)"
    )]
    WhenFullWait {
        /// The ring.
        path: std::path::PathBuf,
    },
}

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
    stopped: OnceLock<String>,
    skipped: u64,
    pub space: Arc<Space>,
    pub reclaimer: Arc<Reclaimer>,
    pub options: StoreOptions,
    /// What the open found damaged (a quarantined open).
    pub quarantine: Vec<DamageFound>,
    reclaim_thread: Mutex<Option<JoinHandle<()>>>,
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

/// Many LogDrives on one drive.
#[derive(Clone, Debug)]
pub struct LogDriveStore {
    inner: Arc<Inner>,
}

pub(crate) fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

pub(crate) fn ready<T: Send + 'static>(outcome: Result<T, LogDriveError>) -> OpFuture<T> {
    Box::pin(std::future::ready(outcome))
}

pub(crate) fn append_error(error: AppendError) -> LogDriveError {
    match error {
        AppendError::PayloadTooLarge {
            payload_len,
            payload_size_max_bytes,
        } => LogDriveError::TooLarge {
            len: payload_len,
            max: u64::from(payload_size_max_bytes),
        },
        AppendError::RingFull { .. } => LogDriveError::RingFull,
        other => LogDriveError::Stopped {
            reason: other.to_string(),
        },
    }
}

pub(crate) fn read_error(error: ReadError) -> LogDriveError {
    match error {
        ReadError::Failed(_) | ReadError::Closed(_) => LogDriveError::Stopped {
            reason: error.to_string(),
        },
        other => LogDriveError::Io {
            reason: other.to_string(),
        },
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
            .append_entry(record.entry(payload))
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
            .append_summed(kind, header, payload)
            .map_err(append_error)?;
        admission.sent();
        Ok(ticket)
    }
}

impl LogDriveStore {
    /// Opens the ring at `path` with the default policy and rebuilds its LogDrives in the
    /// open's replay pass.
    pub fn open(path: &Path, options: DriveOptions) -> Result<LogDriveStore, StoreOpenError> {
        LogDriveStore::open_with_options(path, StoreOptions::default().drive(options))
    }

    /// Opens the ring at `path` with `options`.
    pub fn open_with_options(
        path: &Path,
        options: StoreOptions,
    ) -> Result<LogDriveStore, StoreOpenError> {
        let drive_options = drive_options(path, &options)?;
        // The ring's geometry is checked before the writable open (which writes a control
        // block for its incarnation) where it can be read without the lock; `start` checks
        // it again, from the drive that opened.
        if let Ok(files) = sealog::storage::open_unlocked(path) {
            check_geometry(path, &files.geometry)?;
        }
        let replay = Replay::new(options.write_window_max);
        let (drive, replay) = Drive::open_visiting(path, drive_options, replay)?;
        LogDriveStore::start(drive, replay, options)
    }

    /// Opens a store on a drive whose backend `make_backend` builds on the drive thread (the
    /// simulated device of the fault-injection crate; see [`Drive::open_with_visiting`]).
    pub fn open_with_backend<B, F>(
        path: &Path,
        geometry: Geometry,
        options: StoreOptions,
        make_backend: F,
    ) -> Result<LogDriveStore, StoreOpenError>
    where
        B: IoBackend + 'static,
        F: FnOnce() -> std::io::Result<B> + Send + 'static,
    {
        let drive_options = drive_options(path, &options)?;
        check_geometry(path, &geometry)?;
        let replay = Replay::new(options.write_window_max);
        let (drive, replay) =
            Drive::open_with_visiting(path, geometry, drive_options, replay, make_backend)?;
        LogDriveStore::start(drive, replay, options)
    }

    fn start(
        drive: Drive,
        replay: Replay,
        options: StoreOptions,
    ) -> Result<LogDriveStore, StoreOpenError> {
        let path = drive.path().to_path_buf();
        let geometry = drive.geometry();
        check_geometry(&path, &geometry)?;
        let policy = |reason| StoreOpenError::Policy {
            path: path.clone(),
            reason,
        };
        let space = Space::for_ring(&geometry, &options.reclaim).map_err(policy)?;
        options.check().map_err(policy)?;
        let rebuilt = replay.finish();
        let live = rebuilt
            .live
            .into_iter()
            .map(|(id, state)| (id, Arc::new(Mutex::new(Live::new(state)))));
        let registry = Registry {
            live: live.collect(),
            generation_max: rebuilt.generation_max,
            ..Registry::default()
        };
        let reclaimer = Reclaimer::new(&drive);
        let inner = Arc::new(Inner {
            drive,
            registry: Mutex::new(registry),
            stopped: OnceLock::new(),
            skipped: rebuilt.skipped,
            space: Arc::new(space),
            reclaimer,
            options,
            quarantine: rebuilt.damage,
            reclaim_thread: Mutex::new(None),
        });
        let thread = crate::reclaim::spawn(&inner).map_err(|source| {
            StoreOpenError::Drive(OpenError::Io {
                path: inner.drive.path().to_path_buf(),
                action: "start the reclaimer thread",
                source,
            })
        })?;
        *lock(&inner.reclaim_thread) = Some(thread);
        Ok(LogDriveStore { inner })
    }

    /// The engine drive underneath (for its figures: only the store's reclaimer may trim
    /// it).
    pub fn drive(&self) -> &Drive {
        &self.inner.drive
    }

    /// Closes the store: every operation on it and on its handles answers `Stopped` from
    /// now on (records waiting for room among them), the reclaimer stops, and the drive
    /// closes once what was queued is durable. Dropping the store and every handle does the
    /// same.
    pub fn close(&self) {
        self.inner.stop("the store was closed".to_string());
        self.inner.reclaimer.stop();
        let thread = lock(&self.inner.reclaim_thread).take();
        if let Some(thread) = thread {
            let _ = thread.join();
        }
        self.inner.drive.close();
    }

    /// Entries the open's replay skipped: no LogDrive record, one for no live LogDrive, or
    /// one the live path would have refused.
    pub fn skipped_records(&self) -> u64 {
        self.inner.skipped
    }

    /// The ids of the live LogDrives, in order.
    pub fn ids(&self) -> Result<Vec<u64>, LogDriveError> {
        self.inner.check_running()?;
        let mut ids: Vec<u64> = lock(&self.inner.registry).live.keys().copied().collect();
        ids.sort_unstable();
        Ok(ids)
    }

    /// The live LogDrive `id` (`Missing` when there is none).
    pub fn get(&self, id: u64) -> Result<LocalLogDrive, LogDriveError> {
        self.inner.check_running()?;
        let Some(live) = lock(&self.inner.registry).live.get(&id).map(Arc::clone) else {
            return Err(LogDriveError::Missing { id, generation: 0 });
        };
        let generation = lock(&live).state.generation;
        Ok(self.handle(id, generation, live))
    }

    fn handle(&self, id: u64, generation: u64, live: Shared) -> LocalLogDrive {
        LocalLogDrive::new(Arc::clone(&self.inner), live, id, generation)
    }

    /// Creates LogDrive `id` with addresses below `capacity`, durably, with the store's next
    /// generation (`Exists` while one is live; `OutOfRange` naming the generation once the
    /// generations are spent). Its records queue behind the creation's at once; the future
    /// yields its handle once the creation is durable.
    pub fn create(&self, id: u64, capacity: u64) -> OpFuture<LocalLogDrive> {
        self.create_with(id, capacity, None)
    }

    /// [`LogDriveStore::create`] with room already admitted for its record (a creation that
    /// waited for room, checked again now).
    fn create_with(
        &self,
        id: u64,
        capacity: u64,
        admission: Option<Admission>,
    ) -> OpFuture<LocalLogDrive> {
        if let Err(error) = self.inner.check_running() {
            return ready(Err(error));
        }
        let mut registry = lock(&self.inner.registry);
        if registry.live.contains_key(&id) {
            return ready(Err(LogDriveError::Exists { id }));
        }
        let generation = registry.generation_max + 1;
        if generation > GENERATION_MAX {
            return ready(Err(LogDriveError::OutOfRange {
                address: generation,
                valid: 1..GENERATION_MAX + 1,
            }));
        }
        let Some(admission) = admission.or_else(|| self.inner.admit(0, Class::Control)) else {
            drop(registry);
            let store = self.clone();
            return self.inner.park(0, Class::Control, move |admitted| {
                admitted.map_or_else(
                    |error| ready(Err(error)),
                    |admission| store.create_with(id, capacity, Some(admission)),
                )
            });
        };
        let record = Record::new(RecordType::Create, id, generation, capacity, 0);
        let floor = self.inner.drive.next_lsn();
        let ticket = match self.inner.append(&record, Bytes::new(), admission) {
            Ok(ticket) => ticket,
            Err(error) => return ready(Err(error)),
        };
        let mut state = LogState::new(id, generation, capacity);
        state.queued_at(floor);
        let live = Arc::new(Mutex::new(Live::new(state)));
        registry.generation_max = generation;
        registry.live.insert(id, Arc::clone(&live));
        drop(registry);
        let handle = self.handle(id, generation, Arc::clone(&live));
        let control = ControlDone {
            inner: Arc::clone(&self.inner),
            live,
            kind: ControlKind::Create,
            floor,
        };
        Completing::boxed(ticket, CreateDone { control, handle })
    }

    /// Deletes LogDrive `id`, durably: its handles answer `Missing` from now on, and its
    /// records are garbage for the reclaimer once the deletion is durable.
    pub fn delete(&self, id: u64) -> OpFuture<()> {
        self.delete_with(id, None)
    }

    /// [`LogDriveStore::delete`] with room already admitted for its record.
    fn delete_with(&self, id: u64, admission: Option<Admission>) -> OpFuture<()> {
        if let Err(error) = self.inner.check_running() {
            return ready(Err(error));
        }
        let mut registry = lock(&self.inner.registry);
        registry.take_in();
        let Some(shared) = registry.live.get(&id).map(Arc::clone) else {
            return ready(Err(LogDriveError::Missing { id, generation: 0 }));
        };
        let mut live = lock(&shared);
        live.take_in(&self.inner);
        let Some(admission) = admission.or_else(|| self.inner.admit(0, Class::Release)) else {
            drop((live, registry));
            let store = self.clone();
            return self.inner.park(0, Class::Release, move |admitted| {
                admitted.map_or_else(
                    |error| ready(Err(error)),
                    |admission| store.delete_with(id, Some(admission)),
                )
            });
        };
        let generation = live.state.generation;
        let record = Record::new(RecordType::Delete, id, generation, 0, 0);
        let ticket = match self.inner.append(&record, Bytes::new(), admission) {
            Ok(ticket) => ticket,
            Err(error) => return ready(Err(error)),
        };
        live.state.deleted = true;
        drop(live);
        registry.live.remove(&id);
        registry.dying.insert((id, generation), shared);
        drop(registry);
        let done = DeleteDone {
            inner: Arc::clone(&self.inner),
            key: (id, generation),
        };
        Completing::boxed(ticket, done)
    }

    /// The store's shared state, for the crate's own tests.
    #[cfg(test)]
    pub(crate) fn inner(&self) -> &Arc<Inner> {
        &self.inner
    }

    /// What the reclaimer has done since the store opened (its counters start from zero
    /// on every open), and the ring's space as it sees it now.
    pub fn reclaim_stats(&self) -> ReclaimStats {
        crate::reclaim::stats(&self.inner)
    }

    /// Runs the reclaimer's work now, on this thread, until the policy is met or nothing more
    /// can be done (what the background thread does on its own; for embedders that run it
    /// themselves, with `ReclaimPolicy::background` off, and for tests).
    pub fn reclaim_now(&self) -> Result<ReclaimStats, LogDriveError> {
        self.inner.check_running()?;
        crate::reclaim::run(&self.inner, false)?;
        Ok(self.reclaim_stats())
    }

    /// What a quarantined open found damaged: each damaged LSN range, and the LogDrive
    /// address it held where its header survived.
    pub fn quarantine_report(&self) -> &[DamageFound] {
        &self.inner.quarantine
    }

    /// What is still unrepaired: per LogDrive, the addresses that read as `Damaged`.
    pub fn damaged(&self) -> Result<Vec<(u64, BTreeSet<u64>)>, LogDriveError> {
        self.inner.check_running()?;
        let shared: Vec<Shared> = lock(&self.inner.registry).live.values().cloned().collect();
        let mut damaged: Vec<(u64, BTreeSet<u64>)> = shared
            .iter()
            .filter_map(|live| {
                let mut live = lock(live);
                live.take_in(&self.inner);
                let addresses = live.state.damaged_addresses();
                (!addresses.is_empty()).then_some((live.state.id, addresses))
            })
            .collect();
        damaged.sort_unstable_by_key(|(id, _)| *id);
        Ok(damaged)
    }
}

/// Whether a ring of `geometry` at `path` can hold a store (`crate::geometry`).
fn check_geometry(path: &Path, geometry: &Geometry) -> Result<(), StoreOpenError> {
    crate::geometry::check(geometry).map_err(|source| StoreOpenError::Geometry {
        path: path.to_path_buf(),
        source,
    })
}

/// The drive options a store opens its drive with: the caller's, which must not make
/// appends wait in the engine's queue, marking the ring as a store's.
fn drive_options(path: &Path, options: &StoreOptions) -> Result<DriveOptions, StoreOpenError> {
    if options.drive.when_full != WhenFull::Fail {
        return Err(StoreOpenError::WhenFullWait {
            path: path.to_path_buf(),
        });
    }
    // The ring says it holds a store from its first writable open on, so that the operator
    // CLI knows its head is the reclaimer's (a ring `sealog format --logdrive` made says so
    // already).
    Ok(options
        .drive
        .clone()
        .purpose(Some(sealog::RingPurpose::LogDriveStore)))
}
