//! Hinted against full replay of one ring image: the check that the tail hint only ever saves
//! reads. Replay runs twice over the same bytes, once trusting the control block's tail hint
//! (when it can) and once forced to scan the whole ring, and both must find the same log: the
//! same entries, the same cut (next LSN and position), the same outcome and the same damage,
//! or the same error. Where no block is unreadable the two reports must agree in everything
//! but which scan was made, where it stopped and what it read; with unreadable blocks the
//! hinted scan, which reads less, may meet fewer of them (in free space past the hint), never
//! more, and never a different log. The crash-state enumeration and the simulation run it on
//! every image they open.
//!
//! [`check_quarantine`] does the same in quarantine mode, where the two scans must also find
//! the same damage (the same damaged records and ranges, and where the log resumes after it),
//! and holds quarantine to strict replay of the same image: the same report where strict opens
//! (a torn tail is cut exactly as strict cuts it), and where strict fails on corruption, an
//! open that names that corruption first among the breaks it stepped over.

use std::io;
use std::ops::Range;

use sealog_wal::{
    replay_visiting, Damaged, RecoveryMode, RecoveryReport, ReplayError, ReplayOptions, RingSource,
    Scan, ScanPolicy, Visit,
};

/// Which scan the hinted replay of an image made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HintedScan {
    /// The hint was trusted.
    Hinted,
    /// The hint could not be trusted (or replay failed before it chose): a full scan.
    Full,
}

/// An image whose reads fail (EIO) where they touch one of `unreadable`'s byte ranges.
struct Failing<'a> {
    bytes: &'a [u8],
    unreadable: &'a [Range<u64>],
}

impl RingSource for Failing<'_> {
    fn size_bytes(&self) -> u64 {
        self.bytes.len() as u64
    }

    fn read_at(&mut self, ring_offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let end = ring_offset + buf.len() as u64;
        if self
            .unreadable
            .iter()
            .any(|bad| ring_offset < bad.end && bad.start < end)
        {
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
        let mut bytes = self.bytes;
        bytes.read_at(ring_offset, buf)
    }
}

type Replayed = (Result<RecoveryReport, ReplayError>, Vec<(u64, Vec<u8>)>);

fn replay_with(image: &[u8], unreadable: &[Range<u64>], scan: ScanPolicy) -> Replayed {
    let (result, entries, _) = replay_in(image, unreadable, scan, RecoveryMode::Strict);
    (result, entries)
}

/// A replay's result, its live entries and its damage.
type ReplayedIn = (
    Result<RecoveryReport, ReplayError>,
    Vec<(u64, Vec<u8>)>,
    Vec<Damaged>,
);

/// Replays `image` as `scan` and `mode` say: the result, the live entries and the damage.
fn replay_in(
    image: &[u8],
    unreadable: &[Range<u64>],
    scan: ScanPolicy,
    mode: RecoveryMode,
) -> ReplayedIn {
    let mut source = Failing {
        bytes: image,
        unreadable,
    };
    let options = ReplayOptions {
        scan,
        mode,
        ..ReplayOptions::default()
    };
    let mut entries = Vec::new();
    let mut damaged = Vec::new();
    let result = replay_visiting(&mut source, &options, &mut |visited| match visited {
        Visit::Entry(entry) => entries.push((entry.lsn, entry.payload.to_vec())),
        Visit::Damaged(range) => damaged.push(*range),
    });
    (result, entries, damaged)
}

/// What a quarantine replay of an image found (checked by [`check_quarantine`]).
#[derive(Clone, Debug)]
pub struct QuarantineFound {
    /// The hinted replay's report.
    pub report: RecoveryReport,
    /// The damage it visited, in LSN order.
    pub damaged: Vec<Damaged>,
}

