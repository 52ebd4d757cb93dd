//! The valid rings the mutator starts from: the model writer's sample rings, and rings written
//! by seeded random workloads over a few small geometries (appends of varied sizes, flushes,
//! trims that wrap laps, tail markers, crashes with per-block fates and reopens by later
//! incarnations). While it writes, the generator checks what it can against its own record of
//! what was appended and acknowledged: every crash image reopens, gives back every acknowledged
//! live entry byte for byte, and nothing that was never appended (I-1, I-2, I-3). It owns
//! neither the mutations ([`super::mutate`]) nor the checks of a mutated ring ([`super::check`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::choices::{case_seed, mix64, Choices};
use crate::model::{fill_garbage, sample_rings, BlockFate, ModelError, ModelWriter};
use sealog_wal::format::{Geometry, RingId};
use sealog_wal::replay::{read_control, replay, RecoveryReport, ReplayOptions};

/// A valid ring to mutate, with what the mutator needs to know about it.
#[derive(Clone)]
pub struct Ring {
    /// How it was made, for reports: `sample 3` or `workload 1234`.
    pub name: String,
    /// Its geometry.
    pub geometry: Geometry,
    /// Its identity.
    pub ring_id: RingId,
    /// Its bytes.
    pub image: Vec<u8>,
    /// Earlier images of the same ring (same geometry and identity): the bytes other laps and
    /// incarnations left at the same places, for stale-block mutations.
    pub history: Vec<Vec<u8>>,
    /// Strict replay's report of `image` (every ring here replays).
    pub report: RecoveryReport,
    /// The batches strict replay visited (those holding live entries), in log order: the ring
    /// offset of each one's first block, and its length in bytes.
    pub batches: Vec<(u64, u32)>,
}

/// Sectors a torn block is cut at (the model writer's tear unit).
const SECTOR_BYTES: u32 = crate::model::TEAR_SECTOR_BYTES as u32;

/// Snapshots of earlier images a workload keeps at most.
const HISTORY_MAX: usize = 8;

/// Reopens (new incarnations) a workload makes at most.
const REOPENS_MAX: u32 = 6;

/// The small geometries workloads write: the sample rings' own, one-block batches, two-block
/// segments (a header and one data block), 8 KiB blocks, and a two-segment ring.
pub fn geometries() -> Vec<Geometry> {
    let geometry = |block: u32, segment_blocks: u64, segments: u32, batch_blocks: u32| {
        move |window_batches: u32, window_blocks: u64| Geometry {
            block_size_bytes: block,
            segment_size_bytes: segment_blocks * u64::from(block),
            segment_count: segments,
            batch_size_max_bytes: batch_blocks * block,
            window_batches_max: window_batches,
            window_bytes_max: window_blocks * u64::from(block),
        }
    };
    vec![
        geometry(4096, 4, 3, 2)(2, 4),
        geometry(4096, 8, 4, 1)(4, 4),
        geometry(4096, 2, 5, 1)(1, 1),
        geometry(8192, 4, 3, 2)(3, 4),
        geometry(4096, 16, 2, 4)(3, 12),
    ]
}

/// A ring from its image: identity and geometry from its control block, and strict replay's
/// report. An image that does not replay is a bug of the generator or of replay.
fn ring(name: String, image: Vec<u8>, history: Vec<Vec<u8>>) -> Result<Ring, String> {
    let mut source: &[u8] = &image;
    let control = read_control(&mut source)
        .map_err(|error| format!("{name}: its control block does not read: {error}"))?;
    let mut source: &[u8] = &image;
    let geometry = control.geometry;
    let mut batches: Vec<(u64, u32)> = Vec::new();
    let report = replay(&mut source, &ReplayOptions::default(), &mut |entry| {
        let batch = (geometry.ring_offset(entry.batch), entry.batch_bytes);
        if batches.last() != Some(&batch) {
            batches.push(batch);
        }
    })
    .map_err(|error| format!("{name}: a generated ring does not replay: {error}"))?;
    Ok(Ring {
        name,
        geometry,
        ring_id: control.ring_id,
        image,
        history,
        report,
        batches,
    })
}

/// The model writer's sample rings, each with the others as its history (they are one ring's
/// lineage: the same geometry and identity).
pub fn sample_bases() -> Vec<Ring> {
    let images = sample_rings();
    images
        .iter()
        .enumerate()
        .map(|(index, image)| {
            ring(format!("sample {index}"), image.clone(), images.clone())
                .expect("the sample rings replay")
        })
        .collect()
}

/// The ring written by the workload of `seed`, or what the generator found broken.
pub fn workload(seed: u64) -> Result<Ring, String> {
    workload_from(&mut Choices::from_seed(seed), format!("workload {seed}"))
}

