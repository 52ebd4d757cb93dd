//! Tests of entries with a kind and an embedder header, groups and the recovery visitor,
//! from Rust: what is appended every way comes back from reads and iterators with its kind
//! and header; NULL pointers, kinds that are no kind, empty, oversized and ragged groups are
//! refused with their own codes and nothing appended; a caller's first-version `sealog_entry`
//! is never written past; a damaged payload still hands out its header; and the visitor sees
//! every live entry, in LSN order, on another thread, before the open returns.

use std::ffi::c_void;
use std::ptr::{null, null_mut};
use std::sync::Mutex;

use super::append::*;
use super::read::*;
use super::recovery::*;
use super::tests::{c_path, close, empty_entry, open_ring, outcome, INVALID, OK};
use super::*;

fn header(log_id: u64, address: u64) -> sealog_embedder_header {
    sealog_embedder_header {
        log_id,
        address,
        epoch: 3,
        extra: log_id ^ address,
    }
}

/// A new entry of `kind` and `header` over `payload`.
fn new_entry(kind: u32, header: sealog_embedder_header, payload: &[u8]) -> sealog_new_entry {
    let mut entry = crate::entries::new_entry_default();
    entry.kind = kind;
    entry.header = header;
    entry.payload = payload.as_ptr();
    entry.payload_len_bytes = payload.len();
    entry
}

/// Reads `lsn` and returns its kind, header and payload (freeing the library's buffer).
fn read(drive: *const sealog_drive, lsn: u64) -> (u32, sealog_embedder_header, Vec<u8>) {
    let mut entry = empty_entry(0);
    // SAFETY: a live handle and a local entry of this library's size.
    unsafe {
        assert_eq!(
            sealog_entry_init_sized(&mut entry, size_of::<sealog_entry>()),
            OK
        );
        let status = sealog_read(drive, lsn, &mut entry);
        assert_eq!(status, OK, "{}", last_error::message());
        assert_eq!((entry.lsn, entry.header_valid), (lsn, 1));
        let payload = match entry.payload.is_null() {
            true => Vec::new(),
            false => std::slice::from_raw_parts(entry.payload, entry.payload_len_bytes).to_vec(),
        };
        assert_eq!(
            sealog_buffer_free(entry.payload, entry.payload_len_bytes),
            OK
        );
        (entry.kind, entry.header, payload)
    }
}

unsafe extern "C" fn group_done(user_data: *mut c_void, status: c_int, lsn: u64) {
    // SAFETY: the test's `Mutex`, alive until close returned.
    let seen = unsafe { &*user_data.cast::<Mutex<Vec<(c_int, u64)>>>() };
    seen.lock().expect("unpoisoned").push((status, lsn));
}

