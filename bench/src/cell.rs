//! One benchmark cell's figures (an engine under one workload), the engine names the tables and
//! targets look cells up by, and the cell as JSON. The JSON's top-level `cells` array is a
//! contract scripts rely on: `engine`, `payload_bytes`, `writers`, `in_flight`,
//! `appends_per_sec`, `mb_per_sec`, `p50_us`, `p99_us`, `p999_us`, `ratio_to_ceiling` (and
//! more). A leaf: it imports nothing from the rest of the bench, so that the ceilings, the cells,
//! the peers and every report can share it without importing one another.

use hdrhistogram::Histogram;
use serde_json::{json, Value};

/// Engine name of the raw write + linked fdatasync row.
pub const RAW_FDATASYNC: &str = "raw-fdatasync";
/// Engine name of the raw RWF_DSYNC row on a device without FUA.
pub const RAW_DSYNC: &str = "raw-dsync";
/// Engine name of the raw RWF_DSYNC row on a device that reports FUA (the writes are FUA).
pub const RAW_DSYNC_FUA: &str = "raw-dsync-fua";
/// Engine name of the raw write bandwidth row (no sync).
pub const RAW_WRITE: &str = "raw-write-nosync";

/// The peer engines' names.
pub const PEERS: [&str; 2] = ["raft-engine", "okaywal"];

/// The figures of one cell: an engine under one workload.
#[derive(Clone, Debug, Default)]
pub struct Cell {
    /// "sealog", "ceiling-builtin", "fio" (and, later, the peers).
    pub engine: String,
    /// Payload (or block) size.
    pub payload_bytes: u64,
    /// Writer threads.
    pub writers: u64,
    /// Appends in flight per writer.
    pub in_flight: u64,
    /// Durable appends (or ceiling operations) per second.
    pub appends_per_sec: f64,
    /// Payload megabytes (10^6 bytes) per second.
    pub mb_per_sec: f64,
    /// Latency percentiles and maximum, microseconds.
    pub p50_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p999_us: f64,
    /// Maximum.
    pub max_us: f64,
    /// Entries per batch (sealog).
    pub batch_entries: f64,
    /// sealog: p50 of a batch's write plus sync, microseconds.
    pub batch_p50_us: f64,
    /// sealog: p50 of the device's idle gap between the last batch in flight and the next.
    pub idle_gap_p50_us: f64,
    /// sealog: p50 of the handoff to the drive, microseconds from an append's call to the
    /// submission of the batch carrying it (group commit's gathering included).
    pub handoff_submit_p50_us: f64,
    /// sealog: p50 of the handoff back, microseconds from an append's completion on the drive
    /// thread to its waiting client running again.
    pub handoff_wake_p50_us: f64,
    /// Peak resident memory of the process during this cell (its own high-water mark), bytes;
    /// 0 when the kernel could not reset the mark.
    pub peak_rss_bytes: u64,
    /// Flushes per second (sealog: batches per second, tail markers not included).
    pub syncs_per_sec: f64,
    /// sealog: tail markers written while the cell was measured (a busy log writes none).
    pub tail_markers: u64,
    /// sealog: control blocks written to move the tail hint while the cell was measured.
    pub hint_writes: u64,
    /// sealog: batches that waited for a tail hint while the cell was measured (the hint is
    /// written ahead, so a steady writer waits for none).
    pub hint_waits: u64,
    /// CPU seconds (user + system) per GB of payload.
    pub cpu_seconds_per_gb: f64,
    /// CPU microseconds (user + system, the whole process: writers, drive thread and kernel)
    /// per append acknowledged in the measured time; 0 when not measured.
    pub cpu_us_per_append: f64,
    /// Throughput over the 1 MiB write+datasync ceiling's MB/s (higher is better).
    pub ratio_to_ceiling: f64,
    /// p50 over the built-in 4 KiB write+datasync p50 (lower is better).
    pub p50_ratio_to_ceiling: f64,
    /// p99 over the built-in 4 KiB write+datasync p99 (lower is better).
    pub p99_ratio_to_ceiling: f64,
    /// A peer's cell: sealog's appends/s over this peer's, same workload, same run (0 when
    /// sealog did not run it, and for sealog's own cells).
    pub sealog_over_peer: f64,
    /// Anything a reader must know about how it was measured.
    pub note: String,
}

impl Cell {
    /// A cell with no figures yet.
    pub fn empty(engine: &str, payload_bytes: u64, writers: u64, in_flight: u64) -> Cell {
        Cell {
            engine: engine.to_string(),
            payload_bytes,
            writers,
            in_flight,
            ..Cell::default()
        }
    }

    /// A cell from an operation count, a duration and a latency histogram (microseconds).
    pub fn measured(
        engine: &str,
        payload_bytes: u64,
        writers: u64,
        in_flight: u64,
        operations: u64,
        seconds: f64,
        latency_us: &Histogram<u64>,
    ) -> Cell {
        let mut cell = Cell::empty(engine, payload_bytes, writers, in_flight);
        cell.appends_per_sec = operations as f64 / seconds;
        cell.mb_per_sec = cell.appends_per_sec * payload_bytes as f64 / 1e6;
        cell.p50_us = latency_us.value_at_quantile(0.50) as f64;
        cell.p99_us = latency_us.value_at_quantile(0.99) as f64;
        cell.p999_us = latency_us.value_at_quantile(0.999) as f64;
        cell.max_us = latency_us.max() as f64;
        cell
    }

