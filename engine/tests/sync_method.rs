//! The ring's default durability on real files: format measures the two sync methods on the
//! ring's own segments and records the choice and its figures in the control block (leaving
//! the segments as zeroed as format makes them); a method named at format time is recorded
//! unmeasured; a drive opened with the default durability uses what the control block records,
//! and an option overrides it; trims and reopens carry the record over unchanged; and a ring
//! of format version 1, formatted before the choice was recorded (zeros in its bytes, the old
//! CRC) or after, is refused with an error naming both versions, as are rings of versions 2
//! and 3, whose control blocks have this version's layout.

use std::path::Path;

use sealog::storage::CONTROL_FILE;
use sealog::sync_probe::{choose, MARGIN_PERCENT};
use sealog::{format, Drive, DriveOptions, Durability, FormatOptions, SyncChoice, SyncMethod};
use sealog_wal::format::{
    ControlBlock, TailHint, CONTROL_SIZE, CONTROL_SIZE_V1, CONTROL_SIZE_V1_BEFORE_SYNC,
    FORMAT_VERSION,
};

fn options(sync_method: Option<SyncMethod>) -> FormatOptions {
    FormatOptions {
        size_bytes: 8 << 20,
        segment_size_bytes: Some(2 << 20),
        sync_method,
        ..FormatOptions::default()
    }
}

/// The control block the ring's control file holds now.
fn control_of(path: &Path) -> ControlBlock {
    let mut reader = sealog::reader::RingReader::open(path).expect("opens read-only");
    sealog_wal::read_control(&mut reader).expect("reads the control block")
}

/// The durability a drive opened on `path` with `requested` resolves to, as the drive says.
fn resolved(path: &Path, requested: Option<Durability>) -> Durability {
    let options = DriveOptions {
        durability: requested,
        ..DriveOptions::default()
    };
    Drive::open(path, options).expect("opens").durability()
}

#[test]
fn format_measures_the_sync_methods_and_records_a_plausible_choice() {
    let directory = tempfile::tempdir().expect("tempdir");
    let path = directory.path().join("ring");
    let control = format(&path, &options(None)).expect("formats");
    let SyncChoice::Measured {
        method,
        measurement,
    } = control.sync
    else {
        panic!("format measured nothing: {:?}", control.sync);
    };
    println!("format's measurement: {method:?} from {measurement:?}");
    assert_eq!(measurement.write_size_bytes, 8192, "a 4 KiB append's write");
    assert!(measurement.rounds >= 4, "{measurement:?}");
    assert_eq!(measurement.writes_per_round, 8);
    assert_eq!(measurement.margin_percent, MARGIN_PERCENT);
    for (p50, p99) in [
        (measurement.fdatasync_p50_us, measurement.fdatasync_p99_us),
        (measurement.dsync_p50_us, measurement.dsync_p99_us),
    ] {
        assert!(p50 > 0 && p50 <= p99, "{measurement:?}");
    }
    assert_eq!(method, choose(&measurement), "the rule made the choice");
    assert_eq!(control_of(&path).sync, control.sync, "recorded on the ring");
    // The timed writes were zeros inside the segments' data areas: the segments read as format
    // leaves them, every byte zero.
    for segment in 0..control.geometry.segment_count {
        let bytes = std::fs::read(path.join(format!("segment-{segment:05}"))).expect("reads");
        assert!(bytes.iter().all(|&byte| byte == 0), "segment {segment}");
    }
    let drive = Drive::open(&path, DriveOptions::default()).expect("opens");
    assert_eq!(drive.recovery_report().control.sync, control.sync);
    drive.close();
    assert_eq!(
        resolved(&path, None),
        sealog::sync_probe::durability_of(method)
    );
}

#[test]
fn a_drive_uses_the_method_the_ring_records_unless_its_options_name_one() {
    let directory = tempfile::tempdir().expect("tempdir");
    let path = directory.path().join("ring");
    let control = format(&path, &options(Some(SyncMethod::Dsync))).expect("formats");
    assert_eq!(control.sync, SyncChoice::Named(SyncMethod::Dsync));
    assert_eq!(resolved(&path, None), Durability::Dsync);
    assert_eq!(
        resolved(&path, Some(Durability::Fdatasync)),
        Durability::Fdatasync
    );
    let fdatasync = directory.path().join("fdatasync");
    format(&fdatasync, &options(Some(SyncMethod::Fdatasync))).expect("formats");
    assert_eq!(resolved(&fdatasync, None), Durability::Fdatasync);
    assert_eq!(
        resolved(&fdatasync, Some(Durability::Dsync)),
        Durability::Dsync
    );
    // Appends made durable by the recorded method come back after a reopen.
    let drive = Drive::open(&path, DriveOptions::default()).expect("opens");
    let tickets: Vec<_> = (0..200u8)
        .map(|index| drive.append(vec![index; 4096]).expect("queued"))
        .collect();
    for (index, ticket) in tickets.into_iter().enumerate() {
        assert_eq!(ticket.wait().expect("durable"), index as u64 + 1);
    }
    drive.close();
    drop(drive);
    let reopened = Drive::open(&path, DriveOptions::default()).expect("reopens");
    assert_eq!(reopened.read(200).expect("reads"), vec![199u8; 4096]);
}

