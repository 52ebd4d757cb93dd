//! The probe at the break: every block from where the walk broke to where the probe stops is
//! searched for valid records of this log, and what they say (a watermark covering the LSN a
//! cut would drop, a record beyond the in-flight window, unreadable blocks the log needs, in
//! quarantine mode the batch the log resumes at) is gathered as [`Probe`], the facts the
//! decision at the break is taken on. Also where the probe stops ([`Scanner::probe_stop`]).

use memchr::memmem::Finder;

use crate::format::{EntryHeader, Geometry, Position, RingId, ENTRY_HEADER_SIZE, ENTRY_MAGIC};
use crate::layout::WriteCursor;
use crate::replay::check::{Check, Evidence};
use crate::replay::report::{FullScan, Scan};
use crate::replay::scanner::{Failure, Scanner};
use crate::replay::unreadable::{UnreadableFound, UnreadableTracker};
use crate::source::RingSource;

/// Where the walk broke: the cut, the LSN expected there, the first live LSN a cut there
/// drops, the check that failed, where the invalidation after the cut stops (and a full
/// scan's probe: [`Scanner::break_end`]), and where this scan's probe stops (`end`, or
/// sooner when the tail hint is trusted: [`Scanner::probe_stop`]).
#[derive(Clone, Copy, Debug)]
pub(super) struct Break {
    pub(super) cut: Position,
    pub(super) expected_lsn: u64,
    pub(super) drop_lsn: u64,
    pub(super) failure: Failure,
    pub(super) end: Position,
    pub(super) probe_end: Position,
    /// In quarantine mode: the batch the log may resume at, to look for among the records the
    /// probe finds.
    pub(super) resume: Option<ResumeSearch>,
}

/// What a batch the log resumes at must be: a batch start at or after `after`, with a first
/// LSN at or after `next_lsn`, and no further on than the records between `stop` and it could
/// have taken (each LSN takes at least one entry header's bytes), so a crafted LSN far ahead
/// cannot make a range of damage of any size.
///
/// `early`, when set, is a stretch before the damaged batch (the rest of the cut's segment)
/// where a batch may resume the log too, continuing the LSN expected at the cut `cut`.
#[derive(Clone, Copy, Debug)]
pub(super) struct ResumeSearch {
    pub(super) after: Position,
    pub(super) next_lsn: u64,
    pub(super) stop: Position,
    pub(super) early: Option<(Position, Position)>,
    /// The walked batch's start, when its first header failed: a batch there may resume the
    /// log too, as one in `early` does.
    pub(super) at_start: Option<Position>,
    pub(super) cut: Position,
    pub(super) expected_lsn: u64,
}

/// The batch the log resumes at after quarantined damage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Resume {
    pub(super) position: Position,
    pub(super) first_lsn: u64,
    /// It lies before the damaged batch the walk looked at (see [`ResumeSearch`]): that batch
    /// is not part of the damage.
    pub(super) before_walk: bool,
}

/// Whether `count` LSNs fit between two places `distance_bytes` apart: each takes at least an
/// entry header.
fn lsns_fit(count: u64, distance_bytes: u64) -> bool {
    u128::from(count) * ENTRY_HEADER_SIZE as u128 <= u128::from(distance_bytes)
}

/// Counts the distinct batches the probe's records belong to, in O(1) time and space per
/// record. The probe finds records in position order and a batch's records are contiguous, so
/// a record starts a new batch exactly when its batch identity (first LSN, incarnation)
/// differs from the last record's. (A batch identity seen again after another batch is counted
/// again: that only happens when a write was misdirected, and counting it makes the window
/// rule stricter, never looser.)
#[derive(Clone, Copy, Debug, Default)]
struct BatchCounter {
    last: Option<(u64, u32)>,
    batches: u64,
}

impl BatchCounter {
    /// Notes a record of the batch `(first_lsn, incarnation)` and returns the batches so far.
    fn note(&mut self, first_lsn: u64, incarnation: u32) -> u64 {
        let identity = (first_lsn, incarnation);
        if self.last != Some(identity) {
            self.last = Some(identity);
            self.batches = self.batches.saturating_add(1);
        }
        self.batches
    }
}

