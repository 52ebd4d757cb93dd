//! How the state machine feeds the drive's metrics ([`super::metrics`]) and the statistics it
//! publishes for readers (`shared_stats`): the handles built after recovery, the counters per
//! acknowledged batch and per durable control block, the warning of a full ring, and the
//! publication at the end of each turn, before the thread blocks, and when the core goes away.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::Instant;

use super::core::DriveCore;
use super::metrics::{describe, label, Handles, Recovering};
use super::metrics::{IDLE_EXPORT_INTERVAL, PUBLISH_TRIES_BEFORE_BLOCK};
use super::options::DriveOptions;
use super::shared_stats::{set, HistogramSources, HISTOGRAM_PUBLISH_INTERVAL};
use crate::io::{Durability, IoBackend};

impl<B: IoBackend> DriveCore<B> {
    /// After recovery, on the drive thread: reports what recovery found, builds the drive's
    /// metric handles (with the recorder installed now) and publishes its statistics.
    pub(super) fn attach_telemetry(
        &mut self,
        path: &Path,
        options: &DriveOptions,
        recovering: Recovering,
    ) {
        let report = self.recovery_report();
        tracing::info!(
            entries = report.entries,
            payload_bytes = report.payload_bytes,
            first_lsn = report.first_lsn,
            last_lsn = report.last_lsn,
            scan = report.scan.name(),
            bytes_read = report.bytes_read,
            outcome = report.outcome.name(),
            duration_ms = recovering.started.elapsed().as_secs_f64() * 1e3,
            "recovered: {}",
            report.scan
        );
        drop(recovering);
        describe();
        let geometry = self.geometry;
        let capacity_bytes = geometry.segment_size_bytes * u64::from(geometry.segment_count);
        self.telemetry.handles = Some(Handles::new(&label(path, options), capacity_bytes));
        self.publish_stats();
    }

    /// A data batch was acknowledged (called before its tickets complete, so whoever sees
    /// an append acknowledged sees it counted).
    pub(super) fn on_batch_acknowledged(
        &mut self,
        records: u64,
        payload_bytes: u64,
        submitted: Instant,
    ) {
        let shared = &self.view.stats;
        super::shared_stats::add(&shared.appends, records);
        super::shared_stats::add(&shared.payload_bytes, payload_bytes);
        super::shared_stats::add(&shared.batches, 1);
        set(&shared.lsn_covered, self.lsn_covered);
        if let Some(handles) = &self.telemetry.handles {
            let latency = self.clock.now().saturating_duration_since(submitted);
            handles.appends.increment(records);
            handles.payload_bytes.increment(payload_bytes);
            handles.batches.increment(1);
            handles.batch_latency.record(latency.as_secs_f64());
            handles.batch_entries.record(records as f64);
        }
    }

    /// A control block is durable (before its trim's client hears so, who then sees the
    /// statistics as of the trim); `trimmed`: it moved the trim point.
    pub(super) fn on_trim_durable(&mut self, trimmed: bool, trim_lsn: u64) {
        self.publish_counters();
        if trimmed {
            self.telemetry.trims += 1;
            tracing::debug!(trim_lsn, "trim durable");
        }
    }

    /// The last data batch found the ring full: warns once per trim point (an episode lasts
    /// until a trim releases space).
    pub(super) fn note_ring_full(&mut self) {
        let trim_lsn = self.control.trim_lsn;
        if !self.ring_full || self.telemetry.ring_full_at_trim == Some(trim_lsn) {
            return;
        }
        self.telemetry.ring_full_at_trim = Some(trim_lsn);
        tracing::warn!(
            next_lsn = self.cursor.next_lsn,
            trim_lsn,
            occupied_bytes = self.view.occupied_bytes(),
            when_full = ?self.when_full,
            "the ring is full: appends wait for a trim or fail, as when_full says"
        );
        if let Some(handles) = &self.telemetry.handles {
            handles.ring_full.increment(1);
        }
    }

    /// The end of a turn: counters and queue depths for [`crate::Drive::stats`], metrics that
    /// moved, and the histograms when the last publication is old enough.
    pub(super) fn publish_stats(&mut self) {
        self.publish_counters();
        self.export_metrics();
        // The clock is read only when something new was recorded.
        let recorded = self.histogram_sources().recorded();
        let due = recorded != self.telemetry.histograms_recorded
            && self
                .telemetry
                .histograms_published_at
                .is_none_or(|at| at.elapsed() >= HISTOGRAM_PUBLISH_INTERVAL);
        if due {
            self.publish_histograms(1);
        }
    }

