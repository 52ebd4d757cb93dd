//! The invariants every image must keep under replay, whatever was done to it: replay returns
//! `Ok` or a typed error in both recovery modes (a panic is caught by the harness, not here);
//! an `Ok` report agrees with the entries it visited (count, LSNs contiguous from the trim
//! point, first, last and next LSN, outcome and its details, decision rows) and with the blocks
//! that cannot be read (a read error, or a block reported unreadable, only where one is);
//! replay is deterministic; strict `Ok` implies truncating `Ok` with the same report, and
//! strict corruption implies a truncating cut naming the same damage; and where replay opens,
//! the model writer's open recovers the same entries, and opening again after it the same
//! entries again, as does opening after a crash in the middle of it, right after its control
//! block (I-3, I-5, I-6 of RELIABILITY.md). Images are replayed through
//! [`FailingSource`], so their unreadable blocks fail with EIO. It owns no generation and no
//! mutation.

use super::source::{FailingSource, Image, Unreadable};
use crate::decision::{decide, row_index, Decision, Facts, ROWS};
use crate::error::ReplayError;
use crate::format::{Position, CONTROL_SEQUENCE_LIMIT};
use crate::model::ModelWriter;
use crate::recovery::{self, Step, Written};
use crate::replay::{
    replay, Check, Outcome, RecoveryMode, RecoveryReport, ReplayOptions, UNREADABLE_RUNS_REPORTED,
};

/// Entries a replay visited: (LSN, payload).
pub type Visited = Vec<(u64, Vec<u8>)>;

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
    /// What the model writer's reopen check did.
    pub model: ModelCheck,
}

