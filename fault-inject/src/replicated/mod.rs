//! Deterministic simulation of replicated logs, each run replayable from one seed: a
//! sequential log specification ([`model`]), recorded histories ([`history`]) and a
//! linearizability checker for them ([`linearizability`]).

pub mod clock;
pub mod executor;
pub mod faults;
pub mod held;
pub mod history;
pub mod linearizability;
pub mod model;
pub mod network;
pub mod reply;

pub use clock::SimClock;
pub use executor::{Executor, Spawner, Task};
pub use faults::{FaultCounts, SimFaults};
pub use held::HeldLogDrive;
pub use history::{History, Operation};
pub use linearizability::{check, Verdict, DEFAULT_STEP_BUDGET};
pub use model::{LogInput, LogOutput, LogState};
pub use network::Network;
