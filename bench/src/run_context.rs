//! What every section of a run shares and which sections run: the run's context (what the
//! arguments asked for, the durations, the scratch directory or device, the ring shapes and
//! the drive options), and `--section`'s choice. The sections take the context rather than the
//! parsed arguments, so that none of them imports the crate's root.

use std::path::{Path, PathBuf};
use std::time::Duration;

use sealog::{DriveOptions, Durability};

use crate::cells::RingShape;

/// What every section of a run shares: the arguments, durations and ring shapes.
pub struct RunContext<'a> {
    /// A subset in about a minute (`--quick`).
    pub quick: bool,
    /// The block device measured instead of a file system (`--device`).
    pub device: Option<&'a Path>,
    /// The sealog cells `--cell` named (empty: the quick set, or the full grid).
    pub cells: &'a [(usize, usize, usize)],
    /// How long the drive thread spins for completions before it blocks, microseconds (the
    /// raw ceilings wait for theirs the same way).
    pub spin_us: u64,
    /// The durability `--durability` named (`None`: the ring's choice).
    pub durability: Option<Durability>,
    /// The options of the sealog rings the cells (and the single-writer rounds) open.
    pub drive_options: DriveOptions,
    /// The run's scratch directory (removed at the end).
    pub scratch: &'a Path,
    /// Leave the rings in place (`--keep-rings`).
    pub keep_rings: bool,
    /// Seconds measured per cell.
    pub seconds: f64,
    /// The same, as a duration.
    pub duration: Duration,
    /// The warm-up before each cell: a fifth of it.
    pub warmup: Duration,
    /// The block device's size, with `--device`.
    pub device_bytes: Option<u64>,
    /// The sealog cells' rings (the sync method is the ceiling ring's choice).
    pub shape: RingShape,
    /// The full ring's size (recovery, cold reads, catch-up).
    pub full_ring_bytes: u64,
}

impl RunContext<'_> {
    /// Where a ring named `name` goes: the device, or a directory in the scratch directory.
    pub fn ring_path(&self, name: &str) -> PathBuf {
        self.device
            .map_or_else(|| self.scratch.join(name), Path::to_path_buf)
    }

    /// Removes a directory ring when done with it (never a device).
    pub fn remove_ring(&self, ring: &Path) {
        if self.device.is_none() && !self.keep_rings {
            let _ = std::fs::remove_dir_all(ring);
        }
    }
}

/// The parts of a run `--section` selects (all of them when it is not given).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Section {
    /// The write ceilings, sealog's append cells, tail markers, and (with `--features peers`)
    /// the peers' cells and the single-writer rounds.
    Write,
    /// LogDrive writes (one writer, one in flight; 8 writers x 32 in flight on one LogDrive
    /// and over 1,000), reads (cached and cold) and weak_tail (K = 64 and 4,096), beside the
    /// raw engine's appends and reads in interleaved rounds.
    Logdrive,
    /// Tail reads beside a writer, cold point reads and the catch-up iterator, with their
    /// ceilings (built-in and fio's).
    Read,
    /// Open times of rings of 256 MiB, 1 GiB and 4 GiB holding a small live region, and of a
    /// full 1 GiB ring (the recovery figure).
    Open,
    /// AtomicLogs over one LogDrive, a quorum of three, a stripe of two and a stripe of two
    /// quorums, at 1 and 256 in flight, beside LogDrive writes and the raw engine's appends on
    /// the same three rings, in interleaved rounds.
    Compose,
    /// sealog as openraft's log store: appends through `RaftLogStorage` (1, 16 and 256 in
    /// flight over 1 and 1,000 groups) and a three-node key-value cluster's client writes,
    /// beside raft-engine's store (`--features peers`) and the in-memory store.
    Raft,
    /// The replicated log of `sealog-server` (a sequencer and three LogDrive servers over
    /// gRPC on loopback), with TLS and without, one and two quorum groups, beside the
    /// AtomicLog over a local quorum and the raw engine's append, at 1 and 256 in flight.
    Server,
}

/// Which sections run.
#[derive(Clone, Copy, Debug)]
pub struct Sections {
    /// The write section (ceilings, sealog's cells, tail markers, peers).
    pub write: bool,
    /// The LogDrive section.
    pub logdrive: bool,
    /// The read section.
    pub read: bool,
    /// The open section.
    pub open: bool,
    /// The composition section.
    pub compose: bool,
    /// The raft section.
    pub raft: bool,
    /// The server section.
    pub server: bool,
}

impl Sections {
    /// The sections named, or all when none is.
    pub fn of(named: &[Section]) -> Sections {
        let all = named.is_empty();
        Sections {
            write: all || named.contains(&Section::Write),
            logdrive: all || named.contains(&Section::Logdrive),
            read: all || named.contains(&Section::Read),
            open: all || named.contains(&Section::Open),
            compose: all || named.contains(&Section::Compose),
            raft: all || named.contains(&Section::Raft),
            server: all || named.contains(&Section::Server),
        }
    }

    /// Their names, for the JSON.
    pub fn names(self) -> Vec<&'static str> {
        [
            (self.write, "write"),
            (self.logdrive, "logdrive"),
            (self.compose, "compose"),
            (self.read, "read"),
            (self.open, "open"),
            (self.raft, "raft"),
            (self.server, "server"),
        ]
        .into_iter()
        .filter_map(|(on, name)| on.then_some(name))
        .collect()
    }
}
