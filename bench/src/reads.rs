//! The read section (issue 11): tail reads from the recent-entry cache while a writer appends,
//! cold random point reads of a full ring, and a catch-up iterator over it, each beside the
//! ceiling it is judged against and measured in the same run. Runs are short and interleaved
//! in rounds (the ceiling before, between and after sealog's runs; the writer alone first,
//! between and last), each figure the mean of its runs, because the device's speed drifts by
//! several times within seconds on a shared host.

use std::collections::VecDeque;
use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use sealog::{Drive, DriveOptions, PayloadFuture, ReadStats, WhenFull};
use sealog_wal::format::ENTRY_HEADER_SIZE;

use crate::ceiling;
use crate::cells::{fresh_ring, RingShape};
use crate::random::SplitMix64;
use crate::read_report::{
    ReadLoad, ReadRow, CATCH_UP, COLD_ASYNC, COLD_BLOCKING, SECTION_CATCH_UP, SECTION_COLD,
    SECTION_TAIL, TAIL_READ, TAIL_WRITER,
};

/// Reads per second from the recent-entry cache that 4 readers must reach while the writer
/// runs (issue 11); the paced phase reads at this rate.
pub const TAIL_READS_PER_SEC_GOAL: f64 = 500_000.0;

/// Payload of the tail section's appends and reads: 4 KiB entries, as the issue states them.
pub const TAIL_PAYLOAD_BYTES: usize = 4096;
/// Appends the tail section's one writer keeps in flight (the 4 KiB x 256).
pub const TAIL_WRITER_IN_FLIGHT: usize = 256;
/// Bytes of recent batches the tail section's drive keeps in memory for reads: the drive's
/// default (64 MiB: tens of milliseconds of a writer at this device's 1-3 GB/s), named in its
/// options so the figure says what it measured.
pub const TAIL_READ_CACHE_BYTES: u64 = sealog::drive::READ_CACHE_BYTES_DEFAULT;

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

/// Payload of the cold reads' entries: the record (a 96-byte header and the payload) is one
/// 4 KiB block, so a record-grained read is one 4 KiB read, the random-read ceiling's size.
/// The full ring that recovery measures is filled with these (`cells::fill_ring`).
pub const COLD_PAYLOAD_BYTES: usize = 4096 - ENTRY_HEADER_SIZE;
/// The random-read ceiling's read size: one record of [`COLD_PAYLOAD_BYTES`].
pub const COLD_READ_BYTES: u32 = 4096;
/// Reads in flight of the deep cold cells and their ceiling.
pub const COLD_DEPTH: usize = 16;

/// How long the read section's measurements run.
#[derive(Clone, Copy, Debug)]
pub struct ReadTimes {
    /// The measured time of each kind of figure, shared by its runs (the tail section's
    /// phases of one plan, a cold row's rounds).
    pub window: Duration,
    /// Before each window: threads started, the cache filled, nothing counted.
    pub warmup: Duration,
}

/// What each thread of a timed read loop measured.
type ThreadFigures = Result<(u64, Histogram<u64>), String>;

