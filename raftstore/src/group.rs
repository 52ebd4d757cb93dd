//! One Raft group's log on the store: its state in memory (the metadata as last written, the
//! segments' handles, the last log id, the entries not yet known durable and a few recent
//! ones), appends, reads and metadata writes. Truncation, purge and creation, which change
//! the segment map, are in `control`.
//!
//! Entries are served from memory from the moment `append` returns until they are durable
//! (a LogDrive read finds an address only once its write's outcome is in), and a few more
//! after that, because a leader reads what it just appended to send it to its followers.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::{Mutex, MutexGuard};

use crate::StoreTypes;
use bytes::Bytes;
use openraft::{LogId, RaftLogId, Vote};
use sealog_logdrive::{LocalLogDrive, LogDrive, LogDriveStore, OpFuture, ReadOutcome};

use crate::codec::{decode, encode, GroupMeta};
use crate::error::RaftStoreError;

/// Every this many metadata writes, the metadata LogDrive is trimmed below the newest
/// durable one (each write holds the whole state, so older ones are garbage).
const META_TRIM_EVERY: u64 = 64;

/// A log id of `C`, or none.
type MaybeLogId<C> = Option<LogId<<C as openraft::RaftTypeConfig>::NodeId>>;

/// One segment of a group's log: a LogDrive holding indices from `first_index`.
#[derive(Clone)]
pub(crate) struct Segment {
    /// The first index it holds, at address 0.
    pub first_index: u64,
    /// Its LogDrive.
    pub drive: LocalLogDrive,
}

/// A group's state in memory, under its mutex.
pub(crate) struct GroupState<C: StoreTypes> {
    /// The metadata as last issued.
    pub meta: GroupMeta<C::NodeId>,
    /// The metadata LogDrive's next address.
    pub meta_next: u64,
    /// The metadata LogDrive's trim point.
    pub meta_trimmed: u64,
    /// The segments, as `meta.segments` names them.
    pub segments: Vec<Segment>,
    /// The last log id appended (and not truncated).
    pub last_log_id: Option<LogId<C::NodeId>>,
    /// Entries by index: every one not yet known durable, and recent durable ones.
    pub cache: BTreeMap<u64, C::Entry>,
    /// Every index up to this one is durable (as far as this process knows).
    pub flushed: Option<u64>,
    /// Truncations so far: an append's completion moves `flushed` only if none came since
    /// it was issued, because the indices it wrote may hold other entries now.
    pub epoch: u64,
}

/// One Raft group of a store.
pub(crate) struct Group<C: StoreTypes> {
    /// The group's id.
    pub id: u64,
    /// The store its LogDrives live in.
    pub store: LogDriveStore,
    /// The metadata LogDrive.
    pub meta_drive: LocalLogDrive,
    /// The state.
    pub state: Mutex<GroupState<C>>,
    /// Held across a truncation or a purge, which take several steps with waits between.
    pub control: tokio::sync::Mutex<()>,
    /// Durable entries kept in memory beside the ones in flight.
    pub cache_entries: usize,
}

/// The writes of one `append`, issued, to be waited for.
pub(crate) struct Appended {
    /// Each entry's index and its write.
    writes: Vec<(u64, u64, OpFuture<()>)>,
    /// The group's epoch when they were issued.
    epoch: u64,
}

/// A metadata write, issued, to be waited for.
pub(crate) struct MetaWrite {
    address: u64,
    write: OpFuture<()>,
}

impl<C: StoreTypes> Group<C> {
    /// The state, locked (a panic elsewhere while it was held leaves nothing half-done that
    /// a reader could trip over: every change is made whole under the lock).
    pub fn lock(&self) -> MutexGuard<'_, GroupState<C>> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The last purged log id and the last log id, as openraft asks for them.
    pub fn log_state(&self) -> (MaybeLogId<C>, MaybeLogId<C>) {
        let state = self.lock();
        let purged = state.meta.last_purged.clone();
        let last = match (state.last_log_id.clone(), purged.clone()) {
            (Some(last), Some(purged)) if last.index < purged.index => Some(purged),
            (None, purged) => purged,
            (last, _) => last,
        };
        (purged, last)
    }

    /// The vote and the committed log id saved last.
    pub fn vote_and_committed(&self) -> (Option<Vote<C::NodeId>>, MaybeLogId<C>) {
        let state = self.lock();
        (state.meta.vote.clone(), state.meta.committed.clone())
    }

    /// Issues the metadata as it now stands in `state` at the next address.
    pub fn issue_meta(&self, state: &mut GroupState<C>) -> Result<MetaWrite, RaftStoreError> {
        let (address, bytes) = self.next_meta(state)?;
        let write = self.meta_drive.write(address, 0, Bytes::from(bytes));
        Ok(MetaWrite { address, write })
    }

