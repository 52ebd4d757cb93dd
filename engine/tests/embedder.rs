//! The embedder's side of the engine, on file rings: the embedder header of every entry comes
//! back from reads (cached and from the device), iterators and recovery's visitor, and names
//! the record of a damaged payload; the visitor sees exactly what `iter_from` yields from the
//! first live LSN; all-or-nothing groups take consecutive LSNs with one ticket and are checked
//! on the caller's thread; and a pipelining writer on a full ring knows which appends failed
//! and resends only those after a trim (`WhenFull::Fail`), or has them wait in order
//! (`WhenFull::Wait`).

use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::time::Duration;

use sealog::{
    format, AppendError, Drive, DriveOptions, EmbedderHeader, Entry, EntryRef, FormatOptions, Kind,
    LogEntry, NewEntry, ReadError, RecoveryVisitor, SummedBytes, SyncMethod, WhenFull,
    ENTRY_HEADER_SIZE,
};

fn ring(directory: &tempfile::TempDir, size_bytes: u64, segment_bytes: u64) -> PathBuf {
    let path = directory.path().join("ring");
    format(
        &path,
        &FormatOptions::new(size_bytes)
            .segment_size_bytes(segment_bytes)
            .batch_size_max_bytes(64 << 10)
            .sync_method(SyncMethod::Fdatasync),
    )
    .expect("formats");
    path
}

fn header(ledger: u64, entry: u64) -> EmbedderHeader {
    EmbedderHeader {
        log_id: ledger,
        address: entry,
        epoch: 3,
        extra: ledger ^ entry,
    }
}

fn body(ledger: u64, entry: u64) -> Vec<u8> {
    let len = 10 + ((ledger * 131 + entry * 17) % 3000) as usize;
    (0..len)
        .map(|at| (at as u64 + ledger + entry) as u8)
        .collect()
}

fn options(read_cache_bytes: u64) -> DriveOptions {
    DriveOptions {
        read_cache_bytes,
        ..DriveOptions::default()
    }
}

/// Appends entries of four ledgers every way there is (single entries with a header, groups,
/// borrowed slices, payloads summed by the caller, plain appends with no header), and returns
/// what the log must hold.
fn append_ledgers(drive: &Drive, rounds: u64) -> Vec<LogEntry> {
    let mut expected = Vec::new();
    for round in 0..rounds {
        let lsn = drive
            .append(NewEntry::data(body(1, round)).with_header(header(1, round)))
            .expect("queued")
            .wait()
            .expect("durable");
        expected.push(entry(lsn, Kind::Data, header(1, round), body(1, round)));
        let group: Vec<NewEntry> = (0..3)
            .map(|index| {
                NewEntry::data(body(2, round * 3 + index)).with_header(header(2, round * 3 + index))
            })
            .collect();
        let first = drive
            .append_group(group.clone())
            .expect("queued")
            .wait()
            .expect("durable");
        for (lsn, new) in (first..).zip(group) {
            expected.push(entry(lsn, new.kind, new.header, new.payload.to_vec()));
        }
        let parts = body(3, round);
        let (front, back) = parts.split_at(parts.len() / 2);
        let lsn = drive
            .append(
                Entry::slices(&[front, back])
                    .with_kind(Kind::Seal)
                    .with_header(header(3, round)),
            )
            .expect("queued")
            .wait()
            .expect("durable");
        expected.push(entry(lsn, Kind::Seal, header(3, round), parts.clone()));
        // A payload whose CRC the embedder computed already (as the LogDrive layer does).
        let summed = SummedBytes::new(body(4, round).into());
        assert_eq!(
            summed.crc(),
            sealog_wal::format::payload_crc(summed.bytes())
        );
        let lsn = drive
            .append(Entry::from(summed.clone()).with_header(header(4, round)))
            .expect("queued")
            .wait()
            .expect("durable");
        expected.push(entry(
            lsn,
            Kind::Data,
            header(4, round),
            summed.bytes().to_vec(),
        ));
        let lsn = drive.append(vec![round as u8; 7]).expect("queued");
        let lsn = lsn.wait().expect("durable");
        expected.push(entry(
            lsn,
            Kind::Data,
            EmbedderHeader::ZERO,
            vec![round as u8; 7],
        ));
    }
    expected
}

fn entry(lsn: u64, kind: Kind, header: EmbedderHeader, payload: Vec<u8>) -> LogEntry {
    LogEntry {
        lsn,
        kind,
        header,
        payload,
    }
}

