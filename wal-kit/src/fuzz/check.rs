//! The invariants every image must keep under replay, whatever was done to it: replay returns
//! `Ok` or a typed error in every recovery mode (a panic is caught by the harness, not here);
//! an `Ok` report agrees with the entries it visited (count, LSNs contiguous from the trim
//! point, first, last and next LSN, outcome and its details, decision rows) and with the blocks
//! that cannot be read (a read error, or a block reported unreadable, only where one is);
//! replay is deterministic; strict `Ok` implies truncating `Ok` with the same report, and
//! strict corruption implies a truncating cut naming the same damage; and where replay opens,
//! the model writer's open recovers the same entries, and opening again after it the same
//! entries again, as does opening after a crash in the middle of it, right after its control
//! block (I-3, I-5, I-6 of docs/recovery.md). Quarantine mode opens wherever strict mode opens
//! (with the same report) or fails on corruption (naming that corruption first among the breaks
//! it stepped over); its live entries and damaged ranges together hold every LSN from the trim
//! point to the next one exactly once; and where it stepped over damage, the model writer's
//! quarantine open recovers the same entries and damage, so does a reopen of what it left and
//! an open after a crash right after its control block, and strict replay of what it left still
//! fails on the same damage. Images are replayed through
//! [`FailingSource`], so their unreadable blocks fail with EIO. It owns no generation and no
//! mutation.

use super::source::{FailingSource, Image, Unreadable};
use crate::model::ModelWriter;
use sealog_wal::decision::{decide, row_index, Decision, Facts, ROWS};
use sealog_wal::error::ReplayError;
use sealog_wal::format::{Position, CONTROL_SEQUENCE_LIMIT};
use sealog_wal::quarantine::{Damaged, DamagedHeader, DamagedRange, DAMAGED_REPORTED};
use sealog_wal::recovery::TailMarker;
use sealog_wal::recovery::{self, Step, Written};
use sealog_wal::replay::{
    replay_visiting, Check, Outcome, RecoveryMode, RecoveryReport, ReplayOptions, Visit,
    UNREADABLE_RUNS_REPORTED,
};

/// Entries a replay visited: (LSN, payload).
pub type Visited = Vec<(u64, Vec<u8>)>;

/// What a replay visited, in LSN order: its live entries, and (in quarantine mode) its damage.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Visits {
    /// The live entries.
    pub entries: Visited,
    /// The damaged records and ranges.
    pub damaged: Vec<Damaged>,
    /// Where each live entry's header lies, in the order of `entries`.
    pub positions: Vec<Position>,
}

/// How often each decision-table row was taken, in [`ROWS`] order.
pub type RowHits = [u64; ROWS.len()];

/// What the model writer's reopen check did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ModelCheck {
    /// Neither mode opened the image (or truncating mode opened it without a cut): no check.
    NotRun,
    /// Opened twice with the same entries as replay, and once more after a crash right after
    /// the first open's control block.
    Reopened,
    /// Refused with a typed error replay's report predicts (the incarnation is exhausted).
    Refused,
    /// Not run: the control block's sequence cannot be bumped twice (it is above
    /// `CONTROL_SEQUENCE_LIMIT - 2`), and the model writer's own open expects
    /// `ControlBlock::next_sequence` to succeed rather than returning a typed error (see
    /// [`model_writer_cannot_bump`]). The engine takes its sequences from `next_sequence`.
    SkippedSequence,
    /// Not run: the image has unreadable blocks, and the model writer replays bytes only.
    SkippedUnreadable,
    /// Quarantine mode: opened with the same entries and damage, again after a crash right
    /// after its control block, and reopened with them; strict replay still fails on it.
    /// Only the reopens are checked where the ring had no room for the recovery's tail
    /// marker (see [`ModelCheck::QuarantinedNoMarkerRoom`]).
    Quarantined,
    /// Quarantine mode on a ring with no room for the recovery's tail marker: its open
    /// recovered the same entries and damage; the checks that rely on the marker's watermark
    /// (damage whose only evidence lay past the cut is the residual risk of docs/recovery.md until
    /// the writer's first batch) were not run.
    QuarantinedNoMarkerRoom,
    /// Quarantine mode, a quarantined break that is a batch stale only by the last cut's
    /// floor: its open recovered the same entries and damage; the reopens were not checked
    /// (see `stale_by_the_cut`), as a later open may find another log there.
    QuarantinedCutFloor,
}

impl ModelCheck {
    /// Lower-case name, for tallies.
    pub fn name(self) -> &'static str {
        match self {
            ModelCheck::NotRun => "not_run",
            ModelCheck::Reopened => "reopened_twice",
            ModelCheck::Refused => "refused",
            ModelCheck::SkippedSequence => "skipped_sequence_near_limit",
            ModelCheck::SkippedUnreadable => "skipped_unreadable_blocks",
            ModelCheck::Quarantined => "quarantined_reopened",
            ModelCheck::QuarantinedNoMarkerRoom => "quarantined_no_marker_room",
            ModelCheck::QuarantinedCutFloor => "quarantined_cut_floor",
        }
    }
}

