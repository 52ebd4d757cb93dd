//! `sealog-bench`: sealog against what the device itself can do and against its peers, in one
//! run on one file system: the built-in io_uring write+datasync ceilings (4 KiB and 1 MiB, queue
//! depth 1) and a sequential O_DIRECT read (1 and 4 reads in flight), fio's when it is
//! installed, the raw paths a lone append could take (write + linked fdatasync, RWF_DSYNC, at
//! queue depth 1) and the raw write bandwidth (no sync), the sync method the run's ring chose
//! when it was formatted, sealog's cells (payload sizes x writers x appends in flight), the
//! recovery of a full 1 GiB ring, and with `--features peers` raft-engine's and okaywal's
//! cells and the single writer against them in interleaved rounds (`rounds.rs`); each cell with
//! its ratio to the ceiling that bounds it (and a peer's with sealog's ratio to it), then the
//! issues' targets with this run's figures. A table on the terminal, `--json PATH` with the
//! machine description, `--plot PATH` an SVG.
//!
//! `cargo run --release -p sealog-bench -- --quick` is the README's main job (about a minute).

#![forbid(unsafe_code)]

mod ceiling;
mod cells;
mod machine;
#[cfg(feature = "peers")]
mod peers;
mod plot;
mod report;
mod rounds;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use sealog::Durability;
use serde_json::json;

use crate::ceiling::RawPaths;
use crate::cells::{recovery_cell, sealog_cell, RingShape, Workload};
use crate::report::Cell;

#[derive(Parser)]
#[command(
    name = "sealog-bench",
    version,
    about = "sealog against the device's ceiling"
)]
struct Args {
    /// A subset in about a minute (the README's main job).
    #[arg(long)]
    quick: bool,
    /// Write every figure as JSON here (the full run's default: sealog-bench.json).
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write the plot (SVG) here (the full run's default: sealog-bench.svg).
    #[arg(long)]
    plot: Option<PathBuf>,
    /// Directory on the file system to measure (a temporary directory inside it is used and
    /// removed afterwards); default: the current directory.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Measure a block device instead of a file system: the ceilings (fio included), sealog's
    /// rings and the recovery ring all go on it, sized to fit. ITS CONTENTS ARE OVERWRITTEN.
    /// The peers, which need a file system, still run in --dir.
    #[arg(long)]
    device: Option<PathBuf>,
    /// Seconds measured per cell (after a warm-up of a fifth of it).
    #[arg(long)]
    seconds: Option<f64>,
    /// Durability mode of the sealog cells: `auto` (what the ring chose at format time, by
    /// measuring the device), `fdatasync`, `dsync` or `nosync` (benchmarks only).
    #[arg(long, default_value = "auto")]
    durability: String,
    /// How long the drive thread spins for completions before it blocks (microseconds).
    #[arg(long, default_value_t = sealog::drive::SPIN_BEFORE_BLOCK_US_DEFAULT)]
    spin_us: u64,
    /// How long a client waiting on its ticket spins before it parks (microseconds; at most
    /// one client of a drive spins at a time).
    #[arg(long, default_value_t = sealog::ticket::CLIENT_SPIN_US_DEFAULT)]
    client_spin_us: u64,
    /// Group commit's gathering window, microseconds (0 disables).
    #[arg(long, default_value_t = sealog::drive::GROUP_GATHER_US_DEFAULT)]
    gather_us: u64,
    /// Give the drive's ring a kernel submission-polling thread (SQPOLL) idling after this many
    /// milliseconds (default: no SQPOLL).
    #[arg(long)]
    sqpoll_idle_ms: Option<u32>,
    /// Largest batch of the sealog rings, bytes (default: the engine's).
    #[arg(long)]
    batch_max_bytes: Option<u32>,
    /// Batches in flight at most on the sealog rings (default: the engine's).
    #[arg(long)]
    window_batches: Option<u32>,
    /// Run only these sealog cells, each PAYLOADxWRITERSxIN_FLIGHT (e.g. 4096x4x64); repeatable.
    #[arg(long = "cell", value_parser = parse_cell)]
    cells: Vec<(usize, usize, usize)>,
}

/// Parses PAYLOADxWRITERSxIN_FLIGHT.
fn parse_cell(text: &str) -> Result<(usize, usize, usize), String> {
    let numbers: Vec<usize> = text
        .split('x')
        .map(|part| part.trim().parse::<usize>())
        .collect::<Result<_, _>>()
        .map_err(|error| format!("'{text}': {error} (expected PAYLOADxWRITERSxIN_FLIGHT)"))?;
    match numbers[..] {
        [payload, writers, in_flight] if writers > 0 && in_flight > 0 => {
            Ok((payload, writers, in_flight))
        }
        _ => Err(format!(
            "'{text}': expected PAYLOADxWRITERSxIN_FLIGHT with writers and in-flight above 0"
        )),
    }
}

/// The quick run's sealog cells (payload, writers, in flight per writer): the single-writer
/// latency cell, 32 writers one in flight each (group commit), and the deep cells of the
/// targets, 4 x 256 = 1024 appends in flight (by Little's law the device's bandwidth needs about
/// bandwidth x latency bytes in flight: 3 GB/s x 300 us is 225 appends of 4 KiB, before any
/// gathering time).
const QUICK_CELLS: [(usize, usize, usize); 4] =
    [(4096, 1, 1), (4096, 32, 1), (4096, 4, 256), (128, 4, 256)];

/// Idle periods of the tail marker measurement (each about 100 ms with the default idle time).
const TAIL_MARKER_PERIODS: u64 = 10;

fn progress(line: &str) {
    eprint!("\r\x1b[2K{line}");
    let _ = std::io::stderr().flush();
}

/// The options of the sealog rings the cells (and the single-writer rounds) open.
fn drive_options(args: &Args, durability: Option<Durability>) -> sealog::DriveOptions {
    sealog::DriveOptions {
        durability,
        spin_before_block_us: args.spin_us,
        sqpoll_idle_ms: args.sqpoll_idle_ms,
        group_gather_us: args.gather_us,
        client_spin_us: args.client_spin_us,
        ..sealog::DriveOptions::default()
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("\nsealog-bench: {error}");
            ExitCode::from(1)
        }
    }
}

