//! What readers share with the drive thread ([`ReadView`]): the durable tail and the trim point
//! (atomics the drive publishes), the read index, the recent-entry cache, the ring's files for
//! reads on the caller's thread, and the readers waiting for the durable tail to pass an LSN.
//! A read looks its entry up here without crossing the drive thread: a cached entry is copied
//! out at once, any other is read (only the blocks holding it) and checked with replay's record
//! checks, on the caller's thread when the drive has files, else by the drive thread.
//!
//! Ordering: the drive stores the durable tail after it indexed (and cached) the batches below
//! it, and the trim point before it drops their index entries or lets a later lap overwrite
//! their blocks. So a reader that sees an LSN at or below the durable tail finds it indexed
//! unless a trim passed it, and a read whose bytes turn out to be something else is `Trimmed`
//! exactly when the trim point (read again after the read) covers it; otherwise it is
//! `Damaged`, never served. An LSN a quarantine open found damaged is `Damaged` without a read,
//! with what failed then (the damage is never rewritten), until a trim passes it.
//!
//! The drive's statistics are read here too: what the drive thread publishes (`shared_stats`)
//! is put together into [`Stats`] for [`crate::Drive::stats`] ([`ReadView::stats`]).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, RwLock, RwLockReadGuard};
use std::task::Waker;
use std::thread::Thread;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use sealog_wal::format::{EmbedderHeader, EntryHeader};
use sealog_wal::validate::{check_record, RecordExpectation};
use sealog_wal::{Check, Geometry, RingId};

use super::cache::RecentCache;
use super::direct::{DirectFiles, ReadBuffers};
use super::entry::LogEntry;
use super::index::{IndexedRecord, ReadIndex};
use super::options::DriveOptions;
use super::shared_stats::{get, SharedStats};
use super::stats::{DriveState, Stats};
use crate::error::{DriveClosed, DriveFailure, ReadError, WaitError};

/// Readers' side of a drive.
pub(crate) struct ReadView {
    pub(crate) ring_id: RingId,
    pub(crate) geometry: Geometry,
    durable_lsn: AtomicU64,
    trim_lsn: AtomicU64,
    pub(crate) index: RwLock<ReadIndex>,
    pub(crate) cache: RecentCache,
    /// The ring's files and read buffers, for reads on callers' threads (a drive on a
    /// simulated device has none: its reads go through the drive thread).
    direct: OnceLock<Direct>,
    /// Bytes an iterator reads at a time.
    pub(crate) read_ahead_bytes: u64,
    tail: TailWaiters,
    stopped: AtomicBool,
    failure: Mutex<Option<DriveFailure>>,
    pub(crate) counters: ReadCounters,
    /// The next LSN the drive will assign, and the ring bytes from the head to the write
    /// position, as of the drive's last turn.
    next_lsn: AtomicU64,
    occupied_bytes: AtomicU64,
    usable_bytes: AtomicU64,
    /// Bytes of the appends the drive has settled (placed or refused) since it opened,
    /// stored after `usable_bytes` (see [`ReadView::room`]).
    settled_append_bytes: AtomicU64,
    /// The read index's record bytes, as of its last change ([`ReadView::set_record_bytes`]).
    live_record_bytes: AtomicU64,
    /// What the drive thread publishes for [`crate::Drive::stats`].
    pub(crate) stats: SharedStats,
}

pub(crate) struct Direct {
    pub(crate) files: DirectFiles,
    pub(crate) buffers: ReadBuffers,
}

/// Counts of what reads did.
#[derive(Debug, Default)]
pub(crate) struct ReadCounters {
    pub(crate) cache_hits: AtomicU64,
    pub(crate) device_reads: AtomicU64,
    pub(crate) device_bytes: AtomicU64,
    pub(crate) damaged: AtomicU64,
}

/// The embedder header of a record that failed its checks, when its entry header itself is
/// intact and is the one expected (the header CRC covers the embedder's header, not the
/// payload): the damage is in the payload, and the header still names the embedder's record.
fn intact_header(expect: &RecordExpectation, bytes: &[u8]) -> Option<EmbedderHeader> {
    let header = EntryHeader::decode(expect.ring_id, bytes).ok()?;
    (header.lsn == expect.lsn && header.position == expect.position).then_some(header.embedder)
}

