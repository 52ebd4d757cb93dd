//! Crash-state enumeration of LogDrive workloads (docs/faults.md's crash states, on the
//! LogDrive layer). A workload ([`super::workload`]) runs on a store over the simulated drive (no
//! faults, completions reordered) with the reclaimer run by hand at random points, on a ring
//! small enough that it laps and relocation copies the ledger's records forward; the device
//! records every write and flush, and the workload marks every operation issued and done, in
//! one trace. Afterwards, cut points are chosen along the trace (half of them inside
//! relocation steps: after a copy was handed to the drive and before the ring trim that
//! follows is durable), and at each the crash images are built as the engine's enumeration
//! builds them: the durable bytes, plus each subset of the writes not yet durable, whole or
//! torn at a sector ([`crate::enumerate::crash_plans`]), a few per cut. A store opens on
//! every image and is checked against the model of what was acknowledged before the cut
//! ([`super::model::check`]); some are closed and recovered a second time, which must answer
//! exactly the same, and some then create a LogDrive, whose generation must be above every
//! one issued before the crash.

use std::sync::Arc;

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sealog::io::Tag;
use sealog::{DriveOptions, Durability};
use sealog_logdrive::record::Record;
use sealog_wal::format::{ENTRY_HEADER_SIZE, ENTRY_MAGIC};
use sealog_wal::{ControlBlock, EntryHeader, Geometry, RingId};
use sealog_wal_kit::model::ModelWriter;

use super::model::{check, check_next_generation, Base, Model, Observation, Op};
use super::sim_store::{open_sim_store, ring_geometry, SimStore, TraceJournal};
use super::workload::{Progress, Workload};
use crate::device::FaultConfig;
use crate::enumerate::{crash_image, crash_plans};
use crate::trace::{Event, Trace, TraceDisk};

/// The ring identity of the enumeration's rings.
const RING_ID: RingId = RingId(*b"logdrive-crashes");
/// Groups of operations per workload.
const GROUPS: u32 = 700;
/// Cut points per workload, at most.
const CUTS_MAX: usize = 300;
/// Crash images checked per cut point, at most.
const STATES_PER_CUT: usize = 3;
/// A LogDrive id the workloads never use, for the generation check.
const FRESH_ID: u64 = 1_000_000;

/// How many states to check and from which seed.
#[derive(Clone, Copy, Debug)]
pub struct CrashOptions {
    /// Stop once at least this many crash states were checked.
    pub states_target: u64,
    /// The first workload seed.
    pub seed: u64,
}

/// What an enumeration checked.
#[derive(Clone, Debug, Default)]
pub struct CrashSummary {
    /// Workloads run.
    pub workloads: u64,
    /// Cut points at which images were built.
    pub cut_points: u64,
    /// Crash images opened and checked.
    pub states: u64,
    /// Of those, images of cut points inside a relocation step (a copy handed to the drive,
    /// the ring trim after it not yet durable).
    pub states_in_relocation: u64,
    /// Of those, images of cut points after a relocation step's ring trim was durable,
    /// before its `reclaim_now` returned.
    pub states_after_ring_trim: u64,
    /// States recovered a second time, which answered the same.
    pub idempotence_checks: u64,
    /// States that then created a LogDrive, with a fresh generation.
    pub generation_checks: u64,
    /// Acknowledged facts checked to hold, over every state.
    pub acked_facts: u64,
    /// Addresses read, over every state.
    pub reads: u64,
    /// Records the workloads' reclaimer relocated, and its ring trims.
    pub relocated_records: u64,
    /// Ring trims the workloads' reclaimer made.
    pub ring_trims: u64,
    /// Relocation steps found in the traces.
    pub relocation_steps: u64,
    /// What broke (empty when every state passed).
    pub violations: Vec<String>,
}

/// The cut points of a trace inside relocation steps and after their ring trims: cut `c`
/// keeps the first `c` events.
#[derive(Debug, Default)]
pub(crate) struct Windows {
    /// Cuts in `(reclaim_now issued, done]`.
    pub reclaims: Vec<(usize, usize)>,
    /// Cuts in `(copy handed over, trim durable]`.
    pub relocation: Vec<(usize, usize)>,
    /// Cuts in `(trim durable, reclaim_now done]`.
    pub after_trim: Vec<(usize, usize)>,
}

