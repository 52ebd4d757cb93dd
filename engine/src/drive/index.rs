//! The read index: where every live acknowledged entry lies. One record per acknowledged batch (its
//! place, LSN range, length and incarnation) and one span per live entry (its header's offset in
//! the batch and its payload length), so a point read fetches only the blocks holding its entry and
//! an iterator knows the batch boundaries to read ahead across. The drive thread appends to it as
//! batches are acknowledged (or as recovery replays them) and drops from its front as trims become
//! durable; readers on any thread look entries up under a read lock held only for the lookup.
//!
//! Damage a quarantine open stepped over is part of the log: its LSNs hold a span that says so
//! (so the spans stay one per LSN, and the LSN arithmetic stays as it is), and a list of the
//! damaged records and ranges, in LSN order, says what a read of one answers and where a trim
//! that leaves some of them must put the head for the next open to find them again.

use std::collections::VecDeque;

use sealog_wal::format::{EmbedderHeader, ENTRY_HEADER_SIZE};
use sealog_wal::{Check, Position};

/// A batch in the ring, for reads and trim.
#[derive(Clone, Copy, Debug)]
pub(crate) struct IndexedBatch {
    pub(crate) position: Position,
    pub(crate) first_lsn: u64,
    pub(crate) next_lsn: u64,
    pub(crate) bytes: u32,
    pub(crate) incarnation: u32,
}

/// Where one entry lies in its batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RecordSpan {
    /// Offset of its header from the batch's first byte.
    pub(crate) offset_in_batch: u32,
    /// Its payload's length.
    pub(crate) payload_len: u32,
}

impl RecordSpan {
    /// The span of an LSN the index holds as damaged (see [`IndexedDamage`]): no record of the
    /// log is this long, so it is never taken for one.
    const DAMAGED: RecordSpan = RecordSpan {
        offset_in_batch: u32::MAX,
        payload_len: u32::MAX,
    };

    fn is_damaged(&self) -> bool {
        *self == RecordSpan::DAMAGED
    }

    /// The ring bytes of its entry, header included (none for a damaged LSN, whose length
    /// is not known).
    fn record_bytes(&self) -> u64 {
        if self.is_damaged() {
            return 0;
        }
        ENTRY_HEADER_SIZE as u64 + u64::from(self.payload_len)
    }
}

/// Damage a quarantine open stepped over: its LSNs, where the failed check is, the check, the
/// embedder header when the record's header survived, and the batch boundary a replay reaches
/// it from (where the head goes while it is the oldest thing a trim keeps).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct IndexedDamage {
    pub(crate) first_lsn: u64,
    pub(crate) last_lsn: u64,
    pub(crate) position: Position,
    pub(crate) check: Check,
    pub(crate) header: Option<EmbedderHeader>,
    pub(crate) head: Head,
}

/// Where replay starts to reach an LSN: a batch boundary, the LSN expected there, and the
/// incarnation floor a replay starting there keeps (what a control block's head records).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Head {
    pub(crate) position: Position,
    pub(crate) first_lsn: u64,
    pub(crate) incarnation: u32,
}

/// An entry found in the index: its batch and its span.
#[derive(Clone, Copy, Debug)]
pub(crate) struct IndexedRecord {
    pub(crate) lsn: u64,
    pub(crate) batch: IndexedBatch,
    pub(crate) span: RecordSpan,
}

impl IndexedRecord {
    /// Where its header lies in the ring.
    pub(crate) fn position(&self) -> Position {
        Position {
            offset: self.batch.position.offset + self.span.offset_in_batch,
            ..self.batch.position
        }
    }
}

/// Batches and entry spans of the live log, in LSN order.
#[derive(Debug, Default)]
pub(crate) struct ReadIndex {
    batches: VecDeque<IndexedBatch>,
    spans: VecDeque<RecordSpan>,
    /// The LSN of `spans[0]` (a batch's records below the trim point have no span).
    spans_first_lsn: u64,
    /// Damage a quarantine open stepped over, in LSN order (its LSNs' spans say so).
    damaged: VecDeque<IndexedDamage>,
    /// LSNs in `damaged` (each holds a damaged span).
    damaged_lsns: u64,
    /// Bytes (headers included) of the entries indexed: what the live log holds less the
    /// padding, segment headers and skipped segment ends around them.
    record_bytes: u64,
}

/// Bytes the index keeps per batch and per entry (for the memory it reports).
const BATCH_BYTES: usize = std::mem::size_of::<IndexedBatch>();
const SPAN_BYTES: usize = std::mem::size_of::<RecordSpan>();
const DAMAGE_BYTES: usize = std::mem::size_of::<IndexedDamage>();

