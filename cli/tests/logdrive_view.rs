//! `sealog logdrive ls|show|read|weak-tail|check`, run against the built binary on a ring a
//! store wrote in this process: each answers what the store itself answered before it
//! closed (lengths, reads, weak tails), writes nothing to the ring, and keeps the CLI's
//! exit codes: a missing LogDrive or an address out of range is 2, a ring without a store
//! 2, a ring a writer holds 1, and damage 3 (strict opens refuse it and name
//! `--quarantine`; `check` lists it by LogDrive and address).

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use common::{logdrive, logdrive_json as json, logdrive_ring, ring_bytes, sealog, text};
use sealog_logdrive::{wait, Length, LogDrive, LogDriveStore};
use serde_json::Value;

/// The value written at `address` of LogDrive `id`: distinctive, so that the test can find
/// its bytes in the ring's files.
fn value(id: u64, address: u64) -> Bytes {
    Bytes::from(format!(
        "logdrive {id} address {address} value-{}",
        "x".repeat(40)
    ))
}

/// What the store answered for each LogDrive before it closed.
struct Expected {
    lengths: BTreeMap<u64, Length>,
}

/// A LogDrive ring with two LogDrives: 1 written at 0..10 but 5, unsealed; 2 written at
/// 0..6, sealed at 6, fenced at epoch 3 and trimmed below 2.
fn ring_with_two_logdrives(directory: &Path) -> (PathBuf, Expected) {
    let ring = logdrive_ring(directory);
    let store = LogDriveStore::open(&ring, sealog::DriveOptions::default()).expect("opens");
    let one = wait(store.create(1, 1000)).expect("creates 1");
    for address in (0..10).filter(|a| *a != 5) {
        wait(one.write(address, 0, value(1, address))).expect("writes 1");
    }
    let two = wait(store.create(2, 64)).expect("creates 2");
    for address in 0..6 {
        wait(two.write(address, 0, value(2, address))).expect("writes 2");
    }
    wait(two.seal(6, 0)).expect("seals 2");
    wait(two.fence(3)).expect("fences 2");
    wait(two.trim(2)).expect("trims 2");
    let mut lengths = BTreeMap::new();
    lengths.insert(1, wait(one.length()).unwrap());
    lengths.insert(2, wait(two.length()).unwrap());
    drop((one, two));
    store.close();
    (ring, Expected { lengths })
}

/// A failure's stderr, having checked the exit code and that it is one sentence naming
/// the ring.
fn refused(args: &[&str], code: i32, ring: &str) -> String {
    let output = logdrive(args);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(code), "{args:?}: {stderr}");
    assert!(stderr.starts_with("sealog: "), "{stderr}");
    assert!(stderr.contains(ring), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    stderr
}

