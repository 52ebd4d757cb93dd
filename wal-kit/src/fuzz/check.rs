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

use super::source::{Image, Unreadable};
use sealog_wal::decision::{row_index, Decision, ROWS};
use sealog_wal::error::ReplayError;
use sealog_wal::format::Position;
use sealog_wal::quarantine::{DamagedRange, DAMAGED_REPORTED};
use sealog_wal::replay::{Check, Outcome, RecoveryMode, RecoveryReport, UNREADABLE_RUNS_REPORTED};

use super::agree::{
    check_model_writer, check_modes_agree, check_quarantine_agrees, check_quarantine_model,
};
use super::observe::*;

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
