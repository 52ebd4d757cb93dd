//! A segment's header: which lap of the ring the segment is on, its first LSN and the
//! incarnation that started it, its encoding, and what makes one defective.

use super::constants::*;
use super::ids::*;

/// A segment's header: which lap it is on and where its LSNs start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentHeader {
    /// The segment's index in the ring.
    pub segment: u32,
    /// The lap the segment was last started on.
    pub lap: u32,
    /// The incarnation of the writer that started it.
    pub incarnation: u32,
    /// LSN of the first record of the segment's first batch on this lap.
    pub first_lsn: u64,
}

/// Why a segment header was not accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SegmentDefect {
    /// The block is all zeros: the segment was never started.
    Zeroed,
    /// No segment magic.
    Magic,
    /// Another format version.
    Version,
    /// The CRC (seeded with this ring's id) does not match: damaged, torn or another ring's.
    Crc,
}

impl SegmentHeader {
    /// Encodes into the first [`SEGMENT_HEADER_SIZE`] bytes of `buf` and zeroes the rest.
    pub fn encode(&self, ring_id: RingId, buf: &mut [u8]) {
        assert!(buf.len() >= SEGMENT_HEADER_SIZE);
        buf.fill(0);
        put_u32(buf, SEGMENT_MAGIC_OFFSET, SEGMENT_MAGIC);
        put_u16(buf, SEGMENT_VERSION_OFFSET, FORMAT_VERSION);
        put_u32(buf, SEGMENT_INDEX_OFFSET, self.segment);
        put_u32(buf, SEGMENT_LAP_OFFSET, self.lap);
        put_u32(buf, SEGMENT_INCARNATION_OFFSET, self.incarnation);
        put_u64(buf, SEGMENT_FIRST_LSN_OFFSET, self.first_lsn);
        buf[SEGMENT_RING_ID_OFFSET..SEGMENT_RING_ID_OFFSET + 16].copy_from_slice(&ring_id.0);
        let crc = crc_skipping_field(
            ring_id.crc_seed(),
            &buf[..SEGMENT_HEADER_SIZE],
            SEGMENT_CRC_OFFSET,
        );
        put_u32(buf, SEGMENT_CRC_OFFSET, crc);
    }

    /// Decodes and checks a segment header against this ring's identity.
    pub fn decode(ring_id: RingId, buf: &[u8]) -> Result<SegmentHeader, SegmentDefect> {
        let bytes = &buf[..SEGMENT_HEADER_SIZE];
        if get_u32(bytes, SEGMENT_MAGIC_OFFSET) != SEGMENT_MAGIC {
            if bytes.iter().all(|&byte| byte == 0) {
                return Err(SegmentDefect::Zeroed);
            }
            return Err(SegmentDefect::Magic);
        }
        if get_u16(bytes, SEGMENT_VERSION_OFFSET) != FORMAT_VERSION {
            return Err(SegmentDefect::Version);
        }
        let crc = crc_skipping_field(ring_id.crc_seed(), bytes, SEGMENT_CRC_OFFSET);
        if crc != get_u32(bytes, SEGMENT_CRC_OFFSET) {
            return Err(SegmentDefect::Crc);
        }
        Ok(SegmentHeader {
            segment: get_u32(bytes, SEGMENT_INDEX_OFFSET),
            lap: get_u32(bytes, SEGMENT_LAP_OFFSET),
            incarnation: get_u32(bytes, SEGMENT_INCARNATION_OFFSET),
            first_lsn: get_u64(bytes, SEGMENT_FIRST_LSN_OFFSET),
        })
    }
}
