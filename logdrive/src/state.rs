//! One LogDrive's state and the decisions made on it: the address index (address to the LSN
//! of its record, with the payload's CRC32C and length for the write-once check), the seal,
//! the fence, the trim point and whether it was deleted. The live path checks a record here
//! before queueing it and applies it as it queues it; replay checks and applies the same
//! records in LSN order with the same functions, so it reaches the same decisions (it sees
//! every record the live path saw before each one, and only acknowledged slots count towards
//! T live, so replay's T is never smaller).

use std::collections::{BTreeMap, BTreeSet};

use crate::api::{Length, LogDriveError, TailDesc};
use crate::record::{Record, RecordType};

/// One written (or being written) address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Slot {
    /// The LSN of its first acknowledged record; `None` while no record is acknowledged.
    pub lsn: Option<u64>,
    /// The payload's CRC32C.
    pub crc: u32,
    /// The payload's length.
    pub len: u64,
    /// Records for it queued and not yet completed.
    pub pending: u32,
}

/// Whether a checked control record changes anything.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Check {
    /// It changes the state.
    Apply,
    /// The state already says so (idempotent).
    Same,
}

/// What a checked write does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WriteCheck {
    /// A new value: append it.
    Append,
    /// The same CRC and length as the acknowledged record at this LSN.
    Durable(u64),
    /// The same CRC and length as a record still in flight.
    Pending,
}

/// One LogDrive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LogState {
    pub id: u64,
    pub generation: u64,
    pub capacity: u64,
    pub sealed: Option<u64>,
    pub fence: u64,
    pub first: u64,
    pub deleted: bool,
    slots: BTreeMap<u64, Slot>,
    /// Every address below it is acknowledged (or trimmed): where T's search starts.
    contiguous: u64,
}

impl LogState {
    /// A LogDrive just created.
    pub fn new(id: u64, generation: u64, capacity: u64) -> LogState {
        LogState {
            id,
            generation,
            capacity,
            sealed: None,
            fence: 0,
            first: 0,
            deleted: false,
            slots: BTreeMap::new(),
            contiguous: 0,
        }
    }

    fn missing(&self) -> LogDriveError {
        LogDriveError::Missing {
            id: self.id,
            generation: self.generation,
        }
    }

    fn out_of_range(&self, address: u64) -> LogDriveError {
        let end = self.sealed.unwrap_or(self.capacity);
        LogDriveError::OutOfRange {
            address,
            valid: self.first..end.max(self.first),
        }
    }

    /// Deleted LogDrives answer nothing.
    pub fn check_live(&self) -> Result<(), LogDriveError> {
        if self.deleted {
            return Err(self.missing());
        }
        Ok(())
    }

    /// Checks a write of a payload with this CRC and length.
    pub fn check_write(
        &self,
        address: u64,
        epoch: u64,
        crc: u32,
        len: u64,
    ) -> Result<WriteCheck, LogDriveError> {
        self.check_live()?;
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
        match self.slots.get(&address) {
            None => Ok(WriteCheck::Append),
            Some(slot) if slot.crc != crc || slot.len != len => {
                Err(LogDriveError::Conflict { address })
            }
            Some(Slot { lsn: Some(lsn), .. }) => Ok(WriteCheck::Durable(*lsn)),
            Some(_) => Ok(WriteCheck::Pending),
        }
    }

    /// A write's record queued.
    pub fn queue_write(&mut self, address: u64, crc: u32, len: u64) {
        let slot = self.slots.entry(address).or_insert(Slot {
            lsn: None,
            crc,
            len,
            pending: 0,
        });
        slot.pending += 1;
    }

    /// A queued write's record completed: acknowledged at `lsn`, or not written (`None`).
    pub fn complete_write(&mut self, address: u64, lsn: Option<u64>) {
        // A seal below it (or a deletion) dropped the slot: replay drops it too.
        let Some(slot) = self.slots.get_mut(&address) else {
            return;
        };
        slot.pending = slot.pending.saturating_sub(1);
        match lsn {
            Some(lsn) => slot.lsn = Some(slot.lsn.map_or(lsn, |first| first.min(lsn))),
            None if slot.pending == 0 && slot.lsn.is_none() => {
                self.slots.remove(&address);
            }
            None => {}
        }
    }

    /// A write found in replay, acknowledged at `lsn`: whether it took effect (a rewrite of
    /// the same bytes, or a write the live path would have refused, does not).
    pub fn replay_write(&mut self, address: u64, epoch: u64, lsn: u64, crc: u32, len: u64) -> bool {
        if self.check_write(address, epoch, crc, len) != Ok(WriteCheck::Append) {
            return false;
        }
        self.queue_write(address, crc, len);
        self.complete_write(address, Some(lsn));
        true
    }

    /// The acknowledged slot at `address`, for a read.
    pub fn lookup(&self, address: u64) -> Result<Option<u64>, LogDriveError> {
        self.check_live()?;
        if address >= self.capacity {
            return Err(self.out_of_range(address));
        }
        Ok(self.slots.get(&address).and_then(|slot| slot.lsn))
    }