/// Runs `threads` threads (none: only the wait), each calling `operation` (with its thread's
/// generator) in a loop, at most `paced_per_sec` calls per second in all when paced (each
/// thread sleeps 100 us whenever it is ahead of its share): counted and timed only during the
/// window after the warm-up, which `also_measuring` (the tail writer's flag) follows too.
/// Returns the count, the seconds of the window and the latencies (nanoseconds).
fn timed_threads<F>(
    threads: u64,
    times: ReadTimes,
    paced_per_sec: Option<f64>,
    also_measuring: Option<&AtomicBool>,
    operation: F,
) -> Result<(u64, f64, Histogram<u64>), String>
where
    F: Fn(&mut SplitMix64) -> Result<(), String> + Sync,
{
    let measuring = AtomicBool::new(false);
    let stop = AtomicBool::new(false);
    let flags = |on: bool| {
        measuring.store(on, Ordering::SeqCst);
        if let Some(flag) = also_measuring {
            flag.store(on, Ordering::SeqCst);
        }
    };
    let (seconds, results) = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|thread| {
                let (measuring, stop, operation) = (&measuring, &stop, &operation);
                scope.spawn(move || -> ThreadFigures {
                    let mut random = SplitMix64::new(0x7a11 + thread);
                    let mut latency =
                        Histogram::<u64>::new(3).map_err(|error| error.to_string())?;
                    let mut count = 0u64;
                    let (thread_started, mut calls) = (Instant::now(), 0u64);
                    let share_per_sec = paced_per_sec.map(|rate| rate / threads as f64);
                    while !stop.load(Ordering::Relaxed) {
                        if let Some(share) = share_per_sec {
                            let due = (thread_started.elapsed().as_secs_f64() * share) as u64;
                            if calls >= due {
                                std::thread::sleep(Duration::from_micros(100));
                                continue;
                            }
                        }
                        calls += 1;
                        let started = Instant::now();
                        operation(&mut random)?;
                        if measuring.load(Ordering::Relaxed) {
                            latency
                                .record(started.elapsed().as_nanos().max(1) as u64)
                                .ok();
                            count += 1;
                        }
                    }
                    Ok((count, latency))
                })
            })
            .collect();
        std::thread::sleep(times.warmup);
        flags(true);
        let started = Instant::now();
        std::thread::sleep(times.window);
        flags(false);
        let seconds = started.elapsed().as_secs_f64();
        stop.store(true, Ordering::SeqCst);
        let results: Vec<ThreadFigures> = handles
            .into_iter()
            .map(|handle| {
                handle
                    .join()
                    .unwrap_or_else(|_| Err("a reader panicked".into()))
            })
            .collect();
        (seconds, results)
    });
    let mut latency = Histogram::<u64>::new(3).map_err(|error| error.to_string())?;
    let mut count = 0u64;
    for result in results {
        let (thread_count, thread_latency) = result?;
        count += thread_count;
        latency
            .add(thread_latency)
            .map_err(|error| error.to_string())?;
    }
    Ok((count, seconds, latency))
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
                    .append_bytes(payload.clone())
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
    crate::progress("tail reads: the writer fills the cache");
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

/// Runs the phases of [`TAIL_PHASE_READERS`] while the writer runs.
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
        crate::progress(&format!("tail reads: writer beside {readers} readers"));
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

/// The tail section's rows from its phases.
fn tail_rows(phases: &[TailPhase], writer_latency: &[Histogram<u64>]) -> Vec<ReadRow> {
    let writer_load = ReadLoad::single_thread(TAIL_WRITER_IN_FLIGHT as u64);
    let writer_row = |phase: &TailPhase, latency: &Histogram<u64>| {
        let mut row = ReadRow::measured(
            TAIL_WRITER,
            TAIL_PAYLOAD_BYTES as u64,
            writer_load,
            phase.appends,
            phase.seconds,
            latency,
        );
        row.section = SECTION_TAIL;
        row.readers_alongside = phase.plan.readers;
        row.readers_paced_per_sec = phase.plan.paced_reads_per_sec.unwrap_or(0.0);
        row
    };
    let reader_row = |phase: &TailPhase| {
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
    };
    // Each plan's figures: the mean of its phases.
    let of_plan = |plan: &TailPlan| -> Vec<(&TailPhase, &Histogram<u64>)> {
        phases
            .iter()
            .zip(writer_latency)
            .filter(|(phase, _)| {
                (phase.plan.readers, phase.plan.paced_reads_per_sec)
                    == (plan.readers, plan.paced_reads_per_sec)
            })
            .collect()
    };
    let alone = of_plan(&TAIL_ROUND[0]);
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
    let mut rows = vec![baseline.clone()];
    for plan in &TAIL_ROUND[1..] {
        let runs = of_plan(plan);
        let writers: Vec<ReadRow> = runs
            .iter()
            .map(|(phase, latency)| writer_row(phase, latency))
            .collect();
        let readers: Vec<ReadRow> = runs.iter().map(|(phase, _)| reader_row(phase)).collect();
        let mut writer = ReadRow::mean_of(&writers.iter().collect::<Vec<_>>());
        writer.judge_against(&baseline, false);
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
        rows.push(writer);
        rows.push(reader);
    }
    rows
}

