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

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sealog::{DriveOptions, Durability, OpenError};
use sealog_logdrive::StoreOpenError;
use sealog_wal::format::ENTRY_HEADER_SIZE;
use sealog_wal::{Geometry, ReplayError, ReplayOptions, RingId};
use sealog_wal_kit::model::ModelWriter;

use super::crash_states::{windows, Windows};
use super::model::{check, Model};
use super::sim_store::{open_sim_store, ring_geometry, TraceJournal};
use super::workload::{Progress, Workload};
use crate::device::{drawn_fate, in_flight_views, FaultConfig, SECTOR_BYTES};
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
    let violation = |round: u32, what: String| Violation {
        seed,
        what: format!("LogDrive simulation, round {round}: {what}"),
        replay: options.replay_command(seed),
    };
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
    let mut image = ModelWriter::format(geometry, ring_id);
    let mut model = Model::default();
    let mut summary = LogDriveSimSummary::default();
    let mut rot_at: Option<u64> = None;
    let mut reopens = 0;
    let mut round = 0;
    loop {
        let trace = Trace::new();
        let opened = open_sim_store(
            image.clone(),
            geometry,
            config,
            rng.gen(),
            Some(trace.clone()),
            drive_options.clone(),
        );
        let counts = opened.counts();
        let store = match &opened.store {
            Ok(store) => store.clone(),
            Err(error) => {
                summary.io_errors += counts.io_errors;
                summary.data_faults += counts.data_faults;
                match (corrupt_lsn(error), rot_at) {
                    (Some(lsn), Some(rotten)) if lsn == rotten => {
                        summary.rot_refused += 1;
                        return Ok(summary);
                    }
                    (Some(_), None) if model.lenient => {
                        summary.refused_corrupt += 1;
                        return Ok(summary);
                    }
                    _ => {}
                }
                let io = matches!(error, StoreOpenError::Drive(OpenError::Io { .. }));
                if io && counts.io_errors > 0 && reopens < REOPENS_AFTER_EIO_MAX {
                    // A transient EIO of recovery's own: the machine reboots and opens again.
                    drop(opened.store);
                    reopens += 1;
                    summary.reopens_after_eio += 1;
                    image = opened
                        .image
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .take()
                        .ok_or_else(|| violation(round, "a refused open left no image".into()))?;
                    continue;
                }
                let expected = match rot_at {
                    Some(lsn) => format!(" (bit rot was put in acknowledged LSN {lsn})"),
                    None => String::new(),
                };
                return Err(violation(
                    round,
                    format!("the open failed: {error}{expected}"),
                ));
            }
        };
        if let Some(lsn) = rot_at {
            return Err(violation(
                round,
                format!("bit rot in acknowledged LSN {lsn}, which a watermark covers, opened"),
            ));
        }
        let checked = check(&store, &model).map_err(|what| violation(round, what))?;
        summary.recoveries += 1;
        summary.lenient_checks += u64::from(model.lenient);
        summary.acked_facts += checked.acked_facts;
        model = Model {
            base: checked.base,
            facts: Vec::new(),
            lenient: false,
        };
        if round == options.rounds {
            store.close();
            return Ok(summary);
        }
        let mut journal = TraceJournal::new(trace.clone());
        let mut work = Workload::resume(&store, rng.gen(), model.base.generation_max);
        let mut progress = work
            .start(&store, &mut journal)
            .map_err(|what| violation(round, what))?;
        for _ in 0..options.groups {
            if progress == Progress::Stopped {
                break;
            }
            progress = work
                .step(&store, &mut journal)
                .map_err(|what| violation(round, what))?;
            if work.ring_full || rng.gen_bool(0.12) {
                work.reclaim(&store, &mut journal)
                    .map_err(|what| violation(round, what))?;
            }
        }
        summary.fail_stops += u64::from(progress == Progress::Stopped);
        summary.relocated_records += work.relocated_records;
        let counts = opened.counts();
        summary.io_errors += counts.io_errors;
        summary.data_faults += counts.data_faults;
        // The power fails: at the end, or a third of the time inside a reclaim_now.
        let events = trace.events();
        let found = windows(&events, &work.log, &geometry, ring_id);
        let reclaiming: Vec<usize> = found
            .reclaims
            .iter()
            .flat_map(|(start, end)| start + 1..=*end)
            .collect();
        let cut = if !reclaiming.is_empty() && rng.gen_bool(0.33) {
            reclaiming[rng.gen_range(0..reclaiming.len())]
        } else if rng.gen_bool(0.5) {
            events.len()
        } else {
            rng.gen_range(events.len() / 2..=events.len())
        };
        summary.crashes_in_reclaim += u64::from(Windows::inside(&found.reclaims, cut));
        summary.crashes_in_relocation += u64::from(Windows::inside(&found.relocation, cut));
        let mut disk = TraceDisk::new(image);
        disk.advance_to(&events, cut);
        let in_flight = disk.in_flight();
        let hostile = rng.gen_bool(config.torn_writes);
        image = disk
            .disk()
            .crash(&in_flight_views(&in_flight), SECTOR_BYTES, &mut |_| {
                drawn_fate(&mut rng, hostile)
            });
        model.facts = work.facts(|index| journal.status(index, cut));
        model.lenient = counts.data_faults > 0;
        store.close();
        drop(store);
        drop(opened);
        if !model.lenient && rng.gen_bool(0.12) {
            rot_at = rot(&mut image, &geometry, ring_id, &mut rng);
        }
        summary.rounds += 1;
        reopens = 0;
        round += 1;
    }
}
