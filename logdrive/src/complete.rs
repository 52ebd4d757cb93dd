//! How a queued record's outcome comes back to its LogDrive: every record's outcome is taken
//! in exactly once, by its future when it completes, or, when the future was dropped first,
//! from the ticket it leaves with its LogDrive (or the registry, for a deletion), looked at on
//! the LogDrive's next operation and by the reclaimer.
//!
//! A write's completion takes no LogDrive mutex: it leaves its outcome in its LogDrive's
//! mailbox, and whoever takes the LogDrive's mutex next (the next write, a read, `weak_tail`,
//! the reclaimer's look) takes every outcome there in before it answers anything, so a read
//! after a write's acknowledgement sees it. A control record's completion takes the mutex and
//! applies the control durably; one that the engine fails leaves memory and log in doubt, so
//! the store stops.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;

use sealog::{AppendError, AppendOutcome, Ticket};

use crate::api::{LogDriveError, OpFuture};
use crate::handle::LocalLogDrive;
use crate::state::{Check, Control, LogState};
use crate::store::{append_error, lock, Inner};

/// A write's outcome, left by its completion for the LogDrive's next look: a completion
/// takes no mutex (the next holder of the LogDrive's mutex takes the outcome in before it
/// answers anything, so a read after this write's acknowledgement sees it), and a LogDrive
/// state is locked once per write, by its submission, rather than once more per completion
/// (eight writers completing one batch's writes of one LogDrive would otherwise queue on its
/// mutex one after another, and a thousand LogDrives would each be brought into cache twice).
pub(crate) struct Ack {
    address: u64,
    outcome: AppendOutcome,
    floor: u64,
    /// A rewrite made while the address's first write was in flight (`LogState::rewrites`).
    rewrite: bool,
}

/// The outcome of a dropped write, kept until someone looks.
pub(crate) struct Orphan {
    address: u64,
    ticket: Ticket,
    floor: u64,
    rewrite: bool,
}

/// A control record whose future was dropped before it completed.
pub(crate) struct PendingControl {
    kind: ControlKind,
    ticket: Ticket,
    floor: u64,
}

/// A deletion whose future was dropped before it completed.
pub(crate) struct PendingDelete {
    pub key: (u64, u64),
    pub ticket: Ticket,
}

/// What a control record does once durable.
#[derive(Clone, Copy, Debug)]
pub(crate) enum ControlKind {
    Create,
    Control(Control, Check),
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
pub(crate) struct Mailbox {
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
    pub mailbox: Arc<Mailbox>,
    /// The acknowledgements taken from the mailbox, swapped with its list (so that both keep
    /// their capacity).
    acks: Vec<Ack>,
    /// Orphaned writes taken from the mailbox whose outcomes are not yet known.
    orphans: Vec<Orphan>,
    pub controls: Vec<PendingControl>,
}

impl Live {
    pub fn new(state: LogState) -> Live {
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
                finish_write(state, (ack.address, ack.rewrite), &ack.outcome, ack.floor);
            }
        }
        orphans.retain(|orphan| match orphan.ticket.try_outcome() {
            Some(outcome) => {
                let write = (orphan.address, orphan.rewrite);
                finish_write(state, write, &outcome, orphan.floor);
                false
            }
            None => true,
        });
        controls.retain(|pending| match pending.ticket.try_outcome() {
            Some(outcome) => {
                state.processed(pending.floor);
                let _ = finish_control(inner, state, pending.kind, &outcome);
                false
            }
            None => true,
        });
    }
}

pub(crate) type Shared = Arc<Mutex<Live>>;

/// Applies a write record's outcome to its slot (an outcome the drive's stop left unknown
/// changes nothing: the store answers nothing more).
fn finish_write(
    state: &mut LogState,
    (address, rewrite): (u64, bool),
    outcome: &AppendOutcome,
    floor: u64,
) {
    state.processed(floor);
    match outcome {
        Ok(lsn) => state.complete_write(address, Some(*lsn), rewrite),
        Err(AppendError::RingFull { .. }) => state.complete_write(address, None, rewrite),
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
        (Ok(_), ControlKind::Control(_, Check::Same | Check::Done)) => Ok(()),
        (Err(error), _) => {
            // Its checks applied it as queued, so the state is ahead of the log now.
            inner.stop(format!("a control record failed: {error}"));
            Err(append_error(error.clone()))
        }
    }
}

