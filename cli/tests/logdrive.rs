//! `sealog format --logdrive`, run against the built binary: the ring it plans (segments of an
//! eighth of the ring, batches of at most a quarter segment, marked as holding a store) as
//! `inspect` shows it, a store opening on it and taking a write, on a directory and on a
//! 4 KiB-sector loop device; sizes and segment sizes too small for the store's reserves exit 2
//! naming what would work and leave the path as it was; a plain format is as it always was.
//!
//! The loop-device test needs root: it prints `SKIP` without it, and fails under `CI=true`.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Output;

use common::{sealog, text};
use sealog_logdrive::{wait, LogDrive, LogDriveStore, ReadOutcome};
use sealog_tests::loop_device_or_skip;

/// Runs `sealog format PATH` with `flags`, split on whitespace.
fn format(path: &str, flags: &str) -> Output {
    let mut args = vec!["format", path];
    args.extend(flags.split_whitespace());
    sealog(&args)
}

/// What `format` of `path` with `flags` printed, having succeeded.
fn formatted(path: &str, flags: &str) -> String {
    let output = format(path, flags);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    text(&output.stdout)
}

/// A temporary directory and the path of a ring in it, not made yet.
fn fresh_ring() -> (tempfile::TempDir, PathBuf) {
    let directory = tempfile::tempdir().expect("tempdir");
    let ring = directory.path().join("ring");
    (directory, ring)
}

/// What `format` of `path` with `flags` said on stderr when it refused: exit 2, one line,
/// naming the path.
fn refused(path: &str, flags: &str) -> String {
    let output = format(path, flags);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.starts_with(&format!("sealog: {path}: ")), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    stderr
}

/// `inspect --json` of the ring at `path`.
fn inspect_json(path: &str) -> serde_json::Value {
    let inspect = sealog(&["inspect", path, "--json"]);
    assert_eq!(inspect.status.code(), Some(0), "{}", text(&inspect.stderr));
    serde_json::from_slice(&inspect.stdout).expect("inspect writes JSON")
}

/// Opens a store on the ring at `path`, writes one address of a new LogDrive, reads it back.
fn store_takes_a_write(path: &Path) {
    let store = LogDriveStore::open(path, sealog::DriveOptions::default()).expect("opens");
    let drive = wait(store.create(1, 1 << 20)).expect("creates a LogDrive");
    let payload = bytes::Bytes::from_static(b"first record");
    wait(drive.write(0, 0, payload.clone())).expect("writes");
    assert_eq!(wait(drive.read(0)), Ok(ReadOutcome::Value(payload)));
    drop(drive);
    store.close();
}

/// What a 64 MiB LogDrive ring is planned as on 4096-byte blocks: seven 8 MiB segments (an
/// eighth of the ring each; the control area's two blocks leave room for seven), 1 MiB
/// batches, marked as holding a store.
fn assert_planned_64_mib(path: &str, stdout: &str) {
    assert!(
        stdout.contains("with 7 segments of 8388608 bytes, 4096-byte blocks"),
        "{stdout}"
    );
    assert!(
        stdout.contains("\nholds: a LogDrive store's records"),
        "{stdout}"
    );
    assert!(
        stdout.contains("\nlogdrive: 7 segments of 8388608 bytes, batches up to 1048576 bytes"),
        "{stdout}"
    );
    let inspected = inspect_json(path);
    assert_eq!(inspected["purpose"], "logdrive_store", "{inspected}");
    let geometry = &inspected["geometry"];
    assert_eq!(geometry["block_size_bytes"], 4096, "{geometry}");
    assert_eq!(geometry["segment_count"], 7, "{geometry}");
    assert_eq!(geometry["segment_size_bytes"], 8 << 20, "{geometry}");
    assert_eq!(geometry["batch_size_max_bytes"], 1 << 20, "{geometry}");
    let plain = sealog(&["inspect", path]);
    assert!(
        text(&plain.stdout).contains("holds: a LogDrive store's records (logdrive_store)"),
        "{}",
        text(&plain.stdout)
    );
}

#[test]
fn a_logdrive_ring_of_64_mib_has_seven_segments_and_opens_as_a_store() {
    let (_directory, ring) = fresh_ring();
    let path = ring.to_str().expect("utf-8");
    let stdout = formatted(path, "--size 64M --logdrive");
    // The sync method is measured, as without --logdrive.
    assert!(
        stdout.contains("\nsync method: ") && stdout.contains("measured at format time"),
        "{stdout}"
    );
    assert_planned_64_mib(path, &stdout);
    store_takes_a_write(&ring);
    assert_eq!(inspect_json(path)["purpose"], "logdrive_store");
}

