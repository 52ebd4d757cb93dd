//! The finish at the break, in three steps: find the facts there (the probe after the break,
//! in quarantine mode the damaged batch walked, the trim point), decide by the decision table
//! ([`crate::decision`], the one place the rules live), and act on the row taken: the log ends
//! clean, a torn tail is cut, corruption fails the replay or is cut, or quarantine records the
//! damage and either ends the log after it or says where the walk goes on.

use crate::decision::{Decision, Facts, Row};
use crate::error::ReplayError;
use crate::format::{Position, ENTRY_HEADER_SIZE};
use crate::replay::check::{Check, Corruption, Evidence};
use crate::replay::damaged::DamagedWalk;
use crate::replay::probe::{Break, Probe, Resume};
use crate::replay::report::{
    Dropped, Invalidate, Outcome, RecoveryMode, RecoveryReport, Scan, TornTail, Visit,
    UNREADABLE_RUNS_REPORTED,
};
use crate::replay::scanner::{BreakAt, Failure, Scanner};
use crate::source::RingSource;

/// What was found at a break before the decision table is consulted: the break as the probe
/// saw it, what the probe found, the damaged batch (quarantine mode), and the evidence they
/// make for the table's facts.
struct BreakFacts {
    /// The break, with where its probe stopped and, in quarantine mode, the resume search.
    at_break: Break,
    /// Which scan this is (a hinted probe's end moved to where the probe followed the log).
    scan: Scan,
    /// Reads ahead as the walk had them, put back when the walk goes on after the damage.
    ahead_stop: Option<(u64, u64)>,
    /// In quarantine mode: the damaged batch, walked record by record.
    walk: Option<DamagedWalk>,
    /// What the probe after the break found.
    probe: Probe,
    /// The evidence that unreadable blocks hold what the log needs (the `unread` fact).
    unread: Option<Evidence>,
    /// The trim point as evidence, when the cut is at or below it.
    trim_evidence: Option<Evidence>,
    /// The evidence that the data at the break was acknowledged (the `acked` fact).
    acked: Option<Evidence>,
}

impl BreakFacts {
    /// The decision table's facts at this break, in `mode`.
    fn table_facts(&self, mode: RecoveryMode) -> Facts {
        Facts {
            ok: false,
            skip: false,
            acked: self.acked.is_some(),
            beyond: self.probe.beyond.is_some(),
            unread: self.unread.is_some(),
            damage: self.at_break.failure.is_damage() || self.probe.records > 0,
            trunc: mode == RecoveryMode::TruncateAtCorruption,
            quar: mode == RecoveryMode::Quarantine,
            resume: self.probe.resume.is_some(),
        }
    }
}

impl<'s, S: RingSource + ?Sized> Scanner<'s, S> {
    /// Decides what the break `at` is: completes the report (`None`) or fails, or in quarantine
    /// mode, where a valid batch of the log follows the damage, records the damage (visiting
    /// what of it lies above the trim point, in LSN order) and says where the walk goes on.
    pub(super) fn finish_at_break(
        &mut self,
        at: &BreakAt,
        report: &mut RecoveryReport,
        visit: &mut dyn FnMut(Visit<'_, '_>),
    ) -> Result<Option<Resume>, ReplayError> {
        let found = self.find_at_break(at, report);
        let row = self.decide(found.table_facts(self.mode));
        let corruption = self.note_probe(&found, row.decision, report);
        if row.decision == Decision::QuarantineAndContinue {
            let resume = self.step_over_damage(at, found, corruption, report, visit);
            return Ok(Some(resume));
        }
        self.end_at_break(at, row, found, corruption, report, visit)?;
        Ok(None)
    }

