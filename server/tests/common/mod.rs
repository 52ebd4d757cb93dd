//! What the server tests share: rings in a temporary directory, servers on loopback ports
//! the OS picks, clients that fail fast.

#![allow(dead_code)]

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
