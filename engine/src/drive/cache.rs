//! The recent-entry cache: the payloads of the newest acknowledged entries, kept in ordinary
//! memory so that readers tailing the writer never touch the device. It keeps the payloads
//! the clients handed over rather than copies: an append's `Vec` (which the drive used to free
//! once it had copied it into the batch) or its shared `Bytes` (a reference) stays here until
//! the cache evicts it, so caching costs the write path no copy and no allocation. Entries
//! appended from borrowed slices are the exception: the drive holds nothing of theirs once it
//! has copied them (a copy for the cache would cost what that path exists to avoid), so their
//! reads go to the device.
//!
//! Memory is bounded by [`DriveOptions::read_cache_bytes`](crate::DriveOptions::read_cache_bytes),
//! counting each payload's allocation plus a fixed per-entry overhead; the oldest entries go
//! first. The drive thread adds a batch's entries under the write lock once per batch;
//! readers copy a payload out under the read lock.

use std::collections::VecDeque;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use bytes::Bytes;
use sealog_wal::format::EmbedderHeader;
use sealog_wal::Kind;

use super::entry::LogEntry;

/// Bytes charged per cached entry besides its payload's allocation (its slot and the
/// allocator's header, roughly).
const ENTRY_OVERHEAD_BYTES: u64 = 64;

/// A payload the cache holds: the client's own buffer, or a reference to its shared bytes.
pub(crate) enum CachedPayload {
    Owned(Vec<u8>),
    Shared(Bytes),
}

impl CachedPayload {
    fn bytes(&self) -> &[u8] {
        match self {
            CachedPayload::Owned(bytes) => bytes,
            CachedPayload::Shared(bytes) => bytes,
        }
    }

    /// What the entry costs the cache's budget.
    fn charge(&self) -> u64 {
        let allocation = match self {
            CachedPayload::Owned(bytes) => bytes.capacity(),
            CachedPayload::Shared(bytes) => bytes.len(),
        };
        allocation as u64 + ENTRY_OVERHEAD_BYTES
    }
}

/// An entry the cache holds: its kind and embedder header, and the payload the client handed
/// over.
pub(crate) struct CachedEntry {
    pub(crate) kind: Kind,
    pub(crate) header: EmbedderHeader,
    pub(crate) payload: CachedPayload,
}

impl CachedEntry {
    fn charge(&self) -> u64 {
        self.payload.charge()
    }

    fn to_entry(&self, lsn: u64) -> LogEntry {
        LogEntry {
            lsn,
            kind: self.kind,
            header: self.header,
            payload: self.payload.bytes().to_vec(),
        }
    }
}

/// The newest acknowledged entries, by LSN (`None`: acknowledged, not held).
pub(crate) struct RecentCache {
    capacity_bytes: u64,
    entries: RwLock<Entries>,
}

#[derive(Default)]
struct Entries {
    /// The LSN of `payloads[0]`.
    first_lsn: u64,
    payloads: VecDeque<Option<CachedEntry>>,
    /// What the held payloads are charged.
    charged_bytes: u64,
}

impl Entries {
    fn pop_front(&mut self) {
        if let Some(payload) = self.payloads.pop_front() {
            self.charged_bytes -= payload.as_ref().map_or(0, CachedEntry::charge);
            self.first_lsn += 1;
        }
    }
}

impl RecentCache {
    /// A cache of at most `capacity_bytes`; 0 keeps nothing.
    pub(crate) fn new(capacity_bytes: u64) -> RecentCache {
        RecentCache {
            capacity_bytes,
            entries: RwLock::new(Entries::default()),
        }
    }

    /// Bytes the cache may hold.
    pub(crate) fn capacity_bytes(&self) -> u64 {
        self.capacity_bytes
    }

