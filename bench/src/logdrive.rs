//! The LogDrive section (issue 13): the LogDrive layer (`sealog-logdrive`) beside the raw
//! engine it runs on, in the same process, on one ring, with the same 4 KiB payloads and the
//! same pipelining, so that each ratio is measured in one run. Writes: one writer with one
//! write in flight (latency), and 8 writers x 32 in flight (throughput) on one LogDrive and
//! spread over 1,000, each against the raw engine's appends under the same load, in
//! interleaved rounds (`rounds::interleave`, in a balanced order: each engine equally often in
//! every position and right after every other engine; each figure the median over the rounds,
//! and each ratio to the raw engine the median of the rounds' ratios). Reads: a
//! LogDrive read against `Drive::read_entry` (and `read_entry_async`, the path a LogDrive read
//! takes) of the same LogDrive's entries, from the recent-entry cache and from the device (the
//! drive reopened with its cache off), in rounds too. weak_tail: the cost of one call for K =
//! 64 and 4,096 on LogDrives whose window is fully written and on ones with holes in it.
//!
//! Every run reopens the section's one ring and leaves it empty, so each starts on an empty
//! live log, as a cell's fresh ring does, without formatting a ring per run (a 512 MiB format
//! takes seconds here). The runs release behind themselves so that the ring never fills: the
//! raw engine's runs trim the drive; the LogDrive runs trim their LogDrives, and the store's
//! reclaimer (on its default policy, on its own thread, as an embedder runs it) moves the
//! ring's head past what they trimmed, so its cost is in their figures; a LogDrive run ends
//! by deleting its LogDrives and reclaiming the ring. This module runs the measurements; the
//! figures are `logdrive_figures.rs`, their table, JSON and targets `logdrive_report.rs`, and
//! the section's place in a run (its ring, its times, the write ceilings) `logdrive_section.rs`.

use std::collections::VecDeque;
use std::ops::Range;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hdrhistogram::Histogram;
use sealog::{Drive, DriveOptions};
use sealog_logdrive::record::{Record, RecordType};
use sealog_logdrive::{
    wait, LocalLogDrive, LogDrive, LogDriveStore, OpFuture, PendingWrite, ReadOutcome, StoreOptions,
};

use crate::cell::Cell;
use crate::cells::{
    cell_options, fresh_ring, measure_writers, RawAppends, RingShape, Workload, WritePath,
};
use crate::logdrive_figures::{
    LogDriveFigures, ReadPhase, WeakTailCase, WeakTailRow, WriteComparison, WriteEngine,
    LOGDRIVE_READ, MANY_LOGDRIVES, PAYLOAD_BYTES, RAW_READ, RAW_READ_ASYNC, ROUNDS,
};
use crate::logdrive_report::read_rows;
use crate::progress::progress;
use crate::random::SplitMix64;
use crate::read_row::{ReadLoad, ReadRow};
use crate::rounds::interleave;

/// The throughput comparison's writers and writes in flight per writer: 256 in all, the
/// deep cells' order of magnitude.
pub const THROUGHPUT_WRITERS: usize = 8;
/// Writes (or appends) each throughput writer keeps in flight.
pub const THROUGHPUT_IN_FLIGHT: usize = 32;
/// Rotations of the throughput comparison's engines: 12 rounds of 4 engines. Single runs of
/// one engine ranged over 2x within one section on this project's machine (a virtual disk
/// whose speed drifts), so a median of 4 could not tell 10% apart, and with 8 the raw
/// engine's control still came to between 0.90 and 1.21 of it in three runs; each rotation
/// adds about 12 s to the quick run.
pub const THROUGHPUT_ROTATIONS: usize = 3;
/// Addresses of every LogDrive the section creates (none comes near it).
const CAPACITY: u64 = 1 << 40;
/// The epoch every write is stamped with (nothing is fenced).
const EPOCH: u64 = 1;
/// The read LogDrive's id (the weak_tail LogDrives take 1 to 4).
const READ_ID: u64 = 100;
/// Addresses of the read LogDrive, 4 KiB each: 64 MiB of payloads, the drive's default
/// cache size, so the cold reads (cache off) spread over 16,384 entries.
pub const READ_ADDRESSES: u64 = 16_384;
/// The cached reads pick among the newest addresses of the read LogDrive: 16 MiB, a quarter
/// of the cache, so every one is a cache hit.
pub const CACHED_ADDRESSES: u64 = 4096;
/// Writes in flight while the read and weak_tail LogDrives are filled.
const FILL_IN_FLIGHT: usize = 256;
/// The weak_tail LogDrives' payload (its size does not matter to weak_tail).
const WEAK_TAIL_PAYLOAD_BYTES: usize = 64;

