//! `sealog inspect`: a ring's geometry, control blocks, sync method, purpose and segments, as
//! text or one JSON object, with a warning for paths open to others than their owner.

use std::path::{Path, PathBuf};

use sealog::reader::RingReader;
use sealog::SyncChoice;
use sealog_wal::format::SegmentDefect;
use sealog_wal::{RecoveryReport, ReplayError, ReplayOptions};

use crate::describe::{kind_json, logdrive_count, purpose_sentence};
use crate::failure::{fail, open_failure, replay_failure, Failure, EXIT_UNUSABLE};

pub(crate) fn inspect(path: &Path, json: bool) -> Result<(), Failure> {
    let mut reader = RingReader::open(path).map_err(open_failure)?;
    let control =
        sealog_wal::read_control(&mut reader).map_err(|error| replay_failure(path, error))?;
    let headers = reader.segment_headers().map_err(|error| {
        fail(
            EXIT_UNUSABLE,
            format!("{}: cannot read segment headers: {error}", path.display()),
        )
    })?;
    let kind = reader.files().kind;
    let cache = reader.files().cache.clone();
    let mut source = reader;
    let next = sealog_wal::scan(&mut source, &ReplayOptions::default());
    let logdrives = logdrive_count(path, control.purpose, source);
    let open_to_others = open_to_others(path, kind);
    for (path, mode) in &open_to_others {
        eprintln!(
            "sealog: warning: {} is open to others than its owner (mode {mode:04o}); a ring \
             holds whatever its log servers were handed: chmod {:04o} it",
            path.display(),
            if path.is_dir() {
                sealog::storage::RING_DIRECTORY_MODE
            } else {
                sealog::storage::RING_FILE_MODE
            }
        );
    }
    let inspected = Inspected {
        path,
        kind,
        control,
        cache,
        headers,
        next,
        open_to_others,
        logdrives,
    };
    if json {
        println!("{}", inspected.to_json());
    } else {
        inspected.print();
    }
    Ok(())
}

/// What `inspect` found, printed as lines or as one JSON object.
struct Inspected<'a> {
    path: &'a Path,
    kind: sealog::storage::RingKind,
    control: sealog_wal::ControlBlock,
    cache: Option<sealog::io::CacheInfo>,
    headers: Vec<Result<sealog_wal::SegmentHeader, SegmentDefect>>,
    next: Result<RecoveryReport, ReplayError>,
    /// The ring's paths that group or other may read or write, with their modes.
    open_to_others: Vec<(PathBuf, u32)>,
    /// The live LogDrives of a ring that holds a store.
    logdrives: Option<usize>,
}

/// The ring's paths (the device; or the directory and every file in it) whose permission bits
/// let group or other in, with their modes.
fn open_to_others(path: &Path, kind: sealog::storage::RingKind) -> Vec<(PathBuf, u32)> {
    use std::os::unix::fs::PermissionsExt;
    let mut paths = vec![path.to_path_buf()];
    if kind == sealog::storage::RingKind::Directory {
        if let Ok(entries) = std::fs::read_dir(path) {
            let mut files: Vec<PathBuf> = entries.flatten().map(|entry| entry.path()).collect();
            files.sort();
            paths.extend(files);
        }
    }
    paths
        .into_iter()
        .filter_map(|path| {
            let mode = std::fs::metadata(&path).ok()?.permissions().mode() & 0o7777;
            sealog::storage::open_to_others(mode).then_some((path, mode))
        })
        .collect()
}

