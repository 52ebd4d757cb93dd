//! One drive: the handle clients use ([`Drive`]) and the thread that owns a ring's backend (its
//! io_uring, registered files and buffers), recovers the ring on open, and runs the drive's
//! state machine ([`DriveCore`]). Clients on any thread hand it requests through a bounded
//! channel; appends come back as tickets, reads and trims as replies.
//!
//! Whatever happens to the drive thread (a clean close, fail-stop, a panic), every request
//! gets an outcome: the thread fails what it holds when it unwinds, requests still in the
//! channel when it stops are dropped (which completes their tickets with
//! [`DriveClosed`]), and a client that sends after the thread stopped drains the channel
//! itself. No call ever waits on a drive that is gone.
//!
//! - [`core`]: the state machine (its loop, requests, the clock's events, fail-stop);
//! - `clock`: where the state machine reads the time ([`Clock`]: the system's, or a
//!   [`ManualClock`] a test or a simulation advances);
//! - [`appends`]: group commit, acknowledgements, ring-full backpressure, tail markers;
//! - [`recover`]: recovery on open through the backend;
//! - [`hints`]: the tail hint kept ahead of the write cursor;
//! - [`reads`] and [`trim`]: the read and trim paths of the state machine;
//! - [`view`]: what readers share with the drive thread (the durable tail, the trim point,
//!   the read [`index`], the recent-entry [`cache`], the ring's files for [`direct`] reads on
//!   the caller's thread, the readers waiting for the tail); [`iter`]: iterators reading ahead;
//! - [`op`]: the typed operations and their tags; [`buffers`]: the pool's lanes.

mod appends;
mod buffers;
mod cache;
mod clock;
mod core;
mod direct;
mod entry;
mod hints;
mod index;
mod iter;
pub mod metrics;
mod op;
mod reads;
mod recover;
mod shared_stats;
mod trim;
mod view;

use std::future::Future;
use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{fence, AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::task::{Context, Poll};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use crossbeam_channel::{Receiver, Sender};
use hdrhistogram::Histogram;
use sealog_wal::format::{EmbedderHeader, RingPurpose};
use sealog_wal::{Geometry, Kind, RecoveryMode, RecoveryReport, ScanPolicy};

use self::appends::{Payload, QueuedRecord, Records};
pub use self::buffers::{buffer_bytes, buffer_count, registered_buffer_count, READ_BUFFERS};
pub use self::clock::{Clock, ManualClock, SystemClock};
pub use self::core::DriveCore;
pub use self::entry::{DamagedEntry, EntryRef, LogEntry, NewEntry, RecoveryVisitor, SummedBytes};
pub use self::iter::EntryIter;

use self::direct::{DirectFiles, ReadBuffers};
use self::view::{Lookup, ReadView};
use crate::error::{
    AppendError, DriveClosed, DriveFailure, OpenError, ReadError, TrimError, WaitError,
};
use crate::io::{IoBackend, Waker};
use crate::reply::{reply, Answer, Reply};
use crate::ticket::{Notifier, Ticket, TicketCompleter, TicketPool, CLIENT_SPIN_US_DEFAULT};
use crate::uring::lend::LentParts;

/// Whether [`DriveCore::step`] may block waiting for the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// Block until at least one operation completes (or the backend's waker is called).
    ForCompletion,
    /// Only reap what has already completed.
    No,
}

/// How appends are made durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Durability {
    /// A write, then IORING_OP_FSYNC with IORING_FSYNC_DATASYNC linked behind it. The default.
    #[default]
    Fdatasync,
    /// Every write with RWF_DSYNC (FUA on drives that have it).
    Dsync,
    /// No flush at all: acknowledged entries can be lost by a power cut. For benchmarks only.
    NoSyncBenchmarkOnly,
}

/// What an append does when the ring is full (the embedder has not trimmed).
///
/// The ring is full when the next batch has no room before the head (the oldest live batch).
/// Appends already in a batch on the device are never affected: they are acknowledged as
/// usual. What happens to the appends still queued, and to those that arrive while the ring
/// stays full, is the policy's:
///
/// - [`WhenFull::Fail`]: every queued append fails at once with [`AppendError::RingFull`],
///   and so does every append that arrives until a trim makes room. None of them took an LSN
///   (`RingFull::next_lsn` is the LSN the first would have taken, the durable tail plus one).
///   So for a writer that pipelines, the acknowledged appends are a prefix of what it sent
///   and the failed ones the rest: it keeps its tickets in order, and after a trim resends
///   exactly those whose ticket says `RingFull`, in order, never one that was acknowledged.
///   (Appends sent after a trim may be acknowledged before a resend: a writer that needs its
///   order kept stops sending at its first `RingFull` until it has resent.)
/// - [`WhenFull::Wait`]: queued appends wait, in arrival order, for a trim to make room;
///   each fails with `RingFull` once it has waited its own duration since it was made, the
///   oldest first, so the appends that fail are always the oldest still queued and those
///   behind them keep their order. When a trim makes room, the queue goes on in order.
///
/// Either way no append is ever written twice or out of order, and a group (see
/// [`Drive::append_group`]) fails or succeeds whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WhenFull {
    /// Fail the queued appends, and every new one, with [`AppendError::RingFull`] until a trim
    /// makes room.
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
    /// a core with timers: the drive thread's, on the system clock, or a [`DriveCore`] stepped
    /// by hand on the clock it was given ([`DriveCore::recover_with_clock`]); a core from
    /// [`DriveCore::recover`] never waits on the clock.
    pub group_gather_us: u64,
    /// How long the log stays idle (no batch in flight, none starting) with acknowledged
    /// entries that no durable watermark covers yet before the drive writes a tail marker: a
    /// one-block batch carrying the current watermark, so that damage to any acknowledged
    /// entry is reported as corruption rather than cut as a torn tail (docs/recovery.md,
    /// I-16). One marker per idle period, none while appends keep coming, and
    /// one on clean close when needed. Microseconds; 0 writes it as soon as the log is idle.
    /// A core with timers keeps this one on its clock (the drive thread's is the system
    /// clock); a core from [`DriveCore::recover`] gets the event from its caller
    /// ([`DriveCore::on_idle_timer`]).
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
    /// The `drive` label of the drive's metrics ([`metrics`]); `None` (the default): the path
    /// the drive was opened at.
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

/// The drive's state, as `stats()` reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DriveState {
    /// Accepting appends.
    Running,
    /// Stopped after an I/O error; reopen to continue.
    Failed(DriveFailure),
}

