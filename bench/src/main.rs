//! `sealog-bench`: sealog against what the device itself can do and against its peers, in one
//! run on one file system, in six sections (`--section` runs some alone). Write: the built-in
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
//! Compose (`compose.rs`): AtomicLogs over one LogDrive, a quorum of three, a stripe of two
//! and a stripe of two quorums, beside LogDrive writes and the raw engine's appends on the
//! same three rings, in interleaved rounds.
//! Open (`opens.rs`): the recovery of the full ring against the sequential read ceiling, and
//! the open time of rings of 256 MiB, 1 GiB and 4 GiB holding the same small live region.
//! Raft (`raft_section.rs`): sealog as openraft's log store against raft-engine's and the
//! in-memory store, through `RaftLogStorage` and as a three-node key-value cluster. Server
//! (`server_section.rs`): the replicated log of `sealog-server` beside the AtomicLog over a
//! local quorum and the raw engine's append. Each
//! figure with its ratio to the ceiling that bounds it, then the issues' targets with this
//! run's figures. A table on the terminal, `--json PATH` with the machine description, `--plot
//! PATH` an SVG of the write cells.
//!
//! This file parses the arguments and runs the sections in turn: `write_section.rs`,
//! `logdrive_section.rs`, `compose_section.rs`, `restart_section.rs` (read and open),
//! `raft_section.rs` and `server_section.rs` each run theirs and print its table, with what
//! they share in `run_context.rs`; this file then judges the targets and writes the plot and
//! the JSON.
//!
//! `cargo run --release -p sealog-bench -- --quick` is the README's main job (about three
//! and a half minutes).

#![forbid(unsafe_code)]

mod ceiling;
mod cell;
mod cells;
mod compose;
mod compose_figures;
mod compose_report;
mod compose_section;
mod inflight;
mod logdrive;
mod logdrive_figures;
mod logdrive_report;
mod logdrive_section;
mod machine;
mod median;
mod opens;
#[cfg(feature = "peers")]
mod peers;
mod plot;
mod progress;
mod raft_cluster;
mod raft_figures;
mod raft_report;
mod raft_section;
mod raft_store;
mod raft_threads;
mod random;
mod read_plan;
mod read_report;
mod read_row;
mod reads;
mod report;
mod restart_section;
mod rounds;
mod run_context;
mod server_report;
mod server_section;
mod tail_reads;
mod target;
mod write_section;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use sealog::Durability;
use serde_json::json;

use crate::cells::RingShape;
use crate::compose_figures::ComposeFigures;
use crate::logdrive_figures::LogDriveFigures;
use crate::progress::progress;
use crate::raft_figures::RaftFigures;
use crate::restart_section::RestartFigures;
use crate::run_context::{RunContext, Section, Sections};
use crate::server_report::ServerFigures;
use crate::target::Target;
use crate::write_section::WriteFigures;

#[derive(Parser)]
#[command(
    name = "sealog-bench",
    version,
    about = "sealog against the device's ceiling"
)]
struct Args {
    /// A subset in under three minutes (the README's main job).
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
    /// engine's), `compose` (AtomicLogs over a LogDrive, a quorum and stripes beside LogDrive
    /// writes), `read` (tail, cold and catch-up reads with their ceilings), `open` (open
    /// times and the full ring's recovery). `--section read --section open` reruns the read
    /// and restart figures alone. `raft` (sealog as openraft's log store, at the store level
    /// and as a three-node cluster, beside raft-engine's with `--features peers`). `server`
    /// (the replicated log of sealog-server over gRPC, TLS on and off, one and two groups).
    #[arg(long = "section", value_enum)]
    sections: Vec<Section>,
    /// Keep the run's rings (its temporary directory, whose path is printed) rather than
    /// remove them: to look at what a run wrote (`sealog logdrive ls` on the LogDrive
    /// section's ring, `sealog inspect` on the others). Directory rings only.
    #[arg(long)]
    keep_rings: bool,
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

/// The run's temporary directory: removed at the end, or kept (`--keep-rings`) with its
/// path printed.
enum Scratch {
    Removed(tempfile::TempDir),
    Kept(PathBuf),
}

impl Scratch {
    fn new(directory: tempfile::TempDir, keep: bool) -> Scratch {
        if keep {
            let path = directory.keep();
            println!("keeping the run's rings in {}", path.display());
            Scratch::Kept(path)
        } else {
            Scratch::Removed(directory)
        }
    }

