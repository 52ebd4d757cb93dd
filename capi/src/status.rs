//! From the engine's typed errors to a C status code and a message: [`Failure`] is what a
//! call that did not succeed hands back to the boundary, which returns its status and leaves
//! its message as the thread's last error. The message is the error's own sentence (it names
//! the path, the LSN and what failed), prefixed with the call and the drive's path.

use sealog::{AppendError, FormatError, OpenError, ReadError, TrimError, WaitError};
use sealog_wal::error::ReplayError;

use crate::types::sealog_status;

/// A call's failure: its status code and what to tell the caller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// The code returned.
    pub status: sealog_status,
    /// The message left as the thread's last error.
    pub message: String,
    /// A LogDrive operation's error, whose fields `sealog_logdrive_last_error` hands out.
    pub logdrive: Option<sealog_logdrive::LogDriveError>,
}

impl Failure {
    /// A failure with its own message.
    pub fn new(status: sealog_status, message: impl Into<String>) -> Failure {
        Failure {
            status,
            message: message.into(),
            logdrive: None,
        }
    }

    /// An argument the caller got wrong.
    pub fn invalid(message: impl Into<String>) -> Failure {
        Failure::new(sealog_status::SEALOG_INVALID_ARGUMENT, message)
    }

    /// The same failure with where it happened in front of its message.
    pub fn context(mut self, place: impl std::fmt::Display) -> Failure {
        self.message = format!("{place}: {}", self.message);
        self
    }
}

impl From<AppendError> for Failure {
    fn from(error: AppendError) -> Failure {
        let status = match &error {
            AppendError::PayloadTooLarge { .. } => sealog_status::SEALOG_TOO_LARGE,
            AppendError::EmptyGroup => sealog_status::SEALOG_EMPTY_GROUP,
            AppendError::GroupTooLarge { .. } => sealog_status::SEALOG_GROUP_TOO_LARGE,
            AppendError::ReservedKind { .. } => sealog_status::SEALOG_INVALID_ARGUMENT,
            AppendError::RingFull { .. } => sealog_status::SEALOG_RING_FULL,
            AppendError::Failed(_) => sealog_status::SEALOG_FAILED,
            AppendError::Closed(_) => sealog_status::SEALOG_CLOSED,
        };
        Failure::new(status, error.to_string())
    }
}

impl From<ReadError> for Failure {
    fn from(error: ReadError) -> Failure {
        let status = match &error {
            ReadError::Trimmed { .. } => sealog_status::SEALOG_TRIMMED,
            ReadError::NotYetDurable { .. } => sealog_status::SEALOG_NOT_YET_DURABLE,
            ReadError::Damaged { .. } => sealog_status::SEALOG_DAMAGED,
            ReadError::Resources { .. } => sealog_status::SEALOG_IO,
            ReadError::Failed(_) => sealog_status::SEALOG_FAILED,
            ReadError::Closed(_) => sealog_status::SEALOG_CLOSED,
        };
        Failure::new(status, error.to_string())
    }
}

impl From<TrimError> for Failure {
    fn from(error: TrimError) -> Failure {
        let status = match &error {
            TrimError::BeyondDurable { .. } => sealog_status::SEALOG_NOT_YET_DURABLE,
            // Only a damaged or crafted control block gets here.
            TrimError::ControlSequenceExhausted { .. } => sealog_status::SEALOG_CORRUPT,
            TrimError::Failed(_) => sealog_status::SEALOG_FAILED,
            TrimError::Closed(_) => sealog_status::SEALOG_CLOSED,
        };
        Failure::new(status, error.to_string())
    }
}

impl From<WaitError> for Failure {
    fn from(error: WaitError) -> Failure {
        let status = match &error {
            WaitError::TimedOut { .. } => sealog_status::SEALOG_TIMED_OUT,
            WaitError::Failed(_) => sealog_status::SEALOG_FAILED,
            WaitError::Closed(_) => sealog_status::SEALOG_CLOSED,
        };
        Failure::new(status, error.to_string())
    }
}

impl From<OpenError> for Failure {
    fn from(error: OpenError) -> Failure {
        let status = match &error {
            OpenError::NotARing { .. }
            | OpenError::BlockSizeMismatch { .. }
            | OpenError::SegmentFile { .. } => sealog_status::SEALOG_NOT_A_RING,
            OpenError::Ring { source, .. } => replay_status(source),
            OpenError::Corrupt { .. } | OpenError::ControlSequenceExhausted { .. } => {
                sealog_status::SEALOG_CORRUPT
            }
            OpenError::Options { .. } => sealog_status::SEALOG_INVALID_ARGUMENT,
            OpenError::Locked { .. } => sealog_status::SEALOG_IN_USE,
            OpenError::Io { .. } => sealog_status::SEALOG_IO,
        };
        Failure::new(status, error.to_string())
    }
}

/// What a control block that could not be read as a ring means to the caller: an I/O error,
/// no ring (or one of another version or size), or a damaged one.
fn replay_status(error: &ReplayError) -> sealog_status {
    match error {
        ReplayError::ControlIo { .. } => sealog_status::SEALOG_IO,
        ReplayError::NotARing { .. }
        | ReplayError::UnsupportedVersion { .. }
        | ReplayError::SourceTooSmall { .. } => sealog_status::SEALOG_NOT_A_RING,
        _ => sealog_status::SEALOG_CORRUPT,
    }
}

