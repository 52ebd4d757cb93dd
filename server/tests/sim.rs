//! The replicated log of this crate over a simulated network (docs/testing.md), in one
//! process, each seed replaying exactly. Three simulated LogDrive servers each run the real
//! LogDrive service (`Service`) over LogDrives held in memory (`MemDrives`), behind the
//! seeded network of sealog-fault's simulation: every operation travels as the service's
//! protobuf messages, encoded and decoded, goes through the service's authorization,
//! admission and lookup by id and generation, and comes back as a reply the client decodes
//! as `RemoteLogDrive` does (`wire`). Segments are described as sequencer hosts describe
//! them (a `LogletSpec`, JSON in the chain) and composed as the client composes them
//! (`loglet_spec::compose`): a quorum of the three servers (write quorum two) per group, one
//! group or two striped.
//!
//! Clients append, read, take tails and reconfigure through VirtualLog handles (some
//! reconfigurations kill the active segment's sequencer instead) while a plan drawn from the
//! seed kills a server and restarts it, cuts one off and lets it back, one server at a time,
//! and once takes two out together (appends stall, then go on), on top of the network's own
//! faults (lost requests and replies, EIO, crashes of single drives, lost writes). Every
//! seed's history must be linearizable against a sequential log, with no acknowledged append
//! lost, no position given twice and no tail going back; a failing seed prints the command
//! that replays it.

use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use bytes::Bytes;
use prost::Message;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use sealog_fault::replicated::{
    payload, read_value, run_seed, run_seeds, seeds, HeldLogDrive, LocalBoxFuture, Network,
    SimClock, SimConfig, SimContext, SimError, SimLog,
};
use sealog_logdrive::{
    wait, Clock, Length, LogDrive, LogDriveError, MemLogDrive, OpFuture, QuorumOptions,
    ReadOutcome, TailDesc, MEM_WEAK_TAIL_K_MAX,
};
use sealog_server::auth::Caller;
use sealog_server::drives::{Drives, MemDrives};
use sealog_server::loglet_spec::{compose, DriveName, LogletSpec, Replica};
use sealog_server::pb::log_drive_service_server::LogDriveService;
use sealog_server::pb::{self, create_reply};
use sealog_server::remote::status_error;
use sealog_server::sequencer_host::drive_id;
use sealog_server::service::{Limits, Service, ServiceStats};
use sealog_server::tls::ConnInfo;
use sealog_server::{wire, Identity, Role};
use sealog_vlog::{
    AtomicOptions, Chain, DriveLogletFactory, LogDriveMetaStore, LogError, LogletConfig,
    LogletDrives, MetaStore, VirtualLog, VirtualOptions,
};
use tonic::{Request, Response, Status};

/// Servers, and the write quorum of each group (one replica on every server).
const SERVERS: usize = 3;
const WRITE_QUORUM: usize = 2;
/// The VirtualLog handles the clients share out (MetaStore proposers).
const HANDLES: usize = 3;
/// A segment's window of slots.
const WINDOW: u64 = 8;
/// Every LogDrive's capacity in addresses.
const CAPACITY: u64 = 1 << 20;

/// One simulated server.
struct SimServer {
    addr: String,
    drives: Arc<MemDrives>,
    service: Arc<Service>,
    /// The network ids of its drives.
    children: Mutex<Vec<usize>>,
    /// Until when it is dead (`Some(true)`) or cut off (`Some(false)`): drives created on it
    /// meanwhile are too.
    out: Mutex<Option<(bool, Duration)>>,
}

/// What a seed's plan did to the servers.
#[derive(Debug, Default)]
struct ChaosCounts {
    kills: AtomicU64,
    cut_offs: AtomicU64,
    two_out: AtomicU64,
    /// Appends acknowledged while one server was out.
    acked_one_out: AtomicU64,
    /// Appends acknowledged after two servers were out together.
    acked_after_two_out: AtomicU64,
}

