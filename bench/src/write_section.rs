//! The write section: the ceilings every sealog cell is compared with (on a scratch ring of
//! their own, whose format measures the sync methods: the run's choice), sealog's cells
//! (payload sizes x writers x appends in flight), the tail markers' cost, and with `--features
//! peers` raft-engine's and okaywal's cells and the single writer against them in interleaved
//! rounds (`rounds.rs`); then the section's table and lines on the terminal and its fields of
//! the JSON document.

use sealog::Durability;
use serde_json::json;

use crate::ceiling::{self, RawPaths};
use crate::cell::Cell;
use crate::cells::{self, sealog_cell, RingShape, Workload};
use crate::progress::progress;
use crate::report;
use crate::rounds;
use crate::run_context::RunContext;

/// The quick run's sealog cells (payload, writers, in flight per writer): the single-writer
/// latency cell, 32 writers one in flight each (group commit), and the deep cells of the
/// targets, 4 x 256 = 1024 appends in flight (by Little's law the device's bandwidth needs about
/// bandwidth x latency bytes in flight: 3 GB/s x 300 us is 225 appends of 4 KiB, before any
/// gathering time).
const QUICK_CELLS: [(usize, usize, usize); 4] =
    [(4096, 1, 1), (4096, 32, 1), (4096, 4, 256), (128, 4, 256)];

/// Idle periods of the tail marker measurement (each about 100 ms with the default idle time).
const TAIL_MARKER_PERIODS: u64 = 10;

/// What the write section measured.
pub struct WriteFigures {
    /// Every cell, ceilings first (the peers' appended by [`peers_section`]).
    pub all: Vec<Cell>,
    /// The sealog cells' workloads (the peers and the rounds run the same; read only with
    /// the peers built in).
    #[cfg_attr(not(feature = "peers"), allow(dead_code))]
    pub workloads: Vec<Workload>,
    /// The ceiling ring's block size.
    pub ring_block_bytes: u32,
    /// The sync method the ceiling ring's format chose: the run's.
    pub ring_sync: sealog::SyncChoice,
    /// Whether fio is installed (its cells are then among `all`).
    pub fio_found: bool,
    /// The 1 MiB write+datasync ceiling's MB/s (the cells' `ratio_to_ceiling`).
    pub ceiling_mb: f64,
    /// The 4 KiB write+datasync ceiling's p50 (the cells' p50 ratios).
    pub ceiling_p50: f64,
    /// The 4 KiB write+datasync ceiling's p99 (the peers' and the LogDrive cells' ratios).
    pub ceiling_p99: f64,
    /// What tail markers cost a writer idle between appends.
    pub markers: cells::TailMarkerCost,
    /// The single-writer rounds against the peers, or why the run has none.
    pub rounds: rounds::Outcome,
}

/// The write section: the ceilings (on a scratch ring of their own, whose format measures the
/// sync methods: the run's choice), sealog's cells and the tail markers' cost.
pub fn write_section(context: &RunContext<'_>) -> Result<WriteFigures, String> {
    let ceilings = measure_ceilings(context)?;
    let (ring_block_bytes, ring_sync) = (ceilings.ring_block_bytes, ceilings.ring_sync);
    let fio_found = ceilings.fio_4k.is_some();
    let ceiling_mb = ceilings.ceiling_1m.mb_per_sec;
    let (ceiling_p50, ceiling_p99) = (ceilings.ceiling_4k.p50_us, ceilings.ceiling_4k.p99_us);
    // The cells' rings record the ceiling ring's sync method: see `measure_ceilings`.
    let shape = RingShape {
        sync_method: Some(ring_sync.method()),
        ..context.shape
    };
    let workloads = sealog_workloads(context);
    let (sealog_cells, markers) = measure_sealog_cells(context, shape, &workloads)?;
    let all = ceilings.with_cells(sealog_cells, (ceiling_mb, ceiling_p50, ceiling_p99));
    Ok(WriteFigures {
        all,
        workloads,
        ring_block_bytes,
        ring_sync,
        fio_found,
        ceiling_mb,
        ceiling_p50,
        ceiling_p99,
        markers,
        rounds: Err("built without the peers feature"),
    })
}

