//! `sealog format`: makes a ring (or, with `--logdrive`, one shaped for a LogDrive store) and
//! says what it made and which sync method it chose.

use std::path::Path;

use sealog::{FormatError, FormatOptions};

use crate::describe::purpose_sentence;
use crate::failure::{fail, Failure, EXIT_OTHER, EXIT_UNUSABLE};
use crate::{logdrive, progress};

/// Formats the ring `options` ask for; with `logdrive`, one the LogDrive planner shapes for a
/// store, checked once made and described after the usual report.
pub(crate) fn format_ring(
    path: &Path,
    logdrive: bool,
    options: FormatOptions,
) -> Result<(), Failure> {
    let options = if logdrive {
        logdrive::plan(path, options)?
    } else {
        options
    };
    let control = run_format(path, options)?;
    let geometry = control.geometry;
    if logdrive {
        logdrive::check_made(path, &geometry)?;
    }
    println!(
        "formatted {}: ring {} with {} segments of {} bytes, {}-byte blocks, payloads up to {} \
         bytes",
        path.display(),
        control.ring_id,
        geometry.segment_count,
        geometry.segment_size_bytes,
        geometry.block_size_bytes,
        geometry.payload_size_max_bytes()
    );
    println!(
        "sync method: {}",
        sealog::sync_probe::explain(&control.sync)
    );
    if logdrive {
        println!("holds: {}", purpose_sentence(control.purpose));
        println!("logdrive: {}", logdrive::describe(&geometry));
    }
    Ok(())
}

/// Runs the engine's format with a progress line on a terminal, mapping its errors to exit
/// statuses.
fn run_format(path: &Path, options: FormatOptions) -> Result<sealog::ControlBlock, Failure> {
    let progress = progress::Progress::on_terminal("formatting");
    let options = match &progress {
        Some(progress) => {
            let progress = progress.clone();
            options.progress(move |done, total| progress.show(done, total))
        }
        None => options,
    };
    let formatted = sealog::format(path, &options);
    if let Some(progress) = progress {
        progress.finish();
    }
    // A device that is mounted, partitioned or carries a signature is, as it stands, not a
    // usable place for a ring: exit 2, as a directory that is not empty is.
    formatted.map_err(|error| match error {
        FormatError::InUse { .. } => fail(EXIT_OTHER, error),
        FormatError::Io { .. }
        | FormatError::SyncProbe { .. }
        | FormatError::NotEmpty { .. }
        | FormatError::TooSmall { .. }
        | FormatError::DeviceTooSmall { .. }
        | FormatError::Geometry { .. }
        | FormatError::Mounted { .. }
        | FormatError::Held { .. }
        | FormatError::Partitioned { .. }
        | FormatError::Signature { .. } => fail(EXIT_UNUSABLE, error),
    })
}