/// What the probe after a break found.
#[derive(Debug, Default)]
pub(super) struct Probe {
    pub(super) acked: Option<Evidence>,
    pub(super) beyond: Option<Evidence>,
    /// Valid records of this log found after the break (within the window or not).
    pub(super) records: u64,
    pub(super) lsn_max: u64,
    /// End of the furthest record found, as a position.
    pub(super) end_max: Option<Position>,
    pub(super) stale_records: u64,
    /// End of the furthest stale record (older incarnation) found: invalidation covers it.
    pub(super) stale_end_max: Option<Position>,
    /// The highest incarnation among the valid records found (stale ones excluded).
    pub(super) incarnation_max: u32,
    pub(super) unreadable: UnreadableFound,
    /// Where a hinted probe ended, when valid records found near its end carried it past the
    /// end it started with (see [`Scanner::probe`]).
    pub(super) extended_to: Option<Position>,
    /// The highest watermark among valid records of this log found after the break whose LSN
    /// could lie where it was found (see [`lsns_fit`]): the highest LSN shown to be
    /// acknowledged, bounded by the ring's size.
    pub(super) acked_lsn_max: u64,
    /// In quarantine mode: the first whole valid batch of this log after the damage.
    pub(super) resume: Option<Resume>,
}

/// The probe's state as it goes block by block: the break it probes after, where it stops
/// (moved on as it follows the log), the incarnation floor it keeps, and what it found.
struct ProbeWalk {
    at_break: Break,
    /// Where the probe stops: the break's probe end, or further once it followed the log.
    end: Position,
    /// The lineage so far: the incarnation of the last valid record of this log found.
    lineage_incarnation: u32,
    /// The batch broken at the break: its own records after an unreadable block of it are
    /// not "the log going on" (the failure is in the batch, not in a segment header).
    broken_batch: Option<u64>,
    probe: Probe,
    batches: BatchCounter,
    unreadable: UnreadableTracker,
}

impl ProbeWalk {
    /// The probe's state before its first block: nothing found, stopping at the break's
    /// probe end.
    fn new(at_break: &Break, lineage_incarnation: u32, geometry: Geometry) -> ProbeWalk {
        let failure = at_break.failure;
        ProbeWalk {
            at_break: *at_break,
            end: at_break.probe_end,
            lineage_incarnation,
            broken_batch: (failure.position.offset != 0).then_some(at_break.expected_lsn),
            probe: Probe::default(),
            batches: BatchCounter::default(),
            unreadable: UnreadableTracker::new(&failure, geometry),
        }
    }
}

/// A block the probe read: where it lies and what a header found in it must keep to.
struct BlockPlace {
    here: Position,
    block_bytes: u32,
    ring_id: RingId,
    /// The ring's payload limit: a header claiming more is no record of this ring.
    payload_max_bytes: u64,
}

/// Collects in `found` the entry headers that start in the first block of `bytes` (read at
/// `block.here`; what follows is the next block, for a header that runs into it), decode
/// with a valid CRC, claim a payload within the ring's limit, and record exactly the place
/// they were found.
fn headers_in(
    bytes: &[u8],
    block: &BlockPlace,
    finder: &Finder<'_>,
    found: &mut Vec<(Position, EntryHeader)>,
) {
    for offset in finder.find_iter(bytes) {
        if offset >= block.block_bytes as usize {
            break;
        }
        if offset + ENTRY_HEADER_SIZE > bytes.len() {
            continue;
        }
        let Ok(header) = EntryHeader::decode(block.ring_id, &bytes[offset..]) else {
            continue;
        };
        let place = Position {
            offset: block.here.offset + offset as u32,
            ..block.here
        };
        if header.position == place && u64::from(header.payload_len) <= block.payload_max_bytes {
            found.push((place, header));
        }
    }
}