impl From<FormatError> for Failure {
    fn from(error: FormatError) -> Failure {
        let status = match &error {
            FormatError::NotEmpty { .. } => sealog_status::SEALOG_NOT_EMPTY,
            FormatError::TooSmall { .. }
            | FormatError::DeviceTooSmall { .. }
            | FormatError::Geometry { .. } => sealog_status::SEALOG_INVALID_ARGUMENT,
            FormatError::InUse { .. }
            | FormatError::Mounted { .. }
            | FormatError::Held { .. }
            | FormatError::Partitioned { .. } => sealog_status::SEALOG_IN_USE,
            // A device carrying a file system or another signature is, as a directory with
            // files, not empty (the C options have no override for it yet).
            FormatError::Signature { .. } => sealog_status::SEALOG_NOT_EMPTY,
            FormatError::Io { .. } | FormatError::SyncProbe { .. } => sealog_status::SEALOG_IO,
        };
        Failure::new(status, error.to_string())
    }
}

/// The name of a status code as the header spells it, for messages and `sealog_status_name`.
pub fn status_name(code: i32) -> &'static std::ffi::CStr {
    use sealog_status::*;
    const NAMES: [(sealog_status, &std::ffi::CStr); 30] = [
        (SEALOG_OK, c"SEALOG_OK"),
        (SEALOG_PENDING, c"SEALOG_PENDING"),
        (SEALOG_END, c"SEALOG_END"),
        (SEALOG_TRIMMED, c"SEALOG_TRIMMED"),
        (SEALOG_NOT_YET_DURABLE, c"SEALOG_NOT_YET_DURABLE"),
        (SEALOG_RING_FULL, c"SEALOG_RING_FULL"),
        (SEALOG_TOO_LARGE, c"SEALOG_TOO_LARGE"),
        (SEALOG_CORRUPT, c"SEALOG_CORRUPT"),
        (SEALOG_DAMAGED, c"SEALOG_DAMAGED"),
        (SEALOG_IO, c"SEALOG_IO"),
        (SEALOG_CLOSED, c"SEALOG_CLOSED"),
        (SEALOG_FAILED, c"SEALOG_FAILED"),
        (SEALOG_INVALID_ARGUMENT, c"SEALOG_INVALID_ARGUMENT"),
        (SEALOG_IN_USE, c"SEALOG_IN_USE"),
        (SEALOG_NOT_A_RING, c"SEALOG_NOT_A_RING"),
        (SEALOG_NOT_EMPTY, c"SEALOG_NOT_EMPTY"),
        (SEALOG_TIMED_OUT, c"SEALOG_TIMED_OUT"),
        (SEALOG_PANIC, c"SEALOG_PANIC"),
        (SEALOG_EMPTY_GROUP, c"SEALOG_EMPTY_GROUP"),
        (SEALOG_GROUP_TOO_LARGE, c"SEALOG_GROUP_TOO_LARGE"),
        (SEALOG_CONFLICT, c"SEALOG_CONFLICT"),
        (SEALOG_SEALED, c"SEALOG_SEALED"),
        (SEALOG_FENCED, c"SEALOG_FENCED"),
        (SEALOG_OUT_OF_RANGE, c"SEALOG_OUT_OF_RANGE"),
        (SEALOG_INVALID_WINDOW, c"SEALOG_INVALID_WINDOW"),
        (SEALOG_MISSING, c"SEALOG_MISSING"),
        (SEALOG_EXISTS, c"SEALOG_EXISTS"),
        (SEALOG_STOPPED, c"SEALOG_STOPPED"),
        (SEALOG_OVERLOADED, c"SEALOG_OVERLOADED"),
        (SEALOG_DENIED, c"SEALOG_DENIED"),
    ];
    NAMES
        .iter()
        .find(|(status, _)| *status as i32 == code)
        .map_or(c"SEALOG_UNKNOWN_STATUS", |(_, name)| name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_has_its_own_name() {
        let mut names = std::collections::BTreeSet::new();
        for code in 0..=29 {
            let name = status_name(code).to_str().expect("ASCII");
            assert!(name.starts_with("SEALOG_") && name != "SEALOG_UNKNOWN_STATUS");
            assert!(names.insert(name), "{name} twice");
        }
        assert_eq!(status_name(30), c"SEALOG_UNKNOWN_STATUS");
        assert_eq!(status_name(22), c"SEALOG_FENCED");
        assert_eq!(status_name(19), c"SEALOG_GROUP_TOO_LARGE");
        assert_eq!(status_name(-1), c"SEALOG_UNKNOWN_STATUS");
        assert_eq!(status_name(3), c"SEALOG_TRIMMED");
    }

    #[test]
    fn typed_errors_keep_their_sentence() {
        let failure = Failure::from(ReadError::Trimmed {
            lsn: 3,
            first_live: 11,
        })
        .context("sealog_read on /ring");
        assert_eq!(failure.status, sealog_status::SEALOG_TRIMMED);
        assert_eq!(
            failure.message,
            "sealog_read on /ring: LSN 3 is trimmed: the log starts at LSN 11"
        );
    }
}
