//! A one-shot reply: the future a held operation's caller awaits, and the sender the
//! simulation completes it through when it delivers (or fails) the operation.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use sealog_logdrive::{LogDriveError, OpFuture};

/// What a reply holds: the outcome once sent, and the waker of its awaiting task.
struct Slot<T> {
    outcome: Option<Result<T, LogDriveError>>,
    waker: Option<Waker>,
}

fn lock<T>(slot: &Mutex<Slot<T>>) -> MutexGuard<'_, Slot<T>> {
    slot.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The sending half of a reply.
pub struct ReplySender<T> {
    slot: Arc<Mutex<Slot<T>>>,
}

impl<T> ReplySender<T> {
    /// Completes the reply with `outcome` and wakes its task.
    pub fn send(self, outcome: Result<T, LogDriveError>) {
        let waker = {
            let mut slot = lock(&self.slot);
            slot.outcome = Some(outcome);
            slot.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

/// The awaiting half of a reply.
struct Reply<T> {
    slot: Arc<Mutex<Slot<T>>>,
}

impl<T> Future for Reply<T> {
    type Output = Result<T, LogDriveError>;

    fn poll(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Self::Output> {
        let mut slot = lock(&self.slot);
        match slot.outcome.take() {
            Some(outcome) => Poll::Ready(outcome),
            None => {
                slot.waker = Some(context.waker().clone());
                Poll::Pending
            }
        }
    }
}

/// A reply's two halves.
pub fn reply<T: Send + 'static>() -> (ReplySender<T>, OpFuture<T>) {
    let slot = Arc::new(Mutex::new(Slot {
        outcome: None,
        waker: None,
    }));
    let sender = ReplySender {
        slot: Arc::clone(&slot),
    };
    (sender, Box::pin(Reply { slot }))
}
