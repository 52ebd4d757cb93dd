//! Seal-bit reads shared by the appends that complete together (docs/composition.md, "The
//! AtomicLog"). An append must read the seal bit after its slot completed, but not alone: a
//! read that *starts* after its completion answers for it as well as for any other append
//! completed by then. So the appends that complete while a read is under way wait for the
//! next one, which one of them starts when the first ends, and all of them take its answer:
//! at 256 appends in flight one read serves a flush's worth of completions instead of one
//! each.
//!
//! Reads are numbered as they start. An append that finds a read under way takes the number
//! of the next; it is answered by the first read finished whose number is at least that. The
//! append that starts a read leads it; if its future is dropped mid-read, the others are
//! woken and one of them starts the read again.

use std::collections::BTreeMap;
use std::future::{poll_fn, Future};
use std::sync::{Mutex, MutexGuard};
use std::task::{Poll, Waker};

use crate::error::LogError;

/// The shared reads: see the module doc.
#[derive(Default)]
pub(crate) struct SealReads {
    state: Mutex<ReadsState>,
}

#[derive(Default)]
struct ReadsState {
    /// Reads started so far (the number of the newest).
    started: u64,
    /// Whether one is under way.
    running: bool,
    /// The newest read finished: its number and its answer.
    finished: u64,
    answer: Option<Result<bool, LogError>>,
    /// Appends waiting for a read, by a number of their own.
    waiters: BTreeMap<u64, Waker>,
    next_waiter: u64,
}

/// What an append found when it looked.
enum Turn {
    /// A read that started after it looked first has answered.
    Answered(Result<bool, LogError>),
    /// It starts read number `.0` itself.
    Lead(u64),
}

impl SealReads {
    fn lock(&self) -> MutexGuard<'_, ReadsState> {
        // Every change is one step under the lock; a panic elsewhere leaves it whole.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The seal bit as a read started after this call finds it: `read` is the read, run
    /// by this caller if no other read can answer.
    pub(crate) async fn check<F>(&self, read: impl FnOnce() -> F) -> Result<bool, LogError>
    where
        F: Future<Output = Result<bool, LogError>>,
    {
        match self.turn().await {
            Turn::Answered(answer) => answer,
            Turn::Lead(number) => {
                let mut lead = Lead {
                    reads: self,
                    number,
                    done: false,
                };
                let answer = read().await;
                lead.finish(answer.clone());
                answer
            }
        }
    }

    /// Waits for an answer from a read started after the first look, or for the turn to
    /// lead one.
    async fn turn(&self) -> Turn {
        // The number of the first read that starts after this look, and the waiter's id.
        let mut ticket: Option<(u64, u64)> = None;
        poll_fn(|cx| {
            let mut state = self.lock();
            if let Some((number, id)) = ticket {
                if state.finished >= number {
                    state.waiters.remove(&id);
                    let answer = state.answer.clone().expect("a finished read's answer");
                    return Poll::Ready(Turn::Answered(answer));
                }
                state.waiters.remove(&id);
            }
            if !state.running {
                state.running = true;
                state.started += 1;
                return Poll::Ready(Turn::Lead(state.started));
            }
            let (number, id) = *ticket.get_or_insert_with(|| {
                state.next_waiter += 1;
                (state.started + 1, state.next_waiter)
            });
            debug_assert!(number > state.finished);
            state.waiters.insert(id, cx.waker().clone());
            Poll::Pending
        })
        .await
    }
}

/// The lead of one read: answers the waiters when it finishes, and hands the lead on if it
/// is dropped first.
struct Lead<'a> {
    reads: &'a SealReads,
    number: u64,
    done: bool,
}

impl Lead<'_> {
    fn finish(&mut self, answer: Result<bool, LogError>) {
        let mut state = self.reads.lock();
        state.finished = self.number;
        state.answer = Some(answer);
        self.release(state);
    }

    fn release(&mut self, mut state: MutexGuard<'_, ReadsState>) {
        self.done = true;
        state.running = false;
        let waiters = std::mem::take(&mut state.waiters);
        drop(state);
        waiters.into_values().for_each(Waker::wake);
    }
}

impl Drop for Lead<'_> {
    fn drop(&mut self) {
        if !self.done {
            let state = self.reads.lock();
            self.release(state);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Arc;

    use super::*;
    use sealog_logdrive::{wait, Clock, SystemClock};

    #[test]
    fn appends_that_complete_during_a_read_share_the_next() {
        let reads = Arc::new(SealReads::default());
        let made = Arc::new(AtomicU32::new(0));
        let threads: Vec<_> = (0..16)
            .map(|_| {
                let (reads, made) = (reads.clone(), made.clone());
                std::thread::spawn(move || {
                    wait(reads.check(|| async {
                        made.fetch_add(1, Ordering::SeqCst);
                        SystemClock
                            .sleep(std::time::Duration::from_millis(20))
                            .await;
                        Ok(false)
                    }))
                })
            })
            .collect();
        for thread in threads {
            assert_eq!(thread.join().unwrap(), Ok(false));
        }
        let made = made.load(Ordering::SeqCst);
        assert!((1..=3).contains(&made), "{made} reads for 16 appends");
    }

    #[test]
    fn a_read_started_before_a_look_does_not_answer_it() {
        let reads = SealReads::default();
        // A read under way (number 1), then a look: it must wait for read 2.
        let first = wait(reads.turn());
        assert!(matches!(first, Turn::Lead(1)));
        let mut second = Box::pin(reads.turn());
        let waker = Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        assert!(second.as_mut().poll(&mut cx).is_pending());
        let mut lead = Lead {
            reads: &reads,
            number: 1,
            done: false,
        };
        lead.finish(Ok(false));
        assert!(matches!(
            second.as_mut().poll(&mut cx),
            Poll::Ready(Turn::Lead(2))
        ));
    }
}
