//! The LogDrive store's C ABI from Rust: writes three ways, reads, the weak tail, seal,
//! fence and trim with the fields of their errors (definite or not), every accepted
//! callback run exactly once by the time the store closes (more writes in flight than the
//! store admits at once), handles freed before and after the close, a restart that reads
//! everything back, and a damaged record refused strictly and reported in quarantine.

use std::ffi::{c_void, CString};
use std::ptr::null_mut;
use std::sync::atomic::{AtomicU64, Ordering};

use super::logdrive::*;
use super::logdrive_ops::*;
use super::read::sealog_buffer_free;
use super::store::*;
use super::tests::{c_path, outcome, OK};
use super::*;
use crate::logdrive_status::error_struct;

/// A 16 MiB ring formatted for a store, in a temporary directory.
fn store_ring() -> (tempfile::TempDir, CString) {
    let directory = tempfile::tempdir().expect("tempdir");
    let path = directory.path().join("ring");
    let options = ::sealog_logdrive::geometry::format_options(16 << 20, None, 4096)
        .expect("a LogDrive plan")
        .sync_method(sealog::SyncMethod::Fdatasync);
    sealog::format(&path, &options).expect("formats");
    (directory, c_path(&path))
}

fn open(path: &CString, recovery: u32) -> (c_int, *mut sealog_store, sealog_store_report) {
    let mut options = sealog_store_options {
        struct_size_bytes: 0,
        recovery: 0,
    };
    let mut report = sealog_store_report {
        struct_size_bytes: size_of::<sealog_store_report>() as u32,
        reserved_zero: 0,
        logdrives: 0,
        damaged_records: 0,
        damaged_addresses: 0,
        skipped_records: 0,
    };
    let mut store = null_mut();
    // SAFETY: writable structs and out-pointers, a NUL-terminated path.
    let status = unsafe {
        assert_eq!(sealog_store_options_init(&mut options), OK);
        options.recovery = recovery;
        sealog_store_open(path.as_ptr(), &options, &mut store, &mut report)
    };
    (status, store, report)
}

fn last_error_fields() -> sealog_logdrive_error {
    let mut error = error_struct(None);
    error.struct_size_bytes = size_of::<sealog_logdrive_error>() as u32;
    // SAFETY: a sized, writable struct.
    assert_eq!(unsafe { sealog_logdrive_last_error(&mut error) }, OK);
    error
}

/// The value read at `address`, or its outcome code.
fn read(logdrive: *const sealog_logdrive, address: u64) -> Result<Vec<u8>, u32> {
    let mut value = sealog_logdrive_value {
        struct_size_bytes: size_of::<sealog_logdrive_value>() as u32,
        outcome: 99,
        first: 0,
        payload: null_mut(),
        payload_len_bytes: 0,
    };
    // SAFETY: a live handle and a sized, writable struct; the payload is freed once.
    unsafe {
        assert_eq!(sealog_logdrive_read(logdrive, address, &mut value), OK);
        if value.outcome != SEALOG_LOGDRIVE_VALUE {
            return Err(value.outcome);
        }
        let bytes = match value.payload.is_null() {
            true => Vec::new(),
            false => std::slice::from_raw_parts(value.payload, value.payload_len_bytes).to_vec(),
        };
        assert_eq!(
            sealog_buffer_free(value.payload, value.payload_len_bytes),
            OK
        );
        Ok(bytes)
    }
}

fn value(address: u64) -> Vec<u8> {
    format!("entry {address} of ledger 7: {}", "v".repeat(30)).into_bytes()
}

/// Counts callbacks; `user_data` points to a pair of counters (ok, failed).
unsafe extern "C" fn count(user_data: *mut c_void, status: c_int, _address: u64) {
    // SAFETY: the test passes a pair of atomics that outlive the store.
    let counters = unsafe { &*(user_data as *const (AtomicU64, AtomicU64)) };
    let counter = if status == OK {
        &counters.0
    } else {
        &counters.1
    };
    counter.fetch_add(1, Ordering::SeqCst);
}

