//! Simulation runs of the real engine on the simulated drive: the corpus of seeds that once
//! failed, then a range of fresh seeds with every fault on (at least 1,000 per CI run) and some
//! with a correct drive that only crashes. Each failure prints the command that replays it.
//! A seed whose strict open is refused as corrupt goes on in quarantine mode.
//! `SEALOG_SIM_SEEDS` sets how many fresh seeds run (a nightly soak sets it high);
//! `SEALOG_SIM_FIRST_SEED` where they start.

use sealog_fault::{run_seed, SimOptions, SimSummary};

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

fn run(seeds: impl Iterator<Item = (u64, SimOptions)>) -> (u64, SimSummary, Vec<String>) {
    let mut total = SimSummary::default();
    let mut count = 0;
    let mut violations = Vec::new();
    for (seed, options) in seeds {
        count += 1;
        match run_seed(seed, &options) {
            Ok(summary) => {
                total.rounds += summary.rounds;
                total.acknowledged += summary.acknowledged;
                total.recoveries += summary.recoveries;
                total.recoveries_after_data_faults += summary.recoveries_after_data_faults;
                total.checked += summary.checked;
                total.covered_checked += summary.covered_checked;
                total.recoveries_misread += summary.recoveries_misread;
                total.unreadable += summary.unreadable;
                total.refused_corrupt += summary.refused_corrupt;
                total.refused_io += summary.refused_io;
                total.refused_control += summary.refused_control;
                total.quarantine_recoveries += summary.quarantine_recoveries;
                total.quarantine_recoveries_damaged += summary.quarantine_recoveries_damaged;
                total.quarantine_damaged_lsns += summary.quarantine_damaged_lsns;
                total.quarantine_scans += summary.quarantine_scans;
                total.faults.data_faults += summary.faults.data_faults;
                total.faults.io_errors += summary.faults.io_errors;
                total.faults.read_faults += summary.faults.read_faults;
                total.tail_markers += summary.tail_markers;
                total.scans_compared += summary.scans_compared;
                total.scans_hinted += summary.scans_hinted;
                total.hint_waits += summary.hint_waits;
                total.hint_writes += summary.hint_writes;
            }
            Err(violation) => violations.push(violation.to_string()),
        }
    }
    (count, total, violations)
}

fn corpus() -> Vec<(u64, SimOptions)> {
    let text = include_str!("../corpus/seeds.txt");
    text.lines()
        .filter(|line| !line.trim().is_empty() && !line.starts_with('#'))
        .map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let number = |index: usize| fields.get(index).and_then(|field| field.parse().ok());
            let options = SimOptions {
                faults: fields.get(1) != Some(&"no-faults"),
                rounds: number(2).unwrap_or(4) as u32,
                steps: number(3).unwrap_or(120) as u32,
            };
            (number(0).expect("a seed"), options)
        })
        .collect()
}

#[test]
fn simulation_seeds_keep_every_invariant() {
    let fresh = env_number("SEALOG_SIM_SEEDS", 1000);
    let first = env_number("SEALOG_SIM_FIRST_SEED", 0);
    let corpus = corpus();
    let corpus_count = corpus.len();
    let with_faults = (first..first + fresh).map(|seed| (seed, SimOptions::default()));
    let without = (first..first + fresh / 5).map(|seed| {
        (
            seed,
            SimOptions {
                faults: false,
                ..SimOptions::default()
            },
        )
    });
    let (count, total, violations) = run(corpus.into_iter().chain(with_faults).chain(without));
    println!("simulation corpus seeds: {corpus_count}");
    println!("simulation seeds with all faults enabled: {fresh}");
    println!("simulation seeds without faults: {}", fresh / 5);
    println!(
        "simulation: {count} runs, {} rounds, {} appends acknowledged, {} entries compared, \
         {} data faults and {} I/O errors injected, opens refused: {} as corrupt, {} on \
         recovery's own EIO, {} for damaged control blocks; {} violations",
        total.rounds,
        total.acknowledged,
        total.checked,
        total.faults.data_faults,
        total.faults.io_errors,
        total.refused_corrupt,
        total.refused_io,
        total.refused_control,
        violations.len()
    );
    println!(
        "simulation recoveries checked: {} (every crash image, the last included), of which \
         after data faults (the covered-entry rule only): {}; \
         acknowledged entries covered by a surviving watermark checked: {}; entries a read \
         fault kept from comparison: {}",
        total.recoveries,
        total.recoveries_after_data_faults,
        total.covered_checked,
        total.unreadable
    );
    println!(
        "simulation recoveries whose own reads the drive misdirected or failed (the \
         covered-entry rule not checked): {}",
        total.recoveries_misread
    );
    println!(
        "simulation tail markers written on the idle timer (the core's manual clock): {}",
        total.tail_markers
    );
    println!(
        "simulation images replayed hinted and full with the same log: {} ({} with a trusted \
         hint); control blocks written to move the tail hint: {}, batches that waited for one: \
         {}",
        total.scans_compared, total.scans_hinted, total.hint_writes, total.hint_waits
    );
    println!(
        "simulation quarantine: {} images also replayed in quarantine mode hinted and full \
         against strict; {} recoveries in quarantine mode (after a strict open refused as \
         corrupt), {} of them stepping over damage, {} damaged LSNs reported and read back as \
         damaged",
        total.quarantine_scans,
        total.quarantine_recoveries,
        total.quarantine_recoveries_damaged,
        total.quarantine_damaged_lsns
    );
    assert!(
        violations.is_empty(),
        "violations:\n{}",
        violations.join("\n")
    );
    assert!(total.quarantine_scans >= total.scans_compared);
    if fresh >= 100 {
        // The seeds refused as corrupt go on in quarantine mode, and some find damage there.
        assert!(total.quarantine_recoveries >= total.refused_corrupt);
        assert!(total.quarantine_recoveries_damaged > 0);
    }
    assert!(total.scans_compared >= total.recoveries);
    assert!(total.scans_hinted * 2 > total.scans_compared);
    assert!(
        total.hint_writes > 0,
        "the workloads never moved the tail hint"
    );
    assert!(
        total.tail_markers > 0,
        "the simulated clock never made the idle timer fire"
    );
}
