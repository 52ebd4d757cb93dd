//! A full ring (docs/logdrive.md, "Reclaiming the ring's space" and "Room"): on every
//! geometry a store accepts, a ring clients filled comes back once they delete or trim, with
//! no more relocated than the live bytes and a segment; control records are admitted while
//! the control reserve holds them, right after a write was refused; writes wait for room
//! the reclaimer can make (and are checked again once admitted); a geometry that cannot
//! keep the reserves, or a drive that would queue appends for room, is refused at open.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use sealog::{DriveOptions, FormatOptions, WhenFull};
use sealog_logdrive::{
    wait, LocalLogDrive, LogDrive, LogDriveError, LogDriveStore, ReadOutcome, ReclaimPolicy,
    ReclaimStats, StoreOpenError, StoreOptions,
};

/// A ring formatted with `options` in a temporary directory.
fn ring_with(options: &FormatOptions) -> common::Ring {
    let directory = tempfile::tempdir().expect("temporary directory");
    let path = directory.path().join("ring");
    sealog::format(&path, options).expect("format");
    common::Ring::from_parts(directory, path)
}

fn value(bytes: usize, seed: u64) -> Bytes {
    let mut value = vec![(seed % 251) as u8; bytes];
    value[..8].copy_from_slice(&seed.to_le_bytes());
    Bytes::from(value)
}

/// Writes `bytes`-byte values one at a time, one to LogDrive `one` for three to `two`, until
/// the ring is full; the next address of each.
fn fill_one_to_three(one: &LocalLogDrive, two: &LocalLogDrive, bytes: usize) -> (u64, u64) {
    let mut next = [0u64, 0];
    for round in 0u64.. {
        let (drive, index) = if round % 4 == 0 { (one, 0) } else { (two, 1) };
        match wait(drive.write(next[index], 1, value(bytes, round))) {
            Ok(()) => next[index] += 1,
            Err(LogDriveError::RingFull) => break,
            Err(error) => panic!("fill: {error}"),
        }
    }
    (next[0], next[1])
}

/// Writes to `drive` at `address` until it is accepted, for at most `patience`; how long it
/// took.
fn write_when_room(
    drive: &LocalLogDrive,
    address: u64,
    bytes: usize,
    patience: Duration,
) -> Duration {
    let started = Instant::now();
    loop {
        match wait(drive.write(address, 1, value(bytes, address))) {
            Ok(()) => return started.elapsed(),
            Err(LogDriveError::RingFull) if started.elapsed() < patience => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(error) => panic!("write {address} after {:?}: {error}", started.elapsed()),
        }
    }
}

fn relocated(stats: &ReclaimStats) -> u64 {
    stats.relocated_bytes
}

/// The first reproduction of the wedge: a ring filled by two LogDrives, one of which is then
/// deleted, comes back (writes to the other resume, and a trim of it is accepted) having
/// relocated no more than the live bytes and a segment. On bc2668f, a default 64 MiB ring
/// (three 16 MiB segments) refused every write and trim for good after the deletion.
fn filled_ring_comes_back_after_a_deletion(format: FormatOptions, bytes: usize) {
    let ring = ring_with(&format);
    let store =
        LogDriveStore::open_with_options(&ring.path, StoreOptions::default()).expect("open");
    let one = common::create(&store, 1);
    let two = common::create(&store, 2);
    let (next_one, next_two) = fill_one_to_three(&one, &two, bytes);
    let full = store.reclaim_stats();
    drop(two);
    let started = Instant::now();
    wait(store.delete(2)).expect("a deletion on a full ring");
    let waited = write_when_room(&one, next_one, bytes, Duration::from_secs(30));
    let back = started.elapsed();
    wait(one.trim(next_one / 2)).expect("a trim");
    let stats = store.reclaim_stats();
    let segment = store.drive().geometry().segment_size_bytes;
    let moved = relocated(&stats) - relocated(&full);
    println!(
        "{} MiB ring of {} MiB segments, {bytes}-byte values: full after {} + {next_two} \
         writes; {moved} bytes relocated to come back ({} live), writes resumed {back:?} \
         after the deletion (the write waited {waited:?})",
        format.size_bytes >> 20,
        segment >> 20,
        next_one,
        stats.live_bytes
    );
    assert!(
        moved <= full.live_bytes + segment,
        "{moved} bytes relocated for {} live: {stats:?}",
        full.live_bytes
    );
    assert_eq!(stats.refused_copies, 0, "{stats:?}");
    for address in [0, next_one - 1, next_one] {
        assert_eq!(
            common::read(&one, address),
            if address < next_one / 2 {
                ReadOutcome::Trimmed {
                    first: next_one / 2,
                }
            } else {
                ReadOutcome::Value(value(
                    bytes,
                    if address == next_one {
                        address
                    } else {
                        4 * address
                    },
                ))
            }
        );
    }
}

