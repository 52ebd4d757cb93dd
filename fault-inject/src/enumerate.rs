//! Crash-state enumeration (docs/faults.md, "Crash states"): a workload runs the real drive on the
//! simulated drive (no faults, completions reordered); at every step the writes not yet
//! durable are recorded with the durable bytes, and crash images are built from them: every
//! subset of the pending writes for small windows (random subsets beyond), each write whole or
//! torn at chosen sectors. The real recovery runs on each image, and the checks are I-1 to I-4
//! against what was acknowledged at that point, idempotence (recover twice), a crash in the
//! middle of recovery's own writes, and no resurrection after new appends and a second crash
//! (the ghost-entry case). Every image a recovery opens is also replayed hinted and full, and
//! both must find the same log ([`crate::scans`]); some again with a block unreadable. Some
//! appends are all-or-nothing groups: no recovered log ends inside one. Every entry carries an
//! embedder header derived from its LSN, which must come back with it. Some images are also
//! replayed in quarantine mode (hinted and full, some with a block unreadable), which on crash
//! states must find exactly what strict replay finds, and some recovered by the real recovery
//! in quarantine mode, which must recover the same log. The
//! workloads' small rings move their tail hint every few blocks, so many cut points have a
//! hint's control write pending (counted in the summary), and their images crash around it.

use std::collections::{BTreeMap, VecDeque};
use std::ops::Range;
use std::path::Path;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sealog::{
    AppendError, DriveCore, DriveOptions, EmbedderHeader, NewEntry, RecoveryMode, Request, Ticket,
    Wait,
};
use sealog_wal::format::ENTRY_HEADER_SIZE;
use sealog_wal::{ControlBlock, Geometry, ReplayOptions, RingId};
use sealog_wal_kit::model::ModelWriter;

use crate::device::{in_flight_views, FaultConfig, SimDevice, SECTOR_BYTES};
use crate::scans::{check_quarantine, compare_scans, HintedScan};
use sealog_wal_kit::disk::{BlockFate, CrashUnit, SimDisk};

/// How many states to check and from which seed.
#[derive(Clone, Copy, Debug)]
pub struct EnumOptions {
    /// Stop after at least this many crash states.
    pub states_target: u64,
    /// The first workload seed.
    pub seed: u64,
}

/// What an enumeration checked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EnumSummary {
    /// Crash images recovered and checked.
    pub states: u64,
    /// Points in the workloads where images were built.
    pub cut_points: u64,
    /// Workloads run.
    pub workloads: u64,
    /// States also recovered a second time (idempotence).
    pub idempotence_checks: u64,
    /// States whose recovery was itself cut by a power loss, then recovered again.
    pub recovery_crashes: u64,
    /// States continued with new appends and a second crash (ghost entries).
    pub ghost_checks: u64,
    /// Images replayed hinted and full and found to hold the same log (every image a
    /// recovery opened), and of those, the ones whose hint was trusted.
    pub scans_compared: u64,
    /// Of `scans_compared`, images whose tail hint replay trusted (the rest scanned fully).
    pub scans_hinted: u64,
    /// Images compared again with a block made unreadable.
    pub scans_compared_unreadable: u64,
    /// Cut points at which a control block moving the tail hint was written but not yet
    /// durable (so their images crash around a hint write), and the states built there.
    pub hint_write_cuts: u64,
    /// States built at those cut points.
    pub hint_write_states: u64,
    /// Images also replayed in quarantine mode, hinted and full, against strict replay (with a
    /// block unreadable or not).
    pub quarantine_scans: u64,
    /// States also recovered by the real recovery in quarantine mode, with the same log.
    pub quarantine_recoveries: u64,
}

/// What the workload had acknowledged and submitted at a cut point.
#[derive(Clone)]
struct Cut {
    /// The disk at the cut: durable bytes and the writes completed but not yet flushed.
    disk: SimDisk,
    /// The writes still on the device at the cut.
    in_flight: Vec<(u64, Vec<u8>)>,
    acknowledged: u64,
    trim_lsn: u64,
}

/// Recovered entries: LSN, embedder header, payload.
type Entries = Vec<(u64, EmbedderHeader, Vec<u8>)>;

/// The embedder header the workloads give the entry they expect at `lsn` (so a header that
/// comes back on another LSN, or not at all, is caught).
fn header_for(lsn: u64) -> EmbedderHeader {
    EmbedderHeader {
        log_id: lsn % 3,
        address: lsn,
        epoch: lsn.wrapping_mul(0x9e37_79b9_7f4a_7c15),
        extra: !lsn,
    }
}

