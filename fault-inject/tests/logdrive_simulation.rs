//! Seeded simulation of the LogDrive layer on the simulated drive with faults on (issue 13):
//! per seed, rounds of open, check against the model of what was acknowledged, workload
//! with the reclaimer relocating at random points, and a power cut (a third of them inside a
//! `reclaim_now`); injected write and flush errors fail-stop the drive, hostile crashes tear
//! what was in flight, some seeds lose, misdirect or flip bits of writes, and bit rot put in
//! an acknowledged record must make the next open refuse the ring naming it. Each failure
//! prints the command that replays its seed. `SEALOG_LOGDRIVE_SIM_SEEDS` sets how many seeds
//! run, `SEALOG_LOGDRIVE_SIM_FIRST_SEED` where they start.

use sealog_fault::logdrive::simulate::{run_logdrive_seed, LogDriveSimOptions, LogDriveSimSummary};

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

#[test]
fn logdrive_simulation_seeds_keep_what_was_acknowledged() {
    let seeds = env_number("SEALOG_LOGDRIVE_SIM_SEEDS", 50);
    let first = env_number("SEALOG_LOGDRIVE_SIM_FIRST_SEED", 0);
    let options = LogDriveSimOptions::default();
    let mut total = LogDriveSimSummary::default();
    let mut violations = Vec::new();
    for seed in first..first + seeds {
        match run_logdrive_seed(seed, &options) {
            Ok(summary) => total.add(&summary),
            Err(violation) => violations.push(violation.to_string()),
        }
    }
    println!(
        "LogDrive simulation: {seeds} seeds, {} rounds, {} recoveries checked ({} leniently \
         after data faults), {} acknowledged facts checked; {} fail-stops, {} reopens after \
         recovery's own EIO, {} data faults and {} I/O errors injected; crashes inside \
         reclaim_now: {} (inside a relocation step: {}); bit rot refused naming its LSN: {}, \
         opens refused as corrupt after data faults: {}; {} records relocated; {} violations",
        total.rounds,
        total.recoveries,
        total.lenient_checks,
        total.acked_facts,
        total.fail_stops,
        total.reopens_after_eio,
        total.data_faults,
        total.io_errors,
        total.crashes_in_reclaim,
        total.crashes_in_relocation,
        total.rot_refused,
        total.refused_corrupt,
        total.relocated_records,
        violations.len()
    );
    assert!(
        violations.is_empty(),
        "violations:\n{}",
        violations.join("\n")
    );
    assert!(total.fail_stops > 0, "no seed fail-stopped");
    assert!(total.crashes_in_reclaim > 0, "no crash inside reclaim_now");
    assert!(total.rot_refused > 0, "no bit rot refused");
}
