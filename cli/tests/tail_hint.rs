//! What `sealog inspect` says about a ring's tail hint, run against the built binary: the hint
//! in the control block (the incarnation that set it and its limit), and that inspecting a
//! ring reads it the way an open does, with a hinted scan (a few windows past the log, not the
//! whole ring), while `verify` scans the whole ring whatever the hint says.

mod common;

use common::{sealog_stdin as sealog, text};

#[test]
fn inspect_shows_the_tail_hint_and_scans_as_an_open_does() {
    let directory = tempfile::tempdir().expect("tempdir");
    let ring = directory.path().join("ring");
    let path = ring.to_str().expect("utf-8");
    let format = ["format", path, "--size", "64M", "--segment-size", "8M"];
    let output = sealog(&format, b"");
    assert!(output.status.success(), "format: {}", text(&output.stderr));
    let output = sealog(&["append", path], b"one\ntwo\n");
    assert!(output.status.success(), "append: {}", text(&output.stderr));

    let output = sealog(&["inspect", path], b"");
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let report = text(&output.stdout);
    assert!(
        report.contains("tail hint: no batch of incarnation "),
        "{report}"
    );
    assert!(report.contains("hinted scan"), "{report}");

    let output = sealog(&["inspect", path, "--json"], b"");
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).expect("one JSON object");
    let incarnation = json["incarnation"].as_u64().expect("incarnation");
    assert_eq!(json["tail_hint"]["incarnation"].as_u64(), Some(incarnation));
    assert_eq!(json["tail_hint"]["limit"]["lap"].as_u64(), Some(1));
    assert_eq!(json["next"]["lsn"].as_u64(), Some(3));
    assert_eq!(json["next"]["scan"].as_str(), Some("hinted"));
    // The probe past the log reads the hint's margin, not the 64 MiB ring.
    let read = json["next"]["scan_bytes_read"]
        .as_u64()
        .expect("bytes read");
    assert!(
        read < 32 << 20,
        "inspect read {read} bytes of a 64 MiB ring"
    );

    let output = sealog(&["verify", path], b"");
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert!(
        text(&output.stdout).contains("full scan"),
        "{}",
        text(&output.stdout)
    );
}
