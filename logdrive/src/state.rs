//! One LogDrive's state and the decisions made on it: the address index (address to the LSN
//! of the record holding its value, with the payload's CRC32C and length for the write-once
//! check), the seal, the fence, the trim point, whether it was deleted, the LSNs of the
//! records that hold its control state (what relocation must carry forward), and what a
//! quarantined open found damaged.
//!
//! The control state is kept twice. As *queued* it is what every new record is checked
//! against, from the moment a seal, fence or trim is queued: the records of one LogDrive take
//! LSNs in the order they were checked, so no write checked against an old fence or seal lands
//! after the new one. As *durable* it is what reads, weak_tail and length answer: a seal drops
//! what is held at and beyond it, and a trim what is below it, only once its record is
//! durable, so a value read before a crash never reads as unwritten (or trimmed) and then as
//! the value again because the crash lost the seal that hid it.
//!
//! The live path checks a record here before queueing it and applies it as it queues it;
//! replay checks and applies the same records in LSN order with the same functions, so it
//! reaches the same decisions (it sees every record the live path saw before each one, and
//! only acknowledged slots count towards T live, so replay's T is never smaller). Relocated
//! copies are applied as the state they restore ([`crate::record`]).

use std::collections::{BTreeSet, VecDeque};
use std::ops::Range;

use crate::api::{Length, LogDriveError, TailDesc};
use crate::index::{Needed, Slot, SlotIndex};
use crate::record::{Record, RecordType, RECORD_HEADER_BYTES};

/// The length a slot records for a payload (an over-long payload is refused by the engine
/// before it is queued; saturating keeps the write-once comparison exact below that).
pub(crate) fn slot_len(len: u64) -> u32 {
    u32::try_from(len).unwrap_or(u32::MAX)
}

/// Whether a checked control record changes anything.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Check {
    /// It changes the state.
    Apply,
    /// The state as queued already says so, not yet durably: written again, so that its
    /// acknowledgement means durable.
    Same,
    /// The state as durable already says so: nothing to write.
    Done,
}

/// What a checked write does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WriteCheck {
    /// A new value, or the repair of a damaged one: append it.
    Append,
    /// The same CRC and length as the acknowledged record at this LSN.
    Durable(u64),
    /// The same CRC and length as the first write at this address, still in flight:
    /// written too (a rewrite), and compared byte for byte with the value once durable.
    Pending,
}

/// Where a read goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lookup {
    /// Below the (durable) trim point.
    Trimmed { first: u64 },
    /// Nothing acknowledged there.
    Unwritten,
    /// Written, and its record damaged (or possibly held by a damaged record).
    Damaged,
    /// The value is in the record at this LSN.
    Record(u64),
}

/// A seal (at a length, by a sealer of an epoch), fence or trim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Control {
    Seal { length: u64, epoch: u64 },
    Fence(u64),
    Trim(u64),
}

impl Control {
    /// The record that carries it.
    pub fn record(self, id: u64, generation: u64) -> Record {
        match self {
            Control::Seal { length, epoch } => {
                Record::new(RecordType::Seal, id, generation, length, epoch)
            }
            Control::Fence(epoch) => Record::new(RecordType::Fence, id, generation, 0, epoch),
            Control::Trim(upto) => Record::new(RecordType::Trim, id, generation, upto, 0),
        }
    }

    /// The control a record carries, if it is one.
    pub fn of(record: &Record) -> Option<Control> {
        match record.record_type {
            RecordType::Seal => Some(Control::Seal {
                length: record.value,
                epoch: record.epoch,
            }),
            RecordType::Fence => Some(Control::Fence(record.epoch)),
            RecordType::Trim => Some(Control::Trim(record.value)),
            _ => None,
        }
    }
}

