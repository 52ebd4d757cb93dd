//! sealog's cells: W writer threads, each keeping `in_flight` appends outstanding (submit,
//! and once that many are pending, wait for the oldest), for a time after a warm-up, on a
//! freshly formatted ring; and the recovery workload (a full ring, and the time to open it).
//! Latency is from submission to durable acknowledgement. The writers' loop runs over a
//! [`WritePath`]: the engine's appends here, the LogDrive layer's writes in `logdrive.rs`.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;

use hdrhistogram::Histogram;
use nix::sys::resource::{getrusage, UsageWho};
use sealog::{format, Drive, DriveOptions, FormatOptions, SyncMethod, WhenFull};
use sealog_wal::ControlBlock;

use crate::ceiling::RECOVERY_READ_BYTES;
use crate::cell::Cell;
use crate::median::median;
use crate::read_plan::COLD_PAYLOAD_BYTES;

/// One sealog workload.
#[derive(Clone, Copy, Debug)]
pub struct Workload {
    /// Payload size.
    pub payload_bytes: usize,
    /// Writer threads.
    pub writers: usize,
    /// Appends outstanding per writer.
    pub in_flight: usize,
    /// Measured time.
    pub duration: Duration,
    /// Warm-up before measuring.
    pub warmup: Duration,
}

/// The shape of the rings the cells run on.
#[derive(Clone, Copy, Debug)]
pub struct RingShape {
    /// Total size.
    pub size_bytes: u64,
    /// Largest batch (default: the engine's).
    pub batch_size_max_bytes: Option<u32>,
    /// Batches in flight at most (default: the engine's).
    pub window_batches_max: Option<u32>,
    /// The sync method the ring records (`None`: format measures the device and chooses).
    pub sync_method: Option<SyncMethod>,
}

/// Formats a fresh directory ring of `shape` at `path`; returns its control block.
pub fn fresh_ring(path: &Path, shape: RingShape) -> Result<ControlBlock, String> {
    // A directory ring is made anew; a block device is formatted over (force).
    if path.is_dir() {
        std::fs::remove_dir_all(path).map_err(|error| format!("{}: {error}", path.display()))?;
    }
    let options = FormatOptions {
        size_bytes: shape.size_bytes,
        segment_size_bytes: Some(64 << 20),
        force: true,
        batch_size_max_bytes: shape.batch_size_max_bytes,
        window_batches_max: shape.window_batches_max,
        sync_method: shape.sync_method,
        // The bench formats over its own rings run after run (a device keeps the last one).
        overwrite: vec![sealog::Signature::Sealog],
        ..FormatOptions::default()
    };
    format(path, &options).map_err(|error| error.to_string())
}

pub fn cpu_seconds() -> f64 {
    getrusage(UsageWho::RUSAGE_SELF).map_or(0.0, |usage| {
        let user = usage.user_time();
        let system = usage.system_time();
        user.tv_sec() as f64
            + user.tv_usec() as f64 / 1e6
            + system.tv_sec() as f64
            + system.tv_usec() as f64 / 1e6
    })
}

/// Peak resident set size of this process, in bytes.
pub fn peak_rss_bytes() -> u64 {
    getrusage(UsageWho::RUSAGE_SELF).map_or(0, |usage| usage.max_rss().max(0) as u64 * 1024)
}

/// Starts a cell's own peak RSS: Linux resets the process's high-water mark (VmHWM) to its
/// current RSS when "5" is written to /proc/self/clear_refs. Returns whether it could.
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// The process's high-water mark of resident memory (VmHWM) since the last reset, in bytes.
pub fn peak_rss_since_reset_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Runs one sealog cell on a fresh ring at `ring`.
pub fn sealog_cell(
    ring: &Path,
    shape: RingShape,
    workload: Workload,
    options: DriveOptions,
) -> Result<Cell, String> {
    fresh_ring(ring, shape)?;
    let drive = Drive::open(ring, cell_options(options)).map_err(|error| error.to_string())?;
    let cell = measure_writers(&drive, "sealog", workload, &RawAppends(&drive));
    drive.close();
    cell
}

