//! The restart section (issue 11): the wall time of `Drive::open` on formatted rings (fully
//! written by format, so every block read costs real I/O) of several sizes holding the same
//! small live region (one entry, then a thousand 4 KiB records), with the bytes the disk read
//! and the flushes it completed during each open; then the open targets, with the full 1 GiB
//! ring that `cells::recovery_cell` reopens. Open should cost the live data, not the ring.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::time::Instant;

use sealog::{Drive, DriveOptions};
use serde_json::{json, Value};

use crate::cells::{fresh_ring, RingShape};
use crate::machine::{disk_counters, DiskCounters};
use crate::median::median;
use crate::progress::progress;
use crate::read_plan::COLD_PAYLOAD_BYTES;
use crate::target::Target;

/// Ring sizes of the section: the 256 MiB, 1 GiB and 4 GiB.
pub const OPEN_RING_BYTES: [u64; 3] = [256 << 20, 1 << 30, 4 << 30];
/// The live regions each ring is opened with, in entries of one 4 KiB record each: one entry,
/// then a thousand (4 MiB, a few batches).
pub const OPEN_LIVE_ENTRIES: [u64; 2] = [1, 1000];
/// The most an open of a ring holding one entry may take, milliseconds (issue 11).
const OPEN_ONE_ENTRY_MS_GOAL: f64 = 20.0;
/// The most the slowest ring size's open may take over the fastest's at the same live data.
const OPEN_SPREAD_GOAL: f64 = 1.5;

/// The opens of one ring size at one live region.
#[derive(Clone, Debug, Default)]
pub struct OpenTime {
    /// The ring's size (what format made of the size asked for: the control blocks and whole
    /// segments of 64 MiB).
    pub ring_bytes: u64,
    /// Its segments (each a file of a directory ring).
    pub segments: u32,
    /// Live entries (what each open recovered).
    pub live_entries: u64,
    /// Median wall time of `Drive::open`, milliseconds.
    pub open_ms: f64,
    /// Fastest open.
    pub open_ms_min: f64,
    /// Slowest open.
    pub open_ms_max: f64,
    /// Opens measured.
    pub repetitions: usize,
    /// Median bytes the disk read during an open (the whole disk's counter: other processes'
    /// reads count too); `None` where the counters cannot be read.
    pub device_read_bytes: Option<f64>,
    /// Median flushes the disk completed during an open (the same caveat).
    pub device_flushes: Option<f64>,
    /// How long formatting the ring took (every ring of this size shares one format).
    pub format_seconds: f64,
    /// Anything a reader must know about this row.
    pub note: String,
}

impl OpenTime {
    /// The row as a JSON object.
    pub fn to_json(&self) -> Value {
        json!({
            "ring_bytes": self.ring_bytes,
            "segments": self.segments,
            "live_entries": self.live_entries,
            "open_ms": self.open_ms,
            "open_ms_min": self.open_ms_min,
            "open_ms_max": self.open_ms_max,
            "repetitions": self.repetitions,
            "device_read_bytes": self.device_read_bytes,
            "device_flushes": self.device_flushes,
            "format_seconds": self.format_seconds,
            "note": self.note,
        })
    }
}

/// Where the section's rings go and how they are opened.
pub struct OpenPlan<'a> {
    /// A directory for the rings (each made and removed in turn), or the block device that is
    /// every ring (sizes above it are left out).
    pub place: RingPlace<'a>,
    /// The shape of the rings apart from their size (the run's sync method).
    pub shape: RingShape,
    /// Opens measured per ring and live region (the median is reported), unless they reach
    /// `budget` first (at least one is measured).
    pub repetitions: usize,
    /// Wall time of opens after which a row stops repeating: an open that scans the whole
    /// ring takes seconds on a 4 GiB ring, and one such figure already says it; an open that
    /// costs the live data makes every repetition.
    pub budget: std::time::Duration,
    /// The sysfs directory of the disk under the rings, for its counters.
    pub disk: Option<PathBuf>,
}

