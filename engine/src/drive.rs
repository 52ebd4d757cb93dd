//! One drive: the thread that owns a ring's backend (its io_uring, registered files and
//! buffers), recovers the ring on open, and runs group commit. Clients on any thread hand it
//! requests through a bounded channel; it gathers queued appends into a batch while earlier
//! batches' write and flush are in flight (up to the window recorded in the ring), and completes
//! tickets in LSN order, each only after the flush covering it succeeded.
//!
//! Durability frontiers, always `lsn_durable <= lsn_written <= lsn_appended`:
//! - `lsn_appended`: the last LSN given to a record (encoded into a submitted batch);
//! - `lsn_written`: the last LSN whose batch write completed;
//! - `lsn_durable`: the last LSN acknowledged: its batch's flush (or dsync write) completed and
//!   every batch before it was acknowledged. A crash never loses an entry at or below it.
//!
//! A failed write or flush makes the drive fail-stop: every waiting and later request gets the
//! error, nothing is acknowledged after it, and only reopening (which replays the device)
//! continues. A flush is never retried.

use std::collections::VecDeque;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{fence, AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, TryRecvError};
use hdrhistogram::Histogram;
use sealog_wal::batch::{BatchBuilder, BatchStart};
use sealog_wal::format::{ControlBlock, EntryHeader, ENTRY_HEADER_SIZE};
use sealog_wal::{
    EncodeError, Geometry, Kind, Position, RecoveryMode, RecoveryReport, ReplayError,
    ReplayOptions, RingSource, WriteCursor,
};

use crate::error::{DriveError, OpenError};
use crate::io::{run_sync, Completion, FlushOrder, IoBackend, Tag, Waker, WriteSync};
use crate::ticket::{Ticket, TicketState};

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
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WhenFull {
    /// Fail the append with [`DriveError::RingFull`].
    Fail,
    /// Wait up to this long for a trim, then fail.
    Wait(Duration),
}

/// How a drive is opened.
#[derive(Clone, Debug)]
pub struct DriveOptions {
    /// How appends are made durable.
    pub durability: Durability,
    /// Ring-full backpressure.
    pub when_full: WhenFull,
    /// Strict (default) or truncating recovery.
    pub recovery: RecoveryMode,
    /// Pin the drive thread to this CPU.
    pub cpu: Option<usize>,
    /// Capacity of the client channel (requests queued before `append` blocks).
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
    /// the drive thread; a [`DriveCore`] stepped by hand never waits on the clock.
    pub group_gather_us: u64,
}

impl Default for DriveOptions {
    fn default() -> DriveOptions {
        DriveOptions {
            durability: Durability::Fdatasync,
            when_full: WhenFull::Fail,
            recovery: RecoveryMode::Strict,
            cpu: None,
            channel_capacity: 65536,
            spin_before_block_us: SPIN_BEFORE_BLOCK_US_DEFAULT,
            sqpoll_idle_ms: None,
            group_gather_us: GROUP_GATHER_US_DEFAULT,
        }
    }
}

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

/// The drive's state, as `stats()` reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DriveState {
    /// Accepting appends.
    Running,
    /// Stopped after an I/O error; reopen to continue.
    Failed(DriveError),
}

/// Counters and histograms of a drive.
#[derive(Clone, Debug)]
pub struct Stats {
    /// Entries acknowledged.
    pub appends: u64,
    /// Payload bytes acknowledged.
    pub payload_bytes: u64,
    /// Batches acknowledged.
    pub batches: u64,
    /// Entries per batch.
    pub batch_entries: Histogram<u64>,
    /// Microseconds from a batch's submission to its acknowledgement (write plus sync).
    pub sync_latency_us: Histogram<u64>,
    /// Microseconds the device sat without a batch between the acknowledgement of the last one
    /// in flight and the start of the next: the clients' turnaround plus group commit's
    /// gathering (with one writer, the time it takes to send its next append).
    pub idle_gap_us: Histogram<u64>,
    /// The highest acknowledged LSN.
    pub lsn_durable: u64,
    /// Running or failed.
    pub state: DriveState,
}

/// Where a read's records go.
type BatchReply = mpsc::Sender<Result<Vec<(u64, Vec<u8>)>, DriveError>>;

/// A request to a drive: what clients send its thread, and what a simulation hands its
/// [`DriveCore`] directly. Built with [`Request::append`], [`Request::read`] and
/// [`Request::trim`], which return the handle the outcome arrives on.
pub struct Request(RequestKind);

enum RequestKind {
    Append {
        kind: Kind,
        payload: Vec<u8>,
        ticket: Arc<TicketState>,
    },
    ReadBatch {
        lsn: u64,
        reply: BatchReply,
    },
    Trim {
        lsn: u64,
        reply: mpsc::Sender<Result<(), DriveError>>,
    },
    Stats {
        reply: mpsc::Sender<Stats>,
    },
    Close,
}

/// The outcome of a trim request.
pub type TrimReply = mpsc::Receiver<Result<(), DriveError>>;
/// The outcome of a read request: the records of the batch holding the LSN, from it on.
pub type ReadReply = mpsc::Receiver<Result<Vec<(u64, Vec<u8>)>, DriveError>>;

impl Request {
    /// An append of a record of `kind`; the ticket yields its LSN once durable.
    pub fn append(kind: Kind, payload: Vec<u8>) -> (Request, Ticket) {
        let (ticket, state) = Ticket::new();
        let request = RequestKind::Append {
            kind,
            payload,
            ticket: state,
        };
        (Request(request), ticket)
    }

    /// A read of the batch holding `lsn`.
    pub fn read(lsn: u64) -> (Request, ReadReply) {
        let (reply, answer) = mpsc::channel();
        (Request(RequestKind::ReadBatch { lsn, reply }), answer)
    }

    /// A durable trim up to `lsn`, inclusive.
    pub fn trim(lsn: u64) -> (Request, TrimReply) {
        let (reply, answer) = mpsc::channel();
        (Request(RequestKind::Trim { lsn, reply }), answer)
    }
}

/// A handle to one drive and its thread. Cloneable handles are not needed: share it by
/// reference or `Arc`; every method takes `&self`.
pub struct Drive {
    path: PathBuf,
    sender: Sender<Request>,
    waker: Waker,
    sleeping: Arc<AtomicBool>,
    thread: Mutex<Option<JoinHandle<()>>>,
    report: RecoveryReport,
    geometry: Geometry,
    cache: Option<crate::io::CacheInfo>,
}

/// What recovery hands back to `open`.
struct Opened {
    report: RecoveryReport,
    waker: Waker,
    cache: Option<crate::io::CacheInfo>,
}

