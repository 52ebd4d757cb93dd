//! `sealog-bench`: sealog against what the device itself can do and against its peers, in one
//! run on one file system, in four sections (`--section` runs some alone). Write: the built-in
//! io_uring write+datasync ceilings (4 KiB and 1 MiB, queue depth 1), fio's when it is
//! installed, the raw paths a lone append could take (write + linked fdatasync, RWF_DSYNC, at
//! queue depth 1) and the raw write bandwidth (no sync), the sync method the run's ring chose
//! when it was formatted, sealog's cells (payload sizes x writers x appends in flight), and with
//! `--features peers` raft-engine's and okaywal's cells and the single writer against them in
//! interleaved rounds (`rounds.rs`). LogDrive (`logdrive.rs`): LogDrive writes, reads and
//! weak_tail beside the raw engine's appends and reads, in interleaved rounds. Read
//! (`reads.rs`): tail reads from the recent-entry cache beside a writer, cold random point
//! reads and a catch-up iterator over a full 1 GiB ring, against the built-in random and
//! sequential O_DIRECT read ceilings and fio's random reads.
//! Open (`opens.rs`): the recovery of the full ring against the sequential read ceiling, and
//! the open time of rings of 256 MiB, 1 GiB and 4 GiB holding the same small live region. Each
//! figure with its ratio to the ceiling that bounds it, then the issues' targets with this
//! run's figures. A table on the terminal, `--json PATH` with the machine description, `--plot
//! PATH` an SVG of the write cells.
//!
//! `cargo run --release -p sealog-bench -- --quick` is the README's main job (about two
//! minutes).

#![forbid(unsafe_code)]

mod ceiling;
mod cells;
mod logdrive;
mod logdrive_report;
mod machine;
mod opens;
#[cfg(feature = "peers")]
mod peers;
mod plot;
mod random;
mod read_report;
mod reads;
mod report;
mod rounds;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use sealog::Durability;
use serde_json::json;

