//! Tail markers through the binary (issue 9, defect 3): once `sealog append` has closed
//! cleanly, or has been idle for a moment and is then killed with SIGKILL, damage to the newest
//! acknowledged entry is reported by `sealog verify` as corruption naming its LSN (exit 3),
//! never cut as a torn tail: a tail marker's watermark covers it.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use sealog::reader::RingReader;
use sealog_wal::ReplayOptions;

fn sealog() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sealog"))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn format_ring(path: &Path) {
    let output = sealog()
        .args(["format", path.to_str().expect("utf-8")])
        .args(["--size", "8M", "--segment-size", "1M"])
        .output()
        .expect("runs");
    assert!(output.status.success(), "format: {}", text(&output.stderr));
}

/// Flips one bit in the payload of the record with `lsn` (found by replaying the ring), in its
/// segment file.
fn damage_payload(ring: &Path, lsn: u64) {
    let mut reader = RingReader::open(ring).expect("opens read-only");
    let mut found = None;
    sealog_wal::replay(&mut reader, &ReplayOptions::default(), &mut |entry| {
        if entry.lsn == lsn {
            found = Some(entry.position);
        }
    })
    .expect("an intact ring replays");
    drop(reader);
    let position = found.expect("the LSN is live");
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(ring.join(format!("segment-{:05}", position.segment)))
        .expect("opens the segment file");
    // The payload starts after the 96-byte header.
    let at = u64::from(position.offset) + 96;
    let mut byte = [0u8; 1];
    file.read_exact_at(&mut byte, at).expect("reads");
    byte[0] ^= 0x10;
    file.write_all_at(&byte, at).expect("writes");
    file.sync_all().expect("syncs");
}

fn verify_json(ring: &Path) -> Output {
    sealog()
        .args(["verify", ring.to_str().expect("utf-8"), "--json"])
        .output()
        .expect("runs")
}

fn assert_corrupt_at(ring: &Path, lsn: u64) {
    let verify = verify_json(ring);
    let report = text(&verify.stdout);
    assert_eq!(
        verify.status.code(),
        Some(3),
        "{report} {}",
        text(&verify.stderr)
    );
    assert!(report.contains("\"status\": \"corrupt\""), "{report}");
    assert!(
        report.contains(&format!("\"lsn\": {lsn}")),
        "the corruption names LSN {lsn}: {report}"
    );
    let dump = sealog()
        .args(["dump", ring.to_str().expect("utf-8")])
        .output()
        .expect("runs");
    assert_eq!(dump.status.code(), Some(3), "{}", text(&dump.stderr));
}

/// A formatted ring in a temporary directory (kept alive by the returned handle).
fn fresh_ring() -> (tempfile::TempDir, PathBuf) {
    let directory = tempfile::tempdir().expect("tempdir");
    let ring = directory.path().join("ring");
    format_ring(&ring);
    (directory, ring)
}

/// `sealog append` on `ring`, its stdin and stdout piped.
fn writer(ring: &Path) -> Child {
    sealog()
        .args(["append", ring.to_str().expect("utf-8")])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("runs")
}

#[test]
fn damage_to_the_newest_entry_after_a_clean_close_is_corruption() {
    let (_directory, ring) = fresh_ring();
    let mut child = writer(&ring);
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"first\nsecond\nthe newest entry\n")
        .expect("writes");
    let output = child.wait_with_output().expect("exits");
    assert!(output.status.success());
    assert_eq!(text(&output.stdout), "1\n2\n3\n");
    let clean = verify_json(&ring);
    assert_eq!(clean.status.code(), Some(0));
    damage_payload(&ring, 3);
    assert_corrupt_at(&ring, 3);
}

#[test]
fn damage_to_the_newest_entry_after_an_idle_period_and_kill_9_is_corruption() {
    let (_directory, ring) = fresh_ring();
    let mut child = writer(&ring);
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all(b"first\nsecond\nthe newest entry\n")
        .expect("writes");
    stdin.flush().expect("flushes");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    for expected in 1..=3u64 {
        let line = lines.next().expect("an LSN").expect("reads");
        assert_eq!(line, expected.to_string());
    }
    // The writer is idle now, with stdin still open: well past the marker's idle time (at
    // most 100 ms by default), it is killed without a chance to close.
    std::thread::sleep(Duration::from_millis(500));
    child.kill().expect("SIGKILL");
    child.wait().expect("reaped");
    drop(stdin);
    let clean = verify_json(&ring);
    assert_eq!(clean.status.code(), Some(0), "{}", text(&clean.stdout));
    damage_payload(&ring, 3);
    assert_corrupt_at(&ring, 3);
}
