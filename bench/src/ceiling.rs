//! The ceilings every sealog cell is compared with, measured in the same run on the same
//! storage: the built-in raw mode (aligned blocks written with the engine's own io_uring
//! backend, a linked datasync after each, queue depth 1; and a sequential O_DIRECT read of the
//! ring), and fio with the same parameters when it is installed.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use sealog::io::{run_sync, FlushOrder, IoBackend, WriteSync};
use sealog::storage::{self, Access};
use sealog::uring::UringBackend;

use crate::report::Cell;

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
    let files = storage::open(ring, Access::ReadWrite).map_err(|error| error.to_string())?;
    let geometry = files.geometry;
    let buffer_bytes = bytes.max(geometry.block_size_bytes as usize);
    let (mut backend, _) =
        UringBackend::new(files, 1, buffer_bytes).map_err(|error| error.to_string())?;
    backend.set_spin_us(spin_us);
    backend.pool().buffer_mut(0).fill(0x5a);
    let segment_data = geometry.segment_data_bytes();
    let mut latency = Histogram::<u64>::new(3).map_err(|error| error.to_string())?;
    let mut offset_in_ring = 0u64;
    let started = Instant::now();
    let mut operations = 0u64;
    while started.elapsed() < duration {
        // Walk the segments' data areas, wrapping: every write lands on written, allocated space.
        if offset_in_ring + bytes as u64 > segment_data * u64::from(geometry.segment_count) {
            offset_in_ring = 0;
        }
        let segment = (offset_in_ring / segment_data) as u32;
        let inside = offset_in_ring % segment_data;
        let inside = if inside + bytes as u64 > segment_data {
            0
        } else {
            inside
        };
        let ring_offset = geometry.segment_ring_offset(segment)
            + u64::from(geometry.segment_data_offset())
            + inside;
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
        offset_in_ring += bytes as u64;
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

/// Reads the whole ring sequentially with O_DIRECT, 1 MiB at a time with `depth` reads in
/// flight: the recovery ceiling, in bytes per second. (Recovery keeps two reads in flight, one
/// of them read-ahead; the run takes the best of depths 1 and 4 as the ceiling.)
pub fn builtin_sequential_read(ring: &Path, depth: usize) -> Result<f64, String> {
    let files = storage::open(ring, Access::ReadWrite).map_err(|error| error.to_string())?;
    let geometry = files.geometry;
    let chunk = 1usize << 20;
    let depth = depth.max(1);
    let (mut backend, _) =
        UringBackend::new(files, depth, chunk).map_err(|error| error.to_string())?;
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
