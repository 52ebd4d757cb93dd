//! The drive's metrics through the [`::metrics`] facade, and its operator-facing `tracing`
//! events. Install any recorder before opening a drive (a Prometheus exporter is one line,
//! see `engine/examples/prometheus.rs`) and every drive opened afterwards reports to it; a
//! drive opened with no recorder installed reports nothing and costs nothing.
//!
//! Every metric carries the label `drive`: [`DriveOptions::metrics_label`], or the ring's path.
//!
//! - `sealog_appends_total` (counter, entries): appends acknowledged (durable);
//! - `sealog_append_payload_bytes_total` (counter, bytes): their payload bytes;
//! - `sealog_batches_total` (counter, batches): data batches acknowledged;
//! - `sealog_syncs_total` (counter, syncs): durability operations completed: batch and tail
//!   marker flushes (or dsync writes), control block flushes (trims, tail hints);
//! - `sealog_tail_markers_total` (counter, markers): tail markers written and flushed;
//! - `sealog_batch_latency_seconds` (histogram, seconds): a batch's submission to its
//!   acknowledgement (write plus sync);
//! - `sealog_batch_entries` (histogram, entries): entries per data batch;
//! - `sealog_appends_queued` (gauge, entries): appends the drive holds waiting for a batch;
//! - `sealog_batches_in_flight` (gauge, batches): batches written and not yet acknowledged;
//! - `sealog_reads_total{source}` (counter, reads): reads served, by `source`: `cache`
//!   (recent-entry cache), `direct` (device read on the caller's thread), `ring` (device read on
//!   the drive's io_uring);
//! - `sealog_read_errors_total` (counter, reads): reads that found a damaged record or a read
//!   error;
//! - `sealog_cache_hits_total` (counter, reads): reads served from the recent-entry cache;
//! - `sealog_cache_misses_total` (counter, reads): reads that went to the device;
//! - `sealog_trims_total` (counter, trims): trims made durable (that moved the trim point);
//! - `sealog_ring_full_total` (counter, episodes): times the ring filled (once per trim point);
//! - `sealog_ring_occupied_bytes` (gauge, bytes): ring bytes from the head to the write
//!   position;
//! - `sealog_ring_capacity_bytes` (gauge, bytes): ring bytes for the log;
//! - `sealog_durable_lsn` (gauge, LSN): the highest acknowledged LSN;
//! - `sealog_first_live_lsn` (gauge, LSN): the first LSN not trimmed;
//! - `sealog_drive_failed` (gauge, 0 or 1): the drive stopped after an I/O error (fail-stop).
//!
//! Cost on the write path: the handles are built once, when the drive opens; the drive thread
//! records per batch (two histogram samples, three counter additions) and per turn (counters
//! and gauges that moved), never per append. Reads on callers' threads count into the drive's
//! shared read counters (as [`crate::Drive::read_stats`] reports them), which the drive thread
//! exports at the end of each turn and, while it is idle, at least every
//! [`IDLE_EXPORT_INTERVAL`].

use std::path::Path;
use std::time::{Duration, Instant};

use ::metrics::{Counter, Gauge, Histogram, SharedString, Unit};

use super::options::DriveOptions;

/// Appends acknowledged.
pub const APPENDS_TOTAL: &str = "sealog_appends_total";
/// Payload bytes acknowledged.
pub const APPEND_PAYLOAD_BYTES_TOTAL: &str = "sealog_append_payload_bytes_total";
/// Data batches acknowledged.
pub const BATCHES_TOTAL: &str = "sealog_batches_total";
/// Durability operations completed (flushes, or dsync writes).
pub const SYNCS_TOTAL: &str = "sealog_syncs_total";
/// Tail markers written and flushed.
pub const TAIL_MARKERS_TOTAL: &str = "sealog_tail_markers_total";
/// Seconds from a batch's submission to its acknowledgement.
pub const BATCH_LATENCY_SECONDS: &str = "sealog_batch_latency_seconds";
/// Entries per data batch.
pub const BATCH_ENTRIES: &str = "sealog_batch_entries";
/// Appends waiting for a batch.
pub const APPENDS_QUEUED: &str = "sealog_appends_queued";
/// Batches on the device, not yet acknowledged.
pub const BATCHES_IN_FLIGHT: &str = "sealog_batches_in_flight";
/// Reads served, labelled by `source` (`cache`, `direct`, `ring`).
pub const READS_TOTAL: &str = "sealog_reads_total";
/// Reads that found damage or a read error.
pub const READ_ERRORS_TOTAL: &str = "sealog_read_errors_total";
/// Reads served from the recent-entry cache.
pub const CACHE_HITS_TOTAL: &str = "sealog_cache_hits_total";
/// Reads that went to the device.
pub const CACHE_MISSES_TOTAL: &str = "sealog_cache_misses_total";
/// Durable trims that moved the trim point.
pub const TRIMS_TOTAL: &str = "sealog_trims_total";
/// Times the ring filled (once per trim point).
pub const RING_FULL_TOTAL: &str = "sealog_ring_full_total";
/// Ring bytes from the head to the write position.
pub const RING_OCCUPIED_BYTES: &str = "sealog_ring_occupied_bytes";
/// Ring bytes for the log.
pub const RING_CAPACITY_BYTES: &str = "sealog_ring_capacity_bytes";
/// The highest acknowledged LSN.
pub const DURABLE_LSN: &str = "sealog_durable_lsn";
/// The first live LSN.
pub const FIRST_LIVE_LSN: &str = "sealog_first_live_lsn";
/// 1 once the drive failed (fail-stop), else 0.
pub const DRIVE_FAILED: &str = "sealog_drive_failed";

