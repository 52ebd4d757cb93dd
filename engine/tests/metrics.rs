//! The drive's metrics through the `metrics` facade, seen by a recording recorder: every
//! counter moves by what the drive did (appends, bytes, batches, reads by where they were
//! served, trims), the ring's occupancy rises with appends and falls after a trim, and every
//! metric is described and carries the drive's label.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use metrics_util::MetricKind;
use sealog::drive::metrics as names;
use sealog::{format, Drive, DriveOptions, Entry, FormatOptions, SyncMethod};

/// Everything the recorder saw of one drive: counters summed (each snapshot takes what they
/// grew by), gauges as last set, histogram samples gathered.
#[derive(Default)]
struct Observed {
    counters: HashMap<String, u64>,
    gauges: HashMap<String, f64>,
    histograms: HashMap<String, Vec<f64>>,
    described: HashMap<String, bool>,
}

impl Observed {
    /// Takes in a snapshot's metrics of the drive labelled `drive`, named with their
    /// `source` label where they have one.
    fn take(&mut self, snapshotter: &Snapshotter, drive: &str) {
        for (key, unit, description, value) in snapshotter.snapshot().into_vec() {
            let (kind, key) = key.into_parts();
            let labels: HashMap<&str, &str> = key
                .labels()
                .map(|label| (label.key(), label.value()))
                .collect();
            if labels.get("drive") != Some(&drive) {
                continue;
            }
            let name = match labels.get("source") {
                Some(source) => format!("{}/{source}", key.name()),
                None => key.name().to_string(),
            };
            let described = unit.is_some() && description.is_some();
            *self.described.entry(name.clone()).or_default() |= described;
            match (kind, value) {
                (MetricKind::Counter, DebugValue::Counter(value)) => {
                    *self.counters.entry(name).or_default() += value;
                }
                (MetricKind::Gauge, DebugValue::Gauge(value)) => {
                    self.gauges.insert(name, value.into_inner());
                }
                (MetricKind::Histogram, DebugValue::Histogram(values)) => self
                    .histograms
                    .entry(name)
                    .or_default()
                    .extend(values.into_iter().map(|value| value.into_inner())),
                (kind, value) => panic!("{name}: a {kind:?} with {value:?}"),
            }
        }
    }

    fn counter(&self, name: &str) -> u64 {
        self.counters.get(name).copied().unwrap_or(0)
    }

    fn gauge(&self, name: &str) -> f64 {
        self.gauges.get(name).copied().unwrap_or(f64::NAN)
    }
}

fn ring(directory: &tempfile::TempDir) -> PathBuf {
    let path = directory.path().join("ring");
    format(
        &path,
        &FormatOptions::new(8 << 20)
            .segment_size_bytes(1 << 20)
            .batch_size_max_bytes(256 << 10)
            .sync_method(SyncMethod::Fdatasync),
    )
    .expect("formats");
    path
}