impl Windows {
    /// Whether `cut` lies in one of `ranges`.
    pub fn inside(ranges: &[(usize, usize)], cut: usize) -> bool {
        ranges
            .iter()
            .any(|(start, end)| *start < cut && cut <= *end)
    }
}

/// Whether a write handed to the drive carries a record relocation copied.
fn carries_copy(bytes: &[u8], ring_id: RingId) -> bool {
    let magic = ENTRY_MAGIC.to_le_bytes();
    memchr::memmem::find_iter(bytes, &magic).any(|offset| {
        let Some(header) = bytes.get(offset..offset + ENTRY_HEADER_SIZE) else {
            return false;
        };
        EntryHeader::decode(ring_id, header)
            .ok()
            .and_then(|header| Record::decode(header.kind, &header.embedder))
            .is_some_and(|record| record.relocated)
    })
}

/// Finds the relocation steps of a trace: inside a `reclaim_now`, from the first write
/// carrying a relocated copy to the flush after the control block that moves the ring's
/// trim point.
pub(crate) fn windows(
    events: &[Event],
    log: &[super::workload::Logged],
    geometry: &Geometry,
    ring_id: RingId,
) -> Windows {
    let mut scan = WindowScan {
        log,
        control_area: geometry.control_area_bytes(),
        ring_id,
        windows: Windows::default(),
        reclaiming: false,
        reclaim_start: 0,
        trim_lsn: 0,
        step: None,
        trim_write: None,
        trim_written: false,
        trimmed_at: None,
    };
    for (index, event) in events.iter().enumerate() {
        scan.event(index, event);
    }
    scan.windows
}

/// The walk [`windows`] makes along a trace, event by event.
struct WindowScan<'a> {
    log: &'a [super::workload::Logged],
    control_area: u64,
    ring_id: RingId,
    /// What was found so far.
    windows: Windows,
    /// Inside a `reclaim_now`, issued at `reclaim_start`.
    reclaiming: bool,
    reclaim_start: usize,
    /// The highest ring trim point a control block was handed over with.
    trim_lsn: u64,
    /// Where the relocation step in progress started (its first copy handed over).
    step: Option<usize>,
    /// The control block write that moves the trim point in the step, until it completes.
    trim_write: Option<Tag>,
    /// That write completed: the next flush makes it durable.
    trim_written: bool,
    /// Where the last step's trim became durable, until the next copy or the reclaim's end.
    trimmed_at: Option<usize>,
}

impl WindowScan<'_> {
    /// Takes event `index` of the trace.
    fn event(&mut self, index: usize, event: &Event) {
        match event {
            Event::Issued(op) if self.log[*op].op == Op::Reclaim => {
                self.reclaiming = true;
                self.reclaim_start = index;
            }
            Event::Done(op) if self.log[*op].op == Op::Reclaim => self.reclaim_done(index),
            Event::Submitted {
                tag,
                ring_offset,
                bytes,
            } if *ring_offset < self.control_area => {
                let Ok(control) = ControlBlock::decode(bytes) else {
                    return;
                };
                if control.trim_lsn > self.trim_lsn {
                    self.trim_lsn = control.trim_lsn;
                    if self.reclaiming && self.step.is_some() {
                        self.trim_write = Some(*tag);
                    }
                }
            }
            Event::Submitted { bytes, .. }
                if self.reclaiming && self.step.is_none() && carries_copy(bytes, self.ring_id) =>
            {
                self.step = Some(index);
                if let Some(trimmed) = self.trimmed_at.take() {
                    self.windows.after_trim.push((trimmed, index));
                }
            }
            Event::Completed { tag, .. } if self.trim_write == Some(*tag) => {
                self.trim_written = true;
                self.trim_write = None;
            }
            Event::Flushed { .. } if self.trim_written => {
                self.trim_written = false;
                if let Some(start) = self.step.take() {
                    self.windows.relocation.push((start, index + 1));
                    self.trimmed_at = Some(index + 1);
                }
            }
            _ => {}
        }
    }

    /// A `reclaim_now` answered at event `index`: its window, and the step or the stretch
    /// after a trim it leaves open, end there.
    fn reclaim_done(&mut self, index: usize) {
        self.reclaiming = false;
        self.windows.reclaims.push((self.reclaim_start, index));
        if let Some(start) = self.step.take() {
            self.windows.relocation.push((start, index));
        }
        if let Some(trimmed) = self.trimmed_at.take() {
            self.windows.after_trim.push((trimmed, index));
        }
        self.trim_write = None;
        self.trim_written = false;
    }
}

