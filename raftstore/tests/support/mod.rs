//! What the store suites share: a test `TypeConfig` and `MemStateMachine`, a generic
//! in-memory state machine (applied log id, last membership, a count of normal entries, and
//! snapshots as postcard bytes). openraft's suite needs a state machine beside the log store
//! under test, and it must not be the thing under test, so it is the simplest that passes the
//! suite's state-machine checks.

use std::io::Cursor;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use openraft::entry::RaftPayload;
use openraft::storage::{RaftStateMachine, Snapshot, SnapshotMeta};
use openraft::{
    AnyError, BasicNode, ErrorSubject, ErrorVerb, LogId, OptionalSend, RaftLogId,
    RaftSnapshotBuilder, RaftTypeConfig, StorageError, StorageIOError, StoredMembership,
};
use serde::{Deserialize, Serialize};

/// The suite's application request (it never builds one; the type only has to exist).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request(pub String);

/// The state machine's reply to an entry.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Response(pub Option<String>);

openraft::declare_raft_types!(
    /// The type config both suites run with.
    pub TestConfig:
        D = Request,
        R = Response,
        NodeId = u64,
        Node = BasicNode,
        Entry = openraft::Entry<TestConfig>,
        SnapshotData = Cursor<Vec<u8>>,
);

/// What a snapshot holds.
#[derive(Serialize, Deserialize)]
#[serde(bound = "")]
struct SmData<C: RaftTypeConfig> {
    last_applied: Option<LogId<C::NodeId>>,
    last_membership: StoredMembership<C::NodeId, C::Node>,
    normal_entries: u64,
}

/// A snapshot kept: its meta and its bytes.
type StoredSnapshot<C> = (
    SnapshotMeta<<C as RaftTypeConfig>::NodeId, <C as RaftTypeConfig>::Node>,
    Vec<u8>,
);

struct SmInner<C: RaftTypeConfig> {
    data: SmData<C>,
    /// The last snapshot built or installed: its meta and its bytes.
    current: Option<StoredSnapshot<C>>,
    /// Makes snapshot ids unique when two are built at one log id.
    snapshots_built: u64,
}

/// An in-memory state machine; clones share it (the snapshot builder is a clone).
pub struct MemStateMachine<C: RaftTypeConfig> {
    inner: Arc<Mutex<SmInner<C>>>,
}

impl<C: RaftTypeConfig> Clone for MemStateMachine<C> {
    fn clone(&self) -> Self {
        MemStateMachine {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<C: RaftTypeConfig> Default for MemStateMachine<C> {
    fn default() -> Self {
        MemStateMachine {
            inner: Arc::new(Mutex::new(SmInner {
                data: SmData {
                    last_applied: None,
                    last_membership: StoredMembership::default(),
                    normal_entries: 0,
                },
                current: None,
                snapshots_built: 0,
            })),
        }
    }
}

impl<C: RaftTypeConfig> MemStateMachine<C> {
    fn lock(&self) -> MutexGuard<'_, SmInner<C>> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn snapshot_error<C: RaftTypeConfig>(
    verb: ErrorVerb,
    error: impl ToString,
) -> StorageError<C::NodeId> {
    StorageError::IO {
        source: StorageIOError::new(ErrorSubject::Snapshot(None), verb, AnyError::error(error)),
    }
}

impl<C> RaftSnapshotBuilder<C> for MemStateMachine<C>
where
    C: RaftTypeConfig<SnapshotData = Cursor<Vec<u8>>>,
{
    async fn build_snapshot(&mut self) -> Result<Snapshot<C>, StorageError<C::NodeId>> {
        let mut inner = self.lock();
        let bytes = postcard::to_allocvec(&inner.data)
            .map_err(|e| snapshot_error::<C>(ErrorVerb::Write, e))?;
        inner.snapshots_built += 1;
        let last_index = inner.data.last_applied.as_ref().map(|log_id| log_id.index);
        let meta = SnapshotMeta {
            last_log_id: inner.data.last_applied.clone(),
            last_membership: inner.data.last_membership.clone(),
            snapshot_id: format!("{last_index:?}-{}", inner.snapshots_built),
        };
        inner.current = Some((meta.clone(), bytes.clone()));
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(bytes)),
        })
    }
}

impl<C> RaftStateMachine<C> for MemStateMachine<C>
where
    C: RaftTypeConfig<SnapshotData = Cursor<Vec<u8>>>,
    C::R: Default,
{
    type SnapshotBuilder = Self;

    async fn applied_state(
        &mut self,
    ) -> Result<
        (
            Option<LogId<C::NodeId>>,
            StoredMembership<C::NodeId, C::Node>,
        ),
        StorageError<C::NodeId>,
    > {
        let inner = self.lock();
        Ok((
            inner.data.last_applied.clone(),
            inner.data.last_membership.clone(),
        ))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<C::R>, StorageError<C::NodeId>>
    where
        I: IntoIterator<Item = C::Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut inner = self.lock();
        let mut replies = Vec::new();
        for entry in entries {
            let log_id = entry.get_log_id().clone();
            if let Some(membership) = entry.get_membership() {
                inner.data.last_membership =
                    StoredMembership::new(Some(log_id.clone()), membership.clone());
            } else if !entry.is_blank() {
                inner.data.normal_entries += 1;
            }
            inner.data.last_applied = Some(log_id);
            replies.push(C::R::default());
        }
        Ok(replies)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(
        &mut self,
    ) -> Result<Box<Cursor<Vec<u8>>>, StorageError<C::NodeId>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<C::NodeId, C::Node>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError<C::NodeId>> {
        let bytes = snapshot.into_inner();
        let data: SmData<C> =
            postcard::from_bytes(&bytes).map_err(|e| snapshot_error::<C>(ErrorVerb::Read, e))?;
        let mut inner = self.lock();
        inner.data = data;
        inner.current = Some((meta.clone(), bytes));
        Ok(())
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<Snapshot<C>>, StorageError<C::NodeId>> {
        let inner = self.lock();
        Ok(inner.current.as_ref().map(|(meta, bytes)| Snapshot {
            meta: meta.clone(),
            snapshot: Box::new(Cursor::new(bytes.clone())),
        }))
    }
}