/// Counters and histograms of a drive.
#[derive(Clone, Debug)]
pub struct Stats {
    /// Entries acknowledged.
    pub appends: u64,
    /// Payload bytes acknowledged.
    pub payload_bytes: u64,
    /// Batches acknowledged (tail markers not included).
    pub batches: u64,
    /// Tail markers written and flushed (on idle, on close, and by the open's recovery).
    pub tail_markers: u64,
    /// Entries per batch.
    pub batch_entries: Histogram<u64>,
    /// Microseconds from a batch's submission to its acknowledgement (write plus sync).
    pub sync_latency_us: Histogram<u64>,
    /// Microseconds the device sat without a batch between the acknowledgement of the last one
    /// in flight and the start of the next: the clients' turnaround plus group commit's
    /// gathering (with one writer, the time it takes to send its next append).
    pub idle_gap_us: Histogram<u64>,
    /// The handoff to the drive: microseconds from an append's call (on the client's thread)
    /// to the submission of the batch that carries it, gathering included.
    pub enqueue_to_submit_us: Histogram<u64>,
    /// The handoff back: microseconds from an append's completion (on the drive thread) to its
    /// waiting client running again, for tickets waited on (not those looked at later).
    pub completion_to_wake_us: Histogram<u64>,
    /// Reads the drive thread served (with a payload or a typed error): async reads, and every
    /// read of a drive without files for callers' threads (a simulated device). Reads on
    /// callers' threads and cache hits never reach the drive thread: see
    /// [`Drive::read_stats`].
    pub reads: u64,
    /// The highest acknowledged LSN.
    pub lsn_durable: u64,
    /// The highest LSN a durable watermark on the device covers: damage at or below it is
    /// reported as corruption by the next open, never cut as a torn tail.
    pub lsn_covered: u64,
    /// Batches that had to wait for a further tail hint to be durable before they could be
    /// submitted (the hint is written ahead, so a steady writer should see none).
    pub hint_waits: u64,
    /// Control blocks written only to move the tail hint ahead of the writer.
    pub hint_writes: u64,
    /// Running or failed.
    pub state: DriveState,
    /// What the drive holds now: appends queued for a batch, batches (and tail markers) on
    /// the device, reads waiting for a buffer and on the device, trims waiting.
    pub queues: QueueDepths,
}

/// A log's shape ([`Drive::shape`]): read from what the drive publishes, never through its
/// thread.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogShape {
    /// The first live LSN (the trim point plus one).
    pub first_live_lsn: u64,
    /// The trim point: every entry at or below it is released.
    pub trim_lsn: u64,
    /// The highest acknowledged LSN.
    pub durable_lsn: u64,
    /// The LSN the next append will get (entries between the durable tail and it are on their
    /// way to the device).
    pub next_lsn: u64,
    /// Acknowledged entries not trimmed.
    pub live_entries: u64,
    /// The ring's bytes for the log (every segment, headers included).
    pub capacity_bytes: u64,
    /// The ring's bytes from the head (the oldest batch still live) to the write position.
    pub occupied_bytes: u64,
    /// The ring's bytes the writer can still take before the ring is full: up to the head's
    /// segment on the next lap (a segment is reused only once nothing in it is live), less
    /// the block kept for a tail marker. A batch that does not fit the rest of a segment
    /// skips it, so appends fit in somewhat less.
    pub usable_bytes: u64,
    /// Bytes (records with their headers) of the appends the drive has settled since it
    /// opened: placed in a batch, or refused. See [`Drive::room`].
    pub settled_append_bytes: u64,
    /// Bytes (headers included) of the live acknowledged entries: the occupied bytes less
    /// the padding, segment headers, tail markers and skipped segment ends around them. An
    /// embedder that knows which of its entries it still needs can tell its dead entries
    /// (what relocating the live ones forward would win) from that overhead.
    pub live_record_bytes: u64,
    /// Running, or failed with its error.
    pub state: DriveState,
    /// The drive was closed (its state is the one it closed in).
    pub closed: bool,
}

/// The ring's room for appends ([`Drive::room`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AppendRoom {
    /// The ring's bytes the writer can still take (see [`LogShape::usable_bytes`]).
    pub usable_bytes: u64,
    /// Bytes of the appends the drive has settled since it opened (placed or refused).
    pub settled_append_bytes: u64,
}

/// How many requests a drive holds, by where they wait (a snapshot, for watchdogs and
/// operators).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueDepths {
    /// Appends waiting for a batch.
    pub appends_queued: usize,
    /// Batches written or being written and not yet acknowledged.
    pub batches_in_flight: usize,
    /// Reads waiting for a read buffer.
    pub reads_waiting: usize,
    /// Reads on the device.
    pub reads_in_flight: usize,
    /// Trims waiting.
    pub trims_waiting: usize,
    /// A trim's control block is on the device.
    pub trim_in_flight: bool,
}

/// Where a read's entry goes.
type ReadSender = Reply<Result<LogEntry, ReadError>>;
/// Where a trim's outcome goes.
type TrimSender = Reply<Result<(), TrimError>>;

/// A request to a drive: what clients send its thread, and what a simulation hands its
/// [`DriveCore`] directly. Built with [`Request::append`], [`Request::read`] and
/// [`Request::trim`], which return the handle the outcome arrives on.
pub struct Request(RequestKind);

enum RequestKind {
    Append {
        /// One record or a group, each with its payload's CRC32C computed on the client's
        /// thread.
        records: Records,
        completer: TicketCompleter,
        /// When the client asked (for `WhenFull::Wait` and the handoff's latency): stamped on
        /// the client's thread by [`Drive`]'s appends, whose drive thread reads the same system
        /// clock. `None` from [`Request::append`]: a core stepped by hand may run on a manual
        /// clock, so it stamps the request with its own clock when it takes it.
        queued_at: Option<Instant>,
    },
    Read {
        lsn: u64,
        reply: ReadSender,
    },
    Trim {
        lsn: u64,
        reply: TrimSender,
    },
    Close,
}

/// The outcome of a trim request (blocking, polled or awaited).
pub type TrimReply = Answer<Result<(), TrimError>>;
/// The outcome of a read request: the entry (blocking, polled or awaited).
pub type ReadReply = Answer<Result<LogEntry, ReadError>>;

impl Request {
    /// An append of a record of `kind`; the ticket yields its LSN once durable. Its time (for
    /// a full ring's `WhenFull::Wait`, and the handoff's latency) is taken by the core when it
    /// takes the request, on the core's clock.
    pub fn append(kind: Kind, payload: Vec<u8>) -> (Request, Ticket) {
        let (ticket, completer) = Ticket::standalone();
        let payload_crc = sealog_wal::format::payload_crc(&payload);
        let request = RequestKind::Append {
            records: Records::One(QueuedRecord {
                kind,
                header: EmbedderHeader::ZERO,
                payload: Payload::Owned(payload),
                payload_crc,
            }),
            completer,
            queued_at: None,
        };
        (Request(request), ticket)
    }

