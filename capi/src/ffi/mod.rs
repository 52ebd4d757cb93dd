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
//! - [`recovery`]: an open that hands every recovered entry to the caller's visitor.

// The handles and the callback type carry the names C sees.
#![allow(non_camel_case_types)]

pub mod append;
#[cfg(test)]
mod entry_tests;
pub mod read;
pub mod recovery;
#[cfg(test)]
mod tests;

use std::ffi::{c_char, c_int, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use sealog::{Drive, DriveOptions, DriveState};

use crate::completion::Completions;
use crate::last_error;
use crate::options::format_options_default;
use crate::options::{drive_options, drive_options_default, format_options};
use crate::status::{status_name, Failure};
use crate::types::*;

/// An open drive (`sealog_open` to `sealog_close`): the engine's drive and the thread that
/// runs its completion callbacks.
pub struct sealog_drive {
    drive: Arc<Drive>,
    completions: Completions,
}

// A drive handle is shared by C threads: everything in it must be.
const _: () = {
    const fn shared<T: Send + Sync>() {}
    shared::<sealog_drive>();
};

/// The largest struct size a caller may claim: far above any version of these structs, low
/// enough that a size left uninitialised is caught rather than read past.
const STRUCT_SIZE_MAX_BYTES: usize = 4096;

/// Runs the body of the function `name`: clears the last error, catches a panic, and turns
/// the outcome into a status code (leaving a failure's message, after the function's name,
/// as the thread's last error).
fn guard(name: &str, body: impl FnOnce() -> Result<(), Failure>) -> c_int {
    last_error::clear();
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        #[cfg(test)]
        tests::panic_if_asked();
        body()
    }));
    let failure = match outcome {
        Ok(Ok(())) => return sealog_status::SEALOG_OK as c_int,
        Ok(Err(failure)) => failure,
        Err(payload) => Failure::new(
            sealog_status::SEALOG_PANIC,
            format!(
                "sealog panicked (a bug in sealog): {}",
                panic_text(&*payload)
            ),
        ),
    };
    last_error::set(&format!("{name}: {}", failure.message));
    failure.status as c_int
}

/// The text of a panic's payload.
fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_string()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic without a message".to_string()
    }
}

fn null(name: &str) -> Failure {
    Failure::invalid(format!("{name} is NULL"))
}

/// A path argument: not NULL, not empty, UTF-8.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string readable until the call returns.
unsafe fn path_arg(path: *const c_char, name: &str) -> Result<PathBuf, Failure> {
    if path.is_null() {
        return Err(null(name));
    }
    // SAFETY: not NULL, and NUL-terminated and readable by the caller's contract.
    let bytes = unsafe { CStr::from_ptr(path) };
    let text = bytes.to_str().map_err(|error| {
        Failure::invalid(format!(
            "{name} {:?} is not UTF-8 ({error})",
            bytes.to_string_lossy()
        ))
    })?;
    if text.is_empty() {
        return Err(Failure::invalid(format!("{name} is empty")));
    }
    Ok(PathBuf::from(text))
}

/// The drive behind a handle.
///
/// # Safety
/// `drive` is NULL or a handle from `sealog_open` that `sealog_close` has not freed.
unsafe fn drive_arg<'a>(drive: *const sealog_drive) -> Result<&'a sealog_drive, Failure> {
    // SAFETY: a live handle by the caller's contract; NULL is refused.
    unsafe { drive.as_ref() }.ok_or_else(|| null("drive"))
}

/// An out-parameter.
///
/// # Safety
/// `out` is NULL or points to a writable, aligned `T` not otherwise used during the call.
unsafe fn out_arg<'a, T>(out: *mut T, name: &str) -> Result<&'a mut T, Failure> {
    // SAFETY: writable and aligned by the caller's contract; NULL is refused.
    unsafe { out.as_mut() }.ok_or_else(|| null(name))
}

/// An optional out-parameter (NULL: not wanted).
///
/// # Safety
/// As [`out_arg`].
unsafe fn write_optional<T>(out: *mut T, value: T) {
    // SAFETY: writable and aligned by the caller's contract, when not NULL.
    if let Some(out) = unsafe { out.as_mut() } {
        *out = value;
    }
}

/// The size a caller's struct claims (its first field), checked against this library's.
///
/// # Safety
/// `pointer` is not NULL and points to a readable, aligned `u32`.
unsafe fn struct_size<T>(pointer: *const T, name: &str) -> Result<usize, Failure> {
    // SAFETY: the caller's contract, passed on.
    unsafe { struct_size_at_least(pointer, name, size_of::<T>()) }
}

/// The size a caller's struct claims, checked to be at least `min_bytes` (the first version
/// of a struct that grew since) and at most [`STRUCT_SIZE_MAX_BYTES`].
///
/// # Safety
/// `pointer` is not NULL and points to a readable, aligned `u32`.
unsafe fn struct_size_at_least<T>(
    pointer: *const T,
    name: &str,
    min_bytes: usize,
) -> Result<usize, Failure> {
    // SAFETY: every struct of this API opens with its `u32` size (caller's contract).
    let claimed = unsafe { pointer.cast::<u32>().read() } as usize;
    if claimed < min_bytes || claimed > STRUCT_SIZE_MAX_BYTES {
        return Err(Failure::invalid(format!(
            "{name}->struct_size_bytes is {claimed}: this library needs {min_bytes} to \
             {STRUCT_SIZE_MAX_BYTES} (fill the struct with its _init function first)"
        )));
    }
    Ok(claimed)
}

