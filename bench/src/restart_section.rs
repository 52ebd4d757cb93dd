//! The read and open sections, which share one full 1 GiB ring of 4 KiB records: the open
//! section times its recovery against the sequential read ceiling (`cells::recovery_cell`) and
//! the open of rings of three sizes (`opens.rs`); the read section reads the full ring cold and
//! iterates over it (`reads.rs`, with fio's random reads beside) and reads the newest entries
//! beside a writer (`tail_reads.rs`). Then the sections' tables and lines on the terminal and
//! their fields of the JSON document.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;

use crate::ceiling;
use crate::cells::{self, recovery_cell, RingShape};
use crate::machine;
use crate::opens;
use crate::progress::progress;
use crate::read_plan::{
    COLD_DEPTH, COLD_PAYLOAD_BYTES, COLD_READ_BYTES, TAIL_PAYLOAD_BYTES, TAIL_READ_CACHE_BYTES,
    TAIL_WRITER_IN_FLIGHT,
};
use crate::read_report;
use crate::read_row::{ReadRow, SECTION_COLD};
use crate::reads::{self, ReadTimes};
use crate::run_context::{RunContext, Sections};
use crate::tail_reads;

/// What the read and open sections measured.
pub struct RestartFigures {
    /// The full ring's recovery rounds (the open section).
    pub recovery: Option<cells::Recovery>,
    /// The read section's rows (tail, cold, catch-up).
    pub read_rows: Vec<ReadRow>,
    /// Peak resident memory of the process during the tail section, bytes (0: not measured).
    pub tail_peak_rss_bytes: u64,
    /// The read statistics of the drive on the full ring (its read index) and of the tail
    /// section's drive (its cache), when the read section ran.
    pub full_ring_read_stats: Option<sealog::ReadStats>,
    pub tail_read_stats: Option<sealog::ReadStats>,
    /// fio's random reads at 1 and 16 in flight, when fio is installed.
    pub fio_rows: Vec<ReadRow>,
    /// The open section's rows (the three ring sizes).
    pub open_times: Vec<opens::OpenTime>,
    /// The sync method the read and open rings recorded.
    pub sync_method: sealog::SyncMethod,
}

/// The read and open sections. They share one full 1 GiB ring of 4 KiB records: the open
/// section times its recovery against the sequential read ceiling, the read section reads it
/// cold and iterates over it; then the read section's tail reads (on a ring of the cells'
/// size) and the open section's rings of three sizes. Their rings record `sync_method` (the
/// write section's choice), or, run alone, what the full ring's format chose.
pub fn read_and_open_sections(
    context: &RunContext<'_>,
    sections: Sections,
    sync_method: Option<sealog::SyncMethod>,
) -> Result<RestartFigures, String> {
    let disk = machine::disk_of(context.device.unwrap_or(context.scratch));
    let full_ring = context.ring_path("full");
    progress("full ring: format and fill with 4 KiB records");
    let (control, appended) = cells::fill_ring(
        &full_ring,
        RingShape {
            size_bytes: context.full_ring_bytes,
            sync_method,
            ..context.shape
        },
    )?;
    let ring_sync_method = sync_method.unwrap_or_else(|| control.sync.method());
    let shape = RingShape {
        sync_method: Some(ring_sync_method),
        ..context.shape
    };
    let recovery = if sections.open {
        progress("recovery: reopening the full ring, in rounds with the read ceiling");
        Some(recovery_cell(&full_ring, appended, disk.as_deref())?)
    } else {
        None
    };
    let times = ReadTimes {
        window: context.duration / 2,
        warmup: context.warmup / 2,
    };
    let mut figures = RestartFigures {
        recovery,
        read_rows: Vec::new(),
        tail_peak_rss_bytes: 0,
        full_ring_read_stats: None,
        tail_read_stats: None,
        fio_rows: Vec::new(),
        open_times: Vec::new(),
        sync_method: ring_sync_method,
    };
    if sections.read {
        full_ring_reads(context, &full_ring, times, &mut figures)?;
    }
    context.remove_ring(&full_ring);
    if sections.read {
        tail_section(context, shape, times, &mut figures)?;
    }
    if sections.open {
        figures.open_times = open_section(context, shape, disk)?;
    }
    Ok(figures)
}

