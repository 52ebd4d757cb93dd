//! The engine's typed errors, one enum per operation: formatting, opening (with recovery),
//! appending, reading, trimming. Each names the path and, where it applies, the segment,
//! offset and LSN; the drive's fail-stop cause ([`DriveFailure`]) is an error of its own that
//! every later request gets until the ring is reopened, and [`DriveClosed`] says a request
//! was not carried out because the drive was closed or its thread is gone.

use std::path::PathBuf;

use sealog_wal::format::EmbedderHeader;
use sealog_wal::{Check, GeometryError, Kind, Position, ReplayError};

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
    /// The block device (or a partition of it) is mounted; unmount it first. No override.
    #[error("{path}: the device is mounted at {}; unmount it first", mount_points.join(", "))]
    Mounted {
        /// The device.
        path: PathBuf,
        /// Where (from /proc/self/mountinfo).
        mount_points: Vec<String>,
    },
    /// Another device is stacked on the block device (device-mapper, md); no override.
    #[error(
        "{path}: the device is held by {} (sysfs holders); release it first",
        holders.join(", ")
    )]
    Held {
        /// The device.
        path: PathBuf,
        /// The holders' names.
        holders: Vec<String>,
    },
    /// The block device has partitions; format a partition, or remove the table first (and
    /// reread it). No override.
    #[error(
        "{path}: the device has partitions ({}); format one of them, or remove the partition \
         table first",
        partitions.join(", ")
    )]
    Partitioned {
        /// The device.
        path: PathBuf,
        /// The partitions' names.
        partitions: Vec<String>,
    },
    /// The block device carries a recognizable signature the caller did not name in
    /// [`crate::FormatOptions::overwrite`]; nothing was written.
    #[error(
        "{path}: the device carries {found}; pass --overwrite {} to format it anyway",
        found.signature
    )]
    Signature {
        /// The device.
        path: PathBuf,
        /// What was found, and where.
        found: crate::signature::found::Found,
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
    /// Measuring the sync methods to choose the ring's default durability failed; naming the
    /// method at format time skips the measurement. No ring was left behind on a directory
    /// (its control file is written only after the measurement).
    #[error(
        "{path}: cannot measure the sync methods ({source}); name one at format time to skip \
         the measurement"
    )]
    SyncProbe {
        /// The ring's path.
        path: PathBuf,
        /// What failed, and where.
        #[source]
        source: crate::sync_probe::ProbeError,
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
    /// The control block's sequence number cannot grow (a damaged or crafted control block):
    /// no writer can record its incarnation.
    #[error("{path}: the control block's sequence number {sequence} cannot grow")]
    ControlSequenceExhausted {
        /// The path.
        path: PathBuf,
        /// The current control block's sequence number.
        sequence: u64,
    },
    /// An option is out of its range (above its limit, or zero where it must not be).
    #[error("{path}: the {option} option is {value}, outside its range (at most {limit})")]
    Options {
        /// The path.
        path: PathBuf,
        /// Which option.
        option: &'static str,
        /// Its value.
        value: u64,
        /// Its largest allowed value.
        limit: u64,
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

/// Which device operation a fail-stop came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoOperation {
    /// A batch, marker or control block write.
    Write,
    /// A flush (or the datasync linked behind a write).
    Flush,
    /// Reaping completions (and handing queued operations to the device).
    Wait,
    /// Handing an operation to the backend, which refused it.
    Submit,
}

impl IoOperation {
    /// Lower-case name, for messages.
    pub fn name(self) -> &'static str {
        match self {
            IoOperation::Write => "write",
            IoOperation::Flush => "flush",
            IoOperation::Wait => "wait for completions",
            IoOperation::Submit => "submission",
        }
    }
}

impl std::fmt::Display for IoOperation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a drive stopped for good (fail-stop): every request after it gets this, and only a
/// reopen, which replays the device, continues.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DriveFailure {
    /// A write or flush failed: nothing is acknowledged after it (a flush is never retried).
    #[error(
        "the drive stopped after a {operation} failed at ring offset {ring_offset}: errno \
         {errno} ({message})"
    )]
    Io {
        /// What failed.
        operation: IoOperation,
        /// Where, as a ring offset (0 for a failed wait).
        ring_offset: u64,
        /// The errno.
        errno: i32,
        /// The errno's text.
        message: String,
    },
    /// The drive thread panicked: a bug. Everything queued or in flight was failed with this.
    #[error("the drive thread stopped unexpectedly: {message}")]
    ThreadPanicked {
        /// The panic's message.
        message: String,
    },
    /// The control block's sequence is exhausted, so no further tail hint can be made
    /// durable and no batch may go past the one in force (2^63 control writes: never in
    /// practice, but never a silent hang either).
    #[error(
        "the control block's sequence is exhausted at {sequence}: no further tail hint can be \
         written, so nothing more can be appended"
    )]
    ControlSequenceExhausted {
        /// The last sequence written.
        sequence: u64,
    },
    /// The backend completed an operation the drive never submitted: a broken device seam.
    #[error("the I/O backend completed an operation never submitted (tag {tag:#x})")]
    UnknownCompletion {
        /// The tag it carried.
        tag: u64,
    },
}

impl DriveFailure {
    /// An I/O failure with the errno's text.
    pub fn io(operation: IoOperation, ring_offset: u64, errno: i32) -> DriveFailure {
        DriveFailure::Io {
            operation,
            ring_offset,
            errno,
            message: errno_text(errno),
        }
    }
}

/// The text of an errno, without the "(os error N)" that `io::Error` appends.
pub fn errno_text(errno: i32) -> String {
    let text = std::io::Error::from_raw_os_error(errno).to_string();
    match text.rfind(" (os error") {
        Some(cut) => text[..cut].to_string(),
        None => text,
    }
}

