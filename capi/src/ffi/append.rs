//! Appends from C: blocking (`sealog_append`), pipelined with a completion callback
//! (`sealog_append_cb`, run on the drive's completion thread) and pipelined with a ticket to
//! poll or wait on (`sealog_append_async`). The payload is copied before the call returns, so
//! the caller's buffer is free again at once whichever way it appends.
//!
//! The same three ways take an entry with a kind and an embedder header, described by a
//! `sealog_new_entry` (`sealog_append_entry*`), or an all-or-nothing group of them, an array
//! of `sealog_new_entry` (`sealog_append_group*`): the group's entries share one batch, take
//! consecutive LSNs, and complete together, with the group's first LSN.

use std::ffi::{c_int, c_void};
use std::sync::Arc;

use sealog::{AppendOutcome, Drive, NewEntry, Ticket};

use super::args::{
    drive_arg, guard, leave, null, out_arg, read_sized_claimed, sealog_drive, timeout,
    write_optional,
};
use crate::completion::Callback;
use crate::entries;
use crate::last_error;
use crate::status::Failure;
use crate::types::{sealog_new_entry, sealog_status};

/// Called once per `sealog_append_cb` (or `sealog_append_entry_cb`, `sealog_append_group_cb`)
/// that returned `SEALOG_OK`, on the drive's completion thread, with the caller's
/// `user_data`, the append's status (`SEALOG_OK`, or why it failed: `SEALOG_RING_FULL`,
/// `SEALOG_FAILED`, `SEALOG_CLOSED`, ...) and its LSN (a group's first LSN; 0 unless
/// `SEALOG_OK`). Inside it, `sealog_last_error_message()` is the failure's message. It must
/// return normally (no longjmp, no C++ exception).
pub type sealog_append_callback =
    Option<unsafe extern "C" fn(user_data: *mut c_void, status: c_int, lsn: u64)>;

/// A pending append (`sealog_append_async`, `sealog_append_entry_async`,
/// `sealog_append_group_async`): poll or wait on it, then free it. A group's ticket yields
/// its first LSN.
pub struct sealog_ticket {
    ticket: Ticket,
    /// For the path in messages (the drive's thread still stops at close).
    drive: Arc<Drive>,
}

/// A payload argument: NULL is allowed for an empty one.
///
/// # Safety
/// `payload` is NULL or points to `payload_len_bytes` readable bytes.
pub(crate) unsafe fn payload_arg<'a>(
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

/// What an append hands the drive: one entry, or a group of them.
enum Appending {
    One(NewEntry),
    Group(Vec<NewEntry>),
}

/// Queues one data entry, a copy of the payload; the ticket yields its LSN once durable.
fn queue(drive: &Drive, payload: &[u8]) -> Result<Ticket, Failure> {
    submit(drive, Appending::One(NewEntry::data(payload.to_vec())))
}

/// Queues an entry or a group; the ticket yields its (first) LSN once durable.
fn submit(drive: &Drive, appending: Appending) -> Result<Ticket, Failure> {
    match appending {
        Appending::One(entry) => drive.append(entry),
        Appending::Group(entries) => drive.append_group(entries),
    }
    .map_err(|error| Failure::from(error).context(drive.path().display()))
}

/// One entry an append describes, its payload copied.
///
/// # Safety
/// `entry` is NULL or points to a `sealog_new_entry` filled by `sealog_new_entry_init`, of
/// `struct_size_bytes` readable bytes, whose `payload` points to `payload_len_bytes` readable
/// bytes (or is NULL when that is 0).
unsafe fn new_entry_arg(
    entry: *const sealog_new_entry,
    name: &str,
    stride: Option<usize>,
) -> Result<NewEntry, Failure> {
    if entry.is_null() {
        return Err(null(name));
    }
    // SAFETY: not NULL, a filled struct by the caller's contract.
    let (entry, claimed) = unsafe { read_sized_claimed(entry, name) }?;
    if let Some(stride) = stride.filter(|stride| *stride != claimed) {
        return Err(Failure::invalid(format!(
            "{name}.struct_size_bytes is {claimed}: every element of the array has the size \
             of entries[0], {stride}"
        )));
    }
    let kind = entries::kind(entry.kind, &format!("{name}.kind"))?;
    // SAFETY: the caller's contract.
    let payload = unsafe { payload_arg(entry.payload, entry.payload_len_bytes) }
        .map_err(|failure| failure.context(name))?;
    Ok(NewEntry::data(payload.to_vec())
        .with_kind(kind)
        .with_header(entries::header(&entry.header)))
}

