//! `sealog verify`: reads the whole ring and reports it clean, with a torn tail, or corrupt
//! (naming where), as text or one JSON object.

use std::path::Path;

use sealog_wal::{Corruption, Outcome, RecoveryReport, ReplayError, ScanPolicy};

use crate::failure::{fail, replay_failure, Failure, EXIT_CORRUPT};
use crate::json::{json_or_null, print_json};
use crate::progress;
use crate::read_only::replay_read_only_with;

/// `verify --json` (docs/cli.md, "JSON"): `torn` and `corruption` only when present.
#[derive(serde::Serialize)]
struct VerifyJson {
    status: &'static str,
    first_lsn: Option<u64>,
    last_lsn: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    next_lsn: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    torn: Option<TornJson>,
    #[serde(skip_serializing_if = "Option::is_none")]
    corruption: Option<CorruptionJson>,
}

#[derive(serde::Serialize)]
struct TornJson {
    first_lsn: u64,
    last_lsn: u64,
    bytes: u64,
}

#[derive(serde::Serialize)]
struct CorruptionJson {
    segment: u32,
    offset: u32,
    lsn: u64,
    check: String,
}

/// Reads the whole ring and reports what it holds; corruption of acknowledged data exits 3.
pub(crate) fn verify(path: &Path, json: bool) -> Result<(), Failure> {
    let mut first = None;
    let mut last = None;
    // Verify is the ring's integrity check: it reads the whole ring, not only as far as the
    // tail hint says the log can reach, so damage anywhere is looked at (an open stops at
    // the hint; `dump` too).
    let progress = progress::Progress::on_terminal("verifying");
    let result = replay_read_only_with(path, ScanPolicy::Full, progress.clone(), &mut |entry| {
        first.get_or_insert(entry.lsn);
        last = Some(entry.lsn);
    });
    if let Some(progress) = progress {
        progress.finish();
    }
    match result? {
        Ok(report) => {
            report_replayed(path, json, &report);
            Ok(())
        }
        Err(ReplayError::Corruption(corruption)) => {
            report_corrupt(path, json, (first, last), &corruption);
            Err(fail(
                EXIT_CORRUPT,
                format!(
                    "{}: acknowledged data is corrupt at LSN {}",
                    path.display(),
                    corruption.lsn
                ),
            ))
        }
        Err(error) => Err(replay_failure(path, error)),
    }
}

/// Reports a ring that replays: clean or with a torn tail.
fn report_replayed(path: &Path, json: bool, report: &RecoveryReport) {
    let status = match report.outcome {
        Outcome::Clean => "clean",
        Outcome::TornTail => "torn_tail",
        // Verify replays strictly, so neither is reached; both name damage to acknowledged
        // data.
        Outcome::Truncated | Outcome::Quarantined => "corrupt",
    };
    if !json {
        print_verified(path, status, report);
        return;
    }
    print_json(&VerifyJson {
        status,
        first_lsn: report.first_lsn,
        last_lsn: report.last_lsn,
        next_lsn: Some(report.next_lsn),
        torn: report.torn.map(|torn| TornJson {
            first_lsn: torn.first_lsn,
            last_lsn: torn.last_lsn,
            bytes: torn.bytes,
        }),
        corruption: None,
    });
}

/// Reports corruption of acknowledged data, with the live LSNs read before it.
fn report_corrupt(
    path: &Path,
    json: bool,
    (first, last): (Option<u64>, Option<u64>),
    corruption: &Corruption,
) {
    if !json {
        println!("{}: corrupt", path.display());
        println!("{corruption}");
        return;
    }
    print_json(&VerifyJson {
        status: "corrupt",
        first_lsn: first,
        last_lsn: last,
        next_lsn: None,
        torn: None,
        corruption: Some(CorruptionJson {
            segment: corruption.position.segment,
            offset: corruption.position.offset,
            lsn: corruption.lsn,
            check: corruption.check.to_string(),
        }),
    });
}

/// `verify`'s plain report of a ring that replays.
fn print_verified(path: &Path, status: &str, report: &RecoveryReport) {
    println!("{}: {status}", path.display());
    println!(
        "live LSNs {}..={}, next LSN {} at {}, {} entries in {} batches",
        json_or_null(report.first_lsn),
        json_or_null(report.last_lsn),
        report.next_lsn,
        report.next_position,
        report.entries,
        report.batches
    );
    println!("{} ({} bytes read)", report.scan, report.bytes_read);
    if let Some(torn) = report.torn {
        println!(
            "torn tail (never acknowledged) cut at {}: LSN {}..={}, {} bytes ({})",
            torn.start, torn.first_lsn, torn.last_lsn, torn.bytes, torn.check
        );
    }
}