/// What the read index says of an LSN.
pub(crate) enum Lookup {
    /// The entry, copied from the recent-entry cache.
    Cached(LogEntry),
    /// The entry must be read from the device.
    Device(IndexedRecord),
}

/// Where to read an entry from: the block-aligned span holding it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RecordRead {
    pub(crate) record: IndexedRecord,
    /// Ring offset of the span's first block.
    pub(crate) ring_offset: u64,
    /// Bytes to read (whole blocks).
    pub(crate) len: usize,
    /// Where the record's header lies in what is read.
    pub(crate) header_at: usize,
}

impl RecordRead {
    pub(crate) fn new(geometry: &Geometry, record: IndexedRecord) -> RecordRead {
        let block = u64::from(geometry.block_size_bytes);
        let header = geometry.ring_offset(record.position());
        let end = header
            + sealog_wal::format::ENTRY_HEADER_SIZE as u64
            + u64::from(record.span.payload_len);
        let start = header / block * block;
        let end = end.div_ceil(block) * block;
        RecordRead {
            record,
            ring_offset: start,
            len: (end - start) as usize,
            header_at: (header - start) as usize,
        }
    }
}

impl ReadView {
    /// The view of a ring (its identity and geometry) whose log is acknowledged up to
    /// `durable_lsn` and trimmed up to `trim_lsn`, with what `index` holds, and a cache and
    /// read-ahead as `options` say.
    pub(crate) fn new(
        (ring_id, geometry): (RingId, Geometry),
        (durable_lsn, trim_lsn): (u64, u64),
        index: ReadIndex,
        options: &DriveOptions,
    ) -> ReadView {
        let cache_bytes = options.read_cache_bytes;
        let live_record_bytes = index.record_bytes();
        let read_ahead_bytes = options.read_ahead_bytes;
        ReadView {
            ring_id,
            geometry,
            durable_lsn: AtomicU64::new(durable_lsn),
            trim_lsn: AtomicU64::new(trim_lsn),
            index: RwLock::new(index),
            cache: RecentCache::new(cache_bytes),
            direct: OnceLock::new(),
            read_ahead_bytes: read_ahead_bytes.max(u64::from(geometry.batch_size_max_bytes)),
            tail: TailWaiters::default(),
            stopped: AtomicBool::new(false),
            failure: Mutex::new(None),
            counters: ReadCounters::default(),
            next_lsn: AtomicU64::new(durable_lsn + 1),
            occupied_bytes: AtomicU64::new(0),
            usable_bytes: AtomicU64::new(0),
            settled_append_bytes: AtomicU64::new(0),
            live_record_bytes: AtomicU64::new(live_record_bytes),
            stats: Default::default(),
        }
    }

    /// The drive's turn ended with `next_lsn` the next LSN to assign, `occupied_bytes` of
    /// the ring between its head and its write position, `usable_bytes` the writer can
    /// still take before the ring is full, and `settled_append_bytes` of appends placed or
    /// refused since the open. The settled bytes are stored last, with release: a reader
    /// that loads them first ([`ReadView::room`]) sees usable bytes at least as new, so it
    /// never counts a placed append as both placed (in the usable bytes) and waiting.
    pub(crate) fn publish_shape(
        &self,
        next_lsn: u64,
        occupied_bytes: u64,
        usable_bytes: u64,
        settled_append_bytes: u64,
    ) {
        self.next_lsn.store(next_lsn, Ordering::Relaxed);
        self.occupied_bytes.store(occupied_bytes, Ordering::Relaxed);
        self.usable_bytes.store(usable_bytes, Ordering::Relaxed);
        self.settled_append_bytes
            .store(settled_append_bytes, Ordering::Release);
    }

