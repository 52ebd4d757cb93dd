//! The boundary's own tests, from Rust: NULL pointers and bad paths are
//! `SEALOG_INVALID_ARGUMENT` with a message naming the argument, struct sizes are checked, a
//! panic becomes `SEALOG_PANIC` (through a hook only tests have), the last error is cleared
//! by a call that succeeds, every accepted callback runs exactly once by the time close
//! returns (also when a callback appends), and an iterator outliving its drive's close is
//! safe.

use std::ffi::{c_void, CString};
use std::ptr::{null, null_mut};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use super::append::*;
use super::read::*;
use super::*;

pub(super) const OK: c_int = sealog_status::SEALOG_OK as c_int;
pub(super) const INVALID: c_int = sealog_status::SEALOG_INVALID_ARGUMENT as c_int;

/// A status and the message it left.
pub(super) fn outcome(status: c_int) -> (c_int, String) {
    (status, last_error::message())
}

pub(super) fn c_path(path: &std::path::Path) -> CString {
    CString::new(path.to_str().expect("UTF-8 temp path")).expect("no NUL")
}

/// A fresh ring in a temporary directory, open: the directory, the path and the handle.
pub(super) fn open_ring() -> (tempfile::TempDir, CString, *mut sealog_drive) {
    let directory = tempfile::tempdir().expect("tempdir");
    let path = c_path(&directory.path().join("ring"));
    let mut format = format_options_default(16 << 20);
    format.sync_method = SEALOG_SYNC_FDATASYNC;
    let mut drive = null_mut();
    // SAFETY: a NUL-terminated path, an initialised options struct, a writable out-pointer.
    let opened = unsafe {
        assert_eq!(
            sealog_format(path.as_ptr(), &format),
            OK,
            "{}",
            last_error::message()
        );
        sealog_open(path.as_ptr(), null(), &mut drive)
    };
    assert_eq!(opened, OK, "{}", last_error::message());
    (directory, path, drive)
}

/// An entry struct claiming `struct_size_bytes`, otherwise zeros.
pub(super) fn empty_entry(struct_size_bytes: usize) -> sealog_entry {
    sealog_entry {
        struct_size_bytes: struct_size_bytes as u32,
        kind: 0,
        lsn: 0,
        payload: null(),
        payload_len_bytes: 0,
        header: sealog_embedder_header::default(),
        header_valid: 0,
        reserved_zero: 0,
    }
}

pub(super) fn close(drive: *mut sealog_drive) {
    // SAFETY: a handle from `open_ring`, closed once, with no other call on it running.
    let status = unsafe { sealog_close(drive) };
    assert_eq!(status, OK, "{}", last_error::message());
}

#[test]
fn null_pointers_are_invalid_arguments_naming_the_argument() {
    let (_directory, path, drive) = open_ring();
    let mut lsn = 0u64;
    let mut entry = empty_entry(size_of::<sealog_entry>());
    // SAFETY: every pointer is NULL, a live handle or a local; the calls must refuse the NULLs.
    let cases = unsafe {
        [
            (
                outcome(sealog_open(null(), null(), &mut null_mut())),
                "path is NULL",
            ),
            (
                outcome(sealog_open(path.as_ptr(), null(), null_mut())),
                "drive_out is NULL",
            ),
            (
                outcome(sealog_format(path.as_ptr(), null())),
                "options is NULL",
            ),
            (
                outcome(sealog_drive_options_init(null_mut())),
                "options is NULL",
            ),
            (
                outcome(sealog_append(null(), null(), 0, &mut lsn)),
                "drive is NULL",
            ),
            (
                outcome(sealog_append(drive, null(), 3, &mut lsn)),
                "payload is NULL",
            ),
            (
                outcome(sealog_append_cb(drive, null(), 0, None, null_mut())),
                "callback is NULL",
            ),
            (
                outcome(sealog_append_async(drive, null(), 0, null_mut())),
                "ticket_out is NULL",
            ),
            (
                outcome(sealog_ticket_poll(null(), &mut lsn)),
                "ticket is NULL",
            ),
            (
                outcome(sealog_ticket_wait(null(), 0, &mut lsn)),
                "ticket is NULL",
            ),
            (
                outcome(sealog_read(drive, 1, null_mut())),
                "entry_out is NULL",
            ),
            (outcome(sealog_read(null(), 1, &mut entry)), "drive is NULL"),
            (
                outcome(sealog_iter_from(drive, 1, null_mut())),
                "iter_out is NULL",
            ),
            (
                outcome(sealog_iter_next(null_mut(), &mut entry)),
                "iter is NULL",
            ),
            (outcome(sealog_trim(null(), 1)), "drive is NULL"),
            (
                outcome(sealog_durable_lsn(drive, null_mut())),
                "lsn_out is NULL",
            ),
            (
                outcome(sealog_first_live_lsn(null(), &mut lsn)),
                "drive is NULL",
            ),
            (
                outcome(sealog_drive_shape(drive, null_mut())),
                "shape_out is NULL",
            ),
            (
                outcome(sealog_wait_durable(null(), 1, 0, null_mut())),
                "drive is NULL",
            ),
        ]
    };
    for ((status, message), expected) in cases {
        assert_eq!(status, INVALID, "{message}");
        assert!(
            message.contains(expected),
            "{message:?} should say {expected:?}"
        );
    }
    // Freeing NULL is nothing, as free(NULL) is.
    // SAFETY: NULL handles.
    unsafe {
        assert_eq!(sealog_ticket_free(null_mut()), OK);
        assert_eq!(sealog_iter_free(null_mut()), OK);
        assert_eq!(sealog_buffer_free(null(), 0), OK);
        assert_eq!(sealog_close(null_mut()), OK);
    }
    close(drive);
}

