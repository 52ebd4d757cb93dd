//! The store the LogDrive crash tests and simulations run: a [`LogDriveStore`] opened on the
//! simulated drive with its writes and flushes traced, on the small rings the workloads lap,
//! and the journal that marks each operation in the trace.
//!
//! [`LogDriveStore`]: sealog_logdrive::LogDriveStore

use std::path::Path;
use std::sync::{Arc, Mutex};

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use sealog::DriveOptions;
use sealog_logdrive::{LogDriveStore, ReclaimPolicy, StoreOpenError, StoreOptions};
use sealog_wal::Geometry;

use super::workload::{Journal, Outcome};
use crate::device::{FaultConfig, FaultCounts, SimDevice};
use crate::trace::{Event, Trace};

/// A small ring that the workloads lap: 2 to 3 MiB in 256 KiB segments, batches of 32 or
/// 64 KiB, two to four in flight.
pub fn ring_geometry(rng: &mut ChaCha8Rng) -> Geometry {
    let block = 4096u32;
    let batch = if rng.gen_bool(0.5) {
        32 << 10
    } else {
        64 << 10
    };
    let window = rng.gen_range(2..=4u32);
    Geometry {
        block_size_bytes: block,
        segment_size_bytes: 256 << 10,
        segment_count: rng.gen_range(8..=12),
        batch_size_max_bytes: batch,
        window_batches_max: window,
        window_bytes_max: u64::from(window * batch),
    }
}

/// The reclaimer run by hand, relocating whenever a segment's worth is garbage.
pub fn by_hand() -> ReclaimPolicy {
    ReclaimPolicy::default()
        .background(false)
        .space_amplification_max(1.0)
        .bandwidth_share(1.0)
}

/// A store opened on a simulated drive, and what its device leaves behind.
pub struct SimStore {
    /// The store, or why it did not open.
    pub store: Result<LogDriveStore, StoreOpenError>,
    /// Where the device leaves its image when the store's drive is dropped.
    pub image: Arc<Mutex<Option<Vec<u8>>>>,
    /// The faults its device injected.
    pub counts: Arc<Mutex<Option<Arc<Mutex<FaultCounts>>>>>,
}

impl SimStore {
    /// The faults the device injected so far.
    pub fn counts(&self) -> FaultCounts {
        let slot = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        slot.as_ref()
            .map(|counts| *counts.lock().unwrap_or_else(|p| p.into_inner()))
            .unwrap_or_default()
    }

    /// The image the device left (once the store is closed and dropped).
    pub fn take_image(&self) -> Option<Vec<u8>> {
        self.image.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

/// Opens a store on a simulated drive holding `image`, recording into `trace` if given.
pub fn open_sim_store(
    image: Vec<u8>,
    geometry: Geometry,
    faults: FaultConfig,
    seed: u64,
    trace: Option<Arc<Trace>>,
    options: DriveOptions,
) -> SimStore {
    let sink = Arc::new(Mutex::new(None));
    let counts = Arc::new(Mutex::new(None));
    let device_sink = Arc::clone(&sink);
    let device_counts = Arc::clone(&counts);
    // The simulations step one thread: a record that found no room is refused at once
    // rather than parked for a reclaimer that only this thread would run.
    let options = StoreOptions::default()
        .drive(options)
        .reclaim(by_hand())
        .full_wait(std::time::Duration::ZERO)
        .control_wait(std::time::Duration::ZERO);
    let store = LogDriveStore::open_with_backend(
        Path::new("logdrive-crash"),
        geometry,
        options,
        move || {
            let mut device = SimDevice::for_ring(image, &geometry, faults, seed)?;
            device.leave_image_on_drop(device_sink);
            *device_counts.lock().unwrap_or_else(|p| p.into_inner()) = Some(device.counts_handle());
            if let Some(trace) = trace {
                device.record_into(trace);
            }
            Ok(device)
        },
    );
    SimStore {
        store,
        image: sink,
        counts,
    }
}

/// A journal that marks each operation in a device's trace: its index there when issued and
/// when done.
pub struct TraceJournal {
    trace: Arc<Trace>,
    /// Per operation: the trace index of its "issued" mark, and of its "done" mark.
    pub marks: Vec<(usize, Option<usize>)>,
    /// Per operation: acknowledged (not failed).
    pub acknowledged: Vec<bool>,
}

impl TraceJournal {
    /// A journal marking into `trace`.
    pub fn new(trace: Arc<Trace>) -> TraceJournal {
        TraceJournal {
            trace,
            marks: Vec::new(),
            acknowledged: Vec::new(),
        }
    }

    /// What operation `index` was at a crash after the first `cut` events of the trace.
    pub fn status(&self, index: usize, cut: usize) -> Option<super::model::Status> {
        let (issued, done) = self.marks[index];
        if issued >= cut {
            return None;
        }
        match done {
            Some(done) if done < cut && self.acknowledged[index] => {
                Some(super::model::Status::Acked)
            }
            _ => Some(super::model::Status::Maybe),
        }
    }
}

impl Journal for TraceJournal {
    fn issued(&mut self, index: usize, _op: &super::model::Op) {
        debug_assert_eq!(index, self.marks.len());
        self.marks
            .push((self.trace.push(Event::Issued(index)), None));
        self.acknowledged.push(false);
    }

    fn done(&mut self, index: usize, _op: &super::model::Op, outcome: &Outcome) {
        self.marks[index].1 = Some(self.trace.push(Event::Done(index)));
        self.acknowledged[index] = !matches!(outcome, Outcome::Failed(_));
    }
}
