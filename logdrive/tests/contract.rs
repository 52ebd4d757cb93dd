//! The LogDrive contract at its edges (docs/logdrive.md, "What a LogDrive promises"): two
//! values with one CRC are still two values; one weak_tail call costs O(k) at most and a k
//! over the store's most is refused; a closed store answers `Stopped` everywhere; seals carry
//! their sealer's epoch; definite and indeterminate are properties of error values; an
//! operation is issued when it is called, not when its future is first polled.

mod common;

use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{create, open, read, ring, value, write};
use sealog_logdrive::{
    wait, LogDrive, LogDriveError, LogDriveStore, ReadOutcome, StoreOptions, TailDesc,
};

/// CRC32C's table (reflected polynomial 0x82F63B78), for forging a collision.
fn crc32c_table() -> [u32; 256] {
    let mut table = [0u32; 256];
    for (index, entry) in table.iter_mut().enumerate() {
        let mut crc = index as u32;
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0x82F6_3B78
            } else {
                crc >> 1
            };
        }
        *entry = crc;
    }
    table
}

/// `prefix` followed by the four bytes that give the whole the CRC32C `target`: the register
/// the CRC must hold before four bytes to end at `target` is found by running the table
/// backwards (each entry's top byte is unique), and the bytes are its difference from the
/// register the prefix leaves.
fn forge(prefix: &[u8], target: u32) -> Vec<u8> {
    let table = crc32c_table();
    let mut inverse = [0u8; 256];
    for (index, entry) in table.iter().enumerate() {
        inverse[(entry >> 24) as usize] = index as u8;
    }
    let after_prefix = !crc32c::crc32c(prefix);
    let mut register = !target;
    for _ in 0..4 {
        let index = inverse[(register >> 24) as usize];
        register = ((register ^ table[index as usize]) << 8) | u32::from(index);
    }
    let mut forged = prefix.to_vec();
    forged.extend_from_slice(&(register ^ after_prefix).to_le_bytes());
    forged
}

/// Two values with one CRC32C and one length, written together at one address: one is
/// acknowledged, the other is a `Conflict`, and the one acknowledged is what reads (also
/// after a reopen); once it is durable, the other is a `Conflict` again (read back and
/// compared). Before the bytes were compared, both writes answered Ok.
#[test]
fn two_values_sharing_a_crc_are_never_both_acknowledged() {
    let a = vec![0xa5u8; 64];
    let b = forge(&[0x5au8; 60], crc32c::crc32c(&a));
    assert_eq!(b.len(), a.len());
    assert_eq!(crc32c::crc32c(&b), crc32c::crc32c(&a), "a forged collision");
    assert_ne!(a, b);
    let ring = ring();
    let store = open(&ring);
    let drive = create(&store, 2);
    for round in 0..20u64 {
        let address = round;
        let first = drive.write(address, 0, Bytes::from(a.clone()));
        let second = drive.write(address, 0, Bytes::from(b.clone()));
        let outcomes = (wait(first), wait(second));
        assert_eq!(
            outcomes,
            (Ok(()), Err(LogDriveError::Conflict { address })),
            "round {round}"
        );
        assert_eq!(read(&drive, address), value(&a));
        assert_eq!(
            write(&drive, address, 0, &b),
            Err(LogDriveError::Conflict { address })
        );
        write(&drive, address, 0, &a).expect("the same bytes again");
    }
    drop(drive);
    store.close();
    drop(store);
    let store = open(&ring);
    let drive = store.get(2).expect("live");
    for address in 0..20 {
        assert_eq!(read(&drive, address), value(&a));
        assert_eq!(
            write(&drive, address, 0, &b),
            Err(LogDriveError::Conflict { address })
        );
    }
}

/// A rewrite waited for before the first write at its address: the first write's outcome is
/// not taken in yet (its future has not been polled), so the rewrite finds the value in the
/// log, where the first record of the address holds it. A collision is a `Conflict`, the
/// same bytes are acknowledged, and the first value is what reads, also after a reopen.
#[test]
fn a_rewrite_waited_for_before_the_first_write_is_still_compared() {
    let a = vec![0x3cu8; 4096];
    let b = forge(&[0xc3u8; 4092], crc32c::crc32c(&a));
    let ring = ring();
    let store = open(&ring);
    let drive = create(&store, 4);
    for address in 0..50u64 {
        let first = drive.write(address, 0, Bytes::from(a.clone()));
        let again = drive.write(address, 0, Bytes::from(a.clone()));
        let other = drive.write(address, 0, Bytes::from(b.clone()));
        assert_eq!(
            wait(other),
            Err(LogDriveError::Conflict { address }),
            "{address}"
        );
        assert_eq!(wait(again), Ok(()), "{address}");
        assert_eq!(wait(first), Ok(()), "{address}");
        assert_eq!(read(&drive, address), value(&a));
    }
    // A rewrite whose future is dropped is taken in later, and does not displace the value.
    let first = drive.write(50, 0, Bytes::from(a.clone()));
    drop(drive.write(50, 0, Bytes::from(b.clone())));
    assert_eq!(wait(first), Ok(()));
    write(&drive, 51, 0, b"later").unwrap();
    assert_eq!(read(&drive, 50), value(&a));
    drop(drive);
    store.close();
    drop(store);
    let store = open(&ring);
    let drive = store.get(4).expect("live");
    for address in 0..=50 {
        assert_eq!(read(&drive, address), value(&a));
    }
}