/// What the ceilings of the write section measured, and what the ceiling ring's format chose.
struct Ceilings {
    /// The ceiling ring's block size.
    ring_block_bytes: u32,
    /// The sync method the ceiling ring's format chose: the run's.
    ring_sync: sealog::SyncChoice,
    /// Write + linked fdatasync and RWF_DSYNC at queue depth 1.
    raw_paths: RawPaths,
    /// The raw write bandwidth (no sync).
    raw_write: Cell,
    /// The built-in 4 KiB write+datasync ceiling.
    ceiling_4k: Cell,
    /// The built-in 1 MiB write+datasync ceiling.
    ceiling_1m: Cell,
    /// fio's 4 KiB and 1 MiB write+fdatasync cells (`None`: fio is not installed).
    fio_4k: Option<Result<Cell, String>>,
    fio_1m: Option<Result<Cell, String>>,
}

/// Measures the ceilings on a scratch ring of their own, then fio's beside them.
fn measure_ceilings(context: &RunContext<'_>) -> Result<Ceilings, String> {
    let duration = context.duration;
    let fit = |bytes: u64| {
        context
            .device_bytes
            .map_or(bytes, |device| bytes.min(device))
    };
    // Ceilings first, on a scratch ring of their own (the raw writes overwrite its data).
    let ceiling_ring = context.ring_path("ceiling");
    // Its format measures the sync methods, as every ring's does by default: that is the
    // run's choice. The cells' rings record the same method (measuring each anew would let
    // noise pick differently per cell), so a drive opened with the default uses it.
    let ceiling_shape = RingShape {
        size_bytes: fit(256 << 20),
        batch_size_max_bytes: None,
        window_batches_max: None,
        sync_method: None,
    };
    progress("ceiling ring: format, measuring the sync methods");
    let ceiling_control = cells::fresh_ring(&ceiling_ring, ceiling_shape)?;
    progress("ceiling: raw paths at queue depth 1");
    // Half a cell's time for the two raw paths together and half for the bandwidth: enough
    // samples for a p99, and the quick run stays near a minute.
    let raw_paths = ceiling::builtin_raw_paths(&ceiling_ring, duration / 2, context.spin_us)?;
    progress("ceiling: raw write bandwidth");
    let raw_write = ceiling::builtin_write_bandwidth(
        &ceiling_ring,
        1 << 20,
        ceiling::RAW_WRITE_DEPTH,
        duration / 2,
    )?;
    progress("ceiling: built-in 4 KiB write+datasync");
    let ceiling_4k = ceiling::builtin_write_sync(&ceiling_ring, 4096, duration, context.spin_us)?;
    progress("ceiling: built-in 1 MiB write+datasync");
    let ceiling_1m =
        ceiling::builtin_write_sync(&ceiling_ring, 1 << 20, duration, context.spin_us)?;
    context.remove_ring(&ceiling_ring);
    let fio_seconds = context.seconds.ceil() as u64;
    progress("ceiling: fio");
    let fio_target = match context.device {
        Some(device) => ceiling::FioTarget::Device(device),
        None => ceiling::FioTarget::Directory(context.scratch),
    };
    Ok(Ceilings {
        ring_block_bytes: ceiling_control.geometry.block_size_bytes,
        ring_sync: ceiling_control.sync,
        raw_paths,
        raw_write,
        ceiling_4k,
        ceiling_1m,
        fio_4k: ceiling::fio_write_sync(fio_target, 4096, fio_seconds),
        fio_1m: ceiling::fio_write_sync(fio_target, 1 << 20, fio_seconds),
    })
}

impl Ceilings {
    /// Every cell of the section, the ceilings first and then `sealog_cells`, each with its
    /// ratios to the `(MB/s, p50, p99)` ceilings; a fio cell that failed is reported and left
    /// out.
    fn with_cells(
        self,
        mut sealog_cells: Vec<Cell>,
        (ceiling_mb_per_sec, ceiling_p50_us, ceiling_p99_us): (f64, f64, f64),
    ) -> Vec<Cell> {
        let Ceilings {
            raw_paths,
            mut raw_write,
            mut ceiling_4k,
            mut ceiling_1m,
            fio_4k,
            fio_1m,
            ..
        } = self;
        let RawPaths {
            fdatasync: mut raw_fdatasync,
            dsync: mut raw_dsync,
            ..
        } = raw_paths;
        for cell in sealog_cells.iter_mut().chain([
            &mut ceiling_4k,
            &mut ceiling_1m,
            &mut raw_fdatasync,
            &mut raw_dsync,
            &mut raw_write,
        ]) {
            cell.set_ratios(ceiling_mb_per_sec, ceiling_p50_us, ceiling_p99_us);
        }
        let mut all: Vec<Cell> = vec![ceiling_4k, ceiling_1m, raw_fdatasync, raw_dsync, raw_write];
        for fio in [fio_4k, fio_1m].into_iter().flatten() {
            match fio {
                Ok(mut cell) => {
                    cell.set_ratios(ceiling_mb_per_sec, ceiling_p50_us, ceiling_p99_us);
                    all.push(cell);
                }
                Err(error) => eprintln!("fio: {error}"),
            }
        }
        all.extend(sealog_cells);
        all
    }
}

