//! The VirtualLog's MetaStore in etcd: one key holds the register. Only etcd's Range and Txn
//! calls are used, and a compare-and-swap is one Txn that compares the key's `mod_revision`
//! with the one the register had at the version expected, so that etcd's own linearizable
//! check decides which of racing proposals wins.
//!
//! The stored value is the register's version, the proposer's id and a sequence number of
//! its own, then the chain. The version is ours, not etcd's: it is what the VirtualLog uses
//! as an epoch, and it must not depend on etcd's revision counter. The proposer and sequence
//! number make two proposals never the same bytes. After a Txn whose outcome is unknown (the
//! call failed or timed out), the same Txn is sent again. Its comparison lets at most one of
//! the two apply. If it applies, the proposal won. If it does not, the value read in the same
//! Txn says whether the earlier attempt won (our proposal is there) or another proposal did.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, GetResponse, KvClient, Txn, TxnOp, TxnOpResponse,
};
use sealog_logdrive::LogDriveError;
use sealog_vlog::meta::MetaFuture;
use sealog_vlog::{MetaError, MetaStore, Versioned};

/// The stored value's header: version, proposer, sequence number.
const HEADER_BYTES: usize = 24;

/// How the store talks to etcd.
#[derive(Clone, Debug)]
pub struct EtcdOptions {
    /// etcd's client URLs (`http://127.0.0.1:2379`).
    pub endpoints: Vec<String>,
    /// The key that holds the register.
    pub key: String,
    /// This proposer's id, unique among the handles that share the key.
    pub proposer: u64,
    /// The longest one call may take.
    pub call_timeout: Duration,
    /// Tries at a Txn whose outcome stays unknown before giving up.
    pub attempts_max: u32,
    /// The pause between those tries.
    pub retry_after: Duration,
}

impl EtcdOptions {
    /// The register at `key` in the etcd at `endpoints`, for proposer `proposer`, with
    /// 2 s calls and 8 tries 100 ms apart.
    pub fn new(endpoints: Vec<String>, key: &str, proposer: u64) -> EtcdOptions {
        EtcdOptions {
            endpoints,
            key: key.into(),
            proposer,
            call_timeout: Duration::from_secs(2),
            attempts_max: 8,
            retry_after: Duration::from_millis(100),
        }
    }
}

/// A MetaStore in etcd: see the module doc. Its calls run on the client library's runtime,
/// so that its futures can be polled by any executor.
pub struct EtcdMetaStore {
    inner: Arc<Inner>,
}

struct Inner {
    kv: KvClient,
    options: EtcdOptions,
    proposals: AtomicU64,
}

/// The register as found: its version, proposer and sequence number, value, and the key's
/// `mod_revision`.
struct Found {
    version: u64,
    proposal: (u64, u64),
    value: Bytes,
    mod_revision: i64,
}

fn unavailable(options: &EtcdOptions, what: &str, error: impl std::fmt::Display) -> LogDriveError {
    LogDriveError::Io {
        reason: format!(
            "etcd at {} ({what} of {}): {error}",
            options.endpoints.join(","),
            options.key
        ),
    }
}

impl EtcdMetaStore {
    /// Connects to etcd. The connection is made lazily; a first call finds out whether etcd
    /// answers.
    pub async fn connect(options: EtcdOptions) -> Result<EtcdMetaStore, MetaError> {
        let connect_options = ConnectOptions::new()
            .with_timeout(options.call_timeout)
            .with_connect_timeout(options.call_timeout);
        let endpoints = options.endpoints.clone();
        let client = crate::runtime::spawn(async move {
            Client::connect(endpoints, Some(connect_options)).await
        })
        .await
        .map_err(|error| MetaError::Store(unavailable(&options, "connect", error)))?
        .map_err(|error| MetaError::Store(unavailable(&options, "connect", error)))?;
        let inner = Inner {
            kv: client.kv_client(),
            options,
            proposals: AtomicU64::new(0),
        };
        Ok(EtcdMetaStore {
            inner: Arc::new(inner),
        })
    }
}

impl Inner {
    fn decode(&self, response: &GetResponse) -> Result<Option<Found>, MetaError> {
        let Some(kv) = response.kvs().first() else {
            return Ok(None);
        };
        let mut bytes = Bytes::copy_from_slice(kv.value());
        if bytes.len() < HEADER_BYTES {
            return Err(MetaError::Corrupt {
                version: 0,
                reason: format!(
                    "etcd key {} holds {} bytes, less than a header",
                    self.options.key,
                    bytes.len()
                ),
            });
        }
        let version = bytes.get_u64_le();
        let proposal = (bytes.get_u64_le(), bytes.get_u64_le());
        Ok(Some(Found {
            version,
            proposal,
            value: bytes,
            mod_revision: kv.mod_revision(),
        }))
    }

