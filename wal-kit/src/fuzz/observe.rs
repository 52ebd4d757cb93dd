//! What one replay of an image saw, and the words the checks speak in: the entries and damage
//! a replay visited ([`Visits`]), what the model writer's reopen check did ([`ModelCheck`]),
//! what a checked image yielded ([`Observed`]), and replaying an image in one mode.

use super::source::{FailingSource, Unreadable};
use sealog_wal::decision::{decide, row_index, Facts, ROWS};
use sealog_wal::error::ReplayError;
use sealog_wal::format::Position;
use sealog_wal::quarantine::Damaged;
use sealog_wal::replay::{replay_visiting, RecoveryMode, RecoveryReport, ReplayOptions, Visit};

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
