//! Many LogDrives on one engine drive: [`LogDriveStore`] owns a [`sealog::Drive`], rebuilds
//! every LogDrive in the open's replay pass ([`crate::replay`]), creates and deletes them
//! durably, and hands out [`LocalLogDrive`] handles, each bound to one id and generation.
//!
//! Ordering: each LogDrive's checks and the queueing of its record happen under that
//! LogDrive's mutex, held until the engine has the append queued, so records of one LogDrive
//! take LSNs in the order they were checked: no write checked against an old fence or seal
//! lands after the new one, and replay, applying records in LSN order, reaches the same
//! decisions. Completions come from the engine's tickets; no thread waits per call.
//!
//! A write's slot is indexed when its record is queued (so a second write of the address is
//! checked against it) but counts as written (reads, T, N) only once its record is
//! acknowledged. A write whose future is dropped early leaves its ticket with the LogDrive,
//! looked at on the LogDrive's next operation. A control record (create, delete, seal,
//! fence, trim) applies when queued; if it then fails, memory and log may disagree, so the
//! store stops: every later operation is `Stopped` until the drive is reopened.

use std::collections::HashMap;
use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::task::{Context, Poll};

use bytes::Bytes;
use sealog::{
    AppendError, AppendOutcome, Drive, DriveOptions, NewEntry, OpenError, ReadError, Ticket,
};

use crate::api::{Length, LogDrive, LogDriveError, OpFuture, ReadOutcome, TailDesc};
use crate::record::{Record, RecordType, GENERATION_MAX};
use crate::replay::Replay;
use crate::state::{Check, Control, LogState, WriteCheck};

