//! Replay's decision table: what to do at the batch boundary the scan has reached, given the
//! facts found there. The table is data; [`decide`] looks the facts up in it and the
//! `decision_table_is_exhaustive` test proves that every combination of facts matches exactly
//! one row, as TigerBeetle does for its journal's `recovery_cases`. Replay computes the facts
//! (in `replay/`) and acts on the decision; it has no other branch that decides what is kept.
//!
//! The facts, in column order:
//!
//! - `ok`: a whole, valid batch continues the log here. Every record's header CRC, payload
//!   CRC, magic, version, ring, position, lap, LSN continuity, incarnation order and the
//!   batch's tiling check out; at a segment's first data block, its segment header too.
//! - `skip`: the batch here is not its segment's first, and the next segment's header is valid
//!   for the expected lap, starts at the expected LSN and is not of an older incarnation than
//!   the log accepts there (a stale header is no sign of this log): the writer left the rest
//!   of this segment unused.
//! - `acked`: a valid record found later in the ring (in log order, not of an older
//!   incarnation) carries a watermark at or past the first LSN a cut here would drop: that LSN
//!   was acknowledged.
//! - `beyond`: a valid record found later lies outside the in-flight window that starts here
//!   (more bytes or batches than the ring's window allows), so this cannot be a torn tail.
//! - `unread`: blocks the log needs cannot be read (EIO). A crash never makes a block
//!   unreadable, so an unreadable run is treated like a torn block only where a torn block
//!   could be: at the break, no longer (in batch bytes) than the in-flight window, with nothing
//!   of this log after it. The fact holds when the run of unreadable blocks that starts at the
//!   break is longer than the window, or when a valid record of this log (not stale, of a later
//!   batch than the one broken at the break) lies after any unreadable run. Unreadable blocks
//!   with nothing of this log after them (free or trimmed space) are only reported.
//! - `damage`: something this log wrote is here: a header that failed a check other than
//!   "never written" or "older lap", or valid records of this lap later within the window.
//! - `trunc`: the caller chose the opt-in mode that truncates at corruption.
//! - `quar`: the caller chose the opt-in mode that quarantines corruption (records it and goes
//!   on). Replay never sets it together with `trunc`; were both set, truncation would win.
//! - `resume`: in quarantine mode, a whole valid batch of this log starts after the damage (at
//!   or after the end of the damaged batch, when its first header tells where that is), with
//!   an LSN at or after the one the log expects past the damaged batch's intact headers and no
//!   further on than its distance allows: the log can go on there.
//!
//! ```text
//!  row                        ok skip acked beyond unread damage trunc quar resume  decision
//!  @accept                     1   -    -     -      -      -     -     -     -     accept
//!  @skip                       0   1    -     -      -      -     -     -     -     next seg.
//!  @end                        0   0    0     0      0      0     -     -     -     log ends
//!  @torn                       0   0    0     0      0      1     -     -     -     cut, report
//!  @acked                      0   0    1     -      -      -     0     0     -     fail
//!  @hole                       0   0    0     1      -      -     0     0     -     fail
//!  @unreadable                 0   0    0     0      1      -     0     0     -     fail
//!  @salvage_acked              0   0    1     -      -      -     1     -     -     cut, report
//!  @salvage_hole               0   0    0     1      -      -     1     -     -     cut, report
//!  @salvage_unreadable         0   0    0     0      1      -     1     -     -     cut, report
//!  @quarantine_acked           0   0    1     -      -      -     0     1     1     step over
//!  @quarantine_hole            0   0    0     1      -      -     0     1     1     step over
//!  @quarantine_unreadable      0   0    0     0      1      -     0     1     1     step over
//!  @quarantine_end_acked       0   0    1     -      -      -     0     1     0     end at it
//!  @quarantine_end_hole        0   0    0     1      -      -     0     1     0     end at it
//!  @quarantine_end_unreadable  0   0    0     0      1      -     0     1     0     end at it
//! ```
//!
//! The three failing rows (`@acked`, `@hole`, `@unreadable`) each have a salvage twin and two
//! quarantine twins, so whatever evidence makes strict mode fail, the other modes know it the
//! same way and name it the same way; a torn tail or a clean end is the same row in every mode.

