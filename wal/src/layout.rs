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
//!   before. Otherwise [`RingFull`].

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