    /// The settled append bytes and the usable bytes, read in the order that errs only on
    /// the side of less room: settled first (acquire), so that the usable bytes read after
    /// are at least as new as the placements the settled bytes count (a newer usable figure
    /// may count placements the settled one does not yet: those bytes are then counted
    /// twice, as taken and as waiting, for a moment).
    pub(crate) fn room(&self) -> (u64, u64) {
        let settled = self.settled_append_bytes.load(Ordering::Acquire);
        let usable = self.usable_bytes.load(Ordering::Acquire);
        (settled, usable)
    }

    /// The next LSN the drive will assign, as of its last turn.
    pub(crate) fn next_lsn(&self) -> u64 {
        self.next_lsn.load(Ordering::Relaxed)
    }

    /// The ring's bytes between the head and the write position, as of the drive's last turn.
    pub(crate) fn occupied_bytes(&self) -> u64 {
        self.occupied_bytes.load(Ordering::Relaxed)
    }

    /// The read index changed under the drive's write lock: its record bytes, for
    /// [`crate::Drive::shape`] without the lock.
    pub(crate) fn set_record_bytes(&self, record_bytes: u64) {
        self.live_record_bytes
            .store(record_bytes, Ordering::Relaxed);
    }

    /// Bytes (headers included) of the live acknowledged entries, as of the index's last
    /// change.
    pub(crate) fn live_record_bytes(&self) -> u64 {
        self.live_record_bytes.load(Ordering::Relaxed)
    }

    /// Gives readers the ring's files (once, when the drive opened on real storage).
    pub(crate) fn attach_files(&self, files: DirectFiles, buffers: ReadBuffers) {
        let _ = self.direct.set(Direct { files, buffers });
    }

    pub(crate) fn direct(&self) -> Option<&Direct> {
        self.direct.get()
    }

    pub(crate) fn index(&self) -> RwLockReadGuard<'_, ReadIndex> {
        self.index
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(crate) fn durable_lsn(&self) -> u64 {
        self.durable_lsn.load(Ordering::SeqCst)
    }

    pub(crate) fn trim_lsn(&self) -> u64 {
        self.trim_lsn.load(Ordering::SeqCst)
    }

    /// The drive acknowledged everything up to `lsn` (indexed and cached already): wakes the
    /// readers waiting for it, each once.
    pub(crate) fn publish_durable(&self, lsn: u64) {
        self.durable_lsn.store(lsn, Ordering::SeqCst);
        self.tail.wake_through(lsn);
    }

    /// A trim up to `lsn` is durable: from now on its entries are trimmed to readers. Stored
    /// before their index entries go and before any later write reuses their blocks.
    pub(crate) fn publish_trim(&self, lsn: u64) {
        self.trim_lsn.store(lsn, Ordering::SeqCst);
    }

    /// The drive stopped (closed, or failed with `failure`): every waiting reader is woken and
    /// every later wait and read of the drive thread fails.
    pub(crate) fn stop(&self, failure: Option<DriveFailure>) {
        if let Some(failure) = failure {
            self.lock_failure().get_or_insert(failure);
        }
        self.stopped.store(true, Ordering::SeqCst);
        self.tail.wake_all();
    }

    fn lock_failure(&self) -> MutexGuard<'_, Option<DriveFailure>> {
        self.failure
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Why the drive stopped, if it did: its failure, or a close.
    pub(crate) fn stopped(&self) -> Option<Result<DriveFailure, DriveClosed>> {
        if !self.stopped.load(Ordering::SeqCst) {
            return None;
        }
        Some(self.lock_failure().clone().ok_or(DriveClosed))
    }

    /// Looks `lsn` up: trimmed, not yet durable, in the cache (copied out), or on the device.
    pub(crate) fn lookup(&self, lsn: u64) -> Result<Lookup, ReadError> {
        self.check_live(lsn)?;
        if let Some(payload) = self.cache.copy(lsn) {
            self.counters.cache_hits.fetch_add(1, Ordering::Relaxed);
            return Ok(Lookup::Cached(payload));
        }
        let index = self.index();
        if let Some(damage) = index.damaged(lsn) {
            drop(index);
            // Damage a quarantine open stepped over: it never changes, so what failed then is
            // the answer (nothing is read), unless a trim passed it meanwhile.
            return self.failed_check((lsn, damage.position), damage.check, None, damage.header);
        }
        let record = index.record(lsn);
        drop(index);
        let Some(record) = record else {
            // Between the two loads a trim passed it (an acknowledged live LSN is indexed).
            self.check_live(lsn)?;
            return Err(ReadError::NotYetDurable {
                lsn,
                durable_lsn: self.durable_lsn(),
            });
        };
        Ok(Lookup::Device(record))
    }