/// What the checks saw of one image that kept every invariant.
#[derive(Clone, Debug)]
pub struct Observed {
    /// Strict replay: the outcome's name, or the error's kind.
    pub strict: String,
    /// Truncating replay: the outcome's name, or the error's kind.
    pub truncating: String,
    /// Rows strict replay took (when it failed on corruption: the truncating scan's rows with
    /// its last row replaced by the strict row the same facts select).
    pub strict_rows: RowHits,
    /// Rows truncating replay took.
    pub truncating_rows: RowHits,
    /// Quarantine replay: the outcome's name, or the error's kind.
    pub quarantine: String,
    /// Rows quarantine replay took.
    pub quarantine_rows: RowHits,
    /// What the model writer's reopen check did.
    pub model: ModelCheck,
    /// What the model writer's quarantine reopen check did.
    pub quarantine_model: ModelCheck,
}

/// Replays `image` in `mode`, every read overlapping an `unreadable` block failing with EIO:
/// the result and the entries visited.
pub fn replay_image(
    image: &[u8],
    unreadable: &Unreadable,
    mode: RecoveryMode,
) -> (Result<RecoveryReport, ReplayError>, Visited) {
    let (result, visits) = replay_image_visiting(image, unreadable, mode);
    (result, visits.entries)
}

/// [`replay_image`], with the damage a quarantine replay visits.
pub fn replay_image_visiting(
    image: &[u8],
    unreadable: &Unreadable,
    mode: RecoveryMode,
) -> (Result<RecoveryReport, ReplayError>, Visits) {
    let options = ReplayOptions {
        mode,
        read_chunk_bytes: 1 << 16,
        ..ReplayOptions::default()
    };
    let mut source = FailingSource::new(image, unreadable);
    let mut visits = Visits::default();
    let result = replay_visiting(&mut source, &options, &mut |visited| match visited {
        Visit::Entry(entry) => {
            visits.entries.push((entry.lsn, entry.payload.to_vec()));
            visits.positions.push(entry.position);
        }
        Visit::Damaged(damaged) => visits.damaged.push(*damaged),
    });
    (result, visits)
}

/// The name of the variant a value's `Debug` form starts with: `Corruption`, `ControlHead`.
pub fn variant_name(debug: &str) -> String {
    debug
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .next()
        .unwrap_or("")
        .to_string()
}

/// A replay error's kind (its variant's name, so a variant added later is named too).
pub fn error_kind(error: &ReplayError) -> String {
    variant_name(&format!("{error:?}"))
}

/// The row strict mode takes for the facts that make truncating mode take `row`, found by
/// asking the decision table (so it holds for rows added later); `None` when no facts lead to
/// `row` with truncation on, or facts that do lead to different strict rows.
pub fn strict_counterpart(row: usize) -> Option<usize> {
    let mut found = None;
    for bits in 0u32..64 {
        let bit = |index: u32| bits & (1 << index) != 0;
        let facts = Facts {
            ok: bit(0),
            skip: bit(1),
            acked: bit(2),
            beyond: bit(3),
            unread: bit(4),
            damage: bit(5),
            trunc: true,
            quar: false,
            resume: false,
        };
        if row_index(decide(&facts).label) != Some(row) {
            continue;
        }
        let strict = row_index(
            decide(&Facts {
                trunc: false,
                ..facts
            })
            .label,
        )?;
        if found.is_some_and(|seen| seen != strict) {
            return None;
        }
        found = Some(strict);
    }
    found
}

/// Unreadable blocks never change what replay recovers without saying so: when a report over
/// a source with unreadable blocks names no unreadable block, no read error at the end and no
/// read error as the damage it cut, it must be exactly the report (and the entries) of the
/// same bytes with every block readable. (Found a header unreadable where the writer had
/// skipped to it, taken for "never written", with the acknowledged entries behind it cut.)
fn check_no_silent_read_error(
    image: &Image,
    mode: RecoveryMode,
    result: &Result<RecoveryReport, ReplayError>,
    visited: &Visits,
) -> Result<(), String> {
    let Ok(report) = result else {
        return Ok(());
    };
    let silent = !image.unreadable.is_empty()
        && report.unreadable_blocks == 0
        && report.end_check != Check::ReadError
        && !names_a_read_error(report);
    if !silent {
        return Ok(());
    }
    let (readable, readable_visited) =
        replay_image_visiting(&image.bytes, &Unreadable::none(), mode);
    // What replay read differs (a failed read is retried with less), what it found may not.
    let same_finding = |plain: &RecoveryReport| {
        RecoveryReport {
            bytes_read: report.bytes_read,
            ..plain.clone()
        } == *report
    };
    match readable {
        Ok(plain) if same_finding(&plain) && readable_visited == *visited => Ok(()),
        other => Err(format!(
            "{mode:?}: unreadable blocks changed the outcome without a word: with every block \
             readable {}, with them {} at LSN {} ({})",
            other.map_or_else(
                |error| error_kind(&error),
                |plain| format!("{} at LSN {}", plain.end_row, plain.next_lsn)
            ),
            report.end_row,
            report.next_lsn,
            report.end_check
        )),
    }
}

/// Whether the damage a report names (the cut's, or a quarantined break's or range's) is a
/// read error.
fn names_a_read_error(report: &RecoveryReport) -> bool {
    report
        .corruption
        .iter()
        .chain(&report.quarantined)
        .any(|corruption| corruption.check == Check::ReadError)
        || report
            .damaged
            .iter()
            .any(|range| range.check == Check::ReadError)
}

