//! The replicated log across network namespaces, the failures a deployment sees. Three
//! LogDrive servers run each in a namespace of its own, joined to the test's bridge by a
//! veth pair; etcd, two sequencers and the client run outside. In each round (seeded
//! timing, the seed printed on failure) a client appends continuously while the test:
//! SIGKILLs a server and restarts it; partitions another by taking its link down and up;
//! SIGKILLs the active sequencer (the client moves to a segment the other installs); and
//! takes two servers out at once, where appends must stall, then resume once one is back.
//! Afterwards every acknowledged append reads at its position, no value appears at two
//! positions, and the old loglet refuses the old epoch's writes (ZW-1).
//!
//! Needs root and `ip` (iproute2); without them it says so and passes, except with
//! `CI=true`. Traffic goes only to loopback and the test's subnet: each namespace is checked
//! to have no default route before anything is sent. Namespaces, links and the bridge are
//! removed when the test ends, however it ends.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{free_port, Etcd};
use sealog_server::log_client::{LogClient, LogClientOptions};
use sealog_server::loglet_spec::{LogletSpec, Pool};
use sealog_server::meta_url::MetaUrl;
use sealog_server::{ClientTls, RemoteOptions};
use sealog_vlog::{AtomicOptions, VirtualOptions};

use common::procs::{listening, Procs, BIN};

/// Runs `ip` with `args`; its failure fails the test.
fn ip(args: &[&str]) {
    let output = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        output.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The test's network: a bridge with the host at .1, and a namespace per server at .11,
/// .12, ..., each behind a veth pair. Removed on drop.
struct Net {
    tag: String,
    subnet: String,
    servers: usize,
}

impl Net {
    fn new(servers: usize) -> Net {
        // Names unique to this process, short enough for interface names (15 bytes).
        let tag = format!("sl{}", std::process::id() % 100_000);
        let octet = 100 + std::process::id() % 100;
        let net = Net {
            tag,
            subnet: format!("10.{octet}.0"),
            servers,
        };
        net.remove();
        let bridge = net.bridge();
        ip(&["link", "add", &bridge, "type", "bridge"]);
        ip(&[
            "addr",
            "add",
            &format!("{}.1/24", net.subnet),
            "dev",
            &bridge,
        ]);
        ip(&["link", "set", &bridge, "up"]);
        for i in 1..=servers {
            let (ns, host, inner) = (net.ns(i), net.veth(i), format!("{}p{i}", net.tag));
            ip(&["netns", "add", &ns]);
            ip(&["link", "add", &host, "type", "veth", "peer", "name", &inner]);
            ip(&["link", "set", &inner, "netns", &ns]);
            ip(&["link", "set", &host, "master", &bridge]);
            ip(&["link", "set", &host, "up"]);
            let addr = format!("{}/24", net.addr(i));
            ip(&["-n", &ns, "addr", "add", &addr, "dev", &inner]);
            ip(&["-n", &ns, "link", "set", &inner, "up"]);
            ip(&["-n", &ns, "link", "set", "lo", "up"]);
            let routes = Command::new("ip")
                .args(["-n", &ns, "route"])
                .output()
                .unwrap();
            let routes = String::from_utf8_lossy(&routes.stdout);
            assert!(
                !routes.contains("default"),
                "{ns} has a route out: {routes}"
            );
        }
        net
    }

    fn bridge(&self) -> String {
        format!("{}br", self.tag)
    }

    fn ns(&self, i: usize) -> String {
        format!("{}-s{i}", self.tag)
    }

    fn veth(&self, i: usize) -> String {
        format!("{}h{i}", self.tag)
    }

    fn addr(&self, i: usize) -> String {
        format!("{}.{}", self.subnet, 10 + i)
    }

    /// Takes server `i`'s link down (a partition) or up.
    fn link(&self, i: usize, up: bool) {
        ip(&["link", "set", &self.veth(i), if up { "up" } else { "down" }]);
    }

    fn remove(&self) {
        for i in 1..=self.servers {
            let _ = Command::new("ip")
                .args(["link", "del", &self.veth(i)])
                .output();
            let _ = Command::new("ip")
                .args(["netns", "del", &self.ns(i)])
                .output();
        }
        let _ = Command::new("ip")
            .args(["link", "del", &self.bridge()])
            .output();
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        self.remove();
    }
}

/// Whether this machine can run the test: root and iproute2. With `CI=true` it must.
fn can_run() -> bool {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout == b"0\n");
    let ip = Command::new("ip").arg("-V").output().is_ok();
    if root && ip {
        return true;
    }
    assert!(
        std::env::var("CI").is_err(),
        "the netns test needs root and iproute2"
    );
    eprintln!("netns: needs root and iproute2: skipped");
    false
}

