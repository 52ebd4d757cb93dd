//! Simulation runs of the real engine: the drive's state machine ([`DriveCore`]) on the
//! simulated drive, stepped by one thread so a seed replays exactly. Each run formats a small
//! ring, then goes through rounds of: open (the engine's real recovery), check what came back
//! against a model of what was acknowledged, run a workload (appends of random sizes from many
//! logical clients, reads, trims, time passing), and pull the power. Before each open, the
//! image is replayed hinted and full, and both must find the same log, in strict mode and in
//! quarantine mode (the same damage too). When a strict open is refused because the drive
//! damaged acknowledged data, the seed goes on in quarantine mode: the open serves what is
//! intact (checked against the model like any other), every damaged LSN it reports reads as
//! damaged, and the rounds after it run on that log. Every violation names the seed and the
//! command that replays it.
//!
//! The core runs its timers (group commit's gathering window, the tail marker's idle timer) on
//! a manual clock that only the workload advances, by amounts drawn from the seed: the timers
//! fire in the runs, and still exactly where the seed says.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sealog::drive::ReadReply;
use sealog::ticket::Ticket;
use sealog::{
    AppendError, DriveCore, DriveOptions, DriveState, Durability, ManualClock, OpenError,
    ReadError, RecoveryMode, Request, Wait,
};
use sealog_wal::format::{EntryHeader, ENTRY_HEADER_SIZE, ENTRY_MAGIC};
use sealog_wal::{Geometry, Kind, RecoveryReport, RingId};
use sealog_wal_kit::model::ModelWriter;

use crate::device::{FaultConfig, FaultCounts, SimDevice};

/// How a simulation run is set up.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SimOptions {
    /// Turn every fault on (at seeded rates); otherwise a correct drive that only crashes.
    pub faults: bool,
    /// Open-workload-crash rounds per seed.
    pub rounds: u32,
    /// Workload steps per round.
    pub steps: u32,
}

impl Default for SimOptions {
    fn default() -> SimOptions {
        SimOptions {
            faults: true,
            rounds: 4,
            steps: 120,
        }
    }
}

impl SimOptions {
    /// The command that replays a run exactly.
    pub fn replay_command(&self, seed: u64) -> String {
        format!(
            "cargo run --release -p sealog-fault -- simulate --seed {seed} --rounds {} \
             --steps {}{}",
            self.rounds,
            self.steps,
            if self.faults { "" } else { " --no-faults" }
        )
    }
}

/// What one run did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SimSummary {
    /// Rounds completed.
    pub rounds: u32,
    /// Appends acknowledged.
    pub acknowledged: u64,
    /// Recoveries that opened and were checked (the image of the last crash included).
    pub recoveries: u64,
    /// Of those, recoveries after the drive had injected data faults: the covered-entry rule
    /// (no acknowledged entry a surviving watermark covers is lost) is all that protects the
    /// acknowledged entries there; without data faults every acknowledged entry must be back.
    pub recoveries_after_data_faults: u64,
    /// Entries read back after reopens and compared with what was submitted.
    pub checked: u64,
    /// Acknowledged entries a surviving watermark covered, checked to be in the log.
    pub covered_checked: u64,
    /// Recoveries whose own reads the drive answered wrongly (misdirected, or made a sector
    /// unreadable): the covered-entry rule is not checked there (see `covered_evidence`).
    pub recoveries_misread: u64,
    /// Live entries a read fault kept from being compared.
    pub unreadable: u64,
    /// Opens refused as corrupt after data faults (allowed; it ends the seed).
    pub refused_corrupt: u64,
    /// Opens refused because recovery's own write or flush got an injected EIO (the seed goes
    /// on with an open of the image that refusal left, a few times).
    pub refused_io: u64,
    /// Opens refused because both control copies were damaged or unreadable.
    pub refused_control: u64,
    /// Recoveries in quarantine mode (after a strict open was refused as corrupt, the seed
    /// goes on in quarantine mode), and of those, the ones that stepped over damage.
    pub quarantine_recoveries: u64,
    /// Recoveries in quarantine mode that stepped over damage to acknowledged data.
    pub quarantine_recoveries_damaged: u64,
    /// Damaged LSNs those recoveries reported, each read back as damaged.
    pub quarantine_damaged_lsns: u64,
    /// Images also replayed in quarantine mode, hinted and full, against strict replay.
    pub quarantine_scans: u64,
    /// Faults the drive injected.
    pub faults: FaultCounts,
    /// Tail markers the drive wrote on its idle timer (recovery's own not counted).
    pub tail_markers: u64,
    /// Images replayed hinted and full before each open and found to hold the same log.
    pub scans_compared: u64,
    /// Of those, images whose tail hint replay trusted.
    pub scans_hinted: u64,
    /// Batches that waited for a tail hint, over every round (see `Stats::hint_waits`).
    pub hint_waits: u64,
    /// Control blocks written only to move the tail hint, over every round.
    pub hint_writes: u64,
}

