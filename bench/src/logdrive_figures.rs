//! The LogDrive section's figures, which `logdrive.rs` measures and `logdrive_report.rs` prints
//! and judges: the write comparisons (each engine's cells by round, judged on the median over
//! the rounds of each round's ratio to the raw engine's run in the same round), the read
//! phases, the weak_tail cases and rows, the engine names of the section's rows, and the
//! constants its report shares with its runner (the payload, the read rounds, the spread
//! throughput run's LogDrives). A leaf: it imports only other leaves, so that the runner and
//! the report share it without importing each other.

use hdrhistogram::Histogram;
use serde_json::{json, Value};

use crate::cell::Cell;
use crate::median::median;
use crate::read_row::ReadRow;

/// The payload of every write and read of the section: 4 KiB, the raw cells' size.
pub const PAYLOAD_BYTES: usize = 4096;
/// Interleaved rounds of the reads (the writes run as many rounds as they have engines, so
/// that each engine runs once in every position and after every other engine).
pub const ROUNDS: usize = 3;
/// The LogDrives the spread throughput run writes over.
pub const MANY_LOGDRIVES: usize = 1000;

/// The engine name of the raw engine's write cells (the write section's name for them).
pub const RAW_ENGINE: &str = "sealog";
/// The engine name of the LogDrive write cells.
pub const LOGDRIVE_ENGINE: &str = "sealog-logdrive";
/// The engine name of the raw engine's appends run a second time in the same rounds: the
/// control, whose ratio to the first is the comparison's noise floor.
pub const CONTROL_ENGINE: &str = "sealog-control";
/// The raw engine's blocking read (`Drive::read_entry`).
pub const RAW_READ: &str = "sealog-read-entry";
/// The raw engine's async read (`Drive::read_entry_async`, waited on as a LogDrive read is).
pub const RAW_READ_ASYNC: &str = "sealog-read-entry-async";
/// The LogDrive read (`LocalLogDrive::read`).
pub const LOGDRIVE_READ: &str = "sealog-logdrive-read";

/// Which engine a write run uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteEngine {
    /// The raw engine's appends.
    Raw,
    /// The raw engine's appends again, in the same rounds: what its ratio to [`Raw`] shows is
    /// noise, the margin within which this run can tell two write paths apart.
    ///
    /// [`Raw`]: WriteEngine::Raw
    RawControl,
    /// LogDrive writes spread over this many LogDrives.
    LogDrives(usize),
}

impl WriteEngine {
    /// The engine's name in the cells.
    pub fn engine(self) -> &'static str {
        match self {
            WriteEngine::Raw => RAW_ENGINE,
            WriteEngine::RawControl => CONTROL_ENGINE,
            WriteEngine::LogDrives(_) => LOGDRIVE_ENGINE,
        }
    }

    /// LogDrives written (0: the raw engine).
    pub fn logdrives(self) -> usize {
        match self {
            WriteEngine::Raw | WriteEngine::RawControl => 0,
            WriteEngine::LogDrives(count) => count,
        }
    }

    /// For progress lines.
    pub fn label(self) -> String {
        match self {
            WriteEngine::Raw => "the raw engine's appends".to_string(),
            WriteEngine::RawControl => "the raw engine's appends again (control)".to_string(),
            WriteEngine::LogDrives(1) => "LogDrive writes on one LogDrive".to_string(),
            WriteEngine::LogDrives(count) => format!("LogDrive writes over {count} LogDrives"),
        }
    }
}

/// One write comparison: the raw engine (engine 0) and LogDrive writes under one load.
#[derive(Clone, Debug)]
pub struct WriteComparison {
    /// "latency" (judged on p50) or "throughput" (judged on writes per second).
    pub name: &'static str,
    /// The engines, in the first round's order.
    pub engines: Vec<WriteEngine>,
    /// Cells by round, then by engine.
    pub cells: Vec<Vec<Cell>>,
    /// Measured time of each run, after its warm-up.
    pub seconds_per_run: f64,
    /// Warm-up of each run.
    pub warmup_seconds_per_run: f64,
    /// What the comparison added to the run, every open and close included.
    pub total_seconds: f64,
}

