//! The composition section's report (`compose.rs` measures it, `compose_figures.rs` holds
//! its figures): the table of every group's engines at each load (each engine's medians over
//! the rounds and its ratios to its base), the JSON (the `compose` object: `comparisons`,
//! every run and each engine's medians with the `cells` contract's fields) and the targets:
//! an AtomicLog over one LogDrive within 1.1x of the LogDrive write's p50, over a quorum of
//! three within 1.1x of three LogDrive writes issued together, and over a stripe of two at
//! least 0.9x of two LogDrives driven at once (appends/s at 256 in flight).

use serde_json::{json, Value};

use crate::cell::Cell;
use crate::compose::DEEP;
use crate::compose_figures::{
    ComposeComparison, ComposeEngine, ComposeFigures, PAYLOAD_BYTES, WINDOW_K, WRITE_QUORUM,
};
use crate::rounds::round_order;
use crate::target::Target;

/// The most an AtomicLog's p50 may be over its base's.
pub const P50_OVER_BASE_MAX: f64 = 1.1;
/// The least a stripe's appends/s may be of its base's.
pub const STRIPE_THROUGHPUT_MIN: f64 = 0.9;

/// The section's table and lines for the terminal.
pub fn lines(figures: &ComposeFigures) -> Vec<String> {
    let Some(first) = figures.comparisons.first() else {
        return Vec::new();
    };
    let mut lines = vec![intro(figures, first), header()];
    for comparison in &figures.comparisons {
        for index in 0..comparison.engines.len() {
            lines.push(row(comparison, index));
        }
    }
    lines.push(
        "rings: rings written; LDs: data LogDrives written (an AtomicLog's seal LogDrives, \
         composed alike, aside); batch: entries per batch of the first ring; CPU us: the \
         process's CPU per operation acknowledged (polling threads, drive threads, stores' \
         reclaimers, kernel); poll%: the polling thread's own CPU over the run (near 100: it \
         bounded the run); xw/s, xp50: the median over the rounds of the appends/s and p50 \
         over the base's in the same round; an operation of logdrive-x3-together is three \
         writes, one per ring, done when all three are"
            .to_string(),
    );
    lines.extend(cpu_bound_line(figures));
    lines.push(format!("the compose section took {:.0} s", figures.seconds));
    lines
}

/// The line above the table: how the comparisons ran.
fn intro(figures: &ComposeFigures, first: &ComposeComparison) -> String {
    let rounds: Vec<String> = figures
        .comparisons
        .iter()
        .filter(|comparison| comparison.in_flight == 1)
        .map(|comparison| format!("{} {}", comparison.group, comparison.cells.len()))
        .collect();
    format!(
        "compose: AtomicLogs (K = {WINDOW_K}) over one LogDrive, a quorum of three (Qw = \
         {WRITE_QUORUM}), a stripe of two and a stripe of two quorums, beside what each is \
         compared with, on three rings opened as three drives (one thread each), {} B payloads, \
         1 in flight and {} (from {} polling thread(s), {} each), interleaved rounds per group \
         ({}), each run {:.2} s after {:.2} s of warm-up; each figure the median over the rounds",
        PAYLOAD_BYTES,
        DEEP.0 * DEEP.1,
        DEEP.0,
        DEEP.1,
        rounds.join(", "),
        first.seconds_per_run,
        first.warmup_seconds_per_run
    )
}

fn header() -> String {
    format!(
        "{:<8} {:>6} {:<21} {:>5} {:>3} {:>9} {:>7} {:>7} {:>7} {:>6} {:>6} {:>5} {:>6} {:>6}  {}",
        "compose",
        "flight",
        "engine",
        "rings",
        "LDs",
        "appends/s",
        "MB/s",
        "p50 us",
        "p99 us",
        "batch",
        "CPU us",
        "poll%",
        "xw/s",
        "xp50",
        "base"
    )
}