/// A broken invariant, with the command that replays it.
#[derive(Debug)]
pub struct Violation {
    /// The seed.
    pub seed: u64,
    /// What broke.
    pub what: String,
    /// The command that replays the run.
    pub replay: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "seed {}: {}\n  replay: {}",
            self.seed, self.what, self.replay
        )
    }
}

/// The drive's clock in a run: a manual clock that moves only when the workload says so, and
/// the timers the core runs on it, all drawn from a stream of their own (from the same seed),
/// so that the clock never shifts what the workload's stream draws.
struct SimClock {
    clock: ManualClock,
    rng: ChaCha8Rng,
    group_gather_us: u64,
    tail_marker_idle_us: u64,
}

/// Tells the clock's stream from the workload's (any constant: the seed's bits are mixed in).
const CLOCK_STREAM: u64 = 0x0c10_c0c1_0c00_0000;

impl SimClock {
    /// A gathering window of up to 200 us (none in a quarter of the seeds) and an idle time
    /// of up to 20 ms.
    fn new(seed: u64) -> SimClock {
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ CLOCK_STREAM);
        let group_gather_us = if rng.gen_bool(0.25) {
            0
        } else {
            rng.gen_range(1..=200)
        };
        let tail_marker_idle_us = rng.gen_range(0..=20_000);
        SimClock {
            clock: ManualClock::new(),
            rng,
            group_gather_us,
            tail_marker_idle_us,
        }
    }

    /// The options with this run's timers.
    fn timers(&self, options: DriveOptions) -> DriveOptions {
        DriveOptions {
            group_gather_us: self.group_gather_us,
            tail_marker_idle_us: self.tail_marker_idle_us,
            ..options
        }
    }

    /// A workload step takes up to one and a half gathering windows (at least 100 us), so a
    /// batch gathering for its group starts sometimes with it whole and sometimes when its
    /// window closes.
    fn step(&mut self) {
        let step_us_max = (self.group_gather_us * 3 / 2).max(100);
        let step_us = self.rng.gen_range(0..=step_us_max);
        self.clock.advance(Duration::from_micros(step_us));
    }

    /// The log idles for half to twice the tail marker's idle time: a marker is written only
    /// if the whole idle time has passed since the last data batch was acknowledged.
    fn idle(&mut self) {
        let idle_us = self.tail_marker_idle_us;
        let idle_us = self.rng.gen_range(idle_us / 2..=idle_us * 2);
        self.clock.advance(Duration::from_micros(idle_us));
    }
}

/// The test's side: what each LSN was submitted with, and what was acknowledged.
struct Model {
    payloads: BTreeMap<u64, Vec<u8>>,
    acknowledged: u64,
    trim_lsn: u64,
}

fn geometry(rng: &mut ChaCha8Rng) -> Geometry {
    let block = 4096u32;
    let batch_blocks = rng.gen_range(2..=4u32);
    let window = rng.gen_range(1..=3u32);
    Geometry {
        block_size_bytes: block,
        segment_size_bytes: u64::from(rng.gen_range(12..=24u32) * block),
        segment_count: rng.gen_range(3..=5),
        batch_size_max_bytes: batch_blocks * block,
        window_batches_max: window,
        window_bytes_max: u64::from(window * batch_blocks * block),
    }
}

fn payload(seed: u64, round: u32, index: u64, len: usize) -> Vec<u8> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ (u64::from(round) << 48) ^ index);
    let mut bytes = vec![0u8; len];
    rng.fill(&mut bytes[..]);
    bytes
}