    /// An all-or-nothing group of entries (see [`Drive::append_group`]); the ticket yields
    /// the group's first LSN once all of them are durable.
    pub fn append_group(entries: Vec<NewEntry>) -> (Request, Ticket) {
        let (ticket, completer) = Ticket::standalone();
        let request = RequestKind::Append {
            records: group_records(entries),
            completer,
            queued_at: None,
        };
        (Request(request), ticket)
    }

    /// A read of the entry at `lsn`, on the drive's ring.
    pub fn read(lsn: u64) -> (Request, ReadReply) {
        let (reply, answer) = reply();
        (Request(RequestKind::Read { lsn, reply }), answer)
    }

    /// A durable trim up to `lsn`, inclusive.
    pub fn trim(lsn: u64) -> (Request, TrimReply) {
        let (reply, answer) = reply();
        (Request(RequestKind::Trim { lsn, reply }), answer)
    }
}

/// A handle to one drive and its thread. Cloneable handles are not needed: share it by
/// reference or `Arc`; every method takes `&self`.
pub struct Drive {
    path: PathBuf,
    sender: Sender<Request>,
    /// A receiving end of the drive's own channel, used only once the drive thread has
    /// stopped: a client whose request landed after the thread's last look drains it, so the
    /// request is dropped and its ticket completed rather than left waiting.
    leftovers: Receiver<Request>,
    waker: Waker,
    sleeping: Arc<AtomicBool>,
    stopped: Arc<AtomicBool>,
    thread: Mutex<Option<JoinHandle<()>>>,
    report: RecoveryReport,
    geometry: Geometry,
    cache: Option<crate::io::CacheInfo>,
    durability: Durability,
    purpose: RingPurpose,
    /// Where this drive's tickets come from and park.
    tickets: Arc<TicketPool>,
    /// What readers share with the drive thread.
    view: Arc<ReadView>,
}

/// What recovery hands back to `open`.
struct Opened {
    report: RecoveryReport,
    waker: Waker,
    cache: Option<crate::io::CacheInfo>,
    durability: Durability,
    purpose: RingPurpose,
    view: Arc<ReadView>,
}

impl Drive {
    /// Opens the ring at `path` for writing, on its own thread with the io_uring backend.
    pub fn open(path: &Path, options: DriveOptions) -> Result<Drive, OpenError> {
        Drive::open_files(path, options, None)
    }

