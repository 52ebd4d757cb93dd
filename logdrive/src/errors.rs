//! How the engine's errors become LogDrive errors: a payload over the ring's limit is
//! `TooLarge`, a full ring `RingFull`, a drive that stopped `Stopped`; a read that failed on
//! a drive still running is that read's `Io`.

use sealog::{AppendError, ReadError};

use crate::api::LogDriveError;

/// The LogDrive error an append's engine error becomes.
pub(crate) fn append_error(error: AppendError) -> LogDriveError {
    match error {
        AppendError::PayloadTooLarge {
            payload_len,
            payload_size_max_bytes,
        } => LogDriveError::TooLarge {
            len: payload_len,
            max: u64::from(payload_size_max_bytes),
        },
        AppendError::RingFull { .. } => LogDriveError::RingFull,
        other => LogDriveError::Stopped {
            reason: other.to_string(),
        },
    }
}

/// The LogDrive error a read's engine error becomes.
pub(crate) fn read_error(error: ReadError) -> LogDriveError {
    match error {
        ReadError::Failed(_) | ReadError::Closed(_) => LogDriveError::Stopped {
            reason: error.to_string(),
        },
        other => LogDriveError::Io {
            reason: other.to_string(),
        },
    }
}