#[test]
fn paths_that_are_not_utf8_or_empty_are_refused() {
    let mut drive = null_mut();
    let latin1 = CString::new(b"/tmp/ring-\xe9t\xe9".to_vec()).expect("no NUL");
    // SAFETY: NUL-terminated paths and a writable out-pointer.
    let (status, message) = outcome(unsafe { sealog_open(latin1.as_ptr(), null(), &mut drive) });
    assert_eq!(status, INVALID);
    assert!(message.starts_with("sealog_open: path ") && message.contains("is not UTF-8"));
    assert!(drive.is_null());
    // SAFETY: as above.
    let (status, message) = outcome(unsafe { sealog_open(c"".as_ptr(), null(), &mut drive) });
    assert_eq!(
        (status, message.as_str()),
        (INVALID, "sealog_open: path is empty")
    );
}

#[test]
fn struct_sizes_are_checked_and_unknown_fields_must_be_zero() {
    let directory = tempfile::tempdir().expect("tempdir");
    let path = c_path(&directory.path().join("ring"));
    let mut format = format_options_default(16 << 20);
    format.struct_size_bytes = 0;
    // SAFETY: a NUL-terminated path and a readable options struct.
    let (status, message) = outcome(unsafe { sealog_format(path.as_ptr(), &format) });
    assert_eq!(status, INVALID);
    assert!(
        message.contains("options->struct_size_bytes is 0"),
        "{message}"
    );

    // A caller built against a newer header: a longer struct, its new fields zero or not.
    #[repr(C)]
    struct Newer {
        known: sealog_drive_options,
        unknown: u64,
    }
    let mut newer = Newer {
        known: drive_options_default(),
        unknown: 1,
    };
    newer.known.struct_size_bytes = size_of::<Newer>() as u32;
    let mut drive = null_mut();
    let pointer = (&newer as *const Newer).cast::<sealog_drive_options>();
    // SAFETY: the struct spans `struct_size_bytes` readable bytes.
    let (status, message) = outcome(unsafe { sealog_open(path.as_ptr(), pointer, &mut drive) });
    assert_eq!(status, INVALID);
    assert!(message.contains("sets fields past the"), "{message}");
    newer.unknown = 0;
    let pointer = (&newer as *const Newer).cast::<sealog_drive_options>();
    let empty = c_path(directory.path());
    // SAFETY: as above. No ring there: the options passed, the open itself fails.
    let (status, message) = outcome(unsafe { sealog_open(empty.as_ptr(), pointer, &mut drive) });
    assert_eq!(
        status,
        sealog_status::SEALOG_NOT_A_RING as c_int,
        "{message}"
    );
}

#[test]
fn a_panic_becomes_an_error_and_the_next_call_succeeds() {
    let mut options = drive_options_default();
    super::args::panic_in_next_call();
    // SAFETY: a writable options struct.
    let (status, message) = outcome(unsafe { sealog_drive_options_init(&mut options) });
    assert_eq!(status, sealog_status::SEALOG_PANIC as c_int);
    assert_eq!(
        message,
        "sealog_drive_options_init: sealog panicked (a bug in sealog): a test asked for a panic"
    );
    // SAFETY: as above.
    let status = unsafe { sealog_drive_options_init(&mut options) };
    assert_eq!(outcome(status), (OK, String::new()));
}

