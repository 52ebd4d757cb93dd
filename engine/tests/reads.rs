//! Reads as a log server makes them, on a file ring: point reads fetch only the blocks of
//! their entry and are checked like replay checks (a damaged record is that read's typed
//! outcome, the drive runs on); recent entries come from the cache without touching the device
//! and evicted ones from the device; readers racing trims and laps get the entry or `Trimmed`,
//! never other bytes; iterators read ahead across segments and laps, cross damage (each damaged
//! entry an error of its own) and follow the tail; waits
//! for the durable tail wake each waiter exactly once; async reads and trims complete.

use std::future::Future;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use sealog::{format, Drive, DriveOptions, Entry, FormatOptions, ReadError, SyncMethod, WaitError};
use sealog_wal::format::ENTRY_HEADER_SIZE;
use sealog_wal::Check;

const SEGMENT_BYTES: u64 = 1 << 20;

fn ring(directory: &tempfile::TempDir, size_bytes: u64) -> PathBuf {
    ring_of(directory, size_bytes, SEGMENT_BYTES)
}

fn ring_of(directory: &tempfile::TempDir, size_bytes: u64, segment_bytes: u64) -> PathBuf {
    let path = directory.path().join("ring");
    format(
        &path,
        &FormatOptions {
            size_bytes,
            segment_size_bytes: Some(segment_bytes),
            batch_size_max_bytes: Some(256 << 10),
            sync_method: Some(SyncMethod::Fdatasync),
            ..FormatOptions::default()
        },
    )
    .expect("formats");
    path
}

/// The payload of `lsn`: its length varies, its bytes name it.
fn payload(lsn: u64) -> Vec<u8> {
    let len = 100 + (lsn * 37 % 1900) as usize;
    (0..len)
        .map(|index| (lsn as usize * 31 + index) as u8)
        .collect()
}

fn no_cache() -> DriveOptions {
    DriveOptions {
        read_cache_bytes: 0,
        ..DriveOptions::default()
    }
}

/// Appends `count` entries (from the next LSN on, which must be `first`), pipelined.
fn append(drive: &Drive, first: u64, count: u64) {
    let tickets: Vec<_> = (first..first + count)
        .map(|lsn| drive.append(payload(lsn)).expect("queued"))
        .collect();
    for (lsn, ticket) in (first..).zip(tickets) {
        assert_eq!(ticket.wait().expect("durable"), lsn);
    }
}

/// Flips a byte of the first segment file at `offset`, behind the drive's back.
fn flip_byte(path: &Path, offset: u64) {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path.join("segment-00000"))
        .expect("segment file");
    let mut byte = [0u8; 1];
    file.read_exact_at(&mut byte, offset).expect("read");
    byte[0] ^= 0x40;
    file.write_all_at(&byte, offset).expect("write");
    file.sync_all().expect("sync");
}

/// Where the payload of `lsn` starts in the first segment file.
fn payload_offset(path: &Path, lsn: u64) -> u64 {
    let bytes = std::fs::read(path.join("segment-00000")).expect("segment file");
    let needle = payload(lsn);
    let found = bytes
        .windows(needle.len())
        .position(|window| window == needle)
        .expect("the payload is in the first segment");
    found as u64
}

#[test]
fn a_point_read_fetches_only_its_entrys_blocks_and_checks_them() {
    let directory = tempfile::tempdir().expect("tempdir");
    let path = ring(&directory, 8 << 20);
    let drive = Drive::open(&path, no_cache()).expect("opens");
    // One batch of 100 entries (about 100 KiB): a read of one needs at most two blocks.
    append(&drive, 1, 100);
    for lsn in [1, 50, 100] {
        assert_eq!(drive.read(lsn).expect("live"), payload(lsn));
    }
    let stats = drive.read_stats();
    assert_eq!((stats.cache_hits, stats.device_reads), (0, 3));
    assert!(
        stats.device_read_bytes <= 3 * 2 * 4096,
        "read {} bytes for three entries of at most 2 KiB",
        stats.device_read_bytes
    );
    assert_eq!(
        drive.read(101),
        Err(ReadError::NotYetDurable {
            lsn: 101,
            durable_lsn: 100
        })
    );
    assert!(stats.index_entries == 100 && stats.index_bytes_per_entry > 0.0);
}

