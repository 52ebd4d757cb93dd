//! The simulated drive: an [`IoBackend`] over memory, deterministic from one seed. It owns the
//! device's side of things (the queue of submitted operations, their latency and completion
//! order, the fault draws, bad sectors, the power-cut switch) and keeps the bytes in wal's
//! [`SimDisk`], the one model of what a drive holds that the reference writer uses too: a
//! write is applied to the live bytes when it completes and becomes durable only when a flush
//! submitted after its completion completes (or at once with dsync); `crash()` builds the
//! durable bytes plus a seeded fate for every sector of every write that was not durable yet.
//! Faults are switchable, each with its own probability or scripted for one operation; with
//! [`FaultConfig::none`] the drive behaves exactly like a correct one. It is the engine's only
//! simulated device: the scenarios, the simulation runs and the crash-state enumeration all
//! run the real engine on it.

use std::collections::BTreeSet;
use std::io;
use std::sync::{Arc, Mutex};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sealog::io::{Completion, FlushOrder, IoBackend, Tag, Waker, WriteSync};
use sealog::pool::BufferPool;
use sealog_wal_kit::disk::{BlockFate, FlushCover, InFlightWrite, SimDisk, WriteDurability};

use crate::trace::{Event, Stored, Trace};

/// Sector size the simulation tears at (the disk's logical sector).
pub use sealog_wal_kit::disk::SECTOR_BYTES;

/// Probabilities of each fault, per operation (0.0 turns a fault off).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FaultConfig {
    /// On a crash, sectors of unflushed writes may come back as zeros, garbage or partly new
    /// (hostile), not only new or old (sector-atomic). Per crash.
    pub torn_writes: f64,
    /// The drive acknowledges a write and never stores it.
    pub lost_writes: f64,
    /// A write lands at another block, leaving its target unchanged.
    pub misdirected_writes: f64,
    /// A read returns another block's bytes.
    pub misdirected_reads: f64,
    /// A read makes one sector in its range unreadable (EIO) from then on.
    pub latent_sector_errors: f64,
    /// A write stores its data with one bit flipped.
    pub bit_flips: f64,
    /// A write fails with EIO (its sectors may hold anything).
    pub write_eio: f64,
    /// A flush fails with EIO (what it covered may or may not be durable).
    pub flush_eio: f64,
    /// A write stores a prefix of its sectors and then fails with EIO.
    pub short_writes: f64,
    /// Up to this many waits before an operation completes (reorders completions).
    pub latency_waits_max: u32,
    /// Fail exactly this write (1-based, counting every write the device completes) with
    /// EIO, storing nothing of it: a scripted fault for fail-stop scenarios.
    pub fail_write_number: Option<u64>,
    /// Fail exactly this flush (1-based) with EIO.
    pub fail_flush_number: Option<u64>,
}

impl FaultConfig {
    /// A correct drive: no faults, completions in any order.
    pub fn none() -> FaultConfig {
        FaultConfig {
            torn_writes: 0.0,
            lost_writes: 0.0,
            misdirected_writes: 0.0,
            misdirected_reads: 0.0,
            latent_sector_errors: 0.0,
            bit_flips: 0.0,
            write_eio: 0.0,
            flush_eio: 0.0,
            short_writes: 0.0,
            latency_waits_max: 3,
            fail_write_number: None,
            fail_flush_number: None,
        }
    }

    /// Every fault on, at rates drawn from `rng` (rare enough that runs make progress).
    pub fn all(rng: &mut ChaCha8Rng) -> FaultConfig {
        let mut rate = |max: f64| rng.gen_range(0.0..max);
        FaultConfig {
            torn_writes: 0.5 + rate(0.5),
            lost_writes: rate(0.01),
            misdirected_writes: rate(0.01),
            misdirected_reads: rate(0.005),
            latent_sector_errors: rate(0.005),
            bit_flips: rate(0.01),
            write_eio: rate(0.01),
            flush_eio: rate(0.01),
            short_writes: rate(0.01),
            latency_waits_max: 4,
            fail_write_number: None,
            fail_flush_number: None,
        }
    }

    /// Whether any fault can change stored data behind the engine's back (lost, misdirected,
    /// rotten or unreadable): then a drive can lose acknowledged entries, and the checks allow
    /// a corruption error instead.
    pub fn damages_data(&self) -> bool {
        self.lost_writes > 0.0
            || self.misdirected_writes > 0.0
            || self.misdirected_reads > 0.0
            || self.latent_sector_errors > 0.0
            || self.bit_flips > 0.0
    }
}

