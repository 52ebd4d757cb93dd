//! The tail hint (docs/recovery.md): a hinted replay finds the same log as a full one, and
//! falls back to a full scan, saying why, whenever the hint cannot be trusted. Each test
//! crafts the control copies of a ring the reference writer wrote; `replay_image` also
//! replays every image fully and asserts the same finding.
//! - a hint of another incarnation than the control block's: a full scan;
//! - two copies of one incarnation whose hints move back: a full scan;
//! - a lost hint write (the log runs past the hint in force): the walk follows the valid
//!   batches past it, the scan turns full, and a hole there whose later watermark proves it
//!   acknowledged is corruption, as a full scan finds it;
//! - a hole before a stale hint with the proof past the hint: found by the window probe;
//! - a torn hint write: the older copy's hint, never crossed, still bounds the log;
//! - a hint far ahead: more reads, the same log.

mod common;

use common::*;
use sealog_wal::format::ControlBlock;
use sealog_wal::{
    Evidence, FullScan, Outcome, Position, RecoveryReport, ReplayError, Scan, TailHint,
};
use sealog_wal_kit::model::ModelWriter;

/// Both control copies of an image: (current, other).
fn copies(image: &[u8]) -> (ControlBlock, ControlBlock) {
    let decode = |copy: usize| {
        ControlBlock::decode(&image[copy * BLOCK..(copy + 1) * BLOCK]).expect("an intact copy")
    };
    let (a, b) = (decode(0), decode(1));
    if a.sequence > b.sequence {
        (a, b)
    } else {
        (b, a)
    }
}

/// Writes `control` into the copy its sequence names.
fn put(image: &mut [u8], control: &ControlBlock) {
    let at = control.copy() as usize * BLOCK;
    control.encode(&mut image[at..at + BLOCK]);
}

/// A writer that wrote `batches` flushed batches of one 3000-byte record each (a batch of a
/// block), moving its hint as it went.
fn writer_with(batches: usize) -> ModelWriter {
    let mut writer = new_writer(small_geometry());
    for _ in 0..batches {
        append(&mut writer, 1, 3000, 7);
        writer.flush();
    }
    writer
}

fn report(image: &[u8]) -> (RecoveryReport, Vec<(u64, Vec<u8>)>) {
    let (result, entries) = replay_image(image, &strict());
    (result.expect("replays"), entries)
}

#[test]
fn the_writer_s_own_hint_is_trusted_and_bounds_the_probe() {
    let writer = writer_with(30);
    let image = writer.durable().to_vec();
    let (report, entries) = report(&image);
    assert_eq!(entries.len(), 30);
    let Scan::Hinted { limit, probe_end } = report.scan else {
        panic!("{:?}", report.scan);
    };
    assert!(limit >= report.next_position && probe_end >= limit);
    // Far less than the ring: 4 segments of 16 blocks, the probe at most a few windows.
    let ring = small_geometry().ring_size_bytes().expect("a size");
    assert!(report.bytes_read < ring, "{} of {ring}", report.bytes_read);
    let (full, _) = replay_once(&image, &full(strict()));
    assert!(full.expect("replays").bytes_read > report.bytes_read);
}

#[test]
fn a_hint_of_another_incarnation_is_not_trusted() {
    let writer = writer_with(10);
    let mut image = writer.durable().to_vec();
    let (current, _) = copies(&image);
    let older = ControlBlock {
        tail_hint: TailHint {
            incarnation: current.incarnation - 1,
            ..current.tail_hint
        },
        ..current
    };
    put(&mut image, &older);
    let (report, entries) = report(&image);
    assert_eq!(entries.len(), 10);
    assert_eq!(
        report.scan,
        Scan::Full {
            reason: FullScan::HintIncarnation {
                hint_incarnation: current.incarnation - 1,
                incarnation: current.incarnation,
            }
        }
    );
}

#[test]
fn copies_whose_hints_move_back_within_an_incarnation_disagree() {
    let writer = writer_with(10);
    let mut image = writer.durable().to_vec();
    let (current, other) = copies(&image);
    let further = Position {
        offset: current.tail_hint.limit.offset,
        segment: current.tail_hint.limit.segment + 1,
        ..current.tail_hint.limit
    };
    let other = ControlBlock {
        incarnation: current.incarnation,
        tail_hint: TailHint {
            limit: further,
            incarnation: current.incarnation,
        },
        ..other
    };
    put(&mut image, &other);
    let (report, entries) = report(&image);
    assert_eq!(entries.len(), 10);
    assert!(
        matches!(
            report.scan,
            Scan::Full {
                reason: FullScan::HintsDisagree { .. }
            }
        ),
        "{:?}",
        report.scan
    );
}