/// Runs LogDrive workloads from `options.seed` on until at least `options.states_target`
/// crash states were checked, or one broke.
pub fn enumerate_logdrive(options: &CrashOptions) -> CrashSummary {
    let mut summary = CrashSummary::default();
    let mut seed = options.seed;
    while summary.states < options.states_target && summary.violations.is_empty() {
        let target = options.states_target - summary.states;
        if let Err(what) = workload(seed, target, &mut summary) {
            summary.violations.push(format!(
                "LogDrive crash states, workload seed {seed}: {what}"
            ));
        }
        summary.workloads += 1;
        seed += 1;
    }
    summary
}

/// One workload, then up to `target` of its crash states.
fn workload(seed: u64, target: u64, summary: &mut CrashSummary) -> Result<(), String> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let geometry = ring_geometry(&mut rng);
    let image = ModelWriter::format(geometry, RING_ID);
    let trace = Trace::new();
    let (work, journal) = run_workload(&image, geometry, &trace, &mut rng)?;
    summary.relocated_records += work.relocated_records;
    summary.ring_trims += work.ring_trims;
    let events = trace.events();
    let windows = windows(&events, &work.log, &geometry, RING_ID);
    summary.relocation_steps += windows.relocation.len() as u64;
    let cuts = choose_cuts(&windows, events.len(), target, &mut rng);
    let mut disk = TraceDisk::new(image);
    for cut in cuts {
        disk.advance_to(&events, cut);
        summary.cut_points += 1;
        let in_flight = disk.in_flight();
        let mut plans = crash_plans(disk.disk(), &in_flight, &mut rng);
        plans.shuffle(&mut rng);
        plans.truncate(STATES_PER_CUT);
        let facts = work.facts(|index| journal.status(index, cut));
        let model = Model {
            base: Base::default(),
            facts,
            lenient: false,
        };
        let in_relocation = Windows::inside(&windows.relocation, cut);
        let after_trim = Windows::inside(&windows.after_trim, cut);
        for plan in plans {
            let state = summary.states;
            summary.states += 1;
            summary.states_in_relocation += u64::from(in_relocation);
            summary.states_after_ring_trim += u64::from(after_trim);
            let image = crash_image(disk.disk(), &in_flight, plan);
            check_state(image, &geometry, &model, state, &mut rng, summary).map_err(|what| {
                format!(
                    "cut point {cut} of {} ({}), image {plan:?}: {what}",
                    events.len(),
                    if in_relocation {
                        "inside a relocation step"
                    } else {
                        "outside relocation"
                    }
                )
            })?;
        }
    }
    Ok(())
}

/// Runs the workload on a store over `image` (no faults, completions reordered), its device
/// recording into `trace`, with the reclaimer run by hand when the ring is full and at random
/// points; returns it with the journal of its operations.
fn run_workload(
    image: &[u8],
    geometry: Geometry,
    trace: &Arc<Trace>,
    rng: &mut ChaCha8Rng,
) -> Result<(Workload, TraceJournal), String> {
    // Completions more or less reordered: a ring trim may then be durable before a batch
    // submitted before it.
    let faults = FaultConfig {
        latency_waits_max: rng.gen_range(2..=12),
        ..FaultConfig::none()
    };
    // A quarter of the workloads with writes durable on their own (RWF_DSYNC), no flushes.
    let durability = if rng.gen_bool(0.25) {
        Durability::Dsync
    } else {
        Durability::Fdatasync
    };
    let options = DriveOptions {
        durability: Some(durability),
        ..DriveOptions::default()
    };
    let opened = open_sim_store(
        image.to_vec(),
        geometry,
        faults,
        rng.gen(),
        Some(trace.clone()),
        options,
    );
    let store = opened
        .store
        .map_err(|error| format!("the first open failed: {error}"))?;
    let mut journal = TraceJournal::new(trace.clone());
    let mut work = Workload::resume(&store, rng.gen(), 0);
    work.start(&store, &mut journal)?;
    for _ in 0..GROUPS {
        if work.step(&store, &mut journal)? == Progress::Stopped {
            return Err("the store stopped on a drive without faults".into());
        }
        if work.ring_full || rng.gen_bool(0.12) {
            work.reclaim(&store, &mut journal)?;
        }
    }
    store.close();
    drop(store);
    Ok((work, journal))
}

