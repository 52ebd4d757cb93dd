//! The drive's state machine ([`DriveCore`]): what the drive thread runs, stepped by requests,
//! I/O completions and the clock. This module owns the machine's state, its loop (take
//! requests, start work, wait for the device, handle completions), the clock's events, the
//! accounting of requests, and fail-stop; the append path (group commit, acknowledgements,
//! tail markers) is [`super::appends`], reads are [`super::reads`], trims [`super::trim`], the
//! clock itself [`super::clock`]. A simulation drives it directly (one thread, a simulated
//! backend, a manual clock), so a seed replays exactly.
//!
//! Durability frontiers, always `lsn_covered <= lsn_durable <= lsn_written <= lsn_appended`:
//! - `lsn_appended`: the last LSN given to a record (encoded into a submitted batch);
//! - `lsn_written`: the last LSN whose batch write completed;
//! - `lsn_durable`: the last LSN acknowledged: its batch's flush (or dsync write) completed and
//!   every batch before it was acknowledged. A crash never loses an entry at or below it;
//! - `lsn_covered`: the highest LSN that a durable batch's (or tail marker's) watermark or the
//!   durable trim point covers: replay tells damage at or below it from a torn tail.
//!
//! A failed write or flush makes the drive fail-stop: every waiting and later request gets the
//! error, nothing is acknowledged after it, and only reopening (which replays the device)
//! continues. A flush is never retried. A backend that refuses a submission or fails a wait is
//! broken as a whole: the drive fail-stops and abandons whatever the device still holds.

use std::collections::VecDeque;
use std::sync::atomic::{fence, AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, TryRecvError};
use hdrhistogram::Histogram;
use sealog_wal::format::{ControlBlock, RingPurpose};
use sealog_wal::{Geometry, Kind, Position, RecoveryReport, WriteCursor};

use super::buffers::Lanes;
use super::cache::CachedEntry;
use super::clock::{Clock, SystemClock};
use super::index::ReadIndex;
use super::inflight::{Inflight, PendingRead, PendingTrim};
use super::metrics::Telemetry;
use super::op::Op;
use super::options::{DriveOptions, WhenFull};
use super::records::{QueuedAppend, Records};
use super::requests::{ReadRequest, Request, RequestKind, TrimRequest};
use super::stats::{DriveState, QueueDepths, Stats};
use super::view::ReadView;
use crate::error::{AppendError, DriveClosed, DriveFailure, IoOperation, ReadError, TrimError};
use crate::io::{Completion, Durability, IoBackend};
use crate::ticket::Notifier;

/// Whether [`DriveCore::step`] may block waiting for the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// Block until at least one operation completes (or the backend's waker is called).
    ForCompletion,
    /// Only reap what has already completed.
    No,
}

/// What the drive counts of its tail hints ([`super::hints`]).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Hints {
    /// Batches that found the durable hint too close and waited for a further one (one per
    /// wait, however many turns it lasts).
    pub(super) waits: u64,
    /// Control blocks written to move the hint (trims that moved it on the way not counted).
    pub(super) writes: u64,
    /// A batch is waiting for a further hint now.
    pub(super) blocked: bool,
}

/// The most acknowledgements a completion can bring for the drive thread still to spin for it
/// when no append is queued behind it (see `DriveCore::spin_pays`).
const SPIN_WAITERS_MAX: usize = 4;

