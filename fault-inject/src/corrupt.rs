//! Corrupters for real rings: damage one block of a ring file or device on purpose (flip a
//! bit, zero it, tear it, copy another block over it as a misdirected write would, or put back
//! an old copy as a lost write would), so operators and tests can watch `sealog verify` report
//! it. A block is named by segment and offset, or by the LSN whose header it holds. The ring is
//! opened with the writer's exclusive lock, so no engine is writing while it is damaged.

use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sealog::pool::BufferPool;
use sealog::reader::RingReader;
use sealog::storage::{self, Access, RingFiles};
use sealog_wal::{Position, ReplayOptions};

use crate::device::SECTOR_BYTES;

/// Which block to damage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// The block at this byte offset of this segment (rounded down to the block).
    At {
        /// The segment.
        segment: u32,
        /// Byte offset inside it.
        offset: u32,
    },
    /// The block holding the header of the record with this LSN.
    Lsn(u64),
}

/// What to do to the block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Damage {
    /// Flip one bit (counted from the block's first byte).
    FlipBit(u64),
    /// Zero the whole block.
    Zero,
    /// Keep the first `n` 512-byte sectors and fill the rest with seeded garbage, as a write
    /// torn by a power cut leaves it.
    Tear {
        /// Sectors kept.
        keep_sectors: u32,
        /// Seed of the garbage.
        seed: u64,
    },
    /// Copy the block found at another place over this one (a misdirected write).
    CopyFrom(Target),
    /// Write back bytes saved earlier with [`save_block`] (a lost write: the old contents).
    Restore(PathBuf),
}

/// Why a corrupter could not run.
#[derive(Debug)]
pub enum CorruptError {
    /// The ring could not be opened.
    Open(sealog::OpenError),
    /// No live record has that LSN.
    NoSuchLsn(u64),
    /// The place is outside the ring.
    OutOfRange(Target),
    /// Reading or writing the block failed.
    Io(io::Error),
}

impl std::fmt::Display for CorruptError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CorruptError::Open(error) => write!(f, "{error}"),
            CorruptError::NoSuchLsn(lsn) => write!(f, "no live record has LSN {lsn}"),
            CorruptError::OutOfRange(target) => write!(f, "{target:?} is outside the ring"),
            CorruptError::Io(error) => write!(f, "{error}"),
        }
    }
}

impl std::error::Error for CorruptError {}

/// The ring offset of the block a target names.
pub fn locate(path: &Path, target: Target) -> Result<u64, CorruptError> {
    let mut reader = RingReader::open(path).map_err(CorruptError::Open)?;
    let geometry = reader.files().geometry;
    let block = u64::from(geometry.block_size_bytes);
    match target {
        Target::At { segment, offset } => {
            if segment >= geometry.segment_count || u64::from(offset) >= geometry.segment_size_bytes
            {
                return Err(CorruptError::OutOfRange(target));
            }
            let position = Position {
                lap: 0,
                segment,
                offset,
            };
            Ok(geometry.ring_offset(position) / block * block)
        }
        Target::Lsn(lsn) => {
            let mut found = None;
            let _ = sealog_wal::replay(&mut reader, &ReplayOptions::default(), &mut |entry| {
                if entry.lsn == lsn {
                    found = Some(entry.position);
                }
            });
            let position = found.ok_or(CorruptError::NoSuchLsn(lsn))?;
            Ok(geometry.ring_offset(position) / block * block)
        }
    }
}

/// The ring's files opened for writing (exclusive lock), and a block-sized aligned buffer.
fn open_for_damage(path: &Path) -> Result<(RingFiles, BufferPool), CorruptError> {
    let files = storage::open(path, Access::ReadWrite).map_err(CorruptError::Open)?;
    let pool =
        BufferPool::new(1, files.geometry.block_size_bytes as usize).map_err(CorruptError::Io)?;
    Ok((files, pool))
}

fn read_block(files: &RingFiles, pool: &mut BufferPool, ring_offset: u64) -> io::Result<Vec<u8>> {
    let block = files.geometry.block_size_bytes as usize;
    let (file, offset) = files.locate(ring_offset);
    let buffer = &mut pool.buffer_mut(0)[..block];
    files.files[file].read_exact_at(buffer, offset)?;
    Ok(buffer.to_vec())
}

fn write_block(
    files: &RingFiles,
    pool: &mut BufferPool,
    ring_offset: u64,
    bytes: &[u8],
) -> io::Result<()> {
    let block = files.geometry.block_size_bytes as usize;
    let (file, offset) = files.locate(ring_offset);
    let buffer = &mut pool.buffer_mut(0)[..block];
    buffer.copy_from_slice(&bytes[..block]);
    files.files[file].write_all_at(buffer, offset)?;
    files.files[file].sync_data()
}

/// Saves the block a target names to `out` (to restore later as a lost write).
pub fn save_block(path: &Path, target: Target, out: &Path) -> Result<u64, CorruptError> {
    let ring_offset = locate(path, target)?;
    let (files, mut pool) = open_for_damage(path)?;
    let bytes = read_block(&files, &mut pool, ring_offset).map_err(CorruptError::Io)?;
    std::fs::write(out, bytes).map_err(CorruptError::Io)?;
    Ok(ring_offset)
}

/// Damages the block a target names; returns its ring offset.
pub fn corrupt(path: &Path, target: Target, damage: &Damage) -> Result<u64, CorruptError> {
    let ring_offset = locate(path, target)?;
    let source = match damage {
        Damage::CopyFrom(from) => Some(locate(path, *from)?),
        _ => None,
    };
    let (files, mut pool) = open_for_damage(path)?;
    let block = files.geometry.block_size_bytes as usize;
    let mut bytes = read_block(&files, &mut pool, ring_offset).map_err(CorruptError::Io)?;
    match damage {
        Damage::FlipBit(bit) => {
            let bit = (*bit % (block as u64 * 8)) as usize;
            bytes[bit / 8] ^= 1 << (bit % 8);
        }
        Damage::Zero => bytes.fill(0),
        Damage::Tear { keep_sectors, seed } => {
            let keep = (*keep_sectors as usize * SECTOR_BYTES).min(block);
            ChaCha8Rng::seed_from_u64(*seed).fill(&mut bytes[keep..]);
        }
        Damage::CopyFrom(_) => {
            let from = source.expect("located above");
            bytes = read_block(&files, &mut pool, from).map_err(CorruptError::Io)?;
        }
        Damage::Restore(saved) => {
            let saved = std::fs::read(saved).map_err(CorruptError::Io)?;
            if saved.len() != block {
                return Err(CorruptError::Io(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "a saved block is {block} bytes, this file has {}",
                        saved.len()
                    ),
                )));
            }
            bytes = saved;
        }
    }
    write_block(&files, &mut pool, ring_offset, &bytes).map_err(CorruptError::Io)?;
    Ok(ring_offset)
}
