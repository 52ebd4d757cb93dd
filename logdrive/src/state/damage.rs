//! Damage in a LogDrive's state: addresses whose record a quarantined open (or a later read)
//! found damaged, and suspect ranges (a damaged record whose header is gone may have held
//! any address in its window); both read `Damaged` until repaired, and both are carried
//! forward by relocation.

use std::collections::BTreeSet;
use std::ops::Range;

use crate::index::Slot;

use super::log_state::LogState;
use super::parts::Suspect;

impl LogState {
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
    pub(crate) fn suspected(&self, address: u64) -> bool {
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

    /// The damaged slot whose damaged record is at `lsn`, if any: (address, CRC, length).
    pub fn damage_at(&self, lsn: u64) -> Option<(u64, u32, u32)> {
        self.damaged_slots()
            .find(|(_, at, ..)| *at == lsn)
            .map(|(address, _, crc, len)| (address, crc, len))
    }
}
