//! Truncation across crashes: a child process truncates, acknowledges, and is killed with
//! SIGKILL; the reopened store shows nothing at or past the truncation point of what came
//! before it, and entries appended after it at the same indices win. Three cases: a crash
//! right after the truncation (before the next append), a truncation followed by appends
//! and a purge, and a truncation of a group whose entries the reclaimer had relocated.

mod common;

use std::path::Path;
use std::time::Duration;

use common::{entry, format, log_id, open, payload, read_until, runtime, spawn_child, Config};
use openraft::storage::{RaftLogStorage, RaftLogStorageExt};
use openraft::RaftLogReader;
use sealog_openraft::GroupLogStore;

/// The child's side: runs the scenario the parent named, prints `READY` and waits to die.
#[test]
fn child() {
    let Ok(scenario) = std::env::var(common::SCENARIO_ENV) else {
        return;
    };
    let ring = std::env::var_os(common::RING_ENV).expect("a ring");
    let store = open(Path::new(&ring));
    let runtime = runtime();
    runtime.block_on(async {
        match scenario.as_str() {
            "truncate" => truncate_then_crash(&store).await,
            "purge" => truncate_append_purge(&store).await,
            "relocated" => truncate_relocated(&store).await,
            other => panic!("no scenario {other}"),
        }
    });
    println!("READY");
    loop {
        std::thread::park();
    }
}

async fn append_range(
    log: &mut GroupLogStore<Config>,
    term: u64,
    indices: std::ops::RangeInclusive<u64>,
    tag: &str,
) {
    let entries: Vec<_> = indices
        .map(|index| entry(term, index, &format!("{tag}{index}")))
        .collect();
    log.blocking_append(entries).await.expect("appends");
}

async fn truncate_then_crash(store: &sealog_openraft::SealogRaftStore<Config>) {
    let mut log = store.group(1).expect("group");
    append_range(&mut log, 1, 1..=20, "old").await;
    log.truncate(log_id(1, 11)).await.expect("truncates");
}

async fn truncate_append_purge(store: &sealog_openraft::SealogRaftStore<Config>) {
    let mut log = store.group(1).expect("group");
    append_range(&mut log, 1, 1..=20, "old").await;
    log.truncate(log_id(1, 11)).await.expect("truncates");
    append_range(&mut log, 2, 11..=15, "new").await;
    log.purge(log_id(1, 12)).await.expect("purges");
}

async fn truncate_relocated(store: &sealog_openraft::SealogRaftStore<Config>) {
    let mut log = store.group(1).expect("group");
    append_range(&mut log, 1, 1..=50, "old").await;
    let mut busy = store.group(2).expect("group");
    let filler = "x".repeat(4000);
    let mut next = 1;
    // Another group writes and purges several laps of the ring: group 1's records pin the
    // head until the reclaimer relocates them.
    while store.logdrive_store().reclaim_stats().relocated_records < 50 || next < 4000 {
        let entries: Vec<_> = (next..next + 64)
            .map(|index| entry(1, index, &filler))
            .collect();
        busy.blocking_append(entries).await.expect("appends");
        busy.purge(log_id(1, next + 63)).await.expect("purges");
        next += 64;
        assert!(next < 100_000, "the reclaimer relocated nothing");
    }
    println!(
        "RELOCATED {}",
        store.logdrive_store().reclaim_stats().relocated_records
    );
    log.truncate(log_id(1, 30)).await.expect("truncates");
    append_range(&mut log, 2, 30..=35, "new").await;
}

/// Runs `scenario` in a child on a fresh ring of `size_bytes`, kills it once it is ready,
/// and returns the ring's directory and the lines the child printed.
fn crash_after(scenario: &str, size_bytes: u64) -> (tempfile::TempDir, Vec<String>) {
    let directory = tempfile::tempdir().expect("a directory");
    let ring = directory.path().join("ring");
    format(&ring, size_bytes);
    let mut child = spawn_child(scenario, &ring, &[]);
    let (lines, _rest) = read_until(&mut child, "READY", Duration::from_secs(120));
    child.kill().expect("SIGKILL");
    child.wait().expect("the child ends");
    (directory, lines)
}

/// Every entry of group 1, as (term, index, payload).
fn entries_of(log: &mut GroupLogStore<Config>) -> Vec<(u64, u64, String)> {
    runtime().block_on(async {
        let entries = log.try_get_log_entries(0..).await.expect("reads");
        entries
            .iter()
            .map(|e| {
                (
                    e.log_id.leader_id.term,
                    e.log_id.index,
                    payload(e).unwrap_or("").to_string(),
                )
            })
            .collect()
    })
}

fn expected(parts: &[(u64, std::ops::RangeInclusive<u64>, &str)]) -> Vec<(u64, u64, String)> {
    parts
        .iter()
        .flat_map(|(term, range, tag)| range.clone().map(move |i| (*term, i, format!("{tag}{i}"))))
        .collect()
}

#[test]
fn a_crash_between_a_truncation_and_the_next_append_keeps_the_truncation() {
    let (directory, _) = crash_after("truncate", 8 << 20);
    let store = open(&directory.path().join("ring"));
    let mut log = store.group(1).expect("group");
    assert_eq!(entries_of(&mut log), expected(&[(1, 1..=10, "old")]));
    let state = runtime().block_on(log.get_log_state()).expect("state");
    assert_eq!(state.last_log_id, Some(log_id(1, 10)));
    // The indices truncated take new entries, and those are what a second reopen finds.
    runtime().block_on(append_range(&mut log, 2, 11..=12, "new"));
    store.close();
    let store = open(&directory.path().join("ring"));
    let mut log = store.group(1).expect("group");
    assert_eq!(
        entries_of(&mut log),
        expected(&[(1, 1..=10, "old"), (2, 11..=12, "new")])
    );
    store.close();
}

#[test]
fn a_truncation_then_appends_and_a_purge_survive_a_crash() {
    let (directory, _) = crash_after("purge", 8 << 20);
    let store = open(&directory.path().join("ring"));
    let mut log = store.group(1).expect("group");
    assert_eq!(entries_of(&mut log), expected(&[(2, 13..=15, "new")]));
    let state = runtime().block_on(log.get_log_state()).expect("state");
    assert_eq!(state.last_purged_log_id, Some(log_id(1, 12)));
    assert_eq!(state.last_log_id, Some(log_id(2, 15)));
    store.close();
}

#[test]
fn a_truncation_of_relocated_entries_survives_a_crash() {
    let (directory, lines) = crash_after("relocated", 4 << 20);
    assert!(
        lines.iter().any(|line| line.contains("RELOCATED")),
        "{lines:?}"
    );
    let store = open(&directory.path().join("ring"));
    let mut log = store.group(1).expect("group");
    assert_eq!(
        entries_of(&mut log),
        expected(&[(1, 1..=29, "old"), (2, 30..=35, "new")])
    );
    store.close();
}
