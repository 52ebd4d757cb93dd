//! The control block as replay reads it: both copies read and checked (each must sit in the
//! slot its sequence names; the newest that checks out is current), the current one's
//! geometry, head and sequence validated against the source, and whether its tail hint may
//! bound the probe after the log's end ([`trusted_hint`]).

use crate::error::ReplayError;
use crate::format::{
    ControlBlock, ControlDefect, Position, TailHint, BLOCK_SIZE_MAX_BYTES, BLOCK_SIZE_MIN_BYTES,
    CONTROL_COPIES, CONTROL_SEQUENCE_LIMIT, FORMAT_VERSION,
};
use crate::replay::report::{FullScan, ScanPolicy};
use crate::source::RingSource;

/// Reads the ring's current control block: the newest of the two copies that checks out.
pub fn read_control<S: RingSource + ?Sized>(source: &mut S) -> Result<ControlBlock, ReplayError> {
    read_controls(source).map(|(current, _)| current)
}

/// Reads both control copies: the current one (the newest that checks out), and the other
/// one when it checks out too (for the tail hint's cross-check, [`trusted_hint`]).
pub(super) fn read_controls<S: RingSource + ?Sized>(
    source: &mut S,
) -> Result<(ControlBlock, Option<ControlBlock>), ReplayError> {
    let mut block = vec![0u8; BLOCK_SIZE_MIN_BYTES as usize];
    let first = read_control_copy(source, 0, &mut block)?;
    let second_offsets = second_copy_offsets(&first);
    let second = read_second_copy(source, &second_offsets, &mut block)?;
    // A copy must sit in the slot its sequence number names; one that does not was misdirected.
    let first = in_its_slot(first, 0);
    let second = in_its_slot(second, 1);
    let (control, other) = choose_control(first, second, second_offsets[0])?;
    validate_control(&control, source.size_bytes())?;
    Ok((control, other))
}

/// Where copy 1 may sit, in the order to try them.
fn second_copy_offsets(first: &Result<ControlBlock, ControlDefect>) -> Vec<u64> {
    // Copy 1 sits one block in; the block size is in copy 0, or, if copy 0 is damaged, is one
    // of the few sizes the format allows: try each.
    match first {
        Ok(control) => vec![u64::from(control.geometry.block_size_bytes)],
        Err(_) => {
            let sizes =
                BLOCK_SIZE_MIN_BYTES.trailing_zeros()..=BLOCK_SIZE_MAX_BYTES.trailing_zeros();
            sizes.map(|shift| 1u64 << shift).collect()
        }
    }
}

/// Reads copy 1 at the first of `offsets` where a copy checks out and records that block
/// size, or returns the most telling defect found over them.
fn read_second_copy<S: RingSource + ?Sized>(
    source: &mut S,
    offsets: &[u64],
    block: &mut [u8],
) -> Result<Result<ControlBlock, ControlDefect>, ReplayError> {
    let mut second = Err(ControlDefect::Magic);
    for &offset in offsets {
        if offset + block.len() as u64 > source.size_bytes() {
            break;
        }
        let found = match read_control_copy(source, offset, block)? {
            Ok(control) if u64::from(control.geometry.block_size_bytes) == offset => {
                second = Ok(control);
                break;
            }
            Ok(_) => Err(ControlDefect::Crc),
            Err(defect) => Err(defect),
        };
        // Keep the most telling defect seen over the candidate places: a damaged copy (or one
        // of another version) says more than a missing one.
        if defect_rank(found) > defect_rank(second) {
            second = found;
        }
    }
    Ok(second)
}

/// The copy, when it sits in the slot (`copy`) its sequence number names; a copy elsewhere
/// was misdirected and counts as damaged.
fn in_its_slot(
    copy: Result<ControlBlock, ControlDefect>,
    slot: u64,
) -> Result<ControlBlock, ControlDefect> {
    copy.and_then(|c| {
        if c.copy() == slot {
            Ok(c)
        } else {
            Err(ControlDefect::Crc)
        }
    })
}

/// The current control copy (the newest of those that check out) and the other one when it
/// checks out too; or, when neither does, the error that says most about why
/// (`second_offset` is where copy 1 was looked for first).
fn choose_control(
    first: Result<ControlBlock, ControlDefect>,
    second: Result<ControlBlock, ControlDefect>,
    second_offset: u64,
) -> Result<(ControlBlock, Option<ControlBlock>), ReplayError> {
    match (first, second) {
        (Ok(a), Ok(b)) => {
            if a.sequence >= b.sequence {
                Ok((a, Some(b)))
            } else {
                Ok((b, Some(a)))
            }
        }
        // An intact copy of another format version means the ring is not ours to read, even
        // when an older copy of this version survives beside it.
        (Err(ControlDefect::Version(found)), _) | (_, Err(ControlDefect::Version(found))) => {
            Err(ReplayError::UnsupportedVersion {
                found,
                supported: FORMAT_VERSION,
            })
        }
        (Ok(a), Err(_)) => Ok((a, None)),
        (Err(_), Ok(b)) => Ok((b, None)),
        (Err(ControlDefect::Magic), Err(ControlDefect::Magic)) => {
            Err(ReplayError::NotARing { second_offset })
        }
        (
            Err(ControlDefect::SyncChoice {
                method_byte,
                source_byte,
            }),
            Err(_),
        )
        | (
            Err(_),
            Err(ControlDefect::SyncChoice {
                method_byte,
                source_byte,
            }),
        ) => Err(ReplayError::ControlSyncChoice {
            method_byte,
            source_byte,
        }),
        (Err(ControlDefect::Purpose { purpose_byte }), Err(_))
        | (Err(_), Err(ControlDefect::Purpose { purpose_byte })) => {
            Err(ReplayError::ControlPurpose { purpose_byte })
        }
        (Err(_), Err(_)) => Err(ReplayError::ControlCorrupt),
    }
}