/// The longest an idle drive leaves the read counters of callers' threads unexported.
pub const IDLE_EXPORT_INTERVAL: Duration = Duration::from_secs(1);

/// Times a drive about to block tries to publish its histograms while readers hold them
/// (yielding between tries) before it blocks anyway, leaving them for its next turn.
pub(super) const PUBLISH_TRIES_BEFORE_BLOCK: usize = 64;

/// Describes every metric (name, unit, meaning) to the installed recorder: the write path's
/// here, the rest in [`describe_reads_and_ring`].
pub(super) fn describe() {
    use ::metrics::{describe_counter, describe_gauge, describe_histogram};
    describe_reads_and_ring();
    describe_counter!(
        APPENDS_TOTAL,
        Unit::Count,
        "Appends acknowledged (durable)."
    );
    describe_counter!(
        APPEND_PAYLOAD_BYTES_TOTAL,
        Unit::Bytes,
        "Payload bytes acknowledged."
    );
    describe_counter!(BATCHES_TOTAL, Unit::Count, "Data batches acknowledged.");
    describe_counter!(
        SYNCS_TOTAL,
        Unit::Count,
        "Flushes (or dsync writes) completed: batches, tail markers, control blocks."
    );
    describe_counter!(
        TAIL_MARKERS_TOTAL,
        Unit::Count,
        "Tail markers written and flushed."
    );
    describe_histogram!(
        BATCH_LATENCY_SECONDS,
        Unit::Seconds,
        "From a batch's submission to its acknowledgement (write plus sync)."
    );
    describe_histogram!(BATCH_ENTRIES, Unit::Count, "Entries per data batch.");
    describe_gauge!(APPENDS_QUEUED, Unit::Count, "Appends waiting for a batch.");
    describe_gauge!(
        BATCHES_IN_FLIGHT,
        Unit::Count,
        "Batches not yet acknowledged."
    );
}

/// Describes the metrics of reads, trims and the ring.
fn describe_reads_and_ring() {
    use ::metrics::{describe_counter, describe_gauge};
    describe_counter!(
        READS_TOTAL,
        Unit::Count,
        "Reads served: from the cache, on the caller's thread, or on the drive's ring."
    );
    describe_counter!(
        READ_ERRORS_TOTAL,
        Unit::Count,
        "Reads that found damage or EIO."
    );
    describe_counter!(
        CACHE_HITS_TOTAL,
        Unit::Count,
        "Reads served from the cache."
    );
    describe_counter!(
        CACHE_MISSES_TOTAL,
        Unit::Count,
        "Reads that went to the device."
    );
    describe_counter!(
        TRIMS_TOTAL,
        Unit::Count,
        "Durable trims that moved the trim point."
    );
    describe_counter!(RING_FULL_TOTAL, Unit::Count, "Times the ring filled.");
    describe_gauge!(
        RING_OCCUPIED_BYTES,
        Unit::Bytes,
        "Ring bytes from head to write position."
    );
    describe_gauge!(RING_CAPACITY_BYTES, Unit::Bytes, "Ring bytes for the log.");
    describe_gauge!(DURABLE_LSN, Unit::Count, "The highest acknowledged LSN.");
    describe_gauge!(FIRST_LIVE_LSN, Unit::Count, "The first LSN not trimmed.");
    describe_gauge!(
        DRIVE_FAILED,
        Unit::Count,
        "1 once the drive failed (fail-stop)."
    );
}

/// A counter exported from a running total.
pub(super) struct ExportedCounter {
    counter: Counter,
    exported: u64,
}

impl ExportedCounter {
    fn new(counter: Counter) -> ExportedCounter {
        ExportedCounter {
            counter,
            exported: 0,
        }
    }

    /// Adds what `total` grew by since the last export.
    pub(super) fn to(&mut self, total: u64) {
        if total > self.exported {
            self.counter.increment(total - self.exported);
            self.exported = total;
        }
    }
}

/// A gauge set only when its value changed.
pub(super) struct ExportedGauge {
    gauge: Gauge,
    exported: Option<u64>,
}

impl ExportedGauge {
    fn new(gauge: Gauge) -> ExportedGauge {
        ExportedGauge {
            gauge,
            exported: None,
        }
    }