/// The entries of a group, their payloads copied: `count` structs from `entries`, whose
/// stride is the `struct_size_bytes` of the first (every element must have it). No entry is
/// an empty group, which the engine refuses (`entries` may then be NULL).
///
/// # Safety
/// `entries` is NULL or points to `count` structs as [`new_entry_arg`] takes, each
/// `entries[0].struct_size_bytes` long.
unsafe fn group_arg(
    entries: *const sealog_new_entry,
    count: usize,
) -> Result<Vec<NewEntry>, Failure> {
    if count == 0 {
        return Ok(Vec::new());
    }
    if entries.is_null() {
        return Err(null("entries"));
    }
    // SAFETY: not NULL, the first of `count` filled structs by the caller's contract.
    let (_, stride) = unsafe { read_sized_claimed(entries, "entries[0]") }?;
    if stride % align_of::<sealog_new_entry>() != 0 {
        return Err(Failure::invalid(format!(
            "entries[0].struct_size_bytes is {stride}: not a multiple of the struct's \
             alignment, so no array has that stride"
        )));
    }
    if count
        .checked_mul(stride)
        .is_none_or(|bytes| bytes > isize::MAX as usize)
    {
        return Err(Failure::invalid(format!(
            "count {count} of {stride} bytes each is past any array"
        )));
    }
    (0..count)
        .map(|index| {
            // SAFETY: within the array of `count` elements of `stride` bytes (the caller's
            // contract; the product fits an isize, checked above).
            let element = unsafe { entries.byte_add(index * stride) };
            // SAFETY: a filled element of the array, by the caller's contract.
            unsafe { new_entry_arg(element, &format!("entries[{index}]"), Some(stride)) }
        })
        .collect()
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
        push_callback(handle, ticket, function, user_data, "sealog_append_cb")
    })
}

/// Queues an accepted append's callback on the drive's completion thread (`SEALOG_CLOSED`
/// when the drive is closing: it will not run).
fn push_callback(
    handle: &sealog_drive,
    ticket: Ticket,
    function: unsafe extern "C" fn(*mut c_void, c_int, u64),
    user_data: *mut c_void,
    name: &'static str,
) -> Result<(), Failure> {
    let callback = completion(
        Arc::clone(&handle.drive),
        function,
        user_data as usize,
        name,
    );
    handle.completions.push(ticket, callback).map_err(|_| {
        Failure::new(
            sealog_status::SEALOG_CLOSED,
            format!(
                "{}: the drive is closing: the callback will not run",
                handle.drive.path().display()
            ),
        )
    })
}

/// The completion thread's side of a callback: the outcome as C sees it (its message, after
/// the name of the call that appended, as the thread's last error), then the call.
/// `user_data` travels as an address: the library never looks behind it.
fn completion(
    drive: Arc<Drive>,
    function: unsafe extern "C" fn(*mut c_void, c_int, u64),
    user_data: usize,
    name: &'static str,
) -> Callback {
    Box::new(move |outcome: AppendOutcome| {
        last_error::clear();
        let (status, lsn) = match outcome_status(&drive, outcome) {
            Ok(lsn) => (sealog_status::SEALOG_OK as c_int, lsn),
            Err(failure) => (leave(name, failure), 0),
        };
        // SAFETY: the contract of `sealog_append_cb` (and of the other `_cb` calls): the
        // function may be called once, from this thread, with the caller's `user_data`, until
        // the drive is closed (it is not yet: close joins this thread after the call).
        unsafe { function(user_data as *mut c_void, status, lsn) };
    })
}

