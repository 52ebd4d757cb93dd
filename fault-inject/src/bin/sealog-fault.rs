//! `sealog-fault`: replays a simulation seed exactly (the command every simulation failure
//! prints), or runs a range of seeds for as long as asked (a nightly soak).

#![forbid(unsafe_code)]

use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use sealog_fault::{run_seed, SimOptions};

#[derive(Parser)]
#[command(name = "sealog-fault", version, about = "Fault injection for sealog")]
struct Cli {
    #[command(subcommand)]
    command: Command,
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
}

fn main() -> ExitCode {
    let Command::Simulate {
        seed,
        rounds,
        steps,
        no_faults,
        seconds,
    } = Cli::parse().command;
    let options = SimOptions {
        faults: !no_faults,
        rounds,
        steps,
    };
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
