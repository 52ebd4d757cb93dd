//! Rebuilding every LogDrive during the open's one replay pass: a [`RecoveryVisitor`] that
//! decodes each live entry's record ([`crate::record`]) and applies it, in LSN order, with
//! the checks the live path made (`state`). Nothing is read a second time.
//!
//! Relocation writes a LogDrive's creation (and its seal, fence and trim point) forward as
//! copies once the ring's head reaches them, while records of the same LogDrive written
//! after the creation may still lie behind the copy. So replay meets a LogDrive's records
//! before its creation: it keeps them under their (id, generation) and the LogDrive counts
//! only once its creation (first or copied) is seen. Generations are never reused, so a
//! record can only belong to the one LogDrive of its (id, generation); at the end of the
//! pass the highest created generation of an id that was not deleted is its live LogDrive,
//! and records of a generation never created (or created and then lost from the ring) took
//! no effect.

use std::collections::hash_map::Entry;
use std::collections::HashMap;

use sealog::{DamagedEntry, EntryRef, RecoveryVisitor};

use crate::record::{Record, RecordType};
use crate::state::{slot_len, Control, LogState};

/// A LogDrive as replay has it so far.
#[derive(Debug)]
struct Replayed {
    state: LogState,
    /// Its creation (first or copied) was seen.
    created: bool,
    /// Its creation's own record (not a copy) was seen: every later record of it is in the
    /// ring, which holds every LSN from its head on.
    whole: bool,
    /// Records that took effect on it (counted as skipped if it never counts).
    applied: u64,
}

/// The LogDrives as the log left them.
#[derive(Debug)]
pub(crate) struct Replay {
    /// How far past N a header-less damaged record may have written (the largest window
    /// writers keep).
    window: u64,
    /// Every LogDrive with a record so far, by (id, generation).
    states: HashMap<(u64, u64), Replayed>,
    /// The highest generation any record carries.
    pub generation_max: u64,
    /// Entries that took no effect: no LogDrive record, one for no LogDrive, or one the live
    /// path would have refused or found already done (a rewrite of the same bytes, a
    /// repeated seal or fence).
    pub skipped: u64,
    /// The damage found, in LSN order.
    damage: Vec<DamageFound>,
}

impl RecoveryVisitor for Replay {
    fn visit(&mut self, entry: &EntryRef<'_>) {
        let applied = match Record::decode(entry.kind, &entry.header) {
            Some(record) => self.apply(&record, entry),
            None => false,
        };
        if !applied {
            self.skipped += 1;
        }
    }

    /// Damage a quarantined open stepped over, in LSN order among the records: a write whose
    /// header survived marks its address `Damaged` (written, value unknown but its length and
    /// CRC); damage whose headers are gone marks the unwritten addresses every unsealed
    /// LogDrive could have been writing (docs/logdrive.md, quarantine).
    fn visit_damaged(&mut self, damaged: &DamagedEntry) {
        let record = match (damaged.kind, damaged.header) {
            (Some(kind), Some(header)) => Record::decode(kind, &header),
            _ => None,
        };
        let header_known = damaged.header.is_some();
        let mut address = None;
        match (record, damaged.payload_crc, damaged.payload_len) {
            (Some(record), Some(crc), Some(len)) => {
                if self.damaged_record(damaged.first_lsn, &record, crc, u64::from(len)) {
                    address = Some((record.id, record.generation, record.value));
                }
            }
            // A foreign entry (no LogDrive record) whose header survived: nothing of ours.
            _ if header_known => {}
            _ => {
                self.damaged_range(damaged.first_lsn);
            }
        }
        self.damage.push(DamageFound {
            lsns: damaged.first_lsn..=damaged.last_lsn,
            header: damaged.header,
            address,
        });
    }
}

/// A damaged LSN range a quarantined open found, and what it held where its header survived.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DamageFound {
    /// The LSNs.
    pub lsns: std::ops::RangeInclusive<u64>,
    /// The record's embedder header, where it survived (a range of one LSN).
    pub header: Option<sealog::EmbedderHeader>,
    /// The LogDrive address it held (id, generation, address), where the header names one.
    pub address: Option<(u64, u64, u64)>,
}

/// What the pass rebuilt.
#[derive(Debug, Default)]
pub(crate) struct Rebuilt {
    /// The live LogDrives by id.
    pub live: HashMap<u64, LogState>,
    /// The highest generation issued.
    pub generation_max: u64,
    /// Entries that took no effect.
    pub skipped: u64,
    /// The damage a quarantined open found.
    pub damage: Vec<DamageFound>,
}

impl Replay {
    /// A replay for writers that keep at most `window` addresses between T and N.
    pub fn new(window: u64) -> Replay {
        Replay {
            window,
            states: HashMap::new(),
            generation_max: 0,
            skipped: 0,
            damage: Vec::new(),
        }
    }

    /// The LogDrive of (id, generation), as far as replay has it.
    fn state(&mut self, id: u64, generation: u64) -> &mut Replayed {
        self.states
            .entry((id, generation))
            .or_insert_with(|| Replayed {
                // Its capacity is known once its creation is seen.
                state: LogState::new(id, generation, u64::MAX),
                created: false,
                whole: false,
                applied: 0,
            })
    }

