//! The raft section's store level, no network: appends through openraft's
//! `RaftLogStorage::append` (by `RaftLogStorageExt::blocking_append`, the public way to wait
//! for its flush callback), one entry per call, with 1, 16 or 256 appends in flight spread
//! over 1 or 1,000 Raft groups, on sealog's store, the raft-engine adapter and the in-memory
//! store, each load run on every store in turn while all stay open. Each group keeps its
//! appends in index order (see [`GroupDriver`]) and purges what is durable now and then, so
//! the sealog ring (and raft-engine's files) stay within their space.

use std::collections::BTreeSet;
use std::future::Future;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::Poll;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use openraft::storage::{RaftLogStorage, RaftLogStorageExt};
use openraft::{CommittedLeaderId, Entry, EntryPayload, LogId};
use sealog_openraft::kv::{Request, TypeConfig};
use sealog_openraft::mem::MemLogStore;
use sealog_openraft::{GroupLogStore, RaftStoreOptions, SealogRaftStore};

use crate::raft_figures::{RaftCell, RaftStore};
use crate::raft_threads::cpu_over_window;

/// The example's type config: its entries are what the cluster level replicates too.
type C = TypeConfig;

/// The longest latency the histograms hold (a minute, in nanoseconds); longer ones count as
/// this (`saturating_record`, which would clamp at an auto-resizing histogram's initial
/// bound).
pub const LATENCY_MAX_NS: u64 = 60_000_000_000;

/// A histogram of latencies in nanoseconds, up to [`LATENCY_MAX_NS`].
pub fn latency_histogram() -> Result<Histogram<u64>, String> {
    Histogram::new_with_bounds(1, LATENCY_MAX_NS, 3).map_err(|error| error.to_string())
}

/// The leader of every entry: the store level has no elections, one term is enough.
fn log_id(index: u64) -> LogId<u64> {
    LogId::new(CommittedLeaderId::new(1, 1), index)
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Where a group's issue order stands.
struct Order {
    /// The index the next append takes.
    next: u64,
    /// The last index purged.
    purged: Option<u64>,
    /// Appends issued since the last purge.
    since_purge: u64,
}

/// One group's appends in index order with many in flight. openraft hands a store one
/// group's appends in index order and the stores rely on it (sealog writes entry `i` at its
/// address `i`; raft-engine drops everything from an append's first index on), so N tasks
/// appending to one group must not reach the store out of order. Each takes `order`, a FIFO
/// lock (tokio's `Mutex` is fair), takes the next index, creates the `blocking_append`
/// future and polls it once, which issues the write (sealog's `append` writes to the drive
/// in its first poll; raft-engine's queues the batch on its group's FIFO; the mem store
/// completes), then releases the lock and waits for the flush. The writes thus reach the
/// store in index order while up to N of them are in flight.
pub struct GroupDriver<S> {
    store: S,
    order: tokio::sync::Mutex<Order>,
    /// Indices issued and not yet durable: a purge stops below the lowest.
    pending: Mutex<BTreeSet<u64>>,
}

impl<S> GroupDriver<S>
where
    S: RaftLogStorage<C> + Clone + Send + Sync + 'static,
{
    fn new(store: S) -> Self {
        GroupDriver {
            store,
            order: tokio::sync::Mutex::new(Order {
                next: 0,
                purged: None,
                since_purge: 0,
            }),
            pending: Mutex::new(BTreeSet::new()),
        }
    }

    /// Appends one entry carrying `value` at the group's next index; returns how long the
    /// append took, from creating its future to its flush (the wait for the order aside).
    async fn append(&self, value: &str, purge_every: u64) -> Result<Duration, String> {
        let mut order = self.order.lock().await;
        self.purge_if_due(&mut order, purge_every).await?;
        let index = order.next;
        order.next += 1;
        order.since_purge += 1;
        lock(&self.pending).insert(index);
        let entry = Entry::<C> {
            log_id: log_id(index),
            payload: EntryPayload::Normal(Request::Set {
                key: "k".to_string(),
                value: value.to_string(),
            }),
        };
        let mut store = self.store.clone();
        let started = Instant::now();
        let append = async move { store.blocking_append([entry]).await };
        let mut append = std::pin::pin!(append);
        let first = std::future::poll_fn(|cx| Poll::Ready(append.as_mut().poll(cx))).await;
        drop(order);
        let outcome = match first {
            Poll::Ready(outcome) => outcome,
            Poll::Pending => append.await,
        };
        let took = started.elapsed();
        lock(&self.pending).remove(&index);
        outcome.map_err(|error| format!("append at {index}: {error}"))?;
        Ok(took)
    }

    /// Purges the group's durable entries once `purge_every` appends have gone by since the
    /// last purge, as openraft does after a snapshot: in the issue order, so that the store
    /// sees it between two appends.
    async fn purge_if_due(&self, order: &mut Order, purge_every: u64) -> Result<(), String> {
        if order.since_purge < purge_every {
            return Ok(());
        }
        let lowest_pending = lock(&self.pending).first().copied().unwrap_or(order.next);
        let Some(point) = lowest_pending.checked_sub(1) else {
            return Ok(());
        };
        if order.purged.is_some_and(|purged| purged >= point) {
            return Ok(());
        }
        let mut store = self.store.clone();
        store
            .purge(log_id(point))
            .await
            .map_err(|error| format!("purge to {point}: {error}"))?;
        order.purged = Some(point);
        order.since_purge = 0;
        Ok(())
    }
}

/// One cell's load on one store.
#[derive(Clone, Debug)]
pub struct Load {
    /// Bytes of each entry's value.
    pub payload_bytes: usize,
    /// Appends in flight, all groups together.
    pub in_flight: usize,
    /// Groups the appends are spread over (the first `groups` of the store's).
    pub groups: usize,
    /// Warm-up before the measured window.
    pub warmup: Duration,
    /// The measured window.
    pub duration: Duration,
    /// Appends per group between purges.
    pub purge_every: u64,
}

/// What one task appending one entry after another saw in the window.
struct Tally {
    latency_ns: Histogram<u64>,
}

/// One task of a cell: appends one entry after another, each to the next group in turn (a
/// counter shared by the cell's tasks, so the load spreads evenly over the groups), until the
/// window ends; records the appends that completed inside it.
async fn append_task<S>(
    drivers: Arc<Vec<Arc<GroupDriver<S>>>>,
    turn: Arc<AtomicUsize>,
    value: Arc<str>,
    window: (Instant, Instant),
    purge_every: u64,
) -> Result<Tally, String>
where
    S: RaftLogStorage<C> + Clone + Send + Sync + 'static,
{
    let mut tally = Tally {
        latency_ns: latency_histogram()?,
    };
    let (window_start, window_end) = window;
    while Instant::now() < window_end {
        let group = turn.fetch_add(1, Ordering::Relaxed) % drivers.len();
        let took = drivers[group].append(&value, purge_every).await?;
        let done = Instant::now();
        if done >= window_start && done < window_end {
            let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX).max(1);
            tally.latency_ns.saturating_record(nanos);
        }
    }
    Ok(tally)
}