/// Checks one image against every invariant; `Err` names the first one broken.
pub fn check_image(image: &Image) -> Result<Observed, String> {
    let (strict, strict_visits) = replay_deterministic(image, RecoveryMode::Strict)?;
    let (truncating, truncating_visits) =
        replay_deterministic(image, RecoveryMode::TruncateAtCorruption)?;
    let (quarantine, quarantine_visits) = replay_deterministic(image, RecoveryMode::Quarantine)?;
    let modes = [
        (RecoveryMode::Strict, &strict, &strict_visits),
        (
            RecoveryMode::TruncateAtCorruption,
            &truncating,
            &truncating_visits,
        ),
        (RecoveryMode::Quarantine, &quarantine, &quarantine_visits),
    ];
    for (mode, result, visits) in modes {
        if let Ok(report) = result {
            check_report(report, visits, mode)?;
            check_unreadable(report, &image.unreadable, mode)?;
        }
        check_no_silent_read_error(image, mode, result, visits)?;
    }
    let strict_visited = &strict_visits.entries;
    let truncating_visited = &truncating_visits.entries;
    if let Err(ReplayError::Corruption(corruption)) = &strict {
        if corruption.check == Check::ReadError && image.unreadable.is_empty() {
            return Err(format!(
                "strict replay names a read error with every block readable: {corruption:?}"
            ));
        }
    }
    check_modes_agree(&strict, strict_visited, &truncating, truncating_visited)?;
    check_quarantine_agrees((&strict, &strict_visits), (&quarantine, &quarantine_visits))?;
    let model = check_model_writer(
        image,
        (&strict, strict_visited),
        (&truncating, truncating_visited),
    )?;
    let quarantine_model = check_quarantine_model(image, &quarantine, &quarantine_visits)?;
    let no_rows = [0; ROWS.len()];
    let truncating_rows = truncating
        .as_ref()
        .map_or(no_rows, |report| report.row_hits);
    let strict_rows = strict_rows(&strict, &truncating)?;
    let name = |result: &Result<RecoveryReport, ReplayError>| match result {
        Ok(report) => report.outcome.name().to_string(),
        Err(error) => error_kind(error),
    };
    Ok(Observed {
        strict: name(&strict),
        truncating: name(&truncating),
        strict_rows,
        truncating_rows,
        quarantine: name(&quarantine),
        quarantine_rows: quarantine
            .as_ref()
            .map_or(no_rows, |report| report.row_hits),
        model,
        quarantine_model,
    })
}

/// The rows strict replay took: its own where it opened; where it failed on corruption, the
/// truncating scan's rows with its last row replaced by the strict row the same facts select.
fn strict_rows(
    strict: &Result<RecoveryReport, ReplayError>,
    truncating: &Result<RecoveryReport, ReplayError>,
) -> Result<RowHits, String> {
    let no_rows = [0; ROWS.len()];
    Ok(match (strict, truncating) {
        (Ok(report), _) => report.row_hits,
        (Err(ReplayError::Corruption(_)), Ok(report)) => {
            let mut rows = report.row_hits;
            let end = row_index(report.end_row).expect("the report names a row");
            let counterpart = strict_counterpart(end).ok_or_else(|| {
                format!("row {} has no single strict counterpart", report.end_row)
            })?;
            rows[end] -= 1;
            rows[counterpart] += 1;
            rows
        }
        _ => no_rows,
    })
}

/// Replays twice in `mode` and checks both runs agree.
fn replay_deterministic(
    image: &Image,
    mode: RecoveryMode,
) -> Result<(Result<RecoveryReport, ReplayError>, Visits), String> {
    let (first, first_visited) = replay_image_visiting(&image.bytes, &image.unreadable, mode);
    let (second, second_visited) = replay_image_visiting(&image.bytes, &image.unreadable, mode);
    let same = match (&first, &second) {
        (Ok(a), Ok(b)) => a == b,
        (Err(a), Err(b)) => format!("{a:?}") == format!("{b:?}"),
        _ => false,
    };
    if !same || first_visited != second_visited {
        return Err(format!(
            "{mode:?} replay is not deterministic: {first:?} then {second:?}"
        ));
    }
    Ok((first, first_visited))
}

/// An `Ok` report against the entries visited and against itself.
fn check_report(
    report: &RecoveryReport,
    visits: &Visits,
    mode: RecoveryMode,
) -> Result<(), String> {
    let fail = |what: String| Err(format!("{mode:?} report: {what}; report {report:?}"));
    let visited = &visits.entries;
    let first = report.trim_lsn + 1;
    if visited.len() as u64 != report.entries {
        return fail(format!(
            "{} entries visited, {} reported",
            visited.len(),
            report.entries
        ));
    }
    if mode == RecoveryMode::Quarantine {
        check_damage_covers(report, visits).or_else(fail)?;
    } else {
        check_no_damage(report, visits).or_else(fail)?;
    }
    if report.next_lsn != first + report.entries + report.damaged_lsns {
        return fail(format!(
            "next LSN {} after {} entries and {} damaged LSNs from {first}",
            report.next_lsn, report.entries, report.damaged_lsns
        ));
    }
    // Damaged LSNs are part of the log: its extent counts them.
    let live = report.entries + report.damaged_lsns > 0;
    let expected_first = live.then_some(first);
    let expected_last = live.then(|| report.next_lsn - 1);
    if (report.first_lsn, report.last_lsn) != (expected_first, expected_last) {
        return fail(format!(
            "first/last LSN {:?}/{:?}, visited {expected_first:?}/{expected_last:?}",
            report.first_lsn, report.last_lsn
        ));
    }
    let payload_bytes: u64 = visited
        .iter()
        .map(|(_, payload)| payload.len() as u64)
        .sum();
    if payload_bytes != report.payload_bytes {
        return fail(format!("{payload_bytes} payload bytes visited"));
    }
    check_outcome(report, mode).or_else(fail)?;
    check_rows(report).or_else(fail)?;
    check_next_position(report).or_else(fail)
}

