//! `sealog-fault`: replays a simulation seed exactly (the command every simulation failure
//! prints) or runs seeds for as long as asked (a nightly soak), replays a LogDrive
//! simulation seed, runs the LogDrive writer the kill -9 test kills, and damages real rings
//! on purpose: flip a bit, zero or tear a block, copy a block over another (misdirected
//! write), save a block and restore it later (lost write). Blocks are named by `--segment`
//! and `--offset`, or by `--lsn`. Exit status: 0 done, 2 the ring or place is unusable, 1 a
//! simulation violation (or a LogDrive writer that found one).

#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Args, Parser, Subcommand};
use sealog_fault::corrupt::{corrupt, save_block, Damage, Target};
use sealog_fault::logdrive::simulate::{run_logdrive_seed, LogDriveSimOptions};
use sealog_fault::logdrive::writer::run_writer;
use sealog_fault::{run_seed, SimOptions};

#[derive(Parser)]
#[command(name = "sealog-fault", version, about = "Fault injection for sealog")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// Which block: `--segment S --offset O`, or `--lsn L`.
#[derive(Args, Clone, Copy)]
struct Place {
    #[arg(long, requires = "offset", conflicts_with = "lsn")]
    segment: Option<u32>,
    #[arg(long, requires = "segment")]
    offset: Option<u32>,
    #[arg(long)]
    lsn: Option<u64>,
}

impl Place {
    fn target(self) -> Option<Target> {
        match (self.segment, self.offset, self.lsn) {
            (Some(segment), Some(offset), None) => Some(Target::At { segment, offset }),
            (None, None, Some(lsn)) => Some(Target::Lsn(lsn)),
            _ => None,
        }
    }
}

#[derive(Subcommand)]
enum Command {
    /// Run one simulation seed, or seeds from --seed on for --seconds.
    Simulate {
        #[arg(long)]
        seed: u64,
        #[arg(long, default_value_t = 4)]
        rounds: u32,
        #[arg(long, default_value_t = 120)]
        steps: u32,
        /// A correct drive that only crashes.
        #[arg(long)]
        no_faults: bool,
        /// Keep running consecutive seeds for this long.
        #[arg(long)]
        seconds: Option<u64>,
    },
    /// Run one LogDrive simulation seed (the command its failures print).
    LogdriveSimulate {
        #[arg(long)]
        seed: u64,
        #[arg(long, default_value_t = 6)]
        rounds: u32,
        #[arg(long, default_value_t = 400)]
        groups: u32,
    },
    /// Run the LogDrive workload on a ring until killed, printing every operation issued
    /// and done (the writer process of the kill -9 test).
    LogdriveWriter {
        path: PathBuf,
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// Flip one bit of a block.
    Flip {
        path: PathBuf,
        #[command(flatten)]
        place: Place,
        /// The bit, counted from the block's first byte.
        #[arg(long, default_value_t = 1000)]
        bit: u64,
    },
    /// Zero a block.
    Zero {
        path: PathBuf,
        #[command(flatten)]
        place: Place,
    },
    /// Keep a block's first sectors, fill the rest with garbage.
    Tear {
        path: PathBuf,
        #[command(flatten)]
        place: Place,
        #[arg(long, default_value_t = 1)]
        keep_sectors: u32,
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// Copy the block at --from-segment/--from-offset over the named block (misdirected write).
    Copy {
        path: PathBuf,
        #[command(flatten)]
        place: Place,
        #[arg(long)]
        from_segment: u32,
        #[arg(long)]
        from_offset: u32,
    },
    /// Save a block to a file, to restore it later.
    Save {
        path: PathBuf,
        #[command(flatten)]
        place: Place,
        #[arg(long)]
        out: PathBuf,
    },
    /// Write a saved block back (a lost write: the old contents return).
    Restore {
        path: PathBuf,
        #[command(flatten)]
        place: Place,
        #[arg(long)]
        from: PathBuf,
    },
}

fn simulate(seed: u64, options: SimOptions, seconds: Option<u64>) -> ExitCode {
    let deadline = seconds.map(|seconds| Instant::now() + Duration::from_secs(seconds));
    let mut next = seed;
    let mut runs = 0u64;
    loop {
        match run_seed(next, &options) {
            Ok(summary) => {
                runs += 1;
                if deadline.is_none() {
                    println!("seed {next}: ok, {summary:?}");
                }
            }
            Err(violation) => {
                eprintln!("{violation}");
                return ExitCode::from(1);
            }
        }
        next += 1;
        match deadline {
            Some(deadline) if Instant::now() < deadline => continue,
            Some(_) => {
                println!("{runs} seeds from {seed}: 0 violations");
                return ExitCode::SUCCESS;
            }
            None => return ExitCode::SUCCESS,
        }
    }
}

fn logdrive_simulate(seed: u64, options: LogDriveSimOptions) -> ExitCode {
    match run_logdrive_seed(seed, &options) {
        Ok(summary) => {
            println!("seed {seed}: ok, {summary:?}");
            ExitCode::SUCCESS
        }
        Err(violation) => {
            eprintln!("{violation}");
            ExitCode::from(1)
        }
    }
}

fn damage(path: PathBuf, place: Place, damage: Damage) -> ExitCode {
    let Some(target) = place.target() else {
        eprintln!("sealog-fault: name the block with --segment and --offset, or with --lsn");
        return ExitCode::from(2);
    };
    match corrupt(&path, target, &damage) {
        Ok(ring_offset) => {
            println!(
                "{}: {damage:?} at ring offset {ring_offset}",
                path.display()
            );
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("sealog-fault: {}: {error}", path.display());
            ExitCode::from(2)
        }
    }
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Simulate {
            seed,
            rounds,
            steps,
            no_faults,
            seconds,
        } => simulate(
            seed,
            SimOptions {
                faults: !no_faults,
                rounds,
                steps,
            },
            seconds,
        ),
        Command::LogdriveSimulate {
            seed,
            rounds,
            groups,
        } => logdrive_simulate(seed, LogDriveSimOptions { rounds, groups }),
        Command::LogdriveWriter { path, seed } => match run_writer(&path, seed) {
            Ok(()) => ExitCode::SUCCESS,
            Err(what) => {
                println!("violation {what} .");
                ExitCode::from(1)
            }
        },
        Command::Flip { path, place, bit } => damage(path, place, Damage::FlipBit(bit)),
        Command::Zero { path, place } => damage(path, place, Damage::Zero),
        Command::Tear {
            path,
            place,
            keep_sectors,
            seed,
        } => damage(path, place, Damage::Tear { keep_sectors, seed }),
        Command::Copy {
            path,
            place,
            from_segment,
            from_offset,
        } => {
            let from = Target::At {
                segment: from_segment,
                offset: from_offset,
            };
            damage(path, place, Damage::CopyFrom(from))
        }
        Command::Restore { path, place, from } => damage(path, place, Damage::Restore(from)),
        Command::Save { path, place, out } => {
            let Some(target) = place.target() else {
                eprintln!("sealog-fault: name the block with --segment and --offset, or --lsn");
                return ExitCode::from(2);
            };
            match save_block(&path, target, &out) {
                Ok(ring_offset) => {
                    println!("saved ring offset {ring_offset} to {}", out.display());
                    ExitCode::SUCCESS
                }
                Err(error) => {
                    eprintln!("sealog-fault: {}: {error}", path.display());
                    ExitCode::from(2)
                }
            }
        }
    }
}
