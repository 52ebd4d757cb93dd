//! The fixed pool of O_DIRECT buffers a drive owns: one page-aligned anonymous mapping
//! (memmap2), cut into equal buffers, allocated once at open and registered with io_uring as
//! far as the memlock limit allows (the lowest indices first). Nothing on the hot path
//! allocates. Which buffer serves what, and when it is free, is the drive's business (its
//! lanes); the pool only owns the memory.

use std::io;

use memmap2::{Advice, MmapMut};

/// Aligned buffers, each `buffer_bytes` long.
pub struct BufferPool {
    map: MmapMut,
    buffer_bytes: usize,
    count: usize,
}

/// Alignment of every buffer: the page size, which covers any block size up to it.
pub const BUFFER_ALIGN_BYTES: usize = 4096;

impl BufferPool {
    /// Maps `count` buffers of `buffer_bytes` (rounded up to the alignment).
    pub fn new(count: usize, buffer_bytes: usize) -> io::Result<BufferPool> {
        assert!(count > 0);
        let buffer_bytes = buffer_bytes.div_ceil(BUFFER_ALIGN_BYTES) * BUFFER_ALIGN_BYTES;
        let map = MmapMut::map_anon(count * buffer_bytes)?;
        debug_assert_eq!(map.as_ptr() as usize % BUFFER_ALIGN_BYTES, 0);
        Ok(BufferPool {
            map,
            buffer_bytes,
            count,
        })
    }

    /// Bytes in each buffer.
    pub fn buffer_bytes(&self) -> usize {
        self.buffer_bytes
    }

    /// Number of buffers.
    pub fn count(&self) -> usize {
        self.count
    }

    /// The bytes of buffer `index`.
    pub fn buffer(&self, index: usize) -> &[u8] {
        let start = index * self.buffer_bytes;
        &self.map[start..start + self.buffer_bytes]
    }

    /// The bytes of buffer `index`, writable.
    pub fn buffer_mut(&mut self, index: usize) -> &mut [u8] {
        let start = index * self.buffer_bytes;
        &mut self.map[start..start + self.buffer_bytes]
    }

    /// The whole mapping, for registration with the kernel.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.map.as_mut_ptr()
    }

    /// Asks the kernel to back the pool with small pages only (MADV_NOHUGEPAGE), before its
    /// pages are first touched: registering part of a huge page charges the whole of it to the
    /// locked-memory limit, so a pool registered within a budget wants its charge to be its
    /// own size.
    pub fn advise_small_pages(&self) -> io::Result<()> {
        self.map.advise(Advice::NoHugePage)
    }

    /// Total bytes mapped.
    pub fn total_bytes(&self) -> usize {
        self.map.len()
    }
}
