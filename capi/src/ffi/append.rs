//! Appends from C: blocking (`sealog_append`), pipelined with a completion callback
//! (`sealog_append_cb`, run on the drive's completion thread) and pipelined with a ticket to
//! poll or wait on (`sealog_append_async`). The payload is copied before the call returns, so
//! the caller's buffer is free again at once whichever way it appends.

use std::ffi::{c_int, c_void};
use std::sync::Arc;

use sealog::{AppendOutcome, Drive, Ticket};

use super::{drive_arg, guard, null, out_arg, sealog_drive, timeout, write_optional};
use crate::completion::Callback;
use crate::last_error;
use crate::status::Failure;
use crate::types::sealog_status;

/// Called once per `sealog_append_cb` that returned `SEALOG_OK`, on the drive's completion
/// thread, with the caller's `user_data`, the append's status (`SEALOG_OK`, or why it failed:
/// `SEALOG_RING_FULL`, `SEALOG_FAILED`, `SEALOG_CLOSED`, ...) and its LSN (0 unless
/// `SEALOG_OK`). Inside it, `sealog_last_error_message()` is the failure's message. It must
/// return normally (no longjmp, no C++ exception).
pub type sealog_append_callback =
    Option<unsafe extern "C" fn(user_data: *mut c_void, status: c_int, lsn: u64)>;

/// A pending append (`sealog_append_async`): poll or wait on it, then free it.
pub struct sealog_ticket {
    ticket: Ticket,
    /// For the path in messages (the drive's thread still stops at close).
    drive: Arc<Drive>,
}

/// A payload argument: NULL is allowed for an empty one.
///
/// # Safety
/// `payload` is NULL or points to `payload_len_bytes` readable bytes.
unsafe fn payload_arg<'a>(
    payload: *const u8,
    payload_len_bytes: usize,
) -> Result<&'a [u8], Failure> {
    if payload_len_bytes == 0 {
        return Ok(&[]);
    }
    if payload.is_null() {
        return Err(Failure::invalid(format!(
            "payload is NULL with payload_len_bytes {payload_len_bytes}"
        )));
    }
    if payload_len_bytes > isize::MAX as usize {
        return Err(Failure::invalid(format!(
            "payload_len_bytes {payload_len_bytes} is past any buffer"
        )));
    }
    // SAFETY: not NULL, `payload_len_bytes` readable bytes (the caller's contract), at most
    // isize::MAX of them; read only until the call returns.
    Ok(unsafe { std::slice::from_raw_parts(payload, payload_len_bytes) })
}

/// Queues a copy of the payload; the ticket yields its LSN once durable.
fn queue(drive: &Drive, payload: &[u8]) -> Result<Ticket, Failure> {
    drive
        .append(payload.to_vec())
        .map_err(|error| Failure::from(error).context(drive.path().display()))
}

/// What an outcome tells C: the status, the LSN, and the message left as the last error.
fn outcome_status(drive: &Drive, outcome: AppendOutcome) -> Result<u64, Failure> {
    outcome.map_err(|error| Failure::from(error).context(drive.path().display()))
}

/// Appends one entry and blocks until it is durable: `*lsn_out` (when not NULL) is its LSN.
/// `SEALOG_TOO_LARGE` (nothing written) for a payload over `payload_size_max_bytes`,
/// `SEALOG_RING_FULL` when the ring is full (trim, then retry), `SEALOG_FAILED` after a
/// write or flush failed, `SEALOG_CLOSED`. The payload is copied before the drive sees it.
///
/// Thread safety: any thread, concurrently with any other call on the drive but close; also
/// from a completion callback (it blocks that thread, and so every later callback).
///
/// # Safety
/// `drive` is NULL or an open handle; `payload` is NULL (for an empty payload) or points to
/// `payload_len_bytes` readable bytes; `lsn_out` is NULL or points to a writable `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn sealog_append(
    drive: *const sealog_drive,
    payload: *const u8,
    payload_len_bytes: usize,
    lsn_out: *mut u64,
) -> c_int {
    guard("sealog_append", || {
        // SAFETY: the caller's contract.
        let drive = &unsafe { drive_arg(drive) }?.drive;
        // SAFETY: the caller's contract.
        let payload = unsafe { payload_arg(payload, payload_len_bytes) }?;
        let lsn = outcome_status(drive, queue(drive, payload)?.wait())?;
        // SAFETY: the caller's contract.
        unsafe { write_optional(lsn_out, lsn) };
        Ok(())
    })
}