/// What one recovery left: the durable image after it, its entries, the next LSN and the trim
/// point it found.
struct Recovered {
    image: Vec<u8>,
    entries: Entries,
    next_lsn: u64,
    trim_lsn: u64,
}

fn geometry(rng: &mut ChaCha8Rng) -> Geometry {
    let block = 4096u32;
    let batch_blocks = rng.gen_range(1..=2u32);
    let window = rng.gen_range(1..=3u32);
    Geometry {
        block_size_bytes: block,
        segment_size_bytes: u64::from(rng.gen_range(6..=10u32) * block),
        segment_count: 3,
        batch_size_max_bytes: batch_blocks * block,
        window_batches_max: window,
        window_bytes_max: u64::from(window * batch_blocks * block),
    }
}

struct Enumerator {
    geometry: Geometry,
    options: DriveOptions,
    rng: ChaCha8Rng,
    seed: u64,
    payloads: BTreeMap<u64, Vec<u8>>,
    /// The all-or-nothing groups appended: first and last LSN.
    groups: Vec<(u64, u64)>,
    summary: EnumSummary,
}

impl Enumerator {
    fn device(&mut self, image: Vec<u8>) -> SimDevice {
        let geometry = self.geometry;
        SimDevice::for_ring(image, &geometry, FaultConfig::none(), self.rng.gen())
            .expect("a simulated device")
    }

    fn fail(&self, what: String) -> String {
        format!(
            "crash-state enumeration, workload seed {}: {what}",
            self.seed
        )
    }

    /// Recovers `image` with the real recovery; returns the durable image after it and the
    /// entries it holds.
    fn recover(&mut self, image: Vec<u8>) -> Result<Recovered, String> {
        self.compare_scans(&image, &[])?;
        let device = self.device(image);
        let mut core = DriveCore::recover(device, Path::new("crash-state"), &self.options)
            .map_err(|error| self.fail(format!("recovery failed: {error}")))?;
        let next_lsn = core.recovery_report().next_lsn;
        let trim_lsn = core.recovery_report().trim_lsn;
        let after = core.backend_mut().crash();
        let entries = replay_entries(&after).map_err(|error| self.fail(error))?;
        Ok(Recovered {
            image: after,
            entries,
            next_lsn,
            trim_lsn,
        })
    }

    /// Replays `image` in quarantine mode hinted and full, against strict replay
    /// ([`check_quarantine`]): a crash image holds no damage, so the same log as strict finds.
    fn check_quarantine(&mut self, image: &[u8], unreadable: &[Range<u64>]) -> Result<(), String> {
        let found = check_quarantine(image, unreadable).map_err(|what| self.fail(what))?;
        if let Ok(found) = found {
            if unreadable.is_empty() && found.report.quarantined_breaks > 0 {
                return Err(self.fail(format!(
                    "quarantine replay stepped over damage in a crash image: {:?}",
                    found.report.quarantined
                )));
            }
        }
        self.summary.quarantine_scans += 1;
        Ok(())
    }

    /// Replays `image` hinted and full ([`compare_scans`]): the same log, or a violation.
    fn compare_scans(&mut self, image: &[u8], unreadable: &[Range<u64>]) -> Result<(), String> {
        let scan = compare_scans(image, unreadable).map_err(|what| self.fail(what))?;
        if unreadable.is_empty() {
            self.summary.scans_compared += 1;
            self.summary.scans_hinted += u64::from(scan == HintedScan::Hinted);
        } else {
            self.summary.scans_compared_unreadable += 1;
        }
        Ok(())
    }

