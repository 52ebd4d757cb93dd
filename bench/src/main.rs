//! `sealog-bench`: sealog against what the device itself can do, in one run on one file
//! system: the built-in io_uring write+datasync ceilings (4 KiB and 1 MiB, queue depth 1) and a
//! sequential O_DIRECT read, fio's when it is installed, then sealog's cells (payload sizes x
//! writers x appends in flight) and the recovery of a full ring, each with its ratio to the
//! ceiling that bounds it. A table on the terminal, `--json PATH` for scripts.
//!
//! `cargo run --release -p sealog-bench -- --quick` is the README's main job (about a minute).

#![forbid(unsafe_code)]

mod ceiling;
mod cells;
mod report;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use sealog::Durability;
use serde_json::json;

use crate::cells::{recovery_cell, sealog_cell, Workload};
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
    /// Write every figure as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Directory on the file system to measure (a temporary directory inside it is used and
    /// removed afterwards); default: the current directory.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Seconds measured per cell (after a warm-up of a fifth of it).
    #[arg(long)]
    seconds: Option<f64>,
    /// Durability mode of the sealog cells.
    #[arg(long, default_value = "fdatasync")]
    durability: String,
    /// How long the drive thread spins for completions before it blocks (microseconds).
    #[arg(long, default_value_t = sealog::drive::SPIN_BEFORE_BLOCK_US_DEFAULT)]
    spin_us: u64,
}

fn progress(line: &str) {
    eprint!("\r\x1b[2K{line}");
    let _ = std::io::stderr().flush();
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

fn machine() -> serde_json::Value {
    let read = |path: &str| {
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .trim()
            .to_string()
    };
    json!({
        "kernel": read("/proc/sys/kernel/osrelease"),
        "cpus": std::thread::available_parallelism().map_or(0, |count| count.get()),
    })
}

fn run(args: &Args) -> Result<(), String> {
    let durability = match args.durability.as_str() {
        "fdatasync" => Durability::Fdatasync,
        "dsync" => Durability::Dsync,
        "nosync" => Durability::NoSyncBenchmarkOnly,
        other => return Err(format!("unknown durability mode '{other}'")),
    };
    let base = args.dir.clone().unwrap_or_else(|| PathBuf::from("."));
    let scratch =
        tempfile::tempdir_in(&base).map_err(|error| format!("{}: {error}", base.display()))?;
    let seconds = args.seconds.unwrap_or(if args.quick { 3.0 } else { 10.0 });
    let duration = Duration::from_secs_f64(seconds);
    let warmup = Duration::from_secs_f64(seconds / 5.0);
    let ring_bytes: u64 = if args.quick { 512 << 20 } else { 1 << 30 };

    // Ceilings first, on a scratch ring of their own (the raw writes overwrite its data).
    let ceiling_ring = scratch.path().join("ceiling");
    cells::fresh_ring(&ceiling_ring, 256 << 20)?;
    progress("ceiling: built-in 4 KiB write+datasync");
    let mut ceiling_4k = ceiling::builtin_write_sync(&ceiling_ring, 4096, duration)?;
    progress("ceiling: built-in 1 MiB write+datasync");
    let mut ceiling_1m = ceiling::builtin_write_sync(&ceiling_ring, 1 << 20, duration)?;
    progress("ceiling: sequential O_DIRECT read");
    let read_ceiling = ceiling::builtin_sequential_read(&ceiling_ring)?;
    let fio_seconds = seconds.ceil() as u64;
    progress("ceiling: fio");
    let fio_4k = ceiling::fio_write_sync(scratch.path(), 4096, fio_seconds);
    let fio_1m = ceiling::fio_write_sync(scratch.path(), 1 << 20, fio_seconds);
    let fio_found = fio_4k.is_some();
    let ceiling_mb = ceiling_1m.mb_per_sec;
    let (ceiling_p50, ceiling_p99) = (ceiling_4k.p50_us, ceiling_4k.p99_us);

    let mut cells: Vec<Cell> = Vec::new();
    let workloads: Vec<(usize, usize, usize)> = if args.quick {
        vec![(4096, 1, 1), (4096, 32, 1), (4096, 4, 64), (128, 4, 64)]
    } else {
        let mut all = Vec::new();
        for payload in [128, 4096, 65536] {
            for writers in [1, 4, 32] {
                for in_flight in [1, 16] {
                    all.push((payload, writers, in_flight));
                }
            }
        }
        all
    };
    let ring = scratch.path().join("ring");
    for (index, &(payload_bytes, writers, in_flight)) in workloads.iter().enumerate() {
        progress(&format!(
            "sealog cell {}/{}: {payload_bytes} B x {writers} writers x {in_flight} in flight",
            index + 1,
            workloads.len()
        ));
        let workload = Workload {
            payload_bytes,
            writers,
            in_flight,
            duration,
            warmup,
        };
        cells.push(sealog_cell(
            &ring,
            ring_bytes,
            workload,
            durability,
            args.spin_us,
        )?);
    }
    progress("recovery: filling a ring and reopening it");
    let (recovery_bytes_per_sec, recovered_entries) = recovery_cell(&ring, ring_bytes)?;
    let _ = std::fs::remove_dir_all(&ring);
    progress("");
    eprintln!();

    for cell in cells.iter_mut().chain([&mut ceiling_4k, &mut ceiling_1m]) {
        cell.set_ratios(ceiling_mb, ceiling_p50, ceiling_p99);
    }
    let mut all: Vec<Cell> = vec![ceiling_4k.clone(), ceiling_1m.clone()];
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
    let recovery_ratio = recovery_bytes_per_sec / read_ceiling;
    println!(
        "recovery of a full {} MiB ring ({recovered_entries} entries): {:.0} MB/s, \
         {recovery_ratio:.2}x the sequential O_DIRECT read ceiling ({:.0} MB/s)",
        ring_bytes >> 20,
        recovery_bytes_per_sec / 1e6,
        read_ceiling / 1e6
    );
    println!("peak RSS: {} MiB", cells::peak_rss_bytes() >> 20);
    println!(
        "xMB/s: MB/s over the 1 MiB write+datasync ceiling ({ceiling_mb:.1} MB/s); xp50: p50 over \
         the 4 KiB write+datasync p50 ({ceiling_p50:.0} us)"
    );
    if let Some(path) = &args.json {
        let document = json!({
            "machine": machine(),
            "durability": args.durability,
            "spin_before_block_us": args.spin_us,
            "seconds_per_cell": seconds,
            "fio_found": fio_found,
            "cells": all.iter().map(Cell::to_json).collect::<Vec<_>>(),
            "recovery": {
                "ring_bytes": ring_bytes,
                "bytes_per_sec": recovery_bytes_per_sec,
                "read_ceiling_bytes_per_sec": read_ceiling,
                "ratio_to_ceiling": recovery_ratio,
            },
            "peak_rss_bytes": cells::peak_rss_bytes(),
        });
        let text = serde_json::to_string_pretty(&document).map_err(|error| error.to_string())?;
        std::fs::write(path, text).map_err(|error| format!("{}: {error}", path.display()))?;
    }
    Ok(())
}