fn run(args: &Args) -> Result<(), String> {
    let durability = match args.durability.as_str() {
        "auto" => None,
        "fdatasync" => Some(Durability::Fdatasync),
        "dsync" => Some(Durability::Dsync),
        "nosync" => Some(Durability::NoSyncBenchmarkOnly),
        other => return Err(format!("unknown durability mode '{other}'")),
    };
    let base = args.dir.clone().unwrap_or_else(|| PathBuf::from("."));
    let scratch =
        tempfile::tempdir_in(&base).map_err(|error| format!("{}: {error}", base.display()))?;
    let seconds = args.seconds.unwrap_or(if args.quick { 3.0 } else { 10.0 });
    let duration = Duration::from_secs_f64(seconds);
    let warmup = Duration::from_secs_f64(seconds / 5.0);
    // On a block device every ring is the device itself, each sized to fit it.
    let device_bytes = match &args.device {
        Some(device) => Some(machine::block_device_bytes(device)?),
        None => None,
    };
    let fit = |bytes: u64| device_bytes.map_or(bytes, |device| bytes.min(device));
    let ring_bytes: u64 = fit(if args.quick { 512 << 20 } else { 1 << 30 });
    // The recovery target is stated for a full 1 GiB ring: the quick run measures that too.
    let recovery_ring_bytes: u64 = fit(1 << 30);
    let mut shape = RingShape {
        size_bytes: ring_bytes,
        batch_size_max_bytes: args.batch_max_bytes,
        window_batches_max: args.window_batches,
        sync_method: None,
    };

    // Ceilings first, on a scratch ring of their own (the raw writes overwrite its data).
    let ceiling_ring = args
        .device
        .clone()
        .unwrap_or_else(|| scratch.path().join("ceiling"));
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
    let ring_block_bytes = ceiling_control.geometry.block_size_bytes;
    let ring_sync = ceiling_control.sync;
    shape.sync_method = Some(ring_sync.method());
    progress("ceiling: raw paths at queue depth 1");
    // Half a cell's time for the two raw paths together and half for the bandwidth: enough
    // samples for a p99, and the quick run stays near a minute.
    let raw_paths = ceiling::builtin_raw_paths(&ceiling_ring, duration / 2, args.spin_us)?;
    progress("ceiling: raw write bandwidth");
    let raw_write = ceiling::builtin_write_bandwidth(
        &ceiling_ring,
        1 << 20,
        ceiling::RAW_WRITE_DEPTH,
        duration / 2,
    )?;
    progress("ceiling: built-in 4 KiB write+datasync");
    let mut ceiling_4k = ceiling::builtin_write_sync(&ceiling_ring, 4096, duration, args.spin_us)?;
    progress("ceiling: built-in 1 MiB write+datasync");
    let mut ceiling_1m =
        ceiling::builtin_write_sync(&ceiling_ring, 1 << 20, duration, args.spin_us)?;
    let fio_seconds = seconds.ceil() as u64;
    progress("ceiling: fio");
    let fio_target = match &args.device {
        Some(device) => ceiling::FioTarget::Device(device),
        None => ceiling::FioTarget::Directory(scratch.path()),
    };
    let fio_4k = ceiling::fio_write_sync(fio_target, 4096, fio_seconds);
    let fio_1m = ceiling::fio_write_sync(fio_target, 1 << 20, fio_seconds);
    let fio_found = fio_4k.is_some();
    let ceiling_mb = ceiling_1m.mb_per_sec;
    let (ceiling_p50, ceiling_p99) = (ceiling_4k.p50_us, ceiling_4k.p99_us);

    let mut cells: Vec<Cell> = Vec::new();
    let workloads: Vec<(usize, usize, usize)> = if !args.cells.is_empty() {
        args.cells.clone()
    } else if args.quick {
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
    let ring = args
        .device
        .clone()
        .unwrap_or_else(|| scratch.path().join("ring"));
    let workloads: Vec<Workload> = workloads
        .into_iter()
        .map(|(payload_bytes, writers, in_flight)| Workload {
            payload_bytes,
            writers,
            in_flight,
            duration,
            warmup,
        })
        .collect();
    for (index, &workload) in workloads.iter().enumerate() {
        progress(&format!(
            "sealog cell {}/{}: {} B x {} writers x {} in flight",
            index + 1,
            workloads.len(),
            workload.payload_bytes,
            workload.writers,
            workload.in_flight
        ));
        cells.push(sealog_cell(
            &ring,
            shape,
            workload,
            drive_options(args, durability),
        )?);
    }
    progress("recovery: filling a ring and reopening it");
    let recovery = recovery_cell(
        &ring,
        RingShape {
            size_bytes: recovery_ring_bytes,
            ..shape
        },
    )?;
    progress("tail markers: a writer idle between appends");
    let marker_options = sealog::DriveOptions {
        durability,
        ..sealog::DriveOptions::default()
    };
    let markers = cells::tail_marker_cost(&ring, shape, marker_options, TAIL_MARKER_PERIODS)?;
    if args.device.is_none() {
        let _ = std::fs::remove_dir_all(&ring);
    }
    // sealog's own peak RSS, before the peers (in this process) add theirs.
    let sealog_peak_rss_bytes = cells::peak_rss_bytes();
    #[cfg(not(feature = "peers"))]
    let single_writer_rounds: rounds::Outcome = Err("built without the peers feature");
    #[cfg(feature = "peers")]
    {
        // The peers' APIs block, so their fair cells are the one-in-flight ones (the quick run
        // keeps the 4 KiB ones).
        let peer_workloads: Vec<Workload> = workloads
            .iter()
            .filter(|workload| {
                workload.in_flight == 1 && (!args.quick || workload.payload_bytes == 4096)
            })
            .copied()
            .collect();
        for peer in peers::Peer::ALL {
            for &workload in &peer_workloads {
                progress(&format!(
                    "{} cell: {} B x {} writers",
                    peer.name(),
                    workload.payload_bytes,
                    workload.writers
                ));
                cells.push(peers::peer_cell(peer, scratch.path(), workload)?);
            }
        }
    }
    // Issue 10 judges the single writer against the peers in interleaved rounds.
    #[cfg(feature = "peers")]
    let single_writer_rounds = {
        let options = drive_options(args, durability);
        let outcome = rounds::measure(&ring, shape, &options, scratch.path(), &workloads)?;
        // sealog's runs formatted the ring anew.
        if args.device.is_none() {
            let _ = std::fs::remove_dir_all(&ring);
        }
        outcome
    };
    progress("");
    eprintln!();

    let RawPaths {
        fdatasync: mut raw_fdatasync,
        dsync: mut raw_dsync,
        ..
    } = raw_paths;
    let mut raw_write = raw_write;
    for cell in cells.iter_mut().chain([
        &mut ceiling_4k,
        &mut ceiling_1m,
        &mut raw_fdatasync,
        &mut raw_dsync,
        &mut raw_write,
    ]) {
        cell.set_ratios(ceiling_mb, ceiling_p50, ceiling_p99);
    }
    report::set_peer_ratios(&mut cells);
    let mut all: Vec<Cell> = vec![
        ceiling_4k.clone(),
        ceiling_1m.clone(),
        raw_fdatasync,
        raw_dsync,
        raw_write,
    ];
    for fio in [fio_4k, fio_1m].into_iter().flatten() {
        match fio {
            Ok(mut cell) => {
                cell.set_ratios(ceiling_mb, ceiling_p50, ceiling_p99);
                all.push(cell);
            }
            Err(error) => eprintln!("fio: {error}"),
        }
    }
    all.extend(cells);
    if !fio_found {
        println!("fio was not found: the built-in io_uring ceiling is the only ceiling");
    }
    println!("{}", report::header());
    for cell in &all {
        println!("{}", report::row(cell));
    }
    if let Some(line) = report::raw_paths_line(&all) {
        println!("{line}");
    }
    let durability_used = match durability {
        Some(durability) => format!("{durability:?}, named with --durability"),
        None => format!("{}, the ring's choice", ring_sync.method().name()),
    };
    println!(
        "sync method of the sealog cells: {durability_used}; the run's ring chose {}",
        sealog::sync_probe::explain(&ring_sync)
    );
    println!();
    for line in report::group_commit_table(&all) {
        println!("{line}");
    }
    let read_ceiling = recovery.read_ceiling_bytes_per_sec();
    let recovery_ratio = recovery.bytes_per_sec / read_ceiling;
    println!(
        "recovery of a full {} MiB ring ({} entries): {:.0} MB/s, \
         {recovery_ratio:.2}x the sequential O_DIRECT read ceiling (the same ring read 1 MiB at a \
         time, the better of 1 and 4 reads in flight: {:.0} MB/s; medians of {} rounds)",
        recovery_ring_bytes >> 20,
        recovery.entries,
        recovery.bytes_per_sec / 1e6,
        read_ceiling / 1e6,
        cells::RECOVERY_ROUNDS
    );
    let hint_writes: u64 = all.iter().map(|cell| cell.hint_writes).sum();
    let hint_waits: u64 = all.iter().map(|cell| cell.hint_waits).sum();
    println!(
        "tail hints: {hint_writes} control blocks moved the hint during the cells above; \
         batches that waited for one: {hint_waits}"
    );
    let busy_markers: u64 = all.iter().map(|cell| cell.tail_markers).sum();
    println!(
        "tail markers: {busy_markers} written during the cells above; a lone writer idle for \
         {} ms after each append: {} markers in {} idle periods, each one {}-byte write + \
         datasync (the 4 KiB write+datasync ceiling: p50 {ceiling_p50:.0} us)",
        2 * markers.idle_us / 1000,
        markers.markers,
        markers.idle_periods,
        markers.marker_bytes
    );
    // The default ring's pool: a buffer per batch in the window, one for control blocks and
    // the read lane, each a batch and a block (see `sealog::drive::buffer_count`).
    let pool_bytes = (u64::from(sealog::storage::WINDOW_BATCHES_DEFAULT)
        + 1
        + sealog::drive::READ_BUFFERS as u64)
        * (u64::from(sealog::storage::BATCH_SIZE_DEFAULT_MAX_BYTES) + 4096);
    println!(
        "peak RSS of sealog's cells and recovery: {} MiB (largest ring {} MiB; one drive's \
         buffer pool {} MiB)",
        sealog_peak_rss_bytes >> 20,
        recovery_ring_bytes >> 20,
        pool_bytes >> 20
    );
    for line in rounds::report_lines(&single_writer_rounds) {
        println!("{line}");
    }
    let mut targets = report::targets(&all, recovery_ratio);
    targets.push(rounds::single_writer_target(&single_writer_rounds));
    targets.extend(report::write_path_targets(&all));
    println!("targets (this run's ratios):");
    for target in &targets {
        println!("{}", report::target_line(target));
    }
    println!(
        "xMB/s: MB/s over the 1 MiB write+datasync ceiling ({ceiling_mb:.1} MB/s); xp50: p50 over \
         the 4 KiB write+datasync p50 ({ceiling_p50:.0} us); xpeer: sealog's appends/s over the \
         peer's in the same workload"
    );
    let full_run_default = |name: &str| (!args.quick).then(|| PathBuf::from(name));
    if let Some(path) = args
        .plot
        .clone()
        .or_else(|| full_run_default("sealog-bench.svg"))
    {
        plot::write_plot(&path, &all)?;
        println!("plot: {}", path.display());
    }
    if let Some(path) = args
        .json
        .clone()
        .or_else(|| full_run_default("sealog-bench.json"))
    {
        let document = json!({
            "machine": machine::describe(args.device.as_deref().unwrap_or(&base)),
            "device": args.device.as_ref().map(|device| device.display().to_string()),
            "ring_block_bytes": ring_block_bytes,
            "durability": args.durability,
            "sync_method": sync_method_json(&ring_sync, durability),
            "spin_before_block_us": args.spin_us,
            "client_spin_us": args.client_spin_us,
            "sqpoll_idle_ms": args.sqpoll_idle_ms,
            "group_gather_us": args.gather_us,
            "batch_max_bytes": args.batch_max_bytes,
            "window_batches": args.window_batches,
            "seconds_per_cell": seconds,
            "fio_found": fio_found,
            "cells": all.iter().map(Cell::to_json).collect::<Vec<_>>(),
            "recovery": {
                "ring_bytes": recovery_ring_bytes,
                "bytes_per_sec": recovery.bytes_per_sec,
                "read_ceiling_bytes_per_sec": read_ceiling,
                "read_depth_1_bytes_per_sec": recovery.read_depth_1_bytes_per_sec,
                "read_depth_4_bytes_per_sec": recovery.read_depth_4_bytes_per_sec,
                "entries": recovery.entries,
                "rounds": cells::RECOVERY_ROUNDS,
                "ratio_to_ceiling": recovery_ratio,
            },
            "tail_markers": markers.to_json(),
            "peak_rss_bytes": sealog_peak_rss_bytes,
            "peak_rss_bytes_with_peers": cells::peak_rss_bytes(),
            "single_writer_rounds": rounds::outcome_json(&single_writer_rounds),
            "targets": targets.iter().map(report::Target::to_json).collect::<Vec<_>>(),
        });
        let text = serde_json::to_string_pretty(&document).map_err(|error| error.to_string())?;
        std::fs::write(&path, text).map_err(|error| format!("{}: {error}", path.display()))?;
        println!("json: {}", path.display());
    }
    Ok(())
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