/// The read section's reads of the full ring at `full_ring`: sealog's cold reads and catch-up
/// iterator with their built-in ceilings, then fio's random reads at 1 and [`COLD_DEPTH`] in
/// flight (when fio is installed), into `figures`.
fn full_ring_reads(
    context: &RunContext<'_>,
    full_ring: &Path,
    times: ReadTimes,
    figures: &mut RestartFigures,
) -> Result<(), String> {
    let (rows, stats) = reads::cold_and_catch_up(full_ring, context.drive_options.clone(), times)?;
    figures.read_rows.extend(rows);
    figures.full_ring_read_stats = Some(stats);
    let fio_target = ceiling::FioReadTarget::of_ring(full_ring, context.full_ring_bytes)?;
    for depth in [1, COLD_DEPTH] {
        progress(&format!("cold reads: fio randread, {depth} in flight"));
        let fio_seconds = times.window.as_secs_f64().ceil() as u64;
        match ceiling::fio_random_read(&fio_target, COLD_READ_BYTES, depth, fio_seconds) {
            Some(Ok(mut row)) => {
                row.section = SECTION_COLD;
                figures.fio_rows.push(row);
            }
            Some(Err(error)) => eprintln!("\nfio: {error}"),
            None => {}
        }
    }
    Ok(())
}

/// The read section's tail reads, on a fresh ring of `shape` (removed afterwards), with the
/// process's peak memory during them, into `figures`.
fn tail_section(
    context: &RunContext<'_>,
    shape: RingShape,
    times: ReadTimes,
    figures: &mut RestartFigures,
) -> Result<(), String> {
    let ring = context.ring_path("tail");
    let rss_reset = cells::reset_peak_rss();
    let (rows, stats) = tail_reads::tail_reads(&ring, shape, context.drive_options.clone(), times)?;
    figures.read_rows.extend(rows);
    figures.tail_read_stats = Some(stats);
    if rss_reset {
        figures.tail_peak_rss_bytes = cells::peak_rss_since_reset_bytes().unwrap_or(0);
    }
    context.remove_ring(&ring);
    Ok(())
}

/// The open section's open times of rings of `shape` in three sizes, on the device or in the
/// scratch directory; `disk` is the sysfs directory of the disk under them, for its counters.
fn open_section(
    context: &RunContext<'_>,
    shape: RingShape,
    disk: Option<PathBuf>,
) -> Result<Vec<opens::OpenTime>, String> {
    let place = match (context.device, context.device_bytes) {
        (Some(device), Some(bytes)) => opens::RingPlace::Device(device, bytes),
        _ => opens::RingPlace::Directory(context.scratch),
    };
    opens::open_times(&opens::OpenPlan {
        place,
        shape,
        repetitions: if context.quick { 3 } else { 5 },
        budget: Duration::from_secs(if context.quick { 1 } else { 10 }),
        disk,
    })
}

/// The read and open sections' tables and lines.
pub fn print_read_and_open_sections(context: &RunContext<'_>, restart: &RestartFigures) {
    println!();
    println!(
        "read and open rings' sync method: {}",
        restart.sync_method.name()
    );
    if !restart.read_rows.is_empty() {
        println!("{}", read_report::header());
        for row in restart.read_rows.iter().chain(&restart.fio_rows) {
            println!("{}", read_report::row(row));
        }
        println!(
            "xceil: ops/s over the row named in 'against' (the catch-up iterator: MB/s); xp50: \
             p50 over its p50. Cold reads: random live LSNs of a full {} MiB ring of 4 KiB \
             records ({}-byte payloads), so a record-grained read is one 4 KiB read, the \
             ceiling's; fio beside, not judged",
            context.full_ring_bytes >> 20,
            COLD_PAYLOAD_BYTES
        );
        for line in memory_lines(restart) {
            println!("{line}");
        }
    }
    if let Some(recovery) = &restart.recovery {
        let read_ceiling = recovery.read_ceiling_bytes_per_sec();
        println!(
            "recovery of a full {} MiB ring ({} entries): {:.0} MB/s, {:.2}x the sequential \
             O_DIRECT read ceiling (the same ring read {} KiB at a time, the better of 1 and 4 \
             reads in flight: {:.0} MB/s; medians of {} rounds)",
            recovery.ring_bytes >> 20,
            recovery.entries,
            recovery.bytes_per_sec / 1e6,
            recovery.bytes_per_sec / read_ceiling,
            ceiling::RECOVERY_READ_BYTES >> 10,
            read_ceiling / 1e6,
            cells::RECOVERY_ROUNDS
        );
    }
    if !restart.open_times.is_empty() || restart.recovery.is_some() {
        println!("{}", opens::header());
        for time in restart
            .open_times
            .iter()
            .chain(full_ring_open(restart).as_ref())
        {
            println!("{}", opens::row(time));
        }
        println!(
            "open: wall time of Drive::open (median of reps); disk MiB rd and flushes: the \
             disk's counters during an open (the whole disk: other processes' I/O counts too); \
             the last row is the full ring of the recovery line"
        );
    }
}