/// Runs `load` on the first `load.groups` of `drivers`: the cell's figures.
pub async fn run_cell<S>(
    store: RaftStore,
    drivers: &[Arc<GroupDriver<S>>],
    load: &Load,
) -> Result<RaftCell, String>
where
    S: RaftLogStorage<C> + Clone + Send + Sync + 'static,
{
    let groups = Arc::new(drivers[..load.groups.min(drivers.len())].to_vec());
    let value: Arc<str> = "v".repeat(load.payload_bytes).into();
    let turn = Arc::new(AtomicUsize::new(0));
    let window_start = Instant::now() + load.warmup;
    let window_end = window_start + load.duration;
    let tasks: Vec<_> = (0..load.in_flight)
        .map(|_| {
            let task = append_task(
                Arc::clone(&groups),
                Arc::clone(&turn),
                Arc::clone(&value),
                (window_start, window_end),
                load.purge_every,
            );
            tokio::spawn(task)
        })
        .collect();
    let (cpu, cores) = cpu_over_window(window_start, window_end).await;
    let mut latency_ns = latency_histogram()?;
    for task in tasks {
        let tally = task.await.map_err(|error| error.to_string())??;
        latency_ns
            .add(&tally.latency_ns)
            .map_err(|e| e.to_string())?;
    }
    let mut cell = cell_of(store, load, &latency_ns, cpu);
    cell.cores_by_thread = cores;
    Ok(cell)
}

/// The cell of `store` under `load` from its latencies and its CPU time in the window.
pub fn cell_of(store: RaftStore, load: &Load, latency_ns: &Histogram<u64>, cpu: f64) -> RaftCell {
    let ops = latency_ns.len();
    let us = |quantile: f64| latency_ns.value_at_quantile(quantile) as f64 / 1e3;
    RaftCell {
        store,
        payload_bytes: load.payload_bytes,
        in_flight: load.in_flight,
        groups: load.groups,
        ops_per_sec: ops as f64 / load.duration.as_secs_f64(),
        p50_us: us(0.5),
        p99_us: us(0.99),
        p999_us: us(0.999),
        cpu_us_per_op: if ops == 0 {
            0.0
        } else {
            cpu * 1e6 / ops as f64
        },
        errors: 0,
        cores_by_thread: Vec::new(),
    }
}

