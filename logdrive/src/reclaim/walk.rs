//! One step of the reclaimer: a walk of part of the ring from its head, judging each record,
//! queueing the copies of the needed ones when the step relocates, then trimming the ring
//! past what it walked once every copy is durable.

use std::sync::atomic::Ordering;

use sealog::{LogEntry, ReadError};

use super::copy::{
    apply, creation_group_max, generation_record, queue_creations, Carried, Creation, Queued,
};
use super::judge::{judge, judge_damaged, Verdict};
use super::policy::{Mode, ADVANCE_LSNS_MIN};
use super::reclaimer::Pin;
use crate::api::LogDriveError;
use crate::errors::{append_error, read_error};
use crate::inner::Inner;
use crate::record::RECORD_HEADER_BYTES;
use crate::sync::lock;

/// What one step did.
#[derive(Debug, Default)]
pub(crate) struct Walked {
    /// The head moved, or a copy was made.
    pub(crate) progress: bool,
    pub(crate) relocated_bytes: u64,
}

/// Walks part of the ring from its head, then trims past what it walked. `advance_to` is
/// the survey's: the last LSN below every record a LogDrive needed or might need then.
pub(crate) fn step(
    inner: &Inner,
    mode: Mode,
    pressure: bool,
    advance_to: u64,
) -> Result<Walked, LogDriveError> {
    let Some(bounds) = bounds(inner, mode, pressure, advance_to) else {
        return Ok(Walked::default());
    };
    let mut walk = Walk::new(inner, mode);
    walk.read(inner, &bounds)?;
    walk.flush_creations(inner);
    *lock(&inner.reclaimer.pin) = walk.pin.take();
    let Some(trim_to) = walk.trim_bound() else {
        return Ok(Walked::default());
    };
    finish(inner, &bounds, walk, trim_to)
}

/// Where a step walks: from the head to `end`, within the head's segment when it relocates.
struct Bounds {
    head: u64,
    /// The last LSN the walk may read: the durable tail as of its start, and for a
    /// relocating walk the head's segment's last LSN.
    end: u64,
    /// The head's segment's last LSN, for a relocating walk.
    segment_last: Option<u64>,
    /// The walk stops past this LSN unless it meets a needed record first (see [`bounds`]).
    bound_last: u64,
    /// The ring bytes a walk reads at most.
    budget_bytes: u64,
}

/// Where a step walks, or `None` when it would find nothing to do.
fn bounds(inner: &Inner, mode: Mode, pressure: bool, advance_to: u64) -> Option<Bounds> {
    let drive = &inner.drive;
    let head = drive.first_live_lsn();
    // The walk ends at the durable tail as of its start: the copies it makes take LSNs past
    // it, and the state learns of them only once the walk is over, so the walk must never
    // meet them (it would take them for garbage and trim them).
    let end = drive.durable_lsn();
    if head > end {
        return None;
    }
    // A relocating walk stays within the head's segment (see [`Reclaimer::partial`]).
    // When the log ends in the head's segment, copies would land in it and never free it.
    let segment_last = match mode {
        Mode::Relocate => Some(drive.segment_end_lsn(head)?),
        Mode::Advance => None,
    };
    let end = segment_last.map_or(end, |last| end.min(last));
    // An advancing walk would only read what the counts already say: they name the exact
    // LSN of every record a LogDrive needs, and the advance has moved the head up to the
    // first (or to within `ADVANCE_LSNS_MIN` of it, where a ring trim is not worth its
    // flush). Under pressure it still walks, to trim the garbage before its pin (past a
    // record in flight whose floor bounds the counts).
    if mode == Mode::Advance && !pressure {
        return None;
    }
    if mode == Mode::Relocate && still_pinned(inner, head) {
        return None;
    }
    let geometry = drive.geometry();
    let budget_bytes = inner.options.reclaim.step_bytes.unwrap_or_else(|| {
        let batch = u64::from(geometry.batch_size_max_bytes);
        (geometry.segment_size_bytes / 4).clamp(batch, (8 << 20).max(batch))
    });
    // The survey's bound is the LSN of a record some LogDrive needed: a walk that passes it
    // without meeting a needed record has found the state moved on since (a trim or a
    // deletion made it garbage) and stops there, so that the next survey moves the head past
    // what the counts now show to be garbage without reading it. Reading on would take
    // garbage off the device that the counts could have passed over. (A bound before the
    // head, a record in flight admitted before the head passed its floor, says nothing of
    // what lies past the head.) For the same reason a relocating walk stops once it has read
    // [`ADVANCE_LSNS_MIN`] LSNs past the last record it copied without meeting another: the
    // needed records it copied were what held the head, and what follows them is garbage the
    // counts pass over, up to the next needed record.
    let bound_last = if advance_to + 1 >= head {
        advance_to + 1
    } else {
        u64::MAX
    };
    Some(Bounds {
        head,
        end,
        segment_last,
        bound_last,
        budget_bytes,
    })
}

