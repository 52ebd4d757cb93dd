//! The ceilings every sealog cell is compared with, measured in the same run on the same
//! storage: the built-in raw mode (aligned blocks written with the engine's own io_uring
//! backend, a linked datasync after each, queue depth 1; and a sequential O_DIRECT read of the
//! ring), fio with the same parameters when it is installed, and the raw paths the engine could
//! take: a lone append's write made durable by a linked fdatasync or by RWF_DSYNC (FUA where
//! the device has it), timed at queue depth 1 in interleaved rounds by the engine's own
//! format-time measurement, and the raw write bandwidth (1 MiB writes, several in flight, no
//! sync: the physical limit a deep pipeline approaches).

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use sealog::io::{run_sync, FlushOrder, IoBackend, WriteSync};
use sealog::storage::{self, Access};
use sealog::sync_probe::{self, MethodTimes, ProbePlan};
use sealog::uring::UringBackend;
use sealog_wal::Geometry;

use crate::cell::{Cell, RAW_DSYNC, RAW_DSYNC_FUA, RAW_FDATASYNC, RAW_WRITE};
use crate::random::SplitMix64;
use crate::read_row::{ReadLoad, ReadRow, FIO_RANDOM_READ, RANDOM_READ};

/// 1 MiB writes in flight at once in the raw write bandwidth: twice the engine's default
/// window of batches, so the device, not the submitter, is the bound.
pub const RAW_WRITE_DEPTH: usize = 8;

/// Runs `count` write+datasync operations of `bytes` at queue depth 1 through io_uring on the
/// ring at `ring` (its data area), for at most `duration`.
/// It waits for completions as the engine's drive thread does (`spin_us`), so the two differ
/// only in what the engine adds.
pub fn builtin_write_sync(
    ring: &Path,
    bytes: usize,
    duration: Duration,
    spin_us: u64,
) -> Result<Cell, String> {
    let (mut backend, geometry) = ring_backend(ring, Access::ReadWrite, 1, |geometry| {
        bytes.max(geometry.block_size_bytes as usize)
    })?;
    backend.set_spin_us(spin_us);
    backend.pool().buffer_mut(0).fill(0x5a);
    let mut latency = Histogram::<u64>::new(3).map_err(|error| error.to_string())?;
    let started = Instant::now();
    let mut operations = 0u64;
    while started.elapsed() < duration {
        // Walk the segments' data areas, wrapping: every write lands on written, allocated space.
        let ring_offset = sync_probe::data_slot_offset(&geometry, bytes as u32, operations);
        let op_started = Instant::now();
        backend
            .submit_write(1, ring_offset, 0, 0, bytes as u32, WriteSync::None)
            .map_err(|error| error.to_string())?;
        backend
            .submit_flush(2, ring_offset, FlushOrder::AfterPreviousWrite)
            .map_err(|error| error.to_string())?;
        run_sync(&mut backend, 2).map_err(|error| format!("raw write+datasync: {error}"))?;
        latency
            .record(op_started.elapsed().as_micros().max(1) as u64)
            .ok();
        operations += 1;
    }
    let seconds = started.elapsed().as_secs_f64();
    Ok(Cell::measured(
        "ceiling-builtin",
        bytes as u64,
        1,
        1,
        operations,
        seconds,
        &latency,
    ))
}

/// The raw paths a lone append could take, at queue depth 1, each a ceiling cell.
pub struct RawPaths {
    /// Write + linked fdatasync.
    pub fdatasync: Cell,
    /// Write with RWF_DSYNC (a FUA write where the device has FUA: then named so).
    pub dsync: Cell,
}

