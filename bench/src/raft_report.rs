//! The raft section's report (`raft_section.rs` runs it, `raft_figures.rs` holds its
//! figures): the store-level and cluster-level tables, each row with the process's CPU per
//! operation and the share of the machine's CPUs that implies; the JSON (the `raft` object);
//! the targets (sealog's store at least twice raft-engine's appends/s at 256 in flight and
//! no slower at p50 at 1 in flight; the cluster on sealog ahead of it on raft-engine at every
//! concurrency and within 0.8x of it on the mem store at 256); and, for a target missed, the
//! measurement that bounds it.

use serde_json::{json, Value};

use crate::raft_figures::{RaftCell, RaftFigures, RaftStore};
use crate::raft_section::{MANY_GROUPS, RAFT_ENGINE_WRITERS};
use crate::target::Target;

/// The least sealog's appends/s may be of raft-engine's at 256 in flight (store level).
pub const STORE_THROUGHPUT_MIN: f64 = 2.0;
/// The most sealog's p50 may be of raft-engine's at 1 in flight (store level).
pub const STORE_P50_MAX: f64 = 1.0;
/// The least the cluster's writes/s on sealog may be of those on raft-engine.
pub const CLUSTER_OVER_PEER_MIN: f64 = 1.0;
/// The least the cluster's writes/s on sealog may be of those on the mem store, at 256.
pub const CLUSTER_OVER_MEM_MIN: f64 = 0.8;
/// The store level's payload the targets are stated on.
const TARGET_PAYLOAD: usize = 256;

fn cpus() -> f64 {
    std::thread::available_parallelism().map_or(1, usize::from) as f64
}

/// The section's tables and lines for the terminal.
pub fn lines(figures: &RaftFigures) -> Vec<String> {
    let mut lines = vec![format!(
        "raft (store level): one entry per RaftLogStorage::append (blocking_append), appends \
         of a group issued in index order with N in flight over 1 or {MANY_GROUPS} groups, \
         sealog on a {} MiB ring, raft-engine with {RAFT_ENGINE_WRITERS} writer threads \
         (sync on), the mem store as the no-storage reference; each cell {:.2} s after {:.2} \
         s of warm-up; sealog created its {MANY_GROUPS} groups in {:.1} s",
        figures.ring_bytes >> 20,
        figures.seconds_per_cell,
        figures.warmup_seconds_per_cell,
        figures.sealog_group_setup_seconds
    )];
    lines.push(header("store", "flight", "groups", "appends/s"));
    for cell in &figures.store_cells {
        let over = (cell.store == RaftStore::Sealog)
            .then(|| {
                figures.store_throughput_ratio(cell.payload_bytes, cell.in_flight, cell.groups)
            })
            .flatten();
        lines.push(row(cell, cell.groups, over));
    }
    lines.push(String::new());
    lines.push(
        "raft (cluster level): the key-value example as three nodes over loopback in this \
         process, N client tasks each writing after the previous write committed (one \
         client, gRPC); the log store is the only difference between the runs"
            .to_string(),
    );
    lines.push(header("store", "clients", "nodes", "writes/s"));
    for cell in &figures.cluster_cells {
        let over = (cell.store == RaftStore::Sealog)
            .then(|| figures.cluster_throughput_ratio(RaftStore::RaftEngine, cell.in_flight))
            .flatten();
        lines.push(row(cell, 3, over));
    }
    lines.push(format!(
        "CPU us: the process's CPU time (user + system, every thread) per operation; CPU%: the \
         operations/s reached over what that CPU time allows on the machine's {} CPUs (near \
         100: CPU-bound); xpeer: sealog's operations/s over raft-engine's in the same cell",
        cpus()
    ));
    lines.extend(missed_bounds(figures));
    lines.push(format!("the raft section took {:.0} s", figures.seconds));
    lines
}

