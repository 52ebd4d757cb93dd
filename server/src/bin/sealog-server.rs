//! `sealog-server`: `serve` runs a LogDrive server on a ring (formatting it first if it does
//! not exist); `sequencer` runs a sequencer of a replicated log; `certs` makes a test CA and
//! certificates for a local cluster; `create`, `append`, `read`, `tail`, `seal`,
//! `reconfigure`, `status` and `repair` are clients of a log (docs/server.md), each printing
//! one JSON object. Errors are one sentence on stderr and a non-zero exit.

#![forbid(unsafe_code)]

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use bytes::Bytes;
use clap::{Parser, Subcommand};
use sealog_logdrive::geometry;
use sealog_server::commands::{run_log_command, run_sequencer, LogCommand, Reach};
use sealog_server::sequencer_host::HostConfig;
use sealog_server::serve::{open_store, Recovery};
use sealog_server::{LogServer, Role, ServerOptions, TlsFiles};

#[derive(Parser)]
#[command(about = "A reference log server: LogDrives over gRPC with mutual TLS")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the LogDrives of the store on --ring until killed.
    Serve(ServeArgs),
    /// Make a test CA and certificates for a local cluster.
    Certs(CertsArgs),
    /// Run a sequencer of the log in --meta until killed.
    Sequencer {
        #[command(flatten)]
        reach: ReachArgs,
        #[command(flatten)]
        args: SequencerCli,
    },
    /// Create the log (its first segment, on the first sequencer that answers).
    Create(ReachArgs),
    /// Append --value; prints its position.
    Append {
        #[command(flatten)]
        reach: ReachArgs,
        /// The value (UTF-8).
        #[arg(long)]
        value: String,
    },
    /// Read the entry at --position.
    Read {
        #[command(flatten)]
        reach: ReachArgs,
        /// The position.
        #[arg(long)]
        position: u64,
    },
    /// The first position not written.
    Tail(ReachArgs),
    /// Set the active segment's seal bit (the next append moves to a new segment).
    Seal(ReachArgs),
    /// Seal the active segment and install a new one on a sequencer.
    Reconfigure(ReachArgs),
    /// The chain: each segment with its epoch and sequencer.
    Status(ReachArgs),
    /// Bring every replica of every sealed segment to its sealed length from its peers.
    Repair(ReachArgs),
}

#[derive(clap::Args)]
struct ReachArgs {
    /// Where the chain lives: etcd://HOST:PORT/KEY or logdrive://HOST:PORT/ID/GENERATION.
    #[arg(long)]
    meta: String,
    /// The sequencers, comma-separated HOST:PORTs.
    #[arg(long, value_delimiter = ',')]
    sequencers: Vec<String>,
    /// The directory `certs` wrote.
    #[arg(long, required_unless_present = "no_tls")]
    tls_dir: Option<PathBuf>,
    /// This caller's name in --tls-dir.
    #[arg(long, default_value = "client")]
    name: String,
    /// Plain connections (servers started with --no-tls).
    #[arg(long)]
    no_tls: bool,
    /// The longest one call may take, in milliseconds.
    #[arg(long, default_value_t = 5000)]
    deadline_ms: u64,
}

impl ReachArgs {
    fn reach(&self) -> Reach {
        Reach {
            meta: self.meta.clone(),
            sequencers: self.sequencers.clone(),
            tls_dir: if self.no_tls {
                None
            } else {
                self.tls_dir.clone()
            },
            name: self.name.clone(),
            deadline: Duration::from_millis(self.deadline_ms),
        }
    }
}

#[derive(clap::Args)]
struct SequencerCli {
    /// The address to listen on.
    #[arg(long)]
    listen: SocketAddr,
    /// The address clients reach it at (default: --listen).
    #[arg(long)]
    advertise: Option<String>,
    /// This sequencer's index among the cluster's sequencers (0 to 255).
    #[arg(long, default_value_t = 0)]
    index: u64,
    /// A quorum group of LogDrive servers, comma-separated (repeat for stripes).
    #[arg(long = "group", required = true)]
    groups: Vec<String>,
    /// Replicas of a group that must take a write.
    #[arg(long, default_value_t = 2)]
    write_quorum: usize,
    /// Slots in flight per loglet.
    #[arg(long, default_value_t = 64)]
    window: u64,
    /// Calls that may wait on it before it answers Overloaded.
    #[arg(long, default_value_t = 4096)]
    waiting_max: usize,
}

