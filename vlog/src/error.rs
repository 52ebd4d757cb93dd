//! The errors of the logs above the LogDrive: [`LogError`] for the AtomicLog and the
//! VirtualLog, [`MetaError`] for the MetaStore. As with a LogDrive, whether an operation may
//! have taken effect is a property of the error value ([`LogError::is_definite`]): an append
//! that met the seal after its write was acknowledged is in the log or not depending on where
//! the seal's tail fell, and says so.

use sealog_logdrive::LogDriveError;

/// Why an AtomicLog or VirtualLog operation failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LogError {
    /// The log is sealed. `position` is the slot the append held, when it got one; `written`
    /// says whether its write was acknowledged. An append that held a slot may be in the log
    /// all the same (it is if the sealing coordinator's tail passed it), so it is definite
    /// only when it held none.
    #[error("the log is sealed (slot {position:?}, written: {written})")]
    Sealed {
        /// The slot the append held, if any.
        position: Option<u64>,
        /// Whether the slot's write was acknowledged.
        written: bool,
    },
    /// A slot was not completed within its deadline: its writer's write kept failing, or a
    /// lower slot's writer died holding it. The log cannot move past it without a
    /// reconfiguration (a seal and a new segment).
    #[error("slot {position} stalled (written: {written})")]
    Stalled {
        /// The slot.
        position: u64,
        /// Whether this append's own write was acknowledged.
        written: bool,
    },
    /// No slot could be had within the slot deadline: the window stayed full behind slot
    /// `tail`, whose writer is slow or gone. Nothing was written; a reconfiguration frees
    /// the log.
    #[error("the window stayed full behind slot {tail}")]
    WindowFull {
        /// The first slot not completed.
        tail: u64,
    },
    /// The sequencer is gone (failed, or its log closed): appends are unavailable until a
    /// reconfiguration; reads, `check_tail` and `seal` still work.
    #[error("the sequencer is unavailable")]
    SequencerDown,
    /// The sequencer had `waiting_max` calls waiting and refused this one: nothing was done
    /// (no slot was handed out); try again later.
    #[error("the sequencer is overloaded ({waiting_max} calls waiting)")]
    Overloaded {
        /// Its bound on waiting calls.
        waiting_max: u64,
    },
    /// The data or seal LogDrive failed.
    #[error("LogDrive at slot {position:?}: {error}")]
    Drive {
        /// The slot concerned, if one.
        position: Option<u64>,
        /// The LogDrive's error (definite or not).
        error: LogDriveError,
    },
    /// The MetaStore failed.
    #[error("MetaStore: {0}")]
    Meta(#[from] MetaError),
    /// A configuration that cannot work, refused when it is built.
    #[error("invalid configuration: {reason}")]
    InvalidConfig {
        /// What is wrong.
        reason: String,
    },
    /// A position below the log's trim point.
    #[error("position {position} is trimmed (the log starts at {first})")]
    Trimmed {
        /// The position asked for.
        position: u64,
        /// The first position not trimmed.
        first: u64,
    },
    /// A stored chain could not be decoded.
    #[error("the chain at version {version} does not decode: {reason}")]
    BadChain {
        /// Its version.
        version: u64,
        /// Why.
        reason: String,
    },
    /// The operation failed for `cause`, and may have taken effect all the same (an append
    /// whose write was issued and whose fate could not be learned).
    #[error("{cause} (the operation may have taken effect)")]
    Indeterminate {
        /// Why it failed.
        cause: Box<LogError>,
    },
    /// The operation gave up after its retries or deadline; what it says happened is in
    /// `last` (definite or not).
    #[error("gave up after {attempts} attempts: {last}")]
    GaveUp {
        /// Attempts made.
        attempts: u32,
        /// The last error met.
        last: Box<LogError>,
    },
}

impl LogError {
    /// Whether the operation certainly did not take effect.
    pub fn is_definite(&self) -> bool {
        match self {
            LogError::Sealed { position, .. } => position.is_none(),
            LogError::Stalled { .. } => false,
            LogError::SequencerDown | LogError::WindowFull { .. } | LogError::Overloaded { .. } => {
                true
            }
            LogError::Drive { error, .. } => error.is_definite(),
            LogError::Meta(error) => error.is_definite(),
            LogError::InvalidConfig { .. }
            | LogError::Trimmed { .. }
            | LogError::BadChain { .. } => true,
            LogError::GaveUp { last, .. } => last.is_definite(),
            LogError::Indeterminate { .. } => false,
        }
    }

    /// The same cause, marked as possibly having taken effect.
    pub fn indeterminate(self) -> LogError {
        if self.is_definite() {
            LogError::Indeterminate {
                cause: Box::new(self),
            }
        } else {
            self
        }
    }

    /// Gave up after `attempts`, with the last error met; with none met, nothing was tried
    /// (`attempts_max` is 0), which is the configuration's fault.
    pub(crate) fn gave_up(attempts: u32, last: Option<LogError>) -> LogError {
        let last = last.unwrap_or_else(|| LogError::InvalidConfig {
            reason: "attempts_max is 0: nothing was tried".into(),
        });
        LogError::GaveUp {
            attempts,
            last: Box::new(last),
        }
    }

    pub(crate) fn drive(position: Option<u64>, error: LogDriveError) -> LogError {
        LogError::Drive { position, error }
    }
}

/// Why a MetaStore operation failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MetaError {
    /// The compare-and-swap lost: the register is at `current`, not at the version expected.
    #[error("the register moved to version {current}")]
    Conflict {
        /// The version found.
        current: u64,
    },
    /// The store failed; whether a compare-and-swap took effect is unknown.
    #[error("store: {0}")]
    Store(LogDriveError),
    /// A stored value could not be decoded.
    #[error("version {version} does not decode: {reason}")]
    Corrupt {
        /// The version.
        version: u64,
        /// Why.
        reason: String,
    },
}

impl MetaError {
    /// Whether the operation certainly did not take effect.
    pub fn is_definite(&self) -> bool {
        match self {
            MetaError::Conflict { .. } | MetaError::Corrupt { .. } => true,
            MetaError::Store(error) => error.is_definite(),
        }
    }
}