/// What replay does at a batch boundary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// The batch is part of the log.
    Accept,
    /// The rest of this segment was left unused; the log goes on at the next segment.
    SkipToNextSegment,
    /// The log ends here; nothing after it was ever written in this lap.
    EndOfLog,
    /// Only never-acknowledged data is damaged here: cut it off and report it.
    CutTornTail,
    /// Acknowledged data is damaged: fail with the corruption's details.
    FailCorruption,
    /// Acknowledged data is damaged and the caller asked to truncate: cut and report the loss.
    CutCorruption,
    /// Acknowledged data is damaged and the caller asked to quarantine it: record the damage
    /// (the damaged batch walked record by record, the LSNs lost whole as one range) and go on
    /// with the walk at the valid batch after it. Nothing is cut, zeroed or rewritten.
    QuarantineAndContinue,
    /// Acknowledged data is damaged, the caller asked to quarantine it, and no valid batch of
    /// this log follows: record the damage (up to the highest LSN shown acknowledged) and end
    /// the log after everything found, where the writer goes on without touching the damage.
    QuarantineAtEnd,
}

/// The facts replay finds at a batch boundary (see the module doc for each).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Facts {
    /// A whole valid batch continues the log here.
    pub ok: bool,
    /// The writer moved on to the next segment, which continues the LSNs.
    pub skip: bool,
    /// A later valid record's watermark says data a cut here would drop was acknowledged.
    pub acked: bool,
    /// A later valid record lies outside the in-flight window starting here.
    pub beyond: bool,
    /// Unreadable blocks the log needs: a run at the break longer than the window, or a run
    /// with a valid record of this log after it.
    pub unread: bool,
    /// Something written by this log is here (torn, not merely never written).
    pub damage: bool,
    /// The caller chose to truncate at corruption.
    pub trunc: bool,
    /// The caller chose to quarantine corruption.
    pub quar: bool,
    /// In quarantine mode: a valid batch of this log starts after the damage.
    pub resume: bool,
}

impl Facts {
    fn as_array(&self) -> [bool; FACT_COUNT] {
        [
            self.ok,
            self.skip,
            self.acked,
            self.beyond,
            self.unread,
            self.damage,
            self.trunc,
            self.quar,
            self.resume,
        ]
    }
}

const FACT_COUNT: usize = 9;

/// One cell of a row's pattern.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cell {
    /// The fact must be false.
    No,
    /// The fact must be true.
    Yes,
    /// Either value matches.
    Any,
}

use Cell::{Any as __, No as N0, Yes as Y1};

/// A row of the table: a label, a pattern over the facts, and the decision.
#[derive(Debug)]
pub struct Row {
    /// The row's name, as reports and tests refer to it.
    pub label: &'static str,
    pattern: [Cell; FACT_COUNT],
    /// What replay does when the row matches.
    pub decision: Decision,
}

impl Row {
    fn matches(&self, facts: &Facts) -> bool {
        self.pattern
            .iter()
            .zip(facts.as_array())
            .all(|(cell, fact)| match cell {
                Cell::Any => true,
                Cell::Yes => fact,
                Cell::No => !fact,
            })
    }
}

const fn row(label: &'static str, pattern: [Cell; FACT_COUNT], decision: Decision) -> Row {
    Row {
        label,
        pattern,
        decision,
    }
}

