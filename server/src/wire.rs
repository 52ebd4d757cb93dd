//! What the LogDrive trait's values become on the wire and back: errors (every
//! [`LogDriveError`] variant with its fields, and whether it is definite), read outcomes,
//! tail descriptions and lengths. A reply the other side cannot decode is itself an error
//! (`Io`, indeterminate: the operation was sent), never a panic.

use std::collections::BTreeSet;

use sealog_logdrive::{Length, LogDriveError, ReadOutcome, TailDesc};

use crate::pb::{self, error::Cause};

/// `error` as a message: its cause, and whether it was marked indeterminate.
pub fn error_to_pb(error: &LogDriveError) -> pb::Error {
    let indeterminate = matches!(error, LogDriveError::Indeterminate { .. });
    pb::Error {
        indeterminate,
        cause: Some(cause_to_pb(error.cause())),
    }
}

fn cause_to_pb(cause: &LogDriveError) -> Cause {
    let reason = |reason: &str| pb::Reason {
        reason: reason.to_string(),
    };
    match cause {
        LogDriveError::Conflict { address } => Cause::Conflict(pb::Address { address: *address }),
        LogDriveError::Sealed { length } => Cause::Sealed(pb::SealedAt { length: *length }),
        LogDriveError::Fenced { current } => Cause::Fenced(pb::Epoch { current: *current }),
        LogDriveError::OutOfRange { address, valid } => Cause::OutOfRange(pb::OutOfRange {
            address: *address,
            valid_start: valid.start,
            valid_end: valid.end,
        }),
        LogDriveError::InvalidWindow { k, max } => {
            Cause::InvalidWindow(pb::Window { k: *k, max: *max })
        }
        LogDriveError::Damaged { addresses } => Cause::Damaged(pb::Range {
            start: addresses.start,
            end: addresses.end,
        }),
        LogDriveError::Missing { id, generation } => Cause::Missing(pb::DriveRef {
            id: *id,
            generation: *generation,
        }),
        LogDriveError::Exists { id } => Cause::Exists(pb::Id { id: *id }),
        LogDriveError::TooLarge { len, max } => Cause::TooLarge(pb::TooLarge {
            len: *len,
            max: *max,
        }),
        LogDriveError::RingFull => Cause::RingFull(pb::Empty {}),
        LogDriveError::Stopped { reason: r } => Cause::Stopped(reason(r)),
        LogDriveError::Io { reason: r } => Cause::Io(reason(r)),
        LogDriveError::Overloaded { in_flight_max } => Cause::Overloaded(pb::Overloaded {
            in_flight_max: *in_flight_max,
        }),
        LogDriveError::Denied { reason: r } => Cause::Denied(reason(r)),
        // `cause()` never returns the wrapper; should a future variant nest, it still
        // crosses as what it says.
        LogDriveError::Indeterminate { cause } => cause_to_pb(cause),
    }
}

/// The error a message names (an error without a cause, from a newer peer, is `Io`).
pub fn error_from_pb(error: pb::Error) -> LogDriveError {
    let cause = match error.cause {
        Some(cause) => cause_from_pb(cause),
        None => LogDriveError::Io {
            reason: "the server sent an error without a cause".into(),
        },
    };
    if error.indeterminate {
        cause.indeterminate()
    } else {
        cause
    }
}

fn cause_from_pb(cause: Cause) -> LogDriveError {
    match cause {
        Cause::Conflict(a) => LogDriveError::Conflict { address: a.address },
        Cause::Sealed(l) => LogDriveError::Sealed { length: l.length },
        Cause::Fenced(e) => LogDriveError::Fenced { current: e.current },
        Cause::OutOfRange(o) => LogDriveError::OutOfRange {
            address: o.address,
            valid: o.valid_start..o.valid_end,
        },
        Cause::InvalidWindow(w) => LogDriveError::InvalidWindow { k: w.k, max: w.max },
        Cause::Damaged(r) => LogDriveError::Damaged {
            addresses: r.start..r.end,
        },
        Cause::Missing(d) => LogDriveError::Missing {
            id: d.id,
            generation: d.generation,
        },
        Cause::Exists(i) => LogDriveError::Exists { id: i.id },
        Cause::TooLarge(t) => LogDriveError::TooLarge {
            len: t.len,
            max: t.max,
        },
        Cause::RingFull(_) => LogDriveError::RingFull,
        Cause::Stopped(r) => LogDriveError::Stopped { reason: r.reason },
        Cause::Io(r) => LogDriveError::Io { reason: r.reason },
        Cause::Overloaded(o) => LogDriveError::Overloaded {
            in_flight_max: o.in_flight_max,
        },
        Cause::Denied(r) => LogDriveError::Denied { reason: r.reason },
    }
}

/// The error for a reply whose `result` is missing or of the wrong kind: the server was
/// sent the operation, so what it did is unknown.
pub fn malformed_reply(operation: &str) -> LogDriveError {
    LogDriveError::Io {
        reason: format!("the server's {operation} reply holds no result"),
    }
}

/// A read's outcome as its reply.
pub fn read_to_pb(outcome: Result<ReadOutcome, LogDriveError>) -> pb::ReadReply {
    use pb::read_reply::Result as R;
    let result = match outcome {
        Ok(ReadOutcome::Value(bytes)) => R::Value(bytes),
        Ok(ReadOutcome::Unwritten) => R::Unwritten(pb::Empty {}),
        Ok(ReadOutcome::Trimmed { first }) => R::TrimmedFirst(first),
        Ok(ReadOutcome::Damaged) => R::Damaged(pb::Empty {}),
        Err(error) => R::Error(error_to_pb(&error)),
    };
    pb::ReadReply {
        result: Some(result),
    }
}

