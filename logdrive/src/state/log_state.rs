//! [`LogState`]: one LogDrive's state, and on it the write path (checking, queueing and
//! completing writes), reads and the tails. The control path, damage and suspects, and what
//! replay and relocation apply are `impl LogState` blocks in sibling modules.

use std::collections::BTreeSet;

use crate::api::{Length, LogDriveError, TailDesc};
use crate::index::{Needed, Slot, SlotIndex};
use crate::record::RECORD_HEADER_BYTES;

use super::kinds::{slot_len, Lookup, WriteCheck};
use super::parts::{Durable, Holders, Suspect, Unprocessed};

/// One LogDrive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LogState {
    pub(crate) id: u64,
    pub(crate) generation: u64,
    pub(crate) capacity: u64,
    /// The seal, fence and trim point as queued: what new records are checked against.
    pub(crate) sealed: Option<u64>,
    pub(crate) fence: u64,
    pub(crate) first: u64,
    /// The same as durable: what reads and tails answer.
    pub(crate) durable: Durable,
    pub(crate) deleted: bool,
    pub(crate) holders: Holders,
    pub(crate) slots: SlotIndex,
    /// Every address below it is acknowledged (or trimmed): where T's search starts.
    pub(crate) contiguous: u64,
    /// The ring bytes of the acknowledged records the slots name.
    pub(crate) slot_bytes: u64,
    /// The ring bytes of the records queued for slots none of whose records is known
    /// acknowledged yet (they will be live: counted so that a burst of writes in flight does
    /// not look like garbage).
    pub(crate) pending_bytes: u64,
    pub(crate) suspects: Vec<Suspect>,
    /// Rewrites acknowledged while the first write of their address was in flight, by
    /// address and LSN (rarely any). The value is the first write's when it was written (its
    /// record comes first in the log, and replay keeps the first), so a rewrite's record does
    /// not name the slot until that write's outcome is in: then it does only if that write
    /// failed. (Naming whichever outcome came in first made the slot name a rewrite with
    /// other bytes and the same CRC, which replay would not.)
    pub(crate) rewrites: Vec<(u64, u64)>,
    /// The needed records by LSN.
    pub(crate) needed: Needed,
    /// For each record queued whose outcome is not yet taken in, the drive's next LSN when
    /// it was queued (a bound below its LSN): the least bounds every such record.
    pub(crate) unprocessed: Unprocessed,
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
            durable: Durable::default(),
            deleted: false,
            holders: Holders::default(),
            slots: SlotIndex::default(),
            contiguous: 0,
            slot_bytes: 0,
            pending_bytes: 0,
            suspects: Vec::new(),
            rewrites: Vec::new(),
            needed: Needed::default(),
            unprocessed: Unprocessed::default(),
        }
    }

    pub(crate) fn missing(&self) -> LogDriveError {
        LogDriveError::Missing {
            id: self.id,
            generation: self.generation,
        }
    }

    pub(crate) fn out_of_range(&self, address: u64) -> LogDriveError {
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

    /// Checks a write of a value whose CRC and length are `crc` and `len`.
    pub fn check_write(
        &self,
        address: u64,
        epoch: u64,
        (crc, len): (u32, u64),
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
        match self.slots.get(address) {
            None => Ok(WriteCheck::Append),
            Some(slot) if slot.crc != crc || slot.len != slot_len(len) => {
                Err(LogDriveError::Conflict { address })
            }
            Some(Slot { damaged: true, .. }) => Ok(WriteCheck::Append),
            Some(Slot { lsn: Some(lsn), .. }) => Ok(WriteCheck::Durable(*lsn)),
            // A CRC32C is no proof of equality (a value can be crafted to another's CRC):
            // the bytes are compared once the first write's record is acknowledged.
            Some(_) => Ok(WriteCheck::Pending),
        }
    }

    /// A write's record queued.
    pub fn queue_write(&mut self, address: u64, crc: u32, len: u64) {
        let slot = self.slots.get_or_insert_with(address, || {
            let slot = Slot {
                lsn: None,
                crc,
                len: slot_len(len),
                pending: 0,
                damaged: false,
            };
            self.pending_bytes += slot.bytes();
            slot
        });
        slot.pending += 1;
    }

    /// A queued write's record completed: acknowledged at `lsn`, or not written (`None`);
    /// `rewrite` when it was queued while the address's first write was in flight.
    pub fn complete_write(&mut self, address: u64, lsn: Option<u64>, rewrite: bool) {
        // A seal below it (or a trim above it) dropped the slot: replay drops it too.
        let Some(slot) = self.slots.get_mut(address) else {
            return;
        };
        slot.pending = slot.pending.saturating_sub(1);
        match lsn {
            Some(lsn) if slot.damaged => {
                // The repair: the value is whole again, in its new record.
                self.slot_bytes -= slot.bytes();
                slot.damaged = false;
                self.needed.moved(slot.lsn, Some(lsn));
                slot.lsn = Some(lsn);
                self.slot_bytes += slot.bytes();
            }
            Some(lsn) if rewrite && slot.lsn.is_none() && slot.pending > 0 => {
                self.rewrites.push((address, lsn));
            }
            // Once the slot names a record, that stays its record: relocation may already
            // have judged every other record of the value garbage (a rewrite, or the
            // original a relocated copy took over from) and trimmed it.
            Some(lsn) if slot.lsn.is_none() => self.name_slot(address, lsn),
            Some(_) => {}
            None if slot.pending == 0 && !slot.acknowledged() => {
                // The first write failed: the first rewrite acknowledged meanwhile holds
                // the value (replay meets it first now).
                let bytes = slot.bytes();
                match self.take_rewrites(address) {
                    Some(lsn) => self.name_slot(address, lsn),
                    None => {
                        self.pending_bytes -= bytes;
                        self.slots.remove(address);
                    }
                }
            }
            None => {}
        }
    }

    /// The slot at `address` names its first acknowledged record, at `lsn`.
    pub(crate) fn name_slot(&mut self, address: u64, lsn: u64) {
        let _ = self.take_rewrites(address);
        let Some(slot) = self.slots.get_mut(address) else {
            return;
        };
        slot.lsn = Some(lsn);
        self.needed.add(lsn);
        self.pending_bytes -= slot.bytes();
        self.slot_bytes += slot.bytes();
    }

    /// Forgets the rewrites kept aside at `address`: the first of them, if any.
    pub(crate) fn take_rewrites(&mut self, address: u64) -> Option<u64> {
        if self.rewrites.is_empty() {
            return None;
        }
        let mut first = None;
        self.rewrites.retain(|&(at, lsn)| {
            let keep = at != address;
            if !keep {
                first = Some(first.map_or(lsn, |earlier: u64| earlier.min(lsn)));
            }
            keep
        });
        first
    }

    /// The least LSN a record of this LogDrive whose outcome is not yet taken in may have
    /// (the drive's next LSN when the oldest of them was queued).
    pub fn unprocessed_floor(&self) -> Option<u64> {
        self.unprocessed.least()
    }

    /// Where a read of `address` goes.
    pub fn lookup(&self, address: u64) -> Result<Lookup, LogDriveError> {
        self.check_live()?;
        if address >= self.capacity {
            return Err(self.out_of_range(address));
        }
        if address < self.durable.first {
            return Ok(Lookup::Trimmed {
                first: self.durable.first,
            });
        }
        Ok(match self.slots.get(address) {
            Some(Slot {
                lsn: Some(_),
                damaged: true,
                ..
            }) => Lookup::Damaged,
            Some(Slot { lsn: Some(lsn), .. }) => Lookup::Record(*lsn),
            _ if self.suspected(address) => Lookup::Damaged,
            _ => Lookup::Unwritten,
        })
    }

    /// The value's record at `address` now, if the slot still holds this CRC and length
    /// (for a read or a comparison retried after relocation moved it).
    pub fn record_of(&self, address: u64) -> Option<u64> {
        self.slots
            .get(address)
            .filter(|slot| !slot.damaged)
            .and_then(|slot| slot.lsn)
    }

    pub(crate) fn acknowledged(&self, address: u64) -> bool {
        self.slots.get(address).is_some_and(Slot::acknowledged)
    }

    /// T: the first address at or past the trim point not acknowledged (a damaged slot is
    /// written: docs/logdrive.md, quarantine).
    pub fn contiguous_tail(&mut self) -> u64 {
        let mut t = self.contiguous.max(self.durable.first);
        while self.acknowledged(t) {
            t += 1;
        }
        self.contiguous = t;
        t
    }

    /// N: one past the highest acknowledged address (never below T).
    pub fn non_contiguous_tail(&mut self) -> u64 {
        let t = self.contiguous_tail();
        let last = self
            .slots
            .iter()
            .rev()
            .find(|(_, slot)| slot.acknowledged());
        last.map_or(t, |(address, _)| (address + 1).max(t))
    }

    /// weakTail(k) as the window scan (docs/logdrive.md): N exactly,
    /// the holes in [max(0, N - k), N), and whether any hole lies below that window (a
    /// replica that missed writes while it was down still answers; a quorum passes the same
    /// k to every replica and ignores what lies below N - k). At most O(k) work, whatever N:
    /// `k` above `k_max` is refused. A LogDrive with addresses that a header-less damaged
    /// record may have held cannot say where its tails are: `Damaged` until they are
    /// repaired or it is sealed.
    pub fn weak_tail(&mut self, k: u64, k_max: u64) -> Result<TailDesc, LogDriveError> {
        self.check_live()?;
        if k > k_max {
            return Err(LogDriveError::InvalidWindow { k, max: k_max });
        }
        if let Some(suspect) = self.open_suspects().next() {
            return Err(LogDriveError::Damaged {
                addresses: suspect.addresses.clone(),
            });
        }
        let t = self.contiguous_tail();
        let n = self.non_contiguous_tail();
        let window_start = n.saturating_sub(k);
        // Below T everything is written (or trimmed): the holes are [max(window, T), N) less
        // the acknowledged slots in it, one ordered pass over at most k addresses.
        let mut holes = BTreeSet::new();
        let mut next = window_start.max(t);
        for (address, slot) in self.slots.range(next..n) {
            if slot.acknowledged() {
                holes.extend(next..address);
                next = address + 1;
            }
        }
        holes.extend(next..n);
        Ok(TailDesc {
            n,
            holes,
            holes_below_window: t < window_start,
        })
    }

    /// The lengths a coordinator compares (as durable).
    pub fn length(&mut self) -> Result<Length, LogDriveError> {
        self.check_live()?;
        Ok(Length {
            n: self.non_contiguous_tail(),
            t: self.contiguous_tail(),
            sealed: self.durable.sealed,
            fence: self.durable.fence,
            first: self.durable.first,
        })
    }

    /// The ring bytes of the records this LogDrive needs: its values (headers included),
    /// acknowledged or on their way, and the records holding its control state.
    pub fn live_bytes(&self) -> u64 {
        self.slot_bytes + self.pending_bytes + RECORD_HEADER_BYTES * self.holders.count()
    }
}
