//! Tickets: how an append's outcome reaches its client. A ticket can be waited on from a plain
//! thread ([`Ticket::wait`]) or awaited from any async runtime (it implements [`Future`]); the
//! engine depends on no runtime. The drive thread completes each ticket exactly once, in LSN
//! order, with the LSN (after the sync covering it succeeded) or the drive's error.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use crate::error::DriveError;

#[derive(Default)]
struct Slot {
    outcome: Option<Result<u64, DriveError>>,
    waker: Option<Waker>,
    /// A thread is (or is about to be) blocked on the condition variable. Only then does
    /// completing the ticket notify it: a notification is a system call, and a pipelining
    /// client leaves most tickets unwaited until they are long complete.
    thread_waiting: bool,
}

/// The shared state of one ticket.
#[derive(Default)]
pub struct TicketState {
    slot: Mutex<Slot>,
    ready: Condvar,
}

impl TicketState {
    /// Completes the ticket (the drive thread does this once).
    pub fn complete(&self, outcome: Result<u64, DriveError>) {
        let (waker, thread_waiting) = {
            let mut slot = self.slot.lock().expect("ticket lock");
            debug_assert!(slot.outcome.is_none(), "a ticket is completed once");
            slot.outcome = Some(outcome);
            (slot.waker.take(), slot.thread_waiting)
        };
        if thread_waiting {
            self.ready.notify_all();
        }
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

/// An append's pending outcome.
pub struct Ticket {
    state: Arc<TicketState>,
}

impl Ticket {
    pub(crate) fn new() -> (Ticket, Arc<TicketState>) {
        let state = Arc::new(TicketState::default());
        (
            Ticket {
                state: Arc::clone(&state),
            },
            state,
        )
    }

    /// Blocks until the append is durable (its LSN) or failed.
    pub fn wait(self) -> Result<u64, DriveError> {
        let mut slot = self.state.slot.lock().expect("ticket lock");
        loop {
            if let Some(outcome) = slot.outcome.take() {
                return outcome;
            }
            slot.thread_waiting = true;
            slot = self.state.ready.wait(slot).expect("ticket lock");
        }
    }

    /// Like [`Ticket::wait`], giving up after `timeout` (the ticket is then still pending).
    pub fn wait_timeout(&self, timeout: Duration) -> Option<Result<u64, DriveError>> {
        let mut slot = self.state.slot.lock().expect("ticket lock");
        slot.thread_waiting = true;
        let (mut slot, _) = self
            .state
            .ready
            .wait_timeout_while(slot, timeout, |slot| slot.outcome.is_none())
            .expect("ticket lock");
        slot.outcome.take()
    }

    /// The outcome if it is already known.
    pub fn try_outcome(&self) -> Option<Result<u64, DriveError>> {
        self.state.slot.lock().expect("ticket lock").outcome.take()
    }
}

impl Future for Ticket {
    type Output = Result<u64, DriveError>;

    fn poll(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Self::Output> {
        let mut slot = self.state.slot.lock().expect("ticket lock");
        match slot.outcome.take() {
            Some(outcome) => Poll::Ready(outcome),
            None => {
                slot.waker = Some(context.waker().clone());
                Poll::Pending
            }
        }
    }
}
