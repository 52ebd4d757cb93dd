//! LogDrive stores from C: open one on a ring (strict, or with damaged records in
//! quarantine) with a report of what it holds, create, find, list and delete its LogDrives,
//! close it. A `sealog_store *` owns the store and the completion thread that runs its
//! writes' callbacks; a `sealog_logdrive *` is one LogDrive's handle (its id and generation),
//! freed on its own, before or after the store closes (after, every operation on it answers
//! `SEALOG_STOPPED`).

use std::ffi::{c_char, c_int};
use std::path::Path;
use std::sync::Arc;

use ::sealog_logdrive::{wait, LocalLogDrive, LogDriveStore, PendingWrite, StoreOptions};
use sealog::{DriveOptions, RecoveryMode};

use super::args::{guard, null, out_arg, path_arg, read_sized, write_optional, write_versioned};
use crate::completion::Completions;
use crate::logdrive_status::{logdrive_failure, store_open_failure};
use crate::options::format_options_default;
use crate::status::Failure;
use crate::types::*;

/// An open LogDrive store (`sealog_store_open` to `sealog_store_close`).
pub struct sealog_store {
    pub(crate) store: LogDriveStore,
    pub(crate) completions: Arc<Completions<PendingWrite>>,
}

/// One LogDrive of a store (`sealog_store_create`, `sealog_store_get` to
/// `sealog_logdrive_free`).
pub struct sealog_logdrive {
    pub(crate) drive: LocalLogDrive,
    pub(crate) completions: Arc<Completions<PendingWrite>>,
}

// Both handles are shared by C threads: everything in them must be.
const _: () = {
    const fn shared<T: Send + Sync>() {}
    shared::<sealog_store>();
    shared::<sealog_logdrive>();
};

/// The store behind a handle.
///
/// # Safety
/// `store` is NULL or a handle from `sealog_store_open` not yet closed.
pub(crate) unsafe fn store_arg<'a>(
    store: *const sealog_store,
) -> Result<&'a sealog_store, Failure> {
    // SAFETY: a live handle by the caller's contract; NULL is refused.
    unsafe { store.as_ref() }.ok_or_else(|| null("store"))
}

/// The LogDrive behind a handle.
///
/// # Safety
/// `logdrive` is NULL or a handle from `sealog_store_create` or `sealog_store_get` not yet
/// freed.
pub(crate) unsafe fn logdrive_arg<'a>(
    logdrive: *const sealog_logdrive,
) -> Result<&'a sealog_logdrive, Failure> {
    // SAFETY: a live handle by the caller's contract; NULL is refused.
    unsafe { logdrive.as_ref() }.ok_or_else(|| null("logdrive"))
}

/// A handle for one LogDrive of `store`.
fn logdrive_handle(store: &sealog_store, drive: LocalLogDrive) -> *mut sealog_logdrive {
    let completions = Arc::clone(&store.completions);
    Box::into_raw(Box::new(sealog_logdrive { drive, completions }))
}

/// Fills `options` (as `sealog_format_options_init` does) with the shape the store's planner
/// gives a ring of `size_bytes` for a LogDrive store (what `sealog format --logdrive` makes):
/// segments of an eighth of the ring (256 KiB to 64 MiB), batches and a window that keep the
/// store's reserves. `SEALOG_INVALID_ARGUMENT`, naming the smallest ring that works, when
/// `size_bytes` is too small for one. Format with `sealog_format`, then open with
/// `sealog_store_open`.
///
/// Thread safety: any thread.
///
/// # Safety
/// `options` is NULL or points to a writable `sealog_format_options`.
#[no_mangle]
pub unsafe extern "C" fn sealog_store_format_options_init(
    options: *mut sealog_format_options,
    size_bytes: u64,
) -> c_int {
    guard("sealog_store_format_options_init", || {
        // SAFETY: the caller's contract.
        let out = unsafe { out_arg(options, "options") }?;
        let block = sealog_wal::format::BLOCK_SIZE_MIN_BYTES;
        let planned = ::sealog_logdrive::geometry::format_options(size_bytes, None, block)
            .map_err(|error| Failure::invalid(format!("size_bytes {size_bytes}: {error}")))?;
        let mut filled = format_options_default(size_bytes);
        filled.segment_size_bytes = planned.segment_size_bytes.unwrap_or(0);
        filled.batch_size_max_bytes = planned.batch_size_max_bytes.unwrap_or(0);
        filled.window_batches_max = planned.window_batches_max.unwrap_or(0);
        *out = filled;
        Ok(())
    })
}

