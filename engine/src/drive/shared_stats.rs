//! The drive's statistics, readable without crossing its thread ([`crate::Drive::stats`]).
//!
//! The drive thread writes them; any number of readers read them at any time, while the drive
//! thread blocks in the kernel, is busy with a deep queue, or has stopped (a closed or failed
//! drive reports its final figures). Nothing a reader does ever makes the drive thread wait:
//! - counters and queue depths are atomics the drive thread stores with relaxed ordering: the
//!   acknowledgement counters once per batch, before the batch's tickets complete (so a
//!   client that saw its append acknowledged sees it counted), reads served by the drive
//!   thread before each answer goes out, the rest at the end of each of its turns;
//! - histograms are a snapshot behind a mutex that the drive thread refreshes at most every
//!   [`HISTOGRAM_PUBLISH_INTERVAL`] while it is busy, and whenever it is about to block with
//!   something new recorded, each time only if `try_lock` succeeds (a reader holds the lock
//!   only to clone the snapshot). A reader's histograms are therefore a moment old while the
//!   drive is busy, and complete once it has gone idle or stopped.

use std::ops::AddAssign;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use hdrhistogram::Histogram;

use super::stats::QueueDepths;

/// The longest a busy drive leaves its published histograms stale.
pub(crate) const HISTOGRAM_PUBLISH_INTERVAL: Duration = Duration::from_millis(100);

/// What the drive thread publishes for [`crate::Drive::stats`].
#[derive(Debug, Default)]
pub(crate) struct SharedStats {
    pub(crate) appends: AtomicU64,
    pub(crate) payload_bytes: AtomicU64,
    pub(crate) batches: AtomicU64,
    pub(crate) tail_markers: AtomicU64,
    /// Reads the drive thread served: shared with the core's own count ([`SharedCount`]).
    pub(crate) reads: Arc<AtomicU64>,
    pub(crate) lsn_covered: AtomicU64,
    pub(crate) hint_waits: AtomicU64,
    pub(crate) hint_writes: AtomicU64,
    pub(crate) appends_queued: AtomicU64,
    pub(crate) batches_in_flight: AtomicU64,
    pub(crate) reads_waiting: AtomicU64,
    pub(crate) reads_in_flight: AtomicU64,
    pub(crate) trims_waiting: AtomicU64,
    pub(crate) trim_in_flight: AtomicBool,
    histograms: Mutex<Histograms>,
}

/// The drive thread's histograms, as last published.
#[derive(Clone, Debug)]
pub(crate) struct Histograms {
    pub(crate) batch_entries: Histogram<u64>,
    pub(crate) sync_latency_us: Histogram<u64>,
    pub(crate) idle_gap_us: Histogram<u64>,
    pub(crate) enqueue_to_submit_us: Histogram<u64>,
}

impl Default for Histograms {
    fn default() -> Histograms {
        let empty = || Histogram::new(3).expect("3 significant figures is a valid precision");
        Histograms {
            batch_entries: empty(),
            sync_latency_us: empty(),
            idle_gap_us: empty(),
            enqueue_to_submit_us: empty(),
        }
    }
}

/// The drive thread's own histograms, borrowed for a publication.
pub(crate) struct HistogramSources<'a> {
    pub(crate) batch_entries: &'a Histogram<u64>,
    pub(crate) sync_latency_us: &'a Histogram<u64>,
    pub(crate) idle_gap_us: &'a Histogram<u64>,
    pub(crate) enqueue_to_submit_us: &'a Histogram<u64>,
}

impl HistogramSources<'_> {
    /// Samples recorded in all of them: the drive publishes only when this moved.
    pub(crate) fn recorded(&self) -> u64 {
        self.batch_entries.len()
            + self.sync_latency_us.len()
            + self.idle_gap_us.len()
            + self.enqueue_to_submit_us.len()
    }
}

/// Adds `amount` to a counter only one thread writes (no read-modify-write instruction).
pub(crate) fn add(counter: &AtomicU64, amount: u64) {
    counter.store(counter.load(Ordering::Relaxed) + amount, Ordering::Relaxed);
}

/// Stores a value for readers.
pub(crate) fn set(counter: &AtomicU64, value: u64) {
    counter.store(value, Ordering::Relaxed);
}

/// Reads a counter the drive thread stores.
pub(crate) fn get(counter: &AtomicU64) -> u64 {
    counter.load(Ordering::Relaxed)
}

impl SharedStats {
    /// Copies `sources` into the published snapshot, unless a reader holds it now (then the
    /// drive tries again later). Copying into the snapshot's own histograms (reset, then add)
    /// allocates only when a histogram's range grows, which settles after the first seconds.
    pub(crate) fn try_publish_histograms(&self, sources: &HistogramSources<'_>) -> bool {
        match self.histograms.try_lock() {
            Ok(mut published) => {
                copy_histograms(&mut published, sources);
                true
            }
            Err(std::sync::TryLockError::Poisoned(poisoned)) => {
                copy_histograms(&mut poisoned.into_inner(), sources);
                true
            }
            Err(std::sync::TryLockError::WouldBlock) => false,
        }
    }

    /// The last publication, when the drive stops: waits for a reader's clone to finish.
    pub(crate) fn publish_histograms(&self, sources: &HistogramSources<'_>) {
        copy_histograms(&mut self.lock_histograms(), sources);
    }

    /// The published histograms, locked (a poisoned lock is taken over: they are plain data).
    pub(crate) fn lock_histograms(&self) -> MutexGuard<'_, Histograms> {
        self.histograms
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The queue depths as the drive thread last stored them.
    pub(crate) fn queues(&self) -> QueueDepths {
        QueueDepths {
            appends_queued: get(&self.appends_queued) as usize,
            batches_in_flight: get(&self.batches_in_flight) as usize,
            reads_waiting: get(&self.reads_waiting) as usize,
            reads_in_flight: get(&self.reads_in_flight) as usize,
            trims_waiting: get(&self.trims_waiting) as usize,
            trim_in_flight: self.trim_in_flight.load(Ordering::Relaxed),
        }
    }
}

fn copy_histograms(published: &mut Histograms, sources: &HistogramSources<'_>) {
    let pairs = [
        (&mut published.batch_entries, sources.batch_entries),
        (&mut published.sync_latency_us, sources.sync_latency_us),
        (&mut published.idle_gap_us, sources.idle_gap_us),
        (
            &mut published.enqueue_to_submit_us,
            sources.enqueue_to_submit_us,
        ),
    ];
    for (target, source) in pairs {
        target.reset();
        // Both auto-resize, so adding never fails; were it to, the snapshot stays empty.
        let _ = target.add(source);
    }
}

/// A count the drive thread keeps as a plain number that readers see at once: each addition
/// is stored in the shared atomic too (relaxed, no read-modify-write: one thread writes).
#[derive(Debug, Default)]
pub(crate) struct SharedCount(Arc<AtomicU64>);

impl SharedCount {
    /// A count written through to `shared`.
    pub(crate) fn new(shared: &Arc<AtomicU64>) -> SharedCount {
        SharedCount(Arc::clone(shared))
    }

    /// Its value.
    pub(crate) fn get(&self) -> u64 {
        get(&self.0)
    }
}

impl AddAssign<u64> for SharedCount {
    fn add_assign(&mut self, amount: u64) {
        add(&self.0, amount);
    }
}
