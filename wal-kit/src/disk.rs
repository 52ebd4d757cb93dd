//! A simulated disk in memory: the one model of what a drive holds, shared by the reference
//! writer ([`crate::model`]) and, wrapped, by the fault-injection crate's simulated device. It
//! owns the bytes and the durability rules, nothing else: no queue of submitted operations, no
//! latency, no fault choice (those are the device's that wraps it).
//!
//! Three states of the bytes:
//! - **live**: what reads see. Every completed write lands here at once.
//! - **durable**: what a power cut keeps for certain. A write reaches it when it completes, if
//!   it was a durable write (RWF_DSYNC, which becomes FUA), or when a flush covers it.
//! - **unflushed**: the writes that completed as plain writes and are not yet covered by a
//!   flush, in completion order, each with its completion sequence number. A flush covers
//!   exactly the writes completed before it was submitted: the device notes
//!   [`SimDisk::completed_writes`] when the flush is submitted and hands it to
//!   [`SimDisk::flush`] as [`FlushCover::Through`] when the flush completes, so a write that
//!   completes in between stays unflushed (I-9).
//!
//! A crash ([`SimDisk::crash`]) builds the image a power cut leaves: the durable bytes, then
//! for every write not yet durable (the unflushed ones, in completion order, then those the
//! caller says are still in flight, in its order) a fate chosen by the caller for each unit of
//! the write (a block, or a 512-byte sector): new, old, zeros, garbage from a seed, or partly
//! new. Fates are data, so a seeded caller replays a crash exactly.
//!
//! Precision: durability is tracked per 512-byte sector. A durable write supersedes, sector by
//! sector, every earlier write still unflushed there (the drive's cache can no longer land the
//! older bytes over it), so a later flush or crash never puts older bytes back.
//!
//! # Wrapping it in a simulated device
//!
//! The fault-injection crate's `SimDevice` keeps its queue, latency, fault draws, bad sectors
//! and power-cut switch, and hands the bytes to a `SimDisk`:
//! - a completed write: [`SimDisk::write_stored`] with the bytes the medium got (`stored`:
//!   garbage for a failed write, a short write's prefix over the old bytes, a flipped bit) and
//!   the bytes the write meant (`intended`, what a crash's [`BlockFate::New`] lands), plain or
//!   durable; a misdirected write is the same call at the other offset; a lost write is no call;
//! - a flush: note [`SimDisk::completed_writes`] at submission, then [`SimDisk::flush`] with
//!   [`FlushCover::Through`] that sequence at completion (a failed flush: no call; what it
//!   covered stays unflushed, so a crash decides its fate);
//! - a read: [`SimDisk::read`] (or [`SimDisk::live`]) unless the device fails or misdirects it;
//! - `pending_writes()`: [`SimDisk::unflushed`] (offset, `intended`) then the device's own
//!   in-flight writes;
//! - a crash: [`SimDisk::crash`] with the in-flight writes, [`SECTOR_BYTES`] units, and a fate
//!   per unit drawn from the device's seed (a seed for [`BlockFate::Garbage`] and
//!   [`BlockFate::TornAt`] rather than bytes filled from the device's generator).
//!
//! One difference from the device as it was: a flush makes durable the bytes each covered write
//! stored, not whatever the live range holds when the flush completes (which let a write the
//! flush did not cover become durable with it).

use std::io;

/// The unit of durability and of the finest crash fates: a 512-byte sector.
pub const SECTOR_BYTES: usize = 512;

/// How durable a write is when it completes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteDurability {
    /// A plain write: in the drive's volatile cache until a flush covers it.
    Volatile,
    /// RWF_DSYNC (FUA where the drive supports it): durable when it completes.
    Durable,
}

/// Which completed writes a flush covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlushCover {
    /// The writes completed up to and including this sequence: [`SimDisk::completed_writes`]
    /// when the flush was submitted.
    Through(u64),
    /// Every write completed so far (a flush submitted and completed with nothing between).
    All,
}

