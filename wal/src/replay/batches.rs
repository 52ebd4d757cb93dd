//! What the walk checks at a batch boundary, and how it takes a batch that passes: replay's
//! own rules (the segment header, the incarnation floor) around the one validator's checks of
//! the batch itself ([`crate::validate`]); whether the next segment continues the log (the
//! writer skipped this one's rest) or holds the damage a break names; and the visit of an
//! accepted batch's records.

use crate::format::{EntryHeader, Position, SegmentDefect, SegmentHeader};
use crate::replay::check::Check;
use crate::replay::report::{Entry, RecoveryReport, Visit};
use crate::replay::scanner::{Failure, GoodBatch, Scanner};
use crate::source::RingSource;
use crate::validate::{self, BatchExpectation, CheckedBatch, IncarnationRule};

impl<'s, S: RingSource + ?Sized> Scanner<'s, S> {
    /// The failure a break at `cursor` names: the one found there, unless nothing was ever
    /// written there and the writer may have moved on to the next segment, whose header is
    /// damaged or does not continue the log: then the damage is there, and that is what to name.
    pub(super) fn named_failure(
        &mut self,
        cursor: Position,
        expected_lsn: u64,
        failure: Failure,
    ) -> Failure {
        if failure.check.is_never_written()
            && !failure.inside_batch
            && cursor.offset != self.geometry.segment_data_offset()
            && self.writer_may_have_left_the_segment(cursor)
        {
            self.next_segment_damage(cursor, expected_lsn)
                .unwrap_or(failure)
        } else {
            failure
        }
    }

    /// The failure of the segment header after `cursor`'s segment, when it is damaged or
    /// unreadable, or is of the expected lap and segment but does not start at `expected_lsn`.
    fn next_segment_damage(&mut self, cursor: Position, expected_lsn: u64) -> Option<Failure> {
        let next = self.geometry.next_segment_start(cursor);
        if next > self.probe_end() {
            return None;
        }
        let header_position = Position { offset: 0, ..next };
        let check = match self.read_segment_header(next) {
            Err(Check::SegmentHeader) => Check::SegmentHeader,
            // An unreadable header may be the one the writer skipped to: the break is there,
            // and the probe decides whether the log goes on behind it (corruption) or not (a
            // torn block at most). Taking it for "not written" would cut whatever follows.
            Err(Check::ReadError) => Check::ReadError,
            Ok(header)
                if header.lap == next.lap
                    && header.segment == next.segment
                    && header.first_lsn != expected_lsn =>
            {
                Check::SegmentMismatch
            }
            _ => return None,
        };
        Some(Failure {
            position: header_position,
            lsn: expected_lsn,
            check,
            inside_batch: false,
        })
    }

    /// Whether the segment after `cursor`'s starts, on the expected lap, at `expected_lsn`,
    /// with a header written by an incarnation the log accepts at the header's own place (the
    /// floor [`Scanner::incarnation_floor`] keeps there).
    ///
    /// The incarnation matters: a segment header is written with the segment's first batch,
    /// so one left by an older incarnation that a recovery cut short (its batch torn, the
    /// header not: a clean end zeroes nothing) can name the very LSN the newer incarnation
    /// goes on with in the rest of this segment. Taken as the log's continuation, it made the
    /// walk step over this segment's rest, and a damaged batch there, acknowledged and covered
    /// by the watermarks of valid batches after it in this segment, read as a clean end: the
    /// probe started in the next segment, after them (rule 4). Such a header is stale, as
    /// every record of its incarnation there is.
    ///
    /// The floor is taken at the header block (offset 0), not at the segment's first batch: a
    /// recovery that skipped to this segment and found nothing more puts its cut at that
    /// batch, after the header it accepted, so the cut's incarnation is no floor for the
    /// header, and a crash right after that recovery's control block skips here again
    /// (rule 5).
    pub(super) fn next_segment_continues(
        &mut self,
        cursor: Position,
        expected_lsn: u64,
        lineage_incarnation: u32,
    ) -> bool {
        let next = self.geometry.next_segment_start(cursor);
        if next > self.probe_end() {
            return false;
        }
        let floor = self.incarnation_floor(Position { offset: 0, ..next }, lineage_incarnation);
        matches!(self.read_segment_header(next), Ok(header)
            if header.lap == next.lap
                && header.segment == next.segment
                && header.first_lsn == expected_lsn
                && header.incarnation >= floor)
    }

