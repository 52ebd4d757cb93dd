//! A ring's geometry: its block, segment and batch sizes, its segment count and in-flight
//! window, checked against the format's limits, and the positions and sizes derived from them.

use super::constants::*;
use super::ids::*;
use crate::error::GeometryError;

/// The ring's geometry, fixed at format time and recorded in the control block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// The unit of every write and read: the largest of 4096 and the device's logical and
    /// physical block sizes.
    pub block_size_bytes: u32,
    /// Size of one segment, its header block included.
    pub segment_size_bytes: u64,
    /// Number of segments in the ring (at least 2).
    pub segment_count: u32,
    /// The largest batch the writer builds, in bytes (a multiple of the block size).
    pub batch_size_max_bytes: u32,
    /// At most this many batches are written but not yet covered by a completed flush.
    pub window_batches_max: u32,
    /// At most this many batch bytes are written but not yet covered by a completed flush.
    pub window_bytes_max: u64,
}

impl Geometry {
    /// Checks every rule the format relies on; the writer and replay assume them.
    pub fn validate(&self) -> Result<(), GeometryError> {
        let block = self.block_size_bytes;
        if !block.is_power_of_two()
            || !(BLOCK_SIZE_MIN_BYTES..=BLOCK_SIZE_MAX_BYTES).contains(&block)
        {
            return Err(GeometryError::BlockSize {
                block_size_bytes: block,
            });
        }
        let block = u64::from(block);
        if self.segment_size_bytes % block != 0
            || self.segment_size_bytes < 2 * block
            || self.segment_size_bytes > u64::from(u32::MAX) - block + 1
        {
            return Err(GeometryError::SegmentSize {
                segment_size_bytes: self.segment_size_bytes,
                block_size_bytes: self.block_size_bytes,
            });
        }
        if self.segment_count < 2 {
            return Err(GeometryError::SegmentCount {
                segment_count: self.segment_count,
            });
        }
        let batch = u64::from(self.batch_size_max_bytes);
        if batch % block != 0
            || batch < block
            || batch > u64::from(BATCH_SIZE_LIMIT_BYTES)
            || batch > self.segment_data_bytes()
        {
            return Err(GeometryError::BatchSize {
                batch_size_max_bytes: self.batch_size_max_bytes,
                segment_data_bytes: self.segment_data_bytes(),
            });
        }
        let data_bytes = self
            .segment_data_bytes()
            .saturating_mul(u64::from(self.segment_count));
        if self.window_batches_max == 0
            || self.window_batches_max > WINDOW_BATCHES_LIMIT
            || self.window_bytes_max < batch
            || self.window_bytes_max > data_bytes
        {
            return Err(GeometryError::Window {
                window_batches_max: self.window_batches_max,
                window_bytes_max: self.window_bytes_max,
                batch_size_max_bytes: self.batch_size_max_bytes,
            });
        }
        self.ring_size_bytes().ok_or(GeometryError::TooLarge)?;
        Ok(())
    }

    /// Bytes of a segment available to batches (all but its header block).
    pub fn segment_data_bytes(&self) -> u64 {
        self.segment_size_bytes
            .saturating_sub(u64::from(self.block_size_bytes))
    }

    /// Offset inside a segment where its first batch starts (right after the header block).
    pub fn segment_data_offset(&self) -> u32 {
        self.block_size_bytes
    }

    /// Total bytes the ring occupies: the control copies plus every segment.
    pub fn ring_size_bytes(&self) -> Option<u64> {
        let segments = self
            .segment_size_bytes
            .checked_mul(u64::from(self.segment_count))?;
        segments.checked_add(self.control_area_bytes())
    }

    /// Bytes taken by the control block copies at the start of the ring.
    pub fn control_area_bytes(&self) -> u64 {
        CONTROL_COPIES * u64::from(self.block_size_bytes)
    }

    /// Ring offset of control block copy `copy` (0 or 1).
    pub fn control_offset(&self, copy: u64) -> u64 {
        debug_assert!(copy < CONTROL_COPIES);
        copy * u64::from(self.block_size_bytes)
    }

    /// Ring offset of the first byte of `segment`.
    pub fn segment_ring_offset(&self, segment: u32) -> u64 {
        debug_assert!(segment < self.segment_count);
        self.control_area_bytes() + u64::from(segment) * self.segment_size_bytes
    }

    /// Ring offset of a position.
    pub fn ring_offset(&self, position: Position) -> u64 {
        debug_assert!(u64::from(position.offset) <= self.segment_size_bytes);
        self.segment_ring_offset(position.segment) + u64::from(position.offset)
    }

    /// The largest payload one record may carry: a batch holding that record alone.
    pub fn payload_size_max_bytes(&self) -> u32 {
        self.batch_size_max_bytes - ENTRY_HEADER_SIZE as u32
    }

    /// The first data position of the segment after `position`'s, on the lap it is on then;
    /// `None` when that would be a lap past `u32::MAX` (a writer there must stop, never wrap).
    pub fn checked_next_segment_start(&self, position: Position) -> Option<Position> {
        let (segment, lap) = if position.segment.checked_add(1)? >= self.segment_count {
            (0, position.lap.checked_add(1)?)
        } else {
            (position.segment + 1, position.lap)
        };
        Some(Position {
            lap,
            segment,
            offset: self.segment_data_offset(),
        })
    }

    /// The first data position of the segment after `position`'s, on the lap it is on then.
    pub fn next_segment_start(&self, position: Position) -> Position {
        // Replay refuses heads within two laps of u32::MAX, and a walk moves at most one lap
        // past its head; a writer asks `checked_next_segment_start` (through the layout's
        // slots) before it moves on. So this never overflows.
        self.checked_next_segment_start(position)
            .expect("lap below u32::MAX")
    }

    /// A position's segment in one count over all laps: `lap * segment_count + segment`.
    pub fn linear_segment(&self, position: Position) -> u64 {
        u64::from(position.lap) * u64::from(self.segment_count) + u64::from(position.segment)
    }

    /// Bytes from `from` to `to` along the log (`to` at or after `from`), counting every byte in
    /// between: segment headers and unused segment tails included. Saturates at `u64::MAX`
    /// (a distance that large is beyond any window), so positions decoded from disk can never
    /// make it overflow.
    pub fn distance_bytes(&self, from: Position, to: Position) -> u64 {
        debug_assert!(from <= to);
        let segments = self
            .linear_segment(to)
            .saturating_sub(self.linear_segment(from));
        segments
            .saturating_mul(self.segment_size_bytes)
            .saturating_add(u64::from(to.offset))
            .saturating_sub(u64::from(from.offset))
    }
}