/// The tail hint's limit (normalized, [`TailHint::normalized_limit`]) when replay may trust
/// it, or why not: a full scan was asked for; the hint was set by another incarnation than
/// the control block's; its limit is no place of this ring at or after the head; or the other
/// copy, written by the same incarnation, records a further limit (a hint never moves back
/// within an incarnation, so the copies disagree). Whether the log stays within the limit is
/// checked when the walk ends ([`FullScan::HintCrossed`]).
pub fn trusted_hint(
    control: &ControlBlock,
    other: Option<&ControlBlock>,
    policy: ScanPolicy,
) -> Result<Position, FullScan> {
    if policy == ScanPolicy::Full {
        return Err(FullScan::Requested);
    }
    let hint: TailHint = control.tail_hint;
    if hint.incarnation != control.incarnation {
        return Err(FullScan::HintIncarnation {
            hint_incarnation: hint.incarnation,
            incarnation: control.incarnation,
        });
    }
    let geometry = &control.geometry;
    let limit = hint
        .normalized_limit(geometry)
        .filter(|limit| *limit >= control.head)
        .ok_or(FullScan::HintInvalid { limit: hint.limit })?;
    if let Some(other) = other {
        let same_writer = other.incarnation == control.incarnation
            && other.tail_hint.incarnation == control.incarnation;
        // An older copy's limit that names no place is no evidence either way: the current
        // copy's CRC, identity and limit all check out.
        let other_limit = other.tail_hint.normalized_limit(geometry);
        if let Some(other_limit) =
            other_limit.filter(|other_limit| same_writer && *other_limit > limit)
        {
            return Err(FullScan::HintsDisagree { limit, other_limit });
        }
    }
    Ok(limit)
}

/// How much a control copy's defect says: version (intact, another format) over CRC or an
/// unknown sync choice or purpose (ours, damaged or crafted) over magic (nothing there).
fn defect_rank(copy: Result<ControlBlock, ControlDefect>) -> u8 {
    match copy {
        Ok(_) => 3,
        Err(ControlDefect::Version(_)) => 2,
        Err(
            ControlDefect::Crc | ControlDefect::SyncChoice { .. } | ControlDefect::Purpose { .. },
        ) => 1,
        Err(ControlDefect::Magic) => 0,
    }
}

/// Reads the control copy at `offset` into `block` and decodes it; a copy that would lie
/// past the source's end is missing (no magic). Only a read error fails.
fn read_control_copy<S: RingSource + ?Sized>(
    source: &mut S,
    offset: u64,
    block: &mut [u8],
) -> Result<Result<ControlBlock, ControlDefect>, ReplayError> {
    if offset + block.len() as u64 > source.size_bytes() {
        return Ok(Err(ControlDefect::Magic));
    }
    source
        .read_at(offset, block)
        .map_err(|source| ReplayError::ControlIo { offset, source })?;
    Ok(ControlBlock::decode(block))
}

/// Checks what every later step relies on in the current control block: a valid geometry
/// that fits the source, a sequence a writer could have written, and a head within bounds.
fn validate_control(control: &ControlBlock, source_size_bytes: u64) -> Result<(), ReplayError> {
    let geometry = &control.geometry;
    geometry.validate()?;
    let ring_size_bytes = geometry
        .ring_size_bytes()
        .expect("validated geometry has a size");
    if ring_size_bytes > source_size_bytes {
        return Err(ReplayError::SourceTooSmall {
            ring_size_bytes,
            source_size_bytes,
        });
    }
    // Every writer takes its next sequence from `ControlBlock::next_sequence`, which stays at
    // or below the limit: a copy past it was never written by a writer.
    if control.sequence > CONTROL_SEQUENCE_LIMIT {
        return Err(ReplayError::ControlSequence {
            sequence: control.sequence,
        });
    }
    let head = control.head;
    // The bounds every later arithmetic on these fields relies on:
    // - head lap <= u32::MAX - 2: a walk moves at most one lap past its head, and the probe's
    //   end is one lap on, so `lap + 1` never overflows in replay;
    // - trim LSN < u64::MAX / 2 and head LSN <= trim LSN + 1: `trim_lsn + 1`, the walk's LSN
    //   (head LSN plus at most one record per 64 bytes of one lap of the ring) and the plan's
    //   `next_lsn` all stay far below u64::MAX;
    // - head LSN >= 1: `next_lsn - 1` (the durable LSN after recovery) never underflows.
    let head_ok = head.lap >= 1
        && head.lap <= u32::MAX - 2
        && head.segment < geometry.segment_count
        && head.offset >= geometry.segment_data_offset()
        && u64::from(head.offset) < geometry.segment_size_bytes
        && head.offset % geometry.block_size_bytes == 0
        && control.head_lsn >= 1
        && control.head_lsn <= control.trim_lsn.saturating_add(1)
        && control.trim_lsn < u64::MAX / 2;
    if !head_ok {
        return Err(ReplayError::ControlHead {
            head,
            head_lsn: control.head_lsn,
            trim_lsn: control.trim_lsn,
        });
    }
    debug_assert_eq!(CONTROL_COPIES, 2);
    Ok(())
}
