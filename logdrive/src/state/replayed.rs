//! What replay and relocation apply to a LogDrive's state: records met in the open's pass,
//! checked as the live path checked them, and relocated copies, which restore the state of
//! the record they copy.

use crate::index::Slot;

use super::kinds::{slot_len, Check, Control, WriteCheck};
use super::log_state::LogState;

impl LogState {
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
    pub(crate) fn takes_copy(&self, address: u64, crc: u32, len: u32) -> bool {
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

    pub(crate) fn restore_seal(&mut self, length: u64, epoch: u64, lsn: u64) -> bool {
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
}
