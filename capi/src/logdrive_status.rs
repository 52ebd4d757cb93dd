//! LogDrive errors to C: each `LogDriveError` cause as a status code, its fields as a
//! `sealog_logdrive_error` (which `sealog_logdrive_last_error` hands out for the thread's
//! last call), and whether it was definite (nothing written) or indeterminate (it may have
//! taken effect). A store that would not open maps as the engine's open errors do.

use sealog_logdrive::{LogDriveError, StoreOpenError};

use crate::status::Failure;
use crate::types::{sealog_logdrive_error, sealog_status};

/// The status of an error's cause (an indeterminate error's status is its cause's; its
/// `definite` field says it may have taken effect).
pub fn cause_status(error: &LogDriveError) -> sealog_status {
    use sealog_status::*;
    match error.cause() {
        LogDriveError::Conflict { .. } => SEALOG_CONFLICT,
        LogDriveError::Sealed { .. } => SEALOG_SEALED,
        LogDriveError::Fenced { .. } => SEALOG_FENCED,
        LogDriveError::OutOfRange { .. } => SEALOG_OUT_OF_RANGE,
        LogDriveError::InvalidWindow { .. } => SEALOG_INVALID_WINDOW,
        LogDriveError::Damaged { .. } => SEALOG_DAMAGED,
        LogDriveError::Missing { .. } => SEALOG_MISSING,
        LogDriveError::Exists { .. } => SEALOG_EXISTS,
        LogDriveError::TooLarge { .. } => SEALOG_TOO_LARGE,
        LogDriveError::RingFull => SEALOG_RING_FULL,
        LogDriveError::Stopped { .. } => SEALOG_STOPPED,
        LogDriveError::Io { .. } => SEALOG_IO,
        LogDriveError::Overloaded { .. } => SEALOG_OVERLOADED,
        LogDriveError::Denied { .. } => SEALOG_DENIED,
        // `cause` never answers an Indeterminate wrapper.
        LogDriveError::Indeterminate { .. } => SEALOG_FAILED,
    }
}

/// A LogDrive operation's failure, its details kept for `sealog_logdrive_last_error`.
pub fn logdrive_failure(error: LogDriveError) -> Failure {
    let mut failure = Failure::new(cause_status(&error), error.to_string());
    failure.logdrive = Some(error);
    failure
}

/// The C struct of an error's fields (`None`: a struct saying no LogDrive error).
pub fn error_struct(error: Option<&LogDriveError>) -> sealog_logdrive_error {
    let mut out = sealog_logdrive_error {
        struct_size_bytes: size_of::<sealog_logdrive_error>() as u32,
        status: sealog_status::SEALOG_OK as i32,
        definite: 1,
        reserved_zero: 0,
        address: 0,
        length: 0,
        epoch: 0,
        valid_start: 0,
        valid_end: 0,
        k: 0,
        k_max: 0,
        id: 0,
        generation: 0,
        len_bytes: 0,
        max_bytes: 0,
        in_flight_max: 0,
    };
    let Some(error) = error else {
        return out;
    };
    out.status = cause_status(error) as i32;
    out.definite = u32::from(error.is_definite());
    match error.cause() {
        LogDriveError::Conflict { address } => out.address = *address,
        LogDriveError::Sealed { length } => out.length = *length,
        LogDriveError::Fenced { current } => out.epoch = *current,
        LogDriveError::OutOfRange { address, valid } => {
            (out.address, out.valid_start, out.valid_end) = (*address, valid.start, valid.end);
        }
        LogDriveError::InvalidWindow { k, max } => (out.k, out.k_max) = (*k, *max),
        LogDriveError::Damaged { addresses } => {
            (out.valid_start, out.valid_end) = (addresses.start, addresses.end);
        }
        LogDriveError::Missing { id, generation } => (out.id, out.generation) = (*id, *generation),
        LogDriveError::Exists { id } => out.id = *id,
        LogDriveError::TooLarge { len, max } => (out.len_bytes, out.max_bytes) = (*len, *max),
        LogDriveError::Overloaded { in_flight_max } => out.in_flight_max = *in_flight_max,
        LogDriveError::RingFull
        | LogDriveError::Stopped { .. }
        | LogDriveError::Io { .. }
        | LogDriveError::Denied { .. }
        | LogDriveError::Indeterminate { .. } => {}
    }
    out
}

/// A store that would not open.
pub fn store_open_failure(error: StoreOpenError) -> Failure {
    match error {
        StoreOpenError::Drive(error) => Failure::from(error),
        error => Failure::invalid(error.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_cause_keeps_its_fields_and_its_nature() {
        let fenced = error_struct(Some(&LogDriveError::Fenced { current: 7 }));
        assert_eq!(fenced.status, sealog_status::SEALOG_FENCED as i32);
        assert_eq!((fenced.epoch, fenced.definite), (7, 1));
        let maybe = LogDriveError::Sealed { length: 12 }.indeterminate();
        let sealed = error_struct(Some(&maybe));
        assert_eq!(sealed.status, sealog_status::SEALOG_SEALED as i32);
        assert_eq!((sealed.length, sealed.definite), (12, 0));
        let range = error_struct(Some(&LogDriveError::OutOfRange {
            address: 40,
            valid: 3..32,
        }));
        assert_eq!(
            (range.address, range.valid_start, range.valid_end),
            (40, 3, 32)
        );
        let missing = error_struct(Some(&LogDriveError::Missing {
            id: 5,
            generation: 2,
        }));
        assert_eq!((missing.status, missing.id, missing.generation), (25, 5, 2));
        let stopped = LogDriveError::Stopped {
            reason: "closed".into(),
        };
        assert_eq!(error_struct(Some(&stopped)).definite, 0);
        assert_eq!(error_struct(None).status, 0);
        let failure = logdrive_failure(LogDriveError::Conflict { address: 9 });
        assert_eq!(failure.status, sealog_status::SEALOG_CONFLICT);
        assert_eq!(failure.message, "address 9 already holds different bytes");
    }
}
