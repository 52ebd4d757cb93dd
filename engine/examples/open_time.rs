//! Times the writable open of an existing ring (recovery included), hinted and forced to
//! scan fully, alternating: `cargo run --release -p sealog --example open_time -- PATH
//! [ROUNDS]`. Prints each open's time, the scan it made and the bytes its replay read. Each
//! open is closed before the next (a clean close, which writes nothing when every entry is
//! covered already).

use std::path::PathBuf;
use std::time::Instant;

use sealog::{Drive, DriveOptions};
use sealog_wal::ScanPolicy;

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(path) = args.next().map(PathBuf::from) else {
        eprintln!("usage: open_time PATH [ROUNDS]");
        std::process::exit(2);
    };
    let rounds: u32 = args.next().and_then(|text| text.parse().ok()).unwrap_or(5);
    for round in 0..rounds {
        for scan in [ScanPolicy::Hinted, ScanPolicy::Full] {
            let options = DriveOptions {
                scan,
                ..DriveOptions::default()
            };
            let started = Instant::now();
            let drive = match Drive::open(&path, options) {
                Ok(drive) => drive,
                Err(error) => {
                    eprintln!("{}: {error}", path.display());
                    std::process::exit(1);
                }
            };
            let opened_ms = started.elapsed().as_secs_f64() * 1e3;
            let report = drive.recovery_report();
            println!(
                "round {round} {:<6} open {opened_ms:8.2} ms  read {:>12} bytes  entries {}  ({})",
                report.scan.name(),
                report.bytes_read,
                report.entries,
                report.scan
            );
            drive.close();
        }
    }
}
