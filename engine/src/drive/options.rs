//! How a drive is opened: [`DriveOptions`] with its builders, what an append does when the
//! ring is full ([`WhenFull`]), the options' defaults and the limits an open checks them
//! against. How appends are made durable ([`Durability`]) is the I/O seam's type, beside the
//! write flag it decides ([`crate::io`]).

use std::path::Path;
use std::time::Duration;

use sealog_wal::format::RingPurpose;
use sealog_wal::{RecoveryMode, ScanPolicy};

use crate::error::OpenError;
use crate::io::Durability;
use crate::ticket::CLIENT_SPIN_US_DEFAULT;

/// What an append does when the ring is full (the embedder has not trimmed).
///
/// The ring is full when the next batch has no room before the head (the oldest live batch).
/// Appends already in a batch on the device are never affected: they are acknowledged as
/// usual. What happens to the appends still queued, and to those that arrive while the ring
/// stays full, is the policy's:
///
/// - [`WhenFull::Fail`]: every queued append fails at once with
///   [`AppendError::RingFull`](crate::AppendError::RingFull), and so does every append that arrives
///   until a trim makes room. None of them took an LSN (`RingFull::next_lsn` is the LSN the first
///   would have taken, the durable tail plus one). So for a writer that pipelines, the acknowledged
///   appends are a prefix of what it sent and the failed ones the rest: it keeps its tickets in
///   order, and after a trim resends exactly those whose ticket says `RingFull`, in order, never
///   one that was acknowledged. (Appends sent after a trim may be acknowledged before a resend: a
///   writer that needs its order kept stops sending at its first `RingFull` until it has resent.)
/// - [`WhenFull::Wait`]: queued appends wait, in arrival order, for a trim to make room;
///   each fails with `RingFull` once it has waited its own duration since it was made, the
///   oldest first, so the appends that fail are always the oldest still queued and those
///   behind them keep their order. When a trim makes room, the queue goes on in order.
///
/// Either way no append is ever written twice or out of order, and a group (see
/// [`Drive::append_group`](crate::Drive::append_group)) fails or succeeds whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WhenFull {
    /// Fail the queued appends, and every new one, with
    /// [`AppendError::RingFull`](crate::AppendError::RingFull) until a trim makes room.
    Fail,
    /// Keep appends queued, in order, for up to this long each (from the append's call) for a
    /// trim to make room, then fail them, the oldest first.
    Wait(Duration),
}

