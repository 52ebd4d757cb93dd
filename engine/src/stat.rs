//! A ring's shape read from outside, while a writer may hold it (`sealog stat`): no lock is
//! taken, not even the shared one, and only what is safe to read under a writer is read. The
//! control block's two copies are each checked by their CRC (a copy torn by a writer's rewrite
//! fails it, and the other copy is used); the log is scanned read-only from the head as the
//! tail hint allows, and a batch being written looks torn and is not counted. The figures are
//! therefore a snapshot that may be a moment old, never a promise: the writer may have
//! appended or trimmed since.
//!
//! Whether a writer holds the ring is read from `/proc/locks` (the ring's lock is a `flock`,
//! which `F_GETLK` and `F_OFD_GETLK` do not see), so the test acquires nothing.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use sealog_wal::{RecoveryReport, ReplayError, ReplayOptions, RingId, RingPurpose};

use crate::error::OpenError;
use crate::reader::RingReader;
use crate::storage::{self, RingKind};

/// How many times a scan that met damage is repeated before the damage is believed: a trim
/// and a writer's next lap between the control block's read and the log's can make a
/// consistent ring look damaged to a reader that holds no lock.
pub const SCAN_ATTEMPTS: u32 = 3;

/// What holds the ring's lock, from `/proc/locks`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Holders {
    /// The process holding the exclusive lock (a writer, recovery or a format), if any.
    pub writer_pid: Option<u32>,
    /// Processes holding the shared lock (dump, verify, inspect).
    pub reader_pids: Vec<u32>,
}

/// A ring's shape as read from the device: may be a moment old.
#[derive(Clone, Debug)]
pub struct RingStat {
    /// The ring's path.
    pub path: PathBuf,
    /// Block device or directory.
    pub kind: RingKind,
    /// The ring's identity.
    pub ring_id: RingId,
    /// The control block's sequence (it grows with every rewrite: opens and trims).
    pub control_sequence: u64,
    /// The control block's incarnation.
    pub incarnation: u32,
    /// What the control block says the ring holds.
    pub purpose: RingPurpose,
    /// The first live LSN (the trim point plus one).
    pub first_live_lsn: u64,
    /// The trim point: every entry at or below it is released.
    pub trim_lsn: u64,
    /// The last LSN on the device (durable as far as the ring shows it), if any is live.
    pub last_lsn: Option<u64>,
    /// The LSN the next append gets, as the ring shows it.
    pub next_lsn: u64,
    /// Live entries found (above the trim point).
    pub live_entries: u64,
    /// Their payload bytes.
    pub payload_bytes: u64,
    /// Batches found from the head (tail markers and trimmed ones included).
    pub batches: u64,
    /// The ring's bytes for the log (every segment, headers included).
    pub capacity_bytes: u64,
    /// The ring's bytes from the head to the write position.
    pub occupied_bytes: u64,
    /// A batch the scan found torn at the end (a writer's batch in flight, or a crash's).
    pub torn_tail: bool,
    /// Bytes the scan read.
    pub bytes_read: u64,
    /// Who holds the ring's lock.
    pub holders: Holders,
}

