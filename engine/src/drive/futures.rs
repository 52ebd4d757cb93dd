//! The futures a drive hands out: a request's outcome ([`DriveFuture`]), a read's payload
//! ([`PayloadFuture`]), and the durable tail reaching an LSN ([`DurableFuture`]). Their wakers
//! are called on the drive thread.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use super::entry::LogEntry;
use super::view::ReadView;
use crate::error::{DriveClosed, ReadError, WaitError};
use crate::reply::Answer;

/// The outcome of a drive's request as a future: a read or trim answered by the drive thread,
/// or one answered at once. A drive that stops without answering yields its close error.
#[must_use = "futures do nothing unless awaited"]
pub struct DriveFuture<T, E> {
    ready: Option<Result<T, E>>,
    answer: Option<Answer<Result<T, E>>>,
}

impl<T, E> DriveFuture<T, E> {
    pub(super) fn ready(outcome: Result<T, E>) -> Self {
        DriveFuture {
            ready: Some(outcome),
            answer: None,
        }
    }

    pub(super) fn waiting(answer: Answer<Result<T, E>>) -> Self {
        DriveFuture {
            ready: None,
            answer: Some(answer),
        }
    }
}

impl<T: Unpin, E: From<DriveClosed> + Unpin> Future for DriveFuture<T, E> {
    type Output = Result<T, E>;

    fn poll(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Self::Output> {
        if let Some(outcome) = self.ready.take() {
            return Poll::Ready(outcome);
        }
        let Some(answer) = self.answer.as_mut() else {
            panic!("a DriveFuture polled after it completed");
        };
        match Pin::new(answer).poll(context) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(answered) => {
                self.answer = None;
                Poll::Ready(answered.unwrap_or_else(|_| Err(DriveClosed.into())))
            }
        }
    }
}

/// [`Drive::read_async`](crate::Drive::read_async)'s future: the entry's payload alone.
#[must_use = "futures do nothing unless awaited"]
pub struct PayloadFuture {
    pub(super) entry: DriveFuture<LogEntry, ReadError>,
}

impl Future for PayloadFuture {
    type Output = Result<Vec<u8>, ReadError>;

    fn poll(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.entry)
            .poll(context)
            .map(|outcome| outcome.map(|entry| entry.payload))
    }
}

/// Waits for the durable tail to reach an LSN
/// ([`Drive::durable_async`](crate::Drive::durable_async)): the durable tail then, or why it never
/// will (the drive failed or closed).
#[must_use = "futures do nothing unless awaited"]
pub struct DurableFuture {
    pub(super) view: Arc<ReadView>,
    pub(super) lsn: u64,
    pub(super) id: Option<u64>,
}

impl Future for DurableFuture {
    type Output = Result<u64, WaitError>;

    fn poll(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Self::Output> {
        let lsn = self.lsn;
        for registered in [false, true] {
            let durable = self.view.durable_lsn();
            if durable >= lsn {
                if let Some(id) = self.id.take() {
                    self.view.unregister(lsn, id);
                }
                return Poll::Ready(Ok(durable));
            }
            if let Some(stopped) = self.view.stopped() {
                if let Some(id) = self.id.take() {
                    self.view.unregister(lsn, id);
                }
                return Poll::Ready(Err(
                    stopped.map_or_else(WaitError::Closed, WaitError::Failed)
                ));
            }
            if !registered {
                // Registered (or its waker refreshed), then looked at again: an advance between
                // the first look and the registration woke nobody.
                let id = self.id;
                self.id = Some(self.view.register_task(lsn, id, context.waker()));
            }
        }
        Poll::Pending
    }
}

impl Drop for DurableFuture {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            self.view.unregister(self.lsn, id);
        }
    }
}
