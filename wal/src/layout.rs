//! Where the writer puts the next batch: the write cursor that walks the ring's segments lap
//! after lap, decides when a batch must move to the next segment, when a segment header goes in
//! front of it, and when the ring is full. Pure arithmetic over [`Geometry`]; the engine and the
//! in-memory model writer share it, so the layout replay expects is the layout written.
//!
//! Rules it keeps:
//! - a batch never crosses a segment's end: the rest of a segment too small for the next record
//!   is left unused and the writer moves to the next segment's first data block;
//! - the first batch in a segment on a lap is written together with the segment header block in
//!   front of it (one write from the segment's offset 0);
//! - a segment is entered on a new lap only when no live entry is left in it: the head (the
//!   oldest live batch, from the last durable trim) must lie in a later segment of the lap
//!   before. Otherwise [`RingFull`];
//! - one block stays free for a tail marker: a data batch ([`WriteCursor::data_slot`]) never
//!   takes the last block before a segment that cannot be entered yet, and a record that does
//!   not fit in what is left is [`RingFull`], never a skip into that segment
//!   ([`WriteCursor::skip_for_data`]); a tail marker ([`WriteCursor::marker_slot`]) may take
//!   that block. So however full the ring, the writer can still cover every acknowledged
//!   entry with a durable watermark (docs/recovery.md I-16: a marker when the log goes idle
//!   and on clean close). [`WriteCursor::slot`] is the plain slot, without the reservation;
//! - no batch ends past the tail hint in force (the control block's, durable): before one
//!   would, the writer makes a control block with a further hint durable
//!   ([`WriteCursor::hint_limit`], [`BatchSlot::within_hint`], [`WriteCursor::hint_due`]).
//!   The hint is what lets replay stop its probe after the log's end early, so its margin
//!   is a trade: the further ahead a hint lies, the less often a writer rewrites the control
//!   block, and the more an open reads past the log (see [`HINT_AHEAD_WINDOWS`]).

use crate::error::RingFull;
use crate::format::{Geometry, Position, SegmentHeader};

/// How far ahead of the writer's cursor a new tail hint is placed, in in-flight windows (the
/// ring's `window_bytes_max`). An open reads the live entries, then at most this margin plus
/// one window past them: with the default geometry (1 MiB batches, 4 in flight) 12 MiB plus
/// 4 MiB, about 8 ms at this machine's 2 GB/s of sequential reads, against the 20 ms an open
/// may take. A margin of whole windows also means the writer, which never has more than a
/// window in flight, can always put a full window on the device under a fresh hint.
pub const HINT_AHEAD_WINDOWS: u64 = 3;

/// A writer writes the next hint once the room left under the hint in force (or the one
/// already on its way to the device) is below this many windows: after one window of the
/// margin is used, so a control block write goes by for every window of log written (one per
/// 4 MiB by default, against a flush per batch). The hint's write and flush then have a
/// whole window of appends (the window in flight acknowledged, the next one submitted) to
/// complete before the writer reaches the old limit, so a steady writer never waits on it.
pub const HINT_REFRESH_WINDOWS: u64 = 2;

const _: () = assert!(HINT_REFRESH_WINDOWS < HINT_AHEAD_WINDOWS);
const _: () = assert!(HINT_REFRESH_WINDOWS >= 1);

/// The position `bytes` ahead of `from` along the log (`from` a batch boundary inside its
/// segment), counting every byte on the way as [`Geometry::distance_bytes`] does (segment
/// headers included), rounded up to a block and given as a batch boundary (a segment's end is
/// the next segment's first data position). It is at least `bytes` ahead. Saturates at the
/// ring's last position of lap `u32::MAX`, past which no writer goes.
pub fn position_ahead(geometry: &Geometry, from: Position, bytes: u64) -> Position {
    let block = u64::from(geometry.block_size_bytes);
    let segment = geometry.segment_size_bytes;
    debug_assert!(u64::from(from.offset) < segment);
    let mut at = from;
    let mut left = bytes;
    // Bounded: each turn moves a segment on and uses at least a segment's data bytes of
    // `left`, or returns.
    loop {
        let room = segment - u64::from(at.offset);
        if left < room {
            let offset = (u64::from(at.offset) + left).div_ceil(block) * block;
            if offset < segment {
                return Position {
                    // Below the segment size, itself at most u32::MAX + 1 - block.
                    offset: u32::try_from(offset).expect("inside a segment"),
                    ..at
                };
            }
        }
        let Some(next) = geometry.checked_next_segment_start(at) else {
            return Position {
                lap: u32::MAX,
                segment: geometry.segment_count - 1,
                offset: u32::try_from(segment - block).expect("inside a segment"),
            };
        };
        // From `at` to the next segment's first data position: the room left plus the header.
        let step = room + block;
        if left <= step {
            return next;
        }
        left -= step;
        at = next;
    }
}