/// What a walk has met so far.
struct Walk {
    mode: Mode,
    last_needed: Option<u64>,
    copies: Vec<Queued>,
    creations: Vec<Creation>,
    group_max: usize,
    /// The first creation the walk passed that no group took: the head stays before it.
    held: Option<u64>,
    /// The last LSN the walk passed.
    passed: Option<u64>,
    walked_bytes: u64,
    garbage: u64,
    pin: Option<Pin>,
}

impl Walk {
    fn new(inner: &Inner, mode: Mode) -> Walk {
        let batch_size_max_bytes = inner.drive.geometry().batch_size_max_bytes;
        Walk {
            mode,
            last_needed: None,
            copies: Vec::new(),
            creations: Vec::new(),
            group_max: creation_group_max(batch_size_max_bytes),
            held: None,
            passed: None,
            walked_bytes: 0,
            garbage: 0,
            pin: None,
        }
    }

    /// Reads records from the head and judges each, until the budget, the bounds, or a record
    /// that stops the walk.
    fn read(&mut self, inner: &Inner, bounds: &Bounds) -> Result<(), LogDriveError> {
        // No read-ahead: the walk stops by what it finds, mostly within a run or two.
        let mut iterator = inner.drive.iter_from(bounds.head).without_read_ahead();
        while self.walked_bytes < bounds.budget_bytes {
            let next = iterator.next();
            let Some((lsn, bytes, verdict)) = self.judge_next(inner, bounds, next)? else {
                break;
            };
            if !matches!(verdict, Verdict::Garbage) {
                self.last_needed = Some(lsn);
            }
            if !self.take(inner, verdict) {
                break;
            }
            self.passed = Some(lsn);
            self.walked_bytes += bytes;
        }
        Ok(())
    }

    /// Judges the next record the iterator yields: its LSN, its ring bytes and the verdict,
    /// or `None` where the walk ends before it.
    fn judge_next(
        &self,
        inner: &Inner,
        bounds: &Bounds,
        next: Option<Result<LogEntry, ReadError>>,
    ) -> Result<Option<(u64, u64, Verdict)>, LogDriveError> {
        let beyond = |lsn: u64| match self.last_needed {
            Some(at) => lsn > at + ADVANCE_LSNS_MIN,
            None => lsn > bounds.bound_last,
        };
        Ok(Some(match next {
            None => return Ok(None),
            Some(Ok(entry)) if entry.lsn > bounds.end => return Ok(None),
            Some(Err(ReadError::Damaged { lsn, .. })) if lsn > bounds.end => return Ok(None),
            Some(Ok(LogEntry { lsn, .. }) | Err(ReadError::Damaged { lsn, .. })) if beyond(lsn) => {
                return Ok(None)
            }
            Some(Ok(entry)) => {
                let bytes = RECORD_HEADER_BYTES + entry.payload.len() as u64;
                (entry.lsn, bytes, judge(inner, entry, self.mode))
            }
            Some(Err(ReadError::Damaged { lsn, header, .. })) => (
                lsn,
                RECORD_HEADER_BYTES,
                judge_damaged(inner, lsn, header, self.mode),
            ),
            // The head moved under the walk (an embedder trimmed the drive itself).
            Some(Err(ReadError::Trimmed { .. })) => return Ok(None),
            Some(Err(error)) => return Err(read_error(error)),
        }))
    }

    /// Takes in a verdict; whether the walk goes on past this record.
    fn take(&mut self, inner: &Inner, verdict: Verdict) -> bool {
        match verdict {
            Verdict::Garbage => self.garbage += 1,
            Verdict::Copied(made) => self.copies.extend(made),
            Verdict::Deferred(creation) => {
                self.creations.push(creation);
                if self.creations.len() == self.group_max {
                    let (made, unqueued) = queue_creations(inner, &mut self.creations);
                    self.copies.extend(made);
                    if let Some(lsn) = unqueued {
                        self.hold(lsn);
                        self.passed = Some(lsn);
                        return false;
                    }
                }
            }
            Verdict::Needed => return false,
            Verdict::Hold(at) => {
                self.pin = at;
                return false;
            }
            Verdict::Full(made) => {
                self.copies.extend(made);
                return false;
            }
        }
        true
    }

    /// The head stays before `lsn`, a creation no group took.
    fn hold(&mut self, lsn: u64) {
        self.held = Some(self.held.map_or(lsn, |at| at.min(lsn)));
    }

    /// Queues the creations the walk met and has not grouped yet.
    fn flush_creations(&mut self, inner: &Inner) {
        if self.creations.is_empty() {
            return;
        }
        let (made, unqueued) = queue_creations(inner, &mut self.creations);
        self.copies.extend(made);
        if let Some(lsn) = unqueued {
            self.hold(lsn);
        }
    }