/// The drive's state machine: what its thread runs, stepped by requests and I/O completions.
/// A simulation drives it directly (one thread, a simulated backend), so a seed replays exactly.
pub struct DriveCore<B: IoBackend> {
    pub(super) backend: B,
    pub(super) durability: Durability,
    pub(super) when_full: WhenFull,
    spin_before_block_us: u64,
    pub(super) group_gather_us: u64,
    /// Idle time before a tail marker, on `clock`; `None` for a core without timers (its
    /// caller sends [`DriveCore::on_idle_timer`] instead).
    tail_marker_idle: Option<Duration>,
    /// Where every time the state machine reads comes from: the system clock on the drive
    /// thread, or the clock a core stepped by hand was given.
    pub(super) clock: Box<dyn Clock>,
    /// While the device is idle after a batch: how many appends the next batch waits for, and
    /// until when (see [`DriveOptions::group_gather_us`]).
    pub(super) expected_group: u64,
    pub(super) gather_until: Option<Instant>,
    pub(super) geometry: Geometry,
    pub(super) control: ControlBlock,
    pub(super) incarnation: u32,
    pub(super) cursor: WriteCursor,
    pub(super) lsn_appended: u64,
    pub(super) lsn_written: u64,
    pub(super) lsn_durable: u64,
    pub(super) lsn_covered: u64,
    report: RecoveryReport,
    pub(super) lanes: Lanes,
    pub(super) queue: VecDeque<QueuedAppend>,
    /// Bytes the queued appends will take in a batch, headers included.
    pub(super) queued_bytes: u64,
    /// Bytes (records with their headers) of every append this core has settled since it
    /// opened: placed in a batch, or refused (as it arrived, for want of room, or behind a
    /// failure). Published after the usable bytes, so that a client that counts what it sent
    /// knows how much of it still waits to take room ([`crate::Drive::room`]).
    pub(super) settled_append_bytes: u64,
    pub(super) waiters: VecDeque<(crate::ticket::TicketCompleter, u64)>,
    pub(super) inflight: VecDeque<Inflight>,
    /// The records handed to batches not yet acknowledged, in LSN order: each payload's
    /// length (its span in the read index once the batch is acknowledged) and the payload
    /// itself where the drive holds it (for the recent-entry cache).
    pub(super) inflight_payloads: VecDeque<(u32, Option<CachedEntry>)>,
    /// The spans and payloads of the batch being indexed (kept, so indexing allocates
    /// nothing).
    pub(super) batch_scratch: (Vec<super::index::RecordSpan>, Vec<Option<CachedEntry>>),
    /// What readers share with the drive: the read index, the cache, the durable tail.
    pub(super) view: Arc<ReadView>,
    pub(super) reads: Vec<PendingRead>,
    pub(super) reads_waiting: VecDeque<ReadRequest>,
    pub(super) trims: VecDeque<TrimRequest>,
    pub(super) trim_in_flight: Option<PendingTrim>,
    /// The last data batch found no room (the embedder has not trimmed): queued appends wait
    /// (or fail, per [`WhenFull`]) until a trim moves the head.
    pub(super) ring_full: bool,
    pub(super) failed: Option<DriveFailure>,
    sequence: u64,
    completions: Vec<Completion>,
    pub(super) appends: u64,
    pub(super) payload_bytes: u64,
    pub(super) batches: u64,
    pub(super) tail_markers: u64,
    pub(super) reads_served: super::shared_stats::SharedCount,
    pub(super) batch_entries: Histogram<u64>,
    pub(super) sync_latency_us: Histogram<u64>,
    pub(super) idle_gap_us: Histogram<u64>,
    pub(super) enqueue_to_submit_us: Histogram<u64>,
    /// Where this drive's tickets park: published once per turn, so a round of completions
    /// costs one wake-up.
    notifier: Arc<Notifier>,
    /// When the last data batch in flight was acknowledged (the device has had no data batch
    /// since): the start of an idle period.
    pub(super) idle_since: Option<Instant>,
    /// When the timers started (the open, for the drive thread), on the core's clock.
    timers_started: Instant,
    /// The last tail marker found no room (the ring is full up to a head no trim has moved
    /// yet): no new attempt until a trim or an acknowledgement changes that.
    pub(super) tail_marker_refused: bool,
    /// A close was asked for: what was queued before it is finished, nothing after it taken.
    closing: bool,
    /// The tail hint's counters and wait ([`super::hints`]).
    pub(super) hints: Hints,
    /// Metrics, and the publication of [`Stats`] for readers ([`super::metrics`]).
    pub(super) telemetry: Telemetry,
}

/// What recovery leaves for the state machine to start from.
pub(super) struct Recovered {
    pub(super) geometry: Geometry,
    pub(super) control: ControlBlock,
    pub(super) incarnation: u32,
    pub(super) cursor: WriteCursor,
    pub(super) lsn_durable: u64,
    pub(super) lsn_covered: u64,
    pub(super) tail_markers: u64,
    pub(super) index: ReadIndex,
    pub(super) report: RecoveryReport,
}

fn histogram() -> Histogram<u64> {
    Histogram::new(3).expect("3 significant figures is a valid precision")
}

