//! The worked scenarios of the LogDrive semantics that apply to one local drive, each as a
//! named test (LD-1, LD-4, the single-replica parts of ZW-1 and of the Azure seal scenarios
//! AZ-1 and AZ-2), and the rules around them (docs/logdrive.md, "What a LogDrive promises"):
//! write-once, seal, fence, trim, capacity, deletion and generations, definite and
//! indeterminate errors, and use as a trait object.

mod common;

use std::sync::Arc;

use bytes::Bytes;
use common::{create, holes, open, read, ring, tail, value, write};
use sealog_logdrive::{wait, Length, LogDrive, LogDriveError, ReadOutcome, TailDesc};

#[test]
fn ld1_window_k4_holes_3_and_5() {
    let ring = ring();
    let store = open(&ring);
    let drive = create(&store, 1);
    for address in [0, 1, 2, 4, 6] {
        write(&drive, address, 0, b"payload").unwrap();
    }
    let described = tail(&drive, 4);
    assert_eq!(
        described,
        TailDesc {
            n: 7,
            holes: holes(&[3, 5]),
            holes_below_window: false,
        }
    );
    assert_eq!(described.t(), 3);
    assert_eq!(read(&drive, 3), ReadOutcome::Unwritten);
    assert_eq!(read(&drive, 4), value(b"payload"));
    // Asked with a window smaller than N - T, weakTail answers the window scan: the holes
    // in [N - k, N), and that a hole lies below it.
    assert_eq!(
        tail(&drive, 3),
        TailDesc {
            n: 7,
            holes: holes(&[5]),
            holes_below_window: true,
        }
    );
    write(&drive, 3, 0, b"payload").unwrap();
    assert_eq!(
        tail(&drive, 4),
        TailDesc {
            n: 7,
            holes: holes(&[5]),
            holes_below_window: false,
        }
    );
    assert_eq!(tail(&drive, 4).t(), 5);
    write(&drive, 5, 0, b"payload").unwrap();
    assert_eq!(
        tail(&drive, 4),
        TailDesc {
            n: 7,
            holes: holes(&[]),
            holes_below_window: false,
        }
    );
    assert_eq!(tail(&drive, 4).t(), 7);
}

#[test]
fn ld4_single_value_rule() {
    let ring = ring();
    let store = open(&ring);
    let drive = create(&store, 1);
    write(&drive, 5, 0, b"A").unwrap();
    write(&drive, 5, 0, b"A").unwrap();
    assert_eq!(read(&drive, 5), value(b"A"));
    let conflict = write(&drive, 5, 0, b"B").unwrap_err();
    assert_eq!(conflict, LogDriveError::Conflict { address: 5 });
    assert!(conflict.is_definite());
    // The same length and a different byte: caught by the byte comparison, not the CRC.
    assert_eq!(
        write(&drive, 5, 0, b"C"),
        Err(LogDriveError::Conflict { address: 5 })
    );
    assert_eq!(read(&drive, 5), value(b"A"));
    write(&drive, 9, 0, b"v").unwrap();
    drop(drive);
    store.close();
    drop(store);
    let store = open(&ring);
    let drive = store.get(1).unwrap();
    assert_eq!(read(&drive, 9), value(b"v"));
    assert_eq!(read(&drive, 5), value(b"A"));
    assert_eq!(read(&drive, 10), ReadOutcome::Unwritten);
    assert_eq!(
        write(&drive, 5, 0, b"B"),
        Err(LogDriveError::Conflict { address: 5 })
    );
    write(&drive, 5, 0, b"A").unwrap();
}

#[test]
fn ld4_a_rewrite_while_the_first_is_in_flight_is_idempotent() {
    let ring = ring();
    let store = open(&ring);
    let drive = create(&store, 1);
    let first = drive.write(0, 0, Bytes::from_static(b"A"));
    let second = drive.write(0, 0, Bytes::from_static(b"A"));
    let different = drive.write(0, 0, Bytes::from_static(b"B"));
    assert_eq!(wait(different), Err(LogDriveError::Conflict { address: 0 }));
    wait(second).unwrap();
    wait(first).unwrap();
    assert_eq!(read(&drive, 0), value(b"A"));
    drop(drive);
    store.close();
    drop(store);
    let store = open(&ring);
    assert_eq!(read(&store.get(1).unwrap(), 0), value(b"A"));
}

