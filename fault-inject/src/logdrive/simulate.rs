//! Seeded simulation of the LogDrive layer: per seed, a small ring on the simulated drive
//! with faults on (at rates drawn from the seed): writes and flushes that fail with EIO (the
//! drive fail-stops: nothing is acknowledged after, every later operation is `Stopped`),
//! short writes, and in a quarter of the seeds writes the drive loses, misdirects or stores
//! with a bit flipped. Each round opens a store on the ring (the engine's real recovery, a
//! few opens again where recovery's own I/O failed), checks it against the model of what was
//! acknowledged ([`super::model`]), runs the workload with the reclaimer at random points,
//! and pulls the power at a point of the recorded trace (a third of the time inside a
//! `reclaim_now`), each write not yet durable then landing whole, not at all or, in hostile
//! crashes, as zeros, garbage or torn. After some crashes a bit of an acknowledged record
//! that a surviving watermark covers is flipped on the image: the next open must refuse the
//! ring naming that LSN (strict recovery), which ends the seed. After the drive damaged data,
//! an acknowledged operation may be lost, so the check is lenient once (no other bytes, no
//! value or state no operation made) and the model goes on from what the store holds.
//!
//! A seed replays the same workload and fault draws (`replay_command`); the drive thread's
//! timing decides how appends group into batches, so a replay meets the same faults at
//! nearly, not exactly, the same records.

use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sealog::{DriveOptions, Durability, OpenError};
use sealog_logdrive::{LogDriveStore, StoreOpenError};
use sealog_wal::format::ENTRY_HEADER_SIZE;
use sealog_wal::{Geometry, ReplayError, ReplayOptions, RingId};
use sealog_wal_kit::model::ModelWriter;

use super::crash_states::{windows, Windows};
use super::model::{check, Model};
use super::sim_store::{open_sim_store, ring_geometry, SimStore, TraceJournal};
use super::workload::{Progress, Workload};
use crate::device::{drawn_fate, in_flight_views, FaultConfig, FaultCounts, SECTOR_BYTES};
use crate::simulate::{surviving_watermark, Violation};
use crate::trace::{Trace, TraceDisk};

/// How a LogDrive simulation run is set up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogDriveSimOptions {
    /// Open-check-workload-crash rounds per seed.
    pub rounds: u32,
    /// Groups of operations per round.
    pub groups: u32,
}

impl Default for LogDriveSimOptions {
    fn default() -> LogDriveSimOptions {
        LogDriveSimOptions {
            rounds: 6,
            groups: 400,
        }
    }
}

impl LogDriveSimOptions {
    /// The command that replays a run.
    pub fn replay_command(&self, seed: u64) -> String {
        format!(
            "cargo run --release -p sealog-fault -- logdrive-simulate --seed {seed} --rounds {} \
             --groups {}",
            self.rounds, self.groups
        )
    }
}

/// What one run did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogDriveSimSummary {
    /// Workload rounds run.
    pub rounds: u64,
    /// Recovered stores checked against the model.
    pub recoveries: u64,
    /// Of those, checked leniently after the drive damaged data.
    pub lenient_checks: u64,
    /// Acknowledged facts checked to hold.
    pub acked_facts: u64,
    /// Rounds the drive fail-stopped in (an injected write or flush error).
    pub fail_stops: u64,
    /// Opens retried after an injected EIO in recovery's own I/O.
    pub reopens_after_eio: u64,
    /// Crashes cut inside a `reclaim_now`.
    pub crashes_in_reclaim: u64,
    /// Crashes cut inside a relocation step (a copy handed over, its ring trim not durable).
    pub crashes_in_relocation: u64,
    /// Bit rot put in an acknowledged record, and refused by the next open naming it.
    pub rot_refused: u64,
    /// Opens refused as corrupt after the drive damaged data (allowed; it ends the seed).
    pub refused_corrupt: u64,
    /// Faults the drive injected: data faults, and I/O errors.
    pub data_faults: u64,
    /// I/O errors the drive injected.
    pub io_errors: u64,
    /// Records the workloads' reclaimer relocated.
    pub relocated_records: u64,
}