/// The highest watermark carried by a record that survived in `image` and that the writer of
/// incarnation `incarnation` wrote: a header that checks out (magic, version, ring, header
/// CRC) and records exactly the segment and offset where it lies. Every such watermark is a
/// true statement about the current log: that writer acknowledged every LSN up to it (the
/// entries recovered when it opened included, which its first batch's watermark covers), and
/// acknowledged LSNs are never handed out again. Records of older incarnations are left out:
/// after a cut they may speak of LSNs the log has since reused.
pub fn surviving_watermark(
    image: &[u8],
    geometry: &Geometry,
    ring_id: RingId,
    incarnation: u32,
) -> u64 {
    let magic = ENTRY_MAGIC.to_le_bytes();
    let finder = memchr::memmem::Finder::new(&magic);
    let mut watermark = 0;
    for segment in 0..geometry.segment_count {
        let start = geometry.segment_ring_offset(segment) as usize;
        let end = start + geometry.segment_size_bytes as usize;
        let Some(bytes) = image.get(start..end) else {
            continue;
        };
        for offset in finder.find_iter(bytes) {
            let Some(header_bytes) = bytes.get(offset..offset + ENTRY_HEADER_SIZE) else {
                continue;
            };
            let Ok(header) = EntryHeader::decode(ring_id, header_bytes) else {
                continue;
            };
            let in_place = header.position.segment == segment
                && u64::from(header.position.offset) == offset as u64;
            if in_place && header.incarnation == incarnation {
                watermark = watermark.max(header.watermark);
            }
        }
    }
    watermark
}

/// Runs one seed.
pub fn run_seed(seed: u64, options: &SimOptions) -> Result<SimSummary, Violation> {
    let mut run = SeedRun::new(seed, options);
    // One recovery more than rounds: the image of the last round's crash is checked too.
    let mut round = 0;
    while round <= options.rounds {
        let covered = run.covered();
        run.compare_scans(round)?;
        let (opened, opening) = run.open()?;
        let mut core = match opened {
            Ok(core) => core,
            Err(error) => match run.refused(round, &error, &opening)? {
                AfterRefusal::OpenAgain => continue,
                AfterRefusal::End => return Ok(run.summary),
            },
        };
        run.check(&mut core, round, covered, &opening)?;
        if round == options.rounds {
            break;
        }
        run.work_and_crash(core, round, opening.data_faults_so_far)?;
        round += 1;
    }
    Ok(run.summary)
}

/// One seed's run between its rounds: what it drew at the start, the image the next round
/// opens, the model of what was acknowledged, and what the rounds did so far.
struct SeedRun<'a> {
    seed: u64,
    options: &'a SimOptions,
    rng: ChaCha8Rng,
    config: FaultConfig,
    geometry: Geometry,
    ring_id: RingId,
    clock: SimClock,
    drive_options: DriveOptions,
    image: Vec<u8>,
    model: Model,
    summary: SimSummary,
    /// The incarnation of the last round's writer, whose surviving records say what is covered.
    last_incarnation: Option<u32>,
    reopens: u32,
    /// Read faults in the opens of this round that failed on their own EIO and were retried:
    /// such an open may have made a decision its misread led to durable (its control block,
    /// with the cut, is written before it zeroes anything), and the retry inherits it.
    misread_in_failed_opens: FaultCounts,
    /// Once a strict open is refused as corrupt, the seed goes on in quarantine mode.
    quarantine: bool,
}

/// What a round's open left besides the drive, or the error it was refused with.
struct Opening {
    /// Where a refused open's device leaves its power-cut image.
    left: Arc<Mutex<Option<Vec<u8>>>>,
    /// Faults the drive injected while it opened.
    round_counts: FaultCounts,
    /// Data faults the drive injected in the seed so far, this open's included.
    data_faults_so_far: u64,
}

/// What a refused open that the faults explain leads to.
enum AfterRefusal {
    /// The seed goes on with an open of the image the refused open left.
    OpenAgain,
    /// The seed ends.
    End,
}

impl<'a> SeedRun<'a> {
    /// Draws the seed's faults, geometry, durability and timers, and formats its ring.
    fn new(seed: u64, options: &'a SimOptions) -> SeedRun<'a> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let config = if options.faults {
            FaultConfig::all(&mut rng)
        } else {
            FaultConfig::none()
        };
        let geometry = geometry(&mut rng);
        let durability = if rng.gen_bool(0.8) {
            Durability::Fdatasync
        } else {
            Durability::Dsync
        };
        let clock = SimClock::new(seed);
        // Reads come from the device under faults as well as from the cache: a third of the
        // seeds run without a cache, a third with one of two batches (evicting all the time).
        let read_cache_bytes = match seed % 3 {
            0 => 0,
            1 => 2 * u64::from(geometry.batch_size_max_bytes),
            _ => DriveOptions::default().read_cache_bytes,
        };
        let drive_options = clock.timers(DriveOptions {
            durability: Some(durability),
            read_cache_bytes,
            ..DriveOptions::default()
        });
        let ring_id = RingId(seed.to_le_bytes().repeat(2).try_into().unwrap_or([7; 16]));
        let image = ModelWriter::format(geometry, ring_id);
        SeedRun {
            seed,
            options,
            rng,
            config,
            geometry,
            ring_id,
            clock,
            drive_options,
            image,
            model: Model {
                payloads: BTreeMap::new(),
                acknowledged: 0,
                trim_lsn: 0,
            },
            summary: SimSummary::default(),
            last_incarnation: None,
            reopens: 0,
            misread_in_failed_opens: FaultCounts::default(),
            quarantine: false,
        }
    }

