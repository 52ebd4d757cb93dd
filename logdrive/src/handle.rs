//! [`LocalLogDrive`]: one LogDrive of a store (one id, one generation), and the operations
//! of the [`LogDrive`] trait on it. Each operation takes the LogDrive's mutex, takes in the
//! outcomes completed since the last look (`complete`), checks itself against the state and,
//! if it writes, queues its record with room the store admitted (`space`) before it lets the
//! mutex go. An operation that finds no room is parked outside the mutex (`waiting`) and
//! checked again once room is granted.

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, MutexGuard};
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use sealog::{ReadError, SummedBytes};

use crate::api::ready;
use crate::api::{Length, LogDrive, LogDriveError, OpFuture, ReadOutcome, TailDesc};
use crate::complete::{Completing, ControlDone, WriteDone};
use crate::errors::read_error;
use crate::inner::Inner;
use crate::live::{ControlKind, Live, Shared};
use crate::record::{Record, RecordType};
use crate::space::{Admission, Class};
use crate::state::{Check, Control, Lookup, WriteCheck};
use crate::sync::lock;
use crate::waiting::Parked;

/// One LogDrive of a [`LogDriveStore`](crate::LogDriveStore) (one id, one generation).
#[derive(Clone)]
pub struct LocalLogDrive {
    inner: Arc<Inner>,
    live: Shared,
    id: u64,
    generation: u64,
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

/// How many times a read follows its value to the record relocation moved it to before it
/// gives up (a relocation step takes far longer than a read, so two moves during one read
/// already mean the reclaimer is lapping the ring under it).
const READ_FOLLOWS_MAX: u32 = 8;

impl LocalLogDrive {
    pub(crate) fn new(inner: Arc<Inner>, live: Shared, id: u64, generation: u64) -> Self {
        LocalLogDrive {
            inner,
            live,
            id,
            generation,
        }
    }

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
        live.take_in(&*self.inner);
        Ok(live)
    }

    fn record(&self, record_type: RecordType, value: u64, epoch: u64) -> Record {
        Record::new(record_type, self.id, self.generation, value, epoch)
    }

    /// A seal, fence or trim: checked, queued and applied to the state as queued under the
    /// LogDrive's mutex; applied to what reads see once durable. One the durable state
    /// already says writes nothing; one only the queued state says is written again, so
    /// that its acknowledgement means durable. `admission` is room already granted (a
    /// control that waited for it, checked again now).
    fn control(&self, control: Control, admission: Option<Admission>) -> OpFuture<()> {
        let mut live = match self.lock() {
            Ok(live) => live,
            Err(error) => return ready(Err(error)),
        };
        let check = match live.state.check_control(control) {
            Ok(Check::Done) => return ready(Ok(())),
            Ok(check) => check,
            Err(error) => return ready(Err(error)),
        };
        // A trim frees records (relocation then wins them back): it may go where other
        // control records may not.
        let class = match control {
            Control::Trim(_) => Class::Release,
            Control::Seal { .. } | Control::Fence(_) => Class::Control,
        };
        let Some(admission) = admission.or_else(|| self.inner.admit(0, class)) else {
            drop(live);
            let handle = self.clone();
            return self.inner.park(0, class, move |admitted| {
                admitted.map_or_else(
                    |error| ready(Err(error)),
                    |admission| handle.control(control, Some(admission)),
                )
            });
        };
        let record = control.record(self.id, self.generation);
        let floor = self.inner.drive.next_lsn();
        let ticket = match self.inner.append(&record, Bytes::new(), admission) {
            Ok(ticket) => ticket,
            Err(error) => return ready(Err(error)),
        };
        if check == Check::Apply {
            live.state.queue_control(control);
        }
        live.state.queued_at(floor);
        drop(live);
        let done = ControlDone {
            inner: Arc::clone(&self.inner),
            live: Arc::clone(&self.live),
            kind: ControlKind::Control(control, check),
            floor,
        };
        Completing::boxed(ticket, done)
    }