/// The floors of the records queued whose outcomes are not yet taken in (the drive's next
/// LSN when each was queued), counted, in order: the least bounds the LSN of every record
/// the state does not yet know the place of.
///
/// A deque rather than an ordered map, because this is touched twice per write: a
/// LogDrive's records are queued under its mutex and the drive's next LSN only grows, so
/// floors arrive in order and join the back, and outcomes are taken in roughly in LSN order,
/// so the floor they end is found near the front by a binary search. An entry whose count
/// reaches zero inside the deque stays (with count zero) until the front reaches it: the
/// front always has a count, so it is the least floor.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Unprocessed(VecDeque<(u64, u32)>);

impl Unprocessed {
    /// A record queued at `floor`.
    fn queued(&mut self, floor: u64) {
        match self.0.back_mut() {
            Some((back, count)) if *back == floor => *count += 1,
            Some((back, _)) if *back > floor => {
                // Out of order (no caller does this today): kept sorted all the same.
                match self.0.binary_search_by_key(&floor, |(at, _)| *at) {
                    Ok(index) => self.0[index].1 += 1,
                    Err(index) => self.0.insert(index, (floor, 1)),
                }
            }
            _ => self.0.push_back((floor, 1)),
        }
    }

    /// The outcome of a record queued at `floor` is taken in.
    fn processed(&mut self, floor: u64) {
        // Most outcomes end the oldest floor: no search for those.
        let found = match self.0.front() {
            Some((front, _)) if *front == floor => Ok(0),
            _ => self.0.binary_search_by_key(&floor, |(at, _)| *at),
        };
        let Ok(index) = found else {
            debug_assert!(false, "no record queued at {floor}");
            return;
        };
        let count = &mut self.0[index].1;
        debug_assert!(*count > 0, "no record left queued at {floor}");
        *count = count.saturating_sub(1);
        while self.0.front().is_some_and(|(_, count)| *count == 0) {
            self.0.pop_front();
        }
    }

    /// The least floor of a record whose outcome is not yet taken in.
    fn least(&self) -> Option<u64> {
        self.0.front().map(|(floor, _)| *floor)
    }
}

/// The records that hold a LogDrive's control state: what relocation carries forward before
/// the ring's head may pass them. Each is the value with the LSN of its newest durable
/// record (a relocated copy takes over from the record it copies); `None` while no record of
/// it is known durable.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Holders {
    /// The creation's record.
    pub create: Option<u64>,
    pub seal: Option<Held>,
    pub fence: Option<Held>,
    pub trim: Option<Held>,
}

/// A control value and the LSN of the record that holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Held {
    pub value: u64,
    pub lsn: u64,
}

impl Holders {
    fn count(&self) -> u64 {
        let controls = [self.seal, self.fence, self.trim];
        let held = controls.iter().filter(|held| held.is_some()).count();
        held as u64 + u64::from(self.create.is_some())
    }

    /// The record at `lsn` holding `value` is durable: it holds the state if its value is
    /// newer (values only grow), or, for the same value, if it is the newer record. The
    /// holder's LSN before and after.
    fn hold(holder: &mut Option<Held>, value: u64, lsn: u64) -> (Option<u64>, Option<u64>) {
        let before = holder.map(|held| held.lsn);
        match holder {
            Some(held) if held.value > value => {}
            Some(held) if held.value == value => held.lsn = held.lsn.max(lsn),
            _ => *holder = Some(Held { value, lsn }),
        }
        (before, holder.map(|held| held.lsn))
    }

    /// Whether the durable record at `lsn` carrying `value` must be kept: it holds the
    /// state, or carries a newer value than the one known durable (its completion not yet
    /// taken in, so that the state's own record is not yet known).
    fn needs(holder: &Option<Held>, value: u64, lsn: u64) -> bool {
        match holder {
            None => true,
            Some(held) => value > held.value || (value == held.value && lsn == held.lsn),
        }
    }

    /// The creation's record is durable at `lsn` (the newer of two holds it): the holder's
    /// LSN before and after.
    fn hold_create(&mut self, lsn: u64) -> (Option<u64>, Option<u64>) {
        let before = self.create;
        self.create = Some(self.create.map_or(lsn, |held| held.max(lsn)));
        (before, self.create)
    }
}

