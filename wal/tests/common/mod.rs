//! Helpers the `wal` integration tests share: small geometries, deterministic payloads, and
//! shortcuts over the reference writer.

#![allow(dead_code)]

use sealog_wal::{
    replay, Geometry, RecoveryReport, ReplayError, ReplayOptions, RingId, Scan, ScanPolicy,
};
use sealog_wal_kit::model::ModelWriter;

pub const BLOCK: usize = 4096;

/// 4 segments of 16 blocks, batches up to 4 blocks, window of 2 batches / 8 blocks.
pub fn small_geometry() -> Geometry {
    Geometry {
        block_size_bytes: BLOCK as u32,
        segment_size_bytes: 16 * BLOCK as u64,
        segment_count: 4,
        batch_size_max_bytes: 4 * BLOCK as u32,
        window_batches_max: 2,
        window_bytes_max: 8 * BLOCK as u64,
    }
}

pub fn ring_id() -> RingId {
    RingId(*b"sealog-test-ring")
}

/// A payload that names its LSN and a salt, so a stale or misplaced record never matches.
pub fn payload(lsn: u64, salt: u64, len: usize) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(len);
    let mut state = lsn.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ salt.wrapping_mul(0xc2b2_ae3d);
    while bytes.len() < len {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        bytes.extend_from_slice(&state.to_le_bytes());
    }
    bytes.truncate(len);
    bytes
}

pub fn strict() -> ReplayOptions {
    ReplayOptions::default()
}

pub fn salvage() -> ReplayOptions {
    ReplayOptions {
        mode: sealog_wal::RecoveryMode::TruncateAtCorruption,
        ..ReplayOptions::default()
    }
}

pub fn quarantine() -> ReplayOptions {
    ReplayOptions {
        mode: sealog_wal::RecoveryMode::Quarantine,
        ..ReplayOptions::default()
    }
}

/// A freshly formatted and opened ring.
pub fn new_writer(geometry: Geometry) -> ModelWriter {
    let image = ModelWriter::format(geometry, ring_id());
    ModelWriter::open(image, &strict())
        .expect("a new ring opens")
        .0
}

/// Appends one batch of `count` records of `len` bytes; returns their LSNs.
pub fn append(writer: &mut ModelWriter, count: usize, len: usize, salt: u64) -> Vec<u64> {
    let first = writer.next_lsn();
    let payloads: Vec<Vec<u8>> = (0..count as u64)
        .map(|index| payload(first + index, salt, len))
        .collect();
    let refs: Vec<&[u8]> = payloads.iter().map(Vec::as_slice).collect();
    writer.append(&refs).expect("room in the ring")
}

/// Replay's result and the entries it visited (LSN, payload).
pub type Replayed = (Result<RecoveryReport, ReplayError>, Vec<(u64, Vec<u8>)>);

/// Replays an image, returning the report (or error) and the entries visited. A hinted
/// replay is checked against a full one of the same image: the same log, the same report
/// but for which scan was made and what it read (see [`assert_same_finding`]).
pub fn replay_image(image: &[u8], options: &ReplayOptions) -> Replayed {
    let replayed = replay_once(image, options);
    if options.scan == ScanPolicy::Hinted {
        let full = replay_once(
            image,
            &ReplayOptions {
                scan: ScanPolicy::Full,
                ..*options
            },
        );
        assert_same_finding(&replayed, &full);
    }
    replayed
}

/// Replays an image once, as `options` say.
pub fn replay_once(image: &[u8], options: &ReplayOptions) -> Replayed {
    let mut source = image;
    let mut entries = Vec::new();
    let result = replay(&mut source, options, &mut |entry| {
        entries.push((entry.lsn, entry.payload.to_vec()))
    });
    (result, entries)
}

/// A full scan's options in `mode`.
pub fn full(options: ReplayOptions) -> ReplayOptions {
    ReplayOptions {
        scan: ScanPolicy::Full,
        ..options
    }
}

/// Asserts that a hinted replay found what a full one did: the same entries, and the same
/// report or error, but for the scan made, where it stopped and the bytes it read.
pub fn assert_same_finding(hinted: &Replayed, full: &Replayed) {
    assert_eq!(
        hinted.1, full.1,
        "hinted and full replay recover the same entries"
    );
    match (&hinted.0, &full.0) {
        (Ok(hinted), Ok(full)) => {
            assert!(matches!(full.scan, Scan::Full { .. }));
            let comparable = RecoveryReport {
                scan: full.scan,
                scan_end: full.scan_end,
                bytes_read: full.bytes_read,
                ..hinted.clone()
            };
            assert_eq!(&comparable, full, "hinted and full replay report the same");
        }
        (Err(hinted), Err(full)) => {
            assert_eq!(format!("{hinted:?}"), format!("{full:?}"), "the same error");
        }
        (hinted, full) => panic!("hinted replay gave {hinted:?}, full replay {full:?}"),
    }
}

/// Every recovered entry's LSN and payload, checked to be contiguous.
pub fn assert_contiguous(entries: &[(u64, Vec<u8>)]) {
    for pair in entries.windows(2) {
        assert_eq!(pair[1].0, pair[0].0 + 1, "recovered LSNs are contiguous");
    }
}
