//! The walk: from the head, batch by batch, each boundary looked up in the decision table
//! (accept the batch, skip to the next segment, or break), until a break ends the log
//! ([`Scanner::finish_at_break`]) or quarantine steps over it and the walk goes on.

use crate::decision::{Decision, Facts};
use crate::error::ReplayError;
use crate::format::Position;
use crate::replay::check::Check;
use crate::replay::report::{RecoveryReport, UnreadableRun, Visit, UNREADABLE_RUNS_REPORTED};
use crate::replay::scanner::{BreakAt, Failure, GoodBatch, Scanner};
use crate::source::RingSource;

/// Where the walk is: the batch boundary it checks next, the LSN expected there, and the
/// incarnation floor it keeps (the lineage so far).
#[derive(Clone, Copy, Debug)]
struct WalkAt {
    cursor: Position,
    expected_lsn: u64,
    lineage_incarnation: u32,
}

impl<'s, S: RingSource + ?Sized> Scanner<'s, S> {
    /// Walks the log from the head, batch by batch, until a break ends it, and returns the
    /// report: each boundary is looked up in the decision table (accept, skip to the next
    /// segment, or break), and quarantine's steps over damage go on where the log resumes.
    pub(super) fn run(
        &mut self,
        visit: &mut dyn FnMut(Visit<'_, '_>),
    ) -> Result<RecoveryReport, ReplayError> {
        let geometry = self.geometry;
        let mut walk = WalkAt {
            cursor: self.control.head,
            expected_lsn: self.control.head_lsn,
            // Nothing older than the head's incarnation is accepted after the head.
            lineage_incarnation: self.control.head_incarnation,
        };
        let mut report = self.empty_report();
        // The walk never passes the head's segment on the next lap: the writer cannot enter
        // it, so the segment-start checks there fail (older lap) and the walk stops.
        let walk_limit = u64::from(geometry.segment_count) + 1;
        let first_linear = geometry.linear_segment(walk.cursor);
        loop {
            assert!(geometry.linear_segment(walk.cursor) - first_linear <= walk_limit);
            let failure = match self.check_walk_batch(&walk) {
                Ok(good) => {
                    self.accept_batch(&mut walk, good, &mut report, visit);
                    continue;
                }
                Err(failure) => failure,
            };
            if self.skip_segment_rest(&walk, &failure, &mut report) {
                walk.cursor = geometry.next_segment_start(walk.cursor);
                continue;
            }
            let at = BreakAt {
                cut: walk.cursor,
                expected_lsn: walk.expected_lsn,
                lineage_incarnation: walk.lineage_incarnation,
                failure: self.named_failure(walk.cursor, walk.expected_lsn, failure),
                cut_failure: failure,
            };
            match self.finish_at_break(&at, &mut report, visit)? {
                // Quarantine stepped over damage: the walk goes on at the batch after it, with
                // the lineage it had (that batch passed the floor the probe kept, at least as
                // high as the walk's).
                Some(resume) => {
                    walk.cursor = resume.position;
                    walk.expected_lsn = resume.first_lsn;
                }
                None => return Ok(report),
            }
        }
    }

    /// Checks the batch where the walk is, as [`Scanner::check_batch`] does, except in the
    /// head's segment on the next lap, where the walk never goes.
    fn check_walk_batch(&mut self, walk: &WalkAt) -> Result<GoodBatch, Failure> {
        let geometry = self.geometry;
        let cursor = walk.cursor;
        // The writer never enters the head's segment on the next lap. A walk from the head
        // only gets there by a segment header of that lap, which the head's own segment
        // header (the same block) contradicts; but one that stepped over damage at the head
        // (quarantine mode) could, over a crafted header: it stops there all the same.
        let head_lap_over =
            geometry.linear_segment(cursor) >= geometry.linear_segment(self.probe_end());
        if head_lap_over {
            Err(Failure {
                position: Position {
                    offset: 0,
                    ..cursor
                },
                lsn: walk.expected_lsn,
                check: Check::SegmentStaleLap,
                inside_batch: false,
            })
        } else {
            self.check_batch(cursor, walk.expected_lsn, walk.lineage_incarnation)
        }
    }

    /// Accepts the batch that checked out where the walk is (`@accept`): visits its live
    /// records, counts it in the report, and moves the walk past it.
    fn accept_batch(
        &mut self,
        walk: &mut WalkAt,
        good: GoodBatch,
        report: &mut RecoveryReport,
        visit: &mut dyn FnMut(Visit<'_, '_>),
    ) {
        let decision = self.decide(Facts {
            ok: true,
            ..Facts::default()
        });
        debug_assert_eq!(decision.decision, Decision::Accept);
        let trim_lsn = self.control.trim_lsn;
        self.visit_batch(walk.cursor, good, trim_lsn, report, visit);
        report.batches += 1;
        report.watermark_max = report.watermark_max.max(good.watermark);
        report.incarnation_max = report.incarnation_max.max(good.incarnation);
        walk.lineage_incarnation = good.incarnation;
        // Starts at the head LSN (<= trim LSN + 1 < u64::MAX / 2, checked by
        // `validate_control`) and the walk covers at most one lap plus a segment,
        // at most one record per 64 bytes: far below u64::MAX.
        walk.expected_lsn += u64::from(good.records);
        walk.cursor = self.after_batch(walk.cursor, good.bytes);
    }

    /// Whether the walk skips the rest of its segment (`@skip`): the batch where it is failed,
    /// and the next segment continues the log. Counts the skip in the report (and an
    /// unreadable block left behind, as free space).
    fn skip_segment_rest(
        &mut self,
        walk: &WalkAt,
        failure: &Failure,
        report: &mut RecoveryReport,
    ) -> bool {
        let skip = walk.cursor.offset != self.geometry.segment_data_offset()
            && self.next_segment_continues(
                walk.cursor,
                walk.expected_lsn,
                walk.lineage_incarnation,
            );
        if !skip {
            return false;
        }
        let decision = self.decide(Facts {
            skip: true,
            ..Facts::default()
        });
        debug_assert_eq!(decision.decision, Decision::SkipToNextSegment);
        if failure.check == Check::ReadError {
            // The next segment continues the log, so the writer left this segment's
            // rest unused: an unreadable block there is free space, reported only.
            report.unreadable_blocks += 1;
            if report.unreadable_runs.len() < UNREADABLE_RUNS_REPORTED {
                report.unreadable_runs.push(UnreadableRun {
                    start: failure.position,
                    blocks: 1,
                });
            }
        }
        report.segments_skipped += 1;
        true
    }
}