/// Waits for a record's outcome and takes it in exactly once: when it completes, or, if the
/// future is dropped first, by leaving the ticket where the next look takes it in.
pub(crate) trait Completion: Send + 'static {
    type Output: Send + 'static;
    fn complete(self, outcome: AppendOutcome) -> Result<Self::Output, LogDriveError>;
    fn abandon(self, ticket: Ticket);
}

/// A queued record's ticket with what its outcome does.
pub(crate) struct Completing<C: Completion> {
    ticket: Option<Ticket>,
    completion: Option<C>,
}

impl<C: Completion> Completing<C> {
    pub fn new(ticket: Ticket, completion: C) -> Completing<C> {
        Completing {
            ticket: Some(ticket),
            completion: Some(completion),
        }
    }

    pub fn boxed(ticket: Ticket, completion: C) -> OpFuture<C::Output> {
        Box::pin(Completing::new(ticket, completion))
    }

    /// Blocks this thread in the engine's own ticket wait (its spin, then the drive's one
    /// futex, woken once per turn for every waiter), then takes the outcome in.
    pub fn wait(mut self) -> Result<C::Output, LogDriveError> {
        let ticket = self.ticket.take().expect("not yet waited for");
        let completion = self.completion.take().expect("completes once");
        completion.complete(ticket.wait())
    }

    /// [`Completing::wait`] until `deadline`; past it, the record is handed back, still in
    /// flight.
    pub fn wait_deadline(
        mut self,
        deadline: Instant,
    ) -> Result<Result<C::Output, LogDriveError>, Self> {
        let ticket = self.ticket.as_ref().expect("not yet waited for");
        let timeout = deadline.saturating_duration_since(Instant::now());
        match ticket.wait_timeout(timeout) {
            Some(outcome) => {
                self.ticket = None;
                let completion = self.completion.take().expect("completes once");
                Ok(completion.complete(outcome))
            }
            None => Err(self),
        }
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

/// A write's outcome, for its LogDrive's mailbox.
pub(crate) struct WriteDone {
    pub mailbox: Arc<Mailbox>,
    pub address: u64,
    /// The drive's next LSN when the record was queued (a bound below its LSN).
    pub floor: u64,
    /// Queued while the address's first write was in flight, with its CRC and length.
    pub rewrite: bool,
}

impl Completion for WriteDone {
    /// The record's LSN.
    type Output = u64;

    /// Leaves the outcome in the LogDrive's mailbox, for the next holder of its mutex
    /// (whoever takes it next takes the outcome in before anything else).
    fn complete(self, outcome: AppendOutcome) -> Result<u64, LogDriveError> {
        // A drive that stopped (`Stopped`, indeterminate) leaves the write in doubt; the ring
        // full refused it before it was written (definite).
        let answer = outcome.clone().map_err(append_error);
        let ack = Ack {
            address: self.address,
            outcome,
            floor: self.floor,
            rewrite: self.rewrite,
        };
        self.mailbox.leave(|mail| mail.acks.push(ack));
        answer
    }

    fn abandon(self, ticket: Ticket) {
        let orphan = Orphan {
            address: self.address,
            ticket,
            floor: self.floor,
            rewrite: self.rewrite,
        };
        self.mailbox.leave(|mail| mail.orphans.push(orphan));
    }
}

/// A seal's, fence's, trim's or creation's outcome.
pub(crate) struct ControlDone {
    pub inner: Arc<Inner>,
    pub live: Shared,
    pub kind: ControlKind,
    pub floor: u64,
}

impl Completion for ControlDone {
    type Output = ();

    fn complete(self, outcome: AppendOutcome) -> Result<(), LogDriveError> {
        let mut live = lock(&self.live);
        live.state.processed(self.floor);
        let done = finish_control(&self.inner, &mut live.state, self.kind, &outcome);
        drop(live);
        self.inner.reclaimer.wake();
        done
    }

    fn abandon(self, ticket: Ticket) {
        lock(&self.live).controls.push(PendingControl {
            kind: self.kind,
            ticket,
            floor: self.floor,
        });
    }
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

/// A deletion's outcome: durable, the LogDrive's records are garbage from now on.
pub(crate) struct DeleteDone {
    pub inner: Arc<Inner>,
    pub key: (u64, u64),
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
        });
    }
}
