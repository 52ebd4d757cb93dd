//! openraft's own storage suite (`openraft::testing::Suite::test_all`) on the sealog store:
//! every case formats a fresh ring, opens it and hands the suite group 1's log storage.

mod support;

use openraft::testing::{StoreBuilder, Suite};
use openraft::StorageError;
use sealog_openraft::{GroupLogStore, RaftStoreOptions, SealogRaftStore};
use support::{MemStateMachine, TestConfig};

/// A ring in a temporary directory, closed and removed when its case ends.
struct Ring {
    store: SealogRaftStore<TestConfig>,
    _directory: tempfile::TempDir,
}

impl Drop for Ring {
    fn drop(&mut self) {
        self.store.close();
    }
}

struct SealogBuilder;

impl StoreBuilder<TestConfig, GroupLogStore<TestConfig>, MemStateMachine<TestConfig>, Ring>
    for SealogBuilder
{
    async fn build(
        &self,
    ) -> Result<(Ring, GroupLogStore<TestConfig>, MemStateMachine<TestConfig>), StorageError<u64>>
    {
        let directory = tempfile::tempdir().expect("a temporary directory");
        let path = directory.path().join("ring");
        SealogRaftStore::<TestConfig>::format(&path, 16 << 20).expect("formats");
        let store = SealogRaftStore::open(&path, RaftStoreOptions::default()).expect("opens");
        let group = store.group(1).expect("group 1");
        let ring = Ring {
            store,
            _directory: directory,
        };
        Ok((ring, group, MemStateMachine::default()))
    }
}

#[test]
fn openraft_storage_suite_passes_on_the_sealog_store() {
    Suite::test_all(SealogBuilder).expect("the suite passes");
}