    /// I-1 to I-4 for one recovered log against the cut it came from.
    fn check_entries(&self, cut: &Cut, recovered: &Recovered) -> Result<(), String> {
        // A trim whose control block was pending may have landed: never below the cut's.
        if recovered.trim_lsn < cut.trim_lsn {
            return Err(self.fail(format!(
                "the durable trim point went back from {} to {}",
                cut.trim_lsn, recovered.trim_lsn
            )));
        }
        let entries = &recovered.entries;
        let first = recovered.trim_lsn + 1;
        for (index, (lsn, header, payload)) in entries.iter().enumerate() {
            if *lsn != first + index as u64 {
                return Err(self.fail(format!("LSNs not contiguous from {first} at {lsn}")));
            }
            if self.payloads.get(lsn) != Some(payload) {
                return Err(self.fail(format!("LSN {lsn} came back with a payload never written")));
            }
            if *header != header_for(*lsn) {
                return Err(self.fail(format!("LSN {lsn} came back with another embedder header")));
            }
        }
        let last = entries.last().map_or(recovered.trim_lsn, |entry| entry.0);
        // All or nothing: the log never ends inside a group above the trim point.
        if let Some((group_first, group_last)) = self
            .groups
            .iter()
            .find(|(group_first, group_last)| (*group_first..*group_last).contains(&last))
        {
            if *group_first > recovered.trim_lsn {
                self.summary_groups_broken(*group_first, *group_last, last)?;
            }
        }
        if last < cut.acknowledged {
            return Err(self.fail(format!(
                "acknowledged LSN {} lost: the log ends at {last}",
                cut.acknowledged
            )));
        }
        Ok(())
    }

    /// A recovered log ended inside a group: a violation of all-or-nothing.
    fn summary_groups_broken(&self, first: u64, last: u64, end: u64) -> Result<(), String> {
        Err(self.fail(format!(
            "the group of LSNs {first}..={last} came back in part: the log ends at {end}"
        )))
    }

    /// Every image of one cut point ([`crash_plans`], [`crash_image`]).
    fn images(&mut self, cut: &Cut) -> Vec<Vec<u8>> {
        crash_plans(&cut.disk, &cut.in_flight, &mut self.rng)
            .into_iter()
            .map(|plan| crash_image(&cut.disk, &cut.in_flight, plan))
            .collect()
    }

    /// Checks one crash image: recovery, I-1..I-4, and on some states idempotence, a crash
    /// during recovery, and the ghost-entry case.
    fn check_state(&mut self, cut: &Cut, image: Vec<u8>) -> Result<(), String> {
        let state = self.summary.states;
        self.summary.states += 1;
        if state % 8 == 5 {
            // The same image with one block unreadable: the hinted replay, which reads less,
            // may meet it less often, never find another log.
            let blocks = image.len() as u64 / u64::from(self.geometry.block_size_bytes);
            let block = self.rng.gen_range(0..blocks) * u64::from(self.geometry.block_size_bytes);
            let bad = block..block + u64::from(self.geometry.block_size_bytes);
            self.compare_scans(&image, std::slice::from_ref(&bad))?;
            self.check_quarantine(&image, &[bad])?;
        }
        if state % 8 == 2 {
            self.check_quarantine(&image, &[])?;
        }
        let first = self.recover(image.clone())?;
        self.check_entries(cut, &first)?;
        if state % 16 == 6 {
            self.check_quarantine_recovery(&image, &first)?;
        }
        if state % 4 == 0 {
            self.summary.idempotence_checks += 1;
            let again = self.recover(first.image.clone())?;
            if again.entries != first.entries || again.next_lsn != first.next_lsn {
                return Err(self.fail("recovering twice changed the log".to_string()));
            }
        }
        if state % 8 == 1 {
            self.check_recovery_crash(image, &first)?;
        }
        if state % 8 == 3 {
            self.summary.ghost_checks += 1;
            self.ghost_check(first)?;
        }
        Ok(())
    }

    /// A crash alone is never damage: a quarantine open of `image` recovers the same log as
    /// the strict recovery that found `first`.
    fn check_quarantine_recovery(&mut self, image: &[u8], first: &Recovered) -> Result<(), String> {
        self.summary.quarantine_recoveries += 1;
        let options = DriveOptions {
            recovery: RecoveryMode::Quarantine,
            ..self.options.clone()
        };
        let device = self.device(image.to_vec());
        let mut core = DriveCore::recover(device, Path::new("crash-state"), &options)
            .map_err(|error| self.fail(format!("quarantine recovery failed: {error}")))?;
        let report = core.recovery_report();
        if report.next_lsn != first.next_lsn || report.quarantined_breaks > 0 {
            return Err(self.fail(format!(
                "a quarantine recovery of a crash image found another log: next LSN {} \
                 (strict {}), {} breaks stepped over",
                report.next_lsn, first.next_lsn, report.quarantined_breaks
            )));
        }
        let after =
            replay_entries(&core.backend_mut().crash()).map_err(|error| self.fail(error))?;
        if after != first.entries {
            return Err(self.fail("a quarantine recovery left another log".into()));
        }
        Ok(())
    }

