//! Times opening (recovering) an existing ring N times: replay, flushes, control block.
//! `cargo run --release -p sealog --example open_time -- RING [TIMES]`

use std::time::Instant;

use sealog::{Drive, DriveOptions};

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(ring) = args.next() else {
        eprintln!("usage: open_time RING [TIMES]");
        std::process::exit(2);
    };
    let times: u32 = args.next().and_then(|text| text.parse().ok()).unwrap_or(3);
    for _ in 0..times {
        let started = Instant::now();
        let drive = match Drive::open(std::path::Path::new(&ring), DriveOptions::default()) {
            Ok(drive) => drive,
            Err(error) => {
                eprintln!("open_time: {error}");
                std::process::exit(1);
            }
        };
        let seconds = started.elapsed().as_secs_f64();
        let size = drive.geometry().ring_size_bytes().unwrap_or(0) as f64;
        println!(
            "opened in {:.3} s: {} entries, {:.0} MB/s of ring",
            seconds,
            drive.recovery_report().entries,
            size / seconds / 1e6
        );
        drive.close();
    }
}