/// Counts of faults injected, for reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultCounts {
    /// Writes dropped, misdirected, bit-flipped, or reads misdirected / made unreadable.
    pub data_faults: u64,
    /// Writes and flushes failed with EIO (short writes included).
    pub io_errors: u64,
    /// Of the data faults, reads misdirected or made unreadable: reads the drive answered
    /// wrongly, which can hide from recovery what the ring really holds.
    pub read_faults: u64,
}

#[derive(Clone, Debug)]
enum OpKind {
    Write {
        offset: u64,
        data: Vec<u8>,
        sync: WriteSync,
    },
    Flush {
        after_write: Option<Tag>,
        started: bool,
        covers_up_to: u64,
    },
    Read {
        offset: u64,
        buffer: usize,
        len: usize,
    },
}

#[derive(Clone, Debug)]
struct Op {
    tag: Tag,
    kind: OpKind,
    ready_at: u64,
}

/// The simulated drive.
pub struct SimDevice {
    rng: ChaCha8Rng,
    config: FaultConfig,
    pool: BufferPool,
    /// The bytes: live, durable, and the writes not yet covered by a flush.
    disk: SimDisk,
    inflight: Vec<Op>,
    failed_writes: BTreeSet<Tag>,
    bad_sectors: BTreeSet<u64>,
    clock: u64,
    block_bytes: usize,
    /// Shared, so a harness can read them even after the device moved into a failed open.
    counts: Arc<Mutex<FaultCounts>>,
    /// Writes still stored before a simulated power cut, if one is set.
    power_left: Option<u64>,
    /// Writes and flushes completed, for the scripted faults.
    writes_completed: u64,
    flushes_completed: u64,
    /// Where the device leaves the image a power cut would leave when it is dropped (a drive
    /// thread owns the device; a test reopens the ring from this image afterwards).
    image_on_drop: Option<Arc<Mutex<Option<Vec<u8>>>>>,
    /// Bytes of every read submitted (whether it then failed or not): what an open cost.
    bytes_read: u64,
    /// Where the device records what it does, if anywhere ([`SimDevice::record_into`]).
    trace: Option<Arc<Trace>>,
    /// What the write being completed stored, for its trace event.
    stored_now: Option<Stored>,
}

impl SimDevice {
    /// A drive holding `image` (all durable), with `buffers` pool buffers of `buffer_bytes`.
    pub fn new(
        image: Vec<u8>,
        config: FaultConfig,
        seed: u64,
        buffers: usize,
        buffer_bytes: usize,
        block_bytes: usize,
    ) -> io::Result<SimDevice> {
        Ok(SimDevice {
            rng: ChaCha8Rng::seed_from_u64(seed),
            config,
            pool: BufferPool::new(buffers, buffer_bytes)?,
            disk: SimDisk::new(image),
            inflight: Vec::new(),
            failed_writes: BTreeSet::new(),
            bad_sectors: BTreeSet::new(),
            clock: 0,
            block_bytes,
            counts: Arc::default(),
            power_left: None,
            writes_completed: 0,
            flushes_completed: 0,
            image_on_drop: None,
            bytes_read: 0,
            trace: None,
            stored_now: None,
        })
    }

    /// A drive holding `image` (all durable) of a ring with `geometry`, with the buffer pool
    /// the engine's drive needs for it ([`sealog::drive::buffer_count`] buffers of
    /// [`sealog::drive::buffer_bytes`]).
    pub fn for_ring(
        image: Vec<u8>,
        geometry: &sealog_wal::Geometry,
        config: FaultConfig,
        seed: u64,
    ) -> io::Result<SimDevice> {
        SimDevice::new(
            image,
            config,
            seed,
            sealog::drive::buffer_count(geometry),
            sealog::drive::buffer_bytes(geometry),
            geometry.block_size_bytes as usize,
        )
    }

    /// When the device is dropped (with the drive that owns it), it puts the image a power cut
    /// at that moment leaves into `sink`: how a test gets the ring back from a drive thread.
    pub fn leave_image_on_drop(&mut self, sink: Arc<Mutex<Option<Vec<u8>>>>) {
        self.image_on_drop = Some(sink);
    }