impl<'s, S: RingSource + ?Sized> Scanner<'s, S> {
    /// Which scan this is and where its probe after the break at `cut` stops: at `end` (the
    /// full scan's stop, [`Scanner::break_end`]) unless the tail hint is trusted and the log
    /// did not run past it; then at the latest of the hint's limit, one in-flight window past
    /// the cut ([`Scanner::window_reach`]) and the first hint a writer opening at this cut
    /// records ([`crate::layout::WriteCursor::hint_limit`]), never past `end`. The last one
    /// makes a replay after a crash in the middle of that writer's recovery (its control block
    /// durable, nothing written yet) probe no further than this one did, so it finds nothing
    /// this one did not (rule 5, even for a ring crafted with records past the hint). Reads
    /// ahead stop there too.
    pub(super) fn probe_stop(&mut self, cut: Position, end: Position) -> (Scan, Position) {
        let limit = match self.hint {
            Ok(limit) if cut > limit => {
                return (
                    Scan::Full {
                        reason: FullScan::HintCrossed {
                            limit,
                            log_end: cut,
                        },
                    },
                    end,
                );
            }
            Ok(limit) => limit,
            Err(reason) => return (Scan::Full { reason }, end),
        };
        let next_hint = WriteCursor {
            position: cut,
            next_lsn: 0,
        }
        .hint_limit(&self.geometry);
        let probe_end = limit
            .max(self.window_reach(cut, end))
            .max(next_hint)
            .min(end);
        if probe_end < end {
            self.read_ahead_until(probe_end);
        } else {
            self.reader.ahead_stop = None;
        }
        (Scan::Hinted { limit, probe_end }, probe_end)
    }

    /// Reads every block from the break `cut` to `end` ([`Scanner::break_end`]) and collects
    /// what valid records of this log say about the break. Records are packed at any byte
    /// offset, so each block is searched for the entry magic at every offset (including a
    /// header that runs into the next block); a hit counts only if its header checks out and
    /// records exactly the place it was found. One pass, linear in the bytes probed.
    pub(super) fn probe(&mut self, at_break: &Break, lineage_incarnation: u32) -> Probe {
        let geometry = self.geometry;
        let magic = ENTRY_MAGIC.to_le_bytes();
        let finder = memchr::memmem::Finder::new(&magic);
        let mut walk = ProbeWalk::new(at_break, lineage_incarnation, geometry);
        let mut found: Vec<(Position, EntryHeader)> = Vec::new();
        let mut at = at_break.cut;
        while at < walk.end {
            if u64::from(at.offset) >= geometry.segment_size_bytes {
                at = geometry.next_segment_start(at);
                self.probe_segment_header(at, &mut walk);
                continue;
            }
            let here = at;
            at.offset += geometry.block_size_bytes;
            self.probe_block(here, &finder, &mut walk.unreadable, &mut found);
            for (place, header) in found.drain(..) {
                self.probe_record(&mut walk, place, header);
            }
        }
        walk.probe.unreadable = walk.unreadable.finish();
        walk.probe
    }

    /// Looks at the header of the segment the probe enters at `at` (its first data block).
    fn probe_segment_header(&mut self, at: Position, walk: &mut ProbeWalk) {
        // The next segment's header: an unreadable one is part of what the log may
        // need (the writer may have moved on to it), so it counts in the runs; a
        // readable one is skipped over as before (records never lie in it).
        let header = Position { offset: 0, ..at };
        let failure = walk.at_break.failure;
        let already_named = failure.check == Check::ReadError && failure.position == header;
        if at < walk.end && !already_named {
            let header_offset = self.geometry.ring_offset(header);
            let block = self.geometry.block_size_bytes;
            if self
                .reader
                .read_aside(header_offset, block as usize)
                .is_err()
            {
                walk.unreadable.unreadable_header(header);
            }
        }
    }

    /// Reads the block at `here` and collects in `found` the valid entry headers that start in
    /// it ([`headers_in`]); a block that cannot be read is noted in `unreadable`.
    fn probe_block(
        &mut self,
        here: Position,
        finder: &Finder<'_>,
        unreadable: &mut UnreadableTracker,
        found: &mut Vec<(Position, EntryHeader)>,
    ) {
        let geometry = self.geometry;
        let block = geometry.block_size_bytes;
        let ring_id = self.ring_id;
        let payload_max = u64::from(geometry.payload_size_max_bytes());
        let ring_offset = geometry.ring_offset(here);
        let limit = self.segment_end(here);
        let span = (2 * u64::from(block)).min(limit - ring_offset) as usize;
        // Read this block and the next (for straddling headers); if that fails, this block
        // alone; if that fails too, the block is unreadable. A source may fail a read once
        // and serve it the next time (or the other way round), so the bytes come from the
        // one read that succeeded, which the chunk buffer now holds.
        let len = if self.reader.read(ring_offset, span, limit).is_ok() {
            span
        } else if self.reader.read(ring_offset, block as usize, limit).is_ok() {
            block as usize
        } else {
            unreadable.unreadable(here);
            return;
        };
        let Ok(bytes) = self.reader.read(ring_offset, len, limit) else {
            unreadable.unreadable(here);
            return;
        };
        unreadable.readable();
        found.clear();
        let place = BlockPlace {
            here,
            block_bytes: block,
            ring_id,
            payload_max_bytes: payload_max,
        };
        headers_in(bytes, &place, finder, found);
    }