    /// A violation of this seed, with the command that replays it.
    fn violation(&self, what: String) -> Violation {
        Violation {
            seed: self.seed,
            what,
            replay: self.options.replay_command(self.seed),
        }
    }

    /// The highest watermark that the last round's writer left in a surviving record of the
    /// image (nothing before the first round).
    fn covered(&self) -> u64 {
        self.last_incarnation.map_or(0, |incarnation| {
            surviving_watermark(&self.image, &self.geometry, self.ring_id, incarnation)
        })
    }

    /// Replays the image the round opens hinted and full, in strict and in quarantine mode.
    fn compare_scans(&mut self, round: u32) -> Result<(), Violation> {
        // The image replayed hinted and full finds the same log, whatever the drive did to it
        // (the hint only saves reads; see `crate::scans`).
        let scan = crate::scans::compare_scans(&self.image, &[])
            .map_err(|what| self.violation(format!("round {round}: {what}")))?;
        self.summary.scans_compared += 1;
        self.summary.scans_hinted += u64::from(scan == crate::scans::HintedScan::Hinted);
        // In quarantine mode too: hinted and full find the same log and damage, and strict
        // replay agrees where it opens (an image neither opens is the open's to refuse).
        let _found_or_refused = crate::scans::check_quarantine(&self.image, &[])
            .map_err(|what| self.violation(format!("round {round}: quarantine: {what}")))?;
        self.summary.quarantine_scans += 1;
        Ok(())
    }

    /// Opens the image on a new device with the real recovery (in quarantine mode once the
    /// seed is in it).
    fn open(&mut self) -> Result<(Result<DriveCore<SimDevice>, OpenError>, Opening), Violation> {
        let image = std::mem::take(&mut self.image);
        let device = SimDevice::for_ring(image, &self.geometry, self.config, self.rng.gen())
            .map_err(|error| self.violation(format!("cannot make the device: {error}")))?;
        let counts = device.counts_handle();
        // A refused open drops the device: it leaves its power-cut image here.
        let left = Arc::new(Mutex::new(None));
        let mut device = device;
        device.leave_image_on_drop(Arc::clone(&left));
        let path = Path::new("sim");
        let open_options = DriveOptions {
            recovery: if self.quarantine {
                RecoveryMode::Quarantine
            } else {
                RecoveryMode::Strict
            },
            ..self.drive_options.clone()
        };
        let opened =
            DriveCore::recover_with_clock(device, path, &open_options, self.clock.clock.clone());
        let round_counts = *counts.lock().expect("counts lock");
        let data_faults_so_far = self.summary.faults.data_faults + round_counts.data_faults;
        let opening = Opening {
            left,
            round_counts,
            data_faults_so_far,
        };
        Ok((opened, opening))
    }

    /// Counts a refused open, and says whether the seed opens the image it left again: a
    /// refusal no fault explains is a violation.
    fn refused(
        &mut self,
        round: u32,
        error: &OpenError,
        opening: &Opening,
    ) -> Result<AfterRefusal, Violation> {
        let round_counts = opening.round_counts;
        let refusal = allowed_refusal(error, opening.data_faults_so_far, &round_counts)
            .filter(|refusal| !(self.quarantine && matches!(refusal, Refusal::Corrupt)))
            .ok_or_else(|| self.violation(format!("round {round}: open failed: {error}")))?;
        // The drive damaged data, or failed recovery's own I/O, and the open said so with a
        // typed error: the allowed outcome, which ends the seed.
        match refusal {
            Refusal::Corrupt => self.summary.refused_corrupt += 1,
            Refusal::Io => self.summary.refused_io += 1,
            Refusal::Control => self.summary.refused_control += 1,
        }
        self.summary.faults.data_faults += round_counts.data_faults;
        self.summary.faults.io_errors += round_counts.io_errors;
        self.summary.faults.read_faults += round_counts.read_faults;
        // An EIO of recovery's own is transient: the machine reboots (a power cut) and opens
        // again, a few times, with the checks as before. Damage ends the seed.
        let image_left = opening.left.lock().expect("image lock").take();
        match (refusal, image_left) {
            (Refusal::Io, Some(left_image)) if self.reopens < REOPENS_AFTER_EIO_MAX => {
                self.reopens += 1;
                self.misread_in_failed_opens.read_faults += round_counts.read_faults;
                self.image = left_image;
                Ok(AfterRefusal::OpenAgain)
            }
            // Damaged acknowledged data: the layer above would open in quarantine mode and
            // repair from a peer. The seed goes on so, from the image the refused open left
            // (it wrote nothing).
            (Refusal::Corrupt, Some(left_image)) => {
                self.quarantine = true;
                self.misread_in_failed_opens.read_faults += round_counts.read_faults;
                self.image = left_image;
                Ok(AfterRefusal::OpenAgain)
            }
            _ => Ok(AfterRefusal::End),
        }
    }