/// A write whose future is dropped before it completes still counts once its record is
/// acknowledged: the LogDrive's next operation takes its outcome in.
#[test]
fn a_write_whose_future_was_dropped_is_taken_in_later() {
    let ring = ring();
    let store = open(&ring);
    let drive = create(&store, 1);
    drop(drive.write(0, 0, Bytes::from_static(b"A")));
    // A later record's acknowledgement is the earlier one's.
    write(&drive, 1, 0, b"B").unwrap();
    assert_eq!(read(&drive, 0), value(b"A"));
    assert_eq!(
        tail(&drive, 4),
        TailDesc {
            n: 2,
            holes: holes(&[]),
            holes_below_window: false,
        }
    );
}

#[test]
fn zw1_zombie_writer_rejected_after_fence_with_higher_epoch() {
    let ring = ring();
    let store = open(&ring);
    let segment = create(&store, 7);
    for address in 0..100 {
        write(&segment, address, 5, b"epoch 5").unwrap();
    }
    wait(segment.fence(6)).unwrap();
    let zombie = write(&segment, 100, 5, b"zombie").unwrap_err();
    assert_eq!(zombie, LogDriveError::Fenced { current: 6 });
    assert!(zombie.is_definite());
    assert_eq!(read(&segment, 100), ReadOutcome::Unwritten);
    // Recovery finds T, seals there; the next segment opens at epoch 6.
    let t = tail(&segment, 16).t();
    assert_eq!(t, 100);
    wait(segment.seal(t, 6)).unwrap();
    let next = create(&store, 8);
    write(&next, 0, 6, b"epoch 6").unwrap();
    drop((segment, next));
    store.close();
    drop(store);
    let store = open(&ring);
    let segment = store.get(7).unwrap();
    let length = wait(segment.length()).unwrap();
    assert_eq!((length.fence, length.sealed, length.t), (6, Some(100), 100));
    assert_eq!(
        write(&segment, 100, 5, b"zombie"),
        Err(LogDriveError::Fenced { current: 6 })
    );
    assert_eq!(
        write(&segment, 100, 6, b"late"),
        Err(LogDriveError::Sealed { length: 100 })
    );
    assert_eq!(read(&segment, 100), ReadOutcome::Unwritten);
    assert_eq!(read(&store.get(8).unwrap(), 0), value(b"epoch 6"));
}

#[test]
fn a_write_with_a_higher_epoch_does_not_move_the_fence() {
    let ring = ring();
    let store = open(&ring);
    let drive = create(&store, 1);
    wait(drive.fence(3)).unwrap();
    write(&drive, 0, 7, b"x").unwrap();
    assert_eq!(wait(drive.length()).unwrap().fence, 3);
    write(&drive, 1, 3, b"x").unwrap();
    assert_eq!(
        write(&drive, 2, 2, b"x"),
        Err(LogDriveError::Fenced { current: 3 })
    );
    assert_eq!(
        wait(drive.fence(2)),
        Err(LogDriveError::Fenced { current: 3 })
    );
    wait(drive.fence(3)).unwrap();
    wait(drive.fence(4)).unwrap();
    assert_eq!(
        write(&drive, 2, 3, b"x"),
        Err(LogDriveError::Fenced { current: 4 })
    );
}

#[test]
fn a_fence_survives_restart() {
    let ring = ring();
    let store = open(&ring);
    let drive = create(&store, 1);
    wait(drive.fence(9)).unwrap();
    drop(drive);
    store.close();
    drop(store);
    let store = open(&ring);
    let drive = store.get(1).unwrap();
    assert_eq!(wait(drive.length()).unwrap().fence, 9);
    assert_eq!(
        write(&drive, 0, 8, b"x"),
        Err(LogDriveError::Fenced { current: 9 })
    );
    write(&drive, 0, 9, b"x").unwrap();
}