/// The options a cell's drive opens with: `options`, and a writer waits for another's trim
/// rather than fail when the ring is full.
pub fn cell_options(options: DriveOptions) -> DriveOptions {
    DriveOptions {
        when_full: WhenFull::Wait(Duration::from_secs(10)),
        ..options
    }
}

/// What a cell's writer threads write through: the engine's drive itself ([`RawAppends`]),
/// or a layer above it (the LogDrive section's writes). Every writer thread runs the same
/// loop over it ([`measure_writers`]), so two paths differ only in the calls they make.
pub trait WritePath: Sync {
    /// What one writer thread keeps (for example which log and address it writes next).
    type State;
    /// One write in flight.
    type Pending;
    /// Writer `writer`'s state, made on its own thread.
    fn state(&self, writer: usize) -> Self::State;
    /// Starts one write of `payload`.
    fn submit(&self, state: &mut Self::State, payload: Bytes) -> Result<Self::Pending, String>;
    /// Waits until that write is durable.
    fn finish(&self, pending: Self::Pending) -> Result<(), String>;
    /// Releases what was written but about the last `keep_writes` writes, so that the ring
    /// never fills during a cell: the raw engine trims its log; a layer above releases its
    /// own way (and reclaims the ring's space as it does).
    fn release(&self, drive: &Drive, keep_writes: u64) -> Result<(), String> {
        let upto = drive.durable_lsn().saturating_sub(keep_writes);
        drive.trim(upto).map_err(|error| error.to_string())
    }
}

/// The raw engine's appends: `Drive::append` of shared bytes, waited on with `Ticket::wait`.
pub struct RawAppends<'a>(pub &'a Drive);

impl WritePath for RawAppends<'_> {
    type State = ();
    type Pending = sealog::Ticket;

    fn state(&self, _writer: usize) {}

    fn submit(&self, _state: &mut (), payload: Bytes) -> Result<sealog::Ticket, String> {
        self.0.append(payload).map_err(|error| error.to_string())
    }

    fn finish(&self, ticket: sealog::Ticket) -> Result<(), String> {
        ticket.wait().map(|_| ()).map_err(|error| error.to_string())
    }
}

/// What the drive and the process did over a cell's measured window.
struct Window {
    seconds: f64,
    before: sealog::Stats,
    after: sealog::Stats,
    cpu_seconds: f64,
}

/// Runs `workload`'s writer threads through `path` on `drive` (open, its live log empty),
/// measures them after the warm-up, and returns the cell, named `engine`. Latency is from a
/// write's submission to its durable acknowledgement; the drive's own figures (batches,
/// handoffs, syncs) and the process's CPU are taken over the measured window.
pub fn measure_writers<P: WritePath>(
    drive: &Drive,
    engine: &str,
    workload: Workload,
    path: &P,
) -> Result<Cell, String> {
    let rss_reset = reset_peak_rss();
    let measuring = AtomicBool::new(false);
    let stop = AtomicBool::new(false);
    let trim = TrimBehind::new(drive, &workload);
    let (window, results) = std::thread::scope(|scope| {
        let (measuring, stop, trim) = (&measuring, &stop, &trim);
        let handles: Vec<_> = (0..workload.writers)
            .map(|index| scope.spawn(move || writer(path, index, workload, measuring, stop, trim)))
            .collect();
        std::thread::sleep(workload.warmup);
        let before = drive.stats();
        let cpu_before = cpu_seconds();
        measuring.store(true, Ordering::SeqCst);
        let started = Instant::now();
        std::thread::sleep(workload.duration);
        measuring.store(false, Ordering::SeqCst);
        let seconds = started.elapsed().as_secs_f64();
        let after = drive.stats();
        let cpu_seconds = cpu_seconds() - cpu_before;
        stop.store(true, Ordering::SeqCst);
        let results: Vec<WriterResult> = handles
            .into_iter()
            .map(|handle| {
                handle
                    .join()
                    .unwrap_or_else(|_| Err("a writer panicked".to_string()))
            })
            .collect();
        let window = Window {
            seconds,
            before,
            after,
            cpu_seconds,
        };
        (window, results)
    });
    let mut latency = Histogram::<u64>::new(3).map_err(|error| error.to_string())?;
    let mut operations = 0u64;
    for result in results {
        let (count, histogram) = result?;
        operations += count;
        latency.add(histogram).map_err(|error| error.to_string())?;
    }
    let mut cell = Cell::measured(
        engine,
        workload.payload_bytes as u64,
        workload.writers as u64,
        workload.in_flight as u64,
        operations,
        window.seconds,
        &latency,
    );
    if rss_reset {
        cell.peak_rss_bytes = peak_rss_since_reset_bytes().unwrap_or(0);
    }
    drive_figures(&mut cell, &window, operations);
    Ok(cell)
}

