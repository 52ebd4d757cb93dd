//! The LogDrive section's report (`logdrive.rs` measures it, `logdrive_figures.rs` holds its
//! figures): the read rows of each phase (the median of each figure over a row's runs), the
//! tables of the write comparisons, reads and weak_tail, the JSON (the `logdrive` object:
//! `writes`, `reads`, `weak_tail`; every write cell, and each engine's medians, with the
//! `cells` contract's fields) and issue 13's targets: a LogDrive write's p50 within 1.1x of a
//! raw append's, and its throughput within 1.1x of the raw appends' on one and on 1,000
//! LogDrives.

use serde_json::{json, Value};

use crate::cell::Cell;
use crate::logdrive_figures::{
    LogDriveFigures, ReadPhase, WeakTailCase, WeakTailRow, WriteComparison, WriteEngine,
    MANY_LOGDRIVES, PAYLOAD_BYTES, ROUNDS,
};
use crate::median::median;
use crate::read_row::ReadRow;
use crate::rounds::round_order;
use crate::target::Target;

/// The most a LogDrive write may cost over a raw append: its p50 at most this times the raw
/// p50, its throughput at least the raw throughput over this.
pub const LOGDRIVE_OVER_RAW_MAX: f64 = 1.1;

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
                median(&mut values)
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
    let mut lines = vec![write_intro(figures, first), write_header()];
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
    lines.extend(noise_line(figures));
    lines
}

/// The line above the write table: how the comparisons ran (`first` is the first of them).
fn write_intro(figures: &LogDriveFigures, first: &WriteComparison) -> String {
    format!(
        "logdrive writes: LogDrive writes against the raw engine's appends, {} B payloads, \
         interleaved rounds (latency {}, throughput {}: as many as engines, or a multiple), \
         each run {:.2} s after {:.2} s of warm-up, in a balanced order (each engine \
         equally often in every position and right after every other engine); each figure \
         the median over the rounds, and xraw the median of the rounds' ratios",
        first.cells[0][0].payload_bytes,
        figures.comparison("latency").map_or(0, |c| c.cells.len()),
        figures
            .comparison("throughput")
            .map_or(0, |c| c.cells.len()),
        first.seconds_per_run,
        first.warmup_seconds_per_run
    )
}

/// The write table's header.
fn write_header() -> String {
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
    )
}

/// The line under the write table with the control's ratio to the raw engine in each
/// comparison that ran one: the noise floor against which a LogDrive row's ratio is read
/// (none when no comparison ran the control).
fn noise_line(figures: &LogDriveFigures) -> Option<String> {
    let noise: Vec<String> = figures
        .writes
        .iter()
        .filter_map(|comparison| {
            let control = comparison.engine_index(WriteEngine::RawControl)?;
            let ratio = comparison.over_raw(control)?;
            Some(format!("{} {ratio:.3}", comparison.name))
        })
        .collect();
    (!noise.is_empty()).then(|| {
        format!(
            "noise floor of this run (the raw engine over itself, judged as the LogDrive rows \
             are): {}; the 1.1x targets tell the paths apart only where these stay near 1",
            noise.join(", ")
        )
    })
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
        ROUNDS
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
                let order = round_order(comparison.engines.len(), round);
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
        "payload_bytes": PAYLOAD_BYTES,
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
            value: ratio("throughput", MANY_LOGDRIVES),
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
}
