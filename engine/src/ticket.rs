//! Tickets: how an append's outcome reaches its client. A ticket can be waited on from a plain
//! thread ([`Ticket::wait`]) or awaited from any async runtime (it implements [`Future`]); the
//! engine depends on no runtime. The drive completes each ticket exactly once, in LSN order,
//! with the LSN (after the sync covering it succeeded) or an error, through the ticket's
//! [`TicketCompleter`]. A completer that is dropped without completing (the request was
//! dropped in a channel, or the drive thread unwound) completes its ticket with
//! [`DriveClosed`]: no ticket ever waits on a drive that is gone.
//!
//! Looking at a ticket never consumes its outcome ([`Ticket::try_outcome`],
//! [`Ticket::wait_timeout`] return a copy); only [`Ticket::wait`] and awaiting take it.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use crate::error::{AppendError, DriveClosed};

/// What an append comes to: its LSN once durable, or why not.
pub type AppendOutcome = Result<u64, AppendError>;

#[derive(Default)]
struct Slot {
    outcome: Option<AppendOutcome>,
    waker: Option<Waker>,
    /// A thread is (or is about to be) blocked on the condition variable. Only then does
    /// completing the ticket notify it: a notification is a system call, and a pipelining
    /// client leaves most tickets unwaited until they are long complete.
    thread_waiting: bool,
}

/// The state a ticket and its completer share.
#[derive(Default)]
struct TicketState {
    slot: Mutex<Slot>,
    ready: Condvar,
}

impl TicketState {
    /// The slot. A poisoned lock only means a client thread panicked while holding it; the
    /// outcome inside is still whole (it is written in one assignment).
    fn lock(&self) -> MutexGuard<'_, Slot> {
        self.slot
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The drive's side of a ticket: completes it exactly once. Dropping it without completing
/// completes the ticket with [`DriveClosed`].
pub struct TicketCompleter {
    state: Option<Arc<TicketState>>,
}

impl TicketCompleter {
    /// Completes the ticket (the drive does this once, in LSN order).
    pub fn complete(mut self, outcome: AppendOutcome) {
        if let Some(state) = self.state.take() {
            deliver(&state, outcome);
        }
    }
}

impl Drop for TicketCompleter {
    fn drop(&mut self) {
        if let Some(state) = self.state.take() {
            deliver(&state, Err(AppendError::Closed(DriveClosed)));
        }
    }
}

fn deliver(state: &TicketState, outcome: AppendOutcome) {
    let (waker, thread_waiting) = {
        let mut slot = state.lock();
        debug_assert!(slot.outcome.is_none(), "a ticket is completed once");
        slot.outcome = Some(outcome);
        (slot.waker.take(), slot.thread_waiting)
    };
    if thread_waiting {
        state.ready.notify_all();
    }
    if let Some(waker) = waker {
        waker.wake();
    }
}

/// An append's pending outcome.
#[must_use = "a ticket is the only way to learn whether the append became durable"]
pub struct Ticket {
    state: Arc<TicketState>,
}

impl Ticket {
    /// A ticket and the completer the drive keeps for it.
    pub(crate) fn new() -> (Ticket, TicketCompleter) {
        let state = Arc::new(TicketState::default());
        let completer = TicketCompleter {
            state: Some(Arc::clone(&state)),
        };
        (Ticket { state }, completer)
    }

    /// Blocks until the append is durable (its LSN) or failed.
    pub fn wait(self) -> AppendOutcome {
        let mut slot = self.state.lock();
        loop {
            if let Some(outcome) = &slot.outcome {
                return outcome.clone();
            }
            slot.thread_waiting = true;
            slot = self
                .state
                .ready
                .wait(slot)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
    }

    /// Like [`Ticket::wait`], giving up after `timeout` (`None`: still pending). The ticket
    /// keeps its outcome: a later look or wait sees it again.
    #[must_use]
    pub fn wait_timeout(&self, timeout: Duration) -> Option<AppendOutcome> {
        // A timeout too long to represent as a deadline is no timeout at all.
        let deadline = Instant::now().checked_add(timeout);
        let mut slot = self.state.lock();
        loop {
            if let Some(outcome) = &slot.outcome {
                return Some(outcome.clone());
            }
            let left = deadline.map_or(Duration::MAX, |deadline| {
                deadline.saturating_duration_since(Instant::now())
            });
            if left.is_zero() {
                return None;
            }
            slot.thread_waiting = true;
            slot = self
                .state
                .ready
                .wait_timeout(slot, left)
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .0;
        }
    }

    /// The outcome if it is already known (a copy: the ticket keeps it).
    #[must_use]
    pub fn try_outcome(&self) -> Option<AppendOutcome> {
        self.state.lock().outcome.clone()
    }

    /// Whether the outcome is known.
    #[must_use]
    pub fn is_complete(&self) -> bool {
        self.state.lock().outcome.is_some()
    }
}

impl Future for Ticket {
    type Output = AppendOutcome;

    fn poll(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Self::Output> {
        let mut slot = self.state.lock();
        match &slot.outcome {
            Some(outcome) => Poll::Ready(outcome.clone()),
            None => {
                slot.waker = Some(context.waker().clone());
                Poll::Pending
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn looking_at_a_ticket_does_not_consume_its_outcome() {
        let (ticket, completer) = Ticket::new();
        assert_eq!(ticket.try_outcome(), None);
        assert_eq!(ticket.wait_timeout(Duration::from_millis(1)), None);
        completer.complete(Ok(7));
        assert!(ticket.is_complete());
        assert_eq!(ticket.try_outcome(), Some(Ok(7)));
        assert_eq!(ticket.try_outcome(), Some(Ok(7)));
        assert_eq!(ticket.wait_timeout(Duration::from_millis(1)), Some(Ok(7)));
        assert_eq!(ticket.wait_timeout(Duration::MAX), Some(Ok(7)));
        assert_eq!(ticket.wait(), Ok(7));
    }

    #[test]
    fn a_dropped_completer_completes_its_ticket_with_closed() {
        let (ticket, completer) = Ticket::new();
        let waiter = std::thread::spawn(move || ticket.wait());
        std::thread::sleep(Duration::from_millis(20));
        drop(completer);
        assert_eq!(
            waiter.join().expect("waiter"),
            Err(AppendError::Closed(DriveClosed))
        );
    }

    #[test]
    fn a_waiting_thread_is_woken_by_completion() {
        let (ticket, completer) = Ticket::new();
        let waiter = std::thread::spawn(move || ticket.wait_timeout(Duration::from_secs(30)));
        std::thread::sleep(Duration::from_millis(20));
        completer.complete(Ok(3));
        assert_eq!(waiter.join().expect("waiter"), Some(Ok(3)));
    }
}