    /// [`Drive::open`], handing every live entry recovery accepts to `visitor` during the
    /// open's one replay pass, and the visitor back with the drive (see [`RecoveryVisitor`]):
    ///
    /// ```
    /// use std::collections::BTreeMap;
    /// use sealog::{Drive, DriveOptions, EmbedderHeader, EntryRef, NewEntry, RecoveryVisitor};
    ///
    /// /// A ledger store's index: (ledger, entry id) -> LSN, rebuilt in the open's replay.
    /// #[derive(Default)]
    /// struct LedgerIndex(BTreeMap<(u64, u64), u64>);
    ///
    /// impl RecoveryVisitor for LedgerIndex {
    ///     fn visit(&mut self, entry: &EntryRef<'_>) {
    ///         self.0.insert((entry.header.log_id, entry.header.address), entry.lsn);
    ///     }
    /// }
    /// # let directory = tempfile::tempdir()?;
    /// # let path = directory.path().join("ring");
    /// # sealog::format(&path, &sealog::FormatOptions::new(64 << 20))?;
    /// # let drive = Drive::open(&path, DriveOptions::default())?;
    /// # for (ledger, entry) in [(7, 0), (9, 0), (7, 1)] {
    /// #     let header = EmbedderHeader { log_id: ledger, address: entry, ..Default::default() };
    /// #     drive.append_entry(NewEntry::data(vec![1; 10]).with_header(header))?.wait()?;
    /// # }
    /// # drop(drive);
    ///
    /// let (drive, LedgerIndex(index)) =
    ///     Drive::open_visiting(&path, DriveOptions::default(), LedgerIndex::default())?;
    /// assert_eq!(index.get(&(7, 1)), Some(&3));
    /// let lsn = index[&(9, 0)];
    /// assert_eq!(drive.read_entry(lsn)?.header.log_id, 9);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open_visiting<V: RecoveryVisitor + 'static>(
        path: &Path,
        options: DriveOptions,
        visitor: V,
    ) -> Result<(Drive, V), OpenError> {
        let slot = Arc::new(Mutex::new(visitor));
        let shared: Arc<Mutex<dyn RecoveryVisitor>> = slot.clone();
        let drive = Drive::open_files(path, options, Some(shared))?;
        Ok((drive, take_visitor(path, slot)?))
    }

    fn open_files(
        path: &Path,
        options: DriveOptions,
        visitor: Option<SharedVisitor>,
    ) -> Result<Drive, OpenError> {
        let files = crate::storage::open(path, crate::storage::Access::ReadWrite)?;
        if let Ok(unwritten) = crate::storage::unwritten_bytes(&files) {
            if unwritten > 0 {
                tracing::warn!(
                    path = %path.display(),
                    unwritten_bytes = unwritten,
                    "segment files are in unwritten extents: the first write into them makes \
                     fdatasync commit metadata (format zero-fills segments to avoid this)"
                );
            }
        }
        let geometry = files.geometry;
        let direct = DirectFiles::from_ring(&files).map_err(|source| OpenError::Io {
            path: path.to_path_buf(),
            action: "duplicate the ring's files for readers",
            source,
        })?;
        check_options(path, &options)?;
        let read_buffers = ReadBuffers::new(options.read_buffers, buffer_bytes(&geometry))
            .map_err(|source| OpenError::Io {
                path: path.to_path_buf(),
                action: "map the read buffers",
                source,
            })?;
        let buffer_bytes = buffer_bytes(&geometry);
        let buffers = buffer_count(&geometry);
        let registered = registered_buffer_count(&geometry);
        let spin_us = options.spin_before_block_us;
        let sqpoll_idle_ms = options.sqpoll_idle_ms;
        let thread_path = path.to_path_buf();
        let drive = Drive::open_backend(path, geometry, options, visitor, move || {
            let (mut backend, note) = crate::uring::UringBackend::for_drive(
                files,
                (buffers, buffer_bytes, registered),
                sqpoll_idle_ms,
            )?;
            backend.set_spin_us(spin_us);
            if let Some(note) = note {
                tracing::info!(path = %thread_path.display(), "{note}");
            }
            Ok(backend)
        })?;
        drive.view.attach_files(direct, read_buffers);
        Ok(drive)
    }

    /// Opens a drive on a backend built by `make_backend` on the drive thread (the io_uring
    /// backend must be built by the thread that submits to it; tests pass a simulated one).
    pub fn open_with<B, F>(
        path: &Path,
        geometry: Geometry,
        options: DriveOptions,
        make_backend: F,
    ) -> Result<Drive, OpenError>
    where
        B: IoBackend + 'static,
        F: FnOnce() -> io::Result<B> + Send + 'static,
    {
        Drive::open_backend(path, geometry, options, None, make_backend)
    }

    /// [`Drive::open_with`] with a recovery visitor (see [`Drive::open_visiting`]).
    pub fn open_with_visiting<B, F, V>(
        path: &Path,
        geometry: Geometry,
        options: DriveOptions,
        visitor: V,
        make_backend: F,
    ) -> Result<(Drive, V), OpenError>
    where
        B: IoBackend + 'static,
        F: FnOnce() -> io::Result<B> + Send + 'static,
        V: RecoveryVisitor + 'static,
    {
        let slot = Arc::new(Mutex::new(visitor));
        let shared: Arc<Mutex<dyn RecoveryVisitor>> = slot.clone();
        let drive = Drive::open_backend(path, geometry, options, Some(shared), make_backend)?;
        Ok((drive, take_visitor(path, slot)?))
    }

    fn open_backend<B, F>(
        path: &Path,
        geometry: Geometry,
        options: DriveOptions,
        visitor: Option<SharedVisitor>,
        make_backend: F,
    ) -> Result<Drive, OpenError>
    where
        B: IoBackend + 'static,
        F: FnOnce() -> io::Result<B> + Send + 'static,
    {
        check_options(path, &options)?;
        let (sender, receiver) = crossbeam_channel::bounded(options.channel_capacity);
        let leftovers = receiver.clone();
        let (opened_sender, opened_receiver) = mpsc::channel();
        let sleeping = Arc::new(AtomicBool::new(false));
        let stopped = Arc::new(AtomicBool::new(false));
        let thread_sleeping = Arc::clone(&sleeping);
        let thread_stopped = Arc::clone(&stopped);
        let thread_path = path.to_path_buf();
        let notifier = Notifier::for_drive(options.client_spin_us);
        let tickets = TicketPool::new(Arc::clone(&notifier));
        let thread = std::thread::Builder::new()
            .name(format!("sealog-drive {}", path.display()))
            .spawn(move || {
                let channel = ThreadChannel {
                    receiver: &receiver,
                    sleeping: &thread_sleeping,
                    stopped: &thread_stopped,
                    notifier,
                };
                let open = ThreadOpen {
                    path: &thread_path,
                    options: &options,
                    visitor,
                    opened: opened_sender,
                };
                drive_thread(open, make_backend, channel)
            })
            .map_err(|source| OpenError::Io {
                path: path.to_path_buf(),
                action: "start the drive thread",
                source,
            })?;
        let (opened, thread) = await_open(path, thread, &opened_receiver)?;
        Ok(Drive {
            path: path.to_path_buf(),
            sender,
            leftovers,
            waker: opened.waker,
            sleeping,
            stopped,
            thread: Mutex::new(Some(thread)),
            report: opened.report,
            geometry,
            cache: opened.cache,
            durability: opened.durability,
            purpose: opened.purpose,
            tickets,
            view: opened.view,
        })
    }

    /// What recovery found when the drive was opened.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.report
    }

    /// The ring's geometry.
    pub fn geometry(&self) -> Geometry {
        self.geometry
    }

    /// The path the drive was opened at.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The device's write cache and FUA settings, where known.
    pub fn cache_info(&self) -> Option<&crate::io::CacheInfo> {
        self.cache.as_ref()
    }

    /// How this drive makes appends durable: the options' override, or the method the ring
    /// chose when it was formatted (fdatasync for a ring that recorded none).
    pub fn durability(&self) -> Durability {
        self.durability
    }

    /// What the ring holds, as its control block says once the open has written its own (so
    /// a purpose the options asked for, else the one the ring already recorded). Trims and
    /// tail hints carry it over, so it holds for the drive's life.
    pub fn purpose(&self) -> RingPurpose {
        self.purpose
    }

    /// Hands a request to the drive thread. Once the thread has stopped, the request is
    /// dropped instead (completing its ticket or reply with [`DriveClosed`]).
    fn send(&self, request: Request) -> Result<(), DriveClosed> {
        if self.stopped.load(Ordering::SeqCst) {
            return Err(DriveClosed);
        }
        self.sender.send(request).map_err(|_| DriveClosed)?;
        // Pairs with the drive's fence between setting `sleeping` and checking the channel:
        // either it sees this request, or this sees it asleep and wakes it. Only the first
        // client to see it asleep wakes it (the swap): the drive takes every request queued by
        // then when it wakes, and announces its next sleep anew, so many writers arriving while
        // a flush is in flight cost one wake-up (one eventfd write), not one each.
        fence(Ordering::SeqCst);
        if self.sleeping.load(Ordering::SeqCst) && self.sleeping.swap(false, Ordering::SeqCst) {
            (self.waker)();
        }
        // Pairs with the thread's store of `stopped` before its last drain: either that drain
        // took this request, or this sees the thread gone and drops what is left itself.
        if self.stopped.load(Ordering::SeqCst) {
            while self.leftovers.try_recv().is_ok() {}
        }
        Ok(())
    }

    /// Checks an append before anything of it is queued: a kind the format reserves and a
    /// payload over the ring's limit are refused on the caller's thread.
    fn check_append(&self, kind: Kind, payload_len: usize) -> Result<(), AppendError> {
        self::core::check_append(&self.geometry, kind, payload_len)
    }

    /// Queues an append of one record whose payload the drive will copy; its CRC is computed
    /// here, on the caller's thread (unless the caller has it: `summed`), so the drive thread
    /// only copies.
    fn append_payload(
        &self,
        kind: Kind,
        header: EmbedderHeader,
        payload: Payload,
        summed: Option<u32>,
    ) -> Result<Ticket, AppendError> {
        let queued_at = Instant::now();
        self.check_append(kind, payload.len())?;
        let payload_crc = summed.unwrap_or_else(|| payload.crc());
        let record = QueuedRecord {
            kind,
            header,
            payload,
            payload_crc,
        };
        self.queue_records(Records::One(record), queued_at)
    }

    /// Hands checked records to the drive with a new ticket.
    fn queue_records(&self, records: Records, queued_at: Instant) -> Result<Ticket, AppendError> {
        let (ticket, completer) = self.tickets.ticket();
        self.send(Request(RequestKind::Append {
            records,
            completer,
            queued_at: Some(queued_at),
        }))?;
        Ok(ticket)
    }

    /// Appends a data record; the ticket yields its LSN once it is durable. The drive copies
    /// the payload into its registered buffer; the `Vec` is kept by the recent-entry cache
    /// (and freed when it is evicted) rather than copied again.
    ///
    /// ```
    /// # let directory = tempfile::tempdir()?;
    /// # let path = directory.path().join("ring");
    /// # sealog::format(&path, &sealog::FormatOptions::new(64 << 20))?;
    /// let drive = sealog::Drive::open(&path, sealog::DriveOptions::default())?;
    /// let ticket = drive.append(b"hello".to_vec())?;
    /// let lsn = ticket.wait()?;
    /// assert_eq!(drive.read(lsn)?, b"hello");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn append(&self, payload: Vec<u8>) -> Result<Ticket, AppendError> {
        self.append_kind(Kind::Data, payload)
    }

    /// Appends a record of `kind` (data, or the trim/seal/fence records of the layers above).
    /// Padding is the format's own and refused.
    pub fn append_kind(&self, kind: Kind, payload: Vec<u8>) -> Result<Ticket, AppendError> {
        self.append_payload(kind, EmbedderHeader::ZERO, Payload::Owned(payload), None)
    }

    /// Appends one entry with its kind and embedder header (see [`EmbedderHeader`]): the
    /// header comes back from reads, iterators and recovery's visitor, checked by the entry
    /// header's CRC rather than the payload's.
    pub fn append_entry(&self, entry: NewEntry) -> Result<Ticket, AppendError> {
        self.append_payload(
            entry.kind,
            entry.header,
            Payload::Shared(entry.payload),
            None,
        )
    }

    /// Appends one entry of `kind` with `header` whose payload's CRC the caller has already
    /// computed ([`SummedBytes`]): [`Drive::append_entry`] without computing it again.
    pub fn append_summed(
        &self,
        kind: Kind,
        header: EmbedderHeader,
        payload: SummedBytes,
    ) -> Result<Ticket, AppendError> {
        let crc = payload.crc();
        self.append_payload(
            kind,
            header,
            Payload::Shared(payload.into_bytes()),
            Some(crc),
        )
    }

    /// Appends a data record from shared bytes (no copy on the caller's side: the drive holds
    /// a reference until it has copied them into its registered buffer).
    pub fn append_bytes(&self, payload: Bytes) -> Result<Ticket, AppendError> {
        self.append_kind_bytes(Kind::Data, payload)
    }

    /// [`Drive::append_bytes`] with a record kind.
    pub fn append_kind_bytes(&self, kind: Kind, payload: Bytes) -> Result<Ticket, AppendError> {
        self.append_payload(kind, EmbedderHeader::ZERO, Payload::Shared(payload), None)
    }

    /// Appends several entries that recovery returns all or none: they share one batch (replay
    /// accepts a batch whole or not at all), take consecutive LSNs, and have one ticket, which
    /// yields the group's first LSN once all of them are durable. Their records (each payload
    /// plus its [`ENTRY_HEADER_SIZE`](sealog_wal::format::ENTRY_HEADER_SIZE)-byte header) must
    /// fit the ring's batch limit together, which is checked here, on the caller's thread
    /// ([`AppendError::GroupTooLarge`]); an empty group is [`AppendError::EmptyGroup`]. Other
    /// appends are never interleaved with a group's entries.
    ///
    /// ```
    /// use sealog::{Drive, DriveOptions, EmbedderHeader, NewEntry};
    /// # let directory = tempfile::tempdir()?;
    /// # let path = directory.path().join("ring");
    /// # sealog::format(&path, &sealog::FormatOptions::new(64 << 20))?;
    /// let drive = Drive::open(&path, DriveOptions::default())?;
    /// let header = |address| EmbedderHeader { log_id: 7, address, ..Default::default() };
    /// let group = vec![
    ///     NewEntry::data(b"debit".to_vec()).with_header(header(0)),
    ///     NewEntry::data(b"credit".to_vec()).with_header(header(1)),
    /// ];
    /// let first = drive.append_group(group)?.wait()?;
    /// assert_eq!(drive.read_entry(first + 1)?.payload, b"credit");
    /// assert_eq!(drive.read_entry(first + 1)?.header.address, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn append_group(&self, entries: Vec<NewEntry>) -> Result<Ticket, AppendError> {
        let queued_at = Instant::now();
        let shapes = entries
            .iter()
            .map(|entry| (entry.kind, entry.payload.len()));
        self::core::check_records(&self.geometry, shapes)?;
        self.queue_records(group_records(entries), queued_at)
    }

    /// Appends one data record made of several borrowed slices, in order (for example an
    /// embedder's header and a body it received from the network), without concatenating
    /// them: the drive thread copies them straight into the batch's registered buffer. Returns
    /// once the drive has copied them (when the batch carrying them starts), so the slices
    /// are free again; the ticket still says when the record is durable.
    pub fn append_slices(&self, parts: &[&[u8]]) -> Result<Ticket, AppendError> {
        self.append_entry_slices(Kind::Data, EmbedderHeader::ZERO, parts)
    }

    /// [`Drive::append_slices`] with a record kind.
    pub fn append_kind_slices(&self, kind: Kind, parts: &[&[u8]]) -> Result<Ticket, AppendError> {
        self.append_entry_slices(kind, EmbedderHeader::ZERO, parts)
    }

    /// [`Drive::append_slices`] with a record kind and an embedder header.
    pub fn append_entry_slices(
        &self,
        kind: Kind,
        header: EmbedderHeader,
        parts: &[&[u8]],
    ) -> Result<Ticket, AppendError> {
        let queued_at = Instant::now();
        let payload_len = parts.iter().map(|part| part.len()).sum();
        self.check_append(kind, payload_len)?;
        let payload_crc = appends::parts_crc(parts);
        let (ticket, completer) = self.tickets.ticket();
        let state = Arc::clone(completer.state().expect("a new completer holds its state"));
        LentParts::lend(parts, &state, |lent| {
            let record = QueuedRecord {
                kind,
                header,
                payload: Payload::Lent(lent),
                payload_crc,
            };
            self.send(Request(RequestKind::Append {
                records: Records::One(record),
                completer,
                queued_at: Some(queued_at),
            }))
        })?;
        Ok(ticket)
    }

    /// Reads a live (acknowledged, untrimmed) entry. An entry still in the recent-entry
    /// cache is copied from memory; any other is read from the device (only the blocks that
    /// hold it) on this thread, in parallel with every other reader and the write path, and
    /// checked with replay's record checks. Outcomes: the payload, [`ReadError::Trimmed`],
    /// [`ReadError::NotYetDurable`] (nothing unacknowledged is ever served) or
    /// [`ReadError::Damaged`] (a record failing a check, or a read error: that read's outcome
    /// only, the drive runs on).
    pub fn read(&self, lsn: u64) -> Result<Vec<u8>, ReadError> {
        self.read_entry(lsn).map(|entry| entry.payload)
    }

    /// [`Drive::read`] with the entry's kind and embedder header.
    pub fn read_entry(&self, lsn: u64) -> Result<LogEntry, ReadError> {
        if let Some(stopped) = self.view.stopped() {
            return Err(stopped.map_or_else(ReadError::Closed, ReadError::Failed));
        }
        match self.view.lookup(lsn)? {
            Lookup::Cached(entry) => Ok(entry),
            Lookup::Device(record) => match self.view.direct() {
                Some(direct) => self.view.read_direct(direct, record),
                // A drive on a simulated device reads through its thread.
                None => self.read_on_drive(lsn),
            },
        }
    }

    /// Reads an entry through the drive thread's ring.
    fn read_on_drive(&self, lsn: u64) -> Result<LogEntry, ReadError> {
        let (request, answer) = Request::read(lsn);
        self.send(request)?;
        answer.recv().map_err(|_| DriveClosed)?
    }

    /// [`Drive::read`] as a future: a cached entry (or a trimmed or not yet durable LSN) is
    /// ready at once; any other read is submitted on the drive's own io_uring, several in
    /// flight, and the future wakes when it completes. No thread waits for it. The waker is
    /// called on the drive thread: it must only schedule its task, never block.
    pub fn read_async(&self, lsn: u64) -> PayloadFuture {
        PayloadFuture {
            entry: self.read_entry_async(lsn),
        }
    }

    /// [`Drive::read_async`] with the entry's kind and embedder header.
    pub fn read_entry_async(&self, lsn: u64) -> DriveFuture<LogEntry, ReadError> {
        if let Some(stopped) = self.view.stopped() {
            return DriveFuture::ready(Err(
                stopped.map_or_else(ReadError::Closed, ReadError::Failed)
            ));
        }
        match self.view.lookup(lsn) {
            Ok(Lookup::Cached(entry)) => DriveFuture::ready(Ok(entry)),
            Err(error) => DriveFuture::ready(Err(error)),
            Ok(Lookup::Device(_)) => {
                let (request, answer) = Request::read(lsn);
                match self.send(request) {
                    Ok(()) => DriveFuture::waiting(answer),
                    Err(closed) => DriveFuture::ready(Err(closed.into())),
                }
            }
        }
    }

    /// Iterates over live entries from `lsn` on, up to the durable tail, reading ahead in
    /// large sequential reads (recent batches come from the cache). At the durable tail it
    /// returns `None`; calling `next` again later goes on from there (wait with
    /// [`Drive::wait_durable`] in between to follow the log). Starting below the first live
    /// LSN yields [`ReadError::Trimmed`] naming where the log starts; past the durable tail
    /// (beyond the next LSN), [`ReadError::NotYetDurable`].
    ///
    /// ```
    /// # let directory = tempfile::tempdir()?;
    /// # let path = directory.path().join("ring");
    /// # sealog::format(&path, &sealog::FormatOptions::new(64 << 20))?;
    /// let drive = sealog::Drive::open(&path, sealog::DriveOptions::default())?;
    /// for word in ["a", "b", "c"] {
    ///     drive.append(word.as_bytes().to_vec())?.wait()?;
    /// }
    /// drive.trim(1)?;
    /// let live: Vec<Vec<u8>> = drive
    ///     .iter_from(drive.first_live_lsn())
    ///     .map(|entry| entry.map(|entry| entry.payload))
    ///     .collect::<Result<_, _>>()?;
    /// assert_eq!(live, [b"b".to_vec(), b"c".to_vec()]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn iter_from(&self, lsn: u64) -> EntryIter<'_> {
        EntryIter::new(self, lsn)
    }

    /// Blocks until the durable tail reaches `lsn` (every entry up to it is acknowledged), or
    /// `timeout` passes: the durable tail then. Woken once, by the acknowledgement that
    /// passes `lsn`: a tailing reader or a long-poll request needs no polling.
    pub fn wait_durable(&self, lsn: u64, timeout: Option<Duration>) -> Result<u64, WaitError> {
        self.view.wait_durable(lsn, timeout)
    }

    /// [`Drive::wait_durable`] as a future (no timeout: drop it to stop waiting). Its waker is
    /// called on the drive thread, as the acknowledgement is made: a waker must only schedule
    /// its task (as every executor's does), never block or call back into the drive.
    pub fn durable_async(&self, lsn: u64) -> DurableFuture {
        DurableFuture {
            view: Arc::clone(&self.view),
            lsn,
            id: None,
        }
    }

    /// The highest acknowledged LSN, without asking the drive thread.
    pub fn durable_lsn(&self) -> u64 {
        self.view.durable_lsn()
    }

    /// The first live (untrimmed) LSN, without asking the drive thread.
    pub fn first_live_lsn(&self) -> u64 {
        self.view.trim_lsn() + 1
    }

    /// What reads did and what their structures hold, without asking the drive thread.
    pub fn read_stats(&self) -> ReadStats {
        self.view.read_stats()
    }

    /// The log's shape, without asking the drive thread: its LSN frontiers, the ring's
    /// capacity and how much of it the live log holds, and whether the drive runs. A moment
    /// old at most: the frontiers are published as the drive acknowledges and trims, the rest
    /// at the end of each of its turns and before a trim returns (so a client whose trim
    /// returned sees the head moved).
    pub fn shape(&self) -> LogShape {
        let geometry = self.geometry;
        let durable_lsn = self.view.durable_lsn();
        let trim_lsn = self.view.trim_lsn();
        let room = self.room();
        let (state, closed) = match self.view.stopped() {
            None => (DriveState::Running, false),
            Some(Ok(failure)) => (DriveState::Failed(failure), false),
            Some(Err(DriveClosed)) => (DriveState::Running, true),
        };
        LogShape {
            first_live_lsn: trim_lsn + 1,
            trim_lsn,
            durable_lsn,
            next_lsn: self.view.next_lsn().max(durable_lsn + 1),
            live_entries: durable_lsn.saturating_sub(trim_lsn),
            capacity_bytes: geometry.segment_size_bytes * u64::from(geometry.segment_count),
            occupied_bytes: self.view.occupied_bytes(),
            usable_bytes: room.usable_bytes,
            settled_append_bytes: room.settled_append_bytes,
            live_record_bytes: self.view.live_record_bytes(),
            state,
            closed,
        }
    }

    /// The ring's room for appends, for a client that keeps its own reserve: the usable
    /// bytes, and the bytes of every append the drive has settled since it opened (placed in
    /// a batch or refused). A client that counts the bytes of the appends it sent (records
    /// with their [`ENTRY_HEADER_SIZE`](sealog_wal::format::ENTRY_HEADER_SIZE)-byte headers)
    /// knows that the sent less the settled still wait to take room, so the room left for
    /// what it sends next is the usable bytes less that. Read so that it errs only towards
    /// less room: an append just placed may count both as taken and as waiting for a moment,
    /// never as neither.
    pub fn room(&self) -> AppendRoom {
        let (settled_append_bytes, usable_bytes) = self.view.room();
        AppendRoom {
            usable_bytes,
            settled_append_bytes,
        }
    }

    /// The LSN the next append will get, as of the drive's last turn (one atomic load: what
    /// [`Drive::shape`]'s `next_lsn` says, without the rest of the shape).
    pub fn next_lsn(&self) -> u64 {
        self.view.next_lsn().max(self.view.durable_lsn() + 1)
    }

    /// The last acknowledged LSN in the ring segment that holds `lsn`, when entries lie in a
    /// later segment: the ring frees a segment once a trim passes that LSN. `None` while the
    /// log ends in that segment (the writer is still in it), or when `lsn` is not a live
    /// acknowledged entry. For an embedder that moves live entries forward to free the
    /// ring's head (the LogDrive store's reclaimer), so that it copies one segment's worth
    /// at a time and its copies land in a later segment.
    pub fn segment_end_lsn(&self, lsn: u64) -> Option<u64> {
        self.view.index().segment_end_lsn(lsn)
    }

    /// Releases every entry with LSN at or below `lsn` (inclusive), durably: once this returns,
    /// the segments before the new head may be reused, and the entries are gone from reads.
    pub fn trim(&self, lsn: u64) -> Result<(), TrimError> {
        let _span = tracing::debug_span!("trim", path = %self.path.display(), lsn).entered();
        let (request, answer) = Request::trim(lsn);
        self.send(request)?;
        answer.recv().map_err(|_| DriveClosed)?
    }

    /// [`Drive::trim`] as a future: ready once the trim is durable.
    pub fn trim_async(&self, lsn: u64) -> DriveFuture<(), TrimError> {
        let (request, answer) = Request::trim(lsn);
        match self.send(request) {
            Ok(()) => DriveFuture::waiting(answer),
            Err(closed) => DriveFuture::ready(Err(closed.into())),
        }
    }

    /// Counters, histograms and state, without asking the drive thread: readable at any time,
    /// from any number of threads, while the drive is busy or blocked, and after it closed or
    /// failed (its final figures). Counters are current as of the drive's last turn (an
    /// append a client saw acknowledged is counted); histograms are at most 100 ms old while
    /// the drive is busy, and complete once it is idle or stopped (see
    /// `drive/shared_stats.rs`).
    pub fn stats(&self) -> Stats {
        self.view.stats(self.tickets.notifier().wake_latency_us())
    }

    /// Stops the drive thread after it has finished what was queued and in flight when the
    /// close arrived (requests after it get [`DriveClosed`]), with a tail marker when
    /// acknowledged entries are not yet covered by a durable watermark. Returns once the thread
    /// has stopped, from whichever thread calls it (a second caller waits for the first).
    pub fn close(&self) {
        let _ = self.send(Request(RequestKind::Close));
        let mut thread = self
            .thread
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        // Joined under the lock, so a concurrent close returns only after the thread stopped.
        if let Some(thread) = thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Drive {
    fn drop(&mut self) {
        self.close();
    }
}

/// Refuses options out of range with an error naming the option: the channel's capacity.
fn check_options(path: &Path, options: &DriveOptions) -> Result<(), OpenError> {
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

/// Waits for the drive thread to report its open: what recovery found, with the thread back,
/// or why it failed once the thread (which stops then) is joined.
fn await_open(
    path: &Path,
    thread: JoinHandle<()>,
    opened: &mpsc::Receiver<Result<Opened, OpenError>>,
) -> Result<(Opened, JoinHandle<()>), OpenError> {
    match opened.recv() {
        Ok(Ok(opened)) => Ok((opened, thread)),
        Ok(Err(error)) => {
            let _ = thread.join();
            Err(error)
        }
        Err(_) => {
            let _ = thread.join();
            Err(OpenError::Io {
                path: path.to_path_buf(),
                action: "recover (the drive thread stopped)",
                source: io::Error::other("drive thread exited"),
            })
        }
    }
}

/// A recovery visitor shared with the drive thread for the open (the thread drops its
/// reference before it reports the open, so the opener takes the visitor back whole).
type SharedVisitor = Arc<Mutex<dyn RecoveryVisitor>>;

/// Takes the visitor back once the drive thread has let go of it.
fn take_visitor<V>(path: &Path, slot: Arc<Mutex<V>>) -> Result<V, OpenError> {
    match Arc::try_unwrap(slot) {
        Ok(visitor) => Ok(visitor
            .into_inner()
            .unwrap_or_else(|poisoned| poisoned.into_inner())),
        Err(_) => Err(OpenError::Io {
            path: path.to_path_buf(),
            action: "take the recovery visitor back",
            source: io::Error::other("the drive thread kept the recovery visitor"),
        }),
    }
}

/// What the drive thread opens with: where, how, the visitor, and where to report.
struct ThreadOpen<'a> {
    path: &'a Path,
    options: &'a DriveOptions,
    visitor: Option<SharedVisitor>,
    opened: mpsc::Sender<Result<Opened, OpenError>>,
}

/// Recovers the ring on the drive thread, the visitor (if any) seeing every live entry; the
/// thread's reference to the visitor is gone when this returns.
fn recover_on_thread<B: IoBackend>(
    backend: B,
    path: &Path,
    options: &DriveOptions,
    visitor: Option<SharedVisitor>,
) -> Result<DriveCore<B>, OpenError> {
    let recovered = {
        let mut guard = visitor.as_ref().map(|visitor| {
            visitor
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
        });
        let visiting = guard
            .as_deref_mut()
            .map(|visitor| visitor as &mut dyn RecoveryVisitor);
        DriveCore::recover_visiting(backend, path, options, visiting)
    };
    drop(visitor);
    let mut core = recovered?;
    core.start_timers(options, Box::new(SystemClock));
    Ok(core)
}

/// The drive thread: build the backend, recover, report the open, run the state machine, and
/// whatever way it ends, leave no request without an outcome.
fn drive_thread<B, F>(open: ThreadOpen<'_>, make_backend: F, channel: ThreadChannel<'_>)
where
    B: IoBackend,
    F: FnOnce() -> io::Result<B>,
{
    let ThreadOpen {
        path,
        options,
        visitor,
        opened: opened_sender,
    } = open;
    let _drive_span = tracing::info_span!("sealog_drive", path = %path.display()).entered();
    if let Some(cpu) = options.cpu {
        let mut set = nix::sched::CpuSet::new();
        if set.set(cpu).is_ok() {
            let _ = nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set);
        }
    }
    let backend = match make_backend() {
        Ok(backend) => backend,
        Err(source) => {
            let _ = opened_sender.send(Err(OpenError::Io {
                path: path.to_path_buf(),
                action: "set up the I/O backend",
                source,
            }));
            return;
        }
    };
    let recovering = self::metrics::Recovering::start();
    let mut drive = match recover_on_thread(backend, path, options, visitor) {
        Ok(drive) => drive,
        Err(error) => {
            let _ = opened_sender.send(Err(error));
            return;
        }
    };
    drive.attach_telemetry(path, options, recovering);
    let opened = Opened {
        report: drive.recovery_report().clone(),
        waker: drive.backend_mut().waker(),
        cache: drive.backend_mut().cache_info(),
        durability: drive.durability(),
        purpose: drive.purpose(),
        view: Arc::clone(&drive.view),
    };
    if opened_sender.send(Ok(opened)).is_err() {
        return;
    }
    let ThreadChannel {
        receiver,
        sleeping,
        stopped,
        notifier,
    } = channel;
    drive.adopt_notifier(notifier);
    // Whatever way this thread ends from here (returning, or unwinding from anywhere below),
    // the guard marks the drive stopped and drops what is left in the channel.
    let _stop = StopGuard { stopped, receiver };
    let outcome = catch_unwind(AssertUnwindSafe(|| drive.run(receiver, sleeping)));
    if let Err(panic) = outcome {
        let message = panic_message(panic.as_ref());
        tracing::error!(path = %path.display(), "the drive thread panicked: {message}");
        drive.fail_all(DriveFailure::ThreadPanicked { message });
    }
    // Dropping the core drops whatever it still holds; each completer completes its ticket.
    drop(drive);
}

