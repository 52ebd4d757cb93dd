//! Crash-state enumeration of the real engine's writes: at least 100,000 crash images per CI
//! run (`SEALOG_CRASH_STATES` raises it for a soak), each recovered by the real recovery and
//! checked for I-1..I-4, with idempotence, crashes during recovery and the ghost-entry case on
//! a share of them.

use sealog_fault::{enumerate, EnumOptions};

#[test]
fn every_crash_state_recovers_exactly_what_was_acknowledged() {
    let target = std::env::var("SEALOG_CRASH_STATES")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(100_000);
    let summary = enumerate(&EnumOptions {
        states_target: target,
        seed: 1,
    })
    .unwrap_or_else(|violation| panic!("{violation}"));
    println!("crash states checked: {}", summary.states);
    println!(
        "crash states: {} cut points in {} workloads; {} recovered twice, {} recoveries cut by \
         a crash, {} ghost-entry checks; 0 violations",
        summary.cut_points,
        summary.workloads,
        summary.idempotence_checks,
        summary.recovery_crashes,
        summary.ghost_checks
    );
    assert!(summary.states >= target);
}