/// Appends one entry without waiting: returns once it is queued, and `callback(user_data,
/// status, lsn)` runs once it is durable or failed. Returns `SEALOG_OK` exactly when the
/// callback will run (exactly once); any other status (`SEALOG_TOO_LARGE`, `SEALOG_CLOSED`,
/// `SEALOG_INVALID_ARGUMENT`, ...) means it never will. Keep a bounded window of appends in
/// flight (the completion queue has no bound of its own).
///
/// Callbacks run on the drive's completion thread (one per drive, started by `sealog_open`),
/// one at a time, in LSN order, never on the drive thread nor the caller's. A callback must
/// not block for long (it delays every later callback, not the drive); it may call
/// `sealog_append*`, `sealog_read`, `sealog_trim` and the accessors on the same drive, but
/// never `sealog_close` on it (close joins this thread). `sealog_close` runs every callback
/// still queued before it returns; appends the drive never made durable get `SEALOG_CLOSED`.
///
/// Thread safety: any thread, concurrently with any other call on the drive but close; also
/// from a completion callback.
///
/// # Safety
/// `drive` is NULL or an open handle; `payload` is NULL (for an empty payload) or points to
/// `payload_len_bytes` readable bytes; `callback` is NULL or a function that may be called
/// once with `user_data` from another thread, until `sealog_close` on this drive returns.
#[no_mangle]
pub unsafe extern "C" fn sealog_append_cb(
    drive: *const sealog_drive,
    payload: *const u8,
    payload_len_bytes: usize,
    callback: sealog_append_callback,
    user_data: *mut c_void,
) -> c_int {
    guard("sealog_append_cb", || {
        // SAFETY: the caller's contract.
        let handle = unsafe { drive_arg(drive) }?;
        // SAFETY: the caller's contract.
        let payload = unsafe { payload_arg(payload, payload_len_bytes) }?;
        let function = callback.ok_or_else(|| null("callback"))?;
        let ticket = queue(&handle.drive, payload)?;
        let callback = completion(Arc::clone(&handle.drive), function, user_data as usize);
        handle.completions.push(ticket, callback).map_err(|_| {
            Failure::new(
                sealog_status::SEALOG_CLOSED,
                format!(
                    "{}: the drive is closing: the callback will not run",
                    handle.drive.path().display()
                ),
            )
        })
    })
}

/// The completion thread's side of a callback: the outcome as C sees it (its message as the
/// thread's last error), then the call. `user_data` travels as an address: the library never
/// looks behind it.
fn completion(
    drive: Arc<Drive>,
    function: unsafe extern "C" fn(*mut c_void, c_int, u64),
    user_data: usize,
) -> Callback {
    Box::new(move |outcome: AppendOutcome| {
        last_error::clear();
        let (status, lsn) = match outcome_status(&drive, outcome) {
            Ok(lsn) => (sealog_status::SEALOG_OK as c_int, lsn),
            Err(failure) => {
                last_error::set(&format!("sealog_append_cb: {}", failure.message));
                (failure.status as c_int, 0)
            }
        };
        // SAFETY: `sealog_append_cb`'s contract: the function may be called once, from this
        // thread, with the caller's `user_data`, until the drive is closed (it is not yet:
        // close joins this thread after the call).
        unsafe { function(user_data as *mut c_void, status, lsn) };
    })
}