/// A ticket handle for C, owning the engine's ticket.
fn ticket_handle(drive: &Arc<Drive>, ticket: Ticket) -> *mut sealog_ticket {
    let drive = Arc::clone(drive);
    Box::into_raw(Box::new(sealog_ticket { ticket, drive }))
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
        *out = ticket_handle(drive, queue(drive, payload)?);
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
/// `ticket` is NULL or a ticket from a `sealog_append*_async` call not yet freed; `lsn_out` is NULL
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
/// `ticket` is NULL or a ticket from a `sealog_append*_async` call not yet freed; `lsn_out` is NULL
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
/// `ticket` is NULL or a ticket from a `sealog_append*_async` call not yet freed, not used after.
#[no_mangle]
pub unsafe extern "C" fn sealog_ticket_free(ticket: *mut sealog_ticket) -> c_int {
    guard("sealog_ticket_free", || {
        if !ticket.is_null() {
            // SAFETY: a boxed ticket from `ticket_handle`, freed once (the contract).
            drop(unsafe { Box::from_raw(ticket) });
        }
        Ok(())
    })
}

/// Fills a `sealog_new_entry` with a data entry: `struct_size_bytes` set, `kind`
/// `SEALOG_KIND_DATA`, header zeros, empty payload. Set the fields you need after it.
///
/// Thread safety: any thread.
///
/// # Safety
/// `entry` is NULL or points to a writable `sealog_new_entry`.
#[no_mangle]
pub unsafe extern "C" fn sealog_new_entry_init(entry: *mut sealog_new_entry) -> c_int {
    guard("sealog_new_entry_init", || {
        // SAFETY: the caller's contract.
        *unsafe { out_arg(entry, "entry") }? = entries::new_entry_default();
        Ok(())
    })
}

/// `sealog_append` for an entry with a kind and an embedder header, described by `*entry`
/// (filled by `sealog_new_entry_init`): blocks until it is durable; `*lsn_out` (when not
/// NULL) is its LSN. The header comes back from `sealog_read`, `sealog_iter_next` and the
/// recovery visitor of `sealog_open_visiting`. `SEALOG_INVALID_ARGUMENT` for a kind that is
/// no `SEALOG_KIND_*` value (padding, 2, is the engine's own); otherwise as `sealog_append`.
/// The payload is copied before the drive sees it.
///
/// Thread safety: as `sealog_append`.
///
/// # Safety
/// `drive` is NULL or an open handle; `entry` is NULL or points to a `sealog_new_entry`
/// filled by `sealog_new_entry_init` whose `payload` points to `payload_len_bytes` readable
/// bytes (or is NULL when that is 0); `lsn_out` is NULL or points to a writable `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn sealog_append_entry(
    drive: *const sealog_drive,
    entry: *const sealog_new_entry,
    lsn_out: *mut u64,
) -> c_int {
    guard("sealog_append_entry", || {
        // SAFETY: the caller's contract.
        let drive = &unsafe { drive_arg(drive) }?.drive;
        // SAFETY: the caller's contract.
        let entry = unsafe { new_entry_arg(entry, "entry", None) }?;
        let lsn = outcome_status(drive, submit(drive, Appending::One(entry))?.wait())?;
        // SAFETY: the caller's contract.
        unsafe { write_optional(lsn_out, lsn) };
        Ok(())
    })
}

/// `sealog_append_cb` for an entry with a kind and an embedder header (`*entry`, as
/// `sealog_append_entry` takes it): returns once it is queued; `callback(user_data, status,
/// lsn)` runs once on the drive's completion thread when it is durable or failed, exactly
/// when this returned `SEALOG_OK`. Everything `sealog_append_cb` says of callbacks holds.
///
/// Thread safety: as `sealog_append_cb`.
///
/// # Safety
/// As `sealog_append_entry` for `drive` and `entry`; `callback` as for `sealog_append_cb`.
#[no_mangle]
pub unsafe extern "C" fn sealog_append_entry_cb(
    drive: *const sealog_drive,
    entry: *const sealog_new_entry,
    callback: sealog_append_callback,
    user_data: *mut c_void,
) -> c_int {
    guard("sealog_append_entry_cb", || {
        // SAFETY: the caller's contract.
        let handle = unsafe { drive_arg(drive) }?;
        // SAFETY: the caller's contract.
        let entry = unsafe { new_entry_arg(entry, "entry", None) }?;
        let function = callback.ok_or_else(|| null("callback"))?;
        let ticket = submit(&handle.drive, Appending::One(entry))?;
        push_callback(
            handle,
            ticket,
            function,
            user_data,
            "sealog_append_entry_cb",
        )
    })
}

/// `sealog_append_async` for an entry with a kind and an embedder header (`*entry`, as
/// `sealog_append_entry` takes it): `*ticket_out` yields its LSN once durable; free it with
/// `sealog_ticket_free`.
///
/// Thread safety: as `sealog_append_async`.
///
/// # Safety
/// As `sealog_append_entry` for `drive` and `entry`; `ticket_out` is NULL or points to a
/// writable `sealog_ticket *`.
#[no_mangle]
pub unsafe extern "C" fn sealog_append_entry_async(
    drive: *const sealog_drive,
    entry: *const sealog_new_entry,
    ticket_out: *mut *mut sealog_ticket,
) -> c_int {
    guard("sealog_append_entry_async", || {
        // SAFETY: the caller's contract.
        let drive = &unsafe { drive_arg(drive) }?.drive;
        // SAFETY: the caller's contract.
        let entry = unsafe { new_entry_arg(entry, "entry", None) }?;
        // SAFETY: the caller's contract.
        let out = unsafe { out_arg(ticket_out, "ticket_out") }?;
        *out = ticket_handle(drive, submit(drive, Appending::One(entry))?);
        Ok(())
    })
}

