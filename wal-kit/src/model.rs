//! A reference writer over an in-memory ring: the writer's protocol (format, open with replay,
//! incarnation bump, invalidation of the dirty region, batches placed by [`WriteCursor`] and
//! kept within a durable tail hint, pipelined writes bounded by the in-flight window, flushes,
//! acknowledgements, trim) over the
//! simulated disk of [`crate::disk`] (durable bytes plus writes not yet covered by a flush). A
//! crash builds an image from the durable bytes and a caller-chosen fate for every block of
//! every pending write.
//!
//! It exists so that the format and replay can be tested against exactly the layout a writer
//! produces, with no I/O: the property tests, the example and the fuzz seeds use it. The engine
//! implements the same protocol on real devices; this module owns none of the engine's
//! concerns (threads, io_uring, buffers, errors of real I/O).

use std::collections::VecDeque;

use crate::disk::{FlushCover, SimDisk, WriteDurability};
use sealog_wal::batch::{BatchBuilder, BatchStart, EncodedBatch};
use sealog_wal::error::{EncodeError, ReplayError, RingFull};
use sealog_wal::format::{ControlBlock, Geometry, Kind, Position, RingId, TailHint};
use sealog_wal::layout::{BatchSlot, WriteCursor};
use sealog_wal::recovery::{self, Step};
use sealog_wal::replay::{replay_visiting, RecoveryReport, ReplayOptions, Visit};

/// What opening returns: the writer, replay's report, and every recovered entry (LSN, payload).
pub type Opened = (ModelWriter, RecoveryReport, Vec<(u64, Vec<u8>)>);

/// What becomes of one block of a pending (unflushed) write when the power fails: the
/// simulated disk's fates.
pub use crate::disk::{fill_garbage, BlockFate};

/// A write submitted but not yet covered by a completed flush.
#[derive(Clone, Debug)]
pub struct PendingWrite {
    /// Where it goes.
    pub ring_offset: u64,
    /// What it writes.
    pub bytes: Vec<u8>,
    /// The LSNs of the records in it (empty for a tail marker).
    pub lsns: std::ops::Range<u64>,
}

/// A batch this writer submitted: where it went and what it carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WrittenBatch {
    /// Where the batch starts.
    pub position: Position,
    /// Its ring offset (after the segment header block, when it has one).
    pub ring_offset: u64,
    /// Its length in bytes.
    pub bytes: u32,
    /// Its records' LSNs.
    pub lsns: std::ops::Range<u64>,
    /// The watermark its headers carry.
    pub watermark: u64,
    /// Ring offset and length of each record (header plus payload), in LSN order.
    pub records: Vec<(u64, u64)>,
}

/// Why the model writer refused an append.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The record cannot be encoded.
    #[error(transparent)]
    Encode(#[from] EncodeError),
    /// The ring is full. The records of this call placed before it are submitted and keep
    /// their LSNs (`submitted`); the rest were not.
    #[error("{ring_full} ({} records of this call were submitted first)", submitted.len())]
    RingFull {
        /// Why.
        ring_full: RingFull,
        /// LSNs given to the records submitted before the ring filled.
        submitted: Vec<u64>,
    },
}

/// Whether opening zeroes the region after the cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Invalidation {
    Apply,
    Skip,
}

/// Where replay starts: position, first LSN and incarnation of the head batch.
type Head = (Position, u64, u32);

/// A batch the writer put in the ring and has not released by trim.
#[derive(Clone, Copy, Debug)]
struct LiveBatch {
    position: Position,
    first_lsn: u64,
    next_lsn: u64,
    incarnation: u32,
}

/// The reference writer.
pub struct ModelWriter {
    geometry: Geometry,
    ring_id: RingId,
    /// The device: every write goes here; `pending` names the unflushed ones (same order).
    disk: SimDisk,
    pending: Vec<PendingWrite>,
    control: ControlBlock,
    cursor: WriteCursor,
    incarnation: u32,
    acked_lsn: u64,
    live: VecDeque<LiveBatch>,
    batch_buf: Vec<u8>,
    written: Vec<WrittenBatch>,
}

