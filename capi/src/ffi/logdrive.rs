//! Writes to one LogDrive from C: blocking, with a callback on the store's completion
//! thread, or with a ticket to poll or wait on, as the engine's appends are. A value is
//! copied before a write returns. Reads, the weak tail, seal, fence, trim, lengths and the
//! fields of the last LogDrive error are in `logdrive_ops`.

use std::ffi::{c_int, c_void};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ::sealog_logdrive::{LogDriveError, PendingWrite};
use bytes::Bytes;

use super::append::payload_arg;
use super::args::{guard, leave, null, out_arg, timeout};
use super::store::{logdrive_arg, sealog_logdrive};
use crate::last_error;
use crate::logdrive_status::logdrive_failure;
use crate::status::Failure;
use crate::types::*;

/// Queues a write of `value` at `address` stamped with `epoch`.
///
/// # Safety
/// `logdrive` is NULL or a live handle; `value` is NULL (for an empty value) or points to
/// `value_len_bytes` readable bytes.
unsafe fn submit<'a>(
    logdrive: *const sealog_logdrive,
    (address, epoch): (u64, u64),
    (value, value_len_bytes): (*const u8, usize),
) -> Result<(&'a sealog_logdrive, PendingWrite), Failure> {
    // SAFETY: the caller's contract.
    let handle = unsafe { logdrive_arg(logdrive) }?;
    // SAFETY: the caller's contract; the value is copied before the call returns.
    let value = Bytes::copy_from_slice(unsafe { payload_arg(value, value_len_bytes) }?);
    Ok((handle, handle.drive.submit_write(address, epoch, value)))
}

/// Writes `value` at `address` on behalf of a writer of `epoch`, durably, and blocks until
/// it is: an address is written once (the same bytes again succeed; others are
/// `SEALOG_CONFLICT`). `SEALOG_FENCED` when the LogDrive is fenced above `epoch`,
/// `SEALOG_SEALED` at or past its sealed length, `SEALOG_OUT_OF_RANGE` past its capacity or
/// below its trim point, `SEALOG_TOO_LARGE` over the ring's record limit, `SEALOG_MISSING`
/// once deleted, `SEALOG_STOPPED` once the store closed (may have taken effect); the fields
/// are `sealog_logdrive_last_error`'s.
///
/// Thread safety: any thread, concurrently with any call but the store's close.
///
/// # Safety
/// `logdrive` is NULL or a live handle; `value` is NULL (for an empty value) or points to
/// `value_len_bytes` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn sealog_logdrive_write(
    logdrive: *const sealog_logdrive,
    address: u64,
    epoch: u64,
    value: *const u8,
    value_len_bytes: usize,
) -> c_int {
    guard("sealog_logdrive_write", || {
        // SAFETY: the caller's contract.
        let (_, pending) = unsafe { submit(logdrive, (address, epoch), (value, value_len_bytes)) }?;
        pending.wait().map_err(logdrive_failure)
    })
}

/// Called once per `sealog_logdrive_write_cb` that returned `SEALOG_OK`, on the store's
/// completion thread, with the caller's `user_data`, the write's status and its address.
/// Inside it, `sealog_last_error_message()` and `sealog_logdrive_last_error()` describe a
/// failure. It must return normally (no longjmp, no C++ exception).
pub type sealog_logdrive_callback =
    Option<unsafe extern "C" fn(user_data: *mut c_void, status: c_int, address: u64)>;

/// Writes without waiting: returns once the write is queued (or refused at once: then the
/// callback never runs), and `callback(user_data, status, address)` runs once it is durable
/// or failed, exactly when this returned `SEALOG_OK`. Callbacks run on the store's
/// completion thread, one at a time, in the order the writes were queued, never on the
/// drive thread nor the caller's; a callback must not block for long and must never close
/// the store, and may call anything else. Keep a bounded window of writes in flight.
///
/// Thread safety: any thread, concurrently with any call but the store's close; also from a
/// callback.
///
/// # Safety
/// As `sealog_logdrive_write`; `callback` is NULL or a function that may be called once
/// with `user_data` from another thread, until `sealog_store_close` returns.
#[no_mangle]
pub unsafe extern "C" fn sealog_logdrive_write_cb(
    logdrive: *const sealog_logdrive,
    address: u64,
    epoch: u64,
    value: *const u8,
    value_len_bytes: usize,
    callback: sealog_logdrive_callback,
    user_data: *mut c_void,
) -> c_int {
    guard("sealog_logdrive_write_cb", || {
        let function = callback.ok_or_else(|| null("callback"))?;
        // SAFETY: the caller's contract.
        let (handle, pending) =
            unsafe { submit(logdrive, (address, epoch), (value, value_len_bytes)) }?;
        let user_data = user_data as usize;
        let call = Box::new(move |outcome: Result<(), LogDriveError>| {
            last_error::clear();
            let status = match outcome {
                Ok(()) => sealog_status::SEALOG_OK as c_int,
                Err(error) => leave("sealog_logdrive_write_cb", logdrive_failure(error)),
            };
            // SAFETY: the contract of `sealog_logdrive_write_cb`: called once, from this
            // thread, with the caller's `user_data`, before the store's close returns.
            unsafe { function(user_data as *mut c_void, status, address) };
        });
        handle.completions.push(pending, call).map_err(|_| {
            Failure::new(
                sealog_status::SEALOG_STOPPED,
                "the store is closing: the callback will not run",
            )
        })
    })
}

/// A pending write (`sealog_logdrive_write_async`): poll or wait on it, then free it.
pub struct sealog_logdrive_ticket {
    state: Mutex<TicketState>,
}

enum TicketState {
    Pending(PendingWrite),
    Done(Result<(), LogDriveError>),
    /// Only while a wait holds the write outside the mutex.
    Taken,
}