#[test]
fn a_default_64_mib_ring_filled_comes_back_once_a_logdrive_is_deleted() {
    filled_ring_comes_back_after_a_deletion(FormatOptions::new(64 << 20), 32 << 10);
}

#[test]
fn a_default_256_mib_ring_filled_comes_back_once_a_logdrive_is_deleted() {
    filled_ring_comes_back_after_a_deletion(FormatOptions::new(256 << 20), 32 << 10);
}

#[test]
fn the_smallest_logdrive_ring_filled_comes_back_once_a_logdrive_is_deleted() {
    let smallest = sealog_logdrive::geometry::smallest_ring_bytes(4096);
    let format = sealog_logdrive::geometry::format_options(smallest, None, 4096).expect("plans");
    filled_ring_comes_back_after_a_deletion(format, 4 << 10);
    let small_segments = FormatOptions::new(64 << 20).segment_size_bytes(2 << 20);
    filled_ring_comes_back_after_a_deletion(small_segments, 32 << 10);
}

/// The second reproduction: four writers with 16 writes of 100 bytes in flight each and a
/// trimmer keeping about 100 addresses of each LogDrive, on a default 64 MiB ring: no write,
/// trim or deletion is ever refused, and at the end every LogDrive deleted leaves the ring
/// free. On bc2668f, within about 3 s every write, trim and deletion was refused for good
/// with 80 KiB live.
#[test]
fn small_writes_and_a_trimmer_never_wedge_a_small_ring() {
    let ring = ring_with(&FormatOptions::new(64 << 20));
    let store =
        LogDriveStore::open_with_options(&ring.path, StoreOptions::default()).expect("open");
    let drives: Vec<_> = (0..4).map(|id| common::create(&store, id)).collect();
    let heads: Arc<Vec<AtomicU64>> = Arc::new((0..4).map(|_| AtomicU64::new(0)).collect());
    let stop = Arc::new(AtomicBool::new(false));
    let seconds = std::env::var("SEALOG_FULL_RING_SECONDS")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(4.0);
    let writers: Vec<_> = drives
        .iter()
        .cloned()
        .enumerate()
        .map(|(index, drive)| {
            let (heads, stop) = (Arc::clone(&heads), Arc::clone(&stop));
            std::thread::spawn(move || {
                let mut next = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let writes: Vec<_> = (next..next + 16)
                        .map(|address| drive.submit_write(address, 1, value(100, address)))
                        .collect();
                    for write in writes {
                        write
                            .wait()
                            .expect("a write on a ring the trimmer keeps free");
                    }
                    next += 16;
                    heads[index].store(next, Ordering::Release);
                }
                next
            })
        })
        .collect();
    let trimmer = {
        let (drives, heads, stop) = (drives.clone(), Arc::clone(&heads), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut trims = 0u64;
            while !stop.load(Ordering::Relaxed) {
                for (drive, head) in drives.iter().zip(heads.iter()) {
                    let upto = head.load(Ordering::Acquire).saturating_sub(100);
                    wait(drive.trim(upto)).expect("a trim");
                    trims += 1;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            trims
        })
    };
    std::thread::sleep(Duration::from_secs_f64(seconds));
    stop.store(true, Ordering::Relaxed);
    let written: u64 = writers.into_iter().map(|w| w.join().expect("writer")).sum();
    let trims = trimmer.join().expect("trimmer");
    let stats = store.reclaim_stats();
    println!("{written} writes of 100 bytes and {trims} trims in {seconds} s: {stats:?}");
    assert!(written > 0);
    drop(drives);
    for id in 0..4 {
        wait(store.delete(id)).expect("a deletion");
    }
    assert_ring_frees(&store);
}

