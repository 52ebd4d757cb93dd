//! Crash-state enumeration of the real engine's writes: at least 100,000 crash images per CI
//! run (`SEALOG_CRASH_STATES` raises it for a soak), each recovered by the real recovery and
//! checked for I-1..I-4, with idempotence, crashes during recovery and the ghost-entry case on
//! a share of them. Every image a recovery opens is replayed hinted and full, and both must
//! find the same log (some again with a block unreadable); crash points with a control write
//! that moves the tail hint still pending are part of the enumeration, and counted. A share of
//! the images is also replayed, and recovered, in quarantine mode: on crash images it finds
//! exactly what strict recovery finds.

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
    println!(
        "crash states: {} images replayed hinted and full with the same log ({} of them with \
         a trusted hint), {} again with a block unreadable; {} cut points ({} states) crash \
         with a tail hint's control write pending",
        summary.scans_compared,
        summary.scans_hinted,
        summary.scans_compared_unreadable,
        summary.hint_write_cuts,
        summary.hint_write_states
    );
    println!(
        "crash states: {} images replayed in quarantine mode hinted and full as strict replay \
         finds them, {} recovered in quarantine mode to the same log",
        summary.quarantine_scans, summary.quarantine_recoveries
    );
    assert!(summary.states >= target);
    assert!(summary.quarantine_scans * 4 >= summary.states);
    assert!(summary.quarantine_recoveries * 20 >= summary.states);
    // Every recovery's image was compared, most of them hinted (a full scan only where the
    // hint cannot be trusted), and crashes around hint writes were among the states.
    assert!(summary.scans_compared >= summary.states);
    assert!(summary.scans_hinted * 2 > summary.scans_compared);
    assert!(summary.scans_compared_unreadable * 16 >= summary.states);
    assert!(summary.hint_write_states * 20 >= summary.states);
}
