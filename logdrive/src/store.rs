//! Many LogDrives on one engine drive: [`LogDriveStore`] owns a [`sealog::Drive`], rebuilds
//! every LogDrive in the open's replay pass (`replay`), creates and deletes them
//! durably, hands out [`LocalLogDrive`] handles, each bound to one id and generation, keeps
//! ring room for relocation (`space`) and runs the reclaimer ([`crate::reclaim`]).
//!
//! Ordering: each LogDrive's checks and the queueing of its record happen under that
//! LogDrive's mutex, held until the engine has the append queued, so records of one LogDrive
//! take LSNs in the order they were checked: no write checked against an old fence or seal
//! lands after the new one, and replay, applying records in LSN order, reaches the same
//! decisions. Completions come from the engine's tickets; no thread waits per call.
//!
//! A write's slot is indexed when its record is queued (so a second write of the address is
//! checked against it) but counts as written (reads, T, N) only once its record is
//! acknowledged. A seal, fence or trim is checked against and applied to the state as queued
//! at once, and to what reads answer once durable (`state`). Every record's outcome
//! is taken in exactly once: by its future when it completes, or, when the future was
//! dropped first, from the ticket it leaves with the LogDrive (or the store, for a
//! deletion), looked at on the LogDrive's next operation and by the reclaimer. A control
//! record (create, delete, seal, fence, trim) that the engine then fails leaves memory and
//! log in doubt, so the store stops: every later operation is `Stopped` until the drive is
//! reopened.

use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::task::{Context, Poll};
use std::thread::JoinHandle;

use bytes::Bytes;
use sealog::io::IoBackend;
use sealog::{
    AppendError, AppendOutcome, Drive, DriveOptions, Geometry, NewEntry, OpenError, ReadError,
    SummedBytes, Ticket,
};

use crate::api::{Length, LogDrive, LogDriveError, OpFuture, ReadOutcome, TailDesc};
use crate::reclaim::{ReclaimPolicy, ReclaimStats, Reclaimer};
use crate::record::{Record, RecordType, GENERATION_MAX};
use crate::replay::{DamageFound, Replay};
use crate::space::{Admission, Class, Space};
use crate::state::{Check, Control, LogState, Lookup, WriteCheck, RECORD_HEADER_BYTES};

/// How a [`LogDriveStore`] opens and runs.
#[derive(Clone, Debug)]
pub struct StoreOptions {
    /// The engine drive's options (its recovery mode among them:
    /// `RecoveryMode::Quarantine` opens a ring with damaged acknowledged records).
    pub drive: DriveOptions,
    /// When and how fast the ring's space is reclaimed.
    pub reclaim: ReclaimPolicy,
    /// The largest window K writers keep between T and N (an AtomicLog's K): how far past N a
    /// damaged record whose header is gone may have written, in a quarantined open.
    pub write_window_max: u64,
}

