//! Property tests of replay against a model of what was acknowledged. Random workloads
//! (appends of random sizes, pipelined batches, flushes, tail markers, trims that let the ring
//! wrap lap after lap) run on the reference writer; then the test pulls the power with a random
//! fate for every block of every unflushed write (new, old, zeros, garbage, partly new), damages
//! acknowledged data, or both, replays, and checks the recovery rules:
//!
//! - after a crash alone, replay never fails: every acknowledged entry comes back byte for
//!   byte, followed at most by a contiguous run of submitted, unacknowledged ones; and after a
//!   writer reopens and appends, the next crash keeps the same promise (no ghost entries);
//! - damage to an acknowledged entry that a later durable batch's watermark covers (a bit flip
//!   anywhere in its header or payload, or a zeroed block) is reported as corruption naming its
//!   LSN, in every case; the truncating mode cuts there and reports what it dropped;
//! - quarantine mode, with such damage in one to three batches (bit flips, a zeroed header
//!   block, a batch's write lost whole): every acknowledged entry outside the damaged ranges it
//!   reports comes back byte for byte, in LSN order; every damaged acknowledged LSN lies inside
//!   a reported range, with the header it was written with where only its payload was hit;
//!   nothing comes back that was never appended; hinted and full replay agree; and after a
//!   writer's reopen and new appends, quarantine reports the same damage and strict replay
//!   still fails on it.
//!
//! `PROPTEST_CASES` raises the number of cases for a longer run.

mod common;

use common::*;
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use sealog_wal::format::ENTRY_HEADER_SIZE;
use sealog_wal::{
    replay_visiting, Check, Damaged, Geometry, Outcome, ReplayError, ReplayOptions, ScanPolicy,
    Visit,
};
use sealog_wal_kit::model::{BlockFate, ModelError, ModelWriter};

/// A deterministic generator for the choices inside one case (SplitMix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound.max(1)
    }

    fn fate(&mut self) -> BlockFate {
        match self.below(10) {
            0..=3 => BlockFate::New,
            4..=5 => BlockFate::Old,
            6 => BlockFate::Zero,
            7 => BlockFate::Garbage(self.next()),
            _ => BlockFate::PartlyNew(self.below(8) as u32),
        }
    }
}

#[derive(Clone, Debug)]
enum Op {
    /// One append call: records of these payload lengths (may become several batches).
    Append(Vec<usize>),
    Flush,
    TailMarker,
    /// Trim up to this many entries behind the acknowledged LSN.
    Trim(u64),
    /// Pull the power, check, and reopen with a new incarnation.
    CrashAndReopen(u64),
}

fn payload_len() -> impl Strategy<Value = usize> {
    prop_oneof![
        4 => 0usize..200,
        3 => 200usize..3000,
        1 => 3000usize..=16_320,
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => prop::collection::vec(payload_len(), 1..6).prop_map(Op::Append),
        3 => Just(Op::Flush),
        1 => Just(Op::TailMarker),
        2 => (0u64..20).prop_map(Op::Trim),
        1 => any::<u64>().prop_map(Op::CrashAndReopen),
    ]
}

fn geometry() -> impl Strategy<Value = Geometry> {
    (2u32..=4, 1u32..=3).prop_map(|(batch_blocks, window_batches)| Geometry {
        batch_size_max_bytes: batch_blocks * BLOCK as u32,
        window_batches_max: window_batches,
        window_bytes_max: u64::from(window_batches * batch_blocks) * BLOCK as u64,
        ..small_geometry()
    })
}

/// The test's side of the story: what was submitted and acknowledged since the last recovery.
struct Harness {
    writer: ModelWriter,
    /// Payload of every LSN recovered or submitted in this incarnation, by LSN.
    payloads: std::collections::BTreeMap<u64, Vec<u8>>,
    trim_lsn: u64,
    salt: u64,
}

impl Harness {
    fn new(geometry: Geometry) -> Harness {
        Harness {
            writer: new_writer(geometry),
            payloads: Default::default(),
            trim_lsn: 0,
            salt: 1,
        }
    }

