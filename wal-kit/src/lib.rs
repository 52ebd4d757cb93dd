//! The test kit of sealog's format: what the tests of `sealog-wal`, the fault-injection crate
//! and the fuzz targets need to build rings and break them, kept out of the format crate so
//! that no embedder compiles it.
//!
//! - [`disk`]: a simulated disk in memory (live, durable and unflushed bytes, crash fates);
//! - [`model`]: a reference writer over that disk (the writer's protocol without I/O), for
//!   tests, the examples and the fuzz seeds;
//! - [`fuzz`]: structure-aware fuzzing of replay (valid rings from the model, mutated the way
//!   drives, crashes and crafted metadata damage them);
//! - [`fuzz_replay`]: arbitrary bytes through replay, the body of the `replay` fuzz target.

#![forbid(unsafe_code)]

pub mod disk;
pub mod fuzz;
pub mod model;

pub use disk::SimDisk;

use sealog_wal::{replay, RecoveryMode, ReplayOptions, ScanPolicy};

/// Feeds arbitrary bytes to replay as a ring, in every recovery mode, hinted and full; used by
/// the `replay` fuzz target and its stable-toolchain twin in the tests. Replay must return
/// `Ok` or a typed error for any input; a panic is a bug.
pub fn fuzz_replay(bytes: &[u8]) {
    for mode in [
        RecoveryMode::Strict,
        RecoveryMode::TruncateAtCorruption,
        RecoveryMode::Quarantine,
    ] {
        for scan in [ScanPolicy::Hinted, ScanPolicy::Full] {
            let options = ReplayOptions {
                mode,
                read_chunk_bytes: 1 << 16,
                scan,
            };
            let mut source: &[u8] = bytes;
            let mut visited = 0u64;
            if let Ok(report) = replay(&mut source, &options, &mut |_| visited += 1) {
                assert_eq!(report.entries, visited);
                assert!(report.first_lsn <= report.last_lsn);
                assert!(report.bytes_read <= bytes.len() as u64 * 4 + (1 << 20));
            }
        }
    }
}