/// sealog's cells of `workloads`, each on a fresh ring of `shape`, then the tail markers' cost
/// on the same ring.
fn measure_sealog_cells(
    context: &RunContext<'_>,
    shape: RingShape,
    workloads: &[Workload],
) -> Result<(Vec<Cell>, cells::TailMarkerCost), String> {
    let ring = context.ring_path("ring");
    let mut sealog_cells: Vec<Cell> = Vec::new();
    for (index, &workload) in workloads.iter().enumerate() {
        progress(&format!(
            "sealog cell {}/{}: {} B x {} writers x {} in flight",
            index + 1,
            workloads.len(),
            workload.payload_bytes,
            workload.writers,
            workload.in_flight
        ));
        sealog_cells.push(sealog_cell(
            &ring,
            shape,
            workload,
            context.drive_options.clone(),
        )?);
    }
    progress("tail markers: a writer idle between appends");
    let marker_options = sealog::DriveOptions {
        durability: context.durability,
        ..sealog::DriveOptions::default()
    };
    let markers = cells::tail_marker_cost(&ring, shape, marker_options, TAIL_MARKER_PERIODS)?;
    context.remove_ring(&ring);
    Ok((sealog_cells, markers))
}

/// The sealog cells this run measures: `--cell`'s, the quick set, or the full grid.
fn sealog_workloads(context: &RunContext<'_>) -> Vec<Workload> {
    let workloads: Vec<(usize, usize, usize)> = if !context.cells.is_empty() {
        context.cells.to_vec()
    } else if context.quick {
        QUICK_CELLS.to_vec()
    } else {
        let mut all = Vec::new();
        for payload in [128, 4096, 65536] {
            for writers in [1, 4, 32] {
                for in_flight in [1, 16] {
                    all.push((payload, writers, in_flight));
                }
            }
        }
        // The targets' deep cells: 1024 appends in flight in total.
        all.extend([(4096, 4, 256), (128, 4, 256)]);
        all
    };
    workloads
        .into_iter()
        .map(|(payload_bytes, writers, in_flight)| Workload {
            payload_bytes,
            writers,
            in_flight,
            duration: context.duration,
            warmup: context.warmup,
        })
        .collect()
}

/// With `--features peers`: raft-engine's and okaywal's cells and the single-writer rounds,
/// added to the write section's figures (without the feature, nothing).
pub fn peers_section(context: &RunContext<'_>, write: &mut WriteFigures) -> Result<(), String> {
    #[cfg(not(feature = "peers"))]
    let _ = context;
    #[cfg(feature = "peers")]
    {
        // The peers' APIs block, so their fair cells are the one-in-flight ones (the quick run
        // keeps the 4 KiB ones).
        let peer_workloads: Vec<Workload> = write
            .workloads
            .iter()
            .filter(|workload| {
                workload.in_flight == 1 && (!context.quick || workload.payload_bytes == 4096)
            })
            .copied()
            .collect();
        for peer in crate::peers::Peer::ALL {
            for &workload in &peer_workloads {
                progress(&format!(
                    "{} cell: {} B x {} writers",
                    peer.name(),
                    workload.payload_bytes,
                    workload.writers
                ));
                let mut cell = crate::peers::peer_cell(peer, context.scratch, workload)?;
                cell.set_ratios(write.ceiling_mb, write.ceiling_p50, write.ceiling_p99);
                write.all.push(cell);
            }
        }
        // Issue 10 judges the single writer against the peers in interleaved rounds.
        let ring = context.ring_path("ring");
        let shape = RingShape {
            sync_method: Some(write.ring_sync.method()),
            ..context.shape
        };
        write.rounds = rounds::measure(
            &ring,
            shape,
            &context.drive_options,
            context.scratch,
            &write.workloads,
        )?;
        // sealog's runs formatted the ring anew.
        context.remove_ring(&ring);
    }
    report::set_peer_ratios(&mut write.all);
    Ok(())
}