/// How a drive is opened.
#[derive(Clone, Debug)]
pub struct DriveOptions {
    /// How appends are made durable. `None` (the default): the method the ring's control
    /// block records, chosen when it was formatted (by measuring the device, or named then;
    /// fdatasync for a ring that records none, see [`crate::sync_probe`]). A value overrides
    /// the ring's choice for this open. Resolved once, when the drive opens.
    pub durability: Option<Durability>,
    /// Ring-full backpressure.
    pub when_full: WhenFull,
    /// Strict (the default), truncating, or quarantine recovery: what an open does when it
    /// finds acknowledged data damaged (fail naming it; cut the log there; or step over it,
    /// serving everything intact and reporting the damage, which reads of it then answer with
    /// `ReadError::Damaged`, see [`RecoveryMode::Quarantine`]).
    pub recovery: RecoveryMode,
    /// Whether recovery's replay may stop its probe at the ring's tail hint (the default) or
    /// reads the whole ring ([`ScanPolicy::Full`]: for tests that compare the two).
    pub scan: ScanPolicy,
    /// Pin the drive thread to this CPU.
    pub cpu: Option<usize>,
    /// Capacity of the client channel (requests queued before `append` blocks), from 1 to
    /// [`CHANNEL_CAPACITY_MAX`].
    pub channel_capacity: usize,
    /// How long the drive thread spins on the completion queue before it blocks in the kernel
    /// (microseconds; 0 blocks at once).
    pub spin_before_block_us: u64,
    /// Let a kernel thread poll the ring's submission queue (IORING_SETUP_SQPOLL), asleep after
    /// this many idle milliseconds; `None` (the default) submits with io_uring_enter. Measured
    /// with `sealog-bench --sqpoll-idle-ms`: on a machine with few CPUs the polling thread
    /// competes with the writers (see the benchmark's closing figures).
    pub sqpoll_idle_ms: Option<u32>,
    /// Group commit's gathering window, microseconds: when the last batch in flight completes,
    /// the next one waits up to this long for the writers just acknowledged to come back (as
    /// many appends as were queued plus just acknowledged), so that a closed loop of writers
    /// stays one group instead of splitting into groups that each wait for the other's flush.
    /// A lone writer never waits (its one append is the whole group); 0 disables. Applies to
    /// a core with timers: the drive thread's, on the system clock, or a
    /// [`DriveCore`](crate::DriveCore) stepped by hand on the clock it was given
    /// ([`DriveCore::recover_with_clock`](crate::DriveCore::recover_with_clock)); a core from
    /// [`DriveCore::recover`](crate::DriveCore::recover) never waits on the clock.
    pub group_gather_us: u64,
    /// How long the log stays idle (no batch in flight, none starting) with acknowledged
    /// entries that no durable watermark covers yet before the drive writes a tail marker: a
    /// one-block batch carrying the current watermark, so that damage to any acknowledged
    /// entry is reported as corruption rather than cut as a torn tail (docs/recovery.md,
    /// I-16). One marker per idle period, none while appends keep coming, and
    /// one on clean close when needed. Microseconds; 0 writes it as soon as the log is idle.
    /// A core with timers keeps this one on its clock (the drive thread's is the system
    /// clock); a core from [`DriveCore::recover`](crate::DriveCore::recover) gets the event from
    /// its caller ([`DriveCore::on_idle_timer`](crate::DriveCore::on_idle_timer)).
    pub tail_marker_idle_us: u64,
    /// How long a client waiting on a ticket spins before it parks, in microseconds (see
    /// [`crate::ticket::CLIENT_SPIN_US_DEFAULT`]); 0 parks at once.
    pub client_spin_us: u64,
    /// Bytes of the recent-entry cache: the payloads of the newest acknowledged entries, in
    /// ordinary memory (never locked), from which reads of recent entries are served without
    /// touching the device. It keeps the payloads as they were handed over (an append's `Vec`
    /// is freed when the cache evicts it rather than once copied; shared `Bytes` stay
    /// referenced), so it costs the write path no copy; entries appended from borrowed slices
    /// are not kept (their reads go to the device). Each entry is charged its allocation plus
    /// 64 bytes. 0 disables it.
    pub read_cache_bytes: u64,
    /// Reads on the device at once from callers' threads (each in an aligned buffer of the
    /// ring's batch limit plus a block, mapped at open and touched only as far as reads go);
    /// more readers wait in arrival order.
    pub read_buffers: usize,
    /// Bytes an iterator reads at a time from the device (at least the ring's batch limit),
    /// once it has ramped up: its first read takes at most 256 KiB (whole batches, one at
    /// least) and each next one twice the last, so that a short iteration reads little more
    /// than it takes.
    /// An iterator that has read the device twice keeps its next read in flight on a thread
    /// of its own, so it holds at most two buffers of this size and one thread (a catch-up
    /// reader's cost; iterators that stay within the cache or stop early hold neither).
    pub read_ahead_bytes: u64,
    /// The `drive` label of the drive's metrics ([`metrics`](super::metrics)); `None` (the
    /// default): the path the drive was opened at.
    pub metrics_label: Option<String>,
    /// What the ring holds, to record in its control block. `None` (the default) leaves what
    /// the ring says; a purpose is written into the control block the open writes anyway for
    /// its new incarnation (no control write of its own), and every later rewrite keeps it.
    /// A LogDrive store marks its ring this way, so that the operator CLI can tell it from a
    /// plain log before it appends or trims raw entries.
    pub purpose: Option<RingPurpose>,
}

impl Default for DriveOptions {
    fn default() -> DriveOptions {
        DriveOptions {
            durability: None,
            when_full: WhenFull::Fail,
            recovery: RecoveryMode::Strict,
            scan: ScanPolicy::Hinted,
            cpu: None,
            channel_capacity: 65536,
            spin_before_block_us: SPIN_BEFORE_BLOCK_US_DEFAULT,
            sqpoll_idle_ms: None,
            group_gather_us: GROUP_GATHER_US_DEFAULT,
            tail_marker_idle_us: TAIL_MARKER_IDLE_US_DEFAULT,
            client_spin_us: CLIENT_SPIN_US_DEFAULT,
            read_cache_bytes: READ_CACHE_BYTES_DEFAULT,
            read_buffers: READ_BUFFERS_DEFAULT,
            read_ahead_bytes: READ_AHEAD_BYTES_DEFAULT,
            metrics_label: None,
            purpose: None,
        }
    }
}