/// What replaying a ring for an open found: the report, every recovered entry (LSN,
/// payload), and the batches a trim's head is computed from.
type Replayed = (RecoveryReport, Vec<(u64, Vec<u8>)>, VecDeque<LiveBatch>);

/// Replays the ring on `disk` with `options`: the report, the entries, and the live batches.
fn replay_live(disk: &mut SimDisk, options: &ReplayOptions) -> Result<Replayed, ReplayError> {
    let mut entries = Vec::new();
    let mut live: VecDeque<LiveBatch> = VecDeque::new();
    let report = replay_visiting(disk, options, &mut |visited| {
        // What a trim's head is computed from: the batch boundary from which a replay
        // reaches each live LSN, a damaged one (quarantine mode) included, so a trim that
        // leaves damage keeps it where the next open finds it again.
        let (lsn, last_lsn, position, first_lsn, incarnation) = match visited {
            Visit::Entry(entry) => {
                entries.push((entry.lsn, entry.payload.to_vec()));
                let at = (entry.batch, entry.batch_first_lsn, entry.incarnation);
                (entry.lsn, entry.lsn, at.0, at.1, at.2)
            }
            Visit::Damaged(damaged) => (
                damaged.first_lsn,
                damaged.last_lsn,
                damaged.batch,
                damaged.batch_first_lsn,
                damaged.incarnation,
            ),
        };
        match live.back_mut() {
            Some(batch) if batch.position == position && batch.next_lsn == lsn => {
                batch.next_lsn = last_lsn + 1;
            }
            _ => live.push_back(LiveBatch {
                position,
                first_lsn,
                next_lsn: last_lsn + 1,
                incarnation,
            }),
        }
    })?;
    Ok((report, entries, live))
}

/// Carries out a recovery plan's `steps` on `disk`, each write then its flush (the zeroing
/// of the dirty region only where `invalidation` applies it).
fn carry_out(disk: &mut SimDisk, steps: &[Step], invalidation: Invalidation) {
    for step in steps {
        match step {
            Step::Flush { .. } => {
                disk.flush(FlushCover::All);
            }
            Step::Write {
                ring_offset, bytes, ..
            } => {
                disk.write(*ring_offset, bytes, WriteDurability::Volatile)
                    .expect("the plan writes inside the ring");
            }
            Step::Zero {
                ring_offset,
                len_bytes,
            } => {
                if invalidation == Invalidation::Apply {
                    let len = usize::try_from(*len_bytes).expect("a range inside the ring");
                    disk.write(*ring_offset, &vec![0u8; len], WriteDurability::Volatile)
                        .expect("the plan writes inside the ring");
                }
            }
        }
    }
}

/// Pushes records from the front of `payloads` into `builder` until the batch is full, with
/// each one's LSN in `lsns` and its ring offset and length (the batch starting at
/// `batch_ring_offset`) in `records`; returns how many it took.
fn push_records(
    builder: &mut BatchBuilder<'_>,
    payloads: &[&[u8]],
    batch_ring_offset: u64,
    lsns: &mut Vec<u64>,
    records: &mut Vec<(u64, u64)>,
) -> usize {
    let mut taken = 0;
    for payload in payloads {
        let record_offset = batch_ring_offset + u64::from(builder.used_bytes());
        match builder.push(Kind::Data, payload) {
            Ok(lsn) => {
                lsns.push(lsn);
                records.push((record_offset, BatchBuilder::record_bytes(payload.len())));
            }
            Err(EncodeError::BatchFull { .. }) => break,
            Err(error) => unreachable!("append checked every payload's length: {error}"),
        }
        taken += 1;
    }
    taken
}

/// Sector size used for [`BlockFate::PartlyNew`] tears.
pub const TEAR_SECTOR_BYTES: usize = crate::disk::SECTOR_BYTES;

