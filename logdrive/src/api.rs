//! The `LogDrive` trait and the types it speaks in (docs/logdrive.md, "What a LogDrive
//! promises"): an address space of write-once registers with `write`, `read`, `weak_tail`,
//! `seal`, `fence`, `trim` and `length`. Every operation returns an [`OpFuture`], a boxed
//! `Send + 'static` future, so a local drive, the striped and quorum compositions and a
//! remote drive can all sit behind `Box<dyn LogDrive>` / `Arc<dyn LogDrive>`, and a
//! composition can have many operations in flight on many children without a thread per
//! call ([`wait()`](crate::wait()) blocks on one).
//!
//! **Operations are issued when called**, not when their future is first polled: the call
//! itself checks the operation and hands it on (to the drive, or to the store's wait for
//! ring room), and dropping the future afterwards does not take it back. A composition can
//! therefore send a write to every replica and await only a quorum of the futures; a
//! caller that drops a write's future must treat the write as possibly done.

use std::collections::BTreeSet;
use std::future::Future;
use std::ops::Range;
use std::pin::Pin;

use bytes::Bytes;

/// What every operation of a [`LogDrive`] returns: a future of its outcome.
pub type OpFuture<T> = Pin<Box<dyn Future<Output = Result<T, LogDriveError>> + Send + 'static>>;

/// An operation's future that is ready at once with `outcome` (a check refused it, or it
/// needed no I/O).
pub(crate) fn ready<T: Send + 'static>(outcome: Result<T, LogDriveError>) -> OpFuture<T> {
    Box::pin(std::future::ready(outcome))
}

/// An address space of single-value registers, durable and fenced (docs/logdrive.md). Every
/// operation is issued when it is called (see the module doc).
pub trait LogDrive: Send + Sync {
    /// Writes `payload` at `address` under the writer's `epoch`. The same bytes again is
    /// idempotent; different bytes at a written address is [`LogDriveError::Conflict`] and
    /// the first value stays. Acknowledged once durable.
    fn write(&self, address: u64, epoch: u64, payload: Bytes) -> OpFuture<()>;

    /// Reads `address`: its payload, [`ReadOutcome::Unwritten`] (a normal answer),
    /// [`ReadOutcome::Trimmed`] below the trim point, or [`ReadOutcome::Damaged`].
    fn read(&self, address: u64) -> OpFuture<ReadOutcome>;

    /// The window scan: the non-contiguous tail N, read exactly, the holes in
    /// [max(0, N - k), N), and whether any hole lies below that window. A `k` above what
    /// the LogDrive answers for (a store's `weak_tail_k_max`, or one a composition cannot
    /// split) is [`LogDriveError::InvalidWindow`].
    fn weak_tail(&self, k: u64) -> OpFuture<TailDesc>;

    /// Seals at `length` on behalf of a sealer of `epoch`, durably: writes at or beyond it
    /// are then [`LogDriveError::Sealed`] and reads there unwritten (what was held there is
    /// dropped); a seal above N leaves [N, length) writable. An epoch below the fence is
    /// [`LogDriveError::Fenced`] (a stale coordinator cannot seal after a newer one
    /// fenced). The same length again is idempotent; another is [`LogDriveError::Sealed`]
    /// naming the sealed length.
    fn seal(&self, length: u64, epoch: u64) -> OpFuture<()>;

    /// Fences at `epoch`, durably and for good: writes stamped lower are then
    /// [`LogDriveError::Fenced`]. The same epoch again is idempotent; a lower one is
    /// [`LogDriveError::Fenced`] naming the current one.
    fn fence(&self, epoch: u64) -> OpFuture<()>;

    /// Trims every address below `upto`, durably; allowed at or below N (and the sealed
    /// length), holes included: a replica that missed writes trims with its group, and the
    /// holes it trims read [`ReadOutcome::Trimmed`].
    fn trim(&self, upto: u64) -> OpFuture<()>;

    /// This replica's lengths and settings, for a coordinator choosing a seal point.
    fn length(&self) -> OpFuture<Length>;

    /// The largest window K its writers may keep between T and N (an AtomicLog's K): for a
    /// store, its `write_window_max`, how far past N a quarantined open looks for damage;
    /// for a composition, what every child admits. A log whose window is over it is
    /// refused when it is built.
    fn write_window_max(&self) -> u64;
}

/// What a read finds at an address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadOutcome {
    /// The payload written there.
    Value(Bytes),
    /// Nothing (acknowledged) is written there: ⊥.
    Unwritten,
    /// The address is below the trim point; `first` is the first address not trimmed.
    Trimmed {
        /// The trim point.
        first: u64,
    },
    /// The address was written but its record fails its checks: never ⊥ (docs/logdrive.md,
    /// quarantine).
    Damaged,
}

/// weakTail's answer for a window k: the non-contiguous tail N and the holes in
/// [max(0, N - k), N).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TailDesc {
    /// N: the first address after which every address is unwritten.
    pub n: u64,
    /// The unwritten addresses in [max(0, N - k), N).
    pub holes: BTreeSet<u64>,
    /// Some address below N - k is unwritten too (not listed). Under the K-window discipline
    /// (N - T never over k) it is false; a replica that missed writes while it was down may
    /// say true, and a quorum, which treats everything below N - k as written, ignores it.
    pub holes_below_window: bool,
}

impl TailDesc {
    /// T, derived: the smallest hole, or N when there is none. When `holes_below_window`,
    /// this is the window's T, and the LogDrive's own T lies lower.
    pub fn t(&self) -> u64 {
        self.holes.first().copied().unwrap_or(self.n)
    }
}

