//! Iterators over the live log ([`EntryIter`]): from any live LSN to the durable tail, in
//! large sequential reads, as recovery reads. The read index gives the run of batches that lie
//! back to back in one segment from the next LSN on; the iterator reads them with one O_DIRECT
//! read of up to [`DriveOptions::read_ahead_bytes`](crate::DriveOptions::read_ahead_bytes) into
//! a buffer of its own (its first read up to [`FIRST_READ_BYTES`], each next one twice the last,
//! as the kernel ramps up its read-ahead: an iterator that stops after a few entries, such as a
//! compactor's step, reads little more than it takes, and a long scan reads full-size runs from
//! its fifth read on) (on the caller's thread: an iterator never occupies the drive thread)
//! and checks each batch whole with replay's validator. Entries still in the recent-entry
//! cache are taken from memory. From its second device read on, an iterator keeps the next run
//! in flight on a reader thread of its own while it checks and hands out the current one, so a
//! catch-up reader reads at the device's sequential bandwidth rather than at bandwidth x (read
//! time / (read time + check time)); short iterators never start the thread. A drive on a
//! simulated device has no files for callers' threads: its iterators read entry by entry
//! through the drive thread.
//!
//! Damage does not end an iteration: a batch that fails its check whole is read again entry by
//! entry (point reads, replay's record checks), so each of its intact entries is served once
//! and each damaged LSN is an `Err(ReadError::Damaged)` of its own, as is each LSN a quarantine
//! open found damaged (the index says so; nothing is read). The iteration then goes on with the
//! next LSN, so a compactor scans across damage. Any other error ends it.

use std::collections::VecDeque;
use std::io;
use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender};
use memmap2::MmapMut;
use sealog_wal::validate::{check_batch, BatchExpectation, CheckedBatch, IncarnationRule};

use super::entry::LogEntry;
use super::index::IndexedBatch;
use super::view::ReadView;
use crate::error::ReadError;
use crate::pool::BUFFER_ALIGN_BYTES;

/// The most bytes an iterator's first device read takes (a batch at least): a quarter of a
/// default batch. A compactor's step or a reader's catch-up of a few entries here reads a
/// batch or two, not the 4 MiB of a full read-ahead, which on a ring of 600 KiB batches came
/// to a third of what a reclaimer read while clients wrote.
const FIRST_READ_BYTES: u64 = 256 << 10;

/// What an iterator needs of its drive: what readers share with the drive thread, and the
/// drive's point reads (through the drive thread when the drive has no files for callers'
/// threads). The drive's handle is the one source; an iterator needs nothing else of it.
pub(super) trait EntrySource {
    /// What readers share with the drive thread.
    fn view(&self) -> &Arc<ReadView>;

    /// One live entry, as [`crate::Drive::read_entry`] reads it.
    fn read_entry(&self, lsn: u64) -> Result<LogEntry, ReadError>;
}

/// Live entries from an LSN on, each a [`LogEntry`].
pub struct EntryIter<'a> {
    drive: &'a (dyn EntrySource + Sync),
    next_lsn: u64,
    ready: VecDeque<LogEntry>,
    run: Vec<IndexedBatch>,
    /// Read-ahead buffers not in use (two at most, mapped as needed).
    spare: Vec<MmapMut>,
    /// Device reads made so far (the second starts the reader thread).
    device_runs: u64,
    /// The most bytes the next device read takes (whole batches, at least one).
    run_bytes: u64,
    /// Never read a run before it is needed ([`EntryIter::without_read_ahead`]).
    no_read_ahead: bool,
    /// The reader thread, once started, and the run it has in flight (planned for that LSN).
    reader: Option<RunReader>,
    in_flight: Option<u64>,
    /// An error ended the iteration.
    ended: bool,
    /// LSNs below this are read one at a time (the rest of a run that failed its check or its
    /// read, so each LSN gets its own outcome).
    point_until: u64,
}

/// A run of batches to read with one sequential read.
struct RunRead {
    run: Vec<IndexedBatch>,
    ring_offset: u64,
    len: usize,
    buffer: MmapMut,
    outcome: io::Result<()>,
    /// What checking the run's batches found: every record that passed, in LSN order, then
    /// the first failure if one did not. Checked where it was read (the reader thread, for a
    /// run read ahead), so the CRCs of one run are computed while the iterator's caller copies
    /// out the one before.
    records: Vec<RunRecord>,
    /// The LSN after the batch whose check failed (the first that did), if one did.
    failure: Option<u64>,
}