/// A read reply as the read's outcome.
pub fn read_from_pb(reply: pb::ReadReply) -> Result<ReadOutcome, LogDriveError> {
    use pb::read_reply::Result as R;
    match reply.result {
        Some(R::Value(bytes)) => Ok(ReadOutcome::Value(bytes)),
        Some(R::Unwritten(_)) => Ok(ReadOutcome::Unwritten),
        Some(R::TrimmedFirst(first)) => Ok(ReadOutcome::Trimmed { first }),
        Some(R::Damaged(_)) => Ok(ReadOutcome::Damaged),
        Some(R::Error(error)) => Err(error_from_pb(error)),
        None => Err(malformed_reply("read")),
    }
}

/// A unit outcome as its reply.
pub fn unit_to_pb(outcome: Result<(), LogDriveError>) -> pb::UnitReply {
    use pb::unit_reply::Result as R;
    let result = match outcome {
        Ok(()) => R::Ok(pb::Empty {}),
        Err(error) => R::Error(error_to_pb(&error)),
    };
    pb::UnitReply {
        result: Some(result),
    }
}

/// A unit reply as its outcome.
pub fn unit_from_pb(reply: pb::UnitReply, operation: &str) -> Result<(), LogDriveError> {
    use pb::unit_reply::Result as R;
    match reply.result {
        Some(R::Ok(_)) => Ok(()),
        Some(R::Error(error)) => Err(error_from_pb(error)),
        None => Err(malformed_reply(operation)),
    }
}

/// A tail description as a message.
pub fn tail_to_pb(tail: &TailDesc) -> pb::TailDesc {
    pb::TailDesc {
        n: tail.n,
        holes: tail.holes.iter().copied().collect(),
        holes_below_window: tail.holes_below_window,
    }
}

/// A weak_tail reply as its outcome.
pub fn tail_from_pb(reply: pb::WeakTailReply) -> Result<TailDesc, LogDriveError> {
    use pb::weak_tail_reply::Result as R;
    match reply.result {
        Some(R::Tail(tail)) => Ok(TailDesc {
            n: tail.n,
            holes: tail.holes.into_iter().collect::<BTreeSet<u64>>(),
            holes_below_window: tail.holes_below_window,
        }),
        Some(R::Error(error)) => Err(error_from_pb(error)),
        None => Err(malformed_reply("weak_tail")),
    }
}

/// A length as a message.
pub fn length_to_pb(length: &Length) -> pb::Length {
    pb::Length {
        n: length.n,
        t: length.t,
        sealed: length.sealed,
        fence: length.fence,
        first: length.first,
    }
}

/// A length reply as its outcome.
pub fn length_from_pb(reply: pb::LengthReply) -> Result<Length, LogDriveError> {
    use pb::length_reply::Result as R;
    match reply.result {
        Some(R::Length(l)) => Ok(Length {
            n: l.n,
            t: l.t,
            sealed: l.sealed,
            fence: l.fence,
            first: l.first,
        }),
        Some(R::Error(error)) => Err(error_from_pb(error)),
        None => Err(malformed_reply("length")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn cause() -> impl Strategy<Value = LogDriveError> {
        let n = any::<u64>;
        let text = "[ -~]{0,40}";
        prop_oneof![
            n().prop_map(|address| LogDriveError::Conflict { address }),
            n().prop_map(|length| LogDriveError::Sealed { length }),
            n().prop_map(|current| LogDriveError::Fenced { current }),
            (n(), n(), n()).prop_map(|(address, a, b)| LogDriveError::OutOfRange {
                address,
                valid: a..b
            }),
            (n(), n()).prop_map(|(k, max)| LogDriveError::InvalidWindow { k, max }),
            (n(), n()).prop_map(|(a, b)| LogDriveError::Damaged { addresses: a..b }),
            (n(), n()).prop_map(|(id, generation)| LogDriveError::Missing { id, generation }),
            n().prop_map(|id| LogDriveError::Exists { id }),
            (n(), n()).prop_map(|(len, max)| LogDriveError::TooLarge { len, max }),
            Just(LogDriveError::RingFull),
            text.prop_map(|reason| LogDriveError::Stopped { reason }),
            text.prop_map(|reason| LogDriveError::Io { reason }),
            n().prop_map(|in_flight_max| LogDriveError::Overloaded { in_flight_max }),
            text.prop_map(|reason| LogDriveError::Denied { reason }),
        ]
    }

    proptest! {
        /// Every variant comes back with its fields, and an indeterminate one stays so: the
        /// quorum above a remote drive decides on `is_definite`.
        #[test]
        fn every_error_survives_the_wire_with_its_nature(cause in cause(), wrap: bool) {
            let error = if wrap { cause.indeterminate() } else { cause };
            let back = error_from_pb(error_to_pb(&error));
            prop_assert_eq!(back.is_definite(), error.is_definite());
            prop_assert_eq!(&back, &error);
        }
    }

    #[test]
    fn a_reply_without_a_result_is_an_error_not_a_panic() {
        let read = read_from_pb(pb::ReadReply { result: None });
        assert!(matches!(read, Err(LogDriveError::Io { .. })));
        assert!(unit_from_pb(pb::UnitReply { result: None }, "write").is_err());
        let empty = error_from_pb(pb::Error {
            indeterminate: false,
            cause: None,
        });
        assert!(!empty.is_definite());
    }
}