use crate::ceiling::RawPaths;
use crate::cells::{recovery_cell, sealog_cell, RingShape, Workload};
use crate::read_report::ReadRow;
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
    /// Run only these sections (repeatable; default all): `write` (ceilings, append cells,
    /// tail markers, peers), `logdrive` (LogDrive writes, reads and weak_tail beside the raw
    /// engine's), `read` (tail, cold and catch-up reads with their ceilings), `open` (open
    /// times and the full ring's recovery). `--section read --section open` reruns the read
    /// and restart figures alone.
    #[arg(long = "section", value_enum)]
    sections: Vec<Section>,
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
    // On a block device every ring is the device itself, each sized to fit it.
    let device_bytes = match &args.device {
        Some(device) => Some(machine::block_device_bytes(device)?),
        None => None,
    };
    let fit = |bytes: u64| device_bytes.map_or(bytes, |device| bytes.min(device));
    let context = RunContext {
        args,
        durability,
        scratch: scratch.path(),
        seconds,
        duration: Duration::from_secs_f64(seconds),
        warmup: Duration::from_secs_f64(seconds / 5.0),
        device_bytes,
        shape: RingShape {
            size_bytes: fit(if args.quick { 512 << 20 } else { 1 << 30 }),
            batch_size_max_bytes: args.batch_max_bytes,
            window_batches_max: args.window_batches,
            sync_method: None,
        },
        // The recovery target is stated for a full 1 GiB ring: the quick run measures that too.
        full_ring_bytes: fit(1 << 30),
    };
    let sections = Sections::of(&args.sections);
    let load_at_start = machine::load_average();
    let started = std::time::Instant::now();
    let mut write = if sections.write {
        Some(write_section(&context)?)
    } else {
        None
    };
    let write_seconds = started.elapsed().as_secs_f64();
    let sync_method = write.as_ref().map(|write| write.ring_sync.method());
    let logdrive = if sections.logdrive {
        Some(logdrive_section(&context, write.as_ref())?)
    } else {
        None
    };
    let logdrive_seconds = logdrive.as_ref().map_or(0.0, |figures| figures.seconds);
    let restart = if sections.read || sections.open {
        Some(read_and_open_sections(&context, sections, sync_method)?)
    } else {
        None
    };
    let read_and_open_seconds = started.elapsed().as_secs_f64() - write_seconds - logdrive_seconds;
    // sealog's own peak RSS, before the peers (in this process) add theirs.
    let sealog_peak_rss_bytes = cells::peak_rss_bytes();
    if let Some(write) = write.as_mut() {
        peers_section(&context, write)?;
    }
    progress("");
    eprintln!();
    let load_at_end = machine::load_average();

    let mut targets = Vec::new();
    if let Some(write) = &write {
        print_write_section(&context, write, sealog_peak_rss_bytes);
    }
    if let Some(figures) = &logdrive {
        println!();
        for line in logdrive_report::lines(figures) {
            println!("{line}");
        }
    }
    if let Some(restart) = &restart {
        print_read_and_open_sections(&context, restart);
    }
    if let Some(write) = &write {
        let recovery_ratio = restart
            .as_ref()
            .and_then(|restart| restart.recovery.as_ref())
            .map_or(0.0, |recovery| {
                recovery.bytes_per_sec / recovery.read_ceiling_bytes_per_sec()
            });
        targets.extend(report::targets(&write.all, recovery_ratio));
        targets.push(rounds::single_writer_target(&write.rounds));
        targets.extend(report::write_path_targets(&write.all));
    } else if let Some(recovery) = restart
        .as_ref()
        .and_then(|restart| restart.recovery.as_ref())
    {
        targets.push(report::recovery_target(
            recovery.bytes_per_sec / recovery.read_ceiling_bytes_per_sec(),
        ));
    }
    if sections.logdrive {
        targets.extend(logdrive_report::targets(logdrive.as_ref()));
    }
    if let Some(restart) = &restart {
        if sections.read {
            targets.extend(read_report::targets(&restart.read_rows));
        }
        if sections.open {
            targets.extend(opens::targets(&restart.open_times));
        }
    }
    println!("targets (this run's ratios):");
    for target in &targets {
        println!("{}", report::target_line(target));
    }
    let load = |load: Option<[f64; 3]>| {
        load.map_or_else(
            || "unknown".to_string(),
            |[one, five, fifteen]| format!("{one:.2} {five:.2} {fifteen:.2}"),
        )
    };
    println!(
        "load average (1, 5, 15 min) at the start: {}; at the end: {}; the write section took \
         {write_seconds:.0} s, the logdrive section {logdrive_seconds:.0} s, the read and open \
         sections {read_and_open_seconds:.0} s",
        load(load_at_start),
        load(load_at_end)
    );
    let full_run_default = |name: &str| (!args.quick).then(|| PathBuf::from(name));
    if let Some(path) = args
        .plot
        .clone()
        .or_else(|| full_run_default("sealog-bench.svg"))
    {
        let cells = write.as_ref().map_or(&[][..], |write| &write.all[..]);
        plot::write_plot(&path, cells)?;
        println!("plot: {}", path.display());
    }
    if let Some(path) = args
        .json
        .clone()
        .or_else(|| full_run_default("sealog-bench.json"))
    {
        let base_machine = args.device.as_deref().unwrap_or(&base);
        let mut document = json!({
            "machine": machine::describe(base_machine),
            "device": args.device.as_ref().map(|device| device.display().to_string()),
            "sections": sections.names(),
            "load_average_start": load_at_start,
            "load_average_end": load_at_end,
            "section_seconds": {
                "write": write_seconds,
                "logdrive": logdrive_seconds,
                "read_and_open": read_and_open_seconds,
            },
            "durability": args.durability,
            "spin_before_block_us": args.spin_us,
            "client_spin_us": args.client_spin_us,
            "sqpoll_idle_ms": args.sqpoll_idle_ms,
            "group_gather_us": args.gather_us,
            "batch_max_bytes": args.batch_max_bytes,
            "window_batches": args.window_batches,
            "seconds_per_cell": seconds,
            "cells": [],
            "peak_rss_bytes": sealog_peak_rss_bytes,
            "peak_rss_bytes_with_peers": cells::peak_rss_bytes(),
            "targets": targets.iter().map(report::Target::to_json).collect::<Vec<_>>(),
        });
        if let Some(write) = &write {
            write_json(&mut document, write, durability);
        }
        if let Some(figures) = &logdrive {
            document["logdrive"] = logdrive_report::to_json(figures);
        }
        if let Some(restart) = &restart {
            read_and_open_json(&mut document, restart);
        }
        let text = serde_json::to_string_pretty(&document).map_err(|error| error.to_string())?;
        std::fs::write(&path, text).map_err(|error| format!("{}: {error}", path.display()))?;
        println!("json: {}", path.display());
    }
    Ok(())
}

