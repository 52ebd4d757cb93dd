//! One row per read measurement (sealog's tail, cold and catch-up reads, the writer beside the
//! tail readers, and the read ceilings they are judged against), the sections and engine names
//! the rows carry, and a row's JSON (`reads.rows`). These rows are not `cells`: the JSON
//! contract of `cells` (appends, ratios to the write ceiling) means nothing for a read, so they
//! carry their own ratio, to the read ceiling they name. A leaf: the read ceilings, the read
//! runners, the LogDrive section and the reports share it without importing one another.

use hdrhistogram::Histogram;
use serde_json::{json, Value};

/// How a read measurement was loaded: threads issuing it and reads in flight in all.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadLoad {
    /// Threads issuing reads (or appends, for the writer's rows).
    pub threads: u64,
    /// Operations in flight at once, all threads together.
    pub in_flight: u64,
}

impl ReadLoad {
    /// One thread keeping `in_flight` operations outstanding.
    pub fn single_thread(in_flight: u64) -> ReadLoad {
        ReadLoad {
            threads: 1,
            in_flight,
        }
    }

    /// `threads` threads, one blocking operation each.
    pub fn blocking_threads(threads: u64) -> ReadLoad {
        ReadLoad {
            threads,
            in_flight: threads,
        }
    }
}

/// Section name of the tail reads (and their writer).
pub const SECTION_TAIL: &str = "tail";
/// Section name of the cold point reads and their ceilings.
pub const SECTION_COLD: &str = "cold";
/// Section name of the catch-up iterator and its ceiling.
pub const SECTION_CATCH_UP: &str = "catch-up";

/// Engine name of the tail section's writer rows.
pub const TAIL_WRITER: &str = "sealog-writer";
/// Engine name of the tail readers' rows.
pub const TAIL_READ: &str = "sealog-tail-read";
/// Engine name of cold point reads by blocking threads (`Drive::read`).
pub const COLD_BLOCKING: &str = "sealog-read";
/// Engine name of cold point reads as futures polled together on one thread.
pub const COLD_ASYNC: &str = "sealog-read-async";
/// Engine name of the catch-up iterator (`Drive::iter_from`).
pub const CATCH_UP: &str = "sealog-iter";

/// Engine name of the built-in random-read ceiling rows.
pub const RANDOM_READ: &str = "ceiling-randread";
/// Engine name of fio's random-read rows.
pub const FIO_RANDOM_READ: &str = "fio-randread";
/// Engine name of the built-in sequential read ceiling rows.
pub const SEQUENTIAL_READ: &str = "ceiling-seqread";

/// One read measurement.
#[derive(Clone, Debug, Default)]
pub struct ReadRow {
    /// [`SECTION_TAIL`], [`SECTION_COLD`] or [`SECTION_CATCH_UP`].
    pub section: &'static str,
    /// Who read: sealog's path, or a ceiling.
    pub engine: String,
    /// Bytes each operation returns (a payload; a ceiling's read size).
    pub entry_bytes: u64,
    /// Threads and operations in flight.
    pub load: ReadLoad,
    /// Reader threads running beside (the writer's rows; 0 elsewhere).
    pub readers_alongside: u64,
    /// The tail readers' total rate when paced, reads per second (0: as fast as they go); on
    /// the writer's rows, its readers'.
    pub readers_paced_per_sec: f64,
    /// Operations (reads; appends for the writer's rows) per second.
    pub ops_per_sec: f64,
    /// Bytes returned (payloads, or a ceiling's reads), MB (10^6 bytes) per second.
    pub mb_per_sec: f64,
    /// Each operation's latency, p50, microseconds (0 where not timed per operation).
    pub p50_us: f64,
    /// p99, microseconds.
    pub p99_us: f64,
    /// The ceiling row this one is judged against (empty: none).
    pub ceiling: String,
    /// Throughput over that ceiling's (operations per second; MB/s for the catch-up iterator,
    /// whose operations are entries and the ceiling's are large reads).
    pub ratio_to_ceiling: f64,
    /// p50 over that ceiling's p50 (lower is better).
    pub p50_ratio_to_ceiling: f64,
    /// How it was measured.
    pub note: String,
}

