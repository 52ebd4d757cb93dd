//! The corrupters on real rings, through the `sealog-fault` binary: each kind of damage to an
//! acknowledged record (bit flip, zeroed block, torn block, misdirected copy, lost write by
//! restoring an old copy) is reported by replay as corruption naming that record's LSN.

use std::path::Path;
use std::process::Command;

use sealog::reader::RingReader;
use sealog::{format, Drive, DriveOptions, FormatOptions, SyncMethod};
use sealog_wal::{Check, ReplayError, ReplayOptions};

fn sealog_fault(args: &[&str]) {
    let output = Command::new(env!("CARGO_BIN_EXE_sealog-fault"))
        .args(args)
        .output()
        .expect("runs");
    assert!(
        output.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A ring with LSNs 1, 2 and 3, each its own batch (so later watermarks cover earlier ones).
fn ring(directory: &Path, before_second: impl FnOnce(&Path)) -> std::path::PathBuf {
    let path = directory.join("ring");
    let options = FormatOptions {
        size_bytes: 8 << 20,
        segment_size_bytes: Some(2 << 20),
        sync_method: Some(SyncMethod::Fdatasync),
        ..FormatOptions::default()
    };
    format(&path, &options).expect("formats");
    let append = |payload: &[u8]| {
        let drive = Drive::open(&path, DriveOptions::default()).expect("opens");
        drive
            .append(payload.to_vec())
            .expect("queued")
            .wait()
            .expect("durable");
        drive.close();
    };
    append(b"first record");
    before_second(&path);
    append(b"second record");
    append(b"third record");
    path
}

/// Where the record with `lsn` lies: its segment and its offset in the segment.
fn position_of(path: &Path, lsn: u64) -> (u32, u32) {
    let mut reader = RingReader::open(path).expect("opens read-only");
    let mut found = None;
    sealog_wal::replay(&mut reader, &ReplayOptions::default(), &mut |entry| {
        if entry.lsn == lsn {
            found = Some((entry.position.segment, entry.position.offset));
        }
    })
    .expect("replays");
    found.expect("the LSN is live")
}

/// Where the next batch will go.
fn next_position(path: &Path) -> (u32, u32) {
    let mut reader = RingReader::open(path).expect("opens read-only");
    let report = sealog_wal::scan(&mut reader, &ReplayOptions::default()).expect("replays");
    (report.next_position.segment, report.next_position.offset)
}

fn corruption_of(path: &Path) -> (u64, Check) {
    let mut reader = RingReader::open(path).expect("opens read-only");
    match sealog_wal::scan(&mut reader, &ReplayOptions::default()) {
        Err(ReplayError::Corruption(found)) => (found.lsn, found.check),
        other => panic!("expected corruption, got {other:?}"),
    }
}

#[test]
fn a_flipped_bit_is_reported() {
    let directory = tempfile::tempdir().expect("tempdir");
    let path = ring(directory.path(), |_| {});
    let path = path.to_str().expect("utf-8");
    sealog_fault(&[
        "flip",
        path,
        "--lsn",
        "1",
        "--bit",
        &((96 + 3) * 8).to_string(),
    ]);
    assert_eq!(corruption_of(Path::new(path)), (1, Check::PayloadCrc));
}

#[test]
fn a_zeroed_or_torn_block_is_reported() {
    let directory = tempfile::tempdir().expect("tempdir");
    let path = ring(directory.path(), |_| {});
    let path = path.to_str().expect("utf-8");
    sealog_fault(&["zero", path, "--lsn", "2"]);
    assert_eq!(corruption_of(Path::new(path)).0, 2);
    let directory = tempfile::tempdir().expect("tempdir");
    let path = ring(directory.path(), |_| {});
    let path = path.to_str().expect("utf-8");
    sealog_fault(&[
        "tear",
        path,
        "--lsn",
        "1",
        "--keep-sectors",
        "0",
        "--seed",
        "9",
    ]);
    assert_eq!(corruption_of(Path::new(path)).0, 1);
}

#[test]
fn a_misdirected_write_is_reported() {
    let directory = tempfile::tempdir().expect("tempdir");
    let path = ring(directory.path(), |_| {});
    // LSN 3's block copied over LSN 1's.
    let (to_segment, to_offset) = position_of(&path, 1);
    let (from_segment, from_offset) = position_of(&path, 3);
    let path = path.to_str().expect("utf-8");
    sealog_fault(&[
        "copy",
        path,
        "--segment",
        &to_segment.to_string(),
        "--offset",
        &to_offset.to_string(),
        "--from-segment",
        &from_segment.to_string(),
        "--from-offset",
        &from_offset.to_string(),
    ]);
    assert_eq!(corruption_of(Path::new(path)), (1, Check::Position));
}

#[test]
fn a_lost_write_is_reported() {
    let directory = tempfile::tempdir().expect("tempdir");
    let saved = directory.path().join("old-block");
    let saved_arg = saved.to_str().expect("utf-8").to_string();
    let mut block = (0, 0);
    let path = ring(directory.path(), |path| {
        // The block LSN 2 will be written to, before it is written.
        block = next_position(path);
        let path = path.to_str().expect("utf-8");
        sealog_fault(&[
            "save",
            path,
            "--segment",
            &block.0.to_string(),
            "--offset",
            &block.1.to_string(),
            "--out",
            &saved_arg,
        ]);
    });
    assert_eq!(position_of(&path, 2), block);
    let path = path.to_str().expect("utf-8");
    sealog_fault(&[
        "restore",
        path,
        "--segment",
        &block.0.to_string(),
        "--offset",
        &block.1.to_string(),
        "--from",
        &saved_arg,
    ]);
    assert_eq!(corruption_of(Path::new(path)).0, 2);
}
