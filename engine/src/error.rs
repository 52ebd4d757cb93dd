//! The engine's typed errors, one enum per operation: formatting, opening (with recovery),
//! appending, reading, trimming. Each names the path and, where it applies, the segment,
//! offset and LSN; the drive's fail-stop state is an error of its own kind that every later
//! call gets until the ring is reopened.

use std::path::PathBuf;

use sealog_wal::{GeometryError, ReplayError};

/// Why `format` failed.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    /// The directory exists and holds files; `--force` formats it anyway.
    #[error("{path}: the directory is not empty (use --force to format it anyway)")]
    NotEmpty {
        /// The directory.
        path: PathBuf,
    },
    /// The size leaves fewer than two segments.
    #[error("{path}: {size_bytes} bytes is too small for a ring of at least 2 segments")]
    TooSmall {
        /// The ring's path.
        path: PathBuf,
        /// The size asked for.
        size_bytes: u64,
    },
    /// The block device is smaller than the size asked for.
    #[error("{path}: the device holds {device_bytes} bytes, {size_bytes} were asked for")]
    DeviceTooSmall {
        /// The device.
        path: PathBuf,
        /// The size asked for.
        size_bytes: u64,
        /// The device's size.
        device_bytes: u64,
    },
    /// The geometry breaks a rule of the format.
    #[error("{path}: {source}")]
    Geometry {
        /// The ring's path.
        path: PathBuf,
        /// The rule broken.
        #[source]
        source: GeometryError,
    },
    /// Another process holds the ring (a writer, recovery, a reader or another format) past the
    /// bounded wait; nothing of the ring was looked at or changed.
    #[error(
        "{path}: the ring is in use (could not take the {lock} lock within 5 s); format changed \
         nothing"
    )]
    InUse {
        /// The ring's path.
        path: PathBuf,
        /// Which lock was wanted: `exclusive` (the flock) or `O_EXCL` (a device).
        lock: &'static str,
    },
    /// A system call failed.
    #[error("{path}: cannot {action}: {source}")]
    Io {
        /// The ring's path.
        path: PathBuf,
        /// What was being done.
        action: &'static str,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

/// Why opening a ring failed.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The path holds no sealog ring.
    #[error("{path}: not a sealog ring ({why})")]
    NotARing {
        /// The path.
        path: PathBuf,
        /// What is missing.
        why: &'static str,
    },
    /// The ring's control block or log could not be read as a ring (not a ring, another
    /// format version, damaged control blocks, a device too small for its geometry).
    #[error("{path}: {source}")]
    Ring {
        /// The path.
        path: PathBuf,
        /// What replay found.
        #[source]
        source: ReplayError,
    },
    /// Acknowledged data is corrupt (strict recovery).
    #[error("{path}: {source}")]
    Corrupt {
        /// The path.
        path: PathBuf,
        /// The corruption, with segment, offset and LSN.
        #[source]
        source: ReplayError,
    },
    /// The storage's block size grew past the ring's.
    #[error(
        "{path}: the ring was formatted with {ring_block_bytes}-byte blocks but the storage \
         now needs {storage_block_bytes}-byte writes"
    )]
    BlockSizeMismatch {
        /// The path.
        path: PathBuf,
        /// The ring's block size.
        ring_block_bytes: u32,
        /// What the storage needs.
        storage_block_bytes: u32,
    },
    /// A segment file has the wrong length.
    #[error("{path}: segment file is {length_bytes} bytes, the ring needs {expected_bytes}")]
    SegmentFile {
        /// The segment file.
        path: PathBuf,
        /// Its length.
        length_bytes: u64,
        /// The segment size.
        expected_bytes: u64,
    },
    /// Another process holds the ring.
    #[error("{path}: the ring is in use (could not take the {lock} lock within 5 s)")]
    Locked {
        /// The path.
        path: PathBuf,
        /// Which lock was wanted.
        lock: &'static str,
    },
    /// A system call failed.
    #[error("{path}: cannot {action}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// What was being done.
        action: &'static str,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

/// Why an append, read, trim or other drive request failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DriveError {
    /// The payload is over the ring's limit; nothing of it was written.
    #[error("payload of {payload_len} bytes is over the ring's limit of {payload_size_max_bytes}")]
    PayloadTooLarge {
        /// The payload's length.
        payload_len: u64,
        /// The limit.
        payload_size_max_bytes: u32,
    },
    /// The ring is full: trim to make room (the caller chose to be told rather than wait).
    #[error("the ring is full: trim to make room for LSN {next_lsn}")]
    RingFull {
        /// The LSN the append would have taken.
        next_lsn: u64,
    },
    /// The LSN is not a live entry.
    #[error("LSN {lsn} is not live (live entries are {first_lsn}..{next_lsn})")]
    LsnOutOfRange {
        /// The LSN asked for.
        lsn: u64,
        /// The first live LSN.
        first_lsn: u64,
        /// The next LSN to be written.
        next_lsn: u64,
    },
    /// Trim asked for LSNs not yet acknowledged.
    #[error("cannot trim to LSN {lsn}: only up to {durable_lsn} is acknowledged")]
    TrimBeyondDurable {
        /// The LSN asked for.
        lsn: u64,
        /// The highest acknowledged LSN.
        durable_lsn: u64,
    },
    /// A read found a record that does not check out.
    #[error("reading LSN {lsn} at {position}: the {check} check failed")]
    ReadCorrupt {
        /// The LSN read.
        lsn: u64,
        /// Where.
        position: sealog_wal::Position,
        /// The check that failed.
        check: &'static str,
    },
    /// The drive failed stop after an I/O error; nothing more is acknowledged until reopen.
    #[error(
        "the drive stopped after {operation} failed at ring offset {ring_offset}: errno {errno} \
         ({message})"
    )]
    Failed {
        /// write, flush or read.
        operation: &'static str,
        /// Where.
        ring_offset: u64,
        /// The errno.
        errno: i32,
        /// The errno's text.
        message: String,
    },
    /// The drive was closed.
    #[error("the drive is closed")]
    Closed,
}
