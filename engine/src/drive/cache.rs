//! The recent-batch cache: copies of the newest acknowledged batches in ordinary memory, so that
//! readers tailing the writer never touch the device. Its memory is bounded by
//! [`DriveOptions::read_cache_bytes`](super::DriveOptions::read_cache_bytes), cut into chunks
//! (at least one batch each, at most sixteen of them) that the drive thread fills in turn: when
//! the current chunk has no room for the next batch, the oldest chunk is emptied and reused, so
//! eviction costs nothing per batch, a chunk is allocated once, and the cache never holds less
//! than its capacity minus one chunk once full.
//!
//! Each chunk has its own lock. The drive thread holds a chunk's write lock only while it copies
//! one batch in; readers copy a payload (or an iterator a batch) out under a read lock and
//! check it outside. Readers of the chunk being filled wait at most one batch's copy, readers of
//! the other chunks (most of the cache) never wait for the writer, and the writer waits at
//! most for the copies under way in its chunk. A slot names its chunk's generation, bumped
//! whenever the chunk is emptied, so a reader holding a slot of an evicted batch finds out and
//! reads the device instead.

use std::ops::Range;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// How many chunks a cache is cut into, unless that would make a chunk too small for a batch
/// or too large for [`CHUNK_BYTES_MAX`]: evicting one drops a sixteenth of the cache.
const CHUNKS: u64 = 16;

/// The largest chunk: slots record offsets in a chunk as `u32`, and a chunk is allocated
/// whole, so a very large cache is cut into more chunks rather than larger ones.
const CHUNK_BYTES_MAX: u64 = 1 << 30;

/// Where a cached batch's bytes are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CacheSlot {
    chunk: u32,
    offset: u32,
    generation: u64,
}

struct Chunk {
    /// Bumped every time the chunk is emptied for reuse.
    generation: u64,
    bytes: Vec<u8>,
}

/// The cache's chunks.
pub(crate) struct RecentCache {
    chunk_bytes: usize,
    chunks: Box<[RwLock<Chunk>]>,
}

/// The drive thread's place in the cache: the chunk it fills, and the next generation.
#[derive(Debug)]
pub(crate) struct CacheWriter {
    current: Option<usize>,
    next_generation: u64,
}

impl CacheWriter {
    pub(crate) fn new() -> CacheWriter {
        CacheWriter {
            current: None,
            next_generation: 1,
        }
    }
}

impl RecentCache {
    /// A cache of at most `capacity_bytes` for batches of at most `batch_bytes_max` each. Below
    /// one batch of capacity there is no cache (every read goes to the device).
    pub(crate) fn new(capacity_bytes: u64, batch_bytes_max: u32) -> RecentCache {
        let chunk_bytes = (capacity_bytes / CHUNKS)
            .min(CHUNK_BYTES_MAX)
            .max(u64::from(batch_bytes_max));
        let count = capacity_bytes / chunk_bytes;
        let chunks = (0..count)
            .map(|_| {
                RwLock::new(Chunk {
                    generation: 0,
                    bytes: Vec::new(),
                })
            })
            .collect();
        RecentCache {
            chunk_bytes: usize::try_from(chunk_bytes).unwrap_or(usize::MAX),
            chunks,
        }
    }

    /// Bytes the cache may hold.
    pub(crate) fn capacity_bytes(&self) -> u64 {
        (self.chunk_bytes as u64).saturating_mul(self.chunks.len() as u64)
    }

    fn read(&self, chunk: usize) -> RwLockReadGuard<'_, Chunk> {
        self.chunks[chunk]
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn write(&self, chunk: usize) -> RwLockWriteGuard<'_, Chunk> {
        self.chunks[chunk]
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Copies an acknowledged batch in (the drive thread only); where it went, or `None`
    /// without a cache (or for a batch larger than a chunk, which the geometry rules out).
    pub(crate) fn insert(&self, writer: &mut CacheWriter, batch: &[u8]) -> Option<CacheSlot> {
        if self.chunks.is_empty() || batch.len() > self.chunk_bytes {
            return None;
        }
        let current = match writer.current {
            Some(current) if self.read(current).bytes.len() + batch.len() <= self.chunk_bytes => {
                current
            }
            // The next chunk (the oldest) is emptied for reuse: its batches are evicted.
            previous => {
                let next = previous.map_or(0, |current| (current + 1) % self.chunks.len());
                let mut chunk = self.write(next);
                chunk.generation = writer.next_generation;
                writer.next_generation += 1;
                chunk.bytes.clear();
                // Allocated once, at its first use, and kept.
                chunk.bytes.reserve_exact(self.chunk_bytes);
                writer.current = Some(next);
                next
            }
        };
        let mut chunk = self.write(current);
        let offset = chunk.bytes.len();
        chunk.bytes.extend_from_slice(batch);
        Some(CacheSlot {
            chunk: current as u32,
            offset: offset as u32,
            generation: chunk.generation,
        })
    }

    /// Runs `f` on `range` of a cached batch's bytes, if the cache still holds the batch.
    pub(crate) fn with_batch<R>(
        &self,
        slot: CacheSlot,
        range: Range<usize>,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Option<R> {
        let chunk = self.read(slot.chunk as usize);
        if chunk.generation != slot.generation {
            return None;
        }
        let start = slot.offset as usize + range.start;
        let end = slot.offset as usize + range.end;
        chunk.bytes.get(start..end).map(f)
    }

    /// Whether the cache still holds the batch in `slot`.
    pub(crate) fn holds(&self, slot: CacheSlot) -> bool {
        self.read(slot.chunk as usize).generation == slot.generation
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_chunk_is_evicted_whole_and_stale_slots_miss() {
        // Four chunks of 4 KiB: a batch of 3 KiB fills one.
        let cache = RecentCache::new(16 << 10, 4096);
        assert_eq!(cache.capacity_bytes(), 16 << 10);
        let mut writer = CacheWriter::new();
        let slots: Vec<CacheSlot> = (0..6u8)
            .map(|fill| cache.insert(&mut writer, &[fill; 3072]).expect("cached"))
            .collect();
        // The fifth batch reused the first chunk, the sixth the second.
        assert!(!cache.holds(slots[0]) && !cache.holds(slots[1]));
        for (fill, slot) in slots.iter().enumerate().skip(2) {
            let byte = cache.with_batch(*slot, 10..11, |bytes| bytes[0]);
            assert_eq!(byte, Some(fill as u8));
        }
        assert_eq!(cache.with_batch(slots[0], 0..1, |bytes| bytes[0]), None);
        assert!(
            cache.insert(&mut writer, &[0; 5000]).is_none(),
            "over a chunk"
        );
    }

    #[test]
    fn no_capacity_is_no_cache() {
        let cache = RecentCache::new(1000, 4096);
        assert_eq!(cache.capacity_bytes(), 0);
        assert!(cache.insert(&mut CacheWriter::new(), &[1; 100]).is_none());
    }
}