/// Cold point reads of the full ring at `ring` (closed; its entries are records of
/// [`COLD_PAYLOAD_BYTES`], one per 4 KiB block), in [`COLD_ROUNDS`] rounds: the random-read
/// ceiling at depths 1 and [`COLD_DEPTH`], then sealog's reads of random live LSNs on a drive
/// just opened (so nothing is cached) by 1 and 16 blocking threads and by 16 futures on one
/// thread; the ceiling once more after the last; and the catch-up iterator from the first
/// live LSN over the whole ring beside the sequential read ceiling (the better of 1 and 4
/// reads in flight) at the iterator's read size, on the same open drive. Also returns the
/// drive's read statistics with the full ring's read index.
pub fn cold_and_catch_up(
    ring: &Path,
    options: DriveOptions,
    times: ReadTimes,
) -> Result<(Vec<ReadRow>, ReadStats), String> {
    let geometry = sealog::storage::open(ring, sealog::storage::Access::ReadOnly)
        .map_err(|error| error.to_string())?
        .geometry;
    let read_bytes = iterator_read_bytes(&options, &geometry);
    crate::progress("catch-up: the sequential read ceiling (before)");
    let sequential_before = sequential_ceiling(ring, read_bytes)?;
    // The ceiling's runs at depths 1 and 16, and sealog's runs of its three ways.
    let mut ceiling_runs: [Vec<ReadRow>; 2] = Default::default();
    let mut sealog_runs: [Vec<ReadRow>; 3] = Default::default();
    let ceiling_run = |runs: &mut [Vec<ReadRow>; 2]| -> Result<(), String> {
        crate::progress("cold reads: the random-read ceiling");
        for (depth, runs) in [1, COLD_DEPTH].into_iter().zip(runs.iter_mut()) {
            runs.push(ceiling::builtin_random_read(
                ring,
                COLD_READ_BYTES,
                depth,
                times.window / 4,
            )?);
        }
        Ok(())
    };
    let mut finish = None;
    for round in 0..COLD_ROUNDS {
        ceiling_run(&mut ceiling_runs)?;
        let drive = Drive::open(ring, options.clone()).map_err(|error| error.to_string())?;
        let run_times = ReadTimes {
            window: times.window / COLD_ROUNDS as u32,
            ..times
        };
        for (index, runs) in sealog_runs.iter_mut().enumerate() {
            crate::progress(&format!(
                "cold reads, round {}/{COLD_ROUNDS}: sealog, {}",
                round + 1,
                [
                    "1 blocking thread",
                    "16 blocking threads",
                    "16 futures on one thread"
                ][index]
            ));
            runs.push(cold_run(&drive, index, run_times)?);
        }
        if round + 1 == COLD_ROUNDS {
            // The read index of a full ring: its bytes per live entry are the figure to report.
            let stats = drive.read_stats();
            crate::progress("catch-up: sealog's iterator over the ring");
            let iterator = catch_up(&drive, drive.first_live_lsn(), times.window * 4)?;
            finish = Some((stats, iterator));
        }
        drive.close();
    }
    ceiling_run(&mut ceiling_runs)?;
    crate::progress("catch-up: the sequential read ceiling (after)");
    let sequential_after = sequential_ceiling(ring, read_bytes)?;
    let (stats, mut iterator) = finish.ok_or("no cold read rounds")?;
    let mut rows = Vec::new();
    let mut sealog_rows: Vec<ReadRow> = sealog_runs
        .iter()
        .map(|runs| {
            let mut row = ReadRow::mean_of(&runs.iter().collect::<Vec<_>>());
            row.note = format!("{}; {}", row.note, ReadRow::runs_text(runs));
            row
        })
        .collect();
    for runs in &ceiling_runs {
        let mut ceiling = ReadRow::mean_of(&runs.iter().collect::<Vec<_>>());
        ceiling.section = SECTION_COLD;
        ceiling.note = format!(
            "{}; the mean of {} runs, before, between and after sealog's ({})",
            ceiling.note,
            runs.len(),
            ReadRow::runs_text(runs)
        );
        for row in sealog_rows
            .iter_mut()
            .filter(|row| row.load.in_flight == ceiling.load.in_flight)
        {
            row.judge_against(&ceiling, false);
        }
        rows.push(ceiling);
    }
    rows.extend(sealog_rows);
    let mut sequential = ReadRow::mean_of(&[&sequential_before, &sequential_after]);
    sequential.note = format!(
        "{}; the mean of a run before the iterator and one after",
        sequential_before.note
    );
    iterator.judge_against(&sequential, true);
    rows.push(sequential);
    rows.push(iterator);
    Ok((rows, stats))
}

/// Rounds of the cold reads: each a run of the random-read ceiling, then the drive opened anew
/// (nothing cached) and sealog's runs; a last ceiling run closes them. The device's speed
/// drifts within seconds on a shared host: interleaved short runs put the ceiling and sealog
/// under the same drift, and each row is the mean of its runs.
pub const COLD_ROUNDS: usize = 2;

