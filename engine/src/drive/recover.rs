//! Recovery on open, through the drive's own backend (O_DIRECT reads on real devices, never a
//! cache): replay the ring with reads ahead (bounded by the tail hint, unless the options ask
//! for a full scan), then carry out wal's recovery plan step by step (make the recovered
//! entries durable, write the new incarnation's control block with the cut and its first tail
//! hint, zero the possibly dirty region after the cut, cover uncovered entries with a tail
//! marker), flushing each file or device once per step, and only then hand the state machine
//! its starting state.

use std::collections::VecDeque;
use std::io;
use std::path::Path;

use sealog_wal::recovery::Written;
use sealog_wal::{
    Entry, PlanError, RecoveryPlan, RecoveryReport, ReplayError, ReplayOptions, RingSource, Step,
    TailMarker, Visit,
};

use super::clock::Clock;
use super::core::{DriveCore, Recovered};
use super::entry::{DamagedEntry, EntryRef, RecoveryVisitor};
use super::index::{Head, IndexedBatch, IndexedDamage, ReadIndex, RecordSpan};
use super::op::Op;
use super::options::DriveOptions;
use crate::error::OpenError;
use crate::io::{run_sync, Completion, Durability, FlushOrder, IoBackend, WriteSync};

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
        // The front comes from the read ahead that began exactly here, when there is one:
        // those before it were skipped, and are settled and forgotten. A read no read ahead
        // began at (a segment header replay looks at aside) leaves them for the reads they
        // were hinted for. A failed read ahead is forgotten too: the synchronous read below
        // redoes it and reports its own error.
        let hinted = self
            .ahead
            .iter()
            .any(|ahead| ahead.ring_offset == ring_offset);
        while let Some(ahead) = hinted.then(|| self.settle_front()).transpose()?.flatten() {
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

/// The flush units (files, or the device: [`IoBackend::flush_unit`]) flushed since recovery
/// last wrote to them: a plan's flush of a unit in here would cover nothing new, so it is
/// skipped, and an open flushes each file or device once per step, not once per segment.
#[derive(Default)]
struct Flushed {
    units: Vec<u64>,
}

impl Flushed {
    /// Carries out one step of the plan, skipping a flush of a unit flushed since its last
    /// write.
    fn carry_out<B: IoBackend>(&mut self, backend: &mut B, step: &Step) -> io::Result<()> {
        match step {
            Step::Flush { ring_offset } => {
                let unit = backend.flush_unit(*ring_offset);
                if self.units.contains(&unit) {
                    return Ok(());
                }
                carry_out(backend, step)?;
                self.units.push(unit);
            }
            Step::Write { ring_offset, .. } | Step::Zero { ring_offset, .. } => {
                // A write or zeroing lies inside one segment (or the control area): one unit.
                let unit = backend.flush_unit(*ring_offset);
                self.units.retain(|flushed| *flushed != unit);
                carry_out(backend, step)?;
            }
        }
        Ok(())
    }
}

/// Carries out one step of the recovery plan and waits for it.
fn carry_out<B: IoBackend>(backend: &mut B, step: &Step) -> io::Result<()> {
    let chunk = backend.pool().buffer_bytes();
    match step {
        Step::Flush { ring_offset } => sync_flush(backend, *ring_offset),
        Step::Write {
            ring_offset, bytes, ..
        } => {
            for (index, part) in bytes.chunks(chunk).enumerate() {
                backend.pool().buffer_mut(0)[..part.len()].copy_from_slice(part);
                let offset = ring_offset + (index * chunk) as u64;
                sync_write(backend, offset, part.len() as u32)?;
            }
            Ok(())
        }
        Step::Zero {
            ring_offset,
            len_bytes,
        } => {
            backend.pool().buffer_mut(0).fill(0);
            let mut done = 0;
            while done < *len_bytes {
                let part = (len_bytes - done).min(chunk as u64);
                sync_write(backend, ring_offset + done, part as u32)?;
                done += part;
            }
            Ok(())
        }
    }
}

/// What a failed step was doing, for the open's error.
fn step_action(step: &Step) -> &'static str {
    match step {
        Step::Flush { .. } => "flush during recovery",
        Step::Write {
            what: Written::ControlBlock,
            ..
        } => "write the control block",
        Step::Write {
            what: Written::TailMarker,
            ..
        } => "write the recovery's tail marker",
        Step::Zero { .. } => "invalidate the region after the cut",
    }
}