/// Replays `image` in quarantine mode hinted and full (reads touching `unreadable` failing
/// with EIO) and against strict replay of it (see the module doc): what it found, or the
/// error both scans and strict mode agree on.
pub fn check_quarantine(
    image: &[u8],
    unreadable: &[Range<u64>],
) -> Result<Result<QuarantineFound, String>, String> {
    let quarantine = RecoveryMode::Quarantine;
    let (hinted, entries, damaged) = replay_in(image, unreadable, ScanPolicy::Hinted, quarantine);
    let (full, full_entries, full_damaged) =
        replay_in(image, unreadable, ScanPolicy::Full, quarantine);
    same_damage((&entries, &damaged), (&full_entries, &full_damaged))?;
    let (strict, strict_entries, _) =
        replay_in(image, unreadable, ScanPolicy::Hinted, RecoveryMode::Strict);
    match (hinted, full) {
        (Ok(hinted), Ok(full)) => {
            same_report(&hinted, &full, !unreadable.is_empty())?;
            if hinted.quarantined != full.quarantined && unreadable.is_empty() {
                return Err("hinted and full quarantine replay name other damage".into());
            }
            strict_agrees(&strict, &strict_entries, &hinted, &entries)?;
            Ok(Ok(QuarantineFound {
                report: hinted,
                damaged,
            }))
        }
        (Err(hinted), Err(full)) => {
            same_refusal(&hinted, &full, &strict)?;
            Ok(Err(hinted.to_string()))
        }
        (hinted, full) => Err(format!(
            "hinted quarantine replay gave {}, full {}",
            outcome_of(&hinted),
            outcome_of(&full)
        )),
    }
}

/// The live entries and the damage that hinted and full quarantine replay visited.
type Found<'a> = (&'a [(u64, Vec<u8>)], &'a [Damaged]);

/// Hinted and full quarantine replay visited the same entries and the same damage.
fn same_damage(
    (entries, damaged): Found<'_>,
    (full_entries, full_damaged): Found<'_>,
) -> Result<(), String> {
    let where_ = |range: &Damaged| {
        (
            range.first_lsn,
            range.last_lsn,
            range.position,
            range.check,
            range.header,
        )
    };
    let ranges = |damaged: &[Damaged]| damaged.iter().map(where_).collect::<Vec<_>>();
    if entries != full_entries || ranges(damaged) != ranges(full_damaged) {
        return Err(format!(
            "hinted and full quarantine replay found different logs: {} entries and damage \
             {:?} against {} entries and damage {:?}",
            entries.len(),
            ranges(damaged),
            full_entries.len(),
            ranges(full_damaged)
        ));
    }
    Ok(())
}

/// Where quarantine replay opens, strict replay of the same image agrees: it opens with the
/// same report and entries, or fails on the corruption quarantine names first.
fn strict_agrees(
    strict: &Result<RecoveryReport, ReplayError>,
    strict_entries: &[(u64, Vec<u8>)],
    hinted: &RecoveryReport,
    entries: &[(u64, Vec<u8>)],
) -> Result<(), String> {
    match strict {
        Ok(strict) => {
            let comparable = RecoveryReport {
                bytes_read: strict.bytes_read,
                ..hinted.clone()
            };
            if comparable != *strict || strict_entries != entries {
                return Err(format!(
                    "strict replay opens, quarantine finds another log: {} against {}",
                    outcome_of(&Ok(strict.clone())),
                    outcome_of(&Ok(hinted.clone()))
                ));
            }
        }
        Err(ReplayError::Corruption(corruption)) => {
            if hinted.quarantined.first() != Some(&**corruption) {
                return Err(format!(
                    "strict replay fails on {corruption}, quarantine names {:?}",
                    hinted.quarantined.first()
                ));
            }
        }
        Err(error) => {
            return Err(format!(
                "strict replay fails with {error}, quarantine opens"
            ))
        }
    }
    Ok(())
}