    /// Reads the header of the segment whose first data block is `first_data` (aside, leaving
    /// the chunk held as it is) and decodes it, or names the check it fails.
    fn read_segment_header(&mut self, first_data: Position) -> Result<SegmentHeader, Check> {
        let block = self.geometry.block_size_bytes;
        let offset = self.geometry.segment_ring_offset(first_data.segment);
        let limit = offset + u64::from(block);
        debug_assert!(limit <= self.reader.source.size_bytes());
        let bytes = self
            .reader
            .read_aside(offset, block as usize)
            .map_err(|_| Check::ReadError)?;
        SegmentHeader::decode(self.ring_id, bytes).map_err(|defect| match defect {
            SegmentDefect::Zeroed => Check::SegmentNotStarted,
            SegmentDefect::Magic | SegmentDefect::Version | SegmentDefect::Crc => {
                Check::SegmentHeader
            }
        })
    }

    /// Checks the whole batch at `cursor`: every rule a batch must keep to be part of the log.
    /// The segment header and the incarnation floor are replay's; everything about the batch
    /// itself is the one validator's ([`crate::validate`]).
    pub(super) fn check_batch(
        &mut self,
        cursor: Position,
        expected_lsn: u64,
        lineage_incarnation: u32,
    ) -> Result<GoodBatch, Failure> {
        let first = self.check_batch_head(cursor, expected_lsn, lineage_incarnation)?;
        let expect = self.expectation(cursor, expected_lsn, lineage_incarnation);
        self.check_records(&expect, first.batch_bytes)
    }

    /// Checks the start of the batch at `cursor`: its segment header, when it starts a
    /// segment, and its first record's header, as [`Scanner::check_batch`] does before it
    /// reads the rest. Returns that header.
    pub(super) fn check_batch_head(
        &mut self,
        cursor: Position,
        expected_lsn: u64,
        lineage_incarnation: u32,
    ) -> Result<EntryHeader, Failure> {
        let geometry = self.geometry;
        let fail = |position, lsn, check| Failure {
            position,
            lsn,
            check,
            inside_batch: false,
        };
        let header_position = Position {
            offset: 0,
            ..cursor
        };
        let segment_header = if cursor.offset == geometry.segment_data_offset() {
            let header = self
                .read_segment_header(cursor)
                .map_err(|check| fail(header_position, expected_lsn, check))?;
            if header.segment == cursor.segment && header.lap < cursor.lap {
                return Err(fail(header_position, expected_lsn, Check::SegmentStaleLap));
            }
            if header.segment != cursor.segment
                || header.lap != cursor.lap
                || header.first_lsn != expected_lsn
            {
                return Err(fail(header_position, expected_lsn, Check::SegmentMismatch));
            }
            Some(header)
        } else {
            None
        };
        let expect = self.expectation(cursor, expected_lsn, lineage_incarnation);
        let ring_offset = geometry.ring_offset(cursor);
        let limit = self.segment_end(cursor);
        let block = geometry.block_size_bytes as usize;
        let first = match self.reader.read(ring_offset, block, limit) {
            Ok(bytes) => validate::check_batch_start(&expect, bytes)?,
            Err(_) => return Err(fail(cursor, expected_lsn, Check::ReadError)),
        };
        if segment_header.is_some_and(|header| header.incarnation != first.incarnation) {
            return Err(fail(header_position, expected_lsn, Check::SegmentMismatch));
        }
        Ok(first)
    }

