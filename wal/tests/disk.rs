//! The simulated disk (`sealog_wal_kit::disk::SimDisk`): reads see every completed write, only a
//! flush (or a durable write) makes one durable, a flush covers exactly the writes completed
//! before it was submitted, a durable write is never undone by an older write's flush or crash
//! fate, and a crash applies the caller's fate to every unit of every write not yet durable,
//! the writes still in flight included.

use sealog_wal::RingSource;
use sealog_wal_kit::disk::{
    fill_garbage, BlockFate, CrashUnit, DiskError, FlushCover, InFlightWrite, SimDisk,
    WriteDurability, SECTOR_BYTES,
};

const UNIT: usize = 4096;

fn filled(byte: u8, len: usize) -> Vec<u8> {
    vec![byte; len]
}

#[test]
fn a_plain_write_is_live_at_once_and_durable_only_after_a_flush() {
    let mut disk = SimDisk::new(vec![0u8; 4 * UNIT]);
    let sequence = disk
        .write(UNIT as u64, &filled(7, UNIT), WriteDurability::Volatile)
        .expect("in range");
    assert_eq!((sequence, disk.completed_writes()), (1, 1));
    assert_eq!(disk.live()[UNIT..2 * UNIT], filled(7, UNIT)[..]);
    assert_eq!(disk.durable()[UNIT..2 * UNIT], filled(0, UNIT)[..]);
    assert_eq!(disk.unflushed().len(), 1);
    let mut read = vec![0u8; UNIT];
    disk.read(UNIT as u64, &mut read).expect("in range");
    assert_eq!(read, filled(7, UNIT));
    assert_eq!(disk.flush(FlushCover::All), 1);
    assert_eq!(disk.durable()[UNIT..2 * UNIT], filled(7, UNIT)[..]);
    assert!(disk.unflushed().is_empty());
    // Through the ring source interface too.
    let mut source = disk.clone();
    source.read_at(UNIT as u64, &mut read).expect("in range");
    assert_eq!((source.size_bytes(), read[0]), (4 * UNIT as u64, 7));
}

#[test]
fn a_flush_covers_exactly_the_writes_completed_before_it_was_submitted() {
    let mut disk = SimDisk::new(vec![0u8; 4 * UNIT]);
    disk.write(0, &filled(1, UNIT), WriteDurability::Volatile)
        .expect("in range");
    let submitted_at = disk.completed_writes();
    // Completes while the flush is in flight: not covered.
    disk.write(UNIT as u64, &filled(2, UNIT), WriteDurability::Volatile)
        .expect("in range");
    assert_eq!(disk.flush(FlushCover::Through(submitted_at)), 1);
    assert_eq!(disk.durable()[..UNIT], filled(1, UNIT)[..]);
    assert_eq!(disk.durable()[UNIT..2 * UNIT], filled(0, UNIT)[..]);
    assert_eq!(disk.unflushed().len(), 1);
    assert_eq!(disk.unflushed()[0].sequence, 2);
}

#[test]
fn a_flush_makes_durable_the_covered_bytes_not_a_later_overwrite() {
    let mut disk = SimDisk::new(vec![0u8; 2 * UNIT]);
    disk.write(0, &filled(1, UNIT), WriteDurability::Volatile)
        .expect("in range");
    let submitted_at = disk.completed_writes();
    disk.write(0, &filled(2, UNIT), WriteDurability::Volatile)
        .expect("in range");
    disk.flush(FlushCover::Through(submitted_at));
    assert_eq!(disk.live()[..UNIT], filled(2, UNIT)[..]);
    assert_eq!(
        disk.durable()[..UNIT],
        filled(1, UNIT)[..],
        "the second write is not covered"
    );
    // The second write lost in a crash leaves the first.
    let image = disk.crash(&[], UNIT, &mut |_| BlockFate::Old);
    assert_eq!(image[..UNIT], filled(1, UNIT)[..]);
}

#[test]
fn a_durable_write_is_never_undone_by_an_older_write() {
    let mut disk = SimDisk::new(vec![0u8; 2 * UNIT]);
    disk.write(0, &filled(1, UNIT), WriteDurability::Volatile)
        .expect("in range");
    disk.write(0, &filled(2, UNIT), WriteDurability::Durable)
        .expect("in range");
    assert_eq!(disk.durable()[..UNIT], filled(2, UNIT)[..]);
    // A crash landing the older write's bytes would undo it: the sector keeps the new ones.
    let image = disk.crash(&[], SECTOR_BYTES, &mut |_| BlockFate::New);
    assert_eq!(image[..UNIT], filled(2, UNIT)[..]);
    // And so does a flush covering the older write.
    assert_eq!(disk.flush(FlushCover::All), 1);
    assert_eq!(disk.durable()[..UNIT], filled(2, UNIT)[..]);
}

