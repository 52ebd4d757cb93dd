//! [`SealogRaftStore`]: a node's Raft log storage on one sealog ring, for many Raft groups at
//! once (a multi-Raft node). Each group is a handful of LogDrives in the ring's LogDrive
//! store (docs/raft.md): a metadata LogDrive holding its vote, committed log id, purge point
//! and map of segments, and the segments holding its entries. Every group's writes go to
//! the same drive and share its group commit; the store's reclaimer relocates what an idle
//! group still needs when it pins the ring's head, so the space other groups purge comes
//! back whatever that group does.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use crate::StoreTypes;
use sealog::DriveOptions;
use sealog_logdrive::{geometry, wait, LogDriveStore, StoreOptions};

use crate::control::create_groups;
use crate::error::RaftStoreError;
use crate::group::Group;
use crate::ids::GROUP_ID_MAX;
use crate::log_store::GroupLogStore;
use crate::recover::recover_groups;

/// The capacity of every segment LogDrive: Raft indices are u64, and a segment starts at
/// any of them, so its addresses go as far as the id space's encoding lets them.
pub(crate) const SEGMENT_CAPACITY: u64 = 1 << 62;

/// How a [`SealogRaftStore`] opens and runs.
#[derive(Clone, Debug)]
pub struct RaftStoreOptions {
    /// The LogDrive store's options (the drive's, the reclaimer's, waits for room).
    pub store: StoreOptions,
    /// Durable entries each group keeps in memory beside those in flight, for the reads a
    /// leader makes right after appending (replication to its followers).
    pub cache_entries_per_group: usize,
}

impl Default for RaftStoreOptions {
    fn default() -> RaftStoreOptions {
        RaftStoreOptions {
            store: StoreOptions::default().drive(DriveOptions::default()),
            cache_entries_per_group: 64,
        }
    }
}

/// A node's Raft log storage: many groups on one ring. Cloning it is cheap and every clone
/// is the same store.
pub struct SealogRaftStore<C: StoreTypes> {
    store: LogDriveStore,
    groups: Arc<Mutex<BTreeMap<u64, Arc<Group<C>>>>>,
    cache_entries: usize,
}

impl<C: StoreTypes> Clone for SealogRaftStore<C> {
    fn clone(&self) -> Self {
        SealogRaftStore {
            store: self.store.clone(),
            groups: Arc::clone(&self.groups),
            cache_entries: self.cache_entries,
        }
    }
}

impl<C: StoreTypes> SealogRaftStore<C> {
    /// Formats a ring of `size_bytes` at `path` for a store (a LogDrive store's geometry).
    pub fn format(path: &Path, size_bytes: u64) -> Result<(), RaftStoreError> {
        let error = |reason: String| RaftStoreError::Format {
            path: path.display().to_string(),
            size_bytes,
            reason,
        };
        let options =
            geometry::format_options(size_bytes, None, 4096).map_err(|e| error(e.to_string()))?;
        sealog::format(path, &options).map_err(|e| error(e.to_string()))?;
        Ok(())
    }

    /// Opens the ring at `path` and recovers every group on it; LogDrives left over from an
    /// operation a crash cut short are deleted (see `control`).
    pub fn open(path: &Path, options: RaftStoreOptions) -> Result<Self, RaftStoreError> {
        let store = LogDriveStore::open_with_options(path, options.store).map_err(|source| {
            RaftStoreError::Open {
                path: path.display().to_string(),
                source,
            }
        })?;
        let groups = match recover_groups(&store, options.cache_entries_per_group) {
            Ok(groups) => groups,
            Err(error) => {
                store.close();
                return Err(error);
            }
        };
        Ok(SealogRaftStore {
            store,
            groups: Arc::new(Mutex::new(groups)),
            cache_entries: options.cache_entries_per_group,
        })
    }

    /// The log storage of group `group`, created durably if the ring has none. Blocks while
    /// it creates one (three records made durable); it does not need an async runtime.
    pub fn group(&self, group: u64) -> Result<GroupLogStore<C>, RaftStoreError> {
        let mut logs = self.groups_of(&[group])?;
        logs.pop().ok_or(RaftStoreError::GroupId {
            group,
            max: GROUP_ID_MAX,
        })
    }

    /// The log storage of each group in `ids`, in order, creating those the ring lacks in one
    /// go (their records share group commits). Blocks while it creates them.
    pub fn groups_of(&self, ids: &[u64]) -> Result<Vec<GroupLogStore<C>>, RaftStoreError> {
        if let Some(&group) = ids.iter().find(|&&group| group > GROUP_ID_MAX) {
            return Err(RaftStoreError::GroupId {
                group,
                max: GROUP_ID_MAX,
            });
        }
        let mut groups = self
            .groups
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut missing: Vec<u64> = ids
            .iter()
            .copied()
            .filter(|id| !groups.contains_key(id))
            .collect();
        missing.sort_unstable();
        missing.dedup();
        let created = wait(create_groups::<C>(
            &self.store,
            &missing,
            self.cache_entries,
        ))?;
        for group in created {
            groups.insert(group.id, group);
        }
        Ok(ids
            .iter()
            .map(|id| GroupLogStore::new(Arc::clone(&groups[id])))
            .collect())
    }

    /// The ids of the groups on the ring.
    pub fn groups(&self) -> Vec<u64> {
        let groups = self
            .groups
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        groups.keys().copied().collect()
    }

    /// The LogDrive store underneath, for its figures (`reclaim_stats`) and for tests.
    pub fn logdrive_store(&self) -> &LogDriveStore {
        &self.store
    }

    /// Closes the ring: every group's operations answer errors from now on.
    pub fn close(&self) {
        self.store.close();
    }
}
