//! The damaged walk (quarantine mode): the batch the walk broke at is read once and walked
//! record by record, so its intact records are served and its records whose header survived
//! are reported with that header; what it shows (where damage without a header begins, where
//! the log may resume) bounds the search for the batch the log resumes at; and the LSNs lost
//! with their headers are recorded and visited as one range.

use std::ops::Range;

use crate::format::{EntryHeader, Geometry, Position};
use crate::quarantine::{Damaged, DamagedHeader, DamagedRange};
use crate::replay::check::Check;
use crate::replay::probe::ResumeSearch;
use crate::replay::report::{Entry, RecoveryReport, Visit};
use crate::replay::scanner::{BreakAt, Failure, Scanner};
use crate::source::RingSource;
use crate::validate::{self, BatchExpectation, BatchFailure, WalkedRecord};

/// What walking a damaged batch's headers found ([`Scanner::walk_damaged`]).
#[derive(Clone, Debug)]
pub(super) struct DamagedWalk {
    /// Where the damaged batch starts.
    start: Position,
    /// Its first header, when that passed (so its length and writer are known).
    first: Option<EntryHeader>,
    /// The LSN after the last record whose header passed: where damage without a header
    /// begins (the LSN expected at the break, when the first header failed).
    pub(super) next_lsn: u64,
    /// Where damage without a header begins: the header that failed, the batch's end when
    /// every header passed, or the batch's start.
    stop: Position,
    /// A batch the log resumes at starts here or later: the damaged batch's end, or the block
    /// after its start when its length is not known.
    pub(super) resume_after: Position,
    /// The end of what the walk looked at (a block boundary).
    pub(super) end: Position,
    /// The first header of the batch that failed, if one did (its first one, when `first` is
    /// `None`).
    header_failure: Option<Failure>,
    /// The batch as it was read, when its first header passed.
    walked: Option<WalkedBatch>,
}

/// A damaged batch as it was read, to walk (and walk again, the same) without reading it again.
#[derive(Clone, Debug)]
struct WalkedBatch {
    expect: BatchExpectation,
    first: EntryHeader,
    bytes: Vec<u8>,
    /// Byte ranges of `bytes` that could not be read (zeros there).
    holes: Vec<Range<usize>>,
}

impl WalkedBatch {
    /// Walks the batch as it was read ([`validate::walk_batch`]), the blocks that could not be
    /// read taken as unreadable, handing `each` every record whose header passed.
    fn walk<'b>(&'b self, each: &mut dyn FnMut(WalkedRecord<'b>)) -> validate::WalkEnd {
        let unreadable = |range: Range<usize>| {
            self.holes
                .iter()
                .any(|hole| range.start < hole.end && hole.start < range.end)
        };
        validate::walk_batch(&self.expect, &self.first, &self.bytes, &unreadable, each)
    }
}

impl DamagedWalk {
    /// The walk of a damaged batch at `start` whose first header failed (`failure`): nothing
    /// of it is known but where it starts, and a batch the log resumes at starts after its
    /// first block.
    fn headerless(
        at: &BreakAt,
        start: Position,
        failure: Failure,
        block_bytes: u32,
    ) -> DamagedWalk {
        // A block inside its segment, so its end fits the segment's u32 offsets.
        let after_first_block = Position {
            offset: start.offset + block_bytes,
            ..start
        };
        DamagedWalk {
            start,
            first: None,
            next_lsn: at.expected_lsn,
            stop: start,
            resume_after: after_first_block,
            end: after_first_block,
            header_failure: Some(failure),
            walked: None,
        }
    }

    /// The damage at the cut itself, when nothing was written there and the log resumes in
    /// the rest of the cut's segment, before the batch the walk looked at: the LSNs from the
    /// cut on are lost, named by the failure found at the cut.
    pub(super) fn nothing_at_cut(at: &BreakAt) -> DamagedWalk {
        DamagedWalk {
            start: at.cut,
            first: None,
            next_lsn: at.expected_lsn,
            stop: at.cut,
            resume_after: at.cut,
            end: at.cut,
            header_failure: Some(at.cut_failure),
            walked: None,
        }
    }

