//! `sealog format --logdrive`: a ring shaped for a LogDrive store by the store's own planner
//! (`sealog_logdrive::geometry`) and marked as holding one. A size or segment size that cannot
//! keep the store's reserves is refused before anything is written, naming what would work,
//! and the ring the format made is checked against the store's rule before success is
//! reported.

use std::path::Path;

use sealog::{FormatOptions, Geometry};
use sealog_logdrive::geometry::{self, GeometryError, PlanError};

use crate::failure::{fail, Failure, EXIT_UNUSABLE};

/// The block size the ring is planned on.
///
/// The engine learns a ring's block size only inside `format` (the largest of 4096 bytes, a
/// device's logical and physical sector sizes, or a directory's direct-I/O alignment and the
/// physical sector size of the disk under it), and no public call tells it beforehand. So the
/// ring is planned on 4096-byte blocks, the engine's smallest, which devices and files with
/// 512-byte or 4 KiB sectors get; and since storage with larger blocks rounds segments and
/// batches down and takes a larger control reserve, the geometry the format made is checked
/// with the store's rule before success is reported ([`check_made`]).
const PLAN_BLOCK_BYTES: u32 = sealog_wal::format::BLOCK_SIZE_MIN_BYTES;

/// `options` with the ring's shape (segment size, batch size, window) and purpose from the
/// LogDrive planner; every other option (`--force`, `--sync-method`, `--overwrite`) stays as
/// the caller set it. The CLI has no batch or window flags, so nothing the caller set
/// conflicts with the plan. A size or segment size the planner refuses is a usage error that
/// names the path and what would work, before anything is written.
pub fn plan(path: &Path, options: FormatOptions) -> Result<FormatOptions, Failure> {
    let size_bytes = options.size_bytes;
    let segment_size_bytes = options.segment_size_bytes;
    let planned = geometry::format_options(size_bytes, segment_size_bytes, PLAN_BLOCK_BYTES)
        .map_err(|error| plan_failure(path, size_bytes, segment_size_bytes, error))?;
    Ok(FormatOptions {
        segment_size_bytes: planned.segment_size_bytes,
        batch_size_max_bytes: planned.batch_size_max_bytes,
        window_batches_max: planned.window_batches_max,
        purpose: planned.purpose,
        ..options
    })
}

/// The usage error for a ring the planner refuses: the smallest ring when the size is too
/// small, the segment count needed when a named segment size leaves too few.
fn plan_failure(
    path: &Path,
    size_bytes: u64,
    segment_size_bytes: Option<u64>,
    error: PlanError,
) -> Failure {
    let message = match (error, segment_size_bytes) {
        (PlanError::Segments(error), _) => too_few_segments(error.segment_count, &error),
        // The planner could not lay out two segments of the size named in the ring: what
        // those segments need comes from the smallest ring of them it can lay out.
        (PlanError::TooSmall { .. }, Some(segment)) => match segments_needed(segment) {
            Some(error) => {
                let count =
                    size_bytes.saturating_sub(control_area_bytes()) / error.segment_size_bytes;
                too_few_segments(count, &error)
            }
            None => format!(
                "--segment-size {segment} cannot be a LogDrive ring's segment size (segments \
                 run from two {PLAN_BLOCK_BYTES}-byte blocks to 4 GiB); leave it out to have \
                 it chosen"
            ),
        },
        (
            PlanError::TooSmall {
                block_size_bytes,
                ring_bytes_min,
                ..
            },
            None,
        ) => format!(
            "--size {size_bytes} is too small for a LogDrive store and its reserves: the \
             smallest ring it can live on is {ring_bytes_min} bytes (on {block_size_bytes}-byte \
             blocks)"
        ),
    };
    fail(
        EXIT_UNUSABLE,
        format!("{}: {message}; nothing was written", path.display()),
    )
}

/// The refusal of `segment_count` segments, with the count and ring size that would work.
fn too_few_segments(segment_count: u64, error: &GeometryError) -> String {
    format!(
        "--segment-size {} leaves {segment_count} segment{} (batches up to {} bytes), too few \
         for a LogDrive store, which needs at least {} of that size (a ring of at least {} \
         bytes) or smaller segments (leave --segment-size out to have them chosen)",
        error.segment_size_bytes,
        if segment_count == 1 { "" } else { "s" },
        error.batch_size_max_bytes,
        error.segment_count_min,
        error.ring_bytes_min
    )
}

