//! How a queued record's outcome comes back to its LogDrive: every record's outcome is taken
//! in exactly once, by its future when it completes, or, when the future was dropped first,
//! from the ticket it leaves with its LogDrive (or the registry, for a deletion), looked at on
//! the LogDrive's next operation and by the reclaimer. A write's outcome goes to its
//! LogDrive's mailbox (`live`); a control record's completion takes the LogDrive's mutex and
//! applies the control durably.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use sealog::{AppendOutcome, Ticket};

use crate::api::{LogDriveError, OpFuture};
use crate::errors::append_error;
use crate::inner::Inner;
use crate::live::{
    finish_control, Ack, ControlKind, Mailbox, Orphan, PendingControl, PendingDelete, Shared,
};
use crate::sync::lock;

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
        let done = finish_control(&*self.inner, &mut live.state, self.kind, &outcome);
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