#[test]
fn entries_and_groups_come_back_with_their_kind_and_header() {
    let (_directory, _path, drive) = open_ring();
    let seen = Mutex::new(Vec::new());
    let user_data = (&seen as *const Mutex<Vec<(c_int, u64)>>)
        .cast_mut()
        .cast::<c_void>();
    let group = [
        new_entry(SEALOG_KIND_DATA, header(7, 0), b"debit"),
        new_entry(SEALOG_KIND_DATA, header(7, 1), b"credit"),
        new_entry(SEALOG_KIND_FENCE, header(7, 2), b""),
    ];
    let (mut lsn, mut first, mut ticket) = (0, 0, null_mut());
    // SAFETY: a live handle, entries over live payloads, local out-pointers; `seen` outlives
    // the close below.
    unsafe {
        let seal = new_entry(SEALOG_KIND_SEAL, header(9, 4), b"sealed");
        assert_eq!(sealog_append_entry(drive, &seal, &mut lsn), OK);
        assert_eq!(lsn, 1);
        assert_eq!(
            sealog_append_group(drive, group.as_ptr(), 3, &mut first),
            OK
        );
        assert_eq!(first, 2, "the group takes LSNs 2 to 4");
        let one = new_entry(SEALOG_KIND_TRIM, header(9, 5), b"async");
        assert_eq!(sealog_append_entry_async(drive, &one, &mut ticket), OK);
        assert_eq!(
            sealog_ticket_wait(ticket, SEALOG_TIMEOUT_NONE_US, &mut lsn),
            OK
        );
        assert_eq!((lsn, sealog_ticket_free(ticket)), (5, OK));
        let status = sealog_append_group_async(drive, group.as_ptr(), 2, &mut ticket);
        assert_eq!(status, OK);
        assert_eq!(
            sealog_ticket_wait(ticket, SEALOG_TIMEOUT_NONE_US, &mut lsn),
            OK
        );
        assert_eq!((lsn, sealog_ticket_free(ticket)), (6, OK));
        let cb = Some(group_done as unsafe extern "C" fn(*mut c_void, c_int, u64));
        assert_eq!(sealog_append_entry_cb(drive, &one, cb, user_data), OK);
        assert_eq!(
            sealog_append_group_cb(drive, group.as_ptr(), 3, cb, user_data),
            OK
        );
        assert_eq!(sealog_wait_durable(drive, 11, 10_000_000, null_mut()), OK);
    }
    assert_eq!(
        read(drive, 1),
        (SEALOG_KIND_SEAL, header(9, 4), b"sealed".to_vec())
    );
    assert_eq!(
        read(drive, 3),
        (SEALOG_KIND_DATA, header(7, 1), b"credit".to_vec())
    );
    assert_eq!(
        read(drive, 4),
        (SEALOG_KIND_FENCE, header(7, 2), Vec::new())
    );
    assert_eq!(
        read(drive, 5),
        (SEALOG_KIND_TRIM, header(9, 5), b"async".to_vec())
    );
    assert_eq!(read(drive, 11).1, header(7, 2));
    close(drive);
    assert_eq!(
        seen.into_inner().expect("unpoisoned"),
        [(OK, 8u64), (OK, 9)]
    );
}