/// The table. Columns: ok, skip, acked, beyond, unread, damage, trunc, quar, resume.
pub const ROWS: [Row; 16] = [
    row(
        "@accept",
        [Y1, __, __, __, __, __, __, __, __],
        Decision::Accept,
    ),
    row(
        "@skip",
        [N0, Y1, __, __, __, __, __, __, __],
        Decision::SkipToNextSegment,
    ),
    row(
        "@end",
        [N0, N0, N0, N0, N0, N0, __, __, __],
        Decision::EndOfLog,
    ),
    row(
        "@torn",
        [N0, N0, N0, N0, N0, Y1, __, __, __],
        Decision::CutTornTail,
    ),
    row(
        "@acked",
        [N0, N0, Y1, __, __, __, N0, N0, __],
        Decision::FailCorruption,
    ),
    row(
        "@hole",
        [N0, N0, N0, Y1, __, __, N0, N0, __],
        Decision::FailCorruption,
    ),
    row(
        "@unreadable",
        [N0, N0, N0, N0, Y1, __, N0, N0, __],
        Decision::FailCorruption,
    ),
    row(
        "@salvage_acked",
        [N0, N0, Y1, __, __, __, Y1, __, __],
        Decision::CutCorruption,
    ),
    row(
        "@salvage_hole",
        [N0, N0, N0, Y1, __, __, Y1, __, __],
        Decision::CutCorruption,
    ),
    row(
        "@salvage_unreadable",
        [N0, N0, N0, N0, Y1, __, Y1, __, __],
        Decision::CutCorruption,
    ),
    row(
        "@quarantine_acked",
        [N0, N0, Y1, __, __, __, N0, Y1, Y1],
        Decision::QuarantineAndContinue,
    ),
    row(
        "@quarantine_hole",
        [N0, N0, N0, Y1, __, __, N0, Y1, Y1],
        Decision::QuarantineAndContinue,
    ),
    row(
        "@quarantine_unreadable",
        [N0, N0, N0, N0, Y1, __, N0, Y1, Y1],
        Decision::QuarantineAndContinue,
    ),
    row(
        "@quarantine_end_acked",
        [N0, N0, Y1, __, __, __, N0, Y1, N0],
        Decision::QuarantineAtEnd,
    ),
    row(
        "@quarantine_end_hole",
        [N0, N0, N0, Y1, __, __, N0, Y1, N0],
        Decision::QuarantineAtEnd,
    ),
    row(
        "@quarantine_end_unreadable",
        [N0, N0, N0, N0, Y1, __, N0, Y1, N0],
        Decision::QuarantineAtEnd,
    ),
];

/// The row the facts match, and so what to do. The table is exhaustive and its rows disjoint
/// (proved by the `decision_table_is_exhaustive` test), so exactly one row matches.
pub fn decide(facts: &Facts) -> &'static Row {
    let mut matching = ROWS.iter().filter(|row| row.matches(facts));
    let found = matching.next().expect("the decision table is exhaustive");
    debug_assert!(
        matching.next().is_none(),
        "the decision table's rows are disjoint"
    );
    found
}

