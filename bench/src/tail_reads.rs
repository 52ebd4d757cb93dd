//! The read section's tail reads (issue 11): one writer appends 4 KiB entries with 256 in
//! flight while reader threads read the newest entries from the drive's recent-entry cache,
//! each phase with readers judged against the writer alone. Runs are short and interleaved in
//! rounds (the writer alone first, between and last), each figure the mean of its runs,
//! because the device's speed drifts by several times within seconds on a shared host.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use sealog::{Drive, DriveOptions, ReadStats, WhenFull};
use sealog_wal::format::ENTRY_HEADER_SIZE;

use crate::cells::{fresh_ring, RingShape};
use crate::progress::progress;
use crate::random::SplitMix64;
use crate::read_plan::{
    TAIL_PAYLOAD_BYTES, TAIL_READS_PER_SEC_GOAL, TAIL_READ_CACHE_BYTES, TAIL_WRITER_IN_FLIGHT,
};
use crate::read_row::{ReadLoad, ReadRow, SECTION_TAIL, TAIL_READ, TAIL_WRITER};
use crate::reads::{timed_threads, ReadTimes};

/// One phase of the tail section: reader threads, and their total rate when paced (`None`:
/// as fast as they go).
#[derive(Clone, Copy, Debug)]
struct TailPlan {
    readers: u64,
    paced_reads_per_sec: Option<f64>,
}

/// The tail section's phases of one round, in order. Four readers run twice: as fast as they
/// go (the most the cache serves), and paced at the target's 500 k reads/s, which asks what
/// serving that rate costs the writer: on this machine's 2 CPUs, readers that never stop take
/// the CPUs the writer and the drive thread need, whatever the engine does.
const TAIL_ROUND: [TailPlan; 4] = [
    TailPlan {
        readers: 0,
        paced_reads_per_sec: None,
    },
    TailPlan {
        readers: 1,
        paced_reads_per_sec: None,
    },
    TailPlan {
        readers: 4,
        paced_reads_per_sec: None,
    },
    TailPlan {
        readers: 4,
        paced_reads_per_sec: Some(TAIL_READS_PER_SEC_GOAL),
    },
];

/// Rounds of [`TAIL_ROUND`], then one more phase of the writer alone: its throughput drifts
/// with the device's by a factor of several within seconds on a shared host, so each figure
/// is the mean of phases spread over the section, and the no-reader figure brackets the rest.
const TAIL_ROUNDS: usize = 2;

/// Every phase of the tail section, in order.
fn tail_plans() -> Vec<TailPlan> {
    let mut plans: Vec<TailPlan> = (0..TAIL_ROUNDS).flat_map(|_| TAIL_ROUND).collect();
    plans.push(TAIL_ROUND[0]);
    plans
}

/// The tail section's writer: appends 4 KiB entries with [`TAIL_WRITER_IN_FLIGHT`] in flight,
/// counts acknowledgements, and times them into the histogram of the phase `phase` names
/// while `measuring` is set. It trims behind
/// itself (a quarter of the ring kept, far more than the readers reach) so the ring never fills.
struct TailWriter {
    acknowledged: AtomicU64,
    measuring: AtomicBool,
    phase: AtomicUsize,
    stop: AtomicBool,
}

impl TailWriter {
    fn run(&self, drive: &Drive, phases: usize) -> Result<Vec<Histogram<u64>>, String> {
        let mut latency: Vec<Histogram<u64>> = (0..phases)
            .map(|_| Histogram::<u64>::new(3).map_err(|error| error.to_string()))
            .collect::<Result<_, _>>()?;
        let payload = bytes::Bytes::from(vec![0x6b; TAIL_PAYLOAD_BYTES]);
        let record_bytes = (TAIL_PAYLOAD_BYTES + ENTRY_HEADER_SIZE) as u64;
        let ring_bytes = drive.geometry().ring_size_bytes().unwrap_or(0);
        let keep = (ring_bytes / 4 / record_bytes).max(64);
        let trim_every = (keep / 4).max(1);
        let mut pending = VecDeque::with_capacity(TAIL_WRITER_IN_FLIGHT);
        while !self.stop.load(Ordering::Relaxed) {
            while pending.len() < TAIL_WRITER_IN_FLIGHT {
                let ticket = drive
                    .append(payload.clone())
                    .map_err(|error| error.to_string())?;
                pending.push_back((Instant::now(), ticket));
            }
            let (submitted, ticket) = pending.pop_front().expect("one pending");
            let lsn = ticket.wait().map_err(|error| error.to_string())?;
            if self.measuring.load(Ordering::Relaxed) {
                self.acknowledged.fetch_add(1, Ordering::Relaxed);
                let phase = self.phase.load(Ordering::Relaxed);
                latency[phase]
                    .record(submitted.elapsed().as_nanos().max(1) as u64)
                    .ok();
            }
            if lsn % trim_every == 0 {
                drive
                    .trim(lsn.saturating_sub(keep))
                    .map_err(|error| error.to_string())?;
            }
        }
        for (_, ticket) in pending {
            let _ = ticket.wait();
        }
        Ok(latency)
    }
}