/// A visitor that keeps copies of what it sees.
#[derive(Default)]
struct Collect(Vec<LogEntry>);

impl RecoveryVisitor for Collect {
    fn visit(&mut self, entry: &EntryRef<'_>) {
        self.0.push(entry.to_owned_entry());
    }
}

#[test]
fn headers_come_back_from_reads_iterators_and_the_visitor_which_sees_what_iter_from_yields() {
    let directory = tempfile::tempdir().expect("tempdir");
    let path = ring(&directory, 16 << 20, 1 << 20);
    let drive = Drive::open(&path, options(64 << 20)).expect("opens");
    let expected = append_ledgers(&drive, 40);
    // From the cache (every payload was handed over owned or shared, but the slices').
    for wanted in &expected {
        assert_eq!(&drive.read_entry(wanted.lsn).expect("live"), wanted);
    }
    drive.trim(expected[9].lsn).expect("trims");
    drive.close();
    drop(drive);

    let (drive, Collect(visited)) =
        Drive::open_visiting(&path, options(0), Collect::default()).expect("opens");
    let iterated: Vec<LogEntry> = drive
        .iter_from(drive.first_live_lsn())
        .collect::<Result<_, _>>()
        .expect("iterates");
    assert_eq!(visited, iterated, "the visitor saw what iter_from yields");
    let live: Vec<LogEntry> = expected[10..].to_vec();
    assert_eq!(visited, live, "the live log, headers and kinds included");
    // From the device (no cache), one by one.
    for wanted in &live {
        assert_eq!(&drive.read_entry(wanted.lsn).expect("live"), wanted);
    }
    drive.close();
}

/// The visitor handed back by the open holds exactly what `iter_from` yields.
#[test]
fn the_visitor_returned_by_open_saw_exactly_the_live_log() {
    struct Ledgers {
        entries: Vec<LogEntry>,
        last_of: std::collections::BTreeMap<u64, u64>,
    }
    impl RecoveryVisitor for Ledgers {
        fn visit(&mut self, entry: &EntryRef<'_>) {
            self.last_of
                .insert(entry.header.log_id, entry.header.address);
            self.entries.push(entry.to_owned_entry());
        }
    }
    let directory = tempfile::tempdir().expect("tempdir");
    // Small segments: the log crosses segments and, after trims, laps the ring.
    let path = ring(&directory, 4 << 20, 256 << 10);
    let drive = Drive::open(&path, options(0)).expect("opens");
    let mut expected = Vec::new();
    for lap in 0..6 {
        expected.extend(append_ledgers(&drive, 25));
        let keep_from = expected.len() - 30;
        drive.trim(expected[keep_from - 1].lsn).expect("trims");
        expected.drain(..keep_from);
        let _ = lap;
    }
    drop(drive);
    let ledgers = Ledgers {
        entries: Vec::new(),
        last_of: Default::default(),
    };
    let (drive, ledgers) = Drive::open_visiting(&path, options(0), ledgers).expect("opens");
    let iterated: Vec<LogEntry> = drive
        .iter_from(drive.first_live_lsn())
        .collect::<Result<_, _>>()
        .expect("iterates");
    assert_eq!(ledgers.entries, iterated);
    assert_eq!(iterated, expected);
    assert_eq!(
        ledgers.last_of.get(&1),
        expected
            .iter()
            .rev()
            .find(|entry| entry.header.log_id == 1)
            .map(|entry| &entry.header.address)
    );
    println!(
        "visitor: {} live entries seen in the open's replay, as iter_from yields them",
        iterated.len()
    );
}

#[test]
fn a_damaged_payload_still_names_its_embedders_record() {
    let directory = tempfile::tempdir().expect("tempdir");
    let path = ring(&directory, 8 << 20, 1 << 20);
    let drive = Drive::open(&path, options(0)).expect("opens");
    let expected = append_ledgers(&drive, 3);
    let victim = &expected[2];
    let segment = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path.join("segment-00000"))
        .expect("segment");
    let bytes = std::fs::read(path.join("segment-00000")).expect("reads");
    let at = bytes
        .windows(victim.payload.len())
        .position(|window| window == victim.payload)
        .expect("found") as u64;
    segment
        .write_all_at(&[bytes[at as usize + 1] ^ 0x10], at + 1)
        .expect("flips");
    segment.sync_all().expect("syncs");
    match drive.read_entry(victim.lsn) {
        Err(ReadError::Damaged {
            header: Some(named),
            ..
        }) => assert_eq!(named, victim.header),
        other => panic!("a damaged payload read as {other:?}"),
    }
    // The header itself damaged: nothing can be trusted of it.
    segment
        .write_all_at(&[bytes[at as usize - 20] ^ 0x10], at - 20)
        .expect("flips");
    segment.sync_all().expect("syncs");
    assert!(matches!(
        drive.read_entry(victim.lsn),
        Err(ReadError::Damaged { header: None, .. })
    ));
}

