//! Where an [`AtomicLog`](crate::AtomicLog)'s slots come from: the [`Slots`] trait, which the
//! in-process [`Sequencer`] implements and a sequencer in another process (reached over the
//! network) can implement too. The AtomicLog needs only these five calls of its sequencer,
//! so its appends, seal reads and tails run the same whichever it is.

use std::future::Future;
use std::pin::Pin;

use crate::error::LogError;
use crate::sequencer::Sequencer;

/// What a [`Slots`] call returns.
pub type SlotFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, LogError>> + Send + 'a>>;

/// A sequencer as the AtomicLog uses it (see [`Sequencer`] for what each call promises).
pub trait Slots: Send + Sync {
    /// The next slot, waiting while the window is full.
    fn acquire(&self) -> SlotFuture<'_, u64>;

    /// Completes `slot` and waits until every slot below it completed.
    fn complete(&self, slot: u64) -> SlotFuture<'_, ()>;

    /// T: the first slot not completed. `SequencerDown` when the sequencer is gone.
    fn tail(&self) -> SlotFuture<'_, u64>;

    /// The log is sealed: hand out no more slots.
    fn refuse_slots(&self);

    /// T as last known here, down or not (for the error of a stalled window).
    fn first_incomplete(&self) -> u64;
}

impl Slots for Sequencer {
    fn acquire(&self) -> SlotFuture<'_, u64> {
        Box::pin(Sequencer::acquire(self))
    }

    fn complete(&self, slot: u64) -> SlotFuture<'_, ()> {
        Box::pin(Sequencer::complete(self, slot))
    }

    fn tail(&self) -> SlotFuture<'_, u64> {
        Box::pin(std::future::ready(Sequencer::tail(self)))
    }

    fn refuse_slots(&self) {
        Sequencer::refuse_slots(self);
    }

    fn first_incomplete(&self) -> u64 {
        Sequencer::first_incomplete(self)
    }
}