    /// Fills the ratio columns from the ceilings of the same run.
    pub fn set_ratios(
        &mut self,
        ceiling_mb_per_sec: f64,
        ceiling_p50_us: f64,
        ceiling_p99_us: f64,
    ) {
        let ratio = |value: f64, base: f64| if base > 0.0 { value / base } else { 0.0 };
        self.ratio_to_ceiling = ratio(self.mb_per_sec, ceiling_mb_per_sec);
        self.p50_ratio_to_ceiling = ratio(self.p50_us, ceiling_p50_us);
        self.p99_ratio_to_ceiling = ratio(self.p99_us, ceiling_p99_us);
    }

    /// Fills `cpu_us_per_append` from the process's CPU time over the measured time and the
    /// appends acknowledged in it (CPU s/GB hides how much of the cost is per append, not per
    /// byte: 4 KiB appends at 4 CPU s/GB cost 16 us each).
    pub fn set_cpu_us_per_append(&mut self, cpu_seconds: f64, appends: u64) {
        self.cpu_us_per_append = if appends > 0 {
            cpu_seconds * 1e6 / appends as f64
        } else {
            0.0
        };
    }

    /// The cell as a JSON object.
    pub fn to_json(&self) -> Value {
        json!({
            "engine": self.engine,
            "payload_bytes": self.payload_bytes,
            "writers": self.writers,
            "in_flight": self.in_flight,
            "appends_per_sec": self.appends_per_sec,
            "mb_per_sec": self.mb_per_sec,
            "p50_us": self.p50_us,
            "p99_us": self.p99_us,
            "p999_us": self.p999_us,
            "max_us": self.max_us,
            "batch_entries": self.batch_entries,
            "batch_p50_us": self.batch_p50_us,
            "idle_gap_p50_us": self.idle_gap_p50_us,
            "handoff_submit_p50_us": self.handoff_submit_p50_us,
            "handoff_wake_p50_us": self.handoff_wake_p50_us,
            "syncs_per_sec": self.syncs_per_sec,
            "tail_markers": self.tail_markers,
            "hint_writes": self.hint_writes,
            "hint_waits": self.hint_waits,
            "cpu_seconds_per_gb": self.cpu_seconds_per_gb,
            "cpu_us_per_append": self.cpu_us_per_append,
            "peak_rss_bytes": self.peak_rss_bytes,
            "ratio_to_ceiling": self.ratio_to_ceiling,
            "p50_ratio_to_ceiling": self.p50_ratio_to_ceiling,
            "p99_ratio_to_ceiling": self.p99_ratio_to_ceiling,
            "sealog_over_peer": self.sealog_over_peer,
            "note": self.note,
        })
    }
}

/// Engine `engine`'s cell over rounds of cells, each figure its own median over the rounds
/// (the device drifts and stalls on a shared host; a median drops the spoiled round).
pub fn median_cell(rounds: &[Vec<Cell>], engine: usize) -> Cell {
    let figure = |of: fn(&Cell) -> f64| {
        let mut values: Vec<f64> = rounds.iter().map(|round| of(&round[engine])).collect();
        crate::median::median(&mut values)
    };
    let first = &rounds[0][engine];
    Cell {
        appends_per_sec: figure(|cell| cell.appends_per_sec),
        mb_per_sec: figure(|cell| cell.mb_per_sec),
        p50_us: figure(|cell| cell.p50_us),
        p99_us: figure(|cell| cell.p99_us),
        p999_us: figure(|cell| cell.p999_us),
        max_us: figure(|cell| cell.max_us),
        batch_entries: figure(|cell| cell.batch_entries),
        batch_p50_us: figure(|cell| cell.batch_p50_us),
        cpu_us_per_append: figure(|cell| cell.cpu_us_per_append),
        ratio_to_ceiling: figure(|cell| cell.ratio_to_ceiling),
        p50_ratio_to_ceiling: figure(|cell| cell.p50_ratio_to_ceiling),
        p99_ratio_to_ceiling: figure(|cell| cell.p99_ratio_to_ceiling),
        ..Cell::empty(
            &first.engine,
            first.payload_bytes,
            first.writers,
            first.in_flight,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CPU per append is the process's CPU time over the appends acknowledged, in microseconds,
    /// and 0 (not measured) when nothing was acknowledged.
    #[test]
    fn cpu_per_append_is_cpu_time_over_appends() {
        let mut measured = Cell::empty("sealog", 4096, 32, 1);
        measured.set_cpu_us_per_append(1.5, 200_000);
        assert_eq!(measured.cpu_us_per_append, 7.5);
        measured.set_cpu_us_per_append(1.5, 0);
        assert_eq!(measured.cpu_us_per_append, 0.0);
    }
}