impl LogDriveSimSummary {
    /// Adds `other`'s counts.
    pub fn add(&mut self, other: &LogDriveSimSummary) {
        self.rounds += other.rounds;
        self.recoveries += other.recoveries;
        self.lenient_checks += other.lenient_checks;
        self.acked_facts += other.acked_facts;
        self.fail_stops += other.fail_stops;
        self.reopens_after_eio += other.reopens_after_eio;
        self.crashes_in_reclaim += other.crashes_in_reclaim;
        self.crashes_in_relocation += other.crashes_in_relocation;
        self.rot_refused += other.rot_refused;
        self.refused_corrupt += other.refused_corrupt;
        self.data_faults += other.data_faults;
        self.io_errors += other.io_errors;
        self.relocated_records += other.relocated_records;
    }
}

/// Opens retried after an injected EIO in recovery's own I/O, per round.
const REOPENS_AFTER_EIO_MAX: u32 = 4;

/// The faults of a seed.
fn faults(seed: u64, rng: &mut ChaCha8Rng) -> FaultConfig {
    let mut config = FaultConfig::none();
    config.torn_writes = rng.gen_range(0.5..1.0);
    config.write_eio = rng.gen_range(0.0..0.0005);
    config.flush_eio = rng.gen_range(0.0..0.001);
    config.short_writes = rng.gen_range(0.0..0.0005);
    if seed % 4 == 3 {
        config.lost_writes = rng.gen_range(0.0..0.002);
        config.misdirected_writes = rng.gen_range(0.0..0.001);
        config.bit_flips = rng.gen_range(0.0..0.002);
    }
    config.latency_waits_max = 4;
    config
}

/// The LSN a refused open names, if it refused the ring as corrupt.
fn corrupt_lsn(error: &StoreOpenError) -> Option<u64> {
    match error {
        StoreOpenError::Drive(OpenError::Corrupt {
            source: ReplayError::Corruption(corruption),
            ..
        }) => Some(corruption.lsn),
        _ => None,
    }
}

/// Flips a bit of an acknowledged record that a surviving watermark covers: its LSN.
fn rot(
    image: &mut [u8],
    geometry: &Geometry,
    ring_id: RingId,
    rng: &mut ChaCha8Rng,
) -> Option<u64> {
    let control = sealog_wal::read_control(&mut &image[..]).ok()?;
    let covered = surviving_watermark(image, geometry, ring_id, control.incarnation);
    let mut entries = Vec::new();
    sealog_wal::replay(&mut &image[..], &ReplayOptions::default(), &mut |entry| {
        if entry.lsn <= covered {
            let offset = geometry.ring_offset(entry.position);
            entries.push((entry.lsn, offset, ENTRY_HEADER_SIZE + entry.payload.len()));
        }
    })
    .ok()?;
    if entries.is_empty() {
        return None;
    }
    let (lsn, offset, len) = entries[rng.gen_range(0..entries.len())];
    let bit = rng.gen_range(0..len * 8);
    image[offset as usize + bit / 8] ^= 1 << (bit % 8);
    Some(lsn)
}

/// Runs one seed.
pub fn run_logdrive_seed(
    seed: u64,
    options: &LogDriveSimOptions,
) -> Result<LogDriveSimSummary, Violation> {
    let mut run = LogDriveRun::new(seed, options);
    let mut round = 0;
    loop {
        let trace = Trace::new();
        let opened = run.open(&trace);
        let store = match &opened.store {
            Ok(store) => store.clone(),
            Err(error) => match run.refused(round, error, opened.counts())? {
                AfterRefusal::End => return Ok(run.summary),
                AfterRefusal::OpenAgain => {
                    // A transient EIO of recovery's own: the machine reboots and opens again.
                    drop(opened.store);
                    run.reopens += 1;
                    run.summary.reopens_after_eio += 1;
                    run.image = opened
                        .image
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .take()
                        .ok_or_else(|| {
                            run.violation(round, "a refused open left no image".into())
                        })?;
                    continue;
                }
            },
        };
        run.check_recovered(round, &store)?;
        if round == options.rounds {
            store.close();
            return Ok(run.summary);
        }
        let (work, journal) = run.groups(round, &store, &trace)?;
        run.crash(&work, &journal, &trace, opened.counts());
        store.close();
        drop(store);
        drop(opened);
        run.maybe_rot();
        run.summary.rounds += 1;
        run.reopens = 0;
        round += 1;
    }
}

