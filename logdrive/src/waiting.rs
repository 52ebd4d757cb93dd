//! An operation parked until the ring has room for its record (`space`): the caller gets a
//! future at once, the operation's work runs when room is granted (on the granting thread,
//! whether or not the future is still awaited), and what that work produced (the record's
//! own future, or its refusal) is left in a [`Parked`] slot for the future to take. A
//! blocking caller waits on the slot's condition variable and gives up at its deadline by
//! itself; an awaited future is given up on by the store's thread, which refuses expired
//! waiters (`space::Space::expire`).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use crate::api::{LogDriveError, OpFuture};
use crate::sync::lock;

/// Where a parked operation's result is left.
pub(crate) struct Parked<T> {
    state: Mutex<Slot<T>>,
    filled: Condvar,
}

enum Slot<T> {
    /// Not yet granted or refused; the waker of the future awaiting it, if polled.
    Waiting(Option<Waker>),
    Filled(T),
    Taken,
}

impl<T> Parked<T> {
    pub fn new() -> Arc<Parked<T>> {
        Arc::new(Parked {
            state: Mutex::new(Slot::Waiting(None)),
            filled: Condvar::new(),
        })
    }

    /// Leaves the result, waking whoever waits for it.
    pub fn fill(&self, value: T) {
        let waker = {
            let mut state = lock(&self.state);
            match std::mem::replace(&mut *state, Slot::Filled(value)) {
                Slot::Waiting(waker) => waker,
                Slot::Filled(_) | Slot::Taken => {
                    debug_assert!(false, "a parked operation is resumed once");
                    None
                }
            }
        };
        self.filled.notify_all();
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// The result if it is there, else the waker kept for [`Parked::fill`].
    pub fn poll_take(&self, context: &mut Context<'_>) -> Poll<T> {
        let mut state = lock(&self.state);
        match std::mem::replace(&mut *state, Slot::Taken) {
            Slot::Filled(value) => Poll::Ready(value),
            Slot::Waiting(_) => {
                *state = Slot::Waiting(Some(context.waker().clone()));
                Poll::Pending
            }
            Slot::Taken => panic!("a parked operation's result taken twice"),
        }
    }

    /// Blocks until the result is there, or until `deadline` (`None` then).
    pub fn wait_until(&self, deadline: Option<Instant>) -> Option<T> {
        let mut state = lock(&self.state);
        loop {
            if matches!(*state, Slot::Filled(_)) {
                return match std::mem::replace(&mut *state, Slot::Taken) {
                    Slot::Filled(value) => Some(value),
                    _ => unreachable!("matched above"),
                };
            }
            let now = Instant::now();
            state = match deadline {
                Some(deadline) if now >= deadline => return None,
                Some(deadline) => {
                    let timeout = deadline - now;
                    let (state, _) = self
                        .filled
                        .wait_timeout(state, timeout)
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    state
                }
                None => self
                    .filled
                    .wait(state)
                    .unwrap_or_else(std::sync::PoisonError::into_inner),
            };
        }
    }
}

/// An operation parked for room, as the [`OpFuture`] its caller awaits: once granted, the
/// record's own future; once refused, its error.
pub(crate) struct Deferred<T> {
    parked: Arc<Parked<OpFuture<T>>>,
    resumed: Option<OpFuture<T>>,
}

impl<T: Send + 'static> Deferred<T> {
    pub fn boxed(parked: Arc<Parked<OpFuture<T>>>) -> OpFuture<T> {
        Box::pin(Deferred {
            parked,
            resumed: None,
        })
    }
}

impl<T> Future for Deferred<T> {
    type Output = Result<T, LogDriveError>;

    fn poll(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Self::Output> {
        if self.resumed.is_none() {
            match self.parked.poll_take(context) {
                Poll::Ready(future) => self.resumed = Some(future),
                Poll::Pending => return Poll::Pending,
            }
        }
        let resumed = self.resumed.as_mut().expect("resumed above");
        resumed.as_mut().poll(context)
    }
}