    /// Checks the recovered log against the model ([`check_recovered`]) and counts the
    /// recovery.
    fn check(
        &mut self,
        core: &mut DriveCore<SimDevice>,
        round: u32,
        covered: u64,
        opening: &Opening,
    ) -> Result<(), Violation> {
        let data_damaged = opening.data_faults_so_far > 0;
        let mut during_open = opening.round_counts;
        during_open.read_faults += std::mem::take(&mut self.misread_in_failed_opens).read_faults;
        let covered = covered_evidence(covered, &during_open);
        self.summary.recoveries_misread += u64::from(opening.round_counts.read_faults > 0);
        let checked = check_recovered(core, &mut self.model, covered, data_damaged)
            .map_err(|what| self.violation(format!("round {round}: {what}")))?;
        if self.quarantine {
            let report = core.recovery_report();
            self.summary.quarantine_recoveries += 1;
            self.summary.quarantine_recoveries_damaged += u64::from(report.damaged_lsns > 0);
            self.summary.quarantine_damaged_lsns += report.damaged_lsns;
        }
        self.summary.recoveries += 1;
        self.summary.recoveries_after_data_faults += u64::from(data_damaged);
        self.summary.checked += checked.compared;
        self.summary.covered_checked += checked.covered;
        self.summary.unreadable += checked.unreadable;
        Ok(())
    }

    /// The round's workload on the recovered log, then the power cut that leaves the image
    /// the next round opens.
    fn work_and_crash(
        &mut self,
        mut core: DriveCore<SimDevice>,
        round: u32,
        data_faults_so_far: u64,
    ) -> Result<(), Violation> {
        self.last_incarnation = Some(core.incarnation());
        let markers_before = core.stats().tail_markers;
        let acknowledged = workload(
            &mut core,
            &mut self.model,
            &mut self.rng,
            &mut self.clock,
            (self.seed, round, self.options.steps),
            data_faults_so_far > 0,
        );
        self.summary.tail_markers += core.stats().tail_markers - markers_before;
        self.summary.hint_waits += core.stats().hint_waits;
        self.summary.hint_writes += core.stats().hint_writes;
        // Faults the drive injected in this round, recovery's reads and writes included.
        let device = core.backend_mut();
        self.summary.faults.data_faults += device.counts().data_faults;
        self.summary.faults.io_errors += device.counts().io_errors;
        self.summary.faults.read_faults += device.counts().read_faults;
        let acknowledged =
            acknowledged.map_err(|what| self.violation(format!("round {round}: {what}")))?;
        self.summary.acknowledged += acknowledged;
        self.image = device.crash();
        self.summary.rounds += 1;
        Ok(())
    }
}

/// Opens after an injected EIO in recovery's own I/O, per seed, before the seed ends.
const REOPENS_AFTER_EIO_MAX: u32 = 4;

/// Why an open was refused, when the simulation allows it.
enum Refusal {
    /// Acknowledged data is damaged, and the drive did damage data.
    Corrupt,
    /// A write or flush of recovery's own failed with an injected EIO.
    Io,
    /// Both control block copies are damaged or unreadable, and the drive did damage data.
    Control,
}

/// Whether a refused open is one the faults injected so far explain; `None` is a violation
/// (a plan, sequence, geometry or head error, or any refusal with no fault to explain it).
fn allowed_refusal(
    error: &OpenError,
    data_faults: u64,
    round: &crate::device::FaultCounts,
) -> Option<Refusal> {
    use sealog_wal::ReplayError;
    match error {
        OpenError::Corrupt { .. } if data_faults > 0 => Some(Refusal::Corrupt),
        OpenError::Io { .. } if round.io_errors > 0 => Some(Refusal::Io),
        OpenError::Ring {
            source:
                ReplayError::ControlIo { .. }
                | ReplayError::ControlCorrupt
                | ReplayError::NotARing { .. },
            ..
        } if data_faults > 0 => Some(Refusal::Control),
        _ => None,
    }
}

