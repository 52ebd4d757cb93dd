//! Replay's reads: the chunked [`Reader`], which makes a scan's reads large and sequential
//! and tells the source what comes next (within a stop that a hinted scan sets), and the
//! [`CountingSource`], which counts the bytes a replay read for its report.

use std::io;

use crate::format::BLOCK_SIZE_MAX_BYTES;
use crate::source::RingSource;

/// Counts the bytes replay reads (the report's `bytes_read`).
pub(super) struct CountingSource<'s, S: RingSource + ?Sized> {
    pub(super) inner: &'s mut S,
    pub(super) bytes_read: u64,
}

impl<S: RingSource + ?Sized> RingSource for CountingSource<'_, S> {
    fn size_bytes(&self) -> u64 {
        self.inner.size_bytes()
    }

    fn read_at(&mut self, ring_offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.bytes_read = self.bytes_read.saturating_add(buf.len() as u64);
        self.inner.read_at(ring_offset, buf)
    }

    fn read_ahead(&mut self, ring_offset: u64, len: usize) {
        self.inner.read_ahead(ring_offset, len);
    }
}

/// How many chunks past the one just read replay hints: enough reads in flight to keep a device
/// streaming (a sequential read reaches its bandwidth at a few reads of 1 MiB in flight).
const READ_AHEAD_CHUNKS: usize = 3;

/// Reads through a chunk buffer so that a scan makes large sequential reads. A read never
/// crosses `limit` (the end of the segment or control block being read). When a read starts
/// inside the chunk held but runs past it (a batch straddling the chunk's end), the held tail
/// moves to the front and only what follows it is read, so a sequential scan reads every byte
/// once. Every source read is `chunk` bytes (less only at a limit), starting where the last one
/// ended, and the source is told what comes next (`RingSource::read_ahead`, the next few reads
/// with exactly their offsets and lengths), so a device can fetch them while this chunk is
/// checked. `buf` holds twice `chunk`: a kept tail (under one batch) plus a whole read.
pub(super) struct Reader<'s, S: RingSource + ?Sized> {
    pub(super) source: &'s mut S,
    buf: Vec<u8>,
    chunk: usize,
    start: u64,
    len: usize,
    /// Where reading ahead stops in one segment: `(the segment's end, the ring offset)`. A
    /// read in that segment that starts before the offset takes no more than up to it (but
    /// always what was asked for), one at or after it only what was asked for, and no read
    /// is hinted past it. For a hinted scan, so that an open reads what the walk and the
    /// probe need and not a chunk or three beyond them.
    pub(super) ahead_stop: Option<(u64, u64)>,
    /// One block read aside ([`Reader::read_aside`]): a segment header, so the chunk held
    /// (and the reads hinted after it) stays where the scan goes on.
    aside: Vec<u8>,
}

impl<'s, S: RingSource + ?Sized> Reader<'s, S> {
    /// A reader of `source` in chunks of `chunk` bytes, holding nothing yet.
    pub(super) fn new(source: &'s mut S, chunk: usize) -> Self {
        Reader {
            source,
            buf: vec![0u8; 2 * chunk],
            chunk,
            start: 0,
            len: 0,
            ahead_stop: None,
            aside: vec![0u8; BLOCK_SIZE_MAX_BYTES as usize],
        }
    }

    /// Reads `len` bytes (at most a block) at `offset` into the aside buffer, leaving the
    /// chunk held as it is: for a segment header looked at between reads of the log, which
    /// would otherwise make the scan read its chunk (and the reads hinted after it) again.
    pub(super) fn read_aside(&mut self, offset: u64, len: usize) -> io::Result<&[u8]> {
        debug_assert!(len <= self.aside.len());
        self.source.read_at(offset, &mut self.aside[..len])?;
        Ok(&self.aside[..len])
    }

    /// How far a read from `from` in the segment ending at `limit` may reach beyond what it
    /// needs: the segment's end, or the read-ahead stop in that segment.
    fn ahead_limit(&self, from: u64, limit: u64) -> u64 {
        match self.ahead_stop {
            Some((segment_end, stop)) if segment_end == limit => stop.max(from).min(limit),
            _ => limit,
        }
    }

    /// Reads `len` bytes (at most a chunk) at `offset`, never past `limit`: from the chunk held
    /// when it holds them, else with a new read of a whole chunk, keeping the held tail.
    pub(super) fn read(&mut self, offset: u64, len: usize, limit: u64) -> io::Result<&[u8]> {
        debug_assert!(offset + len as u64 <= limit);
        debug_assert!(len <= self.chunk);
        let held_end = self.start + self.len as u64;
        let cached = offset >= self.start && offset + len as u64 <= held_end;
        if !cached {
            // Bytes of the held chunk that the new one begins with (same segment: a chunk never
            // crosses its limit, so an offset inside it shares that limit).
            let kept = if offset >= self.start && offset < held_end {
                (held_end - offset) as usize
            } else {
                0
            };
            if kept > 0 {
                let at = (offset - self.start) as usize;
                self.buf.copy_within(at..self.len, 0);
            }
            self.start = offset;
            self.len = 0;
            let from = offset + kept as u64;
            let needed = len - kept;
            let ahead_limit = self.ahead_limit(from, limit);
            let whole = (self.chunk as u64).min(ahead_limit - from) as usize;
            let read = whole.max(needed);
            let filled = match self.source.read_at(from, &mut self.buf[kept..kept + read]) {
                Ok(()) => read,
                // Retry just what was asked for: a latent sector error elsewhere in the chunk
                // must not hide readable blocks (I-13).
                Err(_) if read > needed => {
                    self.source.read_at(from, &mut self.buf[kept..len])?;
                    needed
                }
                Err(error) => return Err(error),
            };
            self.len = kept + filled;
            if filled == read {
                // The reads that will follow, in order, within this segment (a source that
                // already has one of them in flight ignores the repeated hint).
                let mut ahead_at = from + filled as u64;
                for _ in 0..READ_AHEAD_CHUNKS {
                    if ahead_at >= ahead_limit {
                        break;
                    }
                    let ahead = (self.chunk as u64).min(ahead_limit - ahead_at) as usize;
                    self.source.read_ahead(ahead_at, ahead);
                    ahead_at += ahead as u64;
                }
            }
        }
        let at = (offset - self.start) as usize;
        Ok(&self.buf[at..at + len])
    }
}