/// Where quarantine replay fails, hinted, full and strict replay fail the same way.
fn same_refusal(
    hinted: &ReplayError,
    full: &ReplayError,
    strict: &Result<RecoveryReport, ReplayError>,
) -> Result<(), String> {
    let kind = |error: &ReplayError| {
        let text = format!("{error:?}");
        text[..text.find(['(', '{', ' ']).unwrap_or(text.len())].to_string()
    };
    let strict_kind = strict.as_ref().err().map(kind);
    if kind(hinted) != kind(full) || strict_kind != Some(kind(hinted)) {
        return Err(format!(
            "quarantine replay failed with {hinted} (full: {full}), strict with \
             {strict:?}"
        ));
    }
    Ok(())
}

/// Replays `image` hinted and full (reads touching `unreadable` failing with EIO) and checks
/// that both found the same log; says which scan the hinted replay made.
pub fn compare_scans(image: &[u8], unreadable: &[Range<u64>]) -> Result<HintedScan, String> {
    let (hinted, hinted_entries) = replay_with(image, unreadable, ScanPolicy::Hinted);
    let (full, full_entries) = replay_with(image, unreadable, ScanPolicy::Full);
    if hinted_entries != full_entries {
        return Err(format!(
            "hinted and full replay recovered different entries: {} against {}",
            hinted_entries.len(),
            full_entries.len()
        ));
    }
    match (hinted, full) {
        (Ok(hinted), Ok(full)) => {
            let kind = match hinted.scan {
                Scan::Hinted { .. } => HintedScan::Hinted,
                Scan::Full { .. } => HintedScan::Full,
            };
            same_report(&hinted, &full, !unreadable.is_empty())?;
            Ok(kind)
        }
        (Err(hinted), Err(full)) => {
            let (mut hinted, mut full) = (format!("{hinted:?}"), format!("{full:?}"));
            if !unreadable.is_empty() {
                // What an unreadable run measured may differ (the hinted scan saw less of it);
                // the kind of failure may not.
                hinted.truncate(hinted.find(['(', '{']).unwrap_or(hinted.len()));
                full.truncate(full.find(['(', '{']).unwrap_or(full.len()));
            }
            if hinted != full {
                return Err(format!(
                    "hinted replay failed with {hinted}, full with {full}"
                ));
            }
            Ok(HintedScan::Full)
        }
        (hinted, full) => Err(format!(
            "hinted replay gave {}, full replay {}",
            outcome_of(&hinted),
            outcome_of(&full)
        )),
    }
}

fn outcome_of(result: &Result<RecoveryReport, ReplayError>) -> String {
    match result {
        Ok(report) => format!(
            "{} ending at LSN {}",
            report.outcome.name(),
            report.next_lsn
        ),
        Err(error) => format!("the error {error}"),
    }
}

/// The two reports agree on the log; without unreadable blocks on everything but the scan.
fn same_report(
    hinted: &RecoveryReport,
    full: &RecoveryReport,
    unreadable: bool,
) -> Result<(), String> {
    let log = |report: &RecoveryReport| {
        format!(
            "outcome {:?}, next LSN {} at {}, entries {}..{:?}, torn {:?}, corruption {:?}, \
             dropped {:?}",
            report.outcome,
            report.next_lsn,
            report.next_position,
            report.trim_lsn,
            report.last_lsn,
            report.torn,
            report.corruption,
            report.dropped
        )
    };
    if log(hinted) != log(full) {
        return Err(format!(
            "hinted and full replay found different logs: {} against {}",
            log(hinted),
            log(full)
        ));
    }
    if unreadable {
        if hinted.unreadable_blocks > full.unreadable_blocks {
            return Err(format!(
                "the hinted replay met {} unreadable blocks, the full one only {}",
                hinted.unreadable_blocks, full.unreadable_blocks
            ));
        }
        return Ok(());
    }
    let comparable = RecoveryReport {
        scan: full.scan,
        scan_end: full.scan_end,
        bytes_read: full.bytes_read,
        ..hinted.clone()
    };
    if comparable != *full {
        return Err(format!(
            "hinted and full replay reports differ beyond the scan: {comparable:?} against \
             {full:?}"
        ));
    }
    Ok(())
}