/// A log written before the bytes were compared (or crafted) may hold both values: replay
/// keeps the first, and a rewrite of the second is still told apart from it.
#[test]
fn replay_keeps_the_first_of_two_values_sharing_a_crc() {
    use sealog_logdrive::record::{Record, RecordType};
    let a = vec![0x11u8; 64];
    let b = forge(&[0x22u8; 60], crc32c::crc32c(&a));
    let ring = ring();
    {
        let drive = sealog::Drive::open(&ring.path, sealog::DriveOptions::default()).unwrap();
        let append = |record: Record, payload: Vec<u8>| {
            let entry = record.entry(Bytes::from(payload));
            drive.append(entry).unwrap().wait().unwrap();
        };
        let record = |record_type, value| Record::new(record_type, 1, 1, value, 0);
        append(record(RecordType::Create, 100), Vec::new());
        append(record(RecordType::Write, 3), a.clone());
        append(record(RecordType::Write, 3), b.clone());
    }
    let store = open(&ring);
    let drive = store.get(1).unwrap();
    assert_eq!(read(&drive, 3), value(&a));
    assert_eq!(
        write(&drive, 3, 0, &b),
        Err(LogDriveError::Conflict { address: 3 })
    );
    assert_eq!(store.skipped_records(), 1);
}

/// One client call cannot exhaust the server: a k over the store's `weak_tail_k_max` is
/// `InvalidWindow` naming the most, and a k within it costs O(k) whatever N (here N is
/// 2^64 - 1: a window of 4,096 answers at once, where `weak_tail(u64::MAX)` once built a hole
/// set of 2^64 addresses).
#[test]
fn weak_tail_costs_at_most_its_window() {
    let ring = ring();
    let store = open(&ring);
    let drive = wait(store.create(1, u64::MAX)).expect("create");
    write(&drive, u64::MAX - 1, 0, b"far").expect("write");
    assert_eq!(
        wait(drive.weak_tail(u64::MAX)),
        Err(LogDriveError::InvalidWindow {
            k: u64::MAX,
            max: 4096
        })
    );
    assert_eq!(
        wait(drive.weak_tail(4097)),
        Err(LogDriveError::InvalidWindow { k: 4097, max: 4096 })
    );
    let started = Instant::now();
    let tail = wait(drive.weak_tail(4096)).expect("weak_tail");
    assert!(started.elapsed() < Duration::from_secs(1));
    assert_eq!(tail.n, u64::MAX);
    assert_eq!(tail.holes.len(), 4095);
    assert!(tail.holes_below_window);
    // A store may answer wider windows, never narrower than its writers keep.
    drop(drive);
    store.close();
    drop(store);
    let options = StoreOptions::default()
        .weak_tail_k_max(8)
        .write_window_max(64);
    let refused = LogDriveStore::open_with_options(&ring.path, options);
    let policy = match &refused {
        Err(sealog_logdrive::StoreOpenError::Policy { reason, .. }) => reason.clone(),
        other => panic!("{other:?}"),
    };
    assert!(policy.contains("weak_tail_k_max"), "{policy}");
}

/// After `close`, every operation on the store and on every handle answers `Stopped`: the
/// tail questions (which once answered from memory, a stale tail presented as current, even
/// after another store had reopened the ring and written on), reads of unwritten, trimmed and
/// written addresses, writes and controls their checks would refuse, and the store's own.
#[test]
fn a_closed_store_answers_stopped_to_everything() {
    let ring = ring();
    let store = open(&ring);
    let drive = create(&store, 1);
    write(&drive, 0, 1, b"x").unwrap();
    write(&drive, 1, 1, b"y").unwrap();
    wait(drive.trim(1)).unwrap();
    wait(drive.fence(5)).unwrap();
    let other = create(&store, 2);
    store.close();
    let stopped = |outcome: Result<(), LogDriveError>, what: &str| {
        assert!(
            matches!(outcome, Err(LogDriveError::Stopped { .. })),
            "{what}: {outcome:?}"
        );
    };
    stopped(wait(drive.weak_tail(4)).map(drop), "weak_tail");
    stopped(wait(drive.length()).map(drop), "length");
    for address in [0, 1, 2] {
        stopped(wait(drive.read(address)).map(drop), "read");
    }
    stopped(
        wait(drive.write(1, 1, Bytes::from_static(b"z"))),
        "conflict",
    );
    stopped(wait(drive.write(9, 1, Bytes::from_static(b"z"))), "fenced");
    stopped(wait(drive.write(9, 9, Bytes::from_static(b"z"))), "write");
    stopped(wait(drive.fence(5)), "the same fence");
    stopped(wait(drive.fence(1)), "a lower fence");
    stopped(wait(drive.seal(2, 5)), "seal");
    stopped(wait(drive.trim(1)), "trim");
    stopped(drive.damaged_addresses().map(drop), "damaged addresses");
    stopped(wait(other.length()).map(drop), "another handle");
    stopped(store.ids().map(drop), "ids");
    stopped(store.get(1).map(drop), "get");
    stopped(store.damaged().map(drop), "damaged");
    stopped(wait(store.create(3, 10)).map(drop), "create");
    stopped(wait(store.delete(1)), "delete");
    stopped(store.reclaim_now().map(drop), "reclaim");
    // Another store reopens the ring and writes on: the old handles still say nothing.
    let reopened = open(&ring);
    let again = reopened.get(1).unwrap();
    write(&again, 2, 5, b"later").unwrap();
    write(&again, 3, 5, b"later").unwrap();
    stopped(wait(drive.weak_tail(4)).map(drop), "a stale tail");
    assert_eq!(wait(again.length()).unwrap().n, 4);
}