/// One of sealog's cold runs on `drive`, over its live LSNs: `way` 0 is one blocking thread,
/// 1 is [`COLD_DEPTH`] blocking threads, 2 is [`COLD_DEPTH`] futures on one thread.
fn cold_run(drive: &Drive, way: usize, times: ReadTimes) -> Result<ReadRow, String> {
    let live = drive.first_live_lsn()..=drive.durable_lsn();
    if live.is_empty() {
        return Err(format!(
            "{}: no live entries to read",
            drive.path().display()
        ));
    }
    match way {
        0 => cold_blocking(drive, live, 1, times),
        1 => cold_blocking(drive, live, COLD_DEPTH as u64, times),
        _ => cold_async(drive, live, COLD_DEPTH, times),
    }
}

/// The bytes the drive's catch-up iterator reads at a time: its read-ahead, at least the ring's
/// batch limit (as `DriveOptions::read_ahead_bytes` says).
fn iterator_read_bytes(options: &DriveOptions, geometry: &sealog_wal::Geometry) -> usize {
    options
        .read_ahead_bytes
        .max(u64::from(geometry.batch_size_max_bytes)) as usize
}

/// The sequential O_DIRECT read of the whole ring at `read_bytes` a read, the better of 1 and
/// 4 in flight, as a row (MB/s of the ring read; one "operation" is one read).
fn sequential_ceiling(ring: &Path, read_bytes: usize) -> Result<ReadRow, String> {
    let depth_1 = ceiling::builtin_sequential_read(ring, 1, read_bytes)?;
    let depth_4 = ceiling::builtin_sequential_read(ring, 4, read_bytes)?;
    let (depth, bytes_per_sec) = if depth_4 > depth_1 {
        (4, depth_4)
    } else {
        (1, depth_1)
    };
    Ok(ReadRow {
        section: SECTION_CATCH_UP,
        engine: ceiling::SEQUENTIAL_READ.to_string(),
        entry_bytes: read_bytes as u64,
        load: ReadLoad::single_thread(depth),
        ops_per_sec: bytes_per_sec / read_bytes as f64,
        mb_per_sec: bytes_per_sec / 1e6,
        note: format!(
            "the whole ring, {read_bytes}-byte O_DIRECT reads (the iterator's read size), the \
             better of 1 and 4 in flight (depth 1 {:.0} MB/s, depth 4 {:.0} MB/s)",
            depth_1 / 1e6,
            depth_4 / 1e6
        ),
        ..ReadRow::default()
    })
}

/// `threads` threads of blocking `Drive::read`s of random LSNs in `live`.
fn cold_blocking(
    drive: &Drive,
    live: std::ops::RangeInclusive<u64>,
    threads: u64,
    times: ReadTimes,
) -> Result<ReadRow, String> {
    let (first, count) = (*live.start(), live.end() - live.start() + 1);
    let stats_before = drive.read_stats();
    let (reads, seconds, latency) = timed_threads(threads, times, None, None, |random| {
        let lsn = first + random.below(count);
        let payload = drive.read(lsn).map_err(|error| error.to_string())?;
        if payload.len() != COLD_PAYLOAD_BYTES {
            return Err(format!("cold read of {lsn}: {} bytes", payload.len()));
        }
        Ok(())
    })?;
    let mut row = ReadRow::measured(
        COLD_BLOCKING,
        COLD_PAYLOAD_BYTES as u64,
        ReadLoad::blocking_threads(threads),
        reads,
        seconds,
        &latency,
    );
    row.section = SECTION_COLD;
    row.note = format!(
        "Drive::read of random live LSNs (of {count}), {threads} threads each blocking on one \
         ({}; warm-up included)",
        served_from(&stats_before, &drive.read_stats())
    );
    Ok(row)
}

/// Where reads between two snapshots of the drive's read statistics were served from: cold
/// reads must be device reads, not cache hits.
fn served_from(before: &ReadStats, after: &ReadStats) -> String {
    let device_reads = after.device_reads - before.device_reads;
    let bytes = after.device_read_bytes - before.device_read_bytes;
    format!(
        "{} cache hits, {device_reads} device reads of {} bytes each on average",
        after.cache_hits - before.cache_hits,
        bytes / device_reads.max(1)
    )
}

