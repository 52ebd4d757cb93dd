//! How a subcommand fails: an exit status and one sentence for stderr, and the mapping of the
//! engine's and replay's errors to the statuses of the CLI's contract (docs/cli.md).

use std::path::Path;

use sealog::{AppendError, OpenError, TrimError};
use sealog_wal::ReplayError;

/// Exit status for usage errors, unusable rings and I/O errors.
pub(crate) const EXIT_UNUSABLE: u8 = 2;
/// Exit status for corruption of acknowledged data.
pub(crate) const EXIT_CORRUPT: u8 = 3;
/// Exit status for any other failure, a ring in use among them.
pub(crate) const EXIT_OTHER: u8 = 1;

/// A failure with its exit status and one sentence.
pub(crate) struct Failure {
    pub(crate) status: u8,
    pub(crate) message: String,
}

pub(crate) fn fail(status: u8, message: impl std::fmt::Display) -> Failure {
    Failure {
        status,
        message: message.to_string(),
    }
}

pub(crate) fn open_failure(error: OpenError) -> Failure {
    match &error {
        OpenError::Corrupt { .. } => fail(EXIT_CORRUPT, error),
        OpenError::Locked { .. } => fail(EXIT_OTHER, error),
        _ => fail(EXIT_UNUSABLE, error),
    }
}

/// An append's failure: an I/O error that stopped the drive is exit 2, anything else 1.
pub(crate) fn append_failure(path: &Path, error: AppendError) -> Failure {
    let status = match error {
        AppendError::Failed(_) => EXIT_UNUSABLE,
        _ => EXIT_OTHER,
    };
    fail(status, format!("{}: {error}", path.display()))
}

/// A trim's failure: an I/O error that stopped the drive is exit 2, anything else 1.
pub(crate) fn trim_failure(path: &Path, error: TrimError) -> Failure {
    let status = match error {
        TrimError::Failed(_) => EXIT_UNUSABLE,
        _ => EXIT_OTHER,
    };
    fail(status, format!("{}: {error}", path.display()))
}

pub(crate) fn replay_failure(path: &Path, error: ReplayError) -> Failure {
    match error {
        ReplayError::Corruption(_) => fail(EXIT_CORRUPT, format!("{}: {error}", path.display())),
        _ => fail(EXIT_UNUSABLE, format!("{}: {error}", path.display())),
    }
}
