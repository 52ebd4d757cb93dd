//! What `sealog format` and `sealog inspect` say about a ring's sync method, run against the
//! built binary: `format` measures the device by default and `inspect` shows the method chosen
//! and why (the figures and the margin rule, plain and `--json`); `--sync-method` names one and
//! measures nothing; trims and appends keep the record; and a ring of format version 1
//! (formatted before the method was recorded, or after) is refused with exit 2 and a sentence
//! naming both versions.

mod common;

use common::{sealog, text};

use std::path::Path;

use sealog_wal::format::{
    ControlBlock, SyncChoice, TailHint, CONTROL_SIZE_V1_BEFORE_SYNC, FORMAT_VERSION,
};

fn format_ring(path: &str, extra: &[&str]) -> String {
    let mut args = vec!["format", path, "--size", "8M", "--segment-size", "1M"];
    args.extend_from_slice(extra);
    let output = sealog(&args);
    assert!(output.status.success(), "format: {}", text(&output.stderr));
    text(&output.stdout)
}

/// `inspect`'s `sync method:` line.
fn sync_line(path: &str) -> String {
    let output = sealog(&["inspect", path]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let report = text(&output.stdout);
    report
        .lines()
        .find(|line| line.starts_with("sync method: "))
        .unwrap_or_else(|| panic!("no sync method line: {report}"))
        .to_string()
}

/// `inspect --json`'s `sync` object.
fn sync_json(path: &str) -> serde_json::Value {
    let output = sealog(&["inspect", path, "--json"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let report: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("inspect --json prints one JSON object");
    report["sync"].clone()
}

#[test]
fn format_measures_by_default_and_inspect_says_what_was_chosen_and_why() {
    let directory = tempfile::tempdir().expect("tempdir");
    let ring = directory.path().join("ring");
    let path = ring.to_str().expect("utf-8");
    let formatted = format_ring(path, &[]);
    assert!(formatted.contains("sync method: "), "{formatted}");
    let line = sync_line(path);
    println!("{line}");
    assert!(line.contains("measured at format time"), "{line}");
    assert!(line.contains("8192-byte writes at queue depth 1"), "{line}");
    assert!(line.contains("10% faster at both p50 and p99"), "{line}");
    let sync = sync_json(path);
    assert_eq!(sync["source"], "measured", "{sync}");
    let measurement = &sync["measurement"];
    assert_eq!(measurement["write_size_bytes"], 8192, "{sync}");
    assert_eq!(measurement["margin_percent"], 10, "{sync}");
    assert!(measurement["rounds"]
        .as_u64()
        .is_some_and(|rounds| rounds >= 4));
    // The method follows the rule from the figures shown beside it.
    let figure = |name: &str| measurement[name].as_u64().expect(name);
    let clearly = |dsync: u64, fdatasync: u64| dsync * 100 <= fdatasync * 90 && dsync < fdatasync;
    let dsync_wins = clearly(figure("dsync_p50_us"), figure("fdatasync_p50_us"))
        && clearly(figure("dsync_p99_us"), figure("fdatasync_p99_us"));
    let method = if dsync_wins { "dsync" } else { "fdatasync" };
    assert_eq!(sync["method"], method, "{sync}");
    assert!(
        line.starts_with(&format!("sync method: {method} (")),
        "{line}"
    );
    assert_eq!(sync["why"].as_str(), line.strip_prefix("sync method: "));
}

#[test]
fn a_named_method_is_recorded_unmeasured_and_trims_keep_it() {
    let directory = tempfile::tempdir().expect("tempdir");
    let ring = directory.path().join("ring");
    let path = ring.to_str().expect("utf-8");
    format_ring(path, &["--sync-method", "dsync"]);
    let named = sync_line(path);
    assert!(named.starts_with("sync method: dsync ("), "{named}");
    assert!(named.contains("named at format time"), "{named}");
    let sync = sync_json(path);
    assert_eq!(
        (&sync["method"], &sync["source"]),
        (&"dsync".into(), &"named".into())
    );
    assert!(sync["measurement"].is_null(), "{sync}");
    let append = sealog(&["append", path, "--count", "5", "--size", "100"]);
    assert!(append.status.success(), "{}", text(&append.stderr));
    let trim = sealog(&["trim", path, "--upto", "3"]);
    assert!(trim.status.success(), "{}", text(&trim.stderr));
    assert_eq!(sync_line(path), named, "after appends and a trim");
    // A measured record survives the same.
    let measured_ring = directory.path().join("measured");
    let measured = measured_ring.to_str().expect("utf-8");
    format_ring(measured, &[]);
    let before = sync_json(measured);
    for args in [
        vec!["append", measured, "--count", "5", "--size", "100"],
        vec!["trim", measured, "--upto", "4"],
    ] {
        let output = sealog(&args);
        assert!(output.status.success(), "{}", text(&output.stderr));
    }
    assert_eq!(sync_json(measured), before, "after appends and a trim");
}

#[test]
fn a_version_1_ring_is_refused_naming_both_versions() {
    let directory = tempfile::tempdir().expect("tempdir");
    let ring = directory.path().join("ring");
    let path = ring.to_str().expect("utf-8");
    format_ring(path, &["--sync-method", "dsync"]);
    write_control_as_version_1_before_sync(&ring);
    for command in ["inspect", "verify", "dump"] {
        let output = sealog(&[command, path]);
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{command}: {stderr}");
        assert!(
            stderr.contains("version 1")
                && stderr.contains(&format!("reads version {FORMAT_VERSION}")),
            "{command}: {stderr}"
        );
    }
}

#[test]
fn an_unknown_sync_method_is_a_usage_error() {
    let directory = tempfile::tempdir().expect("tempdir");
    let ring = directory.path().join("ring");
    let path = ring.to_str().expect("utf-8");
    let output = sealog(&["format", path, "--size", "8M", "--sync-method", "fua"]);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output.stderr));
    assert!(!ring.join("control").exists(), "nothing formatted");
}

/// Rewrites both control copies as a version 1 writer did before the sync method was recorded:
/// the same fields, version 1, zeros from byte 120 on, and a CRC over the first 128 bytes only.
fn write_control_as_version_1_before_sync(ring: &Path) {
    let control_path = ring.join("control");
    let mut bytes = std::fs::read(&control_path).expect("reads the control file");
    let block = bytes.len() / 2;
    for copy in 0..2 {
        let copy_bytes = &mut bytes[copy * block..(copy + 1) * block];
        let current = ControlBlock::decode(copy_bytes).expect("a current copy");
        ControlBlock {
            sync: SyncChoice::NotRecorded,
            tail_hint: TailHint::default(),
            ..current
        }
        .encode(copy_bytes);
        copy_bytes[4..6].copy_from_slice(&1u16.to_le_bytes());
        copy_bytes[8..12].fill(0);
        let crc = crc32c::crc32c(&copy_bytes[..CONTROL_SIZE_V1_BEFORE_SYNC]);
        copy_bytes[8..12].copy_from_slice(&crc.to_le_bytes());
    }
    std::fs::write(&control_path, &bytes).expect("writes the control file");
}
