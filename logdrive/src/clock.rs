//! Time for the compositions: [`Clock`], what a quorum's hedging and an AtomicLog's retries
//! and deadlines read the time from and sleep on, and [`SystemClock`], the real one. A
//! simulation passes a clock of its own that moves only when the simulation moves it, so that
//! a seed replays exactly; nothing above the LogDrive reads `Instant::now()` itself.
//!
//! [`SystemClock`] serves every sleep of the process from one timer thread, started on the
//! first sleep: an ordered map of deadlines and wakers. Sleeps are many (an AtomicLog's
//! deadline per append in flight) and almost never fire, so a registration costs a map
//! insert and no wakeup of the timer thread unless it is the new earliest deadline, and a
//! sleep dropped before its deadline takes itself out. No async runtime is needed.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// A sleep: ready once the clock has passed its deadline.
pub type Sleep = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// Where a composition reads the time and sleeps.
pub trait Clock: Send + Sync {
    /// The time since the clock's origin.
    fn now(&self) -> Duration;

    /// A future ready once `duration` has passed from now.
    fn sleep(&self, duration: Duration) -> Sleep;
}

/// The real clock: `Instant` time, sleeps served by the process's timer thread.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

/// The origin every [`SystemClock`] counts from (the first reading of the process).
fn origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

impl Clock for SystemClock {
    fn now(&self) -> Duration {
        origin().elapsed()
    }

    fn sleep(&self, duration: Duration) -> Sleep {
        Box::pin(TimerSleep {
            deadline: Instant::now() + duration,
            key: None,
        })
    }
}

/// A sleep on the timer thread: registered on its first pending poll, its waker replaced
/// in place on later polls, and taken out of the timer when dropped, so that the timer
/// holds only the sleeps still awaited (an AtomicLog's slot deadline is one per append in
/// flight, and almost never fires).
struct TimerSleep {
    deadline: Instant,
    /// Its key in the timer, once registered.
    key: Option<Key>,
}

/// A registration: its deadline, then a number that tells equal deadlines apart.
type Key = (Instant, u64);

impl Future for TimerSleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if Instant::now() >= self.deadline {
            return Poll::Ready(());
        }
        let timer = timer();
        let mut state = timer.lock();
        match self.key {
            Some(key) => match state.entries.get_mut(&key) {
                Some(waker) => waker.clone_from(cx.waker()),
                // The timer took it out: the deadline passed.
                None => return Poll::Ready(()),
            },
            None => {
                state.registered += 1;
                let key = (self.deadline, state.registered);
                state.entries.insert(key, cx.waker().clone());
                self.key = Some(key);
                // Only a new earliest deadline changes how long the timer thread waits.
                if state
                    .entries
                    .first_key_value()
                    .is_some_and(|(first, _)| *first == key)
                {
                    timer.changed.notify_one();
                }
            }
        }
        Poll::Pending
    }
}

impl Drop for TimerSleep {
    fn drop(&mut self) {
        if let Some(key) = self.key {
            timer().lock().entries.remove(&key);
        }
    }
}

/// The timer thread's sleeps, earliest deadline first.
struct Timer {
    state: Mutex<TimerState>,
    changed: Condvar,
}

#[derive(Default)]
struct TimerState {
    entries: BTreeMap<Key, Waker>,
    /// Registrations so far (the second half of each key).
    registered: u64,
}

/// The process's timer, its thread started on first use.
fn timer() -> &'static Timer {
    static TIMER: OnceLock<&'static Timer> = OnceLock::new();
    TIMER.get_or_init(|| {
        let timer: &'static Timer = Box::leak(Box::new(Timer {
            state: Mutex::new(TimerState::default()),
            changed: Condvar::new(),
        }));
        std::thread::Builder::new()
            .name("sealog-timer".into())
            .spawn(move || timer.run())
            .expect("the timer thread starts");
        timer
    })
}

impl Timer {
    fn lock(&self) -> MutexGuard<'_, TimerState> {
        // Every change is one step under the lock; a panic elsewhere leaves it whole.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Wakes every sleep whose deadline passed, then waits for the next deadline or a new
    /// earliest one.
    fn run(&self) {
        let mut state = self.lock();
        loop {
            let now = Instant::now();
            let later = state.entries.split_off(&(now, u64::MAX));
            let due = std::mem::replace(&mut state.entries, later);
            if !due.is_empty() {
                drop(state);
                due.into_values().for_each(Waker::wake);
                state = self.lock();
                continue;
            }
            state = match state.entries.first_key_value() {
                Some(((deadline, _), _)) => {
                    let timeout = deadline.saturating_duration_since(now);
                    self.changed
                        .wait_timeout(state, timeout)
                        .unwrap_or_else(|p| p.into_inner())
                        .0
                }
                None => self.changed.wait(state).unwrap_or_else(|p| p.into_inner()),
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wait;

    #[test]
    fn a_sleep_lasts_at_least_its_duration() {
        let clock = SystemClock;
        let before = clock.now();
        wait(clock.sleep(Duration::from_millis(20)));
        assert!(clock.now() - before >= Duration::from_millis(20));
    }

    #[test]
    fn many_sleeps_wake_in_any_order_of_registration() {
        let clock = SystemClock;
        let threads: Vec<_> = (0..8u64)
            .map(|i| {
                std::thread::spawn(move || wait(clock.sleep(Duration::from_millis(40 - i * 5))))
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
    }
}