    /// A recovery of `image` cut by a power loss after a drawn number of its writes, then
    /// recovered again: the log is the one the uninterrupted recovery found (`first`).
    fn check_recovery_crash(&mut self, image: Vec<u8>, first: &Recovered) -> Result<(), String> {
        self.summary.recovery_crashes += 1;
        let original = image.clone();
        let mut device = self.device(image);
        let cut_after = self.rng.gen_range(0..8);
        device.lose_power_after_writes(cut_after);
        let mut interrupted =
            DriveCore::recover(device, Path::new("crash-state"), &self.options)
                .map_err(|error| self.fail(format!("interrupted recovery failed: {error}")))?;
        let image = interrupted.backend_mut().crash();
        let again = self.recover(image)?;
        if again.entries != first.entries {
            if let Ok(path) = std::env::var("SEALOG_CRASH_STATE_DUMP") {
                let _ = std::fs::write(format!("{path}.original"), &original);
                let _ = std::fs::write(format!("{path}.first"), &first.image);
            }
            let range = |entries: &Entries| {
                (
                    entries.first().map(|entry| entry.0),
                    entries.last().map(|entry| entry.0),
                )
            };
            return Err(self.fail(format!(
                "a crash after {cut_after} writes of recovery changed the log: \
                 {:?} (trim {}) became {:?} (trim {})",
                range(&first.entries),
                first.trim_lsn,
                range(&again.entries),
                again.trim_lsn
            )));
        }
        Ok(())
    }

    /// New appends over the cut, a second crash, and nothing cut the first time comes back.
    fn ghost_check(&mut self, first: Recovered) -> Result<(), String> {
        let device = self.device(first.image);
        let entries = first.entries;
        let mut core = DriveCore::recover(device, Path::new("crash-state"), &self.options)
            .map_err(|error| self.fail(format!("reopen failed: {error}")))?;
        let mut expected: BTreeMap<u64, Vec<u8>> = entries
            .iter()
            .map(|(lsn, _, payload)| (*lsn, payload.clone()))
            .collect();
        let next = core.recovery_report().next_lsn;
        let mut acknowledged = next - 1;
        let mut tickets = Vec::new();
        for (lsn, index) in (next..).zip(0..3u8) {
            let len = self.rng.gen_range(0..3000);
            let payload = vec![index ^ 0xa5; len];
            let entry = NewEntry::data(payload.clone()).with_header(header_for(lsn));
            let (request, ticket) = Request::append_group(vec![entry]);
            core.submit(request);
            expected.insert(lsn, payload);
            tickets.push(ticket);
            core.step(Wait::No);
        }
        for _ in 0..self.rng.gen_range(0..4) {
            core.step(Wait::ForCompletion);
        }
        for ticket in &tickets {
            match ticket.try_outcome() {
                Some(Ok(lsn)) => acknowledged = acknowledged.max(lsn),
                Some(Err(AppendError::RingFull { .. })) | None => break,
                Some(Err(error)) => return Err(self.fail(format!("append failed: {error}"))),
            }
        }
        let image = core.backend_mut().crash();
        let second = self.recover(image)?;
        let after = second.entries;
        for (index, (lsn, header, payload)) in after.iter().enumerate() {
            if *lsn != second.trim_lsn + 1 + index as u64 {
                return Err(self.fail(format!("after the second crash, LSN {lsn} out of place")));
            }
            if expected.get(lsn) != Some(payload) || *header != header_for(*lsn) {
                return Err(self.fail(format!(
                    "after the second crash, LSN {lsn} holds bytes never written for it: a ghost"
                )));
            }
        }
        if after.last().map_or(second.trim_lsn, |entry| entry.0) < acknowledged {
            return Err(self.fail("after the second crash, an acknowledged entry is lost".into()));
        }
        Ok(())
    }
}

/// One crash image of a cut point: which of its pending writes land (a bit per write, in
/// [`SimDisk::crash`]'s order: the unflushed ones, then those in flight), and at most one of
/// them torn after this many sectors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CrashPlan {
    /// The writes that land, a bit each (write `i` is bit `i % 32`).
    pub subset: u32,
    /// The write torn, and the sectors of it that land.
    pub torn: Option<(usize, usize)>,
}

