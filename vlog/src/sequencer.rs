//! The AtomicLog's sequencer (docs/composition.md, "The AtomicLog"): soft state that hands
//! out slots and orders their completion. It holds a counter and a window of at most K slots
//! in flight: `acquire` waits while the window is full (the counter has reached T + K, T being
//! the first slot not completed), and `complete(p)` waits until every slot below p completed
//! too, so appends are acknowledged in strict slot order and the LogDrive's N - T never
//! exceeds K, which is what `weak_tail(K)` needs.
//!
//! It sees no payloads and keeps nothing durable: if it fails the log can no longer take
//! appends and is sealed and replaced by a reconfiguration, never rebuilt from the drive. Its
//! memory is bounded by K: the completed slots above T (at most K - 1 of them) and one waker
//! per waiting caller.

use std::collections::{BTreeMap, BTreeSet};
use std::future::poll_fn;
use std::sync::{Mutex, MutexGuard};
use std::task::{Poll, Waker};

use crate::error::LogError;

/// The sequencer: see the module doc.
pub struct Sequencer {
    window: u64,
    state: Mutex<SequencerState>,
}

struct SequencerState {
    /// The next slot to hand out.
    next: u64,
    /// T: the first slot not completed.
    tail: u64,
    /// Completed slots above `tail` (fewer than the window).
    completed: BTreeSet<u64>,
    /// Callers waiting for room in the window, by ticket.
    acquirers: BTreeMap<u64, Waker>,
    /// Callers waiting for lower slots to complete, by their slot.
    completers: BTreeMap<u64, Waker>,
    next_ticket: u64,
    /// Once set, every call fails.
    down: bool,
    /// Once set (the log is sealed), no slot is handed out.
    sealed: bool,
}

