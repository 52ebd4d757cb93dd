//! sealog's fault injection: a simulated faulty drive behind the engine's I/O trait
//! ([`device`]), simulation runs of the real engine on it ([`simulate`]), each replayable
//! from one seed, crash-state enumeration over the writes the engine issues ([`enumerate`]),
//! and corrupters that damage real rings on purpose ([`corrupt`]); [`replicated`] is the
//! seeded simulation of replicated logs over held LogDrives, with a linearizability checker.

#![forbid(unsafe_code)]

pub mod corrupt;
pub mod device;
pub mod enumerate;
pub mod fuse;
pub mod logdrive;
pub mod replicated;
pub mod scans;
pub mod simulate;
pub mod trace;

pub use device::{FaultConfig, FaultCounts, SimDevice};
pub use enumerate::{enumerate, EnumOptions, EnumSummary};
pub use scans::{check_quarantine, compare_scans, HintedScan, QuarantineFound};
pub use simulate::{run_seed, SimOptions, SimSummary, Violation};