    fn append(&mut self, lens: &[usize]) {
        let first = self.writer.next_lsn();
        let payloads: Vec<Vec<u8>> = lens
            .iter()
            .enumerate()
            .map(|(index, &len)| {
                let len = len.min(self.writer.geometry().payload_size_max_bytes() as usize);
                payload(first + index as u64, self.salt, len)
            })
            .collect();
        let refs: Vec<&[u8]> = payloads.iter().map(Vec::as_slice).collect();
        let lsns = match self.writer.append(&refs) {
            Ok(lsns) => lsns,
            Err(ModelError::RingFull { submitted, .. }) => {
                // Backpressure: make everything durable, trim it all, and submit the rest.
                self.writer.flush();
                self.trim_lsn = self.writer.acked_lsn();
                self.writer.trim(self.trim_lsn);
                let rest = &refs[submitted.len()..];
                let mut lsns = submitted;
                lsns.extend(self.writer.append(rest).expect("an emptied ring has room"));
                lsns
            }
            Err(error) => panic!("append failed: {error}"),
        };
        for (lsn, payload) in lsns.into_iter().zip(payloads) {
            self.payloads.insert(lsn, payload);
        }
    }

    fn run(&mut self, op: &Op) -> Result<(), TestCaseError> {
        match op {
            Op::Append(lens) => self.append(lens),
            Op::Flush => self.writer.flush(),
            Op::TailMarker => {
                if self.writer.tail_marker().is_err() {
                    self.writer.flush();
                }
            }
            Op::Trim(behind) => {
                let lsn = self
                    .writer
                    .acked_lsn()
                    .saturating_sub(*behind)
                    .max(self.trim_lsn);
                self.writer.trim(lsn);
                self.trim_lsn = lsn;
            }
            Op::CrashAndReopen(seed) => {
                let mut rng = Rng(*seed);
                let image = self.writer.crash(&mut |_, _| rng.fate());
                let (report, entries) = self.check_crash_image(&image)?;
                check_crash_during_recovery(&image, &report, &entries, &mut rng)?;
                let (writer, _, recovered) =
                    ModelWriter::open(image, &strict()).expect("a crash image reopens");
                prop_assert_eq!(&recovered, &entries);
                self.writer = writer;
                self.payloads = entries.into_iter().collect();
                self.salt += 1;
            }
        }
        Ok(())
    }

    /// Replays a crash image (no drive faults) and checks rules 1-4 against the model.
    fn check_crash_image(&self, image: &[u8]) -> Result<Checked, TestCaseError> {
        let (result, entries) = replay_image(image, &strict());
        let report = match result {
            Ok(report) => report,
            Err(error) => return Err(TestCaseError::fail(format!("crash image failed: {error}"))),
        };
        prop_assert!(matches!(report.outcome, Outcome::Clean | Outcome::TornTail));
        let acked = self.writer.acked_lsn();
        let first = self.trim_lsn + 1;
        // Every acknowledged live entry, byte for byte, in order.
        for lsn in first..=acked {
            let index = (lsn - first) as usize;
            prop_assert!(index < entries.len(), "acknowledged LSN {} lost", lsn);
            prop_assert_eq!(entries[index].0, lsn);
            prop_assert_eq!(
                &entries[index].1,
                &self.payloads[&lsn],
                "payload of LSN {}",
                lsn
            );
        }
        // Then only submitted entries, contiguous, nothing fabricated.
        assert_contiguous(&entries);
        if let Some((lsn, _)) = entries.first() {
            prop_assert_eq!(*lsn, first);
        }
        for (lsn, bytes) in &entries {
            prop_assert_eq!(
                Some(bytes),
                self.payloads.get(lsn),
                "LSN {} not as submitted",
                lsn
            );
        }
        prop_assert_eq!(report.next_lsn, first + entries.len() as u64);
        // The iterator re-reads the same log.
        let mut source = image;
        let iterated: Vec<(u64, Vec<u8>)> = sealog_wal::entries(&mut source, &report, &strict())
            .map(|entry| entry.map(|entry| (entry.lsn, entry.payload)))
            .collect::<Result<_, _>>()
            .map_err(|error| TestCaseError::fail(format!("iterator: {error}")))?;
        prop_assert_eq!(&iterated, &entries);
        Ok((report, entries))
    }
}

/// A replay's report and the entries it visited.
type Checked = (sealog_wal::RecoveryReport, Vec<(u64, Vec<u8>)>);