impl Default for StoreOptions {
    fn default() -> StoreOptions {
        StoreOptions {
            drive: DriveOptions::default(),
            reclaim: ReclaimPolicy::default(),
            write_window_max: 64,
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
}

/// Why a store could not open.
#[derive(Debug, thiserror::Error)]
pub enum StoreOpenError {
    /// The engine drive did not open.
    #[error(transparent)]
    Drive(#[from] OpenError),
    /// The reclamation policy cannot work on this ring.
    #[error("{path}: {reason}")]
    Policy {
        /// The ring.
        path: std::path::PathBuf,
        /// What is wrong with the policy.
        reason: String,
    },
}

/// The outcome of a dropped write, kept until someone looks.
struct Orphan {
    address: u64,
    ticket: Ticket,
    admission: Admission,
}

/// A control record whose future was dropped before it completed.
struct PendingControl {
    kind: ControlKind,
    ticket: Ticket,
    admission: Admission,
}

/// What a control record does once durable.
#[derive(Clone, Copy, Debug)]
enum ControlKind {
    Create,
    Control(Control, Check),
}

/// A write's outcome, left by its completion for the LogDrive's next look: a completion
/// takes no mutex (the next holder of the LogDrive's mutex takes the outcome in before it
/// answers anything, so a read after this write's acknowledgement sees it), and a LogDrive
/// state is locked once per write, by its submission, rather than once more per completion
/// (eight writers completing one batch's writes of one LogDrive would otherwise queue on its
/// mutex one after another, and a thousand LogDrives would each be brought into cache twice).
struct Ack {
    address: u64,
    outcome: AppendOutcome,
    floor: u64,
}

/// What completions and dropped futures leave for a LogDrive's next look, without its mutex
/// (under a lock of its own, held only to push or to swap the lists out). Not a lock-free
/// queue: on a thousand LogDrives each mailbox holds an outcome or two between looks and is
/// cold in cache every time, and a segmented queue's padded head and tail, its blocks and a
/// second queue for the orphans came to a cache miss or four per push and per pop (the
/// queue's push and pop were 5% of a thousand-LogDrive run's CPU, three times a single
/// LogDrive's). Here a look at an empty mailbox is one load, and the lists keep their
/// capacity from look to look.
#[derive(Default)]
struct Mailbox {
    /// Something was left since the last look (set under `mail`'s lock).
    has_mail: AtomicBool,
    mail: Mutex<Mail>,
}

/// The mailbox's contents.
#[derive(Default)]
struct Mail {
    acks: Vec<Ack>,
    /// Writes whose futures were dropped before they completed.
    orphans: Vec<Orphan>,
}

impl Mailbox {
    fn leave(&self, leave: impl FnOnce(&mut Mail)) {
        let mut mail = lock(&self.mail);
        leave(&mut mail);
        self.has_mail.store(true, Ordering::Release);
    }
}

/// A LogDrive's state with the outcomes not yet taken in.
pub(crate) struct Live {
    pub state: LogState,
    mailbox: Arc<Mailbox>,
    /// The acknowledgements taken from the mailbox, swapped with its list (so that both keep
    /// their capacity).
    acks: Vec<Ack>,
    /// Orphaned writes taken from the mailbox whose outcomes are not yet known.
    orphans: Vec<Orphan>,
    controls: Vec<PendingControl>,
}

impl Live {
    fn new(state: LogState) -> Live {
        Live {
            state,
            mailbox: Arc::default(),
            acks: Vec::new(),
            orphans: Vec::new(),
            controls: Vec::new(),
        }
    }

    /// Takes in the outcomes that completed since the last look; a control record that
    /// failed stops the store.
    pub(crate) fn take_in(&mut self, inner: &Inner) {
        let Live {
            state,
            mailbox,
            acks,
            orphans,
            controls,
        } = self;
        if mailbox.has_mail.load(Ordering::Acquire) {
            let mut mail = lock(&mailbox.mail);
            mailbox.has_mail.store(false, Ordering::Relaxed);
            std::mem::swap(acks, &mut mail.acks);
            orphans.append(&mut mail.orphans);
            drop(mail);
            for ack in acks.drain(..) {
                finish_write(state, ack.address, &ack.outcome, ack.floor);
            }
        }
        orphans.retain(|orphan| match orphan.ticket.try_outcome() {
            Some(outcome) => {
                finish_write(state, orphan.address, &outcome, orphan.admission.floor());
                false
            }
            None => true,
        });
        controls.retain(|pending| match pending.ticket.try_outcome() {
            Some(outcome) => {
                state.processed(pending.admission.floor());
                let _ = finish_control(inner, state, pending.kind, &outcome);
                false
            }
            None => true,
        });
    }
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("LogDriveStore")
            .field("path", &self.drive.path())
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for LocalLogDrive {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("LocalLogDrive")
            .field("id", &self.id)
            .field("generation", &self.generation)
            .finish_non_exhaustive()
    }
}

pub(crate) type Shared = Arc<Mutex<Live>>;

/// A deletion whose future was dropped before it completed.
struct PendingDelete {
    key: (u64, u64),
    ticket: Ticket,
    _admission: Admission,
}

/// The live LogDrives, the deleted ones whose deletion is not yet known durable, and the
/// generations.
#[derive(Default)]
pub(crate) struct Registry {
    pub live: HashMap<u64, Shared>,
    /// Deleted, by (id, generation), until the deletion is durable: the reclaimer must not
    /// take their records for garbage before then (a crash could still bring them back).
    pub dying: HashMap<(u64, u64), Shared>,
    deletes: Vec<PendingDelete>,
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

/// One LogDrive of a [`LogDriveStore`] (one id, one generation).
#[derive(Clone)]
pub struct LocalLogDrive {
    inner: Arc<Inner>,
    live: Shared,
    id: u64,
    generation: u64,
}

pub(crate) fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn ready<T: Send + 'static>(outcome: Result<T, LogDriveError>) -> OpFuture<T> {
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

/// Applies a write record's outcome to its slot (an outcome the drive's stop left unknown
/// changes nothing: the store answers nothing more).
fn finish_write(state: &mut LogState, address: u64, outcome: &AppendOutcome, floor: u64) {
    state.processed(floor);
    match outcome {
        Ok(lsn) => state.complete_write(address, Some(*lsn)),
        Err(AppendError::RingFull { .. }) => state.complete_write(address, None),
        Err(_) => {}
    }
}

/// Applies a control record's outcome: durable, the state as reads see it moves (and the
/// record is known for relocation); failed, the store stops.
fn finish_control(
    inner: &Inner,
    state: &mut LogState,
    kind: ControlKind,
    outcome: &AppendOutcome,
) -> Result<(), LogDriveError> {
    match (outcome, kind) {
        (Ok(lsn), ControlKind::Create) => {
            state.hold_create(*lsn);
            Ok(())
        }
        (Ok(lsn), ControlKind::Control(control, Check::Apply)) => {
            state.durable_control(control, *lsn);
            Ok(())
        }
        (Ok(_), ControlKind::Control(_, Check::Same)) => Ok(()),
        (Err(error), _) => {
            inner.stop(format!("a control record failed: {error}"));
            Err(append_error(error.clone()))
        }
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

    pub(crate) fn stop(&self, reason: String) {
        let _ = self.stopped.set(reason);
        self.reclaimer.wake();
    }

    /// Admits a record of `payload_len` bytes of this class into the ring's room.
    pub(crate) fn admit(&self, payload_len: u64, class: Class) -> Result<Admission, LogDriveError> {
        self.check_running()?;
        // Read before the record is queued: its LSN is at least this next LSN.
        let shape = self.drive.shape();
        let bytes = RECORD_HEADER_BYTES + payload_len;
        let admitted = self
            .space
            .admit(shape.usable_bytes, bytes, class, shape.next_lsn);
        if admitted.is_err() {
            self.reclaimer.refused(class);
        }
        admitted
    }

    /// Queues a record (admitted already).
    pub(crate) fn append(&self, record: &Record, payload: Bytes) -> Result<Ticket, LogDriveError> {
        self.check_running()?;
        self.drive
            .append_entry(record.entry(payload))
            .map_err(append_error)
    }

    /// Queues entries of records (admitted already) as one all-or-nothing group, at
    /// consecutive LSNs.
    pub(crate) fn append_group(&self, entries: Vec<NewEntry>) -> Result<Ticket, LogDriveError> {
        self.check_running()?;
        self.drive.append_group(entries).map_err(append_error)
    }

    /// Queues a record (admitted already) whose payload's CRC was computed already.
    pub(crate) fn append_summed(
        &self,
        record: &Record,
        payload: SummedBytes,
    ) -> Result<Ticket, LogDriveError> {
        self.check_running()?;
        let (kind, header) = (record.record_type.kind(), record.header());
        self.drive
            .append_summed(kind, header, payload)
            .map_err(append_error)
    }
}

/// Waits for a record's outcome and takes it in exactly once: when it completes, or, if the
/// future is dropped first, by leaving the ticket where the next look takes it in.
trait Completion: Send + 'static {
    type Output: Send + 'static;
    fn complete(self, outcome: AppendOutcome) -> Result<Self::Output, LogDriveError>;
    fn abandon(self, ticket: Ticket);
}

struct Completing<C: Completion> {
    ticket: Option<Ticket>,
    completion: Option<C>,
}

impl<C: Completion> Completing<C> {
    fn boxed(ticket: Ticket, completion: C) -> OpFuture<C::Output> {
        Box::pin(Completing {
            ticket: Some(ticket),
            completion: Some(completion),
        })
    }
}

impl<C: Completion> Completing<C> {
    /// Blocks this thread in the engine's own ticket wait (its spin, then the drive's one
    /// futex, woken once per turn for every waiter), then takes the outcome in.
    fn wait(mut self) -> Result<C::Output, LogDriveError> {
        let ticket = self.ticket.take().expect("not yet waited for");
        let completion = self.completion.take().expect("completes once");
        completion.complete(ticket.wait())
    }
}

impl<C: Completion> Unpin for Completing<C> {}

impl<C: Completion> Future for Completing<C> {
    type Output = Result<C::Output, LogDriveError>;

    fn poll(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(ticket) = self.ticket.as_mut() else {
            panic!("a LogDrive operation's future polled after it completed");
        };
        let Poll::Ready(outcome) = Pin::new(ticket).poll(context) else {
            return Poll::Pending;
        };
        self.ticket = None;
        let completion = self.completion.take().expect("completes once");
        Poll::Ready(completion.complete(outcome))
    }
}

impl<C: Completion> Drop for Completing<C> {
    fn drop(&mut self) {
        if let (Some(ticket), Some(completion)) = (self.ticket.take(), self.completion.take()) {
            completion.abandon(ticket);
        }
    }
}

struct WriteDone {
    mailbox: Arc<Mailbox>,
    address: u64,
    admission: Admission,
}

impl Completion for WriteDone {
    type Output = ();

    /// Leaves the outcome in the LogDrive's mailbox, for the next holder of its mutex
    /// (whoever takes it next takes the outcome in before anything else).
    fn complete(self, outcome: AppendOutcome) -> Result<(), LogDriveError> {
        let answer = outcome.clone().map(|_| ()).map_err(append_error);
        let ack = Ack {
            address: self.address,
            outcome,
            floor: self.admission.floor(),
        };
        self.mailbox.leave(|mail| mail.acks.push(ack));
        // The record's room is released only now that its outcome is where the next look
        // takes it in (its floor, in the ack, bounds the reclaimer's advance until then).
        drop(self.admission);
        answer
    }

    fn abandon(self, ticket: Ticket) {
        let orphan = Orphan {
            address: self.address,
            ticket,
            admission: self.admission,
        };
        self.mailbox.leave(|mail| mail.orphans.push(orphan));
    }
}

struct ControlDone {
    inner: Arc<Inner>,
    live: Shared,
    kind: ControlKind,
    admission: Admission,
}

impl Completion for ControlDone {
    type Output = ();

    fn complete(self, outcome: AppendOutcome) -> Result<(), LogDriveError> {
        let mut live = lock(&self.live);
        live.state.processed(self.admission.floor());
        let done = finish_control(&self.inner, &mut live.state, self.kind, &outcome);
        drop(live);
        drop(self.admission);
        self.inner.reclaimer.wake();
        done
    }

    fn abandon(self, ticket: Ticket) {
        lock(&self.live).controls.push(PendingControl {
            kind: self.kind,
            ticket,
            admission: self.admission,
        });
    }
}

struct CreateDone {
    control: ControlDone,
    handle: LocalLogDrive,
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

struct DeleteDone {
    inner: Arc<Inner>,
    key: (u64, u64),
    admission: Admission,
}

impl Completion for DeleteDone {
    type Output = ();

    fn complete(self, outcome: AppendOutcome) -> Result<(), LogDriveError> {
        match outcome {
            Ok(_) => {
                lock(&self.inner.registry).dying.remove(&self.key);
                self.inner.reclaimer.wake();
                Ok(())
            }
            Err(error) => {
                self.inner
                    .stop(format!("a deletion's record failed: {error}"));
                Err(append_error(error))
            }
        }
    }

    fn abandon(self, ticket: Ticket) {
        lock(&self.inner.registry).deletes.push(PendingDelete {
            key: self.key,
            ticket,
            _admission: self.admission,
        });
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
        let replay = Replay::new(options.write_window_max);
        let (drive, replay) = Drive::open_visiting(path, options.drive.clone(), replay)?;
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
        let replay = Replay::new(options.write_window_max);
        let (drive, replay) =
            Drive::open_with_visiting(path, geometry, options.drive.clone(), replay, make_backend)?;
        LogDriveStore::start(drive, replay, options)
    }

    fn start(
        drive: Drive,
        replay: Replay,
        options: StoreOptions,
    ) -> Result<LogDriveStore, StoreOpenError> {
        let space = Space::for_ring(&drive.geometry(), &options.reclaim).map_err(|reason| {
            StoreOpenError::Policy {
                path: drive.path().to_path_buf(),
                reason,
            }
        })?;
        options
            .reclaim
            .check()
            .map_err(|reason| StoreOpenError::Policy {
                path: drive.path().to_path_buf(),
                reason,
            })?;
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
        if inner.options.reclaim.background {
            let thread = crate::reclaim::spawn(&inner).map_err(|source| {
                StoreOpenError::Drive(OpenError::Io {
                    path: inner.drive.path().to_path_buf(),
                    action: "start the reclaimer thread",
                    source,
                })
            })?;
            *lock(&inner.reclaim_thread) = Some(thread);
        }
        Ok(LogDriveStore { inner })
    }

    /// The engine drive underneath.
    pub fn drive(&self) -> &Drive {
        &self.inner.drive
    }

    /// Stops the reclaimer and closes the drive (its handles answer `Stopped` from now on);
    /// dropping the store and every handle does the same.
    pub fn close(&self) {
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
    pub fn ids(&self) -> Vec<u64> {
        let mut ids: Vec<u64> = lock(&self.inner.registry).live.keys().copied().collect();
        ids.sort_unstable();
        ids
    }

    /// The live LogDrive `id`.
    pub fn get(&self, id: u64) -> Option<LocalLogDrive> {
        let live = Arc::clone(lock(&self.inner.registry).live.get(&id)?);
        let generation = lock(&live).state.generation;
        Some(self.handle(id, generation, live))
    }

    fn handle(&self, id: u64, generation: u64, live: Shared) -> LocalLogDrive {
        LocalLogDrive {
            inner: Arc::clone(&self.inner),
            live,
            id,
            generation,
        }
    }

    /// Creates LogDrive `id` with addresses below `capacity`, durably, with the store's next
    /// generation (`Exists` while one is live; `OutOfRange` naming the generation once the
    /// generations are spent). Its records queue behind the creation's at once; the future
    /// yields its handle once the creation is durable.
    pub fn create(&self, id: u64, capacity: u64) -> OpFuture<LocalLogDrive> {
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
        let admission = match self.inner.admit(0, Class::Control) {
            Ok(admission) => admission,
            Err(error) => return ready(Err(error)),
        };
        let record = Record::new(RecordType::Create, id, generation, capacity, 0);
        let ticket = match self.inner.append(&record, Bytes::new()) {
            Ok(ticket) => ticket,
            Err(error) => return ready(Err(error)),
        };
        let mut state = LogState::new(id, generation, capacity);
        state.queued_at(admission.floor());
        let live = Arc::new(Mutex::new(Live::new(state)));
        registry.generation_max = generation;
        registry.live.insert(id, Arc::clone(&live));
        drop(registry);
        let handle = self.handle(id, generation, Arc::clone(&live));
        let control = ControlDone {
            inner: Arc::clone(&self.inner),
            live,
            kind: ControlKind::Create,
            admission,
        };
        Completing::boxed(ticket, CreateDone { control, handle })
    }

    /// Deletes LogDrive `id`, durably: its handles answer `Missing` from now on, and its
    /// records are garbage for the reclaimer once the deletion is durable.
    pub fn delete(&self, id: u64) -> OpFuture<()> {
        let mut registry = lock(&self.inner.registry);
        registry.take_in();
        let Some(shared) = registry.live.get(&id).map(Arc::clone) else {
            return ready(Err(LogDriveError::Missing { id, generation: 0 }));
        };
        let mut live = lock(&shared);
        live.take_in(&self.inner);
        let admission = match self.inner.admit(0, Class::Control) {
            Ok(admission) => admission,
            Err(error) => return ready(Err(error)),
        };
        let generation = live.state.generation;
        let record = Record::new(RecordType::Delete, id, generation, 0, 0);
        let ticket = match self.inner.append(&record, Bytes::new()) {
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
            admission,
        };
        Completing::boxed(ticket, done)
    }

    /// The store's shared state, for the crate's own tests.
    #[cfg(test)]
    pub(crate) fn inner(&self) -> &Arc<Inner> {
        &self.inner
    }

    /// What the reclaimer has done, and the ring's space as it sees it now.
    pub fn reclaim_stats(&self) -> ReclaimStats {
        crate::reclaim::stats(&self.inner)
    }

    /// Runs the reclaimer's work now, on this thread, until the policy is met or nothing more
    /// can be done (what the background thread does on its own; for embedders that run it
    /// themselves, with `ReclaimPolicy::background` off, and for tests).
    pub fn reclaim_now(&self) -> Result<ReclaimStats, LogDriveError> {
        crate::reclaim::run(&self.inner, false)?;
        Ok(self.reclaim_stats())
    }

    /// What a quarantined open found damaged: each damaged LSN range, and the LogDrive
    /// address it held where its header survived.
    pub fn quarantine_report(&self) -> &[DamageFound] {
        &self.inner.quarantine
    }

    /// What is still unrepaired: per LogDrive, the addresses that read as `Damaged`.
    pub fn damaged(&self) -> Vec<(u64, BTreeSet<u64>)> {
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
        damaged
    }
}

/// A write in flight on a [`LocalLogDrive`] ([`LocalLogDrive::submit_write`]): awaited as a
/// future, or waited for from a plain thread with [`PendingWrite::wait`], which blocks in the
/// engine's own ticket wait (a brief spin, then one futex for all of the drive's waiters,
/// woken once per turn of the drive thread) rather than behind a waker of its own per write.
/// Dropped early, the write goes on and its outcome is taken in later.
pub struct PendingWrite(Pending);

enum Pending {
    /// Answered at once (refused, or not queued).
    Done(Option<Result<(), LogDriveError>>),
    /// Its record is queued.
    Queued(Completing<WriteDone>),
    /// A rewrite compared with the value on the ring.
    Compared(OpFuture<()>),
}

impl PendingWrite {
    /// Blocks until the write is durable (or refused).
    pub fn wait(self) -> Result<(), LogDriveError> {
        match self.0 {
            Pending::Done(outcome) => outcome.expect("a write answers once"),
            Pending::Queued(completing) => completing.wait(),
            Pending::Compared(future) => crate::wait(future),
        }
    }
}

impl Future for PendingWrite {
    type Output = Result<(), LogDriveError>;

    fn poll(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut self.0 {
            Pending::Done(outcome) => Poll::Ready(
                outcome
                    .take()
                    .expect("a write's future polled after it completed"),
            ),
            Pending::Queued(completing) => Pin::new(completing).poll(context),
            Pending::Compared(future) => future.as_mut().poll(context),
        }
    }
}

impl std::fmt::Debug for PendingWrite {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("PendingWrite")
            .finish_non_exhaustive()
    }
}

/// How many times a read follows its value to the record relocation moved it to before it
/// gives up (a relocation step takes far longer than a read, so two moves during one read
/// already mean the reclaimer is lapping the ring under it).
const READ_FOLLOWS_MAX: u32 = 8;

impl LocalLogDrive {
    /// The LogDrive's id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The generation this handle is bound to.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The addresses that read as `Damaged` (a quarantined open), until repaired.
    pub fn damaged_addresses(&self) -> Result<BTreeSet<u64>, LogDriveError> {
        let live = self.lock()?;
        live.state.check_live()?;
        Ok(live.state.damaged_addresses())
    }

    /// The LogDrive's state, locked, with the outcomes completed since the last look taken
    /// in.
    fn lock(&self) -> Result<MutexGuard<'_, Live>, LogDriveError> {
        self.inner.check_running()?;
        let mut live = lock(&self.live);
        live.take_in(&self.inner);
        Ok(live)
    }

    fn record(&self, record_type: RecordType, value: u64, epoch: u64) -> Record {
        Record::new(record_type, self.id, self.generation, value, epoch)
    }

    /// A seal, fence or trim: checked, queued and applied to the state as queued under the
    /// LogDrive's mutex; applied to what reads see once durable. One that changes nothing
    /// is still written, so that its acknowledgement means durable.
    fn control(&self, control: Control) -> OpFuture<()> {
        let mut live = match self.lock() {
            Ok(live) => live,
            Err(error) => return ready(Err(error)),
        };
        let check = match live.state.check_control(control) {
            Ok(check) => check,
            Err(error) => return ready(Err(error)),
        };
        let admission = match self.inner.admit(0, Class::Control) {
            Ok(admission) => admission,
            Err(error) => return ready(Err(error)),
        };
        let record = control.record(self.id, self.generation);
        let ticket = match self.inner.append(&record, Bytes::new()) {
            Ok(ticket) => ticket,
            Err(error) => return ready(Err(error)),
        };
        if check == Check::Apply {
            live.state.queue_control(control);
        }
        live.state.queued_at(admission.floor());
        drop(live);
        let done = ControlDone {
            inner: Arc::clone(&self.inner),
            live: Arc::clone(&self.live),
            kind: ControlKind::Control(control, check),
            admission,
        };
        Completing::boxed(ticket, done)
    }

    /// [`LogDrive::write`] without the box: the write's [`PendingWrite`], which a plain
    /// thread waits for in the engine's own ticket wait ([`PendingWrite::wait`]).
    pub fn submit_write(&self, address: u64, epoch: u64, payload: Bytes) -> PendingWrite {
        let done = |outcome| PendingWrite(Pending::Done(Some(outcome)));
        // The value's CRC summarises it in the index and is the entry's payload CRC too:
        // computed once, here, outside the LogDrive's mutex.
        let summed = SummedBytes::new(payload);
        let crc = summed.crc();
        let len = summed.len() as u64;
        let mut live = match self.lock() {
            Ok(live) => live,
            Err(error) => return done(Err(error)),
        };
        match live.state.check_write(address, epoch, crc, len) {
            Err(error) => done(Err(error)),
            Ok(WriteCheck::Durable(lsn)) => {
                drop(live);
                let payload = summed.into_bytes();
                let handle = self.clone();
                let compared = Box::pin(async move {
                    match handle.fetch(address, lsn).await? {
                        Fetched::Value(bytes) if bytes == payload => Ok(()),
                        Fetched::Value(_) => Err(LogDriveError::Conflict { address }),
                        // Its record failed its checks since it was acknowledged: the write
                        // cannot be told from a conflict; the value stays unproven.
                        Fetched::Damaged => Err(LogDriveError::Io {
                            reason: format!(
                                "the record of address {address} at LSN {lsn} fails its checks"
                            ),
                        }),
                        // Sealed off or trimmed meanwhile: answered as the write is now.
                        Fetched::Gone(_) => handle.submit_write(address, epoch, payload).await,
                    }
                });
                PendingWrite(Pending::Compared(compared))
            }
            // A new value (or a damaged one's repair), or the same as one in flight: written
            // (again), so that the acknowledgement means durable; replay keeps the first.
            Ok(WriteCheck::Append | WriteCheck::Pending) => {
                let admission = match self.inner.admit(len, Class::Write) {
                    Ok(admission) => admission,
                    Err(error) => return done(Err(error)),
                };
                let record = self.record(RecordType::Write, address, epoch);
                let ticket = match self.inner.append_summed(&record, summed) {
                    Ok(ticket) => ticket,
                    Err(error) => return done(Err(error)),
                };
                live.state.queue_write(address, crc, len);
                live.state.queued_at(admission.floor());
                let mailbox = Arc::clone(&live.mailbox);
                drop(live);
                let done = WriteDone {
                    mailbox,
                    address,
                    admission,
                };
                PendingWrite(Pending::Queued(Completing {
                    ticket: Some(ticket),
                    completion: Some(done),
                }))
            }
        }
    }

    /// The value at `address` from its record at `lsn`, or what happened to it: relocation
    /// may move a value to a new record and trim the old one under a read, so a read that
    /// finds its record trimmed looks the address up again and follows the value.
    async fn fetch(&self, address: u64, mut lsn: u64) -> Result<Fetched, LogDriveError> {
        for _ in 0..READ_FOLLOWS_MAX {
            match self.inner.drive.read_entry_async(lsn).await {
                Ok(entry) => {
                    let expected = self.record(RecordType::Write, address, 0);
                    let found = Record::decode(entry.kind, &entry.header).map(|record| Record {
                        epoch: 0,
                        relocated: false,
                        ..record
                    });
                    if found != Some(expected) {
                        return Ok(Fetched::Damaged);
                    }
                    return Ok(Fetched::Value(Bytes::from(entry.payload)));
                }
                Err(ReadError::Damaged { .. }) => return Ok(Fetched::Damaged),
                Err(ReadError::Trimmed { .. }) => {
                    let live = self.lock()?;
                    match live.state.lookup(address)? {
                        Lookup::Record(moved) if moved != lsn => lsn = moved,
                        Lookup::Record(_) => {
                            return Err(LogDriveError::Io {
                                reason: format!(
                                    "the record of address {address} at LSN {lsn} is trimmed \
                                     while the address still names it"
                                ),
                            })
                        }
                        other => return Ok(Fetched::Gone(other)),
                    }
                }
                Err(error) => return Err(read_error(error)),
            }
        }
        Err(LogDriveError::Io {
            reason: format!(
                "the record of address {address} moved {READ_FOLLOWS_MAX} times during one read"
            ),
        })
    }
}

/// What [`LocalLogDrive::fetch`] found.
enum Fetched {
    /// The value.
    Value(Bytes),
    /// The record fails its checks, or is not this address's.
    Damaged,
    /// The value left the LogDrive while it was read (a seal or trim became durable): what a
    /// lookup says now.
    Gone(Lookup),
}

fn outcome_of(lookup: Lookup) -> ReadOutcome {
    match lookup {
        Lookup::Trimmed { first } => ReadOutcome::Trimmed { first },
        Lookup::Unwritten => ReadOutcome::Unwritten,
        Lookup::Damaged => ReadOutcome::Damaged,
        Lookup::Record(_) => unreachable!("a record is fetched, not an outcome"),
    }
}

impl LogDrive for LocalLogDrive {
    fn write(&self, address: u64, epoch: u64, payload: Bytes) -> OpFuture<()> {
        Box::pin(self.submit_write(address, epoch, payload))
    }

    fn read(&self, address: u64) -> OpFuture<ReadOutcome> {
        let live = match self.lock() {
            Ok(live) => live,
            Err(error) => return ready(Err(error)),
        };
        match live.state.lookup(address) {
            Err(error) => ready(Err(error)),
            Ok(Lookup::Trimmed { first }) => ready(Ok(ReadOutcome::Trimmed { first })),
            Ok(Lookup::Unwritten) => ready(Ok(ReadOutcome::Unwritten)),
            Ok(Lookup::Damaged) => ready(Ok(ReadOutcome::Damaged)),
            Ok(Lookup::Record(lsn)) => {
                drop(live);
                let handle = self.clone();
                Box::pin(async move {
                    Ok(match handle.fetch(address, lsn).await? {
                        Fetched::Value(bytes) => ReadOutcome::Value(bytes),
                        Fetched::Damaged => ReadOutcome::Damaged,
                        Fetched::Gone(lookup) => outcome_of(lookup),
                    })
                })
            }
        }
    }

    fn weak_tail(&self, k: u64) -> OpFuture<TailDesc> {
        ready(self.lock().and_then(|mut live| live.state.weak_tail(k)))
    }

    fn seal(&self, length: u64) -> OpFuture<()> {
        self.control(Control::Seal(length))
    }

    fn fence(&self, epoch: u64) -> OpFuture<()> {
        self.control(Control::Fence(epoch))
    }

    fn trim(&self, upto: u64) -> OpFuture<()> {
        self.control(Control::Trim(upto))
    }

    fn length(&self) -> OpFuture<Length> {
        ready(self.lock().and_then(|mut live| live.state.length()))
    }
}
