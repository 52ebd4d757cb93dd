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

/// Fills each peer cell's `sealog_over_peer` from sealog's cell of the same workload.
pub fn set_peer_ratios(cells: &mut [Cell]) {
    let sealog: Vec<(u64, u64, u64, f64)> = cells
        .iter()
        .filter(|cell| cell.engine == "sealog")
        .map(|cell| {
            (
                cell.payload_bytes,
                cell.writers,
                cell.in_flight,
                cell.appends_per_sec,
            )
        })
        .collect();
    for cell in cells
        .iter_mut()
        .filter(|cell| PEERS.contains(&cell.engine.as_str()))
    {
        let same = sealog.iter().find(|(payload, writers, in_flight, _)| {
            (*payload, *writers, *in_flight) == (cell.payload_bytes, cell.writers, cell.in_flight)
        });
        cell.sealog_over_peer = match same {
            Some(&(_, _, _, sealog_rate)) if cell.appends_per_sec > 0.0 => {
                sealog_rate / cell.appends_per_sec
            }
            _ => 0.0,
        };
    }
}

/// The peer engines' names.
pub const PEERS: [&str; 2] = ["raft-engine", "okaywal"];

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

/// The table header.
pub fn header() -> String {
    format!(
        "{:<16} {:>8} {:>7} {:>6} {:>12} {:>9} {:>8} {:>8} {:>8} {:>7} {:>7} {:>7} {:>7}",
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
        "batch",
        "xpeer"
    )
}

/// One table row.
pub fn row(cell: &Cell) -> String {
    format!(
        concat!(
            "{:<16} {:>8} {:>7} {:>6} {:>12.0} {:>9.1} {:>8.0} {:>8.0} {:>8.0} ",
            "{:>7.3} {:>7.2} {:>7.1} {:>7}"
        ),
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
        cell.batch_entries,
        if cell.sealog_over_peer > 0.0 {
            format!("{:.2}", cell.sealog_over_peer)
        } else {
            "-".to_string()
        }
    )
}

/// One of the issue's targets, checked against this run's cells.
#[derive(Clone, Debug)]
pub struct Target {
    /// What is measured.
    pub name: &'static str,
    /// The figure this run reached (None when the run did not include the cell).
    pub value: Option<f64>,
    /// The goal, in the same unit.
    pub goal: f64,
    /// Whether a higher value is better.
    pub higher_is_better: bool,
}

impl Target {
    /// Whether the run met the goal (None when not measured).
    pub fn held(&self) -> Option<bool> {
        self.value.map(|value| {
            if self.higher_is_better {
                value >= self.goal
            } else {
                value <= self.goal
            }
        })
    }

    /// The target as a JSON object.
    pub fn to_json(&self) -> Value {
        json!({
            "name": self.name,
            "value": self.value,
            "goal": self.goal,
            "higher_is_better": self.higher_is_better,
            "held": self.held(),
        })
    }
}

