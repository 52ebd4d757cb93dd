//! [`Reconfigurer`]: reconfiguring on a VirtualLog handle's behalf. A handle whose caller may
//! append and read but not seal or fence (a client of a log service) asks a reconfigurer,
//! typically a sequencer in another process, which seals the active segment and installs a
//! segment of its own; the handle then reads the new chain.

use std::future::Future;
use std::pin::Pin;

use crate::error::LogError;

/// What a [`Reconfigurer`] call returns.
pub type ReconfigFuture<'a> = Pin<Box<dyn Future<Output = Result<(), LogError>> + Send + 'a>>;

/// Someone who reconfigures on a handle's behalf (see the module doc).
pub trait Reconfigurer: Send + Sync {
    /// Seals the segment on loglet `from` if it is still the active one and installs a new
    /// one after it; returns once the chain holds the new segment (or another
    /// reconfiguration got there first).
    fn extend_from(&self, from: u64) -> ReconfigFuture<'_>;
}
