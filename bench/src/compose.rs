//! The composition section: an AtomicLog (`sealog-vlog`) over one LogDrive, over a quorum of
//! three LogDrives on three rings (Qw = 2), over a stripe of two LogDrives on two rings and
//! over a stripe of two quorums (six LogDrives, two on each of the three rings), each beside
//! what it is compared with, in the same run and on the same rings: the LogDrive write under
//! the AtomicLog over one LogDrive (and the raw engine's append under that), three LogDrive
//! writes issued together on the three rings (the quorums' comparison: the same device work,
//! three writes per operation) and two LogDrives driven at once on two rings (the stripe's).
//! Every engine runs at one operation in flight and at 256, 4 KiB payloads, through the
//! poll loop of `inflight.rs`, in interleaved rounds per group (`GROUPS`; each round in
//! `rounds::round_order`, each ratio the median of the rounds' ratios).
//!
//! The rings: three directory rings in the run's scratch directory, formatted once. A run of
//! the raw engine opens them as one `sealog::Engine` (three drives, a thread each) and
//! appends to the first; every other run opens a `LogDriveStore` on each (a store owns its
//! drive: it cannot sit on an Engine's), so the same three drive threads run under every
//! engine, and creates the run's LogDrives on them: the AtomicLogs' data and seal LogDrives,
//! composed alike (a quorum's seal bit on a quorum of three seal LogDrives). A run releases
//! behind itself (the raw engine trims its drive; LogDrive writes trim their LogDrives; an
//! AtomicLog prefix-trims, which trims its data LogDrive's children) and ends by deleting its
//! LogDrives and reclaiming the rings, as the LogDrive section's runs do. The figures are
//! `compose_figures.rs`, their table, JSON and targets `compose_report.rs`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use sealog::{Drive, DriveOptions, Engine};
use sealog_logdrive::{
    wait, LogDrive, LogDriveStore, OpFuture, QuorumLogDrive, QuorumOptions, StoreOptions,
    StripedLogDrive,
};
use sealog_vlog::{AtomicLog, AtomicOptions};

use crate::cell::Cell;
use crate::cells::{cell_options, fresh_ring, keep_writes, RingShape};
use crate::compose_figures::{
    ComposeComparison, ComposeEngine, ComposeFigures, GROUPS, PAYLOAD_BYTES, WINDOW_K, WRITE_QUORUM,
};
use crate::inflight::{measure, Load, Op, Ops};
use crate::logdrive::empty_store_and_close;
use crate::progress::progress;
use crate::rounds::interleave;

/// Addresses of every LogDrive the section creates (none comes near it).
const CAPACITY: u64 = 1 << 40;
/// The epoch every write is stamped with (nothing is fenced).
const EPOCH: u64 = 1;
/// The deep load: one polling thread with 256 operations in flight (the LogDrive section's
/// throughput depth), as an embedder's one executor thread would keep them. Two threads of
/// 128 cost the AtomicLogs a cross-thread wake-up wherever an append waits for a lower slot
/// held by the other thread: over one LogDrive they made 113,000 appends/s at 12 us of CPU
/// each where one thread makes 152,000 at 9 us (quick runs, the LogDrive write's 200,000
/// and 162,000 beside).
pub const DEEP: (usize, usize) = (1, 256);

/// What the section needs from the run.
pub struct Plan {
    /// The three rings (directories in the scratch directory).
    pub rings: Vec<PathBuf>,
    /// Their shape.
    pub shape: RingShape,
    /// The options their drives open with.
    pub options: DriveOptions,
    /// Each run's measured time.
    pub run: Duration,
    /// The warm-up before each run.
    pub warmup: Duration,
    /// Rounds per engine of each group (at least two rounds per group are run).
    pub rotations: usize,
}

