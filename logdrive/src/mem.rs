//! [`MemLogDrive`]: a LogDrive held in memory, with the same promises and the same refusals
//! as a LogDrive of a store (docs/logdrive.md, the operations table), and switches for the
//! faults a replica meets: down (every operation fails with an I/O error), a damaged slot
//! (reads `Damaged` until the same bytes are written again), a lost slot (an unacknowledged
//! write the replica never kept). The compositions' tests and the replicated simulations
//! run on it, where a store on a ring would cost a drive thread per replica and hide the
//! interleavings a test wants to choose; it is also a reference for what a LogDrive answers.
//!
//! Every operation takes effect when it is called and its future is ready at once. Its checks
//! are written apart from the store's (`state/`), on purpose: it keeps the values themselves
//! and compares bytes, and a reference that shared the code it is compared with would
//! agree with it whatever that code did.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, MutexGuard};

use bytes::Bytes;

use crate::api::{ready, Length, LogDrive, LogDriveError, OpFuture, ReadOutcome, TailDesc};

/// The largest window a [`MemLogDrive`] answers by default, the store's default too.
pub const MEM_WEAK_TAIL_K_MAX: u64 = 4096;

/// A LogDrive in memory: see the module doc.
pub struct MemLogDrive {
    state: Mutex<MemState>,
}

/// One replica's registers and controls.
#[derive(Clone, Debug, Default)]
struct MemState {
    /// Written addresses (at or past `first`, below the sealed length).
    slots: BTreeMap<u64, MemSlot>,
    sealed: Option<u64>,
    fence: u64,
    /// The trim point: the first address not trimmed.
    first: u64,
    capacity: u64,
    k_max: u64,
    /// Why every operation fails now, when the replica is down.
    down: Option<String>,
}

#[derive(Clone, Debug)]
struct MemSlot {
    bytes: Bytes,
    damaged: bool,
}

impl Default for MemLogDrive {
    fn default() -> Self {
        MemLogDrive::new()
    }
}

impl MemLogDrive {
    /// An empty LogDrive of (practically) unbounded capacity.
    pub fn new() -> MemLogDrive {
        MemLogDrive::with_limits(u64::MAX - 1, MEM_WEAK_TAIL_K_MAX)
    }