/// Builders: `DriveOptions::default().read_cache_bytes(256 << 20).when_full(...)`, each
/// setting one field (they are checked when the drive opens, naming the option out of range).
impl DriveOptions {
    /// Sets [`DriveOptions::durability`]: how appends are made durable (`None`: the
    /// ring's recorded method).
    pub fn durability(mut self, durability: Option<Durability>) -> DriveOptions {
        self.durability = durability;
        self
    }

    /// Sets [`DriveOptions::when_full`]: what appends do when the ring is full.
    pub fn when_full(mut self, when_full: WhenFull) -> DriveOptions {
        self.when_full = when_full;
        self
    }

    /// Sets [`DriveOptions::recovery`]: strict, truncating or quarantine recovery.
    pub fn recovery(mut self, recovery: RecoveryMode) -> DriveOptions {
        self.recovery = recovery;
        self
    }

    /// Sets [`DriveOptions::scan`]: whether recovery may stop at the tail hint.
    pub fn scan(mut self, scan: ScanPolicy) -> DriveOptions {
        self.scan = scan;
        self
    }

    /// Sets [`DriveOptions::cpu`]: the CPU to pin the drive thread to.
    pub fn cpu(mut self, cpu: Option<usize>) -> DriveOptions {
        self.cpu = cpu;
        self
    }

    /// Sets [`DriveOptions::channel_capacity`]: requests queued before `append` blocks.
    pub fn channel_capacity(mut self, channel_capacity: usize) -> DriveOptions {
        self.channel_capacity = channel_capacity;
        self
    }

    /// Sets [`DriveOptions::spin_before_block_us`]: microseconds the drive thread spins
    /// before it blocks.
    pub fn spin_before_block_us(mut self, spin_before_block_us: u64) -> DriveOptions {
        self.spin_before_block_us = spin_before_block_us;
        self
    }

    /// Sets [`DriveOptions::sqpoll_idle_ms`]: sQPOLL, asleep after this many idle milliseconds.
    pub fn sqpoll_idle_ms(mut self, sqpoll_idle_ms: Option<u32>) -> DriveOptions {
        self.sqpoll_idle_ms = sqpoll_idle_ms;
        self
    }

    /// Sets [`DriveOptions::group_gather_us`]: group commit's gathering window, microseconds.
    pub fn group_gather_us(mut self, group_gather_us: u64) -> DriveOptions {
        self.group_gather_us = group_gather_us;
        self
    }

    /// Sets [`DriveOptions::tail_marker_idle_us`]: idle microseconds before a tail marker.
    pub fn tail_marker_idle_us(mut self, tail_marker_idle_us: u64) -> DriveOptions {
        self.tail_marker_idle_us = tail_marker_idle_us;
        self
    }

    /// Sets [`DriveOptions::client_spin_us`]: microseconds a waiting client spins before it parks.
    pub fn client_spin_us(mut self, client_spin_us: u64) -> DriveOptions {
        self.client_spin_us = client_spin_us;
        self
    }

    /// Sets [`DriveOptions::read_cache_bytes`]: bytes of the recent-entry cache (0 disables it).
    pub fn read_cache_bytes(mut self, read_cache_bytes: u64) -> DriveOptions {
        self.read_cache_bytes = read_cache_bytes;
        self
    }

    /// Sets [`DriveOptions::read_buffers`]: reads on the device at once from callers' threads.
    pub fn read_buffers(mut self, read_buffers: usize) -> DriveOptions {
        self.read_buffers = read_buffers;
        self
    }

    /// Sets [`DriveOptions::read_ahead_bytes`]: bytes an iterator reads at a time.
    pub fn read_ahead_bytes(mut self, read_ahead_bytes: u64) -> DriveOptions {
        self.read_ahead_bytes = read_ahead_bytes;
        self
    }

