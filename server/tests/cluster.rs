//! The replicated log as processes, driven through the command line: `certs`, etcd, three
//! `serve` processes and two `sequencer`s on loopback, `create`, then a client appending
//! while a server is SIGKILLed and restarted on its ring, and the active sequencer is
//! SIGKILLed (the client moves to a segment the other installs); `status`, `reconfigure`,
//! `seal`, `tail` and `read` from the command line. Afterwards every acknowledged append
//! reads back at its position and the chain names each segment's sequencer.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::{append_acked, free_port, Etcd};
use sealog_server::log_client::{LogClient, LogClientOptions};
use sealog_server::meta_url::MetaUrl;
use sealog_server::{ClientTls, RemoteOptions};
use sealog_vlog::{AtomicOptions, VirtualOptions};
use serde_json::Value;

use common::procs::{listening, Procs, BIN};

fn addr() -> String {
    format!("127.0.0.1:{}", free_port())
}

fn serve_args(dir: &Path, name: &str, addr: &str) -> Vec<String> {
    let ring = dir.join(format!("{name}.ring")).display().to_string();
    let tls = dir.join("certs").display().to_string();
    [
        "serve",
        "--ring",
        &ring,
        "--ring-mib",
        "16",
        "--listen",
        addr,
        "--tls-dir",
        &tls,
        "--name",
        name,
    ]
    .map(String::from)
    .to_vec()
}

/// Runs a log command as `name`, returning its JSON.
fn cli(dir: &Path, reach: &[String], name: &str, args: &[&str]) -> Value {
    let output = Command::new(BIN)
        .args(args)
        .args(reach)
        .args(["--name", name])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{args:?}: {}\n{stdout}",
        String::from_utf8_lossy(&output.stderr)
    );
    let _ = dir;
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{args:?}: {e}: {stdout}"))
}

async fn append(client: &LogClient, i: u64, acked: &mut BTreeMap<u64, Bytes>) {
    append_acked(client, Bytes::from(format!("entry {i}")), acked).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_of_processes_survives_a_killed_server_and_a_killed_sequencer() {
    let Some(etcd) = Etcd::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path();
    let mut procs = Procs::new(path);
    let certs = path.join("certs").display().to_string();
    let made = Command::new(BIN)
        .args(["certs", "--dir", &certs])
        .stdout(Stdio::null())
        .status();
    assert!(made.unwrap().success(), "certs");

    let servers: Vec<String> = (0..3).map(|_| addr()).collect();
    for (i, server) in servers.iter().enumerate() {
        procs.spawn(
            &format!("s{}", i + 1),
            None,
            &serve_args(path, &format!("s{}", i + 1), server),
        );
    }
    let sequencers: Vec<String> = (0..2).map(|_| addr()).collect();
    let meta = format!(
        "etcd://{}/sealog/cluster-test",
        etcd.url().trim_start_matches("http://")
    );
    let reach: Vec<String> = [
        "--meta",
        &meta,
        "--sequencers",
        &sequencers.join(","),
        "--tls-dir",
        &certs,
    ]
    .map(String::from)
    .to_vec();
    for (index, sequencer) in sequencers.iter().enumerate() {
        let name = format!("q{}", index + 1);
        let mut args: Vec<String> = ["sequencer", "--listen", sequencer, "--index"]
            .map(String::from)
            .to_vec();
        args.extend([index.to_string(), "--group".into(), servers.join(",")]);
        args.extend(reach.iter().cloned());
        args.extend(["--name".into(), name.clone()]);
        procs.spawn(&name, None, &args);
    }
    for listener in servers.iter().chain(&sequencers) {
        listening(listener);
    }
    let created = cli(path, &reach, "operator", &["create"]);
    assert_eq!(created["loglet"], 1, "{created}");

    let remote = RemoteOptions {
        op_deadline: Duration::from_secs(2),
        tls: Some(ClientTls::from_dir(&path.join("certs"), "client").unwrap()),
        ..RemoteOptions::default()
    };
    let store = MetaUrl::parse(&meta).unwrap().open(&remote).await.unwrap();
    let options = LogClientOptions {
        sequencers: sequencers.clone(),
        remote,
        atomic: AtomicOptions::default(),
        virtual_options: VirtualOptions::default(),
    };
    let client = LogClient::open(Arc::clone(&store), options, false)
        .await
        .unwrap();
    let mut acked = BTreeMap::new();
    for i in 0..40 {
        append(&client, i, &mut acked).await;
    }
    // A server SIGKILLed and restarted on its ring while appends go on.
    procs.kill("s2");
    for i in 40..60 {
        append(&client, i, &mut acked).await;
    }
    procs.spawn("s2", None, &serve_args(path, "s2", &servers[1]));
    listening(&servers[1]);
    for i in 60..80 {
        append(&client, i, &mut acked).await;
    }
    // The active sequencer SIGKILLed: the client moves to a segment q2 installs.
    procs.kill("q1");
    for i in 80..120 {
        append(&client, i, &mut acked).await;
    }
    let status = cli(path, &reach, "operator", &["status"]);
    let segments = status["segments"].as_array().unwrap();
    assert!(segments.len() >= 2, "{status}");
    assert_eq!(
        segments.last().unwrap()["sequencer"],
        sequencers[1],
        "{status}"
    );

    // From the command line: a reconfiguration, a seal, appends after them, tail and read.
    let reconfigured = cli(path, &reach, "client", &["reconfigure"]);
    assert!(
        reconfigured["loglet"].as_u64().unwrap() > 1,
        "{reconfigured}"
    );
    cli(path, &reach, "operator", &["seal"]);
    let appended = cli(
        path,
        &reach,
        "client",
        &["append", "--value", "from the cli"],
    );
    let position = appended["position"].as_u64().unwrap();
    acked.insert(position, Bytes::from("from the cli"));
    for i in 120..130 {
        append(&client, i, &mut acked).await;
    }
    let tail = cli(path, &reach, "client", &["tail"]);
    assert_eq!(tail["tail"].as_u64().unwrap(), acked.len() as u64, "{tail}");
    let read = cli(
        path,
        &reach,
        "client",
        &["read", "--position", &position.to_string()],
    );
    assert_eq!(read["value"], "from the cli", "{read}");
    for (position, value) in &acked {
        assert_eq!(
            client.read(*position).await.unwrap().as_ref(),
            Some(value),
            "at {position}"
        );
    }
}