#[test]
fn format_and_open_errors_are_typed() {
    let (directory, path, drive) = open_ring();
    let mut second = null_mut();
    // SAFETY: NUL-terminated paths, a writable out-pointer.
    let (status, message) = outcome(unsafe { sealog_open(path.as_ptr(), null(), &mut second) });
    assert_eq!(status, sealog_status::SEALOG_IN_USE as c_int, "{message}");
    close(drive);
    let format = format_options_default(16 << 20);
    // SAFETY: as above.
    let (status, message) = outcome(unsafe { sealog_format(path.as_ptr(), &format) });
    assert_eq!(
        status,
        sealog_status::SEALOG_NOT_EMPTY as c_int,
        "{message}"
    );
    let nothing = c_path(&directory.path().join("nothing"));
    // SAFETY: as above.
    let (status, message) = outcome(unsafe { sealog_open(nothing.as_ptr(), null(), &mut second) });
    assert_eq!(status, sealog_status::SEALOG_IO as c_int, "{message}");
    assert!(message.contains("No such file or directory"), "{message}");
    let empty = c_path(directory.path());
    // SAFETY: as above.
    let (status, message) = outcome(unsafe { sealog_open(empty.as_ptr(), null(), &mut second) });
    assert_eq!(
        status,
        sealog_status::SEALOG_NOT_A_RING as c_int,
        "{message}"
    );
}

/// What the callbacks of one test saw: (status, LSN) in the order they ran.
struct Seen {
    calls: Mutex<Vec<(c_int, u64)>>,
    drive: AtomicU64,
}

unsafe extern "C" fn record(user_data: *mut c_void, status: c_int, lsn: u64) {
    // SAFETY: the `Seen` the test passed, alive until close returned.
    let seen = unsafe { &*user_data.cast::<Seen>() };
    seen.calls.lock().expect("unpoisoned").push((status, lsn));
}

/// Records, and on the first call appends again from the callback (allowed: it runs on the
/// completion thread, not the drive's) and tries to close the drive (refused).
unsafe extern "C" fn record_and_append(user_data: *mut c_void, status: c_int, lsn: u64) {
    // SAFETY: as in `record`.
    unsafe { record(user_data, status, lsn) };
    // SAFETY: as in `record`.
    let seen = unsafe { &*user_data.cast::<Seen>() };
    if lsn == 1 {
        let drive = seen.drive.load(Ordering::SeqCst) as usize as *const sealog_drive;
        let mut appended = 0;
        // SAFETY: the drive is open until close, which waits for this callback.
        let status = unsafe { sealog_append(drive, b"again".as_ptr(), 5, &mut appended) };
        seen.calls
            .lock()
            .expect("unpoisoned")
            .push((status, appended));
        // SAFETY: as above; a close from a callback is refused before it touches the handle.
        let status = unsafe { sealog_close(drive.cast_mut()) };
        let mut calls = seen.calls.lock().expect("unpoisoned");
        calls.push((status, u64::MAX));
    }
}

#[test]
fn close_runs_every_accepted_callback_exactly_once() {
    let (_directory, _path, drive) = open_ring();
    let seen = Seen {
        calls: Mutex::new(Vec::new()),
        drive: AtomicU64::new(drive as usize as u64),
    };
    let user_data = (&seen as *const Seen).cast_mut().cast::<c_void>();
    let mut accepted = 0;
    for index in 0..200u32 {
        let callback: sealog_append_callback = match index {
            0 => Some(record_and_append),
            _ => Some(record),
        };
        let payload = index.to_le_bytes();
        // SAFETY: a live handle, a 4-byte payload, a callback that may run on any thread,
        // and `seen` outlives the close below.
        let status = unsafe { sealog_append_cb(drive, payload.as_ptr(), 4, callback, user_data) };
        assert_eq!(status, OK, "{}", last_error::message());
        accepted += 1;
    }
    // Let the first callback's own append through before closing (a callback that appends
    // while its drive closes gets SEALOG_CLOSED, as any late append does).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while seen.calls.lock().expect("unpoisoned").len() < 3 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    close(drive);
    let calls = seen.calls.into_inner().expect("unpoisoned");
    // One call per accepted append, plus the first callback's append and close.
    assert_eq!(calls.len(), accepted + 2);
    let (status, lsn) = calls[1];
    assert_eq!(status, OK, "the append from a callback");
    assert_eq!(calls[2], (INVALID, u64::MAX), "the close from a callback");
    let callbacks: Vec<_> = calls
        .iter()
        .enumerate()
        .filter(|(index, _)| *index == 0 || *index > 2)
        .collect();
    for (_, (status, lsn_seen)) in &callbacks {
        assert!(
            *status == OK || *status == sealog_status::SEALOG_CLOSED as c_int,
            "status {status} for LSN {lsn_seen}"
        );
    }
    let lsns: Vec<u64> = callbacks
        .iter()
        .map(|(_, (_, lsn))| *lsn)
        .filter(|l| *l != 0)
        .collect();
    assert!(
        lsns.windows(2).all(|pair| pair[0] < pair[1]),
        "in LSN order: {lsns:?}"
    );
    assert!(lsn > 1);
}