impl ReadIndex {
    /// Adds an acknowledged (or replayed) batch whose entries from `first_indexed_lsn` on have
    /// these spans, in order. A replayed batch's head may hold trimmed entries that get none.
    pub(crate) fn push(
        &mut self,
        batch: IndexedBatch,
        first_indexed_lsn: u64,
        spans: impl IntoIterator<Item = RecordSpan>,
    ) {
        if self.spans.is_empty() {
            self.spans_first_lsn = first_indexed_lsn;
        }
        debug_assert_eq!(
            self.spans_first_lsn + self.spans.len() as u64,
            first_indexed_lsn,
            "entries are indexed contiguously"
        );
        for span in spans {
            self.record_bytes += span.record_bytes();
            self.spans.push_back(span);
        }
        self.batches.push_back(batch);
    }

    /// Adds one replayed entry: to the last batch when it is the batch the entry is in, else as
    /// a new batch.
    pub(crate) fn push_replayed(&mut self, batch: IndexedBatch, lsn: u64, span: RecordSpan) {
        match self.batches.back_mut() {
            Some(last) if last.position == batch.position => {
                last.next_lsn = lsn + 1;
                self.record_bytes += span.record_bytes();
                self.spans.push_back(span);
            }
            _ => self.push(
                IndexedBatch {
                    next_lsn: lsn + 1,
                    ..batch
                },
                lsn,
                [span],
            ),
        }
    }

    /// Adds damage a quarantine open stepped over (after the entries and damage before it, in
    /// LSN order): its LSNs' spans say so, and a read of one answers with what it holds.
    pub(crate) fn push_damaged(&mut self, damage: IndexedDamage) {
        debug_assert!(damage.first_lsn <= damage.last_lsn);
        if self.spans.is_empty() {
            self.spans_first_lsn = damage.first_lsn;
        }
        debug_assert_eq!(
            self.spans_first_lsn + self.spans.len() as u64,
            damage.first_lsn,
            "damage is indexed contiguously with the entries around it"
        );
        let lsns = damage.last_lsn - damage.first_lsn + 1;
        // Bounded by the ring: replay never reports more LSNs than the bytes between the
        // damage and where the log goes on could hold.
        self.spans
            .extend(std::iter::repeat_n(RecordSpan::DAMAGED, lsns as usize));
        self.damaged_lsns += lsns;
        self.damaged.push_back(damage);
    }

    /// The damage holding `lsn`, if a quarantine open found it damaged.
    pub(crate) fn damaged(&self, lsn: u64) -> Option<IndexedDamage> {
        if self.damaged.is_empty() {
            return None;
        }
        let found = self.damaged.partition_point(|damage| damage.last_lsn < lsn);
        self.damaged
            .get(found)
            .filter(|damage| damage.first_lsn <= lsn)
            .copied()
    }

    /// The entry at `lsn`, if it is indexed (a damaged LSN has none).
    pub(crate) fn record(&self, lsn: u64) -> Option<IndexedRecord> {
        let slot = lsn.checked_sub(self.spans_first_lsn)?;
        let span = *self.spans.get(usize::try_from(slot).ok()?)?;
        if span.is_damaged() {
            return None;
        }
        let batch = self.batch_of(lsn)?;
        Some(IndexedRecord {
            lsn,
            batch: self.batches[batch],
            span,
        })
    }

    /// Index in `batches` of the batch holding `lsn`.
    fn batch_of(&self, lsn: u64) -> Option<usize> {
        let found = self.batches.partition_point(|batch| batch.next_lsn <= lsn);
        let batch = self.batches.get(found)?;
        (batch.first_lsn <= lsn).then_some(found)
    }

    /// The batches from the one holding `lsn` on, while each follows the one before it in the
    /// ring (same lap and segment, no gap: one sequential read covers them) and their bytes
    /// stay within `bytes_max` (the first is always given). What an iterator reads ahead.
    pub(crate) fn run_from(&self, lsn: u64, bytes_max: u64, into: &mut Vec<IndexedBatch>) {
        into.clear();
        let Some(first) = self.batch_of(lsn) else {
            return;
        };
        let mut total = 0u64;
        for batch in self.batches.range(first..) {
            if let Some(last) = into.last() {
                let follows = last.position.lap == batch.position.lap
                    && last.position.segment == batch.position.segment
                    && last.position.offset + last.bytes == batch.position.offset;
                if !follows || total + u64::from(batch.bytes) > bytes_max {
                    break;
                }
            }
            total += u64::from(batch.bytes);
            into.push(*batch);
        }
    }

