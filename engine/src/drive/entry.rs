//! What the drive hands back of an entry, and what an embedder hands it: [`LogEntry`] (an
//! entry read, iterated or recovered, owned), [`EntryRef`] (the same, borrowed from recovery's
//! buffer, for a [`RecoveryVisitor`]), [`DamagedEntry`] (damage a quarantine open stepped
//! over, as the visitor sees it), [`NewEntry`] (one entry of an all-or-nothing group), and the
//! visitor trait recovery calls once per live entry and once per damaged record or range.

use bytes::Bytes;
use sealog_wal::format::EmbedderHeader;
use sealog_wal::{Check, Kind, Position};

/// A live entry: its LSN, kind, embedder header and payload. What reads
/// ([`Drive::read_entry`](crate::Drive::read_entry)), iterators
/// ([`Drive::iter_from`](crate::Drive::iter_from)) and recovery's visitor see alike.
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

/// Damage a quarantine open ([`sealog_wal::RecoveryMode::Quarantine`]) stepped over, as its
/// recovery visitor sees it: one damaged record whose entry header survived (`first_lsn ==
/// last_lsn`; `kind`, `header`, `payload_len` and `payload_crc` as that header recorded them),
/// or a range of LSNs lost with their headers (`first_lsn..=last_lsn`; those fields `None`).
/// Every damaged acknowledged LSN above the trim point is in exactly one, and they come in LSN
/// order among the live entries. A read of a damaged LSN answers
/// [`ReadError::Damaged`](crate::ReadError::Damaged) with the same place, check and header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DamagedEntry {
    /// Its first LSN.
    pub first_lsn: u64,
    /// Its last LSN (inclusive).
    pub last_lsn: u64,
    /// Where the failed check is: the damaged record's header, or for a range, the header (or
    /// segment header, or block) that failed first.
    pub position: Position,
    /// The check that failed.
    pub check: Check,
    /// The record's kind, when its header survived.
    pub kind: Option<Kind>,
    /// The embedder's header it was appended with, when its header survived.
    pub header: Option<EmbedderHeader>,
    /// Its payload's length in bytes, when its header survived.
    pub payload_len: Option<u32>,
    /// Its payload's CRC32C as written (`crc32c(payload)`, as
    /// [`sealog_wal::format::payload_crc`] computes), when its header survived.
    pub payload_crc: Option<u32>,
}

impl DamagedEntry {
    /// How many LSNs it holds.
    pub fn lsns(&self) -> u64 {
        self.last_lsn - self.first_lsn + 1
    }
}

impl From<&sealog_wal::Damaged> for DamagedEntry {
    fn from(damaged: &sealog_wal::Damaged) -> DamagedEntry {
        DamagedEntry {
            first_lsn: damaged.first_lsn,
            last_lsn: damaged.last_lsn,
            position: damaged.position,
            check: damaged.check,
            kind: damaged.header.map(|header| header.kind),
            header: damaged.header.map(|header| header.embedder),
            payload_len: damaged.header.map(|header| header.payload_len),
            payload_crc: damaged.header.map(|header| header.payload_crc),
        }
    }
}

/// Sees every live entry recovery accepts, in LSN order, during the open's one replay pass
/// ([`Drive::open_visiting`](crate::Drive::open_visiting)): an embedder rebuilds its own
/// index (which ledger holds which LSNs, the last entry of each log) without reading the log
/// a second time. It runs on the drive thread before the drive takes any request; the open
/// hands the visitor back once recovery has finished. It sees exactly the entries
/// [`Drive::iter_from`](crate::Drive::iter_from) would yield from the first live LSN after
/// the open. If the open fails (a strict open finding corruption), what it saw is not a
/// recovered log and the visitor is dropped with the error.
///
/// A quarantine open also tells it of every damaged record or range above the trim point
/// ([`RecoveryVisitor::visit_damaged`]), in LSN order among the live entries, once per open:
/// between them, the entries and the damage are every LSN of the recovered log once.
///
/// Closures `FnMut(&EntryRef<'_>) + Send` are visitors (that ignore damage).
pub trait RecoveryVisitor: Send {
    /// One recovered live entry.
    fn visit(&mut self, entry: &EntryRef<'_>);

    /// Damage a quarantine open stepped over: a damaged record whose header survived, or a
    /// range of LSNs lost with their headers. Ignored unless overridden.
    fn visit_damaged(&mut self, damaged: &DamagedEntry) {
        let _ = damaged;
    }
}

impl<F: FnMut(&EntryRef<'_>) + Send> RecoveryVisitor for F {
    fn visit(&mut self, entry: &EntryRef<'_>) {
        self(entry)
    }
}

/// One entry of an append: its kind, embedder header and payload (owned or shared). Entries
/// given together to [`Drive::append_group`](crate::Drive::append_group) share a batch, so
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

/// Shared payload bytes with their CRC32C ([`sealog_wal::format::payload_crc`]), computed once
/// when made: a layer that needs the CRC itself (to summarise or compare values, as the
/// LogDrive layer does) hands the drive the same figure rather than the drive computing it a
/// second time ([`Drive::append`](crate::Drive::append) takes them as an [`Entry`]). The bytes are
/// immutable and the fields private, so the CRC always is the bytes' own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SummedBytes {
    bytes: Bytes,
    crc: u32,
}

impl SummedBytes {
    /// `bytes` and their CRC32C.
    pub fn new(bytes: Bytes) -> SummedBytes {
        let crc = sealog_wal::format::payload_crc(&bytes);
        SummedBytes { bytes, crc }
    }