/// Fills a cell's batching, handoff and CPU columns from the drive's statistics over its
/// measured window.
fn drive_figures(cell: &mut Cell, window: &Window, operations: u64) {
    let (before, after, seconds) = (&window.before, &window.after, window.seconds);
    let batches = after.batches.saturating_sub(before.batches);
    let appends = after.appends.saturating_sub(before.appends);
    cell.batch_entries = appends as f64 / batches.max(1) as f64;
    cell.syncs_per_sec = batches as f64 / seconds;
    cell.tail_markers = after.tail_markers.saturating_sub(before.tail_markers);
    cell.hint_writes = after.hint_writes.saturating_sub(before.hint_writes);
    cell.hint_waits = after.hint_waits.saturating_sub(before.hint_waits);
    let measured = |after: &Histogram<u64>, before: &Histogram<u64>| {
        let mut window = after.clone();
        match window.subtract(before) {
            Ok(()) if !window.is_empty() => window.value_at_quantile(0.5) as f64,
            _ => 0.0,
        }
    };
    cell.batch_p50_us = measured(&after.sync_latency_us, &before.sync_latency_us);
    cell.idle_gap_p50_us = measured(&after.idle_gap_us, &before.idle_gap_us);
    cell.handoff_submit_p50_us =
        measured(&after.enqueue_to_submit_us, &before.enqueue_to_submit_us);
    cell.handoff_wake_p50_us =
        measured(&after.completion_to_wake_us, &before.completion_to_wake_us);
    let gigabytes = operations as f64 * cell.payload_bytes as f64 / 1e9;
    cell.cpu_seconds_per_gb = if gigabytes > 0.0 {
        window.cpu_seconds / gigabytes
    } else {
        0.0
    };
    cell.set_cpu_us_per_append(window.cpu_seconds, operations);
}

/// What tail markers cost a writer that goes idle between appends.
#[derive(Clone, Copy, Debug)]
pub struct TailMarkerCost {
    /// Idle periods the writer made (one append, then a pause past the marker's idle time).
    pub idle_periods: u64,
    /// Tail markers the drive wrote meanwhile: one per idle period, none more.
    pub markers: u64,
    /// Bytes each marker writes (one block).
    pub marker_bytes: u64,
    /// The drive's idle time before a marker, microseconds.
    pub idle_us: u64,
}

impl TailMarkerCost {
    /// The measurement as JSON.
    pub fn to_json(self) -> serde_json::Value {
        serde_json::json!({
            "idle_periods": self.idle_periods,
            "markers": self.markers,
            "marker_bytes": self.marker_bytes,
            "idle_us": self.idle_us,
        })
    }
}

/// Measures tail markers on a fresh ring: a lone writer appends a 4 KiB entry, waits for it,
/// then stays idle for twice the marker's idle time, `idle_periods` times. Each idle period
/// should cost exactly one marker (one block written and flushed); the busy cells show none.
pub fn tail_marker_cost(
    ring: &Path,
    shape: RingShape,
    options: DriveOptions,
    idle_periods: u64,
) -> Result<TailMarkerCost, String> {
    let block_bytes = fresh_ring(ring, shape)?.geometry.block_size_bytes;
    let idle_us = options.tail_marker_idle_us;
    let drive = Drive::open(ring, options).map_err(|error| error.to_string())?;
    let before = drive.stats();
    for round in 0..idle_periods {
        drive
            .append(vec![round as u8; 4096])
            .map_err(|error| error.to_string())?
            .wait()
            .map_err(|error| error.to_string())?;
        std::thread::sleep(Duration::from_micros(2 * idle_us));
    }
    let after = drive.stats();
    drive.close();
    Ok(TailMarkerCost {
        idle_periods,
        markers: after.tail_markers.saturating_sub(before.tail_markers),
        marker_bytes: u64::from(block_bytes),
        idle_us,
    })
}