/// Outside quarantine mode: no damage quarantined, and the live entries contiguous from the
/// trim point.
fn check_no_damage(report: &RecoveryReport, visits: &Visits) -> Result<(), String> {
    let visited = &visits.entries;
    let first = report.trim_lsn + 1;
    let quarantined = !visits.damaged.is_empty()
        || report.damaged_lsns > 0
        || report.damaged_ranges > 0
        || report.quarantined_breaks > 0
        || !report.damaged.is_empty()
        || !report.quarantined.is_empty();
    if quarantined {
        return Err("damage quarantined outside quarantine mode".into());
    }
    if let Some(index) = (0..visited.len()).find(|&index| visited[index].0 != first + index as u64)
    {
        return Err(format!(
            "entry {index} has LSN {}, not {} (contiguous from the trim point)",
            visited[index].0,
            first + index as u64
        ));
    }
    Ok(())
}

/// The writer goes on at a data block of the ring, and the incarnation and watermark the
/// report found agree with it.
fn check_next_position(report: &RecoveryReport) -> Result<(), String> {
    let g = &report.control.geometry;
    let next = report.next_position;
    let inside = next.segment < g.segment_count
        && next.offset >= g.segment_data_offset()
        && u64::from(next.offset) < g.segment_size_bytes
        && next.offset % g.block_size_bytes == 0;
    if !inside {
        return Err(format!(
            "next position {next} is not a data block of the ring"
        ));
    }
    if report.incarnation_max < report.control.incarnation {
        return Err("incarnation_max below the control block's".into());
    }
    if report.batches > 0 && report.watermark_max >= report.next_lsn {
        return Err("a watermark at or past the next LSN".into());
    }
    Ok(())
}

/// In quarantine mode: the live entries and the damaged ranges visited, merged in LSN order,
/// hold every LSN from the trim point to the next LSN exactly once; a range whose header
/// survived is one LSN; the report's counts and lists agree with what was visited (the lists
/// capped at [`DAMAGED_REPORTED`]); damage is only ever found at a quarantined break.
fn check_damage_covers(report: &RecoveryReport, visits: &Visits) -> Result<(), String> {
    let (entries, damaged) = (&visits.entries, &visits.damaged);
    let mut next = report.trim_lsn + 1;
    let (mut entry, mut range) = (0, 0);
    while entry < entries.len() || range < damaged.len() {
        if entries.get(entry).is_some_and(|(lsn, _)| *lsn == next) {
            next += 1;
            entry += 1;
            continue;
        }
        match damaged.get(range) {
            Some(found) if found.first_lsn == next => {
                if found.last_lsn < found.first_lsn
                    || (found.header.is_some() && found.last_lsn != found.first_lsn)
                {
                    return Err(format!(
                        "a damaged range of no LSN, or a header for many: {found:?}"
                    ));
                }
                next = found.last_lsn + 1;
                range += 1;
            }
            _ => return Err(format!("LSN {next} is neither a live entry nor damaged")),
        }
    }
    if next != report.next_lsn {
        return Err(format!(
            "live entries and damage reach LSN {next}, the next LSN is {}",
            report.next_lsn
        ));
    }
    let lsns: u64 = damaged
        .iter()
        .map(|found| found.last_lsn - found.first_lsn + 1)
        .sum();
    let listed: Vec<DamagedRange> = damaged
        .iter()
        .take(DAMAGED_REPORTED)
        .map(|found| DamagedRange {
            first_lsn: found.first_lsn,
            last_lsn: found.last_lsn,
            position: found.position,
            ring_offset: report.control.geometry.ring_offset(found.position),
            check: found.check,
            header_known: found.header.is_some(),
        })
        .collect();
    let breaks_listed = usize::try_from(report.quarantined_breaks)
        .map_or(DAMAGED_REPORTED, |breaks| breaks.min(DAMAGED_REPORTED));
    if report.damaged_lsns != lsns
        || report.damaged_ranges != damaged.len() as u64
        || report.damaged != listed
        || report.quarantined.len() != breaks_listed
        || (!damaged.is_empty() && report.quarantined_breaks == 0)
    {
        return Err(format!(
            "the damage counted ({} LSNs in {} ranges, {} breaks) is not what was visited ({} \
             LSNs in {} ranges)",
            report.damaged_lsns,
            report.damaged_ranges,
            report.quarantined_breaks,
            lsns,
            damaged.len()
        ));
    }
    Ok(())
}