/// What becomes of one unit (a block or a sector) of a write not yet durable when the power
/// fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockFate {
    /// The new bytes reached the media.
    New,
    /// The old bytes stayed.
    Old,
    /// The unit reads back as zeros.
    Zero,
    /// The unit reads back as garbage (derived from the seed).
    Garbage(u64),
    /// The first `n` sectors (512 bytes each) of the unit are new, the rest old.
    PartlyNew(u32),
    /// The first `new_bytes` bytes of the unit are new, the rest garbage from `seed` (a write
    /// torn inside a sector).
    TornAt {
        /// Bytes of the unit that are new.
        new_bytes: u32,
        /// Seed of the garbage after them.
        seed: u64,
    },
}

/// Why the disk refused an operation (a caller's bug: the device checks its ranges first).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DiskError {
    /// The range runs past the disk's end.
    #[error("{len_bytes} bytes at offset {ring_offset} run past the disk's {size_bytes} bytes")]
    OutOfRange {
        /// Where the range starts.
        ring_offset: u64,
        /// Its length.
        len_bytes: u64,
        /// The disk's size.
        size_bytes: u64,
    },
    /// A write that does not start and end on a 512-byte sector.
    #[error("a write of {len_bytes} bytes at offset {ring_offset} is not whole sectors")]
    Unaligned {
        /// Where the write starts.
        ring_offset: u64,
        /// Its length.
        len_bytes: u64,
    },
    /// A write whose stored and intended bytes differ in length.
    #[error("a write stored {stored_bytes} bytes but meant {intended_bytes}")]
    LengthMismatch {
        /// Bytes stored.
        stored_bytes: u64,
        /// Bytes meant.
        intended_bytes: u64,
    },
}

/// A write that completed as a plain write and is not yet covered by a flush.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnflushedWrite {
    /// Its completion sequence number (from 1).
    pub sequence: u64,
    /// Where it went.
    pub ring_offset: u64,
    /// What the medium holds (what reads see, and what a flush makes durable).
    pub stored: Vec<u8>,
    /// What the write meant to store (what a crash's [`BlockFate::New`] lands).
    pub intended: Vec<u8>,
}

/// A write the caller submitted that had not completed when the power failed.
#[derive(Clone, Copy, Debug)]
pub struct InFlightWrite<'a> {
    /// Where it was going.
    pub ring_offset: u64,
    /// What it was writing.
    pub bytes: &'a [u8],
}

/// One unit of a write not yet durable, whose fate a crash asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CrashUnit {
    /// The write: its index among the unflushed writes (completion order), then among the
    /// in-flight ones (after all the unflushed, in the order given).
    pub write: usize,
    /// The unit's index within the write.
    pub unit: usize,
    /// The unit's offset on the disk.
    pub ring_offset: u64,
    /// Whether the write was still in flight.
    pub in_flight: bool,
}

/// The simulated disk.
#[derive(Clone, Debug)]
pub struct SimDisk {
    live: Vec<u8>,
    durable: Vec<u8>,
    /// For each sector, the completion sequence of the write whose bytes `durable` holds
    /// there (0: the initial image).
    durable_sequence: Vec<u64>,
    unflushed: Vec<UnflushedWrite>,
    completed: u64,
}

impl SimDisk {
    /// A disk holding `image`, all of it durable.
    pub fn new(image: Vec<u8>) -> SimDisk {
        let sectors = image.len().div_ceil(SECTOR_BYTES);
        SimDisk {
            live: image.clone(),
            durable: image,
            durable_sequence: vec![0; sectors],
            unflushed: Vec::new(),
            completed: 0,
        }
    }

    /// The disk's size in bytes.
    pub fn size_bytes(&self) -> u64 {
        self.live.len() as u64
    }

    /// What reads see now.
    pub fn live(&self) -> &[u8] {
        &self.live
    }

    /// What a power cut keeps for certain.
    pub fn durable(&self) -> &[u8] {
        &self.durable
    }

