//! Which rings a LogDrive store can live on, and how to format one (`sealog format
//! --logdrive`). The store keeps two reserves of the ring from its clients' writes
//! (`space`): one for relocation, so that a ring clients filled can always be reclaimed, and
//! one for control records above it, so that a client refused a write can still delete,
//! trim, fence and seal. Not every geometry can keep that promise, and this module says
//! which can.
//!
//! **The relocation reserve.** The engine frees the ring a segment at a time, at its head,
//! once nothing in that segment is live; so to free the head's segment relocation must copy
//! forward every live record still in it (at most a segment), and its copies may lose up to a
//! batch at the segment end they cross (a record that does not fit the rest of a segment
//! skips it), a block of padding per batch and a block for the generation record: what
//! relocation needs, [`relocation_need_bytes`]. The reserve is that and one batch more, which
//! deletions and trims may take when every other control record is refused: they are how a
//! client frees a full ring (each makes records dead that relocation then wins back), and
//! fences, seals or trims made one to a batch, each with its padding and the tail marker an
//! idle drive writes after it, could otherwise spend the control reserve and leave a deletion
//! no room.
//!
//! **The control reserve** is 64 KiB (sixteen blocks at least), about 680 control records,
//! plus what a client's write may take beyond its own bytes once placed: the rest of a
//! segment it does not fit (less than a batch) and a block of padding for each batch in
//! flight. The store admits a write by its bytes; were that waste not kept above the control
//! reserve, writes admitted at the limit would eat into it (on the smallest rings they ate
//! all of it and four KiB of the relocation reserve, and deletions then found no room).
//!
//! **Enough segments.** A copy must land in a later segment than the one it leaves, or
//! freeing the head's segment never ends (the copies would hold it). The writer is in the
//! head's segment only while the ring is nearly empty: it then has the rest of the ring,
//! (n - 1) segments, before it. So a geometry is sound when that room is more than clients
//! ever leave before they are refused (both reserves and a record), and when both reserves
//! together take at most half of the ring (a store whose clients may use less than half of
//! its ring is a misconfiguration to refuse, not to warn about). The segment count these two
//! rules need is [`segment_count_min`]; [`check`] refuses a ring with fewer, naming what
//! would work; [`format_options`] plans a ring that passes.

use sealog::{FormatOptions, Geometry, RingPurpose};

/// The control reserve's floor: room for about 680 control records (96-byte entry headers,
/// no payload) whatever the block size.
pub const CONTROL_RESERVE_MIN_BYTES: u64 = 64 << 10;

/// The segments [`format_options`] aims for: enough that the reserves take a small share
/// of the ring (about a fifth) and a relocation pass has room to spread.
pub const FORMAT_SEGMENTS_TARGET: u64 = 8;

/// The smallest segment [`format_options`] makes.
pub const FORMAT_SEGMENT_MIN_BYTES: u64 = 256 << 10;

/// The largest segment [`format_options`] makes (the engine's default cap).
pub const FORMAT_SEGMENT_MAX_BYTES: u64 = sealog::storage::SEGMENT_SIZE_DEFAULT_MAX_BYTES;

/// A ring's shape as far as the reserves go.
#[derive(Clone, Copy, Debug)]
struct Shape {
    segment: u64,
    batch: u64,
    block: u64,
    window: u64,
}

impl Shape {
    fn of(geometry: &Geometry) -> Shape {
        Shape {
            segment: geometry.segment_size_bytes.max(1),
            batch: u64::from(geometry.batch_size_max_bytes),
            block: u64::from(geometry.block_size_bytes),
            window: u64::from(geometry.window_batches_max),
        }
    }

    /// What relocation needs to free the head's segment (see the module doc).
    fn relocation_need(&self) -> u64 {
        let batches = self.segment.div_ceil(self.batch.max(1));
        self.segment + self.batch + (batches + 2) * self.block
    }