    /// `Trimmed` below the first live LSN, `NotYetDurable` past the durable tail.
    pub(crate) fn check_live(&self, lsn: u64) -> Result<(), ReadError> {
        let trim = self.trim_lsn();
        if lsn <= trim {
            return Err(ReadError::Trimmed {
                lsn,
                first_live: trim + 1,
            });
        }
        let durable = self.durable_lsn();
        if lsn > durable {
            return Err(ReadError::NotYetDurable {
                lsn,
                durable_lsn: durable,
            });
        }
        Ok(())
    }

    /// Reads an entry the index placed on the device, on this thread.
    pub(crate) fn read_direct(
        &self,
        direct: &Direct,
        record: IndexedRecord,
    ) -> Result<LogEntry, ReadError> {
        let read = RecordRead::new(&self.geometry, record);
        let mut buffer = direct.buffers.take();
        let bytes = buffer.bytes_mut(read.len);
        let outcome = direct.files.read_at(read.ring_offset, bytes);
        self.count_device_read(read.len);
        match outcome {
            Ok(()) => self.check_read(&read, bytes),
            Err(error) => self.read_failed(&read, error.raw_os_error().unwrap_or(libc::EIO)),
        }
    }

    pub(crate) fn count_device_read(&self, bytes: usize) {
        self.counters.device_reads.fetch_add(1, Ordering::Relaxed);
        self.counters
            .device_bytes
            .fetch_add(bytes as u64, Ordering::Relaxed);
    }

    /// Checks the entry in `bytes` (what `read` read) with replay's record checks: its payload,
    /// or `Trimmed` when a trim passed it while it was read, else `Damaged`.
    pub(crate) fn check_read(
        &self,
        read: &RecordRead,
        bytes: &[u8],
    ) -> Result<LogEntry, ReadError> {
        let record = read.record;
        let expect = RecordExpectation {
            ring_id: self.ring_id,
            geometry: self.geometry,
            position: record.position(),
            lsn: record.lsn,
            batch_first_lsn: record.batch.first_lsn,
            batch_bytes: record.batch.bytes,
            incarnation: record.batch.incarnation,
        };
        match check_record(&expect, &bytes[read.header_at..]) {
            Ok(checked) if checked.payload.len() == record.span.payload_len as usize => {
                Ok(LogEntry {
                    lsn: checked.lsn,
                    kind: checked.kind,
                    header: checked.embedder,
                    payload: checked.payload.to_vec(),
                })
            }
            Ok(_) => self.damaged(expect.lsn, expect.position, Check::PayloadLength),
            Err(failure) => {
                let header = intact_header(&expect, &bytes[read.header_at..]);
                let at = (expect.lsn, failure.position);
                self.failed_check(at, failure.check, None, header)
            }
        }
    }

    /// The device failed a read: that read's outcome (or `Trimmed`, if a trim passed it).
    pub(crate) fn read_failed(&self, read: &RecordRead, errno: i32) -> Result<LogEntry, ReadError> {
        self.read_error(read.record.lsn, read.record.position(), errno)
    }

    /// The device failed a read of `lsn` at `position` with `errno`: `Damaged` with the read
    /// error's check and errno (or `Trimmed`, if a trim passed it meanwhile).
    pub(crate) fn read_error<T>(
        &self,
        lsn: u64,
        position: sealog_wal::Position,
        errno: i32,
    ) -> Result<T, ReadError> {
        tracing::warn!(
            lsn,
            %position,
            errno,
            "a read failed: {}",
            std::io::Error::from_raw_os_error(errno)
        );
        self.failed_check((lsn, position), Check::ReadError, Some(errno), None)
    }