    /// From now on the device records into `trace` every write it is handed, every write it
    /// completes (with what the medium got) and every flush that makes writes durable, in the
    /// order it applies them to its disk ([`crate::trace`]): a crash image for any point of
    /// the run can be rebuilt afterwards.
    pub fn record_into(&mut self, trace: Arc<Trace>) {
        self.trace = Some(trace);
    }

    /// Bytes of all the reads submitted to this device so far (reads ahead included): a
    /// recovery's cost, which a hinted replay bounds by the live data plus a margin.
    pub fn bytes_read(&self) -> u64 {
        self.bytes_read
    }

    /// Flushes completed so far (failed ones included).
    pub fn flushes(&self) -> u64 {
        self.flushes_completed
    }

    /// Faults injected so far.
    pub fn counts(&self) -> FaultCounts {
        *self.counts.lock().expect("counts lock")
    }

    /// The durable bytes now (what a power cut keeps for certain).
    pub fn durable(&self) -> &[u8] {
        self.disk.durable()
    }

    /// The disk's bytes and unflushed writes now (a snapshot a crash image can be built from
    /// later, with [`SimDisk::crash`] and the writes still in flight).
    pub fn disk(&self) -> &SimDisk {
        &self.disk
    }

    /// The writes on the device that have not completed: (ring offset, the bytes they write),
    /// in submission order.
    pub fn in_flight_writes(&self) -> Vec<(u64, Vec<u8>)> {
        self.inflight
            .iter()
            .filter_map(|op| match &op.kind {
                OpKind::Write { offset, data, .. } => Some((*offset, data.clone())),
                _ => None,
            })
            .collect()
    }

    /// Simulates a power cut after the next `writes` writes complete: later writes are never
    /// stored and later flushes make nothing durable (for crashes in the middle of recovery).
    pub fn lose_power_after_writes(&mut self, writes: u64) {
        self.power_left = Some(writes);
    }

    /// A handle on the fault counts that outlives the device.
    pub fn counts_handle(&self) -> Arc<Mutex<FaultCounts>> {
        Arc::clone(&self.counts)
    }

    fn count(&self, change: impl FnOnce(&mut FaultCounts)) {
        change(&mut self.counts.lock().expect("counts lock"));
    }

    /// The bytes a power cut leaves: the durable bytes, plus a seeded fate for every sector of
    /// every write not yet durable (completed or still in flight). The device then holds that
    /// image, with nothing in flight.
    pub fn crash(&mut self) -> Vec<u8> {
        let hostile = self.rng.gen_bool(self.config.torn_writes.clamp(0.0, 1.0));
        let inflight = self.in_flight_writes();
        let rng = &mut self.rng;
        let image = self
            .disk
            .crash(&in_flight_views(&inflight), SECTOR_BYTES, &mut |_| {
                drawn_fate(rng, hostile)
            });
        self.inflight.clear();
        self.disk = SimDisk::new(image.clone());
        image
    }

    fn chance(&mut self, probability: f64) -> bool {
        probability > 0.0 && self.rng.gen_bool(probability.clamp(0.0, 1.0))
    }

    fn latency(&mut self) -> u64 {
        let max = u64::from(self.config.latency_waits_max);
        self.clock + self.rng.gen_range(0..=max)
    }

    fn check_range(&self, offset: u64, len: usize) -> io::Result<()> {
        match offset.checked_add(len as u64) {
            Some(end) if end <= self.disk.size_bytes() => Ok(()),
            _ => Err(io::Error::from_raw_os_error(libc::EINVAL)),
        }
    }

    /// Hands a completed write to the disk: `stored` is what the medium got, `intended` what
    /// the write meant (what a crash's "new" fate lands).
    fn store(&mut self, offset: u64, stored: &[u8], intended: &[u8], sync: WriteSync) {
        let durability = match sync {
            WriteSync::Dsync => WriteDurability::Durable,
            WriteSync::None => WriteDurability::Volatile,
        };
        if self.trace.is_some() {
            let stored_bytes = Arc::new(stored.to_vec());
            let intended_bytes = if stored == intended {
                Arc::clone(&stored_bytes)
            } else {
                Arc::new(intended.to_vec())
            };
            self.stored_now = Some(Stored {
                ring_offset: offset,
                stored: stored_bytes,
                intended: intended_bytes,
                durable: durability == WriteDurability::Durable,
            });
        }
        self.disk
            .write_stored(offset, stored, intended, durability)
            .expect("writes are checked against the disk when submitted");
    }

