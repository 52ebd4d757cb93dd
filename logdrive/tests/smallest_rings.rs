//! On the smallest rings a store accepts, random workloads of creations, writes (small and
//! large), trims, seals and deletions, with the reclaimer on its own thread as an embedder
//! runs it, never reach a state that deleting every LogDrive does not free: once all are
//! deleted, the reclaimer leaves at most the head's segment occupied, and the ring takes
//! writes again. `PROPTEST_CASES` raises the number of workloads per shape.

mod common;

use std::time::Duration;

use bytes::Bytes;
use proptest::prelude::*;
use sealog::{FormatOptions, Geometry};
use sealog_logdrive::{wait, LocalLogDrive, LogDrive, LogDriveError, LogDriveStore, StoreOptions};

/// One step of a workload, on LogDrive `id % 4`.
#[derive(Clone, Debug)]
enum Op {
    Create(u64),
    Write { id: u64, bytes: usize, count: u64 },
    Trim { id: u64, keep: u64 },
    Seal(u64),
    Delete(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        1 => (0..4u64).prop_map(Op::Create),
        8 => (0..4u64, 1..64usize, 1..48u64).prop_map(|(id, kib, count)| Op::Write {
            id,
            // From 100 bytes to 63 KiB: records one to a batch and records that fill one.
            bytes: if kib == 1 { 100 } else { kib << 10 },
            count,
        }),
        2 => (0..4u64, 0..32u64).prop_map(|(id, keep)| Op::Trim { id, keep }),
        1 => (0..4u64).prop_map(Op::Seal),
        1 => (0..4u64).prop_map(Op::Delete),
    ]
}

/// The smallest rings of four shapes: the smallest `sealog format --logdrive` plans (four
/// 256 KiB segments, 64 KiB batches), 1 MiB segments with 256 KiB batches, 2 MiB segments
/// with 1 MiB batches, and a default 64 MiB ring (three 16 MiB segments).
fn shapes() -> Vec<FormatOptions> {
    let smallest = sealog_logdrive::geometry::smallest_ring_bytes(4096);
    let planned = sealog_logdrive::geometry::format_options(smallest, None, 4096).expect("plans");
    let least = |segment: u64, batch: u32| {
        let count =
            sealog_logdrive::geometry::segment_count_min(segment, u64::from(batch), 4096, 4);
        FormatOptions::new(2 * 4096 + count * segment)
            .segment_size_bytes(segment)
            .batch_size_max_bytes(batch)
    };
    vec![
        planned,
        least(1 << 20, 256 << 10),
        least(2 << 20, 1 << 20),
        FormatOptions::new(64 << 20),
    ]
}

/// What the workload keeps of each LogDrive.
struct Drive {
    handle: LocalLogDrive,
    next: u64,
}

/// Runs `ops` on a store on a fresh ring of `format`, then deletes every LogDrive and checks
/// that the ring frees.
fn run(format: &FormatOptions, ops: &[Op]) -> Result<(), TestCaseError> {
    let directory = tempfile::tempdir().expect("temporary directory");
    let path = directory.path().join("ring");
    sealog::format(&path, format).expect("format");
    let options = StoreOptions::default()
        .full_wait(Duration::from_millis(100))
        .control_wait(Duration::from_secs(5));
    let store = LogDriveStore::open_with_options(&path, options).expect("a sound ring opens");
    let geometry = store.drive().geometry();
    let payload_max = geometry.payload_size_max_bytes() as usize;
    let mut drives: [Option<Drive>; 4] = Default::default();
    for op in ops {
        apply(&store, &mut drives, op, payload_max)?;
    }
    for (id, drive) in drives.iter_mut().enumerate() {
        if drive.take().is_some() {
            let deleted = wait(store.delete(id as u64));
            prop_assert!(deleted.is_ok(), "delete {id}: {deleted:?}");
        }
    }
    let stats = store.reclaim_now().expect("reclaim");
    prop_assert!(
        stats.occupied_bytes <= geometry.segment_size_bytes,
        "every LogDrive deleted, {} bytes stay occupied: {stats:?}",
        stats.occupied_bytes
    );
    // The ring takes writes again: as many of the largest record as a fifth of it holds.
    let fresh = wait(store.create(9, 1 << 40)).expect("create");
    let writes = capacity(&geometry) / 5 / (payload_max as u64 + 96);
    for address in 0..writes.max(1) {
        let outcome = wait(fresh.write(address, 1, Bytes::from(vec![3u8; payload_max])));
        prop_assert!(outcome.is_ok(), "write {address} of {writes}: {outcome:?}");
    }
    Ok(())
}