/// Both control copies of `writer`'s image with their hints moved back to the head, as if
/// every hint write after the open had been lost: the log runs past them.
fn hint_lost(writer: &ModelWriter) -> Vec<u8> {
    let mut image = writer.durable().to_vec();
    let (current, other) = copies(&image);
    for copy in [current, other] {
        let stale = ControlBlock {
            tail_hint: TailHint {
                limit: current.head,
                ..copy.tail_hint
            },
            ..copy
        };
        put(&mut image, &stale);
    }
    image
}

#[test]
fn a_lost_hint_write_is_caught_when_the_log_runs_past_it() {
    let writer = writer_with(40);
    let image = hint_lost(&writer);
    let (report, entries) = report(&image);
    // Every valid batch past the hint was followed.
    assert_eq!(entries.len(), 40);
    assert!(
        matches!(
            report.scan,
            Scan::Full {
                reason: FullScan::HintCrossed { .. }
            }
        ),
        "{:?}",
        report.scan
    );
}

#[test]
fn a_hole_past_a_lost_hint_whose_later_watermark_proves_it_acknowledged_is_found() {
    let writer = writer_with(40);
    let mut image = hint_lost(&writer);
    // Batch 30 (past the stale hint) lost: batch 31's watermark (30) covers it.
    let hole = writer.written()[29].clone();
    let at = hole.ring_offset as usize;
    image[at..at + hole.bytes as usize].fill(0);
    let (result, _) = replay_image(&image, &strict());
    match result {
        Err(ReplayError::Corruption(corruption)) => {
            assert_eq!(corruption.lsn, 30);
            assert!(matches!(
                corruption.evidence,
                Evidence::WatermarkCovers { .. }
            ));
        }
        other => panic!("expected corruption, got {other:?}"),
    }
}

#[test]
fn a_hole_before_a_stale_hint_with_its_proof_past_the_hint_is_found() {
    let writer = writer_with(40);
    let mut image = writer.durable().to_vec();
    let (current, _) = copies(&image);
    // The hint stale at batch 30's end; batch 30 lost; batches 31 on (past the hint) prove it
    // acknowledged. The walk stops at the hole, before the hint, so the scan stays hinted:
    // its window past the break finds batch 31.
    let hole = writer.written()[29].clone();
    let stale = ControlBlock {
        tail_hint: TailHint {
            limit: Position {
                offset: hole.position.offset + hole.bytes,
                ..hole.position
            },
            incarnation: current.incarnation,
        },
        ..current
    };
    put(&mut image, &stale);
    let at = hole.ring_offset as usize;
    image[at..at + hole.bytes as usize].fill(0);
    let (result, _) = replay_image(&image, &strict());
    match result {
        Err(ReplayError::Corruption(corruption)) => assert_eq!(corruption.lsn, 30),
        other => panic!("expected corruption, got {other:?}"),
    }
}

#[test]
fn a_torn_hint_write_leaves_an_older_hint_that_still_bounds_the_log() {
    let writer = writer_with(10);
    let image = writer.durable().to_vec();
    let (current, _) = copies(&image);
    // The next hint's control block, on its way when the power failed: written whole, or torn.
    let next = ControlBlock {
        sequence: current.sequence + 1,
        tail_hint: TailHint {
            limit: Position {
                segment: current.tail_hint.limit.segment + 1,
                ..current.tail_hint.limit
            },
            ..current.tail_hint
        },
        ..current
    };
    let mut whole = image.clone();
    put(&mut whole, &next);
    let (landed, entries) = report(&whole);
    assert_eq!(entries.len(), 10);
    assert!(matches!(landed.scan, Scan::Hinted { limit, .. } if limit == next.tail_hint.limit));
    let mut torn = whole.clone();
    let at = next.copy() as usize * BLOCK;
    torn[at + 100..at + BLOCK].fill(0xa5);
    let (older, entries) = report(&torn);
    assert_eq!(entries.len(), 10);
    assert_eq!(older.control.sequence, current.sequence);
    assert!(matches!(older.scan, Scan::Hinted { limit, .. } if limit == current.tail_hint.limit));
}

#[test]
fn a_hint_far_ahead_reads_more_and_finds_the_same_log() {
    let writer = writer_with(10);
    let mut image = writer.durable().to_vec();
    let (current, _) = copies(&image);
    let far = ControlBlock {
        tail_hint: TailHint {
            limit: Position {
                lap: current.tail_hint.limit.lap + 1,
                ..current.tail_hint.limit
            },
            ..current.tail_hint
        },
        ..current
    };
    put(&mut image, &far);
    let (report, entries) = report(&image);
    assert_eq!((entries.len(), report.outcome), (10, Outcome::Clean));
    // The probe stops where a full scan would: the head's segment on the next lap.
    let Scan::Hinted { probe_end, .. } = report.scan else {
        panic!("{:?}", report.scan);
    };
    assert_eq!(
        probe_end,
        Position {
            lap: current.head.lap + 1,
            segment: current.head.segment,
            offset: 0
        }
    );
}