    /// The last indexed LSN in the segment (and lap) holding `lsn`, when a later segment
    /// holds entries: `None` while the log ends in that segment, or when `lsn` is not
    /// indexed. Batches lie in the ring in LSN order, so the later segments' batches follow
    /// that segment's: one search.
    pub(crate) fn segment_end_lsn(&self, lsn: u64) -> Option<u64> {
        let at = self.batch_of(lsn)?;
        // (lap, segment) grows along the log, so the later segments' batches are a suffix.
        let place = |batch: &IndexedBatch| (batch.position.lap, batch.position.segment);
        let segment = place(&self.batches[at]);
        let later = self
            .batches
            .partition_point(|batch| place(batch) <= segment);
        let next = self.batches.get(later)?;
        Some(next.first_lsn - 1)
    }

    /// Where the oldest thing the log keeps above `lsn` is reached from: the oldest batch
    /// holding an entry above it, or the oldest damage above it when that comes first (so a
    /// trim that leaves damage keeps the head where the next open finds it again).
    pub(crate) fn first_keeping(&self, lsn: u64) -> Option<Head> {
        let first = self
            .batches
            .partition_point(|batch| batch.next_lsn <= lsn + 1);
        let batch = self.batches.get(first).map(|batch| Head {
            position: batch.position,
            first_lsn: batch.first_lsn,
            incarnation: batch.incarnation,
        });
        let damage = self
            .damaged
            .get(
                self.damaged
                    .partition_point(|damage| damage.last_lsn <= lsn),
            )
            .map(|damage| damage.head);
        match (batch, damage) {
            (Some(batch), Some(damage)) if damage.first_lsn < batch.first_lsn => Some(damage),
            (Some(batch), _) => Some(batch),
            (None, damage) => damage,
        }
    }

    /// Drops every entry at or below `lsn` (a durable trim), and the batches holding no other:
    /// one drain of each queue (the drive holds the index's write lock meanwhile), and the
    /// memory of a queue that shrank to a quarter of its capacity goes back.
    pub(crate) fn trim(&mut self, lsn: u64) {
        let batches = self
            .batches
            .partition_point(|batch| batch.next_lsn <= lsn + 1);
        self.batches.drain(..batches);
        let trimmed = (lsn + 1).saturating_sub(self.spans_first_lsn);
        let spans = usize::try_from(trimmed).map_or(self.spans.len(), |n| n.min(self.spans.len()));
        let dropped: u64 = self
            .spans
            .drain(..spans)
            .map(|span| span.record_bytes())
            .sum();
        self.record_bytes -= dropped;
        self.spans_first_lsn += spans as u64;
        // Damage the trim passed is gone; damage it passed in part keeps the rest.
        while let Some(damage) = self.damaged.front_mut() {
            if damage.last_lsn <= lsn {
                self.damaged_lsns -= damage.last_lsn - damage.first_lsn + 1;
                self.damaged.pop_front();
            } else {
                if damage.first_lsn <= lsn {
                    self.damaged_lsns -= lsn + 1 - damage.first_lsn;
                    damage.first_lsn = lsn + 1;
                }
                break;
            }
        }
        if self.spans.len() < self.spans.capacity() / 4 {
            self.spans.shrink_to(self.spans.len() * 2);
        }
        if self.batches.len() < self.batches.capacity() / 4 {
            self.batches.shrink_to(self.batches.len() * 2);
        }
    }

    /// Bytes (headers included) of the entries indexed (damaged LSNs not counted).
    pub(crate) fn record_bytes(&self) -> u64 {
        self.record_bytes
    }

    /// Entries indexed (damaged LSNs not counted).
    pub(crate) fn entries(&self) -> u64 {
        self.spans.len() as u64 - self.damaged_lsns
    }