impl ModelWriter {
    /// A freshly formatted ring's bytes: both control copies, everything else zero.
    pub fn format(geometry: Geometry, ring_id: RingId) -> Vec<u8> {
        geometry
            .validate()
            .expect("model rings use valid geometries");
        let size = geometry.ring_size_bytes().expect("validated");
        let mut image = vec![0u8; usize::try_from(size).expect("in-memory ring fits in memory")];
        let block = geometry.block_size_bytes as usize;
        for sequence in 0..2u64 {
            let control = ControlBlock {
                sequence,
                ..ControlBlock::new_ring(ring_id, geometry)
            };
            let at = (control.copy() as usize) * block;
            control.encode(&mut image[at..at + block]);
        }
        image
    }

    /// Opens a ring image for writing, as the engine does: replay (with `options`), then carry
    /// out the recovery plan ([`sealog_wal::recovery`]): flush, the control block with the new
    /// incarnation and the cut, the dirty region after the cut zeroed, a tail marker when live
    /// entries are not covered, each durable in turn; the cursor goes where the plan says.
    /// Returns the writer, the report and the recovered entries.
    pub fn open(image: Vec<u8>, options: &ReplayOptions) -> Result<Opened, ReplayError> {
        Self::open_with(image, options, Invalidation::Apply)
    }

    /// [`ModelWriter::open`] without zeroing the dirty region (the plan minus its zeroing
    /// steps): a deliberately incomplete writer, for tests that show the incarnation rule alone
    /// keeps stale records out.
    pub fn open_without_invalidation(
        image: Vec<u8>,
        options: &ReplayOptions,
    ) -> Result<Opened, ReplayError> {
        Self::open_with(image, options, Invalidation::Skip)
    }

    /// Opens as [`ModelWriter::open`] does, zeroing the dirty region or not.
    fn open_with(
        image: Vec<u8>,
        options: &ReplayOptions,
        invalidation: Invalidation,
    ) -> Result<Opened, ReplayError> {
        let mut disk = SimDisk::new(image);
        let (report, entries, live) = replay_live(&mut disk, options)?;
        let geometry = report.control.geometry;
        // The same protocol as the engine's: the plan, carried out step by step on the disk
        // (each write then its flush; a flush here covers every write completed before it).
        let plan = recovery::plan(&report)?;
        carry_out(&mut disk, &plan.steps, invalidation);
        debug_assert!(
            disk.unflushed().is_empty(),
            "every step's write was flushed"
        );
        let writer = ModelWriter {
            geometry,
            ring_id: plan.control.ring_id,
            disk,
            pending: Vec::new(),
            control: plan.control,
            cursor: plan.cursor,
            incarnation: plan.incarnation,
            acked_lsn: plan.lsn_durable,
            live,
            batch_buf: vec![0u8; geometry.batch_size_max_bytes as usize],
            written: Vec::new(),
        };
        Ok((writer, report, entries))
    }

    /// Makes a further tail hint durable when a batch in `slot` could end past the one in
    /// force: the protocol's rule that no batch ends past a durable hint. (The model's control
    /// writes are durable at once, so it never waits, where the engine writes ahead.)
    fn ensure_hint(&mut self, slot: &sealog_wal::layout::BatchSlot) {
        let in_force = self
            .control
            .tail_hint
            .normalized_limit(&self.geometry)
            .filter(|_| self.control.tail_hint.incarnation == self.incarnation);
        if in_force.is_some_and(|limit| slot.within_hint(limit)) {
            return;
        }
        let limit = self.cursor.hint_limit(&self.geometry);
        let limit = in_force.map_or(limit, |in_force| limit.max(in_force));
        debug_assert!(slot.within_hint(limit));
        let hint = TailHint {
            limit,
            incarnation: self.incarnation,
        };
        let control = self.control;
        self.write_control(
            control.trim_lsn,
            (control.head, control.head_lsn, control.head_incarnation),
            hint,
        );
    }

