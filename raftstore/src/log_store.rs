//! [`GroupLogStore`]: one group's log storage as openraft sees it, its `RaftLogStorage` and
//! `RaftLogReader`. The work is in `group` and `control`; this maps it onto openraft's calls
//! and errors.
//!
//! `append` issues its writes and returns; the flush callback runs from a task that waits
//! for them, so it is called only once every entry of the call is durable, and appends of
//! many groups and many callers meet in the drive's group commit meanwhile.

use std::fmt::Debug;
use std::ops::RangeBounds;
use std::sync::Arc;

use crate::StoreTypes;
use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{ErrorSubject, ErrorVerb, LogId, OptionalSend, RaftLogReader, StorageError, Vote};

use crate::error::{to_storage_error, RaftStoreError};
use crate::group::Group;

/// One Raft group's log storage on a [`SealogRaftStore`](crate::SealogRaftStore). Clones
/// share the group (a clone is openraft's log reader).
pub struct GroupLogStore<C: StoreTypes> {
    group: Arc<Group<C>>,
}

impl<C: StoreTypes> Clone for GroupLogStore<C> {
    fn clone(&self) -> Self {
        GroupLogStore {
            group: Arc::clone(&self.group),
        }
    }
}

impl<C: StoreTypes> GroupLogStore<C> {
    pub(crate) fn new(group: Arc<Group<C>>) -> GroupLogStore<C> {
        GroupLogStore { group }
    }

    /// The group's id.
    pub fn group_id(&self) -> u64 {
        self.group.id
    }

    /// Issues the writes of `entries` and calls `done` once all of them are durable (or with
    /// the first error met), from a task of the current tokio runtime, or from a thread of
    /// its own outside one. The entries are readable when this returns.
    pub fn append_then<I, F>(&self, entries: I, done: F) -> Result<(), RaftStoreError>
    where
        I: IntoIterator<Item = C::Entry>,
        F: FnOnce(Result<(), RaftStoreError>) + Send + 'static,
    {
        let appended = self.group.append(entries)?;
        let group = Arc::clone(&self.group);
        run_to_completion(async move { done(group.complete(appended).await) });
        Ok(())
    }
}

/// Runs `finish` on a task of the current tokio runtime, or on a thread of its own outside
/// one, so that a caller never has to hold a runtime to get its writes waited for.
fn run_to_completion(finish: impl std::future::Future<Output = ()> + Send + 'static) {
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => {
            runtime.spawn(finish);
        }
        Err(_) => {
            std::thread::spawn(move || sealog_logdrive::wait(finish));
        }
    }
}

fn log_error<NID: openraft::NodeId>(
    verb: ErrorVerb,
) -> impl Fn(RaftStoreError) -> StorageError<NID> {
    move |error| to_storage_error(ErrorSubject::Logs, verb, &error)
}

impl<C: StoreTypes> RaftLogReader<C> for GroupLogStore<C> {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<C::Entry>, StorageError<C::NodeId>> {
        let bounds = (range.start_bound().cloned(), range.end_bound().cloned());
        self.group
            .read(bounds)
            .await
            .map_err(log_error(ErrorVerb::Read))
    }
}

impl<C: StoreTypes> RaftLogStorage<C> for GroupLogStore<C> {
    type LogReader = GroupLogStore<C>;

    async fn get_log_state(&mut self) -> Result<LogState<C>, StorageError<C::NodeId>> {
        let (last_purged_log_id, last_log_id) = self.group.log_state();
        Ok(LogState {
            last_purged_log_id,
            last_log_id,
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<C::NodeId>) -> Result<(), StorageError<C::NodeId>> {
        self.group
            .save_vote(vote.clone())
            .await
            .map_err(|error| to_storage_error(ErrorSubject::Vote, ErrorVerb::Write, &error))
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<C::NodeId>>, StorageError<C::NodeId>> {
        Ok(self.group.vote_and_committed().0)
    }

    async fn save_committed(
        &mut self,
        committed: Option<LogId<C::NodeId>>,
    ) -> Result<(), StorageError<C::NodeId>> {
        let write = self
            .group
            .save_committed(committed)
            .map_err(|error| to_storage_error(ErrorSubject::Store, ErrorVerb::Write, &error))?;
        let Some(write) = write else {
            return Ok(());
        };
        let group = Arc::clone(&self.group);
        run_to_completion(async move {
            if let Err(error) = group.finish_meta(write).await {
                tracing::warn!(group = group.id, %error, "saving the committed log id");
            }
        });
        Ok(())
    }

    async fn read_committed(
        &mut self,
    ) -> Result<Option<LogId<C::NodeId>>, StorageError<C::NodeId>> {
        Ok(self.group.vote_and_committed().1)
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
        self.append_then(entries, move |outcome| {
            callback.log_io_completed(outcome.map_err(std::io::Error::other));
        })
        .map_err(log_error(ErrorVerb::Write))
    }

    async fn truncate(&mut self, log_id: LogId<C::NodeId>) -> Result<(), StorageError<C::NodeId>> {
        self.group
            .truncate(log_id.clone())
            .await
            .map_err(|error| to_storage_error(ErrorSubject::Log(log_id), ErrorVerb::Delete, &error))
    }

    async fn purge(&mut self, log_id: LogId<C::NodeId>) -> Result<(), StorageError<C::NodeId>> {
        self.group
            .purge(log_id.clone())
            .await
            .map_err(|error| to_storage_error(ErrorSubject::Log(log_id), ErrorVerb::Delete, &error))
    }
}