fn row(comparison: &ComposeComparison, index: usize) -> String {
    let engine = comparison.engines[index];
    let cell = comparison.median_cell(index);
    let ratio = |ratio: Option<f64>| ratio.map_or_else(|| "-".to_string(), |r| format!("{r:.3}"));
    format!(
        concat!(
            "{:<8} {:>6} {:<21} {:>5} {:>3} {:>9.0} {:>7.1} {:>7.0} {:>7.0} {:>6.1} {:>6.1}",
            " {:>5.0} {:>6} {:>6}  {}"
        ),
        comparison.group,
        comparison.in_flight,
        engine.name(),
        engine.rings(),
        engine.logdrives(),
        cell.appends_per_sec,
        cell.mb_per_sec,
        cell.p50_us,
        cell.p99_us,
        cell.batch_entries,
        cell.cpu_us_per_append,
        100.0 * comparison.poller_median(index),
        ratio(comparison.throughput_over_base(index)),
        ratio(comparison.p50_over_base(index)),
        engine.base().map_or("-", ComposeEngine::name)
    )
}

/// What the machine's CPUs bound at the deep load: for each engine there, the appends/s its
/// CPU per append would allow on every CPU of the machine, beside what it reached.
fn cpu_bound_line(figures: &ComposeFigures) -> Option<String> {
    let cpus = std::thread::available_parallelism().map_or(1, usize::from) as f64;
    let bounds: Vec<String> = figures
        .comparisons
        .iter()
        .filter(|comparison| comparison.in_flight > 1)
        .flat_map(|comparison| {
            (0..comparison.engines.len()).map(move |index| {
                let cell = comparison.median_cell(index);
                let bound = cpus * 1e6 / cell.cpu_us_per_append.max(1e-9);
                format!(
                    "{} {:.0} of {:.0} ({:.0}%)",
                    cell.engine,
                    cell.appends_per_sec,
                    bound,
                    100.0 * cell.appends_per_sec / bound
                )
            })
        })
        .collect();
    (!bounds.is_empty()).then(|| {
        format!(
            "CPU bound at {} in flight ({cpus} CPUs / CPU us per operation, against the \
             appends/s reached): {}",
            DEEP.0 * DEEP.1,
            bounds.join(", ")
        )
    })
}

/// A cell as JSON: the `cells` contract's fields, and the engine's shape.
fn cell_json(cell: &Cell, engine: ComposeEngine) -> Value {
    let mut value = cell.to_json();
    value["rings"] = json!(engine.rings());
    value["logdrives"] = json!(engine.logdrives());
    value["atomic"] = json!(engine.atomic());
    value["base"] = json!(engine.base().map(ComposeEngine::name));
    value
}

fn comparison_json(comparison: &ComposeComparison) -> Value {
    let mut runs = Vec::new();
    for (round, cells) in comparison.cells.iter().enumerate() {
        let order = round_order(comparison.engines.len(), round);
        for (position, engine) in order.into_iter().enumerate() {
            let mut run = cell_json(&cells[engine], comparison.engines[engine]);
            run["poller_cpu_share"] = json!(comparison.poller_cpu_share[round][engine]);
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
            let mut median = cell_json(&comparison.median_cell(index), *engine);
            median["poller_cpu_share"] = json!(comparison.poller_median(index));
            median["appends_per_sec_over_base"] = json!(comparison.throughput_over_base(index));
            median["p50_over_base"] = json!(comparison.p50_over_base(index));
            median
        })
        .collect();
    json!({
        "group": comparison.group,
        "threads": comparison.threads,
        "in_flight": comparison.in_flight,
        "rounds": comparison.cells.len(),
        "seconds_per_run": comparison.seconds_per_run,
        "warmup_seconds_per_run": comparison.warmup_seconds_per_run,
        "total_seconds": comparison.total_seconds,
        "runs": runs,
        "medians": medians,
    })
}

/// The section as the JSON document's `compose` object.
pub fn to_json(figures: &ComposeFigures) -> Value {
    json!({
        "payload_bytes": PAYLOAD_BYTES,
        "window_k": WINDOW_K,
        "write_quorum": WRITE_QUORUM,
        "seconds": figures.seconds,
        "comparisons": figures.comparisons.iter().map(comparison_json).collect::<Vec<_>>(),
    })
}