/// Writes without waiting: `*ticket_out` says when the write is durable
/// (`sealog_logdrive_ticket_poll`, `sealog_logdrive_ticket_wait`); free it with
/// `sealog_logdrive_ticket_free`. A write refused at once (a bad argument) gives no ticket;
/// the LogDrive's own refusals come from the ticket.
///
/// Thread safety: any thread, concurrently with any call but the store's close. The ticket
/// is used by one thread at a time.
///
/// # Safety
/// As `sealog_logdrive_write`; `ticket_out` is NULL or points to a writable
/// `sealog_logdrive_ticket *`.
#[no_mangle]
pub unsafe extern "C" fn sealog_logdrive_write_async(
    logdrive: *const sealog_logdrive,
    address: u64,
    epoch: u64,
    value: *const u8,
    value_len_bytes: usize,
    ticket_out: *mut *mut sealog_logdrive_ticket,
) -> c_int {
    guard("sealog_logdrive_write_async", || {
        // SAFETY: the caller's contract.
        let out = unsafe { out_arg(ticket_out, "ticket_out") }?;
        // SAFETY: the caller's contract.
        let (_, pending) = unsafe { submit(logdrive, (address, epoch), (value, value_len_bytes)) }?;
        let state = Mutex::new(TicketState::Pending(pending));
        *out = Box::into_raw(Box::new(sealog_logdrive_ticket { state }));
        Ok(())
    })
}

/// Waits for the ticket's write until `deadline` (`None`: no limit); `None` when it is still
/// pending then.
fn ticket_outcome(
    ticket: &sealog_logdrive_ticket,
    deadline: Option<Instant>,
) -> Option<Result<(), LogDriveError>> {
    let mut state = ticket.state.lock().unwrap_or_else(|p| p.into_inner());
    let pending = match std::mem::replace(&mut *state, TicketState::Taken) {
        TicketState::Pending(pending) => pending,
        TicketState::Done(outcome) => {
            *state = TicketState::Done(outcome.clone());
            return Some(outcome);
        }
        // A wait holds the mutex while the write is taken out: only a panic in one (caught
        // at the boundary) leaves this behind, and the write's outcome went with it.
        TicketState::Taken => {
            return Some(Err(LogDriveError::Stopped {
                reason: "an earlier wait on this ticket panicked".into(),
            }))
        }
    };
    let outcome = match deadline {
        None => pending.wait(),
        Some(deadline) => match pending.wait_deadline(deadline) {
            Ok(outcome) => outcome,
            Err(pending) => {
                *state = TicketState::Pending(pending);
                return None;
            }
        },
    };
    *state = TicketState::Done(outcome.clone());
    Some(outcome)
}

/// The ticket's write, without blocking: `SEALOG_OK` once durable, `SEALOG_PENDING` while
/// it is not yet, or why it failed. The ticket keeps its outcome.
///
/// Thread safety: the ticket's owner.
///
/// # Safety
/// `ticket` is NULL or a ticket from `sealog_logdrive_write_async` not yet freed.
#[no_mangle]
pub unsafe extern "C" fn sealog_logdrive_ticket_poll(
    ticket: *const sealog_logdrive_ticket,
) -> c_int {
    guard("sealog_logdrive_ticket_poll", || {
        // SAFETY: a live ticket by the caller's contract; NULL is refused.
        let ticket = unsafe { ticket.as_ref() }.ok_or_else(|| null("ticket"))?;
        match ticket_outcome(ticket, Some(Instant::now())) {
            None => Err(Failure::new(
                sealog_status::SEALOG_PENDING,
                "the write is not durable yet",
            )),
            Some(outcome) => outcome.map_err(logdrive_failure),
        }
    })
}

/// Blocks until the ticket's write is durable (`SEALOG_OK`) or failed, or `timeout_us`
/// microseconds pass (`SEALOG_TIMED_OUT`; the write goes on; `SEALOG_TIMEOUT_NONE_US`: no
/// limit).
///
/// Thread safety: the ticket's owner.
///
/// # Safety
/// `ticket` is NULL or a ticket from `sealog_logdrive_write_async` not yet freed.
#[no_mangle]
pub unsafe extern "C" fn sealog_logdrive_ticket_wait(
    ticket: *const sealog_logdrive_ticket,
    timeout_us: u64,
) -> c_int {
    guard("sealog_logdrive_ticket_wait", || {
        // SAFETY: a live ticket by the caller's contract; NULL is refused.
        let ticket = unsafe { ticket.as_ref() }.ok_or_else(|| null("ticket"))?;
        let deadline = timeout(timeout_us).map(|limit| {
            Instant::now()
                .checked_add(limit)
                .unwrap_or_else(|| Instant::now() + Duration::from_secs(86_400 * 365))
        });
        match ticket_outcome(ticket, deadline) {
            None => Err(Failure::new(
                sealog_status::SEALOG_TIMED_OUT,
                format!("the write was not durable within {timeout_us} us"),
            )),
            Some(outcome) => outcome.map_err(logdrive_failure),
        }
    })
}

/// Frees a ticket (NULL: nothing); the write goes on if it is still pending.
///
/// Thread safety: the ticket's owner, once.
///
/// # Safety
/// `ticket` is NULL or a ticket from `sealog_logdrive_write_async` not yet freed, not used
/// after.
#[no_mangle]
pub unsafe extern "C" fn sealog_logdrive_ticket_free(ticket: *mut sealog_logdrive_ticket) -> c_int {
    guard("sealog_logdrive_ticket_free", || {
        if !ticket.is_null() {
            // SAFETY: a boxed ticket from `sealog_logdrive_write_async`, freed once.
            drop(unsafe { Box::from_raw(ticket) });
        }
        Ok(())
    })
}