    fn write_control(
        &mut self,
        trim_lsn: u64,
        (head, head_lsn, head_incarnation): Head,
        tail_hint: TailHint,
    ) {
        // Replay refused any control block past the limit, and a model writes far fewer than
        // the 2^63 control blocks of headroom that leaves.
        let sequence = self
            .control
            .next_sequence()
            .expect("a model writes far fewer control blocks than the sequence's headroom");
        let control = ControlBlock {
            sequence,
            incarnation: self.incarnation,
            trim_lsn,
            head,
            head_lsn,
            head_incarnation,
            tail_hint,
            ..self.control
        };
        let mut block = vec![0u8; self.geometry.block_size_bytes as usize];
        control.encode(&mut block);
        // Written and flushed at once (a durable write): the model's pending batches stay
        // pending, as a device's would while a control write and its flush go by.
        self.disk
            .write(
                self.geometry.control_offset(control.copy()),
                &block,
                WriteDurability::Durable,
            )
            .expect("the control block is inside the ring");
        self.control = control;
    }

    /// The ring's geometry.
    pub fn geometry(&self) -> Geometry {
        self.geometry
    }

    /// The ring's identity.
    pub fn ring_id(&self) -> RingId {
        self.ring_id
    }

    /// The incarnation this writer writes with.
    pub fn incarnation(&self) -> u32 {
        self.incarnation
    }

    /// Highest acknowledged LSN.
    pub fn acked_lsn(&self) -> u64 {
        self.acked_lsn
    }

    /// The LSN the next record takes.
    pub fn next_lsn(&self) -> u64 {
        self.cursor.next_lsn
    }

    /// Every batch this writer submitted, in order.
    pub fn written(&self) -> &[WrittenBatch] {
        &self.written
    }

    /// Writes submitted and not yet flushed.
    pub fn pending(&self) -> &[PendingWrite] {
        &self.pending
    }

    /// The durable bytes (what survives a crash with every pending write lost).
    pub fn durable(&self) -> &[u8] {
        self.disk.durable()
    }

    /// The simulated disk under the writer.
    pub fn disk(&self) -> &SimDisk {
        &self.disk
    }

    /// Encodes the payloads into one or more batches and submits each as a pending write,
    /// flushing first whenever the in-flight window would overflow. Returns the LSNs given.
    /// A payload over the limit is refused before anything of this call is submitted.
    pub fn append(&mut self, payloads: &[&[u8]]) -> Result<Vec<u64>, ModelError> {
        let limit = self.geometry.payload_size_max_bytes();
        if let Some(payload) = payloads
            .iter()
            .find(|payload| payload.len() as u64 > u64::from(limit))
        {
            return Err(EncodeError::PayloadTooLarge {
                payload_len: payload.len() as u64,
                payload_size_max_bytes: limit,
            }
            .into());
        }
        let mut lsns = Vec::with_capacity(payloads.len());
        let mut rest = payloads;
        while !rest.is_empty() {
            match self.submit_batch(rest, &mut lsns) {
                Ok(taken) => rest = &rest[taken..],
                Err(ring_full) => {
                    return Err(ModelError::RingFull {
                        ring_full,
                        submitted: lsns,
                    });
                }
            }
        }
        Ok(lsns)
    }

    /// Submits a tail marker: a batch with no records that carries the current watermark.
    pub fn tail_marker(&mut self) -> Result<(), ModelError> {
        let mut lsns = Vec::new();
        self.submit_batch(&[], &mut lsns)
            .map(|_| ())
            .map_err(|ring_full| ModelError::RingFull {
                ring_full,
                submitted: Vec::new(),
            })
    }