/// The ring written by a workload `choices` drives (a fuzzer's bytes, or a seed).
pub fn workload_from(choices: &mut Choices<'_>, name: String) -> Result<Ring, String> {
    let all = geometries();
    let geometry = choices.pick(&all);
    let salt = choices.next_u64();
    let ring_id = if choices.chance(1, 4) {
        RingId(*b"sealog-fuzz-seed")
    } else {
        let mut id = [0u8; 16];
        id[..8].copy_from_slice(&mix64(salt).to_le_bytes());
        id[8..].copy_from_slice(&mix64(salt ^ 1).to_le_bytes());
        RingId(id)
    };
    let image = ModelWriter::format(geometry, ring_id);
    let (writer, _, _) = ModelWriter::open(image, &ReplayOptions::default())
        .map_err(|error| format!("{name}: a new ring does not open: {error}"))?;
    let mut workload = Workload {
        name,
        writer,
        log: BTreeMap::new(),
        history: Vec::new(),
        salt,
        appended: 0,
        reopens: 0,
    };
    let steps = choices.between(4, 160);
    for _ in 0..steps {
        workload.step(choices)?;
    }
    let image = match choices.below(4) {
        0 => {
            workload.writer.flush();
            workload.writer.durable().to_vec()
        }
        1 => workload.writer.durable().to_vec(),
        _ => workload.crash_image(choices),
    };
    let acked = workload.writer.acked_lsn();
    let mut source: &[u8] = &image;
    let mut entries = Vec::new();
    let report = replay(&mut source, &ReplayOptions::default(), &mut |entry| {
        entries.push((entry.lsn, entry.payload.to_vec()))
    })
    .map_err(|error| format!("{}: its last image does not replay: {error}", workload.name))?;
    workload.check_recovered(acked, &report, &entries)?;
    ring(workload.name, image, workload.history)
}

/// A workload in progress: the writer, and what it was given.
struct Workload {
    name: String,
    writer: ModelWriter,
    /// The payload of every LSN the live lineage appended (entries cut by a reopen removed).
    log: BTreeMap<u64, Vec<u8>>,
    history: Vec<Vec<u8>>,
    salt: u64,
    appended: u64,
    reopens: u32,
}

impl Workload {
    fn step(&mut self, choices: &mut Choices<'_>) -> Result<(), String> {
        match choices.below(20) {
            0..=8 => self.append(choices),
            9..=11 => {
                self.writer.flush();
                Ok(())
            }
            12..=14 => {
                let lsn = self.writer.acked_lsn().saturating_sub(choices.below(6));
                self.writer.trim(lsn);
                Ok(())
            }
            15 => {
                if self.writer.tail_marker().is_err() {
                    self.writer.flush();
                }
                Ok(())
            }
            16 => {
                let image = self.writer.durable().to_vec();
                self.remember(image, choices);
                Ok(())
            }
            _ if self.reopens < REOPENS_MAX => self.crash_and_reopen(choices),
            _ => Ok(()),
        }
    }

    fn append(&mut self, choices: &mut Choices<'_>) -> Result<(), String> {
        let limit = self.writer.geometry().payload_size_max_bytes() as u64;
        let block = u64::from(self.writer.geometry().block_size_bytes);
        let sizes = [0, 1, 17, 63, 64, 300, 1000, block - 128, limit - 1, limit];
        let count = choices.between(1, 4);
        let payloads: Vec<Vec<u8>> = (0..count)
            .map(|_| {
                let len = if choices.chance(1, 4) {
                    choices.below(limit + 1)
                } else {
                    choices.pick(&sizes)
                };
                self.appended += 1;
                let mut payload = vec![0u8; len as usize];
                fill_garbage(&mut payload, mix64(self.salt ^ self.appended));
                payload
            })
            .collect();
        let refs: Vec<&[u8]> = payloads.iter().map(Vec::as_slice).collect();
        let (lsns, full) = match self.writer.append(&refs) {
            Ok(lsns) => (lsns, false),
            Err(ModelError::RingFull { submitted, .. }) => (submitted, true),
            Err(error) => return Err(format!("{}: an append was refused: {error}", self.name)),
        };
        for (lsn, payload) in lsns.into_iter().zip(payloads) {
            self.log.insert(lsn, payload);
        }
        if full {
            // What a writer does when the ring is full: make room by trimming.
            self.writer.flush();
            self.writer.trim(self.writer.acked_lsn());
        }
        Ok(())
    }