    /// `Trimmed` if a trim passed `lsn` meanwhile (its blocks may hold a later lap now), else
    /// `Damaged` with the check that failed.
    pub(crate) fn damaged<T>(
        &self,
        lsn: u64,
        position: sealog_wal::Position,
        check: Check,
    ) -> Result<T, ReadError> {
        self.failed_check((lsn, position), check, None, None)
    }

    fn failed_check<T>(
        &self,
        (lsn, position): (u64, sealog_wal::Position),
        check: Check,
        errno: Option<i32>,
        header: Option<EmbedderHeader>,
    ) -> Result<T, ReadError> {
        let trim = self.trim_lsn();
        if lsn <= trim {
            return Err(ReadError::Trimmed {
                lsn,
                first_live: trim + 1,
            });
        }
        self.counters.damaged.fetch_add(1, Ordering::Relaxed);
        Err(ReadError::Damaged {
            lsn,
            position,
            check,
            errno,
            header,
        })
    }

    /// Blocks until the durable tail reaches `lsn` (or `timeout` passes, or the drive stops):
    /// the durable tail then.
    pub(crate) fn wait_durable(
        &self,
        lsn: u64,
        timeout: Option<Duration>,
    ) -> Result<u64, WaitError> {
        let deadline = timeout.and_then(|timeout| Instant::now().checked_add(timeout));
        let mut registered = None;
        let outcome = loop {
            let durable = self.durable_lsn();
            if durable >= lsn {
                break Ok(durable);
            }
            if let Some(stopped) = self.stopped() {
                break Err(stopped.map_or_else(WaitError::Closed, WaitError::Failed));
            }
            if registered.is_none() {
                registered = Some(
                    self.tail
                        .register(lsn, Wakeup::Thread(std::thread::current())),
                );
                // Looked at again after registering: an advance before it woke nobody.
                continue;
            }
            match deadline {
                None => std::thread::park(),
                Some(deadline) => {
                    let now = Instant::now();
                    if now >= deadline {
                        break Err(WaitError::TimedOut {
                            lsn,
                            durable_lsn: durable,
                        });
                    }
                    std::thread::park_timeout(deadline - now);
                }
            }
        };
        if let Some(id) = registered {
            self.tail.unregister(lsn, id);
        }
        outcome
    }

    /// Registers (or refreshes) a task waiting for the durable tail to reach `lsn`.
    pub(crate) fn register_task(&self, lsn: u64, id: Option<u64>, waker: &Waker) -> u64 {
        self.tail.register_task(lsn, id, waker)
    }

    /// Forgets a waiter that stopped waiting.
    pub(crate) fn unregister(&self, lsn: u64, id: u64) {
        self.tail.unregister(lsn, id);
    }

    /// Wake-ups of tail waiters so far.
    pub(crate) fn tail_wakeups(&self) -> u64 {
        self.tail.wakeups.load(Ordering::Relaxed)
    }
}

/// How a waiter is woken.
enum Wakeup {
    Thread(Thread),
    Task(Waker),
}

impl Wakeup {
    fn wake(self) {
        match self {
            Wakeup::Thread(thread) => thread.unpark(),
            Wakeup::Task(waker) => waker.wake(),
        }
    }
}

/// Readers waiting for the durable tail, by the LSN they wait for. The drive looks at the
/// lowest one (an atomic) on every advance, and takes the lock only when some waiter's LSN
/// became durable: each waiter is woken once, when its LSN is durable, and a drive with no
/// waiters pays one atomic load per acknowledgement.
struct TailWaiters {
    lowest: AtomicU64,
    queue: Mutex<TailQueue>,
    wakeups: AtomicU64,
}

#[derive(Default)]
struct TailQueue {
    next_id: u64,
    waiting: BTreeMap<(u64, u64), Wakeup>,
}

impl Default for TailWaiters {
    fn default() -> TailWaiters {
        TailWaiters {
            lowest: AtomicU64::new(u64::MAX),
            queue: Mutex::new(TailQueue::default()),
            wakeups: AtomicU64::new(0),
        }
    }
}