impl Drive {
    /// Opens the ring at `path` for writing, on its own thread with the io_uring backend.
    pub fn open(path: &Path, options: DriveOptions) -> Result<Drive, OpenError> {
        let files = crate::storage::open(path, crate::storage::Access::ReadWrite)?;
        if let Ok(unwritten) = crate::storage::unwritten_bytes(&files) {
            if unwritten > 0 {
                eprintln!(
                    "sealog: {}: {unwritten} bytes of segment files are in unwritten extents; \
                     the first write into them makes fdatasync commit metadata (format zero-fills \
                     segments to avoid this)",
                    path.display()
                );
            }
        }
        let geometry = files.geometry;
        let buffer_bytes = buffer_bytes(&geometry);
        let buffers = buffer_count(&geometry);
        let spin_us = options.spin_before_block_us;
        let sqpoll_idle_ms = options.sqpoll_idle_ms;
        Drive::open_with(path, geometry, options, move || {
            let (mut backend, note) = crate::uring::UringBackend::with_sqpoll(
                files,
                buffers,
                buffer_bytes,
                sqpoll_idle_ms,
            )?;
            backend.set_spin_us(spin_us);
            if let Some(note) = note {
                eprintln!("sealog: {note}");
            }
            Ok(backend)
        })
    }

    /// Opens a drive on a backend built by `make_backend` on the drive thread (the io_uring
    /// backend must be built by the thread that submits to it; tests pass the memory backend).
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
        let (sender, receiver) = crossbeam_channel::bounded(options.channel_capacity);
        let (opened_sender, opened_receiver) = mpsc::channel();
        let sleeping = Arc::new(AtomicBool::new(false));
        let thread_sleeping = Arc::clone(&sleeping);
        let thread_path = path.to_path_buf();
        let thread = std::thread::Builder::new()
            .name(format!("sealog-drive {}", path.display()))
            .spawn(move || {
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
                            path: thread_path,
                            action: "set up the I/O backend",
                            source,
                        }));
                        return;
                    }
                };
                let mut drive = match DriveCore::recover(backend, &thread_path, &options) {
                    Ok(drive) => drive,
                    Err(error) => {
                        let _ = opened_sender.send(Err(error));
                        return;
                    }
                };
                let opened = Opened {
                    report: drive.report.clone(),
                    waker: drive.backend.waker(),
                    cache: drive.backend.cache_info(),
                };
                if opened_sender.send(Ok(opened)).is_err() {
                    return;
                }
                drive.group_gather_us = options.group_gather_us;
                drive.run(&receiver, &thread_sleeping);
            })
            .map_err(|source| OpenError::Io {
                path: path.to_path_buf(),
                action: "start the drive thread",
                source,
            })?;
        let opened = match opened_receiver.recv() {
            Ok(Ok(opened)) => opened,
            Ok(Err(error)) => {
                let _ = thread.join();
                return Err(error);
            }
            Err(_) => {
                let _ = thread.join();
                return Err(OpenError::Io {
                    path: path.to_path_buf(),
                    action: "recover (the drive thread stopped)",
                    source: io::Error::other("drive thread exited"),
                });
            }
        };
        Ok(Drive {
            path: path.to_path_buf(),
            sender,
            waker: opened.waker,
            sleeping,
            thread: Mutex::new(Some(thread)),
            report: opened.report,
            geometry,
            cache: opened.cache,
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

    fn send(&self, request: Request) -> Result<(), DriveError> {
        self.sender.send(request).map_err(|_| DriveError::Closed)?;
        // Pairs with the drive's fence between setting `sleeping` and checking the channel:
        // either it sees this request, or this sees it asleep and wakes it. Only the first
        // client to see it asleep wakes it (the swap): the drive takes every request queued by
        // then when it wakes, and announces its next sleep anew, so many writers arriving while
        // a flush is in flight cost one wake-up (one eventfd write), not one each.
        fence(Ordering::SeqCst);
        if self.sleeping.load(Ordering::SeqCst) && self.sleeping.swap(false, Ordering::SeqCst) {
            (self.waker)();
        }
        Ok(())
    }

    /// Appends a data record; the ticket yields its LSN once it is durable.
    pub fn append(&self, payload: Vec<u8>) -> Result<Ticket, DriveError> {
        self.append_kind(Kind::Data, payload)
    }

    /// Appends a record of `kind` (data, or the trim/seal/fence records of the layers above).
    pub fn append_kind(&self, kind: Kind, payload: Vec<u8>) -> Result<Ticket, DriveError> {
        let limit = self.geometry.payload_size_max_bytes();
        if payload.len() as u64 > u64::from(limit) || kind == Kind::Padding {
            return Err(DriveError::PayloadTooLarge {
                payload_len: payload.len() as u64,
                payload_size_max_bytes: limit,
            });
        }
        let (request, ticket) = Request::append(kind, payload);
        self.send(request)?;
        Ok(ticket)
    }

    /// Reads a live (acknowledged, untrimmed) entry, checking its checksums and position.
    pub fn read(&self, lsn: u64) -> Result<Vec<u8>, DriveError> {
        let entries = self.read_batch(lsn)?;
        entries
            .into_iter()
            .find(|(found, _)| *found == lsn)
            .map(|(_, payload)| payload)
            .ok_or(DriveError::LsnOutOfRange {
                lsn,
                first_lsn: 0,
                next_lsn: 0,
            })
    }

    /// The entries of the batch holding `lsn`, from `lsn` on.
    fn read_batch(&self, lsn: u64) -> Result<Vec<(u64, Vec<u8>)>, DriveError> {
        let (request, answer) = Request::read(lsn);
        self.send(request)?;
        answer.recv().map_err(|_| DriveError::Closed)?
    }

    /// Iterates over live entries from `lsn` on, a batch at a time.
    pub fn iter_from(&self, lsn: u64) -> EntryIter<'_> {
        EntryIter {
            drive: self,
            next_lsn: lsn,
            batch: VecDeque::new(),
            done: false,
        }
    }

    /// Releases every entry with LSN at or below `lsn` (inclusive), durably: once this returns,
    /// the segments before the new head may be reused, and the entries are gone from reads.
    pub fn trim(&self, lsn: u64) -> Result<(), DriveError> {
        let (request, answer) = Request::trim(lsn);
        self.send(request)?;
        answer.recv().map_err(|_| DriveError::Closed)?
    }

    /// Counters, histograms and state.
    pub fn stats(&self) -> Result<Stats, DriveError> {
        let (reply, answer) = mpsc::channel();
        self.send(Request(RequestKind::Stats { reply }))?;
        answer.recv().map_err(|_| DriveError::Closed)
    }

    /// Stops the drive thread after it has finished what is in flight.
    pub fn close(&self) {
        let _ = self.send(Request(RequestKind::Close));
        if let Some(thread) = self.thread.lock().expect("thread lock").take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Drive {
    fn drop(&mut self) {
        self.close();
    }
}

/// Live entries from an LSN on: `(lsn, payload)`.
pub struct EntryIter<'a> {
    drive: &'a Drive,
    next_lsn: u64,
    batch: VecDeque<(u64, Vec<u8>)>,
    done: bool,
}

impl Iterator for EntryIter<'_> {
    type Item = Result<(u64, Vec<u8>), DriveError>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(entry) = self.batch.pop_front() {
            self.next_lsn = entry.0 + 1;
            return Some(Ok(entry));
        }
        if self.done {
            return None;
        }
        match self.drive.read_batch(self.next_lsn) {
            Ok(entries) if entries.is_empty() => {
                self.done = true;
                None
            }
            Ok(entries) => {
                self.batch = entries.into();
                self.next()
            }
            Err(DriveError::LsnOutOfRange { .. }) => {
                self.done = true;
                None
            }
            Err(error) => {
                self.done = true;
                Some(Err(error))
            }
        }
    }
}