impl<B: IoBackend> DriveCore<B> {
    /// How this drive makes appends durable: its options' durability, or when they name none
    /// the method the ring's control block records (resolved once, when the drive opened).
    pub fn durability(&self) -> Durability {
        self.durability
    }

    /// Recovery on open, for a core with timers on `clock`: the core [`DriveCore::recover`]
    /// opens, whose group commit also waits out its gathering window and which writes its
    /// tail marker once the idle time has passed, both on `clock` (see
    /// [`DriveOptions::group_gather_us`] and [`DriveOptions::tail_marker_idle_us`]). The drive
    /// thread's core runs on the system clock; a test or a simulation that steps a core by
    /// hand gives it a [`crate::ManualClock`] and advances it, so its timers fire when it says.
    /// Every time the core reads is the clock's: requests built with [`crate::Request::append`]
    /// count from when the core takes them.
    pub fn recover_with_clock(
        backend: B,
        path: &Path,
        options: &DriveOptions,
        clock: impl Clock + 'static,
    ) -> Result<Self, OpenError> {
        let mut core = DriveCore::recover(backend, path, options)?;
        core.start_timers(options, Box::new(clock));
        Ok(core)
    }

    /// Recovery on open: replay, make the cut and the dirty region durable, write the new
    /// incarnation's control block, flush, and only then accept appends. The core it returns
    /// has no timers: no gathering window, and a tail marker only when its caller sends
    /// [`DriveCore::on_idle_timer`]; its statistics read the system clock.
    pub fn recover(backend: B, path: &Path, options: &DriveOptions) -> Result<Self, OpenError> {
        DriveCore::recover_visiting(backend, path, options, None)
    }

    /// [`DriveCore::recover`], handing every live entry replay accepts to `visitor` (see
    /// [`RecoveryVisitor`]) during its one pass, and in quarantine mode every damaged record
    /// or range too.
    pub fn recover_visiting(
        mut backend: B,
        path: &Path,
        options: &DriveOptions,
        visitor: Option<&mut dyn RecoveryVisitor>,
    ) -> Result<Self, OpenError> {
        let (report, index) = replay_ring(&mut backend, path, options, visitor)?;
        // The one recovery protocol: wal computes what to write and flush, in order, and the
        // engine carries it out (the model writer carries out the same plan in the tests).
        let plan = plan_recovery(&report, options, path)?;
        let mut flushed = Flushed::default();
        for step in &plan.steps {
            flushed
                .carry_out(&mut backend, step)
                .map_err(|source| OpenError::Io {
                    path: path.to_path_buf(),
                    action: step_action(step),
                    source,
                })?;
        }
        if let TailMarker::NoRoom(ring_full) = &plan.tail_marker {
            tracing::warn!(
                path = %path.display(),
                "recovered entries after LSN {} are not covered by a durable watermark and \
                 the ring has no room for a tail marker until a trim: {ring_full}",
                report.watermark_max
            );
        }
        let recovered = Recovered::after(report, plan, index);
        let core = DriveCore::start(backend, recovered, options);
        core.publish_shape();
        Ok(core)
    }
}