/// One seed's run between its rounds: what it drew at the start, the image the next round
/// opens, the model of what was acknowledged, and what the rounds did so far.
struct LogDriveRun<'a> {
    seed: u64,
    options: &'a LogDriveSimOptions,
    rng: ChaCha8Rng,
    config: FaultConfig,
    geometry: Geometry,
    drive_options: DriveOptions,
    ring_id: RingId,
    image: Vec<u8>,
    model: Model,
    summary: LogDriveSimSummary,
    /// The acknowledged LSN bit rot was put in, which the next open must refuse.
    rot_at: Option<u64>,
    /// Opens retried in this round after an injected EIO in recovery's own I/O.
    reopens: u32,
}

/// What a refused open that the faults explain leads to.
enum AfterRefusal {
    /// The machine reboots and opens the image the refused open left.
    OpenAgain,
    /// The seed ends.
    End,
}

impl<'a> LogDriveRun<'a> {
    /// Draws the seed's faults, geometry and durability, and formats its ring.
    fn new(seed: u64, options: &'a LogDriveSimOptions) -> LogDriveRun<'a> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let config = faults(seed, &mut rng);
        let geometry = ring_geometry(&mut rng);
        let durability = if rng.gen_bool(0.8) {
            Durability::Fdatasync
        } else {
            Durability::Dsync
        };
        let drive_options = DriveOptions {
            durability: Some(durability),
            ..DriveOptions::default()
        };
        let ring_id = RingId(*b"logdrive-simulat");
        let image = ModelWriter::format(geometry, ring_id);
        LogDriveRun {
            seed,
            options,
            rng,
            config,
            geometry,
            drive_options,
            ring_id,
            image,
            model: Model::default(),
            summary: LogDriveSimSummary::default(),
            rot_at: None,
            reopens: 0,
        }
    }

    /// A violation of this seed in `round`, with the command that replays it.
    fn violation(&self, round: u32, what: String) -> Violation {
        Violation {
            seed: self.seed,
            what: format!("LogDrive simulation, round {round}: {what}"),
            replay: self.options.replay_command(self.seed),
        }
    }

    /// Opens a store on the image, its device recording into `trace`.
    fn open(&mut self, trace: &Arc<Trace>) -> SimStore {
        open_sim_store(
            self.image.clone(),
            self.geometry,
            self.config,
            self.rng.gen(),
            Some(trace.clone()),
            self.drive_options.clone(),
        )
    }

    /// Counts a refused open (its device injected `counts`) and says whether the seed ends
    /// or opens again: a refusal neither bit rot, damage nor an EIO explains is a violation.
    fn refused(
        &mut self,
        round: u32,
        error: &StoreOpenError,
        counts: FaultCounts,
    ) -> Result<AfterRefusal, Violation> {
        self.summary.io_errors += counts.io_errors;
        self.summary.data_faults += counts.data_faults;
        match (corrupt_lsn(error), self.rot_at) {
            (Some(lsn), Some(rotten)) if lsn == rotten => {
                self.summary.rot_refused += 1;
                return Ok(AfterRefusal::End);
            }
            (Some(_), None) if self.model.lenient => {
                self.summary.refused_corrupt += 1;
                return Ok(AfterRefusal::End);
            }
            _ => {}
        }
        let io = matches!(error, StoreOpenError::Drive(OpenError::Io { .. }));
        if io && counts.io_errors > 0 && self.reopens < REOPENS_AFTER_EIO_MAX {
            return Ok(AfterRefusal::OpenAgain);
        }
        let expected = match self.rot_at {
            Some(lsn) => format!(" (bit rot was put in acknowledged LSN {lsn})"),
            None => String::new(),
        };
        Err(self.violation(round, format!("the open failed: {error}{expected}")))
    }