impl<B: IoBackend> DriveCore<B> {
    /// The state machine after recovery, before any request.
    pub(super) fn start(backend: B, recovered: Recovered, options: &DriveOptions) -> Self {
        let Recovered {
            geometry,
            control,
            incarnation,
            cursor,
            lsn_durable,
            lsn_covered,
            tail_markers,
            index,
            report,
        } = recovered;
        let (identity, frontiers) = ((control.ring_id, geometry), (lsn_durable, control.trim_lsn));
        let view = Arc::new(ReadView::new(identity, frontiers, index, options));
        // Readers see the drive thread's reads counted before each answer goes out.
        let reads_served = super::shared_stats::SharedCount::new(&view.stats.reads);
        DriveCore {
            backend,
            durability: crate::sync_probe::resolve(options.durability, &control.sync),
            when_full: options.when_full,
            spin_before_block_us: options.spin_before_block_us,
            group_gather_us: 0,
            tail_marker_idle: None,
            clock: Box::new(SystemClock),
            expected_group: 0,
            gather_until: None,
            geometry,
            control,
            incarnation,
            cursor,
            lsn_appended: lsn_durable,
            lsn_written: lsn_durable,
            lsn_durable,
            lsn_covered,
            report,
            lanes: Lanes::new(&geometry),
            queue: VecDeque::new(),
            queued_bytes: 0,
            settled_append_bytes: 0,
            waiters: VecDeque::new(),
            inflight: VecDeque::new(),
            inflight_payloads: VecDeque::new(),
            batch_scratch: Default::default(),
            view,
            reads: Vec::new(),
            reads_waiting: VecDeque::new(),
            trims: VecDeque::new(),
            trim_in_flight: None,
            ring_full: false,
            failed: None,
            sequence: 0,
            completions: Vec::with_capacity(64),
            appends: 0,
            payload_bytes: 0,
            batches: 0,
            tail_markers,
            reads_served,
            batch_entries: histogram(),
            sync_latency_us: histogram(),
            idle_gap_us: histogram(),
            enqueue_to_submit_us: histogram(),
            notifier: Notifier::for_drive(options.client_spin_us),
            idle_since: None,
            timers_started: Instant::now(),
            tail_marker_refused: false,
            closing: false,
            hints: Hints::default(),
            telemetry: Default::default(),
        }
    }

    /// The clock-driven behaviour, on `clock`: group commit's gathering window and the tail
    /// marker's idle timer, which a core from [`DriveCore::recover`] has not. Set before the
    /// first request, so that no time the core keeps was read from another clock.
    pub(super) fn start_timers(&mut self, options: &DriveOptions, clock: Box<dyn Clock>) {
        debug_assert!(self.queue.is_empty());
        debug_assert!(self.idle_since.is_none());
        self.timers_started = clock.now();
        self.clock = clock;
        self.group_gather_us = options.group_gather_us;
        self.tail_marker_idle = Some(Duration::from_micros(options.tail_marker_idle_us));
    }

    /// Adopts the notifier the drive's handle made its tickets with.
    pub(super) fn adopt_notifier(&mut self, notifier: Arc<Notifier>) {
        self.notifier = notifier;
    }

    fn check_frontiers(&self) {
        debug_assert!(self.lsn_covered <= self.lsn_durable);
        debug_assert!(self.lsn_durable <= self.lsn_written);
        debug_assert!(self.lsn_written <= self.lsn_appended);
        debug_assert_eq!(self.lsn_appended + 1, self.cursor.next_lsn);
    }