/// The cut points, sorted and each once, at which about `target` states of a trace of
/// `events` events are built.
fn choose_cuts(windows: &Windows, events: usize, target: u64, rng: &mut ChaCha8Rng) -> Vec<usize> {
    // Half the cut points inside relocation steps, some after their ring trims, the rest
    // anywhere.
    let cuts_wanted = (target as usize)
        .div_ceil(STATES_PER_CUT)
        .clamp(1, CUTS_MAX);
    let cuts_in = |ranges: &[(usize, usize)]| -> Vec<usize> {
        ranges
            .iter()
            .flat_map(|(start, end)| start + 1..=*end)
            .collect()
    };
    let mut cuts: Vec<usize> = cuts_in(&windows.relocation)
        .choose_multiple(rng, cuts_wanted / 2)
        .copied()
        .collect();
    cuts.extend(
        cuts_in(&windows.after_trim)
            .choose_multiple(rng, cuts_wanted / 10)
            .copied(),
    );
    cuts.extend(
        cuts_in(&windows.reclaims)
            .choose_multiple(rng, cuts_wanted / 10)
            .copied(),
    );
    while cuts.len() < cuts_wanted {
        cuts.push(rng.gen_range(1..=events));
    }
    cuts.sort_unstable();
    cuts.dedup();
    cuts
}

/// Opens a store on one crash image and checks it; on some states recovers it again and
/// creates a LogDrive.
fn check_state(
    image: Vec<u8>,
    geometry: &Geometry,
    model: &Model,
    state: u64,
    rng: &mut ChaCha8Rng,
    summary: &mut CrashSummary,
) -> Result<(), String> {
    let SimStore {
        store, image: sink, ..
    } = open_sim_store(
        image,
        *geometry,
        FaultConfig::none(),
        rng.gen(),
        None,
        DriveOptions::default(),
    );
    let store = store.map_err(|error| format!("the store did not open: {error}"))?;
    let first = check(&store, model)?;
    summary.acked_facts += first.acked_facts;
    summary.reads += first.reads;
    let mut last = store;
    if state % 3 == 0 {
        // Recovery is idempotent: the recovered ring, recovered again, answers the same.
        last.close();
        drop(last);
        let recovered = sink
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .ok_or("the closed store's device left no image")?;
        let again = open_sim_store(
            recovered,
            *geometry,
            FaultConfig::none(),
            rng.gen(),
            None,
            DriveOptions::default(),
        );
        last = again
            .store
            .map_err(|error| format!("the second recovery did not open: {error}"))?;
        let second = check(&last, model)?;
        if second.observation != first.observation {
            return Err(format!(
                "a second recovery answered otherwise: {}",
                difference(&first.observation, &second.observation)
            ));
        }
        summary.idempotence_checks += 1;
    }
    if state % 4 == 1 {
        check_next_generation(&last, FRESH_ID, first.base.generation_max)?;
        summary.generation_checks += 1;
    }
    last.close();
    Ok(())
}

/// The first LogDrive two observations disagree on, for a message.
pub fn difference(first: &Observation, second: &Observation) -> String {
    let ids: std::collections::BTreeSet<u64> = first
        .drives
        .keys()
        .chain(second.drives.keys())
        .copied()
        .collect();
    for id in ids {
        let (a, b) = (first.drives.get(&id), second.drives.get(&id));
        if a == b {
            continue;
        }
        let (Some(a), Some(b)) = (a, b) else {
            return format!(
                "LogDrive {id} live in one ({}) and not the other",
                a.is_some()
            );
        };
        if a.length != b.length || a.generation != b.generation {
            return format!("LogDrive {id}: {:?} then {:?}", a.length, b.length);
        }
        let differs = a
            .reads
            .iter()
            .zip(&b.reads)
            .find(|(x, y)| x != y)
            .map(|(x, y)| format!("address {} read {:?} then {:?}", x.0, x.1, y.1));
        return format!(
            "LogDrive {id}: {}",
            differs.unwrap_or_else(|| "tails".into())
        );
    }
    "nothing".into()
}