    /// The register now (a Range on the client runtime).
    async fn range(&self) -> Result<Option<Found>, MetaError> {
        let mut kv = self.kv.clone();
        let response = kv
            .get(self.options.key.clone(), None)
            .await
            .map_err(|error| MetaError::Store(unavailable(&self.options, "range", error)))?;
        self.decode(&response)
    }

    /// Sends the Txn: put `proposal` if the key's mod_revision is still `mod_revision`,
    /// else read it. `Ok(None)`: it applied; `Ok(Some(found))`: it did not, and that is
    /// what is there.
    async fn txn(
        &self,
        mod_revision: i64,
        proposal: Bytes,
    ) -> Result<Result<(), Option<Found>>, String> {
        let (mut kv, key) = (self.kv.clone(), self.options.key.clone());
        let txn = Txn::new()
            .when([Compare::mod_revision(
                key.clone(),
                CompareOp::Equal,
                mod_revision,
            )])
            .and_then([TxnOp::put(key.clone(), proposal.to_vec(), None)])
            .or_else([TxnOp::get(key, None)]);
        let response = kv.txn(txn).await.map_err(|error| error.to_string())?;
        if response.succeeded() {
            return Ok(Ok(()));
        }
        for op in response.op_responses() {
            if let TxnOpResponse::Get(get) = op {
                return Ok(Err(self.decode(&get).map_err(|e| e.to_string())?));
            }
        }
        Ok(Err(None))
    }

    async fn compare_and_swap(&self, expected: u64, value: Bytes) -> Result<u64, MetaError> {
        let mod_revision = match self.range().await? {
            None if expected == 0 => 0,
            None => return Err(MetaError::Conflict { current: 0 }),
            Some(found) if found.version == expected => found.mod_revision,
            Some(found) => {
                return Err(MetaError::Conflict {
                    current: found.version,
                })
            }
        };
        let ours = (
            self.options.proposer,
            self.proposals.fetch_add(1, Ordering::Relaxed),
        );
        let mut proposal = BytesMut::with_capacity(HEADER_BYTES + value.len());
        proposal.put_u64_le(expected + 1);
        proposal.put_u64_le(ours.0);
        proposal.put_u64_le(ours.1);
        proposal.put_slice(&value);
        let proposal = proposal.freeze();
        let mut last = String::new();
        for attempt in 0..self.options.attempts_max.max(1) {
            if attempt > 0 {
                tokio::time::sleep(self.options.retry_after).await;
            }
            match self.txn(mod_revision, proposal.clone()).await {
                Ok(Ok(())) => return Ok(expected + 1),
                Ok(Err(Some(found))) if found.proposal == ours => return Ok(expected + 1),
                Ok(Err(found)) => {
                    let current = found.map_or(0, |found| found.version);
                    return Err(MetaError::Conflict { current });
                }
                Err(error) => last = error,
            }
        }
        Err(MetaError::Store(
            unavailable(&self.options, "txn", last).indeterminate(),
        ))
    }
}

/// Runs `call` on the client runtime; a task that ended without an outcome (it panicked)
/// leaves the outcome unknown.
fn on_runtime<T: Send + 'static>(
    inner: &Arc<Inner>,
    call: impl std::future::Future<Output = Result<T, MetaError>> + Send + 'static,
) -> MetaFuture<'static, T> {
    let options = inner.options.clone();
    let task = crate::runtime::spawn(call);
    Box::pin(async move {
        task.await.unwrap_or_else(|error| {
            Err(MetaError::Store(
                unavailable(&options, "a call", error).indeterminate(),
            ))
        })
    })
}

impl MetaStore for EtcdMetaStore {
    fn read(&self) -> MetaFuture<'_, Option<Versioned>> {
        let inner = Arc::clone(&self.inner);
        on_runtime(&self.inner, async move {
            Ok(inner.range().await?.map(|found| Versioned {
                version: found.version,
                value: found.value,
            }))
        })
    }

    fn compare_and_swap(&self, expected: u64, value: Bytes) -> MetaFuture<'_, u64> {
        let inner = Arc::clone(&self.inner);
        on_runtime(&self.inner, async move {
            inner.compare_and_swap(expected, value).await
        })
    }
}