/// Runs the section on rings formatted for it; leaves them empty.
pub fn compose_section(plan: &Plan) -> Result<ComposeFigures, String> {
    let started = Instant::now();
    progress("compose: formatting the section's three rings");
    for ring in &plan.rings {
        fresh_ring(ring, plan.shape)?;
    }
    let mut comparisons = Vec::new();
    for (threads, in_flight) in [(1, 1), DEEP] {
        let load = Load {
            threads,
            in_flight,
            duration: plan.run,
            warmup: plan.warmup,
            spin: Duration::from_micros(plan.options.client_spin_us),
        };
        for (group, engines) in GROUPS {
            comparisons.push(comparison(plan, group, engines, load)?);
        }
    }
    Ok(ComposeFigures {
        comparisons,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// One group's engines under `load`, in `plan.rotations` times as many interleaved rounds as
/// engines (four at least, so that two engines each run first twice).
fn comparison(
    plan: &Plan,
    group: &'static str,
    engines: &[ComposeEngine],
    load: Load,
) -> Result<ComposeComparison, String> {
    let started = Instant::now();
    let rounds = (engines.len() * plan.rotations).max(4);
    let in_flight = load.total_in_flight();
    let runs = interleave(rounds, engines.len(), |engine, round| {
        progress(&format!(
            "compose {group} at {in_flight} in flight, round {}/{rounds}: {}",
            round + 1,
            engines[engine].label()
        ));
        run(plan, engines[engine], load)
    })?;
    let cells = runs
        .iter()
        .map(|round| round.iter().map(|run| run.0.clone()).collect())
        .collect();
    let poller_cpu_share = runs
        .iter()
        .map(|round| round.iter().map(|run| run.1).collect())
        .collect();
    Ok(ComposeComparison {
        group,
        engines: engines.to_vec(),
        threads: load.threads,
        in_flight,
        cells,
        poller_cpu_share,
        seconds_per_run: load.duration.as_secs_f64(),
        warmup_seconds_per_run: load.warmup.as_secs_f64(),
        total_seconds: started.elapsed().as_secs_f64(),
    })
}

/// A run's cell and its busiest polling thread's share of a CPU.
pub(crate) type Run = (Cell, f64);

/// One run: the rings opened (as an Engine, or a store on each), `engine` measured under
/// `load`, the rings left empty and closed.
pub(crate) fn run(plan: &Plan, engine: ComposeEngine, load: Load) -> Result<Run, String> {
    let options = cell_options(plan.options.clone());
    let paths: Vec<&Path> = plan.rings.iter().map(PathBuf::as_path).collect();
    if engine == ComposeEngine::Raw {
        let opened = Engine::open(&paths, &options, None).map_err(|error| error.to_string())?;
        let drive = &opened.drives()[0];
        let ops = RawOps {
            drive,
            payload: payload(),
        };
        let cell = measured_cell(&ops, engine.name(), load, drive);
        let trimmed = opened
            .drives()
            .iter()
            .try_for_each(|drive| drive.trim(drive.durable_lsn()));
        opened.drives().iter().for_each(Drive::close);
        return cell.and_then(|cell| trimmed.map(|()| cell).map_err(|error| error.to_string()));
    }
    let stores = paths
        .iter()
        .map(|path| open_store(path, options.clone()))
        .collect::<Result<Vec<_>, String>>()?;
    let cell = logdrive_run(&stores, engine, load);
    let emptied = stores.iter().try_for_each(empty_store_and_close);
    cell.and_then(|cell| emptied.map(|()| cell))
}

/// A LogDrive engine's run on `stores`: its LogDrives created, measured.
fn logdrive_run(
    stores: &[LogDriveStore],
    engine: ComposeEngine,
    load: Load,
) -> Result<Run, String> {
    let drive = stores[0].drive();
    let shape = match engine {
        ComposeEngine::LogDrive => {
            let ops = WriteOps::new(created(stores, 0, &[0])?, false);
            return measured_cell(&ops, engine.name(), load, drive);
        }
        ComposeEngine::Together3 => {
            let ops = WriteOps::new(created(stores, 0, &[0, 1, 2])?, true);
            return measured_cell(&ops, engine.name(), load, drive);
        }
        ComposeEngine::AtOnce2 => {
            let ops = WriteOps::new(created(stores, 0, &[0, 1])?, false);
            return measured_cell(&ops, engine.name(), load, drive);
        }
        ComposeEngine::Raw => return Err("the raw engine runs on an Engine".to_string()),
        ComposeEngine::AtomicOne => Shape::One,
        ComposeEngine::AtomicQuorum => Shape::Quorum,
        ComposeEngine::AtomicStripe => Shape::Stripe,
        ComposeEngine::AtomicStripeOfQuorums => Shape::StripeOfQuorums,
    };
    let data = composed(stores, shape, [0, 1])?;
    let seal = composed(stores, shape, [2, 3])?;
    let options = AtomicOptions {
        window: WINDOW_K,
        epoch: EPOCH,
        ..AtomicOptions::default()
    };
    let log = wait(AtomicLog::open(data, seal, 0, options)).map_err(|error| error.to_string())?;
    let ops = AppendOps {
        log,
        payload: payload(),
        issued: AtomicU64::new(0),
    };
    measured_cell(&ops, engine.name(), load, drive)
}

/// The 4 KiB payload every operation writes (shared bytes: each write hands on a reference).
pub(crate) fn payload() -> Bytes {
    Bytes::from(vec![0x5a; PAYLOAD_BYTES])
}

/// Measures `ops` under `load` as a cell named `name` (with its busiest polling
/// thread's share of a CPU), releasing behind it to keep a quarter of a ring (`drive`'s,
/// whose batches it counts).
pub(crate) fn measured_cell<O: Ops>(
    ops: &O,
    name: &str,
    load: Load,
    drive: &Drive,
) -> Result<Run, String> {
    let geometry = drive.geometry();
    let workload = crate::cells::Workload {
        payload_bytes: PAYLOAD_BYTES,
        writers: load.threads,
        in_flight: load.in_flight,
        duration: load.duration,
        warmup: load.warmup,
    };
    let keep = keep_writes(
        geometry.ring_size_bytes().unwrap_or(0),
        u64::from(geometry.block_size_bytes),
        &workload,
    );
    let measured = measure(ops, load, keep, drive)?;
    let mut cell = Cell::measured(
        name,
        PAYLOAD_BYTES as u64,
        load.threads as u64,
        load.in_flight as u64,
        measured.operations,
        measured.seconds,
        &measured.latency_us,
    );
    cell.batch_entries = measured.batch_entries;
    cell.set_cpu_us_per_append(measured.cpu_seconds, measured.operations);
    Ok((cell, measured.poller_cpu_share))
}

/// How an AtomicLog's data (and seal) LogDrive is composed.
#[derive(Clone, Copy, Debug)]
enum Shape {
    /// One LogDrive on the first ring.
    One,
    /// A quorum of three, one on each ring.
    Quorum,
    /// A stripe of two, on the first two rings.
    Stripe,
    /// A stripe of two quorums of three: two LogDrives on each ring.
    StripeOfQuorums,
}

/// The LogDrive of `shape` over LogDrives created on `stores` with ids `ids` (the second for
/// the second quorum of a stripe of quorums).
fn composed(
    stores: &[LogDriveStore],
    shape: Shape,
    ids: [u64; 2],
) -> Result<Arc<dyn LogDrive>, String> {
    let quorum = |id: u64| -> Result<Arc<dyn LogDrive>, String> {
        let children = created(stores, id, &[0, 1, 2])?;
        let quorum = QuorumLogDrive::new(children, WRITE_QUORUM, QuorumOptions::default())
            .map_err(|error| format!("quorum: {error}"))?;
        Ok(Arc::new(quorum))
    };
    let stripe = |children: Vec<Arc<dyn LogDrive>>| -> Result<Arc<dyn LogDrive>, String> {
        let stripe = StripedLogDrive::new(children).map_err(|error| format!("stripe: {error}"))?;
        Ok(Arc::new(stripe))
    };
    match shape {
        Shape::One => Ok(created(stores, ids[0], &[0])?.remove(0)),
        Shape::Quorum => quorum(ids[0]),
        Shape::Stripe => stripe(created(stores, ids[0], &[0, 1])?),
        Shape::StripeOfQuorums => stripe(vec![quorum(ids[0])?, quorum(ids[1])?]),
    }
}

/// LogDrive `id` created on each of `stores` that `on` names, their creations in flight
/// together.
fn created(
    stores: &[LogDriveStore],
    id: u64,
    on: &[usize],
) -> Result<Vec<Arc<dyn LogDrive>>, String> {
    let creations: Vec<_> = on
        .iter()
        .map(|&store| stores[store].create(id, CAPACITY))
        .collect();
    creations
        .into_iter()
        .map(|creation| {
            let drive = wait(creation).map_err(|error| format!("create: {error}"))?;
            Ok(Arc::new(drive) as Arc<dyn LogDrive>)
        })
        .collect()
}

/// Opens `ring` as a LogDrive store whose writers may keep a window of [`WINDOW_K`], its
/// reclaimer on the default policy.
pub(crate) fn open_store(ring: &Path, options: DriveOptions) -> Result<LogDriveStore, String> {
    let options = StoreOptions::default()
        .drive(options.when_full(sealog::WhenFull::Fail))
        .write_window_max(WINDOW_K)
        .weak_tail_k_max(WINDOW_K.max(sealog_logdrive::store::WEAK_TAIL_K_MAX_DEFAULT));
    LogDriveStore::open_with_options(ring, options)
        .map_err(|error| format!("{}: {error}", ring.display()))
}

/// The raw engine's appends, each `Drive::append` awaited as its ticket's future.
struct RawOps<'a> {
    drive: &'a Drive,
    payload: Bytes,
}

impl Ops for RawOps<'_> {
    fn start(&self, _thread: usize) -> Op<'_> {
        let ticket = self.drive.append(self.payload.clone());
        Box::pin(async move {
            let ticket = ticket.map_err(|error| error.to_string())?;
            ticket.await.map(|_| ()).map_err(|error| error.to_string())
        })
    }

    fn release(&self, keep_writes: u64) -> Result<(), String> {
        let upto = self.drive.durable_lsn().saturating_sub(keep_writes);
        self.drive.trim(upto).map_err(|error| error.to_string())
    }
}