    /// Finds the facts at the break `at`: where its probe stops, the damaged batch (quarantine
    /// mode, walked before the probe), what the probe finds, and the evidence they make. The
    /// report learns how far the probe looked.
    fn find_at_break(&mut self, at: &BreakAt, report: &mut RecoveryReport) -> BreakFacts {
        let BreakAt {
            cut,
            expected_lsn,
            lineage_incarnation,
            failure,
            ..
        } = *at;
        let geometry = self.geometry;
        let trim_lsn = self.control.trim_lsn;
        // The first live LSN a cut here would drop (trim LSN < u64::MAX / 2: validated).
        let drop_lsn = expected_lsn.max(trim_lsn + 1);
        // Entries (or damaged LSNs) before the cut stay live exactly when the walk went past
        // one above the trim point (every row that ends the log ends it at the cut or after,
        // with `next_lsn` at most `trim_lsn + 1` when it did not).
        let live_before_cut = expected_lsn > trim_lsn + 1;
        let end = self.break_end(cut, live_before_cut);
        // Reads ahead as the walk had them: a walk that goes on after quarantined damage reads
        // ahead as before the probe moved their stop.
        let ahead_stop = self.reader.ahead_stop;
        let (scan, probe_end) = self.probe_stop(cut, end);
        // In quarantine mode the damaged batch's headers are walked first, visiting nothing:
        // the batch the log may resume at lies past them and continues their LSNs.
        let walk = (self.mode == RecoveryMode::Quarantine).then(|| self.walk_damaged(at));
        let at_break = Break {
            cut,
            expected_lsn,
            drop_lsn,
            failure,
            end,
            probe_end,
            resume: walk.as_ref().map(|walk| walk.search(at, &geometry)),
        };
        let probe = self.probe(&at_break, lineage_incarnation);
        let scan = note_probe_end(scan, probe_end, &probe, cut, report);
        let unread = probe
            .unreadable
            .evidence(geometry.window_bytes_max, drop_lsn, probe.lsn_max);
        // Only acknowledged entries are ever trimmed: a cut at or below the trim point drops
        // acknowledged data whatever the watermarks say.
        let trim_evidence = (expected_lsn <= trim_lsn).then_some(Evidence::TrimPoint { trim_lsn });
        let acked = probe.acked.or(trim_evidence);
        BreakFacts {
            at_break,
            scan,
            ahead_stop,
            walk,
            probe,
            unread,
            trim_evidence,
            acked,
        }
    }

    /// Records what the probe found whatever the row (the incarnations it met, the blocks it
    /// could not read), and names the corruption of a row that fails, cuts or quarantines.
    fn note_probe(
        &self,
        found: &BreakFacts,
        decision: Decision,
        report: &mut RecoveryReport,
    ) -> Option<Corruption> {
        let probe = &found.probe;
        // A writer's new incarnation must be above every record found after a break, so that
        // its cut makes them all stale the moment its control block is durable.
        report.incarnation_max = report.incarnation_max.max(probe.incarnation_max);
        let corruption = matches!(
            decision,
            Decision::FailCorruption
                | Decision::CutCorruption
                | Decision::QuarantineAndContinue
                | Decision::QuarantineAtEnd
        )
        .then(|| {
            let evidence = found.acked.or(probe.beyond);
            self.corruption_at(&found.at_break.failure, evidence, found.unread)
        });
        // Blocks a probe could not read are reported (after those the walk found in segment
        // tails it skipped, in log order), a quarantined break's among them: one may have
        // hidden a batch the log would have resumed at.
        report.unreadable_blocks += probe.unreadable.blocks;
        let room = UNREADABLE_RUNS_REPORTED.saturating_sub(report.unreadable_runs.len());
        report
            .unreadable_runs
            .extend(probe.unreadable.runs.iter().take(room).cloned());
        corruption
    }

    /// Steps over quarantined damage that a valid batch of the log follows (the rows that
    /// step over): records the break, visits what is known of the damage, and returns the
    /// batch the walk goes on at.
    fn step_over_damage(
        &mut self,
        at: &BreakAt,
        found: BreakFacts,
        corruption: Option<Corruption>,
        report: &mut RecoveryReport,
        visit: &mut dyn FnMut(Visit<'_, '_>),
    ) -> Resume {
        let walk = found.walk.expect("quarantine mode walks the damaged batch");
        let resume = found
            .probe
            .resume
            .expect("the row is taken when a batch resumes the log");
        report.note_break(corruption.expect("a quarantine row's corruption"));
        if resume.before_walk {
            // Nothing at the cut, and the log goes on in the rest of its segment: the LSNs
            // from the cut to there are lost, and the batch walked is not the damage.
            let at_cut = DamagedWalk::nothing_at_cut(at);
            let lost = at.expected_lsn..resume.first_lsn;
            self.note_lost(at, &at_cut, lost, report, visit);
        } else {
            // The damaged batch, visited: its intact records are live entries, its records
            // whose header survived are damage with that header.
            self.visit_walked(&walk, at, report, visit);
            // From the first header lost to the batch the log resumes at, nothing is known
            // of the LSNs but that they were there.
            self.note_lost(at, &walk, walk.next_lsn..resume.first_lsn, report, visit);
        }
        self.reader.ahead_stop = found.ahead_stop;
        resume
    }

