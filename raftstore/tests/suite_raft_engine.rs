//! openraft's storage suite on `RaftEngineLogStore` (each suite test on a fresh raft-engine in
//! a temporary directory), and what the suite does not cover: state after a reopen (truncation
//! then append, purge, truncation then purge past the marker), appends in flight while others
//! complete, and many groups writing at once.

#![cfg(feature = "peers")]

mod support;

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::task::Poll;

use openraft::storage::{LogState, RaftLogStorage, RaftLogStorageExt};
use openraft::testing::{StoreBuilder, Suite};
use openraft::{CommittedLeaderId, Entry, EntryPayload, LogId, RaftLogReader, StorageError, Vote};
use raft_engine::{Config, ReadableSize};
use sealog_openraft::raft_engine::{RaftEngineLogStore, RaftEngineNode};
use support::{MemStateMachine, Request, TestConfig};
use tempfile::TempDir;

type Store = RaftEngineLogStore<TestConfig>;

/// A small raft-engine: 1 MiB files, so that tests do not allocate the default 128 MiB.
fn config(dir: &Path) -> Config {
    Config {
        dir: dir
            .to_str()
            .expect("temporary directory is UTF-8")
            .to_string(),
        target_file_size: ReadableSize::mb(1),
        purge_threshold: ReadableSize::mb(2),
        ..Config::default()
    }
}

fn open(dir: &Path) -> RaftEngineNode {
    RaftEngineNode::open(config(dir), 2).expect("open raft-engine")
}

/// A fresh engine in a new temporary directory per suite test; the directory is the guard.
struct RaftEngineBuilder;

impl StoreBuilder<TestConfig, Store, MemStateMachine<TestConfig>, TempDir> for RaftEngineBuilder {
    async fn build(
        &self,
    ) -> Result<(TempDir, Store, MemStateMachine<TestConfig>), StorageError<u64>> {
        let dir = tempfile::tempdir().expect("temporary directory");
        let store = open(dir.path()).group(1)?;
        Ok((dir, store, MemStateMachine::default()))
    }
}

#[test]
fn openraft_suite_passes_on_raft_engine_log_store() {
    Suite::test_all(RaftEngineBuilder).expect("openraft storage suite");
}

fn log_id(term: u64, index: u64) -> LogId<u64> {
    LogId::new(CommittedLeaderId::new(term, 0), index)
}

fn entry(term: u64, index: u64) -> Entry<TestConfig> {
    Entry {
        log_id: log_id(term, index),
        payload: EntryPayload::Normal(Request(format!("{term}/{index}"))),
    }
}

fn entries(term: u64, indexes: std::ops::RangeInclusive<u64>) -> Vec<Entry<TestConfig>> {
    indexes.map(|index| entry(term, index)).collect()
}

/// The (term, index) of every entry the store has, checking each payload matches its id.
async fn terms_and_indexes(store: &mut Store) -> Vec<(u64, u64)> {
    let present = store.try_get_log_entries(..).await.expect("read entries");
    present
        .iter()
        .map(|entry| {
            let (term, index) = (entry.log_id.leader_id.term, entry.log_id.index);
            let expected = EntryPayload::<TestConfig>::Normal(Request(format!("{term}/{index}")));
            assert_eq!(format!("{:?}", entry.payload), format!("{expected:?}"));
            (term, index)
        })
        .collect()
}