/// The issue's targets from the cells of one run and its recovery ratio.
pub fn targets(cells: &[Cell], recovery_ratio: f64) -> Vec<Target> {
    let sealog = |payload: u64, writers: u64, in_flight: u64| {
        cells.iter().find(|cell| {
            cell.engine == "sealog"
                && (cell.payload_bytes, cell.writers, cell.in_flight)
                    == (payload, writers, in_flight)
        })
    };
    let deep = |payload: u64| {
        cells
            .iter()
            .filter(|cell| {
                cell.engine == "sealog"
                    && cell.payload_bytes == payload
                    && cell.writers * cell.in_flight >= 256
            })
            .max_by(|a, b| a.appends_per_sec.total_cmp(&b.appends_per_sec))
    };
    let single = sealog(4096, 1, 1);
    let many = sealog(4096, 32, 1);
    let raw_write = cells
        .iter()
        .find(|cell| cell.engine == crate::ceiling::RAW_WRITE && cell.mb_per_sec > 0.0);
    let peer_ratio = |name: &str| {
        cells
            .iter()
            .find(|cell| {
                cell.engine == name
                    && (cell.payload_bytes, cell.writers, cell.in_flight) == (4096, 32, 1)
            })
            .map(|cell| cell.sealog_over_peer)
            .filter(|ratio| *ratio > 0.0)
    };
    vec![
        Target {
            name: "4 KiB, >= 256 in flight: MB/s over the 1 MiB write+datasync ceiling",
            value: deep(4096).map(|cell| cell.ratio_to_ceiling),
            goal: 0.9,
            higher_is_better: true,
        },
        Target {
            name: "4 KiB, >= 256 in flight: MB/s over the raw write bandwidth (no sync)",
            value: deep(4096)
                .zip(raw_write)
                .map(|(cell, raw)| cell.mb_per_sec / raw.mb_per_sec),
            goal: 0.8,
            higher_is_better: true,
        },
        Target {
            name: "1 writer x 4 KiB: p50 over the 4 KiB write+datasync p50",
            value: single.map(|cell| cell.p50_ratio_to_ceiling),
            goal: 1.1,
            higher_is_better: false,
        },
        Target {
            name: "1 writer x 4 KiB: p99 over the 4 KiB write+datasync p99",
            value: single.map(|cell| cell.p99_ratio_to_ceiling),
            goal: 1.3,
            higher_is_better: false,
        },
        Target {
            name: "32 writers x 4 KiB: p50 over the single writer's p50",
            value: single
                .zip(many)
                .filter(|(single, _)| single.p50_us > 0.0)
                .map(|(single, many)| many.p50_us / single.p50_us),
            goal: 1.5,
            higher_is_better: false,
        },
        Target {
            name: "128 B, >= 256 in flight: durable appends/s",
            value: deep(128).map(|cell| cell.appends_per_sec),
            goal: 1_000_000.0,
            higher_is_better: true,
        },
        Target {
            name: "32 writers x 4 KiB: sealog appends/s over raft-engine's",
            value: peer_ratio("raft-engine"),
            goal: 3.0,
            higher_is_better: true,
        },
        Target {
            name: "32 writers x 4 KiB: sealog appends/s over okaywal's",
            value: peer_ratio("okaywal"),
            goal: 3.0,
            higher_is_better: true,
        },
        recovery_target(recovery_ratio),
    ]
}

/// The recovery of a full ring against the sequential read ceiling (0: not measured).
pub fn recovery_target(recovery_ratio: f64) -> Target {
    Target {
        name: "recovery of a full ring over the sequential O_DIRECT read ceiling",
        value: (recovery_ratio > 0.0).then_some(recovery_ratio),
        goal: 0.8,
        higher_is_better: true,
    }
}

/// CPU per append of sealog's 32 writers x 4 KiB cell when issue 10 was filed (4.0 CPU s/GB);
/// its target is half of it.
const CPU_US_PER_APPEND_BEFORE_ISSUE_10: f64 = 15.0;

/// The cell of `engine` under a workload (payload, writers, in flight per writer), if it ran.
fn find_cell<'a>(cells: &'a [Cell], engine: &str, workload: (u64, u64, u64)) -> Option<&'a Cell> {
    cells.iter().find(|cell| {
        cell.engine == engine && (cell.payload_bytes, cell.writers, cell.in_flight) == workload
    })
}

/// Issue 10's targets for 32 blocking writers of 4 KiB (one append in flight each): sealog's
/// appends/s over the better peer's (the higher of the two; the per-peer targets of
/// [`targets`] ask 3x each, which implies this), and sealog's CPU per append.
pub fn write_path_targets(cells: &[Cell]) -> Vec<Target> {
    let workload = (4096, 32, 1);
    let sealog = find_cell(cells, "sealog", workload);
    let better_peer_appends_per_sec = PEERS
        .iter()
        .filter_map(|peer| find_cell(cells, peer, workload))
        .map(|cell| cell.appends_per_sec)
        .filter(|rate| *rate > 0.0)
        .max_by(f64::total_cmp);
    vec![
        Target {
            name: "32 writers x 4 KiB: sealog appends/s over the better peer's",
            value: sealog
                .zip(better_peer_appends_per_sec)
                .map(|(sealog, peer_rate)| sealog.appends_per_sec / peer_rate),
            goal: 2.5,
            higher_is_better: true,
        },
        Target {
            name: "32 writers x 4 KiB: CPU us per append (process CPU over appends acknowledged)",
            value: sealog
                .map(|cell| cell.cpu_us_per_append)
                .filter(|cpu_us| *cpu_us > 0.0),
            goal: CPU_US_PER_APPEND_BEFORE_ISSUE_10 / 2.0,
            higher_is_better: false,
        },
        Target {
            name: "1 writer x 4 KiB: the engine's handoff p50 (enqueue to submission + \
                   completion to wake-up), us",
            value: find_cell(cells, "sealog", (4096, 1, 1))
                .map(|cell| cell.handoff_submit_p50_us + cell.handoff_wake_p50_us)
                .filter(|handoff_us| *handoff_us > 0.0),
            goal: HANDOFF_US_GOAL,
            higher_is_better: false,
        },
    ]
}

