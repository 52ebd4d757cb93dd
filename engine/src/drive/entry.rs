//! What the drive hands back of an entry, and what an embedder hands it: [`LogEntry`] (an
//! entry read, iterated or recovered, owned), [`EntryRef`] (the same, borrowed from recovery's
//! buffer, for a [`RecoveryVisitor`]), [`NewEntry`] (one entry of an all-or-nothing group),
//! and the visitor trait recovery calls once per live entry.

use bytes::Bytes;
use sealog_wal::format::EmbedderHeader;
use sealog_wal::Kind;

/// A live entry: its LSN, kind, embedder header and payload. What reads
/// ([`Drive::read_entry`](super::Drive::read_entry)), iterators
/// ([`Drive::iter_from`](super::Drive::iter_from)) and recovery's visitor see alike.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogEntry {
    /// Its LSN.
    pub lsn: u64,
    /// Its kind (data, or a record of the layers above).
    pub kind: Kind,
    /// The embedder's header it was appended with (zeros when none was given).
    pub header: EmbedderHeader,
    /// Its payload, checked against its CRC when it came from the device.
    pub payload: Vec<u8>,
}

/// A recovered entry as the open's replay pass sees it, borrowed from its buffer: copy out
/// what you keep.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryRef<'a> {
    /// Its LSN.
    pub lsn: u64,
    /// Its kind.
    pub kind: Kind,
    /// The embedder's header it was appended with.
    pub header: EmbedderHeader,
    /// Its payload, checked against its CRC.
    pub payload: &'a [u8],
}

impl EntryRef<'_> {
    /// An owned copy.
    pub fn to_owned_entry(&self) -> LogEntry {
        LogEntry {
            lsn: self.lsn,
            kind: self.kind,
            header: self.header,
            payload: self.payload.to_vec(),
        }
    }
}

/// Sees every live entry recovery accepts, in LSN order, during the open's one replay pass
/// ([`Drive::open_visiting`](super::Drive::open_visiting)): an embedder rebuilds its own
/// index (which ledger holds which LSNs, the last entry of each log) without reading the log
/// a second time. It runs on the drive thread before the drive takes any request; the open
/// hands the visitor back once recovery has finished. It sees exactly the entries
/// [`Drive::iter_from`](super::Drive::iter_from) would yield from the first live LSN after
/// the open. If the open fails (a strict open finding corruption), what it saw is not a
/// recovered log and the visitor is dropped with the error.
///
/// Closures `FnMut(&EntryRef<'_>) + Send` are visitors.
pub trait RecoveryVisitor: Send {
    /// One recovered live entry.
    fn visit(&mut self, entry: &EntryRef<'_>);
}

impl<F: FnMut(&EntryRef<'_>) + Send> RecoveryVisitor for F {
    fn visit(&mut self, entry: &EntryRef<'_>) {
        self(entry)
    }
}

/// One entry of an append: its kind, embedder header and payload (owned or shared). Entries
/// given together to [`Drive::append_group`](super::Drive::append_group) share a batch, so
/// recovery returns all of them or none.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewEntry {
    /// Its kind (padding is the format's own and refused).
    pub kind: Kind,
    /// The embedder's header.
    pub header: EmbedderHeader,
    /// Its payload.
    pub payload: Bytes,
}

impl NewEntry {
    /// A data entry with no embedder header.
    pub fn data(payload: impl Into<Bytes>) -> NewEntry {
        NewEntry {
            kind: Kind::Data,
            header: EmbedderHeader::ZERO,
            payload: payload.into(),
        }
    }

    /// The same entry with this embedder header.
    pub fn with_header(self, header: EmbedderHeader) -> NewEntry {
        NewEntry { header, ..self }
    }

    /// The same entry with this kind.
    pub fn with_kind(self, kind: Kind) -> NewEntry {
        NewEntry { kind, ..self }
    }
}