#[derive(clap::Args)]
struct ServeArgs {
    /// The ring (a file or a block device).
    #[arg(long)]
    ring: PathBuf,
    /// Format a ring of this many MiB when --ring does not exist.
    #[arg(long, default_value_t = 256)]
    ring_mib: u64,
    /// The address to listen on.
    #[arg(long)]
    listen: SocketAddr,
    /// The directory `certs` wrote (ca.pem, NAME.pem, NAME.key).
    #[arg(long, required_unless_present = "no_tls")]
    tls_dir: Option<PathBuf>,
    /// This server's name in --tls-dir.
    #[arg(long, default_value = "s1")]
    name: String,
    /// Serve plain HTTP/2 and trust every caller (a trusted network only).
    #[arg(long)]
    no_tls: bool,
    /// Operations running at once (as many more may wait).
    #[arg(long, default_value_t = 1024)]
    in_flight_max: usize,
    /// A ring with damaged records: serve around them until peers repair them
    /// (quarantine), or refuse to start (strict).
    #[arg(long, value_enum, default_value_t = Recovery::Quarantine)]
    recovery: Recovery,
}

#[derive(clap::Args)]
struct CertsArgs {
    /// Where to write the files.
    #[arg(long)]
    dir: PathBuf,
    /// A server: NAME or NAME=IP,IP (repeatable; default s1, s2 and s3).
    #[arg(long = "server")]
    servers: Vec<String>,
    /// A sequencer: NAME or NAME=IP,IP (repeatable; default q1 and q2). Its certificate is
    /// a server's and a client's of the sequencer role.
    #[arg(long = "sequencer")]
    sequencers: Vec<String>,
    /// A client: NAME=ROLE, ROLE one of client, sequencer, operator (repeatable; default
    /// client, sequencer and operator, each of its own role).
    #[arg(long = "client")]
    clients: Vec<String>,
}

#[tokio::main]
async fn main() -> ExitCode {
    init_log();
    let outcome = match Cli::parse().command {
        Command::Serve(args) => serve(args).await,
        Command::Certs(args) => certs(args),
        Command::Sequencer { reach, args } => sequencer(reach, args).await,
        Command::Create(reach) => log(&reach, LogCommand::Create).await,
        Command::Append { reach, value } => {
            log(&reach, LogCommand::Append(Bytes::from(value))).await
        }
        Command::Read { reach, position } => log(&reach, LogCommand::Read(position)).await,
        Command::Tail(reach) => log(&reach, LogCommand::Tail).await,
        Command::Seal(reach) => log(&reach, LogCommand::Seal).await,
        Command::Reconfigure(reach) => log(&reach, LogCommand::Reconfigure).await,
        Command::Status(reach) => log(&reach, LogCommand::Status).await,
        Command::Repair(reach) => log(&reach, LogCommand::Repair).await,
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("sealog-server: {message}");
            ExitCode::FAILURE
        }
    }
}

/// Warnings (refused handshakes and requests among them) on stderr; `SEALOG_SERVER_LOG`
/// sets the level as an EnvFilter directive.
fn init_log() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("SEALOG_SERVER_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
}

