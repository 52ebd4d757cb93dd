//! The example's state machine: a `BTreeMap<String, String>` with the last applied log id and
//! the last membership, kept in memory and rebuilt from the log when a node restarts.
//!
//! Why snapshots go to a file: openraft purges log entries that a snapshot covers, and on
//! sealog it must, because the ring is finite and its space only comes back as groups purge.
//! A restarted node's in-memory map can be rebuilt only from what is left of its log, so
//! every snapshot (built here or installed from the leader) is written durably to a file next
//! to the ring *before* openraft gets it back and may purge; a restart loads that file first
//! and replays the log after it. The in-memory log store keeps nothing across a restart, so a
//! node on it runs without the file ([`KvStateMachine::in_memory`]).

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Cursor, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use openraft::storage::RaftStateMachine;
use openraft::{
    BasicNode, Entry, EntryPayload, LogId, OptionalSend, RaftSnapshotBuilder, Snapshot,
    SnapshotMeta, StorageError, StorageIOError, StoredMembership,
};
use serde::{Deserialize, Serialize};

use super::types::{Request, Response, TypeConfig};

/// Why the snapshot file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotFileError {
    /// The file system refused.
    #[error("snapshot file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the file system said.
        source: io::Error,
    },
    /// The file is not a snapshot this version wrote.
    #[error("snapshot file {path} does not decode: {source}")]
    Decode {
        /// The file.
        path: PathBuf,
        /// What postcard said.
        source: postcard::Error,
    },
}

/// Everything a snapshot holds; also the live state.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Data {
    last_applied: Option<LogId<u64>>,
    last_membership: StoredMembership<u64, BasicNode>,
    kv: BTreeMap<String, String>,
}

/// A snapshot as kept in memory and in the file: its meta and the encoded [`Data`].
#[derive(Clone, Debug, Serialize, Deserialize)]
struct StoredSnapshot {
    meta: SnapshotMeta<u64, BasicNode>,
    data: Vec<u8>,
}

#[derive(Default)]
struct Shared {
    data: Data,
    current: Option<StoredSnapshot>,
    built: u64,
}

/// The key-value state machine; clones share it, so the gRPC server reads what openraft
/// applies.
#[derive(Clone)]
pub struct KvStateMachine {
    shared: Arc<RwLock<Shared>>,
    snapshot_path: Option<Arc<PathBuf>>,
}

impl KvStateMachine {
    /// A state machine whose snapshots live in memory only.
    pub fn in_memory() -> Self {
        KvStateMachine {
            shared: Arc::default(),
            snapshot_path: None,
        }
    }

    /// A state machine whose snapshots are persisted at `path`, starting from the snapshot
    /// there if there is one.
    pub fn open(path: PathBuf) -> Result<Self, SnapshotFileError> {
        let mut shared = Shared::default();
        if let Some(stored) = read_snapshot_file(&path)? {
            shared.data = decode(&stored.data).map_err(|source| SnapshotFileError::Decode {
                path: path.clone(),
                source,
            })?;
            shared.current = Some(stored);
        }
        let shared = Arc::new(RwLock::new(shared));
        Ok(KvStateMachine {
            shared,
            snapshot_path: Some(Arc::new(path)),
        })
    }

    /// The value of `key` in this node's state machine.
    pub fn get(&self, key: &str) -> Option<String> {
        self.read().data.kv.get(key).cloned()
    }

    /// The log id of the last entry applied here.
    pub fn last_applied(&self) -> Option<LogId<u64>> {
        self.read().data.last_applied
    }

    /// How many keys the map holds.
    pub fn len(&self) -> usize {
        self.read().data.kv.len()
    }

