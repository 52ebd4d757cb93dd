//! The two per-LogDrive indexes every write touches: the slots by address ([`SlotIndex`])
//! and the needed records by LSN ([`Needed`]). Both are ordered maps in what they answer,
//! stored for the shape a LogDrive's keys take: a write's address is just past the ones
//! before it (the K-window discipline keeps N - T small), and a record's LSN is just past
//! the ones the LogDrive already counts (records of one LogDrive take LSNs in the order
//! they are queued, and outcomes are taken in roughly in that order). On the bench's
//! 1,000-LogDrive workload each LogDrive's B-tree nodes are cold in cache when its next
//! write comes, and the two tree searches of a write's completion were two thirds of its
//! cost there (the loads of the nodes' keys); a deque window finds the slot with one load.
//! Neither structure is a general sorted map: each falls back (the slots to a B-tree, the
//! needed counts to an insertion into the deque) for keys off the common shape, so a
//! LogDrive written sparsely stays correct and bounded in memory.

use std::collections::{BTreeMap, VecDeque};
use std::ops::Range;

use crate::record::RECORD_HEADER_BYTES;

/// One written (or being written) address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Slot {
    /// The LSN of the record holding the value (the first acknowledged one, or the relocated
    /// copy that took its place); `None` while no record of it is known acknowledged.
    pub lsn: Option<u64>,
    /// The payload's CRC32C.
    pub crc: u32,
    /// The payload's length.
    pub len: u32,
    /// Records for it queued and not yet completed.
    pub pending: u32,
    /// The record at `lsn` failed its checks (a quarantined open): reads answer `Damaged`,
    /// and only a write of the same value (CRC and length) is accepted, as its repair.
    pub damaged: bool,
}

impl Slot {
    pub(crate) fn acknowledged(&self) -> bool {
        self.lsn.is_some()
    }

    /// The ring bytes its record takes (a damaged one is carried forward as a header alone).
    pub(crate) fn bytes(&self) -> u64 {
        if self.damaged {
            RECORD_HEADER_BYTES
        } else {
            RECORD_HEADER_BYTES + u64::from(self.len)
        }
    }
}

/// Slots a window may hold beyond twice its occupied ones: how far a write may land past
/// the window's end (or before its start) and still join it, on a window nearly empty.
const WINDOW_SLACK_SLOTS: u64 = 64;

/// The slots by address: a dense window `[base, base + window.len())` in a deque, whose
/// every address lives in the window (a vacant one as `None`), and the addresses outside it
/// in a B-tree. An address joins the window when the window, grown to reach it, would hold
/// at most twice its occupied slots plus [`WINDOW_SLACK_SLOTS`] (the address just past its
/// end always joins: one more slot spanned, one more held), so the window's memory
/// stays within a constant factor of the slots it holds; vacant slots at its ends are
/// dropped as they appear (a trim or a seal empties it from the ends), and a window that
/// falls below an eighth occupied by removals inside it moves into the B-tree whole: it
/// never spans more than eight times its occupied slots plus [`WINDOW_SLACK_SLOTS`].
#[derive(Clone, Debug, Default)]
pub(crate) struct SlotIndex {
    /// The address of `window[0]`.
    base: u64,
    window: VecDeque<Option<Slot>>,
    /// The `Some` entries of `window`.
    occupied: usize,
    /// Every slot outside the window.
    sparse: BTreeMap<u64, Slot>,
}

impl SlotIndex {
    fn end(&self) -> u64 {
        self.base + self.window.len() as u64
    }

    fn window_index(&self, address: u64) -> Option<usize> {
        let offset = address.checked_sub(self.base)?;
        (offset < self.window.len() as u64).then_some(offset as usize)
    }

    /// Slots the window may span once it holds one more.
    fn window_max(&self) -> u64 {
        2 * (self.occupied as u64 + 1) + WINDOW_SLACK_SLOTS
    }

    pub fn len(&self) -> usize {
        self.occupied + self.sparse.len()
    }

    pub fn get(&self, address: u64) -> Option<&Slot> {
        match self.window_index(address) {
            Some(index) => self.window[index].as_ref(),
            None => self.sparse.get(&address),
        }
    }

