//! The raft section's figures, which `raft_store.rs` and `raft_cluster.rs` measure and
//! `raft_report.rs` prints and judges: the log stores compared (sealog's openraft store, the
//! raft-engine adapter with `--features peers`, the in-memory store as the no-storage
//! reference), one cell per store and load at the store level (appends through
//! `RaftLogStorage::append`) and at the cluster level (client writes to a three-node
//! cluster), and the ratios the targets are stated on. A leaf: it imports nothing from the
//! rest of the bench.

/// A log store the section runs openraft on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RaftStore {
    /// `SealogRaftStore`: many groups on one sealog ring.
    Sealog,
    /// `RaftEngineNode`: TiKV's raft-engine behind the crate's adapter (`--features peers`).
    RaftEngine,
    /// `MemLogStore`: nothing written anywhere, the ceiling of what openraft and the bench
    /// cost on their own.
    Mem,
}

impl RaftStore {
    /// The store's name in the tables and the JSON.
    pub fn name(self) -> &'static str {
        match self {
            RaftStore::Sealog => "sealog",
            RaftStore::RaftEngine => "raft-engine",
            RaftStore::Mem => "mem",
        }
    }

    /// The stores this build measures, sealog first (raft-engine only with the peers).
    pub fn all() -> Vec<RaftStore> {
        let mut stores = vec![RaftStore::Sealog];
        if cfg!(feature = "peers") {
            stores.push(RaftStore::RaftEngine);
        }
        stores.push(RaftStore::Mem);
        stores
    }
}

/// One store under one load, at the store level or the cluster level.
#[derive(Clone, Debug)]
pub struct RaftCell {
    /// The store.
    pub store: RaftStore,
    /// Bytes of the value each entry (or client write) carries.
    pub payload_bytes: usize,
    /// Appends (store level) or client writes (cluster level) in flight.
    pub in_flight: usize,
    /// Raft groups the appends are spread over (1 at the cluster level).
    pub groups: usize,
    /// Operations completed in the measured window, per second.
    pub ops_per_sec: f64,
    /// Latency percentiles, microseconds.
    pub p50_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p999_us: f64,
    /// The process's CPU time (user + system, every thread and the kernel's work for it) per
    /// operation completed in the window, microseconds.
    pub cpu_us_per_op: f64,
    /// Operations that failed (the cluster's client writes that returned an error).
    pub errors: u64,
    /// The CPUs each kind of thread used over the window (CPU seconds over wall seconds),
    /// busiest first.
    pub cores_by_thread: Vec<(String, f64)>,
}

impl RaftCell {
    /// The operations per second the process's CPU time per operation would allow on every
    /// CPU of the machine: near `ops_per_sec`, the run was CPU-bound.
    pub fn cpu_bound_ops_per_sec(&self, cpus: f64) -> f64 {
        cpus * 1e6 / self.cpu_us_per_op.max(1e-9)
    }
}

/// What the raft section measured.
#[derive(Clone, Debug, Default)]
pub struct RaftFigures {
    /// Store-level cells, by payload, then groups, then in flight, then store.
    pub store_cells: Vec<RaftCell>,
    /// Cluster-level cells, by concurrency, then store.
    pub cluster_cells: Vec<RaftCell>,
    /// Measured time of each cell, after its warm-up.
    pub seconds_per_cell: f64,
    /// Warm-up of each cell.
    pub warmup_seconds_per_cell: f64,
    /// The sealog ring's size at the store level, bytes.
    pub ring_bytes: u64,
    /// Seconds spent creating the store level's groups in sealog (each creation is durable).
    pub sealog_group_setup_seconds: f64,
    /// The section's time, stores' and clusters' setup included.
    pub seconds: f64,
}

/// `a / b` when both were measured.
fn ratio(a: Option<&RaftCell>, b: Option<&RaftCell>, figure: fn(&RaftCell) -> f64) -> Option<f64> {
    let (a, b) = (figure(a?), figure(b?));
    (a > 0.0 && b > 0.0).then(|| a / b)
}

impl RaftFigures {
    /// The store-level cell of `store` under a load, if measured.
    pub fn store_cell(
        &self,
        store: RaftStore,
        payload_bytes: usize,
        in_flight: usize,
        groups: usize,
    ) -> Option<&RaftCell> {
        self.store_cells.iter().find(|cell| {
            cell.store == store
                && cell.payload_bytes == payload_bytes
                && cell.in_flight == in_flight
                && cell.groups == groups
        })
    }

    /// The cluster-level cell of `store` at `concurrency`, if measured.
    pub fn cluster_cell(&self, store: RaftStore, concurrency: usize) -> Option<&RaftCell> {
        self.cluster_cells
            .iter()
            .find(|cell| cell.store == store && cell.in_flight == concurrency)
    }

    /// sealog's appends/s over raft-engine's, store level.
    pub fn store_throughput_ratio(
        &self,
        payload: usize,
        flight: usize,
        groups: usize,
    ) -> Option<f64> {
        ratio(
            self.store_cell(RaftStore::Sealog, payload, flight, groups),
            self.store_cell(RaftStore::RaftEngine, payload, flight, groups),
            |cell| cell.ops_per_sec,
        )
    }

    /// sealog's p50 over raft-engine's, store level.
    pub fn store_p50_ratio(&self, payload: usize, flight: usize, groups: usize) -> Option<f64> {
        ratio(
            self.store_cell(RaftStore::Sealog, payload, flight, groups),
            self.store_cell(RaftStore::RaftEngine, payload, flight, groups),
            |cell| cell.p50_us,
        )
    }

    /// sealog's client writes/s over `other`'s at `concurrency`.
    pub fn cluster_throughput_ratio(&self, other: RaftStore, concurrency: usize) -> Option<f64> {
        ratio(
            self.cluster_cell(RaftStore::Sealog, concurrency),
            self.cluster_cell(other, concurrency),
            |cell| cell.ops_per_sec,
        )
    }
}
