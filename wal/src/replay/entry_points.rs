//! Replay's entry points: [`replay`] and [`replay_visiting`] (the scan, handing the visitor
//! every live entry and, in quarantine mode, the damage), [`scan`] (the report alone), and
//! [`entries`], which reads a replayed log again batch by batch, owned.

use crate::error::ReplayError;
use crate::format::{ControlBlock, EmbedderHeader, Kind, Position};
use crate::replay::check::Check;
use crate::replay::control::{read_controls, trusted_hint};
use crate::replay::reader::CountingSource;
use crate::replay::report::{Entry, Outcome, RecoveryMode, RecoveryReport, ReplayOptions, Visit};
use crate::replay::scanner::{BreakAt, Failure, Scanner};
use crate::source::RingSource;

/// Replays the ring without visiting entries: the report alone.
pub fn scan<S: RingSource + ?Sized>(
    source: &mut S,
    options: &ReplayOptions,
) -> Result<RecoveryReport, ReplayError> {
    replay(source, options, &mut |_| {})
}

/// Replays the ring, calling `visit` with every recovered live entry in LSN order, and returns
/// the report. In strict mode, damaged acknowledged data is [`ReplayError::Corruption`] (the
/// entries visited before it are then not a recovered log). In quarantine mode the damage is
/// in the report; [`replay_visiting`] also hands it to the visitor, in LSN order.
pub fn replay<S: RingSource + ?Sized>(
    source: &mut S,
    options: &ReplayOptions,
    visit: &mut dyn FnMut(&Entry<'_>),
) -> Result<RecoveryReport, ReplayError> {
    replay_visiting(source, options, &mut |visited| {
        if let Visit::Entry(entry) = visited {
            visit(entry);
        }
    })
}

/// [`replay`], handing the visitor every live entry and, in quarantine mode, every damaged
/// record or range above the trim point, in one LSN order: each LSN from the trim point to
/// the report's `next_lsn` exactly once, as an entry or inside a damaged range.
pub fn replay_visiting<S: RingSource + ?Sized>(
    source: &mut S,
    options: &ReplayOptions,
    visit: &mut dyn FnMut(Visit<'_, '_>),
) -> Result<RecoveryReport, ReplayError> {
    let mut counting = CountingSource {
        inner: source,
        bytes_read: 0,
    };
    let (control, other) = read_controls(&mut counting)?;
    let hint = trusted_hint(&control, other.as_ref(), options.scan);
    let report = {
        let mut scanner = Scanner::new(&mut counting, control, options);
        scanner.hint = hint;
        if let Ok(limit) = hint {
            // While the walk reads the live entries, reads ahead stop at the hint: a log that
            // runs past it is followed all the same, with reads of just what it needs.
            scanner.read_ahead_until(limit);
        }
        scanner.run(visit)?
    };
    Ok(RecoveryReport {
        bytes_read: counting.bytes_read,
        ..report
    })
}

/// A recovered entry, owned: what [`entries`] yields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecoveredEntry {
    /// Its LSN.
    pub lsn: u64,
    /// Its kind (never padding).
    pub kind: Kind,
    /// The embedder's header (checked with the entry header).
    pub embedder: EmbedderHeader,
    /// Its payload, checked against its CRC.
    pub payload: Vec<u8>,
    /// Where its header lies.
    pub position: Position,
    /// Where its batch starts.
    pub batch: Position,
    /// The LSN of its batch's first record.
    pub batch_first_lsn: u64,
    /// The incarnation that wrote it.
    pub incarnation: u32,
}

/// Iterates over the live entries a replay recovered, in LSN order, reading them again from
/// the source batch by batch (memory stays bounded by one batch, whatever the ring's size) and
/// checking them again. Yields [`ReplayError::Changed`] if the ring no longer holds what the
/// report describes. In quarantine mode it steps over the damage as replay did (probing it
/// again), with the intact records of a damaged batch among the entries.
pub fn entries<'s, S: RingSource + ?Sized>(
    source: &'s mut S,
    report: &RecoveryReport,
    options: &ReplayOptions,
) -> RecoveredEntries<'s, S> {
    let control = ControlBlock {
        trim_lsn: report.trim_lsn,
        ..report.control
    };
    RecoveredEntries {
        scanner: Scanner::new(source, control, options),
        cursor: control.head,
        expected_lsn: control.head_lsn,
        end_lsn: report.next_lsn,
        lineage_incarnation: control.head_incarnation,
        batch: std::collections::VecDeque::new(),
        failed: false,
    }
}

