//! Replay's decision table: what to do at the batch boundary the scan has reached, given the
//! facts found there. The table is data; [`decide`] looks the facts up in it and the
//! `decision_table_is_exhaustive` test proves that every combination of facts matches exactly
//! one row, as TigerBeetle does for its journal's `recovery_cases`. Replay computes the facts
//! (in `replay.rs`) and acts on the decision; it has no other branch that decides what is kept.
//!
//! The facts, in column order:
//!
//! - `ok`: a whole, valid batch continues the log here. Every record's header CRC, payload
//!   CRC, magic, version, ring, position, lap, LSN continuity, incarnation order and the
//!   batch's tiling check out; at a segment's first data block, its segment header too.
//! - `skip`: the batch here is not its segment's first, and the next segment's header is valid
//!   for the expected lap and starts at the expected LSN: the writer left the rest of this
//!   segment unused.
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
//!
//! ```text
//!  row                 ok skip acked beyond unread damage trunc  decision
//!  @accept              1   -    -     -      -      -     -     accept the batch, go on
//!  @skip                0   1    -     -      -      -     -     go on at the next segment
//!  @end                 0   0    0     0      0      0     -     the log ends here
//!  @torn                0   0    0     0      0      1     -     cut the torn tail, report it
//!  @acked               0   0    1     -      -      -     0     fail: acked data is damaged
//!  @hole                0   0    0     1      -      -     0     fail: damage beyond window
//!  @unreadable          0   0    0     0      1      -     0     fail: the log is unreadable
//!  @salvage_acked       0   0    1     -      -      -     1     cut here, report the loss
//!  @salvage_hole        0   0    0     1      -      -     1     cut here, report the loss
//!  @salvage_unreadable  0   0    0     0      1      -     1     cut here, report the loss
//! ```

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
        ]
    }
}

const FACT_COUNT: usize = 7;

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

/// The table. Columns: ok, skip, acked, beyond, unread, damage, trunc.
pub const ROWS: [Row; 10] = [
    row("@accept", [Y1, __, __, __, __, __, __], Decision::Accept),
    row(
        "@skip",
        [N0, Y1, __, __, __, __, __],
        Decision::SkipToNextSegment,
    ),
    row("@end", [N0, N0, N0, N0, N0, N0, __], Decision::EndOfLog),
    row("@torn", [N0, N0, N0, N0, N0, Y1, __], Decision::CutTornTail),
    row(
        "@acked",
        [N0, N0, Y1, __, __, __, N0],
        Decision::FailCorruption,
    ),
    row(
        "@hole",
        [N0, N0, N0, Y1, __, __, N0],
        Decision::FailCorruption,
    ),
    row(
        "@unreadable",
        [N0, N0, N0, N0, Y1, __, N0],
        Decision::FailCorruption,
    ),
    row(
        "@salvage_acked",
        [N0, N0, Y1, __, __, __, Y1],
        Decision::CutCorruption,
    ),
    row(
        "@salvage_hole",
        [N0, N0, N0, Y1, __, __, Y1],
        Decision::CutCorruption,
    ),
    row(
        "@salvage_unreadable",
        [N0, N0, N0, N0, Y1, __, Y1],
        Decision::CutCorruption,
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
        for facts in all_facts().filter(|facts| !facts.ok && !facts.skip && !facts.trunc) {
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
                    Decision::FailCorruption | Decision::CutCorruption
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
    }

    #[test]
    fn truncating_mode_only_changes_corruption_rows() {
        for facts in all_facts() {
            let strict = decide(&Facts {
                trunc: false,
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
}