    /// Ends the log at the break as the row `row` says (clean, a torn tail cut, corruption
    /// failed or cut, quarantined damage at the log's end), completing the report: where the
    /// writer goes on, what it must zero first, and the live LSNs.
    fn end_at_break(
        &mut self,
        at: &BreakAt,
        row: &'static Row,
        found: BreakFacts,
        corruption: Option<Corruption>,
        report: &mut RecoveryReport,
        visit: &mut dyn FnMut(Visit<'_, '_>),
    ) -> Result<(), ReplayError> {
        note_end(at, row, &found, report);
        report.row_hits = self.row_hits;
        // End of what was found after the cut: the failing block, and every record seen.
        let mut found_end = self.found_end(at, &found);
        // Where the region a writer zeroes after the log's end stops (see `break_end`).
        let mut invalidate_limit = found.at_break.end;
        match row.decision {
            Decision::EndOfLog => {
                report.outcome = Outcome::Clean;
            }
            Decision::CutTornTail => self.cut_torn_tail(at, &found, found_end, report),
            Decision::FailCorruption => {
                let corruption = corruption.expect("a corruption row's corruption");
                return Err(ReplayError::Corruption(Box::new(corruption)));
            }
            Decision::CutCorruption => {
                self.cut_corruption(at, &found, found_end, corruption, report);
            }
            Decision::QuarantineAtEnd => {
                let corruption = corruption.expect("a quarantine row's corruption");
                let (log_end, limit) =
                    self.quarantine_at_end(at, &found, corruption, report, visit);
                invalidate_limit = limit;
                found_end = found_end.max(log_end);
            }
            Decision::Accept | Decision::SkipToNextSegment | Decision::QuarantineAndContinue => {
                unreachable!("a break is never a row that continues the walk here")
            }
        }
        self.note_invalidate(&found.probe, found_end, invalidate_limit, report);
        // `next_lsn > trim_lsn + 1 >= 1` whenever `first_lsn` is set: no underflow.
        report.first_lsn = (report.next_lsn > report.trim_lsn + 1).then_some(report.trim_lsn + 1);
        report.last_lsn = report.first_lsn.map(|_| report.next_lsn - 1);
        Ok(())
    }

    /// The end of what the break's own failure shows was written: the failing block, when it
    /// is damage, else the cut.
    fn failure_end(&self, at: &BreakAt) -> Position {
        let failure = at.failure;
        let block = self.geometry.block_size_bytes;
        let failure_end = Position {
            offset: (failure.position.offset / block + 1) * block,
            ..failure.position
        };
        if failure.is_damage() {
            failure_end.max(at.cut)
        } else {
            at.cut
        }
    }

    /// The end of what was found after the cut: the failing block, every record the probe
    /// found, and an unreadable run that is cut (or dropped) with the break.
    fn found_end(&self, at: &BreakAt, found: &BreakFacts) -> Position {
        let mut found_end = self.failure_end(at);
        if let Some(end) = found.probe.end_max {
            found_end = found_end.max(end);
        }
        // An unreadable run at the break is cut with it (or, as corruption, dropped with it).
        if let Some(run) = found.probe.unreadable.first_run {
            if run.at_break || found.unread.is_some() {
                found_end = found_end.max(run.end);
            }
        }
        found_end
    }

    /// Cuts a torn tail at the break (`@torn`): never-acknowledged data, reported as cut.
    fn cut_torn_tail(
        &self,
        at: &BreakAt,
        found: &BreakFacts,
        found_end: Position,
        report: &mut RecoveryReport,
    ) {
        report.outcome = Outcome::TornTail;
        report.torn = Some(TornTail {
            start: at.cut,
            first_lsn: at.expected_lsn,
            last_lsn: found.probe.lsn_max.max(at.expected_lsn),
            bytes: self.geometry.distance_bytes(at.cut, found_end),
            check: at.failure.check,
        });
    }