/// Times both raw paths on the ring at `ring` with the engine's own measurement (interleaved
/// rounds, the write a 4 KiB append makes), for about `budget` in all, waiting for completions
/// as the drive thread does (`spin_us`).
pub fn builtin_raw_paths(ring: &Path, budget: Duration, spin_us: u64) -> Result<RawPaths, String> {
    let write_bytes = |geometry: &Geometry| {
        sync_probe::append_write_bytes(geometry, sync_probe::PROBE_PAYLOAD_BYTES) as usize
    };
    let (mut backend, geometry) = ring_backend(ring, Access::ReadWrite, 1, write_bytes)?;
    let write_size_bytes = write_bytes(&geometry) as u32;
    backend.set_spin_us(spin_us);
    let plan = ProbePlan {
        rounds_max: u16::MAX,
        budget,
        ..ProbePlan::FORMAT
    };
    let probe = sync_probe::measure(&mut backend, &geometry, &plan)
        .map_err(|error| format!("raw paths: {error}"))?;
    let cell = |engine: &str, times: &MethodTimes| -> Result<Cell, String> {
        let mut latency = Histogram::<u64>::new(3).map_err(|error| error.to_string())?;
        for &nanos in &times.latencies_ns {
            latency.record((nanos / 1000).max(1)).ok();
        }
        let mut cell = Cell::measured(
            engine,
            u64::from(write_size_bytes),
            1,
            1,
            times.latencies_ns.len() as u64,
            times.busy.as_secs_f64().max(1e-9),
            &latency,
        );
        cell.note = format!(
            "{write_size_bytes}-byte writes (what a 4 KiB append writes), queue depth 1, {} \
             interleaved rounds of {} per path",
            probe.rounds, probe.writes_per_round
        );
        Ok(cell)
    };
    let dsync_engine = if probe.fua { RAW_DSYNC_FUA } else { RAW_DSYNC };
    Ok(RawPaths {
        fdatasync: cell(RAW_FDATASYNC, &probe.fdatasync)?,
        dsync: cell(dsync_engine, &probe.dsync)?,
    })
}

/// Writes `bytes` at a time with `depth` writes in flight and no sync at all, for `duration`,
/// along the ring's data areas: the raw write bandwidth a deep pipeline approaches. Latency is
/// each write's, from submission to completion.
pub fn builtin_write_bandwidth(
    ring: &Path,
    bytes: usize,
    depth: usize,
    duration: Duration,
) -> Result<Cell, String> {
    let depth = depth.max(1);
    let (mut backend, geometry) = ring_backend(ring, Access::ReadWrite, depth, |_| bytes)?;
    for buffer in 0..depth {
        backend.pool().buffer_mut(buffer).fill(0x5a);
    }
    let mut next = 0u64;
    let (written, seconds, latency) = keep_in_flight(
        &mut backend,
        depth,
        duration,
        ("raw write bandwidth", |elapsed| elapsed.as_micros() as u64),
        |backend, buffer| {
            let ring_offset = sync_probe::data_slot_offset(&geometry, bytes as u32, next);
            next += 1;
            backend.submit_write(
                buffer as u64,
                ring_offset,
                buffer,
                0,
                bytes as u32,
                WriteSync::None,
            )
        },
    )?;
    let mut cell = Cell::measured(
        RAW_WRITE,
        bytes as u64,
        1,
        depth as u64,
        written,
        seconds,
        &latency,
    );
    cell.note = "no sync: the device's write bandwidth (writes may sit in its cache)".to_string();
    Ok(cell)
}

/// Bytes of each read of the recovery ceiling: about recovery's own reads (a buffer of the
/// drive's pool, a batch and a block: 1 MiB and 4 KiB on the default geometry).
pub const RECOVERY_READ_BYTES: usize = 1 << 20;

/// Reads the whole ring sequentially with O_DIRECT, `chunk` bytes at a time with `depth` reads
/// in flight: the ceiling of recovery (1 MiB reads, [`RECOVERY_READ_BYTES`]) and of a catch-up
/// iterator (its own read size), in bytes per second. (Recovery keeps two reads in flight, one
/// of them read-ahead; the run takes the best of depths 1 and 4 as the ceiling.)
pub fn builtin_sequential_read(ring: &Path, depth: usize, chunk: usize) -> Result<f64, String> {
    let depth = depth.max(1);
    let (mut backend, geometry) = ring_backend(ring, Access::ReadOnly, depth, |_| chunk)?;
    // Every 1 MiB piece of every segment, in ring order.
    let pieces: Vec<(u64, u32)> = (0..geometry.segment_count)
        .flat_map(|segment| {
            let start = geometry.segment_ring_offset(segment);
            (0..geometry.segment_size_bytes)
                .step_by(chunk)
                .map(move |done| {
                    let len = (geometry.segment_size_bytes - done).min(chunk as u64) as u32;
                    (start + done, len)
                })
        })
        .collect();
    let started = Instant::now();
    let mut read = 0u64;
    let mut next = 0usize;
    let mut in_flight = 0usize;
    let mut completions = Vec::new();
    // The tag is the buffer the read went into, so a finished read's buffer is reused.
    for buffer in 0..depth.min(pieces.len()) {
        let (offset, len) = pieces[next];
        backend
            .submit_read(buffer as u64, offset, buffer, len)
            .map_err(|error| error.to_string())?;
        next += 1;
        in_flight += 1;
    }
    while in_flight > 0 {
        completions.clear();
        backend
            .wait(1, &mut completions)
            .map_err(|error| format!("sequential read: {error}"))?;
        for completion in &completions {
            let bytes = completion.result.map_err(|errno| {
                format!(
                    "sequential read: {}",
                    std::io::Error::from_raw_os_error(errno)
                )
            })?;
            read += u64::from(bytes);
            in_flight -= 1;
            if next < pieces.len() {
                let (offset, len) = pieces[next];
                let buffer = completion.tag as usize;
                backend
                    .submit_read(completion.tag, offset, buffer, len)
                    .map_err(|error| error.to_string())?;
                next += 1;
                in_flight += 1;
            }
        }
    }
    Ok(read as f64 / started.elapsed().as_secs_f64())
}

