//! The binary end to end: `sealog-server certs` writes a cluster's certificates, `serve`
//! runs a server with TLS on a ring it formats, a client writes through it, the server is
//! SIGKILLed and started again on the same ring and address, and every acknowledged write
//! reads back.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use sealog_logdrive::{LogDrive, ReadOutcome};
use sealog_server::{ClientTls, RemoteOptions, RemoteStore};

const BIN: &str = env!("CARGO_BIN_EXE_sealog-server");

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn serve(dir: &Path, addr: &str) -> Killed {
    let log = std::fs::File::options()
        .create(true)
        .append(true)
        .open(dir.join("server.log"))
        .unwrap();
    let child = Command::new(BIN)
        .args([
            "serve",
            "--listen",
            addr,
            "--name",
            "s1",
            "--ring-mib",
            "16",
        ])
        .arg("--ring")
        .arg(dir.join("s1.ring"))
        .arg("--tls-dir")
        .arg(dir.join("certs"))
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("spawn sealog-server serve");
    Killed(child)
}

async fn connect(dir: &Path, addr: &str) -> RemoteStore {
    let options = RemoteOptions {
        tls: Some(ClientTls::from_dir(&dir.join("certs"), "operator").unwrap()),
        ..RemoteOptions::default()
    };
    let started = Instant::now();
    loop {
        match RemoteStore::connect(addr, options.clone()).await {
            Ok(store) => return store,
            Err(error) if started.elapsed() < Duration::from_secs(20) => {
                let _ = error;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(error) => panic!("the server never answered: {error}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_server_restarts_on_its_ring_with_every_acknowledged_write() {
    let dir = tempfile::tempdir().unwrap();
    let status = Command::new(BIN)
        .args(["certs", "--dir"])
        .arg(dir.path().join("certs"))
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "certs failed");
    let addr = {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().to_string()
    };

    let server = serve(dir.path(), &addr);
    let store = connect(dir.path(), &addr).await;
    let drive = store.create(1, 1 << 16).await.unwrap();
    let writes: Vec<_> = (0..200u64)
        .map(|a| drive.write(a, 0, Bytes::from(a.to_le_bytes().to_vec())))
        .collect();
    let mut acked = Vec::new();
    for (address, write) in writes.into_iter().enumerate() {
        write.await.expect("write");
        acked.push(address as u64);
    }
    drop(server); // SIGKILL

    let _server = serve(dir.path(), &addr);
    let store = connect(dir.path(), &addr).await;
    let drive = store.drive(1, drive.generation());
    for address in acked {
        let value = Bytes::from(address.to_le_bytes().to_vec());
        assert_eq!(
            drive.read(address).await.unwrap(),
            ReadOutcome::Value(value)
        );
    }
}
