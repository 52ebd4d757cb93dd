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

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use sealog::io::IoBackend;
use sealog::{AppendOutcome, Drive, DriveOptions, Geometry, OpenError, Ticket, WhenFull};

use crate::api::{ready, LogDriveError, OpFuture};
use crate::complete::{Completing, Completion, ControlDone, DeleteDone};
use crate::geometry::GeometryError;
use crate::handle::LocalLogDrive;
use crate::inner::Inner;
use crate::inner::Registry;
use crate::live::{ControlKind, Live, Shared};
pub use crate::options::{
    StoreOptions, CONTROL_WAIT_DEFAULT, FULL_WAIT_DEFAULT, WEAK_TAIL_K_MAX_DEFAULT,
};
use crate::reclaim::figures::ReclaimStats;
use crate::reclaim::reclaimer::Reclaimer;
use crate::record::{Record, RecordType, GENERATION_MAX};
use crate::replay::{DamageFound, Replay};
use crate::space::{Admission, Class, Space};
use crate::state::LogState;
use crate::sync::lock;

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

/// Many LogDrives on one drive.
#[derive(Clone, Debug)]
pub struct LogDriveStore {
    inner: Arc<Inner>,
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
        let thread = crate::reclaim::run::spawn(&inner).map_err(|source| {
            StoreOpenError::Drive(OpenError::Io {
                path: inner.drive.path().to_path_buf(),
                action: "start the reclaimer thread",
                source,
            })
        })?;
        *lock(&inner.reclaim_thread) = Some(thread);
        Ok(LogDriveStore { inner })
    }

    /// The options the store was opened with (its windows and waits; a server announces
    /// them to its clients).
    pub fn options(&self) -> &StoreOptions {
        &self.inner.options
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
        live.take_in(&*self.inner);
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
        crate::reclaim::survey::stats(&self.inner)
    }

    /// Runs the reclaimer's work now, on this thread, until the policy is met or nothing more
    /// can be done (what the background thread does on its own; for embedders that run it
    /// themselves, with `ReclaimPolicy::background` off, and for tests).
    pub fn reclaim_now(&self) -> Result<ReclaimStats, LogDriveError> {
        self.inner.check_running()?;
        crate::reclaim::run::run(&self.inner, false)?;
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
                live.take_in(&*self.inner);
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

/// A creation's outcome: the control's, then the new LogDrive's handle.
pub(crate) struct CreateDone {
    pub control: ControlDone,
    pub handle: LocalLogDrive,
}

impl Completion for CreateDone {
    type Output = LocalLogDrive;

    fn complete(self, outcome: AppendOutcome) -> Result<LocalLogDrive, LogDriveError> {
        self.control.complete(outcome).map(|()| self.handle)
    }

    fn abandon(self, ticket: Ticket) {
        self.control.abandon(ticket);
    }
}