/// Replays `image` in `mode`, every read overlapping an `unreadable` block failing with EIO:
/// the result and the entries visited.
pub fn replay_image(
    image: &[u8],
    unreadable: &Unreadable,
    mode: RecoveryMode,
) -> (Result<RecoveryReport, ReplayError>, Visited) {
    let options = ReplayOptions {
        mode,
        read_chunk_bytes: 1 << 16,
        ..ReplayOptions::default()
    };
    let mut source = FailingSource::new(image, unreadable);
    let mut visited = Vec::new();
    let result = replay(&mut source, &options, &mut |entry| {
        visited.push((entry.lsn, entry.payload.to_vec()))
    });
    (result, visited)
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
    visited: &Visited,
) -> Result<(), String> {
    let Ok(report) = result else {
        return Ok(());
    };
    let silent = !image.unreadable.is_empty()
        && report.unreadable_blocks == 0
        && report.end_check != Check::ReadError
        && !report
            .corruption
            .is_some_and(|corruption| corruption.check == Check::ReadError);
    if !silent {
        return Ok(());
    }
    let (readable, readable_visited) = replay_image(&image.bytes, &Unreadable::none(), mode);
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

/// Checks one image against every invariant; `Err` names the first one broken.
pub fn check_image(image: &Image) -> Result<Observed, String> {
    let (strict, strict_visited) = replay_deterministic(image, RecoveryMode::Strict)?;
    let (truncating, truncating_visited) =
        replay_deterministic(image, RecoveryMode::TruncateAtCorruption)?;
    if let Ok(report) = &strict {
        check_report(report, &strict_visited, RecoveryMode::Strict)?;
        check_unreadable(report, &image.unreadable, RecoveryMode::Strict)?;
    }
    if let Ok(report) = &truncating {
        check_report(
            report,
            &truncating_visited,
            RecoveryMode::TruncateAtCorruption,
        )?;
        check_unreadable(
            report,
            &image.unreadable,
            RecoveryMode::TruncateAtCorruption,
        )?;
    }
    if let Err(ReplayError::Corruption(corruption)) = &strict {
        if corruption.check == Check::ReadError && image.unreadable.is_empty() {
            return Err(format!(
                "strict replay names a read error with every block readable: {corruption:?}"
            ));
        }
    }
    check_modes_agree(&strict, &strict_visited, &truncating, &truncating_visited)?;
    check_no_silent_read_error(image, RecoveryMode::Strict, &strict, &strict_visited)?;
    check_no_silent_read_error(
        image,
        RecoveryMode::TruncateAtCorruption,
        &truncating,
        &truncating_visited,
    )?;
    let model = check_model_writer(
        image,
        (&strict, &strict_visited),
        (&truncating, &truncating_visited),
    )?;
    let no_rows = [0; ROWS.len()];
    let truncating_rows = truncating
        .as_ref()
        .map_or(no_rows, |report| report.row_hits);
    let strict_rows = match (&strict, &truncating) {
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
    };
    let name = |result: &Result<RecoveryReport, ReplayError>| match result {
        Ok(report) => report.outcome.name().to_string(),
        Err(error) => error_kind(error),
    };
    Ok(Observed {
        strict: name(&strict),
        truncating: name(&truncating),
        strict_rows,
        truncating_rows,
        model,
    })
}

/// Replays twice in `mode` and checks both runs agree.
fn replay_deterministic(
    image: &Image,
    mode: RecoveryMode,
) -> Result<(Result<RecoveryReport, ReplayError>, Visited), String> {
    let (first, first_visited) = replay_image(&image.bytes, &image.unreadable, mode);
    let (second, second_visited) = replay_image(&image.bytes, &image.unreadable, mode);
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
    visited: &Visited,
    mode: RecoveryMode,
) -> Result<(), String> {
    let fail = |what: String| Err(format!("{mode:?} report: {what}; report {report:?}"));
    let first = report.trim_lsn + 1;
    if visited.len() as u64 != report.entries {
        return fail(format!(
            "{} entries visited, {} reported",
            visited.len(),
            report.entries
        ));
    }
    if let Some(index) = (0..visited.len()).find(|&index| visited[index].0 != first + index as u64)
    {
        return fail(format!(
            "entry {index} has LSN {}, not {} (contiguous from the trim point)",
            visited[index].0,
            first + index as u64
        ));
    }
    if report.next_lsn != first + report.entries {
        return fail(format!(
            "next LSN {} after {} entries from {first}",
            report.next_lsn, report.entries
        ));
    }
    let expected_first = (report.entries > 0).then_some(first);
    let expected_last = (report.entries > 0).then(|| report.next_lsn - 1);
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
    let g = &report.control.geometry;
    let next = report.next_position;
    let inside = next.segment < g.segment_count
        && next.offset >= g.segment_data_offset()
        && u64::from(next.offset) < g.segment_size_bytes
        && next.offset % g.block_size_bytes == 0;
    if !inside {
        return fail(format!(
            "next position {next} is not a data block of the ring"
        ));
    }
    if report.incarnation_max < report.control.incarnation {
        return fail("incarnation_max below the control block's".into());
    }
    if report.batches > 0 && report.watermark_max >= report.next_lsn {
        return fail("a watermark at or past the next LSN".into());
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
             corruption {:?}",
            report.unreadable_blocks, report.unreadable_runs, report.end_check, report.corruption
        ))
    };
    let read_error = report.end_check == Check::ReadError
        || report
            .corruption
            .is_some_and(|corruption| corruption.check == Check::ReadError);
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
    let mut ended = 0;
    for (row, hits) in ROWS.iter().zip(report.row_hits) {
        match row.decision {
            Decision::Accept => accepted += hits,
            Decision::SkipToNextSegment => skipped += hits,
            _ => ended += hits,
        }
    }
    let end = row_index(report.end_row).map(|index| (&ROWS[index], report.row_hits[index]));
    let end_ok = end.is_some_and(|(row, hits)| {
        hits == 1 && !matches!(row.decision, Decision::Accept | Decision::SkipToNextSegment)
    });
    if accepted != report.batches || skipped != report.segments_skipped || ended != 1 || !end_ok {
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
    match replay_image(&crashed, &Unreadable::none(), RecoveryMode::Strict) {
        (Ok(second), entries) if entries == *visited && second.next_lsn == report.next_lsn => {}
        (result, entries) => {
            return Err(format!(
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
            ))
        }
    }
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

/// The image after a crash in the middle of a writable open of `image` that replay reported as
/// `report`: its recovery plan carried out up to its control block (the steps before it only
/// flush), nothing after it.
fn crashed_after_control(image: &[u8], report: &RecoveryReport) -> Result<Vec<u8>, String> {
    let plan = recovery::plan(report)
        .map_err(|error| format!("the model writer opened, its plan fails: {error}"))?;
    let (ring_offset, bytes) = plan
        .steps
        .iter()
        .find_map(|step| match step {
            Step::Write {
                ring_offset,
                bytes,
                what: Written::ControlBlock,
            } => Some((*ring_offset, bytes)),
            _ => None,
        })
        .ok_or("the recovery plan writes no control block")?;
    let mut crashed = image.to_vec();
    let at = usize::try_from(ring_offset).map_err(|_| "a control block past memory")?;
    crashed
        .get_mut(at..at + bytes.len())
        .ok_or("the control block lies past the image")?
        .copy_from_slice(bytes);
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