/// The section's targets (not measured when it did not run).
pub fn targets(figures: Option<&ComposeFigures>) -> Vec<Target> {
    let deep = DEEP.0 * DEEP.1;
    let p50 =
        |engine, in_flight| figures?.ratio(engine, in_flight, ComposeComparison::p50_over_base);
    let p50_target = |name, engine, in_flight| Target {
        name,
        value: p50(engine, in_flight),
        goal: P50_OVER_BASE_MAX,
        higher_is_better: false,
    };
    vec![
        p50_target(
            "AtomicLog over one LogDrive, 1 in flight x 4 KiB: p50 over the LogDrive write's \
             (median of the interleaved rounds' ratios)",
            ComposeEngine::AtomicOne,
            1,
        ),
        p50_target(
            "AtomicLog over one LogDrive, 256 in flight x 4 KiB: p50 over the LogDrive \
             writes' (median of the interleaved rounds' ratios)",
            ComposeEngine::AtomicOne,
            deep,
        ),
        p50_target(
            "AtomicLog over a quorum of three (Qw = 2), 1 in flight x 4 KiB: p50 over three \
             LogDrive writes issued together on the same three rings'",
            ComposeEngine::AtomicQuorum,
            1,
        ),
        p50_target(
            "AtomicLog over a quorum of three (Qw = 2), 256 in flight x 4 KiB: p50 over three \
             LogDrive writes issued together on the same three rings'",
            ComposeEngine::AtomicQuorum,
            deep,
        ),
        Target {
            name: "AtomicLog over a stripe of two, 256 in flight x 4 KiB: appends/s over two \
                   LogDrives driven at once on the same two rings (median of the rounds' \
                   ratios)",
            value: figures.and_then(|figures| {
                figures.ratio(
                    ComposeEngine::AtomicStripe,
                    deep,
                    ComposeComparison::throughput_over_base,
                )
            }),
            goal: STRIPE_THROUGHPUT_MIN,
            higher_is_better: true,
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(engine: ComposeEngine, appends_per_sec: f64, p50_us: f64) -> Cell {
        Cell {
            appends_per_sec,
            p50_us,
            ..Cell::empty(engine.name(), 4096, 2, 128)
        }
    }

    /// A group's ratios pair each engine with its base round by round; the targets pick the
    /// right figure at the right load.
    #[test]
    fn ratios_pair_each_engine_with_its_base_by_round() {
        let engines = vec![ComposeEngine::AtOnce2, ComposeEngine::AtomicStripe];
        let rounds = [(100.0, 95.0), (50.0, 60.0), (100.0, 80.0), (200.0, 190.0)];
        let comparison = ComposeComparison {
            group: "stripe",
            engines: engines.clone(),
            threads: 2,
            in_flight: 256,
            cells: rounds
                .iter()
                .map(|&(base, stripe)| {
                    vec![
                        cell(engines[0], base, 100.0),
                        cell(engines[1], stripe, 110.0),
                    ]
                })
                .collect(),
            poller_cpu_share: vec![vec![0.5, 0.9]; 4],
            seconds_per_run: 0.3,
            warmup_seconds_per_run: 0.06,
            total_seconds: 3.0,
        };
        // Ratios 0.95, 1.2, 0.8, 0.95: the median (the upper middle) is 0.95.
        assert_eq!(comparison.throughput_over_base(1), Some(0.95));
        assert_eq!(comparison.throughput_over_base(0), None);
        assert!((comparison.p50_over_base(1).unwrap() - 1.1).abs() < 1e-12);
        let figures = ComposeFigures {
            comparisons: vec![comparison],
            seconds: 3.0,
        };
        let targets = targets(Some(&figures));
        assert_eq!(targets[4].value, Some(0.95));
        assert_eq!(targets[4].held(), Some(true));
        assert!(targets[..4].iter().all(|target| target.value.is_none()));
        let json = to_json(&figures);
        assert_eq!(
            json["comparisons"][0]["runs"].as_array().map(Vec::len),
            Some(8)
        );
        assert_eq!(
            json["comparisons"][0]["medians"][1]["base"],
            "logdrive-x2-at-once"
        );
        assert_eq!(
            json["comparisons"][0]["medians"][1]["poller_cpu_share"],
            0.9
        );
        assert_eq!(lines(&figures).len(), 2 + 2 + 3);
    }
}