/// The simulated cluster: its servers, the network and the clock.
struct Cluster {
    network: Arc<Network>,
    clock: SimClock,
    servers: Vec<SimServer>,
    /// The network id of each (server, LogDrive id).
    children: Mutex<std::collections::HashMap<(usize, u64), usize>>,
    chaos: Arc<ChaosCounts>,
    /// When the two servers out together came back.
    two_out_until: Mutex<Option<Duration>>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// The outcome of a future of the in-memory service, which is ready at once.
fn at_once<T>(future: impl Future<Output = T>) -> T {
    let mut future = std::pin::pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(outcome) => outcome,
        Poll::Pending => panic!("a simulated server's call did not complete at once"),
    }
}

/// A request as it arrives from a caller with the sequencer role (the handles both append
/// and reconfigure, so they seal and fence too).
fn request<M>(message: M) -> Request<M> {
    let mut request = Request::new(message);
    request.extensions_mut().insert(ConnInfo {
        remote: "10.0.0.1:50000".parse().expect("an address"),
        caller: Caller::Verified(Identity {
            name: "sim-sequencer".into(),
            role: Some(Role::Sequencer),
        }),
    });
    request
}

impl Cluster {
    fn new(network: &Arc<Network>, clock: &SimClock) -> Cluster {
        let limits = Limits {
            in_flight_max: 64,
            payload_size_max_bytes: 1 << 20,
            write_window_max: MEM_WEAK_TAIL_K_MAX,
            weak_tail_k_max: MEM_WEAK_TAIL_K_MAX,
        };
        let servers = (0..SERVERS)
            .map(|index| {
                let drives = Arc::new(MemDrives::new());
                let stats = Arc::new(ServiceStats::default());
                let store = Arc::clone(&drives) as Arc<dyn Drives>;
                SimServer {
                    addr: format!("10.0.1.{}:7000", index + 1),
                    drives,
                    service: Arc::new(Service::new(store, limits, stats)),
                    children: Mutex::new(Vec::new()),
                    out: Mutex::new(None),
                }
            })
            .collect();
        Cluster {
            network: Arc::clone(network),
            clock: clock.clone(),
            servers,
            children: Mutex::new(Default::default()),
            chaos: Arc::default(),
            two_out_until: Mutex::new(None),
        }
    }

    /// Creates LogDrive `id` on `server` through its service's Create, as a sequencer host
    /// creates a segment's drives.
    fn create(&self, server: usize, id: u64) -> (DriveName, Arc<MemLogDrive>) {
        let service = &self.servers[server].service;
        let message = pb::CreateRequest {
            id,
            capacity: CAPACITY,
        };
        let reply = at_once(service.create(request(message))).expect("create is served");
        match reply.into_inner().result {
            Some(create_reply::Result::Drive(drive)) => {
                let (generation, mem) = self.servers[server].drives.drive(id).expect("live");
                assert_eq!(generation, drive.generation);
                let name = DriveName {
                    id: drive.id,
                    generation: drive.generation,
                };
                (name, mem)
            }
            other => panic!("creating {id} on server {server}: {other:?}"),
        }
    }

    /// Creates one LogDrive on every server as one replica set in the network: their names.
    fn create_set(&self, id: u64) -> Vec<DriveName> {
        let (names, mems): (Vec<_>, Vec<_>) = (0..SERVERS).map(|s| self.create(s, id)).unzip();
        let children = self.network.add_set(mems, WRITE_QUORUM);
        let now = self.clock.now();
        for (server, child) in children.into_iter().enumerate() {
            lock(&self.children).insert((server, id), child);
            let host = &self.servers[server];
            lock(&host.children).push(child);
            match *lock(&host.out) {
                Some((true, until)) if until > now => self.network.crash_together(&[child], until),
                Some((false, until)) if until > now => self.network.hold_back(&[child], until),
                _ => {}
            }
        }
        names
    }

    /// Segment `id`'s configuration: its LogDrives created on every server, one quorum
    /// group for even ids and two striped for odd ones.
    fn loglet(&self, id: u64) -> LogletConfig {
        let groups = (0..1 + (id % 2) as usize)
            .map(|group| {
                let data = self.create_set(drive_id(id, 0, group, false));
                let seal = (group == 0).then(|| self.create_set(drive_id(id, 0, group, true)));
                (0..SERVERS)
                    .map(|server| Replica {
                        addr: self.servers[server].addr.clone(),
                        data: data[server],
                        seal: seal.as_ref().map(|names| names[server]),
                    })
                    .collect()
            })
            .collect();
        let spec = LogletSpec {
            sequencer: "sim-sequencer:7100".into(),
            window: WINDOW,
            write_quorum: WRITE_QUORUM,
            groups,
        };
        spec.config(id)
    }