#[test]
fn null_pointers_bad_kinds_and_bad_groups_are_refused_and_append_nothing() {
    /// An array element longer than `sealog_new_entry`, so a wrong stride stays in bounds.
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Wide {
        entry: sealog_new_entry,
        padding: u64,
    }
    let (_directory, path, drive) = open_ring();
    let mut lsn = 0;
    let good = new_entry(SEALOG_KIND_DATA, header(1, 1), b"good");
    let mut bad_kind = good;
    bad_kind.kind = 9;
    let mut padding = good;
    padding.kind = 2;
    let mut no_payload = good;
    no_payload.payload = null();
    let mut ragged = [Wide {
        entry: good,
        padding: 0,
    }; 2];
    ragged[0].entry.struct_size_bytes += 8;
    let ragged = ragged.as_ptr().cast::<sealog_new_entry>();
    let mut group_bad_kind = [good, good, good];
    group_bad_kind[1].kind = 0;
    let visitor: sealog_recovery_visitor = Some(ignore_entry);
    let empty_group = sealog_status::SEALOG_EMPTY_GROUP as c_int;
    let group_too_large = sealog_status::SEALOG_GROUP_TOO_LARGE as c_int;
    // SAFETY: every pointer is NULL, a live handle or a local; the calls must refuse them.
    let cases = unsafe {
        [
            (
                outcome(sealog_new_entry_init(null_mut())),
                INVALID,
                "entry is NULL",
            ),
            (
                outcome(sealog_append_entry(null(), &good, &mut lsn)),
                INVALID,
                "drive is NULL",
            ),
            (
                outcome(sealog_append_entry(drive, null(), &mut lsn)),
                INVALID,
                "entry is NULL",
            ),
            (
                outcome(sealog_append_entry(drive, &no_payload, &mut lsn)),
                INVALID,
                "entry: payload is NULL",
            ),
            (
                outcome(sealog_append_entry(drive, &bad_kind, &mut lsn)),
                INVALID,
                "sealog_append_entry: entry.kind is 9: it takes SEALOG_KIND_DATA, _TRIM, _SEAL",
            ),
            (
                outcome(sealog_append_entry(drive, &padding, &mut lsn)),
                INVALID,
                "padding",
            ),
            (
                outcome(sealog_append_entry_cb(drive, &good, None, null_mut())),
                INVALID,
                "callback is NULL",
            ),
            (
                outcome(sealog_append_entry_async(drive, &good, null_mut())),
                INVALID,
                "ticket_out is NULL",
            ),
            (
                outcome(sealog_append_group(drive, null(), 2, &mut lsn)),
                INVALID,
                "entries is NULL",
            ),
            (
                outcome(sealog_append_group(null(), &good, 1, &mut lsn)),
                INVALID,
                "drive is NULL",
            ),
            (
                outcome(sealog_append_group(drive, ragged, 2, &mut lsn)),
                INVALID,
                "entries[1].struct_size_bytes is 56: every element of the array has the size",
            ),
            (
                outcome(sealog_append_group(
                    drive,
                    group_bad_kind.as_ptr(),
                    3,
                    &mut lsn,
                )),
                INVALID,
                "entries[1].kind is 0",
            ),
            (
                outcome(sealog_append_group_cb(drive, &good, 1, None, null_mut())),
                INVALID,
                "callback is NULL",
            ),
            (
                outcome(sealog_append_group_async(drive, &good, 1, null_mut())),
                INVALID,
                "ticket_out is NULL",
            ),
            (
                outcome(sealog_append_group(drive, null(), 0, &mut lsn)),
                empty_group,
                "sealog_append_group: ",
            ),
            (
                outcome(sealog_append_group_async(drive, &good, 0, &mut null_mut())),
                empty_group,
                "a group of appends holds no entry",
            ),
            (
                outcome(oversized_group(drive)),
                group_too_large,
                "a group of 3 entries takes",
            ),
            (
                outcome(sealog_open_visiting(
                    path.as_ptr(),
                    null(),
                    None,
                    null_mut(),
                    &mut null_mut(),
                )),
                INVALID,
                "visitor is NULL",
            ),
            (
                outcome(sealog_open_visiting(
                    path.as_ptr(),
                    null(),
                    visitor,
                    null_mut(),
                    null_mut(),
                )),
                INVALID,
                "drive_out is NULL",
            ),
            (
                outcome(sealog_entry_init_sized(&mut empty_entry(0), 8)),
                INVALID,
                "struct_size_bytes is 8",
            ),
        ]
    };
    for ((status, message), expected_status, expected) in cases {
        assert_eq!(status, expected_status, "{message}");
        assert!(
            message.contains(expected),
            "{message:?} should say {expected:?}"
        );
    }
    let mut durable = 0;
    // SAFETY: a live handle and a local.
    assert_eq!(unsafe { sealog_durable_lsn(drive, &mut durable) }, OK);
    assert_eq!(durable, 0, "nothing was appended");
    close(drive);
}

unsafe extern "C" fn ignore_entry(_: *mut c_void, _: *const sealog_entry_view) {}

/// A group of three entries at the payload limit: each fits, together they pass the batch
/// limit (the ring's default, 1 MiB).
///
/// # Safety
/// `drive` is an open handle.
unsafe fn oversized_group(drive: *const sealog_drive) -> c_int {
    let mut shape = sealog_shape {
        struct_size_bytes: size_of::<sealog_shape>() as u32,
        state: 0,
        first_live_lsn: 0,
        trim_lsn: 0,
        durable_lsn: 0,
        next_lsn: 0,
        live_entries: 0,
        capacity_bytes: 0,
        occupied_bytes: 0,
        payload_size_max_bytes: 0,
        block_size_bytes: 0,
    };
    // SAFETY: an open handle (the caller's contract) and a local shape.
    assert_eq!(unsafe { sealog_drive_shape(drive, &mut shape) }, OK);
    let payload = vec![7u8; shape.payload_size_max_bytes as usize];
    let entry = new_entry(SEALOG_KIND_DATA, header(1, 1), &payload);
    // SAFETY: as above; three entries over a live payload.
    unsafe { sealog_append_group(drive, [entry, entry, entry].as_ptr(), 3, null_mut()) }
}

