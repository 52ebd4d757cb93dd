//! The error a quorum reports when an operation sent to many children did not reach its
//! quorum: which child's error names the cause, and whether the failure is definite.
//!
//! The cause is the one that says most about the log: a `Conflict` on any child (the
//! single-value rule is broken there), else a `Fenced` (the highest epoch named), else a
//! `Sealed`, else the first error received. The failure is indeterminate when any child took
//! the operation (a write on one replica can become visible through a repair) or any child's
//! error was itself indeterminate; it is definite only when every child refused definitely.

use super::ask::Answer;
use crate::api::LogDriveError;

/// The error for answers that did not reach a quorum (see the module doc).
pub(crate) fn failure<T>(answers: &[Answer<T>]) -> LogDriveError {
    let errors: Vec<&LogDriveError> = answers
        .iter()
        .filter_map(|(_, outcome)| outcome.as_ref().err())
        .collect();
    let took = answers.len() > errors.len();
    let Some(cause) = cause(&errors) else {
        return LogDriveError::Io {
            reason: "no child answered".into(),
        };
    };
    if took || errors.iter().any(|error| !error.is_definite()) {
        cause.indeterminate()
    } else {
        cause
    }
}

/// The cause to report among children's errors (see the module doc), unwrapped.
fn cause(errors: &[&LogDriveError]) -> Option<LogDriveError> {
    let causes = || errors.iter().map(|error| error.cause());
    if let Some(conflict) = causes().find(|cause| matches!(cause, LogDriveError::Conflict { .. })) {
        return Some(conflict.clone());
    }
    let fenced = causes()
        .filter_map(|cause| match cause {
            LogDriveError::Fenced { current } => Some(*current),
            _ => None,
        })
        .max();
    if let Some(current) = fenced {
        return Some(LogDriveError::Fenced { current });
    }
    causes()
        .find(|cause| matches!(cause, LogDriveError::Sealed { .. }))
        .or_else(|| errors.first().map(|error| error.cause()))
        .cloned()
}

/// The first error among answers, for an operation whose failure is a child's failure.
pub(crate) fn first_error<T>(answers: &[Answer<T>]) -> Option<LogDriveError> {
    answers
        .iter()
        .find_map(|(_, outcome)| outcome.as_ref().err().cloned())
}
