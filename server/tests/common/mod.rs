//! What the server tests share: rings in a temporary directory, servers on loopback ports
//! the OS picks, clients that fail fast.

#![allow(dead_code)]

pub mod procs;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use sealog_logdrive::{geometry, LogDriveStore, StoreOptions};
use sealog_server::{LogServer, RemoteOptions, ServerOptions, TlsPem};

/// Formats a 16 MiB ring at `dir/name.ring` (if it is not there) and opens its store.
pub fn store(dir: &Path, name: &str) -> LogDriveStore {
    let path = ring_path(dir, name);
    if !path.exists() {
        let options = geometry::format_options(16 << 20, None, 4096).expect("plan a ring");
        sealog::format(&path, &options).expect("format a ring");
    }
    LogDriveStore::open_with_options(&path, StoreOptions::default()).expect("open the store")
}

/// Where `store` puts ring `name`.
pub fn ring_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.ring"))
}

/// A loopback address with a port the OS picks.
pub fn loopback() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// Starts a server on ring `name` in `dir`, listening on `listen`.
pub async fn server(dir: &Path, name: &str, listen: SocketAddr, tls: Option<TlsPem>) -> LogServer {
    LogServer::start(store(dir, name), ServerOptions::new(listen, tls))
        .await
        .expect("start a server")
}

/// Client options with a short deadline, so that tests of unreachable servers are quick.
pub fn quick_options() -> RemoteOptions {
    RemoteOptions {
        op_deadline: Duration::from_secs(2),
        connect_timeout: Duration::from_millis(300),
        ..RemoteOptions::default()
    }
}

/// An etcd server of the test's own (Debian's `etcd-server`, 3.4), on loopback ports the OS
/// picked, its data in a temporary directory; killed when dropped.
pub struct Etcd {
    child: Option<std::process::Child>,
    data: tempfile::TempDir,
    client_url: String,
    peer_url: String,
}

/// A free loopback port.
pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("its address").port()
}

impl Etcd {
    /// Starts etcd, or says why it cannot: `None` when the binary is missing outside CI
    /// (with `CI=true` that is a failure: .ci/run installs it).
    pub fn start() -> Option<Etcd> {
        if std::process::Command::new("etcd")
            .arg("--version")
            .output()
            .is_err()
        {
            assert!(
                std::env::var("CI").is_err(),
                "etcd is not installed (apt-get install etcd-server)"
            );
            eprintln!("etcd is not installed: skipped (apt-get install etcd-server)");
            return None;
        }
        let mut etcd = Etcd {
            child: None,
            data: tempfile::tempdir().expect("etcd's data directory"),
            client_url: format!("http://127.0.0.1:{}", free_port()),
            peer_url: format!("http://127.0.0.1:{}", free_port()),
        };
        etcd.run();
        Some(etcd)
    }

    /// (Re)starts the process on the same data and ports.
    pub fn run(&mut self) {
        let log = std::fs::File::create(self.data.path().join("etcd.log")).expect("etcd log");
        let child = std::process::Command::new("etcd")
            .args(["--name", "test", "--data-dir"])
            .arg(self.data.path().join("data"))
            .args(["--listen-client-urls", &self.client_url])
            .args(["--advertise-client-urls", &self.client_url])
            .args(["--listen-peer-urls", &self.peer_url])
            .args(["--initial-advertise-peer-urls", &self.peer_url])
            .args(["--initial-cluster", &format!("test={}", self.peer_url)])
            .stdout(std::process::Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn etcd");
        self.child = Some(child);
        let port = self
            .client_url
            .rsplit(':')
            .next()
            .unwrap()
            .parse::<u16>()
            .unwrap();
        let started = std::time::Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "etcd did not listen within 20 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Its client URL.
    pub fn url(&self) -> String {
        self.client_url.clone()
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Appends `value` through `client`, recording its position in `acked`; a position
/// acknowledged twice fails the test.
pub async fn append_acked(
    client: &sealog_server::log_client::LogClient,
    value: bytes::Bytes,
    acked: &mut std::collections::BTreeMap<u64, bytes::Bytes>,
) {
    let position = client
        .append(value.clone())
        .await
        .unwrap_or_else(|e| panic!("append {value:?}: {e}"));
    assert!(
        acked.insert(position, value).is_none(),
        "position {position} acknowledged twice"
    );
}
