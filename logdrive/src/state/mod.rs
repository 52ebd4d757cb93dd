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
//!
//! - `log_state`: [`LogState`], the write path, reads and tails; `controls`: seals, fences,
//!   trims and what the LogDrive needs; `damage`: damaged addresses and suspects;
//!   `replayed`: what replay and relocation apply;
//! - `kinds`: what the checks answer and the control records; `parts`: the control state as
//!   durable, the records in flight, the records holding the control state, suspects.

mod controls;
mod damage;
mod kinds;
mod log_state;
mod parts;
mod replayed;
#[cfg(test)]
mod tests;

pub(crate) use kinds::{slot_len, Check, Control, Lookup, WriteCheck};
pub(crate) use log_state::LogState;
pub(crate) use parts::Suspect;
