//! Logs over LogDrives (docs/composition.md): the AtomicLog, a loglet made of a soft-state
//! sequencer and a LogDrive, and the VirtualLog, one log made of a chain of loglets whose
//! configuration lives in a MetaStore, so that a log moves to new drives (or a new
//! composition of them) without stopping.
//!
//! From the top down (a module imports only modules below it):
//!
//! - [`virtual_log`]: [`VirtualLog`], its appends, tails and reads across segments;
//!   `reconfig`: sealing the active segment and installing the next by compare-and-swap;
//! - [`chain`]: the chain of segments and its encoding; [`loglet`]: how a segment's
//!   configuration becomes an AtomicLog;
//! - [`meta`]: the [`MetaStore`] trait and [`LogDriveMetaStore`], a durable one on a LogDrive;
//! - [`atomic`]: [`AtomicLog`]; [`slots`]: where its slots come from; [`sequencer`]: the
//!   in-process [`Sequencer`]; `seal_reads`: the seal-bit reads its appends share;
//! - [`delegate`]: reconfiguring on a handle's behalf; `deadline`: waiting with a deadline
//!   on the compositions' clock; [`error`]: the errors.

#![forbid(unsafe_code)]

pub mod atomic;
pub mod chain;
mod deadline;
pub mod delegate;
pub mod error;
pub mod loglet;
pub mod meta;
mod reconfig;
mod seal_reads;
pub mod sequencer;
pub mod slots;
pub mod virtual_log;

pub use atomic::{AtomicLog, AtomicOptions, Tail};
pub use chain::{Chain, LogletConfig, Segment};
pub use delegate::{ReconfigFuture, Reconfigurer};
pub use error::{LogError, MetaError};
pub use loglet::{DriveLogletFactory, LogletDrives, LogletFactory};
pub use meta::{LogDriveMetaStore, MetaStore, Versioned};
pub use reconfig::Reconfigured;
pub use sequencer::Sequencer;
pub use slots::{SlotFuture, Slots};
pub use virtual_log::{VirtualLog, VirtualOptions};