    /// The thread's loop: take requests, start batches, wait, handle completions. The core's
    /// clock is the system clock here: the waits below (spinning, blocking on the channel up
    /// to a timer's deadline) are real time.
    pub(super) fn run(&mut self, receiver: &Receiver<Request>, sleeping: &AtomicBool) {
        loop {
            // The tail marker's timer is looked at on every turn, so requests that keep the
            // drive awake (reads, stats) never hold it off.
            if self.tail_marker_due() {
                self.on_idle_timer();
            }
            if !self.is_busy() && !self.has_queued_work() {
                if self.closing {
                    // A clean close leaves every acknowledged entry covered.
                    if !self.start_tail_marker() {
                        return;
                    }
                    continue;
                }
                match self.receive_while_idle(receiver) {
                    Idle::Request(request) => self.accept(request),
                    Idle::TimerFired => {}
                    // Every handle dropped: nothing more will come. Close cleanly.
                    Idle::Disconnected => self.closing = true,
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
                let spin_us = if self.spin_pays() {
                    self.spin_before_block_us
                } else {
                    0
                };
                self.backend.spin_next_wait_us(spin_us);
                Wait::ForCompletion
            } else {
                Wait::No
            };
            self.step(wait);
            sleeping.store(false, Ordering::SeqCst);
        }
    }

    /// Whether spinning for the next completion is worth a CPU: when appends wait to be
    /// submitted as soon as a batch completes (a deep pipeline, where the device would idle
    /// until the thread noticed), or when the completion acknowledges so few appends that
    /// their clients' latency is the point (a lone writer). Not when a completion only
    /// acknowledges many blocked clients: they come back one by one anyway, and the CPU a
    /// spinning drive thread takes is theirs (on a machine with few CPUs it is most of them).
    fn spin_pays(&self) -> bool {
        !self.queue.is_empty() || self.waiters.len() <= SPIN_WAITERS_MAX
    }

    /// When the tail marker is due, on the core's clock: the idle time after the last data
    /// batch was acknowledged, if a marker is needed. `None` for a core without timers, and
    /// for a time too far ahead to represent.
    fn tail_marker_due_at(&self) -> Option<Instant> {
        let idle = self.tail_marker_idle?;
        if !self.needs_tail_marker() {
            return None;
        }
        // Before the first data batch of this open, the idle period began when the timers
        // started: entries recovery found but could not cover (no room for its marker) get
        // their marker once the idle time has passed, not only at the next acknowledgement.
        self.idle_since
            .unwrap_or(self.timers_started)
            .checked_add(idle)
    }

    /// Whether the tail marker's idle time has passed on the core's clock.
    fn tail_marker_due(&self) -> bool {
        self.tail_marker_due_at()
            .is_some_and(|due| self.clock.now() >= due)
    }

    /// When appends waiting for room give up (`WhenFull::Wait`): the oldest one's deadline.
    fn full_wait_deadline(&self) -> Option<Instant> {
        match (self.ring_full, self.when_full, self.queue.front()) {
            (true, WhenFull::Wait(timeout), Some(oldest)) => oldest.queued_at.checked_add(timeout),
            _ => None,
        }
    }

    /// Waits for the next request while nothing is in flight: first polling the channel for up
    /// to the spin time (a client whose append was just acknowledged usually sends the next
    /// one within microseconds, and a drive thread that stays on its CPU takes it without a
    /// wake-up), then blocking, until the tail marker's idle timer or the oldest append's wait
    /// for room runs out, when one of them is set.
    fn receive_while_idle(&mut self, receiver: &Receiver<Request>) -> Idle {
        let deadline = match (self.tail_marker_due_at(), self.full_wait_deadline()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let deadline = self.telemetry_deadline(deadline);
        if self.spin_before_block_us > 0 {
            let spin = Duration::from_micros(self.spin_before_block_us);
            let spin_until = Instant::now()
                .checked_add(spin)
                .unwrap_or_else(Instant::now);
            loop {
                match receiver.try_recv() {
                    Ok(request) => return Idle::Request(request),
                    Err(TryRecvError::Disconnected) => return Idle::Disconnected,
                    Err(TryRecvError::Empty) if Instant::now() >= spin_until => break,
                    Err(TryRecvError::Empty) => std::hint::spin_loop(),
                }
            }
        }
        self.publish_before_block();
        let Some(deadline) = deadline else {
            return match receiver.recv() {
                Ok(request) => Idle::Request(request),
                Err(_) => Idle::Disconnected,
            };
        };
        match receiver.recv_deadline(deadline) {
            Ok(request) => Idle::Request(request),
            // The loop's next turn starts the marker, or `start_work` expires the waits.
            Err(RecvTimeoutError::Timeout) => Idle::TimerFired,
            Err(RecvTimeoutError::Disconnected) => Idle::Disconnected,
        }
    }

    /// One turn: the clock's due events (a core with timers writes its tail marker once the
    /// idle time has passed on its clock), then start what can start (batches up to the
    /// window, reads, a trim), then hand the device what is queued and handle what it
    /// completed, waiting for at least one completion when told to and something is in flight.
    pub fn step(&mut self, wait: Wait) {
        if self.tail_marker_due() {
            self.start_tail_marker();
        }
        self.start_work();
        // What the drive completed before this turn's wait (appends refused as they were
        // taken, waits for room that ran out) reaches its clients now, not after the device.
        self.notifier.publish();
        if self.is_busy() {
            let wait_for = usize::from(wait == Wait::ForCompletion);
            let waited = self.backend.wait(wait_for, &mut self.completions);
            let mut completions = std::mem::take(&mut self.completions);
            for completion in completions.drain(..) {
                self.on_completion(completion);
            }
            self.completions = completions;
            if let Err(error) = waited {
                self.device_broken(IoOperation::Wait, 0, &error);
            }
        }
        self.check_frontiers();
        self.publish_shape();
        self.publish_stats();
        self.notifier.publish();
    }

    /// Publishes the log's shape for the drive's handle (see [`crate::Drive::shape`]).
    pub(super) fn publish_shape(&self) {
        let head = self.control.head;
        let position = self.cursor.position;
        let occupied = if head <= position {
            self.geometry.distance_bytes(head, position)
        } else {
            0
        };
        // The writer may not enter the head's segment on the next lap (a segment is reused
        // only once no live entry is left in it), and keeps one block for a tail marker.
        let limit = Position {
            lap: head.lap.saturating_add(1),
            segment: head.segment,
            offset: 0,
        };
        let usable = if position <= limit {
            self.geometry
                .distance_bytes(position, limit)
                .saturating_sub(u64::from(self.geometry.block_size_bytes))
        } else {
            0
        };
        self.view.publish_shape(
            self.cursor.next_lsn,
            occupied,
            usable,
            self.settled_append_bytes,
        );
    }

    /// Takes a request, as the thread does when one arrives on the channel.
    pub fn submit(&mut self, request: Request) {
        self.accept(request);
        self.publish_shape();
        self.publish_stats();
        self.notifier.publish();
    }

    /// The clock's event: the log has been idle for the tail marker's idle time. Writes a tail
    /// marker when no batch is in flight and some acknowledged entry is not yet covered by a
    /// durable watermark; does nothing otherwise (so one marker per idle period at most).
    /// Reads and trims on the device do not hold it off. A core with timers sends it to itself
    /// when the idle time has passed on its clock; the caller of a core without them sends it
    /// when it decides that the time has passed.
    pub fn on_idle_timer(&mut self) {
        self.start_tail_marker();
        self.notifier.publish();
    }

    /// Whether I/O is in flight.
    pub fn is_busy(&self) -> bool {
        !self.inflight.is_empty() || !self.reads.is_empty() || self.trim_in_flight.is_some()
    }

    /// Whether requests are waiting to start (appends held back by a full ring aside).
    pub fn has_queued_work(&self) -> bool {
        let appends_can_start = !self.queue.is_empty() && !self.ring_full;
        appends_can_start || !self.trims.is_empty() || !self.reads_waiting.is_empty()
    }

    /// The highest acknowledged LSN.
    pub fn lsn_durable(&self) -> u64 {
        self.lsn_durable
    }

    /// The highest LSN a durable watermark (or the durable trim point) covers.
    pub fn lsn_covered(&self) -> u64 {
        self.lsn_covered
    }

    /// The trim point of the current durable control block.
    pub fn durable_trim_lsn(&self) -> u64 {
        self.control.trim_lsn
    }

    /// What the ring holds, as the current durable control block says.
    pub fn purpose(&self) -> RingPurpose {
        self.control.purpose
    }

    /// The incarnation this drive writes with.
    pub fn incarnation(&self) -> u32 {
        self.incarnation
    }

    /// What recovery found when this core was opened.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.report
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
                records,
                completer,
                queued_at,
            } => {
                // A request built without a time (for a core stepped by hand, whose clock may
                // not be the system's) counts from when the core takes it, on its clock.
                let queued_at = queued_at.unwrap_or_else(|| self.clock.now());
                let bytes_in_batch = records.bytes_in_batch();
                if let Err(error) = self.admit_append(&records) {
                    self.settled_append_bytes += bytes_in_batch;
                    completer.complete(Err(error));
                    return;
                }
                self.queued_bytes += bytes_in_batch;
                self.queue.push_back(QueuedAppend {
                    records,
                    bytes_in_batch,
                    completer,
                    queued_at,
                });
            }
            RequestKind::Read { lsn, reply } => {
                if self.closing {
                    reply.send(Err(ReadError::Closed(DriveClosed)));
                    return;
                }
                self.reads_waiting.push_back(ReadRequest { lsn, reply });
            }
            RequestKind::Trim { lsn, reply } => {
                if self.closing {
                    reply.send(Err(TrimError::Closed(DriveClosed)));
                    return;
                }
                self.trims.push_back(TrimRequest { lsn, reply });
            }
            RequestKind::Close => self.closing = true,
        }
    }

    /// Whether an append may be queued: not after a failure or a close, no record of a kind
    /// the format reserves or over the ring's payload limit, a group not empty and within the
    /// batch limit (the handle checks all but the first two too; a hand-stepped core gets
    /// requests from anyone).
    fn admit_append(&self, records: &Records) -> Result<(), AppendError> {
        if let Some(failure) = &self.failed {
            return Err(failure.clone().into());
        }
        if self.closing {
            return Err(DriveClosed.into());
        }
        let records = records.as_slice();
        let shapes = records
            .iter()
            .map(|record| (record.kind, record.payload.len()));
        check_records(&self.geometry, shapes)
    }

    /// Counters, histograms and state.
    pub fn stats(&self) -> Stats {
        Stats {
            appends: self.appends,
            payload_bytes: self.payload_bytes,
            batches: self.batches,
            tail_markers: self.tail_markers,
            batch_entries: self.batch_entries.clone(),
            sync_latency_us: self.sync_latency_us.clone(),
            idle_gap_us: self.idle_gap_us.clone(),
            enqueue_to_submit_us: self.enqueue_to_submit_us.clone(),
            completion_to_wake_us: self.notifier.wake_latency_us(),
            reads: self.reads_served.get(),
            lsn_durable: self.lsn_durable,
            lsn_covered: self.lsn_covered,
            hint_waits: self.hints.waits,
            hint_writes: self.hints.writes,
            state: match &self.failed {
                Some(error) => DriveState::Failed(error.clone()),
                None => DriveState::Running,
            },
            queues: QueueDepths {
                appends_queued: self.queue.len(),
                batches_in_flight: self.inflight.len(),
                reads_waiting: self.reads_waiting.len(),
                reads_in_flight: self.reads.len(),
                trims_waiting: self.trims.len(),
                trim_in_flight: self.trim_in_flight.is_some(),
            },
        }
    }

    /// The next operation's sequence number.
    pub(super) fn next_sequence(&mut self) -> u64 {
        self.sequence += 1;
        self.sequence
    }

    /// Starts what can start: a trim, batches up to the window, reads.
    fn start_work(&mut self) {
        if self.failed.is_some() {
            self.reject_queued();
            return;
        }
        self.start_trim();
        self.start_batches();
        self.start_reads();
    }

    fn on_completion(&mut self, completion: Completion) {
        let Some(op) = Op::from_tag(completion.tag) else {
            self.fail(DriveFailure::UnknownCompletion {
                tag: completion.tag,
            });
            return;
        };
        match op {
            Op::BatchWrite { sequence } => self.on_batch_completion(sequence, true, completion),
            Op::BatchFlush { sequence } => self.on_batch_completion(sequence, false, completion),
            Op::Read { sequence } => self.on_read_completion(sequence, completion),
            Op::ControlWrite { sequence } => {
                self.on_trim_completion(sequence, false, completion);
            }
            Op::ControlFlush { sequence } => self.on_trim_completion(sequence, true, completion),
            // Recovery's operations all completed before the core started.
            Op::RecoverySync | Op::RecoveryReadAhead { .. } => {
                self.fail(DriveFailure::UnknownCompletion {
                    tag: completion.tag,
                });
            }
        }
    }

    /// Fail-stop: no acknowledgement ever again; every waiter and queued request gets the
    /// error. Operations still on the device keep their buffers until they complete.
    pub(super) fn fail(&mut self, failure: DriveFailure) {
        if self.failed.is_some() {
            return;
        }
        tracing::error!(error = %failure, "fail-stop: nothing is acknowledged from now on");
        for (completer, _) in self.waiters.drain(..) {
            completer.complete(Err(failure.clone().into()));
        }
        if let Some(trim) = self.trim_in_flight.as_mut() {
            if let Some(reply) = trim.reply.take() {
                reply.send(Err(TrimError::Failed(failure.clone())));
            }
        }
        for read in &mut self.reads {
            if let Some(reply) = read.reply.take() {
                reply.send(Err(ReadError::Failed(failure.clone())));
            }
        }
        // Readers waiting for the durable tail learn that it will not move again.
        self.view.stop(Some(failure.clone()));
        self.failed = Some(failure);
        self.release_finished_batches();
        self.reject_queued();
    }

    /// The backend refused a submission or failed a wait: it is broken as a whole (what it
    /// holds may or may not complete). Fail-stop, and abandon everything on the device: its
    /// buffers stay lent for good, and nothing waits for a completion again. Whether or not
    /// the drive had failed already, so a broken backend never keeps the thread waiting on it.
    pub(super) fn device_broken(
        &mut self,
        operation: IoOperation,
        ring_offset: u64,
        error: &std::io::Error,
    ) {
        let errno = error.raw_os_error().unwrap_or(libc::EIO);
        self.fail(DriveFailure::io(operation, ring_offset, errno));
        self.inflight.clear();
        self.reads.clear();
        self.trim_in_flight = None;
    }

    /// Fails everything the core holds with `failure`: what the drive thread does when the
    /// state machine panicked, so that no client waits on a drive that is gone.
    pub(super) fn fail_all(&mut self, failure: DriveFailure) {
        self.fail(failure);
        self.inflight.clear();
        self.reads.clear();
        self.trim_in_flight = None;
        self.notifier.publish();
    }

    /// After a failure, every request not yet started gets the failure.
    fn reject_queued(&mut self) {
        let Some(failure) = self.failed.clone() else {
            return;
        };
        self.queued_bytes = 0;
        for append in self.queue.drain(..) {
            self.settled_append_bytes += append.bytes_in_batch;
            append.completer.complete(Err(failure.clone().into()));
        }
        for read in self.reads_waiting.drain(..) {
            read.reply.send(Err(ReadError::Failed(failure.clone())));
        }
        for trim in self.trims.drain(..) {
            trim.reply.send(Err(TrimError::Failed(failure.clone())));
        }
        self.ring_full = false;
    }
}

