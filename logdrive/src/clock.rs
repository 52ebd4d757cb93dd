//! Time for the compositions: [`Clock`], what a quorum's hedging and an AtomicLog's retries
//! and deadlines read the time from and sleep on, and [`SystemClock`], the real one. A
//! simulation passes a clock of its own that moves only when the simulation moves it, so that
//! a seed replays exactly; nothing above the LogDrive reads `Instant::now()` itself.
//!
//! [`SystemClock`] serves every sleep of the process from one timer thread, started on the
//! first sleep: a heap of deadlines and wakers. A composition sleeps rarely (a hedge after a
//! lagging child, a retry after a failed write), so one thread is enough and no async runtime
//! is needed.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
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
        let deadline = Instant::now() + duration;
        Box::pin(TimerSleep {
            deadline,
            fired: None,
        })
    }
}

/// A sleep on the timer thread: registered with its waker on its first pending poll.
struct TimerSleep {
    deadline: Instant,
    /// Set by the timer thread once the deadline passed (after registration).
    fired: Option<Arc<AtomicBool>>,
}

impl Future for TimerSleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if Instant::now() >= self.deadline
            || self
                .fired
                .as_ref()
                .is_some_and(|fired| fired.load(Ordering::Acquire))
        {
            return Poll::Ready(());
        }
        // Registered again on every pending poll, with the newest waker; a stale entry
        // only wakes a task once too often.
        let fired = Arc::new(AtomicBool::new(false));
        timer().register(self.deadline, cx.waker().clone(), fired.clone());
        self.fired = Some(fired);
        Poll::Pending
    }
}

/// The timer thread's queue: deadlines, earliest first.
struct Timer {
    queue: Mutex<BinaryHeap<Reverse<Entry>>>,
    changed: Condvar,
}

struct Entry {
    deadline: Instant,
    waker: Waker,
    fired: Arc<AtomicBool>,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.deadline == other.deadline
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.deadline.cmp(&other.deadline)
    }
}

/// The process's timer, its thread started on first use.
fn timer() -> &'static Timer {
    static TIMER: OnceLock<&'static Timer> = OnceLock::new();
    TIMER.get_or_init(|| {
        let timer: &'static Timer = Box::leak(Box::new(Timer {
            queue: Mutex::new(BinaryHeap::new()),
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
    fn register(&self, deadline: Instant, waker: Waker, fired: Arc<AtomicBool>) {
        let mut queue = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        queue.push(Reverse(Entry {
            deadline,
            waker,
            fired,
        }));
        self.changed.notify_one();
    }

    /// Wakes every sleep whose deadline passed, then waits for the next deadline or a new
    /// registration.
    fn run(&self) {
        let mut queue = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            let now = Instant::now();
            while queue
                .peek()
                .is_some_and(|Reverse(entry)| entry.deadline <= now)
            {
                let Some(Reverse(entry)) = queue.pop() else {
                    break;
                };
                entry.fired.store(true, Ordering::Release);
                entry.waker.wake();
            }
            queue = match queue.peek() {
                Some(Reverse(entry)) => {
                    let timeout = entry.deadline.saturating_duration_since(now);
                    self.changed
                        .wait_timeout(queue, timeout)
                        .unwrap_or_else(|p| p.into_inner())
                        .0
                }
                None => self.changed.wait(queue).unwrap_or_else(|p| p.into_inner()),
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