    fn path(&self) -> &Path {
        match self {
            Scratch::Removed(directory) => directory.path(),
            Scratch::Kept(path) => path,
        }
    }
}

/// The durability mode `--durability` names (`None`: `auto`, the ring's choice).
fn durability_of(name: &str) -> Result<Option<Durability>, String> {
    match name {
        "auto" => Ok(None),
        "fdatasync" => Ok(Some(Durability::Fdatasync)),
        "dsync" => Ok(Some(Durability::Dsync)),
        "nosync" => Ok(Some(Durability::NoSyncBenchmarkOnly)),
        other => Err(format!("unknown durability mode '{other}'")),
    }
}

/// Runs the sections `args` select, prints their tables and the targets, and writes the plot
/// and the JSON.
fn run(args: &Args) -> Result<(), String> {
    let durability = durability_of(&args.durability)?;
    let base = args.dir.clone().unwrap_or_else(|| PathBuf::from("."));
    let scratch =
        tempfile::tempdir_in(&base).map_err(|error| format!("{}: {error}", base.display()))?;
    let scratch = Scratch::new(scratch, args.keep_rings);
    let context = run_context(args, durability, scratch.path())?;
    let sections = Sections::of(&args.sections);
    let figures = measure(&context, sections)?;
    print_sections(&context, &figures);
    let targets = targets(&figures, sections);
    println!("targets (this run's ratios):");
    for target in &targets {
        println!("{}", report::target_line(target));
    }
    println!("{}", load_line(&figures));
    write_outputs(args, &base, &context, sections, &figures, &targets)
}

/// The context the sections share, from the arguments and the run's scratch directory.
fn run_context<'a>(
    args: &'a Args,
    durability: Option<Durability>,
    scratch: &'a Path,
) -> Result<RunContext<'a>, String> {
    let seconds = args.seconds.unwrap_or(if args.quick { 3.0 } else { 10.0 });
    // On a block device every ring is the device itself, each sized to fit it.
    let device_bytes = match &args.device {
        Some(device) => Some(machine::block_device_bytes(device)?),
        None => None,
    };
    let fit = |bytes: u64| device_bytes.map_or(bytes, |device| bytes.min(device));
    Ok(RunContext {
        quick: args.quick,
        device: args.device.as_deref(),
        cells: &args.cells,
        spin_us: args.spin_us,
        durability,
        drive_options: drive_options(args, durability),
        scratch,
        keep_rings: args.keep_rings,
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
    })
}

/// What a run measured: each section's figures (`None`: it did not run), how long the
/// sections took, the machine's load around them, and sealog's own peak memory.
struct RunFigures {
    write: Option<WriteFigures>,
    logdrive: Option<LogDriveFigures>,
    compose: Option<ComposeFigures>,
    restart: Option<RestartFigures>,
    raft: Option<RaftFigures>,
    server: Option<ServerFigures>,
    /// The load average (1, 5, 15 minutes) before the first section and after the last.
    load_at_start: Option<[f64; 3]>,
    load_at_end: Option<[f64; 3]>,
    /// Wall time of the write section (the peers' cells and rounds aside), seconds.
    write_seconds: f64,
    /// Wall time of the LogDrive section, its ring's format included, seconds.
    logdrive_seconds: f64,
    /// Wall time of the composition section, its rings' format included, seconds.
    compose_seconds: f64,
    /// Wall time of the read and open sections together, seconds.
    read_and_open_seconds: f64,
    /// Wall time of the raft section, its stores' and clusters' setup included, seconds.
    raft_seconds: f64,
    /// Wall time of the server section, its servers' setup included, seconds.
    server_seconds: f64,
    /// The process's peak resident memory before the peers ran, bytes.
    sealog_peak_rss_bytes: u64,
}

