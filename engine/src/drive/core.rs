//! The drive's state machine ([`DriveCore`]): what the drive thread runs, stepped by requests,
//! I/O completions and the clock. It gathers queued appends into a batch while earlier
//! batches' write and flush are in flight (up to the window recorded in the ring), completes
//! tickets in LSN order, each only after the flush covering it succeeded, and writes a tail
//! marker once the log goes idle with acknowledged entries no durable watermark covers. A
//! simulation drives it directly (one thread, a simulated backend), so a seed replays exactly.
//!
//! Durability frontiers, always `lsn_covered <= lsn_durable <= lsn_written <= lsn_appended`:
//! - `lsn_appended`: the last LSN given to a record (encoded into a submitted batch);
//! - `lsn_written`: the last LSN whose batch write completed;
//! - `lsn_durable`: the last LSN acknowledged: its batch's flush (or dsync write) completed and
//!   every batch before it was acknowledged. A crash never loses an entry at or below it;
//! - `lsn_covered`: the highest watermark carried by a durable batch (or tail marker): replay
//!   tells damage at or below it from a torn tail.
//!
//! A failed write or flush makes the drive fail-stop: every waiting and later request gets the
//! error, nothing is acknowledged after it, and only reopening (which replays the device)
//! continues. A flush is never retried.

use std::collections::VecDeque;
use std::sync::atomic::{fence, AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, TryRecvError};
use hdrhistogram::Histogram;
use sealog_wal::batch::{BatchBuilder, BatchStart};
use sealog_wal::format::{ControlBlock, ENTRY_HEADER_SIZE};
use sealog_wal::{EncodeError, Geometry, Kind, Position, RecoveryReport, WriteCursor};

use super::buffers::{Lane, Lanes};
use super::op::Op;
use super::reads::{PendingRead, ReadRequest};
use super::trim::{PendingTrim, TrimRequest};
use super::{
    DriveOptions, DriveState, Durability, QueueDepths, Request, RequestKind, Stats, Wait, WhenFull,
};
use crate::error::{AppendError, DriveFailure, IoOperation, ReadError, TrimError};
use crate::io::{Completion, FlushOrder, IoBackend, WriteSync};
use crate::ticket::TicketCompleter;

/// An append waiting for a batch.
pub(super) struct QueuedAppend {
    kind: Kind,
    payload: Vec<u8>,
    completer: TicketCompleter,
}

/// What a batch in flight carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum BatchPurpose {
    /// Records of clients' appends.
    Data,
    /// A tail marker: no records, only the watermark.
    TailMarker,
}

/// A batch written and not yet acknowledged.
pub(super) struct Inflight {
    sequence: u64,
    purpose: BatchPurpose,
    buffer: usize,
    position: Position,
    bytes: u32,
    first_lsn: u64,
    next_lsn: u64,
    watermark: u64,
    ring_offset: u64,
    /// The write completed (successfully or not), or was never handed to the device.
    write_completed: bool,
    /// A flush linked behind the write is on the device and has not completed.
    flush_pending: bool,
    /// The batch's bytes are durable (its flush, or its dsync write, succeeded).
    durable: bool,
    payload_bytes: u64,
    submitted: Instant,
}

impl Inflight {
    /// Whether the device is done with every operation of the batch (so its buffer is free).
    fn finished(&self) -> bool {
        self.write_completed && !self.flush_pending
    }
}

/// A batch in the ring, for reads and trim.
#[derive(Clone, Copy, Debug)]
pub(super) struct IndexedBatch {
    pub(super) position: Position,
    pub(super) first_lsn: u64,
    pub(super) next_lsn: u64,
    pub(super) bytes: u32,
    pub(super) incarnation: u32,
}