#[test]
fn trims_and_reopens_carry_the_record_over_unchanged() {
    let directory = tempfile::tempdir().expect("tempdir");
    let path = directory.path().join("ring");
    let formatted = format(&path, &options(None)).expect("formats").sync;
    for round in 0..3u64 {
        let drive = Drive::open(&path, DriveOptions::default()).expect("opens");
        let tickets: Vec<_> = (0..50u64)
            .map(|index| drive.append(vec![index as u8; 1000]).expect("queued"))
            .collect();
        let last = tickets
            .into_iter()
            .map(|ticket| ticket.wait().expect("durable"))
            .max()
            .expect("some");
        drive.trim(last - 10).expect("trims");
        drive.close();
        drop(drive);
        let control = control_of(&path);
        assert_eq!(control.sync, formatted, "round {round}");
        assert!(
            control.trim_lsn >= last - 10,
            "round {round}: the trim landed"
        );
    }
}

/// The error a writable open gives on a freshly formatted ring whose control file `rewrite`
/// has rewritten as an older writer would have.
fn refusal_after(rewrite: impl FnOnce(&Path, &ControlBlock)) -> String {
    let directory = tempfile::tempdir().expect("tempdir");
    let path = directory.path().join("ring");
    let control = format(&path, &options(Some(SyncMethod::Dsync))).expect("formats");
    rewrite(&path, &control);
    Drive::open(&path, DriveOptions::default())
        .err()
        .expect("an older ring is refused")
        .to_string()
}

#[test]
fn a_version_1_ring_is_refused_naming_both_versions() {
    for crc_bytes in [CONTROL_SIZE_V1, CONTROL_SIZE_V1_BEFORE_SYNC] {
        let text =
            refusal_after(|path, control| write_control_as_version_1(path, control, crc_bytes));
        assert!(
            text.contains("version 1") && text.contains(&format!("version {FORMAT_VERSION}")),
            "{crc_bytes}: {text}"
        );
    }
}

/// A version 2 ring (entries without the embedder header) and a version 3 ring (no purpose
/// byte in the control block, zero where version 4 records it) have control blocks of this
/// version's layout: each is refused with an error naming both versions, never read.
#[test]
fn version_2_and_3_rings_are_refused_naming_both_versions() {
    for version in [2u16, 3] {
        let text = refusal_after(|path, control| write_control_as_version(path, control, version));
        let expected = format!(
            "ring format version {version} is not supported (this build reads version \
             {FORMAT_VERSION})"
        );
        assert!(text.contains(&expected), "{text}");
    }
}

/// Rewrites both control copies with `version` in their version field, resealed: a block of
/// this version's layout (a plain log's, so zero where the purpose byte is) that an older
/// writer could have written.
fn write_control_as_version(path: &Path, control: &ControlBlock, version: u16) {
    let block = control.geometry.block_size_bytes as usize;
    let mut bytes = std::fs::read(path.join(CONTROL_FILE)).expect("reads the control file");
    for copy in 0..2 {
        let at = copy * block;
        let copy_bytes = &mut bytes[at..at + block];
        assert_eq!(copy_bytes[164], 0, "a plain log's purpose byte");
        copy_bytes[4..6].copy_from_slice(&version.to_le_bytes());
        copy_bytes[8..12].fill(0);
        let crc = crc32c::crc32c(&copy_bytes[..CONTROL_SIZE]);
        copy_bytes[8..12].copy_from_slice(&crc.to_le_bytes());
    }
    std::fs::write(path.join(CONTROL_FILE), &bytes).expect("writes the control file");
}

/// Rewrites both control copies as format version 1 wrote them: the same fields, no tail
/// hint, version 1, and a CRC over its first `crc_bytes` bytes (160; or, before the sync
/// choice was recorded, 128 with zeros from byte 120 on).
fn write_control_as_version_1(path: &Path, control: &ControlBlock, crc_bytes: usize) {
    let block = control.geometry.block_size_bytes as usize;
    let mut bytes = std::fs::read(path.join(CONTROL_FILE)).expect("reads the control file");
    for copy in 0..2 {
        let at = copy * block;
        let current = ControlBlock::decode(&bytes[at..at + block]).expect("a current copy");
        let old = ControlBlock {
            sync: if crc_bytes == CONTROL_SIZE_V1 {
                current.sync
            } else {
                SyncChoice::NotRecorded
            },
            tail_hint: TailHint::default(),
            ..current
        };
        let copy_bytes = &mut bytes[at..at + block];
        old.encode(copy_bytes);
        copy_bytes[4..6].copy_from_slice(&1u16.to_le_bytes());
        copy_bytes[8..12].fill(0);
        let crc = crc32c::crc32c(&copy_bytes[..crc_bytes]);
        copy_bytes[8..12].copy_from_slice(&crc.to_le_bytes());
    }
    std::fs::write(path.join(CONTROL_FILE), &bytes).expect("writes the control file");
}