impl WriteComparison {
    /// Whether it is judged on p50 (lower is better) rather than on writes per second.
    pub fn judged_on_p50(&self) -> bool {
        self.name == "latency"
    }

    /// The judged figure of a cell.
    pub fn judged(&self, cell: &Cell) -> f64 {
        if self.judged_on_p50() {
            cell.p50_us
        } else {
            cell.appends_per_sec
        }
    }

    /// The median over the rounds of engine `engine`'s `figure`.
    pub fn median(&self, engine: usize, figure: impl Fn(&Cell) -> f64) -> f64 {
        let mut values: Vec<f64> = self
            .cells
            .iter()
            .map(|round| figure(&round[engine]))
            .collect();
        median(&mut values)
    }

    /// Engine `engine`'s medians as a cell (each figure's own median over the rounds).
    pub fn median_cell(&self, engine: usize) -> Cell {
        crate::cell::median_cell(&self.cells, engine)
    }

    /// The judged ratio of engine `engine`: the median over the rounds of its judged figure
    /// over the raw engine's in the same round. Paired by round because the device's speed
    /// drifts and jumps between runs (this project's virtual disk ran the same raw workload
    /// at 140,000 and at 200,000 appends/s a few seconds apart, and either way for seconds),
    /// and the runs of one round lie within seconds of each other, so a round's ratio
    /// cancels most of what the device did then; the median of the rounds' ratios drops a
    /// round that a stall of either run spoiled. Over nine runs of the section, the raw
    /// engine's control came to a standard deviation of 0.063 this way and of 0.085 as the
    /// ratio of the two engines' medians over the rounds (which compares how many of each
    /// engine's runs the device happened to run fast).
    pub fn over_raw(&self, engine: usize) -> Option<f64> {
        let mut ratios: Vec<f64> = self
            .cells
            .iter()
            .filter_map(|round| {
                let raw = self.judged(&round[0]);
                let this = self.judged(&round[engine]);
                (raw > 0.0 && this > 0.0).then(|| this / raw)
            })
            .collect();
        (!ratios.is_empty()).then(|| median(&mut ratios))
    }

    /// The index of `engine`, if this comparison ran it.
    pub fn engine_index(&self, engine: WriteEngine) -> Option<usize> {
        self.engines.iter().position(|ran| *ran == engine)
    }

    /// Fills every cell's ratios to the write section's ceilings.
    pub fn set_ratios(&mut self, ceiling_mb: f64, ceiling_p50: f64, ceiling_p99: f64) {
        for cell in self.cells.iter_mut().flatten() {
            cell.set_ratios(ceiling_mb, ceiling_p50, ceiling_p99);
        }
    }
}

/// The read phases: entries in the recent-entry cache, and on the device (cache off).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadPhase {
    /// The newest entries, served from the drive's recent-entry cache.
    Cached,
    /// Any entry, the drive opened with its cache off: every read reads the device.
    Cold,
}

impl ReadPhase {
    /// The rows' section name.
    pub fn section(self) -> &'static str {
        match self {
            ReadPhase::Cached => "logdrive-cached",
            ReadPhase::Cold => "logdrive-cold",
        }
    }
}

/// One weak_tail case: the window K and whether the window has holes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WeakTailCase {
    /// The window asked for.
    pub k: u64,
    /// Whether every 16th address of the window [N - K, N) is a hole (else it is fully written).
    pub with_holes: bool,
}

impl WeakTailCase {
    /// Addresses written below the window, so the index has a history under it.
    pub const BELOW: u64 = 4096;
    /// A hole at every this many addresses of the window, from its first.
    pub const HOLE_EVERY: u64 = 16;
    /// The cases, in the order they run.
    pub const ALL: [WeakTailCase; 4] = [
        WeakTailCase {
            k: 64,
            with_holes: false,
        },
        WeakTailCase {
            k: 64,
            with_holes: true,
        },
        WeakTailCase {
            k: 4096,
            with_holes: false,
        },
        WeakTailCase {
            k: 4096,
            with_holes: true,
        },
    ];

