//! The read and restart sections' figures: one row per read measurement (sealog's tail, cold
//! and catch-up reads, the writer beside the tail readers, and the read ceilings they are
//! judged against), the rows' table and JSON (`reads.rows`), and issue 11's read targets. These
//! rows are not `cells`: the JSON contract of `cells` (appends, ratios to the write ceiling)
//! means nothing for a read, so they carry their own ratio, to the read ceiling they name.

use hdrhistogram::Histogram;
use serde_json::{json, Value};

use crate::report::Target;

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

/// The read table's header.
pub fn header() -> String {
    format!(
        "{:<9} {:<18} {:>7} {:>7} {:>6} {:>8} {:>11} {:>9} {:>8} {:>8} {:>7} {:>6}  {}",
        "reads",
        "engine",
        "bytes",
        "threads",
        "flight",
        "readers",
        "ops/s",
        "MB/s",
        "p50 us",
        "p99 us",
        "xceil",
        "xp50",
        "against"
    )
}

/// The readers column: reader threads beside a writer's row, and `@500k` when readers were
/// paced at 500 k reads/s in all (on a reader's row, its own pace).
fn readers_text(row: &ReadRow) -> String {
    let pace = if row.readers_paced_per_sec > 0.0 {
        format!("@{:.0}k", row.readers_paced_per_sec / 1e3)
    } else {
        String::new()
    };
    if row.readers_alongside > 0 || pace.is_empty() {
        format!("{}{pace}", row.readers_alongside)
    } else {
        pace
    }
}

/// One row of the read table.
pub fn row(row: &ReadRow) -> String {
    let judged = !row.ceiling.is_empty();
    let ratio = |value: f64| {
        if judged && value > 0.0 {
            format!("{value:.2}")
        } else {
            "-".to_string()
        }
    };
    format!(
        "{:<9} {:<18} {:>7} {:>7} {:>6} {:>8} {:>11.0} {:>9.1} {:>8.1} {:>8.1} {:>7} {:>6}  {}",
        row.section,
        row.engine,
        row.entry_bytes,
        row.load.threads,
        row.load.in_flight,
        readers_text(row),
        row.ops_per_sec,
        row.mb_per_sec,
        row.p50_us,
        row.p99_us,
        ratio(row.ratio_to_ceiling),
        ratio(row.p50_ratio_to_ceiling),
        if judged { row.ceiling.as_str() } else { "-" }
    )
}

use crate::reads::TAIL_READS_PER_SEC_GOAL;

/// The row of `section` and `engine` at `threads` and `in_flight`, if the run measured it.
pub fn find<'a>(
    rows: &'a [ReadRow],
    section: &str,
    engine: &str,
    load: ReadLoad,
) -> Option<&'a ReadRow> {
    rows.iter()
        .find(|row| row.section == section && row.engine == engine && row.load == load)
}

/// Issue 11's read targets from this run's read rows (a row the run did not measure leaves
/// its target "not measured").
pub fn targets(rows: &[ReadRow]) -> Vec<Target> {
    // The readers as fast as they go; the writer beside readers paced at the goal's rate.
    let tail_readers = rows.iter().find(|row| {
        row.section == SECTION_TAIL
            && row.engine == TAIL_READ
            && row.load == ReadLoad::blocking_threads(4)
            && row.readers_paced_per_sec == 0.0
    });
    let writer_with_readers = rows.iter().find(|row| {
        row.section == SECTION_TAIL
            && row.engine == TAIL_WRITER
            && row.readers_alongside == 4
            && row.readers_paced_per_sec > 0.0
    });
    let cold = |engine: &str, load: ReadLoad| {
        find(rows, SECTION_COLD, engine, load).filter(|row| !row.ceiling.is_empty())
    };
    let catch_up = rows
        .iter()
        .find(|row| row.section == SECTION_CATCH_UP && row.engine == CATCH_UP);
    vec![
        Target {
            name: "tail reads, 4 reader threads x 4 KiB while the writer appends: reads/s",
            value: tail_readers.map(|row| row.ops_per_sec),
            goal: TAIL_READS_PER_SEC_GOAL,
            higher_is_better: true,
        },
        Target {
            name: "tail reads: the writer's appends/s beside 4 readers reading 500 k/s over its \
                   no-reader figure",
            value: writer_with_readers
                .filter(|row| !row.ceiling.is_empty())
                .map(|row| row.ratio_to_ceiling),
            goal: 0.8,
            higher_is_better: true,
        },
        Target {
            name: "cold reads, 16 in flight (16 threads, blocking): reads/s over the built-in \
                   random-read ceiling's",
            value: cold(COLD_BLOCKING, ReadLoad::blocking_threads(16))
                .map(|row| row.ratio_to_ceiling),
            goal: 0.8,
            higher_is_better: true,
        },
        Target {
            name: "cold reads, 16 in flight (one thread, 16 futures): reads/s over the built-in \
                   random-read ceiling's",
            value: cold(COLD_ASYNC, ReadLoad::single_thread(16)).map(|row| row.ratio_to_ceiling),
            goal: 0.8,
            higher_is_better: true,
        },
        Target {
            name: "cold reads, 1 in flight: p50 over the built-in random-read ceiling's p50",
            value: cold(COLD_BLOCKING, ReadLoad::blocking_threads(1))
                .map(|row| row.p50_ratio_to_ceiling),
            goal: 1.2,
            higher_is_better: false,
        },
        Target {
            name: "catch-up iterator: MB/s over the sequential O_DIRECT read ceiling",
            value: catch_up
                .filter(|row| !row.ceiling.is_empty())
                .map(|row| row.ratio_to_ceiling),
            goal: 0.8,
            higher_is_better: true,
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(section: &'static str, engine: &str, load: ReadLoad, ops_per_sec: f64) -> ReadRow {
        ReadRow {
            section,
            engine: engine.to_string(),
            entry_bytes: 4096,
            load,
            ops_per_sec,
            mb_per_sec: ops_per_sec * 4096.0 / 1e6,
            p50_us: 1e6 / ops_per_sec,
            ..ReadRow::default()
        }
    }

    /// A row is judged against the ceiling it names, by operations or by bytes, and a target
    /// is judged only when its row ran and was judged.
    #[test]
    fn read_targets_judge_rows_against_their_ceilings() {
        let ceiling = row(
            SECTION_COLD,
            crate::ceiling::RANDOM_READ,
            ReadLoad::single_thread(16),
            100_000.0,
        );
        let mut blocking = row(
            SECTION_COLD,
            COLD_BLOCKING,
            ReadLoad::blocking_threads(16),
            90_000.0,
        );
        blocking.judge_against(&ceiling, false);
        assert_eq!(blocking.ceiling, crate::ceiling::RANDOM_READ);
        assert!((blocking.ratio_to_ceiling - 0.9).abs() < 1e-9);
        assert!((blocking.p50_ratio_to_ceiling - 100.0 / 90.0).abs() < 1e-9);
        let mut tail = row(
            SECTION_TAIL,
            TAIL_READ,
            ReadLoad::blocking_threads(4),
            400_000.0,
        );
        tail.mb_per_sec = 1.0;
        let targets = targets(&[blocking, tail]);
        assert_eq!(targets.len(), 6);
        assert_eq!(targets[0].held(), Some(false), "400 k/s is under 500 k/s");
        assert_eq!(targets[1].held(), None, "no writer row");
        assert_eq!(targets[2].held(), Some(true));
        assert_eq!(targets[3].held(), None, "no async row");
    }
}
