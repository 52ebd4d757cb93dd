//! The CLI contract, run against the built `sealog` binary: exit codes, stdin splitting, the
//! dump and verify output formats, oversized payloads, torn tails and corruption as verify and
//! dump report them.

mod common;

use common::{sealog_stdin as sealog, text};

use std::path::Path;
use std::process::Command;

fn format_ring(path: &Path) {
    let path = path.to_str().expect("utf-8 path");
    let output = sealog(
        &["format", path, "--size", "8M", "--segment-size", "1M"],
        b"",
    );
    assert!(output.status.success(), "format: {}", text(&output.stderr));
}

#[test]
fn append_splits_stdin_on_newlines_and_dump_prints_it_back() {
    let directory = tempfile::tempdir().expect("tempdir");
    let ring = directory.path().join("ring");
    format_ring(&ring);
    let path = ring.to_str().expect("utf-8");
    let output = sealog(&["append", path], b"one\ntwo\r\n\n\xff\x00bytes\nlast");
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(text(&output.stdout), "1\n2\n3\n4\n5\n");
    let dump = sealog(&["dump", path], b"");
    assert_eq!(dump.status.code(), Some(0));
    assert_eq!(
        text(&dump.stdout),
        "1\tone\n2\ttwo\\r\n3\t\n4\t\\xff\\x00bytes\n5\tlast\n"
    );
    let json = sealog(&["dump", path, "--json", "--from", "4"], b"");
    assert_eq!(
        text(&json.stdout),
        "{\"lsn\": 4, \"len\": 7, \"payload_hex\": \"ff006279746573\"}\n\
         {\"lsn\": 5, \"len\": 4, \"payload_hex\": \"6c617374\"}\n"
    );
    let verify = sealog(&["verify", path, "--json"], b"");
    assert_eq!(verify.status.code(), Some(0));
    let report = text(&verify.stdout);
    assert!(report.contains("\"status\": \"clean\""), "{report}");
    assert!(
        report.contains("\"first_lsn\": 1") && report.contains("\"last_lsn\": 5"),
        "{report}"
    );
}

#[test]
fn an_oversized_payload_exits_1_and_earlier_payloads_stay_acknowledged() {
    let directory = tempfile::tempdir().expect("tempdir");
    let ring = directory.path().join("ring");
    format_ring(&ring);
    let path = ring.to_str().expect("utf-8");
    let mut input = b"small\n".to_vec();
    input.extend(vec![b'x'; 2 << 20]);
    input.extend_from_slice(b"\nafter\n");
    let output = sealog(&["append", path], &input);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stderr));
    assert_eq!(text(&output.stdout), "1\n");
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains(path) && stderr.contains("limit"),
        "{stderr}"
    );
    let dump = sealog(&["dump", path], b"");
    assert_eq!(text(&dump.stdout), "1\tsmall\n");
}

#[test]
fn trim_is_inclusive_and_out_of_range_is_exit_1() {
    let directory = tempfile::tempdir().expect("tempdir");
    let ring = directory.path().join("ring");
    format_ring(&ring);
    let path = ring.to_str().expect("utf-8");
    sealog(&["append", path, "--count", "10", "--size", "100"], b"");
    let trim = sealog(&["trim", path, "--upto", "4"], b"");
    assert_eq!(trim.status.code(), Some(0), "{}", text(&trim.stderr));
    let dump = sealog(&["dump", path], b"");
    assert!(
        text(&dump.stdout).starts_with("5\t"),
        "{}",
        text(&dump.stdout)
    );
    let beyond = sealog(&["trim", path, "--upto", "99"], b"");
    assert_eq!(beyond.status.code(), Some(1), "{}", text(&beyond.stderr));
    let inspect = sealog(&["inspect", path], b"");
    assert_eq!(inspect.status.code(), Some(0));
    let inspect = text(&inspect.stdout);
    assert!(
        inspect.contains("trim: LSN 4") && inspect.contains("segment 0: lap 1"),
        "{inspect}"
    );
}

#[test]
fn unusable_paths_exit_2() {
    let directory = tempfile::tempdir().expect("tempdir");
    let missing = directory.path().join("missing");
    for args in [
        vec!["verify", missing.to_str().expect("utf-8")],
        vec!["dump", directory.path().to_str().expect("utf-8")],
        vec!["inspect", directory.path().to_str().expect("utf-8")],
        vec!["format", missing.to_str().expect("utf-8"), "--size", "16K"],
        vec!["verify"],
    ] {
        let output = sealog(&args, b"");
        assert_eq!(
            output.status.code(),
            Some(2),
            "{args:?}: {}",
            text(&output.stderr)
        );
        assert!(!text(&output.stderr).contains("panicked"));
    }
    let ring = directory.path().join("ring");
    format_ring(&ring);
    let again = sealog(
        &["format", ring.to_str().expect("utf-8"), "--size", "8M"],
        b"",
    );
    assert_eq!(again.status.code(), Some(2));
    let forced = sealog(
        &[
            "format",
            ring.to_str().expect("utf-8"),
            "--size",
            "8M",
            "--force",
        ],
        b"",
    );
    assert_eq!(forced.status.code(), Some(0), "{}", text(&forced.stderr));
}