    /// The completed plain writes no flush has covered yet, in completion order.
    pub fn unflushed(&self) -> &[UnflushedWrite] {
        &self.unflushed
    }

    /// The sequence of the last completed write (0 before any): a flush submitted now covers
    /// the writes up to it.
    pub fn completed_writes(&self) -> u64 {
        self.completed
    }

    fn range(&self, ring_offset: u64, len: usize) -> Result<std::ops::Range<usize>, DiskError> {
        let out_of_range = || DiskError::OutOfRange {
            ring_offset,
            len_bytes: len as u64,
            size_bytes: self.size_bytes(),
        };
        let start = usize::try_from(ring_offset).map_err(|_| out_of_range())?;
        let end = start.checked_add(len).ok_or_else(out_of_range)?;
        if end > self.live.len() {
            return Err(out_of_range());
        }
        Ok(start..end)
    }

    /// Completes a write of `bytes` at `ring_offset` (whole sectors) and returns its sequence.
    pub fn write(
        &mut self,
        ring_offset: u64,
        bytes: &[u8],
        durability: WriteDurability,
    ) -> Result<u64, DiskError> {
        self.write_stored(ring_offset, bytes, bytes, durability)
    }

    /// Completes a write whose medium got `stored` though it meant `intended` (a fault the
    /// device chose), and returns its sequence.
    pub fn write_stored(
        &mut self,
        ring_offset: u64,
        stored: &[u8],
        intended: &[u8],
        durability: WriteDurability,
    ) -> Result<u64, DiskError> {
        if stored.len() != intended.len() {
            return Err(DiskError::LengthMismatch {
                stored_bytes: stored.len() as u64,
                intended_bytes: intended.len() as u64,
            });
        }
        let range = self.range(ring_offset, stored.len())?;
        if range.start % SECTOR_BYTES != 0 || stored.len() % SECTOR_BYTES != 0 {
            return Err(DiskError::Unaligned {
                ring_offset,
                len_bytes: stored.len() as u64,
            });
        }
        self.completed += 1;
        let sequence = self.completed;
        self.live[range.clone()].copy_from_slice(stored);
        match durability {
            WriteDurability::Durable => {
                self.durable[range.clone()].copy_from_slice(stored);
                let sectors = range.start / SECTOR_BYTES..range.end / SECTOR_BYTES;
                self.durable_sequence[sectors].fill(sequence);
            }
            WriteDurability::Volatile => self.unflushed.push(UnflushedWrite {
                sequence,
                ring_offset,
                stored: stored.to_vec(),
                intended: intended.to_vec(),
            }),
        }
        Ok(sequence)
    }

    /// Completes a flush: every unflushed write it covers becomes durable (sector by sector,
    /// unless a later durable write holds the sector already). Returns how many writes it
    /// made durable.
    pub fn flush(&mut self, cover: FlushCover) -> usize {
        let through = match cover {
            FlushCover::Through(sequence) => sequence,
            FlushCover::All => self.completed,
        };
        let (covered, rest): (Vec<UnflushedWrite>, Vec<UnflushedWrite>) = self
            .unflushed
            .drain(..)
            .partition(|write| write.sequence <= through);
        self.unflushed = rest;
        for write in &covered {
            let start = write.ring_offset as usize;
            for (index, sector) in write.stored.chunks(SECTOR_BYTES).enumerate() {
                let number = start / SECTOR_BYTES + index;
                if self.durable_sequence[number] < write.sequence {
                    let at = number * SECTOR_BYTES;
                    self.durable[at..at + sector.len()].copy_from_slice(sector);
                    self.durable_sequence[number] = write.sequence;
                }
            }
        }
        covered.len()
    }

    /// Reads live bytes.
    pub fn read(&self, ring_offset: u64, buf: &mut [u8]) -> Result<(), DiskError> {
        let range = self.range(ring_offset, buf.len())?;
        buf.copy_from_slice(&self.live[range]);
        Ok(())
    }

