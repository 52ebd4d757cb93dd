//! What a simulation run hands back: [`SimReport`], the counts of a seed or of many (the
//! operations, how they ended, the faults injected, the histories checked and those the
//! checker gave up on), and [`SimFailure`], a seed that broke a check, with the command
//! that replays it and the file its history was saved to.

use std::fmt;
use std::ops::AddAssign;
use std::path::PathBuf;

use crate::replicated::faults::FaultCounts;

/// The counts of one seed's run, or the sum of many.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SimReport {
    /// Seeds run.
    pub seeds: u64,
    /// Operations invoked (reconfigurations included).
    pub operations: u64,
    /// Appends acknowledged.
    pub appends_acked: u64,
    /// Operations that failed indeterminately.
    pub indeterminate: u64,
    /// Operations that failed definitely.
    pub definite: u64,
    /// Reconfigurations that succeeded.
    pub reconfigurations: u64,
    /// Histories the linearizability checker ruled on.
    pub histories_checked: u64,
    /// Histories it gave up on (its step budget ran out).
    pub checker_unknown: u64,
    /// Steps the simulation took.
    pub steps: u64,
    /// The faults injected.
    pub faults: FaultCounts,
}

impl AddAssign for SimReport {
    fn add_assign(&mut self, other: SimReport) {
        self.seeds += other.seeds;
        self.operations += other.operations;
        self.appends_acked += other.appends_acked;
        self.indeterminate += other.indeterminate;
        self.definite += other.definite;
        self.reconfigurations += other.reconfigurations;
        self.histories_checked += other.histories_checked;
        self.checker_unknown += other.checker_unknown;
        self.steps += other.steps;
        self.faults += other.faults;
    }
}

impl fmt::Display for SimReport {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            formatter,
            "{} seeds, {} operations ({} appends acknowledged, {} indeterminate, {} definite \
             failures, {} reconfigurations), {} histories checked, {} unknown; faults: {:?}",
            self.seeds,
            self.operations,
            self.appends_acked,
            self.indeterminate,
            self.definite,
            self.reconfigurations,
            self.histories_checked,
            self.checker_unknown,
            self.faults
        )
    }
}

/// A seed that broke a check.
#[derive(Clone, Debug)]
pub struct SimFailure {
    /// The seed.
    pub seed: u64,
    /// What broke.
    pub message: String,
    /// The command that replays the seed.
    pub replay: String,
    /// Where its history was saved.
    pub history: Option<PathBuf>,
}

impl fmt::Display for SimFailure {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(formatter, "seed {} failed: {}", self.seed, self.message)?;
        writeln!(formatter, "replay: {}", self.replay)?;
        match &self.history {
            Some(path) => write!(formatter, "history: {}", path.display()),
            None => write!(formatter, "history: (could not be saved)"),
        }
    }
}