/// What an `Ok` report says of unreadable blocks is true of the source: with every block
/// readable, no read error and no unreadable block; otherwise every block of every run it lists
/// is unreadable (walked in the probe's order: a segment's blocks, then the next segment's data
/// blocks), the runs are at most [`UNREADABLE_RUNS_REPORTED`] and within the count.
fn check_unreadable(
    report: &RecoveryReport,
    unreadable: &Unreadable,
    mode: RecoveryMode,
) -> Result<(), String> {
    let fail = |what: String| {
        Err(format!(
            "{mode:?} report: {what}; unreadable blocks {} (runs {:?}), end check {:?}, \
             corruption {:?}, quarantined {:?}, damaged {:?}",
            report.unreadable_blocks,
            report.unreadable_runs,
            report.end_check,
            report.corruption,
            report.quarantined,
            report.damaged
        ))
    };
    let read_error = report.end_check == Check::ReadError || names_a_read_error(report);
    if unreadable.is_empty() {
        if report.unreadable_blocks > 0 || !report.unreadable_runs.is_empty() || read_error {
            return fail("a read error with every block readable".into());
        }
        return Ok(());
    }
    let listed: u64 = report.unreadable_runs.iter().map(|run| run.blocks).sum();
    if report.unreadable_runs.len() > UNREADABLE_RUNS_REPORTED || listed > report.unreadable_blocks
    {
        return fail("more runs or blocks listed than counted".into());
    }
    let g = &report.control.geometry;
    let block = u64::from(g.block_size_bytes);
    for run in &report.unreadable_runs {
        let mut at = run.start;
        for index in 0..run.blocks {
            if index > 0 {
                let next = u64::from(at.offset) + block;
                at = match u32::try_from(next) {
                    Ok(offset) if next < g.segment_size_bytes => Position { offset, ..at },
                    _ => g.next_segment_start(at),
                };
            }
            if !unreadable.overlaps(g.ring_offset(at), block) {
                return fail(format!("block {at} is listed unreadable but reads"));
            }
        }
    }
    Ok(())
}

/// The outcome and the fields that describe it agree.
fn check_outcome(report: &RecoveryReport, mode: RecoveryMode) -> Result<(), String> {
    let fields = (
        report.torn.is_some(),
        report.dropped.is_some(),
        report.corruption.is_some(),
    );
    let consistent = match report.outcome {
        Outcome::Clean => fields == (false, false, false),
        Outcome::TornTail => fields == (true, false, false),
        Outcome::Truncated => {
            fields == (false, true, true) && mode == RecoveryMode::TruncateAtCorruption
        }
        Outcome::Quarantined => {
            fields == (false, false, false)
                && mode == RecoveryMode::Quarantine
                && report.quarantined_breaks > 0
        }
    };
    if !consistent {
        return Err(format!(
            "outcome {:?} with torn/dropped/corruption {fields:?}",
            report.outcome
        ));
    }
    if let Some(torn) = report.torn {
        if torn.first_lsn != report.next_lsn || torn.start != report.next_position {
            return Err("the torn tail does not start at the cut".into());
        }
        if torn.last_lsn < torn.first_lsn {
            return Err("the torn tail ends before it starts".into());
        }
    }
    if let Some(dropped) = report.dropped {
        if dropped.first_lsn != report.next_lsn {
            return Err("what was dropped does not start at the next LSN".into());
        }
        if dropped.last_lsn < dropped.first_lsn {
            return Err("what was dropped ends before it starts".into());
        }
    }
    // The new incarnation's floor starts at the writer's next position, or before it after
    // quarantined damage at the log's end (never after it: the writer's own batches go there).
    let cut_ok = report.cut == report.next_position
        || (report.outcome == Outcome::Quarantined && report.cut < report.next_position);
    if !cut_ok {
        return Err(format!(
            "the cut {} for a writer going on at {}",
            report.cut, report.next_position
        ));
    }
    match report.invalidate {
        Some(region) if region.start != report.next_position || region.end < region.start => {
            Err("the region to invalidate does not start at the cut".into())
        }
        None if report.outcome != Outcome::Clean => {
            Err("a cut with no region to invalidate".into())
        }
        _ => Ok(()),
    }
}

/// The decision rows taken agree with what the report counts: one row per accepted batch, one
/// per skipped segment tail, and exactly one row that ended the scan, the one it names.
fn check_rows(report: &RecoveryReport) -> Result<(), String> {
    let mut accepted = 0;
    let mut skipped = 0;
    let mut stepped = 0;
    let mut ended = 0;
    for (row, hits) in ROWS.iter().zip(report.row_hits) {
        match row.decision {
            Decision::Accept => accepted += hits,
            Decision::SkipToNextSegment => skipped += hits,
            Decision::QuarantineAndContinue => stepped += hits,
            _ => ended += hits,
        }
    }
    let end = row_index(report.end_row).map(|index| (&ROWS[index], report.row_hits[index]));
    let end_ok = end.is_some_and(|(row, hits)| {
        hits == 1
            && !matches!(
                row.decision,
                Decision::Accept | Decision::SkipToNextSegment | Decision::QuarantineAndContinue
            )
    });
    // Every quarantined break is a row that stepped over it, but the one the log ended at.
    let ended_quarantined = end.is_some_and(|(row, _)| row.decision == Decision::QuarantineAtEnd);
    let breaks = stepped + u64::from(ended_quarantined);
    if accepted != report.batches
        || skipped != report.segments_skipped
        || ended != 1
        || !end_ok
        || breaks != report.quarantined_breaks
    {
        return Err(format!(
            "rows {:?} (end {}) for {} batches and {} skips",
            report.row_hits, report.end_row, report.batches, report.segments_skipped
        ));
    }
    Ok(())
}

