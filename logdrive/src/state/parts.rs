//! The parts a LogDrive's state is made of beside its slots: the control state as durable,
//! the records queued whose outcomes are not yet in ([`Unprocessed`]), the records holding
//! the control state ([`Holders`]) and the suspect ranges a quarantined open found.

use std::collections::VecDeque;
use std::ops::Range;

/// The control state as durable.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Durable {
    pub(crate) sealed: Option<u64>,
    pub(crate) fence: u64,
    pub(crate) first: u64,
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
    pub(crate) fn queued(&mut self, floor: u64) {
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
    pub(crate) fn processed(&mut self, floor: u64) {
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
    pub(crate) fn least(&self) -> Option<u64> {
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
    pub(crate) create: Option<u64>,
    pub(crate) seal: Option<Held>,
    pub(crate) fence: Option<Held>,
    pub(crate) trim: Option<Held>,
}

/// A control value and the LSN of the record that holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Held {
    pub(crate) value: u64,
    pub(crate) lsn: u64,
}

impl Holders {
    pub(crate) fn count(&self) -> u64 {
        let controls = [self.seal, self.fence, self.trim];
        let held = controls.iter().filter(|held| held.is_some()).count();
        held as u64 + u64::from(self.create.is_some())
    }

    /// The record at `lsn` holding `value` is durable: it holds the state if its value is
    /// newer (values only grow), or, for the same value, if it is the newer record. The
    /// holder's LSN before and after.
    pub(crate) fn hold(
        holder: &mut Option<Held>,
        value: u64,
        lsn: u64,
    ) -> (Option<u64>, Option<u64>) {
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
    pub(crate) fn needs(holder: &Option<Held>, value: u64, lsn: u64) -> bool {
        match holder {
            None => true,
            Some(held) => value > held.value || (value == held.value && lsn == held.lsn),
        }
    }

    /// The creation's record is durable at `lsn` (the newer of two holds it): the holder's
    /// LSN before and after.
    pub(crate) fn hold_create(&mut self, lsn: u64) -> (Option<u64>, Option<u64>) {
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
    pub(crate) addresses: Range<u64>,
    /// The LSN of the damage (or of the relocated record carrying it forward).
    pub(crate) lsn: u64,
}
