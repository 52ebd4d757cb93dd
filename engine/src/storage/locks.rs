//! The ring's locks and the waits for them (docs/recovery.md, I-17): the `flock` that writers,
//! recovery and format take exclusive and readers shared, on a directory ring's directory or
//! on the device; the O_EXCL claim writers and format make on a device; and the bounded wait
//! ([`LOCK_WAIT`]) for another holder (a process just killed, say) to let go.

use std::fs::File;
use std::io;
use std::path::Path;
use std::time::{Duration, Instant};

use super::files::{open_direct, Access};
use crate::error::{FormatError, OpenError};
use crate::uring::sys;

/// How long an open waits for a lock held by another process (one just killed, say).
pub const LOCK_WAIT: Duration = Duration::from_secs(5);

/// Format's exclusive lock on `file` (the directory, or the device), waited for until
/// `deadline`: a ring another process holds is [`FormatError::InUse`].
pub(super) fn lock_for_format(
    file: &File,
    path: &Path,
    deadline: Instant,
) -> Result<(), FormatError> {
    match flock_until(file, sys::LockKind::Exclusive, deadline) {
        Ok(true) => Ok(()),
        Ok(false) => Err(FormatError::InUse {
            path: path.to_path_buf(),
            lock: "exclusive",
        }),
        Err(source) => Err(FormatError::Io {
            path: path.to_path_buf(),
            action: "lock the ring",
            source,
        }),
    }
}

/// Takes a `flock` of `kind` on `file`, retrying until `deadline`: `Ok(false)` when another
/// open description still holds a conflicting one then.
fn flock_until(file: &File, kind: sys::LockKind, deadline: Instant) -> io::Result<bool> {
    loop {
        if sys::try_flock(file, kind)? {
            return Ok(true);
        }
        if Instant::now() >= deadline {
            return Ok(false);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The lock an open of `access` needs (shared or exclusive), waited for until `deadline`.
pub(super) fn lock(
    file: &File,
    path: &Path,
    access: Access,
    deadline: Instant,
) -> Result<(), OpenError> {
    let (kind, name) = match access {
        Access::ReadOnly => (sys::LockKind::Shared, "shared"),
        Access::ReadWrite => (sys::LockKind::Exclusive, "exclusive"),
    };
    match flock_until(file, kind, deadline) {
        Ok(true) => Ok(()),
        Ok(false) => Err(OpenError::Locked {
            path: path.to_path_buf(),
            lock: name,
        }),
        Err(source) => Err(OpenError::Io {
            path: path.to_path_buf(),
            action: "lock the ring",
            source,
        }),
    }
}

pub(super) enum DeviceOpen {
    Busy,
    Io(io::Error),
}

/// Opens a block device, with O_EXCL for a writer. EBUSY (another holder, or the references of
/// a just-closed io_uring that the kernel releases asynchronously) is retried until `deadline`.
pub(super) fn open_device_waiting(
    path: &Path,
    access: Access,
    deadline: Instant,
) -> Result<File, DeviceOpen> {
    retry_busy(
        || open_direct(path, access, access == Access::ReadWrite),
        deadline,
    )
}

/// Calls `open` until it succeeds, fails with anything but EBUSY, or `deadline` passes.
pub(super) fn retry_busy(
    open: impl Fn() -> io::Result<File>,
    deadline: Instant,
) -> Result<File, DeviceOpen> {
    loop {
        match open() {
            Ok(file) => return Ok(file),
            Err(error) if error.raw_os_error() == Some(libc::EBUSY) => {
                if Instant::now() >= deadline {
                    return Err(DeviceOpen::Busy);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(error) => return Err(DeviceOpen::Io(error)),
        }
    }
}
