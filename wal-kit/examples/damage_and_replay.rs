//! Encodes a ring in memory with the reference writer, damages it in the ways a crash and a
//! faulty drive do, and prints what replay recovers each time: a clean ring, a torn tail of
//! never-acknowledged batches, a bit flip in acknowledged data (strict mode refuses it; the
//! opt-in truncating mode cuts and reports the loss), and a ring that wrapped several laps.
//!
//! Run it with `cargo run --release -p sealog-wal-kit --example damage_and_replay`.

use sealog_wal::{scan, Geometry, RecoveryMode, RecoveryReport, ReplayOptions, RingId};
use sealog_wal_kit::model::{BlockFate, ModelWriter};

fn geometry() -> Geometry {
    Geometry {
        block_size_bytes: 4096,
        segment_size_bytes: 64 * 4096,
        segment_count: 4,
        batch_size_max_bytes: 8 * 4096,
        window_batches_max: 4,
        window_bytes_max: 32 * 4096,
    }
}

fn payload(lsn: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|index| (lsn as usize * 31 + index) as u8)
        .collect()
}

fn print_report(title: &str, result: &Result<RecoveryReport, sealog_wal::ReplayError>) {
    println!("== {title}");
    match result {
        Ok(report) => {
            println!(
                "   outcome {} (row {}), live LSNs {:?}..={:?}, next LSN {} at {}",
                report.outcome.name(),
                report.end_row,
                report.first_lsn,
                report.last_lsn,
                report.next_lsn,
                report.next_position
            );
            println!(
                "   {} batches, {} entries, {} payload bytes, {} segment tails skipped",
                report.batches, report.entries, report.payload_bytes, report.segments_skipped
            );
            if let Some(torn) = report.torn {
                println!(
                    "   torn tail cut at {}: LSN {}..={}, {} bytes, first failed check {}",
                    torn.start, torn.first_lsn, torn.last_lsn, torn.bytes, torn.check
                );
            }
            if let (Some(corruption), Some(dropped)) = (report.corruption, report.dropped) {
                println!("   truncated at corruption: {corruption}");
                println!(
                    "   dropped LSN {}..={} ({} bytes)",
                    dropped.first_lsn, dropped.last_lsn, dropped.bytes
                );
            }
        }
        Err(error) => println!("   error: {error}"),
    }
}

fn main() {
    let ring_id = RingId(*b"sealog-example!!");
    let strict = ReplayOptions::default();
    let image = ModelWriter::format(geometry(), ring_id);
    let (mut writer, _, _) = ModelWriter::open(image, &strict).expect("a new ring opens");

    // 40 batches of 1..=8 records, flushed in pipelined groups of 2.
    for batch in 0..40u64 {
        let lsn = writer.next_lsn();
        let payloads: Vec<Vec<u8>> = (0..(batch % 8 + 1))
            .map(|index| payload(lsn + index, 100 + 37 * index as usize))
            .collect();
        let refs: Vec<&[u8]> = payloads.iter().map(Vec::as_slice).collect();
        writer.append(&refs).expect("room in the ring");
        if batch % 2 == 1 {
            writer.flush();
        }
    }
    let mut durable = writer.durable().to_vec();
    print_report("clean ring", &scan(&mut durable, &strict));

    // Two more batches in flight, then the power fails: the first lands torn, the second whole.
    for _ in 0..2 {
        let lsn = writer.next_lsn();
        let payloads: Vec<Vec<u8>> = (0..3).map(|index| payload(lsn + index, 900)).collect();
        let refs: Vec<&[u8]> = payloads.iter().map(Vec::as_slice).collect();
        writer.append(&refs).expect("room in the ring");
    }
    let mut torn = writer.crash(&mut |write, block| match (write, block) {
        (0, 0) => BlockFate::PartlyNew(3),
        _ => BlockFate::New,
    });
    print_report(
        "power cut with two batches in flight",
        &scan(&mut torn, &strict),
    );

    // A bit flip in an acknowledged entry that later batches' watermarks cover.
    let mut flipped = writer.durable().to_vec();
    let ring_offset = 2 * 4096 + 4096 + 100; // segment 0, first batch, inside LSN 1's payload
    flipped[ring_offset] ^= 0x10;
    print_report("bit flip in LSN 1, strict", &scan(&mut flipped, &strict));
    let salvage = ReplayOptions {
        mode: RecoveryMode::TruncateAtCorruption,
        ..strict
    };
    print_report(
        "bit flip in LSN 1, truncating mode",
        &scan(&mut flipped, &salvage),
    );

    // Wrap the ring: trim as we go, several laps.
    for round in 0..200u64 {
        let lsn = writer.next_lsn();
        let payloads: Vec<Vec<u8>> = (0..4).map(|index| payload(lsn + index, 2000)).collect();
        let refs: Vec<&[u8]> = payloads.iter().map(Vec::as_slice).collect();
        writer.append(&refs).expect("trimmed ring has room");
        writer.flush();
        if round % 4 == 3 {
            writer.trim(writer.acked_lsn().saturating_sub(40));
        }
    }
    let mut wrapped = writer.durable().to_vec();
    print_report(
        "after several laps with trims",
        &scan(&mut wrapped, &strict),
    );
}
