//! The background scrub of a [`QuorumLogDrive`] (docs/composition.md, "Scrub"): one thread
//! per [`Scrubber`] that
//! walks every child of a quorum in turn over the range it has written (from its trim point
//! to its N), at the scrub's pace, repairs what it finds damaged or missing from the peers,
//! rests, and starts again, until it is stopped or dropped. A child that cannot be asked
//! (down, or its store closed) is counted and skipped for the pass. Its figures add up
//! across passes; the per-slot counters are the scrub's own metrics.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::quorum::{QuorumLogDrive, ScrubPace, ScrubStats};
use crate::wait::wait;

/// What a scrubber did so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScrubberFigures {
    /// Passes over every child finished.
    pub passes: u64,
    /// The slots checked, repaired and unrepairable, over every pass.
    pub slots: ScrubStats,
    /// Children skipped in a pass because they could not be asked.
    pub children_skipped: u64,
}

/// A background scrub of one quorum: see the module doc. Dropping it stops it.
pub struct Scrubber {
    stop: Arc<AtomicBool>,
    figures: Arc<Mutex<ScrubberFigures>>,
    thread: Option<JoinHandle<()>>,
}

impl Scrubber {
    /// Starts scrubbing `quorum` at `pace`, resting `rest` between passes.
    pub fn start(quorum: Arc<QuorumLogDrive>, pace: ScrubPace, rest: Duration) -> Scrubber {
        let stop = Arc::new(AtomicBool::new(false));
        let figures = Arc::new(Mutex::new(ScrubberFigures::default()));
        let thread = {
            let (stop, figures) = (stop.clone(), figures.clone());
            std::thread::Builder::new()
                .name("sealog-scrub".into())
                .spawn(move || run(&quorum, pace, rest, &stop, &figures))
                .expect("the scrub thread starts")
        };
        Scrubber {
            stop,
            figures,
            thread: Some(thread),
        }
    }

    /// The figures so far.
    pub fn figures(&self) -> ScrubberFigures {
        *self.figures.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Stops the scrub after the slot it is on, and waits for its thread.
    pub fn stop(mut self) -> ScrubberFigures {
        self.halt();
        self.figures()
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            // A panic on the scrub thread is already reported there.
            let _ = thread.join();
        }
    }
}

impl Drop for Scrubber {
    fn drop(&mut self) {
        self.halt();
    }
}

/// The scrub thread: passes until stopped.
fn run(
    quorum: &QuorumLogDrive,
    pace: ScrubPace,
    rest: Duration,
    stop: &AtomicBool,
    figures: &Mutex<ScrubberFigures>,
) {
    // Slots a step at most, so that a stop is seen within one step.
    let pace = ScrubPace {
        slots_per_step: pace.slots_per_step.max(1),
        ..pace
    };
    while !stop.load(Ordering::Acquire) {
        for child in 0..quorum.replicas() {
            let outcome = scrub_child(quorum, child, pace, stop);
            let mut figures = figures.lock().unwrap_or_else(|p| p.into_inner());
            match outcome {
                Some(slots) => {
                    figures.slots.checked += slots.checked;
                    figures.slots.repaired += slots.repaired;
                    figures.slots.unrepairable += slots.unrepairable;
                }
                None => figures.children_skipped += 1,
            }
        }
        figures.lock().unwrap_or_else(|p| p.into_inner()).passes += 1;
        let mut rested = Duration::ZERO;
        while rested < rest && !stop.load(Ordering::Acquire) {
            let nap = (rest - rested).min(Duration::from_millis(10));
            std::thread::sleep(nap);
            rested += nap;
        }
    }
}

/// One child's written range, a step at a time: its figures, `None` if it could not be
/// asked.
fn scrub_child(
    quorum: &QuorumLogDrive,
    child: usize,
    pace: ScrubPace,
    stop: &AtomicBool,
) -> Option<ScrubStats> {
    let length = wait(quorum.child(child)?.length()).ok()?;
    let mut total = ScrubStats::default();
    let mut from = length.first;
    while from < length.n && !stop.load(Ordering::Acquire) {
        let to = (from + pace.slots_per_step).min(length.n);
        let step = wait(quorum.scrub(child, from..to, pace)).ok()?;
        total.checked += step.checked;
        total.repaired += step.repaired;
        total.unrepairable += step.unrepairable;
        from = to;
        wait(quorum.clock().sleep(pace.pause));
    }
    Some(total)
}