#[test]
fn writes_reads_controls_and_their_errors_cross_the_abi() {
    let (_directory, path) = store_ring();
    let (status, store, report) = open(&path, SEALOG_STORE_RECOVERY_STRICT);
    assert_eq!(status, OK, "{}", last_error::message());
    assert_eq!(report.logdrives, 0);
    let mut ledger = null_mut();
    // SAFETY: live handles, readable values, writable out-pointers, throughout.
    unsafe {
        assert_eq!(sealog_store_create(store, 7, 1 << 20, &mut ledger), OK);
        assert_eq!(
            outcome(sealog_store_create(store, 7, 10, &mut null_mut())).0,
            sealog_status::SEALOG_EXISTS as c_int
        );
        assert_eq!(last_error_fields().id, 7);
        let first = value(0);
        assert_eq!(
            sealog_logdrive_write(ledger, 0, 1, first.as_ptr(), first.len()),
            OK
        );
        // 300 writes in flight through callbacks, 100 through tickets.
        let counters = (AtomicU64::new(0), AtomicU64::new(0));
        let user_data = &counters as *const _ as *mut c_void;
        for address in 1..301u64 {
            let v = value(address);
            let queued = sealog_logdrive_write_cb(
                ledger,
                address,
                1,
                v.as_ptr(),
                v.len(),
                Some(count),
                user_data,
            );
            assert_eq!(queued, OK, "{}", last_error::message());
        }
        let mut tickets = Vec::new();
        for address in 301..401u64 {
            let (v, mut ticket) = (value(address), null_mut());
            assert_eq!(
                sealog_logdrive_write_async(ledger, address, 1, v.as_ptr(), v.len(), &mut ticket),
                OK
            );
            tickets.push(ticket);
        }
        for ticket in tickets {
            assert_eq!(
                sealog_logdrive_ticket_wait(ticket, SEALOG_TIMEOUT_NONE_US),
                OK
            );
            assert_eq!(
                sealog_logdrive_ticket_poll(ticket),
                OK,
                "the ticket keeps its outcome"
            );
            assert_eq!(sealog_logdrive_ticket_free(ticket), OK);
        }
        // A write reads back once its outcome is in: here, once its callback ran.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while counters.0.load(Ordering::SeqCst) < 300 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(counters.0.load(Ordering::SeqCst), 300);
        assert_eq!(read(ledger, 5), Ok(value(5)));
        assert_eq!(read(ledger, 401), Err(SEALOG_LOGDRIVE_UNWRITTEN));

        // A second writer fences the first out.
        let mut second = null_mut();
        assert_eq!(sealog_store_get(store, 7, &mut second), OK);
        assert_eq!(sealog_logdrive_fence(second, 2), OK);
        let late = value(401);
        let refused = sealog_logdrive_write(ledger, 401, 1, late.as_ptr(), late.len());
        assert_eq!(refused, sealog_status::SEALOG_FENCED as c_int);
        let fenced = last_error_fields();
        assert_eq!(
            (fenced.status, fenced.epoch, fenced.definite),
            (refused, 2, 1)
        );
        assert!(
            last_error::message().contains("fenced at epoch 2"),
            "{}",
            last_error::message()
        );
        let other = b"other bytes";
        let conflict = sealog_logdrive_write(second, 3, 2, other.as_ptr(), other.len());
        assert_eq!(conflict, sealog_status::SEALOG_CONFLICT as c_int);
        assert_eq!(last_error_fields().address, 3);

        // The seal at 401, the weak tail and the lengths.
        assert_eq!(sealog_logdrive_seal(second, 401, 2), OK);
        let past = sealog_logdrive_write(second, 401, 2, late.as_ptr(), late.len());
        assert_eq!(past, sealog_status::SEALOG_SEALED as c_int);
        assert_eq!(last_error_fields().length, 401);
        let (mut n, mut holes, mut count_out, mut below) = (0u64, [0u64; 2], 0usize, -1);
        assert_eq!(
            sealog_logdrive_weak_tail(
                second,
                16,
                &mut n,
                holes.as_mut_ptr(),
                2,
                &mut count_out,
                &mut below
            ),
            OK
        );
        assert_eq!((n, count_out, below), (401, 0, 0));
        let wide = sealog_logdrive_weak_tail(
            second,
            1 << 40,
            &mut n,
            null_mut(),
            0,
            &mut count_out,
            null_mut(),
        );
        assert_eq!(wide, sealog_status::SEALOG_INVALID_WINDOW as c_int);
        assert_eq!(last_error_fields().k, 1 << 40);
        assert_eq!(sealog_logdrive_trim(second, 100), OK);
        let mut lengths = std::mem::zeroed::<sealog_logdrive_lengths>();
        lengths.struct_size_bytes = size_of::<sealog_logdrive_lengths>() as u32;
        assert_eq!(sealog_logdrive_length(second, &mut lengths), OK);
        assert_eq!(
            (lengths.n, lengths.sealed, lengths.sealed_length),
            (401, 1, 401)
        );
        assert_eq!((lengths.fence, lengths.first), (2, 100));
        assert_eq!(read(second, 99), Err(SEALOG_LOGDRIVE_TRIMMED));
        let range = sealog_logdrive_trim(second, 500);
        assert_eq!(range, sealog_status::SEALOG_OUT_OF_RANGE as c_int);

        assert_eq!(sealog_logdrive_free(second), OK);
        // 50 more in flight on another LogDrive (its handle freed at once) when the store
        // closes: the close runs their callbacks before it returns.
        let mut other = null_mut();
        assert_eq!(sealog_store_create(store, 8, 64, &mut other), OK);
        for address in 0..50u64 {
            let v = value(address);
            let queued = sealog_logdrive_write_cb(
                other,
                address,
                0,
                v.as_ptr(),
                v.len(),
                Some(count),
                user_data,
            );
            assert_eq!(queued, OK);
        }
        assert_eq!(sealog_logdrive_free(other), OK);
        assert_eq!(sealog_store_close(store), OK);
        let (durable, failed) = (
            counters.0.load(Ordering::SeqCst),
            counters.1.load(Ordering::SeqCst),
        );
        assert_eq!(durable + failed, 350, "every accepted callback ran once");
        assert_eq!(failed, 0, "a close makes what was queued durable");
        // A handle that outlived its store answers Stopped, definitely not a crash.
        let stopped = sealog_logdrive_write(ledger, 500, 3, late.as_ptr(), late.len());
        assert_eq!(stopped, sealog_status::SEALOG_STOPPED as c_int);
        assert_eq!(last_error_fields().definite, 0);
        assert_eq!(sealog_logdrive_free(ledger), OK);
    }
    restarted_reads_back(&path);
}