    /// [`Group::issue_meta`] for a new purge point: admitted like the trims it lets follow
    /// (`submit_releasing_write`), so that a ring full of appends can still be purged.
    pub fn issue_releasing_meta(
        &self,
        state: &mut GroupState<C>,
    ) -> Result<MetaWrite, RaftStoreError> {
        let (address, bytes) = self.next_meta(state)?;
        let pending = self
            .meta_drive
            .submit_releasing_write(address, 0, Bytes::from(bytes));
        Ok(MetaWrite {
            address,
            write: Box::pin(pending),
        })
    }

    /// The metadata LogDrive's next address and the metadata's bytes for it.
    fn next_meta(&self, state: &mut GroupState<C>) -> Result<(u64, Vec<u8>), RaftStoreError> {
        let address = state.meta_next;
        let bytes = encode(self.id, "metadata", address, &state.meta)?;
        state.meta_next += 1;
        Ok((address, bytes))
    }

    /// Waits for a metadata write to be durable, then trims the metadata LogDrive below it
    /// every [`META_TRIM_EVERY`] writes.
    pub async fn finish_meta(&self, meta: MetaWrite) -> Result<(), RaftStoreError> {
        let MetaWrite { address, write } = meta;
        write.await.map_err(|error| {
            RaftStoreError::drive(self.id, self.meta_drive.id(), "metadata write", error)
        })?;
        let mut state = self.lock();
        if address >= state.meta_trimmed + META_TRIM_EVERY {
            state.meta_trimmed = address;
            // Issued when called; its outcome is not needed: an untrimmed record is only
            // garbage the next trim takes, and a failed drive fails the next write.
            drop(self.meta_drive.trim(address));
        }
        Ok(())
    }

    /// Saves `vote`, durably: every write issued before it is durable too when it returns
    /// (the drive acknowledges in LSN order), which is the order openraft requires.
    pub async fn save_vote(&self, vote: Vote<C::NodeId>) -> Result<(), RaftStoreError> {
        let meta = {
            let mut state = self.lock();
            state.meta.vote = Some(vote);
            self.issue_meta(&mut state)?
        };
        self.finish_meta(meta).await
    }

    /// Saves the committed log id: issued in order with the group's other writes, durable
    /// with the next write that is waited for (openraft does not need it durable at once,
    /// and waiting would put a flush in its core loop at every commit).
    pub fn save_committed(
        &self,
        committed: Option<LogId<C::NodeId>>,
    ) -> Result<Option<MetaWrite>, RaftStoreError> {
        let mut state = self.lock();
        if state.meta.committed == committed {
            return Ok(None);
        }
        state.meta.committed = committed;
        self.issue_meta(&mut state).map(Some)
    }

    /// Issues the writes of `entries` to the open segment and keeps them in memory, readable
    /// at once.
    pub fn append<I>(&self, entries: I) -> Result<Appended, RaftStoreError>
    where
        I: IntoIterator<Item = C::Entry>,
    {
        let mut state = self.lock();
        let segment = state
            .segments
            .last()
            .cloned()
            .ok_or(RaftStoreError::Missing {
                group: self.id,
                index: 0,
                found: "no segment in the group's map".to_string(),
            })?;
        let mut writes = Vec::new();
        for entry in entries {
            let log_id = entry.get_log_id().clone();
            let index = log_id.index;
            let Some(address) = index.checked_sub(segment.first_index) else {
                return Err(RaftStoreError::AppendBelowSegment {
                    group: self.id,
                    index,
                    first: segment.first_index,
                });
            };
            let bytes = encode(self.id, "entry", index, &entry)?;
            let write = segment.drive.write(address, 0, Bytes::from(bytes));
            writes.push((index, segment.drive.id(), write));
            state.cache.insert(index, entry);
            state.last_log_id = Some(log_id);
        }
        Ok(Appended {
            writes,
            epoch: state.epoch,
        })
    }

    /// Waits for an append's writes to be durable, then lets the cache drop what it need no
    /// longer hold.
    pub async fn complete(&self, appended: Appended) -> Result<(), RaftStoreError> {
        let mut last = None;
        for (index, drive, write) in appended.writes {
            write.await.map_err(|error| {
                RaftStoreError::drive(self.id, drive, format!("append at index {index}"), error)
            })?;
            last = Some(index);
        }
        let mut state = self.lock();
        if appended.epoch == state.epoch && last > state.flushed {
            state.flushed = last;
        }
        self.evict(&mut state);
        Ok(())
    }

    /// Drops durable entries from memory past the cache's size.
    pub fn evict(&self, state: &mut GroupState<C>) {
        while state.cache.len() > self.cache_entries {
            match state.cache.first_key_value() {
                Some((&index, _)) if Some(index) <= state.flushed => {
                    state.cache.pop_first();
                }
                _ => break,
            }
        }
    }