/// The writer's next position and LSN.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteCursor {
    /// Where the next batch starts.
    pub position: Position,
    /// The LSN the next record takes.
    pub next_lsn: u64,
}

/// Where the next batch goes and how large it may be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchSlot {
    /// The batch's first byte.
    pub position: Position,
    /// The most bytes the batch may take: the ring's batch limit or the room left in the
    /// segment, whichever is smaller (a block multiple).
    pub capacity_bytes: u32,
    /// When the batch is the segment's first on this lap, the header to write in the block in
    /// front of it (the write then starts at the segment's offset 0).
    pub segment_header: Option<SegmentHeader>,
}

impl BatchSlot {
    /// Ring offset where the write starts (the segment header's block when there is one).
    pub fn write_ring_offset(&self, geometry: &Geometry) -> u64 {
        let start = geometry.ring_offset(self.position);
        match self.segment_header {
            Some(_) => start - u64::from(geometry.block_size_bytes),
            None => start,
        }
    }
}

impl BatchSlot {
    /// Whether a batch in this slot (of up to its capacity) ends at or before `limit`, a
    /// hint's normalized limit ([`crate::format::TailHint::normalized_limit`]): the check a
    /// writer makes before it submits the batch.
    pub fn within_hint(&self, limit: Position) -> bool {
        let end = Position {
            // Inside the segment: the slot's capacity never runs past its end.
            offset: self.position.offset + self.capacity_bytes,
            ..self.position
        };
        end <= limit
    }
}

impl WriteCursor {
    /// The limit of a new tail hint for a writer at this cursor: [`HINT_AHEAD_WINDOWS`]
    /// windows ahead.
    pub fn hint_limit(&self, geometry: &Geometry) -> Position {
        position_ahead(
            geometry,
            self.position,
            HINT_AHEAD_WINDOWS.saturating_mul(geometry.window_bytes_max),
        )
    }

    /// Whether the writer should put a new hint on its way: the room from the cursor to
    /// `limit` (the furthest hint durable or being written, normalized) is below
    /// [`HINT_REFRESH_WINDOWS`] windows.
    pub fn hint_due(&self, geometry: &Geometry, limit: Position) -> bool {
        if limit < self.position {
            return true;
        }
        let room = geometry.distance_bytes(self.position, limit);
        room < HINT_REFRESH_WINDOWS.saturating_mul(geometry.window_bytes_max)
    }

    /// The slot for the next batch, or [`RingFull`] when it would enter a segment that still
    /// holds live entries. `head` is the oldest live batch's position.
    pub fn slot(
        &self,
        geometry: &Geometry,
        head: Position,
        incarnation: u32,
    ) -> Result<BatchSlot, RingFull> {
        let position = self.position;
        debug_assert!(position.offset >= geometry.segment_data_offset());
        debug_assert!(u64::from(position.offset) < geometry.segment_size_bytes);
        debug_assert!(head <= position);
        let at_segment_start = position.offset == geometry.segment_data_offset();
        // Entering a segment on a new lap reuses it: everything in it must be trimmed, i.e. the
        // head must have left this segment's previous lap. In linear segment numbers the
        // writer's segment must be less than one full ring ahead of the head's.
        if geometry.linear_segment(position) - geometry.linear_segment(head)
            >= u64::from(geometry.segment_count)
        {
            return Err(RingFull {
                segment: position.segment,
                lap: position.lap,
                head,
            });
        }
        let room = geometry.segment_size_bytes - u64::from(position.offset);
        let capacity = room.min(u64::from(geometry.batch_size_max_bytes));
        let segment_header = at_segment_start.then_some(SegmentHeader {
            segment: position.segment,
            lap: position.lap,
            incarnation,
            first_lsn: self.next_lsn,
        });
        Ok(BatchSlot {
            position,
            // At most the batch limit, itself a u32.
            capacity_bytes: u32::try_from(capacity).expect("capacity within the batch limit"),
            segment_header,
        })
    }