/// Appends one entry without waiting: `*ticket_out` says when it is durable
/// (`sealog_ticket_poll`, `sealog_ticket_wait`); free it with `sealog_ticket_free`. Fails at
/// once, with no ticket, for `SEALOG_TOO_LARGE`, `SEALOG_CLOSED`, `SEALOG_FAILED`, ...
///
/// Thread safety: any thread, concurrently with any other call on the drive but close. The
/// ticket belongs to the caller: one thread at a time uses it.
///
/// # Safety
/// `drive` is NULL or an open handle; `payload` is NULL (for an empty payload) or points to
/// `payload_len_bytes` readable bytes; `ticket_out` is NULL or points to a writable
/// `sealog_ticket *`.
#[no_mangle]
pub unsafe extern "C" fn sealog_append_async(
    drive: *const sealog_drive,
    payload: *const u8,
    payload_len_bytes: usize,
    ticket_out: *mut *mut sealog_ticket,
) -> c_int {
    guard("sealog_append_async", || {
        // SAFETY: the caller's contract.
        let drive = &unsafe { drive_arg(drive) }?.drive;
        // SAFETY: the caller's contract.
        let payload = unsafe { payload_arg(payload, payload_len_bytes) }?;
        // SAFETY: the caller's contract.
        let out = unsafe { out_arg(ticket_out, "ticket_out") }?;
        let ticket = queue(drive, payload)?;
        let drive = Arc::clone(drive);
        *out = Box::into_raw(Box::new(sealog_ticket { ticket, drive }));
        Ok(())
    })
}

/// The ticket's append, without blocking: `SEALOG_OK` with `*lsn_out` (when not NULL) its
/// LSN once durable, `SEALOG_PENDING` while it is not yet, or why it failed. The ticket keeps
/// its outcome: polling again answers the same.
///
/// Thread safety: the ticket's owner; a ticket is used by one thread at a time.
///
/// # Safety
/// `ticket` is NULL or a ticket from `sealog_append_async` not yet freed; `lsn_out` is NULL
/// or points to a writable `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn sealog_ticket_poll(
    ticket: *const sealog_ticket,
    lsn_out: *mut u64,
) -> c_int {
    guard("sealog_ticket_poll", || {
        // SAFETY: a live ticket by the caller's contract; NULL is refused.
        let ticket = unsafe { ticket.as_ref() }.ok_or_else(|| null("ticket"))?;
        let Some(outcome) = ticket.ticket.try_outcome() else {
            return Err(Failure::new(
                sealog_status::SEALOG_PENDING,
                "the append is not durable yet",
            ));
        };
        let lsn = outcome_status(&ticket.drive, outcome)?;
        // SAFETY: the caller's contract.
        unsafe { write_optional(lsn_out, lsn) };
        Ok(())
    })
}

/// Blocks until the ticket's append is durable (`SEALOG_OK`, `*lsn_out` its LSN when not
/// NULL) or failed, or `timeout_us` microseconds pass (`SEALOG_TIMED_OUT`; the append goes on;
/// `SEALOG_TIMEOUT_NONE_US`: no limit).
///
/// Thread safety: the ticket's owner; a ticket is used by one thread at a time.
///
/// # Safety
/// `ticket` is NULL or a ticket from `sealog_append_async` not yet freed; `lsn_out` is NULL
/// or points to a writable `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn sealog_ticket_wait(
    ticket: *const sealog_ticket,
    timeout_us: u64,
    lsn_out: *mut u64,
) -> c_int {
    guard("sealog_ticket_wait", || {
        // SAFETY: a live ticket by the caller's contract; NULL is refused.
        let ticket = unsafe { ticket.as_ref() }.ok_or_else(|| null("ticket"))?;
        let limit = timeout(timeout_us).unwrap_or(std::time::Duration::MAX);
        let Some(outcome) = ticket.ticket.wait_timeout(limit) else {
            return Err(Failure::new(
                sealog_status::SEALOG_TIMED_OUT,
                format!("the append was not durable within {timeout_us} us"),
            ));
        };
        let lsn = outcome_status(&ticket.drive, outcome)?;
        // SAFETY: the caller's contract.
        unsafe { write_optional(lsn_out, lsn) };
        Ok(())
    })
}

/// Frees a ticket (NULL: nothing). The append itself goes on if it is still pending.
///
/// Thread safety: the ticket's owner, once.
///
/// # Safety
/// `ticket` is NULL or a ticket from `sealog_append_async` not yet freed, not used after.
#[no_mangle]
pub unsafe extern "C" fn sealog_ticket_free(ticket: *mut sealog_ticket) -> c_int {
    guard("sealog_ticket_free", || {
        if !ticket.is_null() {
            // SAFETY: a boxed ticket from `sealog_append_async`, freed once (the contract).
            drop(unsafe { Box::from_raw(ticket) });
        }
        Ok(())
    })
}