#[test]
fn groups_are_checked_on_the_callers_thread() {
    let directory = tempfile::tempdir().expect("tempdir");
    let path = ring(&directory, 8 << 20, 1 << 20);
    let drive = Drive::open(&path, options(0)).expect("opens");
    assert!(matches!(
        drive.append_group(Vec::new()),
        Err(AppendError::EmptyGroup)
    ));
    let limit = drive.geometry().batch_size_max_bytes as usize;
    // Two entries that fill the batch limit exactly fit; one byte more does not.
    let half = limit / 2 - ENTRY_HEADER_SIZE;
    let fits = vec![NewEntry::data(vec![1; half]), NewEntry::data(vec![2; half])];
    let first = drive
        .append_group(fits)
        .expect("queued")
        .wait()
        .expect("durable");
    let over = vec![
        NewEntry::data(vec![1; half]),
        NewEntry::data(vec![2; half + 1]),
    ];
    match drive.append_group(over) {
        Err(AppendError::GroupTooLarge {
            entries: 2,
            group_bytes,
            batch_size_max_bytes,
        }) => assert_eq!(
            (group_bytes, batch_size_max_bytes as usize),
            (limit as u64 + 1, limit)
        ),
        other => panic!("an oversized group was {:?}", other.err()),
    }
    assert!(matches!(
        drive.append_group(vec![NewEntry::data(vec![]).with_kind(Kind::Padding)]),
        Err(AppendError::ReservedKind { .. })
    ));
    // Nothing of the refused groups was written: the next append follows the first group.
    let next = drive.append(b"next".to_vec()).expect("queued").wait();
    assert_eq!(next.expect("durable"), first + 2);
    assert_eq!(drive.read(first + 1).expect("live"), vec![2; half]);
}

/// Many writers each appending groups concurrently: every group's LSNs are consecutive (no
/// other append lands inside one), and the log reads back whole.
#[test]
fn concurrent_groups_are_never_interleaved() {
    let directory = tempfile::tempdir().expect("tempdir");
    let path = ring(&directory, 32 << 20, 1 << 20);
    let drive = Drive::open(&path, options(64 << 20)).expect("opens");
    std::thread::scope(|scope| {
        for writer in 0..8u64 {
            let drive = &drive;
            scope.spawn(move || {
                let tickets: Vec<_> = (0..200u64)
                    .map(|round| {
                        let size = 1 + (round % 4);
                        let group: Vec<NewEntry> = (0..size)
                            .map(|index| {
                                NewEntry::data(body(writer, round))
                                    .with_header(header(writer, round * 10 + index))
                            })
                            .collect();
                        (round, size, drive.append_group(group).expect("queued"))
                    })
                    .collect();
                for (round, size, ticket) in tickets {
                    let first = ticket.wait().expect("durable");
                    for index in 0..size {
                        let got = drive.read_entry(first + index).expect("live");
                        assert_eq!(got.header, header(writer, round * 10 + index));
                    }
                }
            });
        }
    });
    let mut count = 0u64;
    for entry in drive.iter_from(1) {
        count += 1;
        assert_eq!(entry.expect("reads").lsn, count);
    }
    assert_eq!(count, drive.durable_lsn());
}

