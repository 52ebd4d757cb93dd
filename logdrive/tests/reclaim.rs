//! Reclaiming the ring's space: the head advances past what no live LogDrive needs (deleted
//! LogDrives, trimmed and sealed-off addresses) without copying; a long-lived LogDrive that
//! pins the head has its records relocated forward (the ledger workload: 1,000 LogDrives,
//! eight pipelining writers, all but one old LogDrive deleted, the ring's space reclaimed to
//! within the configured bound); creations, seals, fences and trim points are carried
//! forward and survive restarts; generations are never issued twice even once every record
//! of the old ones has left the ring; readers follow values relocation moves under them; and
//! a ring that clients filled is reclaimed (relocation keeps its reserve) lap after lap.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::read;
use sealog::{DriveOptions, FormatOptions};
use sealog_logdrive::record::{Record, RecordType};
use sealog_logdrive::{
    wait, LocalLogDrive, LogDrive, LogDriveError, LogDriveStore, ReadOutcome, ReclaimPolicy,
    ReclaimStats, StoreOpenError, StoreOptions,
};

/// A file ring of `size` bytes in `segment`-byte segments, batches up to `batch` bytes.
fn ring_of(size: u64, segment: u64, batch: u32) -> common::Ring {
    let directory = tempfile::tempdir().expect("temporary directory");
    let path = directory.path().join("ring");
    let options = FormatOptions::new(size)
        .segment_size_bytes(segment)
        .batch_size_max_bytes(batch);
    sealog::format(&path, &options).expect("format");
    common::Ring::from_parts(directory, path)
}

fn open_with(ring: &common::Ring, reclaim: ReclaimPolicy) -> LogDriveStore {
    let options = StoreOptions::default().reclaim(reclaim);
    LogDriveStore::open_with_options(&ring.path, options).expect("open")
}

/// A policy run by hand ([`LogDriveStore::reclaim_now`]), relocating above `bound`.
fn by_hand(bound: f64) -> ReclaimPolicy {
    ReclaimPolicy::default()
        .background(false)
        .space_amplification_max(bound)
        .bandwidth_share(1.0)
}

fn create(store: &LogDriveStore, id: u64) -> LocalLogDrive {
    wait(store.create(id, 1 << 40)).expect("create")
}

/// A 4 KiB payload naming its LogDrive and address.
fn page(id: u64, address: u64) -> Bytes {
    let mut bytes = vec![(id * 31 + address) as u8; 4096];
    let name = format!("logdrive {id} address {address}");
    bytes[..name.len()].copy_from_slice(name.as_bytes());
    Bytes::from(bytes)
}

/// Writes `addresses` of `drive`, all in flight at once.
fn write_all(drive: &LocalLogDrive, addresses: impl IntoIterator<Item = u64>) {
    let futures: Vec<_> = addresses
        .into_iter()
        .map(|address| drive.write(address, 1, page(drive.id(), address)))
        .collect();
    for future in futures {
        wait(future).expect("write");
    }
}

fn check_pages(drive: &dyn LogDrive, id: u64, addresses: impl IntoIterator<Item = u64>) {
    for address in addresses {
        assert_eq!(
            read(drive, address),
            ReadOutcome::Value(page(id, address)),
            "LogDrive {id} address {address}"
        );
    }
}

fn reopen(ring: &common::Ring, store: LogDriveStore, reclaim: ReclaimPolicy) -> LogDriveStore {
    store.close();
    drop(store);
    open_with(ring, reclaim)
}

fn print(what: &str, stats: &ReclaimStats) {
    println!(
        "{what}: occupied {} of {} bytes, live {}, amplification {:.2}, {} steps ({} \
         relocating), {} records relocated ({} bytes), {} garbage records passed, {} ring \
         trims, {} generation records, refused {} writes {} controls {} copies",
        stats.occupied_bytes,
        stats.capacity_bytes,
        stats.live_bytes,
        stats.space_amplification,
        stats.steps,
        stats.relocation_steps,
        stats.relocated_records,
        stats.relocated_bytes,
        stats.garbage_records,
        stats.ring_trims,
        stats.generation_records,
        stats.refused_writes,
        stats.refused_controls,
        stats.refused_copies,
    );
}