/// The most the engine's own handoff may add to a lone writer's append, both ways, p50 (us).
const HANDOFF_US_GOAL: f64 = 10.0;

/// The line under the table that puts the 1 writer x 4 KiB row beside the raw paths it could
/// take (queue depth 1) and the raw write bandwidth, so the distance to the device shows; `None`
/// when the run had neither that cell nor the raw paths.
pub fn raw_paths_line(cells: &[Cell]) -> Option<String> {
    use crate::ceiling::{RAW_DSYNC, RAW_DSYNC_FUA, RAW_FDATASYNC, RAW_WRITE};
    let find = |engine: &str| cells.iter().find(|cell| cell.engine == engine);
    let fdatasync = find(RAW_FDATASYNC)?;
    let (dsync, dsync_label) = match find(RAW_DSYNC_FUA) {
        Some(cell) => (cell, "RWF_DSYNC (FUA)"),
        None => (find(RAW_DSYNC)?, "RWF_DSYNC"),
    };
    let single = cells.iter().find(|cell| {
        cell.engine == "sealog"
            && (cell.payload_bytes, cell.writers, cell.in_flight) == (4096, 1, 1)
    });
    let sealog = single.map_or_else(
        || "sealog not run".to_string(),
        |cell| {
            format!(
                "sealog p50 {:.0} us, p99 {:.0} us",
                cell.p50_us, cell.p99_us
            )
        },
    );
    let bandwidth = find(RAW_WRITE).map_or_else(String::new, |cell| {
        format!(
            "; raw write bandwidth ({} KiB x {} in flight, no sync) {:.0} MB/s",
            cell.payload_bytes >> 10,
            cell.in_flight,
            cell.mb_per_sec
        )
    });
    Some(format!(
        "1 writer x 4 KiB: {sealog}; raw at queue depth 1, {}-byte writes: write + linked \
         fdatasync p50 {:.0} us, p99 {:.0} us; {dsync_label} p50 {:.0} us, p99 {:.0} us{bandwidth}",
        fdatasync.payload_bytes, fdatasync.p50_us, fdatasync.p99_us, dsync.p50_us, dsync.p99_us
    ))
}

/// One line per target.
pub fn target_line(target: &Target) -> String {
    let verdict = match target.held() {
        Some(true) => "held",
        Some(false) => "MISSED",
        None => "not measured",
    };
    let value = target
        .value
        .map_or_else(|| "-".to_string(), |value| format!("{value:.3}"));
    let relation = if target.higher_is_better { ">=" } else { "<=" };
    // A goal such as 1/1.1 prints at the values' three decimals rather than in full.
    let goal = match format!("{}", target.goal) {
        plain if plain.len() <= 10 => plain,
        _ => format!("{:.3}", target.goal),
    };
    format!(
        "{verdict:>12}  {value:>10} {relation} {goal:<10}  {}",
        target.name
    )
}

