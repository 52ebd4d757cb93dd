//! `sealog logdrive ls|show|read|weak-tail`: a ring's LogDrive store looked at read-only
//! through [`StoreView`] (the ring's shared lock, the store's own replay, nothing written, no
//! reclaimer started), as text or JSON (docs/cli.md, "LogDrives"). `check` is in
//! `logdrive_check`; both share how a view opens and how its errors map to exit codes.

use std::path::Path;

use sealog::{RecoveryMode, ScanPolicy};
use sealog_logdrive::{DriveSummary, LogDriveError, ReadOutcome, StoreView, ViewError};

use crate::dump::{escape, hex};
use crate::failure::{fail, open_failure, Failure, EXIT_CORRUPT, EXIT_OTHER, EXIT_UNUSABLE};
use crate::json::{json_or_null, print_json};

/// How a read-only subcommand looks at the ring.
#[derive(Clone, Copy)]
pub(crate) struct Look {
    /// Step over damage and report it, rather than refuse the ring.
    pub(crate) quarantine: bool,
    /// Print JSON.
    pub(crate) json: bool,
}

/// Opens the view, strict or in quarantine.
pub(crate) fn open_view(
    path: &Path,
    quarantine: bool,
    scan: ScanPolicy,
) -> Result<StoreView, Failure> {
    let mode = if quarantine {
        RecoveryMode::Quarantine
    } else {
        RecoveryMode::Strict
    };
    StoreView::open(path, mode, scan).map_err(|error| view_failure(path, error, quarantine))
}

/// A view's failure as the CLI's exit codes have it: corruption met by a strict replay is 3
/// (and names `--quarantine`), a ring without a store 2, a LogDrive's refusal as
/// [`drive_failure`] maps it.
pub(crate) fn view_failure(path: &Path, error: ViewError, quarantine: bool) -> Failure {
    match error {
        ViewError::Open(error @ sealog::OpenError::Corrupt { .. }) if !quarantine => fail(
            EXIT_CORRUPT,
            format!("{error} (--quarantine steps over the damage and lists it)"),
        ),
        ViewError::Open(error) => open_failure(error),
        ViewError::NotAStore { .. } => fail(EXIT_UNUSABLE, error),
        ViewError::TooManyAddresses { .. } => {
            fail(EXIT_UNUSABLE, format!("{}: {error}", path.display()))
        }
        ViewError::LogDrive(error) => drive_failure(path, error),
    }
}

/// A LogDrive's refusal: a missing LogDrive, an address out of range or a window too large
/// is a usage error (2); damage is 3; anything else 1.
pub(crate) fn drive_failure(path: &Path, error: LogDriveError) -> Failure {
    let status = match error {
        LogDriveError::Missing { .. }
        | LogDriveError::OutOfRange { .. }
        | LogDriveError::InvalidWindow { .. } => EXIT_UNUSABLE,
        LogDriveError::Damaged { .. } => EXIT_CORRUPT,
        _ => EXIT_OTHER,
    };
    fail(status, format!("{}: {error}", path.display()))
}

/// One LogDrive in `ls --json` and `show --json`.
#[derive(serde::Serialize)]
pub(crate) struct DriveJson {
    id: u64,
    generation: u64,
    capacity: u64,
    n: u64,
    t: u64,
    holes: u64,
    sealed_length: Option<u64>,
    fence_epoch: u64,
    trim_point: u64,
    records: u64,
    bytes: u64,
    damaged: usize,
}

impl From<&DriveSummary> for DriveJson {
    fn from(drive: &DriveSummary) -> DriveJson {
        DriveJson {
            id: drive.id,
            generation: drive.generation,
            capacity: drive.capacity,
            n: drive.length.n,
            t: drive.length.t,
            holes: drive.holes,
            sealed_length: drive.length.sealed,
            fence_epoch: drive.length.fence,
            trim_point: drive.length.first,
            records: drive.records,
            bytes: drive.bytes,
            damaged: drive.damaged.len() + drive.suspects.len(),
        }
    }
}

/// `ls --json`.
#[derive(serde::Serialize)]
struct LsJson {
    logdrives: Vec<DriveJson>,
    generation_max: u64,
    first_lsn: Option<u64>,
    next_lsn: u64,
    skipped_records: u64,
    damage: usize,
}

