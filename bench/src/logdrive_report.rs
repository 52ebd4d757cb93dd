//! The LogDrive section's figures (`logdrive.rs` measures them): the write comparisons (each
//! engine's cells by round, judged on the median over the rounds of each round's ratio to the
//! raw engine's run in the same round), the read rows (the median
//! of each figure over a row's runs) and the weak_tail rows; their tables, their JSON (the
//! `logdrive` object: `writes`, `reads`, `weak_tail`; every write cell, and each engine's
//! medians, with the `cells` contract's fields) and issue 13's targets: a LogDrive write's p50
//! within 1.1x of a raw append's, and its throughput within 1.1x of the raw appends' on one and
//! on 1,000 LogDrives.

use hdrhistogram::Histogram;
use serde_json::{json, Value};

use crate::read_report::ReadRow;
use crate::report::{Cell, Target};

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

/// The most a LogDrive write may cost over a raw append: its p50 at most this times the raw
/// p50, its throughput at least the raw throughput over this.
pub const LOGDRIVE_OVER_RAW_MAX: f64 = 1.1;

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
    fn judged_on_p50(&self) -> bool {
        self.name == "latency"
    }

    /// The judged figure of a cell.
    fn judged(&self, cell: &Cell) -> f64 {
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
        crate::cells::median(&mut values)
    }

    /// Engine `engine`'s medians as a cell (each figure's own median over the rounds).
    pub fn median_cell(&self, engine: usize) -> Cell {
        let first = &self.cells[0][engine];
        Cell {
            appends_per_sec: self.median(engine, |cell| cell.appends_per_sec),
            mb_per_sec: self.median(engine, |cell| cell.mb_per_sec),
            p50_us: self.median(engine, |cell| cell.p50_us),
            p99_us: self.median(engine, |cell| cell.p99_us),
            p999_us: self.median(engine, |cell| cell.p999_us),
            max_us: self.median(engine, |cell| cell.max_us),
            batch_entries: self.median(engine, |cell| cell.batch_entries),
            batch_p50_us: self.median(engine, |cell| cell.batch_p50_us),
            cpu_us_per_append: self.median(engine, |cell| cell.cpu_us_per_append),
            ratio_to_ceiling: self.median(engine, |cell| cell.ratio_to_ceiling),
            p50_ratio_to_ceiling: self.median(engine, |cell| cell.p50_ratio_to_ceiling),
            p99_ratio_to_ceiling: self.median(engine, |cell| cell.p99_ratio_to_ceiling),
            ..Cell::empty(
                &first.engine,
                first.payload_bytes,
                first.writers,
                first.in_flight,
            )
        }
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
        (!ratios.is_empty()).then(|| crate::cells::median(&mut ratios))
    }

    /// The index of `engine`, if this comparison ran it.
    fn engine_index(&self, engine: WriteEngine) -> Option<usize> {
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

/// The read rows of `phase` from its runs (by round, then by engine: the raw blocking read,
/// the raw async read, the LogDrive read): each engine's row the median of each figure over
/// its runs; the raw async read and the LogDrive read judged against the raw blocking read.
pub fn read_rows(phase: ReadPhase, runs: &[Vec<ReadRow>]) -> Vec<ReadRow> {
    let engines = runs.first().map_or(0, Vec::len);
    let mut rows: Vec<ReadRow> = (0..engines)
        .map(|engine| {
            let median = |figure: fn(&ReadRow) -> f64| {
                let mut values: Vec<f64> =
                    runs.iter().map(|round| figure(&round[engine])).collect();
                crate::cells::median(&mut values)
            };
            let figures: Vec<String> = runs
                .iter()
                .map(|round| {
                    let run = &round[engine];
                    format!("{:.1}/{:.1} us ({})", run.p50_us, run.p99_us, run.note)
                })
                .collect();
            ReadRow {
                ops_per_sec: median(|row| row.ops_per_sec),
                mb_per_sec: median(|row| row.mb_per_sec),
                p50_us: median(|row| row.p50_us),
                p99_us: median(|row| row.p99_us),
                note: format!(
                    "{}: medians of {} runs, one read at a time; runs p50/p99 {}",
                    phase_text(phase),
                    runs.len(),
                    figures.join(", ")
                ),
                ..runs[0][engine].clone()
            }
        })
        .collect();
    if let Some((raw, others)) = rows.split_first_mut() {
        for row in others {
            row.judge_against(raw, false);
        }
    }
    rows
}

fn phase_text(phase: ReadPhase) -> &'static str {
    match phase {
        ReadPhase::Cached => "the read LogDrive's newest 4,096 entries, in the recent-entry cache",
        ReadPhase::Cold => "any of the read LogDrive's 16,384 entries, the drive's cache off",
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
    fn comparison(&self, name: &str) -> Option<&WriteComparison> {
        self.writes
            .iter()
            .find(|comparison| comparison.name == name)
    }
}

/// The section's tables and lines for the terminal.
pub fn lines(figures: &LogDriveFigures) -> Vec<String> {
    let mut lines = write_lines(figures);
    lines.extend(read_lines(&figures.reads));
    lines.extend(weak_tail_lines(&figures.weak_tail));
    lines.push(format!(
        "the logdrive section took {:.0} s",
        figures.seconds
    ));
    lines
}

/// The write comparisons' table: each engine's medians, the judged figure of every round, its
/// median and the ratio to the raw engine's.
fn write_lines(figures: &LogDriveFigures) -> Vec<String> {
    let Some(first) = figures.writes.first() else {
        return Vec::new();
    };
    let mut lines =
        vec![
            format!(
            "logdrive writes: LogDrive writes against the raw engine's appends, {} B payloads, \
             interleaved rounds (latency {}, throughput {}: as many as engines, or a multiple), \
             each run {:.2} s after {:.2} s of warm-up, in a balanced order (each engine \
             equally often in every position and right after every other engine); each figure \
             the median over the rounds, and xraw the median of the rounds' ratios",
            first.cells[0][0].payload_bytes,
            figures.comparison("latency").map_or(0, |c| c.cells.len()),
            figures.comparison("throughput").map_or(0, |c| c.cells.len()),
            first.seconds_per_run,
            first.warmup_seconds_per_run
        ),
            format!(
                concat!(
                    "{:<11} {:<16} {:>6} {:>7} {:>6} {:>10} {:>8} {:>7} {:>7} {:>6} {:>6} {:>5}",
                    "  {:<34} {:>5}"
                ),
                "logdrive",
                "engine",
                "drives",
                "writers",
                "flight",
                "writes/s",
                "MB/s",
                "p50 us",
                "p99 us",
                "batch",
                "CPU us",
                "xCPU",
                "judged: by round",
                "xraw"
            ),
        ];
    for comparison in &figures.writes {
        for (index, engine) in comparison.engines.iter().enumerate() {
            lines.push(write_row(comparison, index, *engine));
        }
    }
    lines.push(
        "xraw: the median over the rounds of the judged figure over the raw engine's in the \
         same round (writes/s: higher is better; p50: lower is better); drives: LogDrives \
         written (- the raw engine, which appends); CPU us: the process's CPU per write \
         acknowledged (writers, drive thread and kernel), xCPU: over the raw engine's; \
         sealog-control: the raw engine's appends again in the same rounds, so its xraw is \
         this run's noise"
            .to_string(),
    );
    let noise: Vec<String> = figures
        .writes
        .iter()
        .filter_map(|comparison| {
            let control = comparison.engine_index(WriteEngine::RawControl)?;
            let ratio = comparison.over_raw(control)?;
            Some(format!("{} {ratio:.3}", comparison.name))
        })
        .collect();
    if !noise.is_empty() {
        lines.push(format!(
            "noise floor of this run (the raw engine over itself, judged as the LogDrive rows \
             are): {}; the 1.1x targets tell the paths apart only where these stay near 1",
            noise.join(", ")
        ));
    }
    lines
}

fn write_row(comparison: &WriteComparison, index: usize, engine: WriteEngine) -> String {
    let cell = comparison.median_cell(index);
    let by_round: Vec<String> = comparison
        .cells
        .iter()
        .map(|round| format!("{:.0}", comparison.judged(&round[index])))
        .collect();
    let judged = format!(
        "{} {}",
        if comparison.judged_on_p50() {
            "p50"
        } else {
            "w/s"
        },
        by_round.join(" ")
    );
    let over_raw = |ratio: Option<f64>, precision: usize| match ratio.filter(|_| index > 0) {
        Some(ratio) => format!("{ratio:.precision$}"),
        None => "-".to_string(),
    };
    let raw_cpu = comparison.median(0, |cell| cell.cpu_us_per_append);
    let cpu_ratio = (raw_cpu > 0.0).then(|| cell.cpu_us_per_append / raw_cpu);
    let drives = match engine.logdrives() {
        0 => "-".to_string(),
        count => count.to_string(),
    };
    format!(
        concat!(
            "{:<11} {:<16} {:>6} {:>7} {:>6} {:>10.0} {:>8.1} {:>7.0} {:>7.0} {:>6.1} {:>6.1}",
            " {:>5}  {:<34} {:>5}"
        ),
        comparison.name,
        cell.engine,
        drives,
        cell.writers,
        cell.in_flight,
        cell.appends_per_sec,
        cell.mb_per_sec,
        cell.p50_us,
        cell.p99_us,
        cell.batch_entries,
        cell.cpu_us_per_append,
        over_raw(cpu_ratio, 2),
        judged,
        over_raw(comparison.over_raw(index), 3)
    )
}

/// The read rows' table.
fn read_lines(rows: &[ReadRow]) -> Vec<String> {
    if rows.is_empty() {
        return Vec::new();
    }
    let mut lines = vec![format!(
        "{:<16} {:<24} {:>6} {:>10} {:>8} {:>8} {:>7} {:>6}  {}",
        "logdrive reads",
        "engine",
        "bytes",
        "reads/s",
        "p50 us",
        "p99 us",
        "xops",
        "xp50",
        "against"
    )];
    for row in rows {
        let judged = !row.ceiling.is_empty();
        let ratio = |value: f64| {
            if judged {
                format!("{value:.2}")
            } else {
                "-".to_string()
            }
        };
        lines.push(format!(
            "{:<16} {:<24} {:>6} {:>10.0} {:>8.1} {:>8.1} {:>7} {:>6}  {}",
            row.section,
            row.engine,
            row.entry_bytes,
            row.ops_per_sec,
            row.p50_us,
            row.p99_us,
            ratio(row.ratio_to_ceiling),
            ratio(row.p50_ratio_to_ceiling),
            if judged { row.ceiling.as_str() } else { "-" }
        ));
    }
    lines.push(format!(
        "logdrive reads: one read at a time on one thread, 4 KiB entries of one LogDrive, \
         medians of {} interleaved rounds; cached: its newest 4,096 entries (in the drive's \
         recent-entry cache); cold: any of its 16,384, the drive reopened with its cache off; \
         xops, xp50: reads/s and p50 over the raw blocking read's (shown, not judged)",
        crate::logdrive::ROUNDS
    ));
    lines
}

/// The weak_tail rows' table.
fn weak_tail_lines(rows: &[WeakTailRow]) -> Vec<String> {
    if rows.is_empty() {
        return Vec::new();
    }
    let mut lines = vec![format!(
        "{:<10} {:>5} {:<14} {:>6} {:>6} {:>6} {:>9} {:>9} {:>9}",
        "weak_tail", "K", "window", "N", "T", "holes", "calls/s", "p50 ns", "p99 ns"
    )];
    for row in rows {
        lines.push(format!(
            "{:<10} {:>5} {:<14} {:>6} {:>6} {:>6} {:>9.0} {:>9.0} {:>9.0}",
            "weak_tail",
            row.case.k,
            row.case.label(),
            row.case.n(),
            row.case.t(),
            row.case.holes(),
            row.calls_per_sec,
            row.p50_ns,
            row.p99_ns
        ));
    }
    lines.push(format!(
        "weak_tail: one call at a time on one thread (waited on with sealog_logdrive::wait) on a \
         LogDrive with {} addresses written below its window [N - K, N); holes: every {}th \
         address of the window, the first at N - K",
        WeakTailCase::BELOW,
        WeakTailCase::HOLE_EVERY
    ));
    lines
}

/// A write cell as JSON: the `cells` contract's fields, and the LogDrives it wrote.
fn write_cell_json(cell: &Cell, engine: WriteEngine) -> Value {
    let mut value = cell.to_json();
    value["logdrives"] = json!(engine.logdrives());
    value["control"] = json!(engine == WriteEngine::RawControl);
    value
}

/// The section as the JSON document's `logdrive` object.
pub fn to_json(figures: &LogDriveFigures) -> Value {
    let writes: Vec<Value> = figures
        .writes
        .iter()
        .map(|comparison| {
            let mut runs = Vec::new();
            for (round, cells) in comparison.cells.iter().enumerate() {
                let order = crate::rounds::round_order(comparison.engines.len(), round);
                for (position, engine) in order.into_iter().enumerate() {
                    let mut run = write_cell_json(&cells[engine], comparison.engines[engine]);
                    run["round"] = json!(round + 1);
                    run["position"] = json!(position + 1);
                    runs.push(run);
                }
            }
            let medians: Vec<Value> = comparison
                .engines
                .iter()
                .enumerate()
                .map(|(index, engine)| {
                    let mut median = write_cell_json(&comparison.median_cell(index), *engine);
                    median["over_raw"] = json!((index > 0).then(|| comparison.over_raw(index)));
                    median
                })
                .collect();
            let judged_figure = if comparison.judged_on_p50() {
                "p50_us"
            } else {
                "appends_per_sec"
            };
            json!({
                "name": comparison.name,
                "judged_figure": judged_figure,
                "rounds": comparison.cells.len(),
                "seconds_per_run": comparison.seconds_per_run,
                "warmup_seconds_per_run": comparison.warmup_seconds_per_run,
                "total_seconds": comparison.total_seconds,
                "runs": runs,
                "medians": medians,
            })
        })
        .collect();
    json!({
        "payload_bytes": crate::logdrive::PAYLOAD_BYTES,
        "seconds": figures.seconds,
        "writes": writes,
        "reads": figures.reads.iter().map(ReadRow::to_json).collect::<Vec<_>>(),
        "weak_tail": figures.weak_tail.iter().map(WeakTailRow::to_json).collect::<Vec<_>>(),
    })
}

/// Issue 13's targets (not measured when the section did not run).
pub fn targets(figures: Option<&LogDriveFigures>) -> Vec<Target> {
    let ratio = |name: &str, logdrives: usize| {
        let comparison = figures?.comparison(name)?;
        comparison.over_raw(comparison.engine_index(WriteEngine::LogDrives(logdrives))?)
    };
    vec![
        Target {
            name: "LogDrive write, 1 writer x 4 KiB, 1 in flight: p50 over the raw append's p50 \
                   (median of 3 interleaved rounds' ratios)",
            value: ratio("latency", 1),
            goal: LOGDRIVE_OVER_RAW_MAX,
            higher_is_better: false,
        },
        Target {
            name: "LogDrive writes on one LogDrive, 8 writers x 32 in flight x 4 KiB: writes/s \
                   over the raw appends/s (median of 12 interleaved rounds' ratios)",
            value: ratio("throughput", 1),
            goal: 1.0 / LOGDRIVE_OVER_RAW_MAX,
            higher_is_better: true,
        },
        Target {
            name: "LogDrive writes over 1,000 LogDrives, 8 writers x 32 in flight x 4 KiB: \
                   writes/s over the raw appends/s (median of 12 interleaved rounds' ratios)",
            value: ratio("throughput", crate::logdrive::MANY_LOGDRIVES),
            goal: 1.0 / LOGDRIVE_OVER_RAW_MAX,
            higher_is_better: true,
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(engine: &str, writers: u64, appends_per_sec: f64, p50_us: f64) -> Cell {
        Cell {
            appends_per_sec,
            mb_per_sec: appends_per_sec * 4096.0 / 1e6,
            p50_us,
            ..Cell::empty(engine, 4096, writers, if writers == 1 { 1 } else { 32 })
        }
    }

    /// (appends/s, p50) of the raw engine, one LogDrive and 1,000 LogDrives, per round.
    fn throughput(figures: [[(f64, f64); 3]; 3]) -> WriteComparison {
        let engines = vec![
            WriteEngine::Raw,
            WriteEngine::LogDrives(1),
            WriteEngine::LogDrives(1000),
        ];
        let cells = figures
            .iter()
            .map(|round| {
                round
                    .iter()
                    .zip(&engines)
                    .map(|(&(rate, p50), engine)| cell(engine.engine(), 8, rate, p50))
                    .collect()
            })
            .collect();
        WriteComparison {
            name: "throughput",
            engines,
            cells,
            seconds_per_run: 0.75,
            warmup_seconds_per_run: 0.15,
            total_seconds: 10.0,
        }
    }

    /// Throughput is judged on the median of the rounds' ratios of writes/s (a round that a
    /// stall of either side spoiled dropped), latency on the median of the rounds' ratios of
    /// p50; each target against 1.1x.
    #[test]
    fn targets_judge_the_rounds_ratios_median_against_one_point_one() {
        let throughput = throughput([
            [(100_000.0, 2000.0), (95_000.0, 2100.0), (10_000.0, 9000.0)],
            [(20_000.0, 9000.0), (96_000.0, 2050.0), (88_000.0, 2300.0)],
            [(98_000.0, 2050.0), (5_000.0, 9999.0), (89_000.0, 2200.0)],
        ]);
        assert_eq!(throughput.median(0, |cell| cell.appends_per_sec), 98_000.0);
        // Rounds' ratios 0.95, 4.8 (the raw run stalled) and 0.05 (the LogDrive run did).
        let one = throughput.over_raw(1).expect("judged");
        assert!((one - 0.95).abs() < 1e-12);
        // 0.1, 4.4 and 0.908: short of 1 / 1.1 (the ratio of the medians would be 0.898).
        let many = throughput.over_raw(2).expect("judged");
        assert!((many - 89_000.0 / 98_000.0).abs() < 1e-12);
        let mut latency = throughput.clone();
        latency.name = "latency";
        latency.engines.truncate(2);
        for round in &mut latency.cells {
            round.truncate(2);
        }
        let p50 = latency.over_raw(1).expect("judged");
        assert!((p50 - 2100.0 / 2000.0).abs() < 1e-12);
        let figures = LogDriveFigures {
            writes: vec![latency, throughput],
            reads: Vec::new(),
            weak_tail: Vec::new(),
            seconds: 1.0,
        };
        let targets = targets(Some(&figures));
        let held: Vec<Option<bool>> = targets.iter().map(Target::held).collect();
        assert_eq!(held, [Some(true), Some(true), Some(false)]);
        assert!(super::targets(None)
            .iter()
            .all(|target| target.held().is_none()));
        let json = to_json(&figures);
        assert_eq!(json["writes"][1]["runs"].as_array().map(Vec::len), Some(9));
        assert_eq!(json["writes"][1]["runs"][3]["logdrives"], 1);
        assert_eq!(json["writes"][1]["medians"][2]["logdrives"], 1000);
        assert_eq!(json["writes"][1]["medians"][0]["over_raw"], Value::Null);
        assert_eq!(json["writes"][1]["medians"][1]["control"], false);
        assert_eq!(lines(&figures).len(), 2 + 5 + 1 + 1);
    }

    /// The control (the raw engine run again) is judged as a LogDrive row is, and its ratio is
    /// printed as the run's noise floor.
    #[test]
    fn the_control_run_gives_the_noise_floor() {
        let mut latency = throughput([
            [(100.0, 200.0), (100.0, 220.0), (100.0, 190.0)],
            [(100.0, 210.0), (100.0, 200.0), (100.0, 200.0)],
            [(100.0, 190.0), (100.0, 230.0), (100.0, 210.0)],
        ]);
        latency.name = "latency";
        latency.engines = vec![
            WriteEngine::Raw,
            WriteEngine::RawControl,
            WriteEngine::LogDrives(1),
        ];
        let control = latency.over_raw(1).expect("judged");
        assert!((control - 220.0 / 200.0).abs() < 1e-12);
        let figures = LogDriveFigures {
            writes: vec![latency],
            reads: Vec::new(),
            weak_tail: Vec::new(),
            seconds: 1.0,
        };
        let text = lines(&figures).join("\n");
        assert!(text.contains("noise floor of this run"), "{text}");
        assert!(text.contains("latency 1.100"), "{text}");
        assert_eq!(
            to_json(&figures)["writes"][0]["medians"][1]["control"],
            true
        );
        // The LogDrive's rounds: 190/200, 200/210, 210/190.
        assert_eq!(targets(Some(&figures))[0].value, Some(200.0 / 210.0));
    }

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