    /// Completes a write: a scripted failure, a power cut that stores nothing, or one of the
    /// drawn faults (each drawn in turn, only where its probability is on), else stored whole.
    fn complete_write(
        &mut self,
        tag: Tag,
        offset: u64,
        data: Vec<u8>,
        sync: WriteSync,
    ) -> Completion {
        let len = data.len();
        self.writes_completed += 1;
        if self.config.fail_write_number == Some(self.writes_completed) {
            self.count(|counts| counts.io_errors += 1);
            self.failed_writes.insert(tag);
            return Completion {
                tag,
                result: Err(libc::EIO),
            };
        }
        match &mut self.power_left {
            Some(0) => {
                return Completion {
                    tag,
                    result: Ok(len as u32),
                }
            }
            Some(left) => *left -= 1,
            None => {}
        }
        if self.chance(self.config.write_eio) {
            return self.write_eio(tag, offset, &data);
        }
        if self.chance(self.config.short_writes) {
            return self.short_write(tag, offset, &data);
        }
        if self.chance(self.config.lost_writes) {
            self.count(|counts| counts.data_faults += 1);
            return Completion {
                tag,
                result: Ok(len as u32),
            };
        }
        if self.chance(self.config.misdirected_writes) {
            return self.misdirected_write(tag, &data, sync);
        }
        let mut stored = data.clone();
        if self.chance(self.config.bit_flips) {
            self.count(|counts| counts.data_faults += 1);
            let bit = self.rng.gen_range(0..len * 8);
            stored[bit / 8] ^= 1 << (bit % 8);
        }
        self.store(offset, &stored, &data, sync);
        Completion {
            tag,
            result: Ok(len as u32),
        }
    }

    /// A write that fails with EIO: its sectors from a drawn one on hold garbage.
    fn write_eio(&mut self, tag: Tag, offset: u64, data: &[u8]) -> Completion {
        let len = data.len();
        self.count(|counts| counts.io_errors += 1);
        let mut garbage = data.to_vec();
        let cut = self.rng.gen_range(0..=len / SECTOR_BYTES) * SECTOR_BYTES;
        self.rng.fill(&mut garbage[cut..]);
        self.store(offset, &garbage, data, WriteSync::None);
        self.failed_writes.insert(tag);
        Completion {
            tag,
            result: Err(libc::EIO),
        }
    }

    /// A short write: a drawn prefix of its sectors is stored, then it fails with EIO.
    fn short_write(&mut self, tag: Tag, offset: u64, data: &[u8]) -> Completion {
        let len = data.len();
        self.count(|counts| counts.io_errors += 1);
        let sectors = self.rng.gen_range(0..len / SECTOR_BYTES);
        let prefix = sectors * SECTOR_BYTES;
        let mut stored = vec![0u8; len];
        self.disk
            .read(offset, &mut stored)
            .expect("writes are checked against the disk when submitted");
        stored[..prefix].copy_from_slice(&data[..prefix]);
        self.store(offset, &stored, data, WriteSync::None);
        self.failed_writes.insert(tag);
        Completion {
            tag,
            result: Err(libc::EIO),
        }
    }

    /// A misdirected write: it lands whole at a drawn block, its target left unchanged.
    fn misdirected_write(&mut self, tag: Tag, data: &[u8], sync: WriteSync) -> Completion {
        let len = data.len();
        self.count(|counts| counts.data_faults += 1);
        let blocks = (self.disk.size_bytes() as usize - len) / self.block_bytes;
        let elsewhere = (self.rng.gen_range(0..=blocks) * self.block_bytes) as u64;
        self.store(elsewhere, data, data, sync);
        Completion {
            tag,
            result: Ok(len as u32),
        }
    }

    fn complete_flush(&mut self, tag: Tag, covers_up_to: u64) -> Completion {
        self.flushes_completed += 1;
        if self.config.fail_flush_number == Some(self.flushes_completed) {
            self.count(|counts| counts.io_errors += 1);
            return Completion {
                tag,
                result: Err(libc::EIO),
            };
        }
        if self.power_left == Some(0) {
            return Completion { tag, result: Ok(0) };
        }
        if self.chance(self.config.flush_eio) {
            // What the flush covered may or may not be durable: it stays unflushed, so a crash
            // decides its fate.
            self.count(|counts| counts.io_errors += 1);
            return Completion {
                tag,
                result: Err(libc::EIO),
            };
        }
        self.disk.flush(FlushCover::Through(covers_up_to));
        if let Some(trace) = &self.trace {
            trace.push(Event::Flushed {
                through: covers_up_to,
            });
        }
        Completion { tag, result: Ok(0) }
    }

