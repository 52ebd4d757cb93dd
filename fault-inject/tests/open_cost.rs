//! What an open costs on the simulated drive, which counts every byte read and every flush:
//! with a trusted tail hint, the real recovery reads the live data plus at most the in-flight
//! window and the hint's margin (and a few control and header blocks), however large the
//! ring; forced to scan fully it reads the whole ring. And it flushes the device once per step
//! of the recovery plan, not once per segment.
//!
//! The bound each test asserts, for a ring whose live region runs from the head to the cut:
//! `distance(head, cut) + window + margin + slack`, where the margin is the hint's
//! (`HINT_AHEAD_WINDOWS` windows) and the slack covers both control copies, the segment
//! headers the walk checks and the block past the probe's end read for a header that
//! straddles it.

use std::path::Path;

use sealog::{DriveCore, DriveOptions, Request, Ticket, Wait};
use sealog_fault::{FaultConfig, SimDevice};
use sealog_wal::layout::HINT_AHEAD_WINDOWS;
use sealog_wal::{Geometry, Kind, RingId, Scan, ScanPolicy};
use sealog_wal_kit::model::ModelWriter;

const BLOCK: u32 = 4096;

/// 64 segments of 256 KiB (16 MiB), batches of up to 16 KiB, 4 in flight.
fn large_ring() -> Geometry {
    Geometry {
        block_size_bytes: BLOCK,
        segment_size_bytes: 256 << 10,
        segment_count: 64,
        batch_size_max_bytes: 4 * BLOCK,
        window_batches_max: 4,
        window_bytes_max: u64::from(16 * BLOCK),
    }
}

fn open(image: Vec<u8>, scan: ScanPolicy) -> DriveCore<SimDevice> {
    let geometry = large_ring();
    let device = SimDevice::for_ring(image, &geometry, FaultConfig::none(), 7).expect("a device");
    let options = DriveOptions {
        scan,
        ..DriveOptions::default()
    };
    DriveCore::recover(device, Path::new("open-cost"), &options).expect("opens")
}

/// Appends `count` entries of `len` bytes and waits until each is acknowledged.
fn append(core: &mut DriveCore<SimDevice>, count: usize, len: usize) {
    let tickets: Vec<Ticket> = (0..count)
        .map(|index| {
            let (request, ticket) = Request::append(Kind::Data, vec![index as u8; len]);
            core.submit(request);
            ticket
        })
        .collect();
    for ticket in &tickets {
        while ticket.try_outcome().is_none() {
            core.step(Wait::ForCompletion);
        }
        assert!(matches!(ticket.try_outcome(), Some(Ok(_))));
    }
}

/// Trims everything acknowledged but the last `keep` entries, durably.
fn trim_keeping(core: &mut DriveCore<SimDevice>, keep: u64) {
    let lsn = core.lsn_durable().saturating_sub(keep);
    let (request, reply) = Request::trim(lsn);
    core.submit(request);
    loop {
        core.step(Wait::ForCompletion);
        if let Ok(outcome) = reply.try_recv() {
            outcome.expect("trims");
            return;
        }
    }
}

/// The bytes a hinted open of a ring whose log runs from its head to its cut may read.
fn read_bound(geometry: &Geometry, core: &DriveCore<SimDevice>) -> u64 {
    let report = core.recovery_report();
    let live = geometry.distance_bytes(report.control.head, report.next_position);
    let window = geometry.window_bytes_max;
    let margin = HINT_AHEAD_WINDOWS * window;
    let slack = 8 * u64::from(BLOCK);
    live + window + margin + slack
}

/// Opens `image` hinted and full, checks both find the same log, and returns the hinted
/// core, the bytes each read and the flushes each made.
fn open_both(image: &[u8]) -> (DriveCore<SimDevice>, [u64; 2], [u64; 2]) {
    let mut full = open(image.to_vec(), ScanPolicy::Full);
    let mut hinted = open(image.to_vec(), ScanPolicy::Hinted);
    assert!(matches!(hinted.recovery_report().scan, Scan::Hinted { .. }));
    assert!(matches!(full.recovery_report().scan, Scan::Full { .. }));
    let (h, f) = (hinted.recovery_report(), full.recovery_report());
    assert_eq!((h.next_lsn, h.next_position), (f.next_lsn, f.next_position));
    assert_eq!((h.first_lsn, h.outcome), (f.first_lsn, f.outcome));
    let read = [
        hinted.backend_mut().bytes_read(),
        full.backend_mut().bytes_read(),
    ];
    let flushes = [hinted.backend_mut().flushes(), full.backend_mut().flushes()];
    (hinted, read, flushes)
}

#[test]
fn a_large_ring_holding_one_entry_opens_reading_the_entry_and_a_margin() {
    let geometry = large_ring();
    let ring_bytes = geometry.ring_size_bytes().expect("a size");
    let mut core = open(
        ModelWriter::format(geometry, RingId([5; 16])),
        ScanPolicy::Hinted,
    );
    append(&mut core, 1, 100);
    let image = core.backend_mut().crash();
    let (core, read, flushes) = open_both(&image);
    let bound = read_bound(&geometry, &core);
    println!(
        "one entry in a {ring_bytes}-byte ring: a hinted open read {} bytes (bound {bound}), a \
         full one {}; flushes {flushes:?}",
        read[0], read[1]
    );
    assert!(
        read[0] <= bound,
        "a hinted open read {} bytes, more than {bound}",
        read[0]
    );
    assert!(bound * 20 < ring_bytes, "the bound is far below the ring");
    assert!(
        read[1] >= ring_bytes - geometry.control_area_bytes(),
        "a full scan reads the ring: {} of {ring_bytes}",
        read[1]
    );
    // Flushes: the segments replay looked at (one device: one flush), the control block, the
    // tail marker covering the entry. Once per step, not once per segment, either way.
    assert_eq!(flushes, [3, 3]);
}

#[test]
fn a_wrapped_ring_opens_reading_its_live_region_and_a_margin() {
    let geometry = large_ring();
    let ring_bytes = geometry.ring_size_bytes().expect("a size");
    let mut core = open(
        ModelWriter::format(geometry, RingId([6; 16])),
        ScanPolicy::Hinted,
    );
    // About 1.5 laps of 3 KiB entries, trimmed as it goes to keep about 1 MiB live: the
    // live region ends on the second lap, the head somewhere on the first or second.
    for _ in 0..64 {
        append(&mut core, 128, 3000);
        trim_keeping(&mut core, 350);
    }
    let stats = core.stats();
    assert!(stats.hint_writes > 10, "{} hint writes", stats.hint_writes);
    let image = core.backend_mut().crash();
    let (core, read, _) = open_both(&image);
    let report = core.recovery_report();
    println!(
        "a wrapped ring: a hinted open read {} bytes (bound {}), a full one {}",
        read[0],
        read_bound(&geometry, &core),
        read[1]
    );
    assert_eq!(report.next_position.lap, 2, "the log wrapped");
    let bound = read_bound(&geometry, &core);
    assert!(
        read[0] <= bound,
        "a hinted open read {} bytes, more than {bound}",
        read[0]
    );
    assert!(bound * 4 < ring_bytes);
    // A full scan reads the whole lap from the head on (all but the head's segment's bytes
    // before the head, at most a segment).
    let lap_bytes = ring_bytes - geometry.control_area_bytes() - geometry.segment_size_bytes;
    assert!(
        read[1] >= lap_bytes,
        "a full scan reads the ring: {} of {ring_bytes}",
        read[1]
    );
}
