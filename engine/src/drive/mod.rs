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
//! - [`op`]: the typed operations and their tags; [`buffers`]: the pool's lanes;
//! - `options`: how a drive is opened ([`DriveOptions`], [`WhenFull`], the defaults and
//!   limits); `stats`: what it reports ([`Stats`], [`LogShape`]); `requests`: what clients
//!   send its thread ([`Request`]), the `records` of an append, and what the state machine
//!   has on the device (`inflight`); `thread`: the drive thread itself; `futures`: the
//!   futures the handle hands out; `telemetry`: how the state machine feeds [`metrics`].
//!
//! This module holds only the handle, [`Drive`]: its children import from each other, never
//! from here.

mod appends;
mod buffers;
mod cache;
mod clock;
mod core;
mod direct;
mod entry;
mod futures;
mod hints;
mod index;
mod inflight;
mod iter;
pub mod metrics;
mod op;
pub(crate) mod options;
mod reads;
mod records;
mod recover;
mod requests;
mod shared_stats;
mod stats;
mod telemetry;
mod thread;
mod trim;
mod view;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{fence, AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use sealog_wal::format::{EmbedderHeader, RingPurpose};
use sealog_wal::{Geometry, Kind, RecoveryReport};

pub use self::buffers::{buffer_bytes, buffer_count, registered_buffer_count, READ_BUFFERS};
pub use self::clock::{Clock, ManualClock, SystemClock};
pub use self::core::{DriveCore, Wait};
pub use self::entry::{
    DamagedEntry, Entry, EntryRef, LogEntry, NewEntry, RecoveryVisitor, SummedBytes,
};
pub use self::futures::{DriveFuture, DurableFuture, PayloadFuture};
pub use self::iter::EntryIter;
pub use self::options::{
    DriveOptions, WhenFull, CHANNEL_CAPACITY_MAX, GROUP_GATHER_US_DEFAULT,
    READ_AHEAD_BYTES_DEFAULT, READ_AHEAD_BYTES_MAX, READ_BUFFERS_DEFAULT, READ_BUFFERS_MAX,
    READ_CACHE_BYTES_DEFAULT, READ_CACHE_BYTES_MAX, SPIN_BEFORE_BLOCK_US_DEFAULT,
    TAIL_MARKER_IDLE_US_DEFAULT,
};
pub use self::requests::{ReadReply, Request, TrimReply};
pub use self::stats::{AppendRoom, DriveState, LogShape, QueueDepths, Stats};
pub use self::view::ReadStats;
// How appends are made durable is the I/O seam's type, beside the flag of one write it decides;
// re-exported here, where drives have always named it.
pub use crate::io::Durability;

use self::direct::{DirectFiles, ReadBuffers};
use self::entry::Source;
use self::iter::EntrySource;
use self::options::check_options;
use self::records::{group_records, Payload, QueuedRecord, Records};
use self::requests::RequestKind;
use self::thread::{await_open, drive_thread, take_visitor, SharedVisitor};
use self::thread::{ThreadChannel, ThreadOpen};
use self::view::{Lookup, ReadView};
use crate::error::{AppendError, DriveClosed, OpenError, ReadError, TrimError, WaitError};
use crate::io::{IoBackend, Waker};
use crate::ticket::{Notifier, Ticket, TicketPool};
use crate::uring::lend::LentParts;

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
    /// #     drive.append(NewEntry::data(vec![1; 10]).with_header(header))?.wait()?;
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

    /// Appends one entry; the ticket yields its LSN once it is durable. The entry is built
    /// from its payload as the caller holds it (a `Vec<u8>`, [`Bytes`](bytes::Bytes),
    /// [`SummedBytes`], borrowed slices, or a [`NewEntry`]), with a kind and an embedder header
    /// when they are not data and zeros ([`Entry`] says what each form costs: one copy, the
    /// drive's own).
    /// A kind the format reserves and a payload over the ring's limit are refused here, on
    /// the caller's thread, before anything is queued.
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
    pub fn append<'a>(&self, entry: impl Into<Entry<'a>>) -> Result<Ticket, AppendError> {
        let (kind, header, source) = entry.into().into_parts();
        match source {
            Source::Owned(bytes) => self.append_payload(kind, header, Payload::Owned(bytes), None),
            Source::Shared(bytes, crc) => {
                self.append_payload(kind, header, Payload::Shared(bytes), crc)
            }
            Source::Slices(parts) => self.append_lent(kind, header, parts),
        }
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

    /// Queues an entry of borrowed slices: the drive thread copies them straight into the
    /// batch's registered buffer, and this returns once it has (when the batch carrying them
    /// starts), so the slices are free again.
    fn append_lent(
        &self,
        kind: Kind,
        header: EmbedderHeader,
        parts: &[&[u8]],
    ) -> Result<Ticket, AppendError> {
        let queued_at = Instant::now();
        let payload_len = parts.iter().map(|part| part.len()).sum();
        self.check_append(kind, payload_len)?;
        let payload_crc = records::parts_crc(parts);
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

/// An iterator reads through its drive's view and point reads.
impl EntrySource for Drive {
    fn view(&self) -> &Arc<ReadView> {
        &self.view
    }

    fn read_entry(&self, lsn: u64) -> Result<LogEntry, ReadError> {
        Drive::read_entry(self, lsn)
    }
}