    /// Cuts acknowledged data at the break in truncating mode (the salvage rows), reporting the
    /// corruption and what was dropped.
    fn cut_corruption(
        &self,
        at: &BreakAt,
        found: &BreakFacts,
        found_end: Position,
        corruption: Option<Corruption>,
        report: &mut RecoveryReport,
    ) {
        let drop_lsn = found.at_break.drop_lsn;
        let last_lsn = found.probe.lsn_max.max(at.expected_lsn);
        report.outcome = Outcome::Truncated;
        report.corruption = corruption;
        report.dropped = Some(Dropped {
            first_lsn: drop_lsn,
            // A cut at or below the trim point, with nothing seen past it: the range
            // starts and ends at the first LSN dropped, as the field's doc says.
            last_lsn: last_lsn.max(drop_lsn),
            bytes: self.geometry.distance_bytes(at.cut, found_end),
        });
        // Never hand out an LSN at or below the durable trim point again: when the cut
        // is at or below it, the log goes on at the cut with the LSN after the trim
        // point (nothing before the cut is live, so the head moves to the cut).
        report.next_lsn = at.expected_lsn.max(self.control.trim_lsn + 1);
    }

    /// Ends the log after quarantined damage that no valid batch of the log follows
    /// (`@quarantine_end_*`): records the break, visits the damaged batch and the LSNs lost
    /// after it, and sets where the writer goes on and what becomes stale. Returns the end of
    /// what the log keeps there and where the region a writer zeroes stops.
    fn quarantine_at_end(
        &mut self,
        at: &BreakAt,
        found: &BreakFacts,
        corruption: Corruption,
        report: &mut RecoveryReport,
        visit: &mut dyn FnMut(Visit<'_, '_>),
    ) -> (Position, Position) {
        let cut = at.cut;
        let trim_lsn = self.control.trim_lsn;
        let walk = found
            .walk
            .as_ref()
            .expect("quarantine mode walks the damaged batch");
        report.note_break(corruption);
        self.visit_walked(walk, at, report, visit);
        // The writer goes on after everything of the log found (the damaged batch,
        // the failing block, every valid record), so nothing of the damage (nor the
        // records that proved it acknowledged) is overwritten or zeroed, and the next
        // open finds it again. Not after an unreadable run's whole extent: a hinted
        // probe sees less of it than a full one, and both must end the log alike.
        let log_end = self
            .failure_end(at)
            .max(found.probe.end_max.unwrap_or(cut))
            .max(walk.end);
        let shown = self.shown_acknowledged(at, found, walk, &corruption, log_end);
        self.note_lost(at, walk, walk.next_lsn..shown + 1, report, visit);
        report.outcome = Outcome::Quarantined;
        // `shown` is at most `room`, far below u64::MAX (the walk's LSNs are, see
        // `validate_control`), or the LSN before the walk's next one.
        report.next_lsn = (shown + 1).max(trim_lsn + 1);
        // With nothing of the log above the trim point (the damage all trimmed), the
        // log ends at the break as any cut does: the writer's head moves there.
        let live = report.next_lsn > trim_lsn + 1;
        report.next_position = if live {
            self.batch_boundary_at(log_end)
        } else {
            cut
        };
        // The skipped stretch becomes stale with the new incarnation, from where a batch
        // resuming the log was looked for (the damaged batch's end, or the block after
        // its first when none of its headers passed): the damaged batch itself stays as
        // it was found, so a later open walks it and names it the same.
        report.cut = if live {
            walk.resume_after.min(report.next_position)
        } else {
            report.next_position
        };
        // The plan keeps the head while anything is live, the walk's records in the
        // damaged batch included, though none lay before the break.
        (log_end, self.break_end(report.next_position, live))
    }

    /// The highest LSN shown to be acknowledged where quarantined damage ends the log: what the
    /// last damaged range runs to.
    fn shown_acknowledged(
        &self,
        at: &BreakAt,
        found: &BreakFacts,
        walk: &DamagedWalk,
        corruption: &Corruption,
        log_end: Position,
    ) -> u64 {
        // No batch of the log follows: the damage runs to the highest LSN shown to be
        // acknowledged, and no LSN after it ever was. A watermark found after the
        // break, or the trim point, shows exactly how far; a valid record beyond the
        // window, or a readable one after unreadable blocks, shows the LSNs before it
        // were written; a run of unreadable blocks longer than the window shows only
        // the LSN strict mode names. Never more than the records between the break
        // and the writer's next position could hold (`room`), so neither a crafted
        // LSN nor a crafted trim point makes a range past the ring's size.
        let room = (at.expected_lsn - 1).saturating_add(
            self.geometry.distance_bytes(at.cut, log_end) / ENTRY_HEADER_SIZE as u64,
        );
        let evidence_shows = match corruption.evidence {
            Evidence::WatermarkCovers { .. }
            | Evidence::TrimPoint { .. }
            | Evidence::Unreadable {
                log_after: None, ..
            } => 0,
            Evidence::BeyondWindow { lsn, .. } => lsn.saturating_sub(1),
            Evidence::Unreadable {
                log_after: Some(_),
                last_lsn,
                ..
            } => last_lsn.map_or(0, |last| last.saturating_sub(1)),
        };
        let trim_shown = found.trim_evidence.map_or(0, |_| self.control.trim_lsn);
        evidence_shows
            .max(found.probe.acked_lsn_max)
            .max(trim_shown)
            .max(corruption.lsn)
            .min(room)
            .max(walk.next_lsn - 1)
    }

