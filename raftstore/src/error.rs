//! What can go wrong in the Raft log store, typed and placed: which group, which index, which
//! LogDrive, and the LogDrive error underneath. openraft sees these as its `StorageError`
//! (with the subject it names: the vote, a log id, the logs) through [`to_storage_error`].

use openraft::{AnyError, ErrorSubject, ErrorVerb, NodeId, StorageError, StorageIOError};
use sealog_logdrive::{LogDriveError, StoreOpenError};

/// Why a Raft log store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum RaftStoreError {
    /// The ring could not be opened as a LogDrive store.
    #[error("opening the ring at {path}: {source}")]
    Open {
        /// The ring's path.
        path: String,
        /// Why.
        #[source]
        source: StoreOpenError,
    },
    /// The ring could not be formatted.
    #[error("formatting a ring of {size_bytes} bytes at {path}: {reason}")]
    Format {
        /// The ring's path.
        path: String,
        /// The size asked for.
        size_bytes: u64,
        /// Why.
        reason: String,
    },
    /// A LogDrive operation of a group failed.
    #[error("group {group}: {operation} on LogDrive {drive}: {source}")]
    LogDrive {
        /// The Raft group.
        group: u64,
        /// What the store was doing (for example "append at index 7").
        operation: String,
        /// The LogDrive's id.
        drive: u64,
        /// The LogDrive's error.
        #[source]
        source: LogDriveError,
    },
    /// A record of a group could not be decoded: its bytes passed the ring's checks but are
    /// not what this store writes.
    #[error("group {group}: the {what} at {location} does not decode: {reason}")]
    Decode {
        /// The Raft group.
        group: u64,
        /// "entry" or "metadata".
        what: &'static str,
        /// The index (an entry) or the metadata address.
        location: u64,
        /// Why.
        reason: String,
    },
    /// A value could not be encoded (its own `Serialize` failed).
    #[error("group {group}: the {what} at {location} does not encode: {reason}")]
    Encode {
        /// The Raft group.
        group: u64,
        /// "entry" or "metadata".
        what: &'static str,
        /// The index (an entry) or the metadata address.
        location: u64,
        /// Why.
        reason: String,
    },
    /// The log of a group lacks an entry that it must hold (between the purge point and the
    /// last log id): the ring lost acknowledged data, or its LogDrives disagree with the map.
    #[error("group {group}: index {index} is missing ({found})")]
    Missing {
        /// The Raft group.
        group: u64,
        /// The index.
        index: u64,
        /// What was found there instead.
        found: String,
    },
    /// An append came below where the group's log may be written: under its current
    /// segment's first index (a truncation that openraft did not ask for first).
    #[error("group {group}: append at index {index} below the open segment's first {first}")]
    AppendBelowSegment {
        /// The Raft group.
        group: u64,
        /// The index appended.
        index: u64,
        /// The first index the open segment takes.
        first: u64,
    },
    /// The group id is over what the LogDrive id scheme holds.
    #[error("group id {group} is over the largest, {max}")]
    GroupId {
        /// The id asked for.
        group: u64,
        /// The largest group id.
        max: u64,
    },
}

impl RaftStoreError {
    /// A LogDrive error of `group` while doing `operation` on LogDrive `drive`.
    pub(crate) fn drive(
        group: u64,
        drive: u64,
        operation: impl Into<String>,
        source: LogDriveError,
    ) -> RaftStoreError {
        RaftStoreError::LogDrive {
            group,
            operation: operation.into(),
            drive,
            source,
        }
    }
}

/// `error` as openraft's storage error about `subject` while doing `verb`.
pub(crate) fn to_storage_error<NID: NodeId>(
    subject: ErrorSubject<NID>,
    verb: ErrorVerb,
    error: &RaftStoreError,
) -> StorageError<NID> {
    StorageIOError::new(subject, verb, AnyError::new(error)).into()
}