/// Fills `options` with the defaults (strict recovery; sets `struct_size_bytes`).
///
/// Thread safety: any thread.
///
/// # Safety
/// `options` is NULL or points to a writable `sealog_store_options`.
#[no_mangle]
pub unsafe extern "C" fn sealog_store_options_init(options: *mut sealog_store_options) -> c_int {
    guard("sealog_store_options_init", || {
        // SAFETY: the caller's contract.
        *unsafe { out_arg(options, "options") }? = sealog_store_options {
            struct_size_bytes: size_of::<sealog_store_options>() as u32,
            recovery: SEALOG_STORE_RECOVERY_STRICT,
        };
        Ok(())
    })
}

/// The store's options from C's.
fn store_options(options: &sealog_store_options) -> Result<StoreOptions, Failure> {
    let mode = match options.recovery {
        SEALOG_STORE_RECOVERY_STRICT => RecoveryMode::Strict,
        SEALOG_STORE_RECOVERY_QUARANTINE => RecoveryMode::Quarantine,
        other => {
            return Err(Failure::invalid(format!(
                "options.recovery is {other}: SEALOG_STORE_RECOVERY_STRICT or \
                 SEALOG_STORE_RECOVERY_QUARANTINE"
            )))
        }
    };
    Ok(StoreOptions::default().drive(DriveOptions::default().recovery(mode)))
}

/// What the store holds as it opened.
fn store_report(store: &LogDriveStore) -> Result<sealog_store_report, Failure> {
    let logdrives = store.ids().map_err(logdrive_failure)?.len() as u64;
    let damaged = store.damaged().map_err(logdrive_failure)?;
    Ok(sealog_store_report {
        struct_size_bytes: size_of::<sealog_store_report>() as u32,
        reserved_zero: 0,
        logdrives,
        damaged_records: store.quarantine_report().len() as u64,
        damaged_addresses: damaged.iter().map(|(_, set)| set.len() as u64).sum(),
        skipped_records: store.skipped_records(),
    })
}

/// Opens the LogDrive store on the ring at `path` (`sealog format --logdrive` makes one; a
/// plain ring becomes one at its first open), rebuilding every LogDrive; `*store_out` is its
/// handle and, when `report_out` is not NULL, `*report_out` what it holds (with
/// `SEALOG_STORE_RECOVERY_QUARANTINE`, the damaged records it stepped over: their addresses
/// read `SEALOG_LOGDRIVE_DAMAGED` until a peer's value repairs them). `options` NULL: the
/// defaults. Errors as `sealog_open`'s (`SEALOG_CORRUPT` for damage met strictly,
/// `SEALOG_IN_USE`, `SEALOG_NOT_A_RING`, ...); `SEALOG_INVALID_ARGUMENT` for a ring too
/// small for a store's reserves. Starts the store's reclaimer and its completion thread.
///
/// Thread safety: any thread.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string; `options` is NULL or a filled
/// `sealog_store_options`; `store_out` is NULL or points to a writable `sealog_store *`;
/// `report_out` is NULL or points to a `sealog_store_report` whose `struct_size_bytes` is set.
#[no_mangle]
pub unsafe extern "C" fn sealog_store_open(
    path: *const c_char,
    options: *const sealog_store_options,
    store_out: *mut *mut sealog_store,
    report_out: *mut sealog_store_report,
) -> c_int {
    guard("sealog_store_open", || {
        // SAFETY: the caller's contract.
        let path = unsafe { path_arg(path, "path") }?;
        let options = match options.is_null() {
            true => StoreOptions::default(),
            // SAFETY: not NULL, a filled options struct by the caller's contract.
            false => store_options(&unsafe { read_sized(options, "options") }?)?,
        };
        // SAFETY: the caller's contract.
        let out = unsafe { out_arg(store_out, "store_out") }?;
        let store = LogDriveStore::open_with_options(&path, options)
            .map_err(|e| store_open_failure(e).context(path.display()))?;
        let opened = open_handle(&path, store)?;
        if !report_out.is_null() {
            let report = store_report(&opened.store);
            // SAFETY: not NULL, a sized output struct by the caller's contract.
            let written = report.and_then(|r| unsafe {
                let size = size_of::<sealog_store_report>();
                write_versioned(report_out, "report_out", r, size)
            });
            if let Err(failure) = written {
                opened.store.close();
                opened.completions.finish();
                return Err(failure);
            }
        }
        *out = Box::into_raw(Box::new(opened));
        Ok(())
    })
}

