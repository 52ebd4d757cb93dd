//! The words the checks of a LogDrive's state answer in: what a checked write or control
//! does ([`WriteCheck`], [`Check`]), what a read finds ([`Lookup`]), the control records
//! ([`Control`]) and how a payload's length is kept ([`slot_len`]).

use crate::record::{Record, RecordType};

/// The length a slot records for a payload (an over-long payload is refused by the engine
/// before it is queued; saturating keeps the write-once comparison exact below that).
pub(crate) fn slot_len(len: u64) -> u32 {
    u32::try_from(len).unwrap_or(u32::MAX)
}

/// Whether a checked control record changes anything.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Check {
    /// It changes the state.
    Apply,
    /// The state as queued already says so, not yet durably: written again, so that its
    /// acknowledgement means durable.
    Same,
    /// The state as durable already says so: nothing to write.
    Done,
}

/// What a checked write does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WriteCheck {
    /// A new value, or the repair of a damaged one: append it.
    Append,
    /// The same CRC and length as the acknowledged record at this LSN.
    Durable(u64),
    /// The same CRC and length as the first write at this address, still in flight:
    /// written too (a rewrite), and compared byte for byte with the value once durable.
    Pending,
}

/// Where a read goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lookup {
    /// Below the (durable) trim point.
    Trimmed { first: u64 },
    /// Nothing acknowledged there.
    Unwritten,
    /// Written, and its record damaged (or possibly held by a damaged record).
    Damaged,
    /// The value is in the record at this LSN.
    Record(u64),
}

/// A seal (at a length, by a sealer of an epoch), fence or trim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Control {
    Seal { length: u64, epoch: u64 },
    Fence(u64),
    Trim(u64),
}

impl Control {
    /// The record that carries it.
    pub fn record(self, id: u64, generation: u64) -> Record {
        match self {
            Control::Seal { length, epoch } => {
                Record::new(RecordType::Seal, id, generation, length, epoch)
            }
            Control::Fence(epoch) => Record::new(RecordType::Fence, id, generation, 0, epoch),
            Control::Trim(upto) => Record::new(RecordType::Trim, id, generation, upto, 0),
        }
    }

    /// The control a record carries, if it is one.
    pub fn of(record: &Record) -> Option<Control> {
        match record.record_type {
            RecordType::Seal => Some(Control::Seal {
                length: record.value,
                epoch: record.epoch,
            }),
            RecordType::Fence => Some(Control::Fence(record.epoch)),
            RecordType::Trim => Some(Control::Trim(record.value)),
            _ => None,
        }
    }
}