    /// The CRC32C of the bytes, as an entry header stores it.
    pub fn crc(&self) -> u32 {
        self.crc
    }

    /// The bytes.
    pub fn bytes(&self) -> &Bytes {
        &self.bytes
    }

    /// Their length.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The bytes, without their CRC.
    pub fn into_bytes(self) -> Bytes {
        self.bytes
    }
}

/// What [`Drive::append`](crate::Drive::append) takes: one entry, made from its payload in
/// whichever form the caller holds it, with a kind and an embedder header that default to a
/// data entry with a zero header. Each form keeps the append to one copy of the payload, the
/// drive's own into its registered buffer:
///
/// - a `Vec<u8>` is given away, and kept by the recent-entry cache once copied;
/// - [`Bytes`] are shared: the drive holds a reference until it has copied them;
/// - [`SummedBytes`] are shared bytes whose CRC32C the caller computed already, so the drive
///   does not compute it again;
/// - borrowed slices ([`Entry::slices`]) are copied by the drive thread straight into the
///   batch's buffer, in order, without being concatenated; the append returns once they are
///   copied (when the batch carrying them starts), so they are free again, and the ticket
///   still says when the entry is durable;
/// - a [`NewEntry`] (one entry of a group) brings its kind and header along.
///
/// ```
/// use sealog::{Drive, DriveOptions, EmbedderHeader, Entry, Kind};
/// # let directory = tempfile::tempdir()?;
/// # let path = directory.path().join("ring");
/// # sealog::format(&path, &sealog::FormatOptions::new(64 << 20))?;
/// let drive = Drive::open(&path, DriveOptions::default())?;
/// let plain = drive.append(b"a payload".to_vec())?.wait()?;
/// let header = EmbedderHeader { log_id: 7, address: 3, ..Default::default() };
/// let (frame, body) = (b"frame:".as_slice(), b"body".as_slice());
/// let framed = drive.append(Entry::slices(&[frame, body]).with_header(header))?.wait()?;
/// assert_eq!(drive.read(plain)?, b"a payload");
/// let entry = drive.read_entry(framed)?;
/// assert_eq!((entry.payload.as_slice(), entry.kind), (b"frame:body".as_slice(), Kind::Data));
/// assert_eq!(entry.header.log_id, 7);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Entry<'a> {
    kind: Kind,
    header: EmbedderHeader,
    source: Source<'a>,
}

/// An [`Entry`]'s payload as the caller handed it over.
#[derive(Debug)]
pub(super) enum Source<'a> {
    /// A buffer given away.
    Owned(Vec<u8>),
    /// Shared bytes, with their CRC32C when the caller computed it.
    Shared(Bytes, Option<u32>),
    /// Borrowed slices, in order.
    Slices(&'a [&'a [u8]]),
}

impl<'a> Entry<'a> {
    /// A data entry whose payload is `parts`, in order, borrowed until the drive has copied
    /// them.
    pub fn slices(parts: &'a [&'a [u8]]) -> Entry<'a> {
        Entry::of(Source::Slices(parts))
    }

    fn of(source: Source<'a>) -> Entry<'a> {
        Entry {
            kind: Kind::Data,
            header: EmbedderHeader::ZERO,
            source,
        }
    }

    /// The same entry with this kind (data, or a record kind of the layers above; padding is
    /// the format's own and refused).
    pub fn with_kind(self, kind: Kind) -> Entry<'a> {
        Entry { kind, ..self }
    }

    /// The same entry with this embedder header (see [`EmbedderHeader`]): it comes back from
    /// reads, iterators and recovery's visitor, checked by the entry header's CRC.
    pub fn with_header(self, header: EmbedderHeader) -> Entry<'a> {
        Entry { header, ..self }
    }

    /// Its kind.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// Its embedder header.
    pub fn header(&self) -> EmbedderHeader {
        self.header
    }

    /// Its payload's length in bytes.
    pub fn len(&self) -> usize {
        match &self.source {
            Source::Owned(bytes) => bytes.len(),
            Source::Shared(bytes, _) => bytes.len(),
            Source::Slices(parts) => parts.iter().map(|part| part.len()).sum(),
        }
    }

    /// Whether its payload is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Its kind, header and payload, for the drive to queue.
    pub(super) fn into_parts(self) -> (Kind, EmbedderHeader, Source<'a>) {
        (self.kind, self.header, self.source)
    }
}

impl From<Vec<u8>> for Entry<'static> {
    fn from(payload: Vec<u8>) -> Entry<'static> {
        Entry::of(Source::Owned(payload))
    }
}

impl From<Bytes> for Entry<'static> {
    fn from(payload: Bytes) -> Entry<'static> {
        Entry::of(Source::Shared(payload, None))
    }
}

impl From<SummedBytes> for Entry<'static> {
    fn from(payload: SummedBytes) -> Entry<'static> {
        let crc = payload.crc();
        Entry::of(Source::Shared(payload.into_bytes(), Some(crc)))
    }
}

impl From<NewEntry> for Entry<'static> {
    fn from(entry: NewEntry) -> Entry<'static> {
        Entry::of(Source::Shared(entry.payload, None))
            .with_kind(entry.kind)
            .with_header(entry.header)
    }
}

impl<'a> From<&'a [&'a [u8]]> for Entry<'a> {
    fn from(parts: &'a [&'a [u8]]) -> Entry<'a> {
        Entry::slices(parts)
    }
}