/// What every section of a run shares: the arguments, durations and ring shapes.
struct RunContext<'a> {
    args: &'a Args,
    durability: Option<Durability>,
    /// The run's scratch directory (removed at the end).
    scratch: &'a Path,
    /// Seconds measured per cell.
    seconds: f64,
    duration: Duration,
    warmup: Duration,
    /// The block device's size, with `--device`.
    device_bytes: Option<u64>,
    /// The sealog cells' rings (the sync method is the ceiling ring's choice).
    shape: RingShape,
    /// The full ring's size (recovery, cold reads, catch-up).
    full_ring_bytes: u64,
}

impl RunContext<'_> {
    /// Where a ring named `name` goes: the device, or a directory in the scratch directory.
    fn ring_path(&self, name: &str) -> PathBuf {
        self.args
            .device
            .clone()
            .unwrap_or_else(|| self.scratch.join(name))
    }

    /// Removes a directory ring when done with it (never a device).
    fn remove_ring(&self, ring: &Path) {
        if self.args.device.is_none() {
            let _ = std::fs::remove_dir_all(ring);
        }
    }
}

/// The parts of a run `--section` selects (all of them when it is not given).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Section {
    /// The write ceilings, sealog's append cells, tail markers, and (with `--features peers`)
    /// the peers' cells and the single-writer rounds.
    Write,
    /// LogDrive writes (one writer, one in flight; 8 writers x 32 in flight on one LogDrive
    /// and over 1,000), reads (cached and cold) and weak_tail (K = 64 and 4,096), beside the
    /// raw engine's appends and reads in interleaved rounds.
    Logdrive,
    /// Tail reads beside a writer, cold point reads and the catch-up iterator, with their
    /// ceilings (built-in and fio's).
    Read,
    /// Open times of rings of 256 MiB, 1 GiB and 4 GiB holding a small live region, and of a
    /// full 1 GiB ring (the recovery figure).
    Open,
}

/// Which sections run.
#[derive(Clone, Copy, Debug)]
struct Sections {
    write: bool,
    logdrive: bool,
    read: bool,
    open: bool,
}

impl Sections {
    /// The sections named, or all when none is.
    fn of(named: &[Section]) -> Sections {
        let all = named.is_empty();
        Sections {
            write: all || named.contains(&Section::Write),
            logdrive: all || named.contains(&Section::Logdrive),
            read: all || named.contains(&Section::Read),
            open: all || named.contains(&Section::Open),
        }
    }

    /// Their names, for the JSON.
    fn names(self) -> Vec<&'static str> {
        [
            (self.write, "write"),
            (self.logdrive, "logdrive"),
            (self.read, "read"),
            (self.open, "open"),
        ]
        .into_iter()
        .filter_map(|(on, name)| on.then_some(name))
        .collect()
    }
}

/// What the write section measured.
struct WriteFigures {
    /// Every cell, ceilings first (the peers' appended by [`peers_section`]).
    all: Vec<Cell>,
    /// The sealog cells' workloads (the peers and the rounds run the same; read only with
    /// the peers built in).
    #[cfg_attr(not(feature = "peers"), allow(dead_code))]
    workloads: Vec<Workload>,
    ring_block_bytes: u32,
    /// The sync method the ceiling ring's format chose: the run's.
    ring_sync: sealog::SyncChoice,
    fio_found: bool,
    ceiling_mb: f64,
    ceiling_p50: f64,
    /// The 4 KiB write+datasync ceiling's p99 (the peers' and the LogDrive cells' ratios).
    ceiling_p99: f64,
    markers: cells::TailMarkerCost,
    rounds: rounds::Outcome,
}