/// splitmix64: the round's timing and choices from its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn pause(&mut self) -> Duration {
        Duration::from_millis(200 + self.next() % 600)
    }
}

type Acked = Arc<std::sync::Mutex<BTreeMap<u64, Bytes>>>;

/// Appends `r<round>-<i>` until stopped (at most `count`), recording what is acknowledged;
/// a failed append is not acknowledged and the writer goes on.
async fn writer(
    client: Arc<LogClient>,
    round: u64,
    acked: Acked,
    stop: Arc<std::sync::atomic::AtomicBool>,
) {
    let started = Instant::now();
    for i in 0..20_000u64 {
        if stop.load(std::sync::atomic::Ordering::Relaxed)
            || started.elapsed() > Duration::from_secs(120)
        {
            return;
        }
        let value = Bytes::from(format!("r{round}-{i}"));
        match client.append(value.clone()).await {
            Ok(position) => {
                let twice = acked.lock().unwrap().insert(position, value);
                assert!(twice.is_none(), "position {position} acknowledged twice");
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}

fn count(acked: &Acked) -> usize {
    acked.lock().unwrap().len()
}

/// Waits until `more` appends beyond `from` are acknowledged (20 s at most).
async fn progress(acked: &Acked, from: usize, more: usize, what: &str) {
    let started = Instant::now();
    while count(acked) < from + more {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "no appends after {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

struct Round {
    net: Net,
    procs: Procs,
    dir: PathBuf,
    servers: Vec<String>,
}

impl Round {
    fn serve(&mut self, i: usize) {
        let name = format!("s{i}");
        let ring = self.dir.join(format!("{name}.ring")).display().to_string();
        let certs = self.dir.join("certs").display().to_string();
        let args = [
            "serve",
            "--ring",
            &ring,
            "--ring-mib",
            "16",
            "--listen",
            &self.servers[i - 1],
            "--tls-dir",
            &certs,
            "--name",
            &name,
        ]
        .map(String::from);
        let ns = self.net.ns(i);
        self.procs.spawn(&name, Some(&ns), &args);
    }
}

/// Starts a round's processes (servers in their namespaces, two sequencers) and a client
/// that created the log: the round, the client, and its connection options.
async fn start(seed: u64, etcd: &Etcd, dir: &Path) -> (Round, Arc<LogClient>, RemoteOptions) {
    let certs = dir.join("certs").display().to_string();
    let net = Net::new(3);
    let servers: Vec<String> = (1..=3).map(|i| format!("{}:7100", net.addr(i))).collect();
    let made = Command::new(BIN)
        .args(["certs", "--dir", &certs])
        .stdout(Stdio::null())
        .status();
    assert!(made.unwrap().success());
    let procs = Procs::new(dir);
    let mut round = Round {
        net,
        procs,
        dir: dir.into(),
        servers: servers.clone(),
    };
    for i in 1..=3 {
        round.serve(i);
    }
    let sequencers: Vec<String> = (0..2)
        .map(|_| format!("127.0.0.1:{}", free_port()))
        .collect();
    let meta = format!(
        "etcd://{}/sealog/netns-{seed}",
        etcd.url().trim_start_matches("http://")
    );
    let reach = [
        "--meta",
        &meta,
        "--sequencers",
        &sequencers.join(","),
        "--tls-dir",
        &certs,
        "--deadline-ms",
        "1000",
    ]
    .map(String::from);
    for (index, addr) in sequencers.iter().enumerate() {
        let mut args: Vec<String> = ["sequencer", "--listen", addr, "--group", &servers.join(",")]
            .map(String::from)
            .to_vec();
        args.extend([
            "--index".into(),
            index.to_string(),
            "--name".into(),
            format!("q{}", index + 1),
        ]);
        args.extend(reach.iter().cloned());
        round.procs.spawn(&format!("q{}", index + 1), None, &args);
    }
    for addr in servers.iter().chain(&sequencers) {
        listening(addr);
    }
    let remote = RemoteOptions {
        op_deadline: Duration::from_secs(1),
        connect_timeout: Duration::from_millis(300),
        tls: Some(ClientTls::from_dir(&dir.join("certs"), "client").unwrap()),
        ..RemoteOptions::default()
    };
    let store = MetaUrl::parse(&meta).unwrap().open(&remote).await.unwrap();
    let options = LogClientOptions {
        sequencers: sequencers.clone(),
        remote: remote.clone(),
        atomic: AtomicOptions {
            slot_deadline: Duration::from_secs(2),
            ..AtomicOptions::default()
        },
        virtual_options: VirtualOptions::default(),
    };
    let client = Arc::new(
        LogClient::open(Arc::clone(&store), options, true)
            .await
            .unwrap(),
    );
    (round, client, remote)
}

async fn round(seed: u64, etcd: &Etcd, dir: &Path) {
    let (mut round, client, remote) = start(seed, etcd, dir).await;
    let first = client.chain().await.unwrap().active().clone();
    let acked: Acked = Arc::default();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writing = tokio::spawn(writer(client.clone(), seed, acked.clone(), stop.clone()));
    progress(&acked, 0, 20, "the start").await;
    disturb(&mut round, &mut Rng(seed), &acked).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    writing.await.expect("the writer");
    check(&client, &acked, seed).await;
    sealed_prefix_everywhere(&client, dir, seed).await;

    // ZW-1: the first segment's loglet refuses its own epoch's writes now.
    let pool = Arc::new(Pool::new(remote));
    let (data, _) = pool
        .drives(&LogletSpec::decode(&first.loglet).unwrap())
        .await
        .unwrap();
    let zombie = data
        .write(1 << 30, first.epoch, Bytes::from_static(b"zombie"))
        .await;
    assert!(
        zombie.is_err(),
        "the old loglet took a write of its old epoch"
    );
}

/// The round's failures, while the writer appends: a server killed and restarted, another
/// partitioned and healed, the active sequencer killed, then two servers out at once (no
/// append may be acknowledged) until one comes back (appends resume).
async fn disturb(round: &mut Round, rng: &mut Rng, acked: &Acked) {
    let acked = acked.clone();
    // One server SIGKILLed and restarted; another partitioned and healed.
    let killed = 1 + (rng.next() % 3) as usize;
    let parted = 1 + (killed + (rng.next() % 2) as usize) % 3;
    round.procs.kill(&format!("s{killed}"));
    let at = count(&acked);
    progress(&acked, at, 10, "a server was killed").await;
    tokio::time::sleep(rng.pause()).await;
    round.serve(killed);
    round.net.link(parted, false);
    let at = count(&acked);
    progress(&acked, at, 10, "a server was partitioned").await;
    tokio::time::sleep(rng.pause()).await;
    round.net.link(parted, true);

    // The active sequencer SIGKILLed: the other installs a segment.
    round.procs.kill("q1");
    let at = count(&acked);
    progress(&acked, at, 10, "the sequencer was killed").await;

    // Two servers out: no append may be acknowledged; one back: appends resume.
    round.procs.kill(&format!("s{killed}"));
    round.net.link(parted, false);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let stalled = count(&acked);
    tokio::time::sleep(Duration::from_millis(1000) + rng.pause()).await;
    assert_eq!(
        count(&acked),
        stalled,
        "an append was acknowledged with two servers out"
    );
    round.net.link(parted, true);
    progress(&acked, stalled, 10, "a server came back").await;
    round.serve(killed);
    tokio::time::sleep(rng.pause()).await;
    // Back and serving before the checks, which read every replica.
    listening(&round.servers[killed - 1]);
}

/// After a repair pass (what `sealog-server repair` runs, as an operator), every replica of every
/// sealed segment, the ones that were killed or cut off while it was written among them and
/// the ones it was made without, holds the segment's whole prefix and is sealed at its stop.
async fn sealed_prefix_everywhere(client: &LogClient, dir: &Path, seed: u64) {
    let chain = client.chain().await.unwrap();
    let operator = RemoteOptions {
        op_deadline: Duration::from_secs(2),
        tls: Some(ClientTls::from_dir(&dir.join("certs"), "operator").unwrap()),
        ..RemoteOptions::default()
    };
    let pool = Arc::new(Pool::new(operator));
    let repaired = sealog_server::repair::repair_sealed(&pool, &chain)
        .await
        .unwrap();
    assert_eq!(
        (repaired.unreachable, repaired.absent),
        (0, 0),
        "seed {seed}: {repaired:?}"
    );
    for segment in chain.segments.iter().filter(|s| s.stop.is_some()) {
        let length = segment.stop.unwrap() - segment.start;
        let spec = LogletSpec::decode(&segment.loglet).unwrap();
        for replica in pool.group(&spec, 0).await {
            // Replicas a segment was made without (their server was down then) were
            // created by the repair.
            let found = replica.length().await.unwrap();
            assert_eq!(found.sealed, Some(length), "seed {seed}: {found:?}");
            for slot in found.first..length {
                let held = replica.read(slot).await.unwrap();
                assert!(
                    matches!(held, sealog_logdrive::ReadOutcome::Value(_)),
                    "seed {seed}: loglet {} slot {slot}: {held:?}",
                    segment.loglet.id
                );
            }
        }
    }
}

/// Every acknowledged append at its position; no value at two positions.
async fn check(client: &LogClient, acked: &Acked, seed: u64) {
    let acked = acked.lock().unwrap().clone();
    let tail = client.tail().await.unwrap();
    let mut seen = BTreeMap::new();
    for position in 0..tail {
        let value = client
            .read(position)
            .await
            .unwrap()
            .expect("below the tail");
        if let Some(earlier) = seen.insert(value.clone(), position) {
            panic!("seed {seed}: {value:?} at {earlier} and {position}");
        }
    }
    for (position, value) in &acked {
        assert_eq!(
            seen.get(value),
            Some(position),
            "seed {seed}: acknowledged {value:?}"
        );
    }
    eprintln!(
        "netns seed {seed}: {} acknowledged, tail {tail}",
        acked.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_survives_kills_and_partitions_across_namespaces() {
    if !can_run() {
        return;
    }
    let Some(etcd) = Etcd::start() else { return };
    let rounds: u64 = std::env::var("SEALOG_NETNS_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(2);
    let first: u64 = std::env::var("SEALOG_NETNS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5EA1);
    for seed in first..first + rounds {
        let dir = tempfile::tempdir().unwrap();
        eprintln!(
            "netns round, seed {seed} (replay: SEALOG_NETNS_SEED={seed} SEALOG_NETNS_ROUNDS=1 \
             cargo test --release -p sealog-server --test netns)"
        );
        round(seed, &etcd, dir.path()).await;
    }
}
