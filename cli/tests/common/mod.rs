//! What every CLI test file runs the built `sealog` binary with: its output for arguments
//! alone (stdin empty) or with bytes on stdin, and output bytes as text.

#![allow(dead_code)] // Each test file uses what it needs of these.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// Runs `sealog` with `args` (stdin empty) and returns what it printed and how it ended.
pub fn sealog(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sealog"))
        .args(args)
        .output()
        .expect("runs sealog")
}

/// Runs `sealog` with `args` and `stdin` written to its standard input.
pub fn sealog_stdin(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_sealog"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("runs sealog");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin)
        .expect("writes stdin");
    child.wait_with_output().expect("sealog ends")
}

/// Output bytes as text (lossily: payloads need not be UTF-8).
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs `sealog logdrive ARGS`.
pub fn logdrive(args: &[&str]) -> Output {
    let mut all = vec!["logdrive"];
    all.extend_from_slice(args);
    sealog(&all)
}

/// `sealog logdrive ARGS`' one JSON object, having exited 0.
pub fn logdrive_json(args: &[&str]) -> serde_json::Value {
    let output = logdrive(args);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{args:?}: {}",
        text(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("one JSON object")
}

/// A 16 MiB ring formatted for a LogDrive store at `directory/ring`.
pub fn logdrive_ring(directory: &Path) -> PathBuf {
    let ring = directory.join("ring");
    let path = ring.to_str().expect("a UTF-8 path");
    let formatted = sealog(&["format", path, "--size", "16M", "--logdrive"]);
    assert_eq!(
        formatted.status.code(),
        Some(0),
        "{}",
        text(&formatted.stderr)
    );
    ring
}

/// Every file of a directory ring and its bytes.
pub fn ring_bytes(ring: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    std::fs::read_dir(ring)
        .expect("reads the ring's directory")
        .map(|entry| entry.expect("an entry").path())
        .map(|path| {
            let bytes = std::fs::read(&path).expect("reads a ring file");
            (path, bytes)
        })
        .collect()
}
