//! `sealog-kv`: the replicated key-value example on the command line. `node` runs one node
//! (src/kv/node.rs) on a ring; `init`, `put`, `get` and `status` are clients of a running
//! cluster. Errors are one sentence on stderr and a non-zero exit.

#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use openraft::SnapshotPolicy;
use sealog_openraft::kv::{KvClient, Node, NodeConfig, NodeId, StoreKind};

#[derive(Parser)]
#[command(about = "A replicated key-value store on openraft, with sealog as its log store")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a node until killed; formats the ring first if it does not exist.
    Node(NodeArgs),
    /// Initialize a cluster through the node at --addr, which must be one of the members.
    Init {
        /// The node to initialize through.
        #[arg(long)]
        addr: String,
        /// Every member as ID=ADDR, comma-separated: 1=127.0.0.1:7001,2=...
        #[arg(long, value_parser = parse_members)]
        members: Members,
    },
    /// Set KEY to VALUE (through the leader, found from --addr).
    Put {
        /// Any member of the cluster.
        #[arg(long)]
        addr: String,
        /// The key.
        key: String,
        /// The value.
        value: String,
    },
    /// Print KEY's value, read linearizably through the leader.
    Get {
        /// Any member of the cluster.
        #[arg(long)]
        addr: String,
        /// The key.
        key: String,
    },
    /// Print the raft status of the node at --addr.
    Status {
        /// The node.
        #[arg(long)]
        addr: String,
    },
}

/// The options of `sealog-kv node`.
#[derive(clap::Args)]
struct NodeArgs {
    /// This node's id (1, 2, 3, ...).
    #[arg(long)]
    id: NodeId,
    /// The address to serve gRPC on, e.g. 127.0.0.1:7001.
    #[arg(long)]
    listen: SocketAddr,
    /// The ring (sealog formats it here if it is missing); the snapshot goes next to it.
    #[arg(long)]
    ring: PathBuf,
    /// The log store: sealog, mem (or raft-engine, with the `peers` feature).
    #[arg(long, default_value = "sealog")]
    store: StoreKind,
    /// The size a new ring is formatted with, in MiB.
    #[arg(long, default_value_t = 256)]
    ring_mib: u64,
    /// Build a snapshot (and write it next to the ring) every this many entries.
    #[arg(long, default_value_t = 5000)]
    snapshot_every: u64,
    /// Entries kept in the log behind the last snapshot; older ones are purged.
    #[arg(long, default_value_t = 1000)]
    keep_logs: u64,
}

/// The members of `init --members`, in order.
#[derive(Clone, Debug)]
struct Members(Vec<(NodeId, String)>);

fn parse_members(s: &str) -> Result<Members, String> {
    let parse_one = |item: &str| {
        let (id, addr) = item
            .split_once('=')
            .ok_or(format!("{item:?} is not ID=ADDR"))?;
        let id = id
            .trim()
            .parse()
            .map_err(|_| format!("{id:?} is not a node id"))?;
        Ok::<_, String>((id, addr.trim().to_string()))
    };
    let members = s.split(',').map(parse_one).collect::<Result<Vec<_>, _>>()?;
    Ok(Members(members))
}

#[tokio::main]
async fn main() -> ExitCode {
    init_log();
    match run(Cli::parse().command).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("sealog-kv: {message}");
            ExitCode::FAILURE
        }
    }
}

/// Warnings and errors of openraft and the store go to stderr, so that a node's log says why
/// it stepped down or failed a write; `SEALOG_KV_LOG` raises or lowers the level.
fn init_log() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("SEALOG_KV_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
}

async fn run(command: Command) -> Result<(), String> {
    let client = |addr: &str| KvClient::new([addr.to_string()]);
    match command {
        Command::Node(args) => run_node(args).await,
        Command::Init { addr, members } => {
            client(&addr)
                .init(&addr, &members.0)
                .await
                .map_err(|e| e.to_string())?;
            println!("initialized a cluster of {} nodes", members.0.len());
            Ok(())
        }
        Command::Put { addr, key, value } => {
            let index = client(&addr)
                .write(&key, &value)
                .await
                .map_err(|e| e.to_string())?;
            println!("ok (log index {index})");
            Ok(())
        }
        Command::Get { addr, key } => match client(&addr).read(&key).await {
            Ok(Some(value)) => {
                println!("{value}");
                Ok(())
            }
            Ok(None) => Err(format!("key {key:?} has no value")),
            Err(e) => Err(e.to_string()),
        },
        Command::Status { addr } => {
            let s = client(&addr)
                .status(&addr)
                .await
                .map_err(|e| e.to_string())?;
            print_status(&s);
            Ok(())
        }
    }
}

async fn run_node(args: NodeArgs) -> Result<(), String> {
    let mut config = NodeConfig::new(args.id, args.listen, args.ring, args.store);
    config.ring_bytes = args.ring_mib << 20;
    config.raft.snapshot_policy = SnapshotPolicy::LogsSinceLast(args.snapshot_every);
    config.raft.max_in_snapshot_log_to_keep = args.keep_logs;
    let node = Node::start(config).await.map_err(|e| e.to_string())?;
    eprintln!("sealog-kv: node {} serving on {}", args.id, node.addr());
    // Runs until killed: every write is durable in the log store before it is acknowledged,
    // so there is nothing to flush on the way out. A Raft core that stopped (a storage
    // error is fatal to it) is fail-stop for the process: serving on without it would only
    // answer every call with an error, and a supervisor restarting the node recovers it.
    let mut metrics = node.raft().metrics();
    loop {
        if let Err(fatal) = &metrics.borrow().running_state {
            return Err(format!("node {}: Raft stopped: {fatal}", args.id));
        }
        if metrics.changed().await.is_err() {
            return Err(format!("node {}: Raft stopped", args.id));
        }
    }
}

fn print_status(s: &sealog_openraft::kv::pb::StatusReply) {
    let show = |v: Option<u64>| v.map_or("-".to_string(), |v| v.to_string());
    println!("id: {}", s.id);
    println!("state: {}", s.state);
    println!("term: {}", s.term);
    match &s.leader {
        Some(l) => println!("leader: {} ({})", l.id, l.addr),
        None => println!("leader: -"),
    }
    println!("last_log_index: {}", show(s.last_log_index));
    println!("last_applied: {}", show(s.last_applied));
    let members: Vec<String> = s
        .members
        .iter()
        .map(|m| format!("{}={}", m.id, m.addr))
        .collect();
    println!("members: {}", members.join(","));
    println!("voters: {:?}", s.voters);
}