/// Bytes of each pool buffer: a segment header block plus the largest batch.
pub fn buffer_bytes(geometry: &Geometry) -> usize {
    geometry.block_size_bytes as usize + geometry.batch_size_max_bytes as usize
}

/// Buffers per drive: one per batch in flight, one for reads, one for control writes.
pub fn buffer_count(geometry: &Geometry) -> usize {
    geometry.window_batches_max as usize + 2
}

/// A batch written and not yet acknowledged.
struct Inflight {
    sequence: u64,
    buffer: usize,
    position: Position,
    bytes: u32,
    first_lsn: u64,
    next_lsn: u64,
    ring_offset: u64,
    write_done: bool,
    durable: bool,
    payload_bytes: u64,
    submitted: Instant,
}

/// A batch in the ring, for reads and trim.
#[derive(Clone, Copy, Debug)]
struct IndexedBatch {
    position: Position,
    first_lsn: u64,
    next_lsn: u64,
    bytes: u32,
    incarnation: u32,
}

/// What a tag stands for. Tags are `sequence << 3 | kind`.
const TAG_WRITE: u64 = 0;
const TAG_FLUSH: u64 = 1;
const TAG_READ: u64 = 2;
const TAG_CONTROL_WRITE: u64 = 3;
const TAG_CONTROL_FLUSH: u64 = 4;
const TAG_SYNC: u64 = 5;
const TAG_READ_AHEAD: u64 = 6;

struct PendingRead {
    sequence: u64,
    buffer: usize,
    batch: IndexedBatch,
    lsn: u64,
    reply: BatchReply,
}

struct PendingTrim {
    control: ControlBlock,
    drop_to_lsn: u64,
    reply: mpsc::Sender<Result<(), DriveError>>,
    flush_submitted: bool,
}

/// The drive's state machine: what its thread runs, stepped by requests and I/O completions.
/// A simulation drives it directly (one thread, a simulated backend), so a seed replays exactly.
pub struct DriveCore<B: IoBackend> {
    backend: B,
    durability: Durability,
    when_full: WhenFull,
    spin_before_block_us: u64,
    group_gather_us: u64,
    /// While the device is idle after a batch: how many appends the next batch waits for, and
    /// until when (see [`DriveOptions::group_gather_us`]).
    expected_group: u64,
    gather_until: Option<Instant>,
    geometry: Geometry,
    control: ControlBlock,
    incarnation: u32,
    cursor: WriteCursor,
    lsn_appended: u64,
    lsn_written: u64,
    lsn_durable: u64,
    report: RecoveryReport,
    queue: VecDeque<(Kind, Vec<u8>, Arc<TicketState>)>,
    /// Bytes the queued appends will take in a batch, headers included.
    queued_bytes: u64,
    waiters: VecDeque<Arc<TicketState>>,
    inflight: VecDeque<Inflight>,
    index: VecDeque<IndexedBatch>,
    reads: VecDeque<PendingRead>,
    reads_waiting: VecDeque<(u64, BatchReply)>,
    trims: VecDeque<(u64, mpsc::Sender<Result<(), DriveError>>)>,
    trim_in_flight: Option<PendingTrim>,
    trim_buffer: Option<usize>,
    full_since: Option<Instant>,
    failed: Option<DriveError>,
    sequence: u64,
    completions: Vec<Completion>,
    appends: u64,
    payload_bytes: u64,
    batches: u64,
    batch_entries: Histogram<u64>,
    sync_latency_us: Histogram<u64>,
    idle_gap_us: Histogram<u64>,
    /// When the last batch in flight was acknowledged (the device has had no batch since).
    idle_since: Option<Instant>,
    closing: bool,
}

/// Reads the ring for replay through the backend (O_DIRECT on real devices), with reads ahead:
/// while replay checks a chunk, the next ones (as replay hints them) are already on their way
/// into pool buffers 1..=[`READ_AHEAD_DEPTH`] (buffer 0 serves the synchronous reads). Replay's
/// scan is sequential, so a full ring is read at about the device's sequential bandwidth with a
/// few reads in flight, rather than at bandwidth x (read time / (read time + check time)).
struct BackendSource<'a, B: IoBackend> {
    backend: &'a mut B,
    size: u64,
    /// Reads ahead, in the order they were hinted (and will be asked for).
    ahead: VecDeque<ReadAhead>,
    completions: Vec<Completion>,
}

/// A read ahead: where it reads, how much, into which buffer, and its outcome once seen.
struct ReadAhead {
    ring_offset: u64,
    len: usize,
    buffer: usize,
    outcome: Option<Result<u32, i32>>,
}

/// Reads recovery keeps ahead of replay at most (each in a pool buffer of its own).
const READ_AHEAD_DEPTH: usize = 3;

/// The tag of a read ahead into `buffer`.
fn read_ahead_tag(buffer: usize) -> Tag {
    (buffer as u64) << 3 | TAG_READ_AHEAD
}

impl<B: IoBackend> BackendSource<'_, B> {
    /// Reaps completions (waiting for at least `min_complete`): each read ahead's outcome is
    /// noted in its entry; the synchronous read's outcome, if among them, is returned.
    fn reap(&mut self, min_complete: usize) -> io::Result<Option<Result<u32, i32>>> {
        self.completions.clear();
        self.backend.wait(min_complete, &mut self.completions)?;
        let mut sync_outcome = None;
        for completion in &self.completions {
            if completion.tag == TAG_SYNC {
                sync_outcome = Some(completion.result);
            } else if let Some(ahead) = self
                .ahead
                .iter_mut()
                .find(|ahead| read_ahead_tag(ahead.buffer) == completion.tag)
            {
                ahead.outcome = Some(completion.result);
            }
        }
        Ok(sync_outcome)
    }

    /// Waits until the oldest read ahead has completed, and takes it. (No synchronous read is
    /// in flight meanwhile: `read_at` settles reads ahead before it submits one.)
    fn settle_front(&mut self) -> io::Result<Option<ReadAhead>> {
        while self
            .ahead
            .front()
            .is_some_and(|ahead| ahead.outcome.is_none())
        {
            self.reap(1)?;
        }
        Ok(self.ahead.pop_front())
    }
}