#[test]
fn a_damaged_record_is_that_reads_outcome_and_the_drive_runs_on() {
    let directory = tempfile::tempdir().expect("tempdir");
    let path = ring(&directory, 8 << 20);
    let drive = Drive::open(&path, no_cache()).expect("opens");
    append(&drive, 1, 20);
    // A bit of entry 9's payload and of entry 5's header (its payload length field).
    let payload_9 = payload_offset(&path, 9);
    let header_5 = payload_offset(&path, 5) - ENTRY_HEADER_SIZE as u64;
    flip_byte(&path, payload_9 + 3);
    flip_byte(&path, header_5 + 8);
    match drive.read(9) {
        Err(ReadError::Damaged { lsn: 9, check, .. }) => assert_eq!(check, Check::PayloadCrc),
        other => panic!("a corrupt payload read as {other:?}"),
    }
    match drive.read(5) {
        Err(ReadError::Damaged { lsn: 5, check, .. }) => assert_eq!(check, Check::HeaderCrc),
        other => panic!("a corrupt header read as {other:?}"),
    }
    // Its neighbours read, appends go on, and so does the async path.
    assert_eq!(drive.read(8).expect("intact"), payload(8));
    assert_eq!(drive.read(10).expect("intact"), payload(10));
    append(&drive, 21, 5);
    assert!(matches!(
        block_on(drive.read_async(9)),
        Err(ReadError::Damaged {
            lsn: 9,
            check: Check::PayloadCrc,
            ..
        })
    ));
    assert_eq!(block_on(drive.read_async(25)).expect("read"), payload(25));
    assert_eq!(drive.read_stats().damaged, 3);
    assert!(matches!(drive.stats().state, sealog::DriveState::Running));
}

/// An iterator meeting damage that appeared after the open (a batch that fails its check
/// whole) reads that batch entry by entry: its intact entries are served once, the damaged one
/// is an error of its own, and the iteration goes on past it.
#[test]
fn an_iterator_yields_a_damaged_entry_as_its_own_error_and_goes_on() {
    let directory = tempfile::tempdir().expect("tempdir");
    let path = ring(&directory, 8 << 20);
    let drive = Drive::open(&path, no_cache()).expect("opens");
    append(&drive, 1, 20);
    flip_byte(&path, payload_offset(&path, 9) + 3);
    let iterated: Vec<Result<u64, u64>> = drive
        .iter_from(1)
        .map(|entry| match entry {
            Ok(entry) => {
                assert_eq!(entry.payload, payload(entry.lsn));
                Ok(entry.lsn)
            }
            Err(ReadError::Damaged { lsn, check, .. }) => {
                assert_eq!(check, Check::PayloadCrc);
                Err(lsn)
            }
            Err(error) => panic!("the iteration stopped: {error}"),
        })
        .collect();
    let expected: Vec<Result<u64, u64>> = (1..=20)
        .map(|lsn| if lsn == 9 { Err(9) } else { Ok(lsn) })
        .collect();
    assert_eq!(iterated, expected);
}

