//! [`SimClock`]: the simulation's [`Clock`]. Its time is simulated: it starts at zero and
//! moves only when the simulation moves it, to the earliest sleep's deadline once nothing
//! else can happen, or by a small step the seed chose. A sleep registers a timer, and
//! moving the time wakes every timer it passed. Nothing reads the real time, so a seed
//! replays exactly.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use sealog_logdrive::{Clock, Sleep};

/// The simulated clock: see the module doc. Clones share one time.
#[derive(Clone, Default)]
pub struct SimClock {
    state: Arc<Mutex<ClockState>>,
}

#[derive(Default)]
struct ClockState {
    now: Duration,
    /// Registered timers by (deadline, registration number).
    timers: BTreeMap<(Duration, u64), Waker>,
    registered: u64,
}

impl SimClock {
    /// A clock at time zero with no timers.
    pub fn new() -> SimClock {
        SimClock::default()
    }

    fn lock(&self) -> MutexGuard<'_, ClockState> {
        lock(&self.state)
    }

    /// The earliest deadline of a pending sleep.
    pub fn next_deadline(&self) -> Option<Duration> {
        self.lock()
            .timers
            .keys()
            .next()
            .map(|(deadline, _)| *deadline)
    }

    /// Moves the time to `time` (never back) and wakes every sleep whose deadline passed.
    pub fn advance_to(&self, time: Duration) {
        let woken = {
            let mut state = self.lock();
            state.now = state.now.max(time);
            let now = state.now;
            let later = state.timers.split_off(&(now, u64::MAX));
            std::mem::replace(&mut state.timers, later)
        };
        for waker in woken.into_values() {
            waker.wake();
        }
    }

    /// Moves the time on by `step`.
    pub fn advance(&self, step: Duration) {
        let now = self.now();
        self.advance_to(now + step);
    }
}

fn lock(state: &Mutex<ClockState>) -> MutexGuard<'_, ClockState> {
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Clock for SimClock {
    fn now(&self) -> Duration {
        self.lock().now
    }

    fn sleep(&self, duration: Duration) -> Sleep {
        let deadline = self.now() + duration;
        Box::pin(SimSleep {
            deadline,
            state: Arc::clone(&self.state),
            timer: None,
        })
    }
}

/// A sleep on a [`SimClock`]: its timer is registered on its first pending poll.
struct SimSleep {
    deadline: Duration,
    state: Arc<Mutex<ClockState>>,
    /// Its timer's key, once registered.
    timer: Option<(Duration, u64)>,
}

impl Future for SimSleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<()> {
        let state = Arc::clone(&self.state);
        let mut state = lock(&state);
        if state.now >= self.deadline {
            if let Some(key) = self.timer.take() {
                state.timers.remove(&key);
            }
            return Poll::Ready(());
        }
        let key = match self.timer {
            Some(key) => key,
            None => {
                state.registered += 1;
                (self.deadline, state.registered)
            }
        };
        state.timers.insert(key, context.waker().clone());
        self.timer = Some(key);
        Poll::Pending
    }
}

impl Drop for SimSleep {
    fn drop(&mut self) {
        if let Some(key) = self.timer.take() {
            lock(&self.state).timers.remove(&key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replicated::executor::Executor;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;
    use std::cell::RefCell;
    use std::rc::Rc;

    #[test]
    fn sleeps_end_in_deadline_order_as_the_simulation_moves_time() {
        let clock = SimClock::new();
        let mut executor = Executor::new();
        let woke = Rc::new(RefCell::new(Vec::new()));
        for millis in [30u64, 10, 20] {
            let (clock, woke) = (clock.clone(), Rc::clone(&woke));
            executor.spawn(async move {
                clock.sleep(Duration::from_millis(millis)).await;
                woke.borrow_mut().push((millis, clock.now()));
            });
        }
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        while executor.unfinished() > 0 {
            if !executor.poll_one(&mut rng) {
                clock.advance_to(clock.next_deadline().expect("a sleep is pending"));
            }
        }
        let expected: Vec<_> = [10u64, 20, 30]
            .iter()
            .map(|millis| (*millis, Duration::from_millis(*millis)))
            .collect();
        assert_eq!(*woke.borrow(), expected);
        assert_eq!(clock.next_deadline(), None);
    }
}