    /// Builds and submits one batch from the front of `payloads`; returns how many it took.
    fn submit_batch(&mut self, payloads: &[&[u8]], lsns: &mut Vec<u64>) -> Result<usize, RingFull> {
        // Space is reused only past the durable trim point: the control block's head. Data
        // leaves the block before a segment it cannot enter yet for a tail marker, which may
        // take it.
        let head = self.control.head;
        let slot = if payloads.is_empty() {
            self.cursor
                .marker_slot(&self.geometry, head, self.incarnation)?
        } else {
            self.cursor
                .data_slot(&self.geometry, head, self.incarnation)?
        };
        self.keep_window(&slot);
        self.ensure_hint(&slot);
        let start = BatchStart {
            ring_id: self.ring_id,
            position: slot.position,
            first_lsn: self.cursor.next_lsn,
            watermark: self.acked_lsn,
            incarnation: self.incarnation,
            block_size_bytes: self.geometry.block_size_bytes,
            capacity_bytes: slot.capacity_bytes,
            payload_size_max_bytes: self.geometry.payload_size_max_bytes(),
        };
        let mut buf = std::mem::take(&mut self.batch_buf);
        let mut builder = BatchBuilder::new(&mut buf, start);
        let mut records = Vec::new();
        let batch_ring_offset = self.geometry.ring_offset(slot.position);
        let taken = push_records(
            &mut builder,
            payloads,
            batch_ring_offset,
            lsns,
            &mut records,
        );
        if taken == 0 && !payloads.is_empty() {
            // Not even one record fits in what is left of this segment: move to the next one,
            // or, while it cannot be entered, the ring is full.
            self.batch_buf = buf;
            self.cursor.skip_for_data(&self.geometry, head)?;
            return Ok(0);
        }
        let batch = builder.finish();
        self.write_batch(&slot, &batch, &buf, start.watermark, records);
        self.batch_buf = buf;
        if batch.records > 0 {
            self.live.push_back(LiveBatch {
                position: batch.position,
                first_lsn: batch.first_lsn,
                next_lsn: batch.next_lsn(),
                incarnation: self.incarnation,
            });
        }
        self.cursor
            .advance(&self.geometry, batch.bytes, batch.records);
        Ok(taken)
    }

    /// Keeps the window: waits (here: flushes) until a batch of the largest size `slot`
    /// allows fits in it.
    fn keep_window(&mut self, slot: &BatchSlot) {
        // Keep the window: wait (here: flush) until a batch of the largest size this slot
        // allows fits in it, then build the batch with the watermark that holds after.
        // The write carries the segment header block too, when there is one.
        let header_bytes = if slot.segment_header.is_some() {
            u64::from(self.geometry.block_size_bytes)
        } else {
            0
        };
        let pending_bytes: u64 = self
            .pending
            .iter()
            .map(|write| write.bytes.len() as u64)
            .sum();
        if self.pending.len() as u64 >= u64::from(self.geometry.window_batches_max)
            || pending_bytes + u64::from(slot.capacity_bytes) + header_bytes
                > self.geometry.window_bytes_max
        {
            self.flush();
        }
    }

    /// Writes `batch` (its bytes the front of `encoded`), behind the segment header block
    /// when `slot` has one, as a pending write, and records it among the batches written
    /// (with the `watermark` its headers carry and its `records`).
    fn write_batch(
        &mut self,
        slot: &BatchSlot,
        batch: &EncodedBatch,
        encoded: &[u8],
        watermark: u64,
        records: Vec<(u64, u64)>,
    ) {
        let block = self.geometry.block_size_bytes as usize;
        let mut bytes = Vec::with_capacity(block + batch.bytes as usize);
        if let Some(header) = slot.segment_header {
            let mut header_block = vec![0u8; block];
            header.encode(self.ring_id, &mut header_block);
            bytes.extend_from_slice(&header_block);
        }
        bytes.extend_from_slice(&encoded[..batch.bytes as usize]);
        let ring_offset = slot.write_ring_offset(&self.geometry);
        self.disk
            .write(ring_offset, &bytes, WriteDurability::Volatile)
            .expect("a batch is inside the ring");
        self.pending.push(PendingWrite {
            ring_offset,
            bytes,
            lsns: batch.first_lsn..batch.next_lsn(),
        });
        self.written.push(WrittenBatch {
            position: batch.position,
            ring_offset: self.geometry.ring_offset(slot.position),
            bytes: batch.bytes,
            lsns: batch.first_lsn..batch.next_lsn(),
            watermark,
            records,
        });
    }