#[test]
fn recent_entries_come_from_the_cache_and_evicted_ones_from_the_device() {
    let directory = tempfile::tempdir().expect("tempdir");
    let path = ring(&directory, 16 << 20);
    let options = DriveOptions {
        read_cache_bytes: 1 << 20,
        ..DriveOptions::default()
    };
    let drive = Drive::open(&path, options).expect("opens");
    // About 4 MiB of entries, in batches of about 16 entries: the cache keeps the last MiB.
    let mut next = 1;
    for _ in 0..250 {
        append(&drive, next, 16);
        next += 16;
    }
    let last = next - 1;
    let stats = drive.read_stats();
    assert_eq!(stats.cache_capacity_bytes, 1 << 20);
    let cached_from = stats
        .cache_first_lsn
        .expect("the cache holds the newest batches");
    assert!(
        cached_from > 1 && cached_from < last - 100,
        "cached from {cached_from}"
    );
    for lsn in cached_from..=last {
        assert_eq!(drive.read(lsn).expect("cached"), payload(lsn));
    }
    let stats = drive.read_stats();
    assert_eq!(
        stats.device_reads, 0,
        "cached entries never touch the device"
    );
    assert_eq!(stats.cache_hits, last - cached_from + 1);
    for lsn in 1..20 {
        assert_eq!(drive.read(lsn).expect("on the device"), payload(lsn));
    }
    assert_eq!(drive.read_stats().device_reads, 19);
    // After a reopen nothing is cached: every entry comes back from the device.
    drop(drive);
    let drive = Drive::open(&path, DriveOptions::default()).expect("reopens");
    assert_eq!(drive.read(last).expect("live"), payload(last));
    assert_eq!(drive.read_stats().device_reads, 1);
}

