//! The rest of one LogDrive from C, each call blocking until it is done: reads, the weak
//! tail, seal, fence, trim and lengths; and `sealog_logdrive_last_error`, the fields of the
//! thread's last LogDrive error (what failed, where, and whether it may have taken effect).

use std::ffi::c_int;

use ::sealog_logdrive::{wait, LogDrive, ReadOutcome};

use super::args::{guard, null, write_optional, write_versioned};
use super::store::logdrive_arg;
use super::store::sealog_logdrive;
use crate::last_error;
use crate::logdrive_status::{error_struct, logdrive_failure};
use crate::types::*;

/// Reads `address`: `*value_out` says what is there (`outcome`: `SEALOG_LOGDRIVE_VALUE`
/// with the value, which the caller frees with `sealog_buffer_free(payload,
/// payload_len_bytes)`; `_UNWRITTEN`; `_TRIMMED` with the trim point in `first`;
/// `_DAMAGED`, never unwritten). `SEALOG_OUT_OF_RANGE` at or past the capacity.
///
/// Thread safety: any thread, concurrently with any call but the store's close.
///
/// # Safety
/// `logdrive` is NULL or a live handle; `value_out` is NULL or points to a
/// `sealog_logdrive_value` whose `struct_size_bytes` is set.
#[no_mangle]
pub unsafe extern "C" fn sealog_logdrive_read(
    logdrive: *const sealog_logdrive,
    address: u64,
    value_out: *mut sealog_logdrive_value,
) -> c_int {
    guard("sealog_logdrive_read", || {
        // SAFETY: the caller's contract.
        let drive = &unsafe { logdrive_arg(logdrive) }?.drive;
        if value_out.is_null() {
            return Err(null("value_out"));
        }
        let mut value = sealog_logdrive_value {
            struct_size_bytes: size_of::<sealog_logdrive_value>() as u32,
            outcome: SEALOG_LOGDRIVE_UNWRITTEN,
            first: 0,
            payload: std::ptr::null_mut(),
            payload_len_bytes: 0,
        };
        match wait(drive.read(address)).map_err(logdrive_failure)? {
            ReadOutcome::Value(bytes) => {
                value.outcome = SEALOG_LOGDRIVE_VALUE;
                value.payload_len_bytes = bytes.len();
                if !bytes.is_empty() {
                    value.payload = Box::into_raw(bytes.to_vec().into_boxed_slice()).cast();
                }
            }
            ReadOutcome::Unwritten => {}
            ReadOutcome::Trimmed { first } => {
                (value.outcome, value.first) = (SEALOG_LOGDRIVE_TRIMMED, first)
            }
            ReadOutcome::Damaged => value.outcome = SEALOG_LOGDRIVE_DAMAGED,
        }
        let (payload, len) = (value.payload, value.payload_len_bytes);
        // SAFETY: not NULL, a sized output struct by the caller's contract.
        let written = unsafe {
            write_versioned(
                value_out,
                "value_out",
                value,
                size_of::<sealog_logdrive_value>(),
            )
        };
        if written.is_err() && !payload.is_null() {
            // SAFETY: the boxed slice just made, never handed out.
            drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(payload, len)) });
        }
        written.map(|_| ())
    })
}

/// The window scan: `*n_out` is N (one past the highest written address), the unwritten
/// addresses in [N - k, N) go into `holes` (the first `holes_capacity` of them, in order;
/// `*holes_count_out` is how many there are, which may be more: at most `k`), and
/// `*holes_below_window_out` is 1 when an address below that window is unwritten too.
/// `SEALOG_INVALID_WINDOW` for a `k` over the store's bound; `SEALOG_DAMAGED` when a
/// quarantined open left addresses a lost record may have held (the error's `valid_start`
/// and `valid_end`).
///
/// Thread safety: any thread, concurrently with any call but the store's close.
///
/// # Safety
/// `logdrive` is NULL or a live handle; `holes` is NULL (with `holes_capacity` 0) or points
/// to `holes_capacity` writable `uint64_t`; each out-pointer is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn sealog_logdrive_weak_tail(
    logdrive: *const sealog_logdrive,
    k: u64,
    n_out: *mut u64,
    holes: *mut u64,
    holes_capacity: usize,
    holes_count_out: *mut usize,
    holes_below_window_out: *mut c_int,
) -> c_int {
    guard("sealog_logdrive_weak_tail", || {
        // SAFETY: the caller's contract.
        let drive = &unsafe { logdrive_arg(logdrive) }?.drive;
        if holes.is_null() && holes_capacity > 0 {
            return Err(null("holes"));
        }
        let tail = wait(drive.weak_tail(k)).map_err(logdrive_failure)?;
        for (index, hole) in tail.holes.iter().take(holes_capacity).enumerate() {
            // SAFETY: `index` is below `holes_capacity`, within the caller's array.
            unsafe { holes.add(index).write(*hole) };
        }
        // SAFETY: the caller's contract, for each.
        unsafe {
            write_optional(n_out, tail.n);
            write_optional(holes_count_out, tail.holes.len());
            write_optional(holes_below_window_out, c_int::from(tail.holes_below_window));
        }
        Ok(())
    })
}

