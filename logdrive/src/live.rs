//! One LogDrive's live state as its handles, its completions and the reclaimer share it:
//! [`Live`] (the state, with the outcomes not yet taken in) behind its mutex ([`Shared`]), and
//! the [`Mailbox`] where completions and dropped futures leave outcomes without that mutex.
//!
//! A write's completion takes no LogDrive mutex: it leaves its outcome in its LogDrive's
//! mailbox, and whoever takes the LogDrive's mutex next (the next write, a read, `weak_tail`,
//! the reclaimer's look) takes every outcome there in before it answers anything, so a read
//! after a write's acknowledgement sees it. A control record that the engine fails leaves
//! memory and log in doubt, so the store stops ([`Stop`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use sealog::{AppendError, AppendOutcome, Ticket};

use crate::api::LogDriveError;
use crate::errors::append_error;
use crate::state::{Check, Control, LogState};
use crate::sync::lock;

/// Stopping the store, which a failed control record does: the store's shared state
/// implements it. A trait, so that this module sits below the store rather than beside it.
pub(crate) trait Stop {
    /// Every operation answers `Stopped` with `reason` from now on.
    fn stop(&self, reason: String);
}

/// A write's outcome, left by its completion for the LogDrive's next look: a completion
/// takes no mutex (the next holder of the LogDrive's mutex takes the outcome in before it
/// answers anything, so a read after this write's acknowledgement sees it), and a LogDrive
/// state is locked once per write, by its submission, rather than once more per completion
/// (eight writers completing one batch's writes of one LogDrive would otherwise queue on its
/// mutex one after another, and a thousand LogDrives would each be brought into cache twice).
pub(crate) struct Ack {
    pub(crate) address: u64,
    pub(crate) outcome: AppendOutcome,
    pub(crate) floor: u64,
    /// A rewrite made while the address's first write was in flight (`LogState::rewrites`).
    pub(crate) rewrite: bool,
}

/// The outcome of a dropped write, kept until someone looks.
pub(crate) struct Orphan {
    pub(crate) address: u64,
    pub(crate) ticket: Ticket,
    pub(crate) floor: u64,
    pub(crate) rewrite: bool,
}

/// A control record whose future was dropped before it completed.
pub(crate) struct PendingControl {
    pub(crate) kind: ControlKind,
    pub(crate) ticket: Ticket,
    pub(crate) floor: u64,
}

/// A deletion whose future was dropped before it completed.
pub(crate) struct PendingDelete {
    pub key: (u64, u64),
    pub ticket: Ticket,
}

/// What a control record does once durable.
#[derive(Clone, Copy, Debug)]
pub(crate) enum ControlKind {
    Create,
    Control(Control, Check),
}

/// What completions and dropped futures leave for a LogDrive's next look, without its mutex
/// (under a lock of its own, held only to push or to swap the lists out). Not a lock-free
/// queue: on a thousand LogDrives each mailbox holds an outcome or two between looks and is
/// cold in cache every time, and a segmented queue's padded head and tail, its blocks and a
/// second queue for the orphans came to a cache miss or four per push and per pop (the
/// queue's push and pop were 5% of a thousand-LogDrive run's CPU, three times a single
/// LogDrive's). Here a look at an empty mailbox is one load, and the lists keep their
/// capacity from look to look.
#[derive(Default)]
pub(crate) struct Mailbox {
    /// Something was left since the last look (set under `mail`'s lock).
    has_mail: AtomicBool,
    mail: Mutex<Mail>,
}

/// The mailbox's contents.
#[derive(Default)]
pub(crate) struct Mail {
    pub(crate) acks: Vec<Ack>,
    /// Writes whose futures were dropped before they completed.
    pub(crate) orphans: Vec<Orphan>,
}

impl Mailbox {
    pub(crate) fn leave(&self, leave: impl FnOnce(&mut Mail)) {
        let mut mail = lock(&self.mail);
        leave(&mut mail);
        self.has_mail.store(true, Ordering::Release);
    }
}

/// A LogDrive's state with the outcomes not yet taken in.
pub(crate) struct Live {
    pub state: LogState,
    pub mailbox: Arc<Mailbox>,
    /// The acknowledgements taken from the mailbox, swapped with its list (so that both keep
    /// their capacity).
    acks: Vec<Ack>,
    /// Orphaned writes taken from the mailbox whose outcomes are not yet known.
    orphans: Vec<Orphan>,
    pub controls: Vec<PendingControl>,
}

impl Live {
    pub fn new(state: LogState) -> Live {
        Live {
            state,
            mailbox: Arc::default(),
            acks: Vec::new(),
            orphans: Vec::new(),
            controls: Vec::new(),
        }
    }

    /// Takes in the outcomes that completed since the last look; a control record that
    /// failed stops the store.
    pub(crate) fn take_in(&mut self, store: &dyn Stop) {
        let Live {
            state,
            mailbox,
            acks,
            orphans,
            controls,
        } = self;
        if mailbox.has_mail.load(Ordering::Acquire) {
            let mut mail = lock(&mailbox.mail);
            mailbox.has_mail.store(false, Ordering::Relaxed);
            std::mem::swap(acks, &mut mail.acks);
            orphans.append(&mut mail.orphans);
            drop(mail);
            for ack in acks.drain(..) {
                finish_write(state, (ack.address, ack.rewrite), &ack.outcome, ack.floor);
            }
        }
        orphans.retain(|orphan| match orphan.ticket.try_outcome() {
            Some(outcome) => {
                let write = (orphan.address, orphan.rewrite);
                finish_write(state, write, &outcome, orphan.floor);
                false
            }
            None => true,
        });
        controls.retain(|pending| match pending.ticket.try_outcome() {
            Some(outcome) => {
                state.processed(pending.floor);
                let _ = finish_control(store, state, pending.kind, &outcome);
                false
            }
            None => true,
        });
    }
}

pub(crate) type Shared = Arc<Mutex<Live>>;

/// Applies a write record's outcome to its slot (an outcome the drive's stop left unknown
/// changes nothing: the store answers nothing more).
fn finish_write(
    state: &mut LogState,
    (address, rewrite): (u64, bool),
    outcome: &AppendOutcome,
    floor: u64,
) {
    state.processed(floor);
    match outcome {
        Ok(lsn) => state.complete_write(address, Some(*lsn), rewrite),
        Err(AppendError::RingFull { .. }) => state.complete_write(address, None, rewrite),
        Err(_) => {}
    }
}

/// Applies a control record's outcome: durable, the state as reads see it moves (and the
/// record is known for relocation); failed, the store stops.
pub(crate) fn finish_control(
    store: &dyn Stop,
    state: &mut LogState,
    kind: ControlKind,
    outcome: &AppendOutcome,
) -> Result<(), LogDriveError> {
    match (outcome, kind) {
        (Ok(lsn), ControlKind::Create) => {
            state.hold_create(*lsn);
            Ok(())
        }
        (Ok(lsn), ControlKind::Control(control, Check::Apply)) => {
            state.durable_control(control, *lsn);
            Ok(())
        }
        (Ok(_), ControlKind::Control(_, Check::Same | Check::Done)) => Ok(()),
        (Err(error), _) => {
            // Its checks applied it as queued, so the state is ahead of the log now.
            store.stop(format!("a control record failed: {error}"));
            Err(append_error(error.clone()))
        }
    }
}