/// Runs the sections `sections` selects, in order: write, LogDrive, read and open, then the
/// peers (after sealog's peak memory is taken, since they run in this process too).
fn measure(context: &RunContext<'_>, sections: Sections) -> Result<RunFigures, String> {
    let load_at_start = machine::load_average();
    let started = std::time::Instant::now();
    let mut write = if sections.write {
        Some(write_section::write_section(context)?)
    } else {
        None
    };
    let write_seconds = started.elapsed().as_secs_f64();
    let sync_method = write.as_ref().map(|write| write.ring_sync.method());
    let logdrive = if sections.logdrive {
        Some(logdrive_section::logdrive_section(context, write.as_ref())?)
    } else {
        None
    };
    let logdrive_seconds = logdrive.as_ref().map_or(0.0, |figures| figures.seconds);
    let compose = if sections.compose {
        Some(compose_section::compose_section(context, sync_method)?)
    } else {
        None
    };
    let compose_seconds = compose.as_ref().map_or(0.0, |figures| figures.seconds);
    let restart = if sections.read || sections.open {
        let figures = restart_section::read_and_open_sections(context, sections, sync_method)?;
        Some(figures)
    } else {
        None
    };
    let read_and_open_seconds =
        started.elapsed().as_secs_f64() - write_seconds - logdrive_seconds - compose_seconds;
    // sealog's own peak RSS, before the peers (in this process) add theirs.
    let sealog_peak_rss_bytes = cells::peak_rss_bytes();
    if let Some(write) = write.as_mut() {
        write_section::peers_section(context, write)?;
    }
    // Last, after the peers: it runs raft-engine too, and its clusters' memory should not
    // count as sealog's own peak.
    let raft = if sections.raft {
        Some(raft_section::raft_section(context)?)
    } else {
        None
    };
    let raft_seconds = raft.as_ref().map_or(0.0, |figures| figures.seconds);
    let server = if sections.server {
        Some(server_section::server_section(context, sync_method)?)
    } else {
        None
    };
    let server_seconds = server.as_ref().map_or(0.0, |figures| figures.seconds);
    progress("");
    eprintln!();
    Ok(RunFigures {
        write,
        logdrive,
        compose,
        restart,
        raft,
        server,
        load_at_start,
        load_at_end: machine::load_average(),
        write_seconds,
        logdrive_seconds,
        compose_seconds,
        read_and_open_seconds,
        raft_seconds,
        server_seconds,
        sealog_peak_rss_bytes,
    })
}

/// Each section's tables and lines, in the order the sections ran.
fn print_sections(context: &RunContext<'_>, figures: &RunFigures) {
    if let Some(write) = &figures.write {
        write_section::print_write_section(context, write, figures.sealog_peak_rss_bytes);
    }
    if let Some(logdrive) = &figures.logdrive {
        logdrive_section::print_logdrive_section(logdrive);
    }
    if let Some(compose) = &figures.compose {
        compose_section::print_compose_section(compose);
    }
    if let Some(restart) = &figures.restart {
        restart_section::print_read_and_open_sections(context, restart);
    }
    if let Some(raft) = &figures.raft {
        raft_section::print_raft_section(raft);
    }
    if let Some(server) = &figures.server {
        println!();
        server_report::lines(server)
            .iter()
            .for_each(|line| println!("{line}"));
    }
}

/// The targets of the sections that ran, with this run's figures (a target whose figure the
/// run did not measure is "not measured").
fn targets(figures: &RunFigures, sections: Sections) -> Vec<Target> {
    let recovery = figures
        .restart
        .as_ref()
        .and_then(|restart| restart.recovery.as_ref());
    let mut targets = Vec::new();
    if let Some(write) = &figures.write {
        let recovery_ratio = recovery.map_or(0.0, |recovery| {
            recovery.bytes_per_sec / recovery.read_ceiling_bytes_per_sec()
        });
        targets.extend(report::targets(&write.all, recovery_ratio));
        targets.push(rounds::single_writer_target(&write.rounds));
        targets.extend(report::write_path_targets(&write.all));
    } else if let Some(recovery) = recovery {
        targets.push(report::recovery_target(
            recovery.bytes_per_sec / recovery.read_ceiling_bytes_per_sec(),
        ));
    }
    if sections.logdrive {
        targets.extend(logdrive_report::targets(figures.logdrive.as_ref()));
    }
    if sections.compose {
        targets.extend(compose_report::targets(figures.compose.as_ref()));
    }
    if let Some(restart) = &figures.restart {
        if sections.read {
            targets.extend(read_report::targets(&restart.read_rows));
        }
        if sections.open {
            targets.extend(opens::targets(&restart.open_times));
        }
    }
    if sections.raft {
        targets.extend(raft_report::targets(figures.raft.as_ref()));
    }
    targets
}