/// The write section: the ceilings (on a scratch ring of their own, whose format measures the
/// sync methods: the run's choice), sealog's cells and the tail markers' cost.
fn write_section(context: &RunContext<'_>) -> Result<WriteFigures, String> {
    let args = context.args;
    let (duration, seconds) = (context.duration, context.seconds);
    let fit = |bytes: u64| {
        context
            .device_bytes
            .map_or(bytes, |device| bytes.min(device))
    };
    let mut shape = context.shape;
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
    let ring_block_bytes = ceiling_control.geometry.block_size_bytes;
    let ring_sync = ceiling_control.sync;
    shape.sync_method = Some(ring_sync.method());
    progress("ceiling: raw paths at queue depth 1");
    // Half a cell's time for the two raw paths together and half for the bandwidth: enough
    // samples for a p99, and the quick run stays near a minute.
    let raw_paths = ceiling::builtin_raw_paths(&ceiling_ring, duration / 2, args.spin_us)?;
    progress("ceiling: raw write bandwidth");
    let mut raw_write = ceiling::builtin_write_bandwidth(
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
    context.remove_ring(&ceiling_ring);
    let fio_seconds = seconds.ceil() as u64;
    progress("ceiling: fio");
    let fio_target = match &args.device {
        Some(device) => ceiling::FioTarget::Device(device),
        None => ceiling::FioTarget::Directory(context.scratch),
    };
    let fio_4k = ceiling::fio_write_sync(fio_target, 4096, fio_seconds);
    let fio_1m = ceiling::fio_write_sync(fio_target, 1 << 20, fio_seconds);
    let fio_found = fio_4k.is_some();
    let ceiling_mb = ceiling_1m.mb_per_sec;
    let (ceiling_p50, ceiling_p99) = (ceiling_4k.p50_us, ceiling_4k.p99_us);

    let workloads = sealog_workloads(context);
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
            drive_options(args, context.durability),
        )?);
    }
    progress("tail markers: a writer idle between appends");
    let marker_options = sealog::DriveOptions {
        durability: context.durability,
        ..sealog::DriveOptions::default()
    };
    let markers = cells::tail_marker_cost(&ring, shape, marker_options, TAIL_MARKER_PERIODS)?;
    context.remove_ring(&ring);

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
        cell.set_ratios(ceiling_mb, ceiling_p50, ceiling_p99);
    }
    let mut all: Vec<Cell> = vec![ceiling_4k, ceiling_1m, raw_fdatasync, raw_dsync, raw_write];
    for fio in [fio_4k, fio_1m].into_iter().flatten() {
        match fio {
            Ok(mut cell) => {
                cell.set_ratios(ceiling_mb, ceiling_p50, ceiling_p99);
                all.push(cell);
            }
            Err(error) => eprintln!("fio: {error}"),
        }
    }
    all.extend(sealog_cells);
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

/// The sealog cells this run measures: `--cell`'s, the quick set, or the full grid.
fn sealog_workloads(context: &RunContext<'_>) -> Vec<Workload> {
    let args = context.args;
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

/// The LogDrive section on a ring of the cells' shape (recording the sync method the write
/// section's ring chose, when it ran), its write cells' ratios to the write section's ceilings
/// (0 when it did not run). Write runs are a fifth of a cell (the quick run's 0.6 s: some
/// 3,000 writes at one in flight, 60,000 at 256), so that the 25 runs of its rounds stay near
/// the half a minute the section may add to the quick run.
fn logdrive_section(
    context: &RunContext<'_>,
    write: Option<&WriteFigures>,
) -> Result<logdrive_report::LogDriveFigures, String> {
    let ring = context.ring_path("logdrive");
    let run = context.duration / 5;
    let plan = logdrive::Plan {
        ring: &ring,
        shape: RingShape {
            sync_method: write.map(|write| write.ring_sync.method()),
            ..context.shape
        },
        options: drive_options(context.args, context.durability),
        run,
        warmup: run / 5,
        read_window: run / 4,
    };
    let mut figures = logdrive::logdrive_section(&plan)?;
    context.remove_ring(&ring);
    if let Some(write) = write {
        for comparison in &mut figures.writes {
            comparison.set_ratios(write.ceiling_mb, write.ceiling_p50, write.ceiling_p99);
        }
    }
    Ok(figures)
}

/// With `--features peers`: raft-engine's and okaywal's cells and the single-writer rounds,
/// added to the write section's figures (without the feature, nothing).
fn peers_section(context: &RunContext<'_>, write: &mut WriteFigures) -> Result<(), String> {
    #[cfg(not(feature = "peers"))]
    let _ = context;
    #[cfg(feature = "peers")]
    {
        let args = context.args;
        // The peers' APIs block, so their fair cells are the one-in-flight ones (the quick run
        // keeps the 4 KiB ones).
        let peer_workloads: Vec<Workload> = write
            .workloads
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
                let mut cell = peers::peer_cell(peer, context.scratch, workload)?;
                cell.set_ratios(write.ceiling_mb, write.ceiling_p50, write.ceiling_p99);
                write.all.push(cell);
            }
        }
        // Issue 10 judges the single writer against the peers in interleaved rounds.
        let options = drive_options(args, context.durability);
        let ring = context.ring_path("ring");
        let shape = RingShape {
            sync_method: Some(write.ring_sync.method()),
            ..context.shape
        };
        write.rounds = rounds::measure(&ring, shape, &options, context.scratch, &write.workloads)?;
        // sealog's runs formatted the ring anew.
        context.remove_ring(&ring);
    }
    report::set_peer_ratios(&mut write.all);
    Ok(())
}