    /// The drive thread is about to block: what it recorded since the last publication goes
    /// out now, so a reader of an idle drive sees complete histograms.
    pub(super) fn publish_before_block(&mut self) {
        self.publish_counters();
        self.export_metrics();
        self.publish_histograms(PUBLISH_TRIES_BEFORE_BLOCK);
    }

    /// The core is going away: its final figures, waiting for readers if need be.
    pub(super) fn publish_final(&mut self) {
        self.publish_counters();
        self.export_metrics();
        let sources = self.histogram_sources();
        self.view.stats.publish_histograms(&sources);
    }

    /// How long an idle drive thread may block: until `deadline`, and no longer than
    /// [`IDLE_EXPORT_INTERVAL`] when it exports metrics (callers' reads keep counting).
    pub(super) fn telemetry_deadline(&self, deadline: Option<Instant>) -> Option<Instant> {
        if self.telemetry.handles.is_none() {
            return deadline;
        }
        let export = Instant::now().checked_add(IDLE_EXPORT_INTERVAL);
        match (deadline, export) {
            (Some(deadline), Some(export)) => Some(deadline.min(export)),
            (deadline, export) => deadline.or(export),
        }
    }

    fn histogram_sources(&self) -> HistogramSources<'_> {
        HistogramSources {
            batch_entries: &self.batch_entries,
            sync_latency_us: &self.sync_latency_us,
            idle_gap_us: &self.idle_gap_us,
            enqueue_to_submit_us: &self.enqueue_to_submit_us,
        }
    }

    /// Publishes the histograms if anything was recorded since the last time, trying up to
    /// `tries` times while readers hold the snapshot.
    fn publish_histograms(&mut self, tries: usize) {
        let sources = self.histogram_sources();
        let recorded = sources.recorded();
        if recorded == self.telemetry.histograms_recorded {
            return;
        }
        for attempt in 0..tries {
            if self.view.stats.try_publish_histograms(&sources) {
                self.telemetry.histograms_recorded = recorded;
                self.telemetry.histograms_published_at = Some(Instant::now());
                return;
            }
            if attempt + 1 < tries {
                std::thread::yield_now();
            }
        }
    }

    fn publish_counters(&self) {
        let shared = &self.view.stats;
        set(&shared.tail_markers, self.tail_markers);
        set(&shared.lsn_covered, self.lsn_covered);
        set(&shared.hint_waits, self.hints.waits);
        set(&shared.hint_writes, self.hints.writes);
        set(&shared.appends_queued, self.queue.len() as u64);
        set(&shared.batches_in_flight, self.inflight.len() as u64);
        set(&shared.reads_waiting, self.reads_waiting.len() as u64);
        set(&shared.reads_in_flight, self.reads.len() as u64);
        set(&shared.trims_waiting, self.trims.len() as u64);
        let trim_in_flight = self.trim_in_flight.is_some();
        shared
            .trim_in_flight
            .store(trim_in_flight, Ordering::Relaxed);
    }

    /// Exports the totals and levels that may have moved since the last turn.
    fn export_metrics(&mut self) {
        let Some(handles) = self.telemetry.handles.as_mut() else {
            return;
        };
        let durable_batches = match self.durability {
            Durability::NoSyncBenchmarkOnly => 0,
            Durability::Fdatasync | Durability::Dsync => self.batches + self.tail_markers,
        };
        handles
            .syncs
            .to(durable_batches + self.telemetry.trims + self.hints.writes);
        handles.tail_markers.to(self.tail_markers);
        handles.trims.to(self.telemetry.trims);
        let counters = &self.view.counters;
        let cache_hits = counters.cache_hits.load(Ordering::Relaxed);
        let device_reads = counters.device_reads.load(Ordering::Relaxed);
        let ring_reads = self.telemetry.ring_reads;
        handles.reads_cache.to(cache_hits);
        handles.reads_ring.to(ring_reads);
        handles
            .reads_direct
            .to(device_reads.saturating_sub(ring_reads));
        handles
            .read_errors
            .to(counters.damaged.load(Ordering::Relaxed));
        handles.cache_hits.to(cache_hits);
        handles.cache_misses.to(device_reads);
        handles.appends_queued.set(self.queue.len() as u64);
        handles.batches_in_flight.set(self.inflight.len() as u64);
        handles.occupied_bytes.set(self.view.occupied_bytes());
        handles.durable_lsn.set(self.lsn_durable);
        handles.first_live_lsn.set(self.control.trim_lsn + 1);
        handles.failed.set(u64::from(self.failed.is_some()));
    }
}
