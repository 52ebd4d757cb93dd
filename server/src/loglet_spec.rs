//! What a segment of a replicated log is made of, as its chain entry describes it: the
//! sequencer that hosts its slots, and its data and seal LogDrives on LogDrive servers, in
//! quorum groups of replicas, striped when there are several groups. The description is
//! JSON in the chain (`LogletConfig::spec`), so an operator can read it with etcdctl, and
//! [`Pool`] turns it into drives: one connection per server, shared by every drive there.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use sealog_logdrive::{
    Length, LogDrive, LogDriveError, OpFuture, QuorumLogDrive, QuorumOptions, ReadOutcome,
    StripedLogDrive, TailDesc,
};
use sealog_vlog::{LogError, LogletConfig};
use serde::{Deserialize, Serialize};

use crate::remote::{RemoteLogDrive, RemoteOptions, RemoteStore};

/// A LogDrive on one server: its id and generation there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DriveName {
    /// The id.
    pub id: u64,
    /// The generation.
    pub generation: u64,
}

/// One replica of a quorum group: a server and the loglet's drives on it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Replica {
    /// The server's `host:port`.
    pub addr: String,
    /// The data LogDrive.
    pub data: DriveName,
    /// The seal LogDrive (only group 0's replicas hold one).
    pub seal: Option<DriveName>,
}

/// A segment's loglet, as the chain holds it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogletSpec {
    /// The sequencer that hosts its slots: its `host:port`.
    pub sequencer: String,
    /// K, the window of slots in flight.
    pub window: u64,
    /// Replicas of each group that must take a write.
    pub write_quorum: usize,
    /// The quorum groups, striped in this order.
    pub groups: Vec<Vec<Replica>>,
}

impl LogletSpec {
    /// The spec `config` carries.
    pub fn decode(config: &LogletConfig) -> Result<LogletSpec, LogError> {
        serde_json::from_slice(&config.spec).map_err(|error| LogError::InvalidConfig {
            reason: format!("loglet {}'s description: {error}", config.id),
        })
    }

    /// The configuration of loglet `id` with this spec.
    pub fn config(&self, id: u64) -> LogletConfig {
        let spec = serde_json::to_vec(self).expect("a spec of strings and numbers encodes");
        LogletConfig {
            id,
            spec: Bytes::from(spec),
        }
    }
}

/// Connections to LogDrive servers, one per address, made on first use: callers that find
/// one being made wait for it rather than making their own (a loglet's first 256 appends
/// make one TLS handshake per server, not 256).
pub struct Pool {
    options: RemoteOptions,
    stores: Mutex<HashMap<String, Arc<tokio::sync::OnceCell<RemoteStore>>>>,
    /// When a connection to each address last failed: for [`RETRY_CONNECT_AFTER`] after
    /// that, operations on a replica there fail at once rather than each waiting out a
    /// connection attempt of its own.
    failed: Mutex<HashMap<String, std::time::Instant>>,
    /// What each replica named with generation 0 (one the segment was made without) was
    /// found to be, by (address, id): see [`Pool::resolve`].
    absent: Mutex<HashMap<(String, u64), Found>>,
}

/// How long after a failed connection the pool tries that server again.
pub const RETRY_CONNECT_AFTER: std::time::Duration = std::time::Duration::from_millis(500);

impl Pool {
    /// A pool whose connections use `options` (TLS and deadlines).
    pub fn new(options: RemoteOptions) -> Pool {
        Pool {
            options,
            stores: Mutex::new(HashMap::new()),
            failed: Mutex::new(HashMap::new()),
            absent: Mutex::new(HashMap::new()),
        }
    }

