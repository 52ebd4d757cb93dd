//! Quarantine recovery (`RecoveryMode::Quarantine`) on a file ring, through io_uring: a ring
//! whose acknowledged data was damaged behind the drive's back (a payload byte flipped, an entry
//! header in the middle of a batch flipped, a batch's write lost whole) makes a strict open
//! fail, and a quarantine open serve everything intact. For each, the test checks what the
//! layer above relies on: the damage in the report and told to the recovery visitor once, in
//! LSN order among the live entries (with the header where it survived); a read of a damaged
//! LSN `Damaged` (with that header), blocking and async, the drive running on; every other
//! entry read, from the device and from the cache; iteration across the damage; the log's
//! shape counting the damaged LSNs; new appends after the log's end; a reopen reporting the
//! same damage, and a strict reopen still failing on it, after those appends and a clean close;
//! and a trim short of it keeping it, a trim past it releasing it (and strict replay, which
//! takes a batch whole or not at all, opening once the trim passes the damaged batch).

use std::future::Future;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use sealog::{
    format, Check, DamagedEntry, Drive, DriveOptions, EmbedderHeader, EntryRef, FormatOptions,
    Kind, NewEntry, OpenError, Position, ReadError, RecoveryMode, RecoveryVisitor, ReplayError,
    SyncMethod,
};
use sealog_wal::format::ENTRY_HEADER_SIZE;
use sealog_wal::ReplayOptions;

/// Entries per batch: each batch is one all-or-nothing group.
const GROUP: u64 = 4;
/// Batches appended before the damage.
const BATCHES: u64 = 6;

fn ring(directory: &tempfile::TempDir) -> PathBuf {
    let path = directory.path().join("ring");
    format(
        &path,
        &FormatOptions {
            size_bytes: 8 << 20,
            segment_size_bytes: Some(1 << 20),
            batch_size_max_bytes: Some(256 << 10),
            sync_method: Some(SyncMethod::Fdatasync),
            ..FormatOptions::default()
        },
    )
    .expect("formats");
    path
}

fn payload(lsn: u64) -> Vec<u8> {
    let len = 300 + (lsn * 53 % 700) as usize;
    (0..len)
        .map(|index| (lsn as usize * 29 + index) as u8)
        .collect()
}

fn header(lsn: u64) -> EmbedderHeader {
    EmbedderHeader {
        log_id: 7,
        address: lsn * 10,
        epoch: 3,
        extra: !lsn,
    }
}

fn quarantine() -> DriveOptions {
    DriveOptions::default().recovery(RecoveryMode::Quarantine)
}

/// Appends `batches` groups of [`GROUP`] entries from LSN `first` on, each group one batch.
fn append_batches(drive: &Drive, first: u64, batches: u64) {
    for batch in 0..batches {
        let lsn = first + batch * GROUP;
        let group = (lsn..lsn + GROUP)
            .map(|lsn| NewEntry::data(payload(lsn)).with_header(header(lsn)))
            .collect();
        assert_eq!(drive.append_group(group).expect("queued").wait(), Ok(lsn));
    }
}

/// Where each live entry's header lies, and its batch's place and length (the ring closed).
#[derive(Clone, Copy, Debug)]
struct Placed {
    position: Position,
    batch: Position,
    batch_bytes: u32,
}

fn placed(path: &Path) -> std::collections::BTreeMap<u64, Placed> {
    let mut reader = sealog::reader::RingReader::open(path).expect("opens for reading");
    let mut found = std::collections::BTreeMap::new();
    sealog_wal::replay(&mut reader, &ReplayOptions::default(), &mut |entry| {
        found.insert(
            entry.lsn,
            Placed {
                position: entry.position,
                batch: entry.batch,
                batch_bytes: entry.batch_bytes,
            },
        );
    })
    .expect("the ring replays clean before the damage");
    found
}

