//! sealog's fault injection: a simulated faulty drive behind the engine's I/O trait
//! ([`device`]), and simulation runs of the real engine on it ([`simulate`]), each replayable
//! from one seed. Embedders can run their own code on the same drive.

#![forbid(unsafe_code)]

pub mod device;
pub mod simulate;

pub use device::{FaultConfig, FaultCounts, SimDevice};
pub use simulate::{run_seed, SimOptions, SimSummary, Violation};
