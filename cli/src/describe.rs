//! Words and JSON values for what a ring holds and what it is, shared by `format`, `stat` and
//! `inspect`.

use sealog::RingPurpose;

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
