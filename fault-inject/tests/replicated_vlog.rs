//! The VirtualLog under the replicated simulation (docs/testing.md): clients append, take
//! tails, read and reconfigure through handles of their own over one MetaStore (one held
//! replica), on segments whose loglets are quorums of three held replicas (write
//! quorum two) or single replicas, while the network drops, fails, slows and loses replies,
//! crashes and restarts replicas and makes fewer than a write quorum forget a write, and
//! some clients die holding a slot or kill a loglet's sequencer. Every
//! seed's history is checked for linearizability against a sequential log, with no
//! acknowledged append lost, no position given twice and no tail going backwards; a failing
//! seed prints the command that replays it.

use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use sealog_fault::replicated::{
    payload, read_value, run_seeds, seeds, HeldLogDrive, LocalBoxFuture, Network, SimClock,
    SimConfig, SimContext, SimError, SimLog,
};
use sealog_logdrive::{wait, LogDrive, MemLogDrive, QuorumLogDrive, QuorumOptions};
use sealog_vlog::{
    AtomicOptions, Chain, DriveLogletFactory, LogDriveMetaStore, LogError, LogletConfig,
    LogletDrives, MetaStore, VirtualLog, VirtualOptions,
};

/// Replicas per quorum and the write quorum.
const REPLICAS: usize = 3;
const WRITE_QUORUM: usize = 2;
/// Handles (MetaStore proposers) the clients share out.
const HANDLES: usize = 3;

/// A loglet's composition: every third one a single replica, the others a quorum.
fn spec(id: u64) -> Bytes {
    Bytes::from_static(if id % 3 == 0 { b"single" } else { b"quorum" })
}

fn quorum_options(clock: &SimClock) -> QuorumOptions {
    QuorumOptions {
        hedge_after: Some(Duration::from_millis(2)),
        clock: Arc::new(clock.clone()),
    }
}

/// One LogDrive of the composition `spec` names, behind the network.
fn drive(network: &Arc<Network>, clock: &SimClock, spec: &[u8]) -> Arc<dyn LogDrive> {
    if spec == b"single" {
        return Arc::new(HeldLogDrive::new(network, Arc::new(MemLogDrive::new())));
    }
    let drives = (0..REPLICAS)
        .map(|_| Arc::new(MemLogDrive::new()))
        .collect();
    let held = HeldLogDrive::replica_set(network, drives, WRITE_QUORUM);
    let children = held
        .into_iter()
        .map(|d| Arc::new(d) as Arc<dyn LogDrive>)
        .collect();
    Arc::new(QuorumLogDrive::new(children, WRITE_QUORUM, quorum_options(clock)).expect("quorum"))
}

/// Loglet ids come from one counter, the successors' and the reconfigurations' alike: a
/// loglet holds one segment.
fn factory(
    network: &Arc<Network>,
    clock: &SimClock,
    ids: &Arc<AtomicU64>,
) -> Arc<DriveLogletFactory> {
    let (network, build_clock) = (network.clone(), clock.clone());
    let build = move |config: &LogletConfig| {
        Ok(LogletDrives {
            data: drive(&network, &build_clock, &config.spec),
            seal: drive(&network, &build_clock, &config.spec),
        })
    };
    let ids = ids.clone();
    let next = move |_: &LogletConfig| {
        let id = ids.fetch_add(1, Ordering::Relaxed);
        LogletConfig { id, spec: spec(id) }
    };
    let options = AtomicOptions {
        window: 8,
        epoch: 0,
        retry_after: Duration::from_millis(1),
        slot_deadline: Duration::from_millis(40),
        clock: Arc::new(clock.clone()),
    };
    Arc::new(DriveLogletFactory::new(
        Box::new(build),
        Box::new(next),
        options,
    ))
}

/// The MetaStore's drive, holding the first chain (written before the network holds it),
/// behind the network: one replica, since a MetaStore on a LogDrive needs a drive that
/// decides racing proposals at one address by itself (docs/composition.md).
fn meta_drive(network: &Arc<Network>) -> Arc<dyn LogDrive> {
    let drive = Arc::new(MemLogDrive::new());
    let first = Chain::first(LogletConfig {
        id: 1,
        spec: spec(1),
    });
    wait(LogDriveMetaStore::new(drive.clone(), 0).compare_and_swap(0, first.encode()))
        .expect("the first chain");
    Arc::new(HeldLogDrive::new(network, drive))
}