/// The iterator [`entries`] returns.
pub struct RecoveredEntries<'s, S: RingSource + ?Sized> {
    scanner: Scanner<'s, S>,
    cursor: Position,
    expected_lsn: u64,
    end_lsn: u64,
    lineage_incarnation: u32,
    batch: std::collections::VecDeque<RecoveredEntry>,
    failed: bool,
}

impl<S: RingSource + ?Sized> RecoveredEntries<'_, S> {
    /// Reads the next batch into `self.batch`, skipping unused segment tails as replay did.
    fn fill(&mut self) -> Result<(), ReplayError> {
        let geometry = self.scanner.geometry;
        let trim_lsn = self.scanner.control.trim_lsn;
        // Bounded: each turn accepts a batch or moves to the next segment, at most one ring.
        for _ in 0..=u64::from(geometry.segment_count) * 2 {
            let checked =
                self.scanner
                    .check_batch(self.cursor, self.expected_lsn, self.lineage_incarnation);
            match checked {
                Ok(good) => {
                    let batch = &mut self.batch;
                    self.scanner
                        .for_each_record(self.cursor, good, &mut |entry| {
                            if entry.lsn > trim_lsn {
                                batch.push_back(RecoveredEntry::from(entry));
                            }
                        });
                    self.lineage_incarnation = good.incarnation;
                    // Bounded as in the walk (see `validate_control`).
                    self.expected_lsn += u64::from(good.records);
                    self.cursor = self.scanner.after_batch(self.cursor, good.bytes);
                    return Ok(());
                }
                Err(failure) => {
                    let skip = self.cursor.offset != geometry.segment_data_offset()
                        && self.scanner.next_segment_continues(
                            self.cursor,
                            self.expected_lsn,
                            self.lineage_incarnation,
                        );
                    if skip {
                        self.cursor = geometry.next_segment_start(self.cursor);
                        continue;
                    }
                    let changed = ReplayError::Changed {
                        position: failure.position,
                        lsn: failure.lsn,
                        check: failure.check,
                    };
                    if self.scanner.mode != RecoveryMode::Quarantine {
                        return Err(changed);
                    }
                    // Damage quarantine stepped over when it replayed: step over it again the
                    // same way (the same probe and the same table), taking the damaged batch's
                    // intact records on the way.
                    return self.step_over(failure).ok_or(changed);
                }
            }
        }
        Err(ReplayError::Changed {
            position: self.cursor,
            lsn: self.expected_lsn,
            check: Check::SegmentMismatch,
        })
    }
}

impl<S: RingSource + ?Sized> RecoveredEntries<'_, S> {
    /// Steps over the quarantined damage the walk broke at (`failure`), queueing the damaged
    /// batch's intact records: `Some` once it did (the walk goes on at the batch the log
    /// resumes at, or the log ends there), `None` when the damage is not what replay stepped
    /// over (the ring changed).
    fn step_over(&mut self, failure: Failure) -> Option<()> {
        let at = BreakAt {
            cut: self.cursor,
            expected_lsn: self.expected_lsn,
            lineage_incarnation: self.lineage_incarnation,
            failure: self
                .scanner
                .named_failure(self.cursor, self.expected_lsn, failure),
            cut_failure: failure,
        };
        let mut scratch = self.scanner.empty_report();
        let batch = &mut self.batch;
        let stepped = self
            .scanner
            .finish_at_break(&at, &mut scratch, &mut |visited| {
                if let Visit::Entry(entry) = visited {
                    batch.push_back(RecoveredEntry::from(entry));
                }
            });
        match stepped {
            Ok(Some(resume)) => {
                self.cursor = resume.position;
                self.expected_lsn = resume.first_lsn;
                Some(())
            }
            Ok(None) if scratch.outcome == Outcome::Quarantined => {
                // The log ends at this damage: what the damaged batch held was the last.
                self.expected_lsn = self.end_lsn;
                Some(())
            }
            _ => None,
        }
    }
}

impl From<&Entry<'_>> for RecoveredEntry {
    fn from(entry: &Entry<'_>) -> RecoveredEntry {
        RecoveredEntry {
            lsn: entry.lsn,
            kind: entry.kind,
            embedder: entry.embedder,
            payload: entry.payload.to_vec(),
            position: entry.position,
            batch: entry.batch,
            batch_first_lsn: entry.batch_first_lsn,
            incarnation: entry.incarnation,
        }
    }
}

impl<S: RingSource + ?Sized> Iterator for RecoveredEntries<'_, S> {
    type Item = Result<RecoveredEntry, ReplayError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(entry) = self.batch.pop_front() {
                return Some(Ok(entry));
            }
            if self.failed || self.expected_lsn >= self.end_lsn {
                return None;
            }
            if let Err(error) = self.fill() {
                self.failed = true;
                return Some(Err(error));
            }
        }
    }
}
