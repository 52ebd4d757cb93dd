//! `MemLogStore`: openraft's log store kept in memory only, the no-storage ceiling the
//! benchmarks compare the durable stores with (what openraft and the network cost when a log
//! write costs nothing). It owns a log of entries in a `BTreeMap`, the vote, the committed log
//! id and the last purged log id, all behind one mutex shared by every clone of the handle, so
//! the log reader openraft asks for sees the writer's appends. An append is "durable" as soon
//! as it is in the map, so `append` reports completion before it returns.
//!
//! openraft-memstore 0.9 implements only openraft's v1 `RaftStorage` API, and this crate uses
//! the v2 API (`RaftLogStorage`, feature `storage-v2`), which is why this store exists.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::ops::RangeBounds;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{LogId, OptionalSend, RaftLogId, RaftLogReader, RaftTypeConfig, StorageError, Vote};

/// What the handles share.
struct MemLog<C: RaftTypeConfig> {
    /// The present entries, by log index.
    entries: BTreeMap<u64, C::Entry>,
    /// The last purged log id: entries up to it are gone, and it is the last log id when no
    /// entry is left.
    last_purged: Option<LogId<C::NodeId>>,
    vote: Option<Vote<C::NodeId>>,
    committed: Option<LogId<C::NodeId>>,
}

/// An in-memory openraft v2 log store. Clones share one log: openraft's writer and the log
/// readers it hands to replication are clones of one handle.
pub struct MemLogStore<C: RaftTypeConfig> {
    log: Arc<Mutex<MemLog<C>>>,
}

impl<C: RaftTypeConfig> Clone for MemLogStore<C> {
    fn clone(&self) -> Self {
        MemLogStore {
            log: Arc::clone(&self.log),
        }
    }
}

impl<C: RaftTypeConfig> Default for MemLogStore<C> {
    fn default() -> Self {
        Self::new()
    }
}

impl<C: RaftTypeConfig> MemLogStore<C> {
    /// An empty log: no entry, no vote, nothing committed or purged.
    pub fn new() -> Self {
        MemLogStore {
            log: Arc::new(Mutex::new(MemLog {
                entries: BTreeMap::new(),
                last_purged: None,
                vote: None,
                committed: None,
            })),
        }
    }

    /// The shared log. A panic while it was held cannot have left it half-updated (every
    /// update is one map or field operation), so a poisoned lock is taken over as it is.
    fn lock(&self) -> MutexGuard<'_, MemLog<C>> {
        self.log.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<C> RaftLogReader<C> for MemLogStore<C>
where
    C: RaftTypeConfig,
    C::Entry: Clone,
{
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<C::Entry>, StorageError<C::NodeId>> {
        let log = self.lock();
        Ok(log
            .entries
            .range(range)
            .map(|(_, entry)| entry.clone())
            .collect())
    }
}

impl<C> RaftLogStorage<C> for MemLogStore<C>
where
    C: RaftTypeConfig,
    C::Entry: Clone,
{
    type LogReader = Self;

    async fn get_log_state(&mut self) -> Result<LogState<C>, StorageError<C::NodeId>> {
        let log = self.lock();
        let last_present = log
            .entries
            .values()
            .next_back()
            .map(|entry| entry.get_log_id().clone());
        Ok(LogState {
            last_purged_log_id: log.last_purged.clone(),
            // No entry left: the purged id is the last one (openraft's suite asks for this).
            last_log_id: last_present.or_else(|| log.last_purged.clone()),
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<C::NodeId>) -> Result<(), StorageError<C::NodeId>> {
        self.lock().vote = Some(vote.clone());
        Ok(())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<C::NodeId>>, StorageError<C::NodeId>> {
        Ok(self.lock().vote.clone())
    }

    async fn save_committed(
        &mut self,
        committed: Option<LogId<C::NodeId>>,
    ) -> Result<(), StorageError<C::NodeId>> {
        self.lock().committed = committed;
        Ok(())
    }

    async fn read_committed(
        &mut self,
    ) -> Result<Option<LogId<C::NodeId>>, StorageError<C::NodeId>> {
        Ok(self.lock().committed.clone())
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<C>,
    ) -> Result<(), StorageError<C::NodeId>>
    where
        I: IntoIterator<Item = C::Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        {
            let mut log = self.lock();
            for entry in entries {
                log.entries.insert(entry.get_log_id().index, entry);
            }
        }
        // In the map is as durable as this store gets: done before returning, which openraft
        // allows.
        callback.log_io_completed(Ok(()));
        Ok(())
    }

    async fn truncate(&mut self, log_id: LogId<C::NodeId>) -> Result<(), StorageError<C::NodeId>> {
        let mut log = self.lock();
        // `split_off` keeps the indexes below `log_id.index` and returns the rest, dropped.
        drop(log.entries.split_off(&log_id.index));
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId<C::NodeId>) -> Result<(), StorageError<C::NodeId>> {
        let mut log = self.lock();
        // Purging never moves back (openraft purges upwards only; a smaller id is a no-op).
        if log
            .last_purged
            .as_ref()
            .is_some_and(|purged| purged.index >= log_id.index)
        {
            return Ok(());
        }
        log.entries = match log_id.index.checked_add(1) {
            Some(first_kept) => log.entries.split_off(&first_kept),
            None => BTreeMap::new(),
        };
        log.last_purged = Some(log_id);
        Ok(())
    }
}
