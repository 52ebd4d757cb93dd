//! The read section's fixed sizes and its tail-read goal: the payloads of the tail and cold
//! reads, the random-read ceiling's read size, the writer's appends in flight, the tail drive's
//! cache and the cold reads' depth. The runners (`reads.rs`, `tail_reads.rs`), the full ring's
//! fill (`cells::fill_ring`), the open rings (`opens.rs`) and the reports all read them here: a
//! leaf, importing nothing from the rest of the bench, so that none of them imports another
//! for a constant.

use sealog_wal::format::ENTRY_HEADER_SIZE;

/// Reads per second from the recent-entry cache that 4 readers must reach while the writer
/// runs (issue 11); the paced phase reads at this rate.
pub const TAIL_READS_PER_SEC_GOAL: f64 = 500_000.0;

/// Payload of the tail section's appends and reads: 4 KiB entries, as the issue states them.
pub const TAIL_PAYLOAD_BYTES: usize = 4096;
/// Appends the tail section's one writer keeps in flight (the 4 KiB x 256).
pub const TAIL_WRITER_IN_FLIGHT: usize = 256;
/// Bytes of recent batches the tail section's drive keeps in memory for reads: the drive's
/// default (64 MiB: tens of milliseconds of a writer at this device's 1-3 GB/s), named in its
/// options so the figure says what it measured.
pub const TAIL_READ_CACHE_BYTES: u64 = sealog::drive::READ_CACHE_BYTES_DEFAULT;

/// Payload of the cold reads' entries: the record (a 96-byte header and the payload) is one
/// 4 KiB block, so a record-grained read is one 4 KiB read, the random-read ceiling's size.
/// The full ring that recovery measures is filled with these (`cells::fill_ring`).
pub const COLD_PAYLOAD_BYTES: usize = 4096 - ENTRY_HEADER_SIZE;
/// The random-read ceiling's read size: one record of [`COLD_PAYLOAD_BYTES`].
pub const COLD_READ_BYTES: u32 = 4096;
/// Reads in flight of the deep cold cells and their ceiling.
pub const COLD_DEPTH: usize = 16;