    /// Whether the map is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    // A poisoned lock means a panic already failed this node; its data are still whole
    // because every writer swaps values in one step.
    fn read(&self) -> RwLockReadGuard<'_, Shared> {
        self.shared.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Shared> {
        self.shared.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Makes `stored` durable (when there is a file) and then the current snapshot.
    fn keep(&self, stored: StoredSnapshot) -> Result<(), SnapshotFileError> {
        if let Some(path) = &self.snapshot_path {
            write_snapshot_file(path, &stored)?;
        }
        self.write().current = Some(stored);
        Ok(())
    }
}

fn decode(bytes: &[u8]) -> Result<Data, postcard::Error> {
    postcard::from_bytes(bytes)
}

fn read_snapshot_file(path: &Path) -> Result<Option<StoredSnapshot>, SnapshotFileError> {
    let bytes = match fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(SnapshotFileError::Io {
                path: path.into(),
                source,
            })
        }
    };
    postcard::from_bytes(&bytes)
        .map(Some)
        .map_err(|source| SnapshotFileError::Decode {
            path: path.into(),
            source,
        })
}

/// Writes a temporary file, syncs it, renames it over `path` and syncs the directory, so a
/// crash leaves either the old snapshot or the new one.
fn write_snapshot_file(path: &Path, stored: &StoredSnapshot) -> Result<(), SnapshotFileError> {
    let io_err = |source| SnapshotFileError::Io {
        path: path.into(),
        source,
    };
    let bytes = postcard::to_allocvec(stored).map_err(|e| io_err(io::Error::other(e)))?;
    let tmp = path.with_extension("tmp");
    let mut file = fs::File::create(&tmp).map_err(io_err)?;
    file.write_all(&bytes).map_err(io_err)?;
    file.sync_all().map_err(io_err)?;
    fs::rename(&tmp, path).map_err(io_err)?;
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err)
}

fn to_snapshot(stored: StoredSnapshot) -> Snapshot<TypeConfig> {
    Snapshot {
        meta: stored.meta,
        snapshot: Box::new(Cursor::new(stored.data)),
    }
}

impl RaftSnapshotBuilder<TypeConfig> for KvStateMachine {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError<u64>> {
        let (data, seq) = {
            let mut shared = self.write();
            shared.built += 1;
            (shared.data.clone(), shared.built)
        };
        let bytes = postcard::to_allocvec(&data)
            .map_err(|e| StorageIOError::read_state_machine(&io::Error::other(e)))?;
        let snapshot_id = match data.last_applied {
            Some(id) => format!("{}-{}-{seq}", id.leader_id, id.index),
            None => format!("none-{seq}"),
        };
        let meta = SnapshotMeta {
            last_log_id: data.last_applied,
            last_membership: data.last_membership,
            snapshot_id,
        };
        let stored = StoredSnapshot { meta, data: bytes };
        self.keep(stored.clone())
            .map_err(|e| StorageIOError::write_snapshot(Some(stored.meta.signature()), &e))?;
        Ok(to_snapshot(stored))
    }
}

impl RaftStateMachine<TypeConfig> for KvStateMachine {
    type SnapshotBuilder = Self;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId<u64>>, StoredMembership<u64, BasicNode>), StorageError<u64>> {
        let shared = self.read();
        Ok((
            shared.data.last_applied,
            shared.data.last_membership.clone(),
        ))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Response>, StorageError<u64>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut shared = self.write();
        let data = &mut shared.data;
        let mut responses = Vec::new();
        for entry in entries {
            data.last_applied = Some(entry.log_id);
            let response = match entry.payload {
                EntryPayload::Blank => Response::default(),
                EntryPayload::Normal(Request::Set { key, value }) => Response {
                    previous: data.kv.insert(key, value),
                },
                EntryPayload::Membership(m) => {
                    data.last_membership = StoredMembership::new(Some(entry.log_id), m);
                    Response::default()
                }
            };
            responses.push(response);
        }
        Ok(responses)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
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
        let bytes = snapshot.into_inner();
        let data = decode(&bytes).map_err(|e| {
            StorageIOError::read_snapshot(Some(meta.signature()), &io::Error::other(e))
        })?;
        let stored = StoredSnapshot {
            meta: meta.clone(),
            data: bytes,
        };
        // Durable first: once this returns openraft may purge the log the snapshot covers.
        self.keep(stored)
            .map_err(|e| StorageIOError::write_snapshot(Some(meta.signature()), &e))?;
        self.write().data = data;
        Ok(())
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<Snapshot<TypeConfig>>, StorageError<u64>> {
        Ok(self.read().current.clone().map(to_snapshot))
    }
}