#[test]
fn ls_show_read_and_weak_tail_answer_what_the_store_did_and_write_nothing() {
    let directory = tempfile::tempdir().unwrap();
    let (ring, expected) = ring_with_two_logdrives(directory.path());
    let path = ring.to_str().unwrap();
    let before = ring_bytes(&ring);

    let ls = json(&["ls", path, "--json"]);
    let drives = ls["logdrives"].as_array().expect("logdrives");
    assert_eq!(drives.len(), 2, "{ls}");
    for drive in drives {
        let length = &expected.lengths[&drive["id"].as_u64().unwrap()];
        assert_eq!(drive["n"], length.n, "{drive}");
        assert_eq!(drive["t"], length.t, "{drive}");
        assert_eq!(
            drive["sealed_length"],
            serde_json::json!(length.sealed),
            "{drive}"
        );
        assert_eq!(drive["fence_epoch"], length.fence, "{drive}");
        assert_eq!(drive["trim_point"], length.first, "{drive}");
        assert_eq!(drive["damaged"], 0, "{drive}");
        assert!(drive["bytes"].as_u64().unwrap() > 0, "{drive}");
    }
    assert_eq!(drives[0]["capacity"], 1000);
    assert_eq!(
        (drives[0]["n"].clone(), drives[0]["t"].clone()),
        (10.into(), 5.into())
    );
    assert_eq!(drives[0]["holes"], 1, "only 5 is unwritten in [T, N)");
    assert_eq!(drives[1]["sealed_length"], 6);
    assert_eq!(drives[1]["fence_epoch"], 3);
    assert_eq!(drives[1]["trim_point"], 2);

    let show = json(&["show", path, "1", "--json"]);
    assert_eq!(show["id"], 1);
    assert_eq!(show["values"], 9);
    assert_eq!(show["damaged_addresses"], serde_json::json!([]));
    assert!(show["oldest_lsn"].as_u64().is_some(), "{show}");
    assert_eq!(
        show["pins_head"], true,
        "LogDrive 1 holds the ring's oldest record"
    );
    let show_two = json(&["show", path, "2", "--json"]);
    assert_eq!(show_two["pins_head"], false, "{show_two}");

    let read = logdrive(&["read", path, "2", "0", "--to", "7", "--json"]);
    assert_eq!(read.status.code(), Some(0), "{}", text(&read.stderr));
    let lines: Vec<Value> = text(&read.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(lines.len(), 8);
    for line in &lines[..2] {
        assert_eq!(line["outcome"], "trimmed", "{line}");
        assert_eq!(line["first"], 2, "{line}");
    }
    for (address, line) in (2u64..6).zip(&lines[2..6]) {
        assert_eq!(line["outcome"], "value", "{line}");
        let hex: String = value(2, address)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(line["payload_hex"], hex, "{line}");
    }
    assert_eq!(lines[6]["outcome"], "unwritten", "sealed at 6");
    let plain = logdrive(&["read", path, "1", "5"]);
    assert_eq!(text(&plain.stdout), "5\tunwritten\n");
    let plain = logdrive(&["read", path, "1", "3"]);
    assert_eq!(
        text(&plain.stdout),
        format!("3\tvalue\t{}\n", text(&value(1, 3)))
    );

    let tail = json(&["weak-tail", path, "1", "8", "--json"]);
    assert_eq!(tail["n"], 10);
    assert_eq!(tail["t"], 5);
    assert_eq!(tail["holes"], serde_json::json!([5]));
    assert_eq!(tail["holes_below_window"], false);
    let narrow = json(&["weak-tail", path, "1", "4", "--json"]);
    assert_eq!(narrow["holes"], serde_json::json!([]));
    assert_eq!(narrow["holes_below_window"], true, "5 lies below [6, 10)");

    let check = json(&["check", path, "--json"]);
    assert_eq!(check["status"], "clean", "{check}");
    assert_eq!(check["logdrives"], 2);
    for command in ["stat", "inspect"] {
        let shown: Value = serde_json::from_slice(&sealog(&[command, path, "--json"]).stdout)
            .expect("stat and inspect write JSON");
        assert_eq!(shown["purpose"], "logdrive_store", "{shown}");
        assert_eq!(shown["logdrives"], 2, "{command}: {shown}");
    }

    assert!(
        ring_bytes(&ring) == before,
        "a read-only subcommand changed the ring"
    );
}

#[test]
fn bad_ids_addresses_windows_and_rings_are_refused_with_the_contracts_codes() {
    let directory = tempfile::tempdir().unwrap();
    let (ring, _) = ring_with_two_logdrives(directory.path());
    let path = ring.to_str().unwrap();
    let missing = refused(&["show", path, "99"], 2, path);
    assert!(missing.contains("99"), "{missing}");
    refused(&["read", path, "99", "0"], 2, path);
    let out_of_range = refused(&["read", path, "1", "1000"], 2, path);
    assert!(out_of_range.contains("1000"), "{out_of_range}");
    refused(&["read", path, "1", "998", "--to", "1000"], 2, path);
    refused(&["read", path, "1", "5", "--to", "4"], 2, path);
    let huge = refused(
        &["read", path, "1", "0", "--to", "18446744073709551614"],
        2,
        path,
    );
    assert!(huge.contains("addresses"), "{huge}");
    refused(&["weak-tail", path, "1", "100000000"], 2, path);

    let plain = directory.path().join("plain");
    let plain = plain.to_str().unwrap();
    let formatted = sealog(&["format", plain, "--size", "8M"]);
    assert_eq!(
        formatted.status.code(),
        Some(0),
        "{}",
        text(&formatted.stderr)
    );
    let inspected: Value = serde_json::from_slice(&sealog(&["inspect", plain, "--json"]).stdout)
        .expect("inspect writes JSON");
    assert_eq!(
        inspected["logdrives"],
        Value::Null,
        "a plain log holds no LogDrives"
    );
    let not_a_store = refused(&["ls", plain], 2, plain);
    assert!(not_a_store.contains("no LogDrive store"), "{not_a_store}");
    refused(&["check", plain], 2, plain);
    let nowhere = directory.path().join("nowhere");
    refused(
        &["ls", nowhere.to_str().unwrap()],
        2,
        nowhere.to_str().unwrap(),
    );

    // A ring a store holds: every subcommand waits for its lock, then gives up with 1 (all
    // at once, so the waits overlap), and nothing was changed.
    let store = LogDriveStore::open(&ring, sealog::DriveOptions::default()).expect("opens");
    let every: [&[&str]; 11] = [
        &["ls", path],
        &["show", path, "1"],
        &["read", path, "1", "0"],
        &["weak-tail", path, "1", "4"],
        &["check", path],
        &["create", path, "9", "--capacity", "10"],
        &["delete", path, "2", "--yes"],
        &["seal", path, "1", "10", "--yes"],
        &["fence", path, "1", "5"],
        &["trim", path, "1", "1", "--yes"],
        &["reclaim", path],
    ];
    let running: Vec<_> = every
        .iter()
        .map(|args| {
            let child = std::process::Command::new(env!("CARGO_BIN_EXE_sealog"))
                .arg("logdrive")
                .args(*args)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("runs sealog");
            (args, child)
        })
        .collect();
    for (args, child) in running {
        let output = child.wait_with_output().expect("sealog ends");
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.contains("in use") && stderr.contains(path),
            "{args:?}: {stderr}"
        );
    }
    store.close();
    let ls = json(&["ls", path, "--json"]);
    assert_eq!(
        ls["logdrives"].as_array().unwrap().len(),
        2,
        "nothing was changed: {ls}"
    );
    assert_eq!(ls["logdrives"][0]["fence_epoch"], 0, "{ls}");
}

