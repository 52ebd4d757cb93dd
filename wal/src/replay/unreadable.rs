//! What the probe after a break learns of blocks it cannot read: the runs of consecutive
//! unreadable blocks (the first few listed, all counted), the first run with what the
//! decision needs of it, and whether the log goes on after one. Followed block by block in
//! O(1) per block ([`UnreadableTracker`]), and turned into the `unread` fact's evidence.

use crate::format::{Geometry, Position};
use crate::replay::check::{Check, Evidence};
use crate::replay::report::{UnreadableRun, UNREADABLE_RUNS_REPORTED};
use crate::replay::scanner::Failure;

/// The first unreadable run the probe met, with what the decision needs to know of it.
#[derive(Clone, Copy, Debug)]
pub(super) struct FirstRun {
    start: Position,
    /// One past its last block.
    pub(super) end: Position,
    /// Batch bytes in it (segment header blocks not counted).
    data_bytes: u64,
    /// It starts at the break: the walk failed there with a read error.
    pub(super) at_break: bool,
}

/// What the probe learnt about unreadable blocks.
#[derive(Clone, Debug, Default)]
pub(super) struct UnreadableFound {
    pub(super) blocks: u64,
    pub(super) runs: Vec<UnreadableRun>,
    pub(super) first_run: Option<FirstRun>,
    /// The first valid record of this log (not stale, not of the batch broken at the break)
    /// found after an unreadable block.
    log_after: Option<Position>,
}

impl UnreadableFound {
    /// The evidence that unreadable blocks hold what the log needs (the `unread` fact): the
    /// run at the break is longer than the window, or the log goes on after a run.
    pub(super) fn evidence(
        &self,
        window_bytes_max: u64,
        drop_lsn: u64,
        lsn_max: u64,
    ) -> Option<Evidence> {
        let run = self.first_run?;
        let too_long = run.at_break && run.data_bytes > window_bytes_max;
        (too_long || self.log_after.is_some()).then_some(Evidence::Unreadable {
            at: run.start,
            run_bytes: run.data_bytes,
            first_lsn: drop_lsn,
            last_lsn: (lsn_max >= drop_lsn).then_some(lsn_max),
            log_after: self.log_after,
        })
    }
}

/// Follows the probe block by block (readable or not) and the valid records it finds, and
/// keeps [`UnreadableFound`]: O(1) per block, and a bounded list of runs.
pub(super) struct UnreadableTracker {
    block_bytes: u64,
    /// Where the walk's read error at the break is, when that is how it failed inside a batch:
    /// the run that starts there is the break's.
    break_block: Option<Position>,
    /// The last block the probe met was unreadable.
    in_run: bool,
    /// The run being extended is the first one.
    first_run_open: bool,
    /// The run being extended is in `found.runs`.
    run_listed: bool,
    found: UnreadableFound,
}

impl UnreadableTracker {
    /// A tracker for the probe after a break that failed with `failure`: a read error at the
    /// break's segment header starts the first run there.
    pub(super) fn new(failure: &Failure, geometry: Geometry) -> UnreadableTracker {
        let block_bytes = u64::from(geometry.block_size_bytes);
        let mut tracker = UnreadableTracker {
            block_bytes,
            break_block: None,
            in_run: false,
            first_run_open: false,
            run_listed: false,
            found: UnreadableFound::default(),
        };
        if failure.check == Check::ReadError {
            if failure.position.offset == 0 {
                // The break's segment header could not be read: the run starts there, and the
                // probe's first block (the segment's first data block) continues it.
                let start = failure.position;
                tracker.found.blocks = 1;
                tracker.found.runs.push(UnreadableRun { start, blocks: 1 });
                tracker.found.first_run = Some(FirstRun {
                    start,
                    end: Position {
                        offset: geometry.segment_data_offset(),
                        ..start
                    },
                    data_bytes: 0,
                    at_break: true,
                });
                tracker.in_run = true;
                tracker.first_run_open = true;
                tracker.run_listed = true;
            } else {
                tracker.break_block = Some(failure.position);
            }
        }
        tracker
    }

    /// The probe could not read the block at `here`.
    pub(super) fn unreadable(&mut self, here: Position) {
        let found = &mut self.found;
        found.blocks += 1;
        let end = Position {
            // A block inside its segment: the sum is at most the segment size, a u32.
            offset: here.offset + self.block_bytes as u32,
            ..here
        };
        if self.in_run {
            if self.run_listed {
                if let Some(run) = found.runs.last_mut() {
                    run.blocks += 1;
                }
            }
            if self.first_run_open {
                if let Some(run) = found.first_run.as_mut() {
                    run.end = end;
                    run.data_bytes += self.block_bytes;
                }
            }
        } else {
            self.run_listed = found.runs.len() < UNREADABLE_RUNS_REPORTED;
            if self.run_listed {
                found.runs.push(UnreadableRun {
                    start: here,
                    blocks: 1,
                });
            }
            if found.first_run.is_none() {
                found.first_run = Some(FirstRun {
                    start: here,
                    end,
                    data_bytes: self.block_bytes,
                    at_break: self.break_block == Some(here),
                });
                self.first_run_open = true;
            }
        }
        self.in_run = true;
    }

    /// The probe could not read the segment header at `here` (offset 0 of a segment). It
    /// starts a listed run of its own (a run is walked from its start block by block, and the
    /// block after a segment's last data block is the next segment's first data block), and
    /// extends the first run without adding batch bytes.
    pub(super) fn unreadable_header(&mut self, here: Position) {
        debug_assert_eq!(here.offset, 0);
        let found = &mut self.found;
        found.blocks += 1;
        self.run_listed = found.runs.len() < UNREADABLE_RUNS_REPORTED;
        if self.run_listed {
            found.runs.push(UnreadableRun {
                start: here,
                blocks: 1,
            });
        }
        let end = Position {
            // The header block lies inside its segment.
            offset: self.block_bytes as u32,
            ..here
        };
        if self.first_run_open {
            if let Some(run) = found.first_run.as_mut() {
                run.end = end;
            }
        } else if found.first_run.is_none() {
            found.first_run = Some(FirstRun {
                start: here,
                end,
                data_bytes: 0,
                at_break: false,
            });
            self.first_run_open = true;
        }
        self.in_run = true;
    }

    /// The probe read the block it is at.
    pub(super) fn readable(&mut self) {
        self.in_run = false;
        self.first_run_open = false;
    }

    /// A valid record of this log (of a later batch than the broken one) lies at `place`.
    pub(super) fn log_goes_on(&mut self, place: Position) {
        if self.found.blocks > 0 && self.found.log_after.is_none() {
            self.found.log_after = Some(place);
        }
    }

    /// What the probe learnt, once it has met its last block.
    pub(super) fn finish(self) -> UnreadableFound {
        self.found
    }
}