/// What the read structures hold, from the drives' read statistics: the tail drive's cache
/// bound and read buffers against its configuration, and the full ring's read index per entry.
fn memory_lines(restart: &RestartFigures) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(tail) = &restart.tail_read_stats {
        lines.push(format!(
            "memory: the tail drive's read cache bounded at {} MiB (configured {} MiB), {} read \
             buffers of {} KiB ({} MiB); peak RSS of the tail section {} MiB",
            tail.cache_capacity_bytes >> 20,
            TAIL_READ_CACHE_BYTES >> 20,
            tail.read_buffers,
            tail.read_buffer_bytes >> 10,
            (tail.read_buffers * tail.read_buffer_bytes) >> 20,
            restart.tail_peak_rss_bytes >> 20
        ));
    }
    if let Some(full) = &restart.full_ring_read_stats {
        lines.push(format!(
            "memory: the full ring's read index: {} live entries in {:.1} MiB, {:.1} bytes per \
             live entry",
            full.index_entries,
            full.index_memory_bytes as f64 / (1u64 << 20) as f64,
            full.index_bytes_per_entry
        ));
    }
    lines
}

/// The read statistics' memory figures for the JSON.
fn read_memory_json(stats: Option<&sealog::ReadStats>) -> serde_json::Value {
    stats.map_or(serde_json::Value::Null, |stats| {
        json!({
            "cache_capacity_bytes": stats.cache_capacity_bytes,
            "read_buffers": stats.read_buffers,
            "read_buffer_bytes": stats.read_buffer_bytes,
            "index_entries": stats.index_entries,
            "index_memory_bytes": stats.index_memory_bytes,
            "index_bytes_per_entry": stats.index_bytes_per_entry,
            "cache_hits": stats.cache_hits,
            "device_reads": stats.device_reads,
            "device_read_bytes": stats.device_read_bytes,
            "damaged": stats.damaged,
        })
    })
}

/// The full ring's recovery as a row of the open table (no format time: it was filled, not
/// only formatted).
fn full_ring_open(restart: &RestartFigures) -> Option<opens::OpenTime> {
    let recovery = restart.recovery.as_ref()?;
    Some(opens::OpenTime {
        ring_bytes: recovery.ring_bytes,
        segments: recovery.segments,
        live_entries: recovery.entries,
        open_ms: recovery.open_ms,
        open_ms_min: recovery.open_ms,
        open_ms_max: recovery.open_ms,
        repetitions: cells::RECOVERY_ROUNDS,
        device_read_bytes: recovery.device_read_bytes,
        device_flushes: recovery.device_flushes,
        format_seconds: 0.0,
        note: "the full ring of the recovery rounds".to_string(),
    })
}

/// The read and open sections' fields of the JSON document.
pub fn read_and_open_json(document: &mut serde_json::Value, restart: &RestartFigures) {
    if let Some(recovery) = &restart.recovery {
        let read_ceiling = recovery.read_ceiling_bytes_per_sec();
        document["recovery"] = json!({
            "ring_bytes": recovery.ring_bytes,
            "bytes_per_sec": recovery.bytes_per_sec,
            "read_ceiling_bytes_per_sec": read_ceiling,
            "read_depth_1_bytes_per_sec": recovery.read_depth_1_bytes_per_sec,
            "read_depth_4_bytes_per_sec": recovery.read_depth_4_bytes_per_sec,
            "entries": recovery.entries,
            "rounds": cells::RECOVERY_ROUNDS,
            "ratio_to_ceiling": recovery.bytes_per_sec / read_ceiling,
            "open_ms": recovery.open_ms,
            "device_read_bytes": recovery.device_read_bytes,
            "device_flushes": recovery.device_flushes,
        });
    }
    document["reads"] = json!({
        "rows": restart
            .read_rows
            .iter()
            .chain(&restart.fio_rows)
            .map(ReadRow::to_json)
            .collect::<Vec<_>>(),
        "cold_payload_bytes": COLD_PAYLOAD_BYTES,
        "cold_read_bytes": COLD_READ_BYTES,
        "tail_payload_bytes": TAIL_PAYLOAD_BYTES,
        "tail_writer_in_flight": TAIL_WRITER_IN_FLIGHT,
        "tail_read_cache_bytes": TAIL_READ_CACHE_BYTES,
        "tail_peak_rss_bytes": restart.tail_peak_rss_bytes,
        "read_index_bytes_per_entry": restart
            .full_ring_read_stats
            .as_ref()
            .map(|stats| stats.index_bytes_per_entry),
        "full_ring_read_stats": read_memory_json(restart.full_ring_read_stats.as_ref()),
        "tail_read_stats": read_memory_json(restart.tail_read_stats.as_ref()),
    });
    document["open_times"] = json!(restart
        .open_times
        .iter()
        .map(opens::OpenTime::to_json)
        .collect::<Vec<_>>());
}
