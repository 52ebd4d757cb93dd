//! Slices a client lends the drive thread for one append, so that the drive copies a borrowed
//! payload (an embedder's own header and a body it received from the network) straight into the
//! registered buffer its batch is written from: one copy, no allocation, no concatenation.
//!
//! It lives with the io_uring backend because it is the same contract as a registered buffer
//! handed to the kernel: memory lent to another agent, which must not be touched or freed until
//! that agent says it is done with it. Here the agent is the drive thread, and
//! [`LentParts::lend`] does not return (nor unwind) before the drive has dropped the
//! [`LentParts`], whichever way it goes: copied into a batch, failed, or dropped in a channel
//! of a drive that stopped.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::ticket::TicketState;

/// A client's slices, lent to the drive thread until this value is dropped.
pub struct LentParts {
    /// The client's `&[&[u8]]`, its lifetime erased: valid until `ticket.lent` is cleared,
    /// which happens only in this value's `Drop`.
    parts: *const [&'static [u8]],
    ticket: Arc<TicketState>,
    /// Whether the drive copied the slices (then its turn publishes the return; otherwise
    /// the drop publishes it at once, wherever it happens).
    copied: bool,
}

// SAFETY: `LentParts` only reads the client's slices (shared `&[u8]`, which are `Sync`), and the
// client thread that owns them is blocked in `LentParts::lend` until this value is dropped, so
// sending it to the drive thread shares immutable bytes that outlive every use of them.
unsafe impl Send for LentParts {}

impl LentParts {
    /// Lends `parts` for the duration of `scope`, which hands the [`LentParts`] to the drive;
    /// returns `scope`'s result once the drive has dropped it. `ticket` is the append's ticket
    /// state: its `lent` flag says whether the drive still holds the slices.
    pub(crate) fn lend<R>(
        parts: &[&[u8]],
        ticket: &Arc<TicketState>,
        scope: impl FnOnce(LentParts) -> R,
    ) -> R {
        /// Waits for the drive to give the slices back, also while unwinding from `scope`:
        /// this is what keeps the borrow alive for as long as the drive may read it.
        struct AwaitReturn<'a>(&'a TicketState);
        impl Drop for AwaitReturn<'_> {
            fn drop(&mut self) {
                self.0.wait_until_returned();
            }
        }
        ticket.lent.store(true, Ordering::SeqCst);
        // The second cast erases the slices' lifetime (which clippy does not count as a
        // change of type); `AwaitReturn` is what makes the erased lifetime long enough.
        #[allow(clippy::unnecessary_cast)]
        let erased = parts as *const [&[u8]] as *const [&'static [u8]];
        let lent = LentParts {
            parts: erased,
            ticket: Arc::clone(ticket),
            copied: false,
        };
        let _await_return = AwaitReturn(ticket);
        scope(lent)
    }

    /// The lent slices.
    pub(crate) fn parts(&self) -> &[&[u8]] {
        // SAFETY: the pointer came from a live `&[&[u8]]` in `lend`, whose caller is blocked
        // until this value is dropped (`AwaitReturn`); `self` is alive here, so the slices are
        // too, and they are only read.
        unsafe { &*self.parts }
    }

    /// Total bytes lent.
    pub(crate) fn len(&self) -> usize {
        self.parts().iter().map(|part| part.len()).sum()
    }

    /// The drive copied the slices: the client is released by the drive's end-of-turn
    /// publication (one wake-up for a whole batch of lenders) when this value is dropped.
    pub(crate) fn mark_copied(&mut self) {
        self.copied = true;
    }
}

impl Drop for LentParts {
    fn drop(&mut self) {
        self.ticket.give_back_lent(!self.copied);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ticket::{Notifier, TicketPool};

    #[test]
    fn lend_returns_only_after_the_drive_dropped_the_parts() {
        let pool = TicketPool::new(Notifier::for_drive(0));
        let (_ticket, completer) = pool.ticket();
        let state = Arc::clone(completer.state().expect("state"));
        let header = *b"header";
        let body = vec![7u8; 5000];
        let (sender, receiver) = std::sync::mpsc::channel::<LentParts>();
        let drive = std::thread::spawn(move || {
            let mut lent = receiver.recv().expect("lent parts");
            std::thread::sleep(std::time::Duration::from_millis(20));
            let copy: Vec<u8> = lent.parts().concat();
            lent.mark_copied();
            drop(lent);
            pool.notifier().publish();
            copy
        });
        LentParts::lend(&[&header, &body], &state, |lent| {
            assert_eq!(lent.len(), 6 + 5000);
            sender.send(lent).map_err(|_| ()).expect("sent");
        });
        assert!(!state.lent.load(Ordering::SeqCst));
        let copy = drive.join().expect("drive");
        assert_eq!(&copy[..6], b"header");
        assert_eq!(&copy[6..], &body[..]);
    }
}