/// Seals at `length` on behalf of a sealer of `epoch`, durably: writes at or past it are
/// `SEALOG_SEALED` from now on, and what was held there is dropped. The same length again
/// succeeds; another is `SEALOG_SEALED` (the error's `length`); an epoch below the fence is
/// `SEALOG_FENCED`.
///
/// Thread safety: any thread, concurrently with any call but the store's close.
///
/// # Safety
/// `logdrive` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn sealog_logdrive_seal(
    logdrive: *const sealog_logdrive,
    length: u64,
    epoch: u64,
) -> c_int {
    guard("sealog_logdrive_seal", || {
        // SAFETY: the caller's contract.
        let drive = &unsafe { logdrive_arg(logdrive) }?.drive;
        wait(drive.seal(length, epoch)).map_err(logdrive_failure)
    })
}

/// Fences at `epoch`, durably and for good: writes stamped lower are `SEALOG_FENCED` from
/// now on (a new writer fences out the one before it). The same epoch again succeeds; a
/// lower one is `SEALOG_FENCED` (the error's `epoch` is the fence).
///
/// Thread safety: any thread, concurrently with any call but the store's close.
///
/// # Safety
/// `logdrive` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn sealog_logdrive_fence(
    logdrive: *const sealog_logdrive,
    epoch: u64,
) -> c_int {
    guard("sealog_logdrive_fence", || {
        // SAFETY: the caller's contract.
        let drive = &unsafe { logdrive_arg(logdrive) }?.drive;
        wait(drive.fence(epoch)).map_err(logdrive_failure)
    })
}

/// Trims every address below `upto`, durably (allowed at or below N and the sealed length;
/// else `SEALOG_OUT_OF_RANGE`): they read `SEALOG_LOGDRIVE_TRIMMED`, and their space comes
/// back to the ring as the reclaimer passes them.
///
/// Thread safety: any thread, concurrently with any call but the store's close.
///
/// # Safety
/// `logdrive` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn sealog_logdrive_trim(
    logdrive: *const sealog_logdrive,
    upto: u64,
) -> c_int {
    guard("sealog_logdrive_trim", || {
        // SAFETY: the caller's contract.
        let drive = &unsafe { logdrive_arg(logdrive) }?.drive;
        wait(drive.trim(upto)).map_err(logdrive_failure)
    })
}

/// The LogDrive's lengths and settings, as durable: N, T, the seal, the fence and the trim
/// point.
///
/// Thread safety: any thread, concurrently with any call but the store's close.
///
/// # Safety
/// `logdrive` is NULL or a live handle; `lengths_out` is NULL or points to a
/// `sealog_logdrive_lengths` whose `struct_size_bytes` is set.
#[no_mangle]
pub unsafe extern "C" fn sealog_logdrive_length(
    logdrive: *const sealog_logdrive,
    lengths_out: *mut sealog_logdrive_lengths,
) -> c_int {
    guard("sealog_logdrive_length", || {
        // SAFETY: the caller's contract.
        let drive = &unsafe { logdrive_arg(logdrive) }?.drive;
        let length = wait(drive.length()).map_err(logdrive_failure)?;
        let lengths = sealog_logdrive_lengths {
            struct_size_bytes: size_of::<sealog_logdrive_lengths>() as u32,
            sealed: u32::from(length.sealed.is_some()),
            n: length.n,
            t: length.t,
            sealed_length: length.sealed.unwrap_or(0),
            fence: length.fence,
            first: length.first,
        };
        let size = size_of::<sealog_logdrive_lengths>();
        // SAFETY: the caller's contract.
        unsafe { write_versioned(lengths_out, "lengths_out", lengths, size) }.map(|_| ())
    })
}

/// The fields of the LogDrive error the thread's last call into the library failed with
/// (`status` `SEALOG_OK` when it met none): the cause's status, whether it was definite
/// (nothing written) or may have taken effect, and the address, length, epoch, range, id or
/// limit it names. Inside a write callback, that write's. This call itself changes neither
/// the last error nor its message.
///
/// Thread safety: any thread; each thread has its own.
///
/// # Safety
/// `error_out` is NULL or points to a `sealog_logdrive_error` whose `struct_size_bytes` is
/// set.
#[no_mangle]
pub unsafe extern "C" fn sealog_logdrive_last_error(
    error_out: *mut sealog_logdrive_error,
) -> c_int {
    let last = last_error::logdrive();
    let message = last_error::message();
    let status = guard("sealog_logdrive_last_error", || {
        let size = size_of::<sealog_logdrive_error>();
        let error = error_struct(last.as_ref());
        // SAFETY: the caller's contract.
        unsafe { write_versioned(error_out, "error_out", error, size) }.map(|_| ())
    });
    if status == sealog_status::SEALOG_OK as c_int {
        // The guard cleared them: this call reports the last one, it is not one.
        last_error::set_logdrive(last);
        if !message.is_empty() {
            last_error::set(&message);
        }
    }
    status
}