#[test]
fn an_iterator_that_outlives_its_drives_close_is_safe() {
    let (_directory, _path, drive) = open_ring();
    let mut iter = null_mut();
    let mut entry = empty_entry(size_of::<sealog_entry>());
    // SAFETY: a live handle, local out-pointers, a payload of 3 bytes.
    unsafe {
        assert_eq!(sealog_append(drive, b"one".as_ptr(), 3, null_mut()), OK);
        assert_eq!(sealog_iter_from(drive, 1, &mut iter), OK);
    }
    close(drive);
    // SAFETY: the iterator is alive (it keeps what it borrows), `entry` is initialised.
    let status = unsafe { sealog_iter_next(iter, &mut entry) };
    let allowed = [
        OK,
        sealog_status::SEALOG_END as c_int,
        sealog_status::SEALOG_CLOSED as c_int,
    ];
    assert!(
        allowed.contains(&status),
        "status {status}: {}",
        last_error::message()
    );
    // SAFETY: freed once.
    assert_eq!(unsafe { sealog_iter_free(iter) }, OK);
}

#[test]
fn reads_hand_out_buffers_and_report_what_they_miss() {
    let (_directory, _path, drive) = open_ring();
    let mut entry = empty_entry(0);
    let mut ticket = null_mut();
    let mut lsn = 0;
    // SAFETY: a live handle, local out-pointers, payloads of the lengths given.
    unsafe {
        assert_eq!(
            sealog_append_async(drive, b"hello".as_ptr(), 5, &mut ticket),
            OK
        );
        assert_eq!(
            sealog_ticket_wait(ticket, SEALOG_TIMEOUT_NONE_US, &mut lsn),
            OK
        );
        assert_eq!(
            sealog_ticket_poll(ticket, &mut lsn),
            OK,
            "the outcome is kept"
        );
        assert_eq!(sealog_ticket_free(ticket), OK);
        assert_eq!(
            sealog_append(drive, null(), 0, null_mut()),
            OK,
            "an empty payload"
        );
        assert_eq!(
            sealog_read(drive, 1, &mut entry),
            INVALID,
            "no struct size yet"
        );
        assert_eq!(sealog_entry_init(&mut entry), OK);
        assert_eq!(sealog_read(drive, lsn, &mut entry), OK);
        let payload = std::slice::from_raw_parts(entry.payload, entry.payload_len_bytes);
        assert_eq!((entry.lsn, payload), (1, &b"hello"[..]));
        assert_eq!(
            sealog_buffer_free(entry.payload, entry.payload_len_bytes),
            OK
        );
        assert_eq!(sealog_read(drive, 2, &mut entry), OK);
        assert_eq!((entry.payload, entry.payload_len_bytes), (null(), 0));
        let (status, message) = outcome(sealog_read(drive, 9, &mut entry));
        assert_eq!(status, sealog_status::SEALOG_NOT_YET_DURABLE as c_int);
        assert!(
            message.starts_with("sealog_read: ") && message.contains("LSN 9"),
            "{message}"
        );
        assert_eq!(sealog_wait_durable(drive, 2, 1000, &mut lsn), OK);
        let (status, _) = outcome(sealog_wait_durable(drive, 3, 1000, &mut lsn));
        assert_eq!(status, sealog_status::SEALOG_TIMED_OUT as c_int);
        assert_eq!(sealog_trim(drive, 1), OK);
        assert_eq!(
            outcome(sealog_trim(drive, 2)),
            (OK, String::new()),
            "cleared"
        );
    }
    close(drive);
}