    /// Checks a seal at `length`.
    pub fn check_seal(&self, length: u64) -> Result<Check, LogDriveError> {
        self.check_live()?;
        match self.sealed {
            Some(sealed) if sealed == length => Ok(Check::Same),
            Some(sealed) => Err(LogDriveError::Sealed { length: sealed }),
            None if length > self.capacity || length < self.first => {
                Err(LogDriveError::OutOfRange {
                    address: length,
                    valid: self.first..self.capacity.saturating_add(1),
                })
            }
            None => Ok(Check::Apply),
        }
    }

    /// Seals at `length`, dropping what is held at and beyond it.
    pub fn apply_seal(&mut self, length: u64) {
        self.sealed = Some(length);
        self.slots.split_off(&length);
        self.contiguous = self.contiguous.min(length);
    }

    /// Checks a fence at `epoch`.
    pub fn check_fence(&self, epoch: u64) -> Result<Check, LogDriveError> {
        self.check_live()?;
        match epoch.cmp(&self.fence) {
            std::cmp::Ordering::Less => Err(LogDriveError::Fenced {
                current: self.fence,
            }),
            std::cmp::Ordering::Equal => Ok(Check::Same),
            std::cmp::Ordering::Greater => Ok(Check::Apply),
        }
    }

    /// Fences at `epoch`.
    pub fn apply_fence(&mut self, epoch: u64) {
        self.fence = epoch;
    }

    /// Checks a trim to `upto` (the first address kept): allowed only at or below T.
    pub fn check_trim(&mut self, upto: u64) -> Result<Check, LogDriveError> {
        self.check_live()?;
        let t = self.contiguous_tail();
        if upto > t {
            return Err(LogDriveError::OutOfRange {
                address: upto,
                valid: 0..t + 1,
            });
        }
        Ok(if upto <= self.first {
            Check::Same
        } else {
            Check::Apply
        })
    }

    /// Trims every address below `upto`.
    pub fn apply_trim(&mut self, upto: u64) {
        self.first = upto;
        self.slots = self.slots.split_off(&upto);
        self.contiguous = self.contiguous.max(upto);
    }

    fn acknowledged(&self, address: u64) -> bool {
        self.slots
            .get(&address)
            .is_some_and(|slot| slot.lsn.is_some())
    }

    /// T: the first address at or past the trim point not acknowledged.
    pub fn contiguous_tail(&mut self) -> u64 {
        let mut t = self.contiguous.max(self.first);
        while self.acknowledged(t) {
            t += 1;
        }
        self.contiguous = t;
        t
    }

    /// N: one past the highest acknowledged address (never below T).
    pub fn non_contiguous_tail(&mut self) -> u64 {
        let t = self.contiguous_tail();
        let last = self.slots.iter().rev().find(|(_, slot)| slot.lsn.is_some());
        last.map_or(t, |(address, _)| (address + 1).max(t))
    }

    /// weakTail(k), exactly, from the index.
    pub fn weak_tail(&mut self, k: u64) -> Result<TailDesc, LogDriveError> {
        self.check_live()?;
        let t = self.contiguous_tail();
        let n = self.non_contiguous_tail();
        if n - t > k {
            return Err(LogDriveError::WindowViolated { n, t, k });
        }
        let holes: BTreeSet<u64> = (t..n).filter(|a| !self.acknowledged(*a)).collect();
        Ok(TailDesc { n, holes })
    }

    /// The lengths a coordinator compares.
    pub fn length(&mut self) -> Result<Length, LogDriveError> {
        self.check_live()?;
        Ok(Length {
            n: self.non_contiguous_tail(),
            t: self.contiguous_tail(),
            sealed: self.sealed,
            fence: self.fence,
            first: self.first,
        })
    }
}

/// A seal, fence or trim.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Control {
    Seal(u64),
    Fence(u64),
    Trim(u64),
}

impl Control {
    pub fn check(self, state: &mut LogState) -> Result<Check, LogDriveError> {
        match self {
            Control::Seal(length) => state.check_seal(length),
            Control::Fence(epoch) => state.check_fence(epoch),
            Control::Trim(upto) => state.check_trim(upto),
        }
    }

    pub fn apply(self, state: &mut LogState) {
        match self {
            Control::Seal(length) => state.apply_seal(length),
            Control::Fence(epoch) => state.apply_fence(epoch),
            Control::Trim(upto) => state.apply_trim(upto),
        }
    }

    pub fn record(self, id: u64, generation: u64) -> Record {
        let (record_type, value, epoch) = match self {
            Control::Seal(length) => (RecordType::Seal, length, 0),
            Control::Fence(epoch) => (RecordType::Fence, 0, epoch),
            Control::Trim(upto) => (RecordType::Trim, upto, 0),
        };
        Record {
            record_type,
            id,
            generation,
            value,
            epoch,
        }
    }
}