/// The drive's state machine: what its thread runs, stepped by requests and I/O completions.
/// A simulation drives it directly (one thread, a simulated backend), so a seed replays exactly.
pub struct DriveCore<B: IoBackend> {
    pub(super) backend: B,
    durability: Durability,
    when_full: WhenFull,
    spin_before_block_us: u64,
    group_gather_us: u64,
    /// Idle time before a tail marker, on the drive thread's clock; `None` when stepped by
    /// hand (the caller sends [`DriveCore::on_idle_timer`] instead).
    tail_marker_idle: Option<Duration>,
    /// While the device is idle after a batch: how many appends the next batch waits for, and
    /// until when (see [`DriveOptions::group_gather_us`]).
    expected_group: u64,
    gather_until: Option<Instant>,
    pub(super) geometry: Geometry,
    pub(super) control: ControlBlock,
    incarnation: u32,
    cursor: WriteCursor,
    lsn_appended: u64,
    lsn_written: u64,
    pub(super) lsn_durable: u64,
    lsn_covered: u64,
    report: RecoveryReport,
    pub(super) lanes: Lanes,
    queue: VecDeque<QueuedAppend>,
    /// Bytes the queued appends will take in a batch, headers included.
    queued_bytes: u64,
    waiters: VecDeque<TicketCompleter>,
    pub(super) inflight: VecDeque<Inflight>,
    pub(super) index: VecDeque<IndexedBatch>,
    pub(super) reads: Vec<PendingRead>,
    pub(super) reads_waiting: VecDeque<ReadRequest>,
    pub(super) trims: VecDeque<TrimRequest>,
    pub(super) trim_in_flight: Option<PendingTrim>,
    full_since: Option<Instant>,
    pub(super) failed: Option<DriveFailure>,
    sequence: u64,
    completions: Vec<Completion>,
    appends: u64,
    payload_bytes: u64,
    batches: u64,
    tail_markers: u64,
    pub(super) reads_served: u64,
    batch_entries: Histogram<u64>,
    sync_latency_us: Histogram<u64>,
    idle_gap_us: Histogram<u64>,
    /// When the last data batch in flight was acknowledged (the device has had no data batch
    /// since): the start of an idle period.
    idle_since: Option<Instant>,
    /// The last tail marker found no room (the ring is full up to a head no trim has moved
    /// yet): no new attempt until a trim or an acknowledgement changes that.
    tail_marker_refused: bool,
    closing: bool,
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
    pub(super) index: VecDeque<IndexedBatch>,
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
        DriveCore {
            backend,
            durability: options.durability,
            when_full: options.when_full,
            spin_before_block_us: options.spin_before_block_us,
            group_gather_us: 0,
            tail_marker_idle: None,
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
            waiters: VecDeque::new(),
            inflight: VecDeque::new(),
            index,
            reads: Vec::new(),
            reads_waiting: VecDeque::new(),
            trims: VecDeque::new(),
            trim_in_flight: None,
            full_since: None,
            failed: None,
            sequence: 0,
            completions: Vec::with_capacity(64),
            appends: 0,
            payload_bytes: 0,
            batches: 0,
            tail_markers,
            reads_served: 0,
            batch_entries: histogram(),
            sync_latency_us: histogram(),
            idle_gap_us: histogram(),
            idle_since: None,
            tail_marker_refused: false,
            closing: false,
        }
    }

    /// The clock-driven behaviour the drive thread has and a hand-stepped core has not: group
    /// commit's gathering window and the tail marker's idle timer.
    pub(super) fn set_thread_timers(&mut self, options: &DriveOptions) {
        self.group_gather_us = options.group_gather_us;
        self.tail_marker_idle = Some(Duration::from_micros(options.tail_marker_idle_us));
    }

    fn check_frontiers(&self) {
        debug_assert!(self.lsn_covered <= self.lsn_durable);
        debug_assert!(self.lsn_durable <= self.lsn_written);
        debug_assert!(self.lsn_written <= self.lsn_appended);
        debug_assert_eq!(self.lsn_appended + 1, self.cursor.next_lsn);
    }

    /// The thread's loop: take requests, start batches, wait, handle completions.
    pub(super) fn run(&mut self, receiver: &Receiver<Request>, sleeping: &AtomicBool) {
        loop {
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
                Wait::ForCompletion
            } else {
                Wait::No
            };
            self.step(wait);
            sleeping.store(false, Ordering::SeqCst);
        }
    }

    /// Waits for the next request while nothing is in flight: first polling the channel for up
    /// to the spin time (a client whose append was just acknowledged usually sends the next
    /// one within microseconds, and a drive thread that stays on its CPU takes it without a
    /// wake-up), then blocking, until the tail marker's idle timer or a full ring's retry is
    /// due, when one is.
    fn receive_while_idle(&mut self, receiver: &Receiver<Request>) -> Idle {
        let marker_due_at = match (self.idle_since, self.tail_marker_idle) {
            // A time too far ahead to represent never comes: no deadline.
            (Some(since), Some(idle)) if self.needs_tail_marker() => since.checked_add(idle),
            (None, Some(idle)) if self.needs_tail_marker() => Instant::now().checked_add(idle),
            _ => None,
        };
        // Appends waiting for room look again at the ring now and then (a trim wakes them
        // anyway; this bounds a `WhenFull::Wait` past its deadline).
        let full_retry_at = self
            .full_since
            .map(|_| Instant::now() + Duration::from_millis(10));
        let deadline = match (marker_due_at, full_retry_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
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
        let Some(deadline) = deadline else {
            return match receiver.recv() {
                Ok(request) => Idle::Request(request),
                Err(_) => Idle::Disconnected,
            };
        };
        match receiver.recv_deadline(deadline) {
            Ok(request) => Idle::Request(request),
            Err(RecvTimeoutError::Timeout) => {
                if marker_due_at.is_some_and(|due| Instant::now() >= due) {
                    self.on_idle_timer();
                }
                Idle::TimerFired
            }
            Err(RecvTimeoutError::Disconnected) => Idle::Disconnected,
        }
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
                let errno = error.raw_os_error().unwrap_or(libc::EIO);
                self.fail(DriveFailure::io(IoOperation::Wait, 0, errno));
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

    /// The clock's event: the log has been idle for the tail marker's idle time. Writes a tail
    /// marker when nothing is in flight and some acknowledged entry is not yet covered by a
    /// durable watermark; does nothing otherwise (so one marker per idle period at most).
    pub fn on_idle_timer(&mut self) {
        if !self.is_busy() {
            self.start_tail_marker();
        }
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

    /// The highest LSN a durable watermark covers.
    pub fn lsn_covered(&self) -> u64 {
        self.lsn_covered
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
                completer,
            } => match &self.failed {
                Some(error) => completer.complete(Err(error.clone().into())),
                None => {
                    self.queued_bytes += payload.len() as u64 + ENTRY_HEADER_SIZE as u64;
                    self.queue.push_back(QueuedAppend {
                        kind,
                        payload,
                        completer,
                    });
                }
            },
            RequestKind::ReadBatch { lsn, reply } => {
                self.reads_waiting.push_back(ReadRequest { lsn, reply });
            }
            RequestKind::Trim { lsn, reply } => self.trims.push_back(TrimRequest { lsn, reply }),
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
            tail_markers: self.tail_markers,
            batch_entries: self.batch_entries.clone(),
            sync_latency_us: self.sync_latency_us.clone(),
            idle_gap_us: self.idle_gap_us.clone(),
            reads: self.reads_served,
            lsn_durable: self.lsn_durable,
            lsn_covered: self.lsn_covered,
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
            },
        }
    }

    /// Where the oldest batch on the device starts: its position, first LSN and incarnation.
    pub(super) fn inflight_front(&self) -> Option<(Position, u64, u32)> {
        self.inflight
            .front()
            .map(|batch| (batch.position, batch.first_lsn, self.incarnation))
    }

    /// Where the next batch goes.
    pub(super) fn cursor_position(&self) -> Position {
        self.cursor.position
    }

    /// The incarnation this drive writes with.
    pub fn incarnation(&self) -> u32 {
        self.incarnation
    }

    /// A trim moved the head: space the last tail marker found no room in may be free now.
    pub(super) fn on_head_moved(&mut self) {
        self.tail_marker_refused = false;
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
        while !self.queue.is_empty()
            && self.inflight.len() < self.geometry.window_batches_max as usize
            && self.lanes.has_free(Lane::Batch)
            && self.batch_worth_starting()
        {
            if !self.start_data_batch() {
                break;
            }
        }
        self.expire_full_waits();
        self.start_reads();
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
            for append in self.queue.drain(..) {
                append
                    .completer
                    .complete(Err(AppendError::RingFull { next_lsn }));
            }
            self.full_since = None;
        }
    }

    /// Whether some acknowledged entry is not yet covered by a durable watermark, with nothing
    /// in flight that will cover it.
    fn needs_tail_marker(&self) -> bool {
        self.failed.is_none()
            && !self.tail_marker_refused
            && self.inflight.is_empty()
            && self.lsn_durable > self.lsn_covered
    }

    /// Writes a tail marker if one is needed (see [`DriveCore::needs_tail_marker`]); returns
    /// whether one started.
    fn start_tail_marker(&mut self) -> bool {
        if !self.needs_tail_marker() || !self.lanes.has_free(Lane::Batch) {
            return false;
        }
        self.start_batch(BatchPurpose::TailMarker)
    }

    /// Encodes queued appends into one batch and submits it. Returns false when nothing could
    /// start (ring full).
    fn start_data_batch(&mut self) -> bool {
        self.start_batch(BatchPurpose::Data)
    }

    /// Encodes a batch (queued appends, or none for a tail marker) into a batch buffer and
    /// submits its write (and flush). Returns false when nothing could start (ring full).
    fn start_batch(&mut self, purpose: BatchPurpose) -> bool {
        let geometry = self.geometry;
        let head = self.control.head;
        // Data batches leave the block before a segment that cannot be entered yet for a
        // marker, so a tail marker can always be written.
        let slot = match purpose {
            BatchPurpose::Data => self.cursor.data_slot(&geometry, head, self.incarnation),
            BatchPurpose::TailMarker => self.cursor.marker_slot(&geometry, head, self.incarnation),
        };
        let slot = match slot {
            Ok(slot) => slot,
            Err(_) => {
                match purpose {
                    BatchPurpose::Data => {
                        self.full_since.get_or_insert_with(Instant::now);
                    }
                    BatchPurpose::TailMarker => self.tail_marker_refused = true,
                }
                return false;
            }
        };
        let Some(buffer) = self.lanes.acquire(Lane::Batch) else {
            return false;
        };
        let block = geometry.block_size_bytes as usize;
        let ring_id = self.control.ring_id;
        let watermark = self.lsn_durable;
        let start = BatchStart {
            ring_id,
            position: slot.position,
            first_lsn: self.cursor.next_lsn,
            watermark,
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
        if purpose == BatchPurpose::Data {
            for append in self.queue.iter() {
                match builder.push(append.kind, &append.payload) {
                    Ok(_) => {
                        taken += 1;
                        payload_bytes += append.payload.len() as u64;
                    }
                    Err(EncodeError::BatchFull { .. }) => break,
                    Err(error) => unreachable!("appends are checked when queued: {error}"),
                }
            }
            if taken == 0 {
                // Not one record fits in what is left of this segment: move to the next one,
                // unless it still holds live entries (then the ring is full for now).
                self.lanes.release(Lane::Batch, buffer);
                if self.cursor.skip_for_data(&geometry, head).is_err() {
                    self.full_since.get_or_insert_with(Instant::now);
                    return false;
                }
                return true;
            }
        }
        let batch = builder.finish();
        self.full_since = None;
        if purpose == BatchPurpose::Data {
            self.gather_until = None;
            if let Some(since) = self.idle_since.take() {
                let _ = self
                    .idle_gap_us
                    .record((since.elapsed().as_micros() as u64).max(1));
            }
            for append in self.queue.drain(..taken) {
                self.queued_bytes -= append.payload.len() as u64 + ENTRY_HEADER_SIZE as u64;
                self.waiters.push_back(append.completer);
            }
        }
        let (write_offset, write_len, buffer_offset) = match slot.segment_header {
            Some(_) => (
                slot.write_ring_offset(&geometry),
                batch.bytes + block as u32,
                0,
            ),
            None => (slot.write_ring_offset(&geometry), batch.bytes, block),
        };
        let sequence = self.next_sequence();
        let sync = match self.durability {
            Durability::Dsync => WriteSync::Dsync,
            Durability::Fdatasync | Durability::NoSyncBenchmarkOnly => WriteSync::None,
        };
        let written = self.backend.submit_write(
            Op::BatchWrite { sequence }.tag(),
            write_offset,
            buffer,
            buffer_offset,
            write_len,
            sync,
        );
        let flushed = match (&written, self.durability) {
            (Ok(()), Durability::Fdatasync) => Some(self.backend.submit_flush(
                Op::BatchFlush { sequence }.tag(),
                write_offset,
                FlushOrder::AfterPreviousWrite,
            )),
            _ => None,
        };
        self.inflight.push_back(Inflight {
            sequence,
            purpose,
            buffer,
            position: batch.position,
            bytes: batch.bytes,
            first_lsn: batch.first_lsn,
            next_lsn: batch.next_lsn(),
            watermark,
            ring_offset: write_offset,
            write_completed: written.is_err(),
            flush_pending: matches!(flushed, Some(Ok(()))),
            durable: false,
            payload_bytes,
            submitted: Instant::now(),
        });
        self.cursor.advance(&geometry, batch.bytes, batch.records);
        self.lsn_appended = self.cursor.next_lsn - 1;
        let refused = match (written, flushed) {
            (Err(error), _) => Some((IoOperation::Write, error)),
            (Ok(()), Some(Err(error))) => Some((IoOperation::Flush, error)),
            _ => None,
        };
        if let Some((operation, error)) = refused {
            let errno = error.raw_os_error().unwrap_or(libc::EIO);
            self.fail(DriveFailure::io(operation, write_offset, errno));
        }
        true
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

    fn on_batch_completion(&mut self, sequence: u64, is_write: bool, completion: Completion) {
        let Some(position) = self
            .inflight
            .iter()
            .position(|batch| batch.sequence == sequence)
        else {
            // Only batches abandoned after a failed wait complete unknown (see `fail`).
            debug_assert!(self.failed.is_some(), "a completion for no batch in flight");
            return;
        };
        let durability = self.durability;
        let batch = &mut self.inflight[position];
        if is_write {
            debug_assert!(!batch.write_completed);
            batch.write_completed = true;
            batch.durable = completion.result.is_ok() && durability != Durability::Fdatasync;
        } else {
            debug_assert!(
                batch.write_completed,
                "a linked flush completes after its write"
            );
            batch.flush_pending = false;
            batch.durable = completion.result.is_ok() && batch.write_completed;
        }
        if let Err(errno) = completion.result {
            let operation = if is_write {
                IoOperation::Write
            } else {
                IoOperation::Flush
            };
            let ring_offset = batch.ring_offset;
            self.fail(DriveFailure::io(operation, ring_offset, errno));
        }
        if self.failed.is_some() {
            // Nothing is acknowledged after a failure; a batch's buffer goes back once the
            // device is done with all of its operations (`fail` may have let it go already).
            let finished = self
                .inflight
                .iter()
                .position(|batch| batch.sequence == sequence && batch.finished());
            if let Some(position) = finished {
                let batch = self.inflight.remove(position).expect("found above");
                self.lanes.release(Lane::Batch, batch.buffer);
            }
            return;
        }
        self.lsn_written = self
            .inflight
            .iter()
            .take_while(|batch| batch.write_completed)
            .last()
            .map_or(self.lsn_written, |batch| batch.next_lsn - 1)
            .max(self.lsn_written);
        self.acknowledge();
    }

    /// Acknowledges durable batches from the front, in LSN order.
    fn acknowledge(&mut self) {
        let mut acknowledged = 0u64;
        let mut data_batch_acknowledged = false;
        while self.inflight.front().is_some_and(|batch| batch.durable) {
            let batch = self.inflight.pop_front().expect("front");
            self.lanes.release(Lane::Batch, batch.buffer);
            // The batch's watermark is on the device now.
            self.lsn_covered = self.lsn_covered.max(batch.watermark);
            if batch.purpose == BatchPurpose::TailMarker {
                self.tail_markers += 1;
                continue;
            }
            data_batch_acknowledged = true;
            self.tail_marker_refused = false;
            let records = batch.next_lsn - batch.first_lsn;
            acknowledged += records;
            for lsn in batch.first_lsn..batch.next_lsn {
                let completer = self.waiters.pop_front().expect("a ticket per record");
                completer.complete(Ok(lsn));
            }
            self.lsn_durable = batch.next_lsn - 1;
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
        }
        if data_batch_acknowledged && self.inflight.is_empty() {
            let now = Instant::now();
            self.idle_since = Some(now);
            if self.group_gather_us > 0 {
                self.expected_group = self.queue.len() as u64 + acknowledged;
                self.gather_until = now.checked_add(Duration::from_micros(self.group_gather_us));
            }
        }
    }

    /// Fail-stop: no acknowledgement ever again; every waiter and queued request gets the
    /// error. Operations still on the device keep their buffers until they complete, unless
    /// the device itself stopped answering (a failed wait), when they are abandoned.
    pub(super) fn fail(&mut self, failure: DriveFailure) {
        if self.failed.is_some() {
            return;
        }
        tracing::error!("{failure}");
        for completer in self.waiters.drain(..) {
            completer.complete(Err(failure.clone().into()));
        }
        if let Some(trim) = self.trim_in_flight.as_mut() {
            if let Some(reply) = trim.reply.take() {
                let _ = reply.send(Err(TrimError::Failed(failure.clone())));
            }
        }
        for read in &mut self.reads {
            if let Some(reply) = read.reply.take() {
                let _ = reply.send(Err(ReadError::Failed(failure.clone())));
            }
        }
        if matches!(
            failure,
            DriveFailure::Io {
                operation: IoOperation::Wait,
                ..
            }
        ) {
            self.inflight.clear();
            self.reads.clear();
            self.trim_in_flight = None;
        }
        self.failed = Some(failure);
        // Batches the device is done with give their buffers back now; the others when their
        // last operation completes.
        let lanes = &mut self.lanes;
        self.inflight.retain(|batch| {
            if batch.finished() {
                lanes.release(Lane::Batch, batch.buffer);
            }
            !batch.finished()
        });
        self.reject_queued();
    }

    /// Fails everything the core holds with `failure`: what the drive thread does when the
    /// state machine panicked, so that no client waits on a drive that is gone.
    pub(super) fn fail_all(&mut self, failure: DriveFailure) {
        self.fail(failure);
        self.inflight.clear();
        self.reads.clear();
        self.trim_in_flight = None;
    }

    /// After a failure, every request not yet started gets the failure.
    fn reject_queued(&mut self) {
        let Some(failure) = self.failed.clone() else {
            return;
        };
        self.queued_bytes = 0;
        for append in self.queue.drain(..) {
            append.completer.complete(Err(failure.clone().into()));
        }
        for read in self.reads_waiting.drain(..) {
            let _ = read.reply.send(Err(ReadError::Failed(failure.clone())));
        }
        for trim in self.trims.drain(..) {
            let _ = trim.reply.send(Err(TrimError::Failed(failure.clone())));
        }
        self.full_since = None;
    }
}

/// What waiting on an idle drive came to.
enum Idle {
    Request(Request),
    TimerFired,
    Disconnected,
}