/// The handle of a store just opened: starts its completion thread.
fn open_handle(path: &Path, store: LogDriveStore) -> Result<sealog_store, Failure> {
    match Completions::start(&path.display().to_string()) {
        Ok(completions) => Ok(sealog_store {
            store,
            completions: Arc::new(completions),
        }),
        Err(error) => {
            store.close();
            Err(Failure::new(
                sealog_status::SEALOG_IO,
                format!(
                    "{}: cannot start the completion thread: {error}",
                    path.display()
                ),
            ))
        }
    }
}

/// Closes the store and frees its handle (NULL: nothing): every operation on its LogDrives
/// answers `SEALOG_STOPPED` from now on, what was queued is made durable, and every write
/// callback still queued runs (exactly once) before this returns. LogDrive handles are
/// still freed with `sealog_logdrive_free`. `SEALOG_INVALID_ARGUMENT` when called from a
/// write callback (close joins that thread); the store stays open then.
///
/// Thread safety: once, after every other call on the store and its LogDrives returned.
///
/// # Safety
/// `store` is NULL or a handle from `sealog_store_open` not yet closed, not used after.
#[no_mangle]
pub unsafe extern "C" fn sealog_store_close(store: *mut sealog_store) -> c_int {
    guard("sealog_store_close", || {
        if store.is_null() {
            return Ok(());
        }
        // SAFETY: a live handle by the caller's contract.
        if unsafe { &*store }.completions.is_current_thread() {
            return Err(Failure::invalid(
                "called from a write callback of this store: close it from another thread",
            ));
        }
        // SAFETY: a boxed handle from `sealog_store_open`, closed once (the contract).
        let store = unsafe { Box::from_raw(store) };
        store.store.close();
        store.completions.finish();
        Ok(())
    })
}

/// Creates LogDrive `id` with addresses below `capacity`, durably, with the store's next
/// generation; `*logdrive_out` is its handle. `SEALOG_EXISTS` while one of that id lives.
///
/// Thread safety: any thread, concurrently with any call but close.
///
/// # Safety
/// `store` is NULL or an open handle; `logdrive_out` is NULL or points to a writable
/// `sealog_logdrive *`.
#[no_mangle]
pub unsafe extern "C" fn sealog_store_create(
    store: *const sealog_store,
    id: u64,
    capacity: u64,
    logdrive_out: *mut *mut sealog_logdrive,
) -> c_int {
    guard("sealog_store_create", || {
        // SAFETY: the caller's contract.
        let store = unsafe { store_arg(store) }?;
        // SAFETY: the caller's contract.
        let out = unsafe { out_arg(logdrive_out, "logdrive_out") }?;
        let drive = wait(store.store.create(id, capacity)).map_err(logdrive_failure)?;
        *out = logdrive_handle(store, drive);
        Ok(())
    })
}

