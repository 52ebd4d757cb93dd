//! The drive's metrics in Prometheus's exposition format: install the exporter's recorder
//! (one line, before the drive opens), format a ring in a temporary directory, append, read
//! and trim, then print what a scrape would get.
//!
//! `cargo run --release -p sealog --example prometheus`

use sealog::{format, Drive, DriveOptions, FormatOptions};

fn main() {
    // The one line: every drive opened from here on reports to this recorder. A server would
    // serve `handle.render()` on its `/metrics` endpoint, and call `handle.run_upkeep()` every
    // few seconds (this exporter, without its HTTP listener, leaves upkeep to its caller).
    let handle = metrics_exporter_prometheus::PrometheusBuilder::new()
        .install_recorder()
        .expect("installs the recorder");

    let scratch = tempfile::tempdir_in(".").expect("tempdir");
    let ring = scratch.path().join("ring");
    let options = FormatOptions::new(64 << 20).segment_size_bytes(4 << 20);
    format(&ring, &options).expect("formats");
    let drive = Drive::open(
        &ring,
        DriveOptions {
            metrics_label: Some("example".to_string()),
            ..DriveOptions::default()
        },
    )
    .expect("opens");

    let tickets: Vec<_> = (0..1000u32)
        .map(|i| drive.append(i.to_le_bytes().repeat(256)).expect("queued"))
        .collect();
    let mut last_lsn = 0;
    for ticket in tickets {
        last_lsn = ticket.wait().expect("durable");
    }
    for lsn in 1..=100 {
        drive.read(lsn).expect("reads");
    }
    drive.trim(last_lsn / 2).expect("trims");
    // The drive exports the counters of callers' reads at the end of its turns, and at its
    // close: close it so the figures printed are final.
    drive.close();

    print!("{}", handle.render());
}
