//! A first measurement of the engine, ahead of the benchmark crate: W writers, each appending
//! payloads of S bytes with one append in flight (append, wait, repeat) for D seconds, on a
//! fresh file ring in a temporary directory (or a ring path given). Prints appends/s, MB/s
//! (10^6 bytes) and the latency percentiles each writer saw.
//!
//! `cargo run --release -p sealog --example append_latency -- WRITERS SIZE SECONDS [RING_DIR]`

use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use sealog::{format, Drive, DriveOptions, FormatOptions};

fn main() {
    let mut args = std::env::args().skip(1);
    let writers: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1);
    let size: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(4096);
    let seconds: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(5);
    let scratch = tempfile::tempdir_in(".").expect("tempdir");
    let ring = args
        .next()
        .map_or_else(|| scratch.path().join("ring"), Into::into);
    if !ring.join("control").exists() {
        let options = FormatOptions {
            size_bytes: 1 << 30,
            segment_size_bytes: Some(64 << 20),
            force: true,
            ..FormatOptions::default()
        };
        format(&ring, &options).expect("formats");
    }
    let drive = Arc::new(Drive::open(&ring, DriveOptions::default()).expect("opens"));
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let handles: Vec<_> = (0..writers)
        .map(|_| {
            let drive = Arc::clone(&drive);
            std::thread::spawn(move || {
                let mut latency = Histogram::<u64>::new(3).expect("histogram");
                let payload = vec![0x5a; size];
                let mut last = 0;
                while Instant::now() < deadline {
                    let started = Instant::now();
                    last = drive
                        .append(payload.clone())
                        .expect("queued")
                        .wait()
                        .expect("durable");
                    latency
                        .record(started.elapsed().as_micros() as u64)
                        .expect("records");
                    if last % 4096 == 0 {
                        let _ = drive.trim(last.saturating_sub(1024));
                    }
                }
                let _ = last;
                latency
            })
        })
        .collect();
    let started = Instant::now();
    let mut latency = Histogram::<u64>::new(3).expect("histogram");
    for handle in handles {
        latency.add(handle.join().expect("writer")).expect("adds");
    }
    let elapsed = started.elapsed().as_secs_f64();
    let appends = latency.len() as f64;
    let stats = drive.stats();
    println!(
        "writers {writers} size {size}: {:.0} appends/s, {:.1} MB/s, p50 {} us, p99 {} us, \
         {:.1} entries per batch",
        appends / elapsed,
        appends * size as f64 / elapsed / 1e6,
        latency.value_at_quantile(0.50),
        latency.value_at_quantile(0.99),
        stats.appends as f64 / stats.batches.max(1) as f64
    );
}
