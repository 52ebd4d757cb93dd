//! The drive's clock: where its state machine reads the time, for group commit's gathering
//! window, the tail marker's idle timer, the deadlines of appends waiting for room
//! (`WhenFull::Wait`) and the latencies in its statistics. The drive thread reads the system's
//! monotonic clock ([`SystemClock`]); a core stepped by hand can be given a [`ManualClock`],
//! which moves only when its owner advances it, so a test or a simulation runs the timers and
//! a seed still replays exactly. The state machine never calls `Instant::now` itself; how long
//! the drive thread spins or sleeps while it waits is real time, and not this module's.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Where the drive's state machine reads the time. Monotonic: `now` never goes back.
pub trait Clock: Send {
    /// The time now, on this clock.
    fn now(&self) -> Instant;
}

/// The system's monotonic clock: the drive thread's.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// A clock that stands still until it is advanced: a test or a simulation steps a core with
/// it and decides when time passes. Clones share one time, so the owner keeps a clone and
/// hands the core another.
#[derive(Clone, Debug)]
pub struct ManualClock {
    /// Where it started: a system instant taken once (an `Instant` has no zero), so that
    /// every reading is a plain `Instant` and only differences between readings matter.
    origin: Instant,
    /// Nanoseconds it was advanced by since then.
    advanced_ns: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock at its origin.
    pub fn new() -> ManualClock {
        ManualClock {
            origin: Instant::now(),
            advanced_ns: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Moves the clock forward by `by` (for every clone). Time up to 584 years is counted;
    /// past that the clock stops at its end rather than wrap.
    pub fn advance(&self, by: Duration) {
        let by_ns = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        let _ = self
            .advanced_ns
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |advanced| {
                Some(advanced.saturating_add(by_ns))
            });
    }

    /// How far it was advanced since its origin.
    pub fn elapsed(&self) -> Duration {
        Duration::from_nanos(self.advanced_ns.load(Ordering::SeqCst))
    }
}

impl Default for ManualClock {
    fn default() -> ManualClock {
        ManualClock::new()
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        self.origin + self.elapsed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_only_when_advanced_and_its_clones_share_it() {
        let clock = ManualClock::new();
        let shared = clock.clone();
        let start = clock.now();
        std::thread::sleep(Duration::from_millis(2));
        assert_eq!(clock.now(), start, "real time does not move it");
        shared.advance(Duration::from_micros(150));
        assert_eq!(clock.now(), start + Duration::from_micros(150));
        assert_eq!(clock.elapsed(), Duration::from_micros(150));
    }

    #[test]
    fn the_system_clock_is_monotonic() {
        let first = SystemClock.now();
        assert!(SystemClock.now() >= first);
    }
}