impl Inspected<'_> {
    fn kind_name(&self) -> &'static str {
        match self.kind {
            sealog::storage::RingKind::BlockDevice => "block device",
            sealog::storage::RingKind::Directory => "directory of segment files",
        }
    }

    fn print(&self) {
        let control = &self.control;
        let geometry = control.geometry;
        println!("path: {} ({})", self.path.display(), self.kind_name());
        println!("ring id: {}", control.ring_id);
        println!("format version: {}", sealog_wal::format::FORMAT_VERSION);
        println!("holds: {}", purpose_sentence(control.purpose));
        if let Some(logdrives) = self.logdrives {
            println!("logdrives: {logdrives} live");
        }
        println!(
            "geometry: {} segments of {} bytes, {}-byte blocks, {} bytes in all",
            geometry.segment_count,
            geometry.segment_size_bytes,
            geometry.block_size_bytes,
            geometry.ring_size_bytes().unwrap_or(0)
        );
        println!(
            "batches: up to {} bytes; payloads up to {} bytes; in flight: {} batches / {} bytes",
            geometry.batch_size_max_bytes,
            geometry.payload_size_max_bytes(),
            geometry.window_batches_max,
            geometry.window_bytes_max
        );
        println!(
            "incarnation: {} (control sequence {})",
            control.incarnation, control.sequence
        );
        println!(
            "trim: LSN {} (head at {}, LSN {})",
            control.trim_lsn, control.head, control.head_lsn
        );
        println!(
            "sync method: {}",
            sealog::sync_probe::explain(&control.sync)
        );
        println!(
            "tail hint: no batch of incarnation {} ends past {}",
            control.tail_hint.incarnation, control.tail_hint.limit
        );
        match &self.cache {
            Some(cache) => println!(
                "device write cache: {}; FUA: {}",
                cache.write_cache, cache.fua
            ),
            None => println!("device write cache: unknown"),
        }
        for (segment, header) in self.headers.iter().enumerate() {
            match header {
                Ok(header) => println!(
                    "segment {segment}: lap {}, first LSN {}, incarnation {}",
                    header.lap, header.first_lsn, header.incarnation
                ),
                Err(defect) => println!("segment {segment}: {}", segment_defect(*defect)),
            }
        }
        match &self.next {
            Ok(report) => println!(
                "next batch: {} (LSN {}); {}",
                report.next_position, report.next_lsn, report.scan
            ),
            Err(error) => println!("next batch: unknown ({error})"),
        }
    }

    fn to_json(&self) -> serde_json::Value {
        let control = &self.control;
        let geometry = control.geometry;
        serde_json::json!({
            "path": self.path.display().to_string(),
            "kind": kind_json(self.kind),
            "ring_id": control.ring_id.to_string(),
            "format_version": sealog_wal::format::FORMAT_VERSION,
            "purpose": control.purpose.name(),
            "logdrives": self.logdrives,
            "geometry": {
                "block_size_bytes": geometry.block_size_bytes,
                "segment_size_bytes": geometry.segment_size_bytes,
                "segment_count": geometry.segment_count,
                "ring_size_bytes": geometry.ring_size_bytes(),
                "batch_size_max_bytes": geometry.batch_size_max_bytes,
                "payload_size_max_bytes": geometry.payload_size_max_bytes(),
                "window_batches_max": geometry.window_batches_max,
                "window_bytes_max": geometry.window_bytes_max,
            },
            "incarnation": control.incarnation,
            "control_sequence": control.sequence,
            "trim_lsn": control.trim_lsn,
            "head": position_json(control.head),
            "head_lsn": control.head_lsn,
            "sync": sync_json(&control.sync),
            "open_to_others": self
                .open_to_others
                .iter()
                .map(|(path, mode)| serde_json::json!({
                    "path": path.display().to_string(),
                    "mode": format!("{mode:04o}"),
                }))
                .collect::<Vec<_>>(),
            "tail_hint": {
                "limit": position_json(control.tail_hint.limit),
                "incarnation": control.tail_hint.incarnation,
            },
            "device": self.cache.as_ref().map(|cache| serde_json::json!({
                "write_cache": cache.write_cache,
                "fua": cache.fua,
            })),
            "segments": self.segments_json(),
            "next": match &self.next {
                Ok(report) => serde_json::json!({
                    "position": position_json(report.next_position),
                    "lsn": report.next_lsn,
                    "scan": report.scan.name(),
                    "scan_bytes_read": report.bytes_read,
                }),
                Err(error) => serde_json::json!({ "error": error.to_string() }),
            },
        })
    }
    /// Each segment's header for `inspect --json`: started (lap, first LSN, incarnation), not
    /// started, or damaged with the defect named.
    fn segments_json(&self) -> Vec<serde_json::Value> {
        self.headers
            .iter()
            .enumerate()
            .map(|(segment, header)| match header {
                Ok(header) => serde_json::json!({
                    "segment": segment,
                    "state": "started",
                    "lap": header.lap,
                    "first_lsn": header.first_lsn,
                    "incarnation": header.incarnation,
                }),
                Err(SegmentDefect::Zeroed) => serde_json::json!({
                    "segment": segment,
                    "state": "not_started",
                }),
                Err(defect) => serde_json::json!({
                    "segment": segment,
                    "state": "damaged",
                    "defect": segment_defect(*defect),
                }),
            })
            .collect()
    }
}

/// A ring position for `inspect --json`.
fn position_json(position: sealog_wal::Position) -> serde_json::Value {
    serde_json::json!({
        "lap": position.lap,
        "segment": position.segment,
        "offset": position.offset,
    })
}

/// The ring's sync choice for `inspect --json`: the method, how it was chosen, the sentence
/// the plain report prints, and the figures it was chosen on (null unless measured).
fn sync_json(sync: &SyncChoice) -> serde_json::Value {
    let source = match sync {
        SyncChoice::NotRecorded => "not_recorded",
        SyncChoice::Named(_) => "named",
        SyncChoice::Measured { .. } => "measured",
    };
    let measurement = sync.measurement().map(|m| {
        let gain = sealog::sync_probe::dsync_gain_percent;
        let mut object: serde_json::Map<String, serde_json::Value> =
            sealog::sync_probe::figures(&m)
                .into_iter()
                .map(|(name, value)| (name.to_string(), value.into()))
                .collect();
        object.insert("fua".into(), m.fua.into());
        let p50 = gain(m.dsync_p50_us, m.fdatasync_p50_us);
        let p99 = gain(m.dsync_p99_us, m.fdatasync_p99_us);
        object.insert("dsync_faster_p50_percent".into(), p50.into());
        object.insert("dsync_faster_p99_percent".into(), p99.into());
        object
    });
    serde_json::json!({
        "method": sync.method().name(),
        "source": source,
        "why": sealog::sync_probe::explain(sync),
        "measurement": measurement,
    })
}

/// What `inspect` says of a segment header that does not decode: only an all-zero header is a
/// segment never started; the others are damage.
fn segment_defect(defect: SegmentDefect) -> String {
    match defect {
        SegmentDefect::Zeroed => "not started".to_string(),
        SegmentDefect::Crc => {
            "header damaged (CRC mismatch: torn, overwritten, or another ring's)".to_string()
        }
        SegmentDefect::Version => format!(
            "header of another format version (this sealog reads version {})",
            sealog_wal::format::FORMAT_VERSION
        ),
        SegmentDefect::Magic => "no segment header (not zeros, and no segment magic)".to_string(),
    }
}