fn capacity(geometry: &Geometry) -> u64 {
    geometry.segment_size_bytes * u64::from(geometry.segment_count)
}

/// Waits for an operation's future; one that takes a minute is a hang, reported with what
/// the store and its drive hold.
fn settle<T>(
    store: &LogDriveStore,
    future: sealog_logdrive::OpFuture<T>,
) -> Result<T, LogDriveError> {
    match sealog_logdrive::wait_deadline(
        future,
        std::time::Instant::now() + Duration::from_secs(60),
    ) {
        Ok(outcome) => outcome,
        Err(_) => panic!(
            "an operation hung: {:?}, the drive holds {:?}",
            store.reclaim_stats(),
            store.drive().stats().queues
        ),
    }
}

/// One step: a refusal the state explains (sealed, out of range, the ring full of live
/// records) is part of the workload; anything else fails the case.
fn apply(
    store: &LogDriveStore,
    drives: &mut [Option<Drive>; 4],
    op: &Op,
    payload_max: usize,
) -> Result<(), TestCaseError> {
    let expected = |outcome: Result<(), LogDriveError>| match outcome {
        Ok(())
        | Err(LogDriveError::RingFull)
        | Err(LogDriveError::Sealed { .. })
        | Err(LogDriveError::OutOfRange { .. }) => Ok(()),
        Err(error) => Err(TestCaseError::fail(format!("{op:?}: {error}"))),
    };
    match *op {
        Op::Create(id) if drives[id as usize].is_none() => {
            let handle = settle(store, store.create(id, 1 << 40));
            match handle {
                Ok(handle) => drives[id as usize] = Some(Drive { handle, next: 0 }),
                Err(error) => expected(Err(error))?,
            }
        }
        Op::Write { id, bytes, count } => {
            let Some(drive) = drives[id as usize].as_mut() else {
                return Ok(());
            };
            let bytes = bytes.min(payload_max);
            let writes: Vec<_> = (drive.next..drive.next + count)
                .map(|address| {
                    drive
                        .handle
                        .write(address, 1, Bytes::from(vec![7u8; bytes]))
                })
                .collect();
            for write in writes {
                expected(settle(store, write))?;
            }
            drive.next += count;
        }
        Op::Trim { id, keep } => {
            if let Some(drive) = drives[id as usize].as_ref() {
                let length = wait(drive.handle.length()).expect("length");
                expected(settle(
                    store,
                    drive.handle.trim(length.t.saturating_sub(keep)),
                ))?;
            }
        }
        Op::Seal(id) => {
            if let Some(drive) = drives[id as usize].as_ref() {
                let length = wait(drive.handle.length()).expect("length");
                expected(settle(store, drive.handle.seal(length.n, 1)))?;
            }
        }
        Op::Delete(id) if drives[id as usize].is_some() => {
            drives[id as usize] = None;
            let deleted = settle(store, store.delete(id));
            prop_assert!(
                deleted.is_ok(),
                "{op:?}: {deleted:?} on {:?}: {:?}",
                store.drive().geometry(),
                store.reclaim_stats()
            );
        }
        Op::Create(_) | Op::Delete(_) => {}
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(6),
        ..ProptestConfig::default()
    })]

    #[test]
    fn deleting_every_logdrive_frees_the_smallest_rings(
        ops in proptest::collection::vec(op(), 1..160),
    ) {
        for shape in shapes() {
            run(&shape, &ops)?;
        }
    }
}