/// The live LogDrive `id`: `*logdrive_out` is a new handle on it (`SEALOG_MISSING` when
/// there is none). Two handles on one LogDrive are two writers (each with its own epoch).
///
/// Thread safety: any thread, concurrently with any call but close.
///
/// # Safety
/// `store` is NULL or an open handle; `logdrive_out` is NULL or points to a writable
/// `sealog_logdrive *`.
#[no_mangle]
pub unsafe extern "C" fn sealog_store_get(
    store: *const sealog_store,
    id: u64,
    logdrive_out: *mut *mut sealog_logdrive,
) -> c_int {
    guard("sealog_store_get", || {
        // SAFETY: the caller's contract.
        let store = unsafe { store_arg(store) }?;
        // SAFETY: the caller's contract.
        let out = unsafe { out_arg(logdrive_out, "logdrive_out") }?;
        let drive = store.store.get(id).map_err(logdrive_failure)?;
        *out = logdrive_handle(store, drive);
        Ok(())
    })
}

/// Deletes LogDrive `id`, durably: its handles answer `SEALOG_MISSING` from now on.
///
/// Thread safety: any thread, concurrently with any call but close.
///
/// # Safety
/// `store` is NULL or an open handle.
#[no_mangle]
pub unsafe extern "C" fn sealog_store_delete(store: *const sealog_store, id: u64) -> c_int {
    guard("sealog_store_delete", || {
        // SAFETY: the caller's contract.
        let store = unsafe { store_arg(store) }?;
        wait(store.store.delete(id)).map_err(logdrive_failure)
    })
}

/// The live LogDrives' ids, in order: the first `capacity` of them into `ids`, and their
/// number into `*count_out` (which may exceed `capacity`: call again with more room).
///
/// Thread safety: any thread, concurrently with any call but close.
///
/// # Safety
/// `store` is NULL or an open handle; `ids` is NULL (with `capacity` 0) or points to
/// `capacity` writable `uint64_t`; `count_out` is NULL or points to a writable `size_t`.
#[no_mangle]
pub unsafe extern "C" fn sealog_store_list(
    store: *const sealog_store,
    ids: *mut u64,
    capacity: usize,
    count_out: *mut usize,
) -> c_int {
    guard("sealog_store_list", || {
        // SAFETY: the caller's contract.
        let store = unsafe { store_arg(store) }?;
        if count_out.is_null() {
            return Err(null("count_out"));
        }
        if ids.is_null() && capacity > 0 {
            return Err(null("ids"));
        }
        let live = store.store.ids().map_err(logdrive_failure)?;
        for (index, id) in live.iter().take(capacity).enumerate() {
            // SAFETY: `index` is below `capacity`, within the caller's array.
            unsafe { ids.add(index).write(*id) };
        }
        // SAFETY: not NULL, writable by the caller's contract.
        unsafe { write_optional(count_out, live.len()) };
        Ok(())
    })
}

/// Frees a LogDrive handle (NULL: nothing). Writes it queued go on; their callbacks run.
///
/// Thread safety: once, after every other call on this handle returned.
///
/// # Safety
/// `logdrive` is NULL or a handle not yet freed, not used after.
#[no_mangle]
pub unsafe extern "C" fn sealog_logdrive_free(logdrive: *mut sealog_logdrive) -> c_int {
    guard("sealog_logdrive_free", || {
        if !logdrive.is_null() {
            // SAFETY: a boxed handle from `logdrive_handle`, freed once (the contract).
            drop(unsafe { Box::from_raw(logdrive) });
        }
        Ok(())
    })
}

/// The LogDrive's id and generation (either out-pointer may be NULL).
///
/// Thread safety: any thread.
///
/// # Safety
/// `logdrive` is NULL or a live handle; `id_out` and `generation_out` are NULL or point to
/// writable `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn sealog_logdrive_identity(
    logdrive: *const sealog_logdrive,
    id_out: *mut u64,
    generation_out: *mut u64,
) -> c_int {
    guard("sealog_logdrive_identity", || {
        // SAFETY: the caller's contract.
        let drive = &unsafe { logdrive_arg(logdrive) }?.drive;
        // SAFETY: the caller's contract.
        unsafe { write_optional(id_out, drive.id()) };
        // SAFETY: the caller's contract.
        unsafe { write_optional(generation_out, drive.generation()) };
        Ok(())
    })
}
