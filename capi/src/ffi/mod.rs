//! The exported C functions, and the one place in this crate with `unsafe` code: the raw
//! pointers C hands over, and `#[no_mangle]`. Every function body runs inside [`guard`],
//! which clears the thread's last error, catches any panic (no unwind crosses into C: a
//! panic becomes `SEALOG_PANIC` with its message) and turns a [`Failure`] into its status
//! code and message. Pointer arguments are checked for NULL and struct sizes for sense before
//! anything is done; what cannot be checked (that a pointer points where its documentation
//! says) is the caller's contract, stated in each function's `# Safety`, and every `unsafe`
//! block names the part of that contract it relies on.
//!
//! - this module: errors, option structs, format, open, close, the log's shape, trim, waits;
//! - [`append`]: blocking appends, appends with a completion callback, tickets; entries with
//!   a kind and an embedder header; all-or-nothing groups;
//! - [`read`]: point reads, the buffers they return, iterators;
//! - [`recovery`]: an open that hands every recovered entry to the caller's visitor;
//! - [`store`]: LogDrive stores: open (strict or in quarantine, with a report), create,
//!   find, list, delete, close; [`logdrive`]: writes to one LogDrive, blocking, with a
//!   callback or a ticket; [`logdrive_ops`]: its reads, weak tail, seal, fence, trim,
//!   lengths, and the fields of the last LogDrive error.

// The handles and the callback type carry the names C sees.
#![allow(non_camel_case_types)]

pub mod append;
pub mod args;
#[cfg(test)]
mod entry_tests;
pub mod logdrive;
pub mod logdrive_ops;
#[cfg(test)]
mod logdrive_tests;
pub mod read;
pub mod recovery;
pub mod store;
#[cfg(test)]
mod tests;

use std::ffi::{c_char, c_int};
use std::panic::catch_unwind;

use sealog::{Drive, DriveState};

use crate::last_error;
use crate::options::format_options_default;
use crate::options::{drive_options_default, format_options};
use crate::status::{status_name, Failure};
use crate::types::*;
use args::{
    drive_arg, guard, handle, null, open_args, out_arg, path_arg, read_sized, sealog_drive,
    timeout, write_optional, write_sized,
};

/// The name of a status code as this header spells it (`"SEALOG_TRIMMED"`), or
/// `"SEALOG_UNKNOWN_STATUS"`. The string is static: never free it.
///
/// Thread safety: any thread, any time.
#[no_mangle]
pub extern "C" fn sealog_status_name(status: c_int) -> *const c_char {
    catch_unwind(|| status_name(status).as_ptr()).unwrap_or(c"SEALOG_PANIC".as_ptr())
}

/// The message of the last call on this thread that did not return `SEALOG_OK` (it names the
/// call, the path and the LSN where they apply), or `""` after a call that did. Owned by the
/// library: valid until the next call into the library on this thread; copy it to keep it.
/// Inside a completion callback it is the message of that callback's append.
///
/// Thread safety: any thread; each thread has its own.
#[no_mangle]
pub extern "C" fn sealog_last_error_message() -> *const c_char {
    catch_unwind(last_error::as_ptr).unwrap_or(c"".as_ptr())
}

/// Fills `options` with the defaults for a ring of `size_bytes` (sets `struct_size_bytes`).
///
/// Thread safety: any thread.
///
/// # Safety
/// `options` is NULL or points to a writable `sealog_format_options`.
#[no_mangle]
pub unsafe extern "C" fn sealog_format_options_init(
    options: *mut sealog_format_options,
    size_bytes: u64,
) -> c_int {
    guard("sealog_format_options_init", || {
        // SAFETY: the caller's contract.
        *unsafe { out_arg(options, "options") }? = format_options_default(size_bytes);
        Ok(())
    })
}

/// Formats a ring at `path` (a directory of segment files, created owner-only if missing, or
/// a block device): `SEALOG_NOT_EMPTY` for a directory with files unless `options->force`,
/// `SEALOG_IN_USE` while another process holds the ring, `SEALOG_INVALID_ARGUMENT` for a
/// size or geometry the format refuses. Blocks (it measures the device unless
/// `options->sync_method` names a method).
///
/// Thread safety: any thread; not on a ring that is open.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string; `options` is NULL or points to a
/// `sealog_format_options` filled by `sealog_format_options_init`.
#[no_mangle]
pub unsafe extern "C" fn sealog_format(
    path: *const c_char,
    options: *const sealog_format_options,
) -> c_int {
    guard("sealog_format", || {
        // SAFETY: the caller's contract.
        let path = unsafe { path_arg(path, "path") }?;
        if options.is_null() {
            return Err(null("options"));
        }
        // SAFETY: not NULL, and a filled options struct by the caller's contract.
        let options = format_options(&unsafe { read_sized(options, "options") }?)?;
        sealog::format(&path, &options).map_err(Failure::from)?;
        Ok(())
    })
}

