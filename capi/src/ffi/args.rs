//! What every exported function shares: the drive handle C holds ([`sealog_drive`]), the
//! [`guard`] each function body runs in, and the checks of the raw arguments C hands over
//! (NULL pointers, struct sizes, paths, out-pointers), each `unsafe` with the part of the
//! caller's contract it relies on.

// The handle carries the name C sees.
#![allow(non_camel_case_types)]

use std::ffi::{c_char, c_int, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use sealog::{Drive, DriveOptions};

use crate::completion::Completions;
use crate::last_error;
use crate::options::{drive_options, drive_options_default};
use crate::status::Failure;
use crate::types::*;

/// An open drive (`sealog_open` to `sealog_close`): the engine's drive and the thread that
/// runs its completion callbacks.
pub struct sealog_drive {
    pub(crate) drive: Arc<Drive>,
    pub(crate) completions: Completions,
}

// A drive handle is shared by C threads: everything in it must be.
const _: () = {
    const fn shared<T: Send + Sync>() {}
    shared::<sealog_drive>();
};

/// The largest struct size a caller may claim: far above any version of these structs, low
/// enough that a size left uninitialised is caught rather than read past.
pub(crate) const STRUCT_SIZE_MAX_BYTES: usize = 4096;

/// Runs the body of the function `name`: clears the last error, catches a panic, and turns
/// the outcome into a status code (leaving a failure's message, after the function's name,
/// as the thread's last error).
pub(crate) fn guard(name: &str, body: impl FnOnce() -> Result<(), Failure>) -> c_int {
    last_error::clear();
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        #[cfg(test)]
        panic_if_asked();
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
    leave(name, failure)
}

/// Leaves `failure` (after the name of the call it belongs to) as the thread's last error,
/// its message and its LogDrive error's fields, and returns its status: how a call ends, and
/// how a completion callback learns of its append's or write's failure.
pub(crate) fn leave(name: &str, failure: Failure) -> c_int {
    last_error::set(&format!("{name}: {}", failure.message));
    last_error::set_logdrive(failure.logdrive);
    failure.status as c_int
}

/// The text of a panic's payload.
pub(crate) fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_string()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic without a message".to_string()
    }
}

pub(crate) fn null(name: &str) -> Failure {
    Failure::invalid(format!("{name} is NULL"))
}

/// A path argument: not NULL, not empty, UTF-8.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string readable until the call returns.
pub(crate) unsafe fn path_arg(path: *const c_char, name: &str) -> Result<PathBuf, Failure> {
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
pub(crate) unsafe fn drive_arg<'a>(
    drive: *const sealog_drive,
) -> Result<&'a sealog_drive, Failure> {
    // SAFETY: a live handle by the caller's contract; NULL is refused.
    unsafe { drive.as_ref() }.ok_or_else(|| null("drive"))
}

/// An out-parameter.
///
/// # Safety
/// `out` is NULL or points to a writable, aligned `T` not otherwise used during the call.
pub(crate) unsafe fn out_arg<'a, T>(out: *mut T, name: &str) -> Result<&'a mut T, Failure> {
    // SAFETY: writable and aligned by the caller's contract; NULL is refused.
    unsafe { out.as_mut() }.ok_or_else(|| null(name))
}

/// An optional out-parameter (NULL: not wanted).
///
/// # Safety
/// As [`out_arg`].
pub(crate) unsafe fn write_optional<T>(out: *mut T, value: T) {
    // SAFETY: writable and aligned by the caller's contract, when not NULL.
    if let Some(out) = unsafe { out.as_mut() } {
        *out = value;
    }
}

/// The size a caller's struct claims (its first field), checked against this library's.
///
/// # Safety
/// `pointer` is not NULL and points to a readable, aligned `u32`.
pub(crate) unsafe fn struct_size<T>(pointer: *const T, name: &str) -> Result<usize, Failure> {
    // SAFETY: the caller's contract, passed on.
    unsafe { struct_size_at_least(pointer, name, size_of::<T>()) }
}

/// The size a caller's struct claims, checked to be at least `min_bytes` (the first version
/// of a struct that grew since) and at most [`STRUCT_SIZE_MAX_BYTES`].
///
/// # Safety
/// `pointer` is not NULL and points to a readable, aligned `u32`.
pub(crate) unsafe fn struct_size_at_least<T>(
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
pub(crate) unsafe fn read_sized<T: Copy>(pointer: *const T, name: &str) -> Result<T, Failure> {
    // SAFETY: the caller's contract, passed on.
    unsafe { read_sized_claimed(pointer, name) }.map(|(value, _)| value)
}

/// [`read_sized`], with the size the struct claims (the stride of an array of them).
///
/// # Safety
/// As [`read_sized`].
pub(crate) unsafe fn read_sized_claimed<T: Copy>(
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
pub(crate) unsafe fn write_sized<T>(pointer: *mut T, name: &str, value: T) -> Result<(), Failure> {
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
pub(crate) unsafe fn write_versioned<T: Copy>(
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
pub(crate) fn timeout(timeout_us: u64) -> Option<Duration> {
    (timeout_us != SEALOG_TIMEOUT_NONE_US).then(|| Duration::from_micros(timeout_us))
}

/// The arguments of an open, checked: the path, the options (NULL: the defaults) and where
/// the handle goes.
///
/// # Safety
/// As `sealog_open`'s.
pub(crate) unsafe fn open_args<'a>(
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
pub(crate) fn handle(path: &std::path::Path, drive: Drive) -> Result<*mut sealog_drive, Failure> {
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

#[cfg(test)]
thread_local! {
    /// Whether the next [`guard`]ed call on this thread panics: set by a test only.
    static PANIC_IN_NEXT_CALL: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Makes the next [`guard`]ed call on this thread panic, for the test that a panic becomes
/// `SEALOG_PANIC` and never crosses into C.
#[cfg(test)]
pub(crate) fn panic_in_next_call() {
    PANIC_IN_NEXT_CALL.with(|asked| asked.set(true));
}

/// The hook [`guard`] calls in tests: panics once when a test asked for it.
#[cfg(test)]
fn panic_if_asked() {
    if PANIC_IN_NEXT_CALL.with(|asked| asked.replace(false)) {
        panic!("a test asked for a panic");
    }
}