/// AZ-1 on one replica (1000/1000/800 scaled to 10/10/8): a replica asked to seal below what
/// it holds returns the addresses at and beyond the sealed length to unwritten, for good.
#[test]
fn az1_seal_below_the_durable_length_drops_the_tail() {
    let ring = ring();
    let store = open(&ring);
    let replica = create(&store, 1);
    for address in 0..10 {
        write(&replica, address, 0, b"block").unwrap();
    }
    assert_eq!(wait(replica.length()).unwrap().n, 10);
    wait(replica.seal(8, 0)).unwrap();
    let expect = Length {
        n: 8,
        t: 8,
        sealed: Some(8),
        fence: 0,
        first: 0,
    };
    assert_eq!(wait(replica.length()).unwrap(), expect);
    assert_eq!(read(&replica, 8), ReadOutcome::Unwritten);
    assert_eq!(read(&replica, 9), ReadOutcome::Unwritten);
    assert_eq!(read(&replica, 7), value(b"block"));
    assert_eq!(
        write(&replica, 8, 0, b"block"),
        Err(LogDriveError::Sealed { length: 8 })
    );
    write(&replica, 7, 0, b"block").unwrap();
    wait(replica.seal(8, 0)).unwrap();
    assert_eq!(
        wait(replica.seal(9, 0)),
        Err(LogDriveError::Sealed { length: 8 })
    );
    assert_eq!(
        wait(replica.seal(7, 0)),
        Err(LogDriveError::Sealed { length: 8 })
    );
    drop(replica);
    store.close();
    drop(store);
    let store = open(&ring);
    let replica = store.get(1).unwrap();
    assert_eq!(wait(replica.length()).unwrap(), expect);
    assert_eq!(read(&replica, 9), ReadOutcome::Unwritten);
}

/// AZ-2 on one replica: sealed beyond what it holds, it is brought up to the sealed length by
/// writes copied from a peer (below the seal, writes are still taken).
#[test]
fn az2_a_replica_behind_the_sealed_length_is_brought_up_to_it() {
    let ring = ring();
    let store = open(&ring);
    let behind = create(&store, 1);
    for address in 0..8 {
        write(&behind, address, 0, b"block").unwrap();
    }
    wait(behind.seal(10, 0)).unwrap();
    assert_eq!(wait(behind.length()).unwrap().n, 8);
    write(&behind, 8, 0, b"block").unwrap();
    write(&behind, 9, 0, b"block").unwrap();
    assert_eq!(
        write(&behind, 10, 0, b"block"),
        Err(LogDriveError::Sealed { length: 10 })
    );
    let length = wait(behind.length()).unwrap();
    assert_eq!((length.n, length.t, length.sealed), (10, 10, Some(10)));
}

/// A trim is allowed at or below N, holes included (a replica that missed writes trims with
/// its group); what it passes reads `Trimmed`, holes too, before and after a restart.
#[test]
fn trim_is_allowed_at_or_below_n_and_reads_below_it_say_trimmed() {
    let ring = ring();
    let store = open(&ring);
    let drive = create(&store, 1);
    for address in [0, 1, 2, 3, 5] {
        write(&drive, address, 0, b"x").unwrap();
    }
    let beyond = wait(drive.trim(7)).unwrap_err();
    assert_eq!(
        beyond,
        LogDriveError::OutOfRange {
            address: 7,
            valid: 0..7
        }
    );
    wait(drive.trim(3)).unwrap();
    wait(drive.trim(2)).unwrap();
    assert_eq!(read(&drive, 2), ReadOutcome::Trimmed { first: 3 });
    assert_eq!(read(&drive, 3), value(b"x"));
    assert!(matches!(
        write(&drive, 1, 0, b"x"),
        Err(LogDriveError::OutOfRange { .. })
    ));
    assert_eq!(
        tail(&drive, 4),
        TailDesc {
            n: 6,
            holes: holes(&[4]),
            holes_below_window: false,
        }
    );
    // Over the hole at 4: it reads trimmed, and T moves past it.
    wait(drive.trim(5)).unwrap();
    assert_eq!(read(&drive, 4), ReadOutcome::Trimmed { first: 5 });
    assert_eq!(read(&drive, 5), value(b"x"));
    let trimmed_tail = TailDesc {
        n: 6,
        holes: holes(&[]),
        holes_below_window: false,
    };
    assert_eq!(tail(&drive, 4), trimmed_tail);
    drop(drive);
    store.close();
    drop(store);
    let store = open(&ring);
    let drive = store.get(1).unwrap();
    assert_eq!(read(&drive, 0), ReadOutcome::Trimmed { first: 5 });
    assert_eq!(read(&drive, 4), ReadOutcome::Trimmed { first: 5 });
    assert_eq!(tail(&drive, 4), trimmed_tail);
    let length = wait(drive.length()).unwrap();
    assert_eq!((length.first, length.t, length.n), (5, 6, 6));
}