/// What the section needs from the run.
pub struct Plan<'a> {
    /// The section's ring (a directory in the scratch directory, or the device).
    pub ring: &'a Path,
    /// Its shape, the cells' (with the sync method the write section's ring chose, if it ran).
    pub shape: RingShape,
    /// The options the cells' drives open with.
    pub options: DriveOptions,
    /// Each write run's measured time (a quarter of a cell's, as the single-writer rounds).
    pub run: Duration,
    /// The warm-up before each write run.
    pub warmup: Duration,
    /// Each read run's measured time, and each weak_tail case's.
    pub read_window: Duration,
    /// Leave the last LogDrives (the weak_tail ones and the read one) on the ring at the
    /// end rather than delete them (`--keep-rings`: an operator's specimen).
    pub keep_logdrives: bool,
}

/// Runs the section on a ring formatted for it; leaves the ring empty (but for the last
/// LogDrives with `keep_logdrives`).
pub fn logdrive_section(plan: &Plan<'_>) -> Result<LogDriveFigures, String> {
    let started = Instant::now();
    progress("logdrive: formatting the section's ring");
    fresh_ring(plan.ring, plan.shape)?;
    let latency = write_comparison(
        plan,
        "latency",
        (1, 1),
        1,
        &[
            WriteEngine::Raw,
            WriteEngine::RawControl,
            WriteEngine::LogDrives(1),
        ],
    )?;
    let throughput = write_comparison(
        plan,
        "throughput",
        (THROUGHPUT_WRITERS, THROUGHPUT_IN_FLIGHT),
        THROUGHPUT_ROTATIONS,
        &[
            WriteEngine::Raw,
            WriteEngine::RawControl,
            WriteEngine::LogDrives(1),
            WriteEngine::LogDrives(MANY_LOGDRIVES),
        ],
    )?;
    let (reads, weak_tail) = reads_and_weak_tail(plan)?;
    Ok(LogDriveFigures {
        writes: vec![latency, throughput],
        reads,
        weak_tail,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// One write comparison: `engines` (the raw engine first, then its control) under `(writers,
/// in_flight)`, in `rotations` times as many interleaved rounds as engines.
fn write_comparison(
    plan: &Plan<'_>,
    name: &'static str,
    (writers, in_flight): (usize, usize),
    rotations: usize,
    engines: &[WriteEngine],
) -> Result<WriteComparison, String> {
    let workload = Workload {
        payload_bytes: PAYLOAD_BYTES,
        writers,
        in_flight,
        duration: plan.run,
        warmup: plan.warmup,
    };
    let started = Instant::now();
    let rounds = engines.len() * rotations;
    let cells = interleave(rounds, engines.len(), |engine, round| {
        progress(&format!(
            "logdrive {name}, round {}/{rounds}: {}",
            round + 1,
            engines[engine].label()
        ));
        write_run(plan, engines[engine], workload)
    })?;
    Ok(WriteComparison {
        name,
        engines: engines.to_vec(),
        cells,
        seconds_per_run: plan.run.as_secs_f64(),
        warmup_seconds_per_run: plan.warmup.as_secs_f64(),
        total_seconds: started.elapsed().as_secs_f64(),
    })
}

/// One run: the ring reopened, the raw engine's appends or LogDrive writes on LogDrives
/// created for it, measured as a cell; the ring left empty.
fn write_run(plan: &Plan<'_>, engine: WriteEngine, workload: Workload) -> Result<Cell, String> {
    let options = cell_options(plan.options.clone());
    let open_error = |error: sealog::OpenError| format!("{}: {error}", plan.ring.display());
    match engine {
        WriteEngine::Raw | WriteEngine::RawControl => {
            let drive = Drive::open(plan.ring, options).map_err(open_error)?;
            let cell = measure_writers(&drive, engine.engine(), workload, &RawAppends(&drive));
            empty_and_close(&drive)?;
            cell
        }
        WriteEngine::LogDrives(count) => {
            let store = open_store(plan.ring, options)?;
            let cell = create_logdrives(&store, 0, count).and_then(|drives| {
                let writes = LogDriveWrites::new(&drives, workload.writers);
                measure_writers(store.drive(), engine.engine(), workload, &writes)
            });
            empty_store_and_close(&store)?;
            cell
        }
    }
}

/// Ends a run: every entry trimmed, so that the next run's open finds an empty live log (a
/// fresh ring's, replayed in milliseconds), and the drive closed.
fn empty_and_close(drive: &Drive) -> Result<(), String> {
    let trimmed = drive.trim(drive.durable_lsn());
    drive.close();
    trimmed.map_err(|error| error.to_string())
}

/// Deletes LogDrive `id`. A deletion is a control record: the store admits it whenever its
/// control reserve holds it, and otherwise waits for the reclaimer within its
/// `control_wait`, so a refusal here is the store's failure and ends the run.
fn delete(store: &LogDriveStore, id: u64) -> Result<(), String> {
    wait(store.delete(id)).map_err(|error| format!("delete of LogDrive {id}: {error}"))
}

/// Opens the section's ring as a LogDrive store, its reclaimer on the default policy.
fn open_store(ring: &Path, options: DriveOptions) -> Result<LogDriveStore, String> {
    // A store's writes wait for room in the store (up to its `full_wait`), never in the
    // engine's queue, whatever the raw cells' drives do.
    let options = StoreOptions::default().drive(options.when_full(sealog::WhenFull::Fail));
    LogDriveStore::open_with_options(ring, options)
        .map_err(|error| format!("{}: {error}", ring.display()))
}

/// Ends a LogDrive run: every LogDrive deleted and the ring's space reclaimed by the store
/// (never trimmed under it: the store's reclaimer alone moves the head past LogDrive
/// records), then the drive closed.
pub(crate) fn empty_store_and_close(store: &LogDriveStore) -> Result<(), String> {
    let deleted = store
        .ids()
        .map_err(|error| format!("ids: {error}"))
        .and_then(|ids| ids.into_iter().try_for_each(|id| delete(store, id)));
    let reclaimed = store
        .reclaim_now()
        .map(|_| ())
        .map_err(|error| format!("reclaim: {error}"));
    store.close();
    deleted.and(reclaimed)
}

/// Creates LogDrives `first..first + count`, their creations in flight together.
fn create_logdrives(
    store: &LogDriveStore,
    first: u64,
    count: usize,
) -> Result<Vec<LocalLogDrive>, String> {
    let creations: Vec<_> = (first..first + count as u64)
        .map(|id| store.create(id, CAPACITY))
        .collect();
    creations
        .into_iter()
        .map(|creation| wait(creation).map_err(|error| format!("create: {error}")))
        .collect()
}

/// LogDrive writes (`LocalLogDrive::submit_write`, waited on with `PendingWrite::wait`, as a
/// plain thread does: the engine's own ticket wait underneath). With as many LogDrives as
/// writers or more, writer w writes the LogDrives w, w + W, w + 2W, ... in turn, each write to
/// the next of its share, so every LogDrive has one writer; with fewer (one), every writer
/// writes it. Either way a LogDrive's addresses are taken in order from its own counter, so
/// its writes in flight are a contiguous run just past what is written (the K-window
/// discipline: N - T stays within the writes in flight).
struct LogDriveWrites<'a> {
    drives: &'a [LocalLogDrive],
    writers: usize,
    next: Vec<AtomicU64>,
    /// Which quarter of the LogDrives the next release trims.
    release_turn: AtomicU64,
}

impl<'a> LogDriveWrites<'a> {
    fn new(drives: &'a [LocalLogDrive], writers: usize) -> LogDriveWrites<'a> {
        LogDriveWrites {
            drives,
            writers,
            next: drives.iter().map(|_| AtomicU64::new(0)).collect(),
            release_turn: AtomicU64::new(0),
        }
    }
}

/// A writer's LogDrives (indices) and the one it writes next.
struct Share {
    drives: Vec<usize>,
    turn: usize,
}

impl WritePath for LogDriveWrites<'_> {
    type State = Share;
    type Pending = PendingWrite;

    fn state(&self, writer: usize) -> Share {
        let drives = if self.drives.len() >= self.writers {
            (writer..self.drives.len()).step_by(self.writers).collect()
        } else {
            vec![writer % self.drives.len()]
        };
        Share { drives, turn: 0 }
    }

    fn submit(&self, share: &mut Share, payload: Bytes) -> Result<PendingWrite, String> {
        let index = share.drives[share.turn];
        share.turn = (share.turn + 1) % share.drives.len();
        let address = self.next[index].fetch_add(1, Ordering::Relaxed);
        Ok(self.drives[index].submit_write(address, EPOCH, payload))
    }

    fn finish(&self, write: PendingWrite) -> Result<(), String> {
        write.wait().map_err(|error| error.to_string())
    }

    /// Trims each LogDrive to all but its share of `keep_writes` below its T (a LogDrive
    /// trim, one control record each): the store's reclaimer then moves the ring's head past
    /// what was trimmed, as an embedder's store would. A quarter of the LogDrives each time,
    /// in turn, so that a release costs 250 control records on 1,000 LogDrives, not 1,000
    /// (fewer than four LogDrives: all of them, each to its even share, as the raw log).
    ///
    /// The share is 5/8 of an even one, so that the LogDrives hold as many writes as the raw
    /// engine's log on average and the two runs reclaim rings equally full: the raw log holds
    /// from `keep` to `keep` plus a release period (1.125 `keep` on average); a LogDrive is
    /// trimmed every fourth release and grows by a quarter of `keep` over its LogDrives
    /// between, so together they hold their trimmed shares plus half of `keep` on average.
    fn release(&self, _drive: &Drive, keep_writes: u64) -> Result<(), String> {
        let count = self.drives.len();
        let keep = if count < 4 {
            (keep_writes / count as u64).max(1)
        } else {
            (keep_writes * 5 / (8 * count as u64)).max(1)
        };
        let turn = self.release_turn.fetch_add(1, Ordering::Relaxed) as usize;
        // Fewer than four LogDrives are all trimmed every time: a quarter of one rounds up to
        // one, and taking turns would trim a lone LogDrive at every fourth release only, so
        // that it held up to twice the raw log's writes.
        let (start, quarter) = if count < 4 {
            (0, count)
        } else {
            let quarter = count.div_ceil(4);
            ((turn % 4) * quarter, quarter)
        };
        // The trims go out together and are waited for together, as a server trimming many
        // ledgers at once would (one flush covers them).
        let mut trims = Vec::with_capacity(quarter);
        for drive in self.drives.iter().skip(start).take(quarter) {
            let length = wait(drive.length()).map_err(|error| error.to_string())?;
            let upto = length.t.saturating_sub(keep);
            if upto > length.first {
                trims.push(drive.trim(upto));
            }
        }
        trims
            .into_iter()
            .try_for_each(|trim| wait(trim).map_err(|error| format!("trim: {error}")))
    }
}

/// Writes `addresses` of `drive` in order, [`FILL_IN_FLIGHT`] at a time, with the payloads
/// `payload` makes.
fn fill(
    drive: &LocalLogDrive,
    addresses: impl Iterator<Item = u64>,
    payload: impl Fn(u64) -> Bytes,
) -> Result<(), String> {
    let mut pending = VecDeque::with_capacity(FILL_IN_FLIGHT);
    let finish = |write: OpFuture<()>| wait(write).map_err(|error| format!("fill: {error}"));
    for address in addresses {
        if pending.len() == FILL_IN_FLIGHT {
            finish(pending.pop_front().expect("one pending"))?;
        }
        pending.push_back(drive.write(address, EPOCH, payload(address)));
    }
    pending.into_iter().try_for_each(finish)
}

/// The read LogDrive's payload at `address`: 4 KiB, its first 8 bytes the address, so a read
/// can tell it got the entry it asked for.
fn read_payload(address: u64) -> Bytes {
    let mut payload = vec![0x4c; PAYLOAD_BYTES];
    payload[..8].copy_from_slice(&address.to_le_bytes());
    Bytes::from(payload)
}

/// Whether `payload` is the read LogDrive's at `address`.
fn check_payload(address: u64, payload: &[u8]) -> Result<(), String> {
    let stamped = payload.get(..8).map(|bytes| bytes == address.to_le_bytes());
    if payload.len() == PAYLOAD_BYTES && stamped == Some(true) {
        Ok(())
    } else {
        Err(format!("read of address {address}: not its payload"))
    }
}

/// The LSN of every write record of LogDrive `id` below `addresses`, indexed by address, from
/// the live log.
fn address_lsns(drive: &Drive, id: u64, addresses: u64) -> Result<Vec<u64>, String> {
    let mut lsns = vec![0; addresses as usize];
    for entry in drive.iter_from(drive.first_live_lsn()) {
        let entry = entry.map_err(|error| error.to_string())?;
        let Some(record) = Record::decode(entry.kind, &entry.header) else {
            continue;
        };
        if record.record_type == RecordType::Write && record.id == id && record.value < addresses {
            lsns[record.value as usize] = entry.lsn;
        }
    }
    match lsns.iter().position(|&lsn| lsn == 0) {
        Some(address) => Err(format!("no record of address {address} of LogDrive {id}")),
        None => Ok(lsns),
    }
}

/// The read and weak_tail parts: the weak_tail LogDrives and the read LogDrive written on the
/// ring, weak_tail timed, the reads in rounds from the cache, then (the drive reopened with
/// its cache off) from the device; the ring left empty.
fn reads_and_weak_tail(plan: &Plan<'_>) -> Result<(Vec<ReadRow>, Vec<WeakTailRow>), String> {
    let options = cell_options(plan.options.clone());
    let store = open_store(plan.ring, options.clone())?;
    progress("logdrive: writing the weak_tail and read LogDrives");
    let tails = weak_tail_logdrives(&store)?;
    let reader = create_logdrives(&store, READ_ID, 1)?.remove(0);
    fill(&reader, 0..READ_ADDRESSES, read_payload)?;
    let lsns = address_lsns(store.drive(), READ_ID, READ_ADDRESSES)?;
    let weak_tail = tails
        .iter()
        .map(|(case, drive)| {
            progress(&format!("logdrive: weak_tail, {}", case.label()));
            weak_tail_run(drive, *case, plan.read_window)
        })
        .collect::<Result<Vec<_>, String>>()?;
    let cached = READ_ADDRESSES - CACHED_ADDRESSES..READ_ADDRESSES;
    let mut reads = read_rounds(plan, &store, &reader, &lsns, ReadPhase::Cached, cached)?;
    drop((tails, reader));
    store.close();
    drop(store);
    let uncached = DriveOptions {
        read_cache_bytes: 0,
        ..options
    };
    let store = open_store(plan.ring, uncached)?;
    let reader = store
        .get(READ_ID)
        .map_err(|error| format!("the read LogDrive after a reopen: {error}"))?;
    let cold = 0..READ_ADDRESSES;
    let rows = read_rounds(plan, &store, &reader, &lsns, ReadPhase::Cold, cold);
    drop(reader);
    if plan.keep_logdrives {
        store.close();
    } else {
        empty_store_and_close(&store)?;
    }
    reads.extend(rows?);
    Ok((reads, weak_tail))
}

/// The four weak_tail LogDrives (ids 1 to 4), written: for K = 64 and 4,096, one whose
/// window [N - K, N) is fully written and one with a hole at every 16th address of it (the
/// first at N - K, so T = N - K and weak_tail scans the whole window), each with
/// [`WeakTailCase::BELOW`] addresses written below the window.
fn weak_tail_logdrives(
    store: &LogDriveStore,
) -> Result<Vec<(WeakTailCase, LocalLogDrive)>, String> {
    let payload = Bytes::from(vec![0x77; WEAK_TAIL_PAYLOAD_BYTES]);
    let cases = WeakTailCase::ALL;
    let drives = create_logdrives(store, 1, cases.len())?;
    for (case, drive) in cases.iter().zip(&drives) {
        let addresses = (0..case.n()).filter(|address| !case.is_hole(*address));
        fill(drive, addresses, |_| payload.clone())?;
    }
    Ok(cases.into_iter().zip(drives).collect())
}

/// Times `weak_tail(K)` on `drive` (one call at a time, on this thread, waited on with
/// `sealog_logdrive::wait`) for `window` after a tenth of it of warm-up, having checked its
/// answer once.
fn weak_tail_run(
    drive: &LocalLogDrive,
    case: WeakTailCase,
    window: Duration,
) -> Result<WeakTailRow, String> {
    let tail = wait(drive.weak_tail(case.k)).map_err(|error| error.to_string())?;
    let holes = tail.holes.len() as u64;
    if (tail.n, tail.t(), holes) != (case.n(), case.t(), case.holes()) {
        return Err(format!(
            "weak_tail({}) {}: N {} T {} with {holes} holes, expected N {} T {} with {}",
            case.k,
            case.label(),
            tail.n,
            tail.t(),
            case.n(),
            case.t(),
            case.holes()
        ));
    }
    let (calls, seconds, latency_ns) = timed_loop(window / 10, window, || {
        let tail = wait(drive.weak_tail(case.k)).map_err(|error| error.to_string())?;
        std::hint::black_box(tail);
        Ok(())
    })?;
    Ok(WeakTailRow::measured(case, calls, seconds, &latency_ns))
}

/// Calls `operation` in a loop on this thread: for `warmup`, then counted and timed (in
/// nanoseconds) for `window`. Returns the calls, the seconds they took and their latencies.
fn timed_loop(
    warmup: Duration,
    window: Duration,
    mut operation: impl FnMut() -> Result<(), String>,
) -> Result<(u64, f64, Histogram<u64>), String> {
    let mut latency = Histogram::<u64>::new(3).map_err(|error| error.to_string())?;
    let measure_from = Instant::now() + warmup;
    let until = measure_from + window;
    let (mut calls, mut last) = (0u64, measure_from);
    loop {
        let started = Instant::now();
        if started >= until {
            break;
        }
        operation()?;
        if started >= measure_from {
            last = Instant::now();
            latency
                .record((last - started).as_nanos().max(1) as u64)
                .ok();
            calls += 1;
        }
    }
    Ok((calls, (last - measure_from).as_secs_f64(), latency))
}

/// The read engines, in the first round's order: the raw engine's blocking read, its async
/// read (the path a LogDrive read takes: the drive thread's io_uring for an entry not in the
/// cache), and the LogDrive read.
const READ_ENGINES: [&str; 3] = [RAW_READ, RAW_READ_ASYNC, LOGDRIVE_READ];

/// Reads of random addresses of `span` of the read LogDrive, one at a time on this thread,
/// by each of [`READ_ENGINES`] in [`ROUNDS`] interleaved rounds (each run its own random
/// sequence); one row per run, `phase`'s.
fn read_rounds(
    plan: &Plan<'_>,
    store: &LogDriveStore,
    reader: &LocalLogDrive,
    lsns: &[u64],
    phase: ReadPhase,
    span: Range<u64>,
) -> Result<Vec<ReadRow>, String> {
    let drive = store.drive();
    let runs = interleave(ROUNDS, READ_ENGINES.len(), |engine, round| {
        progress(&format!(
            "logdrive reads, {}, round {}/{ROUNDS}: {}",
            phase.section(),
            round + 1,
            READ_ENGINES[engine]
        ));
        let mut random = SplitMix64::new(0x1d_0000 + (round * READ_ENGINES.len() + engine) as u64);
        let mut address = || span.start + random.below(span.end - span.start);
        let stats_before = drive.read_stats();
        let (reads, seconds, latency_ns) =
            timed_loop(plan.read_window / 10, plan.read_window, || {
                let address = address();
                let lsn = lsns[address as usize];
                match engine {
                    0 => check_entry(address, drive.read_entry(lsn)),
                    1 => check_entry(address, wait(drive.read_entry_async(lsn))),
                    _ => match wait(reader.read(address)) {
                        Ok(ReadOutcome::Value(payload)) => check_payload(address, &payload),
                        other => Err(format!("LogDrive read of {address}: {other:?}")),
                    },
                }
            })?;
        let stats_after = drive.read_stats();
        let mut row = ReadRow::measured(
            READ_ENGINES[engine],
            PAYLOAD_BYTES as u64,
            ReadLoad::single_thread(1),
            reads,
            seconds,
            &latency_ns,
        );
        row.section = phase.section();
        row.note = format!(
            "{} cache hits, {} device reads (warm-up included)",
            stats_after.cache_hits - stats_before.cache_hits,
            stats_after.device_reads - stats_before.device_reads
        );
        Ok(row)
    })?;
    Ok(read_rows(phase, &runs))
}

/// Whether a raw read of the read LogDrive's `address` got its record.
fn check_entry(
    address: u64,
    entry: Result<sealog::LogEntry, sealog::ReadError>,
) -> Result<(), String> {
    let entry = entry.map_err(|error| format!("read of address {address}: {error}"))?;
    if entry.header.address != address || entry.header.log_id != READ_ID {
        return Err(format!("read of address {address}: another record"));
    }
    check_payload(address, &entry.payload)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sealog::{format, FormatOptions};

    fn store(dir: &Path) -> LogDriveStore {
        format(
            dir,
            &FormatOptions {
                size_bytes: 64 << 20,
                segment_size_bytes: Some(4 << 20),
                force: true,
                ..FormatOptions::default()
            },
        )
        .unwrap();
        open_store(dir, DriveOptions::default()).unwrap()
    }

    /// Writes `count` addresses to every LogDrive in `writes`.
    fn write_all(writes: &LogDriveWrites<'_>, count: u64) {
        let mut share = Share {
            drives: (0..writes.drives.len()).collect(),
            turn: 0,
        };
        let pending: Vec<_> = (0..count * writes.drives.len() as u64)
            .map(|_| writes.submit(&mut share, Bytes::from_static(b"x")).unwrap())
            .collect();
        pending
            .into_iter()
            .for_each(|write| writes.finish(write).unwrap());
    }

    fn firsts(drives: &[LocalLogDrive]) -> Vec<u64> {
        drives
            .iter()
            .map(|drive| wait(drive.length()).unwrap().first)
            .collect()
    }

    /// Every release trims a lone LogDrive to its share, as the raw engine's log is trimmed,
    /// rather than every fourth (a quarter of one LogDrive rounded up to one, in turn).
    #[test]
    fn every_release_trims_fewer_than_four_logdrives_each_to_its_share() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(&dir.path().join("ring"));
        for count in [1, 3] {
            let first = 10 * count as u64;
            let drives = create_logdrives(&store, first, count).unwrap();
            let writes = LogDriveWrites::new(&drives, 1);
            for round in 1..=4u64 {
                write_all(&writes, 100);
                writes.release(store.drive(), 30 * count as u64).unwrap();
                // Each LogDrive holds 100 more after each round, and keeps its last 30.
                assert_eq!(
                    firsts(&drives),
                    vec![100 * round - 30; count],
                    "round {round}"
                );
            }
        }
        store.close();
    }

    /// Four or more LogDrives are trimmed a quarter at a time, in turn, each to 5/8 of an
    /// even share.
    #[test]
    fn releases_trim_a_quarter_of_many_logdrives_in_turn() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(&dir.path().join("ring"));
        let drives = create_logdrives(&store, 0, 8).unwrap();
        let writes = LogDriveWrites::new(&drives, 1);
        write_all(&writes, 100);
        // keep 128 over 8 LogDrives: 10 each (5/8 of 16).
        writes.release(store.drive(), 128).unwrap();
        assert_eq!(firsts(&drives), [90, 90, 0, 0, 0, 0, 0, 0]);
        writes.release(store.drive(), 128).unwrap();
        assert_eq!(firsts(&drives), [90, 90, 90, 90, 0, 0, 0, 0]);
        store.close();
    }
}
