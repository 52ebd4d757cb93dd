//! Asking children and gathering their answers in the order they come ([`Ask`]): an
//! operation is sent to the first children of a preferred order when the [`Ask`] is made
//! (operations are issued when called), and to more of them when one of those answers
//! something that does not count (an error, a damaged slot) or when the hedging delay
//! passes with answers still missing. Gathering stops as soon as the caller's rule says the
//! answers are enough; the futures still in flight are then swept once for answers already
//! there and dropped (an issued operation goes on, see `logdrive/src/api.rs`).

use std::collections::VecDeque;
use std::future::poll_fn;
use std::sync::Arc;
use std::task::Poll;

use super::shared::Shared;
use crate::api::{LogDrive, LogDriveError, OpFuture};
use crate::clock::Sleep;

/// One child's answer: its index and its outcome.
pub(crate) type Answer<T> = (usize, Result<T, LogDriveError>);

/// How an operation is issued on one child.
type Issue<T> = Box<dyn Fn(&dyn LogDrive) -> OpFuture<T> + Send + Sync>;

/// An operation sent to some children, with the others waiting to be asked: see the module
/// doc.
pub(crate) struct Ask<T> {
    shared: Arc<Shared>,
    issue: Issue<T>,
    in_flight: Vec<(usize, OpFuture<T>)>,
    untried: VecDeque<usize>,
    hedge: Option<Sleep>,
}

/// What came first while waiting.
enum Next<T> {
    Answer(Answer<T>),
    Hedge,
}

impl<T: Send + 'static> Ask<T> {
    /// Sends the operation to the first `first` of `candidates` (all of them when the
    /// quorum does not hedge), now.
    pub(crate) fn start(
        shared: &Arc<Shared>,
        candidates: Vec<usize>,
        first: usize,
        issue: impl Fn(&dyn LogDrive) -> OpFuture<T> + Send + Sync + 'static,
    ) -> Ask<T> {
        let hedge_after = shared.options.hedge_after;
        let first = if hedge_after.is_some() {
            first
        } else {
            candidates.len()
        };
        let hedge = hedge_after
            .filter(|_| first < candidates.len())
            .map(|delay| shared.options.clock.sleep(delay));
        let mut ask = Ask {
            shared: Arc::clone(shared),
            issue: Box::new(issue),
            in_flight: Vec::with_capacity(candidates.len()),
            untried: candidates.into(),
            hedge,
        };
        for _ in 0..first {
            ask.ask_one_more();
        }
        ask
    }

    /// How many children are asked or will be (the candidates).
    pub(crate) fn asked(&self) -> usize {
        self.in_flight.len() + self.untried.len()
    }

    /// Sends the operation to the next child not asked yet; false when there is none.
    fn ask_one_more(&mut self) -> bool {
        let Some(child) = self.untried.pop_front() else {
            return false;
        };
        let future = (self.issue)(self.shared.children[child].as_ref());
        self.in_flight.push((child, future));
        true
    }

    /// Gathers answers until `enough` says the answers so far suffice, or no child is left
    /// to answer. An answer that does not `count` makes one more child be asked. Returns
    /// every answer received, in the order received.
    pub(crate) async fn gather(
        mut self,
        counts: impl Fn(&Result<T, LogDriveError>) -> bool,
        enough: impl Fn(&[Answer<T>]) -> bool,
    ) -> Vec<Answer<T>> {
        let mut answers = Vec::new();
        while !enough(&answers) {
            if self.in_flight.is_empty() && !self.ask_one_more() {
                break;
            }
            match self.next().await {
                Next::Hedge => {
                    self.hedge = None;
                    while self.ask_one_more() {}
                }
                Next::Answer(answer) => {
                    if !counts(&answer.1) {
                        self.ask_one_more();
                    }
                    answers.push(answer);
                }
            }
        }
        answers.extend(self.sweep().await);
        answers
    }

    /// The first answer of a child in flight, or the hedging delay passing.
    async fn next(&mut self) -> Next<T> {
        poll_fn(|context| {
            for index in 0..self.in_flight.len() {
                if let Poll::Ready(outcome) = self.in_flight[index].1.as_mut().poll(context) {
                    let (child, _) = self.in_flight.swap_remove(index);
                    return Poll::Ready(Next::Answer((child, outcome)));
                }
            }
            match self
                .hedge
                .as_mut()
                .map(|sleep| sleep.as_mut().poll(context))
            {
                Some(Poll::Ready(())) => Poll::Ready(Next::Hedge),
                _ => Poll::Pending,
            }
        })
        .await
    }

    /// The answers already there among the futures in flight, without waiting.
    async fn sweep(&mut self) -> Vec<Answer<T>> {
        poll_fn(|context| {
            let mut ready = Vec::new();
            for (child, future) in &mut self.in_flight {
                if let Poll::Ready(outcome) = future.as_mut().poll(context) {
                    ready.push((*child, outcome));
                }
            }
            Poll::Ready(ready)
        })
        .await
    }
}

/// How many answers are `Ok`.
pub(crate) fn oks<T>(answers: &[Answer<T>]) -> usize {
    answers
        .iter()
        .filter(|(_, outcome)| outcome.is_ok())
        .count()
}

/// How many answers are errors.
pub(crate) fn errors<T>(answers: &[Answer<T>]) -> usize {
    answers.len() - oks(answers)
}