/// A range of addresses a damaged record whose header is gone may have held (quarantine):
/// its unwritten addresses read as `Damaged` until written (repaired) or the LogDrive is
/// sealed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Suspect {
    /// The addresses.
    pub addresses: Range<u64>,
    /// The LSN of the damage (or of the relocated record carrying it forward).
    pub lsn: u64,
}

/// The control state as durable.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Durable {
    sealed: Option<u64>,
    fence: u64,
    first: u64,
}

/// One LogDrive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LogState {
    pub id: u64,
    pub generation: u64,
    pub capacity: u64,
    /// The seal, fence and trim point as queued: what new records are checked against.
    pub sealed: Option<u64>,
    pub fence: u64,
    pub first: u64,
    /// The same as durable: what reads and tails answer.
    durable: Durable,
    pub deleted: bool,
    pub holders: Holders,
    slots: SlotIndex,
    /// Every address below it is acknowledged (or trimmed): where T's search starts.
    contiguous: u64,
    /// The ring bytes of the acknowledged records the slots name.
    slot_bytes: u64,
    /// The ring bytes of the records queued for slots none of whose records is known
    /// acknowledged yet (they will be live: counted so that a burst of writes in flight does
    /// not look like garbage).
    pending_bytes: u64,
    suspects: Vec<Suspect>,
    /// Rewrites acknowledged while the first write of their address was in flight, by
    /// address and LSN (rarely any). The value is the first write's when it was written (its
    /// record comes first in the log, and replay keeps the first), so a rewrite's record does
    /// not name the slot until that write's outcome is in: then it does only if that write
    /// failed. (Naming whichever outcome came in first made the slot name a rewrite with
    /// other bytes and the same CRC, which replay would not.)
    rewrites: Vec<(u64, u64)>,
    /// The needed records by LSN.
    needed: Needed,
    /// For each record queued whose outcome is not yet taken in, the drive's next LSN when
    /// it was queued (a bound below its LSN): the least bounds every such record.
    unprocessed: Unprocessed,
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
    fn name_slot(&mut self, address: u64, lsn: u64) {
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
    fn take_rewrites(&mut self, address: u64) -> Option<u64> {
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

    /// A write found in replay, acknowledged at `lsn`: whether it took effect (a rewrite of
    /// the same bytes, or a write the live path would have refused, does not).
    pub fn replay_write(
        &mut self,
        (address, epoch): (u64, u64),
        lsn: u64,
        crc: u32,
        payload: &[u8],
    ) -> bool {
        let len = payload.len() as u64;
        if self.check_write(address, epoch, (crc, len)) != Ok(WriteCheck::Append) {
            return false;
        }
        self.queue_write(address, crc, len);
        self.complete_write(address, Some(lsn), false);
        true
    }

    /// Whether a relocated copy of the write at `address` still belongs: the LogDrive holds
    /// the address (not trimmed, not sealed off) with this value or none.
    fn takes_copy(&self, address: u64, crc: u32, len: u32) -> bool {
        let inside = address < self.capacity
            && address >= self.first
            && self.sealed.is_none_or(|length| address < length);
        let same = self
            .slots
            .get(address)
            .is_none_or(|slot| slot.crc == crc && slot.len == len);
        !self.deleted && inside && same
    }

    /// A relocated copy of a write found in replay at `lsn`: the value, now held there.
    pub fn replay_relocated_write(&mut self, address: u64, lsn: u64, crc: u32, len: u64) -> bool {
        let len = slot_len(len);
        if !self.takes_copy(address, crc, len) {
            return false;
        }
        let slot = self.slots.get_or_insert_with(address, || {
            let slot = Slot {
                lsn: None,
                crc,
                len,
                pending: 0,
                damaged: false,
            };
            self.pending_bytes += slot.bytes();
            slot
        });
        if slot.acknowledged() {
            self.slot_bytes -= slot.bytes();
        } else {
            self.pending_bytes -= slot.bytes();
        }
        self.needed.moved(slot.lsn, Some(lsn));
        slot.lsn = Some(lsn);
        slot.damaged = false;
        self.slot_bytes += slot.bytes();
        true
    }

    /// Relocation's copy of the write at `address` (of the record at `from`) is durable at
    /// `to`: the slot names it, unless the slot moved on meanwhile (dropped, or repaired).
    pub fn relocated_write(&mut self, address: u64, from: u64, to: u64) {
        let Some(slot) = self.slots.get_mut(address) else {
            return;
        };
        if slot.damaged || slot.lsn.is_some_and(|lsn| lsn != from) {
            return;
        }
        if !slot.acknowledged() {
            self.pending_bytes -= slot.bytes();
            self.slot_bytes += slot.bytes();
        }
        self.needed.moved(slot.lsn, Some(to));
        slot.lsn = Some(to);
    }

    /// A damaged record found in a quarantined open at `lsn`: a write of a payload with this
    /// CRC and length at `address`. Whether it took effect.
    pub fn replay_damaged_write(&mut self, address: u64, lsn: u64, crc: u32, len: u32) -> bool {
        if !self.takes_copy(address, crc, len) {
            return false;
        }
        match self.slots.get_mut(address) {
            // Already held intact by an earlier record: the damaged one was a rewrite.
            Some(slot) if slot.acknowledged() && !slot.damaged => false,
            Some(slot) => {
                if slot.acknowledged() {
                    self.slot_bytes -= slot.bytes();
                } else {
                    self.pending_bytes -= slot.bytes();
                }
                self.needed.moved(slot.lsn, Some(lsn));
                slot.lsn = Some(lsn);
                slot.damaged = true;
                self.slot_bytes += slot.bytes();
                true
            }
            None => {
                let slot = Slot {
                    lsn: Some(lsn),
                    crc,
                    len,
                    pending: 0,
                    damaged: true,
                };
                self.slot_bytes += slot.bytes();
                self.needed.add(lsn);
                self.slots.insert(address, slot);
                true
            }
        }
    }

    /// The record at `lsn` holding `address`'s value fails its checks (rot found after the
    /// open): the slot is damaged from now on, repaired only by a write of the same value.
    /// Its CRC and length, or `None` when the slot does not name that record.
    pub fn damage_found(&mut self, address: u64, lsn: u64) -> Option<(u64, u32, u32)> {
        let slot = self.slots.get_mut(address)?;
        if slot.damaged || slot.lsn != Some(lsn) {
            return None;
        }
        self.slot_bytes -= slot.bytes();
        slot.damaged = true;
        self.slot_bytes += slot.bytes();
        Some((address, slot.crc, slot.len))
    }

    /// Relocation's copy of the damage at `address` (found at `from`) is durable at `to`.
    pub fn relocated_damage(&mut self, address: u64, from: u64, to: u64) {
        if let Some(slot) = self.slots.get_mut(address) {
            if slot.damaged && slot.lsn == Some(from) {
                self.needed.moved(Some(from), Some(to));
                slot.lsn = Some(to);
            }
        }
    }

    /// The addresses in [T, N + window) not written when a damaged record whose header is
    /// gone was found at `lsn`: they may have been its address. Nothing for a sealed
    /// LogDrive (its length is settled; docs/logdrive.md, quarantine).
    pub fn suspect_window(&mut self, lsn: u64, window: u64) -> bool {
        if self.deleted || self.sealed.is_some() {
            return false;
        }
        let t = self.contiguous_tail();
        let n = self.non_contiguous_tail();
        let end = n.saturating_add(window).min(self.capacity);
        self.add_suspect(t..end, lsn)
    }

    /// A suspect range carried forward (found in replay at `lsn`), or found.
    pub fn add_suspect(&mut self, addresses: Range<u64>, lsn: u64) -> bool {
        if self.deleted || self.sealed.is_some() || addresses.is_empty() {
            return false;
        }
        self.suspects.push(Suspect { addresses, lsn });
        self.needed.add(lsn);
        true
    }

    /// Relocation's copy of the suspect range found at `from` is durable at `to`.
    pub fn relocated_suspect(&mut self, from: u64, to: u64) {
        for suspect in &mut self.suspects {
            if suspect.lsn == from {
                suspect.lsn = to;
                self.needed.moved(Some(from), Some(to));
            }
        }
    }

    /// Whether an unwritten address may have been held by a header-less damaged record.
    fn suspected(&self, address: u64) -> bool {
        self.suspects
            .iter()
            .any(|suspect| suspect.addresses.contains(&address))
    }

    /// The suspect ranges with an address still unwritten, inside the LogDrive.
    pub fn open_suspects(&self) -> impl Iterator<Item = &Suspect> + '_ {
        self.suspects.iter().filter(move |suspect| {
            let start = suspect.addresses.start.max(self.first);
            (start..suspect.addresses.end).any(|address| !self.acknowledged(address))
        })
    }

    /// The damaged slots (address, LSN of the damaged record, CRC, length).
    pub fn damaged_slots(&self) -> impl Iterator<Item = (u64, u64, u32, u32)> + '_ {
        self.slots.iter().filter_map(|(address, slot)| {
            let lsn = slot.lsn.filter(|_| slot.damaged)?;
            Some((address, lsn, slot.crc, slot.len))
        })
    }

    /// The addresses that read as `Damaged`: damaged slots, and the unwritten addresses of
    /// the suspect ranges.
    pub fn damaged_addresses(&self) -> BTreeSet<u64> {
        let mut damaged: BTreeSet<u64> = self.damaged_slots().map(|(a, ..)| a).collect();
        for suspect in &self.suspects {
            let start = suspect.addresses.start.max(self.durable.first);
            for address in start..suspect.addresses.end {
                if !self.acknowledged(address) {
                    damaged.insert(address);
                }
            }
        }
        damaged
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
    fn check_seal(&self, length: u64, epoch: u64) -> Result<Check, LogDriveError> {
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

    fn drop_slots(&mut self, addresses: Range<u64>) {
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

    /// A control record found in replay at `lsn`, checked as the live path checked it:
    /// whether it took effect.
    pub fn replay_control(&mut self, control: Control, lsn: u64) -> bool {
        if self.check_control(control) != Ok(Check::Apply) {
            return false;
        }
        self.queue_control(control);
        self.durable_control(control, lsn);
        true
    }

    /// A relocated copy of a control record found in replay at `lsn`: the state it carries
    /// forward, restored (not checked again: it was accepted when first written).
    pub fn replay_relocated_control(&mut self, control: Control, lsn: u64) -> bool {
        let (current, value) = match control {
            Control::Seal { length, epoch } => return self.restore_seal(length, epoch, lsn),
            Control::Fence(epoch) => (self.fence, epoch),
            Control::Trim(upto) => (self.first, upto),
        };
        if self.deleted || value < current {
            return false;
        }
        self.queue_control(control);
        self.durable_control(control, lsn);
        true
    }

    fn restore_seal(&mut self, length: u64, epoch: u64, lsn: u64) -> bool {
        if self.deleted || self.sealed.is_some_and(|sealed| sealed != length) {
            return false;
        }
        let seal = Control::Seal { length, epoch };
        self.queue_control(seal);
        self.durable_control(seal, lsn);
        true
    }

    /// Relocation's copy of a control record is durable at `to`: the value it carries is
    /// durable (its original was when it was copied), and the copy holds it.
    pub fn relocated_control(&mut self, control: Control, to: u64) {
        self.durable_control(control, to);
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

    /// The damaged slot whose damaged record is at `lsn`, if any: (address, CRC, length).
    pub fn damage_at(&self, lsn: u64) -> Option<(u64, u32, u32)> {
        self.damaged_slots()
            .find(|(_, at, ..)| *at == lsn)
            .map(|(address, _, crc, len)| (address, crc, len))
    }

    fn acknowledged(&self, address: u64) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    impl LogState {
        /// The needed records counted again from scratch: what `needed` must always be.
        fn recount_needed(&self) -> Needed {
            let mut needed = Needed::default();
            for slot in self.slots.values() {
                if let Some(lsn) = slot.lsn {
                    needed.add(lsn);
                }
            }
            let held = [self.holders.seal, self.holders.fence, self.holders.trim];
            for lsn in held.iter().flatten().map(|held| held.lsn) {
                needed.add(lsn);
            }
            if let Some(lsn) = self.holders.create {
                needed.add(lsn);
            }
            for suspect in &self.suspects {
                needed.add(suspect.lsn);
            }
            needed
        }
    }

    /// One operation on a LogDrive's state, as the live path, replay or relocation makes it.
    #[derive(Clone, Debug)]
    enum Op {
        Write { address: u64, acknowledged: bool },
        Relocate { address: u64 },
        Damage { address: u64 },
        Control { kind: u8, value: u64 },
        RelocateControl { kind: u8, value: u64 },
        Suspect { window: u64 },
        RelocateSuspect,
        Create,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0..64u64, any::<bool>())
                .prop_map(|(address, acknowledged)| Op::Write { address, acknowledged }),
            2 => (0..64u64).prop_map(|address| Op::Relocate { address }),
            1 => (0..64u64).prop_map(|address| Op::Damage { address }),
            2 => (0..3u8, 0..70u64).prop_map(|(kind, value)| Op::Control { kind, value }),
            1 => (0..3u8, 0..70u64).prop_map(|(kind, value)| Op::RelocateControl { kind, value }),
            1 => (1..8u64).prop_map(|window| Op::Suspect { window }),
            1 => Just(Op::RelocateSuspect),
            1 => Just(Op::Create),
        ]
    }

    fn control(kind: u8, value: u64) -> Control {
        match kind {
            0 => Control::Seal {
                length: value,
                epoch: 0,
            },
            1 => Control::Fence(value),
            _ => Control::Trim(value),
        }
    }

    proptest! {
        /// The counts of needed records by LSN, which let the head move without a read,
        /// stay what a recount from the slots, holders and suspects gives, whatever the
        /// operations (a count too low would let the head pass a needed record).
        #[test]
        fn needed_counts_match_a_recount(ops in proptest::collection::vec(op(), 1..200)) {
            let mut state = LogState::new(1, 1, 64);
            let mut lsn = 1;
            for op in ops {
                lsn += 1 + lsn % 300;
                match op {
                    Op::Write { address, acknowledged } => {
                        let check = state.check_write(address, 0, (7, 3));
                        if check == Ok(WriteCheck::Append) {
                            state.queue_write(address, 7, 3);
                            state.complete_write(address, acknowledged.then_some(lsn), false);
                        }
                    }
                    Op::Relocate { address } => {
                        if let Some(from) = state.record_of(address) {
                            state.relocated_write(address, from, lsn);
                        }
                        state.replay_relocated_write(address, lsn + 1, 7, 3);
                        lsn += 1;
                    }
                    Op::Damage { address } => {
                        if let Some(at) = state.record_of(address) {
                            state.damage_found(address, at);
                            state.relocated_damage(address, at, lsn);
                        } else {
                            state.replay_damaged_write(address, lsn, 7, 3);
                        }
                    }
                    Op::Control { kind, value } => {
                        state.replay_control(control(kind, value), lsn);
                    }
                    Op::RelocateControl { kind, value } => {
                        let control = control(kind, value);
                        state.replay_relocated_control(control, lsn);
                        state.relocated_control(control, lsn + 1);
                        lsn += 1;
                    }
                    Op::Suspect { window } => {
                        state.suspect_window(lsn, window);
                    }
                    Op::RelocateSuspect => {
                        if let Some(from) = state.suspects.first().map(|s| s.lsn) {
                            state.relocated_suspect(from, lsn);
                        }
                    }
                    Op::Create => state.hold_create(lsn),
                }
                prop_assert_eq!(&state.needed, &state.recount_needed());
            }
            state.confine_to_capacity();
            prop_assert_eq!(&state.needed, &state.recount_needed());
        }
    }

    #[test]
    fn a_seal_hides_what_it_drops_only_once_durable() {
        let mut state = LogState::new(1, 1, 100);
        for address in 0..10 {
            state.queue_write(address, 7, 3);
            state.complete_write(address, Some(address + 2), false);
        }
        assert_eq!(
            state.check_control(Control::Seal {
                length: 5,
                epoch: 0
            }),
            Ok(Check::Apply)
        );
        state.queue_control(Control::Seal {
            length: 5,
            epoch: 0,
        });
        assert_eq!(
            state.check_write(12, 0, (7, 3)),
            Err(LogDriveError::Sealed { length: 5 })
        );
        assert_eq!(state.lookup(8), Ok(Lookup::Record(10)));
        assert_eq!(state.length().unwrap().n, 10);
        state.durable_control(
            Control::Seal {
                length: 5,
                epoch: 0,
            },
            40,
        );
        assert_eq!(state.lookup(8), Ok(Lookup::Unwritten));
        assert_eq!(state.length().unwrap().n, 5);
        assert_eq!(state.holders.seal, Some(Held { value: 5, lsn: 40 }));
    }

    /// A rewrite queued while the first write was in flight names the slot only once the
    /// first write's outcome is in, and only if that write was not written: the log's first
    /// record of the address is the value (replay keeps it), whichever outcome came in first.
    #[test]
    fn a_rewrite_names_the_slot_only_if_the_first_write_failed() {
        // The rewrite's outcome first, then the first write's: the first write's record.
        let mut state = LogState::new(1, 1, 100);
        state.queue_write(3, 7, 3);
        assert_eq!(state.check_write(3, 0, (7, 3)), Ok(WriteCheck::Pending));
        state.queue_write(3, 7, 3);
        state.complete_write(3, Some(21), true);
        assert_eq!(state.lookup(3), Ok(Lookup::Unwritten));
        state.complete_write(3, Some(20), false);
        assert_eq!(state.lookup(3), Ok(Lookup::Record(20)));
        assert!(state.rewrites.is_empty());
        assert_eq!(state.live_bytes(), RECORD_HEADER_BYTES + 3);
        // The first write not written: the first rewrite acknowledged holds the value.
        let mut state = LogState::new(1, 1, 100);
        for _ in 0..3 {
            state.queue_write(3, 7, 3);
        }
        state.complete_write(3, Some(31), true);
        state.complete_write(3, Some(30), true);
        state.complete_write(3, None, false);
        assert_eq!(state.lookup(3), Ok(Lookup::Record(30)));
        assert!(state.rewrites.is_empty());
        assert_eq!(state.live_bytes(), RECORD_HEADER_BYTES + 3);
        // The first write's failure first: the rewrite's record when it comes.
        let mut state = LogState::new(1, 1, 100);
        state.queue_write(3, 7, 3);
        state.queue_write(3, 7, 3);
        state.complete_write(3, None, false);
        assert_eq!(state.lookup(3), Ok(Lookup::Unwritten));
        state.complete_write(3, Some(40), true);
        assert_eq!(state.lookup(3), Ok(Lookup::Record(40)));
        // A seal that drops the slot drops the rewrites kept aside for it.
        let mut state = LogState::new(1, 1, 100);
        state.queue_write(3, 7, 3);
        state.queue_write(3, 7, 3);
        state.complete_write(3, Some(51), true);
        state.drop_slots(0..10);
        assert!(state.rewrites.is_empty());
    }

    #[test]
    fn a_relocated_copy_stays_the_value_whatever_completes_after_it() {
        let mut state = LogState::new(1, 1, 100);
        state.queue_write(4, 7, 3);
        // Relocation copied the durable record at 10 before its completion was taken in.
        state.relocated_write(4, 10, 50);
        state.complete_write(4, Some(10), false);
        assert_eq!(state.lookup(4), Ok(Lookup::Record(50)));
        assert_eq!(state.live_bytes(), RECORD_HEADER_BYTES + 3);
    }

    #[test]
    fn a_damaged_slot_is_written_and_takes_only_its_own_value() {
        let mut state = LogState::new(1, 1, 100);
        state.replay_write((0, 0), 2, 7, &[1, 2, 3]);
        assert!(state.replay_damaged_write(1, 3, 9, 5));
        assert_eq!(state.lookup(1), Ok(Lookup::Damaged));
        assert_eq!(state.weak_tail(4, 4096).unwrap().n, 2);
        assert_eq!(
            state.check_write(1, 0, (8, 5)),
            Err(LogDriveError::Conflict { address: 1 })
        );
        assert_eq!(state.check_write(1, 0, (9, 5)), Ok(WriteCheck::Append));
        state.queue_write(1, 9, 5);
        state.complete_write(1, Some(30), false);
        assert_eq!(state.lookup(1), Ok(Lookup::Record(30)));
    }

    #[test]
    fn suspects_read_damaged_until_written_or_sealed() {
        let mut state = LogState::new(1, 1, 100);
        state.replay_write((0, 0), 2, 7, &[1, 2, 3]);
        state.replay_write((2, 0), 3, 7, &[1, 2, 3]);
        assert!(state.suspect_window(4, 4));
        assert_eq!(state.lookup(1), Ok(Lookup::Damaged));
        assert_eq!(state.lookup(6), Ok(Lookup::Damaged));
        assert_eq!(state.lookup(7), Ok(Lookup::Unwritten));
        assert!(matches!(
            state.weak_tail(8, 4096),
            Err(LogDriveError::Damaged { .. })
        ));
        state.replay_write((1, 0), 5, 7, &[1, 2, 3]);
        assert_eq!(state.lookup(1), Ok(Lookup::Record(5)));
        assert!(state.replay_control(
            Control::Seal {
                length: 4,
                epoch: 0
            },
            6
        ));
        assert_eq!(state.lookup(3), Ok(Lookup::Unwritten));
        assert_eq!(state.weak_tail(8, 4096).unwrap().t(), 3);
    }

    proptest! {
        /// The unprocessed floors answer the least floor still counted, as an ordered map of
        /// counts would, whatever order the floors come and go in (mostly in order, as the
        /// live path queues them, sometimes not).
        #[test]
        fn unprocessed_floors_answer_the_least_still_counted(
            ops in proptest::collection::vec((any::<bool>(), 0..64u64, 0..8u64), 1..400),
        ) {
            let mut floors = Unprocessed::default();
            let mut model: std::collections::BTreeMap<u64, u32> = Default::default();
            let mut next = 0u64;
            for (queue, step, pick) in ops {
                if queue || model.is_empty() {
                    // Mostly the drive's next LSN, which only grows; now and then an older one.
                    let floor = if step < 56 {
                        next += step % 4;
                        next
                    } else {
                        next.saturating_sub(step)
                    };
                    floors.queued(floor);
                    *model.entry(floor).or_insert(0) += 1;
                } else {
                    // Outcomes come roughly in order: one of the oldest few.
                    let keys: Vec<u64> = model.keys().copied().collect();
                    let floor = keys[(pick as usize).min(keys.len() - 1)];
                    floors.processed(floor);
                    match model.get_mut(&floor) {
                        Some(1) => { model.remove(&floor); }
                        Some(count) => *count -= 1,
                        None => unreachable!(),
                    }
                }
                prop_assert_eq!(floors.least(), model.keys().next().copied());
            }
        }
    }
}