/// Writes `bytes` over the ring at `position` (its segment file), behind the drive's back.
fn write_at(path: &Path, position: Position, bytes: &[u8]) {
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(path.join(format!("segment-{:05}", position.segment)))
        .expect("segment file");
    file.write_all_at(bytes, u64::from(position.offset))
        .expect("write");
    file.sync_all().expect("sync");
}

fn flip_at(path: &Path, position: Position, offset: u32) {
    let file = std::fs::File::open(path.join(format!("segment-{:05}", position.segment)))
        .expect("segment file");
    let mut byte = [0u8; 1];
    file.read_exact_at(&mut byte, u64::from(position.offset + offset))
        .expect("read");
    byte[0] ^= 0x08;
    let at = Position {
        offset: position.offset + offset,
        ..position
    };
    write_at(path, at, &byte);
}

/// What the recovery visitor saw, in order.
#[derive(Default)]
struct Seen {
    visits: Vec<Visited>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Visited {
    Entry(u64),
    Damaged(DamagedEntry),
}

impl RecoveryVisitor for Seen {
    fn visit(&mut self, entry: &EntryRef<'_>) {
        assert_eq!(entry.payload, payload(entry.lsn), "a live entry's payload");
        assert_eq!(entry.header, header(entry.lsn), "a live entry's header");
        self.visits.push(Visited::Entry(entry.lsn));
    }

    fn visit_damaged(&mut self, damaged: &DamagedEntry) {
        self.visits.push(Visited::Damaged(*damaged));
    }
}

/// The damage a test made, as the open must report it.
#[derive(Clone, Copy, Debug)]
struct Expected {
    first_lsn: u64,
    last_lsn: u64,
    position: Position,
    check: Check,
    /// Whether the record's header survived (then `first_lsn == last_lsn`).
    header_known: bool,
    /// The last LSN of the damaged batch.
    batch_last_lsn: u64,
}

impl Expected {
    fn lsns(&self) -> std::ops::RangeInclusive<u64> {
        self.first_lsn..=self.last_lsn
    }

