//! The raft section's place in a run (`--section raft`): sealog as openraft's log store
//! against the raft-engine adapter (with `--features peers`) and the in-memory store, at the
//! store level (`raft_store.rs`) and as a three-node cluster (`raft_cluster.rs`), on a tokio
//! runtime of its own, in the run's scratch directory (also with `--device`: the cluster's
//! nodes need three rings). Its figures are `raft_figures.rs`, its report `raft_report.rs`.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::progress::progress;
use crate::raft_cluster::cluster_cells;
use crate::raft_figures::{RaftCell, RaftFigures, RaftStore};
use crate::raft_report;
use crate::raft_store::{self, Load};
use crate::run_context::RunContext;

/// The sealog ring of the store level: room for every cell's live entries, which the groups
/// keep under a quarter of it by purging.
pub const RING_BYTES: u64 = 1 << 30;
/// The most groups a cell spreads its appends over.
pub const MANY_GROUPS: usize = 1000;
/// raft-engine's writer threads at the store level: several, so that appends of different
/// groups meet in raft-engine's own write-group commit, as sealog's meet in its group commit.
pub const RAFT_ENGINE_WRITERS: usize = 4;

/// The loads a run measures.
pub struct RaftPlan {
    /// Store level: entry payloads, appends in flight and group counts.
    pub payloads: Vec<usize>,
    /// Appends in flight.
    pub in_flight: Vec<usize>,
    /// Groups.
    pub groups: Vec<usize>,
    /// Cluster level: concurrent client writes.
    pub concurrencies: Vec<usize>,
    /// The cluster's client writes' values.
    pub cluster_payload: usize,
    /// Each cell's measured window and its warm-up.
    pub duration: Duration,
    /// The warm-up.
    pub warmup: Duration,
}

impl RaftPlan {
    /// The quick run's cells (256 B only, 1 and 256 in flight, 1 and 256 writers on the
    /// cluster), each half a quick cell's time (1.5 s), or the full grid at a quarter of a
    /// full cell's (2.5 s); a fifth of that as warm-up.
    pub fn of(context: &RunContext<'_>) -> RaftPlan {
        let duration = context.duration / if context.quick { 2 } else { 4 };
        let (payloads, in_flight, concurrencies) = if context.quick {
            (vec![256], vec![1, 256], vec![1, 256])
        } else {
            (vec![256, 4096], vec![1, 16, 256], vec![1, 16, 256])
        };
        RaftPlan {
            payloads,
            in_flight,
            groups: vec![1, MANY_GROUPS],
            concurrencies,
            cluster_payload: 256,
            duration,
            warmup: duration / 5,
        }
    }

    /// Appends per group between purges: a group's live entries stay within a quarter of the
    /// ring over all groups (capped, so that the mem store's memory stays small too).
    fn purge_every(payload_bytes: usize, groups: usize) -> u64 {
        let entry_bytes = payload_bytes as u64 + 64;
        (RING_BYTES / 4 / groups as u64 / entry_bytes).clamp(16, 65_536)
    }

    fn load(&self, payload_bytes: usize, in_flight: usize, groups: usize) -> Load {
        Load {
            payload_bytes,
            in_flight,
            groups,
            warmup: self.warmup,
            duration: self.duration,
            purge_every: Self::purge_every(payload_bytes, groups),
        }
    }
}

/// Runs the section: the store level, then the cluster level, each store in turn.
pub fn raft_section(context: &RunContext<'_>) -> Result<RaftFigures, String> {
    let started = Instant::now();
    let plan = RaftPlan::of(context);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|error| format!("tokio runtime: {error}"))?;
    let dir = context.scratch.join("raft");
    std::fs::create_dir_all(&dir).map_err(|error| format!("{}: {error}", dir.display()))?;
    let outcome = runtime.block_on(async {
        let (store_cells, setup) = store_level(&plan, &dir).await?;
        let mut cluster = Vec::new();
        for store in RaftStore::all() {
            let cluster_dir = dir.join(format!("cluster-{}", store.name()));
            let load = plan.load(plan.cluster_payload, 1, 1);
            cluster.extend(cluster_cells(store, &cluster_dir, &plan.concurrencies, &load).await?);
            let _ = std::fs::remove_dir_all(&cluster_dir);
        }
        Ok::<_, String>((store_cells, setup, cluster))
    });
    runtime.shutdown_timeout(Duration::from_secs(5));
    let _ = std::fs::remove_dir_all(&dir);
    let (store_cells, sealog_group_setup_seconds, cluster_cells) = outcome?;
    Ok(RaftFigures {
        store_cells,
        cluster_cells,
        seconds_per_cell: plan.duration.as_secs_f64(),
        warmup_seconds_per_cell: plan.warmup.as_secs_f64(),
        ring_bytes: RING_BYTES,
        sealog_group_setup_seconds,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// Opens every store with its groups, runs each load on every store in turn (all stay open,
/// so a store's cells lie between the others' and drift on the device hits all of them),
/// and closes them. Returns the cells and the time sealog's groups took to create.
async fn store_level(plan: &RaftPlan, dir: &Path) -> Result<(Vec<RaftCell>, f64), String> {
    let groups = plan.groups.iter().copied().max().unwrap_or(1);
    progress(&format!("raft: creating {groups} groups on sealog's store"));
    let setup = Instant::now();
    let mut stores = vec![raft_store::open_sealog(
        &dir.join("sealog.ring"),
        RING_BYTES,
        groups,
    )?];
    let setup_seconds = setup.elapsed().as_secs_f64();
    #[cfg(feature = "peers")]
    stores.push(raft_store::open_raft_engine(
        &dir.join("raft-engine"),
        groups,
        RAFT_ENGINE_WRITERS,
    )?);
    stores.push(raft_store::open_mem(groups));
    let mut cells = Vec::new();
    let outcome = async {
        for &payload in &plan.payloads {
            for &groups in &plan.groups {
                for &in_flight in &plan.in_flight {
                    let load = plan.load(payload, in_flight, groups);
                    for store in &stores {
                        progress(&format!(
                            "raft: {} store, {payload} B x {in_flight} in flight over {groups} \
                             group(s)",
                            store.store().name()
                        ));
                        cells.push(store.run(&load).await?);
                        store.tidy()?;
                    }
                }
            }
        }
        Ok::<_, String>(())
    }
    .await;
    for store in stores {
        store.close();
    }
    outcome.map(|()| (cells, setup_seconds))
}

/// The section's tables and lines on the terminal.
pub fn print_raft_section(figures: &RaftFigures) {
    println!();
    for line in raft_report::lines(figures) {
        println!("{line}");
    }
}
