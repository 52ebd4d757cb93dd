//! Peer engines measured under sealog's workload (built only with `--features peers`): TiKV's
//! raft-engine (a Multi-Raft log store) and okaywal (a write-ahead log with group commit). This
//! module owns opening a fresh store of each in a temporary directory, the writer threads that
//! append to it durably, and turning what they timed into a `Cell`. Both APIs block until the
//! append is durable, so each writer has exactly one append in flight.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use okaywal::{LogManager, WriteAheadLog};
use raft_engine::{Config, Engine, LogBatch, MessageExt, ReadableSize};
use raft_proto::eraftpb::Entry;

use crate::cell::Cell;
use crate::cells::{cpu_seconds, Workload};

/// An engine sealog is compared with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Peer {
    /// TiKV's raft-engine: one raft group per writer, one entry per `write(sync = true)`.
    RaftEngine,
    /// okaywal: one entry of one chunk per `commit`.
    Okaywal,
}

impl Peer {
    /// Every peer, in the order the table shows them.
    pub const ALL: [Peer; 2] = [Peer::RaftEngine, Peer::Okaywal];

    /// The name in the table's and the JSON's `engine` column.
    pub fn name(self) -> &'static str {
        match self {
            Peer::RaftEngine => "raft-engine",
            Peer::Okaywal => "okaywal",
        }
    }
}

/// raft-engine keeps every entry until it is compacted: each time a writer has appended this
/// many payload bytes since, it compacts its group to the last that many (as a raft leader
/// would once followers have applied them), so the purge thread can delete the files behind
/// it. Counted in bytes, not entries, so that 1 MiB payloads are bounded as 4 KiB ones are.
const RAFT_KEEP_BYTES: u64 = 16 << 20;
/// How often the purge thread asks raft-engine to drop files that hold only compacted entries
/// (TiKV does this from a background worker too, not on the write path).
const RAFT_PURGE_INTERVAL: Duration = Duration::from_millis(250);

/// raft-engine's entries are raft's protobuf `Entry`s; this tells it where their index is.
#[derive(Clone)]
struct EntryExt;

impl MessageExt for EntryExt {
    type Entry = Entry;

    fn index(entry: &Entry) -> u64 {
        entry.index
    }
}

/// okaywal asks its manager to replay entries on open and to checkpoint them before it reuses
/// a segment. The bench reads nothing back and opens an empty directory, so both do nothing
/// (checkpointing is then free, which favours okaywal, if anything).
#[derive(Debug)]
struct NoCheckpoint;

impl LogManager for NoCheckpoint {
    fn recover(&mut self, _entry: &mut okaywal::Entry<'_>) -> std::io::Result<()> {
        Ok(())
    }

    fn checkpoint_to(
        &mut self,
        _last_checkpointed_id: okaywal::EntryId,
        _checkpointed_entries: &mut okaywal::SegmentReader,
        _wal: &WriteAheadLog,
    ) -> std::io::Result<()> {
        Ok(())
    }
}

/// An open peer store, shared by the writer threads.
enum Store {
    /// Boxed: the engine is some 300 bytes, the log one pointer.
    Raft(Box<Engine>),
    Wal(WriteAheadLog),
}

impl Store {
    fn open(peer: Peer, path: &Path) -> Result<Store, String> {
        match peer {
            Peer::RaftEngine => {
                let dir = path
                    .to_str()
                    .ok_or_else(|| format!("raft-engine: {} is not UTF-8", path.display()))?;
                let config = Config {
                    dir: dir.to_string(),
                    // Its default compresses batches of 8 KiB and more with LZ4; the bench's
                    // payloads are one repeated byte, which would then measure LZ4, not I/O.
                    batch_compression_threshold: ReadableSize(0),
                    // Its default (10 GB) lets the log grow that far before purging; 1 GiB
                    // bounds the bench's disk use (measured: about 1.6 GiB at most, 1 MiB x 2
                    // writers) and still spans eight of its 128 MiB files.
                    purge_threshold: ReadableSize::gb(1),
                    ..Config::default()
                };
                Engine::open(config)
                    .map(|engine| Store::Raft(Box::new(engine)))
                    .map_err(|error| format!("raft-engine: open {}: {error}", path.display()))
            }
            Peer::Okaywal => WriteAheadLog::recover(path, NoCheckpoint)
                .map(Store::Wal)
                .map_err(|error| format!("okaywal: open {}: {error}", path.display())),
        }
    }

    /// What writer `writer` (0-based) appends with: its own raft group, or the shared log.
    fn appender(&self, writer: usize, payload_bytes: usize) -> Appender<'_> {
        let payload = vec![0x5a; payload_bytes];
        match self {
            Store::Raft(engine) => {
                let mut entry = Entry::new();
                // `Bytes`: the batch encodes the entry, so every append shares this buffer.
                entry.set_data(payload.into());
                Appender::Raft {
                    engine,
                    // Group 0 is as good as any, but 1-based ids read better in its logs.
                    region: writer as u64 + 1,
                    entry,
                    batch: LogBatch::with_capacity(1),
                    keep_entries: (RAFT_KEEP_BYTES / payload_bytes.max(1) as u64).max(1),
                }
            }
            Store::Wal(wal) => Appender::Wal { wal, payload },
        }
    }

    /// Flushes and stops the store's own threads (raft-engine does so on drop).
    fn close(self) -> Result<(), String> {
        match self {
            Store::Raft(engine) => {
                drop(engine);
                Ok(())
            }
            Store::Wal(wal) => wal
                .shutdown()
                .map_err(|error| format!("okaywal: shutdown: {error}")),
        }
    }
}

