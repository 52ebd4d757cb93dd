//! `sealog stat`: a ring's shape read without its lock, while a writer may hold it.

use std::path::Path;

use crate::describe::{kind_json, logdrive_count, purpose_sentence};
use crate::failure::{open_failure, replay_failure, Failure};
use crate::json::{json_or_null, print_json};

/// What `stat` prints: the log's shape as the ring shows it, with no lock taken.
#[derive(serde::Serialize)]
struct StatJson {
    path: String,
    kind: &'static str,
    ring_id: String,
    first_live_lsn: u64,
    trim_lsn: u64,
    last_lsn: Option<u64>,
    next_lsn: u64,
    live_entries: u64,
    payload_bytes: u64,
    batches: u64,
    capacity_bytes: u64,
    occupied_bytes: u64,
    torn_tail: bool,
    writer_pid: Option<u32>,
    reader_pids: Vec<u32>,
    control_sequence: u64,
    incarnation: u32,
    purpose: &'static str,
    logdrives: Option<usize>,
    scan_bytes_read: u64,
    consistent: bool,
    snapshot: &'static str,
}

/// What `stat` says of its figures, in plain and JSON output alike.
const STAT_SNAPSHOT: &str = "may be a moment old";

pub(crate) fn stat(path: &Path, json: bool) -> Result<(), Failure> {
    let stat = sealog::stat::stat(path).map_err(|error| match error {
        sealog::stat::StatError::Open(error) => open_failure(error),
        sealog::stat::StatError::Replay { source, .. } => replay_failure(path, source),
    })?;
    let shown = StatJson {
        path: path.display().to_string(),
        kind: kind_json(stat.kind),
        ring_id: stat.ring_id.to_string(),
        first_live_lsn: stat.first_live_lsn,
        trim_lsn: stat.trim_lsn,
        last_lsn: stat.last_lsn,
        next_lsn: stat.next_lsn,
        live_entries: stat.live_entries,
        payload_bytes: stat.payload_bytes,
        batches: stat.batches,
        capacity_bytes: stat.capacity_bytes,
        occupied_bytes: stat.occupied_bytes,
        torn_tail: stat.torn_tail,
        writer_pid: stat.holders.writer_pid,
        reader_pids: stat.holders.reader_pids.clone(),
        control_sequence: stat.control_sequence,
        incarnation: stat.incarnation,
        purpose: stat.purpose.name(),
        logdrives: count_logdrives(path, stat.purpose),
        scan_bytes_read: stat.bytes_read,
        consistent: false,
        snapshot: STAT_SNAPSHOT,
    };
    if json {
        print_json(&shown);
        return Ok(());
    }
    println!("path: {} (ring {})", shown.path, shown.ring_id);
    println!("holds: {}", purpose_sentence(stat.purpose));
    if let Some(logdrives) = shown.logdrives {
        println!("logdrives: {logdrives} live");
    }
    println!(
        "LSNs: first live {}, trim {}, last {}, next {}",
        shown.first_live_lsn,
        shown.trim_lsn,
        json_or_null(shown.last_lsn),
        shown.next_lsn
    );
    println!(
        "live entries: {} ({} payload bytes) in {} batches",
        shown.live_entries, shown.payload_bytes, shown.batches
    );
    let percent = shown.occupied_bytes as f64 * 100.0 / shown.capacity_bytes.max(1) as f64;
    println!(
        "occupied: {} of {} bytes ({percent:.1}%) from the head to the write position",
        shown.occupied_bytes, shown.capacity_bytes
    );
    match shown.writer_pid {
        Some(pid) => println!("writer: process {pid} holds the ring"),
        None => println!("writer: none holds the ring"),
    }
    println!(
        "snapshot: read without the ring's lock; the figures {STAT_SNAPSHOT}{}",
        if shown.torn_tail {
            " (a batch at the end was torn or still being written, and is not counted)"
        } else {
            ""
        }
    );
    Ok(())
}

/// The LogDrives of a ring that holds a store, read without the lock as the rest of `stat`
/// is (a writer's records since may be missing).
fn count_logdrives(path: &Path, purpose: sealog::RingPurpose) -> Option<usize> {
    let files = sealog::storage::open_unlocked(path).ok()?;
    let reader = sealog::reader::RingReader::from_files(files).ok()?;
    logdrive_count(path, purpose, reader)
}
