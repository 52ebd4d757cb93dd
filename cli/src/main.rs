//! `sealog`, the operator CLI: format a ring, append to it from stdin, dump and verify it,
//! trim it, inspect it, show its shape (`stat`, which takes no lock). Its contract (arguments,
//! output, exit codes) is what scripts and tests rely on: 0 success; 2 usage error, a path that
//! is not a usable ring, or an I/O error; 3 corruption of acknowledged data or an ambiguous
//! state; 1 any other failure. Errors are one sentence on stderr naming the path; never a panic
//! or a backtrace.
//!
//! A ring in use (`docs/cli.md`): every subcommand but `stat` takes the ring's lock before it
//! looks at the ring (format, append and trim the exclusive one, dump, verify and inspect the
//! shared one) and waits up to 5 seconds for another holder to let go; if another process still
//! holds the ring then, it exits 1 with one sentence on stderr that names the ring's path and
//! says the ring is in use, and nothing of the ring has been changed (format alike, with or
//! without `--force`).

#![forbid(unsafe_code)]

mod logdrive;
mod progress;

use std::io::{self, BufRead, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use sealog::reader::RingReader;
use sealog::{
    AppendError, Drive, DriveOptions, FormatError, FormatOptions, OpenError, RingPurpose,
    Signature, SyncChoice, SyncMethod, TrimError,
};
use sealog_wal::format::SegmentDefect;
use sealog_wal::{Outcome, RecoveryReport, ReplayError, ReplayOptions, ScanPolicy};

/// Exit status for usage errors, unusable rings and I/O errors.
const EXIT_UNUSABLE: u8 = 2;
/// Exit status for corruption of acknowledged data.
const EXIT_CORRUPT: u8 = 3;
/// Exit status for any other failure, a ring in use among them.
const EXIT_OTHER: u8 = 1;

#[derive(Parser)]
#[command(name = "sealog", version, about = "Operate sealog rings")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// A sync method on the command line: `auto` leaves the choice to the ring (at format: measure
/// the device; at append: what format recorded).
#[derive(Clone, Copy, ValueEnum)]
enum SyncArg {
    Auto,
    Fdatasync,
    Dsync,
}

impl SyncArg {
    /// The method named, or `None` for `auto`.
    fn method(self) -> Option<SyncMethod> {
        match self {
            SyncArg::Auto => None,
            SyncArg::Fdatasync => Some(SyncMethod::Fdatasync),
            SyncArg::Dsync => Some(SyncMethod::Dsync),
        }
    }
}

#[derive(Subcommand)]
enum Command {
    /// Create a ring: PATH is a directory (created) or a block device.
    Format {
        path: PathBuf,
        /// Total size in bytes; K, M, G, T or KiB, MiB, GiB, TiB (any case) are powers of 1024.
        #[arg(long, value_parser = parse_size)]
        size: u64,
        /// Segment size in bytes; default 64 MiB or size/4, whichever is smaller (with
        /// `--logdrive`, an eighth of the size, from 256 KiB to 64 MiB).
        #[arg(long, value_parser = parse_size)]
        segment_size: Option<u64>,
        /// Plan the ring for a LogDrive store (segments, batches) and mark it as holding one;
        /// a size or segment size too small for the store's reserves is refused.
        #[arg(long)]
        logdrive: bool,
        /// Format a directory that is not empty.
        #[arg(long)]
        force: bool,
        /// The ring's default durability: `auto` times a write + linked fdatasync against a
        /// write with RWF_DSYNC on the device (about 0.1 s) and keeps the fdatasync unless
        /// RWF_DSYNC is clearly faster at both p50 and p99; a method records it unmeasured.
        #[arg(long, value_enum, default_value = "auto")]
        sync_method: SyncArg,
        /// Format a block device that carries this signature (ext4, xfs, btrfs, swap, lvm2,
        /// mbr, gpt, sealog); repeat for each one found. A mounted or partitioned device is
        /// refused whatever is named.
        #[arg(long, value_name = "SIGNATURE", value_parser = parse_signature)]
        overwrite: Vec<Signature>,
    },
    /// Append one payload per stdin line; print each LSN once it is durable.
    Append {
        path: PathBuf,
        /// `auto`: the method the ring recorded at format time; a method overrides it.
        #[arg(long, value_enum, default_value = "auto")]
        durability: SyncArg,
        /// Generate this many payloads instead of reading stdin.
        #[arg(long, requires = "size")]
        count: Option<u64>,
        /// Size of each generated payload.
        #[arg(long, value_parser = parse_size, requires = "count")]
        size: Option<u64>,
    },
    /// Print every recovered entry.
    Dump {
        path: PathBuf,
        /// Start at this LSN.
        #[arg(long)]
        from: Option<u64>,
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// Read the whole ring (a full scan, whatever the tail hint says) and print the recovery
    /// report.
    Verify {
        path: PathBuf,
        /// One JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Release every entry with LSN at or below --upto.
    Trim {
        path: PathBuf,
        #[arg(long)]
        upto: u64,
    },
    /// Print the log's shape (first live, trim and next LSN, live entries, capacity and
    /// occupancy, who holds the ring) without taking the ring's lock: it works while a writer
    /// holds the ring, and its figures may be a moment old.
    Stat {
        path: PathBuf,
        /// One JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Print the geometry, segments, incarnation, sync method (and why), device cache and where
    /// the next batch goes.
    Inspect {
        path: PathBuf,
        /// One JSON object.
        #[arg(long)]
        json: bool,
    },
}

/// Parses `4096`, `64K`, `8M`, `1G` (powers of 1024).
fn parse_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    // Powers of 1024 whichever way they are written: `K` and `KiB` (any case) alike.
    const SUFFIXES: [(&str, u32); 8] = [
        ("kib", 10),
        ("mib", 20),
        ("gib", 30),
        ("tib", 40),
        ("k", 10),
        ("m", 20),
        ("g", 30),
        ("t", 40),
    ];
    let lower = text.to_ascii_lowercase();
    let (digits, shift) = SUFFIXES
        .iter()
        .find_map(|(suffix, shift)| {
            lower
                .strip_suffix(suffix)
                .map(|digits| (&text[..digits.len()], *shift))
        })
        .unwrap_or((text, 0));
    let value: u64 = digits.trim().parse().map_err(|_| {
        format!("'{text}' is not a size in bytes (a number, with K, M, G, T or KiB, MiB, GiB, TiB)")
    })?;
    value
        .checked_mul(1u64 << shift)
        .ok_or_else(|| format!("'{text}' is too large"))
}

/// Parses a signature's name, as `--overwrite` takes it.
fn parse_signature(text: &str) -> Result<Signature, String> {
    Signature::from_name(text).ok_or_else(|| {
        let names: Vec<&str> = Signature::ALL.iter().map(|s| s.name()).collect();
        format!(
            "'{text}' is not a signature format knows ({})",
            names.join(", ")
        )
    })
}

/// A failure with its exit status and one sentence.
struct Failure {
    status: u8,
    message: String,
}

fn fail(status: u8, message: impl std::fmt::Display) -> Failure {
    Failure {
        status,
        message: message.to_string(),
    }
}

fn open_failure(error: OpenError) -> Failure {
    match &error {
        OpenError::Corrupt { .. } => fail(EXIT_CORRUPT, error),
        OpenError::Locked { .. } => fail(EXIT_OTHER, error),
        _ => fail(EXIT_UNUSABLE, error),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Format {
            path,
            size,
            segment_size,
            force,
            sync_method,
            overwrite,
            logdrive,
        } => format_ring(
            &path,
            logdrive,
            FormatOptions {
                size_bytes: size,
                segment_size_bytes: segment_size,
                force,
                sync_method: sync_method.method(),
                overwrite,
                ..FormatOptions::default()
            },
        ),
        Command::Append {
            path,
            durability,
            count,
            size,
        } => append(&path, durability, count, size),
        Command::Dump { path, from, json } => dump(&path, from, json),
        Command::Verify { path, json } => verify(&path, json),
        Command::Trim { path, upto } => trim(&path, upto),
        Command::Inspect { path, json } => inspect(&path, json),
        Command::Stat { path, json } => stat(&path, json),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("sealog: {}", failure.message);
            ExitCode::from(failure.status)
        }
    }
}

/// Formats the ring `options` ask for; with `logdrive`, one the LogDrive planner shapes for a
/// store, checked once made and described after the usual report.
fn format_ring(path: &Path, logdrive: bool, options: FormatOptions) -> Result<(), Failure> {
    let options = if logdrive {
        logdrive::plan(path, options)?
    } else {
        options
    };
    let control = run_format(path, options)?;
    let geometry = control.geometry;
    if logdrive {
        logdrive::check_made(path, &geometry)?;
    }
    println!(
        "formatted {}: ring {} with {} segments of {} bytes, {}-byte blocks, payloads up to {} \
         bytes",
        path.display(),
        control.ring_id,
        geometry.segment_count,
        geometry.segment_size_bytes,
        geometry.block_size_bytes,
        geometry.payload_size_max_bytes()
    );
    println!(
        "sync method: {}",
        sealog::sync_probe::explain(&control.sync)
    );
    if logdrive {
        println!("holds: {}", purpose_sentence(control.purpose));
        println!("logdrive: {}", logdrive::describe(&geometry));
    }
    Ok(())
}

/// Runs the engine's format with a progress line on a terminal, mapping its errors to exit
/// statuses.
fn run_format(path: &Path, options: FormatOptions) -> Result<sealog::ControlBlock, Failure> {
    let progress = progress::Progress::on_terminal("formatting");
    let options = match &progress {
        Some(progress) => {
            let progress = progress.clone();
            options.progress(move |done, total| progress.show(done, total))
        }
        None => options,
    };
    let formatted = sealog::format(path, &options);
    if let Some(progress) = progress {
        progress.finish();
    }
    // A device that is mounted, partitioned or carries a signature is, as it stands, not a
    // usable place for a ring: exit 2, as a directory that is not empty is.
    formatted.map_err(|error| match error {
        FormatError::InUse { .. } => fail(EXIT_OTHER, error),
        FormatError::Io { .. }
        | FormatError::SyncProbe { .. }
        | FormatError::NotEmpty { .. }
        | FormatError::TooSmall { .. }
        | FormatError::DeviceTooSmall { .. }
        | FormatError::Geometry { .. }
        | FormatError::Mounted { .. }
        | FormatError::Held { .. }
        | FormatError::Partitioned { .. }
        | FormatError::Signature { .. } => fail(EXIT_UNUSABLE, error),
    })
}

fn append(
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
    let limit = u64::from(drive.geometry().payload_size_max_bytes());
    // Tickets go from the submitting thread to this one, which prints LSNs in order as they
    // become durable; the bounded channel keeps the number in flight bounded.
    let (sender, receiver) = std::sync::mpsc::sync_channel::<sealog::Ticket>(4096);
    let outcome = std::thread::scope(|scope| {
        let submitter = scope.spawn(|| -> Result<(), Failure> {
            let sender = sender;
            let mut submit = |payload: Vec<u8>| -> Result<(), Failure> {
                if payload.len() as u64 > limit {
                    return Err(fail(
                        EXIT_OTHER,
                        format!(
                            "{}: payload of {} bytes is over the ring's limit of {limit}; \
                             nothing of it was written",
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
        });
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
        let submitted = submitter
            .join()
            .unwrap_or_else(|_| Err(fail(EXIT_OTHER, "submitter panicked")));
        printed.and(submitted)
    });
    drive.close();
    outcome
}

/// An append's failure: an I/O error that stopped the drive is exit 2, anything else 1.
fn append_failure(path: &Path, error: AppendError) -> Failure {
    let status = match error {
        AppendError::Failed(_) => EXIT_UNUSABLE,
        _ => EXIT_OTHER,
    };
    fail(status, format!("{}: {error}", path.display()))
}

/// A trim's failure: an I/O error that stopped the drive is exit 2, anything else 1.
fn trim_failure(path: &Path, error: TrimError) -> Failure {
    let status = match error {
        TrimError::Failed(_) => EXIT_UNUSABLE,
        _ => EXIT_OTHER,
    };
    fail(status, format!("{}: {error}", path.display()))
}

/// Splits `input` on `\n` only: raw bytes (a `\r` is kept), an empty line is an empty payload,
/// and a last line without a newline is a payload too.
fn read_lines(
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

fn escape(payload: &[u8]) -> String {
    payload.escape_ascii().to_string()
}

fn hex(payload: &[u8]) -> String {
    payload.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// Replays the ring read-only, with the tail hint or (`scan` full) over the whole ring; the
/// visitor sees entries up to the first problem.
fn replay_read_only(
    path: &Path,
    scan: ScanPolicy,
    visit: &mut dyn FnMut(&sealog_wal::Entry<'_>),
) -> Result<Result<RecoveryReport, ReplayError>, Failure> {
    replay_read_only_with(path, scan, None, visit)
}

/// [`replay_read_only`], showing the bytes read on `progress` when there is one.
fn replay_read_only_with(
    path: &Path,
    scan: ScanPolicy,
    progress: Option<progress::Progress>,
    visit: &mut dyn FnMut(&sealog_wal::Entry<'_>),
) -> Result<Result<RecoveryReport, ReplayError>, Failure> {
    let reader = RingReader::open(path).map_err(open_failure)?;
    let options = ReplayOptions {
        scan,
        ..ReplayOptions::default()
    };
    let mut source = progress::Counted::new(reader, progress);
    Ok(sealog_wal::replay(&mut source, &options, visit))
}

fn replay_failure(path: &Path, error: ReplayError) -> Failure {
    match error {
        ReplayError::Corruption(_) => fail(EXIT_CORRUPT, format!("{}: {error}", path.display())),
        _ => fail(EXIT_UNUSABLE, format!("{}: {error}", path.display())),
    }
}

fn dump(path: &Path, from: Option<u64>, json: bool) -> Result<(), Failure> {
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

fn json_or_null(value: Option<u64>) -> String {
    value.map_or_else(|| "null".to_string(), |value| value.to_string())
}

/// One line of `dump --json` (docs/cli.md, "JSON").
#[derive(serde::Serialize)]
struct DumpLine {
    lsn: u64,
    len: usize,
    payload_hex: String,
}

/// `verify --json` (docs/cli.md, "JSON"): `torn` and `corruption` only when present.
#[derive(serde::Serialize)]
struct VerifyJson {
    status: &'static str,
    first_lsn: Option<u64>,
    last_lsn: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    next_lsn: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    torn: Option<TornJson>,
    #[serde(skip_serializing_if = "Option::is_none")]
    corruption: Option<CorruptionJson>,
}

#[derive(serde::Serialize)]
struct TornJson {
    first_lsn: u64,
    last_lsn: u64,
    bytes: u64,
}

#[derive(serde::Serialize)]
struct CorruptionJson {
    segment: u32,
    offset: u32,
    lsn: u64,
    check: String,
}

fn verify(path: &Path, json: bool) -> Result<(), Failure> {
    let mut first = None;
    let mut last = None;
    // Verify is the ring's integrity check: it reads the whole ring, not only as far as the
    // tail hint says the log can reach, so damage anywhere is looked at (an open stops at
    // the hint; `dump` too).
    let progress = progress::Progress::on_terminal("verifying");
    let result = replay_read_only_with(path, ScanPolicy::Full, progress.clone(), &mut |entry| {
        first.get_or_insert(entry.lsn);
        last = Some(entry.lsn);
    });
    if let Some(progress) = progress {
        progress.finish();
    }
    match result? {
        Ok(report) => {
            let status = match report.outcome {
                Outcome::Clean => "clean",
                Outcome::TornTail => "torn_tail",
                // Verify replays strictly, so neither is reached; both name damage to
                // acknowledged data.
                Outcome::Truncated | Outcome::Quarantined => "corrupt",
            };
            if json {
                let verified = VerifyJson {
                    status,
                    first_lsn: report.first_lsn,
                    last_lsn: report.last_lsn,
                    next_lsn: Some(report.next_lsn),
                    torn: report.torn.map(|torn| TornJson {
                        first_lsn: torn.first_lsn,
                        last_lsn: torn.last_lsn,
                        bytes: torn.bytes,
                    }),
                    corruption: None,
                };
                print_json(&verified);
            } else {
                print_verified(path, status, &report);
            }
            Ok(())
        }
        Err(ReplayError::Corruption(corruption)) => {
            if json {
                print_json(&VerifyJson {
                    status: "corrupt",
                    first_lsn: first,
                    last_lsn: last,
                    next_lsn: None,
                    torn: None,
                    corruption: Some(CorruptionJson {
                        segment: corruption.position.segment,
                        offset: corruption.position.offset,
                        lsn: corruption.lsn,
                        check: corruption.check.to_string(),
                    }),
                });
            } else {
                println!("{}: corrupt", path.display());
                println!("{corruption}");
            }
            Err(fail(
                EXIT_CORRUPT,
                format!(
                    "{}: acknowledged data is corrupt at LSN {}",
                    path.display(),
                    corruption.lsn
                ),
            ))
        }
        Err(error) => Err(replay_failure(path, error)),
    }
}

/// Prints `value` as one line of JSON.
fn print_json(value: &impl serde::Serialize) {
    println!("{}", json_line(value));
}

/// `value` as one line of JSON spaced as the contract shows it and as these commands always
/// wrote it (`{"lsn": 4, "len": 7}`), so that scripts matching the text keep working.
fn json_line(value: &impl serde::Serialize) -> String {
    let mut serializer = serde_json::Serializer::with_formatter(Vec::new(), SpacedLine);
    value
        .serialize(&mut serializer)
        .expect("the CLI's JSON structs serialize");
    String::from_utf8(serializer.into_inner()).expect("serde_json writes UTF-8")
}

/// serde_json's compact formatter with a space after each `:` and `,`, on one line.
struct SpacedLine;

impl serde_json::ser::Formatter for SpacedLine {
    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> io::Result<()> {
        if first {
            Ok(())
        } else {
            writer.write_all(b", ")
        }
    }

    fn begin_object_value<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        writer.write_all(b": ")
    }

    fn begin_array_value<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> io::Result<()> {
        if first {
            Ok(())
        } else {
            writer.write_all(b", ")
        }
    }
}

/// `verify`'s plain report of a ring that replays.
fn print_verified(path: &Path, status: &str, report: &RecoveryReport) {
    println!("{}: {status}", path.display());
    println!(
        "live LSNs {}..={}, next LSN {} at {}, {} entries in {} batches",
        json_or_null(report.first_lsn),
        json_or_null(report.last_lsn),
        report.next_lsn,
        report.next_position,
        report.entries,
        report.batches
    );
    println!("{} ({} bytes read)", report.scan, report.bytes_read);
    if let Some(torn) = report.torn {
        println!(
            "torn tail (never acknowledged) cut at {}: LSN {}..={}, {} bytes ({})",
            torn.start, torn.first_lsn, torn.last_lsn, torn.bytes, torn.check
        );
    }
}

fn trim(path: &Path, upto: u64) -> Result<(), Failure> {
    let drive = Drive::open(path, DriveOptions::default()).map_err(open_failure)?;
    let result = drive.trim(upto).map_err(|error| trim_failure(path, error));
    drive.close();
    result?;
    println!("trimmed {} up to LSN {upto}", path.display());
    Ok(())
}

/// What `stat` prints: the log's shape as the ring shows it, with no lock taken.
#[derive(serde::Serialize)]
struct StatJson {
    path: String,
    kind: &'static str,
    ring_id: String,
    first_live_lsn: u64,
    trim_lsn: u64,
    last_lsn: Option<u64>,
    next_lsn: u64,
    live_entries: u64,
    payload_bytes: u64,
    batches: u64,
    capacity_bytes: u64,
    occupied_bytes: u64,
    torn_tail: bool,
    writer_pid: Option<u32>,
    reader_pids: Vec<u32>,
    control_sequence: u64,
    incarnation: u32,
    purpose: &'static str,
    scan_bytes_read: u64,
    consistent: bool,
    snapshot: &'static str,
}

/// What `stat` says of its figures, in plain and JSON output alike.
const STAT_SNAPSHOT: &str = "may be a moment old";

fn stat(path: &Path, json: bool) -> Result<(), Failure> {
    let stat = sealog::stat::stat(path).map_err(|error| match error {
        sealog::stat::StatError::Open(error) => open_failure(error),
        sealog::stat::StatError::Replay { source, .. } => replay_failure(path, source),
    })?;
    let shown = StatJson {
        path: path.display().to_string(),
        kind: kind_json(stat.kind),
        ring_id: stat.ring_id.to_string(),
        first_live_lsn: stat.first_live_lsn,
        trim_lsn: stat.trim_lsn,
        last_lsn: stat.last_lsn,
        next_lsn: stat.next_lsn,
        live_entries: stat.live_entries,
        payload_bytes: stat.payload_bytes,
        batches: stat.batches,
        capacity_bytes: stat.capacity_bytes,
        occupied_bytes: stat.occupied_bytes,
        torn_tail: stat.torn_tail,
        writer_pid: stat.holders.writer_pid,
        reader_pids: stat.holders.reader_pids.clone(),
        control_sequence: stat.control_sequence,
        incarnation: stat.incarnation,
        purpose: stat.purpose.name(),
        scan_bytes_read: stat.bytes_read,
        consistent: false,
        snapshot: STAT_SNAPSHOT,
    };
    if json {
        print_json(&shown);
        return Ok(());
    }
    println!("path: {} (ring {})", shown.path, shown.ring_id);
    println!("holds: {}", purpose_sentence(stat.purpose));
    println!(
        "LSNs: first live {}, trim {}, last {}, next {}",
        shown.first_live_lsn,
        shown.trim_lsn,
        json_or_null(shown.last_lsn),
        shown.next_lsn
    );
    println!(
        "live entries: {} ({} payload bytes) in {} batches",
        shown.live_entries, shown.payload_bytes, shown.batches
    );
    let percent = shown.occupied_bytes as f64 * 100.0 / shown.capacity_bytes.max(1) as f64;
    println!(
        "occupied: {} of {} bytes ({percent:.1}%) from the head to the write position",
        shown.occupied_bytes, shown.capacity_bytes
    );
    match shown.writer_pid {
        Some(pid) => println!("writer: process {pid} holds the ring"),
        None => println!("writer: none holds the ring"),
    }
    println!(
        "snapshot: read without the ring's lock; the figures {STAT_SNAPSHOT}{}",
        if shown.torn_tail {
            " (a batch at the end was torn or still being written, and is not counted)"
        } else {
            ""
        }
    );
    Ok(())
}

/// What a ring holds, in the plain reports' words.
fn purpose_sentence(purpose: RingPurpose) -> &'static str {
    match purpose {
        RingPurpose::Log => "a plain log (log)",
        RingPurpose::LogDriveStore => {
            "a LogDrive store's records (logdrive_store): the store's reclaimer owns the head"
        }
    }
}

fn kind_json(kind: sealog::storage::RingKind) -> &'static str {
    match kind {
        sealog::storage::RingKind::BlockDevice => "block_device",
        sealog::storage::RingKind::Directory => "directory",
    }
}

fn inspect(path: &Path, json: bool) -> Result<(), Failure> {
    let mut reader = RingReader::open(path).map_err(open_failure)?;
    let control =
        sealog_wal::read_control(&mut reader).map_err(|error| replay_failure(path, error))?;
    let headers = reader.segment_headers().map_err(|error| {
        fail(
            EXIT_UNUSABLE,
            format!("{}: cannot read segment headers: {error}", path.display()),
        )
    })?;
    let kind = reader.files().kind;
    let cache = reader.files().cache.clone();
    let mut source = reader;
    let next = sealog_wal::scan(&mut source, &ReplayOptions::default());
    let open_to_others = open_to_others(path, kind);
    for (path, mode) in &open_to_others {
        eprintln!(
            "sealog: warning: {} is open to others than its owner (mode {mode:04o}); a ring \
             holds whatever its log servers were handed: chmod {:04o} it",
            path.display(),
            if path.is_dir() {
                sealog::storage::RING_DIRECTORY_MODE
            } else {
                sealog::storage::RING_FILE_MODE
            }
        );
    }
    let inspected = Inspected {
        path,
        kind,
        control,
        cache,
        headers,
        next,
        open_to_others,
    };
    if json {
        println!("{}", inspected.to_json());
    } else {
        inspected.print();
    }
    Ok(())
}

/// What `inspect` found, printed as lines or as one JSON object.
struct Inspected<'a> {
    path: &'a Path,
    kind: sealog::storage::RingKind,
    control: sealog_wal::ControlBlock,
    cache: Option<sealog::io::CacheInfo>,
    headers: Vec<Result<sealog_wal::SegmentHeader, SegmentDefect>>,
    next: Result<RecoveryReport, ReplayError>,
    /// The ring's paths that group or other may read or write, with their modes.
    open_to_others: Vec<(PathBuf, u32)>,
}

/// The ring's paths (the device; or the directory and every file in it) whose permission bits
/// let group or other in, with their modes.
fn open_to_others(path: &Path, kind: sealog::storage::RingKind) -> Vec<(PathBuf, u32)> {
    use std::os::unix::fs::PermissionsExt;
    let mut paths = vec![path.to_path_buf()];
    if kind == sealog::storage::RingKind::Directory {
        if let Ok(entries) = std::fs::read_dir(path) {
            let mut files: Vec<PathBuf> = entries.flatten().map(|entry| entry.path()).collect();
            files.sort();
            paths.extend(files);
        }
    }
    paths
        .into_iter()
        .filter_map(|path| {
            let mode = std::fs::metadata(&path).ok()?.permissions().mode() & 0o7777;
            sealog::storage::open_to_others(mode).then_some((path, mode))
        })
        .collect()
}

impl Inspected<'_> {
    fn kind_name(&self) -> &'static str {
        match self.kind {
            sealog::storage::RingKind::BlockDevice => "block device",
            sealog::storage::RingKind::Directory => "directory of segment files",
        }
    }

    fn print(&self) {
        let control = &self.control;
        let geometry = control.geometry;
        println!("path: {} ({})", self.path.display(), self.kind_name());
        println!("ring id: {}", control.ring_id);
        println!("format version: {}", sealog_wal::format::FORMAT_VERSION);
        println!("holds: {}", purpose_sentence(control.purpose));
        println!(
            "geometry: {} segments of {} bytes, {}-byte blocks, {} bytes in all",
            geometry.segment_count,
            geometry.segment_size_bytes,
            geometry.block_size_bytes,
            geometry.ring_size_bytes().unwrap_or(0)
        );
        println!(
            "batches: up to {} bytes; payloads up to {} bytes; in flight: {} batches / {} bytes",
            geometry.batch_size_max_bytes,
            geometry.payload_size_max_bytes(),
            geometry.window_batches_max,
            geometry.window_bytes_max
        );
        println!(
            "incarnation: {} (control sequence {})",
            control.incarnation, control.sequence
        );
        println!(
            "trim: LSN {} (head at {}, LSN {})",
            control.trim_lsn, control.head, control.head_lsn
        );
        println!(
            "sync method: {}",
            sealog::sync_probe::explain(&control.sync)
        );
        println!(
            "tail hint: no batch of incarnation {} ends past {}",
            control.tail_hint.incarnation, control.tail_hint.limit
        );
        match &self.cache {
            Some(cache) => println!(
                "device write cache: {}; FUA: {}",
                cache.write_cache, cache.fua
            ),
            None => println!("device write cache: unknown"),
        }
        for (segment, header) in self.headers.iter().enumerate() {
            match header {
                Ok(header) => println!(
                    "segment {segment}: lap {}, first LSN {}, incarnation {}",
                    header.lap, header.first_lsn, header.incarnation
                ),
                Err(defect) => println!("segment {segment}: {}", segment_defect(*defect)),
            }
        }
        match &self.next {
            Ok(report) => println!(
                "next batch: {} (LSN {}); {}",
                report.next_position, report.next_lsn, report.scan
            ),
            Err(error) => println!("next batch: unknown ({error})"),
        }
    }

    fn to_json(&self) -> serde_json::Value {
        let control = &self.control;
        let geometry = control.geometry;
        let position = |position: sealog_wal::Position| {
            serde_json::json!({
                "lap": position.lap,
                "segment": position.segment,
                "offset": position.offset,
            })
        };
        let segments: Vec<serde_json::Value> = self
            .headers
            .iter()
            .enumerate()
            .map(|(segment, header)| match header {
                Ok(header) => serde_json::json!({
                    "segment": segment,
                    "state": "started",
                    "lap": header.lap,
                    "first_lsn": header.first_lsn,
                    "incarnation": header.incarnation,
                }),
                Err(SegmentDefect::Zeroed) => serde_json::json!({
                    "segment": segment,
                    "state": "not_started",
                }),
                Err(defect) => serde_json::json!({
                    "segment": segment,
                    "state": "damaged",
                    "defect": segment_defect(*defect),
                }),
            })
            .collect();
        serde_json::json!({
            "path": self.path.display().to_string(),
            "kind": kind_json(self.kind),
            "ring_id": control.ring_id.to_string(),
            "format_version": sealog_wal::format::FORMAT_VERSION,
            "purpose": control.purpose.name(),
            "geometry": {
                "block_size_bytes": geometry.block_size_bytes,
                "segment_size_bytes": geometry.segment_size_bytes,
                "segment_count": geometry.segment_count,
                "ring_size_bytes": geometry.ring_size_bytes(),
                "batch_size_max_bytes": geometry.batch_size_max_bytes,
                "payload_size_max_bytes": geometry.payload_size_max_bytes(),
                "window_batches_max": geometry.window_batches_max,
                "window_bytes_max": geometry.window_bytes_max,
            },
            "incarnation": control.incarnation,
            "control_sequence": control.sequence,
            "trim_lsn": control.trim_lsn,
            "head": position(control.head),
            "head_lsn": control.head_lsn,
            "sync": sync_json(&control.sync),
            "open_to_others": self
                .open_to_others
                .iter()
                .map(|(path, mode)| serde_json::json!({
                    "path": path.display().to_string(),
                    "mode": format!("{mode:04o}"),
                }))
                .collect::<Vec<_>>(),
            "tail_hint": {
                "limit": position(control.tail_hint.limit),
                "incarnation": control.tail_hint.incarnation,
            },
            "device": self.cache.as_ref().map(|cache| serde_json::json!({
                "write_cache": cache.write_cache,
                "fua": cache.fua,
            })),
            "segments": segments,
            "next": match &self.next {
                Ok(report) => serde_json::json!({
                    "position": position(report.next_position),
                    "lsn": report.next_lsn,
                    "scan": report.scan.name(),
                    "scan_bytes_read": report.bytes_read,
                }),
                Err(error) => serde_json::json!({ "error": error.to_string() }),
            },
        })
    }
}

/// The ring's sync choice for `inspect --json`: the method, how it was chosen, the sentence
/// the plain report prints, and the figures it was chosen on (null unless measured).
fn sync_json(sync: &SyncChoice) -> serde_json::Value {
    let source = match sync {
        SyncChoice::NotRecorded => "not_recorded",
        SyncChoice::Named(_) => "named",
        SyncChoice::Measured { .. } => "measured",
    };
    let measurement = sync.measurement().map(|m| {
        let gain = sealog::sync_probe::dsync_gain_percent;
        let mut object: serde_json::Map<String, serde_json::Value> =
            sealog::sync_probe::figures(&m)
                .into_iter()
                .map(|(name, value)| (name.to_string(), value.into()))
                .collect();
        object.insert("fua".into(), m.fua.into());
        let p50 = gain(m.dsync_p50_us, m.fdatasync_p50_us);
        let p99 = gain(m.dsync_p99_us, m.fdatasync_p99_us);
        object.insert("dsync_faster_p50_percent".into(), p50.into());
        object.insert("dsync_faster_p99_percent".into(), p99.into());
        object
    });
    serde_json::json!({
        "method": sync.method().name(),
        "source": source,
        "why": sealog::sync_probe::explain(sync),
        "measurement": measurement,
    })
}

/// What `inspect` says of a segment header that does not decode: only an all-zero header is a
/// segment never started; the others are damage.
fn segment_defect(defect: SegmentDefect) -> String {
    match defect {
        SegmentDefect::Zeroed => "not started".to_string(),
        SegmentDefect::Crc => {
            "header damaged (CRC mismatch: torn, overwritten, or another ring's)".to_string()
        }
        SegmentDefect::Version => format!(
            "header of another format version (this sealog reads version {})",
            sealog_wal::format::FORMAT_VERSION
        ),
        SegmentDefect::Magic => "no segment header (not zeros, and no segment magic)".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_binary_suffixes_either_way() {
        assert_eq!(parse_size("4096"), Ok(4096));
        for (text, bytes) in [
            ("64K", 64u64 << 10),
            ("64k", 64 << 10),
            ("64KiB", 64 << 10),
            ("64kib", 64 << 10),
            ("8M", 8 << 20),
            ("8MiB", 8 << 20),
            ("2G", 2 << 30),
            ("2GiB", 2 << 30),
            ("1 TiB", 1 << 40),
        ] {
            assert_eq!(parse_size(text), Ok(bytes), "{text}");
        }
        for text in ["x", "", "MiB", "8KB", "8 bytes", "-1K", "1.5G"] {
            assert!(parse_size(text).is_err(), "{text}");
        }
        assert!(parse_size("99999999999T").is_err(), "overflow");
    }

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
