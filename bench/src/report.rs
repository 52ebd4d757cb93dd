//! The write cells' table printed on the terminal (one row per cell, the group-commit table,
//! and the line that sets the single writer beside the raw paths), the peers' ratios to
//! sealog, and the issues' write targets judged on this run's cells. The cells themselves and
//! their JSON (the `cells` contract) are `cell.rs`.

use crate::cell::{Cell, PEERS, RAW_DSYNC, RAW_DSYNC_FUA, RAW_FDATASYNC, RAW_WRITE};
use crate::target::Target;

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

/// The issue's targets from the cells of one run and its recovery ratio.
pub fn targets(cells: &[Cell], recovery_ratio: f64) -> Vec<Target> {
    let mut targets = bandwidth_targets(cells);
    targets.extend(latency_targets(cells));
    targets.push(small_appends_target(cells));
    targets.extend(peer_targets(cells));
    targets.push(recovery_target(recovery_ratio));
    targets
}

/// sealog's fastest cell of `payload` with at least 256 appends in flight in all, if it ran.
fn deep_cell(cells: &[Cell], payload: u64) -> Option<&Cell> {
    cells
        .iter()
        .filter(|cell| {
            cell.engine == "sealog"
                && cell.payload_bytes == payload
                && cell.writers * cell.in_flight >= 256
        })
        .max_by(|a, b| a.appends_per_sec.total_cmp(&b.appends_per_sec))
}

/// The deep 4 KiB cell's bandwidth against the 1 MiB write+datasync ceiling and against the
/// raw write bandwidth.
fn bandwidth_targets(cells: &[Cell]) -> Vec<Target> {
    let raw_write = cells
        .iter()
        .find(|cell| cell.engine == RAW_WRITE && cell.mb_per_sec > 0.0);
    vec![
        Target {
            name: "4 KiB, >= 256 in flight: MB/s over the 1 MiB write+datasync ceiling",
            value: deep_cell(cells, 4096).map(|cell| cell.ratio_to_ceiling),
            goal: 0.9,
            higher_is_better: true,
        },
        Target {
            name: "4 KiB, >= 256 in flight: MB/s over the raw write bandwidth (no sync)",
            value: deep_cell(cells, 4096)
                .zip(raw_write)
                .map(|(cell, raw)| cell.mb_per_sec / raw.mb_per_sec),
            goal: 0.8,
            higher_is_better: true,
        },
    ]
}

/// The single writer's p50 and p99 against the 4 KiB write+datasync ceiling's, and 32
/// writers' p50 against the single writer's.
fn latency_targets(cells: &[Cell]) -> Vec<Target> {
    let single = find_cell(cells, "sealog", (4096, 1, 1));
    let many = find_cell(cells, "sealog", (4096, 32, 1));
    vec![
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
    ]
}

/// The deep 128-byte cell's durable appends per second.
fn small_appends_target(cells: &[Cell]) -> Target {
    Target {
        name: "128 B, >= 256 in flight: durable appends/s",
        value: deep_cell(cells, 128).map(|cell| cell.appends_per_sec),
        goal: 1_000_000.0,
        higher_is_better: true,
    }
}

/// sealog's appends/s over each peer's, 32 writers x 4 KiB.
fn peer_targets(cells: &[Cell]) -> Vec<Target> {
    let peer_ratio = |name: &str| {
        find_cell(cells, name, (4096, 32, 1))
            .map(|cell| cell.sealog_over_peer)
            .filter(|ratio| *ratio > 0.0)
    };
    vec![
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