impl TailWaiters {
    fn lock(&self) -> MutexGuard<'_, TailQueue> {
        self.queue
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Sets `lowest` from the queue (under its lock).
    fn update_lowest(&self, queue: &TailQueue) {
        let lowest = queue
            .waiting
            .first_key_value()
            .map_or(u64::MAX, |((lsn, _), _)| *lsn);
        self.lowest.store(lowest, Ordering::SeqCst);
    }

    fn register(&self, lsn: u64, wakeup: Wakeup) -> u64 {
        let mut queue = self.lock();
        let id = queue.next_id;
        queue.next_id += 1;
        queue.waiting.insert((lsn, id), wakeup);
        self.update_lowest(&queue);
        id
    }

    fn register_task(&self, lsn: u64, id: Option<u64>, waker: &Waker) -> u64 {
        let mut queue = self.lock();
        let id = id.unwrap_or_else(|| {
            queue.next_id += 1;
            queue.next_id - 1
        });
        match queue.waiting.get_mut(&(lsn, id)) {
            Some(Wakeup::Task(current)) if current.will_wake(waker) => {}
            _ => {
                queue.waiting.insert((lsn, id), Wakeup::Task(waker.clone()));
            }
        }
        self.update_lowest(&queue);
        id
    }

    fn unregister(&self, lsn: u64, id: u64) {
        let mut queue = self.lock();
        if queue.waiting.remove(&(lsn, id)).is_some() {
            self.update_lowest(&queue);
        }
    }

    fn wake_through(&self, durable: u64) {
        if self.lowest.load(Ordering::SeqCst) > durable {
            return;
        }
        let mut woken = Vec::new();
        {
            let mut queue = self.lock();
            while let Some(entry) = queue.waiting.first_entry() {
                if entry.key().0 > durable {
                    break;
                }
                woken.push(entry.remove());
            }
            self.update_lowest(&queue);
        }
        self.wakeups
            .fetch_add(woken.len() as u64, Ordering::Relaxed);
        for wakeup in woken {
            wakeup.wake();
        }
    }

    fn wake_all(&self) {
        let woken: Vec<Wakeup> = {
            let mut queue = self.lock();
            let woken = std::mem::take(&mut queue.waiting).into_values().collect();
            self.update_lowest(&queue);
            woken
        };
        for wakeup in woken {
            wakeup.wake();
        }
    }
}

/// What a drive's reads did and what their structures hold ([`crate::Drive::read_stats`]):
/// read from the shared view, without crossing the drive thread.
#[derive(Clone, Debug, PartialEq)]
pub struct ReadStats {
    /// Reads served from the recent-entry cache.
    pub cache_hits: u64,
    /// Reads of the device (point reads, on callers' threads or the drive's ring).
    pub device_reads: u64,
    /// Bytes those reads fetched.
    pub device_read_bytes: u64,
    /// Reads that found a record failing a check, or a read error.
    pub damaged: u64,
    /// Readers woken because the durable tail passed the LSN they waited for.
    pub tail_wakeups: u64,
    /// Bytes the cache may hold (its bound; 0 without a cache).
    pub cache_capacity_bytes: u64,
    /// The oldest LSN the cache holds, if any.
    pub cache_first_lsn: Option<u64>,
    /// Live entries in the read index.
    pub index_entries: u64,
    /// Bytes of memory the read index holds.
    pub index_memory_bytes: u64,
    /// The read index's bytes per live entry (0 with none).
    pub index_bytes_per_entry: f64,
    /// Reads callers' threads may have on the device at once (0: reads go through the drive
    /// thread, as on a simulated device).
    pub read_buffers: usize,
    /// Bytes of each read buffer (their memory is bounded by `read_buffers` times this).
    pub read_buffer_bytes: usize,
    /// The highest acknowledged LSN.
    pub durable_lsn: u64,
    /// The first live LSN.
    pub first_live_lsn: u64,
}

