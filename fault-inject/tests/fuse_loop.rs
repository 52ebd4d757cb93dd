//! Loop-over-FUSE: the real engine on a loop device whose backing file lives on a FUSE file
//! system that sees every block write and flush. An fsync EIO and a write EIO injected there
//! reach the engine through the real kernel; the drive must stop, acknowledge nothing after
//! the error, and after a power cut (writes no flush covered are dropped) recover exactly the
//! acknowledged entries. Needs root and /dev/fuse; under CI=true it must run.

use std::path::Path;

use sealog::{format, AppendError, Drive, DriveOptions, FormatOptions, SyncMethod};
use sealog_fault::fuse::{DiskEvent, FuseDisk};
use sealog_tests::{must_run_privileged_tests, LoopDevice};

fn skip_or_fail(test: &str, why: String) {
    if must_run_privileged_tests() {
        panic!("{test}: CI must run loop-over-FUSE tests: {why}");
    }
    println!("SKIP: {test}: {why}");
}

/// Runs `inject` between acknowledged appends and appends that must fail, then checks the
/// recovery after a power cut.
fn fault_case(test: &str, inject: impl Fn(&FuseDisk)) {
    let directory = tempfile::tempdir().expect("tempdir");
    let mountpoint = directory.path().join("mnt");
    std::fs::create_dir(&mountpoint).expect("mkdir");
    let disk = match FuseDisk::mount(&mountpoint, 32 << 20) {
        Ok(disk) => disk,
        Err(error) => return skip_or_fail(test, format!("cannot mount FUSE: {error}")),
    };
    let device = match LoopDevice::attach(&disk.disk_path(), 4096) {
        Ok(device) => device,
        Err(why) => return skip_or_fail(test, why.0),
    };
    let options = FormatOptions {
        size_bytes: 24 << 20,
        segment_size_bytes: Some(2 << 20),
        sync_method: Some(SyncMethod::Fdatasync),
        ..FormatOptions::default()
    };
    format(&device.path, &options).expect("formats the loop device");
    let drive = Drive::open(&device.path, DriveOptions::default()).expect("opens");
    let mut acknowledged = Vec::new();
    for index in 0..20u8 {
        let payload = vec![index; 1000 + usize::from(index) * 10];
        let lsn = drive
            .append(payload.clone())
            .expect("queued")
            .wait()
            .expect("durable");
        acknowledged.push((lsn, payload));
    }
    let (writes_before, flushes_before) = disk.counts();
    assert!(
        writes_before > 0 && flushes_before > 0,
        "writes and flushes reach the FUSE layer"
    );
    // The last acknowledged append's write reached the disk before a flush that followed it.
    let events = disk.events();
    let last_flush = events
        .iter()
        .rposition(|event| matches!(event, DiskEvent::Flush { .. }));
    let last_write = events
        .iter()
        .rposition(|event| matches!(event, DiskEvent::Write { .. }));
    assert!(
        last_flush > last_write,
        "the last acknowledged write was flushed: {events:?}"
    );
    inject(&disk);
    let mut failures = 0;
    for index in 0..10u8 {
        match drive.append(vec![100 + index; 500]).expect("queued").wait() {
            Ok(lsn) => panic!("{test}: LSN {lsn} acknowledged after the injected error"),
            Err(AppendError::Failed(_)) => failures += 1,
            Err(other) => panic!("{test}: unexpected {other}"),
        }
    }
    assert_eq!(failures, 10, "every append after the error fails");
    drive.close();
    drop(drive);
    disk.power_cut();
    let reopened = Drive::open(&device.path, DriveOptions::default()).expect("reopens");
    let recovered: Vec<(u64, Vec<u8>)> = reopened
        .iter_from(1)
        .payloads()
        .collect::<Result<_, _>>()
        .expect("reads");
    assert_eq!(
        recovered, acknowledged,
        "{test}: exactly the acknowledged entries"
    );
    reopened.close();
    drop(reopened);
    drop(device);
    drop(disk);
    assert!(!Path::new(&mountpoint.join("disk")).exists(), "unmounted");
}

#[test]
fn an_fsync_eio_from_the_device_stops_the_drive_and_loses_nothing_acknowledged() {
    fault_case("loop-over-FUSE fsync EIO", |disk| disk.fail_flushes(true));
    println!("loop-over-FUSE fsync-EIO case: checked");
}

#[test]
fn a_write_eio_from_the_device_stops_the_drive_and_loses_nothing_acknowledged() {
    fault_case("loop-over-FUSE write EIO", |disk| disk.fail_writes(true));
    println!("loop-over-FUSE write-EIO case: checked");
}