    /// The client's handle on LogDrive `name` on the server at `addr`.
    fn drive(self: &Arc<Self>, addr: &str, name: DriveName) -> Arc<dyn LogDrive> {
        let server = self
            .servers
            .iter()
            .position(|s| s.addr == addr)
            .unwrap_or_else(|| panic!("no server at {addr}"));
        let child = lock(&self.children)[&(server, name.id)];
        Arc::new(SimDrive {
            cluster: Arc::clone(self),
            server,
            child,
            name: pb::DriveRef {
                id: name.id,
                generation: name.generation,
            },
        })
    }
}

/// A handler of the LogDrive service, called as the transport would call it.
type Handler<M, R> = fn(
    Arc<Service>,
    Request<M>,
) -> Pin<Box<dyn Future<Output = Result<Response<R>, Status>> + Send>>;

/// A LogDrive on a simulated server, as `RemoteLogDrive` is one on a real server.
struct SimDrive {
    cluster: Arc<Cluster>,
    server: usize,
    child: usize,
    name: pb::DriveRef,
}

fn malformed(what: &str, error: prost::DecodeError) -> LogDriveError {
    LogDriveError::Io {
        reason: format!("a malformed {what}: {error}"),
    }
    .indeterminate()
}

impl SimDrive {
    /// Sends `message` through the network to the server's `handler`; `decode` reads the
    /// reply as the client library does.
    fn call<M, R, T>(
        &self,
        (operation, write): (&'static str, Option<u64>),
        message: M,
        handler: Handler<M, R>,
        decode: fn(R) -> Result<T, LogDriveError>,
    ) -> OpFuture<T>
    where
        M: Message + Default + Send + 'static,
        R: Message + Default + Send + 'static,
        T: Send + 'static,
    {
        let server = &self.cluster.servers[self.server];
        let (service, addr) = (Arc::clone(&server.service), server.addr.clone());
        let sent = message.encode_to_vec();
        self.cluster.network.submit(self.child, write, move |_| {
            Box::pin(async move {
                let message = M::decode(sent.as_slice()).map_err(|e| malformed("request", e))?;
                let reply = handler(service, request(message))
                    .await
                    .map_err(|status| status_error(&addr, operation, &status))?;
                let received = reply.into_inner().encode_to_vec();
                decode(R::decode(received.as_slice()).map_err(|e| malformed("reply", e))?)
            })
        })
    }
}

impl LogDrive for SimDrive {
    fn write(&self, address: u64, epoch: u64, payload: Bytes) -> OpFuture<()> {
        let write = pb::WriteRequest {
            drive: Some(self.name),
            address,
            epoch,
            payload,
        };
        // As the remote client sends writes: in a batch (here of one), each with its own
        // outcome.
        let message = pb::WriteBatchRequest {
            writes: vec![write],
        };
        self.call(
            ("write", Some(address)),
            message,
            |s, r| Box::pin(async move { s.write_batch(r).await }),
            |mut r| match (r.results.pop(), r.results.is_empty()) {
                (Some(result), true) => wire::unit_from_pb(result, "write"),
                _ => Err(wire::malformed_reply("write_batch").indeterminate()),
            },
        )
    }

    fn read(&self, address: u64) -> OpFuture<ReadOutcome> {
        let message = pb::ReadRequest {
            drive: Some(self.name),
            address,
        };
        let handler: Handler<_, _> = |s, r| Box::pin(async move { s.read(r).await });
        self.call(("read", None), message, handler, wire::read_from_pb)
    }

    fn weak_tail(&self, k: u64) -> OpFuture<TailDesc> {
        let message = pb::WeakTailRequest {
            drive: Some(self.name),
            k,
        };
        let handler: Handler<_, _> = |s, r| Box::pin(async move { s.weak_tail(r).await });
        self.call(("weak_tail", None), message, handler, wire::tail_from_pb)
    }