/// Where fio writes: a file it creates in a directory (removed afterwards), or a block device
/// (its first 256 MiB are overwritten).
#[derive(Clone, Copy, Debug)]
pub enum FioTarget<'a> {
    /// A scratch file in this directory.
    Directory(&'a Path),
    /// This block device.
    Device(&'a Path),
}

/// fio's write+fdatasync cell with the same parameters (io_uring, O_DIRECT, fdatasync after
/// every write, queue depth 1), on `target`; `None` when fio is not installed.
pub fn fio_write_sync(
    target: FioTarget<'_>,
    bytes: usize,
    seconds: u64,
) -> Option<Result<Cell, String>> {
    let found = Command::new("fio")
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success());
    if !found {
        return None;
    }
    let (file, scratch) = match target {
        FioTarget::Directory(directory) => (directory.join(format!("fio-{bytes}")), true),
        FioTarget::Device(device) => (device.to_path_buf(), false),
    };
    let output = Command::new("fio")
        .args([
            "--name=sealog-ceiling",
            "--rw=write",
            "--ioengine=io_uring",
            "--direct=1",
        ])
        .args([
            "--fdatasync=1",
            "--iodepth=1",
            "--time_based",
            "--output-format=json",
        ])
        .arg(format!("--bs={bytes}"))
        .arg(format!("--size={}", (256u64 << 20).max(bytes as u64 * 64)))
        .arg(format!("--runtime={seconds}"))
        .arg(format!("--filename={}", file.display()))
        .output();
    // Only the scratch file is removed, never a device.
    if scratch {
        let _ = std::fs::remove_file(&file);
    }
    Some(parse_fio(output, bytes))
}