type WriterResult = Result<(u64, Histogram<u64>), String>;

/// How many of the last writes of `workload` a cell keeps: as many as a quarter of the ring
/// holds. A lone write in flight (one writer, one at a time) is a batch of its own, its
/// record rounded up to whole blocks; more are counted as packed records. (Counted as packed,
/// a lone writer's 128-byte appends, one 4 KiB block each, held 18 times a quarter of the
/// ring: whether the ring filled before the cell ended depended on how fast the device
/// wrote.)
pub fn keep_writes(ring_bytes: u64, block_bytes: u64, workload: &Workload) -> u64 {
    let record_bytes = (workload.payload_bytes + sealog_wal::format::ENTRY_HEADER_SIZE) as u64;
    let block_bytes = block_bytes.max(1);
    let footprint_bytes = if workload.writers * workload.in_flight == 1 {
        record_bytes.div_ceil(block_bytes) * block_bytes
    } else {
        record_bytes
    };
    (ring_bytes / 4 / footprint_bytes).max(64)
}

/// Keeps a cell's ring from filling: every quarter of `keep` acknowledged writes (all writers
/// together) one writer releases all but the last `keep` through its write path, a quarter
/// of the ring.
struct TrimBehind<'a> {
    drive: &'a Drive,
    keep: u64,
    every: u64,
    acknowledged: AtomicU64,
}