    /// Completes every pending write and a flush after them: all of it is durable and
    /// acknowledged.
    pub fn flush(&mut self) {
        let covered = self.disk.flush(FlushCover::All);
        debug_assert_eq!(covered, self.pending.len());
        for write in self.pending.drain(..) {
            if write.lsns.end > write.lsns.start {
                self.acked_lsn = self.acked_lsn.max(write.lsns.end - 1);
            }
        }
    }

    /// Releases every entry with LSN at or below `lsn` (at most the acknowledged LSN) with a
    /// durable control block write, so the segments before the new head can be reused.
    pub fn trim(&mut self, lsn: u64) {
        assert!(
            lsn <= self.acked_lsn,
            "only acknowledged entries are trimmed"
        );
        while self
            .live
            .front()
            .is_some_and(|batch| batch.next_lsn <= lsn + 1)
        {
            self.live.pop_front();
        }
        let head = match self.live.front() {
            Some(batch) => (batch.position, batch.first_lsn, batch.incarnation),
            None => (self.cursor.position, self.cursor.next_lsn, self.incarnation),
        };
        let trim_lsn = lsn.max(self.control.trim_lsn);
        debug_assert!(head.1 <= trim_lsn + 1);
        let hint = self.control.tail_hint;
        self.write_control(trim_lsn, head, hint);
    }

    /// The image after a power cut now: the durable bytes, plus each block of each pending
    /// write as `fate(write index, block index)` decides.
    pub fn crash(&self, fate: &mut dyn FnMut(usize, usize) -> BlockFate) -> Vec<u8> {
        debug_assert_eq!(self.disk.unflushed().len(), self.pending.len());
        let block = self.geometry.block_size_bytes as usize;
        self.disk
            .crash(&[], block, &mut |unit| fate(unit.write, unit.unit))
    }
}

/// Small rings of several shapes (fresh, written, torn, wrapped with trims, reopened by a
/// second incarnation), a few tens of KiB each: seeds for the fuzz target and the stable
/// fuzz test, so mutation starts from rings that replay deeply.
pub fn sample_rings() -> Vec<Vec<u8>> {
    let geometry = Geometry {
        block_size_bytes: 4096,
        segment_size_bytes: 4 * 4096,
        segment_count: 3,
        batch_size_max_bytes: 2 * 4096,
        window_batches_max: 2,
        window_bytes_max: 4 * 4096,
    };
    let ring_id = RingId(*b"sealog-fuzz-seed");
    let options = ReplayOptions::default();
    let fresh = ModelWriter::format(geometry, ring_id);
    let mut rings = vec![fresh.clone()];
    let (mut writer, _, _) = ModelWriter::open(fresh, &options).expect("a new ring opens");
    let append = |writer: &mut ModelWriter, round: u64| {
        let sizes = [0usize, 17, 300, 1500, 5000];
        let payloads: Vec<Vec<u8>> = (0..=round % 3)
            .map(|index| vec![(round + index) as u8; sizes[((round + index) % 5) as usize]])
            .collect();
        let refs: Vec<&[u8]> = payloads.iter().map(Vec::as_slice).collect();
        if writer.append(&refs).is_err() {
            writer.flush();
            writer.trim(writer.acked_lsn());
            writer.append(&refs).expect("an emptied ring has room");
        }
    };
    for round in 0..4 {
        append(&mut writer, round);
    }
    writer.flush();
    rings.push(writer.durable().to_vec());
    append(&mut writer, 9);
    append(&mut writer, 10);
    rings.push(writer.crash(&mut |write, _| {
        if write == 0 {
            BlockFate::PartlyNew(3)
        } else {
            BlockFate::New
        }
    }));
    for round in 0..30 {
        append(&mut writer, round);
        writer.flush();
        writer.trim(writer.acked_lsn().saturating_sub(3));
    }
    writer.tail_marker().expect("room for a marker");
    writer.flush();
    rings.push(writer.durable().to_vec());
    let torn = writer.crash(&mut |_, _| BlockFate::Garbage(5));
    let (mut second, _, _) = ModelWriter::open(torn, &options).expect("reopens");
    append(&mut second, 3);
    rings.push(second.crash(&mut |_, _| BlockFate::New));
    rings
}
