//! The raft section's cluster level: the replicated key-value example (`sealog_openraft::kv`)
//! as three nodes over loopback in this process, on one log store at a time (the store is
//! the only difference between runs), with 1, 16 or 256 client tasks each writing one key
//! after another through one shared client; a write counts once the client has it back,
//! which is once it is committed (on a majority's durable logs) and applied.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use sealog_openraft::kv::{Cluster, KvClient, StoreKind};

use crate::progress::progress;
use crate::raft_figures::{RaftCell, RaftStore};
use crate::raft_store::{cell_of, latency_histogram, Load};
use crate::raft_threads::cpu_over_window;

/// The example's store kind for `store`.
fn store_kind(store: RaftStore) -> Result<StoreKind, String> {
    match store {
        RaftStore::Sealog => Ok(StoreKind::Sealog),
        RaftStore::Mem => Ok(StoreKind::Mem),
        #[cfg(feature = "peers")]
        RaftStore::RaftEngine => Ok(StoreKind::RaftEngine),
        #[cfg(not(feature = "peers"))]
        RaftStore::RaftEngine => Err("raft-engine needs --features peers".to_string()),
    }
}

/// What one client task saw in the window.
struct Tally {
    latency_ns: Histogram<u64>,
    errors: u64,
}

/// One client task: writes its own key again and again until the window ends; records the
/// writes that came back inside it.
async fn client_task(
    client: KvClient,
    key: String,
    value: Arc<str>,
    window: (Instant, Instant),
) -> Result<Tally, String> {
    let mut tally = Tally {
        latency_ns: latency_histogram()?,
        errors: 0,
    };
    let (window_start, window_end) = window;
    while Instant::now() < window_end {
        let started = Instant::now();
        let outcome = client.write(&key, &value).await;
        let done = Instant::now();
        if done < window_start || done >= window_end {
            continue;
        }
        match outcome {
            Ok(_) => {
                let nanos = u64::try_from((done - started).as_nanos()).unwrap_or(u64::MAX);
                tally.latency_ns.saturating_record(nanos.max(1));
            }
            Err(_) => tally.errors += 1,
        }
    }
    Ok(tally)
}

/// `concurrency` client tasks writing for `load`'s warm-up and window.
async fn run_load(
    store: RaftStore,
    client: &KvClient,
    concurrency: usize,
    load: &Load,
) -> Result<RaftCell, String> {
    let value: Arc<str> = "v".repeat(load.payload_bytes).into();
    let window_start = Instant::now() + load.warmup;
    let window_end = window_start + load.duration;
    let tasks: Vec<_> = (0..concurrency)
        .map(|task| {
            let write = client_task(
                client.clone(),
                format!("key-{task}"),
                Arc::clone(&value),
                (window_start, window_end),
            );
            tokio::spawn(write)
        })
        .collect();
    let (cpu, cores) = cpu_over_window(window_start, window_end).await;
    let mut latency_ns = latency_histogram()?;
    let mut errors = 0;
    for task in tasks {
        let tally = task.await.map_err(|error| error.to_string())??;
        latency_ns
            .add(&tally.latency_ns)
            .map_err(|e| e.to_string())?;
        errors += tally.errors;
    }
    let load = Load {
        in_flight: concurrency,
        groups: 1,
        ..load.clone()
    };
    let mut cell = cell_of(store, &load, &latency_ns, cpu);
    cell.errors = errors;
    cell.cores_by_thread = cores;
    Ok(cell)
}

/// Starts a three-node cluster on `store` in `dir`, waits for its first write to commit (a
/// leader elected), runs each concurrency of `concurrencies` in turn and shuts it down.
pub async fn cluster_cells(
    store: RaftStore,
    dir: &Path,
    concurrencies: &[usize],
    load: &Load,
) -> Result<Vec<RaftCell>, String> {
    let kind = store_kind(store)?;
    std::fs::create_dir_all(dir).map_err(|error| format!("{}: {error}", dir.display()))?;
    let cluster = Cluster::start(3, kind, dir, |_| {})
        .await
        .map_err(|error| format!("{} cluster: {error}", store.name()))?;
    let outcome = async {
        cluster.init().await.map_err(|error| error.to_string())?;
        let client = cluster.client();
        let first = tokio::time::timeout(Duration::from_secs(30), client.write("first", "1"));
        first
            .await
            .map_err(|_| "no leader after 30 s".to_string())?
            .map_err(|error| error.to_string())?;
        let mut cells = Vec::new();
        for &concurrency in concurrencies {
            progress(&format!(
                "raft: cluster of three on {}, {concurrency} concurrent writes",
                store.name()
            ));
            cells.push(run_load(store, &client, concurrency, load).await?);
        }
        Ok::<_, String>(cells)
    }
    .await;
    let stopped = cluster.shutdown().await.map_err(|error| error.to_string());
    let cells = outcome.map_err(|error| format!("{} cluster: {error}", store.name()))?;
    stopped?;
    Ok(cells)
}
