//! How LogDrive records sit in the engine's entries. Every record is one WAL entry; what it
//! means is carried by the entry's kind and its 32-byte embedder header, which the entry
//! header's CRC covers, so replay (and later quarantine) can tell what a record was without
//! its payload:
//!
//! | record | entry kind | `log_id` | `address` | `epoch` | `extra` | payload |
//! |---|---|---|---|---|---|---|
//! | write  | `Data`  | LogDrive id | address written | writer's epoch | `gen << 8 \| 1` | bytes |
//! | create | `Data`  | LogDrive id | capacity (addresses below it) | 0 | `gen << 8 \| 2` | empty |
//! | delete | `Data`  | LogDrive id | 0 | 0 | `gen << 8 \| 3` | empty |
//! | seal   | `Seal`  | LogDrive id | sealed length | 0 | `gen << 8 \| 4` | empty |
//! | fence  | `Fence` | LogDrive id | 0 | fence epoch | `gen << 8 \| 5` | empty |
//! | trim   | `Trim`  | LogDrive id | trim point (first kept) | 0 | `gen << 8 \| 6` | empty |
//!
//! `gen` is the LogDrive's generation (1 for an id's first creation, one more for each
//! recreation; at most 2^56 - 1): a record applies only to the live LogDrive of its id with
//! its generation, so a recreated LogDrive never sees an old one's records. An entry whose
//! low byte of `extra` names no record type, or whose kind does not match its type, is not a
//! LogDrive record and replay skips it. Replay applies records in LSN order with the same
//! checks the live path made when it queued them ([`crate::state`]).

use sealog::{EmbedderHeader, Kind};

/// What a record does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordType {
    /// A register write.
    Write = 1,
    /// A LogDrive created.
    Create = 2,
    /// A LogDrive deleted.
    Delete = 3,
    /// A seal.
    Seal = 4,
    /// A fence.
    Fence = 5,
    /// A prefix trim.
    Trim = 6,
}

impl RecordType {
    /// The entry kind a record of this type is written as.
    pub fn kind(self) -> Kind {
        match self {
            RecordType::Seal => Kind::Seal,
            RecordType::Fence => Kind::Fence,
            RecordType::Trim => Kind::Trim,
            RecordType::Write | RecordType::Create | RecordType::Delete => Kind::Data,
        }
    }

    fn from_byte(byte: u8) -> Option<RecordType> {
        Some(match byte {
            1 => RecordType::Write,
            2 => RecordType::Create,
            3 => RecordType::Delete,
            4 => RecordType::Seal,
            5 => RecordType::Fence,
            6 => RecordType::Trim,
            _ => return None,
        })
    }
}

/// The largest generation the encoding holds.
pub const GENERATION_MAX: u64 = (1 << 56) - 1;

/// A LogDrive record's header fields, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record {
    /// What it does.
    pub record_type: RecordType,
    /// The LogDrive id.
    pub id: u64,
    /// The LogDrive's generation.
    pub generation: u64,
    /// The address, capacity, sealed length or trim point (see the table).
    pub value: u64,
    /// The writer's or fence's epoch.
    pub epoch: u64,
}

impl Record {
    /// The embedder header the record is written with.
    pub fn header(&self) -> EmbedderHeader {
        debug_assert!(self.generation <= GENERATION_MAX);
        EmbedderHeader {
            log_id: self.id,
            address: self.value,
            epoch: self.epoch,
            extra: self.generation << 8 | self.record_type as u64,
        }
    }

    /// The record an entry carries, or `None` when it is not a LogDrive record.
    pub fn decode(kind: Kind, header: &EmbedderHeader) -> Option<Record> {
        let record_type = RecordType::from_byte((header.extra & 0xff) as u8)?;
        if record_type.kind() != kind {
            return None;
        }
        Some(Record {
            record_type,
            id: header.log_id,
            generation: header.extra >> 8,
            value: header.address,
            epoch: header.epoch,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_foreign_entries_are_not_records() {
        let record = Record {
            record_type: RecordType::Fence,
            id: 7,
            generation: GENERATION_MAX,
            value: 0,
            epoch: 6,
        };
        assert_eq!(Record::decode(Kind::Fence, &record.header()), Some(record));
        assert_eq!(Record::decode(Kind::Data, &record.header()), None);
        assert_eq!(Record::decode(Kind::Data, &EmbedderHeader::ZERO), None);
    }
}
