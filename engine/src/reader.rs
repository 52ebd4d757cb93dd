//! Read-only access to a ring without a drive: a [`RingSource`] over the ring's files that reads
//! with O_DIRECT into an aligned buffer (never through the page cache), for `verify`, `dump`
//! and `inspect`, which hold only a shared lock and write nothing, and for an embedder's
//! read-only replay ([`RingReader::replay_visiting`]).

use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use sealog_wal::{
    RecoveryMode, RecoveryReport, ReplayError, ReplayOptions, RingSource, ScanPolicy,
    SegmentHeader, Visit,
};

use crate::drive::{DamagedEntry, EntryRef, RecoveryVisitor};
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

    /// Replays the ring, writing nothing: `visitor` sees every live entry and, with `mode`
    /// [`RecoveryMode::Quarantine`], every damaged record or range, in LSN order, as it would
    /// in [`Drive::open_visiting`](crate::Drive::open_visiting). An embedder rebuilds its own
    /// state this way for an operator's look at a ring (the writable open would write a
    /// control block and a tail marker, and start whatever the embedder runs on its drive);
    /// the reader keeps its lock, so a second pass sees the same ring. A strict replay that
    /// meets corruption is `OpenError::Corrupt`, naming the LSN and where it lies.
    pub fn replay_visiting(
        &mut self,
        mode: RecoveryMode,
        scan: ScanPolicy,
        visitor: &mut dyn RecoveryVisitor,
    ) -> Result<RecoveryReport, OpenError> {
        let options = ReplayOptions {
            mode,
            scan,
            ..ReplayOptions::default()
        };
        let replayed = sealog_wal::replay_visiting(self, &options, &mut |visited| match visited {
            Visit::Entry(entry) => visitor.visit(&EntryRef {
                lsn: entry.lsn,
                kind: entry.kind,
                header: entry.embedder,
                payload: entry.payload,
            }),
            Visit::Damaged(damaged) => visitor.visit_damaged(&DamagedEntry::from(damaged)),
        });
        let path = self.files.path.clone();
        replayed.map_err(|error| match error {
            ReplayError::Corruption(_) => OpenError::Corrupt {
                path,
                source: error,
            },
            _ => OpenError::Ring {
                path,
                source: error,
            },
        })
    }

    /// The ring's current control block (its purpose, its sync method).
    pub fn control(&mut self) -> Result<sealog_wal::ControlBlock, OpenError> {
        sealog_wal::read_control(self).map_err(|source| OpenError::Ring {
            path: self.files.path.clone(),
            source,
        })
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
