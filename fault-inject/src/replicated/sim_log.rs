//! [`SimLog`]: what a log must offer to be simulated (an append of a value id, check_tail,
//! read, and a reconfiguration), each operation a local boxed future; [`SimError`]: whether
//! a failed operation certainly did nothing (definite) or may have taken effect
//! (indeterminate). A log appends payloads, not ids: [`payload`] and [`value_of`] map one
//! to the other.

use std::fmt;
use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;

/// A boxed future that need not be `Send`: the simulation runs on one thread.
pub type LocalBoxFuture<T> = Pin<Box<dyn Future<Output = T>>>;

/// Why an operation of a simulated log failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SimError {
    /// Nothing happened: the history leaves the operation out.
    Definite(String),
    /// The operation may have taken effect: the history records it as never returning.
    Indeterminate(String),
}

impl fmt::Display for SimError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SimError::Definite(reason) => write!(formatter, "definite: {reason}"),
            SimError::Indeterminate(reason) => write!(formatter, "indeterminate: {reason}"),
        }
    }
}

impl SimError {
    /// The error for a failure that is `definite` or not, for `reason`.
    pub fn of(definite: bool, reason: impl fmt::Display) -> SimError {
        if definite {
            SimError::Definite(reason.to_string())
        } else {
            SimError::Indeterminate(reason.to_string())
        }
    }
}

/// A log under simulation: one client's handle on it. Several clients may each hold a
/// handle on one shared log; each runs one operation at a time.
pub trait SimLog {
    /// Appends the payload of `value` (see [`payload`]): the position it took.
    fn append(&self, value: u64) -> LocalBoxFuture<Result<u64, SimError>>;

    /// The tail: the first position not in the log.
    fn check_tail(&self) -> LocalBoxFuture<Result<u64, SimError>>;

    /// The value at `position`, or `None` at or past the tail.
    fn read(&self, position: u64) -> LocalBoxFuture<Result<Option<u64>, SimError>>;

    /// Reconfigures the log (for a VirtualLog, a reconfig_extend); not part of the model.
    fn reconfigure(&self) -> LocalBoxFuture<Result<(), SimError>>;
}

/// The payload a log appends for the value id `value`: its 8 little-endian bytes.
pub fn payload(value: u64) -> Bytes {
    Bytes::copy_from_slice(&value.to_le_bytes())
}

/// What a read of `position` answers when the log gave `read`: the value id it holds, or
/// a definite error when it holds bytes no [`payload`] makes.
pub fn read_value(position: u64, read: Option<Bytes>) -> Result<Option<u64>, SimError> {
    match read {
        None => Ok(None),
        Some(bytes) => value_of(&bytes)
            .map(Some)
            .ok_or_else(|| SimError::Definite(format!("{position} holds {bytes:?}"))),
    }
}

/// The value id of a payload made by [`payload`]; `None` for any other bytes.
pub fn value_of(payload: &[u8]) -> Option<u64> {
    let bytes: [u8; 8] = payload.try_into().ok()?;
    Some(u64::from_le_bytes(bytes))
}
