//! Reads from C: a point read (`sealog_read`) hands out a buffer the library allocated, which
//! the caller frees with `sealog_buffer_free` (no copy: the engine's buffer is handed over);
//! an iterator (`sealog_iter_*`) lends each payload until its next call, so a scan allocates
//! nothing per entry on the caller's side. Both fill a `sealog_entry` with the entry's kind
//! and embedder header; a caller built against the struct's first version (without the
//! header) gets the fields it knows. A damaged entry whose header is intact still hands out
//! that header, with `SEALOG_DAMAGED`.

use std::ffi::c_int;
use std::sync::Arc;

use std::mem::offset_of;

use sealog::{Drive, EntryIter, LogEntry, ReadError};

use super::args::{
    drive_arg, guard, null, out_arg, sealog_drive, struct_size_at_least, write_versioned,
};
use crate::entries;
use crate::status::Failure;
use crate::types::{sealog_entry, sealog_status};

/// The bytes of `sealog_entry`'s first version: up to its payload's length, before the
/// embedder header was added.
const ENTRY_FIRST_VERSION_BYTES: usize = offset_of!(sealog_entry, header);

/// The bytes a caller's `sealog_entry` must span for a damaged entry's header to be handed
/// out (up to `header_valid`, included).
const ENTRY_HEADER_VALID_BYTES: usize = offset_of!(sealog_entry, header_valid) + size_of::<u32>();

/// An iterator over the live log (`sealog_iter_from` to `sealog_iter_free`).
pub struct sealog_iter {
    /// Declared first, so it is dropped before the drive it borrows.
    entries: EntryIter<'static>,
    /// The payload lent by the last `sealog_iter_next`.
    payload: Vec<u8>,
    /// Keeps the drive (not its thread: close still stops that) alive as long as the
    /// iterator borrows it.
    _drive: Arc<Drive>,
}

// An iterator may be handed from one thread to another between calls.
const _: () = {
    const fn movable<T: Send>() {}
    movable::<sealog_iter>();
};

/// Sets `entry->struct_size_bytes` to the size of the FIRST version of `sealog_entry` (no
/// `kind` meaning, no `header`): the symbol programs built against that version call. The
/// header defines `sealog_entry_init(entry)` as a macro over `sealog_entry_init_sized(entry,
/// sizeof *(entry))`, so C compiled against this header gets its own size, header included.
///
/// Thread safety: any thread.
///
/// # Safety
/// `entry` is NULL or points to a writable `sealog_entry` of the first version at least.
#[no_mangle]
pub unsafe extern "C" fn sealog_entry_init(entry: *mut sealog_entry) -> c_int {
    guard("sealog_entry_init", || {
        // SAFETY: the caller's contract: its struct spans the first version, whose first field
        // is this `u32`.
        let size = unsafe { out_arg(entry.cast::<u32>(), "entry") }?;
        *size = ENTRY_FIRST_VERSION_BYTES as u32;
        Ok(())
    })
}

/// Sets `entry->struct_size_bytes` to `struct_size_bytes`, the size of `sealog_entry` the
/// caller was compiled with (`sizeof *entry`; what the header's `sealog_entry_init` macro
/// passes), before `sealog_read` or `sealog_iter_next`: they fill the fields that size covers
/// and no byte past it. `SEALOG_INVALID_ARGUMENT` for a size below the struct's first version.
///
/// Thread safety: any thread.
///
/// # Safety
/// `entry` is NULL or points to `struct_size_bytes` writable bytes, aligned for a
/// `sealog_entry`.
#[no_mangle]
pub unsafe extern "C" fn sealog_entry_init_sized(
    entry: *mut sealog_entry,
    struct_size_bytes: usize,
) -> c_int {
    guard("sealog_entry_init_sized", || {
        if !(ENTRY_FIRST_VERSION_BYTES..=super::args::STRUCT_SIZE_MAX_BYTES)
            .contains(&struct_size_bytes)
        {
            return Err(Failure::invalid(format!(
                "struct_size_bytes is {struct_size_bytes}: a sealog_entry is {} to {} bytes",
                ENTRY_FIRST_VERSION_BYTES,
                super::args::STRUCT_SIZE_MAX_BYTES
            )));
        }
        // SAFETY: the caller's contract: the struct spans `struct_size_bytes` bytes, at least
        // the first version's, whose first field is this `u32`.
        let size = unsafe { out_arg(entry.cast::<u32>(), "entry") }?;
        *size = struct_size_bytes as u32;
        Ok(())
    })
}

/// An entry handing out `payload` (NULL when empty).
fn entry(read: &LogEntry, payload: *const u8, payload_len_bytes: usize) -> sealog_entry {
    sealog_entry {
        struct_size_bytes: size_of::<sealog_entry>() as u32,
        kind: entries::kind_code(read.kind),
        lsn: read.lsn,
        payload: if payload_len_bytes == 0 {
            std::ptr::null()
        } else {
            payload
        },
        payload_len_bytes,
        header: entries::c_header(&read.header),
        header_valid: 1,
        reserved_zero: 0,
    }
}

