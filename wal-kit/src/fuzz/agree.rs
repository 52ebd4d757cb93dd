//! What replay's recovery modes and the model writer must agree on for one image: strict and
//! truncating replay open the same log or refuse alike; quarantine opens wherever strict does;
//! and where replay opens, the model writer's open (and a reopen, and an open after a crash
//! right after its control block) recovers the same entries and damage (I-3, I-5, I-6 of
//! docs/recovery.md).

use super::source::{Image, Unreadable};
use crate::model::ModelWriter;
use sealog_wal::error::ReplayError;
use sealog_wal::format::{Position, CONTROL_SEQUENCE_LIMIT};
use sealog_wal::quarantine::{Damaged, DamagedHeader, DamagedRange};
use sealog_wal::recovery::TailMarker;
use sealog_wal::recovery::{self, Step, Written};
use sealog_wal::replay::{Outcome, RecoveryMode, RecoveryReport, ReplayOptions};

use super::observe::*;

/// Strict and truncating replay agree: where strict opens, truncating opens the same log; where
/// strict finds corruption, truncating cuts there; any other refusal is the same in both.
pub(super) fn check_modes_agree(
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
pub(super) fn check_quarantine_agrees(
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
pub(super) fn check_quarantine_model(
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
pub(super) fn check_model_writer(
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