fn expect_terms(
    term_of: impl Fn(u64) -> u64,
    indexes: std::ops::RangeInclusive<u64>,
) -> Vec<(u64, u64)> {
    indexes.map(|index| (term_of(index), index)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reopen_after_truncation_then_append_keeps_the_later_entries() {
    let dir = tempfile::tempdir().expect("temporary directory");
    {
        let mut store: Store = open(dir.path()).group(7).expect("group");
        store
            .blocking_append(entries(1, 1..=10))
            .await
            .expect("append");
        store.truncate(log_id(1, 6)).await.expect("truncate");
        store.save_vote(&Vote::new(2, 1)).await.expect("vote");
    }
    {
        let mut store: Store = open(dir.path()).group(7).expect("group");
        let state = store.get_log_state().await.expect("state");
        assert_eq!(
            state,
            LogState {
                last_purged_log_id: None,
                last_log_id: Some(log_id(1, 5))
            }
        );
        assert_eq!(
            terms_and_indexes(&mut store).await,
            expect_terms(|_| 1, 1..=5)
        );
        assert_eq!(
            store.read_vote().await.expect("vote"),
            Some(Vote::new(2, 1))
        );
        store
            .blocking_append(entries(2, 6..=8))
            .await
            .expect("append");
    }
    let later = |index| if index >= 6 { 2 } else { 1 };
    {
        let mut store: Store = open(dir.path()).group(7).expect("group");
        let state = store.get_log_state().await.expect("state");
        assert_eq!(state.last_log_id, Some(log_id(2, 8)));
        assert_eq!(
            terms_and_indexes(&mut store).await,
            expect_terms(later, 1..=8)
        );
        // A truncation with no append after it: only the marker hides 4..=8 from a reopen.
        store.truncate(log_id(1, 4)).await.expect("truncate");
    }
    let mut store: Store = open(dir.path()).group(7).expect("group");
    let state = store.get_log_state().await.expect("state");
    assert_eq!(state.last_log_id, Some(log_id(1, 3)));
    assert_eq!(
        terms_and_indexes(&mut store).await,
        expect_terms(|_| 1, 1..=3)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reopen_after_purge_keeps_the_purged_state() {
    let dir = tempfile::tempdir().expect("temporary directory");
    {
        let mut store: Store = open(dir.path()).group(3).expect("group");
        store
            .blocking_append(entries(1, 1..=10))
            .await
            .expect("append");
        store.purge(log_id(1, 4)).await.expect("purge");
        store
            .save_committed(Some(log_id(1, 9)))
            .await
            .expect("committed");
    }
    {
        let mut store: Store = open(dir.path()).group(3).expect("group");
        let state = store.get_log_state().await.expect("state");
        let expected = LogState {
            last_purged_log_id: Some(log_id(1, 4)),
            last_log_id: Some(log_id(1, 10)),
        };
        assert_eq!(state, expected);
        assert_eq!(
            terms_and_indexes(&mut store).await,
            expect_terms(|_| 1, 5..=10)
        );
        assert_eq!(
            store.read_committed().await.expect("committed"),
            Some(log_id(1, 9))
        );
        // Past the last entry, as installing a snapshot does.
        store.purge(log_id(1, 20)).await.expect("purge");
    }
    {
        let mut store: Store = open(dir.path()).group(3).expect("group");
        let state = store.get_log_state().await.expect("state");
        let expected = LogState {
            last_purged_log_id: Some(log_id(1, 20)),
            last_log_id: Some(log_id(1, 20)),
        };
        assert_eq!(state, expected);
        assert_eq!(terms_and_indexes(&mut store).await, vec![]);
        store
            .blocking_append(entries(2, 21..=21))
            .await
            .expect("append");
    }
    let mut store: Store = open(dir.path()).group(3).expect("group");
    let state = store.get_log_state().await.expect("state");
    assert_eq!(state.last_log_id, Some(log_id(2, 21)));
    assert_eq!(terms_and_indexes(&mut store).await, vec![(2, 21)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reopen_after_truncation_then_purge_past_the_marker() {
    let dir = tempfile::tempdir().expect("temporary directory");
    {
        let mut store: Store = open(dir.path()).group(5).expect("group");
        store
            .blocking_append(entries(1, 1..=10))
            .await
            .expect("append");
        store.truncate(log_id(1, 5)).await.expect("truncate");
        // raft-engine keeps 8..=10 (stale) after this compaction; the marker still hides them.
        store.purge(log_id(1, 7)).await.expect("purge");
    }
    {
        let mut store: Store = open(dir.path()).group(5).expect("group");
        let state = store.get_log_state().await.expect("state");
        let expected = LogState {
            last_purged_log_id: Some(log_id(1, 7)),
            last_log_id: Some(log_id(1, 7)),
        };
        assert_eq!(state, expected);
        assert_eq!(terms_and_indexes(&mut store).await, vec![]);
        store
            .blocking_append(entries(2, 8..=9))
            .await
            .expect("append");
    }
    let mut store: Store = open(dir.path()).group(5).expect("group");
    let state = store.get_log_state().await.expect("state");
    assert_eq!(state.last_log_id, Some(log_id(2, 9)));
    assert_eq!(terms_and_indexes(&mut store).await, vec![(2, 8), (2, 9)]);
}

/// Polls `futures` in order until all are done: their first polls run in that order, which
/// for appends is the order they are queued in.
async fn join_in_order<F: Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut futures: Vec<Pin<Box<F>>> = futures.into_iter().map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (future, output) in futures.iter_mut().zip(outputs.iter_mut()) {
            if output.is_none() {
                match future.as_mut().poll(cx) {
                    Poll::Ready(value) => *output = Some(value),
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    outputs
        .into_iter()
        .map(|output| output.expect("every future is done"))
        .collect()
}

const GROUPS: u64 = 4;
const BATCHES_PER_GROUP: u64 = 20;
const ENTRIES_PER_BATCH: u64 = 5;

/// One group's appends, all queued before the first completes.
async fn append_pipelined(node: RaftEngineNode, group_id: u64) {
    let store: Store = node.group(group_id).expect("group");
    let appends: Vec<_> = (0..BATCHES_PER_GROUP)
        .map(|batch| {
            let mut store = store.clone();
            let first = batch * ENTRIES_PER_BATCH + 1;
            async move {
                let batch = entries(1, first..=first + ENTRIES_PER_BATCH - 1);
                store.blocking_append(batch).await
            }
        })
        .collect();
    for result in join_in_order(appends).await {
        result.expect("append");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_appends_of_many_groups_land_in_order() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let last = BATCHES_PER_GROUP * ENTRIES_PER_BATCH;
    {
        let node = RaftEngineNode::open(config(dir.path()), 4).expect("open");
        let tasks: Vec<_> = (1..=GROUPS)
            .map(|group_id| tokio::spawn(append_pipelined(node.clone(), group_id)))
            .collect();
        for task in tasks {
            task.await.expect("group task");
        }
        // Readable as soon as `append` returns, before it is durable: poll an append once
        // (which queues it) and read it back before awaiting its completion.
        let mut store: Store = node.group(1).expect("group");
        let mut reader = store.clone();
        let next = entries(2, last + 1..=last + 3);
        let mut append = Box::pin(store.blocking_append(next));
        std::future::poll_fn(|cx| {
            let _ = append.as_mut().poll(cx);
            Poll::Ready(())
        })
        .await;
        let read = reader.try_get_log_entries(last + 1..).await.expect("read");
        assert_eq!(read.len(), 3);
        append.await.expect("append");
    }
    let node = open(dir.path());
    for group_id in 1..=GROUPS {
        let mut store: Store = node.group(group_id).expect("group");
        let last_term = if group_id == 1 { 2 } else { 1 };
        let last_index = if group_id == 1 { last + 3 } else { last };
        let state = store.get_log_state().await.expect("state");
        assert_eq!(state.last_log_id, Some(log_id(last_term, last_index)));
        let term_of = |index| if index > last { 2 } else { 1 };
        assert_eq!(
            terms_and_indexes(&mut store).await,
            expect_terms(term_of, 1..=last_index)
        );
    }
}