/// Turns a read's error into its failure; for `SEALOG_DAMAGED`, first fills `*entry_out`
/// with what is known of the entry (its LSN, no payload, its header when intact) if the
/// caller's struct has room for `header_valid` (one built against the first version is left
/// as it was).
///
/// # Safety
/// `entry_out` is not NULL and points to a `sealog_entry` whose `struct_size_bytes` was set
/// by `sealog_entry_init`.
unsafe fn read_failure(error: ReadError, entry_out: *mut sealog_entry) -> Failure {
    if let ReadError::Damaged { lsn, header, .. } = &error {
        // SAFETY: the caller's contract.
        let room = unsafe { struct_size_at_least(entry_out, "entry_out", 0) };
        if room.is_ok_and(|bytes| bytes >= ENTRY_HEADER_VALID_BYTES) {
            let damaged = sealog_entry {
                struct_size_bytes: size_of::<sealog_entry>() as u32,
                kind: 0,
                lsn: *lsn,
                payload: std::ptr::null(),
                payload_len_bytes: 0,
                header: header.as_ref().map(entries::c_header).unwrap_or_default(),
                header_valid: u32::from(header.is_some()),
                reserved_zero: 0,
            };
            // SAFETY: the caller's contract; the size was checked above.
            let _ = unsafe {
                write_versioned(entry_out, "entry_out", damaged, ENTRY_FIRST_VERSION_BYTES)
            };
        }
    }
    Failure::from(error)
}

/// Reads the live entry at `lsn` into `*entry_out`: its payload is a buffer the library
/// allocated for the caller, who frees it with `sealog_buffer_free(entry.payload,
/// entry.payload_len_bytes)` (NULL when empty: nothing to free). Recent entries come from
/// memory; others are read from the device on the calling thread and checked. Outcomes:
/// `SEALOG_OK`, `SEALOG_TRIMMED`, `SEALOG_NOT_YET_DURABLE` (nothing unacknowledged is ever
/// served), `SEALOG_DAMAGED` (that read only: the drive runs on), `SEALOG_FAILED`,
/// `SEALOG_CLOSED`. `entry.kind` and `entry.header` are the entry's kind and embedder header
/// (`header_valid` 1).
///
/// On `SEALOG_DAMAGED`, `*entry_out` says what is known of the damaged entry: `lsn`, no
/// payload (NULL, 0: nothing to free), `kind` 0, and, when the entry's header is intact and
/// only its payload failed its check, `header` with `header_valid` 1 (else zeros and 0), so
/// the caller can tell which of its records is damaged. A caller built against the first
/// version of `sealog_entry` (no `header`) finds it left as it was. On any other failure
/// `*entry_out` is left as it was.
///
/// Thread safety: any thread, concurrently with any other call on the drive but close; also
/// from a completion callback.
///
/// # Safety
/// `drive` is NULL or an open handle; `entry_out` is NULL or points to a `sealog_entry` whose
/// `struct_size_bytes` was set by `sealog_entry_init`.
#[no_mangle]
pub unsafe extern "C" fn sealog_read(
    drive: *const sealog_drive,
    lsn: u64,
    entry_out: *mut sealog_entry,
) -> c_int {
    guard("sealog_read", || {
        // SAFETY: the caller's contract.
        let drive = &unsafe { drive_arg(drive) }?.drive;
        if entry_out.is_null() {
            return Err(null("entry_out"));
        }
        let mut read = match drive.read_entry(lsn) {
            Ok(read) => read,
            Err(error) => {
                // SAFETY: not NULL, an initialised entry by the caller's contract.
                let failure = unsafe { read_failure(error, entry_out) };
                return Err(failure.context(drive.path().display()));
            }
        };
        let payload = Box::into_raw(std::mem::take(&mut read.payload).into_boxed_slice());
        let value = entry(&read, payload.cast::<u8>().cast_const(), payload.len());
        // SAFETY: the caller's contract.
        let written =
            unsafe { write_versioned(entry_out, "entry_out", value, ENTRY_FIRST_VERSION_BYTES) };
        if written.is_err() && !payload.is_empty() {
            // SAFETY: the box just made, never handed out.
            drop(unsafe { Box::from_raw(payload) });
        }
        written.map(|_| ())
    })
}

/// Frees a payload `sealog_read` handed out (NULL: nothing).
///
/// Thread safety: any thread, once per payload.
///
/// # Safety
/// `payload` is NULL or the `payload` of an entry `sealog_read` filled, with its
/// `payload_len_bytes`, not freed before and not used after.
#[no_mangle]
pub unsafe extern "C" fn sealog_buffer_free(payload: *const u8, payload_len_bytes: usize) -> c_int {
    guard("sealog_buffer_free", || {
        if payload.is_null() {
            return Ok(());
        }
        let slice = std::ptr::slice_from_raw_parts_mut(payload.cast_mut(), payload_len_bytes);
        // SAFETY: a boxed slice of this length from `sealog_read`, freed once (the contract).
        drop(unsafe { Box::from_raw(slice) });
        Ok(())
    })
}

