//! Ring room for the store's records: relocation keeps a reserve of the ring for itself, so
//! that a ring that clients filled can always be reclaimed (it must copy a segment's live
//! records forward before the head may leave that segment and free it), and control records
//! keep a smaller one below it, so that a client refused a write can still delete and trim.
//!
//! The engine says how many bytes its writer can still take before the ring is full
//! ([`sealog::LogShape::usable_bytes`]); the store counts the bytes of the records it queued
//! and has not yet seen complete, and admits a record only if what would be left covers the
//! reserves below its class. A queued record is counted until its outcome is taken in, also
//! once the engine has placed it (and the usable bytes shrank by it): the count errs by at
//! most the engine's in-flight window, on the side of refusing early, and the reserve holds
//! that window besides what relocation copies.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use sealog::Geometry;

use crate::api::LogDriveError;
use crate::reclaim::ReclaimPolicy;

/// Who is asking for room.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Class {
    /// A client's write: leaves both reserves.
    Write,
    /// A create, delete, seal, fence or trim: may use the control reserve.
    Control,
    /// A relocated copy: may use everything.
    Relocation,
}

/// The room the store's records take.
#[derive(Debug)]
pub(crate) struct Space {
    /// Ring bytes of records queued and not yet complete.
    queued_bytes: AtomicU64,
    /// What relocation keeps.
    pub reserve_bytes: u64,
    /// What control records keep below client writes.
    pub control_reserve_bytes: u64,
    /// Records refused for room, by class (write, control, relocation).
    refusals: [AtomicU64; 3],
}

/// The smallest reserve relocation can work in on this ring: one segment (the head's, whose
/// live records must all be copied before it frees), two batches (the copies' batches and a
/// segment end they skip) and the in-flight window (by which the count of queued bytes may
/// overstate what the ring holds).
pub(crate) fn reserve_min_bytes(geometry: &Geometry) -> u64 {
    let batch = u64::from(geometry.batch_size_max_bytes);
    geometry.segment_size_bytes + 2 * batch + u64::from(geometry.window_batches_max) * batch
}

impl Space {
    /// The room accounting for a ring of `geometry` under `policy` (an explicit reserve below
    /// what relocation needs is refused).
    pub fn for_ring(geometry: &Geometry, policy: &ReclaimPolicy) -> Result<Space, String> {
        let minimum = reserve_min_bytes(geometry);
        let capacity = geometry.segment_size_bytes * u64::from(geometry.segment_count);
        let reserve_bytes = match policy.reserve_bytes {
            Some(reserve) if reserve < minimum => {
                return Err(format!(
                    "a relocation reserve of {reserve} bytes is below the {minimum} relocation \
                     needs on this ring (a segment of {} bytes, two batches and the in-flight \
                     window)",
                    geometry.segment_size_bytes
                ))
            }
            Some(reserve) => reserve,
            None if minimum > capacity / 2 => {
                tracing::warn!(
                    reserve_bytes = minimum,
                    capacity_bytes = capacity,
                    "the relocation reserve takes over half of this ring (its segments are \
                     large for its size): format it with smaller segments"
                );
                minimum
            }
            None => minimum,
        };
        let block = u64::from(geometry.block_size_bytes);
        Ok(Space {
            queued_bytes: AtomicU64::new(0),
            reserve_bytes,
            control_reserve_bytes: (16 * block).max(64 << 10),
            refusals: Default::default(),
        })
    }

    /// Admits `bytes` of a record of `class`, with `usable_bytes` left in the ring: the
    /// admission holds them until dropped (when the record's outcome is taken in).
    pub fn admit(
        self: &Arc<Space>,
        usable_bytes: u64,
        bytes: u64,
        class: Class,
        floor: u64,
    ) -> Result<Admission, LogDriveError> {
        let kept = match class {
            Class::Write => self.reserve_bytes + self.control_reserve_bytes,
            Class::Control => self.reserve_bytes,
            Class::Relocation => 0,
        };
        let queued = self.queued_bytes.fetch_add(bytes, Ordering::AcqRel) + bytes;
        if usable_bytes < queued.saturating_add(kept) {
            self.queued_bytes.fetch_sub(bytes, Ordering::AcqRel);
            self.refusals[class as usize].fetch_add(1, Ordering::Relaxed);
            return Err(LogDriveError::RingFull);
        }
        Ok(Admission {
            space: Arc::clone(self),
            bytes,
            floor,
        })
    }

    /// Bytes queued and not yet complete.
    pub fn queued_bytes(&self) -> u64 {
        self.queued_bytes.load(Ordering::Acquire)
    }

    /// Records refused for room: client writes, control records, relocated copies.
    pub fn refusals(&self) -> [u64; 3] {
        [0, 1, 2].map(|class| self.refusals[class].load(Ordering::Relaxed))
    }
}

/// Room held for one queued record.
#[derive(Debug)]
pub(crate) struct Admission {
    space: Arc<Space>,
    bytes: u64,
    /// The drive's next LSN when the record was admitted: its LSN is no lower.
    floor: u64,
}

impl Admission {
    /// The drive's next LSN when the record was admitted (a bound below its LSN).
    pub fn floor(&self) -> u64 {
        self.floor
    }
}

impl Drop for Admission {
    fn drop(&mut self) {
        self.space
            .queued_bytes
            .fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn space() -> Arc<Space> {
        Arc::new(Space {
            queued_bytes: AtomicU64::new(0),
            reserve_bytes: 1000,
            control_reserve_bytes: 100,
            refusals: Default::default(),
        })
    }

    #[test]
    fn writes_leave_both_reserves_controls_one_and_relocation_none() {
        let space = space();
        assert!(space.admit(1199, 100, Class::Write, 1).is_err());
        let write = space.admit(1200, 100, Class::Write, 1).unwrap();
        assert_eq!(space.queued_bytes(), 100);
        assert!(space.admit(1200, 150, Class::Control, 1).is_err());
        let control = space.admit(1200, 100, Class::Control, 1).unwrap();
        assert!(space.admit(1200, 1001, Class::Relocation, 1).is_err());
        let copy = space.admit(1200, 1000, Class::Relocation, 1).unwrap();
        assert_eq!(space.queued_bytes(), 1200);
        drop((write, control, copy));
        assert_eq!(space.queued_bytes(), 0);
        assert_eq!(space.refusals(), [1, 1, 1]);
    }

    #[test]
    fn more_writers_than_room_get_no_more_than_the_room() {
        // 32 threads race for room for 10 records: exactly 10 are admitted at a time.
        let space = space();
        let admitted: Vec<_> = std::thread::scope(|scope| {
            let threads: Vec<_> = (0..32)
                .map(|_| {
                    let space = Arc::clone(&space);
                    scope.spawn(move || space.admit(2100, 100, Class::Write, 1).ok())
                })
                .collect();
            threads.into_iter().map(|t| t.join().unwrap()).collect()
        });
        assert_eq!(admitted.iter().flatten().count(), 10);
        drop(admitted);
        assert_eq!(space.queued_bytes(), 0);
    }
}