/// The drive is closed, or its thread is gone: the request was not carried out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the drive is closed")]
pub struct DriveClosed;

/// Why an append failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AppendError {
    /// The payload is over the ring's limit; nothing of it was written.
    #[error("payload of {payload_len} bytes is over the ring's limit of {payload_size_max_bytes}")]
    PayloadTooLarge {
        /// The payload's length.
        payload_len: u64,
        /// The limit.
        payload_size_max_bytes: u32,
    },
    /// A group of appends with no entry.
    #[error("a group of appends holds no entry")]
    EmptyGroup,
    /// A group's records together are over the ring's batch limit (a group shares one batch);
    /// nothing of it was written.
    #[error(
        "a group of {entries} entries takes {group_bytes} bytes with their headers, over the \
         ring's batch limit of {batch_size_max_bytes}"
    )]
    GroupTooLarge {
        /// Entries in the group.
        entries: usize,
        /// Bytes of their records, headers included.
        group_bytes: u64,
        /// The ring's batch limit.
        batch_size_max_bytes: u32,
    },
    /// The kind is the format's own (padding fills batches; the engine writes it itself).
    #[error("a {} record is written by the engine itself, not appended", kind.name())]
    ReservedKind {
        /// The kind asked for.
        kind: Kind,
    },
    /// The ring is full: trim to make room (the caller chose to be told rather than wait, or
    /// the wait ran out).
    #[error("the ring is full: trim to make room for LSN {next_lsn}")]
    RingFull {
        /// The LSN the append would have taken.
        next_lsn: u64,
    },
    /// The drive failed stop before this append was acknowledged.
    #[error(transparent)]
    Failed(#[from] DriveFailure),
    /// The drive was closed before this append was acknowledged.
    #[error(transparent)]
    Closed(#[from] DriveClosed),
}

/// Why a read found no payload.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    /// The entry was released by a trim (or never existed below the first live LSN).
    #[error("LSN {lsn} is trimmed: the log starts at LSN {first_live}")]
    Trimmed {
        /// The LSN asked for.
        lsn: u64,
        /// The first live LSN.
        first_live: u64,
    },
    /// The entry is not acknowledged yet (or was never appended): nothing unacknowledged is
    /// ever served.
    #[error("LSN {lsn} is not durable yet: the durable tail is LSN {durable_lsn}")]
    NotYetDurable {
        /// The LSN asked for.
        lsn: u64,
        /// The highest acknowledged LSN.
        durable_lsn: u64,
    },
    /// The record read from the device fails one of replay's checks, or the device failed the
    /// read ([`Check::ReadError`]): this read's outcome only; the drive runs on.
    #[error(
        "LSN {lsn} at {position} is damaged: the {check} check failed{}",
        errno_suffix(*.errno)
    )]
    Damaged {
        /// The LSN asked for (or, for an iterator, the record of its batch that failed).
        lsn: u64,
        /// Where the failing check is.
        position: Position,
        /// The check that failed.
        check: Check,
        /// For a read error: the device's errno.
        errno: Option<i32>,
        /// The entry's embedder header, when its entry header is intact (its CRC, the LSN
        /// and the place check out) and only the payload is damaged: which of the embedder's
        /// records the damage is in.
        header: Option<EmbedderHeader>,
    },
    /// The read could not get what it needs to run (memory for a read-ahead buffer): nothing
    /// is wrong with the log.
    #[error("reading LSN {lsn}: could not {what}: errno {errno}")]
    Resources {
        /// The LSN the read was at.
        lsn: u64,
        /// What failed.
        what: &'static str,
        /// The errno.
        errno: i32,
    },
    /// The drive failed stop.
    #[error(transparent)]
    Failed(#[from] DriveFailure),
    /// The drive was closed.
    #[error(transparent)]
    Closed(#[from] DriveClosed),
}

/// ` (errno N: text)` for a read error's errno, nothing without one.
fn errno_suffix(errno: Option<i32>) -> String {
    errno.map_or_else(String::new, |errno| {
        format!(" (errno {errno}: {})", errno_text(errno))
    })
}

/// Why a wait for the durable tail ended without reaching its LSN.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WaitError {
    /// The timeout passed first.
    #[error("LSN {lsn} was not durable in time: the durable tail is LSN {durable_lsn}")]
    TimedOut {
        /// The LSN waited for.
        lsn: u64,
        /// The highest acknowledged LSN when the wait gave up.
        durable_lsn: u64,
    },
    /// The drive failed stop: the tail will not move again.
    #[error(transparent)]
    Failed(#[from] DriveFailure),
    /// The drive was closed.
    #[error(transparent)]
    Closed(#[from] DriveClosed),
}

/// Why a trim failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TrimError {
    /// Trim asked for LSNs not yet acknowledged.
    #[error("cannot trim to LSN {lsn}: only up to {durable_lsn} is acknowledged")]
    BeyondDurable {
        /// The LSN asked for.
        lsn: u64,
        /// The highest acknowledged LSN.
        durable_lsn: u64,
    },
    /// The control block's sequence number cannot grow (only a damaged or crafted control
    /// block gets here): no trim can be made durable on this ring.
    #[error("the control block's sequence number {sequence} cannot grow: no trim can be written")]
    ControlSequenceExhausted {
        /// The current control block's sequence number.
        sequence: u64,
    },
    /// The drive failed stop (the trim may or may not be durable; a reopen tells).
    #[error(transparent)]
    Failed(#[from] DriveFailure),
    /// The drive was closed.
    #[error(transparent)]
    Closed(#[from] DriveClosed),
}
