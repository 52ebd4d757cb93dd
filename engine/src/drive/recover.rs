//! Recovery on open, through the drive's own backend (O_DIRECT reads on real devices, never a
//! cache): replay the ring with reads ahead, make the recovered entries durable, write the new
//! incarnation's control block with the cut, zero the possibly dirty region after the cut, and
//! only then hand the state machine its starting state.

use std::collections::VecDeque;
use std::io;
use std::path::Path;

use sealog_wal::format::ControlBlock;
use sealog_wal::{ReplayError, ReplayOptions, RingSource, WriteCursor};

use super::core::{DriveCore, IndexedBatch, Recovered};
use super::op::Op;
use super::DriveOptions;
use crate::error::OpenError;
use crate::io::{run_sync, Completion, FlushOrder, IoBackend, WriteSync};

/// Reads the ring for replay through the backend (O_DIRECT on real devices), with reads ahead:
/// while replay checks a chunk, the next ones (as replay hints them) are already on their way
/// into pool buffers 1..=[`READ_AHEAD_DEPTH`] (buffer 0 serves the synchronous reads). Replay's
/// scan is sequential, so a full ring is read at about the device's sequential bandwidth with a
/// few reads in flight, rather than at bandwidth x (read time / (read time + check time)).
struct BackendSource<'a, B: IoBackend> {
    backend: &'a mut B,
    size: u64,
    /// Reads ahead, in the order they were hinted (and will be asked for).
    ahead: VecDeque<ReadAhead>,
    completions: Vec<Completion>,
}

/// A read ahead: where it reads, how much, into which buffer, and its outcome once seen.
struct ReadAhead {
    ring_offset: u64,
    len: usize,
    buffer: usize,
    outcome: Option<Result<u32, i32>>,
}

/// Reads recovery keeps ahead of replay at most (each in a pool buffer of its own).
const READ_AHEAD_DEPTH: usize = 3;

impl<B: IoBackend> BackendSource<'_, B> {
    /// Reaps completions (waiting for at least `min_complete`): each read ahead's outcome is
    /// noted in its entry; the synchronous read's outcome, if among them, is returned.
    fn reap(&mut self, min_complete: usize) -> io::Result<Option<Result<u32, i32>>> {
        self.completions.clear();
        self.backend.wait(min_complete, &mut self.completions)?;
        let mut sync_outcome = None;
        for completion in &self.completions {
            match Op::from_tag(completion.tag) {
                Some(Op::RecoverySync) => sync_outcome = Some(completion.result),
                Some(Op::RecoveryReadAhead { buffer }) => {
                    let ahead = self
                        .ahead
                        .iter_mut()
                        .find(|ahead| ahead.buffer as u64 == buffer);
                    match ahead {
                        Some(ahead) => ahead.outcome = Some(completion.result),
                        None => return Err(unknown_completion(completion)),
                    }
                }
                _ => return Err(unknown_completion(completion)),
            }
        }
        Ok(sync_outcome)
    }

    /// Waits until the oldest read ahead has completed, and takes it. (No synchronous read is
    /// in flight meanwhile: `read_at` settles reads ahead before it submits one.)
    fn settle_front(&mut self) -> io::Result<Option<ReadAhead>> {
        while self
            .ahead
            .front()
            .is_some_and(|ahead| ahead.outcome.is_none())
        {
            self.reap(1)?;
        }
        Ok(self.ahead.pop_front())
    }
}

/// The backend completed something recovery never submitted: the seam is broken.
fn unknown_completion(completion: &Completion) -> io::Error {
    io::Error::other(format!(
        "the I/O backend completed an operation never submitted (tag {:#x})",
        completion.tag
    ))
}

impl<B: IoBackend> Drop for BackendSource<'_, B> {
    /// The reads ahead's buffers go back to the drive only once the device is done with them.
    fn drop(&mut self) {
        while let Ok(Some(_)) = self.settle_front() {}
    }
}

