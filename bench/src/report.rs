//! One benchmark cell's figures, the table printed on the terminal and the JSON written with
//! `--json`. The JSON's top-level `cells` array is a contract scripts rely on: `engine`,
//! `payload_bytes`, `writers`, `in_flight`, `appends_per_sec`, `mb_per_sec`, `p50_us`,
//! `p99_us`, `p999_us`, `ratio_to_ceiling` (and more).

use hdrhistogram::Histogram;
use serde_json::{json, Value};

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
    /// Flushes per second (sealog: batches per second).
    pub syncs_per_sec: f64,
    /// CPU seconds (user + system) per GB of payload.
    pub cpu_seconds_per_gb: f64,
    /// Throughput over the 1 MiB write+datasync ceiling's MB/s (higher is better).
    pub ratio_to_ceiling: f64,
    /// p50 over the built-in 4 KiB write+datasync p50 (lower is better).
    pub p50_ratio_to_ceiling: f64,
    /// p99 over the built-in 4 KiB write+datasync p99 (lower is better).
    pub p99_ratio_to_ceiling: f64,
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
            "syncs_per_sec": self.syncs_per_sec,
            "cpu_seconds_per_gb": self.cpu_seconds_per_gb,
            "ratio_to_ceiling": self.ratio_to_ceiling,
            "p50_ratio_to_ceiling": self.p50_ratio_to_ceiling,
            "p99_ratio_to_ceiling": self.p99_ratio_to_ceiling,
            "note": self.note,
        })
    }
}

/// The table header.
pub fn header() -> String {
    format!(
        "{:<16} {:>8} {:>7} {:>6} {:>12} {:>9} {:>8} {:>8} {:>8} {:>7} {:>7} {:>7}",
        "engine",
        "payload",
        "writers",
        "flight",
        "appends/s",
        "MB/s",
        "p50 us",
        "p99 us",
        "p999 us",
        "xMB/s",
        "xp50",
        "batch"
    )
}

/// One table row.
pub fn row(cell: &Cell) -> String {
    format!(
        "{:<16} {:>8} {:>7} {:>6} {:>12.0} {:>9.1} {:>8.0} {:>8.0} {:>8.0} {:>7.3} {:>7.2} {:>7.1}",
        cell.engine,
        cell.payload_bytes,
        cell.writers,
        cell.in_flight,
        cell.appends_per_sec,
        cell.mb_per_sec,
        cell.p50_us,
        cell.p99_us,
        cell.p999_us,
        cell.ratio_to_ceiling,
        cell.p50_ratio_to_ceiling,
        cell.batch_entries
    )
}
