//! Replay: reads a ring through a [`RingSource`] and decides what the log is. It owns the
//! recovery rules and invariants I-1..I-15 of docs/recovery.md as far as
//! a single read-only pass can keep them; the writes that recovery implies (making a cut durable,
//! invalidating the dirty region, bumping the incarnation) are the engine's, driven by the
//! [`RecoveryReport`] this returns.
//!
//! The pass:
//! 1. Read both control copies and take the newest valid one: identity, geometry, trim point
//!    and the head (the batch boundary where the log starts).
//! 2. Walk batches from the head. At each batch boundary, gather the facts and look them up in
//!    the decision table ([`crate::decision`]): accept the batch, move on to the next segment,
//!    or stop.
//! 3. At the first boundary that does not continue the log (the "break" at position `E`, where
//!    LSN `e` was expected), probe every block from `E` to the head's segment on the next lap (or,
//!    when nothing before `E` is live, to `E`'s segment on the next lap: the head moves to `E`) for
//!    valid records of this log. Their watermarks and positions tell a torn tail (only
//!    never-acknowledged data lost, within the in-flight window) from corruption (a later
//!    watermark covers `e`, or valid data lies beyond the window). Blocks the probe cannot read
//!    are corruption where no crash explains them (a run at the break longer than the window,
//!    or any run with the log going on after it) and are otherwise only reported.
//! 4. In quarantine mode ([`RecoveryMode::Quarantine`]), a break the table would fail on is
//!    stepped over instead: the damaged batch is walked record by record (intact records are
//!    live entries, a record whose header survived is damage with that header), the LSNs from
//!    the first header lost to the first batch after the damage whose segment header and first
//!    header check out (found by the same probe, in position order) are one damaged range,
//!    and the walk goes on there. With no such batch, the log ends after everything found and
//!    the damage runs to the highest LSN shown acknowledged. Nothing is cut there: the writer's
//!    next batch goes after it, so every later open finds the same damage.
//!
//! Memory is bounded by the read chunk and the ring's batch limit (itself capped by
//! [`BATCH_SIZE_LIMIT_BYTES`](crate::format::BATCH_SIZE_LIMIT_BYTES)), never by what a length
//! field on disk claims: every length is checked against the geometry before it is used.
//!
//! Cost: the walk reads the live entries. The probe after the break reads, in a full scan, every
//! block up to the head's segment on the next lap: the whole ring. With a tail hint it can
//! trust (the control block's [`TailHint`], see [`trusted_hint`]) it reads only to the later of
//! the hint's limit and one in-flight window past the break ([`Scan::Hinted`]), so an open
//! costs the live data plus a bounded margin, not the ring. That is exact, not a guess: the
//! writer never ends a batch past a durable hint, and every recovery covers what it found of older
//! incarnations with its first hint (see below), so every valid record a full scan could find
//! after the break lies before the hint. The walk itself never
//! looks at the hint: it follows valid batches wherever they go, and a log that ends past the
//! hint proves the hint wrong (the newest control block was lost), so the probe then reads
//! the whole ring after all ([`FullScan::HintCrossed`]). A hint is also ignored when another
//! incarnation set it, when it names no place at or after the head, or when the other control
//! copy, of the same incarnation, records a further one ([`FullScan`]). The probe after a
//! hinted break reaches a window past the break whatever the hint says, so a batch whose
//! watermark proves a hole at the break was acknowledged is found: the first batch built
//! after the hole's acknowledgement lies within one window of it.
//!
//! Why no older incarnation's record lies past a trusted hint: a writable open writes its
//! hint in the same control block as its new incarnation, at the later of a margin past the
//! cut and the end of the region after the cut it is about to zero. So once that block is
//! durable, whatever an older incarnation left past the cut that this open found (it probed
//! at least to that incarnation's own hint) lies before the new hint, zeroed or not yet; and
//! nothing of this log was written past the older hint.
//!
//! The parts, one module each: `report` (the options, the report and what a visitor is
//! handed), `check` (what failed, and why replay knows it was acknowledged), `control` (the
//! control copies and the tail hint), `entry_points` ([`replay`], [`replay_visiting`],
//! [`scan`], [`entries`]), `reader` (chunked reads), `scanner` (the scanner and the
//! arithmetic of places), `batches` (the checks at a batch boundary), `walk` (step 2),
//! `probe` and `unreadable` (the probe of step 3), `damaged` (the damaged walk of step 4),
//! and `finish` (the decision at the break and what it does).
//!
//! [`RingSource`]: crate::source::RingSource
//! [`TailHint`]: crate::format::TailHint

mod batches;
pub(crate) mod check;
mod control;
mod damaged;
mod entry_points;
mod finish;
mod probe;
mod reader;
mod report;
mod scanner;
mod unreadable;
mod walk;

pub use check::{Check, Corruption, Evidence};
pub use control::{read_control, trusted_hint};
pub use entry_points::{entries, replay, replay_visiting, scan, RecoveredEntries, RecoveredEntry};
pub use report::{
    Dropped, Entry, FullScan, Invalidate, Outcome, RecoveryMode, RecoveryReport, ReplayOptions,
    Scan, ScanPolicy, TornTail, UnreadableRun, Visit, UNREADABLE_RUNS_REPORTED,
};