    /// Where the batch the log resumes at may be, after the break `at` whose damaged batch
    /// this walk is.
    pub(super) fn search(&self, at: &BreakAt, geometry: &Geometry) -> ResumeSearch {
        // A break that names the next segment's header (nothing written at the cut, the writer
        // may have left the segment) walks that segment's first batch. A valid batch in the
        // rest of the cut's segment shows the writer did not leave it after all: the log
        // resumes there, before the walk's batch, and the damage is at the cut (a later write
        // of the next segment's header must not move it).
        let named_elsewhere =
            (at.failure.position.lap, at.failure.position.segment) != (at.cut.lap, at.cut.segment);
        let early = named_elsewhere.then(|| {
            (
                Position {
                    // A block inside the segment (the break is before its end).
                    offset: at.cut.offset + geometry.block_size_bytes,
                    ..at.cut
                },
                Position {
                    offset: u32::try_from(geometry.segment_size_bytes).unwrap_or(u32::MAX),
                    ..at.cut
                },
            )
        });
        ResumeSearch {
            after: self.resume_after,
            next_lsn: self.next_lsn,
            stop: self.stop,
            early,
            // A walked batch whose first header failed may be where the log resumes after all
            // (its LSN past the one expected: the LSNs before it lost, at the cut).
            at_start: self.first.is_none().then_some(self.start),
            cut: at.cut,
            expected_lsn: at.expected_lsn,
        }
    }
}

impl<'s, S: RingSource + ?Sized> Scanner<'s, S> {
    /// Walks the damaged batch at the break `at` record by record (quarantine mode): from its
    /// first data block (the cut, or the first data block of the segment whose header failed),
    /// when its first header passes, every record is checked alone ([`validate::walk_batch`]).
    /// The batch is read once and kept in what this returns, which says where damage without a
    /// header begins and where the log may resume; [`Scanner::visit_walked`] visits it from
    /// those bytes, so what is visited is exactly what was walked (a device may answer a read
    /// differently the second time).
    pub(super) fn walk_damaged(&mut self, at: &BreakAt) -> DamagedWalk {
        let geometry = self.geometry;
        let start = damaged_batch_start(at, geometry.segment_data_offset());
        let expect = self.expectation(start, at.expected_lsn, at.lineage_incarnation);
        let first = match self.damaged_first_header(at, start, &expect) {
            Ok(first) => first,
            Err(failure) => {
                return DamagedWalk::headerless(at, start, failure, geometry.block_size_bytes)
            }
        };
        let ring_offset = geometry.ring_offset(start);
        let limit = self.segment_end(start);
        let batch_bytes = first.batch_bytes;
        let (bytes, holes) = self.read_with_holes(ring_offset, batch_bytes as usize, limit);
        let walked = WalkedBatch {
            expect,
            first,
            bytes,
            holes,
        };
        let end = walked.walk(&mut |_| {});
        // The batch lies inside its segment (`check_batch_start`): its end fits a u32.
        let batch_end = Position {
            offset: start.offset + batch_bytes,
            ..start
        };
        DamagedWalk {
            start,
            first: Some(first),
            next_lsn: end.next_lsn,
            stop: end
                .header_failure
                .map_or(batch_end, |failure| failure.position),
            resume_after: batch_end,
            end: batch_end,
            header_failure: end.header_failure,
            walked: Some(walked),
        }
    }

    /// Reads and checks the first header of the damaged batch at `start` as the walk checks a
    /// batch's start. In the head's segment on the next lap the break's own failure stands.
    fn damaged_first_header(
        &mut self,
        at: &BreakAt,
        start: Position,
        expect: &BatchExpectation,
    ) -> Result<EntryHeader, BatchFailure> {
        let geometry = self.geometry;
        let block = geometry.block_size_bytes;
        // Nothing of the log lies in the head's segment on the next lap (see `run`).
        let forbidden = geometry.linear_segment(start) >= geometry.linear_segment(self.probe_end());
        let ring_offset = geometry.ring_offset(start);
        let limit = self.segment_end(start);
        match self.reader.read(ring_offset, block as usize, limit) {
            _ if forbidden => Err(at.failure),
            Ok(bytes) => validate::check_batch_start(expect, bytes),
            Err(_) => Err(BatchFailure {
                position: start,
                lsn: at.expected_lsn,
                check: Check::ReadError,
                inside_batch: false,
            }),
        }
    }