    /// A fate for every block of every pending write: new, old, zeros, garbage or torn.
    fn crash_image(&self, choices: &mut Choices<'_>) -> Vec<u8> {
        let sectors = self.writer.geometry().block_size_bytes / SECTOR_BYTES;
        let hostile = choices.chance(1, 2);
        self.writer.crash(&mut |_, _| {
            let fate = if hostile {
                choices.below(5)
            } else {
                choices.below(2)
            };
            match fate {
                0 => BlockFate::New,
                1 => BlockFate::Old,
                2 => BlockFate::Zero,
                3 => BlockFate::Garbage(choices.next_u64()),
                _ => BlockFate::PartlyNew(choices.between(1, u64::from(sectors) - 1) as u32),
            }
        })
    }

    fn crash_and_reopen(&mut self, choices: &mut Choices<'_>) -> Result<(), String> {
        let acked = self.writer.acked_lsn();
        let image = self.crash_image(choices);
        self.remember(image.clone(), choices);
        let (writer, report, entries) = ModelWriter::open(image, &ReplayOptions::default())
            .map_err(|error| {
                format!(
                    "{}: a crash image of the model writer does not reopen: {error}",
                    self.name
                )
            })?;
        self.check_recovered(acked, &report, &entries)?;
        self.writer = writer;
        self.reopens += 1;
        Ok(())
    }

    /// I-1 to I-3 for a recovered log: contiguous from the trim point, every acknowledged live
    /// entry back with its bytes, and nothing that was not appended. Then the log forgets what
    /// recovery cut.
    fn check_recovered(
        &mut self,
        acked: u64,
        report: &RecoveryReport,
        entries: &[(u64, Vec<u8>)],
    ) -> Result<(), String> {
        let name = &self.name;
        for (index, (lsn, payload)) in entries.iter().enumerate() {
            if *lsn != report.trim_lsn + 1 + index as u64 {
                return Err(format!(
                    "{name}: recovered LSN {lsn} at index {index} is out of line"
                ));
            }
            if self.log.get(lsn) != Some(payload) {
                return Err(format!(
                    "{name}: LSN {lsn} came back with bytes never appended"
                ));
            }
        }
        if acked > report.trim_lsn && report.next_lsn <= acked {
            return Err(format!(
                "{name}: acknowledged LSN {acked} lost: recovery ends at {} (trim {})",
                report.next_lsn - 1,
                report.trim_lsn
            ));
        }
        self.log.retain(|lsn, _| *lsn < report.next_lsn);
        Ok(())
    }

    fn remember(&mut self, image: Vec<u8>, choices: &mut Choices<'_>) {
        if self.history.len() < HISTORY_MAX {
            self.history.push(image);
        } else {
            let at = choices.below(HISTORY_MAX as u64) as usize;
            self.history[at] = image;
        }
    }
}

/// The base rings of a run: the sample rings, and workload rings made on first use and kept
/// (a bounded cache, so a long run keeps drawing new workloads without growing).
pub struct Bases {
    samples: Vec<Arc<Ring>>,
    workloads: HashMap<u64, Arc<Ring>>,
    run_seed: u64,
    workload_seeds: u64,
}

/// Workload rings a [`Bases`] keeps at most.
const CACHED_WORKLOADS_MAX: usize = 2048;

impl Bases {
    /// The bases of a run: `workload_seeds` workloads, derived from `run_seed`.
    pub fn new(run_seed: u64, workload_seeds: u64) -> Bases {
        Bases {
            samples: sample_bases().into_iter().map(Arc::new).collect(),
            workloads: HashMap::new(),
            run_seed,
            workload_seeds,
        }
    }

    /// The workload seed of workload `index` of this run.
    pub fn workload_seed(&self, index: u64) -> u64 {
        case_seed(self.run_seed ^ 0x776f_726b_6c6f_6164, index)
    }

    /// A base ring: a sample ring a quarter of the time, else one of the run's workloads; with
    /// `fresh`, sometimes a workload `choices` itself drives (for a fuzzer's byte stream).
    pub fn pick(&mut self, choices: &mut Choices<'_>, fresh: bool) -> Result<Arc<Ring>, String> {
        if choices.chance(1, 4) {
            return Ok(Arc::clone(
                &self.samples[choices.below(self.samples.len() as u64) as usize],
            ));
        }
        if fresh && choices.chance(1, 4) {
            return workload_from(choices, "workload from the input".into()).map(Arc::new);
        }
        let seed = self.workload_seed(choices.below(self.workload_seeds));
        if let Some(ring) = self.workloads.get(&seed) {
            return Ok(Arc::clone(ring));
        }
        let ring = Arc::new(workload(seed)?);
        if self.workloads.len() >= CACHED_WORKLOADS_MAX {
            self.workloads.clear();
        }
        self.workloads.insert(seed, Arc::clone(&ring));
        Ok(ring)
    }
}