/// Flips a byte of the only copy of `needle` in the ring's files.
fn corrupt(ring: &Path, needle: &[u8]) {
    let mut found = 0;
    for (path, mut bytes) in ring_bytes(ring) {
        let Some(at) = bytes.windows(needle.len()).position(|w| w == needle) else {
            continue;
        };
        bytes[at + needle.len() / 2] ^= 0x55;
        std::fs::write(&path, &bytes).unwrap();
        found += 1;
    }
    assert_eq!(found, 1, "the value lies in one file");
}

#[test]
fn a_corrupted_record_is_found_by_check_and_shown_by_show() {
    let directory = tempfile::tempdir().unwrap();
    let (ring, _) = ring_with_two_logdrives(directory.path());
    let path = ring.to_str().unwrap();
    corrupt(&ring, &value(1, 3));

    let check = logdrive(&["check", path, "--json"]);
    assert_eq!(check.status.code(), Some(3), "{}", text(&check.stderr));
    let report: Value = serde_json::from_slice(&check.stdout).unwrap();
    assert_eq!(report["status"], "damaged", "{report}");
    assert_eq!(
        report["damaged"],
        serde_json::json!([{"id": 1, "generation": 1, "addresses": [3], "suspect_ranges": []}]),
        "{report}"
    );
    let damage = report["damage"].as_array().unwrap();
    assert_eq!(damage.len(), 1, "{report}");
    assert_eq!(
        (damage[0]["id"].clone(), damage[0]["address"].clone()),
        (1.into(), 3.into())
    );

    let strict = refused(&["show", path, "1"], 3, path);
    assert!(strict.contains("--quarantine"), "{strict}");
    let show = json(&["show", path, "1", "--quarantine", "--json"]);
    assert_eq!(show["damaged_addresses"], serde_json::json!([3]), "{show}");
    assert_eq!(show["damaged"], 1, "{show}");

    let read = logdrive(&["read", path, "1", "2", "--to", "4", "--quarantine"]);
    assert_eq!(read.status.code(), Some(3), "{}", text(&read.stderr));
    let stdout = text(&read.stdout);
    assert!(stdout.contains("3\tdamaged\n"), "{stdout}");
    assert!(
        stdout.contains(&format!("2\tvalue\t{}", text(&value(1, 2)))),
        "{stdout}"
    );
    // Every other LogDrive reads as it did.
    let two = json(&["show", path, "2", "--quarantine", "--json"]);
    assert_eq!(two["damaged"], 0, "{two}");
}
