//! The control path of a LogDrive's state: checking, queueing and making durable seals,
//! fences and trims, the creation record held, the records queued and processed, and which
//! records the LogDrive still needs (what the reclaimer must carry forward).

use std::ops::Range;

use crate::api::LogDriveError;
use crate::index::Slot;
use crate::record::{Record, RecordType};

use super::kinds::{Check, Control};
use super::log_state::LogState;
use super::parts::Holders;

impl LogState {
    /// Checks a seal, fence or trim against the state as queued: refused, a change, the
    /// same as queued (written again, so that its acknowledgement means durable), or the
    /// same as durable (nothing to write).
    pub fn check_control(&mut self, control: Control) -> Result<Check, LogDriveError> {
        self.check_live()?;
        match control {
            Control::Seal { length, epoch } => self.check_seal(length, epoch),
            Control::Fence(epoch) => match epoch.cmp(&self.fence) {
                std::cmp::Ordering::Less => Err(LogDriveError::Fenced {
                    current: self.fence,
                }),
                std::cmp::Ordering::Equal if self.durable.fence >= epoch => Ok(Check::Done),
                std::cmp::Ordering::Equal => Ok(Check::Same),
                std::cmp::Ordering::Greater => Ok(Check::Apply),
            },
            Control::Trim(upto) => {
                // N as queued: a seal queued and not yet durable drops what lies at and past
                // its length before this trim applies (replay, in LSN order, applies it
                // first). A trim below N may pass holes: a replica that missed writes trims
                // with its group, and the holes it passes read as trimmed.
                let n = self.non_contiguous_tail();
                let n = n.min(self.sealed.unwrap_or(u64::MAX)).max(self.first);
                if upto > n {
                    return Err(LogDriveError::OutOfRange {
                        address: upto,
                        valid: 0..n + 1,
                    });
                }
                Ok(if upto <= self.durable.first {
                    Check::Done
                } else if upto <= self.first {
                    Check::Same
                } else {
                    Check::Apply
                })
            }
        }
    }

