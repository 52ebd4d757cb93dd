//! The thread-local last error: the message of the last call on a thread that failed, which
//! `sealog_last_error_message()` hands to C, and for a LogDrive operation its typed error,
//! whose fields `sealog_logdrive_last_error()` hands out. Every call clears it first, so the
//! message a caller reads belongs to the call it just made, and the pointer it got stays
//! valid until its next call into the library on that thread.

use std::cell::RefCell;
use std::ffi::{c_char, CStr, CString};

use sealog_logdrive::LogDriveError;

thread_local! {
    static LAST_ERROR: RefCell<Option<CString>> = const { RefCell::new(None) };
    static LAST_LOGDRIVE_ERROR: RefCell<Option<LogDriveError>> = const { RefCell::new(None) };
}

/// Forgets the last message and LogDrive error (at the start of every call).
pub fn clear() {
    LAST_ERROR.with(|last| last.borrow_mut().take());
    LAST_LOGDRIVE_ERROR.with(|last| last.borrow_mut().take());
}

/// Records the LogDrive error of this thread's failed call, for its fields.
pub fn set_logdrive(error: Option<LogDriveError>) {
    LAST_LOGDRIVE_ERROR.with(|last| *last.borrow_mut() = error);
}

/// The LogDrive error of this thread's last call, if it failed with one.
pub fn logdrive() -> Option<LogDriveError> {
    LAST_LOGDRIVE_ERROR.with(|last| last.borrow().clone())
}

/// Records `message` as this thread's last error. A NUL byte, which C cannot carry inside a
/// string, is written as `\0`.
pub fn set(message: &str) {
    let text = CString::new(message.replace('\0', "\\0")).expect("NUL bytes were replaced");
    LAST_ERROR.with(|last| *last.borrow_mut() = Some(text));
}

/// The last message as a C string ("" when the last call succeeded): it lives in this
/// thread's slot until the slot changes.
pub fn as_ptr() -> *const c_char {
    LAST_ERROR.with(|last| match last.borrow().as_ref() {
        Some(text) => text.as_ptr(),
        None => c"".as_ptr(),
    })
}

/// The last message as Rust text, for tests.
pub fn message() -> String {
    LAST_ERROR.with(|last| {
        last.borrow()
            .as_deref()
            .map_or_else(String::new, |text: &CStr| {
                text.to_string_lossy().into_owned()
            })
    })
}