impl<'a> TrimBehind<'a> {
    fn new(drive: &'a Drive, workload: &Workload) -> TrimBehind<'a> {
        let geometry = drive.geometry();
        let keep = keep_writes(
            geometry.ring_size_bytes().unwrap_or(0),
            u64::from(geometry.block_size_bytes),
            workload,
        );
        TrimBehind {
            drive,
            keep,
            every: (keep / 4).max(1),
            acknowledged: AtomicU64::new(0),
        }
    }

    /// One more write acknowledged.
    fn acknowledged<P: WritePath>(&self, path: &P) -> Result<(), String> {
        let count = self.acknowledged.fetch_add(1, Ordering::Relaxed) + 1;
        if count % self.every == 0 {
            path.release(self.drive, self.keep)?;
        }
        Ok(())
    }
}

/// One writer: keeps `in_flight` writes outstanding through `path`, waiting for the oldest
/// once that many are pending; trims behind itself so the ring never fills. Counts and times
/// only what completes while `measuring` is set.
fn writer<P: WritePath>(
    path: &P,
    index: usize,
    workload: Workload,
    measuring: &AtomicBool,
    stop: &AtomicBool,
    trim: &TrimBehind<'_>,
) -> WriterResult {
    let mut latency = Histogram::<u64>::new(3).map_err(|error| error.to_string())?;
    // Shared bytes: each write hands the drive a reference, not a copy (the engine's
    // zero-copy path; the drive copies once, into its registered buffer).
    let payload = bytes::Bytes::from(vec![0x5a; workload.payload_bytes]);
    let mut state = path.state(index);
    let mut pending = VecDeque::with_capacity(workload.in_flight);
    let mut count = 0u64;
    while !stop.load(Ordering::Relaxed) {
        while pending.len() < workload.in_flight {
            let write = path.submit(&mut state, payload.clone())?;
            pending.push_back((Instant::now(), write));
        }
        let (submitted, write) = pending.pop_front().expect("one pending");
        path.finish(write)?;
        if measuring.load(Ordering::Relaxed) {
            latency
                .record(submitted.elapsed().as_micros().max(1) as u64)
                .ok();
            count += 1;
        }
        trim.acknowledged(path)?;
    }
    for (_, write) in pending {
        let _ = path.finish(write);
    }
    Ok((count, latency))
}

/// Formats a ring of `shape` at `ring` and fills it with 4 KiB records (payload plus header)
/// of [`COLD_PAYLOAD_BYTES`], pipelined, until the ring refuses one (the head's
/// segment and the window stay free), then closes it. Returns its control block as formatted
/// and the entries acknowledged. The recovery rounds, the cold reads and the catch-up iterator
/// all read this one ring.
pub fn fill_ring(ring: &Path, shape: RingShape) -> Result<(ControlBlock, u64), String> {
    let control = fresh_ring(ring, shape)?;
    let drive = Drive::open(ring, DriveOptions::default()).map_err(|error| error.to_string())?;
    let payload = vec![0x3c; COLD_PAYLOAD_BYTES];
    let mut pending = VecDeque::new();
    let mut appended = 0u64;
    let mut full = false;
    while !full || !pending.is_empty() {
        if !full && pending.len() < 512 {
            pending.push_back(
                drive
                    .append(payload.clone())
                    .map_err(|error| error.to_string())?,
            );
            continue;
        }
        let ticket: sealog::Ticket = pending.pop_front().expect("pending");
        match ticket.wait() {
            Ok(_) => appended += 1,
            Err(sealog::AppendError::RingFull { .. }) => full = true,
            Err(error) => return Err(error.to_string()),
        }
    }
    drive.close();
    Ok((control, appended))
}

/// Times the open (replay of the whole ring) of the full ring at `ring` holding `appended`
/// entries ([`fill_ring`]), in rounds with the sequential read ceiling of the same ring; the
/// disk's counters (the sysfs directory `disk`, when known) say what each open read and flushed.
pub fn recovery_cell(ring: &Path, appended: u64, disk: Option<&Path>) -> Result<Recovery, String> {
    // Rounds of: the read ceiling at depths 1 and 4 on this same ring, then an open. The
    // device's speed drifts by a factor of two within seconds on a shared host, so each figure
    // is the median of its rounds, and ceiling and recovery read the same bytes.
    let mut rounds = RecoveryRounds::default();
    for round in 0..RECOVERY_ROUNDS {
        // Whatever a cache below the guest keeps of what was just read favours the next reader:
        // the order alternates so that neither side always comes second.
        if round % 2 == 1 {
            rounds.read_ceiling(ring, true)?;
        }
        rounds.open(ring, disk)?;
        if round % 2 == 0 {
            rounds.read_ceiling(ring, false)?;
        }
    }
    rounds.finish(ring, appended)
}

/// What the recovery rounds measured so far, a figure per round: each open's speed and wall
/// time (with the disk's counters during it, where known), and the read ceiling at depths 1
/// and 4; and what the last open found in the ring.
#[derive(Default)]
struct RecoveryRounds {
    opens: Vec<f64>,
    open_ms: Vec<f64>,
    read_bytes: Vec<f64>,
    flushes: Vec<f64>,
    depth_1: Vec<f64>,
    depth_4: Vec<f64>,
    entries: u64,
    ring_size: f64,
    segments: u32,
}

impl RecoveryRounds {
    /// One round's read ceiling of `ring` at depths 1 and 4, depth 1 first or last.
    fn read_ceiling(&mut self, ring: &Path, depth_1_first: bool) -> Result<(), String> {
        let read = |depth: usize| {
            crate::ceiling::builtin_sequential_read(ring, depth, RECOVERY_READ_BYTES)
        };
        if depth_1_first {
            self.depth_1.push(read(1)?);
            self.depth_4.push(read(4)?);
        } else {
            self.depth_4.push(read(4)?);
            self.depth_1.push(read(1)?);
        }
        Ok(())
    }

    /// One round's open of `ring`, timed from the call to its return, with the counters of
    /// the sysfs directory `disk` around it.
    fn open(&mut self, ring: &Path, disk: Option<&Path>) -> Result<(), String> {
        let counters = || disk.and_then(crate::machine::disk_counters);
        let before = counters();
        let started = Instant::now();
        let reopened =
            Drive::open(ring, DriveOptions::default()).map_err(|error| error.to_string())?;
        let seconds = started.elapsed().as_secs_f64();
        if let Some((before, after)) = before.zip(counters()) {
            let during = before.until(after);
            self.read_bytes.push(during.read_bytes as f64);
            self.flushes.push(during.flushes as f64);
        }
        self.ring_size = reopened.geometry().ring_size_bytes().unwrap_or(0) as f64;
        self.segments = reopened.geometry().segment_count;
        self.opens.push(self.ring_size / seconds);
        self.open_ms.push(seconds * 1e3);
        self.entries = reopened.recovery_report().entries;
        reopened.close();
        drop(reopened);
        Ok(())
    }