    /// [`LogDrive::write`] without the box: the write's [`PendingWrite`], which a plain
    /// thread waits for in the engine's own ticket wait ([`PendingWrite::wait`]).
    pub fn submit_write(&self, address: u64, epoch: u64, payload: Bytes) -> PendingWrite {
        // The value's CRC summarises it in the index and is the entry's payload CRC too:
        // computed once, here, outside the LogDrive's mutex.
        self.write_summed(
            address,
            epoch,
            SummedBytes::new(payload),
            (Class::Write, None),
        )
    }

    /// A write that makes room: admitted as a trim or a deletion is, out of the room kept
    /// for the records that release space, not behind clients' writes waiting for room. For
    /// the small record an embedder must make durable before it may trim (a Raft store's
    /// new purge point, without which trimming would lose track of its log's start): were
    /// it admitted as a client write, a ring its clients filled would refuse the very
    /// record that lets them free it. Anything else that takes this path eats the room
    /// deletions and trims need.
    pub fn submit_releasing_write(&self, address: u64, epoch: u64, payload: Bytes) -> PendingWrite {
        self.write_summed(
            address,
            epoch,
            SummedBytes::new(payload),
            (Class::Release, None),
        )
    }

    /// A write whose CRC is computed, with room already granted if it waited for it.
    fn write_summed(
        &self,
        address: u64,
        epoch: u64,
        summed: SummedBytes,
        (class, admission): (Class, Option<Admission>),
    ) -> PendingWrite {
        let crc = summed.crc();
        let len = summed.len() as u64;
        let mut live = match self.lock() {
            Ok(live) => live,
            Err(error) => return PendingWrite::done(Err(error)),
        };
        match live.state.check_write(address, epoch, (crc, len)) {
            Err(error) => PendingWrite::done(Err(error)),
            Ok(WriteCheck::Durable(lsn)) => {
                drop(live);
                self.compare(address, epoch, lsn, summed.into_bytes())
            }
            // A new value, a damaged one's repair, or a rewrite of the first write's CRC and
            // length while that write is in flight.
            Ok(check @ (WriteCheck::Append | WriteCheck::Pending)) => {
                let admitted = admission.or_else(|| self.inner.admit(len, class));
                let Some(admission) = admitted else {
                    drop(live);
                    return self.park_write(address, epoch, summed, class);
                };
                // A rewrite keeps its own value to compare once durable (the first write's
                // is not kept: see `confirm`), and where the first write's record may lie.
                let rewrite = (check == WriteCheck::Pending).then(|| {
                    let floor = live.state.unprocessed_floor();
                    (summed.bytes().clone(), floor.unwrap_or(0))
                });
                let record = self.record(RecordType::Write, address, epoch);
                let floor = self.inner.drive.next_lsn();
                let ticket = match self.inner.append_summed(&record, summed, admission) {
                    Ok(ticket) => ticket,
                    Err(error) => return PendingWrite::done(Err(error)),
                };
                live.state.queue_write(address, crc, len);
                live.state.queued_at(floor);
                let mailbox = Arc::clone(&live.mailbox);
                drop(live);
                let done = WriteDone {
                    mailbox,
                    address,
                    floor,
                    rewrite: rewrite.is_some(),
                };
                let completing = Completing::new(ticket, done);
                match rewrite {
                    None => PendingWrite(Pending::Queued(completing)),
                    Some((value, from)) => {
                        let confirmed = self.confirm(completing, (address, epoch, from), value);
                        PendingWrite(Pending::Compared(confirmed))
                    }
                }
            }
        }
    }

