//! Nothing is allocated per append on the hot path: after a warm-up, thousands of appends
//! (borrowed slices from a blocking writer, shared `Bytes` from pipelining writers) through a
//! real drive make at most a handful of allocations in the whole process (a counting global
//! allocator, dhat's, sees every thread: clients, the drive thread, the kernel's completions'
//! reapers). Alone in its test binary, so no other test's allocations are counted.

use std::sync::Arc;

use bytes::Bytes;
use sealog::{format, Drive, DriveOptions, Entry, FormatOptions, SyncMethod, Ticket};

#[global_allocator]
static ALLOCATOR: dhat::Alloc = dhat::Alloc;

/// Appends measured after the warm-up.
const MEASURED_APPENDS: u64 = 6_000;

/// `blocking` appends from borrowed slices, each waited for, while another thread keeps 64
/// appends of shared bytes in flight, `pipelined` in all.
fn run_appends(drive: &Arc<Drive>, blocking: u64, pipelined: u64) {
    let body = vec![0x5au8; 4000];
    let header = [1u8; 32];
    let shared = Bytes::from(vec![0xa5u8; 4096]);
    let pipelined = {
        let drive = Arc::clone(drive);
        let shared = shared.clone();
        let rounds = pipelined;
        std::thread::spawn(move || {
            let mut pending: std::collections::VecDeque<Ticket> =
                std::collections::VecDeque::with_capacity(64);
            for _ in 0..rounds {
                if pending.len() == 64 {
                    let ticket = pending.pop_front().expect("a pending ticket");
                    ticket.wait().expect("durable");
                }
                pending.push_back(drive.append(shared.clone()).expect("queued"));
            }
            for ticket in pending {
                ticket.wait().expect("durable");
            }
        })
    };
    for _ in 0..blocking {
        drive
            .append(Entry::slices(&[&header, &body]))
            .expect("queued")
            .wait()
            .expect("durable");
    }
    pipelined.join().expect("pipelined writer");
}

#[test]
fn appends_allocate_nothing_once_warm() {
    let _profiler = dhat::Profiler::builder().testing().build();
    let directory = tempfile::tempdir().expect("tempdir");
    let path = directory.path().join("ring");
    format(
        &path,
        &FormatOptions {
            size_bytes: 256 << 20,
            segment_size_bytes: Some(16 << 20),
            sync_method: Some(SyncMethod::Fdatasync),
            ..FormatOptions::default()
        },
    )
    .expect("formats");
    let drive = Arc::new(Drive::open(&path, DriveOptions::default()).expect("opens"));
    run_appends(&drive, 500, 2_000);
    // The batch index grows with the live log (a VecDeque: amortized doublings, not per
    // append); trimming keeps it at its warm size, as a log server's steady state does.
    let durable = drive.stats().lsn_durable;
    drive.trim(durable).expect("trims");
    let before = dhat::HeapStats::get();
    run_appends(&drive, MEASURED_APPENDS / 6, MEASURED_APPENDS * 5 / 6);
    let after = dhat::HeapStats::get();
    let allocations = after.total_blocks - before.total_blocks;
    let appends = drive.stats().lsn_durable - durable;
    println!(
        "hot path: {allocations} allocations in {appends} appends (two threads spawned, one \
         trim and one stats call included)"
    );
    assert!(appends >= MEASURED_APPENDS);
    // Spawning the pipelined writer's thread and the `stats` reply allocate, as does the
    // rare doubling of a queue; per append: nothing.
    assert!(
        allocations < 64,
        "{allocations} allocations in {appends} appends: the hot path allocates per append"
    );
}