impl<B: IoBackend> RingSource for BackendSource<'_, B> {
    fn size_bytes(&self) -> u64 {
        self.size
    }

    fn read_at(&mut self, ring_offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let chunk = self.backend.pool().buffer_bytes();
        let mut done = 0usize;
        // The front comes from the oldest read ahead when it began exactly here; reads ahead
        // that do not match are settled and forgotten. A failed read ahead is forgotten too:
        // the synchronous read below redoes it and reports its own error.
        while let Some(ahead) = self.settle_front()? {
            if ahead.ring_offset == ring_offset {
                if matches!(ahead.outcome, Some(Ok(_))) {
                    done = ahead.len.min(buf.len());
                    let pool = self.backend.pool();
                    buf[..done].copy_from_slice(&pool.buffer(ahead.buffer)[..done]);
                }
                break;
            }
        }
        while done < buf.len() {
            let len = (buf.len() - done).min(chunk);
            self.backend.submit_read(
                Op::RecoverySync.tag(),
                ring_offset + done as u64,
                0,
                len as u32,
            )?;
            let outcome = loop {
                if let Some(outcome) = self.reap(1)? {
                    break outcome;
                }
            };
            outcome.map_err(io::Error::from_raw_os_error)?;
            buf[done..done + len].copy_from_slice(&self.backend.pool().buffer(0)[..len]);
            done += len;
        }
        Ok(())
    }

    fn read_ahead(&mut self, ring_offset: u64, len: usize) {
        let pool = self.backend.pool();
        let depth = READ_AHEAD_DEPTH.min(pool.count().saturating_sub(1));
        let len = len.min(pool.buffer_bytes());
        if len == 0
            || self.ahead.len() >= depth
            || self
                .ahead
                .iter()
                .any(|ahead| ahead.ring_offset == ring_offset)
        {
            return;
        }
        let Some(buffer) =
            (1..=depth).find(|buffer| self.ahead.iter().all(|ahead| ahead.buffer != *buffer))
        else {
            return;
        };
        let tag = Op::RecoveryReadAhead {
            buffer: buffer as u64,
        }
        .tag();
        if self
            .backend
            .submit_read(tag, ring_offset, buffer, len as u32)
            .is_err()
        {
            return;
        }
        self.ahead.push_back(ReadAhead {
            ring_offset,
            len,
            buffer,
            outcome: None,
        });
        // Hand it to the device now (a backend may hold submissions until it is waited on). A
        // failure of the ring itself is reported by the next synchronous read.
        let _ = self.reap(0);
    }
}

fn sync_write<B: IoBackend>(backend: &mut B, ring_offset: u64, len: u32) -> io::Result<()> {
    let tag = Op::RecoverySync.tag();
    backend.submit_write(tag, ring_offset, 0, 0, len, WriteSync::None)?;
    run_sync(backend, tag)?;
    Ok(())
}

fn sync_flush<B: IoBackend>(backend: &mut B, ring_offset: u64) -> io::Result<()> {
    let tag = Op::RecoverySync.tag();
    backend.submit_flush(tag, ring_offset, FlushOrder::Independent)?;
    run_sync(backend, tag)?;
    Ok(())
}

/// Writes a control block to its copy and flushes it (recovery's blocking path).
fn write_control<B: IoBackend>(backend: &mut B, control: &ControlBlock) -> io::Result<()> {
    let block = control.geometry.block_size_bytes as usize;
    control.encode(&mut backend.pool().buffer_mut(0)[..block]);
    let offset = control.geometry.control_offset(control.copy());
    sync_write(backend, offset, block as u32)?;
    sync_flush(backend, offset)
}