/// What the covered-entry rule may hold a recovery to: the surviving watermark `covered`, or
/// nothing when the drive answered one of recovery's own reads wrongly (`during_open`, the
/// faults counted while it opened, and while the opens of its round that failed on their own
/// EIO and were retried did: seed 982 misread, cut, wrote the cut and failed zeroing after it,
/// and its retry found the cut). A misdirected read or a sector made unreadable can hide
/// the very batch whose watermark proves the damage before it; recovery takes what it could
/// not read in the in-flight region for a torn block (docs/recovery.md) and cannot tell
/// (seed 296 lost a batch's write, and the read of the batches after it was misdirected).
fn covered_evidence(covered: u64, during_open: &FaultCounts) -> u64 {
    if during_open.read_faults > 0 {
        0
    } else {
        covered
    }
}

/// What one recovery's check looked at.
struct Checked {
    /// Entries read back through the drive and compared with what was submitted.
    compared: u64,
    /// Acknowledged entries a surviving watermark covers, checked to be in the log.
    covered: u64,
    /// Live entries a read fault kept from being compared (only with data faults on).
    unreadable: u64,
}

/// Checks the recovered log against the model, then makes the model what was recovered
/// (entries past it are gone, their LSNs free again).
///
/// The rules, checked after every recovery whatever faults the drive injected:
/// - an acknowledged entry that a surviving valid watermark covers (`covered`) is in the
///   recovered log: recovery may fail the open as corrupt, never cut it silently (I-1);
/// - with no data fault injected so far, every acknowledged entry is in the log (a crash
///   alone never loses one);
/// - every live entry read back is exactly what was submitted with its LSN (I-2), in a
///   contiguous run (I-3); a read the drive fails is allowed only after data faults, and the
///   entries around it are still compared.
fn check_recovered(
    core: &mut DriveCore<SimDevice>,
    model: &mut Model,
    covered: u64,
    data_damaged: bool,
) -> Result<Checked, String> {
    let report = core.recovery_report().clone();
    let last = report.next_lsn - 1;
    let expected_last = model.acknowledged;
    let covered_last = covered.min(expected_last);
    if covered_last > last {
        return Err(format!(
            "acknowledged LSN {covered_last}, covered by a surviving watermark {covered}, was \
             cut: recovery ended at {last} (trim {})",
            report.trim_lsn
        ));
    }
    if last < expected_last && !data_damaged {
        return Err(format!(
            "acknowledged LSN {expected_last} lost: recovery ended at {last} (trim {})",
            report.trim_lsn
        ));
    }
    let mut checked = Checked {
        compared: 0,
        covered: covered_last.saturating_sub(report.trim_lsn.max(model.trim_lsn)),
        unreadable: 0,
    };
    read_back(core, model, &report, data_damaged, &mut checked)?;
    // Whatever was read, the log now ends at `last`: entries past it are gone and their LSNs
    // are free again.
    model.payloads.retain(|lsn, _| *lsn <= last);
    model.acknowledged = last;
    model.trim_lsn = model.trim_lsn.max(report.trim_lsn);
    Ok(checked)
}

/// Reads every live LSN of the recovered log back through the drive: each is exactly what
/// was submitted with its LSN (I-2) and none that the quarantine open reported damaged is
/// served; a read fault counts as unreadable only after data faults.
fn read_back(
    core: &mut DriveCore<SimDevice>,
    model: &Model,
    report: &RecoveryReport,
    data_damaged: bool,
    checked: &mut Checked,
) -> Result<(), String> {
    let mut lsn = report.trim_lsn + 1;
    while lsn < report.next_lsn {
        let (request, reply) = Request::read(lsn);
        core.submit(request);
        let outcome = loop {
            core.step(Wait::ForCompletion);
            if let Ok(result) = reply.try_recv() {
                break result;
            }
        };
        let reported_damaged = report
            .damaged
            .iter()
            .any(|range| (range.first_lsn..=range.last_lsn).contains(&lsn));
        match outcome {
            Ok(_) if reported_damaged => {
                return Err(format!(
                    "LSN {lsn}, reported damaged by the quarantine open, was served"
                ));
            }
            Ok(entry) => {
                // I-2: nothing comes back that was not submitted with this LSN.
                if model.payloads.get(&lsn) != Some(&entry.payload) {
                    return Err(format!(
                        "LSN {lsn} came back with a payload never submitted for it"
                    ));
                }
                checked.compared += 1;
                lsn += 1;
            }
            // A read fault (latent sector error, misdirected read) is reported, never served.
            Err(ReadError::Damaged { .. })
                if data_damaged || core.backend_mut().counts().data_faults > 0 =>
            {
                checked.unreadable += 1;
                lsn += 1;
            }
            Err(error) => return Err(format!("read of live LSN {lsn} failed: {error}")),
        }
    }
    Ok(())
}