#[test]
fn deleted_logdrives_free_the_head_without_relocation() {
    let ring = ring_of(32 << 20, 1 << 20, 256 << 10);
    let store = open_with(&ring, by_hand(2.0));
    let drives: Vec<_> = (0..40)
        .map(|id| {
            let drive = create(&store, id);
            write_all(&drive, 0..32);
            drive
        })
        .collect();
    let before = store.reclaim_stats();
    for id in 0..39 {
        wait(store.delete(id)).unwrap();
    }
    // The survivor's records lie at the ring's end: nothing before them is needed.
    let after = store.reclaim_now().unwrap();
    print("after the deletions", &after);
    assert_eq!(after.relocated_records, 0);
    assert!(after.ring_trims > 0);
    assert!(
        after.advances > 0,
        "the head moved without reading: {after:?}"
    );
    assert!(
        after.occupied_bytes < before.occupied_bytes / 10,
        "{} of {} bytes still occupied",
        after.occupied_bytes,
        before.occupied_bytes
    );
    check_pages(&drives[39], 39, 0..32);
    drop(drives);
    let store = reopen(&ring, store, by_hand(2.0));
    assert_eq!(store.ids().expect("ids"), [39]);
    check_pages(&store.get(39).unwrap(), 39, 0..32);
    // Replay passes over the deletions' records (after the survivor's) and what garbage the
    // head stopped short of: it moves without a read to the survivor's chunk of 256 LSNs.
    let skipped = store.skipped_records();
    assert!(
        (39..39 + 256).contains(&skipped),
        "{skipped} records skipped"
    );
}