/// Every LogDrive deleted, the reclaimer leaves no more of the ring occupied than its
/// head's segment.
fn assert_ring_frees(store: &LogDriveStore) {
    let stats = store.reclaim_now().expect("reclaim");
    let segment = store.drive().geometry().segment_size_bytes;
    assert!(
        stats.occupied_bytes <= segment,
        "every LogDrive deleted, {} bytes stay occupied: {stats:?}",
        stats.occupied_bytes
    );
}

/// Control records right after a write was refused: 1,000 fences, trims and deletions, each
/// made at once after a write found the ring full (writes refused at once here), all succeed.
/// On bc2668f with 4 MiB segments, `fence` and `delete` were refused in 8 of 8 runs and a
/// trim in 5 of 8 (the store counted placed records as still queued).
#[test]
fn control_records_are_admitted_right_after_a_write_is_refused() {
    let format = FormatOptions::new(64 << 20).segment_size_bytes(4 << 20);
    let ring = ring_with(&format);
    let options = StoreOptions::default().full_wait(Duration::ZERO);
    let store = LogDriveStore::open_with_options(&ring.path, options).expect("open");
    let spares: Vec<u64> = (100..434).collect();
    for id in &spares {
        drop(common::create(&store, *id));
    }
    let drive = common::create(&store, 1);
    let mut next = 0u64;
    let mut epoch = 1;
    let mut spares = spares.into_iter();
    let mut trimmed = 0;
    for call in 0..1000u64 {
        loop {
            match wait(drive.write(next, epoch, value(32 << 10, next))) {
                Ok(()) => next += 1,
                Err(LogDriveError::RingFull) => break,
                Err(error) => panic!("write: {error}"),
            }
        }
        let outcome = match call % 3 {
            0 => {
                epoch += 1;
                wait(drive.fence(epoch))
            }
            1 => {
                trimmed = trimmed.max(next.saturating_sub(2));
                wait(drive.trim(trimmed))
            }
            _ => match spares.next() {
                Some(id) => wait(store.delete(id)),
                None => wait(drive.fence(epoch)),
            },
        };
        outcome.unwrap_or_else(|error| {
            panic!(
                "control {call} after a refused write: {error}: {:?}",
                store.reclaim_stats()
            )
        });
    }
    let stats = store.reclaim_stats();
    println!("1,000 controls right after refused writes: {stats:?}");
    assert!(stats.refused_writes >= 1000);
}

/// A write that finds the ring full of garbage waits for the reclaimer rather than being
/// refused (88 KiB live on a 48 MiB ring: on bc2668f it answered `RingFull` at once), and a
/// store that waits for nothing refuses it at once. The ring is filled with the reclaimer
/// run by hand and never run; then a store whose reclaimer wakes only when a client finds
/// no room takes the next write.
#[test]
fn a_write_waits_for_room_the_reclaimer_makes() {
    let ring = ring_with(&FormatOptions::new(64 << 20));
    let by_hand = ReclaimPolicy::default().background(false);
    let refusing = StoreOptions::default()
        .reclaim(by_hand)
        .full_wait(Duration::ZERO);
    let store = LogDriveStore::open_with_options(&ring.path, refusing.clone()).expect("open");
    let drive = common::create(&store, 1);
    // 22 addresses (88 KiB) kept, trimmed every 16 writes, until the ring is full.
    let mut address = 0u64;
    let refused = loop {
        if address % 16 == 0 {
            wait(drive.trim(address.saturating_sub(22))).expect("trim");
        }
        let started = Instant::now();
        match wait(drive.write(address, 1, value(4096, address))) {
            Ok(()) => address += 1,
            Err(error) => break (error, started.elapsed()),
        }
    };
    // A store that waits for nothing says so at once.
    assert_eq!(refused.0, LogDriveError::RingFull);
    assert!(refused.1 < Duration::from_secs(1), "{:?}", refused.1);
    // Down to the 22 kept addresses (up to 15 more were written since the last trim): a
    // trim is a control record, admitted on a ring that refuses writes.
    wait(drive.trim(address.saturating_sub(22))).expect("trim on a full ring");
    let full = store.reclaim_stats();
    assert!(full.live_bytes < 100 << 10, "{full:?}");
    drop(drive);
    store.close();
    drop(store);
    let lazy = ReclaimPolicy {
        interval: Duration::from_secs(3600),
        ..ReclaimPolicy::default()
    };
    let waiting = StoreOptions::default().reclaim(lazy);
    let store = LogDriveStore::open_with_options(&ring.path, waiting).expect("reopen");
    let drive = store.get(1).expect("live");
    let started = Instant::now();
    wait(drive.write(address, 1, value(4096, address))).expect("a write that waits for room");
    let waited = started.elapsed();
    let stats = store.reclaim_stats();
    println!("a write on a full ring of 88 KiB live waited {waited:?}: {stats:?}");
    assert!(
        stats.refused_writes >= 1,
        "the write never waited: {stats:?}"
    );
    assert!(stats.ring_trims >= 1, "{stats:?}");
}