#[test]
fn a_first_version_entry_is_filled_up_to_its_size_and_no_further() {
    /// `sealog_entry` as the first version of the header had it, and what lies after it.
    #[repr(C)]
    struct FirstVersion {
        struct_size_bytes: u32,
        reserved_zero: u32,
        lsn: u64,
        payload: *const u8,
        payload_len_bytes: usize,
        after: [u64; 6],
    }
    let (_directory, _path, drive) = open_ring();
    let mut old = FirstVersion {
        struct_size_bytes: 0,
        reserved_zero: 0,
        lsn: 0,
        payload: null(),
        payload_len_bytes: 0,
        after: [u64::MAX; 6],
    };
    let pointer = (&mut old as *mut FirstVersion).cast::<sealog_entry>();
    let entry = new_entry(SEALOG_KIND_DATA, header(5, 5), b"old");
    // SAFETY: a live handle; `old` spans a whole `sealog_entry`, of which it claims the first
    // version's bytes only.
    unsafe {
        assert_eq!(sealog_append_entry(drive, &entry, null_mut()), OK);
        assert_eq!(sealog_entry_init(pointer), OK);
        let first_version = std::mem::offset_of!(sealog_entry, header);
        assert_eq!(old.struct_size_bytes as usize, first_version);
        assert_eq!(sealog_read(drive, 1, pointer), OK);
        assert_eq!((old.lsn, old.payload_len_bytes), (1, 3));
        assert_eq!(
            old.reserved_zero, SEALOG_KIND_DATA,
            "the kind took its place"
        );
        assert_eq!(old.after, [u64::MAX; 6], "nothing written past its size");
        assert_eq!(sealog_buffer_free(old.payload, old.payload_len_bytes), OK);
    }
    close(drive);
}

#[test]
fn a_damaged_payload_still_hands_out_its_header() {
    let directory = tempfile::tempdir().expect("tempdir");
    let path = c_path(&directory.path().join("ring"));
    let mut format = format_options_default(16 << 20);
    format.sync_method = SEALOG_SYNC_FDATASYNC;
    let mut options = drive_options_default();
    options.read_cache_bytes = 0;
    let mut drive = null_mut();
    let payload = b"a payload that is easy to find in the segment file".to_vec();
    let entry = new_entry(SEALOG_KIND_DATA, header(42, 17), &payload);
    // SAFETY: a NUL-terminated path, initialised option structs, local out-pointers.
    unsafe {
        assert_eq!(sealog_format(path.as_ptr(), &format), OK);
        assert_eq!(sealog_open(path.as_ptr(), &options, &mut drive), OK);
        assert_eq!(sealog_append_entry(drive, &entry, null_mut()), OK);
    }
    let segment_path = directory.path().join("ring/segment-00000");
    let bytes = std::fs::read(&segment_path).expect("the segment");
    let at = bytes
        .windows(payload.len())
        .position(|window| window == payload)
        .expect("the payload is in the segment");
    let flip = |offset: usize| {
        use std::os::unix::fs::FileExt;
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(&segment_path)
            .expect("opens");
        file.write_all_at(&[bytes[offset] ^ 0x10], offset as u64)
            .expect("flips");
        file.sync_all().expect("syncs");
    };
    let damaged = sealog_status::SEALOG_DAMAGED as c_int;
    let mut read = empty_entry(size_of::<sealog_entry>());
    flip(at + 1);
    // SAFETY: a live handle, a local entry of this library's size.
    let (status, message) = outcome(unsafe { sealog_read(drive, 1, &mut read) });
    assert_eq!(status, damaged, "{message}");
    assert_eq!(
        (read.lsn, read.header_valid, read.header),
        (1, 1, header(42, 17))
    );
    assert_eq!((read.payload, read.payload_len_bytes), (null(), 0));
    flip(at - 20);
    // SAFETY: as above.
    let (status, message) = outcome(unsafe { sealog_read(drive, 1, &mut read) });
    assert_eq!(status, damaged, "{message}");
    assert_eq!((read.lsn, read.header_valid), (1, 0));
    assert_eq!(read.header, sealog_embedder_header::default());
    close(drive);
}