/// The planner's verdict on the smallest ring the engine lays out in segments of
/// `segment_size_bytes`, two, which no store accepts: it names the segments the store needs.
/// `None` when not even that ring can be laid out (a segment under two blocks or over 4 GiB).
fn segments_needed(segment_size_bytes: u64) -> Option<GeometryError> {
    let block = u64::from(PLAN_BLOCK_BYTES);
    let segment = segment_size_bytes / block * block;
    let two_segments = segment.checked_mul(2)?.checked_add(control_area_bytes())?;
    match geometry::format_options(two_segments, Some(segment_size_bytes), PLAN_BLOCK_BYTES) {
        Err(PlanError::Segments(error)) => Some(error),
        _ => None,
    }
}

/// The control area before the segments of a ring planned on [`PLAN_BLOCK_BYTES`].
fn control_area_bytes() -> u64 {
    sealog_wal::format::CONTROL_COPIES * u64::from(PLAN_BLOCK_BYTES)
}

/// Whether the ring format made can hold a store (see [`PLAN_BLOCK_BYTES`]); if not, the ring
/// is there, marked for a store that will refuse to open it, and the error says what to ask
/// for instead.
pub fn check_made(path: &Path, geometry: &Geometry) -> Result<(), Failure> {
    geometry::check(geometry).map_err(|error| {
        fail(
            EXIT_UNUSABLE,
            format!(
                "{}: the ring was formatted on {}-byte blocks into {} segments of {} bytes \
                 (batches up to {} bytes), too few for a LogDrive store, which will refuse to \
                 open it: format it again with --segment-size {} and a --size of at least {} \
                 bytes ({} segments)",
                path.display(),
                geometry.block_size_bytes,
                error.segment_count,
                error.segment_size_bytes,
                error.batch_size_max_bytes,
                error.segment_size_bytes,
                error.ring_bytes_min,
                error.segment_count_min
            ),
        )
    })
}

/// What `format --logdrive` made, for its report: the segments, the batch size, and the
/// reserves the store will keep from its clients' writes.
pub fn describe(geometry: &Geometry) -> String {
    let relocation_bytes = geometry::relocation_reserve_min_bytes(geometry);
    let control_bytes = geometry::control_reserve_bytes(geometry);
    let segments_bytes = u64::from(geometry.segment_count) * geometry.segment_size_bytes;
    let reserved_percent =
        (relocation_bytes + control_bytes) as f64 * 100.0 / segments_bytes.max(1) as f64;
    format!(
        "{} segments of {} bytes, batches up to {} bytes; the store keeps {} bytes of them \
         ({reserved_percent:.1}%) from its clients' writes: {relocation_bytes} for relocation \
         (a segment and two batches) and {control_bytes} for control records",
        geometry.segment_count,
        geometry.segment_size_bytes,
        geometry.batch_size_max_bytes,
        relocation_bytes + control_bytes
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ring laid out on 64 KiB blocks from a 4096-byte plan takes a 1 MiB control reserve:
    /// the smallest 4096-byte plan no longer holds a store there, and the check says so with
    /// the path and the ring that would work.
    #[test]
    fn a_ring_made_on_larger_blocks_is_checked() {
        let smallest = geometry::smallest_ring_bytes(PLAN_BLOCK_BYTES);
        let planned = geometry::format_options(smallest, None, PLAN_BLOCK_BYTES).expect("plans");
        let path = Path::new("ring");
        let made = sealog::storage::plan_geometry(&planned, 65536, path).expect("lays out");
        let failure = check_made(path, &made).expect_err("too few segments");
        assert_eq!(failure.status, EXIT_UNUSABLE);
        assert!(failure.message.starts_with("ring: "), "{}", failure.message);
        assert!(
            failure.message.contains("65536-byte blocks"),
            "{}",
            failure.message
        );
        let planned = geometry::format_options(64 << 20, None, PLAN_BLOCK_BYTES).expect("plans");
        let made = sealog::storage::plan_geometry(&planned, 65536, path).expect("lays out");
        assert!(check_made(path, &made).is_ok());
    }

    /// A segment size that leaves fewer than two segments is refused with the count its
    /// segments need, not with the smallest ring of the planner's own segments.
    #[test]
    fn a_segment_size_leaving_one_segment_names_the_count_needed() {
        let path = Path::new("ring");
        let failure = plan(
            path,
            FormatOptions::new(64 << 20).segment_size_bytes(48 << 20),
        )
        .expect_err("one segment");
        assert_eq!(failure.status, EXIT_UNUSABLE);
        assert!(
            failure.message.contains("leaves 1 segment ")
                && failure.message.contains("at least 3 of that size"),
            "{}",
            failure.message
        );
        let failure = plan(path, FormatOptions::new(64 << 20).segment_size_bytes(4096))
            .expect_err("a segment of one block");
        assert!(failure.message.contains("cannot be"), "{}", failure.message);
    }
}