/// Fills `options` with the engine's defaults (sets `struct_size_bytes`).
///
/// Thread safety: any thread.
///
/// # Safety
/// `options` is NULL or points to a writable `sealog_drive_options`.
#[no_mangle]
pub unsafe extern "C" fn sealog_drive_options_init(options: *mut sealog_drive_options) -> c_int {
    guard("sealog_drive_options_init", || {
        // SAFETY: the caller's contract.
        *unsafe { out_arg(options, "options") }? = drive_options_default();
        Ok(())
    })
}

/// Opens the ring at `path`, recovering it (replay), and starts its drive thread and its
/// completion thread; `*drive_out` is the handle, to be closed with `sealog_close`. `options`
/// NULL: the defaults. Fails with `SEALOG_NOT_A_RING`, `SEALOG_CORRUPT` (strict recovery found
/// acknowledged data damaged), `SEALOG_IN_USE`, `SEALOG_IO` or `SEALOG_INVALID_ARGUMENT` (an
/// option out of range); `*drive_out` is then left as it was.
///
/// Thread safety: any thread. The handle it returns may be used from many threads at once.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string; `options` is NULL or points to a
/// `sealog_drive_options` filled by `sealog_drive_options_init`; `drive_out` is NULL or
/// points to a writable `sealog_drive *`.
#[no_mangle]
pub unsafe extern "C" fn sealog_open(
    path: *const c_char,
    options: *const sealog_drive_options,
    drive_out: *mut *mut sealog_drive,
) -> c_int {
    guard("sealog_open", || {
        // SAFETY: the caller's contract.
        let (path, options, out) = unsafe { open_args(path, options, drive_out) }?;
        let drive = Drive::open(&path, options).map_err(Failure::from)?;
        *out = handle(&path, drive)?;
        Ok(())
    })
}

/// Closes a drive and frees its handle: the drive finishes what was queued and in flight
/// (appends it cannot make durable complete with `SEALOG_CLOSED`), writes a tail marker if
/// needed and stops; then every callback still queued runs (exactly once each) and the
/// completion thread is joined. Returns `SEALOG_FAILED` (with the cause) if the drive had
/// stopped after an I/O error; the handle is freed whatever it returns (but for the refusal
/// below). NULL: nothing.
///
/// Thread safety: call it once per handle, after every other call on the handle (and every
/// ticket wait) has returned. Never from a completion callback of this drive: close joins the
/// thread that runs them (there it returns `SEALOG_INVALID_ARGUMENT` and closes nothing).
/// Iterators of the drive should be freed first; one still alive afterwards returns
/// `SEALOG_CLOSED` or `SEALOG_END`, never touches freed memory.
///
/// # Safety
/// `drive` is NULL or a handle from `sealog_open` not closed yet, and no other call on it is
/// running or will be made.
#[no_mangle]
pub unsafe extern "C" fn sealog_close(drive: *mut sealog_drive) -> c_int {
    guard("sealog_close", || {
        if drive.is_null() {
            return Ok(());
        }
        // SAFETY: a live handle by the caller's contract.
        if unsafe { &*drive }.completions.is_current_thread() {
            // Closing would join the thread this call runs on: refused, the drive stays open.
            return Err(Failure::invalid(
                "called from a completion callback of this drive (close joins that thread)",
            ));
        }
        // SAFETY: a handle from `sealog_open` (a boxed `sealog_drive`), closed only here, once,
        // with no other call on it running (the caller's contract).
        let handle = unsafe { Box::from_raw(drive) };
        handle.drive.close();
        handle.completions.finish();
        match handle.drive.shape().state {
            DriveState::Running => Ok(()),
            DriveState::Failed(failure) => Err(Failure::new(
                sealog_status::SEALOG_FAILED,
                format!(
                    "{}: the drive had stopped: {failure}",
                    handle.drive.path().display()
                ),
            )),
        }
    })
}

/// Fills `struct_size_bytes` of a `sealog_shape` (before `sealog_drive_shape`).
///
/// Thread safety: any thread.
///
/// # Safety
/// `shape` is NULL or points to a writable `sealog_shape`.
#[no_mangle]
pub unsafe extern "C" fn sealog_shape_init(shape: *mut sealog_shape) -> c_int {
    guard("sealog_shape_init", || {
        // SAFETY: the caller's contract.
        let shape = unsafe { out_arg(shape, "shape") }?;
        shape.struct_size_bytes = size_of::<sealog_shape>() as u32;
        Ok(())
    })
}

