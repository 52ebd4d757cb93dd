//! What the state machine has on the device, and where each of its operations stands
//! ([`OpState`]): batches written and not yet acknowledged ([`Inflight`], data or tail
//! marker), reads ([`PendingRead`]), and the one control write of a trim or a tail hint
//! ([`PendingTrim`]). The append, read and trim paths (`appends`, `reads`, `trim`) fill and
//! settle them; the state machine (`core`) holds them.

use std::time::Instant;

use sealog_wal::format::ControlBlock;
use sealog_wal::Position;

use super::requests::{ReadSender, TrimSender};
use super::view::RecordRead;

/// What a batch in flight carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum BatchPurpose {
    /// Records of clients' appends.
    Data,
    /// A tail marker: no records, only the watermark.
    TailMarker,
}

/// Where one operation of a batch (or trim) stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum OpState {
    /// On the device.
    Pending,
    /// Completed successfully.
    Done,
    /// Completed with an error (or cancelled behind one).
    Failed,
}

/// A batch written and not yet acknowledged.
pub(super) struct Inflight {
    pub(super) sequence: u64,
    pub(super) purpose: BatchPurpose,
    pub(super) buffer: usize,
    pub(super) position: Position,
    pub(super) bytes: u32,
    pub(super) first_lsn: u64,
    pub(super) next_lsn: u64,
    pub(super) watermark: u64,
    pub(super) ring_offset: u64,
    pub(super) write: OpState,
    /// The flush linked behind the write, when the durability mode has one.
    pub(super) flush: Option<OpState>,
    pub(super) payload_bytes: u64,
    pub(super) submitted: Instant,
}

impl Inflight {
    /// The batch's bytes are durable: its write succeeded, and so did its flush if it has one
    /// (whatever order their completions arrive in).
    pub(super) fn durable(&self) -> bool {
        self.write == OpState::Done && self.flush.is_none_or(|flush| flush == OpState::Done)
    }

    /// The device is done with every operation of the batch (so its buffer is free).
    pub(super) fn finished(&self) -> bool {
        self.write != OpState::Pending && self.flush != Some(OpState::Pending)
    }
}

/// A read on the device.
pub(super) struct PendingRead {
    pub(super) sequence: u64,
    pub(super) buffer: usize,
    pub(super) read: RecordRead,
    /// Taken when the reply is sent early (the drive failed while the read was on the device).
    pub(super) reply: Option<ReadSender>,
}

/// A control write on the device (a trim's, or one that only moves the tail hint): its
/// control block, the buffer it was encoded in, and what of its write and flush has completed.
pub(super) struct PendingTrim {
    pub(super) sequence: u64,
    pub(super) buffer: usize,
    pub(super) control: ControlBlock,
    pub(super) lsn: u64,
    /// The trim's reply: `None` for a hint's write, or once sent early (the drive failed while
    /// the trim was on the device).
    pub(super) reply: Option<TrimSender>,
    pub(super) write: OpState,
    pub(super) flush: OpState,
}

impl PendingTrim {
    /// The device is done with both of its operations (so its buffer is free).
    pub(super) fn finished(&self) -> bool {
        self.write != OpState::Pending && self.flush != OpState::Pending
    }
}