    pub fn get_mut(&mut self, address: u64) -> Option<&mut Slot> {
        match self.window_index(address) {
            Some(index) => self.window[index].as_mut(),
            None => self.sparse.get_mut(&address),
        }
    }

    /// The window grown to hold `address`, if that keeps it dense enough: the index there.
    /// Slots the B-tree held in the addresses it takes in move into it.
    fn reach(&mut self, address: u64) -> Option<usize> {
        if let Some(index) = self.window_index(address) {
            return Some(index);
        }
        if address == u64::MAX {
            // Past every LogDrive's capacity; kept out so that the window's end fits a u64.
            return None;
        }
        if self.window.is_empty() {
            self.base = address;
            self.window.push_back(self.sparse.remove(&address));
            self.occupied += usize::from(self.window[0].is_some());
            return Some(0);
        }
        let end = self.end();
        if address == end && self.sparse.is_empty() {
            // The next address past the window, the way a LogDrive's writes mostly come (it
            // keeps the window's bound: one more slot spanned, one more held).
            self.window.push_back(None);
            return Some(self.window.len() - 1);
        }
        if address >= end {
            if address - self.base >= self.window_max() {
                return None;
            }
            let taken = self.take_sparse(end..address + 1);
            self.window.resize((address - self.base + 1) as usize, None);
            self.fill_from(taken);
            Some((address - self.base) as usize)
        } else {
            if end - address > self.window_max() {
                return None;
            }
            let taken = self.take_sparse(address..self.base);
            for _ in address..self.base {
                self.window.push_front(None);
            }
            self.base = address;
            self.fill_from(taken);
            Some(0)
        }
    }

    fn take_sparse(&mut self, addresses: Range<u64>) -> Vec<(u64, Slot)> {
        if self.sparse.is_empty() || self.sparse.range(addresses.clone()).next().is_none() {
            return Vec::new();
        }
        let keys: Vec<u64> = self.sparse.range(addresses).map(|(a, _)| *a).collect();
        keys.into_iter()
            .filter_map(|a| self.sparse.remove(&a).map(|slot| (a, slot)))
            .collect()
    }

    fn fill_from(&mut self, slots: Vec<(u64, Slot)>) {
        for (address, slot) in slots {
            let index = (address - self.base) as usize;
            debug_assert!(self.window[index].is_none());
            self.window[index] = Some(slot);
            self.occupied += 1;
        }
    }

    /// The slot at `address`, made with `make` if there is none.
    pub fn get_or_insert_with(&mut self, address: u64, make: impl FnOnce() -> Slot) -> &mut Slot {
        match self.reach(address) {
            Some(index) => {
                let entry = &mut self.window[index];
                if entry.is_none() {
                    self.occupied += 1;
                }
                entry.get_or_insert_with(make)
            }
            None => self.sparse.entry(address).or_insert_with(make),
        }
    }

    /// Sets the slot at `address`.
    pub fn insert(&mut self, address: u64, slot: Slot) {
        *self.get_or_insert_with(address, || slot) = slot;
    }

    pub fn remove(&mut self, address: u64) -> Option<Slot> {
        let Some(index) = self.window_index(address) else {
            return self.sparse.remove(&address);
        };
        let slot = self.window[index].take()?;
        self.occupied -= 1;
        self.settle();
        Some(slot)
    }

    /// After removals: the window's ends hold slots, it stays dense enough (or moves into the
    /// B-tree whole), and a deque that a trim emptied gives most of its memory back.
    fn settle(&mut self) {
        while self.window.front().is_some_and(Option::is_none) {
            self.window.pop_front();
            self.base += 1;
        }
        while self.window.back().is_some_and(Option::is_none) {
            self.window.pop_back();
        }
        let span = self.window.len() as u64;
        if span > WINDOW_SLACK_SLOTS && (self.occupied as u64) * 8 < span {
            // Removals inside it left it sparse: the B-tree holds the rest.
            let base = self.base;
            for (offset, slot) in std::mem::take(&mut self.window).into_iter().enumerate() {
                if let Some(slot) = slot {
                    self.sparse.insert(base + offset as u64, slot);
                }
            }
            self.occupied = 0;
        }
        if self.window.capacity() > 4 * self.window.len().max(16) {
            self.window.shrink_to(2 * self.window.len());
        }
    }

