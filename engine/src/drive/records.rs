//! The records of an append as the drive queues them: each payload as the client handed it
//! over ([`Payload`]: owned, shared or lent), with its CRC32C computed on the client's thread,
//! one record or an all-or-nothing group ([`Records`]), and an append waiting for a batch
//! ([`QueuedAppend`]). The handle builds them, the state machine copies them into batches
//! (`appends`).

use std::time::Instant;

use bytes::Bytes;
use sealog_wal::format::{payload_crc, EmbedderHeader, ENTRY_HEADER_SIZE};
use sealog_wal::Kind;

use super::cache::CachedPayload;
use super::entry::NewEntry;
use crate::ticket::TicketCompleter;
use crate::uring::lend::LentParts;

/// An append's payload as the client handed it over: the drive copies it once, into the
/// registered buffer of the batch that carries it.
pub(super) enum Payload {
    /// A buffer the client gave away (freed on the drive thread once copied).
    Owned(Vec<u8>),
    /// Shared bytes the drive holds a reference to until it has copied them.
    Shared(Bytes),
    /// Borrowed slices whose client waits until they are copied (see [`LentParts`]).
    Lent(LentParts),
}

impl Payload {
    /// Its length in bytes.
    pub(super) fn len(&self) -> usize {
        match self {
            Payload::Owned(bytes) => bytes.len(),
            Payload::Shared(bytes) => bytes.len(),
            Payload::Lent(parts) => parts.len(),
        }
    }

    /// Its CRC32C, as the entry header stores it.
    pub(super) fn crc(&self) -> u32 {
        match self {
            Payload::Owned(bytes) => payload_crc(bytes),
            Payload::Shared(bytes) => payload_crc(bytes),
            Payload::Lent(parts) => parts_crc(parts.parts()),
        }
    }

    /// Its bytes, as the slices they are in.
    pub(super) fn with_parts<R>(&self, f: impl FnOnce(&[&[u8]]) -> R) -> R {
        match self {
            Payload::Owned(bytes) => f(&[bytes]),
            Payload::Shared(bytes) => f(&[bytes]),
            Payload::Lent(parts) => f(parts.parts()),
        }
    }

    /// The drive copied it into its batch: lent slices go back to their client with this
    /// turn's publication; an owned or shared payload is kept for the recent-entry cache
    /// (where it is freed once evicted, rather than now).
    pub(super) fn copied(self) -> Option<CachedPayload> {
        match self {
            Payload::Owned(bytes) => Some(CachedPayload::Owned(bytes)),
            Payload::Shared(bytes) => Some(CachedPayload::Shared(bytes)),
            Payload::Lent(mut parts) => {
                parts.mark_copied();
                None
            }
        }
    }
}

/// CRC32C of the payload that `parts` make in order, without concatenating them: what
/// [`payload_crc`] gives for their concatenation.
pub(super) fn parts_crc(parts: &[&[u8]]) -> u32 {
    parts
        .iter()
        .fold(0, |crc, part| crc32c::crc32c_append(crc, part))
}

/// One record of an append: its kind, the embedder's header, and its payload with the CRC the
/// client computed.
pub(super) struct QueuedRecord {
    pub(super) kind: Kind,
    pub(super) header: EmbedderHeader,
    pub(super) payload: Payload,
    /// CRC32C of the payload, computed by the client.
    pub(super) payload_crc: u32,
}

impl QueuedRecord {
    /// Bytes the record takes in a batch, its header included.
    pub(super) fn bytes_in_batch(&self) -> u64 {
        self.payload.len() as u64 + ENTRY_HEADER_SIZE as u64
    }
}

/// The records of one append: one, or an all-or-nothing group that goes into one batch (a
/// single record needs no allocation).
pub(super) enum Records {
    One(QueuedRecord),
    Group(Vec<QueuedRecord>),
}

impl Records {
    /// The records, in LSN order.
    pub(super) fn as_slice(&self) -> &[QueuedRecord] {
        match self {
            Records::One(record) => std::slice::from_ref(record),
            Records::Group(records) => records,
        }
    }

    /// The records, given away in LSN order.
    pub(super) fn into_records(self) -> impl Iterator<Item = QueuedRecord> {
        let (one, group) = match self {
            Records::One(record) => (Some(record), Vec::new()),
            Records::Group(records) => (None, records),
        };
        one.into_iter().chain(group)
    }

    /// Bytes the records take in a batch, headers included.
    pub(super) fn bytes_in_batch(&self) -> u64 {
        self.as_slice()
            .iter()
            .map(QueuedRecord::bytes_in_batch)
            .sum()
    }
}

/// An append waiting for a batch: one record or a group, with one ticket.
pub(super) struct QueuedAppend {
    pub(super) records: Records,
    /// Bytes its records take in a batch, headers included.
    pub(super) bytes_in_batch: u64,
    pub(super) completer: TicketCompleter,
    /// When the client asked: a full ring's `WhenFull::Wait` counts from here, per append, and
    /// the handoff's latency ends when the batch carrying it is submitted.
    pub(super) queued_at: Instant,
}

/// The records of an all-or-nothing group, each payload's CRC computed here (on the caller's
/// thread).
pub(super) fn group_records(entries: Vec<NewEntry>) -> Records {
    Records::Group(
        entries
            .into_iter()
            .map(|entry| {
                let payload_crc = sealog_wal::format::payload_crc(&entry.payload);
                QueuedRecord {
                    kind: entry.kind,
                    header: entry.header,
                    payload: Payload::Shared(entry.payload),
                    payload_crc,
                }
            })
            .collect(),
    )
}