/// Every image of one cut point, as plans: each subset of the pending writes (all of them up
/// to 4 writes, 16 random subsets beyond), each write whole or torn after its first sector,
/// its middle sector or all but its last sector.
pub fn crash_plans(
    disk: &SimDisk,
    in_flight: &[(u64, Vec<u8>)],
    rng: &mut ChaCha8Rng,
) -> Vec<CrashPlan> {
    let sizes: Vec<usize> = disk
        .unflushed()
        .iter()
        .map(|write| write.intended.len())
        .chain(in_flight.iter().map(|(_, bytes)| bytes.len()))
        .collect();
    let count = sizes.len();
    let subsets: Vec<u32> = if count <= 4 {
        (0..1u32 << count).collect()
    } else {
        (0..16).map(|_| rng.gen::<u32>()).collect()
    };
    let mut plans = Vec::new();
    for subset in subsets {
        let included = |write: usize| subset & (1 << (write % 32)) != 0;
        // Whole writes, then one torn write at a time.
        plans.push(CrashPlan { subset, torn: None });
        let mut tears: Vec<(usize, usize)> = Vec::new();
        for write in (0..count).filter(|&write| included(write)) {
            let sectors = sizes[write] / SECTOR_BYTES;
            for tear in [1, sectors / 2, sectors.saturating_sub(1)] {
                if tear > 0 && tear < sectors && !tears.contains(&(write, tear)) {
                    tears.push((write, tear));
                }
            }
        }
        plans.extend(tears.into_iter().map(|torn| CrashPlan {
            subset,
            torn: Some(torn),
        }));
    }
    plans
}

/// The image `plan` leaves of a cut point: the disk's own crash image
/// ([`SimDisk::crash`]), with the fates chosen by the plan rather than drawn.
pub fn crash_image(disk: &SimDisk, in_flight: &[(u64, Vec<u8>)], plan: CrashPlan) -> Vec<u8> {
    let in_flight = in_flight_views(in_flight);
    let included = |write: usize| plan.subset & (1 << (write % 32)) != 0;
    disk.crash(&in_flight, SECTOR_BYTES, &mut |unit: CrashUnit| {
        let kept = match plan.torn {
            Some((torn, sectors)) if torn == unit.write => unit.unit < sectors,
            _ => true,
        };
        if included(unit.write) && kept {
            BlockFate::New
        } else {
            BlockFate::Old
        }
    })
}

/// The live entries of a ring image, by the pure replay.
fn replay_entries(image: &[u8]) -> Result<Entries, String> {
    let mut entries = Vec::new();
    let mut source = image;
    sealog_wal::replay(&mut source, &ReplayOptions::default(), &mut |entry| {
        entries.push((entry.lsn, entry.embedder, entry.payload.to_vec()))
    })
    .map_err(|error| format!("replay after recovery failed: {error}"))?;
    Ok(entries)
}

/// Runs workloads from `options.seed` on until at least `options.states_target` crash states
/// were checked.
pub fn enumerate(options: &EnumOptions) -> Result<EnumSummary, String> {
    let mut summary = EnumSummary::default();
    let mut seed = options.seed;
    while summary.states < options.states_target {
        summary = workload(seed, summary, options.states_target)?;
        summary.workloads += 1;
        seed += 1;
    }
    Ok(summary)
}

/// One workload, checking the crash states of its cut points until `target` states in all
/// were checked (or the ring filled); returns the summary with its counts added.
fn workload(seed: u64, summary: EnumSummary, target: u64) -> Result<EnumSummary, String> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let geometry = geometry(&mut rng);
    let image = ModelWriter::format(geometry, RingId(*b"crash-state-ring"));
    let mut enumerator = Enumerator {
        geometry,
        options: DriveOptions::default(),
        rng,
        seed,
        payloads: BTreeMap::new(),
        groups: Vec::new(),
        summary,
    };
    let device = enumerator.device(image);
    let mut core = DriveCore::recover(device, Path::new("crash-state"), &enumerator.options)
        .map_err(|error| format!("workload seed {seed}: open failed: {error}"))?;
    let mut next_lsn = 1u64;
    let mut acknowledged = 0u64;
    let mut trim_lsn = 0u64;
    let mut tickets = VecDeque::new();
    for step in 0..60u64 {
        if enumerator.summary.states >= target {
            break;
        }
        enumerator.submit_appends(&mut core, &mut next_lsn, &mut tickets);
        if step % 7 == 6 && acknowledged > trim_lsn + 2 {
            let (request, _reply) = Request::trim(acknowledged - 2);
            core.submit(request);
        }
        core.step(if enumerator.rng.gen_bool(0.3) {
            Wait::ForCompletion
        } else {
            Wait::No
        });
        if enumerator.collect(&mut tickets, &mut acknowledged)? {
            return Ok(enumerator.summary);
        }
        trim_lsn = trim_lsn.max(core_trim(&core));
        let cut = Cut {
            disk: core.backend_mut().disk().clone(),
            in_flight: core.backend_mut().in_flight_writes(),
            acknowledged,
            trim_lsn,
        };
        enumerator.check_cut(&cut)?;
    }
    Ok(enumerator.summary)
}

