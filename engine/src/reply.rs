//! One-shot replies: how the drive thread answers a read or a trim. The caller holds an
//! [`Answer`] and either blocks on it ([`Answer::recv`]), polls it ([`Answer::try_recv`], what a
//! simulation stepping the drive by hand does) or awaits it (it is a [`Future`]), so every
//! request the drive answers can be waited for from a plain thread or an async runtime alike.
//! A reply dropped without an answer (the drive thread stopped) reads as [`ReplyDropped`].
//!
//! Written here rather than taken from a crate: std's and crossbeam's channels have no
//! `Future`, and the futures crate's oneshot has no blocking receive; this is one mutex, one
//! condition variable and a waker, and nothing on the append path uses it.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

/// The sending side: answers once; dropped unanswered, its [`Answer`] reads [`ReplyDropped`].
pub struct Reply<T> {
    slot: Arc<Slot<T>>,
    sent: bool,
}

/// The receiving side of a [`Reply`].
#[must_use = "an answer does nothing unless it is received or awaited"]
pub struct Answer<T> {
    slot: Arc<Slot<T>>,
}

/// The reply was dropped without an answer: the drive that held it stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplyDropped;

/// Why [`Answer::try_recv`] found nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TryRecvError {
    /// No answer yet.
    Empty,
    /// The reply was dropped without an answer.
    Dropped,
}

struct Slot<T> {
    state: Mutex<State<T>>,
    answered: Condvar,
}

struct State<T> {
    value: Option<T>,
    /// The reply was answered or dropped: nothing more will come.
    closed: bool,
    waker: Option<Waker>,
}

/// A reply and the answer it sends to.
pub fn reply<T>() -> (Reply<T>, Answer<T>) {
    let slot = Arc::new(Slot {
        state: Mutex::new(State {
            value: None,
            closed: false,
            waker: None,
        }),
        answered: Condvar::new(),
    });
    (
        Reply {
            slot: Arc::clone(&slot),
            sent: false,
        },
        Answer { slot },
    )
}

impl<T> Slot<T> {
    /// The state, whatever a panicking holder left it in (it only ever holds plain values).
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Closes the slot with `value` (or without one) and wakes whoever waits.
    fn close(&self, value: Option<T>) {
        let waker = {
            let mut state = self.lock();
            state.value = value;
            state.closed = true;
            state.waker.take()
        };
        self.answered.notify_all();
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

impl<T> Reply<T> {
    /// Sends the answer. Never blocks; a receiver gone already is not an error (nobody asks).
    pub fn send(mut self, value: T) {
        self.sent = true;
        self.slot.close(Some(value));
    }
}

impl<T> Drop for Reply<T> {
    fn drop(&mut self) {
        if !self.sent {
            self.slot.close(None);
        }
    }
}

impl<T> Answer<T> {
    /// Blocks until the answer arrives.
    pub fn recv(self) -> Result<T, ReplyDropped> {
        let mut state = self.slot.lock();
        while !state.closed {
            state = self
                .slot
                .answered
                .wait(state)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
        state.value.take().ok_or(ReplyDropped)
    }

    /// The answer if it has arrived (once: a second call finds it taken,
    /// [`TryRecvError::Dropped`]).
    pub fn try_recv(&self) -> Result<T, TryRecvError> {
        let mut state = self.slot.lock();
        match (state.value.take(), state.closed) {
            (Some(value), _) => Ok(value),
            (None, true) => Err(TryRecvError::Dropped),
            (None, false) => Err(TryRecvError::Empty),
        }
    }
}

impl<T> Future for Answer<T> {
    type Output = Result<T, ReplyDropped>;

    fn poll(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.slot.lock();
        if state.closed {
            return Poll::Ready(state.value.take().ok_or(ReplyDropped));
        }
        // The latest poll's waker is the one to wake (a task may move between threads).
        match &state.waker {
            Some(waker) if waker.will_wake(context.waker()) => {}
            _ => state.waker = Some(context.waker().clone()),
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Wake;

    struct CountingWaker(AtomicUsize);

    impl Wake for CountingWaker {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn an_answer_arrives_blocking_polled_or_awaited() {
        let (sender, answer) = super::reply();
        std::thread::spawn(move || sender.send(7u64));
        assert_eq!(answer.recv(), Ok(7));

        let (sender, answer) = super::reply::<u64>();
        assert_eq!(answer.try_recv(), Err(TryRecvError::Empty));
        sender.send(8);
        assert_eq!(answer.try_recv(), Ok(8));

        let (sender, mut answer) = super::reply::<u64>();
        let counter = Arc::new(CountingWaker(AtomicUsize::new(0)));
        let waker = Waker::from(Arc::clone(&counter));
        let mut context = Context::from_waker(&waker);
        assert!(Pin::new(&mut answer).poll(&mut context).is_pending());
        assert!(Pin::new(&mut answer).poll(&mut context).is_pending());
        sender.send(9);
        assert_eq!(counter.0.load(Ordering::SeqCst), 1, "woken once");
        assert_eq!(Pin::new(&mut answer).poll(&mut context), Poll::Ready(Ok(9)));
    }

    #[test]
    fn a_dropped_reply_is_an_answer_too() {
        let (sender, answer) = super::reply::<u64>();
        std::thread::spawn(move || drop(sender));
        assert_eq!(answer.recv(), Err(ReplyDropped));
        let (sender, answer) = super::reply::<u64>();
        drop(sender);
        assert_eq!(answer.try_recv(), Err(TryRecvError::Dropped));
    }
}