async fn serve(args: ServeArgs) -> Result<(), String> {
    if !args.ring.exists() {
        let size_bytes = args.ring_mib << 20;
        let options = geometry::format_options(size_bytes, None, 4096)
            .map_err(|e| format!("planning a ring of {size_bytes} bytes: {e}"))?;
        sealog::format(&args.ring, &options)
            .map_err(|e| format!("formatting {}: {e}", args.ring.display()))?;
    }
    let tls = match (&args.tls_dir, args.no_tls) {
        (_, true) => None,
        (Some(dir), false) => Some(
            TlsFiles::in_dir(dir, &args.name)
                .read()
                .map_err(|e| e.to_string())?,
        ),
        (None, false) => return Err("--tls-dir or --no-tls is needed".into()),
    };
    let store = open_store(&args.ring, args.recovery)
        .map_err(|e| format!("opening {}: {e}", args.ring.display()))?;
    let damaged = store.quarantine_report().len();
    if damaged > 0 {
        eprintln!(
            "sealog-server: {} holds {damaged} damaged ranges, answered as Damaged until \
             `sealog-server repair` writes them back from peers",
            args.ring.display()
        );
    }
    let mut options = ServerOptions::new(args.listen, tls);
    options.in_flight_max = args.in_flight_max;
    let server = LogServer::start(store, options)
        .await
        .map_err(|e| e.to_string())?;
    eprintln!("sealog-server: {} serving on {}", args.name, server.addr());
    // Runs until killed: every acknowledged operation is durable in the store already.
    std::future::pending::<()>().await;
    Ok(())
}

async fn sequencer(reach: ReachArgs, args: SequencerCli) -> Result<(), String> {
    let groups = args
        .groups
        .iter()
        .map(|group| group.split(',').map(|a| a.trim().to_string()).collect())
        .collect();
    let config = HostConfig {
        name: reach.name.clone(),
        advertise: args.advertise.unwrap_or_else(|| args.listen.to_string()),
        index: args.index,
        groups,
        write_quorum: args.write_quorum,
        window: args.window,
        waiting_max: args.waiting_max,
        capacity: 1 << 40,
        virtual_options: Default::default(),
        atomic: Default::default(),
    };
    run_sequencer(&reach.reach(), args.listen, config).await
}

async fn log(reach: &ReachArgs, command: LogCommand) -> Result<(), String> {
    let printed = run_log_command(&reach.reach(), command).await?;
    println!("{printed}");
    Ok(())
}

fn certs(args: CertsArgs) -> Result<(), String> {
    let servers = if args.servers.is_empty() {
        ["s1", "s2", "s3"]
            .map(|s| (s.to_string(), Vec::new()))
            .to_vec()
    } else {
        args.servers
            .iter()
            .map(|s| parse_server(s))
            .collect::<Result<_, _>>()?
    };
    let clients = if args.clients.is_empty() {
        [Role::Client, Role::Sequencer, Role::Operator]
            .map(|role| (role.name().to_string(), role))
            .to_vec()
    } else {
        args.clients
            .iter()
            .map(|c| parse_client(c))
            .collect::<Result<_, _>>()?
    };
    let sequencers = if args.sequencers.is_empty() {
        ["q1", "q2"].map(|s| (s.to_string(), Vec::new())).to_vec()
    } else {
        args.sequencers
            .iter()
            .map(|s| parse_server(s))
            .collect::<Result<_, _>>()?
    };
    let written = sealog_server::certs::write_cluster(&args.dir, &servers, &sequencers, &clients)
        .map_err(|e| e.to_string())?;
    for path in written {
        println!("{}", path.display());
    }
    Ok(())
}

fn parse_server(spec: &str) -> Result<(String, Vec<IpAddr>), String> {
    let Some((name, addresses)) = spec.split_once('=') else {
        return Ok((spec.to_string(), Vec::new()));
    };
    let addresses = addresses
        .split(',')
        .map(|a| {
            a.trim()
                .parse()
                .map_err(|_| format!("{a:?} is not an IP address"))
        })
        .collect::<Result<_, _>>()?;
    Ok((name.to_string(), addresses))
}

fn parse_client(spec: &str) -> Result<(String, Role), String> {
    let (name, role) = spec
        .split_once('=')
        .ok_or(format!("{spec:?} is not NAME=ROLE"))?;
    let role = Role::parse(role).ok_or(format!(
        "{role:?} is not a role (client, sequencer, operator)"
    ))?;
    Ok((name.to_string(), role))
}
