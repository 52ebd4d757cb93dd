//! What a ring holds, on real files: format records the purpose it is given; a writable open
//! whose options name a purpose records it in the control block it writes anyway for its new
//! incarnation (one control write, as any open makes), and trims, tail hints and reopens
//! carry the mark over unchanged; `stat` reads it under a writer, without the lock.

use std::path::Path;

use sealog::{format, Drive, DriveOptions, FormatOptions, RingPurpose, SyncMethod};
use sealog_wal::format::ControlBlock;

fn options() -> FormatOptions {
    FormatOptions::new(8 << 20)
        .segment_size_bytes(1 << 20)
        .sync_method(SyncMethod::Fdatasync)
}

/// The control block the ring holds now (the ring must not be held by a writer).
fn control_of(path: &Path) -> ControlBlock {
    let mut reader = sealog::reader::RingReader::open(path).expect("opens read-only");
    sealog_wal::read_control(&mut reader).expect("reads the control block")
}

/// Appends `count` entries of 1000 bytes and waits for them; returns the last LSN.
fn append_some(drive: &Drive, count: u64) -> u64 {
    let tickets: Vec<_> = (0..count)
        .map(|index| drive.append(vec![index as u8; 1000]).expect("queued"))
        .collect();
    tickets
        .into_iter()
        .map(|ticket| ticket.wait().expect("durable"))
        .max()
        .expect("some")
}

#[test]
fn a_ring_formatted_as_a_store_reopens_saying_so() {
    let directory = tempfile::tempdir().expect("tempdir");
    let path = directory.path().join("ring");
    let formatted = format(&path, &options().purpose(RingPurpose::LogDriveStore)).expect("formats");
    assert_eq!(formatted.purpose, RingPurpose::LogDriveStore);
    assert_eq!(control_of(&path).purpose, RingPurpose::LogDriveStore);
    for round in 0..2 {
        let drive = Drive::open(&path, DriveOptions::default()).expect("opens");
        assert_eq!(drive.purpose(), RingPurpose::LogDriveStore, "round {round}");
        assert_eq!(
            drive.recovery_report().control.purpose,
            RingPurpose::LogDriveStore
        );
        drive.close();
    }
    let plain = directory.path().join("plain");
    assert_eq!(
        format(&plain, &options()).expect("formats").purpose,
        RingPurpose::Log
    );
    let drive = Drive::open(&plain, DriveOptions::default()).expect("opens");
    assert_eq!(
        drive.purpose(),
        RingPurpose::Log,
        "the default is a plain log"
    );
}

#[test]
fn an_open_marks_an_unmarked_ring_and_the_mark_survives_trims_and_a_reopen() {
    let directory = tempfile::tempdir().expect("tempdir");
    let path = directory.path().join("ring");
    let formatted = format(&path, &options()).expect("formats");
    assert_eq!(formatted.purpose, RingPurpose::Log);
    let marking = DriveOptions::default().purpose(Some(RingPurpose::LogDriveStore));
    let drive = Drive::open(&path, marking).expect("opens");
    assert_eq!(drive.purpose(), RingPurpose::LogDriveStore);
    // The replay saw the unmarked ring; the mark went into the open's own control block,
    // the only one it wrote (format wrote sequences 0 and 1).
    assert_eq!(drive.recovery_report().control.purpose, RingPurpose::Log);
    let seen = sealog::stat::stat(&path).expect("stat under the writer");
    assert_eq!(seen.purpose, RingPurpose::LogDriveStore);
    assert_eq!(
        seen.control_sequence,
        formatted.sequence + 1,
        "no extra write"
    );
    // Enough appends between trims (about 3 MB each time, the ring lapped) that the tail
    // hint is rewritten on its own as well as with each trim: every rewrite keeps the mark.
    for _ in 0..4 {
        let last = append_some(&drive, 3000);
        drive.trim(last - 10).expect("trims");
        let seen = sealog::stat::stat(&path).expect("stat under the writer");
        assert_eq!(seen.purpose, RingPurpose::LogDriveStore, "after a trim");
    }
    assert!(drive.stats().hint_writes > 0, "a tail hint moved ahead");
    drive.close();
    drop(drive);
    let control = control_of(&path);
    assert_eq!(control.purpose, RingPurpose::LogDriveStore);
    assert!(
        control.sequence > formatted.sequence + 4,
        "the trims rewrote it"
    );
    let reopened = Drive::open(&path, DriveOptions::default()).expect("reopens");
    assert_eq!(reopened.purpose(), RingPurpose::LogDriveStore, "the reopen");
    reopened.close();
    drop(reopened);
    // An open that names the other purpose marks the ring back the same way.
    let unmarking = DriveOptions::default().purpose(Some(RingPurpose::Log));
    let drive = Drive::open(&path, unmarking).expect("opens");
    assert_eq!(drive.purpose(), RingPurpose::Log);
    drive.close();
    drop(drive);
    assert_eq!(control_of(&path).purpose, RingPurpose::Log);
}