    /// Whether the writer may move on to the segment after the cursor's: the head has left
    /// that segment's previous lap (nothing live is left in it), and its lap is not past
    /// `u32::MAX`.
    pub fn can_enter_next_segment(&self, geometry: &Geometry, head: Position) -> bool {
        debug_assert!(head <= self.position);
        geometry
            .checked_next_segment_start(self.position)
            .is_some_and(|next| {
                geometry.linear_segment(next) - geometry.linear_segment(head)
                    < u64::from(geometry.segment_count)
            })
    }

    /// The [`RingFull`] that names the segment after the cursor's.
    fn next_segment_full(&self, geometry: &Geometry, head: Position) -> RingFull {
        match geometry.checked_next_segment_start(self.position) {
            Some(next) => RingFull {
                segment: next.segment,
                lap: next.lap,
                head,
            },
            None => RingFull {
                segment: 0,
                lap: u32::MAX,
                head,
            },
        }
    }

    /// The slot for the next data batch: [`WriteCursor::slot`], except that when the next
    /// segment cannot be entered yet the batch may not take the current segment's last block
    /// (it stays for a tail marker), and [`RingFull`] when that leaves no room at all.
    pub fn data_slot(
        &self,
        geometry: &Geometry,
        head: Position,
        incarnation: u32,
    ) -> Result<BatchSlot, RingFull> {
        let slot = self.slot(geometry, head, incarnation)?;
        if self.can_enter_next_segment(geometry, head) {
            return Ok(slot);
        }
        // Worked example, 16-block segments, the cursor at block 13, batches of up to 4
        // blocks: room 3 blocks; the next segment is still live, so data may take 2 of them
        // and the block at 15 stays for a marker. At block 15 no data fits: ring full.
        let block = geometry.block_size_bytes;
        let room = geometry.segment_size_bytes - u64::from(self.position.offset);
        let capacity = (room - u64::from(block)).min(u64::from(slot.capacity_bytes));
        if capacity == 0 {
            return Err(self.next_segment_full(geometry, head));
        }
        Ok(BatchSlot {
            // At most the plain slot's capacity, a u32.
            capacity_bytes: u32::try_from(capacity).expect("within the slot's capacity"),
            ..slot
        })
    }

    /// The slot for a tail marker (a batch with no records: one block carrying the
    /// watermark). It may take the block [`WriteCursor::data_slot`] keeps back, so a marker
    /// fits wherever the cursor is unless its own segment cannot be entered.
    pub fn marker_slot(
        &self,
        geometry: &Geometry,
        head: Position,
        incarnation: u32,
    ) -> Result<BatchSlot, RingFull> {
        let slot = self.slot(geometry, head, incarnation)?;
        let block = geometry.block_size_bytes;
        let fills_segment =
            u64::from(self.position.offset) + u64::from(block) == geometry.segment_size_bytes;
        if fills_segment && geometry.checked_next_segment_start(self.position).is_none() {
            // The cursor could not move past the marker without a lap past u32::MAX.
            return Err(self.next_segment_full(geometry, head));
        }
        Ok(BatchSlot {
            capacity_bytes: block,
            ..slot
        })
    }

    /// A data writer's move to the next segment when not one record fits in what the current
    /// one has left: [`RingFull`] instead while that segment cannot be entered (the rest of
    /// this one stays, its last block for a marker).
    pub fn skip_for_data(&mut self, geometry: &Geometry, head: Position) -> Result<(), RingFull> {
        if !self.can_enter_next_segment(geometry, head) {
            return Err(self.next_segment_full(geometry, head));
        }
        self.skip_to_next_segment(geometry);
        Ok(())
    }

    /// Leaves the rest of the current segment unused: the next batch starts the next segment.
    /// Called when a record does not fit in the room the current segment has left.
    pub fn skip_to_next_segment(&mut self, geometry: &Geometry) {
        debug_assert!(self.position.offset > geometry.segment_data_offset());
        self.position = geometry.next_segment_start(self.position);
    }

    /// Moves past a batch of `bytes` holding `records` LSN-consuming records.
    pub fn advance(&mut self, geometry: &Geometry, bytes: u32, records: u32) {
        assert_eq!(bytes % geometry.block_size_bytes, 0);
        let end = u64::from(self.position.offset) + u64::from(bytes);
        assert!(
            end <= geometry.segment_size_bytes,
            "a batch never crosses a segment's end"
        );
        self.next_lsn += u64::from(records);
        self.position = if end == geometry.segment_size_bytes {
            geometry.next_segment_start(self.position)
        } else {
            Position {
                offset: end as u32,
                ..self.position
            }
        };
    }
}
