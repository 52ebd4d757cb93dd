//! What every CLI test file runs the built `sealog` binary with: its output for arguments
//! alone (stdin empty) or with bytes on stdin, and output bytes as text.

#![allow(dead_code)] // Each test file uses what it needs of these.

use std::io::Write;
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