/// What the visitor saw: each entry (LSN, kind, header, payload), and the threads it ran on.
#[derive(Default)]
struct Visited {
    entries: Vec<(u64, u32, sealog_embedder_header, Vec<u8>)>,
    threads: Vec<std::thread::ThreadId>,
    view_sizes: Vec<u32>,
}

unsafe extern "C" fn visit(user_data: *mut c_void, entry: *const sealog_entry_view) {
    // SAFETY: the test's `Visited`, only touched here while the open blocks its thread.
    let visited = unsafe { &mut *user_data.cast::<Visited>() };
    // SAFETY: a view valid for this call.
    let entry = unsafe { &*entry };
    visited.view_sizes.push(entry.struct_size_bytes);
    let payload = match entry.payload.is_null() {
        true => Vec::new(),
        false => {
            // SAFETY: the payload lent for this call.
            let payload =
                unsafe { std::slice::from_raw_parts(entry.payload, entry.payload_len_bytes) };
            payload.to_vec()
        }
    };
    visited
        .entries
        .push((entry.lsn, entry.kind, entry.header, payload));
    visited.threads.push(std::thread::current().id());
}

#[test]
fn the_visitor_sees_every_live_entry_on_the_drive_thread_before_the_open_returns() {
    let (directory, path, drive) = open_ring();
    let group = [
        new_entry(SEALOG_KIND_DATA, header(1, 0), b"one"),
        new_entry(SEALOG_KIND_SEAL, header(2, 0), b""),
    ];
    // SAFETY: a live handle and entries over live payloads.
    unsafe {
        for address in 0..5 {
            let entry = new_entry(SEALOG_KIND_DATA, header(1, address), b"ledger one");
            assert_eq!(sealog_append_entry(drive, &entry, null_mut()), OK);
        }
        assert_eq!(
            sealog_append_group(drive, group.as_ptr(), 2, null_mut()),
            OK
        );
        assert_eq!(sealog_trim(drive, 2), OK);
    }
    close(drive);
    let mut visited = Visited::default();
    let user_data = (&mut visited as *mut Visited).cast::<c_void>();
    let mut drive = null_mut();
    // SAFETY: a NUL-terminated path; the visitor only touches `visited`, alive past the call.
    let status =
        unsafe { sealog_open_visiting(path.as_ptr(), null(), Some(visit), user_data, &mut drive) };
    assert_eq!(status, OK, "{}", last_error::message());
    let lsns: Vec<u64> = visited.entries.iter().map(|entry| entry.0).collect();
    assert_eq!(lsns, [3, 4, 5, 6, 7], "the live entries, in LSN order");
    assert_eq!(visited.entries[0].2, header(1, 2));
    assert_eq!(
        visited.entries[4],
        (7, SEALOG_KIND_SEAL, header(2, 0), Vec::new())
    );
    assert_eq!(visited.entries[3].3, b"one");
    assert!(visited
        .view_sizes
        .iter()
        .all(|size| *size as usize == size_of::<sealog_entry_view>()));
    assert!(visited
        .threads
        .iter()
        .all(|thread| *thread != std::thread::current().id()));
    close(drive);
    // No ring: the open fails and the visitor never runs.
    let mut visited = Visited::default();
    let user_data = (&mut visited as *mut Visited).cast::<c_void>();
    let empty = c_path(directory.path());
    let mut drive = null_mut();
    // SAFETY: as above.
    let status =
        unsafe { sealog_open_visiting(empty.as_ptr(), null(), Some(visit), user_data, &mut drive) };
    assert_eq!(status, sealog_status::SEALOG_NOT_A_RING as c_int);
    assert!(drive.is_null() && visited.entries.is_empty());
}