/// The write section's table and lines.
pub fn print_write_section(
    context: &RunContext<'_>,
    write: &WriteFigures,
    sealog_peak_rss_bytes: u64,
) {
    let all = &write.all;
    if !write.fio_found {
        println!("fio was not found: the built-in io_uring ceiling is the only ceiling");
    }
    println!("{}", report::header());
    for cell in all {
        println!("{}", report::row(cell));
    }
    if let Some(line) = report::raw_paths_line(all) {
        println!("{line}");
    }
    let durability_used = match context.durability {
        Some(durability) => format!("{durability:?}, named with --durability"),
        None => format!("{}, the ring's choice", write.ring_sync.method().name()),
    };
    println!(
        "sync method of the sealog cells: {durability_used}; the run's ring chose {}",
        sealog::sync_probe::explain(&write.ring_sync)
    );
    println!();
    for line in report::group_commit_table(all) {
        println!("{line}");
    }
    let hint_writes: u64 = all.iter().map(|cell| cell.hint_writes).sum();
    let hint_waits: u64 = all.iter().map(|cell| cell.hint_waits).sum();
    println!(
        "tail hints: {hint_writes} control blocks moved the hint during the cells above; \
         batches that waited for one: {hint_waits}"
    );
    let busy_markers: u64 = all.iter().map(|cell| cell.tail_markers).sum();
    let markers = &write.markers;
    println!(
        "tail markers: {busy_markers} written during the cells above; a lone writer idle for \
         {} ms after each append: {} markers in {} idle periods, each one {}-byte write + \
         datasync (the 4 KiB write+datasync ceiling: p50 {:.0} us)",
        2 * markers.idle_us / 1000,
        markers.markers,
        markers.idle_periods,
        markers.marker_bytes,
        write.ceiling_p50
    );
    // The default ring's pool: a buffer per batch in the window, one for control blocks and
    // the read lane, each a batch and a block (see `sealog::drive::buffer_count`).
    let pool_bytes = (u64::from(sealog::storage::WINDOW_BATCHES_DEFAULT)
        + 1
        + sealog::drive::READ_BUFFERS as u64)
        * (u64::from(sealog::storage::BATCH_SIZE_DEFAULT_MAX_BYTES) + 4096);
    println!(
        "peak RSS of sealog's cells, recovery and reads: {} MiB (largest ring {} MiB; one \
         drive's buffer pool {} MiB)",
        sealog_peak_rss_bytes >> 20,
        context.full_ring_bytes >> 20,
        pool_bytes >> 20
    );
    for line in rounds::report_lines(&write.rounds) {
        println!("{line}");
    }
    println!(
        "xMB/s: MB/s over the 1 MiB write+datasync ceiling ({:.1} MB/s); xp50: p50 over \
         the 4 KiB write+datasync p50 ({:.0} us); xpeer: sealog's appends/s over the \
         peer's in the same workload",
        write.ceiling_mb, write.ceiling_p50
    );
}

/// The write section's fields of the JSON document.
pub fn write_json(
    document: &mut serde_json::Value,
    write: &WriteFigures,
    durability: Option<Durability>,
) {
    document["ring_block_bytes"] = json!(write.ring_block_bytes);
    document["sync_method"] = sync_method_json(&write.ring_sync, durability);
    document["fio_found"] = json!(write.fio_found);
    document["cells"] = json!(write.all.iter().map(Cell::to_json).collect::<Vec<_>>());
    document["tail_markers"] = write.markers.to_json();
    document["single_writer_rounds"] = rounds::outcome_json(&write.rounds);
}

/// The run's sync method for the JSON: what the ring chose at format time and on what figures,
/// and what the sealog cells used (the ring's choice, or `--durability`).
fn sync_method_json(
    sync: &sealog::SyncChoice,
    durability: Option<Durability>,
) -> serde_json::Value {
    let measurement = sync.measurement().map(|m| {
        let mut figures: serde_json::Map<String, serde_json::Value> =
            sealog::sync_probe::figures(&m)
                .into_iter()
                .map(|(name, value)| (name.to_string(), value.into()))
                .collect();
        figures.insert("fua".into(), m.fua.into());
        figures
    });
    json!({
        "ring_choice": sync.method().name(),
        "why": sealog::sync_probe::explain(sync),
        "measurement": measurement,
        "cells_use": durability.map_or_else(
            || sync.method().name().to_string(),
            |durability| format!("{durability:?}"),
        ),
    })
}
