//! `sealog logdrive check`: every live record of a ring's LogDrive store read and its CRC
//! checked (the whole ring, whatever the tail hint says), in quarantine so that the damage
//! is stepped over and listed rather than stopping the read: by LogDrive and address where
//! a record's header survived, as LSN ranges where it did not. Anything damaged exits 3, as
//! `verify` does for a raw ring; this is what a peer must repair before a log server
//! starts on the ring.

use std::path::Path;

use sealog::ScanPolicy;
use sealog_logdrive::DamageFound;

use crate::failure::{fail, Failure, EXIT_CORRUPT};
use crate::json::print_json;
use crate::logdrive_view::open_view;

/// One LogDrive with damage in `check --json`.
#[derive(serde::Serialize)]
struct DamagedDriveJson {
    id: u64,
    generation: u64,
    addresses: Vec<u64>,
    suspect_ranges: Vec<[u64; 2]>,
}

/// One damaged record or range in `check --json`.
#[derive(serde::Serialize)]
struct DamageJson {
    first_lsn: u64,
    last_lsn: u64,
    /// The LogDrive and address the record held, where its header survived.
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    generation: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    address: Option<u64>,
}

impl From<&DamageFound> for DamageJson {
    fn from(found: &DamageFound) -> DamageJson {
        DamageJson {
            first_lsn: *found.lsns.start(),
            last_lsn: *found.lsns.end(),
            id: found.address.map(|(id, _, _)| id),
            generation: found.address.map(|(_, generation, _)| generation),
            address: found.address.map(|(_, _, address)| address),
        }
    }
}

/// `check --json`.
#[derive(serde::Serialize)]
struct CheckJson {
    status: &'static str,
    entries: u64,
    bytes_read: u64,
    logdrives: usize,
    damaged: Vec<DamagedDriveJson>,
    damage: Vec<DamageJson>,
}

/// Reads every live record and reports the damage; any exits 3.
pub(crate) fn check(path: &Path, json: bool) -> Result<(), Failure> {
    let mut view = open_view(path, true, ScanPolicy::Full)?;
    let drives = view.summaries();
    let damaged: Vec<DamagedDriveJson> = drives
        .iter()
        .filter(|drive| !drive.damaged.is_empty() || !drive.suspects.is_empty())
        .map(|drive| DamagedDriveJson {
            id: drive.id,
            generation: drive.generation,
            addresses: drive.damaged.iter().copied().collect(),
            suspect_ranges: drive.suspects.iter().map(|r| [r.start, r.end]).collect(),
        })
        .collect();
    let damage: Vec<DamageJson> = view.damage().iter().map(DamageJson::from).collect();
    let clean = damaged.is_empty() && damage.is_empty();
    let report = view.report();
    let checked = CheckJson {
        status: if clean { "clean" } else { "damaged" },
        entries: report.entries,
        bytes_read: report.bytes_read,
        logdrives: drives.len(),
        damaged,
        damage,
    };
    if json {
        print_json(&checked);
    } else {
        print_check(path, &checked);
    }
    if clean {
        return Ok(());
    }
    Err(fail(
        EXIT_CORRUPT,
        format!(
            "{}: {} damaged records or ranges, {} LogDrives with damaged addresses",
            path.display(),
            checked.damage.len(),
            checked.damaged.len()
        ),
    ))
}

fn print_check(path: &Path, checked: &CheckJson) {
    println!(
        "{}: {}: {} records read ({} bytes), {} LogDrives",
        path.display(),
        checked.status,
        checked.entries,
        checked.bytes_read,
        checked.logdrives
    );
    for drive in &checked.damaged {
        let addresses: Vec<String> = drive.addresses.iter().map(u64::to_string).collect();
        let suspects: Vec<String> = drive
            .suspect_ranges
            .iter()
            .map(|[start, end]| format!("{start}..{end}"))
            .collect();
        let mut line = format!("LogDrive {} (generation {}):", drive.id, drive.generation);
        if !addresses.is_empty() {
            line.push_str(&format!(" damaged at {}", addresses.join(", ")));
        }
        if !suspects.is_empty() {
            line.push_str(&format!(
                " addresses a record that lost its header may have held: {}",
                suspects.join(", ")
            ));
        }
        println!("{line}");
    }
    for found in &checked.damage {
        let held = match (found.id, found.address) {
            (Some(id), Some(address)) => format!("LogDrive {id} address {address}"),
            _ => "no header left (its LogDrive and address unknown)".to_string(),
        };
        println!(
            "damaged LSNs {}..={}: {held}",
            found.first_lsn, found.last_lsn
        );
    }
}
