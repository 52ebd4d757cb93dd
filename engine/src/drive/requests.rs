//! Requests to a drive: what clients send its thread, and what a simulation hands its
//! [`DriveCore`](crate::DriveCore) directly ([`Request`], built with its constructors, which
//! return the handle the outcome arrives on), with where their outcomes go, and the forms reads
//! and trims wait in once the state machine has taken them ([`ReadRequest`], [`TrimRequest`]).

use std::time::Instant;

use sealog_wal::format::EmbedderHeader;
use sealog_wal::Kind;

use super::entry::{LogEntry, NewEntry};
use super::records::{group_records, Payload, QueuedRecord, Records};
use crate::error::{ReadError, TrimError};
use crate::reply::{reply, Answer, Reply};
use crate::ticket::{Ticket, TicketCompleter};

/// Where a read's entry goes.
pub(super) type ReadSender = Reply<Result<LogEntry, ReadError>>;
/// Where a trim's outcome goes.
pub(super) type TrimSender = Reply<Result<(), TrimError>>;

/// A request to a drive: what clients send its thread, and what a simulation hands its
/// [`DriveCore`](crate::DriveCore) directly. Built with [`Request::append`], [`Request::read`] and
/// [`Request::trim`], which return the handle the outcome arrives on.
pub struct Request(pub(super) RequestKind);

/// What a request asks for, with where its outcome goes.
pub(super) enum RequestKind {
    Append {
        /// One record or a group, each with its payload's CRC32C computed on the client's
        /// thread.
        records: Records,
        completer: TicketCompleter,
        /// When the client asked (for `WhenFull::Wait` and the handoff's latency): stamped on
        /// the client's thread by [`Drive`](crate::Drive)'s appends, whose drive thread reads the
        /// same system clock. `None` from [`Request::append`]: a core stepped by hand may run on a
        /// manual clock, so it stamps the request with its own clock when it takes it.
        queued_at: Option<Instant>,
    },
    Read {
        lsn: u64,
        reply: ReadSender,
    },
    Trim {
        lsn: u64,
        reply: TrimSender,
    },
    Close,
}

/// The outcome of a trim request (blocking, polled or awaited).
pub type TrimReply = Answer<Result<(), TrimError>>;
/// The outcome of a read request: the entry (blocking, polled or awaited).
pub type ReadReply = Answer<Result<LogEntry, ReadError>>;

impl Request {
    /// An append of a record of `kind`; the ticket yields its LSN once durable. Its time (for
    /// a full ring's `WhenFull::Wait`, and the handoff's latency) is taken by the core when it
    /// takes the request, on the core's clock.
    pub fn append(kind: Kind, payload: Vec<u8>) -> (Request, Ticket) {
        let (ticket, completer) = Ticket::standalone();
        let payload_crc = sealog_wal::format::payload_crc(&payload);
        let request = RequestKind::Append {
            records: Records::One(QueuedRecord {
                kind,
                header: EmbedderHeader::ZERO,
                payload: Payload::Owned(payload),
                payload_crc,
            }),
            completer,
            queued_at: None,
        };
        (Request(request), ticket)
    }

    /// An all-or-nothing group of entries (see
    /// [`Drive::append_group`](crate::Drive::append_group)); the ticket yields the group's first
    /// LSN once all of them are durable.
    pub fn append_group(entries: Vec<NewEntry>) -> (Request, Ticket) {
        let (ticket, completer) = Ticket::standalone();
        let request = RequestKind::Append {
            records: group_records(entries),
            completer,
            queued_at: None,
        };
        (Request(request), ticket)
    }

    /// A read of the entry at `lsn`, on the drive's ring.
    pub fn read(lsn: u64) -> (Request, ReadReply) {
        let (reply, answer) = reply();
        (Request(RequestKind::Read { lsn, reply }), answer)
    }

    /// A durable trim up to `lsn`, inclusive.
    pub fn trim(lsn: u64) -> (Request, TrimReply) {
        let (reply, answer) = reply();
        (Request(RequestKind::Trim { lsn, reply }), answer)
    }
}

/// A read waiting for a buffer.
pub(super) struct ReadRequest {
    pub(super) lsn: u64,
    pub(super) reply: ReadSender,
}

/// A trim waiting for the one before it.
pub(super) struct TrimRequest {
    pub(super) lsn: u64,
    pub(super) reply: TrimSender,
}
