//! `sealog logdrive create|delete|seal|fence|trim|reclaim`: repair work on a ring's LogDrive
//! store, through the store itself (`LogDriveStore`, the ring's exclusive lock, the same
//! checks and durable records a log server's calls make). A ring another process holds is
//! refused after the lock's wait, with nothing changed; a ring whose control block does not
//! mark it as holding a store is refused before it is opened for writing (the writable open
//! would mark it). Those that drop data (delete, seal, trim) ask for `--yes`.

use std::path::Path;

use sealog::reader::RingReader;
use sealog::{DriveOptions, RingPurpose};
use sealog_logdrive::{wait, LogDrive, LogDriveStore, ReclaimStats, StoreOpenError};

use crate::failure::{fail, open_failure, Failure, EXIT_UNUSABLE};
use crate::json::print_json;
use crate::logdrive_view::drive_failure;

/// Opens the store for writing, having checked that the ring holds one.
fn open_store(path: &Path) -> Result<LogDriveStore, Failure> {
    let mut reader = RingReader::open(path).map_err(open_failure)?;
    let purpose = reader.control().map_err(open_failure)?.purpose;
    drop(reader);
    if purpose != RingPurpose::LogDriveStore {
        return Err(fail(
            EXIT_UNUSABLE,
            format!(
                "{}: the ring holds no LogDrive store (its control block marks it for {}; \
                 `sealog format --logdrive` makes one)",
                path.display(),
                purpose.name()
            ),
        ));
    }
    LogDriveStore::open(path, DriveOptions::default()).map_err(|error| match error {
        StoreOpenError::Drive(error) => open_failure(error),
        error => fail(EXIT_UNUSABLE, error),
    })
}

/// Refuses an operation that drops data unless `--yes` was given.
fn confirmed(path: &Path, yes: bool, what: &str) -> Result<(), Failure> {
    if yes {
        return Ok(());
    }
    Err(fail(
        EXIT_UNUSABLE,
        format!(
            "{}: {what} drops data; give --yes to do it (nothing was changed)",
            path.display()
        ),
    ))
}

/// What an edit did, as `--json` prints it.
#[derive(serde::Serialize)]
struct Done {
    id: u64,
    generation: u64,
    operation: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    capacity: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    length: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    epoch: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    upto: Option<u64>,
}

impl Done {
    fn new(id: u64, generation: u64, operation: &'static str) -> Done {
        Done {
            id,
            generation,
            operation,
            capacity: None,
            length: None,
            epoch: None,
            upto: None,
        }
    }

    fn print(&self, path: &Path, json: bool) {
        if json {
            print_json(self);
            return;
        }
        let mut line = format!(
            "{}: {} LogDrive {} (generation {})",
            path.display(),
            self.operation,
            self.id,
            self.generation
        );
        let figures = [
            ("capacity", self.capacity),
            ("at", self.length),
            ("epoch", self.epoch),
            ("below", self.upto),
        ];
        for (name, figure) in figures {
            if let Some(figure) = figure {
                line.push_str(&format!(", {name} {figure}"));
            }
        }
        println!("{line}");
    }
}

/// An edit of one store: `run` makes the change, and the store closes (what was queued
/// durable) whatever its outcome.
fn edit(
    path: &Path,
    run: impl FnOnce(&LogDriveStore) -> Result<Done, Failure>,
) -> Result<Done, Failure> {
    let store = open_store(path)?;
    let done = run(&store);
    store.close();
    done
}

/// `create ID --capacity N`.
pub(crate) fn create(path: &Path, id: u64, capacity: u64, json: bool) -> Result<(), Failure> {
    let done = edit(path, |store| {
        let drive = wait(store.create(id, capacity)).map_err(|e| drive_failure(path, e))?;
        let mut done = Done::new(id, drive.generation(), "created");
        done.capacity = Some(capacity);
        Ok(done)
    })?;
    done.print(path, json);
    Ok(())
}

/// `delete ID --yes`.
pub(crate) fn delete(path: &Path, id: u64, yes: bool, json: bool) -> Result<(), Failure> {
    confirmed(path, yes, "delete")?;
    let done = edit(path, |store| {
        let generation = store
            .get(id)
            .map_err(|e| drive_failure(path, e))?
            .generation();
        wait(store.delete(id)).map_err(|e| drive_failure(path, e))?;
        Ok(Done::new(id, generation, "deleted"))
    })?;
    done.print(path, json);
    Ok(())
}

