//! Many Raft groups on one ring: ten thousand groups made, written and reopened with their
//! own index ranges and votes; and an idle group that does not pin the ring while a
//! hundred others write and purge many times its size.

mod common;

use std::time::Instant;

use common::{entry, format, log_id, open, payload, runtime, Config};
use openraft::storage::{RaftLogStorage, RaftLogStorageExt};
use openraft::{RaftLogReader, Vote};
use sealog_openraft::GroupLogStore;

#[test]
fn ten_thousand_groups_keep_their_own_logs_and_votes_across_a_reopen() {
    const GROUPS: u64 = 10_000;
    let directory = tempfile::tempdir().expect("a directory");
    let ring = directory.path().join("ring");
    format(&ring, 256 << 20);
    let store = open(&ring);
    let started = Instant::now();
    let ids: Vec<u64> = (1..=GROUPS).collect();
    let mut logs = store.groups_of(&ids).expect("groups");
    let created = started.elapsed();
    let runtime = runtime();
    runtime.block_on(async {
        // Group g holds indices g..g+2 (its own range), written under term g % 7 + 1.
        for (log, group) in logs.iter_mut().zip(1..) {
            let term = group % 7 + 1;
            let entries = (group..group + 3).map(|i| entry(term, i, &format!("{group}/{i}")));
            log.blocking_append(entries.collect::<Vec<_>>())
                .await
                .expect("appends");
            if group % 3 == 0 {
                log.save_vote(&Vote::new(term, group)).await.expect("votes");
            }
        }
    });
    store.close();
    let reopened = Instant::now();
    let store = open(&ring);
    let reopen = reopened.elapsed();
    assert_eq!(store.groups().len() as u64, GROUPS);
    runtime.block_on(async {
        for group in 1..=GROUPS {
            let mut log = store.group(group).expect("group");
            let term = group % 7 + 1;
            let state = log.get_log_state().await.expect("state");
            assert_eq!(
                state.last_log_id,
                Some(log_id(term, group + 2)),
                "group {group}"
            );
            let entries = log.try_get_log_entries(0..).await.expect("reads");
            let first = entries.first().map(|e| e.log_id.index);
            assert_eq!((first, entries.len()), (Some(group), 3), "group {group}");
            let vote = log.read_vote().await.expect("vote");
            let expected = (group % 3 == 0).then(|| Vote::new(term, group));
            assert_eq!(vote, expected, "group {group}");
        }
    });
    println!("10,000 groups: created in {created:?}, reopened in {reopen:?}");
    store.close();
}

#[test]
fn an_idle_group_does_not_pin_the_ring_while_others_purge() {
    let directory = tempfile::tempdir().expect("a directory");
    let ring = directory.path().join("ring");
    format(&ring, 8 << 20);
    let store = open(&ring);
    let runtime = runtime();
    let mut idle = store.group(1).expect("group");
    runtime.block_on(async {
        let entries: Vec<_> = (1..=20)
            .map(|i| entry(3, i, &format!("idle {i}")))
            .collect();
        idle.blocking_append(entries).await.expect("appends");
        idle.save_vote(&Vote::new_committed(3, 1))
            .await
            .expect("votes");
    });
    let ids: Vec<u64> = (2..=101).collect();
    let busy = store.groups_of(&ids).expect("groups");
    let written_bytes: u64 = runtime.block_on(async {
        // Ten laps of the ring: ten tasks (so that appends share group commits), each taking
        // its ten groups in turn, append 4 entries of 4 KB at a time and purge them.
        let mut busy = busy.into_iter();
        let tasks: Vec<_> = (0..10)
            .map(|_| tokio::spawn(write_and_purge(busy.by_ref().take(10).collect())))
            .collect();
        let mut written_bytes = 0;
        for task in tasks {
            written_bytes += task.await.expect("the task");
        }
        written_bytes
    });
    let relocated = store.logdrive_store().reclaim_stats().relocated_records;
    assert!(
        written_bytes > 10 * (8 << 20),
        "{written_bytes} bytes written"
    );
    assert!(
        relocated > 0,
        "the idle group's records were never relocated"
    );
    store.close();
    let store = open(&ring);
    let mut idle: GroupLogStore<Config> = store.group(1).expect("group");
    runtime.block_on(async {
        let entries = idle.try_get_log_entries(0..).await.expect("reads");
        let payloads: Vec<_> = entries.iter().filter_map(payload).collect();
        let expected: Vec<_> = (1..=20).map(|i| format!("idle {i}")).collect();
        assert_eq!(payloads, expected);
        let vote = idle.read_vote().await.expect("vote");
        assert_eq!(vote, Some(Vote::new_committed(3, 1)));
    });
    store.close();
}

/// 60 rounds, each group of `logs` in turn appending 4 entries of 4 KB and purging them;
/// the bytes appended.
async fn write_and_purge(mut logs: Vec<GroupLogStore<Config>>) -> u64 {
    let filler = "x".repeat(4000);
    let mut written_bytes = 0;
    for round in 0..60_u64 {
        for log in logs.iter_mut() {
            let first = round * 4 + 1;
            let entries: Vec<_> = (first..first + 4).map(|i| entry(1, i, &filler)).collect();
            log.blocking_append(entries)
                .await
                .expect("the ring has room");
            log.purge(log_id(1, first + 3)).await.expect("purges");
            written_bytes += 4 * 4000;
        }
    }
    written_bytes
}

#[test]
fn a_ring_full_of_appends_can_still_be_purged() {
    let directory = tempfile::tempdir().expect("a directory");
    let ring = directory.path().join("ring");
    format(&ring, 4 << 20);
    // Writes that find no room are refused at once, so the first refusal marks a full ring.
    let options = sealog_openraft::RaftStoreOptions {
        store: sealog_logdrive::StoreOptions::default().full_wait(std::time::Duration::ZERO),
        ..Default::default()
    };
    let store = sealog_openraft::SealogRaftStore::<Config>::open(&ring, options).expect("opens");
    let mut log = store.group(1).expect("group");
    let filler = "x".repeat(4000);
    runtime().block_on(async {
        let mut next = 1;
        while log
            .blocking_append(vec![entry(1, next, &filler)])
            .await
            .is_ok()
        {
            next += 1;
            assert!(next < 10_000, "a 4 MiB ring never filled");
        }
        // The purge's metadata write is admitted like the trim it lets follow; as a client
        // write it would be refused by the ring it is about to free.
        let state = log.get_log_state().await.expect("state");
        let last = state.last_log_id.expect("entries");
        log.purge(last).await.expect("a full ring is purged");
        // The reclaimer frees the ring's head in the background; once it has, appends fit.
        store.logdrive_store().reclaim_now().expect("reclaims");
        let mut appended = 0;
        for _ in 0..50 {
            let next = log
                .get_log_state()
                .await
                .expect("state")
                .last_log_id
                .map_or(1, |id| id.index + 1);
            log.blocking_append(vec![entry(1, next, &filler)])
                .await
                .expect("room again");
            appended += 1;
        }
        assert_eq!(appended, 50);
    });
    store.close();
}