/// Readers race a writer that trims as it goes, so the ring laps many times under them: every
/// read returns the entry's own bytes or `Trimmed`; never other bytes, never `Damaged`.
fn readers_race_trims_and_laps(options: DriveOptions) {
    let directory = tempfile::tempdir().expect("tempdir");
    // Eight segments of 256 KiB: the writer laps the ring every few milliseconds.
    let path = ring_of(&directory, 2 << 20, 256 << 10);
    let drive = Arc::new(Drive::open(&path, options).expect("opens"));
    let done = Arc::new(AtomicBool::new(false));
    let served = Arc::new(AtomicU64::new(0));
    let trimmed = Arc::new(AtomicU64::new(0));
    let readers: Vec<_> = (0..4u64)
        .map(|reader| {
            let (drive, done) = (drive.clone(), done.clone());
            let (served, trimmed) = (served.clone(), trimmed.clone());
            std::thread::spawn(move || {
                let mut state = reader + 1;
                while !done.load(Ordering::Relaxed) {
                    state = state
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    let (first, durable) = (drive.first_live_lsn(), drive.durable_lsn());
                    if durable < first {
                        continue;
                    }
                    // Half the reads go to the oldest entries, the next to be trimmed and
                    // overwritten by a later lap.
                    let span = if state % 2 == 0 {
                        8
                    } else {
                        durable - first + 1
                    };
                    let lsn = first + (state >> 33) % span.min(durable - first + 1);
                    match drive.read(lsn) {
                        Ok(bytes) => {
                            assert_eq!(bytes, payload(lsn), "LSN {lsn} read other bytes");
                            served.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(ReadError::Trimmed {
                            lsn: asked,
                            first_live,
                        }) => {
                            assert!(asked == lsn && first_live > lsn);
                            trimmed.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(error) => panic!("a read of live LSN {lsn} failed: {error}"),
                    }
                    // An iterator from the same place reads on until the tail or a trim.
                    if state % 16 == 0 {
                        for entry in drive.iter_from(lsn).payloads().take(64) {
                            match entry {
                                Ok((found, bytes)) => assert_eq!(bytes, payload(found)),
                                Err(ReadError::Trimmed { .. }) => break,
                                Err(error) => panic!("an iterator from {lsn} failed: {error}"),
                            }
                        }
                    }
                }
            })
        })
        .collect();
    let mut next = 1u64;
    let deadline = Instant::now() + Duration::from_secs(4);
    while Instant::now() < deadline || next < 20_000 {
        append(&drive, next, 32);
        next += 32;
        // Keep about 100 entries live (about 100 KiB): the ring laps every ~2000 entries.
        if next > 100 {
            drive.trim(next - 100).expect("trim");
        }
        if next > 200_000 {
            break;
        }
    }
    done.store(true, Ordering::Relaxed);
    for reader in readers {
        reader.join().expect("reader");
    }
    let report_lap = drive.stats().lsn_durable;
    assert!(report_lap >= 20_000, "the ring lapped several times");
    assert!(served.load(Ordering::Relaxed) > 100, "readers were served");
    eprintln!(
        "served {} reads, {} trimmed under them",
        served.load(Ordering::Relaxed),
        trimmed.load(Ordering::Relaxed)
    );
}

#[test]
fn readers_racing_trims_and_laps_get_the_entry_or_trimmed_from_the_device() {
    readers_race_trims_and_laps(no_cache());
}

#[test]
fn readers_racing_trims_and_laps_get_the_entry_or_trimmed_from_the_cache() {
    readers_race_trims_and_laps(DriveOptions {
        read_cache_bytes: 512 << 10,
        ..DriveOptions::default()
    });
}

#[test]
fn an_iterator_reads_ahead_across_segments_and_follows_the_tail() {
    let directory = tempfile::tempdir().expect("tempdir");
    let path = ring(&directory, 8 << 20);
    let options = DriveOptions {
        read_ahead_bytes: 512 << 10,
        ..no_cache()
    };
    let drive = Drive::open(&path, options).expect("opens");
    // About 3 MiB: several segments of 1 MiB.
    let mut next = 1;
    for _ in 0..100 {
        append(&drive, next, 30);
        next += 30;
    }
    let last = next - 1;
    let mut entries = drive.iter_from(7).payloads();
    let mut expected = 7;
    for entry in entries.by_ref() {
        let (lsn, bytes) = entry.expect("reads");
        assert_eq!((lsn, bytes), (expected, payload(expected)));
        expected += 1;
    }
    assert_eq!(expected, last + 1, "up to the durable tail");
    let stats = drive.read_stats();
    assert!(
        stats.device_reads * 8 < last,
        "{} reads for {last} entries: not read ahead",
        stats.device_reads
    );
    // At the tail it returns None, and goes on once more is durable.
    assert!(entries.next().is_none());
    append(&drive, next, 5);
    let more: Vec<u64> = entries.map(|entry| entry.expect("reads").0).collect();
    assert_eq!(more, (next..next + 5).collect::<Vec<_>>());
    // Trimmed and beyond-the-tail starts are typed.
    drive.trim(10).expect("trim");
    assert_eq!(
        drive.iter_from(3).next(),
        Some(Err(ReadError::Trimmed {
            lsn: 3,
            first_live: 11
        }))
    );
    assert!(matches!(
        drive.iter_from(next + 10).next(),
        Some(Err(ReadError::NotYetDurable { .. }))
    ));
}

/// A drive on a ring of 4 MiB segments (runs are not cut short by segment ends) holding
/// `batches` batches of 16 entries of 4,000 bytes (64 KiB each with their headers), its
/// cache off.
fn ring_of_batches(directory: &tempfile::TempDir, batches: u64) -> Drive {
    let path = ring_of(directory, 32 << 20, 4 << 20);
    let drive = Drive::open(&path, no_cache()).expect("opens");
    for _ in 0..batches {
        let group = (0..16)
            .map(|_| sealog::NewEntry::data(vec![0x5a; 4000]))
            .collect();
        drive
            .append_group(group)
            .expect("queued")
            .wait()
            .expect("durable");
    }
    drive
}

/// Bytes the device reads for `take` entries from LSN 1 with `iterator`, the iterator
/// dropped (and any read it had in flight finished) before the count.
fn bytes_read_for(drive: &Drive, take: usize, iterator: sealog::EntryIter<'_>) -> u64 {
    let before = drive.read_stats().device_read_bytes;
    let mut taken = 0;
    for entry in iterator.take(take) {
        entry.expect("reads");
        taken += 1;
    }
    assert_eq!(taken, take);
    drive.read_stats().device_read_bytes - before
}

/// An iterator's first device read takes at most 256 KiB and each next one twice the last
/// (up to the read-ahead size, 4 MiB by default): a reader that takes a few entries reads a
/// few batches, not a full read-ahead.
#[test]
fn an_iterator_that_takes_a_few_entries_reads_a_few_batches() {
    let directory = tempfile::tempdir().expect("tempdir");
    let drive = ring_of_batches(&directory, 200);
    let bytes = bytes_read_for(&drive, 5, drive.iter_from(1));
    assert!(
        bytes <= 256 << 10,
        "{bytes} bytes read for 5 entries of 4,000 bytes"
    );
    // A long scan still ramps up to full-size reads: 3,200 entries (12.5 MiB) in a handful.
    let reads = drive.read_stats().device_reads;
    let bytes = bytes_read_for(&drive, 3200, drive.iter_from(1));
    let scan_reads = drive.read_stats().device_reads - reads;
    assert!(bytes >= 12 << 20, "{bytes} bytes read for 12.5 MiB");
    assert!(scan_reads <= 12, "{scan_reads} reads for 12.5 MiB");
}

/// An iterator without read-ahead reads each run only when its first entry is asked for:
/// taking the entries of the first two runs and one of the third reads those three runs,
/// where the default iterator has also read the fourth ahead (on its reader thread).
#[test]
fn an_iterator_without_read_ahead_reads_no_run_before_it_is_needed() {
    let directory = tempfile::tempdir().expect("tempdir");
    let drive = ring_of_batches(&directory, 200);
    // Runs of 4, 8 and 16 batches (256 KiB, 512 KiB, 1 MiB): 12 batches' entries and one
    // more reach into the third run.
    let take = 12 * 16 + 1;
    let without = bytes_read_for(&drive, take, drive.iter_from(1).without_read_ahead());
    let with = bytes_read_for(&drive, take, drive.iter_from(1));
    assert!(
        without <= (256 + 512 + 1024) << 10,
        "{without} bytes read without read-ahead"
    );
    assert!(
        with > without + (1 << 20),
        "the default iterator read {with} bytes, without read-ahead {without}"
    );
}

#[test]
fn tail_waiters_are_woken_exactly_once_when_their_lsn_is_durable() {
    let directory = tempfile::tempdir().expect("tempdir");
    let path = ring(&directory, 8 << 20);
    let drive = Arc::new(Drive::open(&path, DriveOptions::default()).expect("opens"));
    // More waiters than anything has slots for, on 8 distinct LSNs, and async ones too.
    let waiters: Vec<_> = (0..32u64)
        .map(|index| {
            let drive = drive.clone();
            std::thread::spawn(move || {
                let lsn = 1 + index % 8 * 3;
                let durable = drive.wait_durable(lsn, None).expect("becomes durable");
                assert!(durable >= lsn);
                assert_eq!(drive.read(lsn).expect("served once durable"), payload(lsn));
            })
        })
        .collect();
    let polls = Arc::new(AtomicUsize::new(0));
    let async_waiter = {
        let (drive, polls) = (drive.clone(), polls.clone());
        std::thread::spawn(move || {
            let future = drive.durable_async(20);
            block_on_counting(future, &polls).expect("durable")
        })
    };
    // Let every waiter register, then advance the tail one entry at a time.
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        drive.read_stats().tail_wakeups,
        0,
        "nothing durable: nobody woken"
    );
    for lsn in 1..=25 {
        append(&drive, lsn, 1);
    }
    for waiter in waiters {
        waiter.join().expect("waiter");
    }
    assert!(async_waiter.join().expect("async waiter") >= 20);
    let wakeups = drive.read_stats().tail_wakeups;
    // Every waiter registered before anything was durable: each is woken exactly once.
    assert_eq!(wakeups, 33, "32 threads and one task, each woken once");
    assert_eq!(
        polls.load(Ordering::SeqCst),
        2,
        "the future was polled once pending, once ready"
    );
    // A wait with a timeout times out; a closed drive ends every wait.
    assert_eq!(
        drive.wait_durable(100, Some(Duration::from_millis(20))),
        Err(WaitError::TimedOut {
            lsn: 100,
            durable_lsn: 25
        })
    );
    let late = {
        let drive = drive.clone();
        std::thread::spawn(move || drive.wait_durable(1000, None))
    };
    std::thread::sleep(Duration::from_millis(50));
    drive.close();
    assert_eq!(
        late.join().expect("late waiter"),
        Err(WaitError::Closed(sealog::DriveClosed))
    );
}

#[test]
fn async_reads_run_many_at_once_on_the_drives_ring_and_trims_complete() {
    let directory = tempfile::tempdir().expect("tempdir");
    let path = ring(&directory, 8 << 20);
    let drive = Drive::open(&path, no_cache()).expect("opens");
    append(&drive, 1, 200);
    // 64 reads at once: more than the drive's read lane has buffers.
    let futures: Vec<_> = (1..=64u64).map(|lsn| drive.read_async(lsn * 3)).collect();
    let payloads = block_on(join_all(futures));
    for (index, read) in payloads.into_iter().enumerate() {
        let lsn = (index as u64 + 1) * 3;
        assert_eq!(read.expect("read"), payload(lsn));
    }
    assert!(drive.stats().reads >= 64, "through the drive thread");
    block_on(drive.trim_async(50)).expect("trim");
    assert_eq!(
        block_on(drive.read_async(40)),
        Err(ReadError::Trimmed {
            lsn: 40,
            first_live: 51
        })
    );
    assert_eq!(drive.first_live_lsn(), 51);
    drive.close();
    assert_eq!(
        block_on(drive.read_async(60)),
        Err(ReadError::Closed(sealog::DriveClosed))
    );
}

/// Wakes a parked thread.
struct ThreadWaker(std::thread::Thread);

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// Runs a future to completion on this thread.
fn block_on<F: Future>(future: F) -> F::Output {
    block_on_counting(future, &AtomicUsize::new(0))
}

/// Runs a future to completion, counting its polls.
fn block_on_counting<F: Future>(future: F, polls: &AtomicUsize) -> F::Output {
    let mut future = std::pin::pin!(future);
    let waker = Waker::from(Arc::new(ThreadWaker(std::thread::current())));
    let mut context = Context::from_waker(&waker);
    loop {
        polls.fetch_add(1, Ordering::SeqCst);
        if let Poll::Ready(output) = future.as_mut().poll(&mut context) {
            return output;
        }
        std::thread::park();
    }
}

/// Polls every future until all are ready, in order.
fn join_all<F: Future + Unpin>(futures: Vec<F>) -> impl Future<Output = Vec<F::Output>>
where
    F::Output: Unpin,
{
    struct JoinAll<F: Future> {
        futures: Vec<(F, Option<F::Output>)>,
    }
    impl<F: Future + Unpin> Future for JoinAll<F>
    where
        F::Output: Unpin,
    {
        type Output = Vec<F::Output>;
        fn poll(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Self::Output> {
            let mut pending = false;
            for (future, output) in self.futures.iter_mut() {
                if output.is_none() {
                    match Pin::new(future).poll(context) {
                        Poll::Ready(value) => *output = Some(value),
                        Poll::Pending => pending = true,
                    }
                }
            }
            if pending {
                return Poll::Pending;
            }
            Poll::Ready(
                self.futures
                    .iter_mut()
                    .map(|(_, output)| output.take().expect("ready"))
                    .collect(),
            )
        }
    }
    JoinAll {
        futures: futures.into_iter().map(|future| (future, None)).collect(),
    }
}

/// A client told its entry is durable can read it at once: the drive indexes a batch and moves
/// the durable tail past it before it completes any of the batch's tickets. Several batches
/// acknowledged in one turn are where it mattered (the first batch's clients were told before
/// the tail moved past it).
#[test]
fn an_entry_reads_back_as_soon_as_its_ticket_says_durable() {
    let directory = tempfile::tempdir().expect("tempdir");
    let path = ring(&directory, 32 << 20);
    let drive = Drive::open(&path, DriveOptions::default()).expect("opens");
    let mut next = 1u64;
    let mut reads = 0u64;
    for round in 0..150u64 {
        let tickets: Vec<_> = (0..48u64)
            .map(|index| {
                drive
                    .append(vec![(round + index) as u8; 60_000])
                    .expect("queued")
            })
            .collect();
        for (index, ticket) in tickets.into_iter().enumerate() {
            let lsn = ticket.wait().expect("durable");
            assert_eq!(lsn, next);
            let read = drive
                .read(lsn)
                .unwrap_or_else(|error| panic!("LSN {lsn} acknowledged, then read as: {error}"));
            assert_eq!(read, vec![(round + index as u64) as u8; 60_000]);
            next += 1;
            reads += 1;
        }
        drive.trim(next - 1).expect("trim");
    }
    assert_eq!(reads, 150 * 48);
}

/// The cache keeps the payloads the drive was handed (a `Vec`, shared `Bytes`), not copies; an
/// entry appended from borrowed slices leaves the drive nothing to keep, so it is read from
/// the device, like any entry the cache no longer holds.
#[test]
fn owned_and_shared_payloads_are_cached_and_borrowed_ones_read_from_the_device() {
    let directory = tempfile::tempdir().expect("tempdir");
    let path = ring(&directory, 8 << 20);
    let drive = Drive::open(&path, DriveOptions::default()).expect("opens");
    let owned = drive
        .append(payload(1))
        .expect("queued")
        .wait()
        .expect("durable");
    let shared = drive
        .append(bytes::Bytes::from(payload(2)))
        .expect("queued")
        .wait()
        .expect("durable");
    let third = payload(3);
    let (head, body) = third.split_at(50);
    let lent = drive
        .append(Entry::slices(&[head, body]))
        .expect("queued")
        .wait()
        .expect("durable");
    assert_eq!((owned, shared, lent), (1, 2, 3));
    for lsn in 1..=3 {
        assert_eq!(drive.read(lsn).expect("live"), payload(lsn));
    }
    let stats = drive.read_stats();
    assert_eq!((stats.cache_hits, stats.device_reads), (2, 1));
    assert_eq!(stats.cache_first_lsn, Some(1));
}

/// The log's shape is read without the drive thread: its frontiers move with appends and
/// trims, its occupancy with the head and the write position, and a close shows.
#[test]
fn the_logs_shape_follows_appends_trims_and_close() {
    let directory = tempfile::tempdir().expect("tempdir");
    let path = ring(&directory, 8 << 20);
    let drive = Drive::open(&path, DriveOptions::default()).expect("opens");
    let geometry = drive.geometry();
    let empty = drive.shape();
    assert_eq!(
        (
            empty.first_live_lsn,
            empty.durable_lsn,
            empty.next_lsn,
            empty.live_entries
        ),
        (1, 0, 1, 0)
    );
    assert_eq!(
        empty.capacity_bytes,
        geometry.segment_size_bytes * u64::from(geometry.segment_count)
    );
    assert!(!empty.closed && empty.state == sealog::DriveState::Running);
    // About 2 MiB in batches of 16: across segments of 1 MiB.
    let mut next = 1;
    for _ in 0..100 {
        append(&drive, next, 16);
        next += 16;
    }
    let full = drive.shape();
    assert_eq!(
        (full.durable_lsn, full.next_lsn, full.live_entries),
        (1600, 1601, 1600)
    );
    let payload_bytes: u64 = (1..=1600).map(|lsn| payload(lsn).len() as u64).sum();
    assert!(
        full.occupied_bytes > payload_bytes && full.occupied_bytes < full.capacity_bytes,
        "{} bytes occupied for {payload_bytes} payload bytes",
        full.occupied_bytes
    );
    drive.trim(1200).expect("trim");
    let trimmed = drive.shape();
    assert_eq!(
        (
            trimmed.first_live_lsn,
            trimmed.trim_lsn,
            trimmed.live_entries
        ),
        (1201, 1200, 400)
    );
    assert!(
        trimmed.occupied_bytes < full.occupied_bytes / 2,
        "the head moved: {} of {} bytes",
        trimmed.occupied_bytes,
        full.occupied_bytes
    );
    drive.close();
    assert!(drive.shape().closed);
}