#[test]
fn a_logdrive_ring_on_a_4k_sector_device_is_planned_on_4096_byte_blocks() {
    let test = "format --logdrive on a 4 KiB-sector device";
    let directory = tempfile::tempdir().expect("tempdir");
    let Some(device) = loop_device_or_skip(directory.path(), 64 << 20, 4096, test) else {
        return;
    };
    let path = device.path.to_str().expect("utf-8");
    let stdout = formatted(path, "--size 64M --logdrive --sync-method fdatasync");
    assert!(stdout.contains("named at format time"), "{stdout}");
    assert_planned_64_mib(path, &stdout);
    store_takes_a_write(&device.path);
    // Formatting it again needs --overwrite sealog, as any ring on a device does.
    let stderr = refused(path, "--size 64M --logdrive");
    assert!(stderr.contains("--overwrite sealog"), "{stderr}");
}

/// A directory that is there, not empty and open to its group, as it was before a refusal.
fn untouched_directory(parent: &Path) -> PathBuf {
    let ring = parent.join("kept");
    std::fs::create_dir(&ring).expect("creates");
    std::fs::write(ring.join("notes"), b"keep me").expect("writes");
    std::fs::set_permissions(&ring, std::fs::Permissions::from_mode(0o750)).expect("chmod");
    ring
}

/// Fails unless `ring` is as [`untouched_directory`] made it.
fn assert_untouched(ring: &Path) {
    let mode = std::fs::metadata(ring)
        .expect("still there")
        .permissions()
        .mode()
        & 0o7777;
    assert_eq!(mode, 0o750, "the directory's mode was changed");
    let names: Vec<_> = std::fs::read_dir(ring)
        .expect("lists")
        .map(|entry| entry.expect("entry").file_name())
        .collect();
    assert_eq!(names, ["notes"], "the directory's contents were changed");
    assert_eq!(
        std::fs::read(ring.join("notes")).expect("reads"),
        b"keep me"
    );
}

#[test]
fn a_size_too_small_for_a_store_exits_2_naming_the_smallest_ring() {
    let smallest = sealog_logdrive::geometry::smallest_ring_bytes(4096);
    let (directory, ring) = fresh_ring();
    let path = ring.to_str().expect("utf-8");
    let too_small = format!("--size {} --logdrive", smallest - 1);
    let stderr = refused(path, &too_small);
    assert!(
        stderr.contains(&format!("smallest ring it can live on is {smallest} bytes")),
        "{stderr}"
    );
    assert!(!ring.exists(), "nothing is created");
    // A directory already there is left as it was, --force or not.
    let kept = untouched_directory(directory.path());
    refused(
        kept.to_str().expect("utf-8"),
        &format!("{too_small} --force"),
    );
    assert_untouched(&kept);
    // The smallest ring itself is sound: five 256 KiB segments.
    let flags = format!("--size {smallest} --logdrive --sync-method dsync");
    let stdout = formatted(path, &flags);
    assert!(stdout.contains("5 segments of 262144 bytes"));
    assert_eq!(inspect_json(path)["sync"]["method"], "dsync");
    store_takes_a_write(&ring);
}

#[test]
fn a_segment_size_leaving_too_few_segments_exits_2_naming_the_count() {
    let (directory, ring) = fresh_ring();
    let path = ring.to_str().expect("utf-8");
    // Three 4 MiB segments of 16 MiB: a store needs four of them.
    let stderr = refused(path, "--size 16M --segment-size 4M --logdrive");
    assert!(
        stderr.contains("leaves 3 segments") && stderr.contains("needs at least 4 of that size"),
        "{stderr}"
    );
    assert!(!ring.exists(), "nothing is created");
    // A segment too large for two of them in the ring names the count as well.
    let kept = untouched_directory(directory.path());
    let kept_path = kept.to_str().expect("utf-8");
    let stderr = refused(
        kept_path,
        "--size 64M --segment-size 48M --logdrive --force",
    );
    assert!(
        stderr.contains("leaves 1 segment ") && stderr.contains("needs at least 3"),
        "{stderr}"
    );
    assert_untouched(&kept);
    // A segment size that leaves enough is honoured.
    formatted(path, "--size 32M --segment-size 4M --logdrive");
    let geometry = &inspect_json(path)["geometry"];
    assert_eq!(geometry["segment_count"], 7, "{geometry}");
    assert_eq!(geometry["segment_size_bytes"], 4 << 20, "{geometry}");
    assert_eq!(geometry["batch_size_max_bytes"], 1 << 20, "{geometry}");
}

#[test]
fn a_plain_format_is_unchanged() {
    let (directory, ring) = fresh_ring();
    let path = ring.to_str().expect("utf-8");
    let stdout = formatted(path, "--size 64M --sync-method fdatasync");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    assert!(
        lines[0].contains("with 3 segments of 16777216 bytes") && lines[1].starts_with("sync"),
        "{stdout}"
    );
    let inspected = inspect_json(path);
    assert_eq!(inspected["purpose"], "log", "{inspected}");
    assert_eq!(inspected["geometry"]["batch_size_max_bytes"], 1 << 20);
    // A plain format of a size too small for a store is a sound plain ring.
    let small = directory.path().join("small");
    let small = small.to_str().expect("utf-8");
    formatted(small, "--size 1M --sync-method fdatasync");
    assert_eq!(inspect_json(small)["purpose"], "log");
}