    /// Removes the slots in `addresses`, in address order. A range that starts at or before
    /// the window (a trim's prefix, a seal's suffix of a window starting past it) takes the
    /// window's front by pops, not a removal apiece.
    pub fn take_range(&mut self, addresses: Range<u64>) -> Vec<(u64, Slot)> {
        if addresses.start > self.base || addresses.end <= self.base || self.window.is_empty() {
            let addresses: Vec<u64> = self.range(addresses).map(|(address, _)| address).collect();
            return addresses
                .into_iter()
                .filter_map(|address| self.remove(address).map(|slot| (address, slot)))
                .collect();
        }
        let end = self.end();
        let mut taken = self.take_sparse(addresses.start..self.base);
        while self.base < addresses.end {
            let Some(entry) = self.window.pop_front() else {
                break;
            };
            if let Some(slot) = entry {
                self.occupied -= 1;
                taken.push((self.base, slot));
            }
            self.base += 1;
        }
        taken.extend(self.take_sparse(end..addresses.end.max(end)));
        self.settle();
        taken
    }

    /// The slots in `addresses`, in address order.
    pub fn range(&self, addresses: Range<u64>) -> impl DoubleEndedIterator<Item = (u64, &Slot)> {
        let (base, end) = (self.base, self.end());
        let addresses = addresses.start..addresses.end.max(addresses.start);
        let below = addresses.start.min(base)..addresses.end.min(base);
        let above = addresses.start.max(end)..addresses.end.max(end);
        let inside = addresses.start.clamp(base, end)..addresses.end.clamp(base, end);
        let window = self
            .window
            .range((inside.start - base) as usize..(inside.end - base) as usize)
            .enumerate()
            .filter_map(move |(offset, slot)| {
                slot.as_ref()
                    .map(|slot| (inside.start + offset as u64, slot))
            });
        let sparse = |range: Range<u64>| {
            (!range.is_empty())
                .then(|| self.sparse.range(range).map(|(a, slot)| (*a, slot)))
                .into_iter()
                .flatten()
        };
        sparse(below).chain(window).chain(sparse(above))
    }

    /// Every slot, in address order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (u64, &Slot)> {
        self.range(0..u64::MAX)
            .chain(self.sparse.get(&u64::MAX).map(|slot| (u64::MAX, slot)))
    }

    #[cfg(test)]
    pub fn values(&self) -> impl Iterator<Item = &Slot> {
        self.iter().map(|(_, slot)| slot)
    }
}

/// Two indexes are equal when they hold the same slots, however they store them (the live
/// path and replay reach the same slots by different paths).
impl PartialEq for SlotIndex {
    fn eq(&self, other: &SlotIndex) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for SlotIndex {}

/// The LSNs of the records a LogDrive needs (its values, their damage, its creation, the
/// records holding its seal, fence and trim point, its suspect ranges), counted: the first
/// bounds how far the ring's head may move without a read (the reclaimer's advance past
/// garbage it need not look at). Exact LSNs rather than counts per chunk of LSNs: a bound
/// rounded down to a chunk left the reclaimer to read, off the device, the batch holding
/// the chunk's garbage before the record, only to find it garbage, on every move of the
/// bound (most of what it read on the 1,000-LogDrive bench workload).
///
/// A sorted deque of (LSN, count): a new needed record's LSN is nearly always past every
/// one counted (its own write's, or the copy relocation just wrote), so it joins the back,
/// and one taken in out of order goes in near the back; records stop being needed mostly
/// from the front (a trim drops the oldest addresses, relocation moves the oldest records).
/// An entry whose count falls to zero stays until the front or back reaches it, or until
/// such entries are most of the deque, when they are swept out; the front and back always
/// have a count, so the front is the first needed record.
#[derive(Clone, Debug, Default)]
pub(crate) struct Needed {
    counts: VecDeque<(u64, u32)>,
    /// Entries of `counts` whose count is zero.
    zeros: usize,
}

/// Zero-count entries the deque may hold before they are swept whatever their share.
const NEEDED_ZEROS_MIN: usize = 64;

impl Needed {
    pub fn add(&mut self, lsn: u64) {
        match self.counts.back_mut() {
            None => self.counts.push_back((lsn, 1)),
            Some((back, _)) if *back < lsn => self.counts.push_back((lsn, 1)),
            Some(_) => match self.counts.binary_search_by_key(&lsn, |(at, _)| *at) {
                Ok(index) => {
                    let count = &mut self.counts[index].1;
                    if *count == 0 {
                        self.zeros -= 1;
                    }
                    *count += 1;
                }
                Err(index) => self.counts.insert(index, (lsn, 1)),
            },
        }
    }