    /// A seal at `length` by a sealer of `epoch`: refused below the fence (a stale
    /// coordinator cannot seal after a newer one fenced), idempotent at the sealed length.
    pub(crate) fn check_seal(&self, length: u64, epoch: u64) -> Result<Check, LogDriveError> {
        if epoch < self.fence {
            return Err(LogDriveError::Fenced {
                current: self.fence,
            });
        }
        match self.sealed {
            Some(sealed) if sealed == length && self.durable.sealed == Some(length) => {
                Ok(Check::Done)
            }
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

    /// A checked control record queued: new records are checked against it from now on.
    pub fn queue_control(&mut self, control: Control) {
        match control {
            Control::Seal { length, .. } => self.sealed = Some(length),
            Control::Fence(epoch) => self.fence = self.fence.max(epoch),
            Control::Trim(upto) => self.first = self.first.max(upto),
        }
    }

    /// A control record that changed the state (or relocation's copy of one) is durable at
    /// `lsn`: reads see it, and the record holds it.
    pub fn durable_control(&mut self, control: Control, lsn: u64) {
        match control {
            Control::Seal { length, .. } => {
                if self.durable.sealed.is_some_and(|sealed| sealed != length) {
                    return;
                }
                self.durable.sealed = Some(length);
                self.drop_slots(length..u64::MAX);
                self.contiguous = self.contiguous.min(length);
                // A settled length: nothing past it can be asked for, nothing below it is
                // suspected any more (docs/logdrive.md, quarantine).
                for suspect in std::mem::take(&mut self.suspects) {
                    self.needed.remove(suspect.lsn);
                }
                let (before, after) = Holders::hold(&mut self.holders.seal, length, lsn);
                self.needed.moved(before, after);
            }
            Control::Fence(epoch) => {
                self.durable.fence = self.durable.fence.max(epoch);
                let (before, after) = Holders::hold(&mut self.holders.fence, epoch, lsn);
                self.needed.moved(before, after);
            }
            Control::Trim(upto) => {
                if upto > self.durable.first {
                    self.durable.first = upto;
                    self.drop_slots(0..upto);
                    self.contiguous = self.contiguous.max(upto);
                }
                let (before, after) = Holders::hold(&mut self.holders.trim, upto, lsn);
                self.needed.moved(before, after);
            }
        }
    }

    /// Drops what lies at or beyond the capacity (records replay met before the creation
    /// that fixed it; the live path never accepts them).
    pub fn confine_to_capacity(&mut self) {
        self.drop_slots(self.capacity..u64::MAX);
        let capacity = self.capacity;
        let needed = &mut self.needed;
        self.suspects.retain_mut(|suspect| {
            suspect.addresses.end = suspect.addresses.end.min(capacity);
            let keep = !suspect.addresses.is_empty();
            if !keep {
                needed.remove(suspect.lsn);
            }
            keep
        });
    }

    /// The creation's record is durable at `lsn` (the newer of two holds it).
    pub fn hold_create(&mut self, lsn: u64) {
        let (before, after) = self.holders.hold_create(lsn);
        self.needed.moved(before, after);
    }

    /// A record was queued when the drive's next LSN was `floor` (its LSN is no lower).
    pub fn queued_at(&mut self, floor: u64) {
        self.unprocessed.queued(floor);
    }

    /// The outcome of a record queued at `floor` is taken in.
    pub fn processed(&mut self, floor: u64) {
        self.unprocessed.processed(floor);
    }

    /// An LSN below which every record of this LogDrive that the state names (or will name
    /// once an outcome is taken in) is counted in [`Needed`]: the lowest floor of a record
    /// whose outcome is not yet taken in, and past that the first needed record.
    pub fn advance_bound(&self) -> Option<u64> {
        match (self.unprocessed.least(), self.needed.first_lsn()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    pub(crate) fn drop_slots(&mut self, addresses: Range<u64>) {
        for (_, slot) in self.slots.take_range(addresses.clone()) {
            if let Some(lsn) = slot.lsn {
                self.slot_bytes -= slot.bytes();
                self.needed.remove(lsn);
            } else {
                self.pending_bytes -= slot.bytes();
            }
        }
        if !self.rewrites.is_empty() {
            self.rewrites
                .retain(|(address, _)| !addresses.contains(address));
        }
    }

    /// Whether the durable record at `lsn` is one this LogDrive still needs: the record
    /// holding an address's value (or its damage), its creation, or the record holding its
    /// seal, fence or trim point, judged by what is known durable. A durable record whose
    /// completion is not yet taken in (its slot's LSN unknown, a newer value than the one
    /// known durable) is needed: once its completion is taken in, the state names it.
    /// `payload` gives the record's payload CRC and length, for a write whose slot names no
    /// record yet (the record at the slot's own LSN is its value: no CRC to compute).
    pub fn needs(&self, lsn: u64, record: &Record, payload: impl FnOnce() -> (u32, u32)) -> bool {
        if record.generation != self.generation {
            return false;
        }
        match record.record_type {
            RecordType::Write => match self.slots.get(record.value) {
                Some(slot) if slot.damaged => false,
                Some(Slot {
                    lsn: Some(held), ..
                }) => *held == lsn,
                Some(slot) => (slot.crc, slot.len) == payload(),
                None => false,
            },
            RecordType::Create => self.holders.create.is_none_or(|held| held == lsn),
            RecordType::Seal => Holders::needs(&self.holders.seal, record.value, lsn),
            RecordType::Fence => Holders::needs(&self.holders.fence, record.epoch, lsn),
            RecordType::Trim => Holders::needs(&self.holders.trim, record.value, lsn),
            RecordType::Damaged => self
                .slots
                .get(record.value)
                .is_some_and(|slot| slot.damaged && slot.lsn == Some(lsn)),
            RecordType::Suspect => self.open_suspects().any(|suspect| suspect.lsn == lsn),
            RecordType::Delete | RecordType::Generation => false,
        }
    }
}
