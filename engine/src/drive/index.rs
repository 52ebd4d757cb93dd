//! The read index: where every live acknowledged entry lies. One record per acknowledged batch (its
//! place, LSN range, length and incarnation) and one span per live entry (its header's offset in
//! the batch and its payload length), so a point read fetches only the blocks holding its entry and
//! an iterator knows the batch boundaries to read ahead across. The drive thread appends to it as
//! batches are acknowledged (or as recovery replays them) and drops from its front as trims become
//! durable; readers on any thread look entries up under a read lock held only for the lookup.

use std::collections::VecDeque;

use sealog_wal::Position;

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
}

/// Bytes the index keeps per batch and per entry (for the memory it reports).
const BATCH_BYTES: usize = std::mem::size_of::<IndexedBatch>();
const SPAN_BYTES: usize = std::mem::size_of::<RecordSpan>();

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
        self.spans.extend(spans);
        self.batches.push_back(batch);
    }

    /// Adds one replayed entry: to the last batch when it is the batch the entry is in, else as
    /// a new batch.
    pub(crate) fn push_replayed(&mut self, batch: IndexedBatch, lsn: u64, span: RecordSpan) {
        match self.batches.back_mut() {
            Some(last) if last.position == batch.position => {
                last.next_lsn = lsn + 1;
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

    /// The entry at `lsn`, if it is indexed.
    pub(crate) fn record(&self, lsn: u64) -> Option<IndexedRecord> {
        let slot = lsn.checked_sub(self.spans_first_lsn)?;
        let span = *self.spans.get(usize::try_from(slot).ok()?)?;
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

    /// The oldest batch holding an entry above `lsn`.
    pub(crate) fn first_keeping(&self, lsn: u64) -> Option<IndexedBatch> {
        let first = self
            .batches
            .partition_point(|batch| batch.next_lsn <= lsn + 1);
        self.batches.get(first).copied()
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
        self.spans.drain(..spans);
        self.spans_first_lsn += spans as u64;
        if self.spans.len() < self.spans.capacity() / 4 {
            self.spans.shrink_to(self.spans.len() * 2);
        }
        if self.batches.len() < self.batches.capacity() / 4 {
            self.batches.shrink_to(self.batches.len() * 2);
        }
    }

    /// Entries indexed.
    pub(crate) fn entries(&self) -> u64 {
        self.spans.len() as u64
    }

    /// Bytes of memory the index holds (its queues' capacity).
    pub(crate) fn memory_bytes(&self) -> u64 {
        (self.batches.capacity() * BATCH_BYTES + self.spans.capacity() * SPAN_BYTES) as u64
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
}