/// Why a stat failed.
#[derive(Debug, thiserror::Error)]
pub enum StatError {
    /// The ring could not be opened for reading.
    #[error(transparent)]
    Open(#[from] OpenError),
    /// Reading the ring failed (or found damage, [`SCAN_ATTEMPTS`] times in a row).
    #[error("{path}: {source}")]
    Replay {
        /// The ring's path.
        path: PathBuf,
        /// What the scan found.
        #[source]
        source: ReplayError,
    },
}

/// Reads the shape of the ring at `path` without taking its lock.
pub fn stat(path: &Path) -> Result<RingStat, StatError> {
    let files = storage::open_unlocked(path)?;
    let holders = holders_of(path);
    // The same O_DIRECT reader as verify's, over files opened without the lock.
    let mut source = RingReader::from_files(files)?;
    let mut attempt = 1;
    let report = loop {
        match sealog_wal::scan(&mut source, &ReplayOptions::default()) {
            Ok(report) => break report,
            Err(ReplayError::Corruption(_)) if attempt < SCAN_ATTEMPTS => attempt += 1,
            Err(source) => {
                let path = path.to_path_buf();
                return Err(StatError::Replay { path, source });
            }
        }
    };
    Ok(shape_of(path, source.files().kind, &report, holders))
}

/// The figures of a scan's `report`.
fn shape_of(path: &Path, kind: RingKind, report: &RecoveryReport, holders: Holders) -> RingStat {
    let control = &report.control;
    let geometry = control.geometry;
    let head = control.head;
    let next = report.next_position;
    // A head past the write position cannot be (the scan starts at the head); 0 then rather
    // than a distance that wraps.
    let occupied_bytes = if head <= next {
        geometry.distance_bytes(head, next)
    } else {
        0
    };
    RingStat {
        path: path.to_path_buf(),
        kind,
        ring_id: control.ring_id,
        control_sequence: control.sequence,
        incarnation: control.incarnation,
        purpose: control.purpose,
        first_live_lsn: report.trim_lsn + 1,
        trim_lsn: report.trim_lsn,
        last_lsn: report.last_lsn,
        next_lsn: report.next_lsn,
        live_entries: report.entries,
        payload_bytes: report.payload_bytes,
        batches: report.batches,
        capacity_bytes: geometry.segment_size_bytes * u64::from(geometry.segment_count),
        occupied_bytes,
        torn_tail: report.torn.is_some(),
        bytes_read: report.bytes_read,
        holders,
    }
}

/// Who holds the lock of the ring at `path` (its directory or its device), from
/// `/proc/locks`; nobody when it cannot be read.
pub fn holders_of(path: &Path) -> Holders {
    let Ok(metadata) = std::fs::metadata(path) else {
        return Holders::default();
    };
    let locks = std::fs::read_to_string("/proc/locks").unwrap_or_default();
    let dev = metadata.dev();
    let (major, minor) = (nix::sys::stat::major(dev), nix::sys::stat::minor(dev));
    holders_in(&locks, major, minor, metadata.ino())
}

/// The `flock` holders of inode `inode` on device `major:minor` in `locks`, the text of
/// `/proc/locks` (`1: FLOCK  ADVISORY  WRITE 4711 00:2a:1234 0 EOF`; the device in hex, the
/// inode in decimal; waiters are marked `->` and hold nothing).
pub fn holders_in(locks: &str, major: u64, minor: u64, inode: u64) -> Holders {
    let mut holders = Holders::default();
    for line in locks.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.get(1) != Some(&"FLOCK") || fields.len() < 6 {
            continue;
        }
        let mut id = fields[5].split(':');
        let parse_hex = |text: Option<&str>| text.and_then(|t| u64::from_str_radix(t, 16).ok());
        let (Some(lock_major), Some(lock_minor), Some(lock_inode)) = (
            parse_hex(id.next()),
            parse_hex(id.next()),
            id.next().and_then(|text| text.parse::<u64>().ok()),
        ) else {
            continue;
        };
        if (lock_major, lock_minor, lock_inode) != (major, minor, inode) {
            continue;
        }
        let pid = fields[4].parse::<u32>().unwrap_or(0);
        match fields[3] {
            "WRITE" => holders.writer_pid = Some(pid),
            _ => holders.reader_pids.push(pid),
        }
    }
    holders
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flock_holders_are_read_from_proc_locks() {
        let locks = "1: FLOCK  ADVISORY  WRITE 4711 00:2a:1234 0 EOF\n\
                     1: -> FLOCK  ADVISORY  WRITE 4712 00:2a:1234 0 EOF\n\
                     2: FLOCK  ADVISORY  READ 815 fd:01:1234 0 EOF\n\
                     3: FLOCK  ADVISORY  READ 816 fd:01:1234 0 EOF\n\
                     4: POSIX  ADVISORY  WRITE 99 00:2a:1234 0 EOF\n\
                     5: FLOCK  ADVISORY  WRITE 42 00:2a:9999 0 EOF\n";
        let writer = holders_in(locks, 0x00, 0x2a, 1234);
        assert_eq!(
            writer.writer_pid,
            Some(4711),
            "the waiter (->) holds nothing"
        );
        assert!(
            writer.reader_pids.is_empty(),
            "POSIX locks are not the ring's"
        );
        let readers = holders_in(locks, 0xfd, 0x01, 1234);
        assert_eq!(readers.writer_pid, None);
        assert_eq!(readers.reader_pids, [815, 816]);
        assert_eq!(holders_in(locks, 1, 2, 3), Holders::default());
    }
}