impl ReadRow {
    /// A row from an operation count over `seconds` and a latency histogram in nanoseconds (a
    /// read from the cache takes about a microsecond: microseconds would round it away).
    pub fn measured(
        engine: &str,
        entry_bytes: u64,
        load: ReadLoad,
        operations: u64,
        seconds: f64,
        latency_ns: &Histogram<u64>,
    ) -> ReadRow {
        let ops_per_sec = operations as f64 / seconds.max(1e-9);
        let percentile = |quantile: f64| {
            if latency_ns.is_empty() {
                0.0
            } else {
                latency_ns.value_at_quantile(quantile) as f64 / 1e3
            }
        };
        ReadRow {
            engine: engine.to_string(),
            entry_bytes,
            load,
            ops_per_sec,
            mb_per_sec: ops_per_sec * entry_bytes as f64 / 1e6,
            p50_us: percentile(0.5),
            p99_us: percentile(0.99),
            ..ReadRow::default()
        }
    }

    /// The mean of runs of the same measurement (throughputs and percentiles alike), named
    /// and described as the first; an empty slice gives an empty row.
    pub fn mean_of(runs: &[&ReadRow]) -> ReadRow {
        let Some(first) = runs.first() else {
            return ReadRow::default();
        };
        let mean = |figure: fn(&ReadRow) -> f64| {
            runs.iter().map(|run| figure(run)).sum::<f64>() / runs.len() as f64
        };
        ReadRow {
            ops_per_sec: mean(|run| run.ops_per_sec),
            mb_per_sec: mean(|run| run.mb_per_sec),
            p50_us: mean(|run| run.p50_us),
            p99_us: mean(|run| run.p99_us),
            ..(*first).clone()
        }
    }

    /// The throughput of each of `runs`, for a note: how far apart the runs a mean was taken
    /// over were (the device drifts; a reader judges a ratio by it).
    pub fn runs_text(runs: &[ReadRow]) -> String {
        let figures: Vec<String> = runs
            .iter()
            .map(|run| format!("{:.0}", run.ops_per_sec))
            .collect();
        format!("runs {} ops/s", figures.join(", "))
    }

    /// Judges this row against `ceiling`: the ratios, and the ceiling's name.
    pub fn judge_against(&mut self, ceiling: &ReadRow, by_bytes: bool) {
        let ratio = |value: f64, base: f64| if base > 0.0 { value / base } else { 0.0 };
        self.ceiling = ceiling.engine.clone();
        self.ratio_to_ceiling = if by_bytes {
            ratio(self.mb_per_sec, ceiling.mb_per_sec)
        } else {
            ratio(self.ops_per_sec, ceiling.ops_per_sec)
        };
        self.p50_ratio_to_ceiling = ratio(self.p50_us, ceiling.p50_us);
    }

    /// The row as a JSON object.
    pub fn to_json(&self) -> Value {
        json!({
            "section": self.section,
            "engine": self.engine,
            "entry_bytes": self.entry_bytes,
            "threads": self.load.threads,
            "in_flight": self.load.in_flight,
            "readers_alongside": self.readers_alongside,
            "readers_paced_per_sec": self.readers_paced_per_sec,
            "ops_per_sec": self.ops_per_sec,
            "mb_per_sec": self.mb_per_sec,
            "p50_us": self.p50_us,
            "p99_us": self.p99_us,
            "ceiling": self.ceiling,
            "ratio_to_ceiling": self.ratio_to_ceiling,
            "p50_ratio_to_ceiling": self.p50_ratio_to_ceiling,
            "note": self.note,
        })
    }
}