impl Enumerator {
    /// Submits up to two appends: each one entry, or (one time in four) an all-or-nothing
    /// group of two or three within the batch limit.
    fn submit_appends(
        &mut self,
        core: &mut DriveCore<SimDevice>,
        next_lsn: &mut u64,
        tickets: &mut VecDeque<Ticket>,
    ) {
        for _ in 0..self.rng.gen_range(0..3) {
            // One entry, or (one time in four) an all-or-nothing group of two or three
            // within the batch limit.
            let group = if self.rng.gen_bool(0.25) {
                self.rng.gen_range(2..=3u64)
            } else {
                1
            };
            let limit = self.geometry.batch_size_max_bytes as usize / group as usize;
            let mut entries = Vec::new();
            for lsn in *next_lsn..*next_lsn + group {
                let len = self.rng.gen_range(0..2500.min(limit - ENTRY_HEADER_SIZE));
                let mut payload = vec![0u8; len];
                self.rng.fill(&mut payload[..]);
                self.payloads.insert(lsn, payload.clone());
                entries.push(NewEntry::data(payload).with_header(header_for(lsn)));
            }
            if group > 1 {
                self.groups.push((*next_lsn, *next_lsn + group - 1));
            }
            let (request, ticket) = Request::append_group(entries);
            core.submit(request);
            *next_lsn += group;
            tickets.push_back(ticket);
        }
    }

    /// Takes the answered tickets from the front, moving `acknowledged` on; returns whether
    /// the ring filled, which ends the workload.
    fn collect(
        &mut self,
        tickets: &mut VecDeque<Ticket>,
        acknowledged: &mut u64,
    ) -> Result<bool, String> {
        while let Some(outcome) = tickets.front().and_then(|ticket| ticket.try_outcome()) {
            tickets.pop_front();
            match outcome {
                // A group's ticket yields its first LSN; its last is what is acknowledged.
                Ok(first) => {
                    *acknowledged = self
                        .groups
                        .iter()
                        .find(|group| group.0 == first)
                        .map_or(first, |group| group.1)
                }
                // A full ring ends the workload: LSNs after it no longer match submissions.
                Err(AppendError::RingFull { .. }) => return Ok(true),
                Err(error) => {
                    return Err(format!(
                        "workload seed {}: append failed: {error}",
                        self.seed
                    ))
                }
            }
        }
        Ok(false)
    }

    /// Checks every crash image of one cut point.
    fn check_cut(&mut self, cut: &Cut) -> Result<(), String> {
        self.summary.cut_points += 1;
        let hint_pending = hint_write_pending(cut, &self.geometry);
        self.summary.hint_write_cuts += u64::from(hint_pending);
        for image in self.images(cut) {
            self.summary.hint_write_states += u64::from(hint_pending);
            self.check_state(cut, image)?;
        }
        Ok(())
    }
}

/// Whether a control block that moves the tail hint is among the writes not yet durable at
/// `cut` (completed or on the device): the images of this cut crash around a hint write.
fn hint_write_pending(cut: &Cut, geometry: &Geometry) -> bool {
    let Ok(durable) = sealog_wal::read_control(&mut cut.disk.durable()) else {
        return false;
    };
    let control_area = geometry.control_area_bytes();
    let pending = cut
        .disk
        .unflushed()
        .iter()
        .map(|write| (write.ring_offset, write.intended.as_slice()))
        .chain(
            cut.in_flight
                .iter()
                .map(|(offset, bytes)| (*offset, bytes.as_slice())),
        );
    pending
        .filter(|(offset, _)| *offset < control_area)
        .filter_map(|(_, bytes)| ControlBlock::decode(bytes).ok())
        .any(|written| written.tail_hint != durable.tail_hint)
}

/// The durable trim point the drive works with (a trim counts once its control block is
/// durable).
fn core_trim(core: &DriveCore<SimDevice>) -> u64 {
    core.durable_trim_lsn()
}