    /// Sets [`DriveOptions::purpose`]: what the open records the ring as holding (`None`:
    /// what the ring already says).
    pub fn purpose(mut self, purpose: Option<RingPurpose>) -> DriveOptions {
        self.purpose = purpose;
        self
    }
}

/// Default size of the recent-entry cache: 64 MiB, about 20 ms of appends at this machine's
/// write bandwidth, and far more for a log server whose readers tail a slower writer.
pub const READ_CACHE_BYTES_DEFAULT: u64 = 64 << 20;

/// Default number of reads on the device at once from callers' threads: 16, the depth at
/// which the benchmark's random-read ceiling is measured.
pub const READ_BUFFERS_DEFAULT: usize = 16;

/// Default read-ahead of iterators: 4 MiB per read (four of the default batch limit).
pub const READ_AHEAD_BYTES_DEFAULT: u64 = 4 << 20;

/// The largest recent-entry cache a drive accepts: 1 TiB (a bound on what a typo can ask
/// the drive to allocate, far above any machine's useful cache).
pub const READ_CACHE_BYTES_MAX: u64 = 1 << 40;

/// The most read buffers a drive accepts.
pub const READ_BUFFERS_MAX: usize = 4096;

/// The largest read-ahead a drive accepts: 1 GiB per read.
pub const READ_AHEAD_BYTES_MAX: u64 = 1 << 30;

/// Default spin before blocking, in microseconds: about the flush latency of this machine's
/// disk, so the drive thread usually sees a flush complete while still on its CPU. Measured with
/// `sealog-bench --quick --cell 4096x1x1 --cell 4096x32x1 --cell 4096x4x256` and `--spin-us 0`,
/// `250`, `1000` or `--sqpoll-idle-ms 1000`, two interleaved rounds (p50 us, MB/s):
/// blocking at once: 1x1 p50 195 and 140, 32x1 p50 401 and 369, 4x256 1665 and 2692 MB/s;
/// spinning 250 us: 128 and 135, 322 and 424, 2923 and 3001 MB/s; spinning 1000 us: 142 and
/// 136, 410 and 344, 3015 and 3085 MB/s; SQPOLL: p50 109 and 86 but p99 613 and 658 (against
/// 220-262 spinning), 4x256 1114 and 2201 MB/s (its polling thread takes one of two CPUs).
pub const SPIN_BEFORE_BLOCK_US_DEFAULT: u64 = 250;

/// Default gathering window of group commit, in microseconds (see
/// [`DriveOptions::group_gather_us`] and the benchmark's figures in its doc).
pub const GROUP_GATHER_US_DEFAULT: u64 = 100;

/// The largest client channel a drive accepts (requests queued before `append` blocks): a
/// bound on the memory a slow drive lets its clients pile up, far above any useful depth.
pub const CHANNEL_CAPACITY_MAX: usize = 1 << 24;

/// Default idle time before a tail marker, in microseconds: half of the 100 ms that
/// docs/recovery.md (I-16) allows, and two orders of magnitude above a busy writer's gap between
/// batches, so a busy log never writes one.
pub const TAIL_MARKER_IDLE_US_DEFAULT: u64 = 50_000;

/// Refuses options out of range with an error naming the option: the channel's capacity.
pub(super) fn check_options(path: &Path, options: &DriveOptions) -> Result<(), OpenError> {
    let checks: [(&'static str, u64, std::ops::RangeInclusive<u64>); 4] = [
        (
            "channel_capacity",
            options.channel_capacity as u64,
            1..=CHANNEL_CAPACITY_MAX as u64,
        ),
        (
            "read_cache_bytes",
            options.read_cache_bytes,
            0..=READ_CACHE_BYTES_MAX,
        ),
        (
            "read_buffers",
            options.read_buffers as u64,
            1..=READ_BUFFERS_MAX as u64,
        ),
        (
            "read_ahead_bytes",
            options.read_ahead_bytes,
            0..=READ_AHEAD_BYTES_MAX,
        ),
    ];
    for (option, value, allowed) in checks {
        if !allowed.contains(&value) {
            return Err(OpenError::Options {
                path: path.to_path_buf(),
                option,
                value,
                limit: *allowed.end(),
            });
        }
    }
    Ok(())
}