/// A control on one LogDrive: seal, fence or trim.
pub(crate) enum Control {
    /// Seal at this length, on behalf of this epoch (by default the current fence).
    Seal { length: u64, epoch: Option<u64> },
    /// Fence at this epoch.
    Fence { epoch: u64 },
    /// Trim below this address.
    Trim { upto: u64 },
}

/// `seal ID LENGTH --yes`, `fence ID EPOCH`, `trim ID UPTO --yes`.
pub(crate) fn control(
    path: &Path,
    id: u64,
    control: Control,
    (yes, json): (bool, bool),
) -> Result<(), Failure> {
    match control {
        Control::Seal { .. } => confirmed(path, yes, "a seal")?,
        Control::Trim { .. } => confirmed(path, yes, "a trim")?,
        Control::Fence { .. } => {}
    }
    let done = edit(path, |store| {
        let drive = store.get(id).map_err(|e| drive_failure(path, e))?;
        let failed = |e| drive_failure(path, e);
        let mut done = Done::new(id, drive.generation(), "");
        match control {
            Control::Seal { length, epoch } => {
                let fence = wait(drive.length()).map_err(failed)?.fence;
                let epoch = epoch.unwrap_or(fence);
                wait(drive.seal(length, epoch)).map_err(failed)?;
                (done.operation, done.length, done.epoch) = ("sealed", Some(length), Some(epoch));
            }
            Control::Fence { epoch } => {
                wait(drive.fence(epoch)).map_err(failed)?;
                (done.operation, done.epoch) = ("fenced", Some(epoch));
            }
            Control::Trim { upto } => {
                wait(drive.trim(upto)).map_err(failed)?;
                (done.operation, done.upto) = ("trimmed", Some(upto));
            }
        }
        Ok(done)
    })?;
    done.print(path, json);
    Ok(())
}

/// `reclaim --json`: the reclaimer's figures.
#[derive(serde::Serialize)]
struct ReclaimJson {
    ran: bool,
    capacity_bytes: u64,
    occupied_bytes: u64,
    live_bytes: u64,
    dead_bytes: u64,
    space_amplification: f64,
    head_lsn: u64,
    steps: u64,
    relocated_records: u64,
    relocated_bytes: u64,
    garbage_records: u64,
    ring_trims: u64,
}

/// `reclaim [--run]`: the reclaimer's figures on the ring as the store opened it, and with
/// `--run` after a run of its work now (until its policy is met or nothing more can be done).
pub(crate) fn reclaim(path: &Path, run: bool, json: bool) -> Result<(), Failure> {
    let store = open_store(path)?;
    let stats = if run {
        store.reclaim_now().map_err(|e| drive_failure(path, e))
    } else {
        Ok(store.reclaim_stats())
    };
    store.close();
    let stats = stats?;
    if json {
        print_json(&reclaim_json(run, &stats));
        return Ok(());
    }
    println!(
        "{}: {} of {} bytes occupied, {} live, {} dead (space amplification {:.2}); head LSN {}",
        path.display(),
        stats.occupied_bytes,
        stats.capacity_bytes,
        stats.live_bytes,
        stats.dead_bytes,
        stats.space_amplification,
        stats.head_lsn
    );
    println!(
        "{} steps: {} records ({} bytes) relocated, {} garbage records passed, {} ring trims",
        stats.steps,
        stats.relocated_records,
        stats.relocated_bytes,
        stats.garbage_records,
        stats.ring_trims
    );
    Ok(())
}

fn reclaim_json(ran: bool, stats: &ReclaimStats) -> ReclaimJson {
    ReclaimJson {
        ran,
        capacity_bytes: stats.capacity_bytes,
        occupied_bytes: stats.occupied_bytes,
        live_bytes: stats.live_bytes,
        dead_bytes: stats.dead_bytes,
        space_amplification: stats.space_amplification,
        head_lsn: stats.head_lsn,
        steps: stats.steps,
        relocated_records: stats.relocated_records,
        relocated_bytes: stats.relocated_bytes,
        garbage_records: stats.garbage_records,
        ring_trims: stats.ring_trims,
    }
}
