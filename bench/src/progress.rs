//! The progress line on the terminal: one line on stderr, rewritten in place as the run moves
//! from one measurement to the next, so that a run of minutes shows where it is without
//! filling the terminal. A leaf: every section reports its progress here rather than through
//! the crate's root.

use std::io::Write;

/// Replaces the progress line with `line` (an empty line clears it).
pub fn progress(line: &str) {
    eprint!("\r\x1b[2K{line}");
    let _ = std::io::stderr().flush();
}