    fn seal(&self, length: u64, epoch: u64) -> OpFuture<()> {
        let message = pb::SealRequest {
            drive: Some(self.name),
            length,
            epoch,
        };
        self.call(
            ("seal", None),
            message,
            |s, r| Box::pin(async move { s.seal(r).await }),
            |r| wire::unit_from_pb(r, "seal"),
        )
    }

    fn fence(&self, epoch: u64) -> OpFuture<()> {
        let message = pb::FenceRequest {
            drive: Some(self.name),
            epoch,
        };
        self.call(
            ("fence", None),
            message,
            |s, r| Box::pin(async move { s.fence(r).await }),
            |r| wire::unit_from_pb(r, "fence"),
        )
    }

    fn trim(&self, upto: u64) -> OpFuture<()> {
        let message = pb::TrimRequest {
            drive: Some(self.name),
            upto,
        };
        self.call(
            ("trim", None),
            message,
            |s, r| Box::pin(async move { s.trim(r).await }),
            |r| wire::unit_from_pb(r, "trim"),
        )
    }

    fn length(&self) -> OpFuture<Length> {
        let handler: Handler<_, _> = |s, r| Box::pin(async move { s.length(r).await });
        self.call(("length", None), self.name, handler, wire::length_from_pb)
    }

    fn write_window_max(&self) -> u64 {
        MEM_WEAK_TAIL_K_MAX
    }
}

/// What the plan does to the servers in one step.
#[derive(Clone, Copy, Debug)]
enum Outage {
    /// SIGKILL and restart: its pending requests fail, it comes back with what it held.
    Kill,
    /// Its link down and up: its requests wait until the link is back.
    CutOff,
    /// Kills it and cuts off the next server, together.
    TwoOut,
}

/// One step of the plan: from `at` for `lasts`.
#[derive(Clone, Copy, Debug)]
struct Step {
    at: Duration,
    lasts: Duration,
    server: usize,
    outage: Outage,
}

/// Steps in one plan.
const STEPS: usize = 6;

/// The seed's plan: one outage at a time, each after the one before ended; one of them two
/// servers out.
fn plan(rng: &mut ChaCha8Rng) -> Vec<Step> {
    let ms = |range: std::ops::RangeInclusive<u64>, rng: &mut ChaCha8Rng| {
        Duration::from_micros(rng.gen_range(range) * 100)
    };
    let two_out = rng.gen_range(0..STEPS);
    let mut at = Duration::ZERO;
    let mut steps = Vec::new();
    for index in 0..STEPS {
        at += ms(10..=300, rng);
        let lasts = ms(20..=300, rng);
        let outage = match (index == two_out, rng.gen_bool(0.5)) {
            (true, _) => Outage::TwoOut,
            (false, true) => Outage::Kill,
            (false, false) => Outage::CutOff,
        };
        let server = rng.gen_range(0..SERVERS);
        steps.push(Step {
            at,
            lasts,
            server,
            outage,
        });
        at += lasts;
    }
    steps
}

impl Cluster {
    /// Counts an acknowledged append against the servers out now.
    fn acknowledged(&self) {
        let now = self.clock.now();
        let out = self
            .servers
            .iter()
            .filter(|s| lock(&s.out).is_some_and(|(_, until)| until > now))
            .count();
        if out == 1 {
            self.chaos.acked_one_out.fetch_add(1, Ordering::Relaxed);
        }
        if lock(&self.two_out_until).is_some_and(|until| until <= now) {
            self.chaos
                .acked_after_two_out
                .fetch_add(1, Ordering::Relaxed);
        }
    }

    fn kill(&self, server: usize, until: Duration) {
        let host = &self.servers[server];
        *lock(&host.out) = Some((true, until));
        let children = lock(&host.children).clone();
        self.network.crash_together(&children, until);
    }

    fn cut_off(&self, server: usize, until: Duration) {
        let host = &self.servers[server];
        *lock(&host.out) = Some((false, until));
        let children = lock(&host.children).clone();
        self.network.hold_back(&children, until);
    }