/// Appends `count` entries all or nothing, and blocks until they are durable: they share one
/// batch (recovery returns all of them or none), take consecutive LSNs, and no other append
/// comes between them; `*first_lsn_out` (when not NULL) is the first one's LSN, the others
/// follow in array order. `entries` is an array of `sealog_new_entry`, each filled by
/// `sealog_new_entry_init` (the array's stride is their `struct_size_bytes`). Checked before
/// anything is queued, nothing appended on failure: `SEALOG_EMPTY_GROUP` (count 0),
/// `SEALOG_GROUP_TOO_LARGE` (the entries, each with its 96-byte entry header, are over the
/// ring's batch limit together), `SEALOG_TOO_LARGE` (one payload over the payload limit),
/// `SEALOG_INVALID_ARGUMENT` (a NULL, a bad kind or size, naming `entries[i]`); after that,
/// as `sealog_append`. Payloads are copied before the call returns.
///
/// Thread safety: as `sealog_append`.
///
/// # Safety
/// `drive` is NULL or an open handle; `entries` is NULL or points to `count` readable
/// `sealog_new_entry` (as `sealog_append_entry` takes them), each `entries[0]
/// .struct_size_bytes` long; `first_lsn_out` is NULL or points to a writable `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn sealog_append_group(
    drive: *const sealog_drive,
    entries: *const sealog_new_entry,
    count: usize,
    first_lsn_out: *mut u64,
) -> c_int {
    guard("sealog_append_group", || {
        // SAFETY: the caller's contract.
        let drive = &unsafe { drive_arg(drive) }?.drive;
        // SAFETY: the caller's contract.
        let group = unsafe { group_arg(entries, count) }?;
        let lsn = outcome_status(drive, submit(drive, Appending::Group(group))?.wait())?;
        // SAFETY: the caller's contract.
        unsafe { write_optional(first_lsn_out, lsn) };
        Ok(())
    })
}

/// `sealog_append_group` without waiting: returns once the group is queued (its checks
/// passed); `callback(user_data, status, first_lsn)` runs once, on the drive's completion
/// thread, when the whole group is durable or failed, exactly when this returned
/// `SEALOG_OK`. Everything `sealog_append_cb` says of callbacks holds.
///
/// Thread safety: as `sealog_append_cb`.
///
/// # Safety
/// As `sealog_append_group` for `drive`, `entries` and `count`; `callback` as for
/// `sealog_append_cb`.
#[no_mangle]
pub unsafe extern "C" fn sealog_append_group_cb(
    drive: *const sealog_drive,
    entries: *const sealog_new_entry,
    count: usize,
    callback: sealog_append_callback,
    user_data: *mut c_void,
) -> c_int {
    guard("sealog_append_group_cb", || {
        // SAFETY: the caller's contract.
        let handle = unsafe { drive_arg(drive) }?;
        // SAFETY: the caller's contract.
        let group = unsafe { group_arg(entries, count) }?;
        let function = callback.ok_or_else(|| null("callback"))?;
        let ticket = submit(&handle.drive, Appending::Group(group))?;
        push_callback(
            handle,
            ticket,
            function,
            user_data,
            "sealog_append_group_cb",
        )
    })
}

/// `sealog_append_group` without waiting: `*ticket_out` yields the group's first LSN once
/// every entry of it is durable; free it with `sealog_ticket_free`.
///
/// Thread safety: as `sealog_append_async`.
///
/// # Safety
/// As `sealog_append_group` for `drive`, `entries` and `count`; `ticket_out` is NULL or
/// points to a writable `sealog_ticket *`.
#[no_mangle]
pub unsafe extern "C" fn sealog_append_group_async(
    drive: *const sealog_drive,
    entries: *const sealog_new_entry,
    count: usize,
    ticket_out: *mut *mut sealog_ticket,
) -> c_int {
    guard("sealog_append_group_async", || {
        // SAFETY: the caller's contract.
        let drive = &unsafe { drive_arg(drive) }?.drive;
        // SAFETY: the caller's contract.
        let group = unsafe { group_arg(entries, count) }?;
        // SAFETY: the caller's contract.
        let out = unsafe { out_arg(ticket_out, "ticket_out") }?;
        *out = ticket_handle(drive, submit(drive, Appending::Group(group))?);
        Ok(())
    })
}