fn header(first: &str, flight: &str, groups: &str, ops: &str) -> String {
    format!(
        "{first:<12} {:>7} {flight:>7} {groups:>6} {ops:>10} {:>9} {:>9} {:>9} {:>8} {:>5} {:>6}",
        "payload", "p50 us", "p99 us", "p999 us", "CPU us", "CPU%", "xpeer"
    )
}

fn row(cell: &RaftCell, groups: usize, over_peer: Option<f64>) -> String {
    let share = 100.0 * cell.ops_per_sec / cell.cpu_bound_ops_per_sec(cpus());
    let mut text = format!(
        "{:<12} {:>7} {:>7} {:>6} {:>10.0} {:>9.0} {:>9.0} {:>9.0} {:>8.1} {:>5.0} {:>6}",
        cell.store.name(),
        cell.payload_bytes,
        cell.in_flight,
        groups,
        cell.ops_per_sec,
        cell.p50_us,
        cell.p99_us,
        cell.p999_us,
        cell.cpu_us_per_op,
        share,
        over_peer.map_or_else(|| "-".to_string(), |ratio| format!("{ratio:.2}"))
    );
    if cell.errors > 0 {
        text.push_str(&format!("  ({} errors)", cell.errors));
    }
    text
}

/// For each target this run missed, the measurement that bounds it: the process's CPU per
/// operation against the machine's CPUs, for sealog's cell and for what it is compared with.
fn missed_bounds(figures: &RaftFigures) -> Vec<String> {
    let cpus = cpus();
    let describe = |cell: &RaftCell| {
        let bound = cell.cpu_bound_ops_per_sec(cpus);
        let used = cell.ops_per_sec * cell.cpu_us_per_op / 1e6;
        let threads: Vec<String> = (cell.cores_by_thread.iter().take(4))
            .map(|(kind, cores)| format!("{kind} {cores:.2}"))
            .collect();
        format!(
            "{} {:.0}/s at {:.1} CPU us each ({:.2} CPUs used: {}), {:.0}/s if it had all {cpus} \
             CPUs ({:.0}% of that)",
            cell.store.name(),
            cell.ops_per_sec,
            cell.cpu_us_per_op,
            used,
            threads.join(", "),
            bound,
            100.0 * cell.ops_per_sec / bound
        )
    };
    targets_with_cells(figures)
        .into_iter()
        .filter(|(target, _)| target.held() == Some(false))
        .map(|(target, cells)| {
            let described: Vec<String> = cells.iter().map(|cell| describe(cell)).collect();
            let mut line = format!("missed: {}: {}", target.name, described.join("; "));
            // With both runs given the same CPU, the ratio could not pass the inverse ratio
            // of their CPU per operation.
            if let [sealog, other] = cells[..] {
                line.push_str(&format!(
                    "; on equal CPU the ratio is at most {:.3} ({} CPU us over sealog's)",
                    other.cpu_us_per_op / sealog.cpu_us_per_op.max(1e-9),
                    other.store.name()
                ));
            }
            line
        })
        .collect()
}

/// A cell as JSON, with the fields named as in the tables.
fn cell_json(cell: &RaftCell, level: &str) -> Value {
    let ops = if level == "store" {
        "appends_per_sec"
    } else {
        "writes_per_sec"
    };
    let mut value = json!({
        "store": cell.store.name(),
        "payload_bytes": cell.payload_bytes,
        "in_flight": cell.in_flight,
        "groups": cell.groups,
        "p50_us": cell.p50_us,
        "p99_us": cell.p99_us,
        "p999_us": cell.p999_us,
        "cpu_us_per_op": cell.cpu_us_per_op,
        "cpu_bound_ops_per_sec": cell.cpu_bound_ops_per_sec(cpus()),
        "errors": cell.errors,
        "cpu_cores_by_thread": cell
            .cores_by_thread
            .iter()
            .map(|(kind, cores)| (kind.clone(), json!(cores)))
            .collect::<serde_json::Map<_, _>>(),
    });
    value[ops] = json!(cell.ops_per_sec);
    value
}