    /// The medians of the rounds, once the opens are checked to have recovered every entry
    /// of the `appended` acknowledged in `ring`.
    fn finish(mut self, ring: &Path, appended: u64) -> Result<Recovery, String> {
        let entries = self.entries;
        if entries != appended {
            return Err(format!(
                "recovery found {entries} entries in {}, {appended} were acknowledged",
                ring.display()
            ));
        }
        let measured = |values: &mut Vec<f64>| (!values.is_empty()).then(|| median(values));
        Ok(Recovery {
            bytes_per_sec: median(&mut self.opens),
            read_depth_1_bytes_per_sec: median(&mut self.depth_1),
            read_depth_4_bytes_per_sec: median(&mut self.depth_4),
            entries,
            ring_bytes: self.ring_size as u64,
            segments: self.segments,
            open_ms: median(&mut self.open_ms),
            device_read_bytes: measured(&mut self.read_bytes),
            device_flushes: measured(&mut self.flushes),
        })
    }
}

/// Rounds of the recovery measurement (see [`recovery_cell`]).
pub const RECOVERY_ROUNDS: usize = 4;

/// What the recovery workload measured: medians over its rounds.
#[derive(Clone, Copy, Debug)]
pub struct Recovery {
    /// Bytes of ring per second of opening (replay included).
    pub bytes_per_sec: f64,
    /// Sequential O_DIRECT read of the same ring, 1 MiB at a time, one in flight.
    pub read_depth_1_bytes_per_sec: f64,
    /// The same with four reads in flight.
    pub read_depth_4_bytes_per_sec: f64,
    /// Entries recovered (each round the same).
    pub entries: u64,
    /// The ring's size.
    pub ring_bytes: u64,
    /// Its segments.
    pub segments: u32,
    /// Median wall time of an open, milliseconds.
    pub open_ms: f64,
    /// Median bytes the disk read during an open (whole disk), where its counters are known.
    pub device_read_bytes: Option<f64>,
    /// Median flushes the disk completed during an open (whole disk), where known.
    pub device_flushes: Option<f64>,
}

impl Recovery {
    /// The recovery ceiling: the better of the two read depths.
    pub fn read_ceiling_bytes_per_sec(&self) -> f64 {
        self.read_depth_1_bytes_per_sec
            .max(self.read_depth_4_bytes_per_sec)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{keep_writes, Workload};

    fn workload(payload_bytes: usize, writers: usize, in_flight: usize) -> Workload {
        Workload {
            payload_bytes,
            writers,
            in_flight,
            duration: Duration::ZERO,
            warmup: Duration::ZERO,
        }
    }

    /// A lone write in flight is counted at the blocks its batch takes, so the writes kept
    /// fill at most a quarter of the ring whatever their size; writes batched together are
    /// counted as packed records.
    #[test]
    fn the_writes_kept_fill_a_quarter_of_the_ring_at_most() {
        let ring_bytes = 320u64 << 20;
        for payload_bytes in [0usize, 128, 4000, 4096, 65536, 1 << 20] {
            let keep = keep_writes(ring_bytes, 4096, &workload(payload_bytes, 1, 1));
            let record_bytes = (payload_bytes + sealog_wal::format::ENTRY_HEADER_SIZE) as u64;
            let batch_bytes = record_bytes.div_ceil(4096) * 4096;
            assert!(
                keep * batch_bytes <= ring_bytes / 4,
                "{payload_bytes}: {keep}"
            );
            assert!((keep + 1) * batch_bytes > ring_bytes / 4 || keep == 64);
            let packed = keep_writes(ring_bytes, 4096, &workload(payload_bytes, 4, 16));
            assert_eq!(packed, (ring_bytes / 4 / record_bytes).max(64));
        }
        // A lone writer's 128-byte appends, one block each: 20,480 kept, not 374,491.
        assert_eq!(keep_writes(ring_bytes, 4096, &workload(128, 1, 1)), 20480);
    }
}