/// Wakes the thread that polls the cold reads' futures (an executor's waker, as
/// `futures::executor::block_on` makes one: unpark the polling thread).
struct ThreadWaker(std::thread::Thread);

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// A future of one cold read in flight: its LSN, when it started, and the future.
type ReadInFlight = (u64, Instant, PayloadFuture);

/// One thread keeping `depth` `Drive::read_async` futures of random LSNs in `live` in flight,
/// polled together as an executor polls a task's futures (the thread parks until a completion
/// wakes it). Counted and timed are the reads completing within the window after the warm-up.
fn cold_async(
    drive: &Drive,
    live: std::ops::RangeInclusive<u64>,
    depth: usize,
    times: ReadTimes,
) -> Result<ReadRow, String> {
    let (first, count) = (*live.start(), live.end() - live.start() + 1);
    let waker = Waker::from(Arc::new(ThreadWaker(std::thread::current())));
    let mut context = Context::from_waker(&waker);
    let mut random = SplitMix64::new(0xa5c0_0001);
    let stats_before = drive.read_stats();
    let mut start = || -> ReadInFlight {
        let lsn = first + random.below(count);
        (lsn, Instant::now(), drive.read_async(lsn))
    };
    let mut slots: Vec<Option<ReadInFlight>> = (0..depth).map(|_| Some(start())).collect();
    let window_start = Instant::now() + times.warmup;
    let window_end = window_start + times.window;
    let mut latency = Histogram::<u64>::new(3).map_err(|error| error.to_string())?;
    let mut reads = 0u64;
    while slots.iter().any(Option::is_some) {
        let mut completed = false;
        for slot in &mut slots {
            let Some((lsn, started, future)) = slot.as_mut() else {
                continue;
            };
            let Poll::Ready(outcome) = Pin::new(future).poll(&mut context) else {
                continue;
            };
            completed = true;
            let now = Instant::now();
            let payload = outcome.map_err(|error| error.to_string())?;
            if payload.len() != COLD_PAYLOAD_BYTES {
                return Err(format!("async read of {lsn}: {} bytes", payload.len()));
            }
            if (window_start..window_end).contains(&now) {
                latency
                    .record((now - *started).as_nanos().max(1) as u64)
                    .ok();
                reads += 1;
            }
            *slot = (now < window_end).then(&mut start);
        }
        // A wake-up that came after a future's poll and before this park leaves the token:
        // the park returns at once, and every future is polled again.
        if !completed {
            std::thread::park();
        }
    }
    let mut row = ReadRow::measured(
        COLD_ASYNC,
        COLD_PAYLOAD_BYTES as u64,
        ReadLoad::single_thread(depth as u64),
        reads,
        times.window.as_secs_f64(),
        &latency,
    );
    row.section = SECTION_COLD;
    row.note = format!(
        "Drive::read_async of random live LSNs (of {count}), {depth} futures in flight polled \
         by one thread (the drive thread's io_uring reads them; {}, warm-up included)",
        served_from(&stats_before, &drive.read_stats())
    );
    Ok(row)
}

/// Iterates from `first_lsn` to the durable tail (or until `cap`), timing it: a row whose
/// throughput is the records' bytes (header and payload: the ring bytes the iterator covered)
/// per second, so it compares with the ceiling's reads of the ring.
fn catch_up(drive: &Drive, first_lsn: u64, cap: Duration) -> Result<ReadRow, String> {
    let started = Instant::now();
    let mut entries = 0u64;
    let mut record_bytes = 0u64;
    let mut capped = false;
    for entry in drive.iter_from(first_lsn) {
        let payload = entry.map_err(|error| error.to_string())?.payload;
        entries += 1;
        record_bytes += (payload.len() + ENTRY_HEADER_SIZE) as u64;
        if entries % 1024 == 0 && started.elapsed() > cap {
            capped = true;
            break;
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let latency = Histogram::<u64>::new(3).map_err(|error| error.to_string())?;
    let mut row = ReadRow::measured(
        CATCH_UP,
        COLD_PAYLOAD_BYTES as u64,
        ReadLoad::single_thread(1),
        entries,
        seconds,
        &latency,
    );
    row.section = SECTION_CATCH_UP;
    row.mb_per_sec = record_bytes as f64 / seconds.max(1e-9) / 1e6;
    row.note = format!(
        "Drive::iter_from the first live LSN: {entries} entries, {} MiB of records in {seconds:.2} \
         s{}; MB/s counts records (header and payload)",
        record_bytes >> 20,
        if capped { ", stopped at the time cap" } else { "" }
    );
    Ok(row)
}