/// A write parked for room is checked again once admitted: a fence made while it waited
/// refuses it.
#[test]
fn a_waiting_write_is_checked_again_once_admitted() {
    let ring = ring_with(&FormatOptions::new(64 << 20));
    let policy = ReclaimPolicy::default().background(false);
    let options = StoreOptions::default().reclaim(policy);
    let store = LogDriveStore::open_with_options(&ring.path, options).expect("open");
    let drive = common::create(&store, 1);
    let mut address = 0;
    // Fill until a write parks (nothing reclaims until asked to).
    let parked = loop {
        let write = drive.submit_write(address, 1, value(32 << 10, address));
        match write.wait_deadline(Instant::now() + Duration::from_millis(200)) {
            Ok(outcome) => outcome.expect("a write with room"),
            Err(parked) => break parked,
        }
        wait(drive.trim(address.saturating_sub(4))).expect("trim");
        address += 1;
    };
    assert_eq!(store.reclaim_stats().waiting_records, 1);
    wait(drive.fence(2)).expect("a fence uses the control reserve");
    store.reclaim_now().expect("reclaim");
    assert_eq!(parked.wait(), Err(LogDriveError::Fenced { current: 2 }));
    assert_eq!(common::read(&drive, address), ReadOutcome::Unwritten);
    // With room, a write at the fence's epoch goes in.
    wait(drive.write(address, 2, value(32 << 10, address))).expect("write");
}

/// Rings a store cannot keep its promises on are refused when it opens, naming what would
/// work: too few segments for their size (a 16 MiB ring of three 4 MiB segments, whose
/// reserves would take over half of it), and a drive that queues appends for room.
#[test]
fn unsound_rings_and_options_are_refused_at_open() {
    let ring = ring_with(&FormatOptions::new(16 << 20).segment_size_bytes(4 << 20));
    let refused = LogDriveStore::open_with_options(&ring.path, StoreOptions::default());
    let Err(StoreOpenError::Geometry { path, source }) = refused else {
        panic!("{refused:?}");
    };
    assert_eq!(path, ring.path);
    assert_eq!((source.segment_count, source.segment_count_min), (3, 4));
    assert_eq!(source.ring_bytes_min, (16 << 20) + 2 * 4096);
    let message = source.to_string();
    assert!(message.contains("at least 4"), "{message}");
    // Nothing of the ring was changed: the engine opens it as it was.
    let drive = sealog::Drive::open(&ring.path, DriveOptions::default()).expect("opens");
    assert_eq!(drive.recovery_report().next_position.lap, 1);
    drive.close();
    let ring = ring_with(&FormatOptions::new(64 << 20));
    let waits = DriveOptions::default().when_full(WhenFull::Wait(Duration::from_secs(1)));
    let refused =
        LogDriveStore::open_with_options(&ring.path, StoreOptions::default().drive(waits));
    assert!(
        matches!(refused, Err(StoreOpenError::WhenFullWait { .. })),
        "{refused:?}"
    );
}
