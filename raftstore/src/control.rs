//! The operations that change a group's map from indices to LogDrives: truncation, purge and
//! the group's creation. A LogDrive address takes one value for good, and Raft writes an
//! index again after a truncation, so a truncation from index i opens a new segment (a new
//! LogDrive) whose address 0 is index i, and records the new map in the group's metadata,
//! durably, before it returns: from then on nothing at or past i in the old segments is
//! visible, across crashes too, and entries appended at those indices land in the new one.
//! The old segment is then sealed at i, which drops what it held past i from the ring's
//! live data; segments wholly past i are deleted.
//!
//! Each step is ordered so that a crash between two leaves a state that opens correctly:
//! a new segment no map names yet, or an old one the map no longer names, is deleted when
//! the store opens (`recover`), and the map written is the truth about which entries are
//! visible whether or not the seal and deletions after it happened.

use std::sync::Arc;

use crate::StoreTypes;
use openraft::{LogId, RaftLogId};
use sealog_logdrive::{LogDrive, LogDriveError, LogDriveStore};

use crate::codec::{GroupMeta, SegmentRef};
use crate::error::RaftStoreError;
use crate::group::{segment_of, Group, GroupState, Segment};
use crate::ids::{meta_id, next_segment_id, segment_id};
use crate::store::SEGMENT_CAPACITY;

impl<C: StoreTypes> Group<C> {
    /// Truncates the log from `log_id`'s index on, durably (see the module doc).
    pub async fn truncate(&self, log_id: LogId<C::NodeId>) -> Result<(), RaftStoreError> {
        let _control = self.control.lock().await;
        let index = log_id.index;
        let new_id = {
            let state = self.lock();
            match &state.last_log_id {
                Some(last) if last.index >= index => {}
                _ => return Ok(()),
            }
            next_segment_id(self.id, &state.meta.segments)
        };
        // The new last log id is read before anything changes, so that readers never see
        // the log without one.
        let last = self.entry_log_id(index.checked_sub(1)).await?;
        let created = self.store.create(new_id, SEGMENT_CAPACITY).await;
        let drive = created
            .map_err(|error| RaftStoreError::drive(self.id, new_id, "segment creation", error))?;
        let (meta, dropped, sealed) = {
            let mut state = self.lock();
            let (dropped, sealed) = open_segment(&mut state, index, drive);
            state.cache.split_off(&index);
            state.epoch += 1;
            state.flushed = state
                .flushed
                .map(|flushed| flushed.min(index.saturating_sub(1)));
            state.last_log_id = last;
            (self.issue_meta(&mut state)?, dropped, sealed)
        };
        self.finish_meta(meta).await?;
        self.seal_and_delete(sealed, dropped).await
    }

    /// The log id of the entry at `index` (the purge point at or below it; none for none).
    async fn entry_log_id(
        &self,
        index: Option<u64>,
    ) -> Result<Option<LogId<C::NodeId>>, RaftStoreError> {
        let Some(index) = index else {
            return Ok(None);
        };
        let read = {
            let state = self.lock();
            let purged = state.meta.last_purged.clone();
            if purged.as_ref().is_some_and(|purged| purged.index >= index) {
                return Ok(purged);
            }
            if let Some(entry) = state.cache.get(&index) {
                return Ok(Some(entry.get_log_id().clone()));
            }
            let segment = segment_of(&state.segments, index).ok_or(RaftStoreError::Missing {
                group: self.id,
                index,
                found: "no segment".to_string(),
            })?;
            (
                segment.drive.id(),
                segment.drive.read(index - segment.first_index),
            )
        };
        // An unwritten index before the log's first entry (a log that began past its purge
        // point) leaves the purge point as the last log id.
        match self.read_outcome(index, read.0, read.1).await? {
            Ok(entry) => Ok(Some(entry.get_log_id().clone())),
            Err(_) => Ok(self.lock().meta.last_purged.clone()),
        }
    }

    /// Seals `sealed` at its length (ignoring an earlier, longer seal: the map already hides
    /// what lies past the new one) and deletes the segments in `dropped`.
    async fn seal_and_delete(
        &self,
        sealed: Option<(Segment, u64)>,
        dropped: Vec<u64>,
    ) -> Result<(), RaftStoreError> {
        if let Some((segment, length)) = sealed {
            match segment.drive.seal(length, 0).await {
                Ok(()) | Err(LogDriveError::Sealed { .. }) => {}
                Err(error) => {
                    return Err(RaftStoreError::drive(
                        self.id,
                        segment.drive.id(),
                        "seal",
                        error,
                    ))
                }
            }
        }
        for id in dropped {
            match self.store.delete(id).await {
                Ok(()) | Err(LogDriveError::Missing { .. }) => {}
                Err(error) => return Err(RaftStoreError::drive(self.id, id, "deletion", error)),
            }
        }
        Ok(())
    }