impl RunRead {
    /// Reads the run and checks its batches.
    fn read_and_check(&mut self, view: &ReadView) {
        let direct = view.direct().expect("runs are read for drives with files");
        self.outcome = direct
            .files
            .read_at(self.ring_offset, &mut self.buffer[..self.len]);
        // Counted where it is read, so a read ahead that is never taken counts too.
        view.count_device_read(self.len);
        self.records.clear();
        self.failure = None;
        if self.outcome.is_err() {
            return;
        }
        let bytes = &self.buffer[..self.len];
        let mut offset = 0usize;
        for batch in &self.run {
            let batch_bytes = &bytes[offset..offset + batch.bytes as usize];
            match check(view.ring_id, view.geometry, batch, batch_bytes) {
                Ok(checked) => self.records.extend(checked.records().map(|record| {
                    let range = record.payload_range;
                    RunRecord {
                        lsn: record.lsn,
                        kind: record.kind,
                        header: record.embedder,
                        payload: offset + range.start..offset + range.end,
                    }
                })),
                Err(_) => {
                    self.failure = Some(batch.next_lsn);
                    return;
                }
            }
            offset += batch.bytes as usize;
        }
    }
}

/// A record of a run that passed its checks: where its payload lies in the run's buffer.
struct RunRecord {
    lsn: u64,
    kind: sealog_wal::Kind,
    header: sealog_wal::EmbedderHeader,
    payload: std::ops::Range<usize>,
}

/// An iterator's reader thread: reads runs as asked, in order.
struct RunReader {
    requests: Option<Sender<RunRead>>,
    done: Receiver<RunRead>,
    thread: Option<JoinHandle<()>>,
}

impl RunReader {
    fn start(view: Arc<ReadView>) -> io::Result<RunReader> {
        let (requests, jobs) = crossbeam_channel::bounded::<RunRead>(1);
        let (finished, done) = crossbeam_channel::bounded(1);
        let thread = std::thread::Builder::new()
            .name("sealog-read-ahead".to_string())
            .spawn(move || {
                for mut job in jobs {
                    job.read_and_check(&view);
                    if finished.send(job).is_err() {
                        break;
                    }
                }
            })?;
        Ok(RunReader {
            requests: Some(requests),
            done,
            thread: Some(thread),
        })
    }
}

