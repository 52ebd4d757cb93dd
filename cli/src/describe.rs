//! Words and JSON values for what a ring holds and what it is, shared by `format`, `stat` and
//! `inspect`, and the count of LogDrives the last two show.

use std::path::Path;

use sealog::reader::RingReader;
use sealog::{RecoveryMode, RingPurpose, ScanPolicy};
use sealog_logdrive::StoreView;

/// What a ring holds, in the plain reports' words.
pub(crate) fn purpose_sentence(purpose: RingPurpose) -> &'static str {
    match purpose {
        RingPurpose::Log => "a plain log (log)",
        RingPurpose::LogDriveStore => {
            "a LogDrive store's records (logdrive_store): the store's reclaimer owns the head"
        }
    }
}

pub(crate) fn kind_json(kind: sealog::storage::RingKind) -> &'static str {
    match kind {
        sealog::storage::RingKind::BlockDevice => "block_device",
        sealog::storage::RingKind::Directory => "directory",
    }
}

/// How many LogDrives a ring that holds a store has (`None` for a plain log), read through
/// `reader` in quarantine (damage is `logdrive check`'s to report, not a count's to fail
/// on); `None` too, with a warning, when the store cannot be read.
pub(crate) fn logdrive_count(
    path: &Path,
    purpose: RingPurpose,
    reader: RingReader,
) -> Option<usize> {
    if purpose != RingPurpose::LogDriveStore {
        return None;
    }
    match StoreView::from_reader(path, reader, RecoveryMode::Quarantine, ScanPolicy::Hinted) {
        Ok(view) => Some(view.ids().len()),
        Err(error) => {
            eprintln!("sealog: warning: cannot count the LogDrives: {error}");
            None
        }
    }
}
