//! Tests of a LogDrive's state: the live path and replay reach the same decisions.

use proptest::prelude::*;

use super::kinds::*;
use super::log_state::LogState;
use super::parts::*;
use crate::api::LogDriveError;
use crate::index::Needed;
use crate::record::RECORD_HEADER_BYTES;

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