/// After a restart: LogDrives 7 and 8, 7's values from 100 to 400.
fn restarted_reads_back(path: &CString) {
    let (status, store, report) = open(path, SEALOG_STORE_RECOVERY_STRICT);
    assert_eq!(status, OK, "{}", last_error::message());
    assert_eq!(report.logdrives, 2);
    let (mut ids, mut count_out, mut ledger) = ([0u64; 4], 0usize, null_mut());
    // SAFETY: live handles and writable out-pointers.
    unsafe {
        let listed = sealog_store_list(store, ids.as_mut_ptr(), 1, &mut count_out);
        assert_eq!(
            (listed, count_out, ids[0]),
            (OK, 2, 7),
            "two ids, room for one"
        );
        let listed = sealog_store_list(store, ids.as_mut_ptr(), 4, &mut count_out);
        assert_eq!((listed, count_out, ids[1]), (OK, 2, 8));
        assert_eq!(sealog_store_get(store, 7, &mut ledger), OK);
        for address in 100..401 {
            assert_eq!(
                read(ledger, address),
                Ok(value(address)),
                "address {address}"
            );
        }
        assert_eq!(sealog_store_delete(store, 7), OK);
        let gone = sealog_logdrive_fence(ledger, 9);
        assert_eq!(gone, sealog_status::SEALOG_MISSING as c_int);
        assert_eq!(sealog_logdrive_free(ledger), OK);
        assert_eq!(sealog_store_close(store), OK);
    }
}

#[test]
fn a_damaged_record_is_refused_strictly_and_reported_in_quarantine() {
    let (directory, path) = store_ring();
    let (status, store, _) = open(&path, SEALOG_STORE_RECOVERY_STRICT);
    assert_eq!(status, OK, "{}", last_error::message());
    let mut ledger = null_mut();
    // SAFETY: live handles, readable values, writable out-pointers.
    unsafe {
        assert_eq!(sealog_store_create(store, 3, 64, &mut ledger), OK);
        for address in 0..4 {
            let v = value(address);
            assert_eq!(
                sealog_logdrive_write(ledger, address, 0, v.as_ptr(), v.len()),
                OK
            );
        }
        assert_eq!(sealog_logdrive_free(ledger), OK);
        assert_eq!(sealog_store_close(store), OK);
    }
    let ring = directory.path().join("ring");
    let needle = value(2);
    let mut flipped = 0;
    for entry in std::fs::read_dir(&ring).expect("the ring") {
        let file = entry.expect("an entry").path();
        let mut bytes = std::fs::read(&file).expect("reads");
        if let Some(at) = bytes
            .windows(needle.len())
            .position(|w| w == needle.as_slice())
        {
            bytes[at + 5] ^= 0x40;
            std::fs::write(&file, &bytes).expect("writes");
            flipped += 1;
        }
    }
    assert_eq!(flipped, 1);
    let (strict, _, _) = open(&path, SEALOG_STORE_RECOVERY_STRICT);
    assert_eq!(
        strict,
        sealog_status::SEALOG_CORRUPT as c_int,
        "{}",
        last_error::message()
    );
    let (status, store, report) = open(&path, SEALOG_STORE_RECOVERY_QUARANTINE);
    assert_eq!(status, OK, "{}", last_error::message());
    assert_eq!(
        (
            report.logdrives,
            report.damaged_records,
            report.damaged_addresses
        ),
        (1, 1, 1)
    );
    // SAFETY: live handles and writable out-pointers.
    unsafe {
        assert_eq!(sealog_store_get(store, 3, &mut ledger), OK);
        assert_eq!(read(ledger, 2), Err(SEALOG_LOGDRIVE_DAMAGED));
        assert_eq!(read(ledger, 3), Ok(value(3)));
        // The repair: the same value written again (from a peer).
        let v = value(2);
        assert_eq!(sealog_logdrive_write(ledger, 2, 0, v.as_ptr(), v.len()), OK);
        assert_eq!(read(ledger, 2), Ok(value(2)));
        assert_eq!(sealog_logdrive_free(ledger), OK);
        assert_eq!(sealog_store_close(store), OK);
    }
}
