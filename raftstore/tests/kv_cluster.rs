//! The key-value example end to end, as separate processes: three `sealog-kv node`s on their
//! own rings, a client writing and reading continuously, the leader SIGKILLed mid-run, the
//! survivors electing a new leader, the killed node restarted on its ring to catch up. At the
//! end every acknowledged write must be readable through the leader, and in the restarted
//! node's own state machine.

use std::fs::File;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sealog_openraft::kv::{Cluster, KvClient, NodeConfig, NodeId, StoreKind};

/// The log store the node processes run on.
const STORE: &str = "sealog";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_process_cluster_on_sealog() {
    in_process_cluster_replicates(StoreKind::Sealog).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_process_cluster_in_memory() {
    in_process_cluster_replicates(StoreKind::Mem).await;
}

#[cfg(feature = "peers")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_process_cluster_on_raft_engine() {
    in_process_cluster_replicates(StoreKind::RaftEngine).await;
}

/// The same cluster in one process, as the benchmark builds it: writes from concurrent
/// clients, all readable, on every node.
async fn in_process_cluster_replicates(store: StoreKind) {
    let dir = tempfile::tempdir().expect("tempdir");
    let small_ring = |config: &mut NodeConfig| config.ring_bytes = 64 << 20;
    let cluster = Cluster::start(3, store, dir.path(), small_ring).await;
    let cluster = cluster.expect("start");
    cluster.init().await.expect("init");
    let client = cluster.client();
    let writers = (0..4).map(|w| {
        let client = client.clone();
        tokio::spawn(async move {
            for i in 0..50 {
                client
                    .write(&format!("w{w}-{i}"), &format!("{i}"))
                    .await
                    .expect("write");
            }
        })
    });
    for writer in writers.collect::<Vec<_>>() {
        writer.await.expect("writer");
    }
    let last = cluster.nodes()[0].raft().metrics().borrow().last_log_index;
    for node in cluster.nodes() {
        let wait = node.raft().wait(Some(Duration::from_secs(10)));
        wait.applied_index_at_least(last, "replicated")
            .await
            .expect("applied");
        assert_eq!(node.state_machine().get("w3-49").as_deref(), Some("49"));
        assert_eq!(node.state_machine().len(), 200);
    }
    assert_eq!(
        client.read("w0-7").await.expect("read").as_deref(),
        Some("7")
    );
    cluster.shutdown().await.expect("shutdown");
}

/// The node processes, killed when the test ends however it ends.
struct Nodes {
    dir: PathBuf,
    addrs: Vec<String>,
    children: Vec<Option<Child>>,
    /// What the test was doing, printed after the node logs if it fails, where a truncated
    /// CI log still shows it.
    stage: Mutex<&'static str>,
}

impl Nodes {
    fn start(dir: &Path, n: usize) -> Nodes {
        let addrs = (0..n).map(|_| free_addr()).collect();
        let mut nodes = Nodes {
            dir: dir.into(),
            addrs,
            children: Vec::new(),
            stage: Mutex::new("starting the nodes"),
        };
        for id in 1..=n as NodeId {
            let child = nodes.spawn(id);
            nodes.children.push(Some(child));
        }
        nodes
    }

    fn spawn(&self, id: NodeId) -> Child {
        let log = self.dir.join(format!("node-{id}.log"));
        let log = File::options()
            .create(true)
            .append(true)
            .open(log)
            .expect("node log");
        let ring = self.dir.join(format!("node-{id}.ring"));
        Command::new(env!("CARGO_BIN_EXE_sealog-kv"))
            .args(["node", "--id", &id.to_string(), "--listen", self.addr(id)])
            .arg("--ring")
            .arg(ring)
            .args(["--store", STORE, "--ring-mib", "64"])
            // Snapshots and purges every few hundred writes, so the run covers the leader
            // sending a snapshot, and a restart loading its snapshot file before its log.
            .args(["--snapshot-every", "300", "--keep-logs", "100"])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn sealog-kv node")
    }

    fn at(&self, stage: &'static str) {
        *self.stage.lock().unwrap() = stage;
    }

    fn addr(&self, id: NodeId) -> &str {
        &self.addrs[id as usize - 1]
    }

    fn members(&self) -> Vec<(NodeId, String)> {
        self.addrs
            .iter()
            .enumerate()
            .map(|(i, a)| (i as NodeId + 1, a.clone()))
            .collect()
    }

    /// SIGKILL: `Child::kill` sends it on Unix.
    fn kill(&mut self, id: NodeId) {
        if let Some(mut child) = self.children[id as usize - 1].take() {
            child.kill().expect("kill node");
            child.wait().expect("reap node");
        }
    }

    fn restart(&mut self, id: NodeId) {
        let child = self.spawn(id);
        self.children[id as usize - 1] = Some(child);
    }
}

impl Drop for Nodes {
    fn drop(&mut self) {
        for id in 1..=self.children.len() as NodeId {
            self.kill(id);
        }
        if std::thread::panicking() {
            for id in 1..=self.children.len() {
                let log = self.dir.join(format!("node-{id}.log"));
                let text = std::fs::read_to_string(log).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(20).collect();
                eprintln!(
                    "--- node {id} log (last lines, newest first) ---\n{}",
                    tail.join("\n")
                );
            }
            let stage = *self.stage.lock().unwrap_or_else(|e| e.into_inner());
            eprintln!("--- the test failed while {stage} (its panic message is above)");
        }
    }
}