/// Tail reads: one writer appends 4 KiB x 256 in flight on a fresh ring of `shape`, alone,
/// then beside 1 and 4 reader threads, then alone again; each reader reads random entries among
/// the newest half of the cache's bytes ([`TAIL_READ_CACHE_BYTES`]). Rows: the writer in every
/// phase (those with readers judged against its no-reader figure, the mean of the two phases
/// without) and the readers; and the drive's read statistics at the end (its cache's bound).
pub fn tail_reads(
    ring: &Path,
    shape: RingShape,
    options: DriveOptions,
    times: ReadTimes,
) -> Result<(Vec<ReadRow>, ReadStats), String> {
    fresh_ring(ring, shape)?;
    let drive = Drive::open(
        ring,
        DriveOptions {
            when_full: WhenFull::Wait(Duration::from_secs(10)),
            read_cache_bytes: TAIL_READ_CACHE_BYTES,
            ..options
        },
    )
    .map_err(|error| error.to_string())?;
    let newest_entries =
        TAIL_READ_CACHE_BYTES / 2 / (TAIL_PAYLOAD_BYTES + ENTRY_HEADER_SIZE) as u64;
    let writer = TailWriter {
        acknowledged: AtomicU64::new(0),
        measuring: AtomicBool::new(false),
        phase: AtomicUsize::new(0),
        stop: AtomicBool::new(false),
    };
    let (phases, writer_latency) = std::thread::scope(|scope| {
        let writing = scope.spawn(|| writer.run(&drive, tail_plans().len()));
        warm_up_writer(&drive);
        let phases = tail_phases(&drive, &writer, newest_entries, times);
        writer.stop.store(true, Ordering::SeqCst);
        let latency = writing
            .join()
            .unwrap_or_else(|_| Err("the writer panicked".into()));
        (phases, latency)
    });
    let stats = drive.read_stats();
    drive.close();
    let (phases, writer_latency) = (phases?, writer_latency?);
    Ok((tail_rows(&phases, &writer_latency), stats))
}

/// Entries the writer appends before the first phase: twice the cache's bytes, so the cache
/// has filled and is evicting, as in every later phase (a writer just started appends into an
/// empty cache, whose first pages the kernel is still handing out, and measured about half its
/// later rate: a no-reader figure taken then would flatter every phase with readers).
fn warm_up_writer(drive: &Drive) {
    let record_bytes = (TAIL_PAYLOAD_BYTES + ENTRY_HEADER_SIZE) as u64;
    let entries = 2 * TAIL_READ_CACHE_BYTES / record_bytes;
    // Bounded, so a writer that stalls cannot hold the run: the phases then measure the stall.
    let deadline = Instant::now() + Duration::from_secs(10);
    progress("tail reads: the writer fills the cache");
    while drive.durable_lsn() < entries && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// One phase of the tail section: how many readers, the writer's acknowledgements and the
/// readers' figures over the window.
struct TailPhase {
    plan: TailPlan,
    appends: u64,
    seconds: f64,
    reads: u64,
    read_latency: Histogram<u64>,
    /// Reads the cache served and reads of the device during the phase (warm-up included).
    cache_hits: u64,
    device_reads: u64,
}

/// Runs the phases of [`tail_plans`] while the writer runs.
fn tail_phases(
    drive: &Drive,
    writer: &TailWriter,
    newest_entries: u64,
    times: ReadTimes,
) -> Result<Vec<TailPhase>, String> {
    let mut phases = Vec::new();
    // The rounds share the section's time.
    let times = ReadTimes {
        window: times.window / TAIL_ROUNDS as u32,
        ..times
    };
    for (phase, plan) in tail_plans().iter().enumerate() {
        let readers = plan.readers;
        progress(&format!("tail reads: writer beside {readers} readers"));
        writer.phase.store(phase, Ordering::SeqCst);
        let before = writer.acknowledged.load(Ordering::SeqCst);
        let stats_before = drive.read_stats();
        let read = |random: &mut SplitMix64| -> Result<(), String> {
            // What a tailing reader knows without asking the drive thread.
            let durable = drive.durable_lsn();
            if durable == 0 {
                std::thread::yield_now();
                return Ok(());
            }
            let lsn = durable - random.below(durable.min(newest_entries));
            let payload = drive.read(lsn).map_err(|error| error.to_string())?;
            if payload.len() != TAIL_PAYLOAD_BYTES {
                return Err(format!("tail read of {lsn}: {} bytes", payload.len()));
            }
            Ok(())
        };
        let (reads, seconds, read_latency) = timed_threads(
            readers,
            times,
            plan.paced_reads_per_sec,
            Some(&writer.measuring),
            read,
        )?;
        let appends = writer.acknowledged.load(Ordering::SeqCst) - before;
        let stats_after = drive.read_stats();
        phases.push(TailPhase {
            plan: *plan,
            appends,
            seconds,
            reads,
            read_latency,
            cache_hits: stats_after.cache_hits - stats_before.cache_hits,
            device_reads: stats_after.device_reads - stats_before.device_reads,
        });
    }
    Ok(phases)
}

/// The tail section's rows from its phases: the writer alone (the mean of the phases without
/// readers), then for each plan with readers the writer beside them and the readers.
fn tail_rows(phases: &[TailPhase], writer_latency: &[Histogram<u64>]) -> Vec<ReadRow> {
    let baseline = writer_baseline(&plan_phases(phases, writer_latency, &TAIL_ROUND[0]));
    let mut rows = vec![baseline.clone()];
    for plan in &TAIL_ROUND[1..] {
        let runs = plan_phases(phases, writer_latency, plan);
        rows.extend(plan_rows(&runs, &baseline, plan));
    }
    rows
}

/// The phases of `plan` (its readers and pace), each with the writer's latency during it.
fn plan_phases<'a>(
    phases: &'a [TailPhase],
    writer_latency: &'a [Histogram<u64>],
    plan: &TailPlan,
) -> Vec<(&'a TailPhase, &'a Histogram<u64>)> {
    phases
        .iter()
        .zip(writer_latency)
        .filter(|(phase, _)| {
            (phase.plan.readers, phase.plan.paced_reads_per_sec)
                == (plan.readers, plan.paced_reads_per_sec)
        })
        .collect()
}