    /// Carries out `plan` on the simulated clock.
    async fn run_plan(self: Arc<Self>, plan: Vec<Step>) {
        for step in plan {
            let now = self.clock.now();
            if step.at > now {
                self.clock.sleep(step.at - now).await;
            }
            let until = self.clock.now() + step.lasts;
            let chaos = &self.chaos;
            match step.outage {
                Outage::Kill => {
                    self.kill(step.server, until);
                    chaos.kills.fetch_add(1, Ordering::Relaxed);
                }
                Outage::CutOff => {
                    self.cut_off(step.server, until);
                    chaos.cut_offs.fetch_add(1, Ordering::Relaxed);
                }
                Outage::TwoOut => {
                    self.kill(step.server, until);
                    self.cut_off((step.server + 1) % SERVERS, until);
                    chaos.two_out.fetch_add(1, Ordering::Relaxed);
                    *lock(&self.two_out_until) = Some(until);
                }
            }
        }
    }
}

fn quorum_options(clock: &SimClock) -> QuorumOptions {
    QuorumOptions {
        hedge_after: Some(Duration::from_millis(2)),
        clock: Arc::new(clock.clone()),
    }
}

/// The segments' factory: drives composed from each segment's description over the
/// simulated servers; successors' and reconfigurations' ids from one counter.
fn factory(cluster: &Arc<Cluster>, ids: &Arc<AtomicU64>) -> Arc<DriveLogletFactory> {
    let (built, quorum) = (Arc::clone(cluster), quorum_options(&cluster.clock));
    let build = move |config: &LogletConfig| {
        let spec = LogletSpec::decode(config)?;
        let (data, seal) = compose(&spec, &quorum, |addr, name| built.drive(addr, name))?;
        Ok(LogletDrives { data, seal })
    };
    let (next_cluster, ids) = (Arc::clone(cluster), Arc::clone(ids));
    let next = move |_: &LogletConfig| next_cluster.loglet(ids.fetch_add(1, Ordering::Relaxed));
    let options = AtomicOptions {
        window: WINDOW,
        epoch: 0,
        retry_after: Duration::from_millis(1),
        slot_deadline: Duration::from_millis(40),
        clock: Arc::new(cluster.clock.clone()),
    };
    Arc::new(DriveLogletFactory::new(
        Box::new(build),
        Box::new(next),
        options,
    ))
}

/// The MetaStore's drive (standing for etcd, a service of its own), holding the first
/// chain, behind the network as one replica.
fn meta_drive(cluster: &Cluster) -> Arc<dyn LogDrive> {
    let drive = Arc::new(MemLogDrive::new());
    let first = Chain::first(cluster.loglet(1));
    wait(LogDriveMetaStore::new(drive.clone(), 0).compare_and_swap(0, first.encode()))
        .expect("the first chain");
    Arc::new(HeldLogDrive::new(&cluster.network, drive))
}

fn build(context: &mut SimContext<'_>) -> Vec<Rc<dyn SimLog>> {
    let cluster = Arc::new(Cluster::new(context.network, context.clock));
    let ids = Arc::new(AtomicU64::new(2));
    let factory = factory(&cluster, &ids);
    let meta_drive = meta_drive(&cluster);
    let plan = plan(context.rng);
    context.spawner.spawn(Arc::clone(&cluster).run_plan(plan));
    CHAOS.with(|chaos| *chaos.borrow_mut() = Some(Arc::clone(&cluster.chaos)));
    let options = VirtualOptions {
        roll_forward_after: Duration::from_millis(20),
        poll_interval: Duration::from_millis(1),
        attempts_max: 16,
        clock: Arc::new(context.clock.clone()),
    };
    (0..HANDLES as u64)
        .map(|proposer| {
            let meta: Arc<dyn MetaStore> =
                Arc::new(LogDriveMetaStore::new(meta_drive.clone(), proposer + 1));
            Rc::new(Handle {
                log: Rc::new(VirtualLog::new(meta, factory.clone(), options.clone())),
                cluster: Arc::clone(&cluster),
                ids: Arc::clone(&ids),
                factory: factory.clone(),
            }) as Rc<dyn SimLog>
        })
        .collect()
}

thread_local! {
    /// The last seed's plan counts, for the test's report.
    static CHAOS: std::cell::RefCell<Option<Arc<ChaosCounts>>> = const {
        std::cell::RefCell::new(None)
    };
}

/// A client's VirtualLog handle as the simulation drives it.
struct Handle {
    log: Rc<VirtualLog>,
    cluster: Arc<Cluster>,
    ids: Arc<AtomicU64>,
    /// The segments' AtomicLogs, to kill a sequencer.
    factory: Arc<DriveLogletFactory>,
}

/// One reconfiguration in this many kills the active segment's sequencer instead: appends
/// then fail until a client reconfigures, and the dead sequencer's slots are refused.
const KILLS_THE_SEQUENCER: u64 = 4;

fn sim_error(error: LogError) -> SimError {
    SimError::of(error.is_definite(), error)
}

impl SimLog for Handle {
    fn append(&self, value: u64) -> LocalBoxFuture<Result<u64, SimError>> {
        let (log, cluster) = (self.log.clone(), Arc::clone(&self.cluster));
        Box::pin(async move {
            let position = log.append(payload(value)).await.map_err(sim_error)?;
            cluster.acknowledged();
            Ok(position)
        })
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
        let (log, factory) = (self.log.clone(), self.factory.clone());
        let id = self.ids.fetch_add(1, Ordering::Relaxed);
        if id % KILLS_THE_SEQUENCER == 0 {
            return Box::pin(async move {
                let chain = log.chain().await.map_err(sim_error)?;
                if let Some(loglet) = factory.opened(chain.active().loglet.id) {
                    loglet.sequencer().expect("a local sequencer").fail();
                }
                Ok(())
            });
        }
        let next = self.cluster.loglet(id);
        Box::pin(async move {
            log.reconfig_extend(next)
                .await
                .map(|_| ())
                .map_err(sim_error)
        })
    }
}

fn config(test: &str) -> SimConfig {
    let mut config = SimConfig::new("sim", test);
    config.package = "sealog-server".into();
    config.clients = 8;
    config.mix.reconfigure = 1;
    config
}

fn chaos_counts() -> Arc<ChaosCounts> {
    CHAOS.with(|chaos| chaos.borrow().clone().expect("a seed ran"))
}

#[test]
fn the_replicated_log_over_simulated_servers_is_linearizable() {
    let config = config("the_replicated_log_over_simulated_servers_is_linearizable");
    let started = Instant::now();
    let (mut kills, mut cut_offs, mut two_out) = (0, 0, 0);
    let (mut acked_one_out, mut acked_after_two_out) = (0, 0);
    let mut total = sealog_fault::replicated::SimReport::default();
    for seed in seeds(1000) {
        total += run_seeds(&[seed], &config, &build).unwrap_or_else(|f| panic!("{f}"));
        let chaos = chaos_counts();
        kills += chaos.kills.load(Ordering::Relaxed);
        cut_offs += chaos.cut_offs.load(Ordering::Relaxed);
        two_out += chaos.two_out.load(Ordering::Relaxed);
        acked_one_out += chaos.acked_one_out.load(Ordering::Relaxed);
        acked_after_two_out += chaos.acked_after_two_out.load(Ordering::Relaxed);
    }
    println!(
        "simulated servers: {total}; {kills} servers killed, {cut_offs} cut off, {two_out} \
         times two out; appends acknowledged with one server out {acked_one_out}, after two \
         were out {acked_after_two_out}; in {:?}",
        started.elapsed()
    );
    if total.seeds >= 100 {
        assert!(total.appends_acked > total.seeds * 10, "{total}");
        assert!(
            total.indeterminate > 0 && total.reconfigurations > 0,
            "{total}"
        );
        assert!(kills > 0 && cut_offs > 0 && two_out > 0);
        // Appends go on with one server out, and resume after two were.
        assert!(acked_one_out > total.seeds && acked_after_two_out > total.seeds);
        assert!(
            total.faults.forgotten > 0 && total.faults.replies_lost > 0,
            "{total}"
        );
    }
}

#[test]
fn a_seed_replays_exactly() {
    let config = config("a_seed_replays_exactly");
    for seed in [3, 17] {
        let first = run_seed(seed, &config, &build).unwrap_or_else(|f| panic!("{f}"));
        let again = run_seed(seed, &config, &build).unwrap_or_else(|f| panic!("{f}"));
        assert_eq!(
            first.history.render(),
            again.history.render(),
            "seed {seed}"
        );
        assert_eq!(first.report.steps, again.report.steps, "seed {seed}");
    }
}
