//! openraft's storage suite on `MemLogStore`, the in-memory log store.

mod support;

use openraft::testing::{StoreBuilder, Suite};
use openraft::StorageError;
use sealog_openraft::mem::MemLogStore;
use support::{MemStateMachine, TestConfig};

/// A fresh, empty store and state machine per suite test.
struct MemBuilder;

impl StoreBuilder<TestConfig, MemLogStore<TestConfig>, MemStateMachine<TestConfig>> for MemBuilder {
    async fn build(
        &self,
    ) -> Result<((), MemLogStore<TestConfig>, MemStateMachine<TestConfig>), StorageError<u64>> {
        Ok(((), MemLogStore::new(), MemStateMachine::default()))
    }
}

#[test]
fn openraft_suite_passes_on_mem_log_store() {
    Suite::test_all(MemBuilder).expect("openraft storage suite");
}