    /// Purges the log up to `log_id`, inclusive: the purge point is written to the metadata
    /// first (so a crash never leaves entries gone below a purge point the store does not
    /// know), then the segments wholly below it are deleted and the one it ends in trimmed.
    pub async fn purge(&self, log_id: LogId<C::NodeId>) -> Result<(), RaftStoreError> {
        let _control = self.control.lock().await;
        let (meta, dropped, trim) = {
            let mut state = self.lock();
            if state
                .meta
                .last_purged
                .as_ref()
                .is_some_and(|purged| purged.index >= log_id.index)
            {
                return Ok(());
            }
            state.meta.last_purged = Some(log_id.clone());
            let keep_from = state
                .segments
                .iter()
                .rposition(|segment| segment.first_index <= log_id.index + 1)
                .unwrap_or(0);
            let dropped: Vec<u64> = state
                .segments
                .drain(..keep_from)
                .map(|segment| segment.drive.id())
                .collect();
            state.meta.segments.drain(..keep_from);
            state.cache.retain(|&index, _| index > log_id.index);
            if state
                .last_log_id
                .as_ref()
                .is_none_or(|last| last.index < log_id.index)
            {
                state.last_log_id = Some(log_id.clone());
                state.flushed = state.flushed.max(Some(log_id.index));
            }
            let trim = state.segments.first().map(|first| {
                let upto = (log_id.index + 1).saturating_sub(first.first_index);
                (first.clone(), upto)
            });
            (self.issue_releasing_meta(&mut state)?, dropped, trim)
        };
        self.finish_meta(meta).await?;
        self.seal_and_delete(None, dropped).await?;
        match trim {
            Some((segment, upto)) => self.trim_segment(segment, upto).await,
            None => Ok(()),
        }
    }

    /// Trims `segment` below `upto`, or below what it holds if that is less (a purge past the
    /// last entry: what comes later is written past the purge point).
    async fn trim_segment(&self, segment: Segment, upto: u64) -> Result<(), RaftStoreError> {
        let drive = segment.drive.id();
        let length = segment
            .drive
            .length()
            .await
            .map_err(|error| RaftStoreError::drive(self.id, drive, "length", error))?;
        let upto = upto.min(length.n);
        if upto <= length.first {
            return Ok(());
        }
        segment
            .drive
            .trim(upto)
            .await
            .map_err(|error| RaftStoreError::drive(self.id, drive, "trim", error))
    }
}

/// Opens a segment at `index` with `drive` in `state`'s map: the segments wholly at or past
/// `index` leave it (their ids returned, to delete), and the one `index` falls in is
/// returned with the length to seal it at.
fn open_segment<C: StoreTypes>(
    state: &mut GroupState<C>,
    index: u64,
    drive: sealog_logdrive::LocalLogDrive,
) -> (Vec<u64>, Option<(Segment, u64)>) {
    let keep = state
        .segments
        .partition_point(|segment| segment.first_index < index);
    let dropped = state
        .segments
        .drain(keep..)
        .map(|segment| segment.drive.id())
        .collect();
    state.meta.segments.truncate(keep);
    let sealed = state
        .segments
        .last()
        .map(|segment| (segment.clone(), index - segment.first_index));
    state.meta.segments.push(SegmentRef {
        first_index: index,
        drive_id: drive.id(),
    });
    state.segments.push(Segment {
        first_index: index,
        drive,
    });
    (dropped, sealed)
}

/// Creates `groups` in `store`, durably: each group's first segment and its metadata
/// LogDrive, then the metadata naming the segment (a crash before the last leaves a
/// metadata LogDrive with nothing written, which the next open deletes with its segment).
/// Every group's records are issued before any is waited for, so that creating a thousand
/// groups takes a few group commits rather than three thousand.
pub(crate) async fn create_groups<C: StoreTypes>(
    store: &LogDriveStore,
    groups: &[u64],
    cache_entries: usize,
) -> Result<Vec<Arc<Group<C>>>, RaftStoreError> {
    let creations: Vec<_> = groups
        .iter()
        .map(|&group| {
            let data = store.create(segment_id(group, 1), SEGMENT_CAPACITY);
            (group, data, store.create(meta_id(group), SEGMENT_CAPACITY))
        })
        .collect();
    let mut created = Vec::with_capacity(groups.len());
    for (group, data, meta_drive) in creations {
        let failed = |id: u64| move |e| RaftStoreError::drive(group, id, "group creation", e);
        let data = data.await.map_err(failed(segment_id(group, 1)))?;
        let meta_drive = meta_drive.await.map_err(failed(meta_id(group)))?;
        let meta = GroupMeta::new(data.id());
        let group = Group::new(
            group,
            store.clone(),
            meta_drive,
            meta,
            0,
            vec![data],
            cache_entries,
        );
        let write = group.issue_meta(&mut group.lock())?;
        created.push((Arc::new(group), write));
    }
    let mut groups = Vec::with_capacity(created.len());
    for (group, write) in created {
        group.finish_meta(write).await?;
        groups.push(group);
    }
    Ok(groups)
}

impl<C: StoreTypes> Group<C> {
    /// A group from its parts, as created or recovered.
    pub(crate) fn new(
        id: u64,
        store: LogDriveStore,
        meta_drive: sealog_logdrive::LocalLogDrive,
        meta: GroupMeta<C::NodeId>,
        meta_next: u64,
        drives: Vec<sealog_logdrive::LocalLogDrive>,
        cache_entries: usize,
    ) -> Group<C> {
        let segments = meta
            .segments
            .iter()
            .zip(drives)
            .map(|(reference, drive)| Segment {
                first_index: reference.first_index,
                drive,
            })
            .collect();
        let meta_trimmed = meta_next.saturating_sub(1);
        Group {
            id,
            store,
            meta_drive,
            state: std::sync::Mutex::new(GroupState {
                meta,
                meta_next,
                meta_trimmed,
                segments,
                last_log_id: None,
                cache: Default::default(),
                flushed: None,
                epoch: 0,
            }),
            control: tokio::sync::Mutex::new(()),
            cache_entries,
        }
    }
}