/// Index of a row by label, for counting which rows a replay went through.
pub fn row_index(label: &str) -> Option<usize> {
    ROWS.iter().position(|row| row.label == label)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_facts() -> impl Iterator<Item = Facts> {
        (0u32..1 << FACT_COUNT).map(|bits| {
            let bit = |index: u32| bits & (1 << index) != 0;
            Facts {
                ok: bit(0),
                skip: bit(1),
                acked: bit(2),
                beyond: bit(3),
                unread: bit(4),
                damage: bit(5),
                trunc: bit(6),
                quar: bit(7),
                resume: bit(8),
            }
        })
    }

    #[test]
    fn decision_table_is_exhaustive() {
        let mut hits = [0u32; ROWS.len()];
        for facts in all_facts() {
            let matching: Vec<usize> = (0..ROWS.len())
                .filter(|&index| ROWS[index].matches(&facts))
                .collect();
            assert_eq!(matching.len(), 1, "facts {facts:?} match rows {matching:?}");
            hits[matching[0]] += 1;
        }
        // No dead row: each one is reachable.
        assert!(hits.iter().all(|&count| count > 0), "row hits {hits:?}");
    }

    #[test]
    fn labels_are_unique() {
        for (index, row) in ROWS.iter().enumerate() {
            assert_eq!(row_index(row.label), Some(index));
        }
    }

    #[test]
    fn a_valid_batch_is_accepted_whatever_else_is_true() {
        for facts in all_facts().filter(|facts| facts.ok) {
            assert_eq!(decide(&facts).decision, Decision::Accept);
        }
    }

    #[test]
    fn corruption_is_never_cut_silently_in_strict_mode() {
        let strict = |facts: &Facts| !facts.ok && !facts.skip && !facts.trunc && !facts.quar;
        for facts in all_facts().filter(strict) {
            let decision = decide(&facts).decision;
            if facts.acked || facts.beyond || facts.unread {
                assert_eq!(decision, Decision::FailCorruption, "{facts:?}");
            } else {
                assert!(matches!(
                    decision,
                    Decision::EndOfLog | Decision::CutTornTail
                ));
            }
        }
    }

    #[test]
    fn an_unreadable_log_is_never_a_torn_tail_nor_a_clean_end() {
        for facts in all_facts().filter(|facts| facts.unread && !facts.ok && !facts.skip) {
            let row = decide(&facts);
            assert!(
                matches!(
                    row.decision,
                    Decision::FailCorruption
                        | Decision::CutCorruption
                        | Decision::QuarantineAndContinue
                        | Decision::QuarantineAtEnd
                ),
                "{facts:?} -> {}",
                row.label
            );
        }
        // Unreadable blocks alone (nothing acked or beyond the window) name their own row.
        let alone = Facts {
            unread: true,
            damage: true,
            ..Facts::default()
        };
        assert_eq!(decide(&alone).label, "@unreadable");
        let salvage = Facts {
            trunc: true,
            ..alone
        };
        assert_eq!(decide(&salvage).label, "@salvage_unreadable");
        let quarantine = Facts {
            quar: true,
            ..alone
        };
        assert_eq!(decide(&quarantine).label, "@quarantine_end_unreadable");
        let resumed = Facts {
            resume: true,
            ..quarantine
        };
        assert_eq!(decide(&resumed).label, "@quarantine_unreadable");
    }

    #[test]
    fn truncating_mode_only_changes_corruption_rows() {
        for facts in all_facts() {
            let strict = decide(&Facts {
                trunc: false,
                quar: false,
                ..facts
            })
            .decision;
            let salvage = decide(&Facts {
                trunc: true,
                ..facts
            })
            .decision;
            match strict {
                Decision::FailCorruption => assert_eq!(salvage, Decision::CutCorruption),
                other => assert_eq!(salvage, other),
            }
        }
    }

    #[test]
    fn quarantine_mode_only_changes_corruption_rows_and_never_fails() {
        for facts in all_facts() {
            let strict = decide(&Facts {
                trunc: false,
                quar: false,
                ..facts
            });
            let quarantine = decide(&Facts {
                trunc: false,
                quar: true,
                ..facts
            });
            assert_ne!(quarantine.decision, Decision::FailCorruption, "{facts:?}");
            assert_ne!(quarantine.decision, Decision::CutCorruption, "{facts:?}");
            match strict.decision {
                // Continued exactly when a valid batch of the log follows the damage, and named
                // for the same evidence as the strict row it replaces.
                Decision::FailCorruption => {
                    let expected = if facts.resume {
                        Decision::QuarantineAndContinue
                    } else {
                        Decision::QuarantineAtEnd
                    };
                    assert_eq!(quarantine.decision, expected, "{facts:?}");
                    let evidence = strict.label.trim_start_matches('@');
                    assert!(quarantine.label.ends_with(evidence), "{}", quarantine.label);
                }
                other => assert_eq!(quarantine.decision, other, "{facts:?}"),
            }
        }
    }

    #[test]
    fn resume_only_matters_in_quarantine_mode() {
        for facts in all_facts().filter(|facts| !facts.quar || facts.trunc) {
            let without = decide(&Facts {
                resume: false,
                ..facts
            });
            let with = decide(&Facts {
                resume: true,
                ..facts
            });
            assert_eq!(without.label, with.label, "{facts:?}");
        }
    }
}