/// Reads a caller's options struct: a newer caller's struct may be longer, if the fields this
/// library does not know are zero (as Linux's `copy_struct_from_user` rules).
///
/// # Safety
/// `pointer` is not NULL and points to a readable, aligned struct of `struct_size_bytes`
/// bytes whose fields are all integers or pointers (so any bytes are a valid `T`).
unsafe fn read_sized<T: Copy>(pointer: *const T, name: &str) -> Result<T, Failure> {
    // SAFETY: the caller's contract, passed on.
    unsafe { read_sized_claimed(pointer, name) }.map(|(value, _)| value)
}

/// [`read_sized`], with the size the struct claims (the stride of an array of them).
///
/// # Safety
/// As [`read_sized`].
unsafe fn read_sized_claimed<T: Copy>(
    pointer: *const T,
    name: &str,
) -> Result<(T, usize), Failure> {
    // SAFETY: the caller's contract, passed on.
    let claimed = unsafe { struct_size(pointer, name) }?;
    // SAFETY: the struct spans `claimed` readable bytes (the caller's contract).
    let bytes = unsafe { std::slice::from_raw_parts(pointer.cast::<u8>(), claimed) };
    if bytes[size_of::<T>()..].iter().any(|byte| *byte != 0) {
        return Err(Failure::invalid(format!(
            "{name} sets fields past the {} bytes this library knows (an older library than \
             the header the caller was built with)",
            size_of::<T>()
        )));
    }
    // SAFETY: readable and aligned; every field is an integer or a pointer, so these bytes
    // are a `T`.
    Ok((unsafe { pointer.read() }, claimed))
}

/// Writes an output struct, after checking the size the caller gave it.
///
/// # Safety
/// `pointer` is NULL or points to a writable, aligned struct of `struct_size_bytes` bytes.
unsafe fn write_sized<T>(pointer: *mut T, name: &str, value: T) -> Result<(), Failure> {
    if pointer.is_null() {
        return Err(null(name));
    }
    // SAFETY: the caller's contract, passed on.
    unsafe { struct_size(pointer, name) }?;
    // SAFETY: writable and aligned, and at least `size_of::<T>()` bytes (checked above).
    unsafe { pointer.write(value) };
    Ok(())
}

/// Writes an output struct that grew at its end since its first version
/// (`first_version_bytes` long): a caller built against an older header, whose struct is
/// shorter than this library's, gets the fields its size covers, and its `struct_size_bytes`
/// back as the bytes filled. Returns the bytes written.
///
/// # Safety
/// `pointer` is NULL or points to a writable, aligned struct of `struct_size_bytes` bytes
/// (at least `size_of::<u32>()`); `T` opens with its `u32` size.
unsafe fn write_versioned<T: Copy>(
    pointer: *mut T,
    name: &str,
    value: T,
    first_version_bytes: usize,
) -> Result<usize, Failure> {
    if pointer.is_null() {
        return Err(null(name));
    }
    // SAFETY: the caller's contract, passed on.
    let claimed = unsafe { struct_size_at_least(pointer, name, first_version_bytes) }?;
    if claimed >= size_of::<T>() {
        // SAFETY: writable and aligned, and at least `size_of::<T>()` bytes.
        unsafe { pointer.write(value) };
        return Ok(size_of::<T>());
    }
    // SAFETY: `claimed` is below `size_of::<T>()`, so the source spans it; the caller's
    // struct spans `claimed` writable bytes; a local and the caller's memory do not overlap.
    unsafe {
        std::ptr::copy_nonoverlapping(
            (&value as *const T).cast::<u8>(),
            pointer.cast::<u8>(),
            claimed,
        );
        pointer.cast::<u32>().write(claimed as u32);
    }
    Ok(claimed)
}

/// A timeout in microseconds, `SEALOG_TIMEOUT_NONE_US` being none.
fn timeout(timeout_us: u64) -> Option<Duration> {
    (timeout_us != SEALOG_TIMEOUT_NONE_US).then(|| Duration::from_micros(timeout_us))
}

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

/// The arguments of an open, checked: the path, the options (NULL: the defaults) and where
/// the handle goes.
///
/// # Safety
/// As `sealog_open`'s.
unsafe fn open_args<'a>(
    path: *const c_char,
    options: *const sealog_drive_options,
    drive_out: *mut *mut sealog_drive,
) -> Result<(PathBuf, DriveOptions, &'a mut *mut sealog_drive), Failure> {
    // SAFETY: the caller's contract.
    let path = unsafe { path_arg(path, "path") }?;
    let options = match options.is_null() {
        true => drive_options_default(),
        // SAFETY: not NULL, and a filled options struct by the caller's contract.
        false => unsafe { read_sized(options, "options") }?,
    };
    let options = drive_options(&options)?;
    // SAFETY: the caller's contract.
    let out = unsafe { out_arg(drive_out, "drive_out") }?;
    Ok((path, options, out))
}

/// A handle for a drive just opened: starts its completion thread.
fn handle(path: &std::path::Path, drive: Drive) -> Result<*mut sealog_drive, Failure> {
    let completions = Completions::start(&path.display().to_string()).map_err(|error| {
        Failure::new(
            sealog_status::SEALOG_IO,
            format!(
                "{}: cannot start the completion thread: {error}",
                path.display()
            ),
        )
    })?;
    let drive = Arc::new(drive);
    Ok(Box::into_raw(Box::new(sealog_drive { drive, completions })))
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