    fn complete_read(&mut self, tag: Tag, offset: u64, buffer: usize, len: usize) -> Completion {
        if self.chance(self.config.latent_sector_errors) {
            self.count(|counts| counts.data_faults += 1);
            self.count(|counts| counts.read_faults += 1);
            let sector = (offset + self.rng.gen_range(0..len as u64)) / SECTOR_BYTES as u64;
            self.bad_sectors.insert(sector);
        }
        let first = offset / SECTOR_BYTES as u64;
        let last = (offset + len as u64 - 1) / SECTOR_BYTES as u64;
        if self.bad_sectors.range(first..=last).next().is_some() {
            return Completion {
                tag,
                result: Err(libc::EIO),
            };
        }
        let source = if self.chance(self.config.misdirected_reads) {
            self.count(|counts| counts.data_faults += 1);
            self.count(|counts| counts.read_faults += 1);
            let blocks = (self.disk.size_bytes() as usize - len) / self.block_bytes;
            (self.rng.gen_range(0..=blocks) * self.block_bytes) as u64
        } else {
            offset
        };
        self.disk
            .read(source, &mut self.pool.buffer_mut(buffer)[..len])
            .expect("reads are checked against the disk when submitted");
        Completion {
            tag,
            result: Ok(len as u32),
        }
    }

    /// Completes the op at `index` of the in-flight list.
    fn complete(&mut self, index: usize) -> Completion {
        let op = self.inflight.remove(index);
        match op.kind {
            OpKind::Write { offset, data, sync } => {
                self.stored_now = None;
                let completion = self.complete_write(op.tag, offset, data, sync);
                if let Some(trace) = &self.trace {
                    trace.push(Event::Completed {
                        tag: op.tag,
                        stored: self.stored_now.take(),
                    });
                }
                completion
            }
            OpKind::Flush { covers_up_to, .. } => self.complete_flush(op.tag, covers_up_to),
            OpKind::Read {
                offset,
                buffer,
                len,
            } => self.complete_read(op.tag, offset, buffer, len),
        }
    }

    /// Linked flushes whose write has completed start now: they cover what completed so far;
    /// those whose write failed are cancelled.
    fn start_linked_flushes(&mut self, out: &mut Vec<Completion>) {
        let inflight_writes: BTreeSet<Tag> = self
            .inflight
            .iter()
            .filter(|op| matches!(op.kind, OpKind::Write { .. }))
            .map(|op| op.tag)
            .collect();
        let mut cancelled = Vec::new();
        for (index, op) in self.inflight.iter_mut().enumerate() {
            if let OpKind::Flush {
                after_write: Some(write),
                started,
                covers_up_to,
            } = &mut op.kind
            {
                if *started || inflight_writes.contains(write) {
                    continue;
                }
                if self.failed_writes.contains(write) {
                    cancelled.push(index);
                    continue;
                }
                *started = true;
                *covers_up_to = self.disk.completed_writes();
            }
        }
        for index in cancelled.into_iter().rev() {
            let op = self.inflight.remove(index);
            out.push(Completion {
                tag: op.tag,
                result: Err(libc::ECANCELED),
            });
        }
    }

    fn is_ready(&self, op: &Op) -> bool {
        match &op.kind {
            OpKind::Flush {
                after_write: Some(_),
                started,
                ..
            } => *started && op.ready_at <= self.clock,
            _ => op.ready_at <= self.clock,
        }
    }
}

impl Drop for SimDevice {
    fn drop(&mut self) {
        if let Some(sink) = self.image_on_drop.take() {
            let image = self.crash();
            *sink.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(image);
        }
    }
}

impl IoBackend for SimDevice {
    fn pool(&mut self) -> &mut BufferPool {
        &mut self.pool
    }

    fn size_bytes(&self) -> u64 {
        self.disk.size_bytes()
    }