    /// Visits what [`Scanner::walk_damaged`] walked: intact records above the trim point are
    /// counted and visited as live entries, records whose header survived as damage.
    pub(super) fn visit_walked(
        &self,
        walk: &DamagedWalk,
        at: &BreakAt,
        report: &mut RecoveryReport,
        visit: &mut dyn FnMut(Visit<'_, '_>),
    ) {
        let Some(walked) = &walk.walked else {
            return;
        };
        let geometry = self.geometry;
        let trim_lsn = self.control.trim_lsn;
        let start = walk.start;
        let batch_bytes = walked.first.batch_bytes;
        let incarnation = walked.first.incarnation;
        walked.walk(&mut |record| match record {
            WalkedRecord::Intact(record) if record.lsn > trim_lsn => {
                report.entries += 1;
                report.payload_bytes += record.payload.len() as u64;
                visit(Visit::Entry(&Entry {
                    lsn: record.lsn,
                    kind: record.kind,
                    embedder: record.embedder,
                    payload: record.payload,
                    position: record.position,
                    batch: start,
                    batch_first_lsn: at.expected_lsn,
                    batch_bytes,
                    incarnation: record.incarnation,
                }));
            }
            WalkedRecord::PayloadDamaged {
                position,
                check,
                header,
            } if header.lsn > trim_lsn => {
                report.note_damaged(DamagedRange {
                    first_lsn: header.lsn,
                    last_lsn: header.lsn,
                    position,
                    ring_offset: geometry.ring_offset(position),
                    check,
                    header_known: true,
                });
                visit(Visit::Damaged(&Damaged {
                    first_lsn: header.lsn,
                    last_lsn: header.lsn,
                    position,
                    check,
                    header: Some(DamagedHeader {
                        kind: header.kind,
                        embedder: header.embedder,
                        payload_len: header.payload_len,
                        payload_crc: header.payload_crc,
                    }),
                    batch: start,
                    batch_first_lsn: at.expected_lsn,
                    incarnation,
                }));
            }
            // Below the trim point: released, neither visited nor reported.
            WalkedRecord::Intact(_) | WalkedRecord::PayloadDamaged { .. } => {}
        });
    }

    /// Reads `len` bytes at `ring_offset` (inside the segment ending at `limit`, at most a
    /// chunk): whole when it can, else block by block, the blocks that cannot be read left as
    /// zeros and named (as byte ranges of what is returned).
    fn read_with_holes(
        &mut self,
        ring_offset: u64,
        len: usize,
        limit: u64,
    ) -> (Vec<u8>, Vec<Range<usize>>) {
        if let Ok(bytes) = self.reader.read(ring_offset, len, limit) {
            return (bytes.to_vec(), Vec::new());
        }
        let block = self.geometry.block_size_bytes as usize;
        let mut bytes = vec![0u8; len];
        let mut holes = Vec::new();
        for from in (0..len).step_by(block) {
            let to = (from + block).min(len);
            match self
                .reader
                .read(ring_offset + from as u64, to - from, limit)
            {
                Ok(read) => bytes[from..to].copy_from_slice(read),
                Err(_) => holes.push(from..to),
            }
        }
        (bytes, holes)
    }

    /// Records the LSNs `lsns` (those above the trim point) as one range lost with its headers,
    /// and visits it: where the damaged batch's first header that failed is (its first one,
    /// which may be the break's own failure, or a read error behind a failed segment header),
    /// or the boundary after the damaged batch (an LSN gap) when every header of it passed
    /// (batches lost whole).
    pub(super) fn note_lost(
        &mut self,
        at: &BreakAt,
        walk: &DamagedWalk,
        lsns: Range<u64>,
        report: &mut RecoveryReport,
        visit: &mut dyn FnMut(Visit<'_, '_>),
    ) {
        let first_lsn = lsns.start.max(self.control.trim_lsn + 1);
        if first_lsn >= lsns.end {
            return;
        }
        let last_lsn = lsns.end - 1;
        let (position, check) = match (walk.first, walk.header_failure) {
            (_, Some(failure)) => (failure.position, failure.check),
            (None, None) => (at.failure.position, at.failure.check),
            // Every header of the damaged batch passed: the LSNs after it are missing from the
            // boundary after it on. Named as such, not by what lies there now: a writer that
            // goes on after quarantined damage at the log's end writes there, and a later open
            // must name the same damage.
            (Some(first), None) => (
                self.after_batch(walk.start, first.batch_bytes),
                Check::LsnGap,
            ),
        };
        let (batch, incarnation) = match walk.first {
            Some(first) => (walk.start, first.incarnation),
            None => (at.cut, at.lineage_incarnation),
        };
        report.note_damaged(DamagedRange {
            first_lsn,
            last_lsn,
            position,
            ring_offset: self.geometry.ring_offset(position),
            check,
            header_known: false,
        });
        visit(Visit::Damaged(&Damaged {
            first_lsn,
            last_lsn,
            position,
            check,
            header: None,
            batch,
            batch_first_lsn: at.expected_lsn,
            incarnation,
        }));
    }
}

/// Where the damaged batch at the break `at` starts: the cut, or the first data block (at
/// `data_offset`) of the segment whose header failed.
fn damaged_batch_start(at: &BreakAt, data_offset: u32) -> Position {
    let failure = at.failure;
    if failure.position.offset == 0 {
        Position {
            offset: data_offset,
            ..failure.position
        }
    } else {
        at.cut
    }
}