/// Rule 5: a crash during recovery's own writes (the invalidation of the dirty region, done
/// in part; the control block with the new incarnation, torn or not written) loses nothing
/// more: replaying that image recovers exactly the same entries.
fn check_crash_during_recovery(
    image: &[u8],
    report: &sealog_wal::RecoveryReport,
    entries: &[(u64, Vec<u8>)],
    rng: &mut Rng,
) -> Result<(), TestCaseError> {
    let geometry = report.control.geometry;
    let mut partial = image.to_vec();
    if let Some(invalidate) = report.invalidate {
        let blocks: Vec<u64> = invalidate
            .ranges(&geometry)
            .into_iter()
            .flat_map(|(offset, len)| {
                (0..len / BLOCK as u64).map(move |i| offset + i * BLOCK as u64)
            })
            .collect();
        let done = rng.below(blocks.len() as u64 + 1) as usize;
        for &block in &blocks[..done] {
            partial[block as usize..block as usize + BLOCK].fill(0);
        }
    }
    // The control write of the new incarnation goes to the copy not current now; tear it.
    let slot = ((report.control.sequence + 1) % 2) as usize * BLOCK;
    sealog_wal_kit::model::fill_garbage(&mut partial[slot..slot + 64], rng.next());
    let (result, again) = replay_image(&partial, &strict());
    prop_assert!(
        result.is_ok(),
        "replay after a crash during recovery: {:?}",
        result.err()
    );
    prop_assert_eq!(again.as_slice(), entries);
    Ok(())
}

/// How an acknowledged record is damaged.
#[derive(Clone, Copy, Debug)]
enum Damage {
    /// Flip one bit at this index of the record's bytes (header and payload).
    FlipBit(u64),
    /// Zero the block holding the record's header.
    ZeroHeaderBlock,
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        3 => any::<u64>().prop_map(Damage::FlipBit),
        1 => Just(Damage::ZeroHeaderBlock),
    ]
}

/// How quarantine's damage hits an acknowledged batch.
#[derive(Clone, Copy, Debug)]
enum BatchDamage {
    /// Flip one bit at this index of one of its records (header or payload), the record
    /// picked by the second number.
    FlipBit(u64, u64),
    /// Zero the block holding one of its records' header.
    ZeroHeaderBlock(u64),
    /// Its write lost whole: zeros over all of it.
    LoseWrite,
}

fn batch_damage() -> impl Strategy<Value = BatchDamage> {
    prop_oneof![
        4 => (any::<u64>(), any::<u64>()).prop_map(|(bit, pick)| BatchDamage::FlipBit(bit, pick)),
        1 => any::<u64>().prop_map(BatchDamage::ZeroHeaderBlock),
        1 => Just(BatchDamage::LoseWrite),
    ]
}

fn quarantine_options() -> ReplayOptions {
    ReplayOptions {
        mode: sealog_wal::RecoveryMode::Quarantine,
        ..ReplayOptions::default()
    }
}

/// A quarantine replay of `image`: the report, the live entries and the damage, checked to be
/// what a full scan finds too.
fn quarantine_replay(image: &[u8]) -> Result<Quarantined, TestCaseError> {
    let run = |scan| {
        let options = ReplayOptions {
            mode: sealog_wal::RecoveryMode::Quarantine,
            scan,
            ..ReplayOptions::default()
        };
        let mut source = image;
        let mut entries = Vec::new();
        let mut damaged = Vec::new();
        let report = replay_visiting(&mut source, &options, &mut |visited| match visited {
            Visit::Entry(entry) => entries.push((entry.lsn, entry.payload.to_vec())),
            Visit::Damaged(range) => damaged.push(*range),
        });
        (report, entries, damaged)
    };
    let (hinted, entries, damaged) = run(ScanPolicy::Hinted);
    let (full, full_entries, full_damaged) = run(ScanPolicy::Full);
    let report = hinted.map_err(|error| TestCaseError::fail(format!("quarantine: {error}")))?;
    let full = full.map_err(|error| TestCaseError::fail(format!("full quarantine: {error}")))?;
    prop_assert_eq!(&entries, &full_entries, "hinted and full serve the same");
    prop_assert_eq!(
        &damaged,
        &full_damaged,
        "hinted and full find the same damage"
    );
    prop_assert_eq!(
        (report.next_lsn, report.next_position),
        (full.next_lsn, full.next_position)
    );
    Ok(Quarantined {
        report,
        entries,
        damaged,
    })
}