/// Checks the reads that have an answer: an acknowledged entry reads back as exactly what was
/// submitted with its LSN, or as trimmed (a trim passed it); a read fault only after the drive
/// injected data faults (in this round, or before it: `data_damaged`, so damage a quarantine
/// open reported reads as damaged), and the drive's failure only once it failed.
fn check_reads(
    reads: &mut Vec<(u64, ReadReply)>,
    model: &Model,
    core: &mut DriveCore<SimDevice>,
    data_damaged: bool,
) -> Result<(), String> {
    let data_faults = core.backend_mut().counts().data_faults + u64::from(data_damaged);
    let mut failure = None;
    reads.retain(|(lsn, reply)| {
        let Ok(outcome) = reply.try_recv() else {
            return true;
        };
        let wrong = match outcome {
            Ok(entry) => (model.payloads.get(lsn) != Some(&entry.payload))
                .then(|| format!("read of LSN {lsn} returned other bytes")),
            Err(ReadError::Trimmed { .. }) | Err(ReadError::Failed(_)) => None,
            Err(ReadError::Damaged { .. }) if data_faults > 0 => None,
            Err(error) => Some(format!("read of acknowledged LSN {lsn} failed: {error}")),
        };
        if let Some(wrong) = wrong {
            failure.get_or_insert(wrong);
        }
        false
    });
    failure.map_or(Ok(()), Err)
}

/// Appends, reads and trims with many logical clients; checks fail-stop as it goes. Returns
/// the number of appends acknowledged.
fn workload(
    core: &mut DriveCore<SimDevice>,
    model: &mut Model,
    rng: &mut ChaCha8Rng,
    clock: &mut SimClock,
    (seed, round, steps): (u64, u32, u32),
    data_damaged: bool,
) -> Result<u64, String> {
    let payload_size_max_bytes = core
        .recovery_report()
        .control
        .geometry
        .payload_size_max_bytes() as usize;
    let mut work = RoundWork {
        core,
        model,
        rng,
        clock,
        seed,
        round,
        data_damaged,
        payload_size_max_bytes,
        tickets: Vec::new(),
        maybe_written: Vec::new(),
        acknowledged: 0,
        failed_at_durable: None,
        index: 0,
        reads: Vec::new(),
    };
    for _ in 0..steps {
        work.step()?;
    }
    work.finish()
}

/// One round's workload as it goes: the drive, the model it is checked against, the streams
/// it draws from, and what is in flight.
struct RoundWork<'a> {
    core: &'a mut DriveCore<SimDevice>,
    model: &'a mut Model,
    rng: &'a mut ChaCha8Rng,
    clock: &'a mut SimClock,
    seed: u64,
    round: u32,
    data_damaged: bool,
    /// The largest payload the ring takes.
    payload_size_max_bytes: usize,
    /// Appends submitted and not yet answered, in submission order, with their payloads.
    tickets: Vec<(Vec<u8>, Ticket)>,
    /// Payloads that may have been written without acknowledgement (their batch failed), in
    /// submission order: they may come back after the crash with the LSNs after the last
    /// acknowledged one.
    maybe_written: Vec<Vec<u8>>,
    /// Appends acknowledged in this round.
    acknowledged: u64,
    /// The durable LSN when the drive first failed: nothing past it may be acknowledged.
    failed_at_durable: Option<u64>,
    /// Appends submitted in this round (each payload is drawn from its index).
    index: u64,
    /// Reads submitted and not yet checked.
    reads: Vec<(u64, ReadReply)>,
}