impl ReadView {
    /// The counters and sizes of [`ReadStats`].
    pub(crate) fn read_stats(&self) -> ReadStats {
        let cache_first_lsn = self.cache.first_lsn();
        let index = self.index();
        let entries = index.entries();
        let memory = index.memory_bytes();
        drop(index);
        let (buffers, buffer_bytes) = self.direct().map_or((0, 0), |direct| {
            (direct.buffers.count(), direct.buffers.buffer_bytes())
        });
        ReadStats {
            cache_hits: self.counters.cache_hits.load(Ordering::Relaxed),
            device_reads: self.counters.device_reads.load(Ordering::Relaxed),
            device_read_bytes: self.counters.device_bytes.load(Ordering::Relaxed),
            damaged: self.counters.damaged.load(Ordering::Relaxed),
            tail_wakeups: self.tail_wakeups(),
            cache_capacity_bytes: self.cache.capacity_bytes(),
            cache_first_lsn,
            index_entries: entries,
            index_memory_bytes: memory,
            index_bytes_per_entry: if entries == 0 {
                0.0
            } else {
                memory as f64 / entries as f64
            },
            read_buffers: buffers,
            read_buffer_bytes: buffer_bytes,
            durable_lsn: self.durable_lsn(),
            first_live_lsn: self.trim_lsn() + 1,
        }
    }