    pub fn remove(&mut self, lsn: u64) {
        // A trim drops the oldest records, so most removals end the front: no search.
        let found = match self.counts.front() {
            Some((front, _)) if *front == lsn => Ok(0),
            _ => self.counts.binary_search_by_key(&lsn, |(at, _)| *at),
        };
        let Ok(index) = found else {
            debug_assert!(false, "no needed record counted at LSN {lsn}");
            return;
        };
        let count = &mut self.counts[index].1;
        if *count == 0 {
            debug_assert!(false, "no needed record left at LSN {lsn}");
            return;
        }
        *count -= 1;
        if *count > 0 {
            return;
        }
        self.zeros += 1;
        while self.counts.front().is_some_and(|(_, count)| *count == 0) {
            self.counts.pop_front();
            self.zeros -= 1;
        }
        while self.counts.back().is_some_and(|(_, count)| *count == 0) {
            self.counts.pop_back();
            self.zeros -= 1;
        }
        if self.zeros > NEEDED_ZEROS_MIN && 2 * self.zeros > self.counts.len() {
            self.counts.retain(|(_, count)| *count > 0);
            self.zeros = 0;
        }
    }

    /// The needed record at `from` (if any) is replaced by the one at `to` (if any).
    pub fn moved(&mut self, from: Option<u64>, to: Option<u64>) {
        if from == to {
            return;
        }
        if let Some(to) = to {
            self.add(to);
        }
        if let Some(from) = from {
            self.remove(from);
        }
    }

    /// The LSN of the first needed record.
    pub fn first_lsn(&self) -> Option<u64> {
        self.counts.front().map(|(lsn, _)| *lsn)
    }

    /// The needed LSNs and their counts, in order.
    fn iter(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        self.counts.iter().copied().filter(|(_, count)| *count > 0)
    }
}

impl PartialEq for Needed {
    fn eq(&self, other: &Needed) -> bool {
        self.iter().eq(other.iter())
    }
}

impl Eq for Needed {}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn slot(lsn: u64) -> Slot {
        Slot {
            lsn: Some(lsn),
            crc: lsn as u32,
            len: 1,
            pending: 0,
            damaged: false,
        }
    }

    #[derive(Clone, Debug)]
    enum SlotOp {
        Insert(u64),
        Touch(u64),
        Remove(u64),
        Drop(Range<u64>),
        Trim(u64),
    }

    /// Addresses mostly near a moving front, as a LogDrive's writes come, with far ones and
    /// the extremes mixed in.
    fn address() -> impl Strategy<Value = u64> {
        prop_oneof![
            6 => 0..300u64,
            1 => 0..100_000u64,
            1 => prop_oneof![Just(0), Just(u64::MAX), Just(u64::MAX - 1)],
        ]
    }

    fn slot_op() -> impl Strategy<Value = SlotOp> {
        prop_oneof![
            5 => address().prop_map(SlotOp::Insert),
            2 => address().prop_map(SlotOp::Touch),
            3 => address().prop_map(SlotOp::Remove),
            1 => (address(), 0..400u64).prop_map(|(start, len)| {
                SlotOp::Drop(start..start.saturating_add(len))
            }),
            1 => address().prop_map(SlotOp::Trim),
        ]
    }