impl<B: IoBackend> Drop for BackendSource<'_, B> {
    /// The reads ahead's buffers go back to the drive only once the device is done with them.
    fn drop(&mut self) {
        while let Ok(Some(_)) = self.settle_front() {}
    }
}

impl<B: IoBackend> RingSource for BackendSource<'_, B> {
    fn size_bytes(&self) -> u64 {
        self.size
    }

    fn read_at(&mut self, ring_offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let chunk = self.backend.pool().buffer_bytes();
        let mut done = 0usize;
        // The front comes from the oldest read ahead when it began exactly here; reads ahead
        // that do not match are settled and forgotten. A failed read ahead is forgotten too:
        // the synchronous read below redoes it and reports its own error.
        while let Some(ahead) = self.settle_front()? {
            if ahead.ring_offset == ring_offset {
                if matches!(ahead.outcome, Some(Ok(_))) {
                    done = ahead.len.min(buf.len());
                    let pool = self.backend.pool();
                    buf[..done].copy_from_slice(&pool.buffer(ahead.buffer)[..done]);
                }
                break;
            }
        }
        while done < buf.len() {
            let len = (buf.len() - done).min(chunk);
            self.backend
                .submit_read(TAG_SYNC, ring_offset + done as u64, 0, len as u32)?;
            let outcome = loop {
                if let Some(outcome) = self.reap(1)? {
                    break outcome;
                }
            };
            outcome.map_err(io::Error::from_raw_os_error)?;
            buf[done..done + len].copy_from_slice(&self.backend.pool().buffer(0)[..len]);
            done += len;
        }
        Ok(())
    }

    fn read_ahead(&mut self, ring_offset: u64, len: usize) {
        let pool = self.backend.pool();
        let depth = READ_AHEAD_DEPTH.min(pool.count().saturating_sub(1));
        let len = len.min(pool.buffer_bytes());
        if len == 0
            || self.ahead.len() >= depth
            || self
                .ahead
                .iter()
                .any(|ahead| ahead.ring_offset == ring_offset)
        {
            return;
        }
        let Some(buffer) =
            (1..=depth).find(|buffer| self.ahead.iter().all(|ahead| ahead.buffer != *buffer))
        else {
            return;
        };
        let tag = read_ahead_tag(buffer);
        if self
            .backend
            .submit_read(tag, ring_offset, buffer, len as u32)
            .is_err()
        {
            return;
        }
        self.ahead.push_back(ReadAhead {
            ring_offset,
            len,
            buffer,
            outcome: None,
        });
        // Hand it to the device now (a backend may hold submissions until it is waited on). A
        // failure of the ring itself is reported by the next synchronous read.
        let _ = self.reap(0);
    }
}

fn sync_write<B: IoBackend>(backend: &mut B, ring_offset: u64, len: u32) -> io::Result<()> {
    backend.submit_write(TAG_SYNC, ring_offset, 0, 0, len, WriteSync::None)?;
    run_sync(backend, TAG_SYNC)?;
    Ok(())
}

fn sync_flush<B: IoBackend>(backend: &mut B, ring_offset: u64) -> io::Result<()> {
    backend.submit_flush(TAG_SYNC, ring_offset, FlushOrder::Independent)?;
    run_sync(backend, TAG_SYNC)?;
    Ok(())
}

