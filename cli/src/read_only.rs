//! Replaying a ring read-only, as `dump` and `verify` do: under the shared lock, through
//! replay, with the visitor seeing entries up to the first problem.

use std::path::Path;

use sealog::reader::RingReader;
use sealog_wal::{RecoveryReport, ReplayError, ReplayOptions, ScanPolicy};

use crate::failure::{open_failure, Failure};
use crate::progress;

/// Replays the ring read-only, with the tail hint or (`scan` full) over the whole ring; the
/// visitor sees entries up to the first problem.
pub(crate) fn replay_read_only(
    path: &Path,
    scan: ScanPolicy,
    visit: &mut dyn FnMut(&sealog_wal::Entry<'_>),
) -> Result<Result<RecoveryReport, ReplayError>, Failure> {
    replay_read_only_with(path, scan, None, visit)
}

/// [`replay_read_only`], showing the bytes read on `progress` when there is one.
pub(crate) fn replay_read_only_with(
    path: &Path,
    scan: ScanPolicy,
    progress: Option<progress::Progress>,
    visit: &mut dyn FnMut(&sealog_wal::Entry<'_>),
) -> Result<Result<RecoveryReport, ReplayError>, Failure> {
    let reader = RingReader::open(path).map_err(open_failure)?;
    let options = ReplayOptions {
        scan,
        ..ReplayOptions::default()
    };
    let mut source = progress::Counted::new(reader, progress);
    Ok(sealog_wal::replay(&mut source, &options, visit))
}