    fn submit_write(
        &mut self,
        tag: Tag,
        ring_offset: u64,
        buffer: usize,
        buffer_offset: usize,
        len: u32,
        sync: WriteSync,
    ) -> io::Result<()> {
        self.check_range(ring_offset, len as usize)?;
        let data = self.pool.buffer(buffer)[buffer_offset..buffer_offset + len as usize].to_vec();
        // Two writes in flight to the same bytes would be an engine bug.
        for op in &self.inflight {
            if let OpKind::Write {
                offset,
                data: other,
                ..
            } = &op.kind
            {
                let overlaps = ring_offset < offset + other.len() as u64
                    && *offset < ring_offset + u64::from(len);
                assert!(
                    !overlaps,
                    "overlapping writes in flight at ring offset {ring_offset}"
                );
            }
        }
        let ready_at = self.latency();
        if let Some(trace) = &self.trace {
            trace.push(Event::Submitted {
                tag,
                ring_offset,
                bytes: Arc::new(data.clone()),
            });
        }
        self.inflight.push(Op {
            tag,
            kind: OpKind::Write {
                offset: ring_offset,
                data,
                sync,
            },
            ready_at,
        });
        Ok(())
    }

    /// One device: a flush covers every write completed before it, wherever it lies.
    fn flush_unit(&self, _ring_offset: u64) -> u64 {
        0
    }

    fn submit_flush(&mut self, tag: Tag, _ring_offset: u64, order: FlushOrder) -> io::Result<()> {
        let after_write = match order {
            FlushOrder::AfterPreviousWrite => self
                .inflight
                .iter()
                .rev()
                .find(|op| matches!(op.kind, OpKind::Write { .. }))
                .map(|op| op.tag),
            FlushOrder::Independent => None,
        };
        // An independent flush covers only what completed before it was submitted.
        let started = after_write.is_none();
        let ready_at = self.latency();
        self.inflight.push(Op {
            tag,
            kind: OpKind::Flush {
                after_write,
                started,
                covers_up_to: self.disk.completed_writes(),
            },
            ready_at,
        });
        Ok(())
    }

    fn submit_read(
        &mut self,
        tag: Tag,
        ring_offset: u64,
        buffer: usize,
        len: u32,
    ) -> io::Result<()> {
        self.check_range(ring_offset, len as usize)?;
        self.bytes_read += u64::from(len);
        let ready_at = self.latency();
        self.inflight.push(Op {
            tag,
            kind: OpKind::Read {
                offset: ring_offset,
                buffer,
                len: len as usize,
            },
            ready_at,
        });
        Ok(())
    }

    fn wait(&mut self, min_complete: usize, out: &mut Vec<Completion>) -> io::Result<()> {
        self.clock += 1;
        let before = out.len();
        loop {
            self.start_linked_flushes(out);
            let ready: Vec<usize> = (0..self.inflight.len())
                .filter(|&index| self.is_ready(&self.inflight[index]))
                .collect();
            if ready.is_empty() {
                if out.len() - before >= min_complete || self.inflight.is_empty() {
                    return Ok(());
                }
                // Nothing ready yet but the caller waits: time passes.
                self.clock += 1;
                continue;
            }
            // Complete one ready op at random, then look again (a completion can start a
            // linked flush).
            let pick = ready[self.rng.gen_range(0..ready.len())];
            let completion = self.complete(pick);
            out.push(completion);
        }
    }

    fn waker(&self) -> Waker {
        Arc::new(|| {})
    }
}

/// The writes not yet durable (ring offset and bytes) as [`SimDisk::crash`] takes them.
pub fn in_flight_views(writes: &[(u64, Vec<u8>)]) -> Vec<InFlightWrite<'_>> {
    writes
        .iter()
        .map(|(ring_offset, bytes)| InFlightWrite {
            ring_offset: *ring_offset,
            bytes,
        })
        .collect()
}

/// A seeded fate for one sector of a write not yet durable at a power cut: landed whole or
/// not at all, and in a hostile crash also zeros, garbage or torn within the sector.
pub fn drawn_fate(rng: &mut impl Rng, hostile: bool) -> BlockFate {
    let choice = if hostile {
        rng.gen_range(0..5)
    } else {
        rng.gen_range(0..2)
    };
    match choice {
        0 => BlockFate::New,
        1 => BlockFate::Old,
        2 => BlockFate::Zero,
        3 => BlockFate::Garbage(rng.gen()),
        _ => BlockFate::TornAt {
            new_bytes: rng.gen_range(0..SECTOR_BYTES as u32),
            seed: rng.gen(),
        },
    }
}