    /// Checks the opened store against the model, which then starts from what it holds.
    fn check_recovered(&mut self, round: u32, store: &LogDriveStore) -> Result<(), Violation> {
        if let Some(lsn) = self.rot_at {
            return Err(self.violation(
                round,
                format!("bit rot in acknowledged LSN {lsn}, which a watermark covers, opened"),
            ));
        }
        let checked = check(store, &self.model).map_err(|what| self.violation(round, what))?;
        self.summary.recoveries += 1;
        self.summary.lenient_checks += u64::from(self.model.lenient);
        self.summary.acked_facts += checked.acked_facts;
        self.model = Model {
            base: checked.base,
            facts: Vec::new(),
            lenient: false,
        };
        Ok(())
    }

    /// The round's workload: groups of operations, the reclaimer run when the ring is full
    /// and at random points, until the groups are done or the store stops.
    fn groups(
        &mut self,
        round: u32,
        store: &LogDriveStore,
        trace: &Arc<Trace>,
    ) -> Result<(Workload, TraceJournal), Violation> {
        let mut journal = TraceJournal::new(trace.clone());
        let mut work = Workload::resume(store, self.rng.gen(), self.model.base.generation_max);
        let mut progress = work
            .start(store, &mut journal)
            .map_err(|what| self.violation(round, what))?;
        for _ in 0..self.options.groups {
            if progress == Progress::Stopped {
                break;
            }
            progress = work
                .step(store, &mut journal)
                .map_err(|what| self.violation(round, what))?;
            if work.ring_full || self.rng.gen_bool(0.12) {
                work.reclaim(store, &mut journal)
                    .map_err(|what| self.violation(round, what))?;
            }
        }
        self.summary.fail_stops += u64::from(progress == Progress::Stopped);
        self.summary.relocated_records += work.relocated_records;
        Ok((work, journal))
    }

    /// Pulls the power at a drawn point of the round's trace: the image it leaves is the
    /// next round's, and the operations issued before it the model's facts (lenient where
    /// the device, which injected `counts`, damaged data).
    fn crash(
        &mut self,
        work: &Workload,
        journal: &TraceJournal,
        trace: &Trace,
        counts: FaultCounts,
    ) {
        self.summary.io_errors += counts.io_errors;
        self.summary.data_faults += counts.data_faults;
        // The power fails: at the end, or a third of the time inside a reclaim_now.
        let events = trace.events();
        let found = windows(&events, &work.log, &self.geometry, self.ring_id);
        let reclaiming: Vec<usize> = found
            .reclaims
            .iter()
            .flat_map(|(start, end)| start + 1..=*end)
            .collect();
        let cut = if !reclaiming.is_empty() && self.rng.gen_bool(0.33) {
            reclaiming[self.rng.gen_range(0..reclaiming.len())]
        } else if self.rng.gen_bool(0.5) {
            events.len()
        } else {
            self.rng.gen_range(events.len() / 2..=events.len())
        };
        self.summary.crashes_in_reclaim += u64::from(Windows::inside(&found.reclaims, cut));
        self.summary.crashes_in_relocation += u64::from(Windows::inside(&found.relocation, cut));
        let mut disk = TraceDisk::new(std::mem::take(&mut self.image));
        disk.advance_to(&events, cut);
        let in_flight = disk.in_flight();
        let hostile = self.rng.gen_bool(self.config.torn_writes);
        let rng = &mut self.rng;
        self.image = disk
            .disk()
            .crash(&in_flight_views(&in_flight), SECTOR_BYTES, &mut |_| {
                drawn_fate(rng, hostile)
            });
        self.model.facts = work.facts(|index| journal.status(index, cut));
        self.model.lenient = counts.data_faults > 0;
    }

    /// After some crashes of a drive that damaged nothing, bit rot in an acknowledged record
    /// that a surviving watermark covers: the next open must refuse it.
    fn maybe_rot(&mut self) {
        if !self.model.lenient && self.rng.gen_bool(0.12) {
            self.rot_at = rot(&mut self.image, &self.geometry, self.ring_id, &mut self.rng);
        }
    }
}