    /// The generation to address replica `name` on `store` (at `addr`) by. A segment made
    /// while a server was down names its replica there with generation 0; a repair may
    /// have created it since. Such a name is resolved by asking the server for the id's
    /// live generation, once found for good, and again no sooner than
    /// [`RETRY_CONNECT_AFTER`] after it was not: until then the replica answers `Missing`,
    /// and the quorum does without it.
    pub async fn resolve(
        &self,
        store: &RemoteStore,
        addr: &str,
        name: DriveName,
    ) -> Result<u64, LogDriveError> {
        if name.generation != 0 {
            return Ok(name.generation);
        }
        let missing = LogDriveError::Missing {
            id: name.id,
            generation: 0,
        };
        let key = (addr.to_string(), name.id);
        match lock(&self.absent).get(&key) {
            Some(Found::Live(generation)) => return Ok(*generation),
            Some(Found::None(at)) if at.elapsed() < RETRY_CONNECT_AFTER => return Err(missing),
            _ => {}
        }
        let found = match store.generation(name.id).await? {
            Some(generation) => Found::Live(generation),
            None => Found::None(std::time::Instant::now()),
        };
        lock(&self.absent).insert(key, found);
        match found {
            Found::Live(generation) => Ok(generation),
            Found::None(_) => Err(missing),
        }
    }

    /// Records that replica `id` at `addr`, named with generation 0, now lives at
    /// `generation` (a repair just created it).
    pub fn created(&self, addr: &str, id: u64, generation: u64) {
        let key = (addr.to_string(), id);
        lock(&self.absent).insert(key, Found::Live(generation));
    }

    /// The connection to `addr`.
    pub async fn store(&self, addr: &str) -> Result<RemoteStore, LogDriveError> {
        let cell = Arc::clone(self.lock().entry(addr.into()).or_default());
        if let Some(store) = cell.get() {
            return Ok(store.clone());
        }
        let failed = |failed: &mut HashMap<String, std::time::Instant>| {
            let at = failed.get(addr)?;
            (at.elapsed() < RETRY_CONNECT_AFTER).then_some(*at)
        };
        if failed(&mut self.failed.lock().unwrap_or_else(|p| p.into_inner())).is_some() {
            return Err(LogDriveError::Io {
                reason: format!("{addr} was unreachable less than {RETRY_CONNECT_AFTER:?} ago"),
            });
        }
        let connect = || RemoteStore::connect(addr, self.options.clone());
        let connected = cell.get_or_try_init(connect).await.cloned();
        if connected.is_err() {
            let mut failed = self.failed.lock().unwrap_or_else(|p| p.into_inner());
            failed.insert(addr.into(), std::time::Instant::now());
        }
        connected
    }

    /// The connection to `addr` if one is made already.
    fn connected(&self, addr: &str) -> Option<RemoteStore> {
        self.lock().get(addr).and_then(|cell| cell.get().cloned())
    }

    fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<String, Arc<tokio::sync::OnceCell<RemoteStore>>>> {
        self.stores.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The data and seal LogDrives of `spec` (see [`compose`]). A server that cannot be
    /// reached now is a child that answers every operation with an indeterminate error (the
    /// quorum decides).
    pub async fn drives(self: &Arc<Self>, spec: &LogletSpec) -> Result<DataAndSeal, LogError> {
        compose(spec, &QuorumOptions::default(), |addr, name| {
            self.child(addr, name)
        })
    }

    /// The data LogDrives of group `group` of `spec`, a replica each (none for a group
    /// the spec does not have).
    pub async fn group(
        self: &Arc<Self>,
        spec: &LogletSpec,
        group: usize,
    ) -> Vec<Arc<dyn LogDrive>> {
        let mut children = Vec::new();
        for replica in spec.groups.get(group).into_iter().flatten() {
            children.push(self.child(&replica.addr, replica.data));
        }
        children
    }

    /// A replica's drive. A server not connected to yet is connected to on the drive's
    /// first operation, so that opening a loglet never waits on a server that is down.
    fn child(self: &Arc<Self>, addr: &str, name: DriveName) -> Arc<dyn LogDrive> {
        match self.connected(addr) {
            Some(store) if name.generation != 0 => Arc::new(store.drive(name.id, name.generation)),
            _ => Arc::new(Lazy {
                pool: Arc::clone(self),
                addr: addr.into(),
                name,
            }),
        }
    }
}

/// A segment's data LogDrive and its seal LogDrive.
pub type DataAndSeal = (Arc<dyn LogDrive>, Arc<dyn LogDrive>);

/// The data and seal LogDrives `spec` describes, each replica's drive made by `child`: a
/// quorum of `spec.write_quorum` per group (with `quorum`'s hedging and clock), striped
/// over the groups; the seal bit on group 0's quorum.
pub fn compose(
    spec: &LogletSpec,
    quorum: &QuorumOptions,
    mut child: impl FnMut(&str, DriveName) -> Arc<dyn LogDrive>,
) -> Result<DataAndSeal, LogError> {
    let invalid = |reason: String| LogError::InvalidConfig { reason };
    let mut groups: Vec<Arc<dyn LogDrive>> = Vec::new();
    let mut seal = None;
    for (index, group) in spec.groups.iter().enumerate() {
        let mut data_children: Vec<Arc<dyn LogDrive>> = Vec::new();
        let mut seal_children: Vec<Arc<dyn LogDrive>> = Vec::new();
        for replica in group {
            data_children.push(child(&replica.addr, replica.data));
            if let Some(name) = replica.seal.filter(|_| index == 0) {
                seal_children.push(child(&replica.addr, name));
            }
        }
        let quorum = |children| {
            QuorumLogDrive::new(children, spec.write_quorum, quorum.clone())
                .map_err(|e| invalid(format!("group {index}: {e}")))
        };
        groups.push(Arc::new(quorum(data_children)?));
        if index == 0 {
            seal = Some(Arc::new(quorum(seal_children)?) as Arc<dyn LogDrive>);
        }
    }
    let seal = seal.ok_or_else(|| invalid("a loglet with no group".into()))?;
    let data: Arc<dyn LogDrive> = match groups.len() {
        1 => groups.remove(0),
        _ => Arc::new(StripedLogDrive::new(groups).map_err(|e| invalid(e.to_string()))?),
    };
    Ok((data, seal))
}

/// What a replica named with generation 0 was found to be.
#[derive(Clone, Copy)]
enum Found {
    /// Live at this generation.
    Live(u64),
    /// Not there, when asked.
    None(std::time::Instant),
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// A replica reached through the pool on each operation: on a server not connected to when
/// the loglet was opened, each operation connects first (and fails, indeterminate, while
/// the server stays unreachable, so that a quorum counts it as a replica that did not
/// answer); named with generation 0, each resolves it first (`Pool::resolve`).
struct Lazy {
    pool: Arc<Pool>,
    addr: String,
    name: DriveName,
}

impl Lazy {
    fn op<T: Send + 'static>(
        &self,
        op: impl FnOnce(RemoteLogDrive) -> OpFuture<T> + Send + 'static,
    ) -> OpFuture<T> {
        let (pool, addr, name) = (Arc::clone(&self.pool), self.addr.clone(), self.name);
        let task = crate::runtime::spawn(async move {
            let store = pool
                .store(&addr)
                .await
                .map_err(LogDriveError::indeterminate)?;
            let generation = pool.resolve(&store, &addr, name).await?;
            op(store.drive(name.id, generation)).await
        });
        Box::pin(async move {
            task.await
                .unwrap_or_else(|error| Err(LogDriveError::Io { reason: error }.indeterminate()))
        })
    }
}

impl LogDrive for Lazy {
    fn write(&self, address: u64, epoch: u64, payload: Bytes) -> OpFuture<()> {
        self.op(move |d| d.write(address, epoch, payload))
    }
    fn read(&self, address: u64) -> OpFuture<ReadOutcome> {
        self.op(move |d| d.read(address))
    }
    fn weak_tail(&self, k: u64) -> OpFuture<TailDesc> {
        self.op(move |d| d.weak_tail(k))
    }
    fn seal(&self, length: u64, epoch: u64) -> OpFuture<()> {
        self.op(move |d| d.seal(length, epoch))
    }
    fn fence(&self, epoch: u64) -> OpFuture<()> {
        self.op(move |d| d.fence(epoch))
    }
    fn trim(&self, upto: u64) -> OpFuture<()> {
        self.op(move |d| d.trim(upto))
    }
    fn length(&self) -> OpFuture<Length> {
        self.op(|d| d.length())
    }
    /// Unknown until the server answers: no bound from this replica (the sequencer's window
    /// was checked against the servers when the loglet was made).
    fn write_window_max(&self) -> u64 {
        u64::MAX
    }
}
