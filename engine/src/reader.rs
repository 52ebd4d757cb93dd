//! Read-only access to a ring without a drive: a [`RingSource`] over the ring's files that reads
//! with O_DIRECT into an aligned buffer (never through the page cache), for `verify`, `dump`
//! and `inspect`, which hold only a shared lock and write nothing.

use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use sealog_wal::{RingSource, SegmentHeader};

use crate::error::OpenError;
use crate::pool::BufferPool;
use crate::storage::{self, Access, RingFiles};

/// Bytes read at a time.
pub const READ_CHUNK_BYTES: usize = 1 << 20;

/// A ring opened read-only.
pub struct RingReader {
    files: RingFiles,
    pool: BufferPool,
}

impl RingReader {
    /// Opens the ring at `path` with a shared lock.
    pub fn open(path: &Path) -> Result<RingReader, OpenError> {
        RingReader::from_files(storage::open(path, Access::ReadOnly)?)
    }

    /// A reader over a ring's files however they were opened (with the shared lock, or
    /// without any, as `stat` opens them).
    pub fn from_files(files: RingFiles) -> Result<RingReader, OpenError> {
        let chunk = READ_CHUNK_BYTES.max(files.geometry.batch_size_max_bytes as usize);
        let pool = BufferPool::new(1, chunk).map_err(|source| OpenError::Io {
            path: files.path.clone(),
            action: "map a read buffer",
            source,
        })?;
        Ok(RingReader { files, pool })
    }

    /// The ring's files (geometry, kind, cache settings).
    pub fn files(&self) -> &RingFiles {
        &self.files
    }

    /// Every segment's header, or what is wrong with it.
    pub fn segment_headers(
        &mut self,
    ) -> io::Result<Vec<Result<SegmentHeader, sealog_wal::format::SegmentDefect>>> {
        let geometry = self.files.geometry;
        let control = sealog_wal::read_control(self).map_err(io::Error::other)?;
        let mut block = vec![0u8; geometry.block_size_bytes as usize];
        let mut headers = Vec::with_capacity(geometry.segment_count as usize);
        for segment in 0..geometry.segment_count {
            self.read_at(geometry.segment_ring_offset(segment), &mut block)?;
            headers.push(SegmentHeader::decode(control.ring_id, &block));
        }
        Ok(headers)
    }
}

impl RingSource for RingReader {
    fn size_bytes(&self) -> u64 {
        self.files.geometry.ring_size_bytes().unwrap_or(0)
    }

    fn read_at(&mut self, ring_offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let chunk = self.pool.buffer_bytes();
        let mut done = 0usize;
        while done < buf.len() {
            let len = (buf.len() - done).min(chunk);
            let (file, offset) = self.files.locate(ring_offset + done as u64);
            let aligned = &mut self.pool.buffer_mut(0)[..len];
            self.files.files[file].read_exact_at(aligned, offset)?;
            buf[done..done + len].copy_from_slice(aligned);
            done += len;
        }
        Ok(())
    }
}