    fn entry(&self) -> DamagedEntry {
        let known = self.header_known;
        DamagedEntry {
            first_lsn: self.first_lsn,
            last_lsn: self.last_lsn,
            position: self.position,
            check: self.check,
            kind: known.then_some(Kind::Data),
            header: known.then(|| header(self.first_lsn)),
            payload_len: known.then(|| payload(self.first_lsn).len() as u32),
            payload_crc: known.then(|| sealog_wal::format::payload_crc(&payload(self.first_lsn))),
        }
    }
}

fn block_on<F: Future>(future: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut context = Context::from_waker(&waker);
    let mut future = Box::pin(future);
    loop {
        if let Poll::Ready(output) = Pin::as_mut(&mut future).poll(&mut context) {
            return output;
        }
        std::thread::park();
    }
}

/// Opens the damaged ring in quarantine mode and checks everything the layer above relies on.
fn quarantined_open_serves_what_is_intact(path: &Path, expected: Expected) {
    let last = BATCHES * GROUP;
    // Strict mode fails, naming the damage.
    match Drive::open(path, DriveOptions::default()) {
        Err(OpenError::Corrupt {
            source: ReplayError::Corruption(corruption),
            ..
        }) => assert!(expected.lsns().contains(&corruption.lsn), "{corruption}"),
        Err(error) => panic!("strict open fails otherwise: {error}"),
        Ok(_) => panic!("strict open succeeds on damaged acknowledged data"),
    }

    let (drive, seen) = Drive::open_visiting(path, quarantine(), Seen::default()).expect("opens");
    // The visitor saw every LSN once, in order: the damage once, where it lies.
    let mut visits = Vec::new();
    let mut lsn = 1;
    while lsn <= last {
        if lsn == expected.first_lsn {
            visits.push(Visited::Damaged(expected.entry()));
            lsn = expected.last_lsn + 1;
        } else {
            visits.push(Visited::Entry(lsn));
            lsn += 1;
        }
    }
    assert_eq!(seen.visits, visits);
    let report = drive.recovery_report().clone();
    assert_eq!(report.damaged_lsns, expected.lsns().count() as u64);
    assert_eq!(report.damaged.len(), 1);
    let range = report.damaged[0];
    assert_eq!(
        (range.first_lsn, range.last_lsn, range.position, range.check),
        (
            expected.first_lsn,
            expected.last_lsn,
            expected.position,
            expected.check
        )
    );
    assert_eq!(range.header_known, expected.header_known);
    assert_eq!(report.quarantined_breaks, 1);

    // Reads: the damaged LSNs are Damaged (with the header that survived), blocking and
    // async; the drive runs on; every other entry reads.
    for lsn in expected.lsns() {
        let damaged = ReadError::Damaged {
            lsn,
            position: expected.position,
            check: expected.check,
            errno: None,
            header: expected.header_known.then(|| header(lsn)),
        };
        assert_eq!(drive.read_entry(lsn), Err(damaged.clone()));
        assert_eq!(block_on(drive.read_entry_async(lsn)), Err(damaged));
    }
    for lsn in (1..=last).filter(|lsn| !expected.lsns().contains(lsn)) {
        let entry = drive.read_entry(lsn).expect("an intact entry reads");
        assert_eq!((entry.payload, entry.header), (payload(lsn), header(lsn)));
    }
    assert!(matches!(drive.stats().state, sealog::DriveState::Running));
    // The log's shape counts the damaged LSNs as part of the log.
    let shape = drive.shape();
    assert_eq!(
        (shape.first_live_lsn, shape.durable_lsn, shape.live_entries),
        (1, last, last)
    );
    assert_eq!(drive.durable_lsn(), last);

    // New appends go on after the log's end; they read from the cache.
    let hits_before = drive.read_stats().cache_hits;
    append_batches(&drive, last + 1, 2);
    let end = last + 2 * GROUP;
    for lsn in last + 1..=end {
        assert_eq!(drive.read(lsn).expect("a new entry reads"), payload(lsn));
    }
    assert!(drive.read_stats().cache_hits > hits_before);

    // Iteration crosses the damage: every intact entry once, each damaged LSN an error of its
    // own, in order.
    let iterated: Vec<Result<u64, u64>> = drive
        .iter_from(1)
        .map(|entry| match entry {
            Ok(entry) => {
                assert_eq!(entry.payload, payload(entry.lsn));
                Ok(entry.lsn)
            }
            Err(ReadError::Damaged { lsn, .. }) => Err(lsn),
            Err(error) => panic!("iteration stopped: {error}"),
        })
        .collect();
    let wanted: Vec<Result<u64, u64>> = (1..=end)
        .map(|lsn| {
            if expected.lsns().contains(&lsn) {
                Err(lsn)
            } else {
                Ok(lsn)
            }
        })
        .collect();
    assert_eq!(iterated, wanted);
    drive.close();
    drop(drive);

    // A reopen reports the same damage; a strict one still fails on it, after the appends and
    // a clean close.
    let (drive, again) = Drive::open_visiting(path, quarantine(), Seen::default()).expect("opens");
    let damaged: Vec<&Visited> = again
        .visits
        .iter()
        .filter(|visited| matches!(visited, Visited::Damaged(_)))
        .collect();
    assert_eq!(damaged, vec![&Visited::Damaged(expected.entry())]);
    assert_eq!(drive.recovery_report().damaged, report.damaged);
    assert_eq!(drive.durable_lsn(), end);
    drive.close();
    drop(drive);
    assert!(matches!(
        Drive::open(path, DriveOptions::default()),
        Err(OpenError::Corrupt { .. })
    ));

    // A trim short of the damage keeps it; one past it releases it, and strict opens again.
    let drive = Drive::open(path, quarantine()).expect("opens");
    drive.trim(expected.first_lsn - 1).expect("trims");
    drive.close();
    drop(drive);
    let drive = Drive::open(path, quarantine()).expect("opens");
    assert_eq!(drive.recovery_report().damaged, report.damaged);
    assert_eq!(
        drive.read_entry(expected.last_lsn).map(|entry| entry.lsn),
        Err(ReadError::Damaged {
            lsn: expected.last_lsn,
            position: expected.position,
            check: expected.check,
            errno: None,
            header: expected.header_known.then(|| header(expected.last_lsn)),
        })
    );
    drive.trim(expected.last_lsn).expect("trims past it");
    assert_eq!(
        drive.read(expected.last_lsn),
        Err(ReadError::Trimmed {
            lsn: expected.last_lsn,
            first_live: expected.last_lsn + 1
        })
    );
    drive.close();
    drop(drive);
    // Gone from the next open's report, and every entry after it reads.
    let drive = Drive::open(path, quarantine()).expect("opens");
    assert!(drive.recovery_report().damaged.is_empty());
    assert_eq!(drive.recovery_report().damaged_lsns, 0);
    let live: Vec<u64> = drive
        .iter_from(drive.first_live_lsn())
        .map(|entry| entry.expect("every entry reads").lsn)
        .collect();
    assert_eq!(live, (expected.last_lsn + 1..=end).collect::<Vec<_>>());
    // Strict replay accepts a batch whole or not at all: it opens once the trim has passed
    // the damaged batch too (the head then moves past it).
    drive
        .trim(expected.batch_last_lsn)
        .expect("trims the batch");
    drive.close();
    drop(drive);
    let drive = Drive::open(path, DriveOptions::default()).expect("strict opens once trimmed");
    assert!(drive.recovery_report().damaged.is_empty());
    assert_eq!(drive.first_live_lsn(), expected.batch_last_lsn + 1);
}

/// A ring of [`BATCHES`] acknowledged batches, closed cleanly.
fn written_ring(directory: &tempfile::TempDir) -> PathBuf {
    let path = ring(directory);
    let drive = Drive::open(&path, DriveOptions::default()).expect("opens");
    append_batches(&drive, 1, BATCHES);
    drive.close();
    path
}

#[test]
fn a_flipped_payload_byte_is_reported_with_its_header_and_everything_else_is_served() {
    let directory = tempfile::tempdir().expect("tempdir");
    let path = written_ring(&directory);
    let target = 10;
    let at = placed(&path)[&target];
    flip_at(&path, at.position, ENTRY_HEADER_SIZE as u32 + 17);
    quarantined_open_serves_what_is_intact(
        &path,
        Expected {
            first_lsn: target,
            last_lsn: target,
            position: at.position,
            check: Check::PayloadCrc,
            header_known: true,
            batch_last_lsn: 12,
        },
    );
}

#[test]
fn a_damaged_entry_header_in_a_batch_loses_the_rest_of_the_batch_without_headers() {
    let directory = tempfile::tempdir().expect("tempdir");
    let path = written_ring(&directory);
    // The second entry of the third batch (LSNs 9 to 12): 9 is served, 10 to 12 are lost.
    let target = 10;
    let at = placed(&path)[&target];
    flip_at(&path, at.position, 40);
    quarantined_open_serves_what_is_intact(
        &path,
        Expected {
            first_lsn: target,
            last_lsn: 12,
            position: at.position,
            check: Check::HeaderCrc,
            header_known: false,
            batch_last_lsn: 12,
        },
    );
}

#[test]
fn a_batch_lost_whole_is_one_range_without_headers() {
    let directory = tempfile::tempdir().expect("tempdir");
    let path = written_ring(&directory);
    // The fourth batch's write lost: zeros where it was.
    let at = placed(&path)[&13];
    write_at(&path, at.batch, &vec![0u8; at.batch_bytes as usize]);
    quarantined_open_serves_what_is_intact(
        &path,
        Expected {
            first_lsn: 13,
            last_lsn: 16,
            position: at.batch,
            check: Check::NotWritten,
            header_known: false,
            batch_last_lsn: 16,
        },
    );
}