/// Where the rings of the section live.
#[derive(Clone, Copy, Debug)]
pub enum RingPlace<'a> {
    /// A new directory ring per size inside this directory.
    Directory(&'a Path),
    /// This block device, of this many bytes.
    Device(&'a Path, u64),
}

/// Formats a ring of each size in turn, appends the live regions of [`OPEN_LIVE_ENTRIES`]
/// (one after the other: the second adds to the first), and times opens of each.
pub fn open_times(plan: &OpenPlan<'_>) -> Result<Vec<OpenTime>, String> {
    let mut rows = Vec::new();
    for ring_bytes in OPEN_RING_BYTES {
        let ring = match plan.place {
            RingPlace::Directory(directory) => {
                directory.join(format!("open-{}m", ring_bytes >> 20))
            }
            RingPlace::Device(device, device_bytes) if ring_bytes <= device_bytes => {
                device.to_path_buf()
            }
            RingPlace::Device(..) => continue,
        };
        progress(&format!("open times: formatting {} MiB", ring_bytes >> 20));
        let started = Instant::now();
        let control = fresh_ring(
            &ring,
            RingShape {
                size_bytes: ring_bytes,
                ..plan.shape
            },
        )?;
        let format_seconds = started.elapsed().as_secs_f64();
        let mut appended = 0u64;
        for live_entries in OPEN_LIVE_ENTRIES {
            append_entries(&ring, live_entries - appended)?;
            appended = live_entries;
            progress(&format!(
                "open times: {} MiB ring holding {live_entries} entries",
                ring_bytes >> 20
            ));
            let mut row = measure_opens(&ring, live_entries, plan)?;
            row.ring_bytes = control.geometry.ring_size_bytes().unwrap_or(ring_bytes);
            row.segments = control.geometry.segment_count;
            row.format_seconds = format_seconds;
            rows.push(row);
        }
        if let RingPlace::Directory(_) = plan.place {
            std::fs::remove_dir_all(&ring)
                .map_err(|error| format!("{}: {error}", ring.display()))?;
        }
    }
    Ok(rows)
}

/// Appends `count` 4 KiB records to the ring at `ring` (pipelined), and closes it.
fn append_entries(ring: &Path, count: u64) -> Result<(), String> {
    let drive = Drive::open(ring, DriveOptions::default()).map_err(|error| error.to_string())?;
    let mut pending = VecDeque::new();
    for _ in 0..count {
        pending.push_back(
            drive
                .append(vec![0x4f; COLD_PAYLOAD_BYTES])
                .map_err(|error| error.to_string())?,
        );
    }
    for ticket in pending {
        ticket.wait().map_err(|error| error.to_string())?;
    }
    drive.close();
    Ok(())
}

/// Opens the ring `plan.repetitions` times, each timed from the call to its return (replay,
/// the open's control-block write and flush included); checks each recovered `live_entries`.
fn measure_opens(ring: &Path, live_entries: u64, plan: &OpenPlan<'_>) -> Result<OpenTime, String> {
    let counters = || plan.disk.as_deref().and_then(disk_counters);
    let mut times_ms = Vec::new();
    let mut read_bytes = Vec::new();
    let mut flushes = Vec::new();
    let mut spent = std::time::Duration::ZERO;
    for _ in 0..plan.repetitions.max(1) {
        if spent >= plan.budget {
            break;
        }
        let before = counters();
        let started = Instant::now();
        let drive =
            Drive::open(ring, DriveOptions::default()).map_err(|error| error.to_string())?;
        let elapsed = started.elapsed();
        spent += elapsed;
        times_ms.push(elapsed.as_secs_f64() * 1e3);
        if let Some(during) = before
            .zip(counters())
            .map(|(before, after)| before.until(after))
        {
            let DiskCounters {
                read_bytes: read,
                flushes: flushed,
            } = during;
            read_bytes.push(read as f64);
            flushes.push(flushed as f64);
        }
        let recovered = drive.recovery_report().entries;
        drive.close();
        if recovered != live_entries {
            return Err(format!(
                "{}: the open recovered {recovered} entries, {live_entries} were appended",
                ring.display()
            ));
        }
    }
    let repetitions = times_ms.len();
    let open_ms_min = times_ms.iter().copied().fold(f64::INFINITY, f64::min);
    let open_ms_max = times_ms.iter().copied().fold(0.0, f64::max);
    let measured = |values: &mut Vec<f64>| (!values.is_empty()).then(|| median(values));
    Ok(OpenTime {
        live_entries,
        open_ms: median(&mut times_ms),
        open_ms_min,
        open_ms_max,
        repetitions,
        device_read_bytes: measured(&mut read_bytes),
        device_flushes: measured(&mut flushes),
        ..OpenTime::default()
    })
}

/// The open table's header.
pub fn header() -> String {
    format!(
        "{:<6} {:>9} {:>8} {:>8} {:>9} {:>9} {:>9} {:>6} {:>12} {:>8} {:>9}",
        "open",
        "ring MiB",
        "segments",
        "live",
        "open ms",
        "min ms",
        "max ms",
        "reps",
        "disk MiB rd",
        "flushes",
        "format s"
    )
}

/// One row of the open table.
pub fn row(time: &OpenTime) -> String {
    let optional = |value: Option<f64>, scale: f64| {
        value.map_or_else(|| "-".to_string(), |value| format!("{:.1}", value / scale))
    };
    format!(
        "{:<6} {:>9} {:>8} {:>8} {:>9.1} {:>9.1} {:>9.1} {:>6} {:>12} {:>8} {:>9}",
        "open",
        time.ring_bytes >> 20,
        time.segments,
        time.live_entries,
        time.open_ms,
        time.open_ms_min,
        time.open_ms_max,
        time.repetitions,
        optional(time.device_read_bytes, (1u64 << 20) as f64),
        optional(time.device_flushes, 1.0),
        if time.format_seconds > 0.0 {
            format!("{:.1}", time.format_seconds)
        } else {
            "-".to_string()
        }
    )
}

/// Issue 11's open targets: a ring holding one entry opens within the goal at every size, and
/// at each live region the slowest size's open is within the spread of the fastest's (judged
/// only when at least two sizes were measured). The full ring's target is the recovery one.
pub fn targets(times: &[OpenTime]) -> Vec<Target> {
    let at = |live: u64| -> Vec<&OpenTime> {
        times
            .iter()
            .filter(|time| time.live_entries == live)
            .collect()
    };
    let slowest = |rows: &[&OpenTime]| rows.iter().map(|time| time.open_ms).fold(None, max_of);
    let spread = |rows: Vec<&OpenTime>| {
        let fastest = rows.iter().map(|time| time.open_ms).fold(None, min_of)?;
        (rows.len() >= 2 && fastest > 0.0).then(|| slowest(&rows).unwrap_or(0.0) / fastest)
    };
    vec![
        Target {
            name: "open of a ring holding one entry: the slowest ring size's median, ms",
            value: slowest(&at(1)),
            goal: OPEN_ONE_ENTRY_MS_GOAL,
            higher_is_better: false,
        },
        Target {
            name: "open, one entry: the slowest ring size's median over the fastest's",
            value: spread(at(1)),
            goal: OPEN_SPREAD_GOAL,
            higher_is_better: false,
        },
        Target {
            name: "open, 1000 x 4 KiB entries: the slowest ring size's median over the fastest's",
            value: spread(at(1000)),
            goal: OPEN_SPREAD_GOAL,
            higher_is_better: false,
        },
    ]
}

fn max_of(found: Option<f64>, value: f64) -> Option<f64> {
    Some(found.map_or(value, |found| found.max(value)))
}

fn min_of(found: Option<f64>, value: f64) -> Option<f64> {
    Some(found.map_or(value, |found| found.min(value)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn time(ring_bytes: u64, live_entries: u64, open_ms: f64) -> OpenTime {
        OpenTime {
            ring_bytes,
            live_entries,
            open_ms,
            ..OpenTime::default()
        }
    }

    /// The one-entry goal takes the slowest size; the spread is slowest over fastest at the
    /// same live data, and is not judged from one size alone.
    #[test]
    fn open_targets_take_the_slowest_size_and_the_spread() {
        let times = [
            time(256 << 20, 1, 8.0),
            time(1 << 30, 1, 10.0),
            time(4 << 30, 1, 16.0),
            time(256 << 20, 1000, 30.0),
        ];
        let targets = targets(&times);
        assert_eq!(targets[0].value, Some(16.0));
        assert_eq!(targets[0].held(), Some(true));
        assert_eq!(targets[1].value, Some(2.0));
        assert_eq!(targets[1].held(), Some(false));
        assert_eq!(targets[2].value, None, "one size alone has no spread");
    }
}