    fn relocation(&self) -> u64 {
        self.relocation_need() + self.batch
    }

    fn control(&self) -> u64 {
        let floor = (16 * self.block).max(CONTROL_RESERVE_MIN_BYTES);
        floor + self.batch + self.window * self.block
    }

    /// The fewest segments: three at least; enough that the writer in the head's segment,
    /// with (n - 1) segments less a block before it, has room for both reserves and a
    /// record; and enough that both reserves are at most half the ring.
    fn segment_count_min(&self) -> u64 {
        let reserves = self.relocation() + self.control();
        let beyond_head = 1 + (reserves + self.batch + self.block).div_ceil(self.segment);
        let half = (2 * reserves).div_ceil(self.segment);
        beyond_head.max(half).max(3)
    }
}

/// Relocation's reserve on this ring: what it needs to free the head's segment and a batch
/// (see the module doc).
pub fn relocation_reserve_min_bytes(geometry: &Geometry) -> u64 {
    Shape::of(geometry).relocation()
}

/// What relocation needs to free the head's segment on this ring: the segment, a batch lost at
/// a segment end, a block of padding per batch of copies and one for the generation record.
/// Deletions and trims may take the relocation reserve down to this.
pub fn relocation_need_bytes(geometry: &Geometry) -> u64 {
    Shape::of(geometry).relocation_need()
}

/// The control reserve on this ring: 64 KiB (sixteen blocks at least), a batch and a block
/// per batch in flight (see the module doc).
pub fn control_reserve_bytes(geometry: &Geometry) -> u64 {
    Shape::of(geometry).control()
}

/// The fewest segments of `segment_size_bytes` a store's ring needs, with batches up to
/// `batch_size_max_bytes`, `block_size_bytes` blocks and `window_batches` batches in flight
/// (see the module doc).
pub fn segment_count_min(
    segment_size_bytes: u64,
    batch_size_max_bytes: u64,
    block_size_bytes: u64,
    window_batches: u64,
) -> u64 {
    Shape {
        segment: segment_size_bytes.max(1),
        batch: batch_size_max_bytes,
        block: block_size_bytes,
        window: window_batches,
    }
    .segment_count_min()
}

/// Why a ring cannot hold a LogDrive store.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "{segment_count} segments of {segment_size_bytes} bytes (batches up to {batch_size_max_bytes} \
     bytes) are too few for a LogDrive store: it needs at least {segment_count_min} of that \
     size (a ring of at least {ring_bytes_min} bytes), or smaller segments (`sealog format \
     --logdrive` chooses them)"
)]
pub struct GeometryError {
    /// The ring's segments.
    pub segment_count: u64,
    /// Their size.
    pub segment_size_bytes: u64,
    /// The ring's largest batch.
    pub batch_size_max_bytes: u64,
    /// The fewest segments of this size that work.
    pub segment_count_min: u64,
    /// The smallest ring of this segment size that works (control blocks included).
    pub ring_bytes_min: u64,
}

/// Whether a ring of `geometry` can hold a LogDrive store (see the module doc).
pub fn check(geometry: &Geometry) -> Result<(), GeometryError> {
    let shape = Shape::of(geometry);
    let (segment, batch) = (shape.segment, shape.batch);
    let minimum = shape.segment_count_min();
    let count = u64::from(geometry.segment_count);
    if count >= minimum {
        return Ok(());
    }
    Err(GeometryError {
        segment_count: count,
        segment_size_bytes: segment,
        batch_size_max_bytes: batch,
        segment_count_min: minimum,
        ring_bytes_min: geometry.control_area_bytes() + minimum * segment,
    })
}

/// Why [`format_options`] cannot plan a ring.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// The size is too small for any sound geometry of this block size.
    #[error(
        "a LogDrive store needs a ring of at least {ring_bytes_min} bytes with \
         {block_size_bytes}-byte blocks; {size_bytes} were asked for"
    )]
    TooSmall {
        /// The size asked for.
        size_bytes: u64,
        /// The block size planned for.
        block_size_bytes: u64,
        /// The smallest ring that works.
        ring_bytes_min: u64,
    },
    /// The segment size asked for leaves too few segments.
    #[error(transparent)]
    Segments(#[from] GeometryError),
}