impl RoundWork<'_> {
    /// One step: the clock moves, something is submitted, the drive takes a turn, and what
    /// it answered is checked.
    fn step(&mut self) -> Result<(), String> {
        self.clock.step();
        self.submit();
        let wait = if self.rng.gen_bool(0.5) {
            Wait::ForCompletion
        } else {
            Wait::No
        };
        self.core.step(wait);
        self.collect()?;
        check_reads(&mut self.reads, self.model, self.core, self.data_damaged)?;
        if let DriveState::Failed(_) = self.core.stats().state {
            self.failed_at_durable
                .get_or_insert(self.core.lsn_durable());
        }
        // Keep room: trim what is acknowledged when the ring nears full.
        if self.rng.gen_bool(0.1) && self.model.acknowledged > self.model.trim_lsn + 8 {
            let (request, _reply) = Request::trim(self.model.acknowledged - 4);
            self.core.submit(request);
        }
        Ok(())
    }

    /// Submits what the step draws: appends, a trim, a read, or time passing.
    fn submit(&mut self) {
        let model = &*self.model;
        match self.rng.gen_range(0..10) {
            0..=5 => self.append(),
            6 if model.acknowledged > model.trim_lsn => {
                let lsn = self.rng.gen_range(model.trim_lsn + 1..=model.acknowledged);
                let (request, _reply) = Request::trim(lsn);
                self.core.submit(request);
            }
            // The log idles: the core writes a tail marker on its next turn if the idle time
            // has passed, nothing is in flight and some acknowledged entry is uncovered.
            7 => self.clock.idle(),
            8 if model.acknowledged > model.trim_lsn => {
                let lsn = self.rng.gen_range(model.trim_lsn + 1..=model.acknowledged);
                let (request, reply) = Request::read(lsn);
                self.core.submit(request);
                self.reads.push((lsn, reply));
            }
            _ => {}
        }
    }

    /// Submits one to five appends of drawn sizes.
    fn append(&mut self) {
        for _ in 0..self.rng.gen_range(1..6) {
            let len = match self.rng.gen_range(0..10) {
                0..=5 => self.rng.gen_range(0..300),
                6..=8 => self.rng.gen_range(300..4000),
                _ => self.rng.gen_range(4000..=self.payload_size_max_bytes),
            };
            self.index += 1;
            let bytes = payload(self.seed, self.round, self.index, len);
            let (request, ticket) = Request::append(Kind::Data, bytes.clone());
            self.core.submit(request);
            self.tickets.push((bytes, ticket));
        }
    }

    /// Collects outcomes in submission order (tickets complete in LSN order).
    fn collect(&mut self) -> Result<(), String> {
        let mut done = 0;
        for (bytes, ticket) in self.tickets.iter() {
            match ticket.try_outcome() {
                None => break,
                Some(Ok(lsn)) => {
                    if let Some(durable) = self.failed_at_durable {
                        if lsn > durable {
                            return Err(format!("LSN {lsn} acknowledged after the drive failed"));
                        }
                    }
                    if lsn != self.model.acknowledged + 1 {
                        return Err(format!(
                            "acknowledged LSN {lsn} out of order (last {})",
                            self.model.acknowledged
                        ));
                    }
                    self.model.payloads.insert(lsn, bytes.clone());
                    self.model.acknowledged = lsn;
                    self.acknowledged += 1;
                }
                Some(Err(AppendError::RingFull { .. })) => {}
                Some(Err(AppendError::Failed { .. })) => {
                    self.failed_at_durable
                        .get_or_insert(self.core.lsn_durable());
                    self.maybe_written.push(bytes.clone());
                }
                Some(Err(error)) => return Err(format!("append failed unexpectedly: {error}")),
            }
            done += 1;
        }
        self.tickets.drain(..done);
        Ok(())
    }

    /// Waits for the reads still in flight, then puts what may come back after the crash in
    /// the model; returns the number of appends acknowledged.
    fn finish(mut self) -> Result<u64, String> {
        while !self.reads.is_empty() && self.core.is_busy() {
            self.core.step(Wait::ForCompletion);
            check_reads(&mut self.reads, self.model, self.core, self.data_damaged)?;
        }
        // Submitted but unacknowledged entries may come back after the crash: remember them
        // under the LSNs they would take (the tickets still pending are in LSN order after the
        // acknowledged ones).
        for (bytes, ticket) in self.tickets {
            match ticket.try_outcome() {
                Some(Err(AppendError::RingFull { .. })) => {}
                _ => self.maybe_written.push(bytes),
            }
        }
        for (offset, bytes) in self.maybe_written.into_iter().enumerate() {
            self.model
                .payloads
                .insert(self.model.acknowledged + 1 + offset as u64, bytes);
        }
        Ok(self.acknowledged)
    }
}
