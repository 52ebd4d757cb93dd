//! Every read-only command's `--json` parses as JSON and carries the fields of its contract
//! (docs/cli.md): `dump` one object per line (`lsn`, `len`,
//! `payload_hex`), `verify` one object (`status`, `first_lsn`, `last_lsn`, and `torn` or
//! `corruption` when present), `inspect` and `stat` one object each, both saying what the ring
//! holds (`purpose`: `log`, or `logdrive_store` for a LogDrive store's ring).

mod common;

use common::sealog_stdin as sealog;

use std::path::Path;
use std::process::Output;

use serde_json::Value;

fn json(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|error| panic!("{error}: {}", String::from_utf8_lossy(&output.stdout)))
}

fn ring_with(directory: &Path, lines: &[u8]) -> String {
    let ring = directory.join("ring");
    let path = ring.to_str().expect("utf-8").to_string();
    let output = sealog(
        &[
            "format",
            &path,
            "--size",
            "8M",
            "--segment-size",
            "1M",
            "--sync-method",
            "fdatasync",
        ],
        b"",
    );
    assert!(output.status.success());
    for line in lines.split_inclusive(|&byte| byte == b'\n') {
        // One append per line: each its own batch.
        assert!(sealog(&["append", &path], line).status.success());
    }
    path
}

#[test]
fn dump_json_is_one_object_per_line_with_the_contracts_fields() {
    let directory = tempfile::tempdir().expect("tempdir");
    let path = ring_with(directory.path(), b"one\n\"quoted\"\n\xff\x00\n");
    let output = sealog(&["dump", &path, "--json"], b"");
    assert_eq!(output.status.code(), Some(0));
    let lines: Vec<Value> = String::from_utf8(output.stdout)
        .expect("utf-8")
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON object per line"))
        .collect();
    assert_eq!(lines.len(), 3);
    let expected = [(1, "6f6e65"), (2, "2271756f74656422"), (3, "ff00")];
    for (line, (lsn, hex)) in lines.iter().zip(expected) {
        let object = line.as_object().expect("an object");
        assert_eq!(object.len(), 3, "{line}");
        assert_eq!(line["lsn"], lsn);
        assert_eq!(line["len"], hex.len() / 2);
        assert_eq!(line["payload_hex"], hex);
    }
}

#[test]
fn verify_json_has_the_contracts_fields_clean_torn_and_corrupt() {
    let directory = tempfile::tempdir().expect("tempdir");
    let path = ring_with(directory.path(), b"first\nsecond\nthird\n");
    let clean = json(&sealog(&["verify", &path, "--json"], b""));
    assert_eq!(clean["status"], "clean");
    assert_eq!(
        (clean["first_lsn"].as_u64(), clean["last_lsn"].as_u64()),
        (Some(1), Some(3))
    );
    assert!(clean.get("torn").is_none() && clean.get("corruption").is_none());

    // A torn, never-acknowledged batch after the log's end: a header-shaped block, bad CRC.
    let segment = Path::new(&path).join("segment-00000");
    let pristine = std::fs::read(&segment).expect("reads");
    let mut bytes = pristine.clone();
    let inspect = json(&sealog(&["inspect", &path, "--json"], b""));
    let tail = inspect["next"]["position"]["offset"]
        .as_u64()
        .expect("next offset") as usize;
    bytes[tail..tail + 4].copy_from_slice(b"SLGE");
    bytes[tail + 4] = 1;
    bytes[tail + 20..tail + 40].fill(0xab);
    std::fs::write(&segment, &bytes).expect("writes");
    let torn = json(&sealog(&["verify", &path, "--json"], b""));
    assert_eq!(torn["status"], "torn_tail", "{torn}");
    let cut = torn["torn"].as_object().expect("torn");
    for field in ["first_lsn", "last_lsn", "bytes"] {
        assert!(cut[field].is_u64(), "{field} in {torn}");
    }

    // LSN 1's payload damaged: segment 0, block 1, past the entry header.
    let mut bytes = pristine;
    bytes[4096 + sealog::ENTRY_HEADER_SIZE + 2] ^= 0x20;
    std::fs::write(&segment, &bytes).expect("writes");
    let output = sealog(&["verify", &path, "--json"], b"");
    assert_eq!(output.status.code(), Some(3));
    let corrupt = json(&output);
    assert_eq!(corrupt["status"], "corrupt");
    let corruption = &corrupt["corruption"];
    assert_eq!(corruption["segment"], 0, "{corrupt}");
    assert_eq!(corruption["offset"], 4096, "{corrupt}");
    assert_eq!(corruption["lsn"], 1, "{corrupt}");
    assert_eq!(corruption["check"], "payload_crc", "{corrupt}");
    assert!(corrupt.get("first_lsn").is_some() && corrupt.get("last_lsn").is_some());
}

#[test]
fn inspect_and_stat_json_parse_and_agree() {
    let directory = tempfile::tempdir().expect("tempdir");
    let path = ring_with(directory.path(), b"a\nb\n");
    let inspect = json(&sealog(&["inspect", &path, "--json"], b""));
    let stat = json(&sealog(&["stat", &path, "--json"], b""));
    assert_eq!(inspect["ring_id"], stat["ring_id"]);
    assert_eq!(inspect["trim_lsn"], stat["trim_lsn"]);
    assert_eq!(inspect["next"]["lsn"], stat["next_lsn"]);
    assert_eq!(stat["live_entries"], 2);
    assert_eq!(stat["kind"], "directory");
    let geometry = &inspect["geometry"];
    let capacity = geometry["segment_size_bytes"]
        .as_u64()
        .expect("segment size")
        * geometry["segment_count"].as_u64().expect("segment count");
    assert_eq!(stat["capacity_bytes"], capacity);
}

#[test]
fn inspect_and_stat_json_say_what_the_ring_holds() {
    let directory = tempfile::tempdir().expect("tempdir");
    let plain = ring_with(directory.path(), b"a\n");
    let store_ring = directory.path().join("store");
    let options = sealog::FormatOptions::new(8 << 20)
        .segment_size_bytes(1 << 20)
        .sync_method(sealog::SyncMethod::Fdatasync)
        .purpose(sealog::RingPurpose::LogDriveStore);
    sealog::format(&store_ring, &options).expect("formats a store's ring");
    let store = store_ring.to_str().expect("utf-8");
    for (path, purpose, words) in [
        (plain.as_str(), "log", "holds: a plain log"),
        (store, "logdrive_store", "holds: a LogDrive store's records"),
    ] {
        let inspect = json(&sealog(&["inspect", path, "--json"], b""));
        assert_eq!(inspect["purpose"], purpose, "{inspect}");
        let stat = json(&sealog(&["stat", path, "--json"], b""));
        assert_eq!(stat["purpose"], purpose, "{stat}");
        let report = sealog(&["inspect", path], b"");
        assert!(
            String::from_utf8_lossy(&report.stdout).contains(words),
            "{path}"
        );
    }
}