/// The write section's table and lines.
fn print_write_section(context: &RunContext<'_>, write: &WriteFigures, sealog_peak_rss_bytes: u64) {
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
fn write_json(
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

/// What the read and open sections measured.
struct RestartFigures {
    /// The full ring's recovery rounds (the open section).
    recovery: Option<cells::Recovery>,
    /// The read section's rows (tail, cold, catch-up).
    read_rows: Vec<ReadRow>,
    /// Peak resident memory of the process during the tail section, bytes (0: not measured).
    tail_peak_rss_bytes: u64,
    /// The read statistics of the drive on the full ring (its read index) and of the tail
    /// section's drive (its cache), when the read section ran.
    full_ring_read_stats: Option<sealog::ReadStats>,
    tail_read_stats: Option<sealog::ReadStats>,
    /// fio's random reads at 1 and 16 in flight, when fio is installed.
    fio_rows: Vec<ReadRow>,
    /// The open section's rows (the three ring sizes).
    open_times: Vec<opens::OpenTime>,
    /// The sync method the read and open rings recorded.
    sync_method: sealog::SyncMethod,
}

/// The read and open sections. They share one full 1 GiB ring of 4 KiB records: the open
/// section times its recovery against the sequential read ceiling, the read section reads it
/// cold and iterates over it; then the read section's tail reads (on a ring of the cells'
/// size) and the open section's rings of three sizes. Their rings record `sync_method` (the
/// write section's choice), or, run alone, what the full ring's format chose.
fn read_and_open_sections(
    context: &RunContext<'_>,
    sections: Sections,
    sync_method: Option<sealog::SyncMethod>,
) -> Result<RestartFigures, String> {
    let args = context.args;
    let disk = machine::disk_of(args.device.as_deref().unwrap_or(context.scratch));
    let full_ring = context.ring_path("full");
    progress("full ring: format and fill with 4 KiB records");
    let (control, appended) = cells::fill_ring(
        &full_ring,
        RingShape {
            size_bytes: context.full_ring_bytes,
            sync_method,
            ..context.shape
        },
    )?;
    let ring_sync_method = sync_method.unwrap_or_else(|| control.sync.method());
    let shape = RingShape {
        sync_method: Some(ring_sync_method),
        ..context.shape
    };
    let recovery = if sections.open {
        progress("recovery: reopening the full ring, in rounds with the read ceiling");
        Some(recovery_cell(&full_ring, appended, disk.as_deref())?)
    } else {
        None
    };
    let times = reads::ReadTimes {
        window: context.duration / 2,
        warmup: context.warmup / 2,
    };
    let options = drive_options(args, context.durability);
    let mut read_rows = Vec::new();
    let mut fio_rows = Vec::new();
    let mut tail_peak_rss_bytes = 0;
    let mut full_ring_read_stats = None;
    let mut tail_read_stats = None;
    if sections.read {
        let (rows, stats) = reads::cold_and_catch_up(&full_ring, options.clone(), times)?;
        read_rows.extend(rows);
        full_ring_read_stats = Some(stats);
        let fio_target = ceiling::FioReadTarget::of_ring(&full_ring, context.full_ring_bytes)?;
        for depth in [1, reads::COLD_DEPTH] {
            progress(&format!("cold reads: fio randread, {depth} in flight"));
            let fio_seconds = times.window.as_secs_f64().ceil() as u64;
            match ceiling::fio_random_read(&fio_target, reads::COLD_READ_BYTES, depth, fio_seconds)
            {
                Some(Ok(mut row)) => {
                    row.section = read_report::SECTION_COLD;
                    fio_rows.push(row);
                }
                Some(Err(error)) => eprintln!("\nfio: {error}"),
                None => {}
            }
        }
    }
    context.remove_ring(&full_ring);
    if sections.read {
        let ring = context.ring_path("tail");
        let rss_reset = cells::reset_peak_rss();
        let (rows, stats) = reads::tail_reads(&ring, shape, options, times)?;
        read_rows.extend(rows);
        tail_read_stats = Some(stats);
        if rss_reset {
            tail_peak_rss_bytes = cells::peak_rss_since_reset_bytes().unwrap_or(0);
        }
        context.remove_ring(&ring);
    }
    let open_times = if sections.open {
        let place = match (&args.device, context.device_bytes) {
            (Some(device), Some(bytes)) => opens::RingPlace::Device(device, bytes),
            _ => opens::RingPlace::Directory(context.scratch),
        };
        opens::open_times(&opens::OpenPlan {
            place,
            shape,
            repetitions: if args.quick { 3 } else { 5 },
            budget: Duration::from_secs(if args.quick { 1 } else { 10 }),
            disk,
        })?
    } else {
        Vec::new()
    };
    Ok(RestartFigures {
        recovery,
        read_rows,
        tail_peak_rss_bytes,
        full_ring_read_stats,
        tail_read_stats,
        fio_rows,
        open_times,
        sync_method: ring_sync_method,
    })
}

/// The read and open sections' tables and lines.
fn print_read_and_open_sections(context: &RunContext<'_>, restart: &RestartFigures) {
    println!();
    println!(
        "read and open rings' sync method: {}",
        restart.sync_method.name()
    );
    if !restart.read_rows.is_empty() {
        println!("{}", read_report::header());
        for row in restart.read_rows.iter().chain(&restart.fio_rows) {
            println!("{}", read_report::row(row));
        }
        println!(
            "xceil: ops/s over the row named in 'against' (the catch-up iterator: MB/s); xp50: \
             p50 over its p50. Cold reads: random live LSNs of a full {} MiB ring of 4 KiB \
             records ({}-byte payloads), so a record-grained read is one 4 KiB read, the \
             ceiling's; fio beside, not judged",
            context.full_ring_bytes >> 20,
            reads::COLD_PAYLOAD_BYTES
        );
        for line in memory_lines(restart) {
            println!("{line}");
        }
    }
    if let Some(recovery) = &restart.recovery {
        let read_ceiling = recovery.read_ceiling_bytes_per_sec();
        println!(
            "recovery of a full {} MiB ring ({} entries): {:.0} MB/s, {:.2}x the sequential \
             O_DIRECT read ceiling (the same ring read {} KiB at a time, the better of 1 and 4 \
             reads in flight: {:.0} MB/s; medians of {} rounds)",
            recovery.ring_bytes >> 20,
            recovery.entries,
            recovery.bytes_per_sec / 1e6,
            recovery.bytes_per_sec / read_ceiling,
            ceiling::RECOVERY_READ_BYTES >> 10,
            read_ceiling / 1e6,
            cells::RECOVERY_ROUNDS
        );
    }
    if !restart.open_times.is_empty() || restart.recovery.is_some() {
        println!("{}", opens::header());
        for time in restart
            .open_times
            .iter()
            .chain(full_ring_open(restart).as_ref())
        {
            println!("{}", opens::row(time));
        }
        println!(
            "open: wall time of Drive::open (median of reps); disk MiB rd and flushes: the \
             disk's counters during an open (the whole disk: other processes' I/O counts too); \
             the last row is the full ring of the recovery line"
        );
    }
}

/// What the read structures hold, from the drives' read statistics: the tail drive's cache
/// bound and read buffers against its configuration, and the full ring's read index per entry.
fn memory_lines(restart: &RestartFigures) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(tail) = &restart.tail_read_stats {
        lines.push(format!(
            "memory: the tail drive's read cache bounded at {} MiB (configured {} MiB), {} read \
             buffers of {} KiB ({} MiB); peak RSS of the tail section {} MiB",
            tail.cache_capacity_bytes >> 20,
            reads::TAIL_READ_CACHE_BYTES >> 20,
            tail.read_buffers,
            tail.read_buffer_bytes >> 10,
            (tail.read_buffers * tail.read_buffer_bytes) >> 20,
            restart.tail_peak_rss_bytes >> 20
        ));
    }
    if let Some(full) = &restart.full_ring_read_stats {
        lines.push(format!(
            "memory: the full ring's read index: {} live entries in {:.1} MiB, {:.1} bytes per \
             live entry",
            full.index_entries,
            full.index_memory_bytes as f64 / (1u64 << 20) as f64,
            full.index_bytes_per_entry
        ));
    }
    lines
}

/// The read statistics' memory figures for the JSON.
fn read_memory_json(stats: Option<&sealog::ReadStats>) -> serde_json::Value {
    stats.map_or(serde_json::Value::Null, |stats| {
        json!({
            "cache_capacity_bytes": stats.cache_capacity_bytes,
            "read_buffers": stats.read_buffers,
            "read_buffer_bytes": stats.read_buffer_bytes,
            "index_entries": stats.index_entries,
            "index_memory_bytes": stats.index_memory_bytes,
            "index_bytes_per_entry": stats.index_bytes_per_entry,
            "cache_hits": stats.cache_hits,
            "device_reads": stats.device_reads,
            "device_read_bytes": stats.device_read_bytes,
            "damaged": stats.damaged,
        })
    })
}

/// The full ring's recovery as a row of the open table (no format time: it was filled, not
/// only formatted).
fn full_ring_open(restart: &RestartFigures) -> Option<opens::OpenTime> {
    let recovery = restart.recovery.as_ref()?;
    Some(opens::OpenTime {
        ring_bytes: recovery.ring_bytes,
        segments: recovery.segments,
        live_entries: recovery.entries,
        open_ms: recovery.open_ms,
        open_ms_min: recovery.open_ms,
        open_ms_max: recovery.open_ms,
        repetitions: cells::RECOVERY_ROUNDS,
        device_read_bytes: recovery.device_read_bytes,
        device_flushes: recovery.device_flushes,
        format_seconds: 0.0,
        note: "the full ring of the recovery rounds".to_string(),
    })
}

/// The read and open sections' fields of the JSON document.
fn read_and_open_json(document: &mut serde_json::Value, restart: &RestartFigures) {
    if let Some(recovery) = &restart.recovery {
        let read_ceiling = recovery.read_ceiling_bytes_per_sec();
        document["recovery"] = json!({
            "ring_bytes": recovery.ring_bytes,
            "bytes_per_sec": recovery.bytes_per_sec,
            "read_ceiling_bytes_per_sec": read_ceiling,
            "read_depth_1_bytes_per_sec": recovery.read_depth_1_bytes_per_sec,
            "read_depth_4_bytes_per_sec": recovery.read_depth_4_bytes_per_sec,
            "entries": recovery.entries,
            "rounds": cells::RECOVERY_ROUNDS,
            "ratio_to_ceiling": recovery.bytes_per_sec / read_ceiling,
            "open_ms": recovery.open_ms,
            "device_read_bytes": recovery.device_read_bytes,
            "device_flushes": recovery.device_flushes,
        });
    }
    document["reads"] = json!({
        "rows": restart
            .read_rows
            .iter()
            .chain(&restart.fio_rows)
            .map(ReadRow::to_json)
            .collect::<Vec<_>>(),
        "cold_payload_bytes": reads::COLD_PAYLOAD_BYTES,
        "cold_read_bytes": reads::COLD_READ_BYTES,
        "tail_payload_bytes": reads::TAIL_PAYLOAD_BYTES,
        "tail_writer_in_flight": reads::TAIL_WRITER_IN_FLIGHT,
        "tail_read_cache_bytes": reads::TAIL_READ_CACHE_BYTES,
        "tail_peak_rss_bytes": restart.tail_peak_rss_bytes,
        "read_index_bytes_per_entry": restart
            .full_ring_read_stats
            .as_ref()
            .map(|stats| stats.index_bytes_per_entry),
        "full_ring_read_stats": read_memory_json(restart.full_ring_read_stats.as_ref()),
        "tail_read_stats": read_memory_json(restart.tail_read_stats.as_ref()),
    });
    document["open_times"] = json!(restart
        .open_times
        .iter()
        .map(opens::OpenTime::to_json)
        .collect::<Vec<_>>());
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