/// The section as the JSON document's `raft` object.
pub fn to_json(figures: &RaftFigures) -> Value {
    json!({
        "seconds": figures.seconds,
        "seconds_per_cell": figures.seconds_per_cell,
        "warmup_seconds_per_cell": figures.warmup_seconds_per_cell,
        "ring_bytes": figures.ring_bytes,
        "raft_engine_writer_threads": RAFT_ENGINE_WRITERS,
        "sealog_group_setup_seconds": figures.sealog_group_setup_seconds,
        "cpus": cpus(),
        "store": figures.store_cells.iter().map(|c| cell_json(c, "store")).collect::<Vec<_>>(),
        "cluster": figures
            .cluster_cells
            .iter()
            .map(|c| cell_json(c, "cluster"))
            .collect::<Vec<_>>(),
        "ratios": ratios_json(figures),
    })
}

fn ratios_json(figures: &RaftFigures) -> Value {
    let p = TARGET_PAYLOAD;
    let by_concurrency: Vec<Value> = [1, 16, 256]
        .into_iter()
        .map(|n| {
            json!({
                "concurrency": n,
                "ratio": figures.cluster_throughput_ratio(RaftStore::RaftEngine, n),
            })
        })
        .collect();
    json!({
        "store_sealog_over_raft_engine_appends_256_in_flight_1_group":
            figures.store_throughput_ratio(p, 256, 1),
        "store_sealog_over_raft_engine_appends_256_in_flight_1000_groups":
            figures.store_throughput_ratio(p, 256, MANY_GROUPS),
        "store_sealog_over_raft_engine_p50_1_in_flight_1_group": figures.store_p50_ratio(p, 1, 1),
        "cluster_sealog_over_raft_engine_writes": by_concurrency,
        "cluster_sealog_over_mem_writes_256": figures.cluster_throughput_ratio(RaftStore::Mem, 256),
    })
}

/// The section's targets (not measured when it did not run).
pub fn targets(figures: Option<&RaftFigures>) -> Vec<Target> {
    let none = RaftFigures::default();
    targets_with_cells(figures.unwrap_or(&none))
        .into_iter()
        .map(|(target, _)| target)
        .collect()
}

/// A target with the cells it is taken from (sealog's first).
type Judged<'a> = (Target, Vec<&'a RaftCell>);

/// The cluster-level targets against raft-engine, by concurrency.
const CLUSTER_PEER_TARGETS: [(usize, &str); 3] = [
    (
        1,
        "raft cluster of three, 1 client write at a time: writes/s on sealog over on \
         raft-engine",
    ),
    (
        16,
        "raft cluster of three, 16 concurrent client writes: writes/s on sealog over on \
         raft-engine",
    ),
    (
        256,
        "raft cluster of three, 256 concurrent client writes: writes/s on sealog over on \
         raft-engine",
    ),
];

fn higher(name: &'static str, value: Option<f64>, goal: f64) -> Target {
    Target {
        name,
        value,
        goal,
        higher_is_better: true,
    }
}

/// Each target with the cells it is taken from: the store level's, then the cluster's.
fn targets_with_cells(figures: &RaftFigures) -> Vec<Judged<'_>> {
    let mut targets = store_targets(figures);
    targets.extend(cluster_targets(figures));
    targets
}