/// What the drive thread shares with the drive's handle.
struct ThreadChannel<'a> {
    receiver: &'a Receiver<Request>,
    /// The thread is (about to be) blocked: a client that sends wakes it.
    sleeping: &'a AtomicBool,
    /// The thread has stopped taking requests.
    stopped: &'a AtomicBool,
    /// Where the drive's tickets park.
    notifier: Arc<Notifier>,
}

/// Marks the drive stopped and drops every request left in its channel, when the drive thread
/// ends for whatever reason (its drop runs on a panic too). From then on no request is taken:
/// clients see `stopped` and stop sending, and a request that lands after the drain is dropped
/// by its sender (see `Drive::send`), which completes its ticket or reply with `DriveClosed`.
struct StopGuard<'a> {
    stopped: &'a AtomicBool,
    receiver: &'a Receiver<Request>,
}

impl Drop for StopGuard<'_> {
    fn drop(&mut self) {
        self.stopped.store(true, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        while self.receiver.try_recv().is_ok() {}
    }
}

/// The text of a panic's payload.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_string()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic without a message".to_string()
    }
}

/// The outcome of a drive's request as a future: a read or trim answered by the drive thread,
/// or one answered at once. A drive that stops without answering yields its close error.
#[must_use = "futures do nothing unless awaited"]
pub struct DriveFuture<T, E> {
    ready: Option<Result<T, E>>,
    answer: Option<Answer<Result<T, E>>>,
}