/// A replica's lengths: what a seal coordinator compares across replicas.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Length {
    /// N: the non-contiguous tail.
    pub n: u64,
    /// T: the contiguous tail.
    pub t: u64,
    /// The sealed length, once sealed.
    pub sealed: Option<u64>,
    /// The fence epoch (0 before any fence).
    pub fence: u64,
    /// The trim point: the first address not trimmed.
    pub first: u64,
}

/// Why an operation failed. Whether nothing was written (definite) or the operation may or
/// may not have taken effect (indeterminate) is a property of each error value, not of its
/// variant ([`LogDriveError::is_definite`]): a cause is wrapped in
/// [`LogDriveError::Indeterminate`] when the operation may have taken effect all the same
/// (a quorum write that met one acknowledgement and two `Fenced` answers), and
/// [`LogDriveError::cause`] names the cause either way.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LogDriveError {
    /// Different bytes at a written address; the first value stays.
    #[error("address {address} already holds different bytes")]
    Conflict {
        /// The address.
        address: u64,
    },
    /// The LogDrive is sealed at `length` (a write at or beyond it, or a seal at another).
    #[error("sealed at length {length}")]
    Sealed {
        /// The sealed length.
        length: u64,
    },
    /// The write's (or fence's) epoch is below the fence.
    #[error("fenced at epoch {current}")]
    Fenced {
        /// The fence epoch.
        current: u64,
    },
    /// The address (or seal length, or trim point) lies outside what it may be.
    #[error("{address} is out of range: allowed {}..{}", valid.start, valid.end)]
    OutOfRange {
        /// The value asked for.
        address: u64,
        /// The range allowed.
        valid: Range<u64>,
    },
    /// A weak_tail window this LogDrive does not answer for: over its most (the store's
    /// `weak_tail_k_max`, which bounds what one call may cost), or one a composition
    /// cannot split among its children.
    #[error("a weak_tail window of {k} is not answered here (at most {max})")]
    InvalidWindow {
        /// The window asked for.
        k: u64,
        /// The largest window answered (for a composition, the reason is in its docs).
        max: u64,
    },
    /// weak_tail cannot be answered: a damaged record whose header is gone may have held
    /// some of these addresses (a quarantined open; docs/logdrive.md). They read as
    /// `Damaged` until written again (repaired from a peer) or the LogDrive is sealed.
    #[error(
        "addresses {}..{} may have been held by a damaged record",
        addresses.start,
        addresses.end
    )]
    Damaged {
        /// The addresses in doubt (some may be written since).
        addresses: Range<u64>,
    },
    /// No live LogDrive has this id and generation (never created, or deleted).
    #[error("no LogDrive {id} (generation {generation})")]
    Missing {
        /// The id.
        id: u64,
        /// The generation asked for (0 when none).
        generation: u64,
    },
    /// A LogDrive with this id exists already.
    #[error("LogDrive {id} exists")]
    Exists {
        /// The id.
        id: u64,
    },
    /// The payload is over the ring's record limit.
    #[error("payload of {len} bytes is over the ring's limit of {max}")]
    TooLarge {
        /// The payload's length.
        len: u64,
        /// The limit.
        max: u64,
    },
    /// The ring is full: the record was not written.
    #[error("the ring is full")]
    RingFull,
    /// The drive stopped (failed, closed, or a control record could not be made durable):
    /// the operation may or may not have taken effect; reopen to find out.
    #[error("the drive stopped: {reason}")]
    Stopped {
        /// Why.
        reason: String,
    },
    /// An I/O error or a resource shortage on the way: the outcome is unknown.
    #[error("I/O: {reason}")]
    Io {
        /// What failed.
        reason: String,
    },
    /// A server had `in_flight_max` operations in flight and as many waiting, and refused
    /// this one before issuing it: nothing was done; try again later (backpressure).
    #[error("overloaded: {in_flight_max} operations in flight and as many waiting")]
    Overloaded {
        /// The server's bound on operations in flight.
        in_flight_max: u64,
    },
    /// A server refused the caller before issuing the operation (no valid credentials, or
    /// a role that may not do this): nothing was done.
    #[error("refused: {reason}")]
    Denied {
        /// Who was refused what, and why.
        reason: String,
    },
    /// The operation failed for `cause`, and may or may not have taken effect all the same.
    #[error("{cause} (the operation may have taken effect)")]
    Indeterminate {
        /// Why it failed.
        cause: Box<LogDriveError>,
    },
}

impl LogDriveError {
    /// Whether nothing was written (true), or the operation may or may not have taken
    /// effect (false: an [`LogDriveError::Indeterminate`] value, an I/O error, a stopped
    /// drive).
    pub fn is_definite(&self) -> bool {
        !matches!(
            self,
            LogDriveError::Indeterminate { .. }
                | LogDriveError::Stopped { .. }
                | LogDriveError::Io { .. }
        )
    }

    /// The same cause, marked as possibly having taken effect.
    pub fn indeterminate(self) -> LogDriveError {
        match self {
            LogDriveError::Indeterminate { .. } => self,
            cause => LogDriveError::Indeterminate {
                cause: Box::new(cause),
            },
        }
    }

    /// Why the operation failed, definite or not.
    pub fn cause(&self) -> &LogDriveError {
        match self {
            LogDriveError::Indeterminate { cause } => cause.cause(),
            cause => cause,
        }
    }
}