#[test]
fn addresses_at_or_beyond_capacity_are_out_of_range() {
    let ring = ring();
    let store = open(&ring);
    let drive = wait(store.create(1, 4)).unwrap();
    write(&drive, 3, 0, b"x").unwrap();
    let error = write(&drive, 4, 0, b"x").unwrap_err();
    assert_eq!(
        error,
        LogDriveError::OutOfRange {
            address: 4,
            valid: 0..4
        }
    );
    assert!(error.is_definite());
    assert!(matches!(
        wait(drive.read(4)),
        Err(LogDriveError::OutOfRange { .. })
    ));
    assert!(matches!(
        wait(drive.seal(5, 0)),
        Err(LogDriveError::OutOfRange { .. })
    ));
}

#[test]
fn a_deleted_and_recreated_logdrive_never_sees_the_old_records() {
    let ring = ring();
    let store = open(&ring);
    let old = create(&store, 1);
    write(&old, 0, 0, b"old").unwrap();
    wait(old.fence(4)).unwrap();
    assert_eq!(
        wait(store.create(1, 8)).unwrap_err(),
        LogDriveError::Exists { id: 1 }
    );
    wait(store.delete(1)).unwrap();
    assert!(matches!(
        store.get(1),
        Err(LogDriveError::Missing { id: 1, .. })
    ));
    let missing = write(&old, 1, 4, b"old").unwrap_err();
    assert_eq!(
        missing,
        LogDriveError::Missing {
            id: 1,
            generation: 1
        }
    );
    let new = create(&store, 1);
    assert_eq!(new.generation(), 2);
    assert_eq!(read(&new, 0), ReadOutcome::Unwritten);
    assert_eq!(wait(new.length()).unwrap().fence, 0);
    write(&new, 0, 0, b"new").unwrap();
    // The old handle stays bound to its generation.
    assert!(matches!(
        wait(old.read(0)),
        Err(LogDriveError::Missing { .. })
    ));
    drop((old, new));
    store.close();
    drop(store);
    let store = open(&ring);
    let new = store.get(1).unwrap();
    assert_eq!(new.generation(), 2);
    assert_eq!(read(&new, 0), value(b"new"));
    assert_eq!(wait(new.length()).unwrap().fence, 0);
    assert_eq!(
        wait(store.delete(5)),
        Err(LogDriveError::Missing {
            id: 5,
            generation: 0
        })
    );
}

#[test]
fn a_closed_drive_fails_indeterminately() {
    let ring = ring();
    let store = open(&ring);
    let drive = create(&store, 1);
    store.close();
    let error = write(&drive, 0, 0, b"x").unwrap_err();
    assert!(matches!(error, LogDriveError::Stopped { .. }), "{error:?}");
    assert!(!error.is_definite());
}

/// A composition holds its children as trait objects and has many operations in flight on
/// all of them at once, with no thread per call.
#[test]
fn logdrives_fan_out_as_trait_objects() {
    let ring = ring();
    let store = open(&ring);
    let children: Vec<Arc<dyn LogDrive>> = (0..4)
        .map(|id| Arc::new(create(&store, id)) as Arc<dyn LogDrive>)
        .collect();
    let mut in_flight = Vec::new();
    for address in 0..16 {
        for child in &children {
            in_flight.push(child.write(address, 1, Bytes::from(vec![address as u8; 32])));
        }
    }
    for future in in_flight {
        wait(future).unwrap();
    }
    for child in &children {
        assert_eq!(
            tail(child.as_ref(), 4),
            TailDesc {
                n: 16,
                holes: holes(&[]),
                holes_below_window: false,
            }
        );
        assert_eq!(read(child.as_ref(), 15), value(&[15; 32]));
    }
}
