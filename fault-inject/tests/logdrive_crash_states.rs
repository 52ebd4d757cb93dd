//! Crash-state enumeration of LogDrive workloads (issue 13): a store on the simulated drive
//! runs a workload whose long-lived ledger pins the head of a ring small enough to lap,
//! while other LogDrives are created, written, sealed, fenced, trimmed and deleted, and the
//! reclaimer relocates at random points; crash images are built along the recorded trace,
//! half of them inside relocation steps, and each recovered store must hold exactly what
//! the model of the acknowledged operations allows (`sealog_fault::logdrive::model`), some
//! recovered twice to the same answers and some creating a LogDrive with a fresh generation.
//! `SEALOG_LOGDRIVE_CRASH_STATES` raises the number of states for a soak.

use sealog_fault::logdrive::crash_states::{enumerate_logdrive, CrashOptions};

#[test]
fn every_logdrive_crash_state_holds_what_was_acknowledged() {
    let target = std::env::var("SEALOG_LOGDRIVE_CRASH_STATES")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(2000);
    let summary = enumerate_logdrive(&CrashOptions {
        states_target: target,
        seed: 1,
    });
    println!(
        "LogDrive crash states: {} states checked at {} cut points in {} workloads, {} \
         inside relocation steps ({} steps), {} after a relocation's ring trim; {} \
         violations",
        summary.states,
        summary.cut_points,
        summary.workloads,
        summary.states_in_relocation,
        summary.relocation_steps,
        summary.states_after_ring_trim,
        summary.violations.len()
    );
    println!(
        "LogDrive crash states: {} recovered twice to the same answers, {} created a \
         LogDrive after recovery; {} acknowledged facts and {} reads checked; the workloads' \
         reclaimer relocated {} records and trimmed the ring {} times",
        summary.idempotence_checks,
        summary.generation_checks,
        summary.acked_facts,
        summary.reads,
        summary.relocated_records,
        summary.ring_trims
    );
    assert!(
        summary.violations.is_empty(),
        "violations:\n{}",
        summary.violations.join("\n")
    );
    assert!(summary.states >= target);
    assert!(
        summary.states_in_relocation * 4 >= summary.states,
        "too few states inside relocation steps"
    );
    assert!(summary.states_after_ring_trim > 0);
    assert!(summary.idempotence_checks > 0 && summary.generation_checks > 0);
}
