//! Crash tests of the LogDrive layer (issue 13): a [`LogDriveStore`] on the simulated drive,
//! its writes and flushes recorded ([`crate::trace`]), crash images built at many cut points
//! of a LogDrive workload, relocation's included ([`crash_states`]); seeded simulation with
//! the drive's faults on, crashing and recovering round after round ([`simulate`]); and the
//! writer a kill -9 test runs as a real process on a real ring ([`writer`]). What a recovery
//! must hold is [`model`]'s; the workload is [`workload`]'s.
//!
//! [`LogDriveStore`]: sealog_logdrive::LogDriveStore

pub mod crash_states;
pub mod model;
pub mod sim_store;
pub mod simulate;
pub mod workload;
pub mod writer;

pub use sim_store::{by_hand, open_sim_store, ring_geometry, SimStore, TraceJournal};
