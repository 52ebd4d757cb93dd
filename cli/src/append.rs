//! `sealog append`: appends stdin's lines (split on `\n` only, raw bytes) or generated
//! payloads, pipelined, and prints each LSN once it is acknowledged.

use std::io::{self, BufRead, Write};
use std::path::Path;
use std::sync::mpsc::{Receiver, SyncSender};

use clap::ValueEnum;
use sealog::{Drive, DriveOptions, SyncMethod};

use crate::failure::{append_failure, fail, open_failure, Failure, EXIT_OTHER, EXIT_UNUSABLE};

/// A sync method on the command line: `auto` leaves the choice to the ring (at format: measure
/// the device; at append: what format recorded).
#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum SyncArg {
    Auto,
    Fdatasync,
    Dsync,
}

impl SyncArg {
    /// The method named, or `None` for `auto`.
    pub(crate) fn method(self) -> Option<SyncMethod> {
        match self {
            SyncArg::Auto => None,
            SyncArg::Fdatasync => Some(SyncMethod::Fdatasync),
            SyncArg::Dsync => Some(SyncMethod::Dsync),
        }
    }
}

/// Appends every payload (stdin's lines, or `count` generated ones of `size` bytes) and prints
/// each LSN once it is durable, in order.
pub(crate) fn append(
    path: &Path,
    durability: SyncArg,
    count: Option<u64>,
    size: Option<u64>,
) -> Result<(), Failure> {
    let durability = durability.method().map(sealog::sync_probe::durability_of);
    let drive = Drive::open(
        path,
        DriveOptions {
            durability,
            ..DriveOptions::default()
        },
    )
    .map_err(open_failure)?;
    // Tickets go from the submitting thread to this one, which prints LSNs in order as they
    // become durable; the bounded channel keeps the number in flight bounded.
    let (sender, receiver) = std::sync::mpsc::sync_channel::<sealog::Ticket>(4096);
    let outcome = std::thread::scope(|scope| {
        let drive = &drive;
        let submitter = scope.spawn(move || submit_all(path, drive, sender, count, size));
        let printed = print_acknowledged(path, receiver);
        let submitted = submitter
            .join()
            .unwrap_or_else(|_| Err(fail(EXIT_OTHER, "submitter panicked")));
        printed.and(submitted)
    });
    drive.close();
    outcome
}

/// Submits each payload and hands its ticket to the printer. A payload over the ring's limit
/// stops the run before any of it is written; the ones before it stay acknowledged.
fn submit_all(
    path: &Path,
    drive: &Drive,
    sender: SyncSender<sealog::Ticket>,
    count: Option<u64>,
    size: Option<u64>,
) -> Result<(), Failure> {
    let limit = u64::from(drive.geometry().payload_size_max_bytes());
    let mut submit = |payload: Vec<u8>| -> Result<(), Failure> {
        if payload.len() as u64 > limit {
            return Err(fail(
                EXIT_OTHER,
                format!(
                    "{}: payload of {} bytes is over the ring's limit of {limit}; nothing of it \
                     was written",
                    path.display(),
                    payload.len()
                ),
            ));
        }
        let ticket = drive
            .append(payload)
            .map_err(|error| append_failure(path, error))?;
        sender
            .send(ticket)
            .map_err(|_| fail(EXIT_OTHER, "the printer stopped"))
    };
    match (count, size) {
        (Some(count), Some(size)) => {
            for index in 0..count {
                submit(generated_payload(index, size as usize))?;
            }
            Ok(())
        }
        _ => read_lines(&mut io::stdin().lock(), &mut submit),
    }
}

/// Waits for each ticket in turn and prints its LSN. After the first failure it keeps draining
/// the channel, so that the submitter is never left blocked on a full one.
fn print_acknowledged(path: &Path, receiver: Receiver<sealog::Ticket>) -> Result<(), Failure> {
    let stdout = io::stdout();
    let mut out = stdout.lock();
    let mut printed: Result<(), Failure> = Ok(());
    for ticket in receiver {
        if printed.is_err() {
            continue;
        }
        match ticket.wait() {
            Ok(lsn) => {
                if writeln!(out, "{lsn}").and_then(|()| out.flush()).is_err() {
                    printed = Err(fail(EXIT_OTHER, "cannot write to stdout"));
                }
            }
            Err(error) => printed = Err(append_failure(path, error)),
        }
    }
    printed
}

/// Splits `input` on `\n` only: raw bytes (a `\r` is kept), an empty line is an empty payload,
/// and a last line without a newline is a payload too.
pub(crate) fn read_lines(
    input: &mut dyn BufRead,
    submit: &mut dyn FnMut(Vec<u8>) -> Result<(), Failure>,
) -> Result<(), Failure> {
    loop {
        let mut line = Vec::new();
        let read = input
            .read_until(b'\n', &mut line)
            .map_err(|error| fail(EXIT_UNUSABLE, format!("cannot read stdin: {error}")))?;
        if read == 0 {
            return Ok(());
        }
        if line.last() == Some(&b'\n') {
            line.pop();
        }
        submit(line)?;
    }
}

/// A generated payload: its index, then bytes derived from it.
fn generated_payload(index: u64, size: usize) -> Vec<u8> {
    let mut payload = Vec::with_capacity(size);
    let mut state = index.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    while payload.len() < size {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        payload.extend_from_slice(&state.to_le_bytes());
    }
    payload.truncate(size);
    payload
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_split_on_newline_only() {
        let mut payloads = Vec::new();
        let mut input: &[u8] = b"a\r\n\nlast";
        read_lines(&mut input, &mut |payload| {
            payloads.push(payload);
            Ok(())
        })
        .ok()
        .expect("reads");
        assert_eq!(
            payloads,
            vec![b"a\r".to_vec(), Vec::new(), b"last".to_vec()]
        );
    }
}