impl<T, E> DriveFuture<T, E> {
    fn ready(outcome: Result<T, E>) -> Self {
        DriveFuture {
            ready: Some(outcome),
            answer: None,
        }
    }

    fn waiting(answer: Answer<Result<T, E>>) -> Self {
        DriveFuture {
            ready: None,
            answer: Some(answer),
        }
    }
}

impl<T: Unpin, E: From<DriveClosed> + Unpin> Future for DriveFuture<T, E> {
    type Output = Result<T, E>;

    fn poll(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Self::Output> {
        if let Some(outcome) = self.ready.take() {
            return Poll::Ready(outcome);
        }
        let Some(answer) = self.answer.as_mut() else {
            panic!("a DriveFuture polled after it completed");
        };
        match Pin::new(answer).poll(context) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(answered) => {
                self.answer = None;
                Poll::Ready(answered.unwrap_or_else(|_| Err(DriveClosed.into())))
            }
        }
    }
}

/// [`Drive::read_async`]'s future: the entry's payload alone.
#[must_use = "futures do nothing unless awaited"]
pub struct PayloadFuture {
    entry: DriveFuture<LogEntry, ReadError>,
}

impl Future for PayloadFuture {
    type Output = Result<Vec<u8>, ReadError>;

    fn poll(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.entry)
            .poll(context)
            .map(|outcome| outcome.map(|entry| entry.payload))
    }
}