    /// What the validator expects of the batch at `cursor`: replay's incarnation floor there.
    pub(super) fn expectation(
        &self,
        cursor: Position,
        expected_lsn: u64,
        lineage_incarnation: u32,
    ) -> BatchExpectation {
        BatchExpectation {
            ring_id: self.ring_id,
            geometry: self.geometry,
            position: cursor,
            first_lsn: expected_lsn,
            incarnation: IncarnationRule::AtLeast(
                self.incarnation_floor(cursor, lineage_incarnation),
            ),
        }
    }

    /// Reads the batch whose first header checked out (`batch_bytes` long, within the batch
    /// limit) and checks it whole.
    fn check_records(
        &mut self,
        expect: &BatchExpectation,
        batch_bytes: u32,
    ) -> Result<GoodBatch, Failure> {
        let geometry = self.geometry;
        let cursor = expect.position;
        let ring_offset = geometry.ring_offset(cursor);
        let limit = self.segment_end(cursor);
        let batch_bytes = batch_bytes as usize;
        if self.reader.read(ring_offset, batch_bytes, limit).is_err() {
            // Find the unreadable block so the report names it (I-13: subdivide).
            let block = geometry.block_size_bytes as usize;
            let bad = (0..batch_bytes / block)
                .find(|index| {
                    let offset = ring_offset + (index * block) as u64;
                    self.reader.read(offset, block, limit).is_err()
                })
                .unwrap_or(0);
            return Err(Failure {
                position: Position {
                    // Inside the batch, itself inside the segment: fits u32.
                    offset: cursor.offset + (bad * block) as u32,
                    ..cursor
                },
                lsn: expect.first_lsn,
                check: Check::ReadError,
                inside_batch: true,
            });
        }
        let bytes = self
            .reader
            .read(ring_offset, batch_bytes, limit)
            .expect("just read");
        let checked = validate::check_batch(expect, bytes)?;
        Ok(GoodBatch {
            first_lsn: checked.first_lsn,
            bytes: checked.bytes,
            records: checked.records,
            incarnation: checked.incarnation,
            watermark: checked.watermark,
        })
    }

    /// Hands every live record of an accepted batch to `visit` and counts it.
    pub(super) fn visit_batch(
        &mut self,
        cursor: Position,
        good: GoodBatch,
        trim_lsn: u64,
        report: &mut RecoveryReport,
        visit: &mut dyn FnMut(Visit<'_, '_>),
    ) {
        self.for_each_record(cursor, good, &mut |entry| {
            if entry.lsn > trim_lsn {
                report.entries += 1;
                report.payload_bytes += entry.payload.len() as u64;
                visit(Visit::Entry(entry));
            }
        });
    }

    /// Calls `each` with every record (padding excluded) of a batch that checked out, through
    /// the validator's record iterator over the bytes the reader still holds.
    pub(super) fn for_each_record(
        &mut self,
        cursor: Position,
        good: GoodBatch,
        each: &mut dyn FnMut(&Entry<'_>),
    ) {
        let ring_offset = self.geometry.ring_offset(cursor);
        let limit = self.segment_end(cursor);
        let ring_id = self.ring_id;
        let bytes = self
            .reader
            .read(ring_offset, good.bytes as usize, limit)
            .expect("cached");
        let first_lsn = good.first_lsn;
        let batch = CheckedBatch::rechecked_from(
            ring_id,
            bytes,
            cursor,
            first_lsn,
            good.records,
            good.incarnation,
            good.watermark,
        );
        for record in batch.records() {
            each(&Entry {
                lsn: record.lsn,
                kind: record.kind,
                embedder: record.embedder,
                payload: record.payload,
                position: record.position,
                batch: cursor,
                batch_first_lsn: first_lsn,
                batch_bytes: good.bytes,
                incarnation: record.incarnation,
            });
        }
    }
}