    proptest! {
        /// The slot index answers every lookup, removal and ordered range as a B-tree of
        /// the same slots does, and its window stays within its bound.
        #[test]
        fn the_slot_index_is_an_ordered_map(ops in proptest::collection::vec(slot_op(), 1..400)) {
            let mut index = SlotIndex::default();
            let mut model = BTreeMap::new();
            for (step, op) in ops.into_iter().enumerate() {
                let step = step as u64;
                match op {
                    SlotOp::Insert(address) => {
                        index.insert(address, slot(step));
                        model.insert(address, slot(step));
                    }
                    SlotOp::Touch(address) => {
                        let got = index.get_or_insert_with(address, || slot(step));
                        got.pending += 1;
                        let want = model.entry(address).or_insert_with(|| slot(step));
                        want.pending += 1;
                        prop_assert_eq!(*got, *want);
                    }
                    SlotOp::Remove(address) => {
                        prop_assert_eq!(index.remove(address), model.remove(&address));
                    }
                    SlotOp::Drop(range) => {
                        let got: Vec<(u64, Slot)> =
                            index.range(range.clone()).map(|(a, s)| (a, *s)).collect();
                        let want: Vec<(u64, Slot)> =
                            model.range(range.clone()).map(|(a, s)| (*a, *s)).collect();
                        prop_assert_eq!(&got, &want);
                        prop_assert_eq!(index.take_range(range), want.clone());
                        for (address, _) in want {
                            model.remove(&address);
                        }
                    }
                    SlotOp::Trim(upto) => {
                        let want: Vec<(u64, Slot)> =
                            model.range(0..upto).map(|(a, s)| (*a, *s)).collect();
                        prop_assert_eq!(index.take_range(0..upto), want.clone());
                        for (address, _) in want {
                            model.remove(&address);
                        }
                    }
                }
                prop_assert_eq!(index.len(), model.len());
                let all: Vec<(u64, Slot)> = index.iter().map(|(a, s)| (a, *s)).collect();
                let want: Vec<(u64, Slot)> = model.iter().map(|(a, s)| (*a, *s)).collect();
                prop_assert_eq!(&all, &want);
                let last = index.iter().next_back().map(|(a, s)| (a, *s));
                prop_assert_eq!(last, model.iter().next_back().map(|(a, s)| (*a, *s)));
                for (address, want) in model.range(0..400) {
                    prop_assert_eq!(index.get(*address), Some(want));
                }
                prop_assert!(index.get(1_000_001).is_none());
                prop_assert!(
                    index.window.len() as u64 <= 8 * index.occupied as u64 + WINDOW_SLACK_SLOTS,
                    "a window of {} slots holds {}", index.window.len(), index.occupied
                );
                prop_assert!(index.window.front().is_none_or(Option::is_some));
                prop_assert!(index.window.back().is_none_or(Option::is_some));
            }
        }

        /// The needed counts answer the first needed LSN and hold the same counts as a
        /// B-tree of them, whatever the order LSNs come and go in.
        #[test]
        fn the_needed_counts_are_an_ordered_multiset(
            ops in proptest::collection::vec((any::<bool>(), 0..40u64, 0..3u8), 1..600),
        ) {
            let mut needed = Needed::default();
            let mut model: BTreeMap<u64, u32> = BTreeMap::new();
            let mut next = 100u64;
            for (add, back, copies) in ops {
                if add {
                    // Mostly just past the last one, sometimes a little before it.
                    next += 1;
                    let lsn = next.saturating_sub(back * u64::from(copies == 0));
                    needed.add(lsn);
                    *model.entry(lsn).or_insert(0) += 1;
                } else if let Some((&lsn, _)) =
                    model.iter().nth(back as usize % model.len().max(1))
                {
                    needed.remove(lsn);
                    match model.get_mut(&lsn) {
                        Some(1) => { model.remove(&lsn); }
                        Some(count) => *count -= 1,
                        None => {}
                    }
                }
                prop_assert_eq!(needed.first_lsn(), model.keys().next().copied());
                let got: Vec<(u64, u32)> = needed.iter().collect();
                let want: Vec<(u64, u32)> = model.iter().map(|(l, c)| (*l, *c)).collect();
                prop_assert_eq!(got, want);
                prop_assert!(needed.zeros <= NEEDED_ZEROS_MIN.max(needed.counts.len() / 2));
            }
        }
    }
}