/// Strict and truncating replay agree: where strict opens, truncating opens the same log; where
/// strict finds corruption, truncating cuts there; any other refusal is the same in both.
fn check_modes_agree(
    strict: &Result<RecoveryReport, ReplayError>,
    strict_visited: &Visited,
    truncating: &Result<RecoveryReport, ReplayError>,
    truncating_visited: &Visited,
) -> Result<(), String> {
    let agree = match (strict, truncating) {
        (Ok(a), Ok(b)) => a == b && strict_visited == truncating_visited,
        (Err(ReplayError::Corruption(corruption)), Ok(b)) => {
            b.outcome == Outcome::Truncated && b.corruption == Some(**corruption)
        }
        (Err(ReplayError::Corruption(_)), Err(_)) => false,
        (Err(a), Err(b)) => error_kind(a) == error_kind(b),
        (Ok(_), Err(_)) | (Err(_), Ok(_)) => false,
    };
    if !agree {
        return Err(format!(
            "strict and truncating replay disagree: strict {strict:?}, truncating {truncating:?}"
        ));
    }
    Ok(())
}

/// Strict and quarantine replay agree: where strict opens, quarantine opens the same log with
/// the same report (only what it read may differ: it walked and searched at the log's end)
/// and no damage; where strict finds corruption, quarantine opens and names that corruption
/// first among the breaks it stepped over; any other refusal is the same in both.
fn check_quarantine_agrees(
    strict: (&Result<RecoveryReport, ReplayError>, &Visits),
    quarantine: (&Result<RecoveryReport, ReplayError>, &Visits),
) -> Result<(), String> {
    let agree = match (strict.0, quarantine.0) {
        (Ok(a), Ok(b)) => {
            let comparable = RecoveryReport {
                bytes_read: a.bytes_read,
                ..b.clone()
            };
            comparable == *a && strict.1 == quarantine.1
        }
        (Err(ReplayError::Corruption(corruption)), Ok(b)) => {
            b.quarantined.first() == Some(&**corruption) && b.quarantined_breaks > 0
        }
        (Err(ReplayError::Corruption(_)), Err(_)) => false,
        (Err(a), Err(b)) => error_kind(a) == error_kind(b),
        (Ok(_), Err(_)) | (Err(_), Ok(_)) => false,
    };
    if !agree {
        return Err(format!(
            "strict and quarantine replay disagree: strict {:?}, quarantine {:?}",
            strict.0, quarantine.0
        ));
    }
    Ok(())
}

/// Where quarantine stepped over damage (and the image reads whole), the model writer's
/// quarantine open recovers the same entries, damage and report; an open after a crash right
/// after its control block (and the tail marker the plan writes before it) finds them again;
/// so does a reopen of what the writer left; and strict replay of what it left still fails
/// on the same damage (the same place, LSN and check), though the evidence that it was
/// acknowledged may now be the recovery's own tail marker. Where the ring had no room for
/// that marker, damage whose only evidence lay past the cut is the residual risk of
/// docs/recovery.md, and only the open itself is checked.
fn check_quarantine_model(
    image: &Image,
    quarantine: &Result<RecoveryReport, ReplayError>,
    visits: &Visits,
) -> Result<ModelCheck, String> {
    let Ok(report) = quarantine else {
        return Ok(ModelCheck::NotRun);
    };
    if report.quarantined_breaks == 0 {
        return Ok(ModelCheck::NotRun);
    }
    if !image.unreadable.is_empty() {
        return Ok(ModelCheck::SkippedUnreadable);
    }
    if model_writer_cannot_bump(report.control.sequence) {
        return Ok(ModelCheck::SkippedSequence);
    }
    let options = ReplayOptions {
        mode: RecoveryMode::Quarantine,
        ..ReplayOptions::default()
    };
    let exhausted = report.incarnation_max >= u32::MAX - 1;
    let (writer, first, entries) = match ModelWriter::open(image.bytes.clone(), &options) {
        Ok(opened) => opened,
        Err(ReplayError::IncarnationExhausted) if exhausted => return Ok(ModelCheck::Refused),
        Err(error) => {
            return Err(format!(
                "quarantine replay opens, the model writer's quarantine open does not: {error}"
            ))
        }
    };
    if first != *report || entries != visits.entries {
        return Err(format!(
            "the model writer's quarantine open recovered {} entries (report {first:?}), \
             replay {}",
            entries.len(),
            visits.entries.len()
        ));
    }
    let plan = recovery::plan(&first)
        .map_err(|error| format!("the model writer opened, its plan fails: {error}"))?;
    if matches!(plan.tail_marker, TailMarker::NoRoom(_)) {
        return Ok(ModelCheck::QuarantinedNoMarkerRoom);
    }
    if stale_by_the_cut(report, visits) {
        return Ok(ModelCheck::QuarantinedCutFloor);
    }
    let crashed = crashed_after_control(&image.bytes, &first)?;
    same_quarantined(
        "after a crash right after the model writer's quarantine open's control block",
        &crashed,
        report,
        visits,
    )?;
    same_quarantined(
        "after the model writer's quarantine open",
        writer.durable(),
        report,
        visits,
    )?;
    strict_still_fails(report, writer.durable())
}