fn parse_fio(output: std::io::Result<std::process::Output>, bytes: usize) -> Result<Cell, String> {
    let output = output.map_err(|error| format!("fio: {error}"))?;
    if !output.status.success() {
        return Err(format!(
            "fio failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    let json: serde_json::Value =
        serde_json::from_slice(&output.stdout).map_err(|error| format!("fio output: {error}"))?;
    let job = &json["jobs"][0];
    let write = &job["write"];
    let percentile = |path: &serde_json::Value, key: &str| {
        path["percentile"][key].as_f64().unwrap_or(0.0) / 1000.0
    };
    let iops = write["iops"].as_f64().unwrap_or(0.0);
    let clat = &write["clat_ns"];
    let sync = &job["sync"]["lat_ns"];
    let mut cell = Cell::empty("fio", bytes as u64, 1, 1);
    cell.appends_per_sec = iops;
    cell.mb_per_sec = write["bw_bytes"].as_f64().unwrap_or(0.0) / 1e6;
    // fio reports the write and the fdatasync apart: printed beside, not used for ratios.
    cell.p50_us = percentile(clat, "50.000000") + percentile(sync, "50.000000");
    cell.p99_us = percentile(clat, "99.000000") + percentile(sync, "99.000000");
    cell.p999_us = percentile(clat, "99.900000") + percentile(sync, "99.900000");
    cell.max_us = clat["max"].as_f64().unwrap_or(0.0) / 1000.0;
    cell.note = "write and fdatasync latencies added (fio times them apart)".to_string();
    Ok(cell)
}

/// The engine's io_uring backend on the ring at `ring` (opened with `access`), with `buffers`
/// buffers of the size `buffer_bytes` gives for the ring's geometry, and that geometry.
fn ring_backend(
    ring: &Path,
    access: Access,
    buffers: usize,
    buffer_bytes: impl FnOnce(&Geometry) -> usize,
) -> Result<(UringBackend, Geometry), String> {
    let files = storage::open(ring, access).map_err(|error| error.to_string())?;
    let geometry = files.geometry;
    let bytes = buffer_bytes(&geometry);
    let (backend, _) =
        UringBackend::new(files, buffers, bytes).map_err(|error| error.to_string())?;
    Ok((backend, geometry))
}

/// Keeps `depth` operations in flight on `backend` for `duration`: `submit` puts one on the
/// device through a buffer (its tag), and each buffer's next operation goes as its last one
/// completes. Returns how many completed, the seconds they took, and each one's latency from
/// submission to completion in the unit `(what, unit)` gives (`what` names the operation in
/// errors).
fn keep_in_flight(
    backend: &mut UringBackend,
    depth: usize,
    duration: Duration,
    (what, unit): (&str, fn(Duration) -> u64),
    mut submit: impl FnMut(&mut UringBackend, usize) -> std::io::Result<()>,
) -> Result<(u64, f64, Histogram<u64>), String> {
    let mut latency = Histogram::<u64>::new(3).map_err(|error| error.to_string())?;
    let mut submitted_at = vec![Instant::now(); depth];
    let started = Instant::now();
    for (buffer, at) in submitted_at.iter_mut().enumerate() {
        *at = Instant::now();
        submit(backend, buffer).map_err(|error| format!("{what}: {error}"))?;
    }
    let mut in_flight = depth;
    let mut done = 0u64;
    let mut completions = Vec::new();
    while in_flight > 0 {
        completions.clear();
        backend
            .wait(1, &mut completions)
            .map_err(|error| format!("{what}: {error}"))?;
        for completion in &completions {
            completion
                .result
                .map_err(|errno| format!("{what}: {}", std::io::Error::from_raw_os_error(errno)))?;
            let buffer = completion.tag as usize;
            latency
                .record(unit(submitted_at[buffer].elapsed()).max(1))
                .ok();
            done += 1;
            in_flight -= 1;
            if started.elapsed() < duration {
                submitted_at[buffer] = Instant::now();
                submit(backend, buffer).map_err(|error| format!("{what}: {error}"))?;
                in_flight += 1;
            }
        }
    }
    Ok((done, started.elapsed().as_secs_f64(), latency))
}

/// Reads `read_bytes` at a time at random places in the ring's data areas (every segment's,
/// its header block excluded: where entries live), `depth` reads in flight, O_DIRECT through
/// the engine's io_uring backend, for `duration`: the ceiling of cold point reads at that depth.
/// Offsets are multiples of `read_bytes` from each data area's start, which is where a ring of
/// records of exactly `read_bytes` keeps them. Latency is each read's, submission to completion.
pub fn builtin_random_read(
    ring: &Path,
    read_bytes: u32,
    depth: usize,
    duration: Duration,
) -> Result<ReadRow, String> {
    let depth = depth.max(1);
    let (mut backend, geometry) =
        ring_backend(ring, Access::ReadOnly, depth, |_| read_bytes as usize)?;
    let slots_per_segment = geometry.segment_data_bytes() / u64::from(read_bytes);
    let data_offset = u64::from(geometry.segment_data_offset());
    // A fixed seed: every run reads the same places, in the same order.
    let mut random = SplitMix64::new(0x5ea1_0c0d ^ depth as u64);
    let mut next_offset = || {
        let segment = random.below(u64::from(geometry.segment_count)) as u32;
        let slot = random.below(slots_per_segment);
        geometry.segment_ring_offset(segment) + data_offset + slot * u64::from(read_bytes)
    };
    let (reads, seconds, latency) = keep_in_flight(
        &mut backend,
        depth,
        duration,
        ("random read", |elapsed| elapsed.as_nanos() as u64),
        |backend, buffer| backend.submit_read(buffer as u64, next_offset(), buffer, read_bytes),
    )?;
    let mut row = ReadRow::measured(
        RANDOM_READ,
        u64::from(read_bytes),
        ReadLoad::single_thread(depth as u64),
        reads,
        seconds,
        &latency,
    );
    row.note = format!(
        "{read_bytes}-byte O_DIRECT reads at random {read_bytes}-byte slots of every segment's \
         data area, io_uring, {depth} in flight"
    );
    Ok(row)
}

/// What fio reads at random: the ring's segment files (fio spreads its reads over them), or a
/// block device's first `bytes`.
#[derive(Clone, Debug)]
pub enum FioReadTarget {
    /// These files, each read whole.
    Files(Vec<std::path::PathBuf>),
    /// This block device, up to this many bytes.
    Device(std::path::PathBuf, u64),
}

impl FioReadTarget {
    /// The segment files of the directory ring at `ring` (`segment-NNNNN`), or the device that
    /// is the ring, up to the ring's size.
    pub fn of_ring(ring: &Path, ring_bytes: u64) -> Result<FioReadTarget, String> {
        if !ring.is_dir() {
            return Ok(FioReadTarget::Device(ring.to_path_buf(), ring_bytes));
        }
        let entries =
            std::fs::read_dir(ring).map_err(|error| format!("{}: {error}", ring.display()))?;
        let mut files: Vec<std::path::PathBuf> = entries
            .filter_map(|entry| entry.ok().map(|entry| entry.path()))
            .filter(|path| {
                path.file_name()
                    .is_some_and(|name| name.to_string_lossy().starts_with("segment-"))
            })
            .collect();
        files.sort();
        Ok(FioReadTarget::Files(files))
    }
}

/// fio's 4 KiB random reads (`randread`, io_uring, O_DIRECT) at `depth` in flight over
/// `target` for `seconds`, beside the built-in ceiling; `None` when fio is not installed.
pub fn fio_random_read(
    target: &FioReadTarget,
    read_bytes: u32,
    depth: usize,
    seconds: u64,
) -> Option<Result<ReadRow, String>> {
    let found = Command::new("fio")
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success());
    if !found {
        return None;
    }
    let mut command = Command::new("fio");
    command
        .args([
            "--name=sealog-randread",
            "--rw=randread",
            "--ioengine=io_uring",
            "--direct=1",
            "--readonly",
            "--norandommap",
            "--randrepeat=0",
            "--time_based",
            "--lat_percentiles=1",
            "--output-format=json",
        ])
        .arg(format!("--bs={read_bytes}"))
        .arg(format!("--iodepth={depth}"))
        .arg(format!("--runtime={}", seconds.max(1)));
    match target {
        FioReadTarget::Files(files) => {
            // fio separates file names with ':' and reads a ':' inside a name escaped.
            let names: Vec<String> = files
                .iter()
                .map(|file| file.display().to_string().replace(':', "\\:"))
                .collect();
            command.arg(format!("--filename={}", names.join(":")));
        }
        FioReadTarget::Device(device, bytes) => {
            command
                .arg(format!("--filename={}", device.display()))
                .arg(format!("--size={bytes}"));
        }
    }
    Some(parse_fio_read(command.output(), read_bytes, depth))
}

fn parse_fio_read(
    output: std::io::Result<std::process::Output>,
    read_bytes: u32,
    depth: usize,
) -> Result<ReadRow, String> {
    let output = output.map_err(|error| format!("fio: {error}"))?;
    if !output.status.success() {
        return Err(format!(
            "fio randread failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    let json: serde_json::Value =
        serde_json::from_slice(&output.stdout).map_err(|error| format!("fio output: {error}"))?;
    let read = &json["jobs"][0]["read"];
    // `lat_ns` is submission to completion, what the built-in ceiling times.
    let percentile = |key: &str| read["lat_ns"]["percentile"][key].as_f64().unwrap_or(0.0) / 1e3;
    let mut row = ReadRow {
        engine: FIO_RANDOM_READ.to_string(),
        entry_bytes: u64::from(read_bytes),
        load: ReadLoad::single_thread(depth as u64),
        ops_per_sec: read["iops"].as_f64().unwrap_or(0.0),
        mb_per_sec: read["bw_bytes"].as_f64().unwrap_or(0.0) / 1e6,
        p50_us: percentile("50.000000"),
        p99_us: percentile("99.000000"),
        ..ReadRow::default()
    };
    row.note = format!("fio randread, io_uring, O_DIRECT, {depth} in flight, same files");
    Ok(row)
}