    /// N: one past the last address written.
    pub fn n(self) -> u64 {
        Self::BELOW + self.k
    }

    /// Whether `address` is left unwritten.
    pub fn is_hole(self, address: u64) -> bool {
        self.with_holes && address >= Self::BELOW && (address - Self::BELOW) % Self::HOLE_EVERY == 0
    }

    /// T: the first hole (N - K), or N.
    pub fn t(self) -> u64 {
        if self.with_holes {
            Self::BELOW
        } else {
            self.n()
        }
    }

    /// The holes weak_tail reports.
    pub fn holes(self) -> u64 {
        if self.with_holes {
            self.k / Self::HOLE_EVERY
        } else {
            0
        }
    }

    /// For the table and progress lines.
    pub fn label(self) -> &'static str {
        if self.with_holes {
            "holes"
        } else {
            "fully written"
        }
    }
}

/// What one weak_tail case measured.
#[derive(Clone, Debug)]
pub struct WeakTailRow {
    /// The case.
    pub case: WeakTailCase,
    /// Calls timed.
    pub calls: u64,
    /// Calls per second, one at a time.
    pub calls_per_sec: f64,
    /// Each call's time, nanoseconds: p50, p99.
    pub p50_ns: f64,
    /// p99.
    pub p99_ns: f64,
}

impl WeakTailRow {
    /// A row from a call count over `seconds` and a latency histogram in nanoseconds.
    pub fn measured(
        case: WeakTailCase,
        calls: u64,
        seconds: f64,
        latency_ns: &Histogram<u64>,
    ) -> WeakTailRow {
        let percentile = |quantile: f64| {
            if latency_ns.is_empty() {
                0.0
            } else {
                latency_ns.value_at_quantile(quantile) as f64
            }
        };
        WeakTailRow {
            case,
            calls,
            calls_per_sec: calls as f64 / seconds.max(1e-9),
            p50_ns: percentile(0.5),
            p99_ns: percentile(0.99),
        }
    }

    /// The row as JSON.
    pub fn to_json(&self) -> Value {
        json!({
            "k": self.case.k,
            "window": if self.case.with_holes { "holes" } else { "fully_written" },
            "n": self.case.n(),
            "t": self.case.t(),
            "holes": self.case.holes(),
            "calls": self.calls,
            "calls_per_sec": self.calls_per_sec,
            "p50_ns": self.p50_ns,
            "p99_ns": self.p99_ns,
        })
    }
}

/// What the LogDrive section measured.
#[derive(Clone, Debug)]
pub struct LogDriveFigures {
    /// The latency comparison, then the throughput comparison.
    pub writes: Vec<WriteComparison>,
    /// The read rows: cached, then cold.
    pub reads: Vec<ReadRow>,
    /// The weak_tail rows, in [`WeakTailCase::ALL`]'s order.
    pub weak_tail: Vec<WeakTailRow>,
    /// The section's time, the ring's format included.
    pub seconds: f64,
}

impl LogDriveFigures {
    /// The write comparison named `name` ("latency" or "throughput"), if the section ran it.
    pub fn comparison(&self, name: &str) -> Option<&WriteComparison> {
        self.writes
            .iter()
            .find(|comparison| comparison.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The weak_tail cases: the window is [N - K, N) above 4,096 addresses written; with holes,
    /// T is the window's first address and every 16th of it is a hole, within the window K.
    #[test]
    fn weak_tail_cases_keep_their_window() {
        for case in WeakTailCase::ALL {
            let holes = (0..case.n()).filter(|a| case.is_hole(*a)).count() as u64;
            assert_eq!(holes, case.holes(), "{case:?}");
            assert!(case.n() - case.t() <= case.k, "{case:?}");
            assert!(!case.is_hole(case.n() - 1), "{case:?}: N - 1 is written");
            if case.with_holes {
                assert!(case.is_hole(case.t()), "{case:?}");
                assert_eq!(case.n() - case.t(), case.k, "{case:?}: the whole window");
            }
        }
    }
}
