//! The read-only source replay scans: "read N bytes at this ring offset". The engine implements
//! it with O_DIRECT reads from the device (never the page cache); tests, the example and the
//! fuzz target use a byte slice. Replay only ever asks for whole blocks at block-aligned offsets
//! inside one segment (or one control block), so an O_DIRECT implementation needs no bounce
//! logic beyond an aligned buffer, and a segment-file implementation never reads across files.

use std::io;

/// A ring's bytes, readable at any offset.
pub trait RingSource {
    /// Total bytes readable.
    fn size_bytes(&self) -> u64;

    /// Fills `buf` from `ring_offset`. An error (EIO from a latent sector error, say) is
    /// reported by replay as a failed check at that place, never as a panic.
    fn read_at(&mut self, ring_offset: u64, buf: &mut [u8]) -> io::Result<()>;

    /// A hint that replay will soon read `len` bytes at `ring_offset` (inside one segment,
    /// block-aligned; hints come in the order of the reads, and a hint may repeat one given
    /// before): a source that can read ahead starts that read now, so the device works while
    /// replay checks what it already has. The default does nothing; a hint is never wrong to
    /// ignore, and a source must still answer any `read_at` correctly after one.
    fn read_ahead(&mut self, ring_offset: u64, len: usize) {
        let _ = (ring_offset, len);
    }
}

impl RingSource for &[u8] {
    fn size_bytes(&self) -> u64 {
        self.len() as u64
    }

    fn read_at(&mut self, ring_offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let start = usize::try_from(ring_offset).map_err(|_| past_end(ring_offset, buf.len()))?;
        let end = start
            .checked_add(buf.len())
            .ok_or_else(|| past_end(ring_offset, buf.len()))?;
        let bytes = self
            .get(start..end)
            .ok_or_else(|| past_end(ring_offset, buf.len()))?;
        buf.copy_from_slice(bytes);
        Ok(())
    }
}

impl RingSource for Vec<u8> {
    fn size_bytes(&self) -> u64 {
        self.len() as u64
    }

    fn read_at(&mut self, ring_offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let mut bytes: &[u8] = self;
        bytes.read_at(ring_offset, buf)
    }
}

fn past_end(ring_offset: u64, len: usize) -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        format!("read of {len} bytes at ring offset {ring_offset} runs past the end"),
    )
}