    /// The drive's statistics from what its thread published (`completion_to_wake_us` comes
    /// from the clients' own record of their wake-ups).
    pub(crate) fn stats(&self, completion_to_wake_us: Histogram<u64>) -> Stats {
        let shared = &self.stats;
        let histograms = shared.lock_histograms().clone();
        let state = match self.stopped() {
            Some(Ok(failure)) => DriveState::Failed(failure),
            Some(Err(_)) | None => DriveState::Running,
        };
        Stats {
            appends: get(&shared.appends),
            payload_bytes: get(&shared.payload_bytes),
            batches: get(&shared.batches),
            tail_markers: get(&shared.tail_markers),
            batch_entries: histograms.batch_entries,
            sync_latency_us: histograms.sync_latency_us,
            idle_gap_us: histograms.idle_gap_us,
            enqueue_to_submit_us: histograms.enqueue_to_submit_us,
            completion_to_wake_us,
            reads: get(&shared.reads),
            lsn_durable: self.durable_lsn(),
            lsn_covered: get(&shared.lsn_covered),
            hint_waits: get(&shared.hint_waits),
            hint_writes: get(&shared.hint_writes),
            state,
            queues: shared.queues(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drive::index::{IndexedBatch, RecordSpan};
    use sealog_wal::batch::{BatchBuilder, BatchStart};
    use sealog_wal::format::ENTRY_HEADER_SIZE;
    use sealog_wal::{Kind, Position};

    const BLOCK: u32 = 4096;

    fn geometry() -> Geometry {
        Geometry {
            block_size_bytes: BLOCK,
            segment_size_bytes: 64 * u64::from(BLOCK),
            segment_count: 4,
            batch_size_max_bytes: 8 * BLOCK,
            window_batches_max: 2,
            window_bytes_max: 16 * u64::from(BLOCK),
        }
    }

    const AT: Position = Position {
        lap: 1,
        segment: 2,
        offset: BLOCK,
    };

    /// A view whose index holds one batch at `AT` with LSNs 5 and 6, and that batch's bytes.
    fn view_with_batch() -> (ReadView, Vec<u8>) {
        let ring_id = RingId([7; 16]);
        let geometry = geometry();
        let mut bytes = vec![0u8; geometry.batch_size_max_bytes as usize];
        let mut builder = BatchBuilder::new(
            &mut bytes,
            BatchStart {
                ring_id,
                position: AT,
                first_lsn: 5,
                watermark: 4,
                incarnation: 3,
                block_size_bytes: BLOCK,
                capacity_bytes: geometry.batch_size_max_bytes,
                payload_size_max_bytes: geometry.payload_size_max_bytes(),
            },
        );
        builder.push(Kind::Data, &[1; 100]).expect("fits");
        builder.push(Kind::Data, &[2; 5000]).expect("fits");
        let batch_bytes = builder.finish().bytes;
        bytes.truncate(batch_bytes as usize);
        let mut index = ReadIndex::default();
        let batch = IndexedBatch {
            position: AT,
            first_lsn: 5,
            next_lsn: 7,
            bytes: batch_bytes,
            incarnation: 3,
        };
        let spans = [
            RecordSpan {
                offset_in_batch: 0,
                payload_len: 100,
            },
            RecordSpan {
                offset_in_batch: (ENTRY_HEADER_SIZE + 100) as u32,
                payload_len: 5000,
            },
        ];
        index.push(batch, 5, spans);
        let options = DriveOptions {
            read_cache_bytes: 0,
            ..DriveOptions::default()
        };
        (
            ReadView::new((ring_id, geometry), (6, 4), index, &options),
            bytes,
        )
    }

    fn device_record(view: &ReadView, lsn: u64) -> IndexedRecord {
        match view.lookup(lsn) {
            Ok(Lookup::Device(record)) => record,
            Ok(Lookup::Cached(_)) => panic!("no cache"),
            Err(error) => panic!("LSN {lsn}: {error}"),
        }
    }

    #[test]
    fn a_record_read_spans_only_its_blocks_and_checks_out() {
        let (view, batch) = view_with_batch();
        let record = device_record(&view, 6);
        let read = RecordRead::new(&view.geometry, record);
        // Header at 196 in the batch, 5096 bytes: blocks 0 and 1 of the batch.
        assert_eq!(read.ring_offset, view.geometry.ring_offset(AT));
        assert_eq!((read.len, read.header_at), (2 * BLOCK as usize, 196));
        assert_eq!(
            view.check_read(&read, &batch[..read.len])
                .map(|entry| entry.payload),
            Ok(vec![2; 5000])
        );
        assert!(matches!(
            view.lookup(7),
            Err(ReadError::NotYetDurable {
                lsn: 7,
                durable_lsn: 6
            })
        ));
        assert_eq!(
            view.lookup(4).map(|_| ()),
            Err(ReadError::Trimmed {
                lsn: 4,
                first_live: 5
            })
        );
    }

    /// What a reader reads after a later lap reused the blocks (here: zeros) is `Damaged`
    /// unless the trim point covers the LSN by then, when it is `Trimmed`: never served.
    #[test]
    fn other_bytes_than_the_entry_are_trimmed_once_a_trim_passed_it_else_damaged() {
        let (view, batch) = view_with_batch();
        let read = RecordRead::new(&view.geometry, device_record(&view, 5));
        let overwritten = vec![0u8; read.len];
        assert_eq!(
            view.check_read(&read, &overwritten),
            Err(ReadError::Damaged {
                lsn: 5,
                position: AT,
                check: Check::NotWritten,
                errno: None,
                header: None,
            })
        );
        let mut flipped = batch.clone();
        flipped[sealog_wal::format::ENTRY_HEADER_SIZE + 10] ^= 1;
        // Only the payload is damaged: the embedder's header still names the record.
        assert!(matches!(
            view.check_read(&read, &flipped[..read.len]),
            Err(ReadError::Damaged {
                check: Check::PayloadCrc,
                header: Some(EmbedderHeader::ZERO),
                ..
            })
        ));
        let mut header_flipped = batch.clone();
        header_flipped[70] ^= 1;
        assert!(matches!(
            view.check_read(&read, &header_flipped[..read.len]),
            Err(ReadError::Damaged {
                check: Check::HeaderCrc,
                header: None,
                ..
            })
        ));
        view.publish_trim(5);
        assert_eq!(
            view.check_read(&read, &overwritten),
            Err(ReadError::Trimmed {
                lsn: 5,
                first_live: 6
            })
        );
        assert_eq!(
            view.read_failed(&read, libc::EIO),
            Err(ReadError::Trimmed {
                lsn: 5,
                first_live: 6
            })
        );
        let stats = view.read_stats();
        assert_eq!(stats.damaged, 3);
    }
}