/// A seal carries its sealer's epoch: below the fence it is refused (a stale coordinator
/// cannot seal after a newer one fenced), and it is checked again on replay.
#[test]
fn a_seal_below_the_fence_is_refused() {
    let ring = ring();
    let store = open(&ring);
    let drive = create(&store, 1);
    write(&drive, 0, 1, b"x").unwrap();
    wait(drive.fence(3)).unwrap();
    assert_eq!(
        wait(drive.seal(1, 2)),
        Err(LogDriveError::Fenced { current: 3 })
    );
    wait(drive.seal(1, 3)).unwrap();
    // The same seal again by a later epoch is idempotent; by an older one, refused.
    wait(drive.seal(1, 4)).unwrap();
    assert_eq!(
        wait(drive.seal(1, 1)),
        Err(LogDriveError::Fenced { current: 3 })
    );
    drop(drive);
    store.close();
    drop(store);
    let store = open(&ring);
    let length = wait(store.get(1).unwrap().length()).unwrap();
    assert_eq!((length.sealed, length.fence), (Some(1), 3));
}

/// A control the durable state already says writes nothing: the drive's next LSN does not
/// move; one the queued state says (not yet durable) is written again so that its
/// acknowledgement means durable.
#[test]
fn a_control_repeating_a_durable_one_writes_nothing() {
    let ring = ring();
    let store = open(&ring);
    let drive = create(&store, 1);
    for address in 0..4 {
        write(&drive, address, 1, b"x").unwrap();
    }
    wait(drive.fence(2)).unwrap();
    wait(drive.seal(4, 2)).unwrap();
    wait(drive.trim(3)).unwrap();
    let next = store.drive().next_lsn();
    for _ in 0..100 {
        wait(drive.fence(2)).unwrap();
        wait(drive.seal(4, 2)).unwrap();
        wait(drive.trim(3)).unwrap();
        wait(drive.trim(1)).unwrap();
    }
    assert_eq!(store.drive().next_lsn(), next, "repeats wrote records");
}

/// Whether an error is definite is the value's: a cause wrapped as indeterminate says so,
/// and names its cause.
#[test]
fn definite_or_indeterminate_is_a_property_of_the_error_value() {
    let fenced = LogDriveError::Fenced { current: 4 };
    assert!(fenced.is_definite());
    let maybe = fenced.clone().indeterminate();
    assert!(!maybe.is_definite());
    assert_eq!(maybe.cause(), &fenced);
    assert_eq!(maybe.clone().indeterminate(), maybe);
    assert!(maybe.to_string().contains("fenced at epoch 4"), "{maybe}");
    assert!(LogDriveError::RingFull.is_definite());
    assert!(!LogDriveError::Io { reason: "x".into() }.is_definite());
}

/// Operations are issued when called: a write whose future is dropped at once, never
/// polled, still happens (and a write to the same address after it is checked against it).
#[test]
fn dropping_a_writes_future_does_not_unsend_it() {
    let ring = ring();
    let store = open(&ring);
    let drive = create(&store, 1);
    for address in 0..64u64 {
        drop(drive.write(address, 1, common::payload(1, address)));
    }
    drop(drive.fence(7));
    // Checked against the dropped writes: the same bytes are fine, other bytes conflict.
    assert_eq!(
        write(&drive, 5, 7, b"other"),
        Err(LogDriveError::Conflict { address: 5 })
    );
    // A write waited for after them: acknowledgements go out in LSN order.
    write(&drive, 64, 7, b"last").unwrap();
    for address in 0..64 {
        assert_eq!(
            read(&drive, address),
            ReadOutcome::Value(common::payload(1, address))
        );
    }
    assert_eq!(wait(drive.length()).unwrap().fence, 7);
    assert_eq!(
        wait(drive.weak_tail(64)).unwrap(),
        TailDesc {
            n: 65,
            holes: Default::default(),
            holes_below_window: false
        }
    );
    drop(drive);
    store.close();
    drop(store);
    let store = open(&ring);
    assert_eq!(
        read(&store.get(1).unwrap(), 63),
        ReadOutcome::Value(common::payload(1, 63))
    );
}