/// A loopback address no one listens on now: the OS picks the port.
fn free_addr() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("local addr").to_string()
}

async fn wait_for<F, Fut>(what: &str, timeout: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    while !check().await {
        assert!(
            start.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The leader as `addr` sees it.
async fn leader_of(client: &KvClient, addr: &str) -> Option<NodeId> {
    let status = client.status(addr).await.ok()?;
    status.leader.map(|l| l.id)
}

/// What the writer has had acknowledged: (key, value, log index).
type Acked = Arc<Mutex<Vec<(String, String, u64)>>>;

/// Writes `k<i>` = `v<i>` until stopped, recording every acknowledged write, and every tenth
/// write reads back an earlier acknowledged key through the leader.
async fn writer(client: KvClient, acked: Acked, stop: Arc<std::sync::atomic::AtomicBool>) {
    let mut i = 0u64;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let (key, value) = (format!("k{i}"), format!("v{i}-{}", i * 7919 % 1000));
        let index = client
            .write(&key, &value)
            .await
            .expect("write within the deadline");
        let earlier = {
            let mut acked = acked.lock().unwrap();
            acked.push((key, value, index));
            acked
                .get((i as usize * 31) % acked.len())
                .cloned()
                .filter(|_| i % 10 == 0)
        };
        if let Some((key, value, _)) = earlier {
            let read = client.read(&key).await.expect("read within the deadline");
            assert_eq!(read.as_deref(), Some(value.as_str()), "read of {key}");
        }
        i += 1;
    }
}

fn acked_len(acked: &Acked) -> usize {
    acked.lock().unwrap().len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_survive_a_killed_leader() {
    let started = Instant::now();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut nodes = Nodes::start(dir.path(), 3);
    let client = KvClient::new(nodes.addrs.clone());
    for id in 1..=3 {
        let addr = nodes.addr(id).to_string();
        wait_for("a node to serve", Duration::from_secs(10), || {
            let (client, addr) = (client.clone(), addr.clone());
            async move { client.status(&addr).await.is_ok() }
        })
        .await;
    }
    nodes.at("initializing the cluster");
    client
        .init(nodes.addr(1), &nodes.members())
        .await
        .expect("init");

    let acked: Acked = Arc::default();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writing = tokio::spawn(writer(client.clone(), acked.clone(), stop.clone()));
    tokio::time::sleep(Duration::from_secs(2)).await;

    nodes.at("finding the leader");
    let leader = leader_of(&client, nodes.addr(1))
        .await
        .expect("a leader after init");
    let before_kill = acked_len(&acked);
    assert!(before_kill > 0, "no write acknowledged before the kill");
    nodes.at("waiting for a new leader");
    nodes.kill(leader);
    let survivor = nodes.addr(if leader == 1 { 2 } else { 1 }).to_string();
    wait_for("a new leader", Duration::from_secs(10), || {
        let (client, survivor) = (client.clone(), survivor.clone());
        async move { matches!(leader_of(&client, &survivor).await, Some(l) if l != leader) }
    })
    .await;
    nodes.at("waiting for writes through the new leader");
    let at_new_leader = acked_len(&acked);
    wait_for(
        "writes after the new leader",
        Duration::from_secs(10),
        || {
            let acked = acked.clone();
            async move { acked_len(&acked) > at_new_leader + 20 }
        },
    )
    .await;

    nodes.at("writing on after restarting the killed leader");
    nodes.restart(leader);
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    writing.await.expect("writer");
    let acked = acked.lock().unwrap().clone();
    let last_index = acked
        .iter()
        .map(|(_, _, index)| *index)
        .max()
        .expect("acked writes");

    check_all(&nodes, &client, leader, &acked, last_index).await;
    eprintln!(
        "{} writes acknowledged ({before_kill} before the kill), all read back; {:?}",
        acked.len(),
        started.elapsed()
    );
}

/// Every acknowledged write reads back through the leader, and the restarted node has
/// applied past the last of them and holds every one in its own state machine.
async fn check_all(
    nodes: &Nodes,
    client: &KvClient,
    restarted: NodeId,
    acked: &[(String, String, u64)],
    last_index: u64,
) {
    let restarted = nodes.addr(restarted);
    nodes.at("reading every acknowledged write through the leader");
    for (key, value, _) in acked {
        let read = client.read(key).await.expect("final read");
        assert_eq!(read.as_deref(), Some(value.as_str()), "final read of {key}");
    }
    nodes.at("waiting for the restarted node to catch up");
    wait_for(
        "the restarted node to catch up",
        Duration::from_secs(15),
        || async move {
            let status = client.status(restarted).await;
            status.is_ok_and(|s| s.last_applied.is_some_and(|a| a >= last_index))
        },
    )
    .await;
    nodes.at("reading every acknowledged write on the restarted node");
    for (key, value, _) in acked {
        let read = client.read_local(restarted, key).await.expect("local read");
        assert_eq!(
            read.as_deref(),
            Some(value.as_str()),
            "restarted node's {key}"
        );
    }
}
