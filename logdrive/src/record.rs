//! How LogDrive records sit in the engine's entries. Every record is one WAL entry; what it
//! means is carried by the entry's kind and its 32-byte embedder header, which the entry
//! header's CRC covers, so replay (and quarantine) can tell what a record was without its
//! payload:
//!
//! | record     | kind    | `log_id` | `address`            | `epoch`          | payload |
//! |------------|---------|----------|----------------------|------------------|---------|
//! | write      | `Data`  | id       | address written      | writer's epoch   | bytes   |
//! | create     | `Data`  | id       | capacity             | 0                | empty   |
//! | delete     | `Data`  | id       | 0                    | 0                | empty   |
//! | seal       | `Seal`  | id       | sealed length        | 0                | empty   |
//! | fence      | `Fence` | id       | 0                    | fence epoch      | empty   |
//! | trim       | `Trim`  | id       | trim point (kept)    | 0                | empty   |
//! | generation | `Data`  | 0        | highest generation   | 0                | empty   |
//! | damaged    | `Data`  | id       | the damaged address  | its CRC, length  | empty   |
//! | suspect    | `Data`  | id       | first address        | end of the range | empty   |
//!
//! `extra` is `gen << 8 | type`, the type numbered 1 to 9 in the table's order; a damaged
//! record's epoch is its payload's `crc << 32 | len`.
//! `gen` is the LogDrive's generation: every creation takes the store's next one (1, 2, ...,
//! at most 2^56 - 1), whatever its id, so an id deleted and created again never sees the old
//! one's records, and no two LogDrives ever share an (id, generation), even once every record
//! of the old one has left the ring. A record applies only to the LogDrive of its id and
//! generation. The generation record carries the highest generation issued forward when the
//! ring's head passes the last record that carried it.
//!
//! Bit 7 of `extra`'s low byte ([`RELOCATED`]) marks a copy that relocation wrote forward:
//! the same record, already accepted once, which replay applies as the state it restores
//! rather than checks again (a relocated write below a later fence is still the value; a
//! relocated trim point is still the trim point, whatever T replay has reached when it meets
//! it). The damaged and suspect records are only ever written by relocation: they carry
//! forward what a quarantined open found (an address whose record failed its checks, with
//! the length and CRC its surviving header recorded; a range of addresses a record whose
//! header is gone may have held).
//!
//! An entry whose low byte of `extra` names no record type, or whose kind does not match its
//! type, is not a LogDrive record and replay skips it. Replay applies records in LSN order
//! with the same checks the live path made when it queued them (`state`).

use bytes::Bytes;
use sealog::{EmbedderHeader, Kind, NewEntry};

/// Ring bytes a record takes beyond its payload (its entry header, embedder header included).
pub(crate) const RECORD_HEADER_BYTES: u64 = sealog::ENTRY_HEADER_SIZE as u64;

/// What a record does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
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
    /// The highest generation issued, carried forward.
    Generation = 7,
    /// An address whose record was found damaged, carried forward.
    Damaged = 8,
    /// A range of addresses a header-less damaged record may have held, carried forward.
    Suspect = 9,
}

/// The flag in `extra`'s low byte that marks a relocated copy.
pub const RELOCATED: u8 = 0x80;

impl RecordType {
    /// The entry kind a record of this type is written as.
    pub fn kind(self) -> Kind {
        match self {
            RecordType::Seal => Kind::Seal,
            RecordType::Fence => Kind::Fence,
            RecordType::Trim => Kind::Trim,
            RecordType::Write
            | RecordType::Create
            | RecordType::Delete
            | RecordType::Generation
            | RecordType::Damaged
            | RecordType::Suspect => Kind::Data,
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
            7 => RecordType::Generation,
            8 => RecordType::Damaged,
            9 => RecordType::Suspect,
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
    /// The writer's or fence's epoch (see the table).
    pub epoch: u64,
    /// A copy written by relocation.
    pub relocated: bool,
}

impl Record {
    /// A record as a client operation writes it (not a relocated copy).
    pub fn new(
        record_type: RecordType,
        id: u64,
        generation: u64,
        value: u64,
        epoch: u64,
    ) -> Record {
        Record {
            record_type,
            id,
            generation,
            value,
            epoch,
            relocated: false,
        }
    }

    /// The same record as relocation writes it forward.
    pub fn relocated(self) -> Record {
        Record {
            relocated: true,
            ..self
        }
    }

    /// The embedder header the record is written with.
    pub fn header(&self) -> EmbedderHeader {
        debug_assert!(self.generation <= GENERATION_MAX);
        let flags = if self.relocated { RELOCATED } else { 0 };
        EmbedderHeader {
            log_id: self.id,
            address: self.value,
            epoch: self.epoch,
            extra: self.generation << 8 | u64::from(self.record_type as u8 | flags),
        }
    }

    /// The entry that writes the record with `payload`.
    pub fn entry(&self, payload: Bytes) -> NewEntry {
        NewEntry {
            kind: self.record_type.kind(),
            header: self.header(),
            payload,
        }
    }

    /// The record an entry carries, or `None` when it is not a LogDrive record.
    pub fn decode(kind: Kind, header: &EmbedderHeader) -> Option<Record> {
        let byte = (header.extra & 0xff) as u8;
        let record_type = RecordType::from_byte(byte & !RELOCATED)?;
        let relocated = byte & RELOCATED != 0;
        if record_type.kind() != kind {
            return None;
        }
        // Damaged and suspect records exist only as relocation's copies.
        let copy_only = matches!(record_type, RecordType::Damaged | RecordType::Suspect);
        if copy_only && !relocated {
            return None;
        }
        Some(Record {
            record_type,
            id: header.log_id,
            generation: header.extra >> 8,
            value: header.address,
            epoch: header.epoch,
            relocated,
        })
    }

    /// A damaged record's payload CRC and length, packed in its epoch field.
    pub fn damaged(id: u64, generation: u64, address: u64, crc: u32, len: u32) -> Record {
        let epoch = u64::from(crc) << 32 | u64::from(len);
        Record::new(RecordType::Damaged, id, generation, address, epoch).relocated()
    }

    /// The payload CRC and length a damaged record carries.
    pub fn damaged_crc_len(&self) -> (u32, u32) {
        ((self.epoch >> 32) as u32, self.epoch as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_foreign_entries_are_not_records() {
        let record = Record::new(RecordType::Fence, 7, GENERATION_MAX, 0, 6);
        assert_eq!(Record::decode(Kind::Fence, &record.header()), Some(record));
        assert_eq!(Record::decode(Kind::Data, &record.header()), None);
        assert_eq!(Record::decode(Kind::Data, &EmbedderHeader::ZERO), None);
        let copy = record.relocated();
        assert_eq!(Record::decode(Kind::Fence, &copy.header()), Some(copy));
        assert_ne!(copy.header(), record.header());
    }

    #[test]
    fn damaged_and_suspect_records_are_relocation_copies_only() {
        let damaged = Record::damaged(3, 9, 41, 0xdead_beef, 4096);
        assert_eq!(Record::decode(Kind::Data, &damaged.header()), Some(damaged));
        assert_eq!(damaged.damaged_crc_len(), (0xdead_beef, 4096));
        let original = Record {
            relocated: false,
            ..damaged
        };
        assert_eq!(Record::decode(Kind::Data, &original.header()), None);
        let suspect = Record::new(RecordType::Suspect, 3, 9, 10, 26);
        assert_eq!(Record::decode(Kind::Data, &suspect.header()), None);
        let suspect = suspect.relocated();
        assert_eq!(Record::decode(Kind::Data, &suspect.header()), Some(suspect));
    }
}
