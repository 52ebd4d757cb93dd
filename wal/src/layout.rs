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
//!   entry with a durable watermark (DESIGN.md: a marker when the log goes idle and on clean
//!   close). [`WriteCursor::slot`] is the plain slot, without the reservation.

use crate::error::RingFull;
use crate::format::{Geometry, Position, SegmentHeader};

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

impl WriteCursor {
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