    fn read(&self) -> RwLockReadGuard<'_, Entries> {
        self.entries
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Entries> {
        self.entries
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Adds the entries of an acknowledged batch, from `first_lsn` on (the drive thread only,
    /// in LSN order), and evicts the oldest while over the budget. Without a cache it drops
    /// them at once (where the drive used to free them).
    pub(crate) fn push(
        &self,
        first_lsn: u64,
        payloads: impl IntoIterator<Item = Option<CachedEntry>>,
    ) {
        if self.capacity_bytes == 0 {
            return;
        }
        let mut entries = self.write();
        if entries.payloads.is_empty()
            || entries.first_lsn + entries.payloads.len() as u64 != first_lsn
        {
            // Not the next LSN (the first batch, or after a trim emptied the cache).
            entries.payloads.clear();
            entries.charged_bytes = 0;
            entries.first_lsn = first_lsn;
        }
        for payload in payloads {
            entries.charged_bytes += payload.as_ref().map_or(0, CachedEntry::charge);
            entries.payloads.push_back(payload);
        }
        while entries.charged_bytes > self.capacity_bytes {
            entries.pop_front();
        }
    }

    /// A copy of the entry at `lsn`, if the cache holds it.
    pub(crate) fn copy(&self, lsn: u64) -> Option<LogEntry> {
        let entries = self.read();
        let index = usize::try_from(lsn.checked_sub(entries.first_lsn)?).ok()?;
        let entry = entries.payloads.get(index)?.as_ref()?;
        Some(entry.to_entry(lsn))
    }

    /// Whether the cache holds the payload of `lsn`.
    pub(crate) fn holds(&self, lsn: u64) -> bool {
        let entries = self.read();
        lsn.checked_sub(entries.first_lsn)
            .and_then(|index| usize::try_from(index).ok())
            .and_then(|index| entries.payloads.get(index))
            .is_some_and(Option::is_some)
    }

    /// Copies of the held payloads from `lsn` up to `last_lsn`, in order, while they are held
    /// and their bytes stay within `bytes_max` (the first is always taken): what an iterator
    /// takes from the cache at a time. How many were taken. (The drive caches a batch just
    /// before the durable tail passes it: `last_lsn` is the durable tail the caller saw.)
    pub(crate) fn copy_run(
        &self,
        (lsn, last_lsn): (u64, u64),
        bytes_max: u64,
        into: &mut VecDeque<LogEntry>,
    ) -> usize {
        let entries = self.read();
        let Some(start) = lsn
            .checked_sub(entries.first_lsn)
            .and_then(|index| usize::try_from(index).ok())
        else {
            return 0;
        };
        let mut taken = 0usize;
        let mut bytes = 0u64;
        for (index, payload) in entries
            .payloads
            .range(start.min(entries.payloads.len())..)
            .enumerate()
        {
            let Some(entry) = payload else {
                break;
            };
            if lsn + index as u64 > last_lsn {
                break;
            }
            let len = entry.payload.bytes().len() as u64;
            if taken > 0 && bytes + len > bytes_max {
                break;
            }
            bytes += len;
            into.push_back(entry.to_entry(lsn + index as u64));
            taken += 1;
        }
        taken
    }

    /// The oldest LSN the cache holds (a payload of), if any.
    pub(crate) fn first_lsn(&self) -> Option<u64> {
        let entries = self.read();
        let held = entries.payloads.iter().position(Option::is_some)?;
        Some(entries.first_lsn + held as u64)
    }

    /// Drops every entry at or below `lsn` (a durable trim: trimmed entries are never served).
    pub(crate) fn trim(&self, lsn: u64) {
        let mut entries = self.write();
        while !entries.payloads.is_empty() && entries.first_lsn <= lsn {
            entries.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owned(byte: u8, len: usize) -> Option<CachedEntry> {
        held(CachedPayload::Owned(vec![byte; len]))
    }

    fn held(payload: CachedPayload) -> Option<CachedEntry> {
        Some(CachedEntry {
            kind: Kind::Data,
            header: EmbedderHeader {
                log_id: 7,
                ..EmbedderHeader::ZERO
            },
            payload,
        })
    }

    fn payload(entry: Option<LogEntry>) -> Option<Vec<u8>> {
        entry.map(|entry| {
            assert_eq!(entry.header.log_id, 7, "the header comes back");
            entry.payload
        })
    }

    #[test]
    fn the_oldest_entries_go_first_and_unheld_ones_miss() {
        // Room for three entries of 1000 bytes (each charged 1000 + the overhead).
        let cache = RecentCache::new(3 * (1000 + ENTRY_OVERHEAD_BYTES));
        cache.push(1, [owned(1, 1000), owned(2, 1000)]);
        cache.push(3, [None, owned(4, 1000)]);
        assert_eq!(payload(cache.copy(1)), Some(vec![1; 1000]));
        assert_eq!(cache.copy(3), None, "a borrowed payload is not held");
        cache.push(
            5,
            [held(CachedPayload::Shared(Bytes::from_static(&[5; 1000])))],
        );
        // Four payloads held were over the budget: LSN 1 went.
        assert_eq!(cache.copy(1), None);
        assert_eq!(cache.first_lsn(), Some(2));
        assert_eq!(payload(cache.copy(5)), Some(vec![5; 1000]));
        let mut run = VecDeque::new();
        assert_eq!(cache.copy_run((4, 5), 1 << 20, &mut run), 2);
        assert_eq!(
            run.iter().map(|entry| entry.lsn).collect::<Vec<_>>(),
            [4, 5]
        );
        run.clear();
        assert_eq!(
            cache.copy_run((2, 5), 1, &mut run),
            1,
            "the first is always taken"
        );
        assert_eq!(cache.copy_run((3, 5), 1 << 20, &mut run), 0, "not held");
        run.clear();
        assert_eq!(
            cache.copy_run((4, 4), 1 << 20, &mut run),
            1,
            "not past the last"
        );
        cache.trim(4);
        assert_eq!((cache.copy(4), cache.first_lsn()), (None, Some(5)));
        // A batch that does not follow (after the trim emptied less than all) starts anew.
        cache.push(9, [owned(9, 10)]);
        assert_eq!(
            (payload(cache.copy(5)), payload(cache.copy(9))),
            (None, Some(vec![9; 10]))
        );
    }

    #[test]
    fn no_capacity_is_no_cache() {
        let cache = RecentCache::new(0);
        cache.push(1, [owned(1, 10)]);
        assert_eq!((cache.copy(1), cache.first_lsn()), (None, None));
    }
}