/// What a later open must find again of quarantined damage: each damaged range's LSNs, place
/// and header.
fn damage_places(damaged: &[Damaged]) -> Vec<(u64, u64, Position, Option<DamagedHeader>)> {
    damaged
        .iter()
        .map(|found| {
            (
                found.first_lsn,
                found.last_lsn,
                found.position,
                found.header,
            )
        })
        .collect()
}

/// The ranges a report lists: their LSNs and place.
fn listed_places(ranges: &[DamagedRange]) -> Vec<(u64, u64, Position)> {
    ranges
        .iter()
        .map(|range| (range.first_lsn, range.last_lsn, range.position))
        .collect()
}

/// Quarantine replay of `image` (the ring `what` says, after the model writer's quarantine
/// open) finds the entries and damage the first replay (`report`, `visits`) found.
fn same_quarantined(
    what: &str,
    image: &[u8],
    report: &RecoveryReport,
    visits: &Visits,
) -> Result<(), String> {
    // What a later open must find again: the entries, and each damaged range's LSNs, place
    // and header. Not always its check: the writer's cut can make a first header that failed
    // a later check (a crafted watermark) fail the incarnation floor first. Nor where a replay
    // starts to reach it, which moves with the head's floor the writer's open may raise.
    match replay_image_visiting(image, &Unreadable::none(), RecoveryMode::Quarantine) {
        (Ok(again), found)
            if found.entries == visits.entries
                && damage_places(&found.damaged) == damage_places(&visits.damaged)
                && again.next_lsn == report.next_lsn
                && listed_places(&again.damaged) == listed_places(&report.damaged) =>
        {
            Ok(())
        }
        (result, found) => Err(format!(
            "{what}, quarantine replay finds other entries or damage: {} entries, {} \
             ranges (first: {} entries, {} ranges): {:?}",
            found.entries.len(),
            found.damaged.len(),
            visits.entries.len(),
            visits.damaged.len(),
            result.map(|again| (again.next_lsn, again.damaged))
        )),
    }
}

/// Strict replay of what the model writer's quarantine open left (`durable`) still fails on
/// the damage quarantine stepped over (`report`), unless all of it was trimmed.
fn strict_still_fails(report: &RecoveryReport, durable: &[u8]) -> Result<ModelCheck, String> {
    // Damage with nothing of the log above the trim point after it (all of it trimmed) is
    // released: the writer's head moves past it, as past any trimmed entry.
    if report.entries == 0 && report.damaged_lsns == 0 {
        return Ok(ModelCheck::Quarantined);
    }
    // Strict replay names the same LSN (not always the same place: where nothing was written
    // at the damage, a next segment's header the writer has since written can be what it
    // names instead).
    match replay_image(durable, &Unreadable::none(), RecoveryMode::Strict).0 {
        Err(ReplayError::Corruption(found))
            if report.quarantined.first().map(|first| first.lsn) == Some(found.lsn) =>
        {
            Ok(ModelCheck::Quarantined)
        }
        other => Err(format!(
            "after the model writer's quarantine open, strict replay no longer fails on the \
             damage {:?}: {other:?}",
            report.quarantined.first()
        )),
    }
}

/// Whether quarantined damage lies where the last cut's floor decided what the log is: damage
/// (or a range lost up to where the log resumes) reached with the walk's floor below the cut's
/// incarnation, on a log that ends past the cut. The writer's open moves the cut to the log's
/// end, and the control block holds one cut, so the old floor is not kept for the stretch
/// between: a batch of an older incarnation there (stale by the old floor, so neither the
/// damage nor where the log resumed) may count at a later open. Writers leave that only under
/// several faults (their own writes after a cut lost, over an older incarnation's batches
/// beyond the zeroed region, with LSNs that line up); the fuzzer crafts it with cuts. The
/// reopens are not checked there.
fn stale_by_the_cut(report: &RecoveryReport, visits: &Visits) -> bool {
    let control = &report.control;
    if control.cut.lap == 0 || report.next_position <= control.cut {
        return false;
    }
    visits.damaged.iter().any(|damaged| {
        // The damage reaches up to the next live entry after it, or the log's end.
        let next = visits
            .entries
            .iter()
            .position(|(lsn, _)| *lsn > damaged.last_lsn);
        let reaches = next.map_or(report.next_position, |index| visits.positions[index]);
        damaged.incarnation < control.cut_incarnation && reaches > control.cut
    })
}

/// Whether the model writer's two opens cannot each bump the control block's `sequence`: its
/// `write_control` expects `ControlBlock::next_sequence` to succeed, and a block at
/// `CONTROL_SEQUENCE_LIMIT` (which replay accepts) cannot be bumped at all. Delete this, and
/// [`ModelCheck::SkippedSequence`], once the model writer's open returns a typed error there
/// (its open carrying out a recovery plan that returns `PlanError`): then expect that error
/// from the open, as [`ModelCheck::Refused`] does for an exhausted incarnation.
fn model_writer_cannot_bump(sequence: u64) -> bool {
    sequence > CONTROL_SEQUENCE_LIMIT - 2
}