/// The writer's row of one phase, with the readers beside it.
fn writer_row(phase: &TailPhase, latency: &Histogram<u64>) -> ReadRow {
    let mut row = ReadRow::measured(
        TAIL_WRITER,
        TAIL_PAYLOAD_BYTES as u64,
        ReadLoad::single_thread(TAIL_WRITER_IN_FLIGHT as u64),
        phase.appends,
        phase.seconds,
        latency,
    );
    row.section = SECTION_TAIL;
    row.readers_alongside = phase.plan.readers;
    row.readers_paced_per_sec = phase.plan.paced_reads_per_sec.unwrap_or(0.0);
    row
}

/// The readers' row of one phase.
fn reader_row(phase: &TailPhase) -> ReadRow {
    let mut row = ReadRow::measured(
        TAIL_READ,
        TAIL_PAYLOAD_BYTES as u64,
        ReadLoad::blocking_threads(phase.plan.readers),
        phase.reads,
        phase.seconds,
        &phase.read_latency,
    );
    row.section = SECTION_TAIL;
    row.readers_paced_per_sec = phase.plan.paced_reads_per_sec.unwrap_or(0.0);
    row
}

/// The writer's no-reader figure: the mean of the phases without readers (`alone`).
fn writer_baseline(alone: &[(&TailPhase, &Histogram<u64>)]) -> ReadRow {
    let alone_rows: Vec<ReadRow> = alone
        .iter()
        .map(|(phase, latency)| writer_row(phase, latency))
        .collect();
    let mut baseline = ReadRow::mean_of(&alone_rows.iter().collect::<Vec<_>>());
    baseline.note = format!(
        "the writer alone, appends acknowledged per second (latency: submission to \
         acknowledgement): the mean of {} phases without readers, first, between the rounds and \
         last ({})",
        alone.len(),
        ReadRow::runs_text(&alone_rows)
    );
    baseline
}

/// The rows of a plan with readers, from its phases (`runs`): each figure the mean of its
/// phases, the writer judged against its no-reader figure (`baseline`), then the readers.
fn plan_rows(
    runs: &[(&TailPhase, &Histogram<u64>)],
    baseline: &ReadRow,
    plan: &TailPlan,
) -> [ReadRow; 2] {
    // Each plan's figures: the mean of its phases.
    let writers: Vec<ReadRow> = runs
        .iter()
        .map(|(phase, latency)| writer_row(phase, latency))
        .collect();
    let readers: Vec<ReadRow> = runs.iter().map(|(phase, _)| reader_row(phase)).collect();
    let mut writer = ReadRow::mean_of(&writers.iter().collect::<Vec<_>>());
    writer.judge_against(baseline, false);
    writer.note = format!(
        "the writer beside the readers below: the mean of {} phases ({}), against its \
         no-reader figure",
        runs.len(),
        ReadRow::runs_text(&writers)
    );
    let mut reader = ReadRow::mean_of(&readers.iter().collect::<Vec<_>>());
    let cache_hits: u64 = runs.iter().map(|(phase, _)| phase.cache_hits).sum();
    let device_reads: u64 = runs.iter().map(|(phase, _)| phase.device_reads).sum();
    let pace = plan.paced_reads_per_sec.map_or_else(String::new, |rate| {
        format!(", paced at {:.0} k/s in all", rate / 1e3)
    });
    reader.note = format!(
        "Drive::read of random entries among the newest {} MiB (half the cache's {} MiB)\
         {pace}, the mean of {} phases ({}): {:.1} % from the cache ({cache_hits} cache hits, \
         {device_reads} device reads, warm-ups included)",
        TAIL_READ_CACHE_BYTES >> 21,
        TAIL_READ_CACHE_BYTES >> 20,
        runs.len(),
        ReadRow::runs_text(&readers),
        100.0 * cache_hits as f64 / (cache_hits + device_reads).max(1) as f64,
    );
    [writer, reader]
}