#[test]
fn corruption_of_acknowledged_data_is_exit_3_naming_the_lsn() {
    let directory = tempfile::tempdir().expect("tempdir");
    let ring = directory.path().join("ring");
    format_ring(&ring);
    let path = ring.to_str().expect("utf-8");
    // Three appends, each its own batch, so later watermarks cover the first.
    for line in ["first", "second", "third"] {
        let output = sealog(&["append", path], format!("{line}\n").as_bytes());
        assert!(output.status.success());
    }
    // Flip a byte of LSN 1's payload: segment 0, block 1 (after the segment header), past the
    // 96-byte entry header.
    let segment = ring.join("segment-00000");
    let mut bytes = std::fs::read(&segment).expect("reads");
    bytes[4096 + 96 + 2] ^= 0x20;
    std::fs::write(&segment, &bytes).expect("writes");
    let verify = sealog(&["verify", path, "--json"], b"");
    assert_eq!(verify.status.code(), Some(3), "{}", text(&verify.stdout));
    let report = text(&verify.stdout);
    assert!(report.contains("\"status\": \"corrupt\""), "{report}");
    assert!(
        report.contains("\"lsn\": 1") && report.contains("\"check\": \"payload_crc\""),
        "{report}"
    );
    assert!(
        report.contains("\"segment\": 0") && report.contains("\"offset\": 4096"),
        "{report}"
    );
    let plain = sealog(&["verify", path], b"");
    assert_eq!(plain.status.code(), Some(3));
    assert!(text(&plain.stdout).contains("LSN 1"));
    let dump = sealog(&["dump", path], b"");
    assert_eq!(dump.status.code(), Some(3));
    assert_eq!(text(&dump.stdout), "", "a damaged payload is never printed");
    let append = sealog(&["append", path], b"more\n");
    assert_eq!(
        append.status.code(),
        Some(3),
        "a writer refuses a corrupt ring"
    );
}

#[test]
fn a_torn_tail_is_reported_not_an_error() {
    let directory = tempfile::tempdir().expect("tempdir");
    let ring = directory.path().join("ring");
    format_ring(&ring);
    let path = ring.to_str().expect("utf-8");
    sealog(&["append", path], b"kept\n");
    // Fake a torn, never-acknowledged batch after it: a header-shaped block with a bad CRC.
    let segment = ring.join("segment-00000");
    let mut bytes = std::fs::read(&segment).expect("reads");
    let tail = 2 * 4096;
    bytes[tail..tail + 4].copy_from_slice(b"SLGE");
    bytes[tail + 4] = 1;
    bytes[tail + 20..tail + 40].fill(0xab);
    std::fs::write(&segment, &bytes).expect("writes");
    let verify = sealog(&["verify", path, "--json"], b"");
    assert_eq!(verify.status.code(), Some(0), "{}", text(&verify.stderr));
    let report = text(&verify.stdout);
    assert!(report.contains("\"status\": \"torn_tail\""), "{report}");
    assert!(report.contains("\"torn\": {\"first_lsn\": 2"), "{report}");
    let append = sealog(&["append", path], b"next\n");
    assert_eq!(text(&append.stdout), "2\n");
    let verify = sealog(&["verify", path, "--json"], b"");
    assert!(text(&verify.stdout).contains("\"status\": \"clean\""));
}

#[test]
fn a_short_write_that_cannot_complete_stops_the_drive() {
    //! The file-size limit (RLIMIT_FSIZE, with SIGXFSZ ignored) makes the kernel complete an
    //! O_DIRECT write short at the limit, and fail its remainder with EFBIG: the backend
    //! resubmits the remainder, gets the error, and the drive stops. Every LSN printed before
    //! replays, and the ring verifies (the unfinished batch is a torn tail).
    let directory = tempfile::tempdir().expect("tempdir");
    let ring = directory.path().join("ring");
    let path = ring.to_str().expect("utf-8");
    let format = sealog(
        &["format", path, "--size", "16M", "--segment-size", "4M"],
        b"",
    );
    assert!(format.status.success());
    let script = format!(
        "trap '' XFSZ; ulimit -f 2500; exec {} append {path} --count 20000 --size 1000",
        env!("CARGO_BIN_EXE_sealog")
    );
    let output = Command::new("bash")
        .args(["-c", &script])
        .output()
        .expect("bash runs");
    assert_eq!(output.status.code(), Some(2), "{}", text(&output.stderr));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("write failed") && stderr.contains("errno 27"),
        "{stderr}"
    );
    let printed: Vec<u64> = text(&output.stdout)
        .lines()
        .map(|line| line.parse().expect("an LSN"))
        .collect();
    let verify = sealog(&["verify", path, "--json"], b"");
    assert_eq!(verify.status.code(), Some(0), "{}", text(&verify.stdout));
    let dump = sealog(&["dump", path], b"");
    let dumped = text(&dump.stdout).lines().count();
    assert!(dumped >= printed.len(), "every acknowledged entry replays");
    for (index, lsn) in printed.iter().enumerate() {
        assert_eq!(*lsn, index as u64 + 1);
    }
}