/// Where replay opens the image (strict, or truncating with a cut), the model writer's open
/// must recover the same entries, and a second open of what it left the same entries again; so
/// must an open after a crash in the middle of the first, right after its control block (the
/// new incarnation and the cut) is durable and before anything after it (the zeroing of the
/// region after the cut, the tail marker). The model writer replays bytes: an image with
/// unreadable blocks is not checked.
fn check_model_writer(
    image: &Image,
    strict: (&Result<RecoveryReport, ReplayError>, &Visited),
    truncating: (&Result<RecoveryReport, ReplayError>, &Visited),
) -> Result<ModelCheck, String> {
    let (mode, report, visited) = match (strict, truncating) {
        ((Ok(report), visited), _) => (RecoveryMode::Strict, report, visited),
        ((Err(_), _), (Ok(report), visited)) if report.outcome == Outcome::Truncated => {
            (RecoveryMode::TruncateAtCorruption, report, visited)
        }
        _ => return Ok(ModelCheck::NotRun),
    };
    if !image.unreadable.is_empty() {
        return Ok(ModelCheck::SkippedUnreadable);
    }
    if model_writer_cannot_bump(report.control.sequence) {
        return Ok(ModelCheck::SkippedSequence);
    }
    let options = ReplayOptions {
        mode,
        ..ReplayOptions::default()
    };
    // The two opens bump the incarnation twice: refusing that is the typed answer.
    let exhausted = report.incarnation_max >= u32::MAX - 1;
    let (writer, first, entries) = match ModelWriter::open(image.bytes.clone(), &options) {
        Ok(opened) => opened,
        Err(ReplayError::IncarnationExhausted) if exhausted => return Ok(ModelCheck::Refused),
        Err(error) => {
            return Err(format!(
                "{mode:?} replay opens, the model writer does not: {error}"
            ))
        }
    };
    if first != *report || entries != *visited {
        return Err(format!(
            "the model writer's {mode:?} open recovered {} entries (report {first:?}), replay {}",
            entries.len(),
            visited.len()
        ));
    }
    let crashed = crashed_after_control(&image.bytes, &first)?;
    check_open_after_crash(&crashed, mode, report, visited)?;
    let again = ModelWriter::open(writer.durable().to_vec(), &ReplayOptions::default());
    match again {
        Ok((_, second, entries)) if entries == *visited && second.next_lsn == report.next_lsn => {
            Ok(ModelCheck::Reopened)
        }
        Err(ReplayError::IncarnationExhausted) if exhausted => Ok(ModelCheck::Refused),
        Ok((_, second, entries)) => Err(format!(
            "a second open after the model writer's {mode:?} open recovered {} entries to LSN {} \
             (first: {} to LSN {}): {second:?}",
            entries.len(),
            second.next_lsn,
            visited.len(),
            report.next_lsn
        )),
        Err(error) => Err(format!(
            "a second open after the model writer's {mode:?} open fails: {error}"
        )),
    }
}

/// An open of `crashed` (the image after a crash in the middle of the model writer's `mode`
/// open, right after its control block) recovers the entries replay found first (`report`,
/// `visited`).
fn check_open_after_crash(
    crashed: &[u8],
    mode: RecoveryMode,
    report: &RecoveryReport,
    visited: &Visited,
) -> Result<(), String> {
    match replay_image(crashed, &Unreadable::none(), RecoveryMode::Strict) {
        (Ok(second), entries) if entries == *visited && second.next_lsn == report.next_lsn => {
            Ok(())
        }
        (result, entries) => Err(format!(
            "after a crash right after the control block of the model writer's {mode:?} \
             open, the next open {} (first: {} entries to LSN {})",
            result.map_or_else(
                |error| format!("fails: {error}"),
                |second| format!(
                    "recovered {} entries to LSN {}: {second:?}",
                    entries.len(),
                    second.next_lsn
                )
            ),
            visited.len(),
            report.next_lsn
        )),
    }
}

/// The image after a crash in the middle of a writable open of `image` that replay reported as
/// `report`: its recovery plan carried out up to its control block (the steps before it flush,
/// and after quarantined damage write the tail marker), nothing after it.
fn crashed_after_control(image: &[u8], report: &RecoveryReport) -> Result<Vec<u8>, String> {
    let plan = recovery::plan(report)
        .map_err(|error| format!("the model writer opened, its plan fails: {error}"))?;
    let control_at = plan
        .steps
        .iter()
        .position(|step| {
            matches!(
                step,
                Step::Write {
                    what: Written::ControlBlock,
                    ..
                }
            )
        })
        .ok_or("the recovery plan writes no control block")?;
    let mut crashed = image.to_vec();
    for step in &plan.steps[..=control_at] {
        if let Step::Write {
            ring_offset, bytes, ..
        } = step
        {
            let at = usize::try_from(*ring_offset).map_err(|_| "a write past memory")?;
            crashed
                .get_mut(at..at + bytes.len())
                .ok_or("a write of the plan lies past the image")?
                .copy_from_slice(bytes);
        }
    }
    Ok(crashed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_salvage_row_has_one_strict_counterpart() {
        for (index, row) in ROWS.iter().enumerate() {
            if row.decision == Decision::CutCorruption {
                let strict = strict_counterpart(index).expect("a counterpart");
                assert_eq!(ROWS[strict].decision, Decision::FailCorruption);
            }
        }
    }

    #[test]
    fn variant_names_stop_at_the_first_bracket() {
        assert_eq!(variant_name("ControlHead { head: 1 }"), "ControlHead");
        assert_eq!(variant_name("Geometry(BlockSize)"), "Geometry");
        assert_eq!(variant_name("ControlCorrupt"), "ControlCorrupt");
    }
}
