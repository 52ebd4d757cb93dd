//! Iterators over the live log ([`EntryIter`]): from any live LSN to the durable tail, in
//! large sequential reads, as recovery reads. The read index gives the run of batches that lie
//! back to back in one segment from the next LSN on; the iterator reads them with one O_DIRECT
//! read of up to [`DriveOptions::read_ahead_bytes`](super::DriveOptions::read_ahead_bytes) into
//! a buffer of its own (on the caller's thread: an iterator never occupies the drive thread)
//! and checks each batch whole with replay's validator. Batches still in the recent-batch
//! cache are taken from memory. A drive on a simulated device has no files for callers'
//! threads: its iterators read entry by entry through the drive thread.

use std::collections::VecDeque;

use memmap2::MmapMut;
use sealog_wal::validate::{check_batch, BatchExpectation, CheckedBatch, IncarnationRule};

use super::index::IndexedBatch;
use super::Drive;
use crate::error::ReadError;
use crate::pool::BUFFER_ALIGN_BYTES;

/// Live entries from an LSN on: `(lsn, payload)`.
pub struct EntryIter<'a> {
    drive: &'a Drive,
    next_lsn: u64,
    ready: VecDeque<(u64, Vec<u8>)>,
    run: Vec<IndexedBatch>,
    /// The read-ahead buffer, mapped at the first device read.
    buffer: Option<MmapMut>,
    /// An error ended the iteration.
    ended: bool,
}

impl<'a> EntryIter<'a> {
    pub(super) fn new(drive: &'a Drive, lsn: u64) -> EntryIter<'a> {
        EntryIter {
            drive,
            next_lsn: lsn,
            ready: VecDeque::new(),
            run: Vec::new(),
            buffer: None,
            ended: false,
        }
    }

    /// The LSN the next entry will have.
    pub fn next_lsn(&self) -> u64 {
        self.ready.front().map_or(self.next_lsn, |entry| entry.0)
    }

    /// Fills `ready` from `next_lsn` on: `Ok(false)` at the durable tail.
    fn fill(&mut self) -> Result<bool, ReadError> {
        let view = &self.drive.view;
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
        if view.direct().is_none() {
            let payload = self.drive.read(self.next_lsn)?;
            self.ready.push_back((self.next_lsn, payload));
            self.next_lsn += 1;
            return Ok(true);
        }
        view.index()
            .run_from(self.next_lsn, view.read_ahead_bytes, &mut self.run);
        if self.run.is_empty() {
            // A trim passed the LSN since it was looked at (a live LSN is indexed).
            view.check_live(self.next_lsn)?;
            return Err(ReadError::Trimmed {
                lsn: self.next_lsn,
                first_live: view.trim_lsn() + 1,
            });
        }
        let cached_prefix = self
            .run
            .iter()
            .take_while(|batch| batch.cached.is_some_and(|slot| view.cache.holds(slot)))
            .count();
        if cached_prefix > 0 && self.take_cached(cached_prefix)? {
            return Ok(true);
        }
        self.read_run()?;
        Ok(true)
    }

    /// Takes the first `count` batches of the run from the cache; `Ok(false)` when the cache
    /// evicted the first meanwhile (the device then).
    fn take_cached(&mut self, count: usize) -> Result<bool, ReadError> {
        let view = &self.drive.view;
        let mut taken = false;
        for batch in &self.run[..count] {
            let Some(slot) = batch.cached else {
                break;
            };
            let ready = &mut self.ready;
            let next_lsn = &mut self.next_lsn;
            let outcome = view
                .cache
                .with_batch(slot, 0..batch.bytes as usize, |bytes| {
                    let checked = check(view.ring_id, view.geometry, batch, bytes)?;
                    take_records(&checked, next_lsn, ready);
                    Ok::<(), (u64, sealog_wal::Position, sealog_wal::Check)>(())
                });
            match outcome {
                None => break,
                Some(Err((lsn, position, check))) => return view.damaged(lsn, position, check),
                Some(Ok(())) => taken = true,
            }
        }
        Ok(taken)
    }

    /// Reads the run of batches from the device with one read, and takes their entries.
    fn read_run(&mut self) -> Result<(), ReadError> {
        let view = &self.drive.view;
        let direct = view.direct().expect("checked by fill");
        let first = self.run[0];
        let last = *self.run.last().expect("a run has a batch");
        let ring_offset = view.geometry.ring_offset(first.position);
        let len = (last.position.offset + last.bytes - first.position.offset) as usize;
        let read_ahead = view.read_ahead_bytes as usize;
        let buffer = match &mut self.buffer {
            Some(buffer) => buffer,
            empty => {
                let bytes = read_ahead.div_ceil(BUFFER_ALIGN_BYTES) * BUFFER_ALIGN_BYTES;
                let map = MmapMut::map_anon(bytes).map_err(|error| {
                    tracing::warn!("mapping an iterator's read-ahead buffer failed: {error}");
                    ReadError::Damaged {
                        lsn: self.next_lsn,
                        position: first.position,
                        check: sealog_wal::Check::ReadError,
                    }
                })?;
                empty.insert(map)
            }
        };
        let bytes = &mut buffer[..len];
        let outcome = direct.files.read_at(ring_offset, bytes);
        view.count_device_read(len);
        if let Err(error) = outcome {
            tracing::warn!(
                lsn = self.next_lsn,
                ring_offset,
                "an iterator's read failed: {error}"
            );
            return view.damaged(self.next_lsn, first.position, sealog_wal::Check::ReadError);
        }
        let mut offset = 0usize;
        for batch in &self.run {
            let batch_bytes = &bytes[offset..offset + batch.bytes as usize];
            offset += batch.bytes as usize;
            match check(view.ring_id, view.geometry, batch, batch_bytes) {
                Ok(checked) => take_records(&checked, &mut self.next_lsn, &mut self.ready),
                Err((lsn, position, check)) => {
                    // What was read before the damage is served first.
                    if self.ready.is_empty() {
                        return view.damaged(lsn.max(self.next_lsn), position, check);
                    }
                    break;
                }
            }
        }
        Ok(())
    }
}

/// Checks an indexed batch's bytes whole with replay's validator.
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

/// Moves a checked batch's entries from `next_lsn` on into `ready`.
fn take_records(
    checked: &CheckedBatch<'_>,
    next_lsn: &mut u64,
    ready: &mut VecDeque<(u64, Vec<u8>)>,
) {
    for record in checked.records() {
        if record.lsn >= *next_lsn {
            ready.push_back((record.lsn, record.payload.to_vec()));
            *next_lsn = record.lsn + 1;
        }
    }
}

impl Iterator for EntryIter<'_> {
    type Item = Result<(u64, Vec<u8>), ReadError>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(entry) = self.ready.pop_front() {
            return Some(Ok(entry));
        }
        if self.ended {
            return None;
        }
        match self.fill() {
            Ok(true) => self.next(),
            // The durable tail: nothing more for now.
            Ok(false) => None,
            Err(error) => {
                self.ended = true;
                Some(Err(error))
            }
        }
    }
}
