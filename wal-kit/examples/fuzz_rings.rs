//! The structure-aware fuzz run on the stable toolchain, bounded in time: valid rings from the
//! model writer, mutated (damaged blocks, blocks whose reads fail with EIO, crafted control
//! blocks and headers with valid CRCs) and replayed in every recovery mode against the
//! invariants (`sealog_wal_kit::fuzz`). CI runs it for 60 seconds:
//!
//! ```sh
//! cargo run --release -p sealog-wal-kit --example fuzz_rings -- --seconds 60 --seed 1
//! ```
//!
//! It prints every failure as it happens (with the command that reproduces it: `--seed S
//! --case I`), then a line of totals and a line per decision-table row with how many inputs
//! reached it, and exits 1 if any input panicked or broke an invariant. `--cases N` bounds the
//! count instead of the time; `--case I` runs one case and prints what it did.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use sealog_wal_kit::fuzz::{failure_text, run, CaseResult, RunOptions};

/// Failures printed in full; later ones are only counted.
const FAILURES_PRINTED_MAX: u64 = 20;

fn usage() -> ExitCode {
    eprintln!("usage: fuzz_rings [--seconds N] [--cases N] [--seed S] [--case I] [--workloads N]");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let mut options = RunOptions {
        seed: 1,
        cases: None,
        duration: None,
        only_case: None,
        workload_seeds: 512,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let Some(value) = args.next().and_then(|value| value.parse::<u64>().ok()) else {
            return usage();
        };
        match flag.as_str() {
            "--seconds" => options.duration = Some(Duration::from_secs(value)),
            "--cases" => options.cases = Some(value),
            "--seed" => options.seed = value,
            "--case" => options.only_case = Some(value),
            "--workloads" => options.workload_seeds = value.max(1),
            _ => return usage(),
        }
    }
    if options.duration.is_none() && options.cases.is_none() && options.only_case.is_none() {
        options.duration = Some(Duration::from_secs(60));
    }
    let bound = match (options.only_case, options.cases, options.duration) {
        (Some(case), _, _) => format!("case {case}"),
        (None, Some(cases), _) => format!("{cases} cases"),
        (None, None, Some(duration)) => format!("{} s", duration.as_secs()),
        (None, None, None) => unreachable!("a bound was set above"),
    };
    println!("fuzz_rings: seed {}, {bound}", options.seed);
    let started = Instant::now();
    let mut failures = 0u64;
    let seed = options.seed;
    let only_one = options.only_case.is_some();
    let tally = run(&options, &mut |index, case| {
        if only_one {
            println!(
                "base: {}\nmutations: {:#?}\nresult: {:#?}",
                case.base, case.mutations, case.result
            );
        }
        if matches!(case.result, CaseResult::Passed(_)) {
            return;
        }
        failures += 1;
        if failures <= FAILURES_PRINTED_MAX {
            println!("{}", failure_text(seed, index, case));
        }
    });
    println!(
        "fuzz_rings: seed {seed}, {:.1} s, {:.0} inputs/s",
        started.elapsed().as_secs_f64(),
        tally.inputs as f64 / started.elapsed().as_secs_f64().max(1e-9)
    );
    for line in tally.lines() {
        println!("{line}");
    }
    if tally.passed() {
        ExitCode::SUCCESS
    } else {
        println!("fuzz_rings: FAILED ({failures} inputs; the first {FAILURES_PRINTED_MAX} above)");
        ExitCode::FAILURE
    }
}