    /// The last LSN the ring may be trimmed to by what the walk passed, before its copies
    /// are known durable; `None` when it passed nothing.
    fn trim_bound(&self) -> Option<u64> {
        let trim_to = self.passed?;
        Some(match self.held {
            Some(lsn) => trim_to.min(lsn - 1),
            None => trim_to,
        })
    }
}

/// Makes the walk's copies durable and applies them, counts what it did, and trims the ring
/// past what it walked. A walk trims what it passed at once: it relocated (its copies hold
/// the head past what they copied), or it advances because clients wait for room.
fn finish(
    inner: &Inner,
    bounds: &Bounds,
    mut walk: Walk,
    mut trim_to: u64,
) -> Result<Walked, LogDriveError> {
    let head = bounds.head;
    match generation_record(inner, trim_to) {
        Some(Ok(marker)) => walk.copies.push(marker),
        Some(Err(())) => trim_to = head - 1,
        None => {}
    }
    let (relocated_records, relocated_bytes) = apply_copies(inner, walk.copies, &mut trim_to)?;
    count(inner, walk.garbage, relocated_records, relocated_bytes);
    let reclaimer = &inner.reclaimer;
    if trim_to >= head {
        inner
            .drive
            .trim(trim_to)
            .map_err(|error| LogDriveError::Io {
                reason: format!("trimming the ring to LSN {trim_to}: {error}"),
            })?;
        reclaimer
            .counters
            .ring_trims
            .fetch_add(1, Ordering::Relaxed);
        reclaimer.handles.ring_trims.increment(1);
    }
    if let Some(last) = bounds.segment_last {
        // Copies made out of a segment the head is still in: it must be finished.
        let partial = (relocated_records > 0 && trim_to < last).then_some(last);
        *lock(&reclaimer.partial) = partial;
    }
    Ok(Walked {
        progress: trim_to >= head || relocated_records > 0,
        relocated_bytes,
    })
}

/// Waits for each group of copies and applies the durable ones to their LogDrives: the
/// records and ring bytes relocated. A group refused room lowers `trim_to` to before the
/// records it would have copied, so the walk resumes there.
fn apply_copies(
    inner: &Inner,
    copies: Vec<Queued>,
    trim_to: &mut u64,
) -> Result<(u64, u64), LogDriveError> {
    let mut relocated_bytes = 0;
    let mut relocated_records = 0;
    for queued in copies {
        match queued.ticket.wait() {
            Ok(first) => {
                for (to, copy) in (first..).zip(&queued.copies) {
                    apply(inner, &copy.live, copy.from, &copy.carried, to);
                    if !matches!(copy.carried, Carried::Generation(_)) {
                        relocated_bytes += copy.bytes;
                        relocated_records += 1;
                    }
                }
            }
            // Not written (the reserve ran out despite the admission): the head stops
            // before them; the walk resumes there.
            Err(sealog::AppendError::RingFull { .. }) => {
                let from = queued.copies.iter().map(|copy| copy.from).min();
                *trim_to = from.map_or(*trim_to, |from| (*trim_to).min(from - 1));
            }
            Err(error) => return Err(append_error(error)),
        }
    }
    Ok((relocated_records, relocated_bytes))
}

/// Counts a step: the records it passed as garbage and the ones it relocated.
fn count(inner: &Inner, garbage: u64, relocated_records: u64, relocated_bytes: u64) {
    let reclaimer = &inner.reclaimer;
    let counters = &reclaimer.counters;
    counters.steps.fetch_add(1, Ordering::Relaxed);
    counters
        .garbage_records
        .fetch_add(garbage, Ordering::Relaxed);
    reclaimer.handles.garbage_records.increment(garbage);
    if relocated_records == 0 {
        return;
    }
    counters.relocation_steps.fetch_add(1, Ordering::Relaxed);
    counters
        .relocated_records
        .fetch_add(relocated_records, Ordering::Relaxed);
    counters
        .relocated_bytes
        .fetch_add(relocated_bytes, Ordering::Relaxed);
    reclaimer
        .handles
        .relocated_records
        .increment(relocated_records);
    reclaimer.handles.relocated_bytes.increment(relocated_bytes);
}

/// Whether the last relocating walk stopped at or past the ring's head at a record that
/// still stops one (what lies before it stays garbage): no read needed to know the head
/// cannot move.
pub(crate) fn still_pinned(inner: &Inner, head: u64) -> bool {
    let Some(pin) = lock(&inner.reclaimer.pin).clone() else {
        return false;
    };
    if pin.lsn() < head {
        return false;
    }
    match pin {
        Pin::Unknown { .. } => true,
        Pin::Dying { key, .. } => lock(&inner.registry).dying.contains_key(&key),
    }
}