    /// The image a power cut leaves now: the durable bytes, then, for each unit of
    /// `unit_bytes` (a multiple of [`SECTOR_BYTES`]) of each write not yet durable (the
    /// unflushed ones in completion order, then `in_flight` in its order), what `fate` decides.
    /// "Old" is whatever the image holds there by then. A sector a later durable write holds
    /// keeps it, whatever the fate. `fate` is asked once for every unit, in that order.
    pub fn crash(
        &self,
        in_flight: &[InFlightWrite<'_>],
        unit_bytes: usize,
        fate: &mut dyn FnMut(CrashUnit) -> BlockFate,
    ) -> Vec<u8> {
        assert!(unit_bytes > 0 && unit_bytes % SECTOR_BYTES == 0);
        let mut image = self.durable.clone();
        let unflushed = self.unflushed.iter().map(|write| {
            let bytes: &[u8] = &write.intended;
            (write.ring_offset, bytes, write.sequence, false)
        });
        // A write still in flight completes after everything that did: nothing supersedes it.
        let in_flight = in_flight
            .iter()
            .map(|write| (write.ring_offset, write.bytes, u64::MAX, true));
        for (index, (ring_offset, bytes, sequence, flying)) in
            unflushed.chain(in_flight).enumerate()
        {
            let start = ring_offset as usize;
            assert!(
                start + bytes.len() <= image.len(),
                "a write within the disk"
            );
            for (unit, new) in bytes.chunks(unit_bytes).enumerate() {
                let at = start + unit * unit_bytes;
                let chosen = fate(CrashUnit {
                    write: index,
                    unit,
                    ring_offset: at as u64,
                    in_flight: flying,
                });
                let mut outcome = image[at..at + new.len()].to_vec();
                apply_fate(&mut outcome, new, chosen);
                for (index, sector) in outcome.chunks(SECTOR_BYTES).enumerate() {
                    let from = at + index * SECTOR_BYTES;
                    let superseded = self
                        .durable_sequence
                        .get(from / SECTOR_BYTES)
                        .is_some_and(|&held| held > sequence);
                    if !superseded {
                        image[from..from + sector.len()].copy_from_slice(sector);
                    }
                }
            }
        }
        image
    }
}

/// Turns `target` (the old bytes of one unit) into what `fate` leaves of a write of `new`.
fn apply_fate(target: &mut [u8], new: &[u8], fate: BlockFate) {
    debug_assert_eq!(target.len(), new.len());
    match fate {
        BlockFate::New => target.copy_from_slice(new),
        BlockFate::Old => {}
        BlockFate::Zero => target.fill(0),
        BlockFate::Garbage(seed) => fill_garbage(target, seed),
        BlockFate::PartlyNew(sectors) => {
            let bytes = (sectors as usize)
                .saturating_mul(SECTOR_BYTES)
                .min(new.len());
            target[..bytes].copy_from_slice(&new[..bytes]);
        }
        BlockFate::TornAt { new_bytes, seed } => {
            let bytes = (new_bytes as usize).min(new.len());
            target[..bytes].copy_from_slice(&new[..bytes]);
            fill_garbage(&mut target[bytes..], seed);
        }
    }
}

/// Deterministic garbage from a seed (xorshift64*), never all zeros for a non-zero seed.
pub fn fill_garbage(target: &mut [u8], seed: u64) {
    let mut state = seed | 1;
    for chunk in target.chunks_mut(8) {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        let word = state.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes();
        chunk.copy_from_slice(&word[..chunk.len()]);
    }
}

/// Replay and the model read a simulated disk's live bytes.
impl sealog_wal::source::RingSource for SimDisk {
    fn size_bytes(&self) -> u64 {
        SimDisk::size_bytes(self)
    }

    fn read_at(&mut self, ring_offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.read(ring_offset, buf)
            .map_err(|error| io::Error::new(io::ErrorKind::UnexpectedEof, error))
    }
}
