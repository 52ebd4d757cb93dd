//! The read section (issue 11): cold random point reads of a full ring and a catch-up iterator
//! over it, each beside the ceiling it is judged against and measured in the same run, and the
//! timed read loops they share with the tail reads (`tail_reads.rs`). Runs are short and
//! interleaved in rounds (the ceiling before, between and after sealog's runs), each figure the
//! mean of its runs, because the device's speed drifts by several times within seconds on a
//! shared host.

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use sealog::{Drive, DriveOptions, PayloadFuture, ReadStats};
use sealog_wal::format::ENTRY_HEADER_SIZE;

use crate::ceiling;
use crate::progress::progress;
use crate::random::SplitMix64;
use crate::read_plan::{COLD_DEPTH, COLD_PAYLOAD_BYTES, COLD_READ_BYTES};
use crate::read_row::{
    ReadLoad, ReadRow, CATCH_UP, COLD_ASYNC, COLD_BLOCKING, SECTION_CATCH_UP, SECTION_COLD,
    SEQUENTIAL_READ,
};

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
pub fn timed_threads<F>(
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
    let share_per_sec = paced_per_sec.map(|rate| rate / threads as f64);
    let (seconds, results) = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|thread| {
                let (measuring, stop, operation) = (&measuring, &stop, &operation);
                scope.spawn(move || timed_thread(thread, share_per_sec, measuring, stop, operation))
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
    let (count, latency) = merge_threads(results)?;
    Ok((count, seconds, latency))
}

/// One thread of [`timed_threads`], number `thread`: calls `operation` until `stop`, at most
/// `share_per_sec` calls per second when paced, and counts and times the calls made while
/// `measuring` is set.
fn timed_thread<F>(
    thread: u64,
    share_per_sec: Option<f64>,
    measuring: &AtomicBool,
    stop: &AtomicBool,
    operation: &F,
) -> ThreadFigures
where
    F: Fn(&mut SplitMix64) -> Result<(), String>,
{
    let mut random = SplitMix64::new(0x7a11 + thread);
    let mut latency = Histogram::<u64>::new(3).map_err(|error| error.to_string())?;
    let mut count = 0u64;
    let (thread_started, mut calls) = (Instant::now(), 0u64);
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
}

/// The threads' figures together: their counts summed and their latencies merged (the first
/// thread's error, if one failed).
fn merge_threads(results: Vec<ThreadFigures>) -> Result<(u64, Histogram<u64>), String> {
    let mut latency = Histogram::<u64>::new(3).map_err(|error| error.to_string())?;
    let mut count = 0u64;
    for result in results {
        let (thread_count, thread_latency) = result?;
        count += thread_count;
        latency
            .add(thread_latency)
            .map_err(|error| error.to_string())?;
    }
    Ok((count, latency))
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
    progress("catch-up: the sequential read ceiling (before)");
    let sequential_before = sequential_ceiling(ring, read_bytes)?;
    // The ceiling's runs at depths 1 and 16, and sealog's runs of its three ways.
    let mut ceiling_runs: [Vec<ReadRow>; 2] = Default::default();
    let mut sealog_runs: [Vec<ReadRow>; 3] = Default::default();
    let mut finish = None;
    for round in 0..COLD_ROUNDS {
        ceiling_run(ring, times, &mut ceiling_runs)?;
        // Only the last round iterates, so its answer is the one kept.
        finish = sealog_cold_round(ring, &options, times, round, &mut sealog_runs)?;
    }
    ceiling_run(ring, times, &mut ceiling_runs)?;
    progress("catch-up: the sequential read ceiling (after)");
    let sequential_after = sequential_ceiling(ring, read_bytes)?;
    let (stats, mut iterator) = finish.ok_or("no cold read rounds")?;
    let mut rows = cold_rows(&ceiling_runs, &sealog_runs);
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

/// One run of the random-read ceiling on `ring` at depths 1 and [`COLD_DEPTH`], added to
/// `runs` (one list per depth).
fn ceiling_run(ring: &Path, times: ReadTimes, runs: &mut [Vec<ReadRow>; 2]) -> Result<(), String> {
    progress("cold reads: the random-read ceiling");
    for (depth, runs) in [1, COLD_DEPTH].into_iter().zip(runs.iter_mut()) {
        runs.push(ceiling::builtin_random_read(
            ring,
            COLD_READ_BYTES,
            depth,
            times.window / 4,
        )?);
    }
    Ok(())
}

/// Round `round` of sealog's cold reads: the drive opened anew on `ring` (nothing cached) and
/// a run of each of its three ways, added to `runs` (one list per way). In the last round the
/// drive's read statistics (its read index of the full ring) and the catch-up iterator are
/// taken too, and returned.
fn sealog_cold_round(
    ring: &Path,
    options: &DriveOptions,
    times: ReadTimes,
    round: usize,
    runs: &mut [Vec<ReadRow>; 3],
) -> Result<Option<(ReadStats, ReadRow)>, String> {
    let drive = Drive::open(ring, options.clone()).map_err(|error| error.to_string())?;
    let run_times = ReadTimes {
        window: times.window / COLD_ROUNDS as u32,
        ..times
    };
    for (index, runs) in runs.iter_mut().enumerate() {
        progress(&format!(
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
    let mut finish = None;
    if round + 1 == COLD_ROUNDS {
        // The read index of a full ring: its bytes per live entry are the figure to report.
        let stats = drive.read_stats();
        progress("catch-up: sealog's iterator over the ring");
        let iterator = catch_up(&drive, drive.first_live_lsn(), times.window * 4)?;
        finish = Some((stats, iterator));
    }
    drive.close();
    Ok(finish)
}

/// The cold rows from the runs: each ceiling depth's row the mean of its runs, then sealog's
/// rows, each the mean of its runs, judged against the ceiling at the same depth.
fn cold_rows(ceiling_runs: &[Vec<ReadRow>; 2], sealog_runs: &[Vec<ReadRow>; 3]) -> Vec<ReadRow> {
    let mut rows = Vec::new();
    let mut sealog_rows: Vec<ReadRow> = sealog_runs
        .iter()
        .map(|runs| {
            let mut row = ReadRow::mean_of(&runs.iter().collect::<Vec<_>>());
            row.note = format!("{}; {}", row.note, ReadRow::runs_text(runs));
            row
        })
        .collect();
    for runs in ceiling_runs {
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
    rows
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
        engine: SEQUENTIAL_READ.to_string(),
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