#[test]
fn a_crash_applies_each_fate_to_each_unit_of_each_write_not_yet_durable() {
    let mut disk = SimDisk::new(filled(9, 8 * UNIT));
    disk.write(0, &filled(1, 2 * UNIT), WriteDurability::Volatile)
        .expect("in range");
    disk.write(
        2 * UNIT as u64,
        &filled(2, 2 * UNIT),
        WriteDurability::Volatile,
    )
    .expect("in range");
    let in_flight = filled(3, 2 * UNIT);
    let flying = [InFlightWrite {
        ring_offset: 4 * UNIT as u64,
        bytes: &in_flight,
    }];
    let mut asked = Vec::new();
    let image = disk.crash(&flying, UNIT, &mut |unit: CrashUnit| {
        asked.push(unit);
        match (unit.write, unit.unit) {
            (0, 0) => BlockFate::New,
            (0, _) => BlockFate::Old,
            (1, 0) => BlockFate::Zero,
            (1, _) => BlockFate::Garbage(11),
            (2, 0) => BlockFate::PartlyNew(3),
            _ => BlockFate::TornAt {
                new_bytes: 100,
                seed: 5,
            },
        }
    });
    assert_eq!(asked.len(), 6, "every unit of every write, once");
    assert!(asked[..4].iter().all(|unit| !unit.in_flight));
    assert!(asked[4..].iter().all(|unit| unit.in_flight));
    assert_eq!(asked[5].ring_offset, 5 * UNIT as u64);
    assert_eq!(image[..UNIT], filled(1, UNIT)[..]);
    assert_eq!(image[UNIT..2 * UNIT], filled(9, UNIT)[..]);
    assert_eq!(image[2 * UNIT..3 * UNIT], filled(0, UNIT)[..]);
    let mut garbage = vec![0u8; UNIT];
    fill_garbage(&mut garbage, 11);
    assert_eq!(image[3 * UNIT..4 * UNIT], garbage[..]);
    let torn = 4 * UNIT;
    assert_eq!(
        image[torn..torn + 3 * SECTOR_BYTES],
        filled(3, 3 * SECTOR_BYTES)[..]
    );
    assert_eq!(
        image[torn + 3 * SECTOR_BYTES..5 * UNIT],
        filled(9, UNIT - 1536)[..]
    );
    assert_eq!(image[5 * UNIT..5 * UNIT + 100], filled(3, 100)[..]);
    let mut tail = vec![0u8; UNIT - 100];
    fill_garbage(&mut tail, 5);
    assert_eq!(image[5 * UNIT + 100..6 * UNIT], tail[..]);
    // The disk itself is unchanged by building a crash image.
    assert_eq!(disk.durable(), &filled(9, 8 * UNIT)[..]);
}

#[test]
fn a_faulty_write_stores_one_thing_and_a_crash_may_land_what_it_meant() {
    let mut disk = SimDisk::new(vec![0u8; 2 * UNIT]);
    let stored = filled(0xee, UNIT);
    let intended = filled(4, UNIT);
    disk.write_stored(0, &stored, &intended, WriteDurability::Volatile)
        .expect("in range");
    assert_eq!(disk.live()[..UNIT], stored[..]);
    assert_eq!(disk.unflushed()[0].intended, intended);
    let image = disk.crash(&[], UNIT, &mut |_| BlockFate::New);
    assert_eq!(image[..UNIT], intended[..]);
    disk.flush(FlushCover::All);
    assert_eq!(disk.durable()[..UNIT], stored[..]);
}

#[test]
fn bad_ranges_are_typed_errors() {
    let mut disk = SimDisk::new(vec![0u8; 2 * UNIT]);
    assert!(matches!(
        disk.write(
            UNIT as u64 + 512,
            &filled(1, UNIT),
            WriteDurability::Volatile
        ),
        Err(DiskError::OutOfRange { .. })
    ));
    assert!(matches!(
        disk.write(100, &filled(1, 512), WriteDurability::Volatile),
        Err(DiskError::Unaligned { .. })
    ));
    assert!(matches!(
        disk.write(0, &filled(1, 100), WriteDurability::Volatile),
        Err(DiskError::Unaligned { .. })
    ));
    assert!(matches!(
        disk.write_stored(
            0,
            &filled(1, 512),
            &filled(1, 1024),
            WriteDurability::Volatile
        ),
        Err(DiskError::LengthMismatch { .. })
    ));
    let mut buf = vec![0u8; 16];
    assert!(matches!(
        disk.read(u64::MAX - 4, &mut buf),
        Err(DiskError::OutOfRange { .. })
    ));
    assert_eq!(disk.completed_writes(), 0, "nothing refused was counted");
}
