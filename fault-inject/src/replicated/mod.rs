//! Deterministic simulation of replicated logs, each run replayable from one seed. A log
//! under test implements [`SimLog`] over replicas held behind a [`Network`]
//! ([`HeldLogDrive`]s), reads time from a [`SimClock`], and runs as tasks of a seeded
//! [`Executor`]; [`run_seed`] drives its clients, injects the network's faults
//! ([`SimFaults`]) and checks the history against a sequential log ([`model`]) with a
//! linearizability checker ([`linearizability`]), among other checks ([`checks`]).
//!
//! From the top down: [`driver`] (the run and its checks), [`workload`] (the clients and
//! their recorder), [`held`] over [`network`] over [`reply`] and [`faults`]; [`executor`],
//! [`clock`]; [`linearizability`] over [`history`] and [`model`]; [`sim_log`], [`seeds`],
//! [`report`].

pub mod checks;
pub mod clock;
pub mod driver;
pub mod executor;
pub mod faults;
pub mod held;
pub mod history;
pub mod linearizability;
pub mod model;
pub mod network;
pub mod reply;
pub mod report;
pub mod seeds;
pub mod sim_log;
pub mod workload;

pub use clock::SimClock;
pub use driver::{run_seed, run_seeds, SeedRun, SimConfig, SimContext};
pub use executor::{Executor, Spawner, Task};
pub use faults::{FaultCounts, SimFaults};
pub use held::HeldLogDrive;
pub use history::{History, Operation};
pub use linearizability::{check, Verdict, DEFAULT_STEP_BUDGET};
pub use model::{LogInput, LogOutput, LogState};
pub use network::Network;
pub use report::{SimFailure, SimReport};
pub use seeds::{replay_command, seeds};
pub use sim_log::{payload, read_value, value_of, LocalBoxFuture, SimError, SimLog};
pub use workload::OpMix;