    /// Bytes of memory the index holds (its queues' capacity).
    pub(crate) fn memory_bytes(&self) -> u64 {
        (self.batches.capacity() * BATCH_BYTES
            + self.spans.capacity() * SPAN_BYTES
            + self.damaged.capacity() * DAMAGE_BYTES) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(segment: u32, offset: u32, first_lsn: u64, next_lsn: u64) -> IndexedBatch {
        IndexedBatch {
            position: Position {
                lap: 1,
                segment,
                offset,
            },
            first_lsn,
            next_lsn,
            bytes: 4096,
            incarnation: 1,
        }
    }

    fn span(offset_in_batch: u32) -> RecordSpan {
        RecordSpan {
            offset_in_batch,
            payload_len: 10,
        }
    }

    /// A segment ends where the first batch of a later segment (or lap) begins; the last
    /// segment of the log has no end yet.
    #[test]
    fn a_segment_ends_before_the_next_segments_first_batch() {
        let mut index = ReadIndex::default();
        index.push(batch(0, 4096, 1, 3), 1, [span(0), span(100)]);
        index.push(batch(0, 8192, 3, 6), 3, [span(0), span(100), span(200)]);
        index.push(batch(1, 4096, 6, 8), 6, [span(0), span(100)]);
        assert_eq!(index.segment_end_lsn(1), Some(5));
        assert_eq!(index.segment_end_lsn(4), Some(5));
        assert_eq!(index.segment_end_lsn(6), None);
        assert_eq!(index.segment_end_lsn(9), None);
        let record = ENTRY_HEADER_SIZE as u64 + 10;
        assert_eq!(index.record_bytes(), 7 * record);
        index.trim(2);
        assert_eq!(index.segment_end_lsn(3), Some(5));
        assert_eq!(index.record_bytes(), 5 * record);
    }

    #[test]
    fn entries_are_found_in_their_batch_until_trimmed() {
        let mut index = ReadIndex::default();
        index.push(batch(0, 4096, 1, 3), 1, [span(0), span(74)]);
        index.push(batch(0, 8192, 3, 4), 3, [span(0)]);
        index.push(batch(1, 4096, 4, 6), 4, [span(0), span(74)]);
        let second = index.record(2).expect("indexed");
        assert_eq!(second.span, span(74));
        assert_eq!(second.position().offset, 4096 + 74);
        assert_eq!(index.record(4).expect("indexed").batch.position.segment, 1);
        assert!(index.record(6).is_none() && index.record(0).is_none());
        let mut run = Vec::new();
        index.run_from(2, 1 << 20, &mut run);
        assert_eq!(
            run.len(),
            2,
            "the batch in the next segment needs a read of its own"
        );
        index.run_from(1, 4096, &mut run);
        assert_eq!(run.len(), 1, "the read-ahead limit");
        index.trim(1);
        assert!(index.record(1).is_none());
        assert_eq!(index.record(2).expect("kept").batch.first_lsn, 1);
        assert_eq!(index.first_keeping(2).expect("kept").first_lsn, 3);
        index.trim(3);
        assert_eq!(index.batches.len(), 1);
        assert_eq!(index.entries(), 2);
    }

    #[test]
    fn replayed_entries_start_where_the_trim_left_the_batch() {
        let mut index = ReadIndex::default();
        // A batch of LSNs 1..=3 whose first two were trimmed: replay visits only LSN 3.
        index.push_replayed(batch(0, 4096, 1, 1), 3, span(148));
        index.push_replayed(batch(0, 8192, 4, 4), 4, span(0));
        index.push_replayed(batch(0, 8192, 4, 4), 5, span(74));
        assert!(index.record(2).is_none());
        assert_eq!(index.record(3).expect("indexed").span, span(148));
        assert_eq!(index.record(5).expect("indexed").batch.next_lsn, 6);
    }
    /// Damage a quarantine open found: its LSNs are no entry, a lookup finds what failed, a trim
    /// that leaves some of it keeps the head where a replay reaches it, and a trim past it
    /// drops it.
    #[test]
    fn damaged_lsns_are_indexed_and_keep_the_head_until_trimmed() {
        let mut index = ReadIndex::default();
        // LSNs 1 and 2 intact, the rest of their batch (3 and 4) lost without headers, then a
        // batch of LSNs 5 and 6.
        index.push_replayed(batch(0, 4096, 1, 1), 1, span(0));
        index.push_replayed(batch(0, 4096, 1, 1), 2, span(74));
        let head = Head {
            position: batch(0, 4096, 1, 1).position,
            first_lsn: 1,
            incarnation: 1,
        };
        let damage = IndexedDamage {
            first_lsn: 3,
            last_lsn: 4,
            position: Position {
                lap: 1,
                segment: 0,
                offset: 4096 + 148,
            },
            check: Check::HeaderCrc,
            header: None,
            head,
        };
        index.push_damaged(damage);
        index.push_replayed(batch(0, 8192, 5, 5), 5, span(0));
        index.push_replayed(batch(0, 8192, 5, 5), 6, span(74));
        assert_eq!(index.entries(), 4);
        assert!(index.record(3).is_none() && index.record(4).is_none());
        assert_eq!(index.damaged(4), Some(damage));
        assert_eq!(index.damaged(5), None);
        assert_eq!(index.record(5).expect("indexed").batch.first_lsn, 5);
        // A trim to 2 leaves 3 and 4: the head stays at the batch they are reached from.
        assert_eq!(index.first_keeping(2), Some(head));
        index.trim(2);
        assert_eq!(index.first_keeping(2), Some(head));
        // A trim into the damage keeps the rest of it.
        index.trim(3);
        assert_eq!(index.damaged(3), None);
        assert_eq!(index.damaged(4).map(|damage| damage.first_lsn), Some(4));
        assert_eq!(index.entries(), 2);
        // A trim past it drops it, and the head moves to the next batch.
        index.trim(4);
        assert_eq!(index.damaged(4), None);
        assert_eq!(index.first_keeping(4).map(|head| head.first_lsn), Some(5));
        assert_eq!(index.entries(), 2);
    }
}
