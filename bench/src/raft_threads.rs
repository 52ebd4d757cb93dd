//! The process's CPU time by kind of thread (`/proc/self/task/*/stat`), for the raft section
//! to say which threads used the CPU of a cell: sealog's drive threads, raft-engine's writers,
//! the tokio workers running openraft, the network and the clients. The process's total
//! (`getrusage`) says whether a cell was CPU-bound; this says whose CPU it was. A leaf.

use std::collections::BTreeMap;
use std::time::Instant;

use crate::cells::cpu_seconds;

/// Clock ticks per second of `/proc`'s times: USER_HZ, which Linux fixes at 100 for
/// userspace on every architecture it exposes it on.
const TICKS_PER_SECOND: f64 = 100.0;

/// A thread's kind from its name (at most 15 bytes): up to the first space, without a
/// trailing index, so that `sealog-drive /path` and `raft-engine-writer-3` group with their
/// kind.
fn kind(name: &str) -> String {
    let first = name.trim().split(' ').next().unwrap_or("");
    first
        .trim_end_matches(|c: char| c.is_ascii_digit() || c == '-')
        .to_string()
}

/// One thread's user + system CPU seconds from its `stat` line (fields 14 and 15, counted
/// after the parenthesised name, which may hold spaces).
fn stat_seconds(stat: &str) -> Option<f64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (state): utime is field 14, stime 15.
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / TICKS_PER_SECOND)
}

/// CPU seconds so far of every live thread of the process, by thread id, with its kind.
pub fn thread_cpu() -> BTreeMap<u64, (String, f64)> {
    let mut threads = BTreeMap::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return threads;
    };
    for task in tasks.flatten() {
        let Some(tid) = task
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u64>().ok())
        else {
            continue;
        };
        let path = task.path();
        let name = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
        let seconds = std::fs::read_to_string(path.join("stat"))
            .ok()
            .and_then(|stat| stat_seconds(&stat));
        if let Some(seconds) = seconds {
            threads.insert(tid, (kind(&name), seconds));
        }
    }
    threads
}

/// The CPUs each kind of thread used between two snapshots `window_seconds` apart (CPU
/// seconds over wall seconds), busiest first; a thread that started in between counts from
/// zero, one that ended is missed.
pub fn cores_by_kind(
    before: &BTreeMap<u64, (String, f64)>,
    after: &BTreeMap<u64, (String, f64)>,
    window_seconds: f64,
) -> Vec<(String, f64)> {
    let mut kinds: BTreeMap<String, f64> = BTreeMap::new();
    for (tid, (name, seconds)) in after {
        let earlier = before.get(tid).map_or(0.0, |(_, seconds)| *seconds);
        *kinds.entry(name.clone()).or_default() += (seconds - earlier).max(0.0);
    }
    let mut cores: Vec<(String, f64)> = kinds
        .into_iter()
        .map(|(name, seconds)| (name, seconds / window_seconds.max(1e-9)))
        .filter(|(_, cores)| *cores >= 0.005)
        .collect();
    cores.sort_by(|a, b| b.1.total_cmp(&a.1));
    cores
}

/// Waits through the measured window `[start, end)` (the cell's tasks run meanwhile) and
/// returns the process's CPU seconds in it and the CPUs each kind of thread used.
pub async fn cpu_over_window(start: Instant, end: Instant) -> (f64, Vec<(String, f64)>) {
    tokio::time::sleep_until(start.into()).await;
    let (cpu_at_start, threads_at_start) = (cpu_seconds(), thread_cpu());
    tokio::time::sleep_until(end.into()).await;
    let cpu = cpu_seconds() - cpu_at_start;
    let window_seconds = end.duration_since(start).as_secs_f64();
    (
        cpu,
        cores_by_kind(&threads_at_start, &thread_cpu(), window_seconds),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_and_stat_lines_parse() {
        assert_eq!(kind("sealog-drive /w\n"), "sealog-drive");
        assert_eq!(kind("raft-engine-wri"), "raft-engine-wri");
        assert_eq!(kind("tokio-runtime-w"), "tokio-runtime-w");
        assert_eq!(kind("writer-12"), "writer");
        let stat = "42 (a (b) c) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0";
        assert_eq!(stat_seconds(stat), Some(3.0));
    }
}