/// Polls the recorder until `done` holds (the drive exports at the end of its turns).
fn until(
    observed: &mut Observed,
    snapshotter: &Snapshotter,
    what: &str,
    done: impl Fn(&Observed) -> bool,
) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        observed.take(snapshotter, "metrics-test");
        if done(observed) {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: never happened");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// One test: the recorder is the process's global one, installed once.
#[test]
fn the_drive_reports_what_it_did_through_the_metrics_facade() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder
        .install()
        .expect("the only recorder of this test binary");
    let directory = tempfile::tempdir().expect("tempdir");
    let drive = Drive::open(
        &ring(&directory),
        DriveOptions {
            metrics_label: Some("metrics-test".to_string()),
            ..DriveOptions::default()
        },
    )
    .expect("opens");
    let mut observed = Observed::default();
    // 30 appends the cache keeps (owned payloads), 20 it does not (borrowed slices).
    let mut payload_bytes = 0u64;
    for i in 0..50u64 {
        let payload = vec![i as u8; 1000 + i as usize];
        payload_bytes += payload.len() as u64;
        let ticket = if i < 30 {
            drive.append(payload)
        } else {
            drive.append(Entry::slices(&[&payload[..10], &payload[10..]]))
        };
        assert_eq!(ticket.expect("queued").wait(), Ok(i + 1));
    }
    until(
        &mut observed,
        &snapshotter,
        "the appends exported",
        |seen| seen.gauge(names::DURABLE_LSN) == 50.0,
    );
    assert_eq!(observed.counter(names::APPENDS_TOTAL), 50);
    assert_eq!(
        observed.counter(names::APPEND_PAYLOAD_BYTES_TOTAL),
        payload_bytes
    );
    let batches = observed.counter(names::BATCHES_TOTAL);
    assert!((1..=50).contains(&batches), "{batches} batches");
    assert_eq!(
        observed.histograms[names::BATCH_ENTRIES].len() as u64,
        batches
    );
    assert_eq!(
        observed.histograms[names::BATCH_ENTRIES]
            .iter()
            .sum::<f64>(),
        50.0
    );
    let latencies = &observed.histograms[names::BATCH_LATENCY_SECONDS];
    assert_eq!(latencies.len() as u64, batches);
    assert!(latencies
        .iter()
        .all(|seconds| *seconds > 0.0 && *seconds < 10.0));
    assert!(observed.counter(names::SYNCS_TOTAL) >= batches);
    let capacity = drive.shape().capacity_bytes as f64;
    assert_eq!(observed.gauge(names::RING_CAPACITY_BYTES), capacity);
    let occupied = observed.gauge(names::RING_OCCUPIED_BYTES);
    assert!(
        occupied >= payload_bytes as f64,
        "{occupied} bytes occupied"
    );
    assert_eq!(observed.gauge(names::FIRST_LIVE_LSN), 1.0);
    assert_eq!(observed.gauge(names::DRIVE_FAILED), 0.0);

    // Reads: 10 from the cache, 5 on this thread from the device, 5 on the drive's ring.
    for lsn in 1..=10 {
        drive.read(lsn).expect("cached");
    }
    for lsn in 31..=35 {
        drive.read(lsn).expect("read on this thread");
    }
    for lsn in 36..=40 {
        block_on(drive.read_async(lsn)).expect("read on the drive's ring");
    }
    drive.trim(50).expect("trims");
    until(
        &mut observed,
        &snapshotter,
        "the reads and trim exported",
        |seen| {
            seen.counter(names::TRIMS_TOTAL) == 1
                && seen.counter(&format!("{}/direct", names::READS_TOTAL)) == 5
        },
    );
    assert_eq!(
        observed.counter(&format!("{}/cache", names::READS_TOTAL)),
        10
    );
    assert_eq!(observed.counter(&format!("{}/ring", names::READS_TOTAL)), 5);
    assert_eq!(observed.counter(names::CACHE_HITS_TOTAL), 10);
    assert_eq!(observed.counter(names::CACHE_MISSES_TOTAL), 10);
    assert_eq!(observed.counter(names::READ_ERRORS_TOTAL), 0);
    assert_eq!(observed.gauge(names::FIRST_LIVE_LSN), 51.0);
    let after_trim = observed.gauge(names::RING_OCCUPIED_BYTES);
    assert!(
        after_trim < occupied,
        "{after_trim} bytes after the trim, {occupied} before"
    );
    drive.close();
    observed.take(&snapshotter, "metrics-test");
    for (name, described) in &observed.described {
        assert!(described, "{name} is described with a unit");
    }
    assert_eq!(
        observed.counter(names::APPENDS_TOTAL),
        50,
        "nothing counted twice"
    );
}

/// Runs a future to completion on this thread.
fn block_on<F: std::future::Future>(future: F) -> F::Output {
    use std::task::{Context, Poll, Wake, Waker};
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(std::sync::Arc::new(Unpark(std::thread::current())));
    let mut context = Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        match future.as_mut().poll(&mut context) {
            Poll::Ready(output) => return output,
            Poll::Pending => std::thread::park(),
        }
    }
}
