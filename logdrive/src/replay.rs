//! Rebuilding every LogDrive during the open's one replay pass: a [`RecoveryVisitor`] that
//! decodes each live entry's record ([`crate::record`]) and applies it, in LSN order, with
//! the checks the live path made ([`crate::state`]). Nothing is read a second time.

use std::collections::HashMap;

use sealog::{EntryRef, RecoveryVisitor};

use crate::record::{Record, RecordType};
use crate::state::{Check, Control, LogState};

/// Applies a control record the live path would have applied: whether it took effect.
fn replay_control(state: &mut LogState, control: Control) -> bool {
    let applies = control.check(state) == Ok(Check::Apply);
    if applies {
        control.apply(state);
    }
    applies
}

/// The LogDrives as the log left them.
#[derive(Debug, Default)]
pub(crate) struct Replay {
    /// The live LogDrives by id.
    pub live: HashMap<u64, LogState>,
    /// The last generation each id was created with (deleted ones included).
    pub generations: HashMap<u64, u64>,
    /// Entries that took no effect: no LogDrive record, one for no live LogDrive, or one
    /// the live path would have refused or found already done (a rewrite of the same bytes,
    /// a repeated seal or fence).
    pub skipped: u64,
}

impl RecoveryVisitor for Replay {
    fn visit(&mut self, entry: &EntryRef<'_>) {
        let applied = match Record::decode(entry.kind, &entry.header) {
            Some(record) => self.apply(&record, entry),
            None => false,
        };
        if !applied {
            self.skipped += 1;
        }
    }
}

impl Replay {
    fn apply(&mut self, record: &Record, entry: &EntryRef<'_>) -> bool {
        if record.record_type == RecordType::Create {
            self.generations.insert(record.id, record.generation);
            let state = LogState::new(record.id, record.generation, record.value);
            self.live.insert(record.id, state);
            return true;
        }
        let Some(state) = self.live.get_mut(&record.id) else {
            return false;
        };
        if state.generation != record.generation {
            return false;
        }
        match record.record_type {
            RecordType::Write => {
                let crc = crc32c::crc32c(entry.payload);
                let len = entry.payload.len() as u64;
                state.replay_write(record.value, record.epoch, entry.lsn, crc, len)
            }
            RecordType::Delete => {
                self.live.remove(&record.id);
                true
            }
            RecordType::Seal => replay_control(state, Control::Seal(record.value)),
            RecordType::Fence => replay_control(state, Control::Fence(record.epoch)),
            RecordType::Trim => replay_control(state, Control::Trim(record.value)),
            RecordType::Create => unreachable!("handled above"),
        }
    }
}