/// `WhenFull::Fail` with a pipelining writer: the appends that failed are exactly those the
/// ring had no room for, none of them took an LSN, every acknowledged one precedes them, and
/// after a trim the writer resends exactly the failed ones, in order, without duplicates.
#[test]
fn a_pipelining_writer_resends_exactly_the_appends_a_full_ring_failed() {
    let directory = tempfile::tempdir().expect("tempdir");
    let path = ring(&directory, 2 << 20, 256 << 10);
    let drive = Drive::open(&path, options(0)).expect("opens");
    let payload = |index: u64| format!("record {index:06}").into_bytes().repeat(100);
    let mut pending: Vec<u64> = (0..3000).collect();
    let mut acknowledged: Vec<(u64, u64)> = Vec::new();
    let mut rounds = 0;
    while !pending.is_empty() {
        rounds += 1;
        assert!(rounds < 100, "the writer makes progress");
        let tickets: Vec<_> = pending
            .iter()
            .map(|&index| (index, drive.append(payload(index)).expect("queued")))
            .collect();
        let mut failed = Vec::new();
        for (index, ticket) in tickets {
            match ticket.wait() {
                Ok(lsn) => {
                    assert!(
                        failed.is_empty(),
                        "an acknowledged append after a failed one"
                    );
                    acknowledged.push((index, lsn));
                }
                Err(AppendError::RingFull { next_lsn }) => {
                    assert_eq!(next_lsn, drive.durable_lsn() + 1, "no LSN was taken");
                    failed.push(index);
                }
                Err(other) => panic!("append {index}: {other}"),
            }
        }
        // Make room: the reader side has consumed everything acknowledged.
        if !failed.is_empty() {
            drive.trim(drive.durable_lsn()).expect("trims");
        }
        pending = failed;
    }
    // Every index acknowledged once, in order, with contiguous LSNs.
    let indexes: Vec<u64> = acknowledged.iter().map(|(index, _)| *index).collect();
    assert_eq!(indexes, (0..3000).collect::<Vec<_>>());
    for pair in acknowledged.windows(2) {
        assert_eq!(pair[1].1, pair[0].1 + 1);
    }
    let first_live = drive.first_live_lsn();
    for (index, lsn) in acknowledged.iter().filter(|(_, lsn)| *lsn >= first_live) {
        assert_eq!(drive.read(*lsn).expect("live"), payload(*index));
    }
    println!("full ring, WhenFull::Fail: 3000 appends acknowledged in {rounds} rounds of resends");
}

/// `WhenFull::Wait`: appends queued while the ring is full wait, in order, and go on when a
/// trim makes room within their wait; those whose wait runs out fail, the oldest first.
#[test]
fn appends_waiting_for_room_go_on_in_order_after_a_trim() {
    let directory = tempfile::tempdir().expect("tempdir");
    let path = ring(&directory, 2 << 20, 256 << 10);
    let drive = Drive::open(
        &path,
        DriveOptions {
            when_full: WhenFull::Wait(Duration::from_secs(20)),
            ..options(0)
        },
    )
    .expect("opens");
    let payload = vec![7u8; 4000];
    // Fill the ring (the first append that would not fit waits).
    let mut acked = 0u64;
    let waiting = loop {
        let ticket = drive.append(payload.clone()).expect("queued");
        match ticket.wait_timeout(Duration::from_millis(300)) {
            Some(Ok(lsn)) => acked = lsn,
            Some(Err(error)) => panic!("append failed: {error}"),
            None => break ticket,
        }
    };
    let behind: Vec<_> = (0..10)
        .map(|_| drive.append(payload.clone()).expect("queued"))
        .collect();
    std::thread::sleep(Duration::from_millis(100));
    assert!(behind.iter().all(|ticket| ticket.try_outcome().is_none()));
    drive.trim(acked).expect("trims");
    assert_eq!(waiting.wait().expect("durable after the trim"), acked + 1);
    for (lsn, ticket) in (acked + 2..).zip(behind) {
        assert_eq!(ticket.wait().expect("durable, in order"), lsn);
    }
    drop(drive);

    // A short wait runs out: the waiting appends fail, none took an LSN.
    let drive = Drive::open(
        &path,
        DriveOptions {
            when_full: WhenFull::Wait(Duration::from_millis(50)),
            ..options(0)
        },
    )
    .expect("reopens");
    let durable = drive.durable_lsn();
    let mut outcomes = Vec::new();
    for _ in 0..1000 {
        let outcome = drive.append(payload.clone()).expect("queued").wait();
        let full = outcome.is_err();
        outcomes.push(outcome);
        if full {
            break;
        }
    }
    match outcomes.last() {
        Some(Err(AppendError::RingFull { next_lsn })) => {
            assert_eq!(*next_lsn, drive.durable_lsn() + 1);
            assert!(drive.durable_lsn() >= durable);
        }
        other => panic!("the ring never filled: {other:?}"),
    }
}