/// The ledger workload of the issue: LogDrive 0 is old and lives on (its records written
/// first and then once a round between everyone else's), 999 more are written by eight
/// writers pipelining, then every one but LogDrive 0 is deleted; the background reclaimer
/// brings the ring's occupied bytes within the configured bound of the live bytes.
#[test]
fn the_ledger_workload_reclaims_the_ring_to_within_the_bound() {
    const DRIVES: u64 = 1_000;
    const WRITERS: usize = 8;
    const ROUNDS: u64 = 10;
    let bound = 1.5;
    let policy = ReclaimPolicy::default().space_amplification_max(bound);
    let ring = ring_of(96 << 20, 2 << 20, 1 << 20);
    let store = open_with(&ring, policy.clone());
    let drives: Vec<_> = (0..DRIVES).map(|id| create(&store, id)).collect();
    let old = drives[0].clone();
    write_all(&old, 0..64);
    let mut old_written = 64;
    for round in 0..ROUNDS {
        std::thread::scope(|scope| {
            for share in drives[1..].chunks(drives.len() / WRITERS + 1) {
                scope.spawn(move || {
                    let futures: Vec<_> = share
                        .iter()
                        .map(|drive| drive.write(round, 1, page(drive.id(), round)))
                        .collect();
                    for future in futures {
                        wait(future).expect("write");
                    }
                });
            }
        });
        write_all(&old, old_written..old_written + 8);
        old_written += 8;
    }
    let full = store.reclaim_stats();
    print("written", &full);
    let deletions: Vec<_> = (1..DRIVES).map(|id| store.delete(id)).collect();
    for deletion in deletions {
        wait(deletion).unwrap();
    }
    drop(drives);
    let started = Instant::now();
    let stats = loop {
        let stats = store.reclaim_stats();
        let within =
            stats.live_bytes > 0 && stats.occupied_bytes as f64 <= bound * stats.live_bytes as f64;
        if within || started.elapsed() > Duration::from_secs(60) {
            break stats;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    print(&format!("reclaimed in {:?}", started.elapsed()), &stats);
    let live_pages = old_written * (4096 + sealog::ENTRY_HEADER_SIZE as u64);
    assert!(stats.live_bytes >= live_pages, "{stats:?}");
    assert!(
        stats.occupied_bytes as f64 <= bound * stats.live_bytes as f64,
        "occupied {} bytes for {} live after {:?}",
        stats.occupied_bytes,
        stats.live_bytes,
        started.elapsed()
    );
    assert!(stats.relocated_records >= old_written - 8, "{stats:?}");
    assert_eq!(stats.refused_copies, 0);
    check_pages(&old, 0, 0..old_written);
    drop(old);
    let store = reopen(&ring, store, policy);
    assert_eq!(store.ids().expect("ids"), [0]);
    check_pages(&store.get(0).unwrap(), 0, 0..old_written);
    println!(
        "reopened: replay skipped {} records the reclaimer left between the copies",
        store.skipped_records()
    );
}

/// What a LogDrive answers, through the trait.
fn answers(drive: &dyn LogDrive, addresses: u64) -> (sealog_logdrive::Length, Vec<ReadOutcome>) {
    let length = wait(drive.length()).unwrap();
    let reads = (0..addresses).map(|a| read(drive, a)).collect();
    (length, reads)
}

/// Writes garbage: a LogDrive of 4 KiB pages created, filled and deleted, `pages` of them.
fn churn(store: &LogDriveStore, id: u64, pages: u64) {
    let drive = create(store, id);
    write_all(&drive, 0..pages);
    drop(drive);
    wait(store.delete(id)).unwrap();
}

#[test]
fn creations_seals_fences_and_trims_are_carried_forward_lap_after_lap() {
    let ring = ring_of(16 << 20, 1 << 20, 256 << 10);
    let policy = by_hand(1.0);
    let store = open_with(&ring, policy.clone());
    // Three LogDrives whose control records sit at the ring's head.
    let sealed = create(&store, 1);
    write_all(&sealed, 0..12);
    wait(sealed.seal(9, 0)).unwrap();
    let fenced = create(&store, 2);
    write_all(&fenced, 0..5);
    wait(fenced.fence(4)).unwrap();
    wait(fenced.write(5, 7, page(2, 5))).unwrap();
    let trimmed = create(&store, 3);
    write_all(&trimmed, 0..10);
    wait(trimmed.trim(6)).unwrap();
    let empty = create(&store, 4);
    let expected: BTreeMap<u64, _> = [(1, &sealed), (2, &fenced), (3, &trimmed), (4, &empty)]
        .into_iter()
        .map(|(id, drive)| (id, answers(drive, 14)))
        .collect();
    drop((sealed, fenced, trimmed, empty));
    // Four laps of the ring in garbage, the reclaimer relocating as it goes.
    let mut store = store;
    for lap in 0..4u64 {
        for round in 0..12 {
            churn(&store, 100 + lap * 100 + round, 64);
            store.reclaim_now().unwrap();
        }
        for (id, answered) in &expected {
            assert_eq!(
                &answers(&store.get(*id).unwrap(), 14),
                answered,
                "lap {lap}"
            );
        }
        store = reopen(&ring, store, policy.clone());
        for (id, answered) in &expected {
            assert_eq!(
                &answers(&store.get(*id).unwrap(), 14),
                answered,
                "lap {lap}, reopened"
            );
        }
        assert_eq!(store.ids().expect("ids"), [1, 2, 3, 4]);
    }
    let stats = store.reclaim_stats();
    print("after four laps", &stats);
    // The fence and the seal still refuse what they refused.
    let fenced = store.get(2).unwrap();
    assert_eq!(
        wait(fenced.write(8, 3, page(2, 8))),
        Err(LogDriveError::Fenced { current: 4 })
    );
    assert_eq!(
        wait(store.get(1).unwrap().write(9, 9, page(1, 9))),
        Err(LogDriveError::Sealed { length: 9 })
    );
}

#[test]
fn generations_are_never_issued_twice_once_their_records_left_the_ring() {
    let ring = ring_of(16 << 20, 1 << 20, 256 << 10);
    let policy = by_hand(1.0);
    let store = open_with(&ring, policy.clone());
    let mut generation = 0;
    for _ in 0..5 {
        let drive = create(&store, 5);
        assert!(drive.generation() > generation);
        generation = drive.generation();
        write_all(&drive, 0..4);
        drop(drive);
        wait(store.delete(5)).unwrap();
    }
    let last_delete = store.drive().durable_lsn();
    // A lap and more of garbage that other ids write and delete: the head passes every
    // record of id 5's generations, and of the garbage's own creations.
    let mut store = store;
    for round in 0..40 {
        churn(&store, 1000 + round, 32);
        store.reclaim_now().unwrap();
    }
    let stats = store.reclaim_stats();
    print("after the garbage", &stats);
    assert!(stats.head_lsn > last_delete, "{stats:?}");
    assert!(stats.generation_records > 0, "{stats:?}");
    store = reopen(&ring, store, policy);
    let again = create(&store, 5);
    assert!(
        again.generation() > generation + 40,
        "generation {} after {} and 40 more",
        again.generation(),
        generation
    );
}

#[test]
fn readers_follow_values_relocation_moves_under_them() {
    let ring = ring_of(16 << 20, 1 << 20, 256 << 10);
    let policy = ReclaimPolicy::default()
        .space_amplification_max(1.0)
        .bandwidth_share(1.0);
    let store = open_with(&ring, policy);
    let old = create(&store, 0);
    write_all(&old, 0..256);
    let stop = AtomicBool::new(false);
    let reads = std::thread::scope(|scope| {
        let readers: Vec<_> = (0..4u64)
            .map(|reader| {
                let (old, stop) = (old.clone(), &stop);
                scope.spawn(move || {
                    let mut reads = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let address = (reads * 7 + reader * 64) % 256;
                        let outcome = wait(old.read(address)).expect("read");
                        assert_eq!(outcome, ReadOutcome::Value(page(0, address)));
                        reads += 1;
                    }
                    reads
                })
            })
            .collect();
        for round in 0..60 {
            churn(&store, 10 + round, 48);
        }
        // Let the reclaimer finish with the readers still reading.
        std::thread::sleep(Duration::from_millis(300));
        stop.store(true, Ordering::Relaxed);
        readers.into_iter().map(|r| r.join().unwrap()).sum::<u64>()
    });
    let stats = store.reclaim_stats();
    print(&format!("{reads} reads beside relocation"), &stats);
    assert!(stats.relocated_records >= 256, "{stats:?}");
    check_pages(&old, 0, 0..256);
    // Rewriting a relocated value is still idempotent, and a different one a conflict.
    wait(old.write(3, 1, page(0, 3))).unwrap();
    assert_eq!(
        wait(old.write(3, 1, page(0, 4))),
        Err(LogDriveError::Conflict { address: 3 })
    );
}

/// Clients fill the ring (writes refused as RingFull) while an old LogDrive pins its head:
/// the reclaimer, copying into the reserve kept for it, frees room lap after lap, and the
/// writers go on; nothing deadlocks and nothing is lost.
#[test]
fn a_ring_clients_filled_is_reclaimed_lap_after_lap() {
    let ring = ring_of(8 << 20, 512 << 10, 128 << 10);
    // Relocation slow and never ahead of need: the writers fill the ring before it runs.
    let policy = ReclaimPolicy::default()
        .free_min_fraction(0.0)
        .bandwidth_share(0.05);
    let store = open_with(&ring, policy.clone());
    let old = create(&store, 0);
    let mut old_written = 0;
    let mut refused = 0u64;
    let mut written = 0u64;
    let started = Instant::now();
    let mut next_id = 1;
    // About six laps of the ring.
    while written < 6 * (8 << 20) {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "no progress: {:?}",
            store.reclaim_stats()
        );
        let drive = match wait(store.create(next_id, 1 << 40)) {
            Ok(drive) => drive,
            Err(LogDriveError::RingFull) => {
                refused += 1;
                std::thread::sleep(Duration::from_millis(1));
                continue;
            }
            Err(error) => panic!("create: {error}"),
        };
        let mut address = 0;
        while address < 16 {
            match wait(drive.write(address, 1, page(next_id, address))) {
                Ok(()) => {
                    address += 1;
                    written += 4096;
                }
                Err(LogDriveError::RingFull) => {
                    refused += 1;
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(error) => panic!("write: {error}"),
            }
        }
        loop {
            match wait(old.write(old_written, 1, page(0, old_written))) {
                Ok(()) => break,
                Err(LogDriveError::RingFull) => {
                    refused += 1;
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(error) => panic!("old write: {error}"),
            }
        }
        old_written += 1;
        drop(drive);
        // Deletions use the control reserve: refused only while relocation has the ring's
        // last room (until the head's segment frees).
        loop {
            match wait(store.delete(next_id)) {
                Ok(()) => break,
                Err(LogDriveError::RingFull) => {
                    refused += 1;
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(error) => panic!("delete: {error}"),
            }
        }
        next_id += 1;
    }
    let stats = store.reclaim_stats();
    print(
        &format!(
            "{written} bytes written in {:?}, {refused} refusals",
            started.elapsed()
        ),
        &stats,
    );
    // Writes that found the ring full waited for room (the store's admission counts each
    // refusal of room, waited for or not).
    assert!(stats.refused_writes > 0, "the ring never filled");
    assert!(stats.relocated_records > 0);
    assert_eq!(stats.refused_copies, 0);
    check_pages(&old, 0, 0..old_written);
    drop(old);
    let store = reopen(&ring, store, policy);
    check_pages(&store.get(0).unwrap(), 0, 0..old_written);
    assert_eq!(store.ids().expect("ids"), [0]);
}

#[test]
fn a_reserve_too_small_for_relocation_is_refused() {
    let ring = ring_of(8 << 20, 512 << 10, 128 << 10);
    let policy = ReclaimPolicy::default().reserve_bytes(Some(64 << 10));
    let options = StoreOptions::default().reclaim(policy);
    let error = LogDriveStore::open_with_options(&ring.path, options).unwrap_err();
    assert!(matches!(error, StoreOpenError::Policy { .. }), "{error}");
    assert!(error.to_string().contains("below"), "{error}");
    let bad = ReclaimPolicy::default().space_amplification_max(0.5);
    let options = StoreOptions::default().reclaim(bad);
    let error = LogDriveStore::open_with_options(&ring.path, options).unwrap_err();
    assert!(error.to_string().contains("below 1"), "{error}");
    // And the store opens with a sound one.
    drop(LogDriveStore::open(&ring.path, DriveOptions::default()).unwrap());
}

#[test]
fn a_trimmed_prefix_and_a_sealed_off_tail_are_garbage() {
    let ring = ring_of(16 << 20, 1 << 20, 256 << 10);
    let store = open_with(&ring, by_hand(1.0));
    let drive = create(&store, 1);
    write_all(&drive, 0..400);
    wait(drive.trim(380)).unwrap();
    let sealed = create(&store, 2);
    write_all(&sealed, 0..400);
    wait(sealed.seal(20, 0)).unwrap();
    let stats = store.reclaim_now().unwrap();
    print("after a trim and a seal", &stats);
    // What is left: 20 pages of each, their creations and controls.
    let pages = 40 * (4096 + sealog::ENTRY_HEADER_SIZE as u64);
    assert!(stats.live_bytes < pages + 4096, "{stats:?}");
    assert!(stats.occupied_bytes < 3 * pages, "{stats:?}");
    check_pages(&drive, 1, 380..400);
    check_pages(&sealed, 2, 0..20);
    assert_eq!(read(&sealed, 25), ReadOutcome::Unwritten);
    assert_eq!(read(&drive, 3), ReadOutcome::Trimmed { first: 380 });
}

/// A crash between two relocation steps: the first copied a LogDrive's creation and the
/// writes above its trim point forward and trimmed the ring up to the trim's own record
/// (the writes below it are garbage), the second would have copied the trim. Replay then
/// meets the trim before any of the LogDrive's writes: it must not refuse it as beyond T
/// (the writes that made T are gone with the ring's head, not missing), or the
/// acknowledged trim point is lost and the trimmed addresses read as holes. Found by the
/// crash-state enumeration of LogDrive workloads (`sealog-fault`).
#[test]
fn a_trim_point_survives_a_crash_after_the_head_passed_the_writes_it_trimmed() {
    use sealog_logdrive::record::{Record, RecordType};
    let ring = common::ring();
    {
        let drive = sealog::Drive::open(&ring.path, DriveOptions::default()).unwrap();
        let append = |record: Record, payload: Bytes| {
            let entry = sealog::NewEntry {
                kind: record.record_type.kind(),
                header: record.header(),
                payload,
            };
            drive.append(entry).unwrap().wait().unwrap()
        };
        let record = |record_type, value| Record::new(record_type, 1, 1, value, 0);
        append(record(RecordType::Create, 1 << 40), Bytes::new());
        for address in 0..5 {
            append(record(RecordType::Write, address), page(1, address));
        }
        let trim = append(record(RecordType::Trim, 3), Bytes::new());
        // The first step's copies: the creation and the writes the trim keeps.
        append(
            record(RecordType::Create, 1 << 40).relocated(),
            Bytes::new(),
        );
        for address in 3..5 {
            append(
                record(RecordType::Write, address).relocated(),
                page(1, address),
            );
        }
        // Its ring trim: the head now at the trim's own record.
        drive.trim(trim - 1).unwrap();
    }
    let store = open_with(&ring, by_hand(1.0));
    let drive = store.get(1).unwrap();
    let length = wait(drive.length()).unwrap();
    assert_eq!((length.first, length.t, length.n), (3, 5, 5));
    assert_eq!(read(&drive, 1), ReadOutcome::Trimmed { first: 3 });
    check_pages(&drive, 1, 3..5);
}

/// A write durable on the ring whose future nobody has polled yet (its outcome not taken in:
/// the state does not know its record) holds the head: once relocation has copied its
/// LogDrive's creation past it, nothing the LogDrive is known to need lies below the write,
/// and only the bound below records whose outcomes are not taken in keeps the advance past
/// garbage, which reads nothing, from trimming it. The value reads back once its future is
/// waited for, before and after a restart.
#[test]
fn a_write_whose_outcome_is_not_taken_in_holds_the_head() {
    let ring = ring_of(16 << 20, 1 << 20, 256 << 10);
    // Small steps: the walk copies the creation and stops well before the held write.
    let policy = by_hand(2.0).step_bytes(Some(64 << 10));
    let store = open_with(&ring, policy.clone());
    let held = create(&store, 2);
    let garbage = create(&store, 1);
    write_all(&garbage, 0..600);
    let pending = held.submit_write(0, 1, page(2, 0));
    // More garbage after it, waited for: the held write is durable by then.
    write_all(&garbage, 600..1200);
    drop(garbage);
    wait(store.delete(1)).unwrap();
    let stats = store.reclaim_now().unwrap();
    print("with a write not taken in", &stats);
    assert!(
        stats.advances > 0 && stats.relocated_records > 0,
        "{stats:?}"
    );
    pending.wait().expect("the held write");
    check_pages(&held, 2, 0..1);
    drop(held);
    let store = reopen(&ring, store, policy);
    check_pages(&store.get(2).unwrap(), 2, 0..1);
}

/// The head advances by the counts to the exact LSN of the first record a LogDrive needs,
/// reading nothing: a deleted LogDrive's 600 writes, then a live LogDrive's creation, and the
/// head lands on that creation with no record read (none relocated, none passed as garbage
/// by a walk).
#[test]
fn the_head_advances_to_the_first_needed_record_without_a_read() {
    let ring = ring_of(32 << 20, 1 << 20, 256 << 10);
    let policy = by_hand(100.0);
    let store = open_with(&ring, policy.clone());
    let deleted = create(&store, 2);
    write_all(&deleted, 0..600);
    drop(deleted);
    wait(store.delete(2)).unwrap();
    let creation = store.drive().durable_lsn() + 1;
    let kept = create(&store, 1);
    write_all(&kept, 0..1);
    let stats = store.reclaim_now().unwrap();
    print("after the advance", &stats);
    assert_eq!(stats.head_lsn, creation, "{stats:?}");
    assert_eq!(
        (stats.garbage_records, stats.relocated_records),
        (0, 0),
        "{stats:?}"
    );
    check_pages(&kept, 1, 0..1);
    drop(kept);
    let store = reopen(&ring, store, policy);
    check_pages(&store.get(1).unwrap(), 1, 0..1);
    assert_eq!(store.ids().expect("ids"), [1]);
}

/// A relocating walk reads the needed records that hold the head and no more than 256 LSNs
/// of the garbage after them: the counts the states keep take the head on past the rest
/// without a read. Here one long-lived LogDrive's creation lies at the head, 2,000 trimmed
/// writes of another behind it, and the trim's record and a needed write after them: the
/// reclaimer copies the creations, reads 256 LSNs of the garbage, trims, and moves the head
/// to the trim's record by the counts.
#[test]
fn a_relocating_walk_reads_garbage_only_256_lsns_past_what_it_copied() {
    let ring = ring_of(32 << 20, 1 << 20, 256 << 10);
    // Steps big enough to walk the whole garbage in one, were it read.
    let policy = by_hand(1.0)
        .occupancy_min_fraction(0.0)
        .step_bytes(Some(16 << 20));
    let store = open_with(&ring, policy.clone());
    let long_lived = create(&store, 1);
    let trimmed = create(&store, 2);
    write_all(&trimmed, 0..2000);
    wait(trimmed.trim(2000)).unwrap();
    write_all(&long_lived, 0..1);
    let stats = store.reclaim_now().unwrap();
    print("after the relocation", &stats);
    // The two creations (once the head passed the garbage, what is left is under a segment
    // and not worth relocating).
    assert!(stats.relocated_records >= 2, "{stats:?}");
    assert!(
        stats.garbage_records <= 256,
        "the walk read {} garbage records of 2,000, not at most 256 past its copies",
        stats.garbage_records
    );
    assert!(stats.advances > 0, "{stats:?}");
    check_pages(&long_lived, 1, 0..1);
    assert_eq!(read(&trimmed, 5), ReadOutcome::Trimmed { first: 2000 });
    drop((long_lived, trimmed));
    let store = reopen(&ring, store, policy);
    check_pages(&store.get(1).unwrap(), 1, 0..1);
    assert_eq!(
        read(&store.get(2).unwrap(), 5),
        ReadOutcome::Trimmed { first: 2000 }
    );
}

/// The creations one walk relocates are copied as one group, so that they lie together on
/// the ring even while clients write (and the next lap reads them, not the clients' garbage
/// between them): 300 long-lived LogDrives' creations at the head, relocated while a writer
/// keeps appending (and trimming) a churning LogDrive. Every long-lived LogDrive's newest
/// creation copy then lies in one run of consecutive LSNs per segment the creations were in;
/// the LogDrives survive a reopen.
#[test]
fn creations_relocated_together_lie_together_while_clients_write() {
    const LONG_LIVED: u64 = 300;
    let ring = ring_of(32 << 20, 1 << 20, 1 << 20);
    let policy = by_hand(1.0).occupancy_min_fraction(0.0);
    let store = open_with(&ring, policy.clone());
    // The creations first (one walk meets them all within its budget), then a page each.
    let long_lived: Vec<LocalLogDrive> = (0..LONG_LIVED).map(|id| create(&store, id)).collect();
    for drive in &long_lived {
        write_all(drive, 0..1);
    }
    drop(long_lived);
    let churn = create(&store, 1000);
    let stop = AtomicBool::new(false);
    let stats = std::thread::scope(|scope| {
        let writer = scope.spawn(|| {
            let mut next = 0u64;
            let mut pending = std::collections::VecDeque::new();
            while !stop.load(Ordering::Relaxed) {
                pending.push_back(churn.write(next, 1, page(1000, next)));
                next += 1;
                if pending.len() == 16 {
                    wait(pending.pop_front().unwrap()).expect("churn write");
                }
                if next % 256 == 0 {
                    wait(churn.trim(next - 16)).expect("churn trim");
                }
            }
            pending.into_iter().for_each(|write| wait(write).unwrap());
        });
        let started = Instant::now();
        let stats = loop {
            let stats = store.reclaim_now().unwrap();
            if stats.relocated_records >= 2 * LONG_LIVED {
                break stats;
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "no relocation: {stats:?}"
            );
            std::thread::sleep(Duration::from_millis(1));
        };
        stop.store(true, Ordering::Relaxed);
        writer.join().unwrap();
        stats
    });
    print("after relocating the creations", &stats);
    let drive = store.drive();
    let mut newest: BTreeMap<u64, u64> = BTreeMap::new();
    for entry in drive.iter_from(drive.first_live_lsn()) {
        let entry = entry.expect("entry");
        let Some(record) = Record::decode(entry.kind, &entry.header) else {
            continue;
        };
        if record.record_type == RecordType::Create && record.relocated && record.id < LONG_LIVED {
            newest.insert(record.id, entry.lsn);
        }
    }
    assert_eq!(newest.len() as u64, LONG_LIVED, "a creation not relocated");
    let lsns: Vec<u64> = {
        let mut lsns: Vec<u64> = newest.values().copied().collect();
        lsns.sort_unstable();
        lsns
    };
    let breaks = lsns
        .windows(2)
        .filter(|pair| pair[1] != pair[0] + 1)
        .count();
    // A relocating walk stays within its head's segment (so that a segment it copied out
    // of is finished before the next is begun): the copies lie in one run per segment the
    // creations were in, two here (300 creations made one at a time take 300 blocks, more
    // than a 1 MiB segment's 255).
    assert!(
        breaks <= 1,
        "the creations' copies lie in {} runs, not two: {lsns:?}",
        breaks + 1
    );
    drop(churn);
    let store = reopen(&ring, store, policy);
    for id in 0..LONG_LIVED {
        check_pages(&store.get(id).unwrap(), id, 0..1);
    }
}