    /// Takes a valid record found after the break at `place` into the probe: a stale one is
    /// counted (invalidation covers it); one of this log raises the floor, shows the log going
    /// on after unreadable blocks, is accounted against the window and the watermarks, may be
    /// the batch the log resumes at, and carries a hinted probe on past its end.
    fn probe_record(&mut self, walk: &mut ProbeWalk, place: Position, header: EntryHeader) {
        let Break {
            cut,
            expected_lsn,
            drop_lsn,
            ..
        } = walk.at_break;
        let probe = &mut walk.probe;
        // Rule 2: a record of an older incarnation found after a newer one's (or at or
        // after the last recovery's cut) is stale. So is a record below the LSN the log
        // expects at the break: every record this log, or a writer after it, put past
        // the break carries that LSN or a later one (a writer's LSNs only grow along
        // the ring, and a recovery's writer goes on from its cut's LSN; a padding
        // record carries the LSN after its batch's records), so a lower one is left
        // from before, or crafted, and proves nothing about the log's end. (A
        // crafted record of the next writer's incarnation with an old LSN, a window
        // past where one open's probe stopped, made the open after that writer's
        // first block fail as corrupt.)
        let below_the_log = header.lsn < expected_lsn;
        if below_the_log
            || header.incarnation < self.incarnation_floor(place, walk.lineage_incarnation)
        {
            probe.stale_records += 1;
            let stale_end = self.record_end(place, &header);
            probe.stale_end_max = probe.stale_end_max.max(Some(stale_end));
            return;
        }
        walk.lineage_incarnation = header.incarnation;
        probe.incarnation_max = probe.incarnation_max.max(header.incarnation);
        if walk.broken_batch != Some(header.batch_first_lsn()) {
            walk.unreadable.log_goes_on(place);
        }
        self.account(cut, drop_lsn, place, &header, &mut walk.batches, probe);
        let fits = lsns_fit(
            header.lsn.saturating_sub(expected_lsn),
            self.geometry.distance_bytes(cut, place),
        );
        if fits && header.watermark < header.batch_first_lsn() {
            probe.acked_lsn_max = probe.acked_lsn_max.max(header.watermark);
        }
        if let Some(search) = walk.at_break.resume.filter(|_| probe.resume.is_none()) {
            probe.resume = self.resumes_at(&search, place, &header, walk.lineage_incarnation);
        }
        self.follow_log(walk, place, &header);
    }

    /// Whether the record at `place` starts the batch the log resumes at after quarantined
    /// damage (`search` says what that batch must be): the batch, when it does.
    fn resumes_at(
        &mut self,
        search: &ResumeSearch,
        place: Position,
        header: &EntryHeader,
        lineage_incarnation: u32,
    ) -> Option<Resume> {
        let geometry = self.geometry;
        // The first batch start past the damage that checks out whole (segment
        // header and floor included, as the walk will check it) is where the log
        // resumes. Found in position order, so a hinted and a full probe, which
        // find the same valid records of this log, resume at the same one.
        // Batches start on block boundaries, never in the head's segment on the
        // next lap (the writer never enters it).
        let early = search.at_start == Some(place)
            || search
                .early
                .is_some_and(|(from, until)| place >= from && place < until);
        let (from_lsn, stop) = if early {
            (search.expected_lsn, search.cut)
        } else {
            (search.next_lsn, search.stop)
        };
        let candidate = header.batch_index == 0
            && place.offset % geometry.block_size_bytes == 0
            && (early || place >= search.after)
            && place < self.probe_end()
            && header.lsn >= from_lsn
            && lsns_fit(header.lsn - from_lsn, geometry.distance_bytes(stop, place));
        // A batch start whose segment header and first header check out (as the
        // walk checks them) resumes the log, whether the rest of the batch does or
        // not: where it does not, the walk breaks there again and steps over that
        // damage too (its intact records served, the read error or the damaged
        // payload named), rather than folding a batch that is not lost whole into
        // this range.
        let resumes = candidate
            && self
                .check_batch_head(place, header.lsn, lineage_incarnation)
                .is_ok();
        resumes.then_some(Resume {
            position: place,
            first_lsn: header.lsn,
            before_walk: early,
        })
    }