/// The batch size a LogDrive ring of `segment_size_bytes` segments gets: the engine's
/// default (1 MiB), at most a quarter of a segment (so that a segment holds several batches
/// and the reserves stay a small share of it), in whole blocks.
fn planned_batch_bytes(segment_size_bytes: u64, block_size_bytes: u64) -> u32 {
    let default = u64::from(sealog::storage::BATCH_SIZE_DEFAULT_MAX_BYTES);
    let batch = default.min(segment_size_bytes / 4);
    let batch = (batch / block_size_bytes * block_size_bytes).max(block_size_bytes);
    u32::try_from(batch).unwrap_or(sealog::storage::BATCH_SIZE_DEFAULT_MAX_BYTES)
}

/// The options and the geometry the engine makes of them for a ring of `size_bytes` in
/// `segment_size_bytes` segments on `block_size_bytes` blocks.
fn plan(
    size_bytes: u64,
    segment_size_bytes: u64,
    block_size_bytes: u32,
) -> Option<(FormatOptions, Geometry)> {
    let batch = planned_batch_bytes(segment_size_bytes, u64::from(block_size_bytes));
    let options = FormatOptions::new(size_bytes)
        .segment_size_bytes(segment_size_bytes)
        .batch_size_max_bytes(batch)
        .purpose(RingPurpose::LogDriveStore);
    let path = std::path::Path::new("");
    let geometry = sealog::storage::plan_geometry(&options, block_size_bytes, path).ok()?;
    Some((options, geometry))
}

/// Format options for a ring of `size_bytes` that a LogDrive store can live on, marked as
/// holding one ([`RingPurpose::LogDriveStore`]): segments of an eighth of the ring (from
/// 256 KiB to the engine's 64 MiB cap, in whole blocks of `block_size_bytes`), batches of at
/// most a quarter segment, or the segment size the caller names, checked.
pub fn format_options(
    size_bytes: u64,
    segment_size_bytes: Option<u64>,
    block_size_bytes: u32,
) -> Result<FormatOptions, PlanError> {
    let block = u64::from(block_size_bytes).max(1);
    let segment = match segment_size_bytes {
        Some(segment) => segment / block * block,
        None => {
            (size_bytes / FORMAT_SEGMENTS_TARGET)
                .clamp(FORMAT_SEGMENT_MIN_BYTES, FORMAT_SEGMENT_MAX_BYTES)
                / block
                * block
        }
    };
    let too_small = || PlanError::TooSmall {
        size_bytes,
        block_size_bytes: block,
        ring_bytes_min: smallest_ring_bytes(block_size_bytes),
    };
    let Some((options, geometry)) = plan(size_bytes, segment, block_size_bytes) else {
        return Err(too_small());
    };
    match check(&geometry) {
        Ok(()) => Ok(options),
        Err(error) if segment_size_bytes.is_some() => Err(PlanError::Segments(error)),
        Err(_) => Err(too_small()),
    }
}

