//! The server section's figures, its table and its JSON. Each row is one engine at one
//! depth: the median over the interleaved rounds of its appends/s, p50, p99 and CPU per
//! append, and the medians of the per-round ratios to the raw engine's append and to the
//! AtomicLog over a local quorum (each round's engines ran back to back, so a round's ratio
//! compares like with like on a noisy machine).

use serde_json::{json, Value};

use crate::compose::Run;
use crate::median::median;
use crate::server_section::ServerEngine;

/// The engines, in the order of the table (the first two are the comparisons).
pub const ENGINES: [ServerEngine; 5] = [
    ServerEngine::Raw,
    ServerEngine::LocalQuorum,
    ServerEngine::LogPlain,
    ServerEngine::LogTls,
    ServerEngine::LogTls2,
];

/// What the section measured.
pub struct ServerFigures {
    /// A row per engine and depth.
    pub rows: Vec<ServerRow>,
    /// The section's wall time, seconds.
    pub seconds: f64,
}

/// One engine at one depth.
pub struct ServerRow {
    /// The engine.
    pub engine: ServerEngine,
    /// Appends in flight.
    pub in_flight: usize,
    /// Rounds measured.
    pub rounds: usize,
    /// Median appends per second.
    pub appends_per_sec: f64,
    /// Median p50 latency, microseconds.
    pub p50_us: f64,
    /// Median p99 latency, microseconds.
    pub p99_us: f64,
    /// Median CPU per append (the whole process), microseconds.
    pub cpu_us_per_append: f64,
    /// Median ratio of appends/s to the raw engine's in the same round.
    pub over_raw: f64,
    /// Median ratio of appends/s to the AtomicLog over a local quorum in the same round.
    pub over_local: f64,
}

impl ServerRow {
    /// The rows of `runs` (rounds of every engine in `ENGINES` order) at `in_flight`.
    pub fn from_rounds(runs: &[Vec<Run>], in_flight: usize) -> Vec<ServerRow> {
        let of = |engine: usize, figure: fn(&Run) -> f64| -> Vec<f64> {
            runs.iter().map(|round| figure(&round[engine])).collect()
        };
        let ratio = |engine: usize, base: usize| {
            let mut ratios: Vec<f64> = runs
                .iter()
                .map(|round| round[engine].0.appends_per_sec / round[base].0.appends_per_sec)
                .collect();
            median(&mut ratios)
        };
        (0..ENGINES.len())
            .map(|engine| ServerRow {
                engine: ENGINES[engine],
                in_flight,
                rounds: runs.len(),
                appends_per_sec: median(&mut of(engine, |run| run.0.appends_per_sec)),
                p50_us: median(&mut of(engine, |run| run.0.p50_us)),
                p99_us: median(&mut of(engine, |run| run.0.p99_us)),
                cpu_us_per_append: median(&mut of(engine, |run| run.0.cpu_us_per_append)),
                over_raw: ratio(engine, 0),
                over_local: ratio(engine, 1),
            })
            .collect()
    }
}

/// The table.
pub fn lines(figures: &ServerFigures) -> Vec<String> {
    let mut lines = vec![
        format!(
            "Replicated log (sealog-server: a sequencer, 3 LogDrive servers over gRPC on \
             loopback, Qw = 2, 4 KiB appends; {:.0} s)",
            figures.seconds
        ),
        format!(
            "{:<31} {:>9} {:>11} {:>9} {:>9} {:>9} {:>8} {:>10}",
            "engine",
            "in flight",
            "appends/s",
            "p50 us",
            "p99 us",
            "cpu us",
            "/engine",
            "/local q."
        ),
    ];
    for row in &figures.rows {
        lines.push(format!(
            "{:<31} {:>9} {:>11.0} {:>9.0} {:>9.0} {:>9.1} {:>8.3} {:>10.3}",
            row.engine.name(),
            row.in_flight,
            row.appends_per_sec,
            row.p50_us,
            row.p99_us,
            row.cpu_us_per_append,
            row.over_raw,
            row.over_local
        ));
    }
    lines.push(
        "Ratios are medians of per-round ratios; everything runs in this process on this \
         machine's CPUs and one disk, so the CPU column is the whole system's per append."
            .to_string(),
    );
    lines
}

/// The JSON of the section.
pub fn to_json(figures: &ServerFigures) -> Value {
    let rows: Vec<Value> = figures
        .rows
        .iter()
        .map(|row| {
            json!({
                "engine": row.engine.name(),
                "in_flight": row.in_flight,
                "rounds": row.rounds,
                "appends_per_sec": row.appends_per_sec,
                "p50_us": row.p50_us,
                "p99_us": row.p99_us,
                "cpu_us_per_append": row.cpu_us_per_append,
                "ratio_to_engine_append": row.over_raw,
                "ratio_to_local_quorum": row.over_local,
            })
        })
        .collect();
    json!({ "rows": rows, "seconds": figures.seconds })
}
