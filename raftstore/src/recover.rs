//! Opening a store's groups from its LogDrives: each group's metadata is the highest written
//! address of its metadata LogDrive; its map names its segments, and any LogDrive of the
//! group that the map does not name is left over from a truncation, purge or creation that
//! a crash cut short, and is deleted. The last log id is the highest entry the map leaves
//! visible.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::StoreTypes;
use openraft::{LogId, RaftLogId};
use sealog_logdrive::{wait, LocalLogDrive, LogDrive, LogDriveStore, ReadOutcome};

use crate::codec::{decode, GroupMeta};
use crate::error::RaftStoreError;
use crate::group::Group;
use crate::ids::{meta_id, split};

/// Every group of `store`, recovered, with what was left over deleted.
pub(crate) fn recover_groups<C: StoreTypes>(
    store: &LogDriveStore,
    cache_entries: usize,
) -> Result<BTreeMap<u64, Arc<Group<C>>>, RaftStoreError> {
    let ids = store
        .ids()
        .map_err(|error| RaftStoreError::drive(0, 0, "listing LogDrives", error))?;
    let mut by_group: BTreeMap<u64, (bool, Vec<u64>)> = BTreeMap::new();
    for id in ids {
        let (group, n) = split(id);
        let entry = by_group.entry(group).or_default();
        if n == 0 {
            entry.0 = true;
        } else {
            entry.1.push(id);
        }
    }
    let mut groups = BTreeMap::new();
    for (group, (has_meta, segments)) in by_group {
        let recovered = if has_meta {
            recover_group::<C>(store, group, &segments, cache_entries)?
        } else {
            None
        };
        match recovered {
            Some(recovered) => {
                groups.insert(group, Arc::new(recovered));
            }
            None => delete_all(store, group, has_meta, &segments)?,
        }
    }
    Ok(groups)
}

/// Deletes what is left of a group whose creation never finished.
fn delete_all(
    store: &LogDriveStore,
    group: u64,
    has_meta: bool,
    segments: &[u64],
) -> Result<(), RaftStoreError> {
    let meta = has_meta.then(|| meta_id(group));
    for &id in segments.iter().chain(meta.iter()) {
        wait(store.delete(id))
            .map_err(|error| RaftStoreError::drive(group, id, "deleting a leftover", error))?;
    }
    Ok(())
}

/// Group `group` from its metadata LogDrive and `segments` (its other LogDrives), or none
/// when its metadata was never written.
fn recover_group<C: StoreTypes>(
    store: &LogDriveStore,
    group: u64,
    segments: &[u64],
    cache_entries: usize,
) -> Result<Option<Group<C>>, RaftStoreError> {
    let fail = |id: u64, operation: &str| {
        let operation = operation.to_string();
        move |error| RaftStoreError::drive(group, id, operation, error)
    };
    let id = meta_id(group);
    let meta_drive = store.get(id).map_err(fail(id, "opening the metadata"))?;
    let length = wait(meta_drive.length()).map_err(fail(id, "metadata length"))?;
    let Some(address) = length.n.checked_sub(1) else {
        return Ok(None);
    };
    let bytes = match wait(meta_drive.read(address)).map_err(fail(id, "metadata read"))? {
        ReadOutcome::Value(bytes) => bytes,
        other => {
            return Err(RaftStoreError::Missing {
                group,
                index: address,
                found: format!("{other:?} at the metadata's last address"),
            })
        }
    };
    let meta: GroupMeta<C::NodeId> = decode(group, "metadata", address, &bytes)?;
    let mut drives = Vec::with_capacity(meta.segments.len());
    for segment in &meta.segments {
        let id = segment.drive_id;
        drives.push(store.get(id).map_err(fail(id, "opening a segment"))?);
    }
    for &id in segments {
        if meta.segments.iter().all(|segment| segment.drive_id != id) {
            wait(store.delete(id)).map_err(fail(id, "deleting a leftover segment"))?;
        }
    }
    let recovered = Group::new(
        group,
        store.clone(),
        meta_drive,
        meta,
        length.n,
        drives,
        cache_entries,
    );
    let last = last_log_id(&recovered)?;
    {
        let mut state = recovered.lock();
        state.meta_trimmed = length.first;
        state.flushed = last.as_ref().map(|last| last.index);
        state.last_log_id = last;
    }
    Ok(Some(recovered))
}

/// The highest entry the group's map leaves visible, or the purge point when there is none.
fn last_log_id<C: StoreTypes>(
    group: &Group<C>,
) -> Result<Option<LogId<C::NodeId>>, RaftStoreError> {
    let (segments, purged) = {
        let state = group.lock();
        (state.segments.clone(), state.meta.last_purged.clone())
    };
    let floor = purged.as_ref().map_or(0, |purged| purged.index + 1);
    let mut upper = u64::MAX;
    for segment in segments.iter().rev() {
        let drive: &LocalLogDrive = &segment.drive;
        let length = wait(drive.length())
            .map_err(|error| RaftStoreError::drive(group.id, drive.id(), "length", error))?;
        let top = segment.first_index.saturating_add(length.n).min(upper);
        upper = segment.first_index;
        if top <= floor.max(segment.first_index) {
            continue;
        }
        let index = top - 1;
        let read = drive.read(index - segment.first_index);
        let entry: C::Entry = wait(group.finish_read(index, drive.id(), read))?;
        return Ok(Some(entry.get_log_id().clone()));
    }
    Ok(purged)
}