/// A LogDrive's state with the tickets of writes whose futures were dropped.
struct Live {
    state: LogState,
    orphans: Vec<(u64, Ticket)>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("LogDriveStore")
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

type Shared = Arc<Mutex<Live>>;

/// The live LogDrives and the last generation of every id ever created.
#[derive(Default)]
struct Registry {
    live: HashMap<u64, Shared>,
    generations: HashMap<u64, u64>,
}

struct Inner {
    drive: Drive,
    registry: Mutex<Registry>,
    stopped: OnceLock<String>,
    skipped: u64,
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

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn ready<T: Send + 'static>(outcome: Result<T, LogDriveError>) -> OpFuture<T> {
    Box::pin(std::future::ready(outcome))
}

fn append_error(error: AppendError) -> LogDriveError {
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

fn read_error(error: ReadError) -> LogDriveError {
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
fn finish_write(state: &mut LogState, address: u64, outcome: &AppendOutcome) {
    match outcome {
        Ok(lsn) => state.complete_write(address, Some(*lsn)),
        Err(AppendError::RingFull { .. }) => state.complete_write(address, None),
        Err(_) => {}
    }
}

impl Inner {
    fn check_running(&self) -> Result<(), LogDriveError> {
        match self.stopped.get() {
            Some(reason) => Err(LogDriveError::Stopped {
                reason: reason.clone(),
            }),
            None => Ok(()),
        }
    }

    fn append(&self, record: &Record, payload: Bytes) -> Result<Ticket, LogDriveError> {
        self.check_running()?;
        let entry = NewEntry {
            kind: record.record_type.kind(),
            header: record.header(),
            payload,
        };
        self.drive.append_entry(entry).map_err(append_error)
    }

    /// Waits for a control record applied when queued; its failure stops the store.
    fn control_done(self: Arc<Self>, ticket: Ticket) -> OpFuture<()> {
        Box::pin(async move {
            ticket.await.map(|_| ()).map_err(|error| {
                let reason = format!("a control record failed: {error}");
                let _ = self.stopped.set(reason);
                append_error(error)
            })
        })
    }
}

impl LogDriveStore {
    /// Opens the ring at `path` and rebuilds its LogDrives in the open's replay pass.
    pub fn open(path: &Path, options: DriveOptions) -> Result<LogDriveStore, OpenError> {
        let (drive, replay) = Drive::open_visiting(path, options, Replay::default())?;
        let live = replay.live.into_iter().map(|(id, state)| {
            let live = Live {
                state,
                orphans: Vec::new(),
            };
            (id, Arc::new(Mutex::new(live)))
        });
        let registry = Registry {
            live: live.collect(),
            generations: replay.generations,
        };
        let inner = Inner {
            drive,
            registry: Mutex::new(registry),
            stopped: OnceLock::new(),
            skipped: replay.skipped,
        };
        Ok(LogDriveStore {
            inner: Arc::new(inner),
        })
    }

    /// The engine drive underneath.
    pub fn drive(&self) -> &Drive {
        &self.inner.drive
    }

    /// Closes the drive (its handles answer `Stopped` from now on); dropping the store and
    /// every handle does the same.
    pub fn close(&self) {
        self.inner.drive.close();
    }

    /// Entries the open's replay skipped: no LogDrive record, or one for no live LogDrive.
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

    /// Creates LogDrive `id` with addresses below `capacity`, durably, with the next
    /// generation of the id (`Exists` while one is live; `OutOfRange` naming the generation
    /// once an id's generations are spent). Its records queue behind the creation's at once;
    /// the future yields its handle once the creation is durable.
    pub fn create(&self, id: u64, capacity: u64) -> OpFuture<LocalLogDrive> {
        let mut registry = lock(&self.inner.registry);
        if registry.live.contains_key(&id) {
            return ready(Err(LogDriveError::Exists { id }));
        }
        let generation = registry.generations.get(&id).map_or(1, |last| last + 1);
        if generation > GENERATION_MAX {
            return ready(Err(LogDriveError::OutOfRange {
                address: generation,
                valid: 1..GENERATION_MAX + 1,
            }));
        }
        let record = Record {
            record_type: RecordType::Create,
            id,
            generation,
            value: capacity,
            epoch: 0,
        };
        let ticket = match self.inner.append(&record, Bytes::new()) {
            Ok(ticket) => ticket,
            Err(error) => return ready(Err(error)),
        };
        let live = Live {
            state: LogState::new(id, generation, capacity),
            orphans: Vec::new(),
        };
        let live = Arc::new(Mutex::new(live));
        registry.generations.insert(id, generation);
        registry.live.insert(id, Arc::clone(&live));
        drop(registry);
        let handle = self.handle(id, generation, live);
        let done = Arc::clone(&self.inner).control_done(ticket);
        Box::pin(async move { done.await.map(|()| handle) })
    }

    /// Deletes LogDrive `id`, durably: its handles answer `Missing` from now on.
    pub fn delete(&self, id: u64) -> OpFuture<()> {
        let mut registry = lock(&self.inner.registry);
        let Some(live) = registry.live.get(&id).map(Arc::clone) else {
            return ready(Err(LogDriveError::Missing { id, generation: 0 }));
        };
        let mut live = lock(&live);
        let record = Record {
            record_type: RecordType::Delete,
            id,
            generation: live.state.generation,
            value: 0,
            epoch: 0,
        };
        let ticket = match self.inner.append(&record, Bytes::new()) {
            Ok(ticket) => ticket,
            Err(error) => return ready(Err(error)),
        };
        live.state.deleted = true;
        registry.live.remove(&id);
        Arc::clone(&self.inner).control_done(ticket)
    }
}

impl LocalLogDrive {
    /// The LogDrive's id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The generation this handle is bound to.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The LogDrive's state, locked, with the outcomes of dropped writes taken in.
    fn lock(&self) -> Result<MutexGuard<'_, Live>, LogDriveError> {
        self.inner.check_running()?;
        let mut guard = lock(&self.live);
        let Live { state, orphans } = &mut *guard;
        orphans.retain(|(address, ticket)| match ticket.try_outcome() {
            Some(outcome) => {
                finish_write(state, *address, &outcome);
                false
            }
            None => true,
        });
        Ok(guard)
    }

    fn record(&self, record_type: RecordType, value: u64, epoch: u64) -> Record {
        Record {
            record_type,
            id: self.id,
            generation: self.generation,
            value,
            epoch,
        }
    }

    /// A seal, fence or trim: checked, queued and applied under the LogDrive's mutex. One
    /// that changes nothing is still written, so that its acknowledgement means durable.
    fn control(&self, control: Control) -> OpFuture<()> {
        let mut live = match self.lock() {
            Ok(live) => live,
            Err(error) => return ready(Err(error)),
        };
        let check = match control.check(&mut live.state) {
            Ok(check) => check,
            Err(error) => return ready(Err(error)),
        };
        let record = control.record(self.id, self.generation);
        let ticket = match self.inner.append(&record, Bytes::new()) {
            Ok(ticket) => ticket,
            Err(error) => return ready(Err(error)),
        };
        if check == Check::Apply {
            control.apply(&mut live.state);
        }
        drop(live);
        Arc::clone(&self.inner).control_done(ticket)
    }

    /// The same CRC and length as the acknowledged value at `lsn`: compare the bytes.
    fn compare(&self, address: u64, lsn: u64, payload: Bytes) -> OpFuture<()> {
        let read = self.inner.drive.read_entry_async(lsn);
        Box::pin(async move {
            match read.await {
                Ok(entry) if entry.payload[..] == payload[..] => Ok(()),
                Ok(_) => Err(LogDriveError::Conflict { address }),
                Err(error) => Err(read_error(error)),
            }
        })
    }

    /// Reads the acknowledged record at `lsn`, checking it is this LogDrive's at `address`.
    fn read_record(&self, address: u64, lsn: u64) -> OpFuture<ReadOutcome> {
        let read = self.inner.drive.read_entry_async(lsn);
        let expected = self.record(RecordType::Write, address, 0);
        Box::pin(async move {
            match read.await {
                Ok(entry) => {
                    let found = Record::decode(entry.kind, &entry.header);
                    match found.map(|record| Record { epoch: 0, ..record }) {
                        Some(record) if record == expected => {
                            Ok(ReadOutcome::Value(Bytes::from(entry.payload)))
                        }
                        _ => Ok(ReadOutcome::Damaged),
                    }
                }
                Err(ReadError::Damaged { .. }) => Ok(ReadOutcome::Damaged),
                Err(error) => Err(read_error(error)),
            }
        })
    }
}

/// A queued write's outcome: applies it to the slot when the record completes; dropped
/// early, it leaves its ticket with the LogDrive.
struct PendingWrite {
    ticket: Option<Ticket>,
    live: Shared,
    address: u64,
}

impl Future for PendingWrite {
    type Output = Result<(), LogDriveError>;

    fn poll(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(ticket) = self.ticket.as_mut() else {
            panic!("a write's future polled after it completed");
        };
        let Poll::Ready(outcome) = Pin::new(ticket).poll(context) else {
            return Poll::Pending;
        };
        self.ticket = None;
        finish_write(&mut lock(&self.live).state, self.address, &outcome);
        Poll::Ready(outcome.map(|_| ()).map_err(append_error))
    }
}

impl Drop for PendingWrite {
    fn drop(&mut self) {
        if let Some(ticket) = self.ticket.take() {
            lock(&self.live).orphans.push((self.address, ticket));
        }
    }
}

impl LogDrive for LocalLogDrive {
    fn write(&self, address: u64, epoch: u64, payload: Bytes) -> OpFuture<()> {
        let crc = crc32c::crc32c(&payload);
        let len = payload.len() as u64;
        let mut live = match self.lock() {
            Ok(live) => live,
            Err(error) => return ready(Err(error)),
        };
        match live.state.check_write(address, epoch, crc, len) {
            Err(error) => ready(Err(error)),
            Ok(WriteCheck::Durable(lsn)) => {
                drop(live);
                self.compare(address, lsn, payload)
            }
            // A new value, or the same as one in flight: written (again), so that the
            // acknowledgement means durable; replay keeps the first.
            Ok(WriteCheck::Append | WriteCheck::Pending) => {
                let record = self.record(RecordType::Write, address, epoch);
                let ticket = match self.inner.append(&record, payload) {
                    Ok(ticket) => ticket,
                    Err(error) => return ready(Err(error)),
                };
                live.state.queue_write(address, crc, len);
                drop(live);
                Box::pin(PendingWrite {
                    ticket: Some(ticket),
                    live: Arc::clone(&self.live),
                    address,
                })
            }
        }
    }

    fn read(&self, address: u64) -> OpFuture<ReadOutcome> {
        let live = match self.lock() {
            Ok(live) => live,
            Err(error) => return ready(Err(error)),
        };
        let first = live.state.first;
        match live.state.lookup(address) {
            Err(error) => ready(Err(error)),
            Ok(_) if address < first => ready(Ok(ReadOutcome::Trimmed { first })),
            Ok(None) => ready(Ok(ReadOutcome::Unwritten)),
            Ok(Some(lsn)) => {
                drop(live);
                self.read_record(address, lsn)
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