/// The line with the machine's load around the run and how long each part took.
fn load_line(figures: &RunFigures) -> String {
    let load = |load: Option<[f64; 3]>| {
        load.map_or_else(
            || "unknown".to_string(),
            |[one, five, fifteen]| format!("{one:.2} {five:.2} {fifteen:.2}"),
        )
    };
    format!(
        "load average (1, 5, 15 min) at the start: {}; at the end: {}; the write section took \
         {:.0} s, the logdrive section {:.0} s, the compose section {:.0} s, the read and open \
         sections {:.0} s, the raft section {:.0} s, the server section {:.0} s",
        load(figures.load_at_start),
        load(figures.load_at_end),
        figures.write_seconds,
        figures.logdrive_seconds,
        figures.compose_seconds,
        figures.read_and_open_seconds,
        figures.raft_seconds,
        figures.server_seconds
    )
}

/// Writes the plot of the write cells and the JSON document where the arguments ask (the full
/// run writes both by default).
fn write_outputs(
    args: &Args,
    base: &Path,
    context: &RunContext<'_>,
    sections: Sections,
    figures: &RunFigures,
    targets: &[Target],
) -> Result<(), String> {
    let full_run_default = |name: &str| (!args.quick).then(|| PathBuf::from(name));
    if let Some(path) = args
        .plot
        .clone()
        .or_else(|| full_run_default("sealog-bench.svg"))
    {
        let cells = figures
            .write
            .as_ref()
            .map_or(&[][..], |write| &write.all[..]);
        plot::write_plot(&path, cells)?;
        println!("plot: {}", path.display());
    }
    if let Some(path) = args
        .json
        .clone()
        .or_else(|| full_run_default("sealog-bench.json"))
    {
        let document = json_document(args, base, context, sections, figures, targets);
        let text = serde_json::to_string_pretty(&document).map_err(|error| error.to_string())?;
        std::fs::write(&path, text).map_err(|error| format!("{}: {error}", path.display()))?;
        println!("json: {}", path.display());
    }
    Ok(())
}

/// The JSON document: the machine, the run's settings, the targets and every section's
/// figures.
fn json_document(
    args: &Args,
    base: &Path,
    context: &RunContext<'_>,
    sections: Sections,
    figures: &RunFigures,
    targets: &[Target],
) -> serde_json::Value {
    let base_machine = args.device.as_deref().unwrap_or(base);
    let mut document = json!({
        "machine": machine::describe(base_machine),
        "device": args.device.as_ref().map(|device| device.display().to_string()),
        "sections": sections.names(),
        "load_average_start": figures.load_at_start,
        "load_average_end": figures.load_at_end,
        "section_seconds": {
            "write": figures.write_seconds,
            "logdrive": figures.logdrive_seconds,
            "compose": figures.compose_seconds,
            "read_and_open": figures.read_and_open_seconds,
            "raft": figures.raft_seconds,
            "server": figures.server_seconds,
        },
        "durability": args.durability,
        "spin_before_block_us": args.spin_us,
        "client_spin_us": args.client_spin_us,
        "sqpoll_idle_ms": args.sqpoll_idle_ms,
        "group_gather_us": args.gather_us,
        "batch_max_bytes": args.batch_max_bytes,
        "window_batches": args.window_batches,
        "seconds_per_cell": context.seconds,
        "cells": [],
        "peak_rss_bytes": figures.sealog_peak_rss_bytes,
        "peak_rss_bytes_with_peers": cells::peak_rss_bytes(),
        "targets": targets.iter().map(Target::to_json).collect::<Vec<_>>(),
    });
    if let Some(write) = &figures.write {
        write_section::write_json(&mut document, write, context.durability);
    }
    if let Some(logdrive) = &figures.logdrive {
        document["logdrive"] = logdrive_report::to_json(logdrive);
    }
    if let Some(compose) = &figures.compose {
        document["compose"] = compose_report::to_json(compose);
    }
    if let Some(restart) = &figures.restart {
        restart_section::read_and_open_json(&mut document, restart);
    }
    if let Some(raft) = &figures.raft {
        document["raft"] = raft_report::to_json(raft);
    }
    if let Some(server) = &figures.server {
        document["server"] = server_report::to_json(server);
    }
    document
}