/// One writer's handle on the store and the state its appends carry.
enum Appender<'a> {
    Raft {
        engine: &'a Engine,
        region: u64,
        entry: Entry,
        batch: LogBatch,
        /// Entries in `RAFT_KEEP_BYTES`.
        keep_entries: u64,
    },
    Wal {
        wal: &'a WriteAheadLog,
        payload: Vec<u8>,
    },
}

impl Appender<'_> {
    /// One durable append; returns once the store says it is on disk.
    fn append(&mut self) -> Result<(), String> {
        match self {
            Appender::Raft {
                engine,
                region,
                entry,
                batch,
                ..
            } => {
                entry.index += 1;
                batch
                    .add_entries::<EntryExt>(*region, std::slice::from_ref(entry))
                    .map_err(|error| {
                        format!("raft-engine: add entry to group {region}: {error}")
                    })?;
                engine
                    .write(batch, true)
                    .map(|_| ())
                    .map_err(|error| format!("raft-engine: write to group {region}: {error}"))
            }
            Appender::Wal { wal, payload } => {
                let mut entry = wal
                    .begin_entry()
                    .map_err(|error| format!("okaywal: begin entry: {error}"))?;
                entry
                    .write_chunk(payload)
                    .map_err(|error| format!("okaywal: write chunk: {error}"))?;
                // `commit` returns once the entry is synced (fdatasync, grouped across
                // writers that commit meanwhile).
                entry
                    .commit()
                    .map(|_| ())
                    .map_err(|error| format!("okaywal: commit: {error}"))
            }
        }
    }

    /// Housekeeping after an append, outside the timed part (like sealog's trim).
    fn after_append(&mut self) {
        if let Appender::Raft {
            engine,
            region,
            entry,
            keep_entries,
            ..
        } = self
        {
            if entry.index % *keep_entries == 0 && entry.index > *keep_entries {
                engine.compact_to(*region, entry.index - *keep_entries);
            }
        }
    }
}

/// Runs `workload` on a fresh store of `peer` in a new directory under `dir` (removed
/// afterwards), every append durable before it counts.
pub fn peer_cell(peer: Peer, dir: &Path, workload: Workload) -> Result<Cell, String> {
    let name = peer.name();
    check_workload(name, workload)?;
    let scratch = tempfile::Builder::new()
        .prefix(&format!("{name}-"))
        .tempdir_in(dir)
        .map_err(|error| format!("{name}: temporary directory in {}: {error}", dir.display()))?;
    let rss_reset = crate::cells::reset_peak_rss();
    let store = Arc::new(Store::open(peer, scratch.path())?);
    let run = measure_window(name, &store, workload)?;
    Arc::try_unwrap(store)
        .map_err(|_| format!("{name}: store still shared after its threads ended"))?
        .close()?;
    scratch
        .close()
        .map_err(|error| format!("{name}: removing its temporary directory: {error}"))?;
    let mut cell = Cell::measured(
        name,
        workload.payload_bytes as u64,
        workload.writers as u64,
        1,
        run.operations,
        run.seconds,
        &run.latency,
    );
    if rss_reset {
        cell.peak_rss_bytes = crate::cells::peak_rss_since_reset_bytes().unwrap_or(0);
    }
    let gigabytes = run.operations as f64 * workload.payload_bytes as f64 / 1e9;
    cell.cpu_seconds_per_gb = if gigabytes > 0.0 {
        run.cpu_seconds / gigabytes
    } else {
        0.0
    };
    cell.set_cpu_us_per_append(run.cpu_seconds, run.operations);
    cell.note = match peer {
        Peer::RaftEngine => "write(sync) per entry, group per writer, LZ4 off".to_string(),
        Peer::Okaywal => "commit per entry, group commit across writers".to_string(),
    };
    Ok(cell)
}

/// Refuses a workload a peer cannot run: more than one append in flight per writer (its
/// append blocks until durable), or no writer at all.
fn check_workload(name: &str, workload: Workload) -> Result<(), String> {
    if workload.in_flight != 1 {
        return Err(format!(
            "{name}: {} appends in flight per writer asked, but its append blocks until \
             durable, so only 1 can be measured",
            workload.in_flight
        ));
    }
    if workload.writers == 0 {
        return Err(format!("{name}: a cell needs at least one writer"));
    }
    Ok(())
}

/// What a peer's writer threads measured over the cell's window.
struct PeerRun {
    /// Appends acknowledged in the window.
    operations: u64,
    /// Their latencies, microseconds.
    latency: Histogram<u64>,
    /// The window's length.
    seconds: f64,
    /// The process's CPU time (user + system) over the window.
    cpu_seconds: f64,
}