/// `sealog logdrive ls`: every LogDrive on the ring.
pub(crate) fn ls(path: &Path, look: Look) -> Result<(), Failure> {
    let mut view = open_view(path, look.quarantine, ScanPolicy::Hinted)?;
    let drives = view.summaries();
    let report = view.report();
    if look.json {
        print_json(&LsJson {
            logdrives: drives.iter().map(DriveJson::from).collect(),
            generation_max: view.generation_max(),
            first_lsn: report.first_lsn,
            next_lsn: report.next_lsn,
            skipped_records: view.skipped_records(),
            damage: view.damage().len(),
        });
        return Ok(());
    }
    println!(
        "{}: {} LogDrives, generations up to {}, live LSNs from {} to next {}",
        path.display(),
        drives.len(),
        view.generation_max(),
        json_or_null(report.first_lsn),
        report.next_lsn
    );
    println!(
        "{:>8} {:>6} {:>10} {:>10} {:>10} {:>6} {:>10} {:>6} {:>10} {:>8} {:>12} {:>7}",
        "id",
        "gen",
        "capacity",
        "N",
        "T",
        "holes",
        "sealed",
        "fence",
        "trim",
        "records",
        "bytes",
        "damaged"
    );
    for drive in &drives {
        let sealed = drive
            .length
            .sealed
            .map_or("-".to_string(), |s| s.to_string());
        println!(
            "{:>8} {:>6} {:>10} {:>10} {:>10} {:>6} {:>10} {:>6} {:>10} {:>8} {:>12} {:>7}",
            drive.id,
            drive.generation,
            drive.capacity,
            drive.length.n,
            drive.length.t,
            drive.holes,
            sealed,
            drive.length.fence,
            drive.length.first,
            drive.records,
            drive.bytes,
            drive.damaged.len() + drive.suspects.len()
        );
    }
    Ok(())
}

/// `show --json`.
#[derive(serde::Serialize)]
struct ShowJson {
    #[serde(flatten)]
    drive: DriveJson,
    values: u64,
    damaged_addresses: Vec<u64>,
    suspect_ranges: Vec<[u64; 2]>,
    oldest_lsn: Option<u64>,
    pins_head: bool,
    head_lsn: Option<u64>,
}

/// `sealog logdrive show ID`: one LogDrive in full.
pub(crate) fn show(path: &Path, id: u64, look: Look) -> Result<(), Failure> {
    let mut view = open_view(path, look.quarantine, ScanPolicy::Hinted)?;
    let drive = view.summary(id).map_err(|e| drive_failure(path, e))?;
    // The ring's head waits on the oldest record any LogDrive needs: this one pins it when
    // no other needs an older one.
    let pins_head = drive.oldest_lsn.is_some_and(|oldest| {
        view.summaries()
            .iter()
            .all(|other| other.oldest_lsn.is_none_or(|lsn| lsn >= oldest))
    });
    let head_lsn = view.report().first_lsn;
    if look.json {
        print_json(&ShowJson {
            drive: DriveJson::from(&drive),
            values: drive.values,
            damaged_addresses: drive.damaged.iter().copied().collect(),
            suspect_ranges: drive.suspects.iter().map(|r| [r.start, r.end]).collect(),
            oldest_lsn: drive.oldest_lsn,
            pins_head,
            head_lsn,
        });
        return Ok(());
    }
    print_show(path, &drive, pins_head, head_lsn);
    Ok(())
}

fn print_show(path: &Path, drive: &DriveSummary, pins_head: bool, head_lsn: Option<u64>) {
    let length = &drive.length;
    println!(
        "{}: LogDrive {}, generation {}",
        path.display(),
        drive.id,
        drive.generation
    );
    println!("capacity     {}", drive.capacity);
    println!("N, T         {}, {}", length.n, length.t);
    println!("holes        {} in [T, N)", drive.holes);
    match length.sealed {
        Some(sealed) => println!("sealed       at {sealed}"),
        None => println!("sealed       no"),
    }
    println!("fence epoch  {}", length.fence);
    println!("trim point   {}", length.first);
    println!(
        "records      {} ({} values), {} bytes",
        drive.records, drive.values, drive.bytes
    );
    let damaged: Vec<String> = drive.damaged.iter().map(u64::to_string).collect();
    println!("damaged      {}", list_or_none(&damaged));
    let suspects: Vec<String> = drive
        .suspects
        .iter()
        .map(|r| format!("{}..{}", r.start, r.end))
        .collect();
    println!("suspects     {}", list_or_none(&suspects));
    match drive.oldest_lsn {
        Some(lsn) if pins_head => println!(
            "oldest record LSN {lsn}: it pins the ring's head (first live LSN {})",
            json_or_null(head_lsn)
        ),
        Some(lsn) => println!("oldest record LSN {lsn}"),
        None => println!("oldest record none"),
    }
}

