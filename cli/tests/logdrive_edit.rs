//! `sealog logdrive create|delete|seal|fence|trim|reclaim`, run against the built binary:
//! each change is durable and seen by `ls` and by a store opened afterwards; those that drop
//! data are refused without `--yes` with nothing changed; what the store refuses (an id that
//! exists, a seal at another length, a lower fence) exits 1, a missing LogDrive 2; a ring a
//! store holds is refused (1) and a ring without a store (2), both unchanged.

mod common;

use std::path::{Path, PathBuf};

use bytes::Bytes;
use common::{logdrive, logdrive_json as json, logdrive_ring, ring_bytes, sealog, text};
use sealog_logdrive::{wait, LogDrive, LogDriveStore, ReadOutcome};
use serde_json::Value;

fn exits(args: &[&str], code: i32) -> String {
    let output = logdrive(args);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(code), "{args:?}: {stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    stderr
}

/// A LogDrive ring with LogDrive 1 written at 0..10.
fn ring(directory: &Path) -> PathBuf {
    let ring = logdrive_ring(directory);
    let store = LogDriveStore::open(&ring, sealog::DriveOptions::default()).expect("opens");
    let one = wait(store.create(1, 1000)).expect("creates");
    for address in 0..10u64 {
        wait(one.write(address, 0, Bytes::from(address.to_string()))).expect("writes");
    }
    drop(one);
    store.close();
    ring
}

/// LogDrive `id` as `ls --json` lists it.
fn listed(path: &str, id: u64) -> Option<Value> {
    let ls = json(&["ls", path, "--json"]);
    let drives = ls["logdrives"].as_array().unwrap().clone();
    drives.into_iter().find(|drive| drive["id"] == id)
}

#[test]
fn edits_are_durable_and_those_that_drop_data_ask_for_yes() {
    let directory = tempfile::tempdir().unwrap();
    let ring = ring(directory.path());
    let path = ring.to_str().unwrap();

    let created = json(&["create", path, "7", "--capacity", "100", "--json"]);
    assert_eq!(created["operation"], "created");
    assert_eq!(listed(path, 7).unwrap()["capacity"], 100);
    exits(&["create", path, "7", "--capacity", "100"], 1);

    for args in [
        vec!["delete", path, "7"],
        vec!["seal", path, "1", "8"],
        vec!["trim", path, "1", "3"],
    ] {
        let before = ring_bytes(&ring);
        let refused = exits(&args, 2);
        assert!(refused.contains("--yes"), "{refused}");
        assert!(ring_bytes(&ring) == before, "{args:?} changed the ring");
    }
    json(&["delete", path, "7", "--yes", "--json"]);
    assert_eq!(listed(path, 7), None);
    exits(&["delete", path, "7", "--yes"], 2);

    let fenced = json(&["fence", path, "1", "4", "--json"]);
    assert_eq!(fenced["epoch"], 4);
    exits(&["fence", path, "1", "2"], 1);
    let sealed = json(&["seal", path, "1", "8", "--yes", "--json"]);
    assert_eq!(
        (sealed["length"].clone(), sealed["epoch"].clone()),
        (8.into(), 4.into())
    );
    exits(&["seal", path, "1", "7", "--yes"], 1);
    json(&["trim", path, "1", "3", "--yes", "--json"]);

    let one = listed(path, 1).unwrap();
    assert_eq!(one["sealed_length"], 8, "{one}");
    assert_eq!(one["n"], 8, "{one}");
    assert_eq!(one["fence_epoch"], 4, "{one}");
    assert_eq!(one["trim_point"], 3, "{one}");

    // A store opened afterwards sees the same.
    let store = LogDriveStore::open(&ring, sealog::DriveOptions::default()).expect("opens");
    let drive = store.get(1).unwrap();
    let length = wait(drive.length()).unwrap();
    assert_eq!((length.sealed, length.fence, length.first), (Some(8), 4, 3));
    assert_eq!(wait(drive.read(2)), Ok(ReadOutcome::Trimmed { first: 3 }));
    assert_eq!(
        wait(drive.read(5)),
        Ok(ReadOutcome::Value(Bytes::from("5")))
    );
    assert_eq!(wait(drive.read(9)), Ok(ReadOutcome::Unwritten));
    assert!(
        wait(drive.write(7, 3, Bytes::from("x"))).is_err(),
        "fenced at 4"
    );
    drop(drive);

    // Held by that store: refused after the lock's wait.
    let in_use = exits(&["fence", path, "1", "9"], 1);
    assert!(in_use.contains("in use"), "{in_use}");
    store.close();
    assert_eq!(
        listed(path, 1).unwrap()["fence_epoch"],
        4,
        "the refused fence did nothing"
    );
}

#[test]
fn reclaim_reports_the_reclaimers_figures_and_runs_it() {
    let directory = tempfile::tempdir().unwrap();
    let ring = ring(directory.path());
    let path = ring.to_str().unwrap();
    json(&["trim", path, "1", "10", "--yes", "--json"]);
    let figures = json(&["reclaim", path, "--json"]);
    assert_eq!(figures["ran"], false, "{figures}");
    assert!(figures["capacity_bytes"].as_u64().unwrap() > 0, "{figures}");
    let ran = json(&["reclaim", path, "--run", "--json"]);
    assert_eq!(ran["ran"], true, "{ran}");
    assert!(
        ran["live_bytes"].as_u64().unwrap() <= figures["live_bytes"].as_u64().unwrap(),
        "{ran}"
    );
}

#[test]
fn a_ring_without_a_store_is_refused_and_left_as_it_was() {
    let directory = tempfile::tempdir().unwrap();
    let plain = directory.path().join("plain");
    let path = plain.to_str().unwrap();
    let formatted = sealog(&["format", path, "--size", "8M"]);
    assert_eq!(
        formatted.status.code(),
        Some(0),
        "{}",
        text(&formatted.stderr)
    );
    let before = ring_bytes(&plain);
    for args in [
        vec!["create", path, "1", "--capacity", "10"],
        vec!["fence", path, "1", "2"],
        vec!["reclaim", path],
    ] {
        let refused = exits(&args, 2);
        assert!(refused.contains("no LogDrive store"), "{refused}");
    }
    assert!(
        ring_bytes(&plain) == before,
        "a refused edit changed the ring"
    );
}
