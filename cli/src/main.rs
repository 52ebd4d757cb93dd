//! `sealog`, the operator CLI: format a ring, append to it from stdin, dump and verify it,
//! trim it, inspect it, show its shape (`stat`, which takes no lock), and look at and repair
//! the LogDrives of a ring that holds a store (`logdrive`). Its contract (arguments,
//! output, exit codes) is what scripts and tests rely on: 0 success; 2 usage error, a path that
//! is not a usable ring, or an I/O error; 3 corruption of acknowledged data or an ambiguous
//! state; 1 any other failure. Errors are one sentence on stderr naming the path; never a panic
//! or a backtrace.
//!
//! A ring in use (`docs/cli.md`): every subcommand but `stat` takes the ring's lock before it
//! looks at the ring (format, append, trim and the `logdrive` edits the exclusive one; dump,
//! verify, inspect and the read-only `logdrive` subcommands the shared one) and waits up to
//! 5 seconds for another holder to let go; if another process still holds the ring then, it
//! exits 1 with one sentence on stderr that names the ring's path and says the ring is in
//! use, and nothing of the ring has been changed (format alike, with or without `--force`).

#![forbid(unsafe_code)]

mod append;
mod describe;
mod dump;
mod failure;
mod format;
mod inspect;
mod json;
mod logdrive;
mod logdrive_check;
mod logdrive_edit;
mod logdrive_view;
mod progress;
mod read_only;
mod stat;
mod trim;
mod verify;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use sealog::{FormatOptions, Signature};

use crate::append::SyncArg;
use crate::logdrive_edit::Control;

#[derive(Parser)]
#[command(name = "sealog", version, about = "Operate sealog rings")]
struct Cli {
    #[command(subcommand)]
    command: Command,
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
    /// Look at the LogDrives of a ring that holds a LogDrive store.
    #[command(subcommand)]
    Logdrive(LogdriveCommand),
}

/// `sealog logdrive`: the read-only subcommands take the shared lock and write nothing.
#[derive(Subcommand)]
enum LogdriveCommand {
    /// Every LogDrive: id, generation, capacity, N, T, holes, seal, fence, trim point,
    /// records and bytes.
    Ls {
        path: PathBuf,
        #[command(flatten)]
        look: LookArgs,
    },
    /// One LogDrive in full: its damaged addresses and the oldest record it holds.
    Show {
        path: PathBuf,
        id: u64,
        #[command(flatten)]
        look: LookArgs,
    },
    /// What reads of ADDRESS (to --to, inclusive) answer.
    Read {
        path: PathBuf,
        id: u64,
        address: u64,
        /// The last address to read.
        #[arg(long)]
        to: Option<u64>,
        #[command(flatten)]
        look: LookArgs,
    },
    /// weakTail(K): N and the unwritten addresses in [N - K, N).
    WeakTail {
        path: PathBuf,
        id: u64,
        k: u64,
        #[command(flatten)]
        look: LookArgs,
    },
    /// Read every live record with its CRC, in quarantine, and list the damage by LogDrive
    /// and address; exit 3 when anything is damaged.
    Check {
        path: PathBuf,
        /// One JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Create LogDrive ID with addresses below --capacity.
    Create {
        path: PathBuf,
        id: u64,
        #[arg(long)]
        capacity: u64,
        #[command(flatten)]
        edit: EditArgs,
    },
    /// Delete LogDrive ID and everything it holds.
    Delete {
        path: PathBuf,
        id: u64,
        #[command(flatten)]
        edit: EditArgs,
    },
    /// Seal LogDrive ID at LENGTH: what it holds there and beyond is dropped.
    Seal {
        path: PathBuf,
        id: u64,
        length: u64,
        /// The sealer's epoch; by default the LogDrive's fence.
        #[arg(long)]
        epoch: Option<u64>,
        #[command(flatten)]
        edit: EditArgs,
    },
    /// Fence LogDrive ID at EPOCH: writes stamped lower are refused from now on.
    Fence {
        path: PathBuf,
        id: u64,
        epoch: u64,
        #[command(flatten)]
        edit: EditArgs,
    },
    /// Trim LogDrive ID below UPTO.
    Trim {
        path: PathBuf,
        id: u64,
        upto: u64,
        #[command(flatten)]
        edit: EditArgs,
    },
    /// The reclaimer's figures; with --run, after a run of its work now.
    Reclaim {
        path: PathBuf,
        #[arg(long)]
        run: bool,
        /// One JSON object.
        #[arg(long)]
        json: bool,
    },
}

#[derive(clap::Args)]
struct EditArgs {
    /// Do it, though it drops data (delete, seal, trim).
    #[arg(long)]
    yes: bool,
    /// One JSON object.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
struct LookArgs {
    /// Step over damaged records and list them, rather than refuse the ring (exit 3).
    #[arg(long)]
    quarantine: bool,
    /// JSON (`read`: one object a line).
    #[arg(long)]
    json: bool,
}

impl LookArgs {
    fn look(&self) -> logdrive_view::Look {
        logdrive_view::Look {
            quarantine: self.quarantine,
            json: self.json,
        }
    }
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

fn logdrive_command(command: LogdriveCommand) -> Result<(), failure::Failure> {
    match command {
        LogdriveCommand::Ls { path, look } => logdrive_view::ls(&path, look.look()),
        LogdriveCommand::Show { path, id, look } => logdrive_view::show(&path, id, look.look()),
        LogdriveCommand::Read {
            path,
            id,
            address,
            to,
            look,
        } => logdrive_view::read(&path, id, (address, to), look.look()),
        LogdriveCommand::WeakTail { path, id, k, look } => {
            logdrive_view::weak_tail(&path, id, k, look.look())
        }
        LogdriveCommand::Check { path, json } => logdrive_check::check(&path, json),
        LogdriveCommand::Reclaim { path, run, json } => logdrive_edit::reclaim(&path, run, json),
        LogdriveCommand::Create {
            path,
            id,
            capacity,
            edit,
        } => logdrive_edit::create(&path, id, capacity, edit.json),
        LogdriveCommand::Delete { path, id, edit } => {
            logdrive_edit::delete(&path, id, edit.yes, edit.json)
        }
        LogdriveCommand::Seal {
            path,
            id,
            length,
            epoch,
            edit,
        } => edit.control(&path, id, Control::Seal { length, epoch }),
        LogdriveCommand::Fence {
            path,
            id,
            epoch,
            edit,
        } => edit.control(&path, id, Control::Fence { epoch }),
        LogdriveCommand::Trim {
            path,
            id,
            upto,
            edit,
        } => edit.control(&path, id, Control::Trim { upto }),
    }
}

impl EditArgs {
    fn control(&self, path: &Path, id: u64, control: Control) -> Result<(), failure::Failure> {
        logdrive_edit::control(path, id, control, (self.yes, self.json))
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
        } => format::format_ring(
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
        } => append::append(&path, durability, count, size),
        Command::Dump { path, from, json } => dump::dump(&path, from, json),
        Command::Verify { path, json } => verify::verify(&path, json),
        Command::Trim { path, upto } => trim::trim(&path, upto),
        Command::Inspect { path, json } => inspect::inspect(&path, json),
        Command::Stat { path, json } => stat::stat(&path, json),
        Command::Logdrive(command) => logdrive_command(command),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("sealog: {}", failure.message);
            ExitCode::from(failure.status)
        }
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
}