fn store_targets(figures: &RaftFigures) -> Vec<Judged<'_>> {
    let p = TARGET_PAYLOAD;
    let cells = |flight, groups| {
        [RaftStore::Sealog, RaftStore::RaftEngine]
            .into_iter()
            .filter_map(|store| figures.store_cell(store, p, flight, groups))
            .collect::<Vec<_>>()
    };
    vec![
        (
            higher(
                "raft store, 256 B x 256 in flight on 1 group: sealog's appends/s over \
                 raft-engine's",
                figures.store_throughput_ratio(p, 256, 1),
                STORE_THROUGHPUT_MIN,
            ),
            cells(256, 1),
        ),
        (
            higher(
                "raft store, 256 B x 256 in flight over 1,000 groups: sealog's appends/s over \
                 raft-engine's",
                figures.store_throughput_ratio(p, 256, MANY_GROUPS),
                STORE_THROUGHPUT_MIN,
            ),
            cells(256, MANY_GROUPS),
        ),
        (
            Target {
                name: "raft store, 256 B x 1 in flight on 1 group: sealog's p50 over \
                       raft-engine's",
                value: figures.store_p50_ratio(p, 1, 1),
                goal: STORE_P50_MAX,
                higher_is_better: false,
            },
            cells(1, 1),
        ),
    ]
}

fn cluster_targets(figures: &RaftFigures) -> Vec<Judged<'_>> {
    let cells = |other, n| {
        [RaftStore::Sealog, other]
            .into_iter()
            .filter_map(|store| figures.cluster_cell(store, n))
            .collect::<Vec<_>>()
    };
    let peer = RaftStore::RaftEngine;
    let mut targets: Vec<Judged<'_>> = CLUSTER_PEER_TARGETS
        .into_iter()
        .map(|(n, name)| {
            let value = figures.cluster_throughput_ratio(peer, n);
            (higher(name, value, CLUSTER_OVER_PEER_MIN), cells(peer, n))
        })
        .collect();
    targets.push((
        higher(
            "raft cluster of three, 256 concurrent client writes: writes/s on sealog over on \
             the mem store",
            figures.cluster_throughput_ratio(RaftStore::Mem, 256),
            CLUSTER_OVER_MEM_MIN,
        ),
        cells(RaftStore::Mem, 256),
    ));
    targets
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(store: RaftStore, in_flight: usize, groups: usize, ops: f64, p50: f64) -> RaftCell {
        RaftCell {
            store,
            payload_bytes: 256,
            in_flight,
            groups,
            ops_per_sec: ops,
            p50_us: p50,
            p99_us: 2.0 * p50,
            p999_us: 3.0 * p50,
            cpu_us_per_op: 10.0,
            errors: 0,
            cores_by_thread: vec![("tokio-runtime-w".to_string(), 0.5)],
        }
    }

    /// The targets pick the right cells; a missed one names what bounds it; the JSON has
    /// both levels' cells and the ratios.
    #[test]
    fn targets_take_the_right_cells() {
        let figures = RaftFigures {
            store_cells: vec![
                cell(RaftStore::Sealog, 256, 1, 30_000.0, 900.0),
                cell(RaftStore::RaftEngine, 256, 1, 10_000.0, 2_000.0),
                cell(RaftStore::Sealog, 1, 1, 2_000.0, 400.0),
                cell(RaftStore::RaftEngine, 1, 1, 1_000.0, 800.0),
            ],
            cluster_cells: vec![
                cell(RaftStore::Sealog, 256, 1, 8_000.0, 30_000.0),
                cell(RaftStore::Mem, 256, 1, 12_000.0, 20_000.0),
            ],
            ..RaftFigures::default()
        };
        let targets = targets(Some(&figures));
        assert_eq!(targets.len(), 7);
        assert_eq!(targets[0].value, Some(3.0));
        assert_eq!(targets[0].held(), Some(true));
        assert_eq!(targets[1].value, None);
        assert_eq!(targets[2].value, Some(0.5));
        assert_eq!(targets[6].held(), Some(false));
        let missed = missed_bounds(&figures);
        assert_eq!(missed.len(), 1, "{missed:?}");
        assert!(missed[0].contains("mem 12000/s"), "{missed:?}");
        let json = to_json(&figures);
        assert_eq!(json["store"].as_array().map(Vec::len), Some(4));
        assert_eq!(json["cluster"][1]["writes_per_sec"], 12_000.0);
        assert_eq!(
            json["ratios"]["store_sealog_over_raft_engine_appends_256_in_flight_1_group"],
            3.0
        );
    }
}
