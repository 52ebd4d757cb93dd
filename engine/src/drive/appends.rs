//! The append path of the drive's state machine: group commit (queued appends gathered into
//! one batch per write while earlier batches' writes and flushes are in flight, up to the
//! ring's window), acknowledgements in LSN order once a batch's flush (or dsync write)
//! succeeded, ring-full backpressure, and tail markers: a one-block batch carrying the current
//! watermark, written once the log has been idle for a while with acknowledged entries that no
//! durable watermark covers yet, and on clean close, in ring space data batches leave for it.
//! No batch is submitted that could end past the durable tail hint ([`super::hints`]).

use std::collections::VecDeque;
use std::time::Duration;

use sealog_wal::batch::{BatchBuilder, BatchStart, EncodedBatch};
use sealog_wal::format::ENTRY_HEADER_SIZE;
use sealog_wal::layout::BatchSlot;
use sealog_wal::{EncodeError, Position};

use super::buffers::Lane;
use super::cache::CachedEntry;
use super::core::DriveCore;
use super::index::{IndexedBatch, RecordSpan};
use super::inflight::{BatchPurpose, Inflight, OpState};
use super::op::Op;
use super::options::WhenFull;
use super::records::QueuedAppend;
use crate::error::{AppendError, DriveFailure, IoOperation};
use crate::io::{Completion, Durability, FlushOrder, IoBackend, WriteSync};

/// A batch encoded in its buffer and not yet on the device: where it goes and what it holds,
/// how many queued appends it carries (the oldest), and their payload bytes.
struct Encoded {
    batch: EncodedBatch,
    appends: usize,
    payload_bytes: u64,
}

/// Pushes queued appends into `builder` while they fit whole, oldest first: how many went in,
/// and their payload bytes. A group goes in whole or waits for the next batch (its records
/// share a batch, so recovery returns all of them or none). Every append was checked when it
/// was queued (a group is within the batch limit), so the batch filling up is the only reason
/// to stop.
fn push_queued(builder: &mut BatchBuilder<'_>, queue: &VecDeque<QueuedAppend>) -> (usize, u64) {
    let mut appends = 0usize;
    let mut payload_bytes = 0u64;
    for append in queue {
        if append.bytes_in_batch > u64::from(builder.free_bytes()) {
            break;
        }
        for record in append.records.as_slice() {
            let pushed = record.payload.with_parts(|parts| {
                builder.push_parts(record.kind, record.header, parts, record.payload_crc)
            });
            match pushed {
                Ok(_) => payload_bytes += record.payload.len() as u64,
                Err(error @ EncodeError::BatchFull { .. }) => {
                    unreachable!("the append's bytes were checked against the room: {error}")
                }
                Err(error) => unreachable!("appends are checked when queued: {error}"),
            }
        }
        appends += 1;
    }
    (appends, payload_bytes)
}