    fn apply(&mut self, record: &Record, entry: &EntryRef<'_>) -> bool {
        self.generation_max = self.generation_max.max(record.generation);
        let key = (record.id, record.generation);
        let lsn = entry.lsn;
        let applied = match record.record_type {
            RecordType::Generation => {
                self.generation_max = self.generation_max.max(record.value);
                return true;
            }
            RecordType::Create => self.apply_create(record, lsn),
            RecordType::Delete => return self.apply_delete(key),
            RecordType::Write => {
                let crc = crc32c::crc32c(entry.payload);
                let len = entry.payload.len() as u64;
                let state = &mut self.state(record.id, record.generation).state;
                if record.relocated {
                    state.replay_relocated_write(record.value, lsn, crc, len)
                } else {
                    let write = (record.value, record.epoch);
                    state.replay_write(write, lsn, crc, entry.payload)
                }
            }
            RecordType::Seal | RecordType::Fence | RecordType::Trim => {
                self.apply_control(record, lsn)
            }
            RecordType::Damaged => {
                let (crc, len) = record.damaged_crc_len();
                let state = &mut self.state(record.id, record.generation).state;
                state.replay_damaged_write(record.value, lsn, crc, len)
            }
            RecordType::Suspect => {
                let state = &mut self.state(record.id, record.generation).state;
                state.add_suspect(record.value..record.epoch, lsn)
            }
        };
        if applied {
            self.state(record.id, record.generation).applied += 1;
        }
        applied
    }

    /// A creation: the LogDrive's capacity, and its creation record held. A second original
    /// creation of one (id, generation) is not applied.
    fn apply_create(&mut self, record: &Record, lsn: u64) -> bool {
        let replayed = self.state(record.id, record.generation);
        if replayed.created && !record.relocated {
            return false;
        }
        replayed.whole |= !record.relocated;
        if !replayed.created {
            replayed.created = true;
            replayed.state.capacity = record.value;
            // Records met before the creation were checked against no capacity.
            replayed.state.confine_to_capacity();
        }
        replayed.state.hold_create(lsn);
        true
    }

    /// A deletion: the LogDrive's state is dropped. Records of one never created are counted
    /// as skipped.
    fn apply_delete(&mut self, key: (u64, u64)) -> bool {
        match self.states.remove(&key) {
            Some(replayed) if replayed.created => true,
            Some(replayed) => {
                self.skipped += replayed.applied;
                false
            }
            None => false,
        }
    }

    /// A seal, fence or trim, checked as the live path checked it where replay can.
    fn apply_control(&mut self, record: &Record, lsn: u64) -> bool {
        let control = Control::of(record).expect("a control record");
        let replayed = self.state(record.id, record.generation);
        // A trim was at or below T when written, but replay can check that only where it has
        // met every record of the LogDrive before it: once the ring's head passed its creation
        // (relocation copied it forward), the writes below the trim point may have left the
        // ring with it (they were garbage), and a T made of what is left would refuse an
        // acknowledged trim.
        let unchecked = matches!(control, Control::Trim(_)) && !replayed.whole;
        let state = &mut replayed.state;
        if record.relocated || unchecked {
            state.replay_relocated_control(control, lsn)
        } else {
            state.replay_control(control, lsn)
        }
    }

    /// A record found damaged with its header intact at `lsn`: a write names the address it
    /// held, which reads as `Damaged` (not unwritten) until repaired. Whether it was one.
    pub fn damaged_record(&mut self, lsn: u64, record: &Record, crc: u32, len: u64) -> bool {
        self.generation_max = self.generation_max.max(record.generation);
        if record.record_type != RecordType::Write {
            return false;
        }
        let replayed = self.state(record.id, record.generation);
        let applied = replayed
            .state
            .replay_damaged_write(record.value, lsn, crc, slot_len(len));
        if applied {
            replayed.applied += 1;
        }
        applied
    }

    /// Damaged records whose headers are gone, from `lsn` on: the unwritten addresses in
    /// [T, N + window) of every unsealed LogDrive may have been theirs. How many LogDrives
    /// were marked.
    pub fn damaged_range(&mut self, lsn: u64) -> u64 {
        let mut marked = 0;
        for replayed in self.states.values_mut() {
            if replayed.state.suspect_window(lsn, self.window) {
                replayed.applied += 1;
                marked += 1;
            }
        }
        marked
    }

    /// The LogDrives the log holds: per id, its highest created generation (a crafted log
    /// may create an id again without deleting it; the older generation's records then take
    /// no effect).
    pub fn finish(self) -> Rebuilt {
        let mut skipped = self.skipped;
        let mut live: HashMap<u64, Replayed> = HashMap::new();
        for replayed in self.states.into_values() {
            if !replayed.created {
                skipped += replayed.applied;
                continue;
            }
            match live.entry(replayed.state.id) {
                Entry::Vacant(vacant) => {
                    vacant.insert(replayed);
                }
                Entry::Occupied(mut other) => {
                    if other.get().state.generation < replayed.state.generation {
                        skipped += other.insert(replayed).applied;
                    } else {
                        skipped += replayed.applied;
                    }
                }
            }
        }
        Rebuilt {
            live: live
                .into_iter()
                .map(|(id, replayed)| (id, replayed.state))
                .collect(),
            generation_max: self.generation_max,
            skipped,
            damage: self.damage,
        }
    }
}