    pub(super) fn set(&mut self, value: u64) {
        if self.exported != Some(value) {
            self.gauge.set(value as f64);
            self.exported = Some(value);
        }
    }
}

/// The drive's metric handles, built once when it opens.
pub(super) struct Handles {
    pub(super) appends: Counter,
    pub(super) payload_bytes: Counter,
    pub(super) batches: Counter,
    pub(super) batch_latency: Histogram,
    pub(super) batch_entries: Histogram,
    pub(super) ring_full: Counter,
    pub(super) syncs: ExportedCounter,
    pub(super) tail_markers: ExportedCounter,
    pub(super) reads_cache: ExportedCounter,
    pub(super) reads_direct: ExportedCounter,
    pub(super) reads_ring: ExportedCounter,
    pub(super) read_errors: ExportedCounter,
    pub(super) cache_hits: ExportedCounter,
    pub(super) cache_misses: ExportedCounter,
    pub(super) trims: ExportedCounter,
    pub(super) appends_queued: ExportedGauge,
    pub(super) batches_in_flight: ExportedGauge,
    pub(super) occupied_bytes: ExportedGauge,
    pub(super) durable_lsn: ExportedGauge,
    pub(super) first_live_lsn: ExportedGauge,
    pub(super) failed: ExportedGauge,
}

impl Handles {
    pub(super) fn new(label: &SharedString, capacity_bytes: u64) -> Handles {
        let counter = |name: &'static str| ::metrics::counter!(name, "drive" => label.clone());
        let exported = |name| ExportedCounter::new(counter(name));
        let read = |source: &'static str| {
            ExportedCounter::new(
                ::metrics::counter!(READS_TOTAL, "drive" => label.clone(), "source" => source),
            )
        };
        let gauge = |name: &'static str| {
            ExportedGauge::new(::metrics::gauge!(name, "drive" => label.clone()))
        };
        let histogram = |name: &'static str| ::metrics::histogram!(name, "drive" => label.clone());
        ::metrics::gauge!(RING_CAPACITY_BYTES, "drive" => label.clone()).set(capacity_bytes as f64);
        Handles {
            appends: counter(APPENDS_TOTAL),
            payload_bytes: counter(APPEND_PAYLOAD_BYTES_TOTAL),
            batches: counter(BATCHES_TOTAL),
            batch_latency: histogram(BATCH_LATENCY_SECONDS),
            batch_entries: histogram(BATCH_ENTRIES),
            ring_full: counter(RING_FULL_TOTAL),
            syncs: exported(SYNCS_TOTAL),
            tail_markers: exported(TAIL_MARKERS_TOTAL),
            reads_cache: read("cache"),
            reads_direct: read("direct"),
            reads_ring: read("ring"),
            read_errors: exported(READ_ERRORS_TOTAL),
            cache_hits: exported(CACHE_HITS_TOTAL),
            cache_misses: exported(CACHE_MISSES_TOTAL),
            trims: exported(TRIMS_TOTAL),
            appends_queued: gauge(APPENDS_QUEUED),
            batches_in_flight: gauge(BATCHES_IN_FLIGHT),
            occupied_bytes: gauge(RING_OCCUPIED_BYTES),
            durable_lsn: gauge(DURABLE_LSN),
            first_live_lsn: gauge(FIRST_LIVE_LSN),
            failed: gauge(DRIVE_FAILED),
        }
    }
}

/// What the drive thread keeps for its metrics and published statistics.
#[derive(Default)]
pub(crate) struct Telemetry {
    /// `None` for a core without metrics (stepped by hand, as simulations do).
    pub(super) handles: Option<Handles>,
    /// Reads the drive's own io_uring made (the rest of the device reads were callers').
    pub(super) ring_reads: u64,
    /// Durable trims that moved the trim point.
    pub(super) trims: u64,
    /// Samples in the drive's histograms at their last publication, and when that was.
    pub(super) histograms_recorded: u64,
    pub(super) histograms_published_at: Option<Instant>,
    /// The trim point when the ring last filled: one warning per trim point.
    pub(super) ring_full_at_trim: Option<u64>,
}

/// The open of a drive, timed and spanned, from before recovery until its metrics are
/// attached ([`DriveCore::attach_telemetry`](crate::DriveCore::attach_telemetry)).
pub(crate) struct Recovering {
    _span: tracing::span::EnteredSpan,
    pub(super) started: Instant,
}

impl Recovering {
    /// Enters the `recover` span (inside the drive's own span) and starts the clock.
    pub(crate) fn start() -> Recovering {
        Recovering {
            _span: tracing::info_span!("recover").entered(),
            started: Instant::now(),
        }
    }
}

/// The label a drive's metrics carry.
pub(super) fn label(path: &Path, options: &DriveOptions) -> SharedString {
    match &options.metrics_label {
        Some(label) => SharedString::from(label.clone()),
        None => SharedString::from(path.display().to_string()),
    }
}
