//! `sealog dump`: every live entry up to the first problem, as text or one JSON object a line;
//! a damaged payload is never printed.

use std::io::{self, BufWriter, Write};
use std::path::Path;

use sealog_wal::ScanPolicy;

use crate::failure::{fail, replay_failure, Failure, EXIT_OTHER};
use crate::json::json_line;
use crate::read_only::replay_read_only;

pub(crate) fn dump(path: &Path, from: Option<u64>, json: bool) -> Result<(), Failure> {
    let from = from.unwrap_or(0);
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let mut write_failed = false;
    let result = replay_read_only(path, ScanPolicy::Hinted, &mut |entry| {
        if entry.lsn < from || write_failed {
            return;
        }
        let line = if json {
            let line = DumpLine {
                lsn: entry.lsn,
                len: entry.payload.len(),
                payload_hex: hex(entry.payload),
            };
            json_line(&line)
        } else {
            format!("{}\t{}", entry.lsn, escape(entry.payload))
        };
        write_failed = writeln!(out, "{line}").is_err();
    })?;
    out.flush()
        .map_err(|_| fail(EXIT_OTHER, "cannot write to stdout"))?;
    if write_failed {
        return Err(fail(EXIT_OTHER, "cannot write to stdout"));
    }
    result
        .map(|_| ())
        .map_err(|error| replay_failure(path, error))
}

/// One line of `dump --json` (docs/cli.md, "JSON").
#[derive(serde::Serialize)]
struct DumpLine {
    lsn: u64,
    len: usize,
    payload_hex: String,
}

pub(crate) fn escape(payload: &[u8]) -> String {
    payload.escape_ascii().to_string()
}

pub(crate) fn hex(payload: &[u8]) -> String {
    payload.iter().map(|byte| format!("{byte:02x}")).collect()
}
