//! Which LogDrive ids a Raft group owns. A group's id is the high bits of all of them: the
//! metadata LogDrive is `group << 24`, and its log's segments are `group << 24 | n` with n in
//! 1..2^24 (a new n at each truncation, wrapping round past the ones in use), so a store's
//! list of LogDrive ids says which groups it holds and which LogDrives belong to none.

use crate::codec::SegmentRef;

/// Bits of a LogDrive id that number a group's segments.
const SEGMENT_BITS: u32 = 24;

/// The largest segment number.
const SEGMENT_MAX: u64 = (1 << SEGMENT_BITS) - 1;

/// The largest group id a store holds.
pub const GROUP_ID_MAX: u64 = (1 << (64 - SEGMENT_BITS)) - 1;

/// The metadata LogDrive of `group`.
pub(crate) fn meta_id(group: u64) -> u64 {
    group << SEGMENT_BITS
}

/// Segment `n` (1 and up) of `group`.
pub(crate) fn segment_id(group: u64, n: u64) -> u64 {
    (group << SEGMENT_BITS) | n
}

/// The group a LogDrive id belongs to, and its segment number (0 for the metadata).
pub(crate) fn split(id: u64) -> (u64, u64) {
    (id >> SEGMENT_BITS, id & SEGMENT_MAX)
}

/// The id for a new segment of `group`: the number after its newest segment's, skipping
/// the ones `segments` hold.
pub(crate) fn next_segment_id(group: u64, segments: &[SegmentRef]) -> u64 {
    let newest = segments
        .last()
        .map_or(0, |segment| split(segment.drive_id).1);
    let mut n = newest;
    loop {
        n = if n >= SEGMENT_MAX { 1 } else { n + 1 };
        let id = segment_id(group, n);
        if segments.iter().all(|segment| segment.drive_id != id) {
            return id;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_split_back_into_group_and_segment() {
        assert_eq!(split(meta_id(GROUP_ID_MAX)), (GROUP_ID_MAX, 0));
        assert_eq!(split(segment_id(7, SEGMENT_MAX)), (7, SEGMENT_MAX));
    }

    #[test]
    fn a_new_segment_wraps_round_past_those_in_use() {
        let at = |n| SegmentRef {
            first_index: n,
            drive_id: segment_id(3, n),
        };
        assert_eq!(next_segment_id(3, &[at(1)]), segment_id(3, 2));
        assert_eq!(
            next_segment_id(3, &[at(1), at(SEGMENT_MAX)]),
            segment_id(3, 2)
        );
        assert_eq!(
            next_segment_id(3, &[at(2), at(SEGMENT_MAX)]),
            segment_id(3, 1)
        );
    }
}
