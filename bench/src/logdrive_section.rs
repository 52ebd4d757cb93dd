//! The LogDrive section's place in a run: its ring (of the cells' shape, recording the sync
//! method the write section's ring chose), the time of its runs (a fraction of a cell's), and
//! its write cells' ratios to the write section's ceilings. The measurements themselves are
//! `logdrive.rs`, their figures `logdrive_figures.rs` and their report `logdrive_report.rs`.

use crate::cells::RingShape;
use crate::logdrive;
use crate::logdrive_figures::LogDriveFigures;
use crate::logdrive_report;
use crate::run_context::RunContext;
use crate::write_section::WriteFigures;

/// The LogDrive section on a ring of the cells' shape (recording the sync method the write
/// section's ring chose, when it ran), its write cells' ratios to the write section's ceilings
/// (0 when it did not run). Write runs are a fifth of a cell (the quick run's 0.6 s: some
/// 3,000 writes at one in flight, 60,000 at 256), so that the 25 runs of its rounds stay near
/// the half a minute the section may add to the quick run.
pub fn logdrive_section(
    context: &RunContext<'_>,
    write: Option<&WriteFigures>,
) -> Result<LogDriveFigures, String> {
    let ring = context.ring_path("logdrive");
    let run = context.duration / 5;
    let plan = logdrive::Plan {
        ring: &ring,
        shape: RingShape {
            sync_method: write.map(|write| write.ring_sync.method()),
            ..context.shape
        },
        options: context.drive_options.clone(),
        run,
        warmup: run / 5,
        read_window: run / 4,
        keep_logdrives: context.keep_rings,
    };
    let mut figures = logdrive::logdrive_section(&plan)?;
    context.remove_ring(&ring);
    if let Some(write) = write {
        for comparison in &mut figures.writes {
            comparison.set_ratios(write.ceiling_mb, write.ceiling_p50, write.ceiling_p99);
        }
    }
    Ok(figures)
}

/// The section's tables and lines on the terminal.
pub fn print_logdrive_section(figures: &LogDriveFigures) {
    println!();
    for line in logdrive_report::lines(figures) {
        println!("{line}");
    }
}
