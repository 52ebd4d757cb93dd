//! The open that rebuilds an embedder's index (`sealog_open_visiting`): the engine's replay
//! hands every live entry it recovers to a C function, on the drive thread, before the open
//! returns, so a ledger store or a stream server learns which of its records sit at which LSN
//! without reading the log a second time.

use std::ffi::{c_char, c_int, c_void};

use sealog::{Drive, EntryRef, RecoveryVisitor};

use super::args::{guard, handle, null, open_args, sealog_drive};
use crate::entries;
use crate::status::Failure;
use crate::types::{sealog_drive_options, sealog_entry_view};

/// Called by `sealog_open_visiting` once per live entry recovery accepts, in LSN order, with
/// the caller's `user_data` and a view of the entry. It runs on the drive thread (not the
/// thread that called `sealog_open_visiting`), during the open, and every call has returned
/// before `sealog_open_visiting` does. The view and its payload are borrowed from the replay
/// buffer: valid during the call only, copy what you keep. It must not call into sealog for
/// this ring (there is no drive handle yet: the open waits for the visitor), must not block
/// for long (the open waits), and must return normally (no longjmp, no C++ exception).
pub type sealog_recovery_visitor =
    Option<unsafe extern "C" fn(user_data: *mut c_void, entry: *const sealog_entry_view)>;

/// The caller's `user_data`, carried to the drive thread.
struct UserData(*mut c_void);

// SAFETY: the library never dereferences the pointer; it only hands it back to the caller's
// visitor. Sending it to the drive thread is what the caller agreed to by calling
// `sealog_open_visiting`: its contract says the visitor may be called with `user_data` from
// another thread during the open, and the open blocks until every call has returned (and the
// visitor is dropped before the open returns), so nothing of it outlives the call.
unsafe impl Send for UserData {}

/// The engine's visitor over the C function.
struct CVisitor {
    function: unsafe extern "C" fn(*mut c_void, *const sealog_entry_view),
    user_data: UserData,
}

impl RecoveryVisitor for CVisitor {
    fn visit(&mut self, entry: &EntryRef<'_>) {
        let view = sealog_entry_view {
            struct_size_bytes: size_of::<sealog_entry_view>() as u32,
            kind: entries::kind_code(entry.kind),
            lsn: entry.lsn,
            header: entries::c_header(&entry.header),
            payload: if entry.payload.is_empty() {
                std::ptr::null()
            } else {
                entry.payload.as_ptr()
            },
            payload_len_bytes: entry.payload.len(),
        };
        // SAFETY: `sealog_open_visiting`'s contract: the function may be called from the drive
        // thread during the open with the caller's `user_data`; the view and the payload it
        // points to live until the call returns, as documented.
        unsafe { (self.function)(self.user_data.0, &view) };
    }
}

/// `sealog_open`, handing every live entry the open's replay recovers to `visitor(user_data,
/// entry)`: once per entry, in LSN order, exactly the entries `sealog_iter_from` would yield
/// from the first live LSN after the open (trimmed ones are not visited). Every call has
/// returned before this function does; then `*drive_out` is the open handle, as
/// `sealog_open` gives it. If the open fails (a strict recovery finding acknowledged data
/// damaged, say), the visitor may have seen entries of a log that was not recovered: drop
/// what it built. Errors as `sealog_open`; `SEALOG_INVALID_ARGUMENT` for a NULL visitor.
///
/// The visitor runs on the drive thread, not the caller's, while this call blocks; the entry
/// view and its payload are borrowed for the call only; it must not call into sealog for
/// this ring (there is no handle yet), must not block for long, and must return normally (no
/// longjmp, no C++ exception). `user_data` is handed to it untouched: whatever it points to
/// is used from the drive thread, with the calling thread blocked in this call (so no lock
/// is needed for state only the visitor and the code after this call touch).
///
/// Thread safety: any thread. The handle it returns may be used from many threads at once.
///
/// # Safety
/// As `sealog_open` for `path`, `options` and `drive_out`; `visitor` is NULL or a function
/// that may be called, as above, from another thread with `user_data` until this call
/// returns.
#[no_mangle]
pub unsafe extern "C" fn sealog_open_visiting(
    path: *const c_char,
    options: *const sealog_drive_options,
    visitor: sealog_recovery_visitor,
    user_data: *mut c_void,
    drive_out: *mut *mut sealog_drive,
) -> c_int {
    guard("sealog_open_visiting", || {
        // SAFETY: the caller's contract.
        let (path, options, out) = unsafe { open_args(path, options, drive_out) }?;
        let function = visitor.ok_or_else(|| null("visitor"))?;
        let visitor = CVisitor {
            function,
            user_data: UserData(user_data),
        };
        // The visitor handed back is dropped at once: nothing of the caller's `user_data`
        // stays with the library past this call.
        let (drive, _) = Drive::open_visiting(&path, options, visitor).map_err(Failure::from)?;
        *out = handle(&path, drive)?;
        Ok(())
    })
}