    /// An empty LogDrive of `capacity` addresses whose `weak_tail` answers windows up to
    /// `k_max`.
    pub fn with_limits(capacity: u64, k_max: u64) -> MemLogDrive {
        MemLogDrive {
            state: Mutex::new(MemState {
                capacity,
                k_max,
                ..MemState::default()
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, MemState> {
        // A panic while the lock was held left a state every check still holds for (each
        // operation changes it in one step), so a poisoned lock is taken as it is.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Takes the replica down (`Some(reason)`: every operation fails with `Io { reason }`)
    /// or brings it back (`None`) with what it held.
    pub fn set_down(&self, reason: Option<&str>) {
        self.lock().down = reason.map(str::to_owned);
    }

    /// Whether the replica is down.
    pub fn is_down(&self) -> bool {
        self.lock().down.is_some()
    }

    /// Damages the value at `address` (it reads `Damaged` until the same bytes are written
    /// again); false when nothing is written there.
    pub fn damage(&self, address: u64) -> bool {
        match self.lock().slots.get_mut(&address) {
            Some(slot) => {
                slot.damaged = true;
                true
            }
            None => false,
        }
    }

    /// Forgets the value at `address`, as a replica that never kept an unacknowledged
    /// write; false when nothing was written there. (Forgetting an acknowledged value is a
    /// lying drive: the tests that do it say so.)
    pub fn forget(&self, address: u64) -> bool {
        self.lock().slots.remove(&address).is_some()
    }

    /// Whether a value (intact or damaged) is written at `address`.
    pub fn holds(&self, address: u64) -> bool {
        self.lock().slots.contains_key(&address)
    }

    /// The written addresses and their bytes (damaged ones included), for a test's checks.
    pub fn contents(&self) -> BTreeMap<u64, Bytes> {
        let state = self.lock();
        state
            .slots
            .iter()
            .map(|(address, slot)| (*address, slot.bytes.clone()))
            .collect()
    }

    /// Runs one operation against the state, unless the replica is down.
    fn run<T: Send + 'static>(
        &self,
        op: impl FnOnce(&mut MemState) -> Result<T, LogDriveError>,
    ) -> OpFuture<T> {
        let mut state = self.lock();
        if let Some(reason) = &state.down {
            return ready(Err(LogDriveError::Io {
                reason: reason.clone(),
            }));
        }
        ready(op(&mut state))
    }
}

impl MemState {
    fn out_of_range(&self, address: u64) -> LogDriveError {
        LogDriveError::OutOfRange {
            address,
            valid: self.first..self.capacity,
        }
    }

    /// N: one past the highest written address, and never below the trim point.
    fn n(&self) -> u64 {
        let highest = self
            .slots
            .keys()
            .next_back()
            .map_or(0, |address| address + 1);
        highest.max(self.first)
    }

    /// T: the first unwritten address at or past the trim point.
    fn t(&self) -> u64 {
        let mut t = self.first;
        for address in self.slots.range(self.first..).map(|(address, _)| *address) {
            if address != t {
                break;
            }
            t += 1;
        }
        t
    }

    fn write(&mut self, address: u64, epoch: u64, payload: Bytes) -> Result<(), LogDriveError> {
        if address >= self.capacity {
            return Err(self.out_of_range(address));
        }
        if epoch < self.fence {
            return Err(LogDriveError::Fenced {
                current: self.fence,
            });
        }
        if let Some(length) = self.sealed.filter(|length| address >= *length) {
            return Err(LogDriveError::Sealed { length });
        }
        if address < self.first {
            return Err(self.out_of_range(address));
        }
        match self.slots.get_mut(&address) {
            None => {
                let slot = MemSlot {
                    bytes: payload,
                    damaged: false,
                };
                self.slots.insert(address, slot);
                Ok(())
            }
            Some(slot) if slot.bytes != payload => Err(LogDriveError::Conflict { address }),
            Some(slot) => {
                // The same bytes again: a no-op, or the repair of a damaged slot.
                slot.damaged = false;
                Ok(())
            }
        }
    }

    fn read(&self, address: u64) -> Result<ReadOutcome, LogDriveError> {
        if address >= self.capacity {
            return Err(self.out_of_range(address));
        }
        if address < self.first {
            return Ok(ReadOutcome::Trimmed { first: self.first });
        }
        Ok(match self.slots.get(&address) {
            None => ReadOutcome::Unwritten,
            Some(slot) if slot.damaged => ReadOutcome::Damaged,
            Some(slot) => ReadOutcome::Value(slot.bytes.clone()),
        })
    }

    fn weak_tail(&self, k: u64) -> Result<TailDesc, LogDriveError> {
        if k > self.k_max {
            return Err(LogDriveError::InvalidWindow { k, max: self.k_max });
        }
        let n = self.n();
        let window_start = n.saturating_sub(k).max(self.first);
        let holes = (window_start..n)
            .filter(|address| !self.slots.contains_key(address))
            .collect::<BTreeSet<u64>>();
        Ok(TailDesc {
            n,
            holes,
            holes_below_window: self.t() < window_start,
        })
    }

    fn seal(&mut self, length: u64, epoch: u64) -> Result<(), LogDriveError> {
        if epoch < self.fence {
            return Err(LogDriveError::Fenced {
                current: self.fence,
            });
        }
        match self.sealed {
            Some(sealed) if sealed == length => Ok(()),
            Some(sealed) => Err(LogDriveError::Sealed { length: sealed }),
            None if length > self.capacity || length < self.first => {
                Err(LogDriveError::OutOfRange {
                    address: length,
                    valid: self.first..self.capacity.saturating_add(1),
                })
            }
            None => {
                self.sealed = Some(length);
                self.slots.split_off(&length);
                Ok(())
            }
        }
    }

    fn fence(&mut self, epoch: u64) -> Result<(), LogDriveError> {
        if epoch < self.fence {
            return Err(LogDriveError::Fenced {
                current: self.fence,
            });
        }
        self.fence = epoch;
        Ok(())
    }

    fn trim(&mut self, upto: u64) -> Result<(), LogDriveError> {
        let n = self
            .n()
            .min(self.sealed.unwrap_or(u64::MAX))
            .max(self.first);
        if upto > n {
            return Err(LogDriveError::OutOfRange {
                address: upto,
                valid: 0..n + 1,
            });
        }
        if upto > self.first {
            self.slots = self.slots.split_off(&upto);
            self.first = upto;
        }
        Ok(())
    }

    fn length(&self) -> Length {
        Length {
            n: self.n(),
            t: self.t(),
            sealed: self.sealed,
            fence: self.fence,
            first: self.first,
        }
    }
}

impl LogDrive for MemLogDrive {
    fn write(&self, address: u64, epoch: u64, payload: Bytes) -> OpFuture<()> {
        self.run(|state| state.write(address, epoch, payload))
    }

    fn read(&self, address: u64) -> OpFuture<ReadOutcome> {
        self.run(|state| state.read(address))
    }

    fn weak_tail(&self, k: u64) -> OpFuture<TailDesc> {
        self.run(|state| state.weak_tail(k))
    }

    fn seal(&self, length: u64, epoch: u64) -> OpFuture<()> {
        self.run(|state| state.seal(length, epoch))
    }

    fn fence(&self, epoch: u64) -> OpFuture<()> {
        self.run(|state| state.fence(epoch))
    }

    fn trim(&self, upto: u64) -> OpFuture<()> {
        self.run(|state| state.trim(upto))
    }

    fn length(&self) -> OpFuture<Length> {
        self.run(|state| Ok(state.length()))
    }

    fn write_window_max(&self) -> u64 {
        self.lock().k_max
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wait;

    fn value(byte: u8) -> Bytes {
        Bytes::from(vec![byte; 8])
    }

    #[test]
    fn the_window_scan_matches_ld_1() {
        let drive = MemLogDrive::new();
        for address in [0, 1, 2, 4, 6] {
            wait(drive.write(address, 0, value(address as u8))).unwrap();
        }
        let tail = wait(drive.weak_tail(4)).unwrap();
        assert_eq!((tail.n, tail.t()), (7, 3));
        assert_eq!(tail.holes, BTreeSet::from([3, 5]));
        assert!(!tail.holes_below_window);
        let narrow = wait(drive.weak_tail(2)).unwrap();
        assert!(narrow.holes_below_window);
        assert_eq!(wait(drive.read(3)).unwrap(), ReadOutcome::Unwritten);
    }

    #[test]
    fn a_rewrite_is_idempotent_and_other_bytes_conflict() {
        let drive = MemLogDrive::new();
        wait(drive.write(5, 0, value(1))).unwrap();
        wait(drive.write(5, 0, value(1))).unwrap();
        let conflict = wait(drive.write(5, 0, value(2))).unwrap_err();
        assert_eq!(conflict, LogDriveError::Conflict { address: 5 });
        assert_eq!(wait(drive.read(5)).unwrap(), ReadOutcome::Value(value(1)));
    }

    #[test]
    fn seal_fence_and_trim_refuse_what_they_should() {
        let drive = MemLogDrive::new();
        for address in 0..6 {
            wait(drive.write(address, 1, value(address as u8))).unwrap();
        }
        wait(drive.fence(3)).unwrap();
        let fenced = wait(drive.write(6, 2, value(6))).unwrap_err();
        assert_eq!(fenced, LogDriveError::Fenced { current: 3 });
        assert!(matches!(
            wait(drive.seal(4, 2)),
            Err(LogDriveError::Fenced { .. })
        ));
        wait(drive.seal(4, 3)).unwrap();
        wait(drive.seal(4, 3)).unwrap();
        assert_eq!(wait(drive.read(4)).unwrap(), ReadOutcome::Unwritten);
        assert_eq!(
            wait(drive.seal(5, 3)).unwrap_err(),
            LogDriveError::Sealed { length: 4 }
        );
        wait(drive.trim(2)).unwrap();
        assert_eq!(
            wait(drive.read(1)).unwrap(),
            ReadOutcome::Trimmed { first: 2 }
        );
        let length = wait(drive.length()).unwrap();
        assert_eq!((length.n, length.t, length.sealed), (4, 4, Some(4)));
        assert_eq!((length.fence, length.first), (3, 2));
    }

    #[test]
    fn a_damaged_slot_is_written_for_weak_tail_and_repaired_by_its_bytes() {
        let drive = MemLogDrive::new();
        wait(drive.write(0, 0, value(7))).unwrap();
        assert!(drive.damage(0));
        assert_eq!(wait(drive.read(0)).unwrap(), ReadOutcome::Damaged);
        assert_eq!(wait(drive.weak_tail(4)).unwrap().t(), 1);
        assert!(wait(drive.write(0, 0, value(8))).is_err());
        wait(drive.write(0, 0, value(7))).unwrap();
        assert_eq!(wait(drive.read(0)).unwrap(), ReadOutcome::Value(value(7)));
    }

    #[test]
    fn a_down_replica_fails_every_operation_and_keeps_its_state() {
        let drive = MemLogDrive::new();
        wait(drive.write(0, 0, value(1))).unwrap();
        drive.set_down(Some("unplugged"));
        assert!(!wait(drive.read(0)).unwrap_err().is_definite());
        drive.set_down(None);
        assert_eq!(wait(drive.read(0)).unwrap(), ReadOutcome::Value(value(1)));
    }
}