    /// A write of the bytes an acknowledged record at `lsn` holds already writes nothing;
    /// other bytes with the same CRC and length are a conflict, told apart by reading the
    /// record back.
    fn compare(&self, address: u64, epoch: u64, lsn: u64, payload: Bytes) -> PendingWrite {
        let handle = self.clone();
        let compared = Box::pin(async move {
            match handle.fetch(address, lsn).await? {
                Fetched::Value(bytes) if bytes == payload => Ok(()),
                Fetched::Value(_) => Err(LogDriveError::Conflict { address }),
                // Its record failed its checks since it was acknowledged: the write cannot
                // be told from a conflict; the value stays unproven.
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

    /// A rewrite queued while the first write of its address was in flight, with that
    /// write's CRC and length: acknowledged once its own record is durable and its bytes are
    /// the value's. A CRC32C is no proof of equality (a value can be crafted to another's
    /// CRC), and the first write's bytes are not kept while it is in flight (a reference to
    /// every write's value, kept until its outcome was taken in, cost a third of a
    /// microsecond per write: a count shared with the caller's buffer, taken and given back
    /// on two threads). Once this record is durable, every record queued before it has its
    /// outcome (the drive acknowledges in LSN order): the value is the first write's if it
    /// was written (replay keeps the first record of an address), else this one's. The
    /// slot names it once that outcome is taken in (`LogState::rewrites`); until then the
    /// log itself says, from `from` (no later than the first write's record) on.
    fn confirm(
        &self,
        completing: Completing<WriteDone>,
        (address, epoch, from): (u64, u64, u64),
        value: Bytes,
    ) -> OpFuture<()> {
        let handle = self.clone();
        Box::pin(async move {
            let own = completing.await?;
            for _ in 0..READ_FOLLOWS_MAX {
                let named = handle.lock()?.state.record_of(address);
                let found = match named {
                    Some(lsn) if lsn == own => return Ok(()),
                    Some(lsn) => handle.fetch(address, lsn).await?,
                    None => match handle.first_record(address, from, own) {
                        Ok(Some(bytes)) => Fetched::Value(bytes),
                        Ok(None) => return Ok(()),
                        // The ring's head passed it: the slot names the value by now.
                        Err(ReadError::Trimmed { .. }) => continue,
                        Err(error) => return Err(read_error(error)),
                    },
                };
                return match found {
                    Fetched::Value(bytes) if bytes == value => Ok(()),
                    Fetched::Value(_) => Err(LogDriveError::Conflict { address }),
                    Fetched::Damaged => Err(LogDriveError::Io {
                        reason: format!("the first record of address {address} fails its checks"),
                    }),
                    // Sealed off or trimmed meanwhile: answered as the write is now.
                    Fetched::Gone(_) => handle.submit_write(address, epoch, value).await,
                };
            }
            Err(LogDriveError::Io {
                reason: format!(
                    "the first record of address {address} moved {READ_FOLLOWS_MAX} times \
                     while a rewrite was compared with it"
                ),
            })
        })
    }

    /// The value of this LogDrive's first write record of `address` in [from, until), if any:
    /// read from the log, whose records there are all durable or refused.
    fn first_record(
        &self,
        address: u64,
        from: u64,
        until: u64,
    ) -> Result<Option<Bytes>, ReadError> {
        let expected = self.record(RecordType::Write, address, 0);
        for entry in self.inner.drive.iter_from(from) {
            let entry = entry?;
            if entry.lsn >= until {
                break;
            }
            let found = Record::decode(entry.kind, &entry.header).map(|record| Record {
                epoch: 0,
                relocated: false,
                ..record
            });
            if found == Some(expected) {
                return Ok(Some(Bytes::from(entry.payload)));
            }
        }
        Ok(None)
    }

    /// Parks a write that found no room (outside the LogDrive's mutex): once room is
    /// granted it is checked again and queued; refused (its deadline passed, nothing left
    /// to reclaim, the store stopped), it answers that.
    fn park_write(
        &self,
        address: u64,
        epoch: u64,
        summed: SummedBytes,
        class: Class,
    ) -> PendingWrite {
        let handle = self.clone();
        let len = summed.len() as u64;
        let parked = self
            .inner
            .park_with(len, class, move |admitted| match admitted {
                Ok(admission) => {
                    handle.write_summed(address, epoch, summed, (class, Some(admission)))
                }
                Err(error) => PendingWrite::done(Err(error)),
            });
        match parked {
            Some(parked) => PendingWrite(Pending::Parked(parked)),
            None => PendingWrite::done(Err(LogDriveError::RingFull)),
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
            Ok(lookup) => ready(Ok(outcome_of(lookup))),
        }
    }

    fn weak_tail(&self, k: u64) -> OpFuture<TailDesc> {
        let k_max = self.inner.options.weak_tail_k_max;
        ready(
            self.lock()
                .and_then(|mut live| live.state.weak_tail(k, k_max)),
        )
    }

    fn seal(&self, length: u64, epoch: u64) -> OpFuture<()> {
        self.control(Control::Seal { length, epoch }, None)
    }

    fn fence(&self, epoch: u64) -> OpFuture<()> {
        self.control(Control::Fence(epoch), None)
    }

    fn trim(&self, upto: u64) -> OpFuture<()> {
        self.control(Control::Trim(upto), None)
    }

    fn length(&self) -> OpFuture<Length> {
        ready(self.lock().and_then(|mut live| live.state.length()))
    }

    fn write_window_max(&self) -> u64 {
        self.inner.options.write_window_max
    }
}

/// A write in flight on a [`LocalLogDrive`] ([`LocalLogDrive::submit_write`]): awaited as a
/// future, or waited for from a plain thread with [`PendingWrite::wait`], which blocks in the
/// engine's own ticket wait (a brief spin, then one futex for all of the drive's waiters,
/// woken once per turn of the drive thread) rather than behind a waker of its own per write.
/// Dropped early, the write goes on (it was issued when it was submitted, a write waiting
/// for ring room included) and its outcome is taken in later.
pub struct PendingWrite(Pending);

enum Pending {
    /// Answered at once (refused, or not queued).
    Done(Option<Result<(), LogDriveError>>),
    /// Its record is queued.
    Queued(Completing<WriteDone>),
    /// A rewrite compared with the value on the ring.
    Compared(OpFuture<()>),
    /// Waiting for ring room: what its continuation makes of it once granted (or refused:
    /// the store's thread refuses it at the store's deadline) is left here.
    Parked(Arc<Parked<PendingWrite>>),
}

impl PendingWrite {
    fn done(outcome: Result<(), LogDriveError>) -> PendingWrite {
        PendingWrite(Pending::Done(Some(outcome)))
    }

    /// Blocks until the write is durable (or refused).
    pub fn wait(self) -> Result<(), LogDriveError> {
        match self.wait_until(None) {
            Ok(outcome) => outcome,
            Err(_) => unreachable!("no deadline to pass"),
        }
    }

    /// Blocks until the write is durable (or refused), or until `deadline`: then the write
    /// is handed back, still going on, to wait for again (or drop).
    pub fn wait_deadline(self, deadline: Instant) -> Result<Result<(), LogDriveError>, Self> {
        self.wait_until(Some(deadline))
    }

    fn wait_until(self, deadline: Option<Instant>) -> Result<Result<(), LogDriveError>, Self> {
        match self.0 {
            Pending::Done(outcome) => Ok(outcome.expect("a write answers once")),
            Pending::Queued(completing) => match deadline {
                None => Ok(completing.wait().map(drop)),
                Some(deadline) => completing
                    .wait_deadline(deadline)
                    .map(|outcome| outcome.map(drop))
                    .map_err(|completing| PendingWrite(Pending::Queued(completing))),
            },
            Pending::Compared(future) => match deadline {
                None => Ok(crate::wait(future)),
                Some(deadline) => crate::wait_deadline(future, deadline)
                    .map_err(|future| PendingWrite(Pending::Compared(future))),
            },
            Pending::Parked(parked) => match parked.wait_until(deadline) {
                Some(resumed) => resumed.wait_until(deadline),
                None => Err(PendingWrite(Pending::Parked(parked))),
            },
        }
    }
}

impl Future for PendingWrite {
    type Output = Result<(), LogDriveError>;

    fn poll(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Self::Output> {
        loop {
            match &mut self.0 {
                Pending::Done(outcome) => {
                    return Poll::Ready(
                        outcome
                            .take()
                            .expect("a write's future polled after it completed"),
                    )
                }
                Pending::Queued(completing) => {
                    return Pin::new(completing)
                        .poll(context)
                        .map(|outcome| outcome.map(drop))
                }
                Pending::Compared(future) => return future.as_mut().poll(context),
                Pending::Parked(parked) => match parked.poll_take(context) {
                    Poll::Ready(resumed) => *self = resumed,
                    Poll::Pending => return Poll::Pending,
                },
            }
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