impl<B: IoBackend> DriveCore<B> {
    /// Recovery on open: replay, make the cut and the dirty region durable, write the new
    /// incarnation's control block, flush, and only then accept appends.
    pub fn recover(mut backend: B, path: &Path, options: &DriveOptions) -> Result<Self, OpenError> {
        let io_error = |action: &'static str| {
            move |source: io::Error| OpenError::Io {
                path: path.to_path_buf(),
                action,
                source,
            }
        };
        let replay_options = ReplayOptions {
            mode: options.recovery,
            read_chunk_bytes: backend.pool().buffer_bytes() as u32,
        };
        let size = backend.size_bytes();
        let mut index: VecDeque<IndexedBatch> = VecDeque::new();
        let report = {
            let mut source = BackendSource {
                backend: &mut backend,
                size,
                ahead: VecDeque::new(),
                completions: Vec::new(),
            };
            sealog_wal::replay(
                &mut source,
                &replay_options,
                &mut |entry| match index.back_mut() {
                    Some(batch) if batch.position == entry.batch => batch.next_lsn = entry.lsn + 1,
                    _ => index.push_back(IndexedBatch {
                        position: entry.batch,
                        first_lsn: entry.batch_first_lsn,
                        next_lsn: entry.lsn + 1,
                        bytes: entry.batch_bytes,
                        incarnation: entry.incarnation,
                    }),
                },
            )
        };
        let report = match report {
            Ok(report) => report,
            Err(error @ ReplayError::Corruption(_)) => {
                return Err(OpenError::Corrupt {
                    path: path.to_path_buf(),
                    source: error,
                })
            }
            Err(error) => {
                return Err(OpenError::Ring {
                    path: path.to_path_buf(),
                    source: error,
                })
            }
        };
        let geometry = report.control.geometry;
        // Entries that survived in the volatile cache (written, never acknowledged) become
        // durable before anyone reads them.
        for segment in 0..geometry.segment_count {
            sync_flush(&mut backend, geometry.segment_ring_offset(segment))
                .map_err(io_error("flush recovered segments"))?;
        }
        let incarnation = report
            .incarnation_max
            .checked_add(1)
            .ok_or_else(|| OpenError::Io {
                path: path.to_path_buf(),
                action: "bump the incarnation",
                source: io::Error::other("incarnation overflow"),
            })?;
        // Nothing live: the head moves to the cut, where this incarnation writes next.
        let (head, head_lsn, head_incarnation) = if index.is_empty() {
            (report.next_position, report.next_lsn, incarnation)
        } else {
            let control = report.control;
            (control.head, control.head_lsn, control.head_incarnation)
        };
        let control = ControlBlock {
            sequence: report.control.sequence + 1,
            incarnation,
            trim_lsn: report.trim_lsn.min(report.next_lsn - 1),
            head,
            head_lsn,
            head_incarnation,
            cut: report.next_position,
            cut_incarnation: incarnation,
            ..report.control
        };
        // The control block with the cut and the new incarnation goes first: from then on
        // nothing of an older incarnation at or after the cut counts, so a crash while the
        // region after the cut is zeroed leaves a ring that recovers to this same log.
        write_control(&mut backend, &control).map_err(io_error("write the control block"))?;
        // Rule 6: zero the possibly dirty region after the cut, durably, before any append.
        if let Some(invalidate) = report.invalidate {
            let chunk = backend.pool().buffer_bytes() as u64;
            backend.pool().buffer_mut(0).fill(0);
            for (offset, len) in invalidate.ranges(&geometry) {
                let mut done = 0;
                while done < len {
                    let part = (len - done).min(chunk);
                    sync_write(&mut backend, offset + done, part as u32)
                        .map_err(io_error("invalidate the region after the cut"))?;
                    done += part;
                }
                sync_flush(&mut backend, offset).map_err(io_error("flush the invalidation"))?;
            }
        }
        let lsn_durable = report.next_lsn - 1;
        Ok(DriveCore {
            backend,
            durability: options.durability,
            when_full: options.when_full,
            spin_before_block_us: options.spin_before_block_us,
            group_gather_us: 0,
            expected_group: 0,
            gather_until: None,
            geometry,
            control,
            incarnation,
            cursor: WriteCursor {
                position: report.next_position,
                next_lsn: report.next_lsn,
            },
            lsn_appended: lsn_durable,
            lsn_written: lsn_durable,
            lsn_durable,
            report,
            queue: VecDeque::new(),
            queued_bytes: 0,
            waiters: VecDeque::new(),
            inflight: VecDeque::new(),
            index,
            reads: VecDeque::new(),
            reads_waiting: VecDeque::new(),
            trims: VecDeque::new(),
            trim_in_flight: None,
            trim_buffer: None,
            full_since: None,
            failed: None,
            sequence: 0,
            completions: Vec::with_capacity(64),
            appends: 0,
            payload_bytes: 0,
            batches: 0,
            batch_entries: Histogram::new(3).expect("histogram"),
            sync_latency_us: Histogram::new(3).expect("histogram"),
            idle_gap_us: Histogram::new(3).expect("histogram"),
            idle_since: None,
            closing: false,
        })
    }

    fn check_frontiers(&self) {
        debug_assert!(self.lsn_durable <= self.lsn_written);
        debug_assert!(self.lsn_written <= self.lsn_appended);
        debug_assert_eq!(self.lsn_appended + 1, self.cursor.next_lsn);
    }

    /// The thread's loop: take requests, start batches, wait, handle completions.
    fn run(&mut self, receiver: &Receiver<Request>, sleeping: &AtomicBool) {
        loop {
            // Appends waiting for room (ring full) make no progress until a trim arrives.
            if !self.is_busy() && !self.has_queued_work() {
                if self.closing {
                    return;
                }
                // Idle: block on the channel (with a deadline when appends wait for room).
                let request = match self.full_since {
                    Some(_) => receiver.recv_timeout(Duration::from_millis(10)).ok(),
                    None => self.spin_then_receive(receiver),
                };
                match request {
                    Some(request) => self.accept(request),
                    None if self.full_since.is_none() => return, // every handle dropped
                    None => {}
                }
            }
            self.drain(receiver);
            if self.gathering() {
                self.start_work();
                if self.gathering() {
                    // Let the writers just acknowledged run (on a machine with few CPUs they
                    // may be waiting for this one); the window is bounded.
                    std::thread::yield_now();
                    continue;
                }
            }
            sleeping.store(true, Ordering::SeqCst);
            fence(Ordering::SeqCst);
            let wait = if receiver.is_empty() {
                Wait::ForCompletion
            } else {
                Wait::No
            };
            self.step(wait);
            sleeping.store(false, Ordering::SeqCst);
        }
    }

    /// Waits for the next request: first polling the channel for up to the spin time (a client
    /// whose append was just acknowledged usually sends the next one within microseconds, and
    /// a drive thread that stays on its CPU takes it without a wake-up), then blocking.
    fn spin_then_receive(&self, receiver: &Receiver<Request>) -> Option<Request> {
        if self.spin_before_block_us > 0 {
            let deadline = Instant::now() + Duration::from_micros(self.spin_before_block_us);
            loop {
                match receiver.try_recv() {
                    Ok(request) => return Some(request),
                    Err(TryRecvError::Disconnected) => return None,
                    Err(TryRecvError::Empty) if Instant::now() >= deadline => break,
                    Err(TryRecvError::Empty) => std::hint::spin_loop(),
                }
            }
        }
        receiver.recv().ok()
    }

    /// One turn: start what can start (batches up to the window, reads, a trim), then hand the
    /// device what is queued and handle what it completed, waiting for at least one completion
    /// when told to and something is in flight.
    pub fn step(&mut self, wait: Wait) {
        self.start_work();
        if self.is_busy() {
            let wait_for = usize::from(wait == Wait::ForCompletion);
            let waited = self.backend.wait(wait_for, &mut self.completions);
            if let Err(error) = waited {
                self.fail("wait", 0, error.raw_os_error().unwrap_or(libc::EIO));
            }
            let mut completions = std::mem::take(&mut self.completions);
            for completion in completions.drain(..) {
                self.on_completion(completion);
            }
            self.completions = completions;
        }
        self.check_frontiers();
    }

    /// Takes a request, as the thread does when one arrives on the channel.
    pub fn submit(&mut self, request: Request) {
        self.accept(request);
    }

    /// Whether I/O is in flight.
    pub fn is_busy(&self) -> bool {
        !self.inflight.is_empty() || !self.reads.is_empty() || self.trim_in_flight.is_some()
    }

    /// Whether requests are waiting to start (appends held back by a full ring aside).
    pub fn has_queued_work(&self) -> bool {
        let appends_can_start = !self.queue.is_empty() && self.full_since.is_none();
        appends_can_start || !self.trims.is_empty() || !self.reads_waiting.is_empty()
    }

    /// The highest acknowledged LSN.
    pub fn lsn_durable(&self) -> u64 {
        self.lsn_durable
    }

    /// The trim point of the current durable control block.
    pub fn durable_trim_lsn(&self) -> u64 {
        self.control.trim_lsn
    }

    /// What recovery found when this core was opened.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.report
    }

    /// Counters, histograms and state.
    pub fn stats_now(&self) -> Stats {
        self.stats()
    }

    /// The backend (a simulation crashes its simulated drive through this).
    pub fn backend_mut(&mut self) -> &mut B {
        &mut self.backend
    }

    fn drain(&mut self, receiver: &Receiver<Request>) {
        for _ in 0..65536 {
            match receiver.try_recv() {
                Ok(request) => self.accept(request),
                Err(TryRecvError::Empty) | Err(TryRecvError::Disconnected) => break,
            }
        }
    }

    fn accept(&mut self, request: Request) {
        match request.0 {
            RequestKind::Append {
                kind,
                payload,
                ticket,
            } => match &self.failed {
                Some(error) => ticket.complete(Err(error.clone())),
                None => {
                    self.queued_bytes += payload.len() as u64 + ENTRY_HEADER_SIZE as u64;
                    self.queue.push_back((kind, payload, ticket));
                }
            },
            RequestKind::ReadBatch { lsn, reply } => self.reads_waiting.push_back((lsn, reply)),
            RequestKind::Trim { lsn, reply } => self.trims.push_back((lsn, reply)),
            RequestKind::Stats { reply } => {
                let _ = reply.send(self.stats());
            }
            RequestKind::Close => self.closing = true,
        }
    }

    fn stats(&self) -> Stats {
        Stats {
            appends: self.appends,
            payload_bytes: self.payload_bytes,
            batches: self.batches,
            batch_entries: self.batch_entries.clone(),
            sync_latency_us: self.sync_latency_us.clone(),
            idle_gap_us: self.idle_gap_us.clone(),
            lsn_durable: self.lsn_durable,
            state: match &self.failed {
                Some(error) => DriveState::Failed(error.clone()),
                None => DriveState::Running,
            },
        }
    }

    fn next_tag(&mut self, kind: u64) -> (u64, u64) {
        self.sequence += 1;
        (self.sequence, self.sequence << 3 | kind)
    }

    /// Starts what can start: batches up to the window, reads, one trim.
    fn start_work(&mut self) {
        if let Some(error) = self.failed.clone() {
            self.queued_bytes = 0;
            for (_, _, ticket) in self.queue.drain(..) {
                ticket.complete(Err(error.clone()));
            }
            for (_, reply) in self.reads_waiting.drain(..) {
                let _ = reply.send(Err(error.clone()));
            }
            for (_, reply) in self.trims.drain(..) {
                let _ = reply.send(Err(error.clone()));
            }
            return;
        }
        self.start_trim();
        while !self.queue.is_empty()
            && self.inflight.len() < self.geometry.window_batches_max as usize
            && self.backend.pool().free_count() > 1
            && self.batch_worth_starting()
        {
            if !self.start_batch() {
                break;
            }
        }
        self.expire_full_waits();
        while let Some((lsn, reply)) = self.reads_waiting.pop_front() {
            if self.backend.pool().free_count() <= 1 && !self.inflight.is_empty() {
                self.reads_waiting.push_front((lsn, reply));
                break;
            }
            self.start_read(lsn, reply);
        }
    }

    /// Group commit: with nothing in flight a batch starts at once (a lone client sees one
    /// write plus one flush); with batches in flight, the queue keeps gathering until it holds
    /// half a batch's worth, so a deep queue makes few large batches rather than many small
    /// ones that fill the window.
    ///
    /// When the device has just gone idle, the next batch waits (within the gathering window)
    /// for the group it expects: every append queued when the last batch completed plus every
    /// append that batch acknowledged, since in a closed loop those writers come straight back.
    fn batch_worth_starting(&self) -> bool {
        if self.queued_bytes >= u64::from(self.geometry.batch_size_max_bytes) / 2 {
            return true;
        }
        if !self.inflight.is_empty() {
            return false;
        }
        match self.gather_until {
            None => true,
            Some(until) => {
                self.queue.len() as u64 >= self.expected_group || Instant::now() >= until
            }
        }
    }

    /// Whether appends are queued, nothing is in flight and the next batch is still gathering.
    fn gathering(&self) -> bool {
        self.gather_until.is_some()
            && self.failed.is_none()
            && self.full_since.is_none()
            && !self.queue.is_empty()
            && !self.is_busy()
            && !self.batch_worth_starting()
    }

    fn expire_full_waits(&mut self) {
        let Some(since) = self.full_since else { return };
        let expired = match self.when_full {
            WhenFull::Fail => true,
            WhenFull::Wait(timeout) => since.elapsed() >= timeout,
        };
        if expired {
            let next_lsn = self.cursor.next_lsn;
            self.queued_bytes = 0;
            for (_, _, ticket) in self.queue.drain(..) {
                ticket.complete(Err(DriveError::RingFull { next_lsn }));
            }
            self.full_since = None;
        }
    }

    /// Encodes queued appends into one batch and submits its write (and flush). Returns false
    /// when nothing could start (ring full).
    fn start_batch(&mut self) -> bool {
        let geometry = self.geometry;
        let slot = match self
            .cursor
            .slot(&geometry, self.control.head, self.incarnation)
        {
            Ok(slot) => slot,
            Err(_) => {
                self.full_since.get_or_insert_with(Instant::now);
                return false;
            }
        };
        self.full_since = None;
        self.gather_until = None;
        if let Some(since) = self.idle_since.take() {
            let _ = self
                .idle_gap_us
                .record((since.elapsed().as_micros() as u64).max(1));
        }
        let block = geometry.block_size_bytes as usize;
        let buffer = self
            .backend
            .pool()
            .acquire()
            .expect("a free buffer was checked");
        let ring_id = self.control.ring_id;
        let start = BatchStart {
            ring_id,
            position: slot.position,
            first_lsn: self.cursor.next_lsn,
            watermark: self.lsn_durable,
            incarnation: self.incarnation,
            block_size_bytes: geometry.block_size_bytes,
            capacity_bytes: slot.capacity_bytes,
            payload_size_max_bytes: geometry.payload_size_max_bytes(),
        };
        let pool = self.backend.pool();
        let bytes = pool.buffer_mut(buffer);
        if let Some(header) = slot.segment_header {
            header.encode(ring_id, &mut bytes[..block]);
        }
        let mut builder = BatchBuilder::new(&mut bytes[block..], start);
        let mut taken = 0usize;
        let mut payload_bytes = 0u64;
        for (kind, payload, _) in self.queue.iter() {
            match builder.push(*kind, payload) {
                Ok(_) => {
                    taken += 1;
                    payload_bytes += payload.len() as u64;
                }
                Err(EncodeError::BatchFull { .. }) => break,
                Err(error) => unreachable!("payloads are checked when appended: {error}"),
            }
        }
        if taken == 0 {
            // Not one record fits in what is left of this segment: move to the next one.
            self.backend.pool().release(buffer);
            self.cursor.skip_to_next_segment(&geometry);
            return true;
        }
        let batch = builder.finish();
        for (_, payload, ticket) in self.queue.drain(..taken) {
            self.queued_bytes -= payload.len() as u64 + ENTRY_HEADER_SIZE as u64;
            self.waiters.push_back(ticket);
        }
        let (write_offset, write_len, buffer_offset) = match slot.segment_header {
            Some(_) => (
                slot.write_ring_offset(&geometry),
                batch.bytes + block as u32,
                0,
            ),
            None => (slot.write_ring_offset(&geometry), batch.bytes, block),
        };
        let (sequence, write_tag) = self.next_tag(TAG_WRITE);
        let sync = match self.durability {
            Durability::Dsync => WriteSync::Dsync,
            Durability::Fdatasync | Durability::NoSyncBenchmarkOnly => WriteSync::None,
        };
        let mut submitted = self.backend.submit_write(
            write_tag,
            write_offset,
            buffer,
            buffer_offset,
            write_len,
            sync,
        );
        if submitted.is_ok() && self.durability == Durability::Fdatasync {
            let flush_tag = sequence << 3 | TAG_FLUSH;
            submitted =
                self.backend
                    .submit_flush(flush_tag, write_offset, FlushOrder::AfterPreviousWrite);
        }
        self.inflight.push_back(Inflight {
            sequence,
            buffer,
            position: batch.position,
            bytes: batch.bytes,
            first_lsn: batch.first_lsn,
            next_lsn: batch.next_lsn(),
            ring_offset: write_offset,
            write_done: false,
            durable: false,
            payload_bytes,
            submitted: Instant::now(),
        });
        self.cursor.advance(&geometry, batch.bytes, batch.records);
        self.lsn_appended = self.cursor.next_lsn - 1;
        if let Err(error) = submitted {
            self.fail(
                "write",
                write_offset,
                error.raw_os_error().unwrap_or(libc::EIO),
            );
        }
        true
    }

    fn on_completion(&mut self, completion: Completion) {
        let sequence = completion.tag >> 3;
        match completion.tag & 7 {
            TAG_WRITE | TAG_FLUSH => self.on_batch_completion(sequence, completion),
            TAG_READ => self.on_read_completion(sequence, completion),
            TAG_CONTROL_WRITE | TAG_CONTROL_FLUSH => self.on_trim_completion(completion),
            _ => {}
        }
    }

    fn on_batch_completion(&mut self, sequence: u64, completion: Completion) {
        let Some(position) = self
            .inflight
            .iter()
            .position(|batch| batch.sequence == sequence)
        else {
            return;
        };
        let is_write = completion.tag & 7 == TAG_WRITE;
        let ring_offset = self.inflight[position].ring_offset;
        if let Err(errno) = completion.result {
            self.fail(if is_write { "write" } else { "flush" }, ring_offset, errno);
            return;
        }
        let batch = &mut self.inflight[position];
        if is_write {
            batch.write_done = true;
            if self.durability != Durability::Fdatasync {
                batch.durable = true;
            }
        } else {
            debug_assert!(batch.write_done, "a linked flush completes after its write");
            batch.durable = true;
        }
        self.lsn_written = self
            .inflight
            .iter()
            .take_while(|batch| batch.write_done)
            .last()
            .map_or(self.lsn_written, |batch| batch.next_lsn - 1)
            .max(self.lsn_written);
        self.acknowledge();
    }

    /// Acknowledges durable batches from the front, in LSN order.
    fn acknowledge(&mut self) {
        if self.failed.is_some() {
            return;
        }
        let mut acknowledged = 0u64;
        while self.inflight.front().is_some_and(|batch| batch.durable) {
            let batch = self.inflight.pop_front().expect("front");
            acknowledged += batch.next_lsn - batch.first_lsn;
            for lsn in batch.first_lsn..batch.next_lsn {
                let ticket = self.waiters.pop_front().expect("a ticket per record");
                ticket.complete(Ok(lsn));
            }
            self.lsn_durable = batch.next_lsn - 1;
            let records = batch.next_lsn - batch.first_lsn;
            self.appends += records;
            self.payload_bytes += batch.payload_bytes;
            self.batches += 1;
            let _ = self.batch_entries.record(records);
            let latency = batch.submitted.elapsed().as_micros() as u64;
            let _ = self.sync_latency_us.record(latency.max(1));
            self.index.push_back(IndexedBatch {
                position: batch.position,
                first_lsn: batch.first_lsn,
                next_lsn: batch.next_lsn,
                bytes: batch.bytes,
                incarnation: self.incarnation,
            });
            self.backend.pool().release(batch.buffer);
        }
        if acknowledged > 0 && self.inflight.is_empty() {
            let now = Instant::now();
            self.idle_since = Some(now);
            if self.group_gather_us > 0 {
                self.expected_group = self.queue.len() as u64 + acknowledged;
                self.gather_until = Some(now + Duration::from_micros(self.group_gather_us));
            }
        }
    }

    /// Fail-stop: no acknowledgement ever again; every waiter and queued request gets the error.
    fn fail(&mut self, operation: &'static str, ring_offset: u64, errno: i32) {
        if self.failed.is_some() {
            return;
        }
        let error = DriveError::Failed {
            operation,
            ring_offset,
            errno,
            message: errno_text(errno),
        };
        for ticket in self.waiters.drain(..) {
            ticket.complete(Err(error.clone()));
        }
        self.queued_bytes = 0;
        for (_, _, ticket) in self.queue.drain(..) {
            ticket.complete(Err(error.clone()));
        }
        if let Some(trim) = self.trim_in_flight.take() {
            let _ = trim.reply.send(Err(error.clone()));
        }
        for read in self.reads.drain(..) {
            let _ = read.reply.send(Err(error.clone()));
        }
        self.failed = Some(error);
        // Buffers of failed batches stay lent: the device may still hold them until their
        // completions arrive, and nothing is written again before a reopen.
        self.inflight.clear();
    }

    fn start_read(&mut self, lsn: u64, reply: BatchReply) {
        let first_live = self.control.trim_lsn + 1;
        let out_of_range = DriveError::LsnOutOfRange {
            lsn,
            first_lsn: first_live,
            next_lsn: self.lsn_durable + 1,
        };
        if lsn < first_live || lsn > self.lsn_durable {
            let _ = reply.send(Err(out_of_range));
            return;
        }
        let found = self.index.partition_point(|batch| batch.next_lsn <= lsn);
        let Some(batch) = self
            .index
            .get(found)
            .copied()
            .filter(|batch| batch.first_lsn <= lsn)
        else {
            let _ = reply.send(Err(out_of_range));
            return;
        };
        let Some(buffer) = self.backend.pool().acquire() else {
            self.reads_waiting.push_front((lsn, reply));
            return;
        };
        let (sequence, tag) = self.next_tag(TAG_READ);
        let ring_offset = self.geometry.ring_offset(batch.position);
        if let Err(error) = self
            .backend
            .submit_read(tag, ring_offset, buffer, batch.bytes)
        {
            self.backend.pool().release(buffer);
            self.fail(
                "read",
                ring_offset,
                error.raw_os_error().unwrap_or(libc::EIO),
            );
            let _ = reply.send(Err(self.failed.clone().expect("just failed")));
            return;
        }
        self.reads.push_back(PendingRead {
            sequence,
            buffer,
            batch,
            lsn,
            reply,
        });
    }

    fn on_read_completion(&mut self, sequence: u64, completion: Completion) {
        let Some(position) = self.reads.iter().position(|read| read.sequence == sequence) else {
            return;
        };
        let read = self.reads.remove(position).expect("found");
        let result = match completion.result {
            Err(errno) => Err(DriveError::Failed {
                operation: "read",
                ring_offset: self.geometry.ring_offset(read.batch.position),
                errno,
                message: errno_text(errno),
            }),
            Ok(_) => self.parse_batch(read.buffer, read.batch, read.lsn),
        };
        self.backend.pool().release(read.buffer);
        let _ = read.reply.send(result);
    }

    /// The records of a batch read into `buffer`, from `lsn` on, each checked: header CRC,
    /// recorded position, LSN and payload CRC.
    fn parse_batch(
        &mut self,
        buffer: usize,
        batch: IndexedBatch,
        lsn: u64,
    ) -> Result<Vec<(u64, Vec<u8>)>, DriveError> {
        let ring_id = self.control.ring_id;
        let trim_lsn = self.control.trim_lsn;
        let bytes = &self.backend.pool().buffer(buffer)[..batch.bytes as usize];
        let mut entries = Vec::with_capacity((batch.next_lsn - lsn) as usize);
        let mut offset = 0usize;
        for expected in batch.first_lsn..batch.next_lsn {
            let at = Position {
                offset: batch.position.offset + offset as u32,
                ..batch.position
            };
            let corrupt = |check| DriveError::ReadCorrupt {
                lsn: expected,
                position: at,
                check,
            };
            if offset + ENTRY_HEADER_SIZE > bytes.len() {
                return Err(corrupt("payload_length"));
            }
            let header = EntryHeader::decode(ring_id, &bytes[offset..])
                .map_err(|_| corrupt("header_crc"))?;
            if header.position != at {
                return Err(corrupt("position"));
            }
            if header.lsn != expected {
                return Err(corrupt("lsn_gap"));
            }
            let end = offset + header.record_bytes() as usize;
            if end > bytes.len() {
                return Err(corrupt("payload_length"));
            }
            let payload = &bytes[offset + ENTRY_HEADER_SIZE..end];
            if crc32c::crc32c(payload) != header.payload_crc {
                return Err(corrupt("payload_crc"));
            }
            if expected >= lsn && expected > trim_lsn {
                entries.push((expected, payload.to_vec()));
            }
            offset = end;
        }
        Ok(entries)
    }

    /// Starts the next trim: a control block with the new trim point and head, written to the
    /// copy not current, then flushed; only then is the old head released.
    fn start_trim(&mut self) {
        if self.trim_in_flight.is_some() {
            return;
        }
        let Some((lsn, reply)) = self.trims.pop_front() else {
            return;
        };
        if lsn > self.lsn_durable {
            let _ = reply.send(Err(DriveError::TrimBeyondDurable {
                lsn,
                durable_lsn: self.lsn_durable,
            }));
            return;
        }
        if lsn <= self.control.trim_lsn {
            let _ = reply.send(Ok(()));
            return;
        }
        let keep = self.index.iter().position(|batch| batch.next_lsn > lsn + 1);
        let (head, head_lsn, head_incarnation) = match keep.and_then(|index| self.index.get(index))
        {
            Some(batch) => (batch.position, batch.first_lsn, batch.incarnation),
            None => match self.inflight.front() {
                Some(batch) => (batch.position, batch.first_lsn, self.incarnation),
                None => (self.cursor.position, self.cursor.next_lsn, self.incarnation),
            },
        };
        let control = ControlBlock {
            sequence: self.control.sequence + 1,
            trim_lsn: lsn,
            head,
            head_lsn,
            head_incarnation,
            ..self.control
        };
        let Some(buffer) = self.backend.pool().acquire() else {
            self.trims.push_front((lsn, reply));
            return;
        };
        let block = self.geometry.block_size_bytes as usize;
        control.encode(&mut self.backend.pool().buffer_mut(buffer)[..block]);
        let offset = self.geometry.control_offset(control.copy());
        let (_, tag) = self.next_tag(TAG_CONTROL_WRITE);
        let mut submitted =
            self.backend
                .submit_write(tag, offset, buffer, 0, block as u32, WriteSync::None);
        if submitted.is_ok() {
            let (_, flush) = self.next_tag(TAG_CONTROL_FLUSH);
            submitted = self
                .backend
                .submit_flush(flush, offset, FlushOrder::AfterPreviousWrite);
        }
        self.trim_in_flight = Some(PendingTrim {
            control,
            drop_to_lsn: lsn,
            reply,
            flush_submitted: true,
        });
        self.trim_buffer = Some(buffer);
        if let Err(error) = submitted {
            self.fail("write", offset, error.raw_os_error().unwrap_or(libc::EIO));
        }
    }

    fn on_trim_completion(&mut self, completion: Completion) {
        let is_flush = completion.tag & 7 == TAG_CONTROL_FLUSH;
        if let Err(errno) = completion.result {
            let offset = self
                .trim_in_flight
                .as_ref()
                .map_or(0, |trim| self.geometry.control_offset(trim.control.copy()));
            self.fail(if is_flush { "flush" } else { "write" }, offset, errno);
            return;
        }
        if !is_flush {
            return;
        }
        let Some(trim) = self.trim_in_flight.take() else {
            return;
        };
        debug_assert!(trim.flush_submitted);
        if let Some(buffer) = self.trim_buffer.take() {
            self.backend.pool().release(buffer);
        }
        self.control = trim.control;
        while self
            .index
            .front()
            .is_some_and(|batch| batch.next_lsn <= trim.drop_to_lsn + 1)
        {
            self.index.pop_front();
        }
        let _ = trim.reply.send(Ok(()));
    }
}

/// The text of an errno, without the "(os error N)" that `io::Error` appends.
fn errno_text(errno: i32) -> String {
    let text = io::Error::from_raw_os_error(errno).to_string();
    match text.rfind(" (os error") {
        Some(cut) => text[..cut].to_string(),
        None => text,
    }
}

/// Writes a control block to its copy and flushes it (recovery's blocking path).
fn write_control<B: IoBackend>(backend: &mut B, control: &ControlBlock) -> io::Result<()> {
    let block = control.geometry.block_size_bytes as usize;
    control.encode(&mut backend.pool().buffer_mut(0)[..block]);
    let offset = control.geometry.control_offset(control.copy());
    sync_write(backend, offset, block as u32)?;
    sync_flush(backend, offset)
}