/// The records of an all-or-nothing group, each payload's CRC computed here (on the caller's
/// thread).
fn group_records(entries: Vec<NewEntry>) -> Records {
    Records::Group(
        entries
            .into_iter()
            .map(|entry| {
                let payload_crc = sealog_wal::format::payload_crc(&entry.payload);
                QueuedRecord {
                    kind: entry.kind,
                    header: entry.header,
                    payload: Payload::Shared(entry.payload),
                    payload_crc,
                }
            })
            .collect(),
    )
}

/// Waits for the durable tail to reach an LSN ([`Drive::durable_async`]): the durable tail
/// then, or why it never will (the drive failed or closed).
#[must_use = "futures do nothing unless awaited"]
pub struct DurableFuture {
    view: Arc<ReadView>,
    lsn: u64,
    id: Option<u64>,
}

impl Future for DurableFuture {
    type Output = Result<u64, WaitError>;

    fn poll(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Self::Output> {
        let lsn = self.lsn;
        for registered in [false, true] {
            let durable = self.view.durable_lsn();
            if durable >= lsn {
                if let Some(id) = self.id.take() {
                    self.view.unregister(lsn, id);
                }
                return Poll::Ready(Ok(durable));
            }
            if let Some(stopped) = self.view.stopped() {
                if let Some(id) = self.id.take() {
                    self.view.unregister(lsn, id);
                }
                return Poll::Ready(Err(
                    stopped.map_or_else(WaitError::Closed, WaitError::Failed)
                ));
            }
            if !registered {
                // Registered (or its waker refreshed), then looked at again: an advance between
                // the first look and the registration woke nobody.
                let id = self.id;
                self.id = Some(self.view.register_task(lsn, id, context.waker()));
            }
        }
        Poll::Pending
    }
}

impl Drop for DurableFuture {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            self.view.unregister(self.lsn, id);
        }
    }
}

pub use self::view::ReadStats;