    /// The entries in `range` that the log holds (past the purge point, up to the last log
    /// id): from memory where they are there, read from their segments otherwise. A log
    /// need not begin right after its purge point (openraft's suite starts one at index 1,
    /// and a purge past the last entry leaves the next one further on), so unwritten
    /// indices before the first entry found are not in it; one after an entry is a hole,
    /// which the store reports rather than skipping.
    pub async fn read(
        &self,
        range: (Bound<u64>, Bound<u64>),
    ) -> Result<Vec<C::Entry>, RaftStoreError> {
        let planned = self.plan_read(range);
        let mut entries = Vec::with_capacity(planned.len());
        for (index, read) in planned {
            match read {
                Planned::Cached(entry) => entries.push(entry),
                Planned::Read(drive, read) => match self.read_outcome(index, drive, read).await? {
                    Ok(entry) => entries.push(entry),
                    Err(_) if entries.is_empty() => {}
                    Err(found) => return Err(self.missing(index, drive, found)),
                },
                Planned::Unmapped => {
                    return Err(RaftStoreError::Missing {
                        group: self.id,
                        index,
                        found: "no segment in the group's map".to_string(),
                    })
                }
            }
        }
        Ok(entries)
    }

    /// Each index of `range` the log holds, with its entry or its read, issued.
    fn plan_read(&self, range: (Bound<u64>, Bound<u64>)) -> Vec<(u64, Planned<C>)> {
        let state = self.lock();
        let first = state
            .meta
            .last_purged
            .as_ref()
            .map_or(0, |purged| purged.index + 1);
        let Some(last) = state.last_log_id.as_ref().map(|last| last.index) else {
            return Vec::new();
        };
        let start = match range.0 {
            Bound::Included(start) => start,
            Bound::Excluded(start) => start.saturating_add(1),
            Bound::Unbounded => 0,
        }
        .max(first);
        let end = match range.1 {
            Bound::Included(end) => end.saturating_add(1),
            Bound::Excluded(end) => end,
            Bound::Unbounded => u64::MAX,
        }
        .min(last.saturating_add(1));
        (start..end.max(start))
            .map(|index| match state.cache.get(&index) {
                Some(entry) => (index, Planned::Cached(entry.clone())),
                None => match segment_of(&state.segments, index) {
                    Some(segment) => {
                        let read = segment.drive.read(index - segment.first_index);
                        (index, Planned::Read(segment.drive.id(), read))
                    }
                    None => (index, Planned::Unmapped),
                },
            })
            .collect()
    }

    /// The entry a read of `index` finds, which must be there.
    pub(crate) async fn finish_read(
        &self,
        index: u64,
        drive: u64,
        read: OpFuture<ReadOutcome>,
    ) -> Result<C::Entry, RaftStoreError> {
        self.read_outcome(index, drive, read)
            .await?
            .map_err(|found| self.missing(index, drive, found))
    }

    /// `index` missing from LogDrive `drive`, which answered `found`.
    fn missing(&self, index: u64, drive: u64, found: ReadOutcome) -> RaftStoreError {
        RaftStoreError::Missing {
            group: self.id,
            index,
            found: format!("{found:?} in LogDrive {drive}"),
        }
    }

    /// The entry a read of `index` finds, or what the LogDrive answered when it found no
    /// value (unwritten, trimmed, damaged).
    pub(crate) async fn read_outcome(
        &self,
        index: u64,
        drive: u64,
        read: OpFuture<ReadOutcome>,
    ) -> Result<Result<C::Entry, ReadOutcome>, RaftStoreError> {
        let outcome = read.await.map_err(|error| {
            RaftStoreError::drive(self.id, drive, format!("read of index {index}"), error)
        })?;
        let bytes = match outcome {
            ReadOutcome::Value(bytes) => bytes,
            ReadOutcome::Damaged => return Err(self.missing(index, drive, outcome)),
            other => return Ok(Err(other)),
        };
        let entry: C::Entry = decode(self.id, "entry", index, &bytes)?;
        if entry.get_log_id().index != index {
            return Err(RaftStoreError::Missing {
                group: self.id,
                index,
                found: format!("the entry of index {}", entry.get_log_id().index),
            });
        }
        Ok(Ok(entry))
    }
}

/// A planned read: the entry from memory, or a read issued to a LogDrive.
enum Planned<C: StoreTypes> {
    Cached(C::Entry),
    Read(u64, OpFuture<ReadOutcome>),
    Unmapped,
}

/// The segment that holds `index`: the last one whose first index is at or below it (none
/// for an index below every first, which the map never leaves visible).
pub(crate) fn segment_of(segments: &[Segment], index: u64) -> Option<&Segment> {
    let after = segments.partition_point(|segment| segment.first_index <= index);
    after.checked_sub(1).map(|at| &segments[at])
}