    /// Sets the region a writer must zero before its first append, when the log's end cut
    /// anything or stale records lie after it: from the writer's next position over
    /// everything found, never past `limit`.
    fn note_invalidate(
        &self,
        probe: &Probe,
        found_end: Position,
        limit: Position,
        report: &mut RecoveryReport,
    ) {
        if report.outcome != Outcome::Clean || probe.stale_records > 0 {
            let start = report.next_position;
            let dirty_end = found_end
                .max(probe.stale_end_max.unwrap_or(start))
                .max(start);
            report.invalidate = Some(self.invalidate_region(start, dirty_end, limit));
        }
    }

    /// The corruption a row that ends in failure (or salvage, or quarantine) names: the failed
    /// check with the evidence that it held acknowledged data, or the unreadable run.
    fn corruption_at(
        &self,
        failure: &Failure,
        evidence: Option<Evidence>,
        unread: Option<Evidence>,
    ) -> Corruption {
        let geometry = self.geometry;
        match (evidence, unread) {
            (Some(evidence), _) => Corruption {
                position: failure.position,
                ring_offset: geometry.ring_offset(failure.position),
                lsn: failure.lsn,
                check: failure.check,
                evidence,
            },
            // Nothing else is wrong: the unreadable run is what the row names.
            (None, Some(evidence @ Evidence::Unreadable { at, first_lsn, .. })) => Corruption {
                position: at,
                ring_offset: geometry.ring_offset(at),
                lsn: first_lsn,
                check: Check::ReadError,
                evidence,
            },
            (None, _) => unreachable!("a corruption row has evidence"),
        }
    }

    /// The region after a cut that may hold bytes of this log: everything found, then an
    /// in-flight window (with room for segment changes) past it, never past `limit` (where a
    /// full scan's probe stops: [`Scanner::break_end`]; a hinted scan invalidates as far, so
    /// both plan the same writes).
    fn invalidate_region(&self, cut: Position, found_end: Position, limit: Position) -> Invalidate {
        // The writer's in-flight window at the crash ended its writes after the last record
        // found (in truncating mode that can be far past the cut): cover a window from there.
        let end = self.window_reach(found_end.max(cut), limit);
        let end = end.max(found_end).min(limit);
        Invalidate {
            start: cut,
            end: end.max(cut),
        }
    }
}

/// Moves a hinted scan's probe end to where the probe followed the log, and records in the
/// report how far the probe looked. Returns the scan as it was made.
fn note_probe_end(
    mut scan: Scan,
    probe_end: Position,
    probe: &Probe,
    cut: Position,
    report: &mut RecoveryReport,
) -> Scan {
    let mut scan_end = probe_end.max(cut);
    if let Some(extended) = probe.extended_to {
        if let Scan::Hinted { probe_end, .. } = &mut scan {
            *probe_end = extended;
        }
        scan_end = extended.max(cut);
    }
    // A writer's open flushes every segment a probe looked at (a quarantined break's too).
    report.scan_end = report.scan_end.max(scan_end);
    scan
}

/// What every end at a break reports alike: the row and the check that ended the scan, the
/// scan made, the stale records found, and the writer's next place (the cut, until the row
/// says otherwise).
fn note_end(at: &BreakAt, row: &'static Row, found: &BreakFacts, report: &mut RecoveryReport) {
    report.end_row = row.label;
    report.end_check = at.failure.check;
    report.scan = found.scan;
    report.stale_records = found.probe.stale_records;
    report.next_lsn = at.expected_lsn;
    report.next_position = at.cut;
    report.cut = at.cut;
}