/// The smallest ring [`format_options`] plans with `block_size_bytes` blocks: the fewest of
/// its smallest segments that work.
pub fn smallest_ring_bytes(block_size_bytes: u32) -> u64 {
    let block = u64::from(block_size_bytes).max(1);
    let segment = (FORMAT_SEGMENT_MIN_BYTES / block * block).max(block);
    // The geometry the engine makes of a roomy ring of these segments: its control area
    // and its window (a small ring's window is capped by its data area) are the plan's.
    let Some((_, roomy)) = plan(16 * segment, segment, block_size_bytes) else {
        return 16 * segment;
    };
    let count = Shape::of(&roomy).segment_count_min();
    roomy.control_area_bytes() + count * segment
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geometry(segment: u64, count: u32, batch: u32) -> Geometry {
        Geometry {
            block_size_bytes: 4096,
            segment_size_bytes: segment,
            segment_count: count,
            batch_size_max_bytes: batch,
            window_batches_max: 4,
            window_bytes_max: 4 * u64::from(batch),
        }
    }

    /// A default 64 MiB ring (three 16 MiB segments, 1 MiB batches) is sound; a 16 MiB ring
    /// of 4 MiB segments is not (its reserves would take over half), and the error names the
    /// four segments (16 MiB and two blocks) that would do.
    #[test]
    fn rings_are_sound_with_enough_segments_for_their_reserves() {
        assert_eq!(check(&geometry(16 << 20, 3, 1 << 20)), Ok(()));
        let error = check(&geometry(4 << 20, 3, 1 << 20)).expect_err("too few");
        assert_eq!(error.segment_count_min, 4);
        assert_eq!(error.ring_bytes_min, (16 << 20) + 2 * 4096);
        assert!(error.to_string().contains("at least 4"), "{error}");
        // Batches as large as a segment need many segments.
        assert_eq!(segment_count_min(1 << 20, 1 << 20, 4096, 4), 9);
        assert_eq!(check(&geometry(1 << 20, 9, 1 << 20)), Ok(()));
        assert!(check(&geometry(1 << 20, 8, 1 << 20)).is_err());
    }

    /// Every geometry the rule accepts keeps both reserves within half the ring and leaves
    /// the writer in the head's segment room for them and a record; one segment fewer breaks
    /// one of the two.
    #[test]
    fn the_minimum_is_the_least_count_keeping_both_rules() {
        for segment in [256u64 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20] {
            for batch in [32u64 << 10, 256 << 10, 1 << 20] {
                let batch = batch.min(segment - 4096);
                let minimum = segment_count_min(segment, batch, 4096, 4);
                let holds = |count: u64| {
                    let control = CONTROL_RESERVE_MIN_BYTES + batch + 4 * 4096;
                    let copies = (segment.div_ceil(batch) + 2) * 4096;
                    let reserves = segment + 2 * batch + copies + control;
                    count >= 3
                        && 2 * reserves <= count * segment
                        && (count - 1) * segment >= reserves + batch + 4096
                };
                assert!(holds(minimum), "{segment} {batch}: {minimum}");
                assert!(
                    !holds(minimum - 1),
                    "{segment} {batch}: {minimum} is not the least"
                );
            }
        }
    }

    /// The planner makes sound rings of eighth-ring segments, marked for a store, and names
    /// the smallest ring when asked for less.
    #[test]
    fn planned_rings_pass_the_check() {
        for size in [3u64 << 20, 64 << 20, 320 << 20, 512 << 20, 4 << 30] {
            let options = format_options(size, None, 4096).expect("plans");
            let path = std::path::Path::new("ring");
            let planned = sealog::storage::plan_geometry(&options, 4096, path).expect("plans");
            assert_eq!(check(&planned), Ok(()), "{size}: {planned:?}");
            assert!(planned.segment_count >= 7, "{size}: {planned:?}");
            assert_eq!(options.purpose, RingPurpose::LogDriveStore);
        }
        let smallest = smallest_ring_bytes(4096);
        assert!(format_options(smallest, None, 4096).is_ok());
        assert_eq!(
            format_options(smallest - 1, None, 4096).expect_err("too small"),
            PlanError::TooSmall {
                size_bytes: smallest - 1,
                block_size_bytes: 4096,
                ring_bytes_min: smallest
            }
        );
        let named = format_options(32 << 20, Some(4 << 20), 4096).expect("plans");
        assert_eq!(named.batch_size_max_bytes, Some(1 << 20));
        assert!(matches!(
            format_options(16 << 20, Some(4 << 20), 4096),
            Err(PlanError::Segments(_))
        ));
    }
}