pub(crate) fn list_or_none(items: &[String]) -> String {
    if items.is_empty() {
        "none".to_string()
    } else {
        items.join(", ")
    }
}

/// One line of `read --json`.
#[derive(serde::Serialize)]
struct ReadJson {
    address: u64,
    outcome: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    len: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    payload_hex: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    first: Option<u64>,
}

/// `sealog logdrive read ID ADDRESS [--to ADDRESS]`: what a read of each address answers
/// (`--to` inclusive); a damaged address is listed and makes the exit status 3.
pub(crate) fn read(
    path: &Path,
    id: u64,
    (from, to): (u64, Option<u64>),
    look: Look,
) -> Result<(), Failure> {
    let to = to.unwrap_or(from);
    if to < from {
        return Err(fail(
            EXIT_UNUSABLE,
            format!("{}: --to {to} is below the address {from}", path.display()),
        ));
    }
    let end = to.checked_add(1).ok_or_else(|| {
        fail(
            EXIT_UNUSABLE,
            format!("{}: --to {to} is past every address", path.display()),
        )
    })?;
    let mut view = open_view(path, look.quarantine, ScanPolicy::Hinted)?;
    let outcomes = view
        .read(id, from..end)
        .map_err(|error| view_failure(path, error, look.quarantine))?;
    let mut damaged = 0u64;
    for (address, outcome) in &outcomes {
        damaged += u64::from(*outcome == ReadOutcome::Damaged);
        if look.json {
            print_json(&read_json(*address, outcome));
        } else {
            println!("{address}\t{}", read_text(outcome));
        }
    }
    if damaged > 0 {
        return Err(fail(
            EXIT_CORRUPT,
            format!(
                "{}: LogDrive {id}: {damaged} addresses read damaged",
                path.display()
            ),
        ));
    }
    Ok(())
}

fn read_json(address: u64, outcome: &ReadOutcome) -> ReadJson {
    let mut line = ReadJson {
        address,
        outcome: "unwritten",
        len: None,
        payload_hex: None,
        first: None,
    };
    match outcome {
        ReadOutcome::Value(value) => {
            line.outcome = "value";
            line.len = Some(value.len());
            line.payload_hex = Some(hex(value));
        }
        ReadOutcome::Unwritten => {}
        ReadOutcome::Trimmed { first } => {
            line.outcome = "trimmed";
            line.first = Some(*first);
        }
        ReadOutcome::Damaged => line.outcome = "damaged",
    }
    line
}

fn read_text(outcome: &ReadOutcome) -> String {
    match outcome {
        ReadOutcome::Value(value) => format!("value\t{}", escape(value)),
        ReadOutcome::Unwritten => "unwritten".to_string(),
        ReadOutcome::Trimmed { first } => format!("trimmed (the trim point is {first})"),
        ReadOutcome::Damaged => "damaged".to_string(),
    }
}

/// `weak-tail --json`.
#[derive(serde::Serialize)]
struct WeakTailJson {
    id: u64,
    k: u64,
    n: u64,
    t: u64,
    holes: Vec<u64>,
    holes_below_window: bool,
}

/// `sealog logdrive weak-tail ID K`: N, the holes in [N - K, N) and whether any lies below.
pub(crate) fn weak_tail(path: &Path, id: u64, k: u64, look: Look) -> Result<(), Failure> {
    let mut view = open_view(path, look.quarantine, ScanPolicy::Hinted)?;
    let tail = view.weak_tail(id, k).map_err(|e| drive_failure(path, e))?;
    if look.json {
        print_json(&WeakTailJson {
            id,
            k,
            n: tail.n,
            t: tail.t(),
            holes: tail.holes.iter().copied().collect(),
            holes_below_window: tail.holes_below_window,
        });
        return Ok(());
    }
    let holes: Vec<String> = tail.holes.iter().map(u64::to_string).collect();
    println!("{}: LogDrive {id}, weak tail over {k}", path.display());
    println!("N {}, T {}", tail.n, tail.t());
    println!(
        "holes in [{}, {}): {}",
        tail.n.saturating_sub(k),
        tail.n,
        list_or_none(&holes)
    );
    if tail.holes_below_window {
        println!("some address below the window is unwritten too");
    }
    Ok(())
}