/// The groups of one store, open for the whole store level, with what closes it.
pub enum StoreDrivers {
    /// sealog's groups on one ring.
    Sealog(SealogRaftStore<C>, Vec<Arc<GroupDriver<GroupLogStore<C>>>>),
    /// raft-engine's groups in one engine.
    #[cfg(feature = "peers")]
    RaftEngine(
        sealog_openraft::raft_engine::RaftEngineNode,
        Vec<Arc<GroupDriver<sealog_openraft::raft_engine::RaftEngineLogStore<C>>>>,
    ),
    /// One in-memory store per group.
    Mem(Vec<Arc<GroupDriver<MemLogStore<C>>>>),
}

/// sealog's store on a ring of `ring_bytes` at `path`, with `groups` groups created (each
/// creation durable, one after another: the store creates groups under its lock).
pub fn open_sealog(path: &Path, ring_bytes: u64, groups: usize) -> Result<StoreDrivers, String> {
    SealogRaftStore::<C>::format(path, ring_bytes).map_err(|error| error.to_string())?;
    let store = SealogRaftStore::<C>::open(path, RaftStoreOptions::default())
        .map_err(|error| error.to_string())?;
    let drivers = (0..groups as u64)
        .map(|id| {
            store
                .group(id)
                .map(|group| Arc::new(GroupDriver::new(group)))
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| error.to_string())?;
    Ok(StoreDrivers::Sealog(store, drivers))
}

/// raft-engine in directory `path` with the write section's configuration (sync on, no
/// compression of the repeated-byte values, a 1 GiB purge threshold) and `writer_threads`
/// threads writing the groups' batches (raft-engine's write-group commit joins theirs).
#[cfg(feature = "peers")]
pub fn open_raft_engine(
    path: &Path,
    groups: usize,
    writer_threads: usize,
) -> Result<StoreDrivers, String> {
    use raft_engine::ReadableSize;
    let config = raft_engine::Config {
        dir: path.display().to_string(),
        batch_compression_threshold: ReadableSize(0),
        purge_threshold: ReadableSize::gb(1),
        ..raft_engine::Config::default()
    };
    let node = sealog_openraft::raft_engine::RaftEngineNode::open(config, writer_threads)
        .map_err(|error| error.to_string())?;
    let drivers = (0..groups as u64)
        .map(|id| match node.group::<C>(id) {
            Ok(group) => Ok(Arc::new(GroupDriver::new(group))),
            Err(error) => Err(format!("raft-engine group {id}: {error}")),
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(StoreDrivers::RaftEngine(node, drivers))
}

/// `groups` in-memory stores.
pub fn open_mem(groups: usize) -> StoreDrivers {
    let drivers = (0..groups)
        .map(|_| Arc::new(GroupDriver::new(MemLogStore::<C>::new())))
        .collect();
    StoreDrivers::Mem(drivers)
}

impl StoreDrivers {
    /// Which store these are.
    pub fn store(&self) -> RaftStore {
        match self {
            StoreDrivers::Sealog(..) => RaftStore::Sealog,
            #[cfg(feature = "peers")]
            StoreDrivers::RaftEngine(..) => RaftStore::RaftEngine,
            StoreDrivers::Mem(..) => RaftStore::Mem,
        }
    }

    /// Runs `load` on this store.
    pub async fn run(&self, load: &Load) -> Result<RaftCell, String> {
        let store = self.store();
        match self {
            StoreDrivers::Sealog(_, drivers) => run_cell(store, drivers, load).await,
            #[cfg(feature = "peers")]
            StoreDrivers::RaftEngine(_, drivers) => run_cell(store, drivers, load).await,
            StoreDrivers::Mem(drivers) => run_cell(store, drivers, load).await,
        }
    }

    /// Between cells: lets raft-engine delete the files that hold only purged entries, as
    /// its owner is expected to now and then (TiKV does it on a timer).
    pub fn tidy(&self) -> Result<(), String> {
        #[cfg(feature = "peers")]
        if let StoreDrivers::RaftEngine(node, _) = self {
            node.engine()
                .purge_expired_files()
                .map_err(|error| format!("raft-engine purge: {error}"))?;
        }
        Ok(())
    }

    /// Closes the store (raft-engine closes when its last handle goes, with `self`).
    pub fn close(self) {
        if let StoreDrivers::Sealog(store, drivers) = self {
            drop(drivers);
            store.close();
        }
    }
}