/// Replays the ring through the backend (reads ahead included): what recovery found, and the
/// read index of the batches it replayed.
fn replay_ring<B: IoBackend>(
    backend: &mut B,
    path: &Path,
    options: &DriveOptions,
    mut visitor: Option<&mut dyn RecoveryVisitor>,
) -> Result<(RecoveryReport, ReadIndex), OpenError> {
    let replay_options = ReplayOptions {
        mode: options.recovery,
        read_chunk_bytes: backend.pool().buffer_bytes() as u32,
        scan: options.scan,
    };
    let size = backend.size_bytes();
    let mut index = ReadIndex::default();
    let mut source = BackendSource {
        backend,
        size,
        ahead: VecDeque::new(),
        completions: Vec::new(),
    };
    let replayed = sealog_wal::replay_visiting(&mut source, &replay_options, &mut |visited| {
        match visited {
            Visit::Entry(entry) => {
                index_entry(&mut index, entry);
                if let Some(visitor) = visitor.as_mut() {
                    visitor.visit(&EntryRef {
                        lsn: entry.lsn,
                        kind: entry.kind,
                        header: entry.embedder,
                        payload: entry.payload,
                    });
                }
            }
            // Quarantined damage is part of the log: indexed, so reads of it answer with what
            // failed, and a trim that leaves it keeps the head where the next open finds it.
            Visit::Damaged(damaged) => {
                index.push_damaged(IndexedDamage {
                    first_lsn: damaged.first_lsn,
                    last_lsn: damaged.last_lsn,
                    position: damaged.position,
                    check: damaged.check,
                    header: damaged.header.map(|header| header.embedder),
                    head: Head {
                        position: damaged.batch,
                        first_lsn: damaged.batch_first_lsn,
                        incarnation: damaged.incarnation,
                    },
                });
                if let Some(visitor) = visitor.as_mut() {
                    visitor.visit_damaged(&DamagedEntry::from(damaged));
                }
            }
        }
    });
    // The reads ahead settle (and give their buffers back) before recovery writes.
    drop(source);
    match replayed {
        Ok(report) => Ok((report, index)),
        Err(error @ ReplayError::Corruption(_)) => Err(OpenError::Corrupt {
            path: path.to_path_buf(),
            source: error,
        }),
        Err(error) => Err(OpenError::Ring {
            path: path.to_path_buf(),
            source: error,
        }),
    }
}

/// Adds a replayed entry to the read index, with its span in its batch.
fn index_entry(index: &mut ReadIndex, entry: &Entry<'_>) {
    let batch = IndexedBatch {
        position: entry.batch,
        first_lsn: entry.batch_first_lsn,
        next_lsn: entry.lsn + 1,
        bytes: entry.batch_bytes,
        incarnation: entry.incarnation,
    };
    // Replay checked both: the record lies inside its batch, its payload within the limit.
    let span = RecordSpan {
        offset_in_batch: entry.position.offset - entry.batch.offset,
        payload_len: entry.payload.len() as u32,
    };
    index.push_replayed(batch, entry.lsn, span);
}

/// What recovery writes and flushes, in order, for what replay found, its control block
/// recording the purpose the options ask for (else keeping the ring's); a plan that cannot be
/// made (an exhausted incarnation or control block sequence) refuses the open.
fn plan_recovery(
    report: &RecoveryReport,
    options: &DriveOptions,
    path: &Path,
) -> Result<RecoveryPlan, OpenError> {
    let purpose = options.purpose.unwrap_or(report.control.purpose);
    sealog_wal::plan_with_purpose(report, purpose).map_err(|error| match error {
        PlanError::IncarnationExhausted { .. } => OpenError::Ring {
            path: path.to_path_buf(),
            source: ReplayError::IncarnationExhausted,
        },
        PlanError::Sequence(exhausted) => OpenError::ControlSequenceExhausted {
            path: path.to_path_buf(),
            sequence: exhausted.sequence,
        },
    })
}

impl Recovered {
    /// The state machine's start once `plan` is carried out: the plan's control block,
    /// incarnation and cursor, and what is covered (everything, when the plan wrote a tail
    /// marker; else what a recovered watermark or the trim point covers).
    fn after(report: RecoveryReport, plan: RecoveryPlan, index: ReadIndex) -> Self {
        let marker_written = matches!(plan.tail_marker, TailMarker::Planned { .. });
        let lsn_durable = plan.lsn_durable;
        let lsn_covered = if marker_written {
            lsn_durable
        } else {
            report
                .watermark_max
                .max(plan.control.trim_lsn)
                .min(lsn_durable)
        };
        Recovered {
            geometry: report.control.geometry,
            control: plan.control,
            incarnation: plan.incarnation,
            cursor: plan.cursor,
            lsn_durable,
            lsn_covered,
            tail_markers: u64::from(marker_written),
            index,
            report,
        }
    }
}