impl Drop for RunReader {
    fn drop(&mut self) {
        // The thread ends once its requests close and its last read is taken or dropped.
        self.requests = None;
        while self.done.try_recv().is_ok() {}
        // One read at most is in flight, and its answer fits the channel: the join is short.
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl<'a> EntryIter<'a> {
    pub(super) fn new(drive: &'a (dyn EntrySource + Sync), lsn: u64) -> EntryIter<'a> {
        EntryIter {
            drive,
            next_lsn: lsn,
            ready: VecDeque::new(),
            run: Vec::new(),
            spare: Vec::new(),
            device_runs: 0,
            run_bytes: FIRST_READ_BYTES.min(drive.view().read_ahead_bytes),
            no_read_ahead: false,
            reader: None,
            in_flight: None,
            ended: false,
            point_until: 0,
        }
    }

    /// This iterator reads each run of the device only when its first entry is asked for, on
    /// the caller's thread, and never the one after it in advance: for a scan that stops by
    /// what it finds (a compactor's step that ends at the first record still needed), whose
    /// read-ahead would mostly be read for nothing. A reclaimer stepping through a ring that
    /// clients write read half its bytes in read-ahead it never used.
    pub fn without_read_ahead(mut self) -> EntryIter<'a> {
        self.no_read_ahead = true;
        self
    }

    /// The LSN the next entry will have.
    pub fn next_lsn(&self) -> u64 {
        self.ready.front().map_or(self.next_lsn, |entry| entry.lsn)
    }

    /// Fills `ready` from `next_lsn` on: `Ok(false)` at the durable tail.
    fn fill(&mut self) -> Result<bool, ReadError> {
        let view = self.drive.view();
        if let Some(stopped) = view.stopped() {
            return Err(stopped.map_or_else(ReadError::Closed, ReadError::Failed));
        }
        match view.check_live(self.next_lsn) {
            Ok(()) => {}
            Err(ReadError::NotYetDurable { lsn, durable_lsn }) if lsn == durable_lsn + 1 => {
                return Ok(false);
            }
            Err(error) => return Err(error),
        }
        // Entries still in the cache come from memory, a read-ahead's worth at a time.
        let durable = view.durable_lsn();
        let taken = view.cache.copy_run(
            (self.next_lsn, durable),
            view.read_ahead_bytes,
            &mut self.ready,
        );
        if taken > 0 {
            view.counters
                .cache_hits
                .fetch_add(taken as u64, std::sync::atomic::Ordering::Relaxed);
            self.next_lsn += taken as u64;
            return Ok(true);
        }
        let one_at_a_time = view.direct().is_none()
            || self.next_lsn < self.point_until
            || view.index().damaged(self.next_lsn).is_some();
        if one_at_a_time {
            return self.read_one();
        }
        view.index()
            .run_from(self.next_lsn, self.run_bytes, &mut self.run);
        if self.run.is_empty() {
            // A live LSN in no batch: a trim passed it since it was looked at. The point read
            // says so (or what else it is).
            return self.read_one();
        }
        self.read_run()?;
        Ok(true)
    }

    /// Reads the entry at `next_lsn` alone (from the cache, or the device through a point
    /// read and replay's record checks): the entry, or a damaged LSN's error, after which the
    /// iteration goes on with the next LSN, or any other error.
    fn read_one(&mut self) -> Result<bool, ReadError> {
        let lsn = self.next_lsn;
        match self.drive.read_entry(lsn) {
            Ok(entry) => {
                self.ready.push_back(entry);
                self.next_lsn = lsn + 1;
                Ok(true)
            }
            Err(error @ ReadError::Damaged { .. }) => {
                self.next_lsn = lsn + 1;
                Err(error)
            }
            Err(error) => Err(error),
        }
    }

    /// A read-ahead buffer: a spare one, or a new mapping.
    fn take_buffer(&mut self) -> Result<MmapMut, ReadError> {
        if let Some(buffer) = self.spare.pop() {
            return Ok(buffer);
        }
        let read_ahead = self.drive.view().read_ahead_bytes as usize;
        let bytes = read_ahead.div_ceil(BUFFER_ALIGN_BYTES) * BUFFER_ALIGN_BYTES;
        let map = MmapMut::map_anon(bytes).map_err(|error| ReadError::Resources {
            lsn: self.next_lsn,
            what: "map an iterator's read-ahead buffer",
            errno: error.raw_os_error().unwrap_or(libc::ENOMEM),
        })?;
        // Huge pages where the kernel has them: every O_DIRECT read pins its buffer's pages,
        // and a 4 MiB read pins 1024 small pages (a seventh of a catch-up reader's CPU in a
        // profile here) or two huge ones. Advice only: without it the reads are the same.
        let _ = map.advise(memmap2::Advice::HugePage);
        Ok(map)
    }

    /// The read of the run in `self.run`, into a read-ahead buffer.
    fn plan_read(&mut self) -> Result<RunRead, ReadError> {
        let geometry = self.drive.view().geometry;
        let first = self.run[0];
        let last = *self.run.last().expect("a run has a batch");
        let buffer = self.take_buffer()?;
        Ok(RunRead {
            run: std::mem::take(&mut self.run),
            ring_offset: geometry.ring_offset(first.position),
            len: (last.position.offset + last.bytes - first.position.offset) as usize,
            buffer,
            outcome: Ok(()),
            records: Vec::new(),
            failure: None,
        })
    }

    /// Reads the run in `self.run` from the device (its entries from `next_lsn` on): the one
    /// the reader thread has in flight for `next_lsn`, or a new read. Before checking it, the
    /// next run goes in flight on the reader thread (from the second device read on).
    fn read_run(&mut self) -> Result<(), ReadError> {
        let job = match (self.in_flight.take(), self.reader.as_ref()) {
            (Some(planned), Some(reader)) => {
                let job = reader
                    .done
                    .recv()
                    .expect("the reader thread answers every read");
                if planned == self.next_lsn {
                    job
                } else {
                    // Planned for another LSN (a cached run came between): read anew.
                    self.spare.push(job.buffer);
                    self.read_now()?
                }
            }
            _ => self.read_now()?,
        };
        self.device_runs += 1;
        self.run_bytes = (self.run_bytes * 2).min(self.drive.view().read_ahead_bytes);
        self.read_ahead(&job);
        let outcome = self.take_run(&job);
        self.run = job.run;
        self.spare.push(job.buffer);
        outcome
    }

    /// Reads the run in `self.run` on this thread.
    fn read_now(&mut self) -> Result<RunRead, ReadError> {
        let mut job = self.plan_read()?;
        job.read_and_check(self.drive.view());
        Ok(job)
    }

    /// Puts the run after `job`'s in flight on the reader thread, when it is durable, not
    /// cached, and this iterator has read the device before (so it is not a short one).
    fn read_ahead(&mut self, job: &RunRead) {
        let view = Arc::clone(self.drive.view());
        let next = job.run.last().expect("a run has a batch").next_lsn;
        if self.no_read_ahead || self.device_runs < 2 || view.check_live(next).is_err() {
            return;
        }
        view.index().run_from(next, self.run_bytes, &mut self.run);
        let cached = self
            .run
            .first()
            .is_some_and(|batch| view.cache.holds(batch.first_lsn));
        if self.run.is_empty() || cached {
            return;
        }
        if self.reader.is_none() {
            match RunReader::start(Arc::clone(&view)) {
                Ok(reader) => self.reader = Some(reader),
                // No thread: the next run is read on this thread, as before.
                Err(error) => {
                    tracing::warn!("starting an iterator's read-ahead thread failed: {error}");
                    return;
                }
            }
        }
        let Ok(planned) = self.plan_read() else {
            return;
        };
        let sender = self
            .reader
            .as_ref()
            .and_then(|reader| reader.requests.as_ref());
        if sender.is_some_and(|sender| sender.send(planned).is_ok()) {
            self.in_flight = Some(next);
        }
    }

    /// Checks the batches `job` read and takes their entries from `next_lsn` on; where the
    /// read failed, or a batch failed its check, the LSNs from there to that batch's end (the
    /// run's, for a failed read) are read one at a time next.
    fn take_run(&mut self, job: &RunRead) -> Result<(), ReadError> {
        if let Err(error) = &job.outcome {
            tracing::warn!(
                lsn = self.next_lsn,
                ring_offset = job.ring_offset,
                "an iterator's read failed: {error}"
            );
            self.point_until = job.run.last().expect("a run has a batch").next_lsn;
            return Ok(());
        }
        for record in &job.records {
            if record.lsn >= self.next_lsn {
                self.ready.push_back(LogEntry {
                    lsn: record.lsn,
                    kind: record.kind,
                    header: record.header,
                    payload: job.buffer[record.payload.clone()].to_vec(),
                });
                self.next_lsn = record.lsn + 1;
            }
        }
        // What was read before the damage is served first; the damaged batch is read entry
        // by entry after it.
        if let Some(batch_end) = job.failure {
            self.point_until = batch_end;
        }
        Ok(())
    }
}

/// Checks an indexed batch's bytes whole with replay's validator: the batch, or what failed
/// (LSN, place, check).
fn check<'b>(
    ring_id: sealog_wal::RingId,
    geometry: sealog_wal::Geometry,
    batch: &IndexedBatch,
    bytes: &'b [u8],
) -> Result<CheckedBatch<'b>, (u64, sealog_wal::Position, sealog_wal::Check)> {
    let expect = BatchExpectation {
        ring_id,
        geometry,
        position: batch.position,
        first_lsn: batch.first_lsn,
        incarnation: IncarnationRule::Exactly(batch.incarnation),
    };
    let checked = check_batch(&expect, bytes)
        .map_err(|failure| (failure.lsn, failure.position, failure.check))?;
    if checked.next_lsn() != batch.next_lsn {
        // A valid batch, but not the one indexed here (the ring changed under the reader).
        return Err((
            batch.first_lsn,
            batch.position,
            sealog_wal::Check::BatchLayout,
        ));
    }
    Ok(checked)
}

impl<'a> EntryIter<'a> {
    /// The entries as `(lsn, payload)` pairs, for callers that need neither the kind nor the
    /// embedder header.
    pub fn payloads(self) -> impl Iterator<Item = Result<(u64, Vec<u8>), ReadError>> + 'a {
        self.map(|entry| entry.map(|entry| (entry.lsn, entry.payload)))
    }
}

impl Iterator for EntryIter<'_> {
    type Item = Result<LogEntry, ReadError>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(entry) = self.ready.pop_front() {
            // Read ahead before a trim passed it: trimmed entries are hidden at once.
            if let Err(error) = self.drive.view().check_live(entry.lsn) {
                self.ready.clear();
                self.ended = true;
                return Some(Err(error));
            }
            return Some(Ok(entry));
        }
        if self.ended {
            return None;
        }
        match self.fill() {
            Ok(true) => self.next(),
            // The durable tail: nothing more for now.
            Ok(false) => None,
            // A damaged LSN is its own outcome: the iteration goes on after it.
            Err(error @ ReadError::Damaged { .. }) => Some(Err(error)),
            Err(error) => {
                self.ended = true;
                Some(Err(error))
            }
        }
    }
}