fn build(context: &mut SimContext<'_>) -> Vec<Rc<dyn SimLog>> {
    let clock = context.clock.clone();
    let next_loglet = Arc::new(AtomicU64::new(2));
    let factory = factory(context.network, &clock, &next_loglet);
    let meta_drive = meta_drive(context.network);
    let options = VirtualOptions {
        roll_forward_after: Duration::from_millis(20),
        poll_interval: Duration::from_millis(1),
        attempts_max: 16,
        clock: Arc::new(clock.clone()),
    };
    (0..HANDLES as u64)
        .map(|proposer| {
            let meta: Arc<dyn MetaStore> =
                Arc::new(LogDriveMetaStore::new(meta_drive.clone(), proposer + 1));
            let log = VirtualLog::new(meta, factory.clone(), options.clone());
            Rc::new(Handle {
                log: Rc::new(log),
                next_loglet: next_loglet.clone(),
                factory: factory.clone(),
            }) as Rc<dyn SimLog>
        })
        .collect()
}

/// A client's VirtualLog handle as the simulation drives it.
struct Handle {
    log: Rc<VirtualLog>,
    next_loglet: Arc<AtomicU64>,
    /// The loglets' AtomicLogs (their sequencers), to kill a sequencer or hold a slot.
    factory: Arc<DriveLogletFactory>,
}

/// One append in this many is a client that dies holding a slot: it acquires one on the
/// active loglet and never writes it (the slots after it stall until a reconfiguration).
const DIES_HOLDING_A_SLOT: u64 = 29;

/// One reconfiguration in this many kills the active loglet's sequencer instead (appends
/// then fail until a reconfiguration; check_tail seals first).
const KILLS_THE_SEQUENCER: u64 = 4;

/// The AtomicLog of the segment `log` thinks active, if it is open.
async fn active(
    log: &VirtualLog,
    factory: &DriveLogletFactory,
) -> Result<Option<Arc<sealog_vlog::AtomicLog>>, SimError> {
    let chain = log.chain().await.map_err(sim_error)?;
    Ok(factory.opened(chain.active().loglet.id))
}

fn sim_error(error: LogError) -> SimError {
    SimError::of(error.is_definite(), error)
}

impl SimLog for Handle {
    fn append(&self, value: u64) -> LocalBoxFuture<Result<u64, SimError>> {
        let log = self.log.clone();
        if value % DIES_HOLDING_A_SLOT == DIES_HOLDING_A_SLOT - 1 {
            let factory = self.factory.clone();
            return Box::pin(async move {
                if let Some(loglet) = active(&log, &factory).await? {
                    let _ = loglet
                        .sequencer()
                        .expect("a local sequencer")
                        .acquire()
                        .await;
                }
                Err(SimError::Indeterminate(
                    "the client died holding a slot".into(),
                ))
            });
        }
        Box::pin(async move { log.append(payload(value)).await.map_err(sim_error) })
    }

    fn check_tail(&self) -> LocalBoxFuture<Result<u64, SimError>> {
        let log = self.log.clone();
        Box::pin(async move { log.check_tail().await.map_err(sim_error) })
    }

    fn read(&self, position: u64) -> LocalBoxFuture<Result<Option<u64>, SimError>> {
        let log = self.log.clone();
        Box::pin(async move { read_value(position, log.read(position).await.map_err(sim_error)?) })
    }

    fn reconfigure(&self) -> LocalBoxFuture<Result<(), SimError>> {
        let log = self.log.clone();
        let id = self.next_loglet.fetch_add(1, Ordering::Relaxed);
        if id % KILLS_THE_SEQUENCER == 0 {
            let factory = self.factory.clone();
            return Box::pin(async move {
                if let Some(loglet) = active(&log, &factory).await? {
                    loglet.sequencer().expect("a local sequencer").fail();
                }
                Ok(())
            });
        }
        Box::pin(async move {
            let next = LogletConfig { id, spec: spec(id) };
            log.reconfig_extend(next)
                .await
                .map(|_| ())
                .map_err(sim_error)
        })
    }
}

fn config(test: &str) -> SimConfig {
    let mut config = SimConfig::new("replicated_vlog", test);
    config.clients = 8;
    config.mix.reconfigure = 1;
    config
}

#[test]
fn the_virtual_log_over_quorums_is_linearizable_under_faults() {
    let config = config("the_virtual_log_over_quorums_is_linearizable_under_faults");
    let started = Instant::now();
    let report =
        run_seeds(&seeds(1000), &config, &build).unwrap_or_else(|failure| panic!("{failure}"));
    println!("virtual log: {report} in {:?}", started.elapsed());
    if report.seeds >= 100 {
        assert!(report.appends_acked > report.seeds * 10, "{report}");
        assert!(
            report.indeterminate > 0 && report.reconfigurations > 0,
            "{report}"
        );
        let faults = report.faults;
        assert!(faults.crashes > 0 && faults.forgotten > 0 && faults.replies_lost > 0);
    }
}