/// The log's shape: first live, trim, durable and next LSN, live entries, capacity and
/// occupancy in bytes, running, failed or closed; read from what the drive publishes,
/// without asking its thread (so at most a moment old, and cheap).
///
/// Thread safety: any thread, concurrently with any other call on the drive but close.
///
/// # Safety
/// `drive` is NULL or an open handle; `shape_out` is NULL or points to a `sealog_shape` whose
/// `struct_size_bytes` was set by `sealog_shape_init`.
#[no_mangle]
pub unsafe extern "C" fn sealog_drive_shape(
    drive: *const sealog_drive,
    shape_out: *mut sealog_shape,
) -> c_int {
    guard("sealog_drive_shape", || {
        // SAFETY: the caller's contract.
        let drive = &unsafe { drive_arg(drive) }?.drive;
        let shape = drive.shape();
        let geometry = drive.geometry();
        let state = match (shape.closed, shape.state) {
            (true, _) => SEALOG_DRIVE_CLOSED,
            (false, DriveState::Running) => SEALOG_DRIVE_RUNNING,
            (false, DriveState::Failed(_)) => SEALOG_DRIVE_FAILED,
        };
        let value = sealog_shape {
            struct_size_bytes: size_of::<sealog_shape>() as u32,
            state,
            first_live_lsn: shape.first_live_lsn,
            trim_lsn: shape.trim_lsn,
            durable_lsn: shape.durable_lsn,
            next_lsn: shape.next_lsn,
            live_entries: shape.live_entries,
            capacity_bytes: shape.capacity_bytes,
            occupied_bytes: shape.occupied_bytes,
            payload_size_max_bytes: geometry.payload_size_max_bytes(),
            block_size_bytes: geometry.block_size_bytes,
        };
        // SAFETY: the caller's contract.
        unsafe { write_sized(shape_out, "shape_out", value) }
    })
}

/// The highest acknowledged (durable) LSN, without asking the drive thread (0: none yet).
///
/// Thread safety: any thread, concurrently with any other call on the drive but close.
///
/// # Safety
/// `drive` is NULL or an open handle; `lsn_out` is NULL or points to a writable `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn sealog_durable_lsn(
    drive: *const sealog_drive,
    lsn_out: *mut u64,
) -> c_int {
    guard("sealog_durable_lsn", || {
        // SAFETY: the caller's contract.
        let drive = &unsafe { drive_arg(drive) }?.drive;
        // SAFETY: the caller's contract.
        *unsafe { out_arg(lsn_out, "lsn_out") }? = drive.durable_lsn();
        Ok(())
    })
}

/// The first live (untrimmed) LSN, without asking the drive thread.
///
/// Thread safety: any thread, concurrently with any other call on the drive but close.
///
/// # Safety
/// `drive` is NULL or an open handle; `lsn_out` is NULL or points to a writable `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn sealog_first_live_lsn(
    drive: *const sealog_drive,
    lsn_out: *mut u64,
) -> c_int {
    guard("sealog_first_live_lsn", || {
        // SAFETY: the caller's contract.
        let drive = &unsafe { drive_arg(drive) }?.drive;
        // SAFETY: the caller's contract.
        *unsafe { out_arg(lsn_out, "lsn_out") }? = drive.first_live_lsn();
        Ok(())
    })
}

/// Blocks until the durable tail reaches `lsn` or `timeout_us` microseconds pass
/// (`SEALOG_TIMEOUT_NONE_US`: no limit): `SEALOG_OK`, `SEALOG_TIMED_OUT`, `SEALOG_FAILED` or
/// `SEALOG_CLOSED`. `*durable_lsn_out` (when not NULL) is the durable tail on `SEALOG_OK`.
/// Woken by the acknowledgement that passes `lsn`: a tailing reader needs no polling.
///
/// Thread safety: any thread, concurrently with any other call on the drive but close.
///
/// # Safety
/// `drive` is NULL or an open handle; `durable_lsn_out` is NULL or points to a writable
/// `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn sealog_wait_durable(
    drive: *const sealog_drive,
    lsn: u64,
    timeout_us: u64,
    durable_lsn_out: *mut u64,
) -> c_int {
    guard("sealog_wait_durable", || {
        // SAFETY: the caller's contract.
        let drive = &unsafe { drive_arg(drive) }?.drive;
        let durable_lsn = drive
            .wait_durable(lsn, timeout(timeout_us))
            .map_err(|error| Failure::from(error).context(drive.path().display()))?;
        // SAFETY: the caller's contract.
        unsafe { write_optional(durable_lsn_out, durable_lsn) };
        Ok(())
    })
}

/// Releases every entry with an LSN at or below `lsn` (inclusive), durably: once it returns
/// the entries are gone from reads and their space may be reused. Blocks for one control
/// block write. `SEALOG_NOT_YET_DURABLE` past the durable tail.
///
/// Thread safety: any thread, concurrently with any other call on the drive but close.
///
/// # Safety
/// `drive` is NULL or an open handle.
#[no_mangle]
pub unsafe extern "C" fn sealog_trim(drive: *const sealog_drive, lsn: u64) -> c_int {
    guard("sealog_trim", || {
        // SAFETY: the caller's contract.
        let drive = &unsafe { drive_arg(drive) }?.drive;
        drive
            .trim(lsn)
            .map_err(|error| Failure::from(error).context(drive.path().display()))
    })
}
