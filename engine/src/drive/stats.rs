//! What a drive reports of itself, read without crossing its thread: its counters and
//! histograms ([`Stats`]), its state ([`DriveState`]), the requests it holds
//! ([`QueueDepths`]), the log's shape ([`LogShape`]) and the ring's room for appends
//! ([`AppendRoom`]). The drive thread publishes them (`shared_stats`, [`super::view`]); the
//! handle reads them ([`crate::Drive::stats`], [`crate::Drive::shape`]).

use hdrhistogram::Histogram;

use crate::error::DriveFailure;

/// The drive's state, as `stats()` reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DriveState {
    /// Accepting appends.
    Running,
    /// Stopped after an I/O error; reopen to continue.
    Failed(DriveFailure),
}

/// Counters and histograms of a drive.
#[derive(Clone, Debug)]
pub struct Stats {
    /// Entries acknowledged.
    pub appends: u64,
    /// Payload bytes acknowledged.
    pub payload_bytes: u64,
    /// Batches acknowledged (tail markers not included).
    pub batches: u64,
    /// Tail markers written and flushed (on idle, on close, and by the open's recovery).
    pub tail_markers: u64,
    /// Entries per batch.
    pub batch_entries: Histogram<u64>,
    /// Microseconds from a batch's submission to its acknowledgement (write plus sync).
    pub sync_latency_us: Histogram<u64>,
    /// Microseconds the device sat without a batch between the acknowledgement of the last one
    /// in flight and the start of the next: the clients' turnaround plus group commit's
    /// gathering (with one writer, the time it takes to send its next append).
    pub idle_gap_us: Histogram<u64>,
    /// The handoff to the drive: microseconds from an append's call (on the client's thread)
    /// to the submission of the batch that carries it, gathering included.
    pub enqueue_to_submit_us: Histogram<u64>,
    /// The handoff back: microseconds from an append's completion (on the drive thread) to its
    /// waiting client running again, for tickets waited on (not those looked at later).
    pub completion_to_wake_us: Histogram<u64>,
    /// Reads the drive thread served (with a payload or a typed error): async reads, and every
    /// read of a drive without files for callers' threads (a simulated device). Reads on
    /// callers' threads and cache hits never reach the drive thread: see
    /// [`Drive::read_stats`](crate::Drive::read_stats).
    pub reads: u64,
    /// The highest acknowledged LSN.
    pub lsn_durable: u64,
    /// The highest LSN a durable watermark on the device covers: damage at or below it is
    /// reported as corruption by the next open, never cut as a torn tail.
    pub lsn_covered: u64,
    /// Batches that had to wait for a further tail hint to be durable before they could be
    /// submitted (the hint is written ahead, so a steady writer should see none).
    pub hint_waits: u64,
    /// Control blocks written only to move the tail hint ahead of the writer.
    pub hint_writes: u64,
    /// Running or failed.
    pub state: DriveState,
    /// What the drive holds now: appends queued for a batch, batches (and tail markers) on
    /// the device, reads waiting for a buffer and on the device, trims waiting.
    pub queues: QueueDepths,
}

/// A log's shape ([`Drive::shape`](crate::Drive::shape)): read from what the drive publishes, never
/// through its thread.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogShape {
    /// The first live LSN (the trim point plus one).
    pub first_live_lsn: u64,
    /// The trim point: every entry at or below it is released.
    pub trim_lsn: u64,
    /// The highest acknowledged LSN.
    pub durable_lsn: u64,
    /// The LSN the next append will get (entries between the durable tail and it are on their
    /// way to the device).
    pub next_lsn: u64,
    /// Acknowledged entries not trimmed.
    pub live_entries: u64,
    /// The ring's bytes for the log (every segment, headers included).
    pub capacity_bytes: u64,
    /// The ring's bytes from the head (the oldest batch still live) to the write position.
    pub occupied_bytes: u64,
    /// The ring's bytes the writer can still take before the ring is full: up to the head's
    /// segment on the next lap (a segment is reused only once nothing in it is live), less
    /// the block kept for a tail marker. A batch that does not fit the rest of a segment
    /// skips it, so appends fit in somewhat less.
    pub usable_bytes: u64,
    /// Bytes (records with their headers) of the appends the drive has settled since it
    /// opened: placed in a batch, or refused. See [`Drive::room`](crate::Drive::room).
    pub settled_append_bytes: u64,
    /// Bytes (headers included) of the live acknowledged entries: the occupied bytes less
    /// the padding, segment headers, tail markers and skipped segment ends around them. An
    /// embedder that knows which of its entries it still needs can tell its dead entries
    /// (what relocating the live ones forward would win) from that overhead.
    pub live_record_bytes: u64,
    /// Running, or failed with its error.
    pub state: DriveState,
    /// The drive was closed (its state is the one it closed in).
    pub closed: bool,
}

/// The ring's room for appends ([`Drive::room`](crate::Drive::room)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AppendRoom {
    /// The ring's bytes the writer can still take (see [`LogShape::usable_bytes`]).
    pub usable_bytes: u64,
    /// Bytes of the appends the drive has settled since it opened (placed or refused).
    pub settled_append_bytes: u64,
}

/// How many requests a drive holds, by where they wait (a snapshot, for watchdogs and
/// operators).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueDepths {
    /// Appends waiting for a batch.
    pub appends_queued: usize,
    /// Batches written or being written and not yet acknowledged.
    pub batches_in_flight: usize,
    /// Reads waiting for a read buffer.
    pub reads_waiting: usize,
    /// Reads on the device.
    pub reads_in_flight: usize,
    /// Trims waiting.
    pub trims_waiting: usize,
    /// A trim's control block is on the device.
    pub trim_in_flight: bool,
}