struct Quarantined {
    report: sealog_wal::RecoveryReport,
    entries: Vec<(u64, Vec<u8>)>,
    damaged: Vec<Damaged>,
}

impl Quarantined {
    fn range_of(&self, lsn: u64) -> Option<&Damaged> {
        self.damaged
            .iter()
            .find(|range| (range.first_lsn..=range.last_lsn).contains(&lsn))
    }
}

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|cases| cases.parse().ok());
    ProptestConfig {
        cases: cases.unwrap_or(3000),
        // Failing cases are kept here and replayed first on every run.
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "tests/props.proptest-regressions",
        ))),
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn crashes_never_lose_an_acknowledged_entry_nor_resurrect_a_cut_one(
        geometry in geometry(),
        ops in prop::collection::vec(op(), 1..60),
        final_crash in any::<u64>(),
    ) {
        let mut harness = Harness::new(geometry);
        for op in &ops {
            harness.run(op)?;
        }
        harness.run(&Op::CrashAndReopen(final_crash))?;
        // The reopened writer appends over the cut and crashes again: still exact.
        harness.append(&[100, 5000, 7]);
        harness.append(&[3000]);
        harness.run(&Op::CrashAndReopen(final_crash.rotate_left(17)))?;
    }

    #[test]
    fn damage_to_covered_acknowledged_data_is_always_reported(
        geometry in geometry(),
        ops in prop::collection::vec(op(), 1..40),
        pick in any::<u64>(),
        damage in damage(),
        crash_seed in any::<u64>(),
        pending_batches in 0usize..3,
    ) {
        let mut harness = Harness::new(geometry);
        for op in &ops {
            harness.run(op)?;
        }
        // Candidates: records acknowledged, live, and covered by the watermark of a batch that
        // will be durable (one more flushed batch after them).
        // At least one acknowledged batch after the workload, whatever it trimmed or reopened.
        harness.append(&[300, 40]);
        harness.writer.flush();
        let covered = harness.writer.acked_lsn();
        harness.append(&[64]);
        harness.writer.flush();
        for _ in 0..pending_batches {
            harness.append(&[1500, 20]);
        }
        let candidates: Vec<(u64, u64, u64, usize)> = harness
            .writer
            .written()
            .iter()
            .enumerate()
            .filter(|(_, batch)| {
                batch.lsns.start > harness.trim_lsn && batch.lsns.end - 1 <= covered
            })
            .flat_map(|(batch_index, batch)| {
                batch.records.iter().enumerate().map(move |(index, &(offset, bytes))| {
                    (batch.lsns.start + index as u64, offset, bytes, batch_index)
                })
            })
            .collect();
        prop_assume!(!candidates.is_empty());
        let (lsn, offset, bytes, batch_index) =
            candidates[(pick % candidates.len() as u64) as usize];
        let mut rng = Rng(crash_seed);
        let mut image = harness.writer.crash(&mut |_, _| rng.fate());
        let expected_lsn = match damage {
            Damage::FlipBit(bit) => {
                let bit = bit % (bytes * 8);
                image[(offset + bit / 8) as usize] ^= 1 << (bit % 8);
                lsn
            }
            Damage::ZeroHeaderBlock => {
                let block_start = offset / BLOCK as u64 * BLOCK as u64;
                image[block_start as usize..block_start as usize + BLOCK].fill(0);
                // The first record of the batch overlapping the zeroed block fails first.
                let batch = &harness.writer.written()[batch_index];
                let index = batch
                    .records
                    .iter()
                    .position(|&(start, len)| start + len > block_start)
                    .expect("a record overlaps");
                batch.lsns.start + index as u64
            }
        };
        let (result, _) = replay_image(&image, &strict());
        match result {
            Err(ReplayError::Corruption(found)) => {
                prop_assert_eq!(found.lsn, expected_lsn, "{}", found);
                prop_assert!(found.check != Check::ReadError);
            }
            other => {
                return Err(TestCaseError::fail(format!(
                    "damage to LSN {expected_lsn} not reported: {other:?}"
                )));
            }
        }
        let (result, entries) = replay_image(&image, &salvage());
        let report = result.expect("truncating mode always recovers");
        prop_assert_eq!(report.outcome, Outcome::Truncated);
        let dropped = report.dropped.expect("says what it dropped");
        prop_assert!(dropped.first_lsn <= expected_lsn);
        prop_assert_eq!(report.next_lsn, dropped.first_lsn);
        assert_contiguous(&entries);
        for (lsn, bytes) in &entries {
            prop_assert_eq!(Some(bytes), harness.payloads.get(lsn));
        }
        // A writer can reopen the salvaged ring, append, and replay it cleanly.
        let (mut writer, _, _) = ModelWriter::open(image, &salvage()).expect("reopens");
        writer.append(&[b"after salvage"]).expect("room");
        writer.flush();
        let (result, after) = replay_image(writer.durable(), &strict());
        let report = result.expect("clean after salvage");
        prop_assert_eq!(report.outcome, Outcome::Clean, "{:?}", report);
        prop_assert_eq!(after.last().map(|entry| entry.1.as_slice()), Some(&b"after salvage"[..]));
    }
    #[test]
    fn quarantine_serves_every_intact_entry_and_reports_every_damaged_one(
        geometry in geometry(),
        ops in prop::collection::vec(op(), 1..40),
        damages in prop::collection::vec((any::<u64>(), batch_damage()), 1..4),
        crash_seed in any::<u64>(),
        pending_batches in 0usize..3,
    ) {
        let mut harness = Harness::new(geometry);
        for op in &ops {
            harness.run(op)?;
        }
        // Acknowledged batches, and one more flushed after them whose watermark covers them.
        for _ in 0..3 {
            harness.append(&[300, 40, 700]);
            harness.writer.flush();
        }
        let covered = harness.writer.acked_lsn();
        harness.append(&[64]);
        harness.writer.flush();
        for _ in 0..pending_batches {
            harness.append(&[1500, 20]);
        }
        let candidates: Vec<usize> = harness
            .writer
            .written()
            .iter()
            .enumerate()
            .filter(|(_, batch)| {
                batch.lsns.start > harness.trim_lsn
                    && batch.lsns.end - 1 <= covered
                    && !batch.records.is_empty()
            })
            .map(|(index, _)| index)
            .collect();
        prop_assume!(!candidates.is_empty());
        let mut rng = Rng(crash_seed);
        let mut image = harness.writer.crash(&mut |_, _| rng.fate());
        // Which LSNs each damage hits, and whether their headers survive.
        let mut hit: std::collections::BTreeMap<u64, bool> = Default::default();
        let mut damaged_batches = std::collections::BTreeSet::new();
        for (pick, damage) in &damages {
            let batch_index = candidates[(pick % candidates.len() as u64) as usize];
            if !damaged_batches.insert(batch_index) {
                continue;
            }
            let batch = harness.writer.written()[batch_index].clone();
            let record_lsn = |index: usize| batch.lsns.start + index as u64;
            match *damage {
                BatchDamage::FlipBit(bit, which) => {
                    let index = (which % batch.records.len() as u64) as usize;
                    let (offset, bytes) = batch.records[index];
                    let bit = bit % (bytes * 8);
                    image[(offset + bit / 8) as usize] ^= 1 << (bit % 8);
                    let header_survives = bit / 8 >= ENTRY_HEADER_SIZE as u64;
                    hit.insert(record_lsn(index), header_survives);
                }
                BatchDamage::ZeroHeaderBlock(which) => {
                    let index = (which % batch.records.len() as u64) as usize;
                    let (offset, _) = batch.records[index];
                    let block_start = offset / BLOCK as u64 * BLOCK as u64;
                    image[block_start as usize..block_start as usize + BLOCK].fill(0);
                    // Every record overlapping the block is hit; the first of them loses its
                    // header, and nothing after it in the batch can be placed.
                    for (index, &(start, len)) in batch.records.iter().enumerate() {
                        if start + len > block_start && start < block_start + BLOCK as u64 {
                            hit.insert(record_lsn(index), false);
                        }
                    }
                }
                BatchDamage::LoseWrite => {
                    let at = batch.ring_offset as usize;
                    image[at..at + batch.bytes as usize].fill(0);
                    for lsn in batch.lsns.clone() {
                        hit.insert(lsn, false);
                    }
                }
            }
        }
        match replay_image(&image, &strict()).0 {
            Err(ReplayError::Corruption(_)) => {}
            other => {
                return Err(TestCaseError::fail(format!(
                    "strict replay must fail on the damage to {hit:?}: {other:?}"
                )))
            }
        }
        let found = quarantine_replay(&image)?;
        let acked = harness.writer.acked_lsn();
        // Every acknowledged LSN: served byte for byte, or inside a reported range.
        let served: std::collections::BTreeMap<u64, &Vec<u8>> =
            found.entries.iter().map(|(lsn, bytes)| (*lsn, bytes)).collect();
        for lsn in harness.trim_lsn + 1..=acked {
            match (served.get(&lsn), found.range_of(lsn)) {
                (Some(bytes), None) => {
                    prop_assert_eq!(*bytes, &harness.payloads[&lsn], "payload of LSN {}", lsn);
                    prop_assert!(!hit.contains_key(&lsn), "damaged LSN {} served", lsn);
                }
                (None, Some(_)) => {}
                other => {
                    return Err(TestCaseError::fail(format!(
                        "acknowledged LSN {lsn} is {other:?} (damage {hit:?})"
                    )))
                }
            }
        }
        // Every damaged acknowledged LSN is in a range; where only the payload was hit and the
        // record is the first damage of its batch, the range is that record with its header.
        for (&lsn, &header_survives) in &hit {
            let range = found
                .range_of(lsn)
                .ok_or_else(|| TestCaseError::fail(format!("damaged LSN {lsn} not reported")))?;
            let first_in_batch = !hit
                .range(..lsn)
                .any(|(earlier, _)| range.first_lsn <= *earlier);
            if header_survives && first_in_batch && range.first_lsn == lsn {
                let header = range.header.ok_or_else(|| {
                    TestCaseError::fail(format!("LSN {lsn}: its header survived: {range:?}"))
                })?;
                let payload = &harness.payloads[&lsn];
                prop_assert_eq!(header.payload_len as usize, payload.len());
                prop_assert_eq!(header.payload_crc, sealog_wal::format::payload_crc(payload));
                prop_assert_eq!(range.last_lsn, lsn);
            }
        }
        // Nothing comes back that was never appended, and LSNs come in order.
        for pair in found.entries.windows(2) {
            prop_assert!(pair[0].0 < pair[1].0, "served in LSN order");
        }
        for (lsn, bytes) in &found.entries {
            prop_assert_eq!(Some(bytes), harness.payloads.get(lsn), "LSN {} never appended", lsn);
        }
        // The writer reopens in quarantine mode, appends past the damage, and the same damage
        // is found again; strict replay still fails on it.
        let (mut writer, _, _) = ModelWriter::open(image, &quarantine_options())
            .map_err(|error| TestCaseError::fail(format!("quarantine reopen: {error}")))?;
        prop_assert_eq!(writer.next_lsn(), found.report.next_lsn);
        // The head stays at the oldest damage until a trim passes it: a full ring may have no
        // room left, and then the reopen alone is checked.
        let appended = writer.append(&[b"after quarantine"]).is_ok();
        writer.flush();
        let again = quarantine_replay(writer.durable())?;
        let damage = |damaged: &[Damaged]| -> Vec<(u64, u64, Check)> {
            damaged
                .iter()
                .map(|range| (range.first_lsn, range.last_lsn, range.check))
                .collect()
        };
        prop_assert_eq!(damage(&again.damaged), damage(&found.damaged));
        if appended {
            prop_assert_eq!(
                again.entries.last().map(|entry| entry.1.as_slice()),
                Some(&b"after quarantine"[..])
            );
        }
        match replay_image(writer.durable(), &strict()).0 {
            Err(ReplayError::Corruption(corruption)) => {
                prop_assert!(found.range_of(corruption.lsn).is_some()
                    || corruption.lsn <= harness.trim_lsn, "{}", corruption);
            }
            other => {
                return Err(TestCaseError::fail(format!(
                    "strict replay after the quarantine reopen: {other:?}"
                )))
            }
        }
    }
}
