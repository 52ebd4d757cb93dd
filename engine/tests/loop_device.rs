//! Rings on raw block devices: loop devices with direct I/O and 4096- and 512-byte logical
//! sectors, made and detached by the test itself. Appends from many threads, reopen, laps with
//! trims, ring full, the O_EXCL/lock refusal of a second writer, and format's measurement of
//! the sync methods on the device. Needs root; under CI=true it must run, elsewhere it prints
//! SKIP and the reason.

use std::sync::Arc;

use sealog::{format, AppendError, Drive, DriveOptions, FormatOptions, OpenError};
use sealog_tests::loop_device_or_skip;

fn payload(seed: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|index| (seed.wrapping_mul(131) as usize + index) as u8)
        .collect()
}

fn exercise(sector_size_bytes: u32) {
    let directory = tempfile::tempdir().expect("tempdir");
    let test = format!("loop device with {sector_size_bytes}-byte sectors");
    let Some(device) = loop_device_or_skip(directory.path(), 32 << 20, sector_size_bytes, &test)
    else {
        return;
    };
    let options = FormatOptions {
        size_bytes: 24 << 20,
        segment_size_bytes: Some(2 << 20),
        ..FormatOptions::default()
    };
    let too_big = FormatOptions {
        size_bytes: 64 << 20,
        ..options.clone()
    };
    assert!(matches!(
        format(&device.path, &too_big),
        Err(sealog::FormatError::DeviceTooSmall { .. })
    ));
    let control = format(&device.path, &options).expect("formats the device");
    assert_eq!(
        control.geometry.block_size_bytes, 4096,
        "the block is at least 4096"
    );
    // Format measured the sync methods on the device itself (through a second, O_DIRECT
    // descriptor while its own held the device exclusively).
    assert!(
        matches!(control.sync, sealog::SyncChoice::Measured { .. }),
        "{:?}",
        control.sync
    );
    let drive = Arc::new(Drive::open(&device.path, DriveOptions::default()).expect("opens"));
    // A second writer is refused while the first holds the device.
    assert!(matches!(
        Drive::open(&device.path, DriveOptions::default()),
        Err(OpenError::Io { .. } | OpenError::Locked { .. })
    ));
    let handles: Vec<_> = (0..4u64)
        .map(|thread| {
            let drive = Arc::clone(&drive);
            std::thread::spawn(move || {
                let tickets: Vec<_> = (0..250u64)
                    .map(|round| {
                        let bytes = payload(thread * 1000 + round, 64 + (round as usize % 9) * 450);
                        (bytes.clone(), drive.append(bytes).expect("queued"))
                    })
                    .collect();
                tickets
                    .into_iter()
                    .map(|(bytes, ticket)| (ticket.wait().expect("durable"), bytes))
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut acked: Vec<(u64, Vec<u8>)> = handles
        .into_iter()
        .flat_map(|handle| handle.join().expect("thread"))
        .collect();
    acked.sort();
    assert_eq!(acked.len(), 1000);
    drive.close();
    drop(drive);
    let drive = Drive::open(&device.path, DriveOptions::default()).expect("reopens");
    let replayed: Vec<(u64, Vec<u8>)> = drive
        .iter_from(1)
        .payloads()
        .collect::<Result<_, _>>()
        .expect("reads");
    assert_eq!(replayed, acked);
    // Several laps with trims, then a full ring.
    let mut last = 0;
    for round in 0..120u64 {
        let tickets: Vec<_> = (0..8)
            .map(|i| {
                drive
                    .append(payload(round * 8 + i, 30_000))
                    .expect("queued")
            })
            .collect();
        for ticket in tickets {
            last = ticket.wait().expect("durable");
        }
        drive.trim(last.saturating_sub(10)).expect("trims");
    }
    let mut full = None;
    for round in 0..1000u64 {
        if let Err(error) = drive
            .append(payload(round, 200_000))
            .expect("queued")
            .wait()
        {
            full = Some(error);
            break;
        }
    }
    assert!(
        matches!(full, Some(AppendError::RingFull { .. })),
        "{full:?}"
    );
    drive.close();
    drop(drive);
    let drive = Drive::open(&device.path, DriveOptions::default()).expect("reopens");
    assert!(
        drive.recovery_report().next_position.lap >= 3,
        "wrapped several laps"
    );
    assert_eq!(drive.read(last).expect("live").len(), 30_000);
}

#[test]
fn a_ring_on_a_4096_byte_sector_loop_device() {
    exercise(4096);
}

#[test]
fn a_ring_on_a_512_byte_sector_loop_device() {
    exercise(512);
}

/// A device ring's lock is the device's own: once `close` returns, another writer may open
/// the ring even while the closed drive's handle lives on (its readers' descriptors are
/// opened apart from the writer's, so they do not hold the lock).
#[test]
fn a_closed_drive_lets_go_of_its_device_before_its_handle_is_dropped() {
    let directory = tempfile::tempdir().expect("tempdir");
    let test = "a closed drive lets go of its device";
    let Some(device) = loop_device_or_skip(directory.path(), 32 << 20, 4096, test) else {
        return;
    };
    let options = FormatOptions::new(24 << 20)
        .segment_size_bytes(2 << 20)
        .sync_method(sealog::SyncMethod::Fdatasync);
    format(&device.path, &options).expect("formats the device");
    let first = Drive::open(&device.path, DriveOptions::default()).expect("opens");
    let lsn = first.append(payload(1, 100)).expect("queued").wait();
    let lsn = lsn.expect("durable");
    first.close();
    let second = Drive::open(&device.path, DriveOptions::default())
        .expect("a closed drive's handle does not hold the ring");
    assert_eq!(second.read(lsn).expect("live"), payload(1, 100));
    drop(first);
}