/// The group-commit table: how sealog's cells batched, per cell, and what each append cost in
/// CPU; then the peers' cells, whose batching the bench cannot see but whose CPU it measures.
pub fn group_commit_table(cells: &[Cell]) -> Vec<String> {
    let mut lines = vec![format!(
        "{:<16} {:>8} {:>7} {:>6} {:>9} {:>10} {:>10} {:>10} {:>9} {:>9} {:>8} {:>9} {:>13} {:>8}",
        "group commit",
        "payload",
        "writers",
        "flight",
        "entries",
        "batch p50",
        "idle p50",
        "to-sub p50",
        "wake p50",
        "syncs/s",
        "markers",
        "CPU s/GB",
        "CPU us/append",
        "RSS MiB"
    )];
    for cell in cells.iter().filter(|cell| cell.engine == "sealog") {
        lines.push(format!(
            concat!(
                "{:<16} {:>8} {:>7} {:>6} {:>9.1} {:>10.0} {:>10.0} {:>10.0} {:>9.0} {:>9.0} ",
                "{:>8} {:>9.2} {:>13.1} {:>8}"
            ),
            cell.engine,
            cell.payload_bytes,
            cell.writers,
            cell.in_flight,
            cell.batch_entries,
            cell.batch_p50_us,
            cell.idle_gap_p50_us,
            cell.handoff_submit_p50_us,
            cell.handoff_wake_p50_us,
            cell.syncs_per_sec,
            cell.tail_markers,
            cell.cpu_seconds_per_gb,
            cell.cpu_us_per_append,
            cell.peak_rss_bytes >> 20
        ));
    }
    lines.extend(
        cells
            .iter()
            .filter(|cell| PEERS.contains(&cell.engine.as_str()))
            .map(peer_group_commit_row),
    );
    lines
}

/// A peer's row of the group-commit table: its batching is internal to it (shown as "-"), its
/// CPU and memory are this process's while it ran.
fn peer_group_commit_row(cell: &Cell) -> String {
    format!(
        concat!(
            "{:<16} {:>8} {:>7} {:>6} {:>9} {:>10} {:>10} {:>10} {:>9} {:>9} {:>8} ",
            "{:>9.2} {:>13.1} {:>8}"
        ),
        cell.engine,
        cell.payload_bytes,
        cell.writers,
        cell.in_flight,
        "-",
        "-",
        "-",
        "-",
        "-",
        "-",
        "-",
        cell.cpu_seconds_per_gb,
        cell.cpu_us_per_append,
        cell.peak_rss_bytes >> 20
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(engine: &str, writers: u64, appends_per_sec: f64, cpu_us_per_append: f64) -> Cell {
        Cell {
            appends_per_sec,
            cpu_us_per_append,
            ..Cell::empty(engine, 4096, writers, 1)
        }
    }

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

    /// A goal prints as written unless that is long (1/1.1), then at three decimals.
    #[test]
    fn target_lines_print_long_goals_at_three_decimals() {
        let target = |goal: f64| Target {
            name: "a target",
            value: Some(0.95),
            goal,
            higher_is_better: true,
        };
        let line = target_line(&target(1.0 / 1.1));
        assert!(line.contains(">= 0.909       a target"), "{line}");
        assert!(line.starts_with("        held"), "{line}");
        let line = target_line(&target(1_000_000.0));
        assert!(line.contains(">= 1000000     a target"), "{line}");
    }

    /// The 32-writer targets: over the better (faster) peer, not the slower one, and CPU per
    /// append against half of 15 us; neither is judged without its cells.
    #[test]
    fn write_path_targets_judge_the_better_peer_and_cpu_per_append() {
        let cells = [
            cell("sealog", 1, 2_000.0, 60.0),
            cell("sealog", 32, 100_000.0, 7.0),
            cell("raft-engine", 32, 50_000.0, 20.0),
            cell("okaywal", 32, 40_000.0, 25.0),
            cell("okaywal", 1, 9_000.0, 30.0),
        ];
        let mut cells = cells;
        cells[0].handoff_submit_p50_us = 4.0;
        cells[0].handoff_wake_p50_us = 7.0;
        let targets = write_path_targets(&cells);
        assert_eq!(targets.len(), 3);
        assert_eq!(
            targets[2].value,
            Some(11.0),
            "both ways of the handoff add up"
        );
        assert_eq!(targets[2].held(), Some(false));
        assert_eq!(targets[0].value, Some(2.0));
        assert_eq!(targets[0].held(), Some(false));
        assert_eq!(targets[1].goal, 7.5);
        assert_eq!(targets[1].value, Some(7.0));
        assert_eq!(targets[1].held(), Some(true));

        let without_peers = write_path_targets(&cells[..2]);
        assert_eq!(without_peers[0].value, None);
        assert_eq!(without_peers[1].value, Some(7.0));
        let without_sealog = write_path_targets(&cells[2..]);
        assert!(without_sealog.iter().all(|target| target.held().is_none()));
    }
}