impl<B: IoBackend> DriveCore<B> {
    /// Recovery on open: replay, make the cut and the dirty region durable, write the new
    /// incarnation's control block, flush, and only then accept appends.
    pub fn recover(mut backend: B, path: &Path, options: &DriveOptions) -> Result<Self, OpenError> {
        let io_error = |action: &'static str| {
            move |source: io::Error| OpenError::Io {
                path: path.to_path_buf(),
                action,
                source,
            }
        };
        let replay_options = ReplayOptions {
            mode: options.recovery,
            read_chunk_bytes: backend.pool().buffer_bytes() as u32,
        };
        let size = backend.size_bytes();
        let mut index: VecDeque<IndexedBatch> = VecDeque::new();
        let report = {
            let mut source = BackendSource {
                backend: &mut backend,
                size,
                ahead: VecDeque::new(),
                completions: Vec::new(),
            };
            sealog_wal::replay(
                &mut source,
                &replay_options,
                &mut |entry| match index.back_mut() {
                    Some(batch) if batch.position == entry.batch => batch.next_lsn = entry.lsn + 1,
                    _ => index.push_back(IndexedBatch {
                        position: entry.batch,
                        first_lsn: entry.batch_first_lsn,
                        next_lsn: entry.lsn + 1,
                        bytes: entry.batch_bytes,
                        incarnation: entry.incarnation,
                    }),
                },
            )
        };
        let report = match report {
            Ok(report) => report,
            Err(error @ ReplayError::Corruption(_)) => {
                return Err(OpenError::Corrupt {
                    path: path.to_path_buf(),
                    source: error,
                })
            }
            Err(error) => {
                return Err(OpenError::Ring {
                    path: path.to_path_buf(),
                    source: error,
                })
            }
        };
        let geometry = report.control.geometry;
        // Entries that survived in the volatile cache (written, never acknowledged) become
        // durable before anyone reads them.
        for segment in 0..geometry.segment_count {
            sync_flush(&mut backend, geometry.segment_ring_offset(segment))
                .map_err(io_error("flush recovered segments"))?;
        }
        let ring_error = |source: ReplayError| OpenError::Ring {
            path: path.to_path_buf(),
            source,
        };
        let incarnation = report
            .incarnation_max
            .checked_add(1)
            .ok_or(ReplayError::IncarnationExhausted)
            .map_err(ring_error)?;
        let sequence = report.control.sequence.checked_add(1).ok_or_else(|| {
            OpenError::ControlSequenceExhausted {
                path: path.to_path_buf(),
                sequence: report.control.sequence,
            }
        })?;
        // Nothing live: the head moves to the cut, where this incarnation writes next.
        let (head, head_lsn, head_incarnation) = if index.is_empty() {
            (report.next_position, report.next_lsn, incarnation)
        } else {
            let control = report.control;
            (control.head, control.head_lsn, control.head_incarnation)
        };
        let control = ControlBlock {
            sequence,
            incarnation,
            trim_lsn: report.trim_lsn.min(report.next_lsn - 1),
            head,
            head_lsn,
            head_incarnation,
            cut: report.next_position,
            cut_incarnation: incarnation,
            ..report.control
        };
        // The control block with the cut and the new incarnation goes first: from then on
        // nothing of an older incarnation at or after the cut counts, so a crash while the
        // region after the cut is zeroed leaves a ring that recovers to this same log.
        write_control(&mut backend, &control).map_err(io_error("write the control block"))?;
        // Rule 6: zero the possibly dirty region after the cut, durably, before any append.
        if let Some(invalidate) = report.invalidate {
            let chunk = backend.pool().buffer_bytes() as u64;
            backend.pool().buffer_mut(0).fill(0);
            for (offset, len) in invalidate.ranges(&geometry) {
                let mut done = 0;
                while done < len {
                    let part = (len - done).min(chunk);
                    sync_write(&mut backend, offset + done, part as u32)
                        .map_err(io_error("invalidate the region after the cut"))?;
                    done += part;
                }
                sync_flush(&mut backend, offset).map_err(io_error("flush the invalidation"))?;
            }
        }
        let lsn_durable = report.next_lsn - 1;
        let recovered = Recovered {
            geometry,
            control,
            incarnation,
            cursor: WriteCursor {
                position: report.next_position,
                next_lsn: report.next_lsn,
            },
            lsn_durable,
            lsn_covered: report.watermark_max.min(lsn_durable),
            tail_markers: 0,
            index,
            report,
        };
        Ok(DriveCore::start(backend, recovered, options))
    }
}