/// LogDrive writes: each operation one write to the next LogDrive in turn (`together`
/// false), or one write to every LogDrive at the same address, done when all are (true).
/// Each LogDrive's addresses are taken in order from its own counter.
struct WriteOps {
    drives: Vec<Arc<dyn LogDrive>>,
    together: bool,
    next: Vec<AtomicU64>,
    turn: AtomicU64,
    payload: Bytes,
}

impl WriteOps {
    fn new(drives: Vec<Arc<dyn LogDrive>>, together: bool) -> WriteOps {
        let next = drives.iter().map(|_| AtomicU64::new(0)).collect();
        WriteOps {
            drives,
            together,
            next,
            turn: AtomicU64::new(0),
            payload: payload(),
        }
    }

    fn write(&self, index: usize) -> OpFuture<()> {
        let address = self.next[index].fetch_add(1, Ordering::Relaxed);
        self.drives[index].write(address, EPOCH, self.payload.clone())
    }
}

impl Ops for WriteOps {
    fn start(&self, _thread: usize) -> Op<'_> {
        let writes: Vec<OpFuture<()>> = if self.together {
            (0..self.drives.len())
                .map(|index| self.write(index))
                .collect()
        } else {
            let turn = self.turn.fetch_add(1, Ordering::Relaxed) as usize;
            vec![self.write(turn % self.drives.len())]
        };
        Box::pin(async move {
            for write in writes {
                write.await.map_err(|error| error.to_string())?;
            }
            Ok(())
        })
    }

    /// Trims each LogDrive to its share of `keep_writes` below what it was given, the trims
    /// in flight together.
    fn release(&self, keep_writes: u64) -> Result<(), String> {
        let share = if self.together {
            keep_writes
        } else {
            keep_writes / self.drives.len() as u64
        };
        let trims: Vec<OpFuture<()>> = self
            .drives
            .iter()
            .zip(&self.next)
            .map(|(drive, next)| drive.trim(next.load(Ordering::Relaxed).saturating_sub(share)))
            .collect();
        trims
            .into_iter()
            .try_for_each(|trim| wait(trim).map_err(|error| format!("trim: {error}")))
    }
}

/// AtomicLog appends, each awaited as the async fn it is.
struct AppendOps {
    log: AtomicLog,
    payload: Bytes,
    issued: AtomicU64,
}

impl Ops for AppendOps {
    fn start(&self, _thread: usize) -> Op<'_> {
        self.issued.fetch_add(1, Ordering::Relaxed);
        let payload = self.payload.clone();
        Box::pin(async move {
            self.log
                .append(payload)
                .await
                .map(|_| ())
                .map_err(|error| error.to_string())
        })
    }

    /// A prefix trim to `keep_writes` below the appends started (the log caps it at its
    /// tail), which trims the data LogDrive's children.
    fn release(&self, keep_writes: u64) -> Result<(), String> {
        let upto = self
            .issued
            .load(Ordering::Relaxed)
            .saturating_sub(keep_writes);
        wait(self.log.prefix_trim(upto))
            .map(|_| ())
            .map_err(|error| format!("prefix trim: {error}"))
    }
}
