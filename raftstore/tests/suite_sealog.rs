//! openraft's own storage suite (`openraft::testing::Suite::test_all`) on the sealog store:
//! every case builds a fresh ring and opens group 1 on it.

use std::io::Cursor;

use openraft::storage::{RaftStateMachine, Snapshot, SnapshotMeta};
use openraft::testing::{StoreBuilder, Suite};
use openraft::{
    BasicNode, Entry, EntryPayload, LogId, RaftSnapshotBuilder, StorageError, StoredMembership,
};
use sealog_openraft::{GroupLogStore, RaftStoreOptions, SealogRaftStore};

openraft::declare_raft_types!(
    /// The suite's types: string commands, string answers.
    pub Config:
        D = String,
        R = String,
        NodeId = u64,
        Node = BasicNode,
        Entry = Entry<Config>,
        SnapshotData = Cursor<Vec<u8>>,
);

/// A state machine that keeps only what the suite looks at: the last applied log id, the
/// membership and the snapshot.
#[derive(Clone, Default)]
struct StateMachine {
    applied: Option<LogId<u64>>,
    membership: StoredMembership<u64, BasicNode>,
    snapshot: Option<(SnapshotMeta<u64, BasicNode>, Vec<u8>)>,
}

impl RaftSnapshotBuilder<Config> for StateMachine {
    async fn build_snapshot(&mut self) -> Result<Snapshot<Config>, StorageError<u64>> {
        let meta = SnapshotMeta {
            last_log_id: self.applied,
            last_membership: self.membership.clone(),
            snapshot_id: format!("{:?}", self.applied),
        };
        self.snapshot = Some((meta.clone(), Vec::new()));
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(Vec::new())),
        })
    }
}

impl RaftStateMachine<Config> for StateMachine {
    type SnapshotBuilder = StateMachine;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId<u64>>, StoredMembership<u64, BasicNode>), StorageError<u64>> {
        Ok((self.applied, self.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<String>, StorageError<u64>>
    where
        I: IntoIterator<Item = Entry<Config>> + Send,
    {
        let mut answers = Vec::new();
        for entry in entries {
            self.applied = Some(entry.log_id);
            if let EntryPayload::Membership(membership) = entry.payload {
                self.membership = StoredMembership::new(Some(entry.log_id), membership);
            }
            answers.push(String::new());
        }
        Ok(answers)
    }

    async fn get_snapshot_builder(&mut self) -> StateMachine {
        self.clone()
    }

    async fn begin_receiving_snapshot(
        &mut self,
    ) -> Result<Box<Cursor<Vec<u8>>>, StorageError<u64>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<u64, BasicNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError<u64>> {
        self.applied = meta.last_log_id;
        self.membership = meta.last_membership.clone();
        self.snapshot = Some((meta.clone(), snapshot.into_inner()));
        Ok(())
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<Snapshot<Config>>, StorageError<u64>> {
        Ok(self.snapshot.clone().map(|(meta, data)| Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        }))
    }
}

/// A ring in a temporary directory, closed and removed when the case ends.
struct Ring {
    store: SealogRaftStore<Config>,
    _directory: tempfile::TempDir,
}

impl Drop for Ring {
    fn drop(&mut self) {
        self.store.close();
    }
}

struct Builder;

impl StoreBuilder<Config, GroupLogStore<Config>, StateMachine, Ring> for Builder {
    async fn build(
        &self,
    ) -> Result<(Ring, GroupLogStore<Config>, StateMachine), StorageError<u64>> {
        let directory = tempfile::tempdir().expect("a temporary directory");
        let path = directory.path().join("ring");
        SealogRaftStore::<Config>::format(&path, 16 << 20).expect("formats");
        let store = SealogRaftStore::open(&path, RaftStoreOptions::default()).expect("opens");
        let group = store.group(1).expect("group 1");
        let ring = Ring {
            store,
            _directory: directory,
        };
        Ok((ring, group, StateMachine::default()))
    }
}

#[test]
fn openraft_storage_suite_passes_on_the_sealog_store() {
    Suite::test_all(Builder).expect("the suite passes");
}