/// Starts an iterator over the live entries from `lsn` on, up to the durable tail; free it
/// with `sealog_iter_free`. It reads ahead in large sequential reads (recent entries come
/// from memory). Errors (a start below the first live LSN, past the next LSN) come from the
/// first `sealog_iter_next`.
///
/// Thread safety: any thread, concurrently with any other call on the drive but close. The
/// iterator is single-threaded: one thread at a time calls it (it may move between threads
/// between calls).
///
/// # Safety
/// `drive` is NULL or an open handle; `iter_out` is NULL or points to a writable
/// `sealog_iter *`.
#[no_mangle]
pub unsafe extern "C" fn sealog_iter_from(
    drive: *const sealog_drive,
    lsn: u64,
    iter_out: *mut *mut sealog_iter,
) -> c_int {
    guard("sealog_iter_from", || {
        // SAFETY: the caller's contract.
        let drive = Arc::clone(&unsafe { drive_arg(drive) }?.drive);
        // SAFETY: the caller's contract.
        let out = unsafe { out_arg(iter_out, "iter_out") }?;
        // SAFETY: the reference points into the Arc's allocation, which never moves and which
        // `sealog_iter::_drive` keeps alive for as long as the iterator (declared before it,
        // so dropped first) borrows it; nothing mutates a `Drive` behind a shared reference.
        let borrowed: &'static Drive = unsafe { &*Arc::as_ptr(&drive) };
        let iter = sealog_iter {
            entries: borrowed.iter_from(lsn),
            payload: Vec::new(),
            _drive: drive,
        };
        *out = Box::into_raw(Box::new(iter));
        Ok(())
    })
}

/// The next entry into `*entry_out`: `SEALOG_OK`, or `SEALOG_END` at the durable tail (a
/// later call goes on from there, once more is durable: wait with `sealog_wait_durable`), or
/// why it stopped (`SEALOG_TRIMMED` when a trim passed it or it started below the first live
/// LSN, `SEALOG_NOT_YET_DURABLE` when it started past the next LSN, `SEALOG_DAMAGED`,
/// `SEALOG_CLOSED`, ...; after `SEALOG_DAMAGED` the next call goes on with the next LSN, so a
/// scan crosses damage, and after any other error it returns `SEALOG_END`). The entry comes
/// with its kind and embedder header; on `SEALOG_DAMAGED`, `*entry_out` is filled as
/// `sealog_read` fills it then (the damaged record's LSN, and its header when intact). The
/// payload is lent: it stays valid until the next `sealog_iter_next` or `sealog_iter_free` on
/// this iterator.
///
/// Thread safety: one thread at a time per iterator.
///
/// # Safety
/// `iter` is NULL or an iterator not yet freed; `entry_out` is NULL or points to a
/// `sealog_entry` whose `struct_size_bytes` was set by `sealog_entry_init`.
#[no_mangle]
pub unsafe extern "C" fn sealog_iter_next(
    iter: *mut sealog_iter,
    entry_out: *mut sealog_entry,
) -> c_int {
    guard("sealog_iter_next", || {
        // SAFETY: a live iterator used by one thread at a time (the caller's contract).
        let iter = unsafe { iter.as_mut() }.ok_or_else(|| null("iter"))?;
        if entry_out.is_null() {
            return Err(null("entry_out"));
        }
        let mut next = match iter.entries.next() {
            None => {
                return Err(Failure::new(
                    sealog_status::SEALOG_END,
                    "the iterator is at the durable tail",
                ))
            }
            Some(Err(error)) => {
                // SAFETY: not NULL, an initialised entry by the caller's contract.
                let failure = unsafe { read_failure(error, entry_out) };
                return Err(failure.context(iter._drive.path().display()));
            }
            Some(Ok(next)) => next,
        };
        iter.payload = std::mem::take(&mut next.payload);
        let value = entry(&next, iter.payload.as_ptr(), iter.payload.len());
        // SAFETY: the caller's contract.
        unsafe { write_versioned(entry_out, "entry_out", value, ENTRY_FIRST_VERSION_BYTES) }
            .map(|_| ())
    })
}

/// Frees an iterator (NULL: nothing), and with it the payload it lent last.
///
/// Thread safety: the iterator's one thread, once.
///
/// # Safety
/// `iter` is NULL or an iterator not yet freed, not used after.
#[no_mangle]
pub unsafe extern "C" fn sealog_iter_free(iter: *mut sealog_iter) -> c_int {
    guard("sealog_iter_free", || {
        if !iter.is_null() {
            // SAFETY: a boxed iterator from `sealog_iter_from`, freed once (the contract).
            drop(unsafe { Box::from_raw(iter) });
        }
        Ok(())
    })
}