impl Sequencer {
    /// A sequencer handing out slots from `first` with a window of `window` slots (at least
    /// one).
    pub fn new(first: u64, window: u64) -> Sequencer {
        Sequencer {
            window: window.max(1),
            state: Mutex::new(SequencerState {
                next: first,
                tail: first,
                completed: BTreeSet::new(),
                acquirers: BTreeMap::new(),
                completers: BTreeMap::new(),
                next_ticket: 0,
                down: false,
                sealed: false,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, SequencerState> {
        // Every change is one step under the lock; a panic elsewhere leaves it whole.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// K, the window.
    pub fn window(&self) -> u64 {
        self.window
    }

    /// T as the sequencer knows it: the first slot not completed. Every slot below it was
    /// written and completed.
    pub fn tail(&self) -> Result<u64, LogError> {
        let state = self.lock();
        if state.down {
            return Err(LogError::SequencerDown);
        }
        Ok(state.tail)
    }

    /// Hands out the next slot, waiting while K slots are in flight.
    pub async fn acquire(&self) -> Result<u64, LogError> {
        self.acquire_many(1).await.map(|slots| slots.start)
    }

    /// Hands out up to `count` slots, in order: at least one (waiting while K slots are in
    /// flight), and as many more as the window has room for then. Several appends' slots in
    /// one call, for a sequencer in another process.
    pub async fn acquire_many(&self, count: u64) -> Result<std::ops::Range<u64>, LogError> {
        let mut ticket = None;
        poll_fn(|cx| {
            let mut state = self.lock();
            if state.down {
                return Poll::Ready(Err(LogError::SequencerDown));
            }
            if state.sealed {
                return Poll::Ready(Err(LogError::Sealed {
                    position: None,
                    written: false,
                }));
            }
            let room = (state.tail + self.window).saturating_sub(state.next);
            if room > 0 {
                if let Some(ticket) = ticket.take() {
                    state.acquirers.remove(&ticket);
                }
                let first = state.next;
                state.next += count.clamp(1, room);
                return Poll::Ready(Ok(first..state.next));
            }
            let id = *ticket.get_or_insert_with(|| {
                state.next_ticket += 1;
                state.next_ticket
            });
            state.acquirers.insert(id, cx.waker().clone());
            Poll::Pending
        })
        .await
    }

    /// Completes `slot` (its write was acknowledged) and waits until every slot below it is
    /// completed too.
    pub async fn complete(&self, slot: u64) -> Result<(), LogError> {
        if self.mark_completed(slot)? {
            // Every slot below was completed already: the common case in order.
            return Ok(());
        }
        poll_fn(|cx| {
            let mut state = self.lock();
            if state.tail > slot {
                state.completers.remove(&slot);
                return Poll::Ready(Ok(()));
            }
            if state.down {
                return Poll::Ready(Err(LogError::SequencerDown));
            }
            state.completers.insert(slot, cx.waker().clone());
            Poll::Pending
        })
        .await
    }

    /// Completes every slot of `slots` (their writes were acknowledged) and waits until
    /// every slot below the highest of them is completed too: several appends' completions
    /// in one call.
    pub async fn complete_many(&self, slots: &[u64]) -> Result<(), LogError> {
        let Some(&highest) = slots.iter().max() else {
            return Ok(());
        };
        for &slot in slots {
            self.mark_completed(slot)?;
        }
        self.complete(highest).await
    }

    /// Marks `slot` completed and moves T past every completed slot: whether T is now past
    /// `slot` (every slot below it completed too).
    fn mark_completed(&self, slot: u64) -> Result<bool, LogError> {
        let mut state = self.lock();
        if state.down {
            return Err(LogError::SequencerDown);
        }
        if slot < state.tail || slot >= state.next {
            // Completed already, or never handed out: nothing to do.
            return Ok(slot < state.tail);
        }
        let before = state.tail;
        if slot == state.tail {
            state.tail += 1;
        } else {
            state.completed.insert(slot);
        }
        while state.completed.first() == Some(&state.tail) {
            state.completed.pop_first();
            state.tail += 1;
        }
        if state.tail > before {
            self.wake_after_advance(&mut state, before);
        }
        Ok(state.tail > slot)
    }

    /// After T moved from `before`: the completers below the new T return, and every
    /// acquirer looks again. (All of them: one woken alone whose caller dropped its future
    /// would leave room unused while others wait; acquirers wait only when the window is
    /// full, which a window at least the appends in flight never is.)
    fn wake_after_advance(&self, state: &mut SequencerState, before: u64) {
        if before + 1 == state.tail && state.completers.is_empty() && state.acquirers.is_empty() {
            return;
        }
        let waiting = state.completers.split_off(&state.tail);
        let done = std::mem::replace(&mut state.completers, waiting);
        done.into_values().for_each(Waker::wake);
        std::mem::take(&mut state.acquirers)
            .into_values()
            .for_each(Waker::wake);
    }

    /// Hands out no more slots (the log is sealed): waiting and later acquires fail with
    /// `Sealed`, holding no slot. Completions go on.
    pub fn refuse_slots(&self) {
        let mut state = self.lock();
        state.sealed = true;
        std::mem::take(&mut state.acquirers)
            .into_values()
            .for_each(Waker::wake);
    }

    /// The first slot not completed (T), down or not: what a stalled window waits behind.
    pub fn first_incomplete(&self) -> u64 {
        self.lock().tail
    }

    /// Takes the sequencer down, as if its process died: every waiting and later call fails
    /// with [`LogError::SequencerDown`].
    pub fn fail(&self) {
        let mut state = self.lock();
        state.down = true;
        std::mem::take(&mut state.acquirers)
            .into_values()
            .for_each(Waker::wake);
        std::mem::take(&mut state.completers)
            .into_values()
            .for_each(Waker::wake);
    }

    /// Whether the sequencer is down.
    pub fn is_down(&self) -> bool {
        self.lock().down
    }

    /// Slots handed out and not completed, for figures and tests.
    pub fn in_flight(&self) -> u64 {
        let state = self.lock();
        state.next - state.tail - state.completed.len() as u64
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use sealog_logdrive::wait;

    #[test]
    fn many_slots_at_once_take_what_the_window_has_room_for() {
        let sequencer = Arc::new(Sequencer::new(10, 4));
        assert_eq!(wait(sequencer.acquire_many(3)).unwrap(), 10..13);
        // One slot of room left: a call for five gets it, and does not wait for more.
        assert_eq!(wait(sequencer.acquire_many(5)).unwrap(), 13..14);
        // 13 and 11 completed together: the call answers once 10 and 12 are too.
        let batch = {
            let sequencer = sequencer.clone();
            std::thread::spawn(move || wait(sequencer.complete_many(&[13, 11])))
        };
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(!batch.is_finished());
        assert_eq!(sequencer.first_incomplete(), 10);
        wait(sequencer.complete(10)).unwrap();
        assert_eq!(sequencer.first_incomplete(), 12);
        wait(sequencer.complete(12)).unwrap();
        assert_eq!(sequencer.first_incomplete(), 14);
        batch.join().unwrap().unwrap();
        assert_eq!(wait(sequencer.acquire_many(0)).unwrap(), 14..15);
    }

    #[test]
    fn the_fifth_acquire_waits_for_the_first_completion() {
        // AL-1: K = 4 on an empty log.
        let sequencer = Arc::new(Sequencer::new(0, 4));
        for expected in 0..4 {
            assert_eq!(wait(sequencer.acquire()).unwrap(), expected);
        }
        let waiting = {
            let sequencer = sequencer.clone();
            std::thread::spawn(move || wait(sequencer.acquire()))
        };
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(!waiting.is_finished());
        wait(sequencer.complete(0)).unwrap();
        assert_eq!(waiting.join().unwrap().unwrap(), 4);
    }

    #[test]
    fn completions_return_in_slot_order() {
        // AL-2: slots 3, 4 and 5; 4 and 5 complete first and wait for 3.
        let sequencer = Arc::new(Sequencer::new(3, 8));
        for _ in 0..3 {
            wait(sequencer.acquire()).unwrap();
        }
        let later: Vec<_> = [4, 5]
            .into_iter()
            .map(|slot| {
                let sequencer = sequencer.clone();
                std::thread::spawn(move || wait(sequencer.complete(slot)))
            })
            .collect();
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(sequencer.tail().unwrap(), 3);
        assert!(later.iter().all(|thread| !thread.is_finished()));
        wait(sequencer.complete(3)).unwrap();
        for thread in later {
            thread.join().unwrap().unwrap();
        }
        assert_eq!(sequencer.tail().unwrap(), 6);
    }

    #[test]
    fn a_failed_sequencer_releases_its_waiters() {
        let sequencer = Arc::new(Sequencer::new(0, 1));
        wait(sequencer.acquire()).unwrap();
        let waiting = {
            let sequencer = sequencer.clone();
            std::thread::spawn(move || wait(sequencer.acquire()))
        };
        std::thread::sleep(std::time::Duration::from_millis(20));
        sequencer.fail();
        assert_eq!(waiting.join().unwrap(), Err(LogError::SequencerDown));
        assert_eq!(sequencer.tail(), Err(LogError::SequencerDown));
    }
}