impl<B: IoBackend> DriveCore<B> {
    /// Starts data batches up to the window while appends are queued and worth a batch, then
    /// fails the appends whose wait for room is over.
    pub(super) fn start_batches(&mut self) {
        while !self.queue.is_empty()
            && !self.ring_full
            && self.inflight.len() < self.geometry.window_batches_max as usize
            && self.lanes.has_free(Lane::Batch)
            && self.batch_worth_starting()
            && self.failed.is_none()
        {
            if !self.start_batch(BatchPurpose::Data) {
                break;
            }
        }
        self.note_ring_full();
        self.expire_full_waits();
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
                self.queue.len() as u64 >= self.expected_group || self.clock.now() >= until
            }
        }
    }

    /// Whether appends are queued, nothing is in flight and the next batch is still gathering.
    pub(super) fn gathering(&self) -> bool {
        self.gather_until.is_some()
            && self.failed.is_none()
            && !self.ring_full
            && !self.queue.is_empty()
            && !self.is_busy()
            && !self.batch_worth_starting()
    }

    /// With the ring full: appends fail with [`AppendError::RingFull`] at once
    /// (`WhenFull::Fail`), or the oldest ones whose own wait ran out (`WhenFull::Wait`).
    fn expire_full_waits(&mut self) {
        if !self.ring_full {
            return;
        }
        let next_lsn = self.cursor.next_lsn;
        let now = self.clock.now();
        while let Some(oldest) = self.queue.front() {
            let expired = match self.when_full {
                WhenFull::Fail => true,
                WhenFull::Wait(timeout) => {
                    now.saturating_duration_since(oldest.queued_at) >= timeout
                }
            };
            if !expired {
                break;
            }
            let append = self.queue.pop_front().expect("the front exists");
            self.queued_bytes -= append.bytes_in_batch;
            self.settled_append_bytes += append.bytes_in_batch;
            append
                .completer
                .complete(Err(AppendError::RingFull { next_lsn }));
        }
        if self.queue.is_empty() {
            self.ring_full = false;
        }
    }

    /// A trim moved the head: space a data batch or the last tail marker found no room in may
    /// be free now, so appends waiting for room try again at once.
    pub(super) fn on_head_moved(&mut self) {
        self.tail_marker_refused = false;
        self.ring_full = false;
    }

    /// Whether some acknowledged entry is not yet covered by a durable watermark (nor by the
    /// trim point), with no batch in flight that will cover it and no data batch about to.
    pub(super) fn needs_tail_marker(&self) -> bool {
        self.failed.is_none()
            && !self.tail_marker_refused
            && self.inflight.is_empty()
            && (self.queue.is_empty() || self.ring_full)
            && self.lsn_durable > self.lsn_covered
    }

    /// Writes a tail marker if one is needed (see [`DriveCore::needs_tail_marker`]); returns
    /// whether one started.
    pub(super) fn start_tail_marker(&mut self) -> bool {
        if !self.needs_tail_marker() || !self.lanes.has_free(Lane::Batch) {
            return false;
        }
        // A marker waiting for its tail hint has started in the sense that matters: the hint
        // is on the device, and the marker follows it.
        self.start_batch(BatchPurpose::TailMarker) || self.waiting_for_hint()
    }

    /// Encodes a batch (queued appends, or none for a tail marker) into a batch buffer and
    /// submits its write (and flush). Returns false when nothing could start (ring full).
    fn start_batch(&mut self, purpose: BatchPurpose) -> bool {
        let Some(slot) = self.batch_slot(purpose) else {
            return false;
        };
        if !self.hint_allows(&slot) {
            return false;
        }
        let Some(buffer) = self.lanes.acquire(Lane::Batch) else {
            return false;
        };
        let watermark = self.lsn_durable;
        let Some(encoded) = self.encode_batch(purpose, &slot, buffer, watermark) else {
            // Not one record fits in what is left of this segment: move to the next one,
            // unless it still holds live entries (then the ring is full for now).
            self.lanes.release(Lane::Batch, buffer);
            return self.skip_to_next_segment();
        };
        if purpose == BatchPurpose::Data {
            self.hand_over_appends(encoded.appends);
        }
        self.submit_batch(purpose, &slot, buffer, encoded, watermark);
        self.refresh_hint();
        true
    }

    /// Where the next batch goes, or `None` when the ring has no room for it: a data batch
    /// then finds the ring full, a tail marker is refused (until a trim or an acknowledgement
    /// changes that). Data batches leave the block before a segment that cannot be entered yet
    /// for a marker, so a tail marker can always be written.
    fn batch_slot(&mut self, purpose: BatchPurpose) -> Option<BatchSlot> {
        let geometry = self.geometry;
        let head = self.control.head;
        let slot = match purpose {
            BatchPurpose::Data => self.cursor.data_slot(&geometry, head, self.incarnation),
            BatchPurpose::TailMarker => self.cursor.marker_slot(&geometry, head, self.incarnation),
        };
        if slot.is_err() {
            match purpose {
                BatchPurpose::Data => self.ring_full = true,
                BatchPurpose::TailMarker => self.tail_marker_refused = true,
            }
        }
        slot.ok()
    }

    /// Encodes the batch into `buffer`: the segment header in the block before it when the
    /// batch opens its segment, then the queued appends that fit, oldest first (none for a
    /// tail marker). `None` when a data batch has room for not one of them.
    fn encode_batch(
        &mut self,
        purpose: BatchPurpose,
        slot: &BatchSlot,
        buffer: usize,
        watermark: u64,
    ) -> Option<Encoded> {
        let geometry = self.geometry;
        let block = geometry.block_size_bytes as usize;
        let ring_id = self.control.ring_id;
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
        let bytes = self.backend.pool().buffer_mut(buffer);
        if let Some(header) = slot.segment_header {
            header.encode(ring_id, &mut bytes[..block]);
        }
        let mut builder = BatchBuilder::new(&mut bytes[block..], start);
        let (appends, payload_bytes) = match purpose {
            BatchPurpose::Data => push_queued(&mut builder, &self.queue),
            BatchPurpose::TailMarker => (0, 0),
        };
        if purpose == BatchPurpose::Data && appends == 0 {
            return None;
        }
        Some(Encoded {
            batch: builder.finish(),
            appends,
            payload_bytes,
        })
    }

    /// Moves the write cursor past the rest of its segment, which has no room for the next
    /// record. Returns false, the ring full for now, when the next segment still holds live
    /// entries.
    fn skip_to_next_segment(&mut self) -> bool {
        let geometry = self.geometry;
        if self
            .cursor
            .skip_for_data(&geometry, self.control.head)
            .is_err()
        {
            self.ring_full = true;
            return false;
        }
        true
    }

    /// The first `appends` queued appends are in the batch about to be submitted: the ring
    /// had room and nothing gathers any more, the device's idle gap and each append's handoff
    /// are recorded, lent payloads go back to their clients, and the tickets wait for the
    /// batch's acknowledgement.
    fn hand_over_appends(&mut self, appends: usize) {
        self.ring_full = false;
        self.gather_until = None;
        let now = self.clock.now();
        if let Some(since) = self.idle_since.take() {
            let idle_gap = now.saturating_duration_since(since);
            let _ = self
                .idle_gap_us
                .record((idle_gap.as_micros() as u64).max(1));
        }
        for append in self.queue.drain(..appends) {
            self.queued_bytes -= append.bytes_in_batch;
            self.settled_append_bytes += append.bytes_in_batch;
            let handoff = now.saturating_duration_since(append.queued_at);
            let _ = self
                .enqueue_to_submit_us
                .record((handoff.as_micros() as u64).max(1));
            let mut records = 0u64;
            for record in append.records.into_records() {
                // Checked when queued: a payload is within the ring's limit, a u32.
                let payload_len = u32::try_from(record.payload.len()).expect("within the limit");
                let kept = record.payload.copied().map(|payload| CachedEntry {
                    kind: record.kind,
                    header: record.header,
                    payload,
                });
                self.inflight_payloads.push_back((payload_len, kept));
                records += 1;
            }
            self.waiters.push_back((append.completer, records));
        }
    }

    /// Puts the encoded batch in flight and hands the device its write, with the flush linked
    /// behind it when the durability mode has one (the segment header's block, when there is
    /// one, is written with the batch). A backend that refuses either is broken.
    fn submit_batch(
        &mut self,
        purpose: BatchPurpose,
        slot: &BatchSlot,
        buffer: usize,
        encoded: Encoded,
        watermark: u64,
    ) {
        let geometry = self.geometry;
        let block = geometry.block_size_bytes;
        let batch = encoded.batch;
        let write_offset = slot.write_ring_offset(&geometry);
        let (write_len, buffer_offset) = match slot.segment_header {
            Some(_) => (batch.bytes + block, 0),
            None => (batch.bytes, block as usize),
        };
        let sequence = self.next_sequence();
        let has_flush = self.durability == Durability::Fdatasync;
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
            write: OpState::Pending,
            flush: has_flush.then_some(OpState::Pending),
            payload_bytes: encoded.payload_bytes,
            submitted: self.clock.now(),
        });
        self.cursor.advance(&geometry, batch.bytes, batch.records);
        self.lsn_appended = self.cursor.next_lsn - 1;
        let submitted = self.submit_write_and_flush(buffer_offset, write_len);
        if let Err(error) = submitted {
            // The backend could not take it: nothing it holds can be trusted to complete.
            self.device_broken(IoOperation::Submit, write_offset, &error);
        }
    }

    /// Submits the write of the batch just put in flight (from `buffer_offset` bytes into its
    /// buffer) and, when the durability mode has one, the flush linked behind it.
    fn submit_write_and_flush(&mut self, buffer_offset: usize, len: u32) -> std::io::Result<()> {
        let batch = self
            .inflight
            .back()
            .expect("the batch was just put in flight");
        let (sequence, buffer, ring_offset) = (batch.sequence, batch.buffer, batch.ring_offset);
        let has_flush = batch.flush.is_some();
        let sync = match self.durability {
            Durability::Dsync => WriteSync::Dsync,
            Durability::Fdatasync | Durability::NoSyncBenchmarkOnly => WriteSync::None,
        };
        let write = Op::BatchWrite { sequence }.tag();
        self.backend
            .submit_write(write, ring_offset, buffer, buffer_offset, len, sync)?;
        if has_flush {
            let flush = Op::BatchFlush { sequence }.tag();
            let order = FlushOrder::AfterPreviousWrite;
            self.backend.submit_flush(flush, ring_offset, order)?;
        }
        Ok(())
    }

    /// A batch's write or flush completed.
    pub(super) fn on_batch_completion(
        &mut self,
        sequence: u64,
        is_write: bool,
        completion: Completion,
    ) {
        let Some(position) = self
            .inflight
            .iter()
            .position(|batch| batch.sequence == sequence)
        else {
            // Only batches abandoned by a broken backend complete unknown.
            debug_assert!(self.failed.is_some(), "a completion for no batch in flight");
            return;
        };
        let state = match completion.result {
            Ok(_) => OpState::Done,
            Err(_) => OpState::Failed,
        };
        let batch = &mut self.inflight[position];
        let operation = if is_write {
            batch.write = state;
            IoOperation::Write
        } else {
            batch.flush = Some(state);
            IoOperation::Flush
        };
        if let Err(errno) = completion.result {
            let ring_offset = batch.ring_offset;
            self.fail(DriveFailure::io(operation, ring_offset, errno));
        }
        if self.failed.is_some() {
            // Nothing is acknowledged after a failure; a batch's buffer goes back once the
            // device is done with all of its operations.
            self.release_finished_batches();
            return;
        }
        self.lsn_written = self
            .inflight
            .iter()
            .take_while(|batch| batch.write == OpState::Done)
            .last()
            .map_or(self.lsn_written, |batch| batch.next_lsn - 1)
            .max(self.lsn_written);
        self.acknowledge();
    }

    /// After a failure: batches the device is done with give their buffers back.
    pub(super) fn release_finished_batches(&mut self) {
        let lanes = &mut self.lanes;
        self.inflight.retain(|batch| {
            if batch.finished() {
                lanes.release(Lane::Batch, batch.buffer);
            }
            !batch.finished()
        });
    }

    /// Acknowledges durable batches from the front, in LSN order.
    fn acknowledge(&mut self) {
        let mut acknowledged = 0u64;
        let mut data_batch_acknowledged = false;
        while self.inflight.front().is_some_and(Inflight::durable) {
            let batch = self.inflight.pop_front().expect("front");
            // The batch's watermark is on the device now.
            self.lsn_covered = self.lsn_covered.max(batch.watermark);
            if batch.purpose == BatchPurpose::TailMarker {
                self.lanes.release(Lane::Batch, batch.buffer);
                self.tail_markers += 1;
                continue;
            }
            data_batch_acknowledged = true;
            self.tail_marker_refused = false;
            // Readers find the batch cached and indexed, and the durable tail past it, before
            // any of its clients hears that it is durable: a client may read its entry at
            // once, and an entry the drive holds in memory is never read from the device.
            self.lanes.release(Lane::Batch, batch.buffer);
            self.index_batch(&batch);
            self.lsn_durable = batch.next_lsn - 1;
            self.view.publish_durable(self.lsn_durable);
            let records = batch.next_lsn - batch.first_lsn;
            self.on_batch_acknowledged(records, batch.payload_bytes, batch.submitted);
            // One ticket per append, a group's with its first LSN: every append lies whole
            // in one batch.
            let mut lsn = batch.first_lsn;
            while lsn < batch.next_lsn {
                let (completer, count) = self.waiters.pop_front().expect("a ticket per append");
                completer.complete(Ok(lsn));
                lsn += count;
                // The writers just answered, who come straight back in a closed loop.
                acknowledged += 1;
            }
            debug_assert_eq!(lsn, batch.next_lsn, "appends lie whole in a batch");
            self.appends += records;
            self.payload_bytes += batch.payload_bytes;
            self.batches += 1;
            let _ = self.batch_entries.record(records);
            let latency = self
                .clock
                .now()
                .saturating_duration_since(batch.submitted)
                .as_micros() as u64;
            let _ = self.sync_latency_us.record(latency.max(1));
        }
        if data_batch_acknowledged && self.inflight.is_empty() {
            let now = self.clock.now();
            self.idle_since = Some(now);
            if self.group_gather_us > 0 {
                self.expected_group = self.queue.len() as u64 + acknowledged;
                self.gather_until = now.checked_add(Duration::from_micros(self.group_gather_us));
            }
        }
    }

    /// Adds a durable data batch to the read index, with its entries' spans, and its entries'
    /// payloads (those the drive holds) to the recent-entry cache.
    fn index_batch(&mut self, batch: &Inflight) {
        let records = (batch.next_lsn - batch.first_lsn) as usize;
        let mut offset_in_batch = 0u32;
        let (mut spans, mut payloads) = std::mem::take(&mut self.batch_scratch);
        for (payload_len, kept) in self.inflight_payloads.drain(..records) {
            spans.push(RecordSpan {
                offset_in_batch,
                payload_len,
            });
            payloads.push(kept);
            offset_in_batch += ENTRY_HEADER_SIZE as u32 + payload_len;
        }
        self.view.cache.push(batch.first_lsn, payloads.drain(..));
        let mut index = self
            .view
            .index
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        index.push(
            IndexedBatch {
                position: batch.position,
                first_lsn: batch.first_lsn,
                next_lsn: batch.next_lsn,
                bytes: batch.bytes,
                incarnation: self.incarnation,
            },
            batch.first_lsn,
            spans.drain(..),
        );
        let record_bytes = index.record_bytes();
        drop(index);
        self.view.set_record_bytes(record_bytes);
        self.batch_scratch = (spans, payloads);
    }

    /// Where the oldest batch on the device starts: its position, first LSN and incarnation.
    pub(super) fn inflight_front(&self) -> Option<(Position, u64, u32)> {
        self.inflight
            .front()
            .map(|batch| (batch.position, batch.first_lsn, self.incarnation))
    }
}