/// Runs `workload`'s writer threads (and raft-engine's purge thread) on `store`, measures
/// them after the warm-up, and stops and joins them.
fn measure_window(name: &str, store: &Arc<Store>, workload: Workload) -> Result<PeerRun, String> {
    let measuring = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let handles: Vec<_> = (0..workload.writers)
        .map(|index| {
            let store = Arc::clone(store);
            let measuring = Arc::clone(&measuring);
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || writer(&store, index, workload, &measuring, &stop))
        })
        .collect();
    let purger = matches!(**store, Store::Raft(_)).then(|| {
        let store = Arc::clone(store);
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || purge(&store, &stop))
    });
    std::thread::sleep(workload.warmup);
    let cpu_before = cpu_seconds();
    measuring.store(true, Ordering::SeqCst);
    let started = Instant::now();
    std::thread::sleep(workload.duration);
    measuring.store(false, Ordering::SeqCst);
    let seconds = started.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu_before;
    stop.store(true, Ordering::SeqCst);
    let (operations, latency) = join_threads(name, handles, purger)?;
    Ok(PeerRun {
        operations,
        latency,
        seconds,
        cpu_seconds: cpu,
    })
}

/// Joins the writer threads and the purge thread, summing the writers' appends and merging
/// their latencies; the first error of any of them, once all have ended.
fn join_threads(
    name: &str,
    handles: Vec<JoinHandle<WriterResult>>,
    purger: Option<JoinHandle<Result<(), String>>>,
) -> Result<(u64, Histogram<u64>), String> {
    // Join every thread before reporting the first error, so none outlives the store.
    let mut latency = Histogram::<u64>::new(3).map_err(|error| error.to_string())?;
    let mut operations = 0u64;
    let mut first_error = None;
    for handle in handles {
        let joined = handle
            .join()
            .map_err(|_| format!("{name}: a writer panicked"))
            .and_then(|result| result);
        match joined {
            Ok((count, histogram)) => {
                operations += count;
                latency
                    .add(histogram)
                    .map_err(|error| format!("{name}: merging latencies: {error}"))?;
            }
            Err(error) => {
                first_error.get_or_insert(error);
            }
        }
    }
    if let Some(handle) = purger {
        let joined = handle
            .join()
            .map_err(|_| format!("{name}: the purge thread panicked"))
            .and_then(|result| result);
        if let Err(error) = joined {
            first_error.get_or_insert(error);
        }
    }
    match first_error {
        Some(error) => Err(error),
        None => Ok((operations, latency)),
    }
}

type WriterResult = Result<(u64, Histogram<u64>), String>;

/// One writer: durable appends one at a time until `stop`; counts and times (submission to
/// durable) only those that complete while `measuring` is set.
fn writer(
    store: &Store,
    index: usize,
    workload: Workload,
    measuring: &AtomicBool,
    stop: &AtomicBool,
) -> WriterResult {
    let mut latency = Histogram::<u64>::new(3).map_err(|error| error.to_string())?;
    let mut appender = store.appender(index, workload.payload_bytes);
    let mut count = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let submitted = Instant::now();
        appender.append()?;
        if measuring.load(Ordering::Relaxed) {
            latency
                .record(submitted.elapsed().as_micros().max(1) as u64)
                .ok();
            count += 1;
        }
        appender.after_append();
    }
    Ok((count, latency))
}

/// raft-engine's purge loop: drops the log files that hold only compacted entries.
fn purge(store: &Store, stop: &AtomicBool) -> Result<(), String> {
    let Store::Raft(engine) = store else {
        return Ok(());
    };
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(RAFT_PURGE_INTERVAL);
        // The groups it returns lag too far behind to rewrite; the writers compact theirs
        // anyway, so the list needs no answer here.
        engine
            .purge_expired_files()
            .map_err(|error| format!("raft-engine: purge: {error}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each peer, 4 KiB x 2 writers, briefly: it appends, and the figures are plausible.
    #[test]
    fn peers_run_a_short_cell() -> Result<(), String> {
        let dir = tempfile::tempdir().map_err(|error| error.to_string())?;
        let workload = Workload {
            payload_bytes: 4096,
            writers: 2,
            in_flight: 1,
            duration: Duration::from_millis(300),
            warmup: Duration::from_millis(100),
        };
        for peer in Peer::ALL {
            let cell = peer_cell(peer, dir.path(), workload)?;
            println!(
                "{}: {:.0} appends/s, {:.1} MB/s, p50 {} us, p99 {} us, {:.1} CPU s/GB",
                cell.engine,
                cell.appends_per_sec,
                cell.mb_per_sec,
                cell.p50_us,
                cell.p99_us,
                cell.cpu_seconds_per_gb
            );
            assert_eq!(cell.engine, peer.name());
            assert!(cell.appends_per_sec > 0.0, "{}: no appends", peer.name());
            assert!(cell.p50_us > 0.0, "{}: no latency", peer.name());
        }
        let pipelined = Workload {
            in_flight: 4,
            ..workload
        };
        assert!(peer_cell(Peer::Okaywal, dir.path(), pipelined).is_err());
        Ok(())
    }
}