impl<B: IoBackend> Drop for DriveCore<B> {
    /// However the core ends (a clean close, fail-stop, a panic on the drive thread), readers
    /// waiting for the durable tail are woken: it will never move again.
    fn drop(&mut self) {
        self.publish_final();
        self.view.stop(self.failed.clone());
    }
}

/// Whether an append of `kind` with `payload_len` bytes is one the ring takes: not a kind the
/// format reserves, not over the ring's payload limit. The handle checks it on the caller's
/// thread; the core again, since a hand-stepped core gets requests from anyone.
pub(super) fn check_append(
    geometry: &Geometry,
    kind: Kind,
    payload_len: usize,
) -> Result<(), AppendError> {
    if !kind.consumes_lsn() {
        return Err(AppendError::ReservedKind { kind });
    }
    let limit = geometry.payload_size_max_bytes();
    if payload_len as u64 > u64::from(limit) {
        return Err(AppendError::PayloadTooLarge {
            payload_len: payload_len as u64,
            payload_size_max_bytes: limit,
        });
    }
    Ok(())
}

/// Whether the records of one append (one entry, or an all-or-nothing group), given as their
/// kinds and payload lengths, are ones the ring takes: at least one, each as
/// [`check_append`] says, and all of them with their headers within the batch limit (a group
/// shares one batch). The handle checks it on the caller's thread, the core again when it
/// takes the request.
pub(super) fn check_records(
    geometry: &Geometry,
    records: impl ExactSizeIterator<Item = (Kind, usize)>,
) -> Result<(), AppendError> {
    let entries = records.len();
    if entries == 0 {
        return Err(AppendError::EmptyGroup);
    }
    let mut group_bytes = 0u64;
    for (kind, payload_len) in records {
        check_append(geometry, kind, payload_len)?;
        group_bytes += payload_len as u64 + sealog_wal::format::ENTRY_HEADER_SIZE as u64;
    }
    let limit = geometry.batch_size_max_bytes;
    if group_bytes > u64::from(limit) {
        return Err(AppendError::GroupTooLarge {
            entries,
            group_bytes,
            batch_size_max_bytes: limit,
        });
    }
    Ok(())
}

/// What waiting on an idle drive came to.
enum Idle {
    Request(Request),
    TimerFired,
    Disconnected,
}