    /// Carries a hinted probe on to a window past the record at `place`, when that reaches
    /// further than the probe was going.
    fn follow_log(&mut self, walk: &mut ProbeWalk, place: Position, header: &EntryHeader) {
        let full_end = walk.at_break.end;
        // A hinted probe follows the log past its end: a valid record of this log
        // found within a window of that end may be followed by more, which a hint
        // lost by a lying drive (its write dropped, a later hole hiding that the log
        // ran past it) would otherwise hide; so the probe reads on to a window past
        // every such record. A full scan's end is never passed. The writer never
        // ends a batch past a durable hint, so on an honest drive this reads at most
        // one window more, and only when the log's last batches lie at the hint.
        let reach = self.window_reach(self.record_end(place, header), full_end);
        if reach > walk.end {
            walk.end = reach;
            walk.probe.extended_to = Some(walk.end);
            if walk.end < full_end {
                self.read_ahead_until(walk.end);
            } else {
                self.reader.ahead_stop = None;
            }
        }
    }

    /// Records what one valid record found after the break says: its LSN and extent, whether
    /// its watermark covers the first LSN a cut would drop, and whether it lies beyond the
    /// in-flight window (in bytes, allowing for segment changes, or in batches).
    fn account(
        &self,
        cut: Position,
        drop_lsn: u64,
        at: Position,
        header: &EntryHeader,
        batches: &mut BatchCounter,
        probe: &mut Probe,
    ) {
        let geometry = self.geometry;
        probe.records += 1;
        let record_end = self.record_end(at, header);
        probe.end_max = probe.end_max.max(Some(record_end));
        if header.kind.consumes_lsn() {
            probe.lsn_max = probe.lsn_max.max(header.lsn);
        }
        if header.watermark >= drop_lsn && probe.acked.is_none() {
            probe.acked = Some(Evidence::WatermarkCovers {
                watermark: header.watermark,
                at,
                lsn: header.lsn,
            });
        }
        let window_batches = u64::from(geometry.window_batches_max);
        let batch_count = batches.note(header.batch_first_lsn(), header.incarnation);
        let distance_bytes = geometry.distance_bytes(cut, record_end);
        let crossings = geometry.linear_segment(record_end) - geometry.linear_segment(cut);
        let slack_per_segment =
            u64::from(geometry.batch_size_max_bytes) + u64::from(geometry.block_size_bytes);
        let allowance = geometry
            .window_bytes_max
            .saturating_add(crossings.saturating_mul(slack_per_segment));
        if (distance_bytes > allowance || batch_count > window_batches) && probe.beyond.is_none() {
            probe.beyond = Some(Evidence::BeyondWindow {
                at,
                lsn: header.lsn,
                distance_bytes,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::BatchCounter;

    /// The probe's window bookkeeping is a fixed-size value: however many batches it counts, it
    /// holds no list to search (the old `Vec::contains` made a crafted window of u32::MAX
    /// batches cost O(records x batches)). It counts exactly the changes of batch identity.
    #[test]
    fn the_probe_counts_window_batches_in_constant_space() {
        const _: () = assert!(std::mem::size_of::<BatchCounter>() <= 32);
        let mut counter = BatchCounter::default();
        let mut last = 0;
        // 200,000 records in 50,000 batches of four, then one more record of the last batch.
        for record in 0..200_000u64 {
            last = counter.note(1 + record / 4 * 4, 7);
        }
        assert_eq!(last, 50_000);
        assert_eq!(counter.note(1 + 49_999 * 4, 7), 50_000);
        // Same first LSN, another incarnation: another batch.
        assert_eq!(counter.note(1 + 49_999 * 4, 8), 50_001);
    }
}
