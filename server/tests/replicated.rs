//! The replicated log end to end in one process, over TLS on loopback: three LogDrive
//! servers, two sequencers and a client. The client appends while a server is stopped (a
//! write quorum remains), then the active sequencer is stopped: the client's next append
//! finds it gone, asks the other sequencer to install a segment, and goes on. Afterwards
//! every acknowledged append reads back at its position, no two share one, the old
//! segment's data drive refuses the old epoch's writes (ZW-1), and the chain names each
//! segment's sequencer.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::{append_acked, loopback, quick_options, server};
use sealog_logdrive::{LogDriveError, MemLogDrive};
use sealog_server::log_client::{LogClient, LogClientOptions};
use sealog_server::loglet_spec::{LogletSpec, Pool};
use sealog_server::sequencer_client::Sequencers;
use sealog_server::sequencer_host::{Host, HostConfig};
use sealog_server::sequencer_service::SequencerServer;
use sealog_server::{CertAuthority, ClientTls, Leaf, RemoteOptions, Role, TlsPem};
use sealog_vlog::{AtomicOptions, LogDriveMetaStore, MetaStore, VirtualOptions};

struct Pki(CertAuthority);

impl Pki {
    fn pem(&self, leaf: Leaf) -> TlsPem {
        let issued = self.0.issue(&leaf).unwrap();
        TlsPem {
            ca: self.0.pem().as_bytes().to_vec(),
            cert: issued.cert_pem.into_bytes(),
            key: issued.key_pem.into_bytes(),
        }
    }

    fn remote(&self, name: &str, role: Role) -> RemoteOptions {
        let pem = self.pem(Leaf::client(name, role));
        RemoteOptions {
            tls: Some(ClientTls {
                ca_pem: pem.ca,
                identity: Some((pem.cert, pem.key)),
                server_name: sealog_server::certs::SERVER_NAME.into(),
            }),
            ..quick_options()
        }
    }
}

fn atomic() -> AtomicOptions {
    AtomicOptions {
        slot_deadline: Duration::from_secs(2),
        retry_after: Duration::from_millis(2),
        ..AtomicOptions::default()
    }
}

fn virtual_options() -> VirtualOptions {
    VirtualOptions {
        roll_forward_after: Duration::from_millis(300),
        ..VirtualOptions::default()
    }
}

async fn sequencer(
    pki: &Pki,
    index: u64,
    groups: Vec<Vec<String>>,
    meta: Arc<dyn MetaStore>,
) -> SequencerServer {
    let remote = pki.remote(&format!("seq{index}"), Role::Sequencer);
    let pool = Arc::new(Pool::new(remote.clone()));
    let sequencers = Arc::new(Sequencers::new(remote));
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let config = HostConfig {
        name: format!("seq{index}"),
        advertise: addr.to_string(),
        index,
        groups,
        write_quorum: 2,
        window: 16,
        waiting_max: 256,
        capacity: 1 << 30,
        virtual_options: virtual_options(),
        atomic: atomic(),
    };
    let host = Arc::new(Host::new(config, meta, pool, sequencers));
    let tls = pki.pem(Leaf::server(&format!("seq{index}"), &[]));
    SequencerServer::start(host, addr, Some(tls)).await.unwrap()
}

async fn append_all(client: &LogClient, from: u64, count: u64, acked: &mut BTreeMap<u64, Bytes>) {
    for i in from..from + count {
        append_acked(client, Bytes::from(format!("value {i}")), acked).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_go_on_through_a_dead_replica_and_a_dead_sequencer() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki(CertAuthority::new("test CA").unwrap());
    let mut servers = Vec::new();
    for name in ["s1", "s2", "s3"] {
        let tls = pki.pem(Leaf::server(name, &[]));
        servers.push(server(dir.path(), name, loopback(), Some(tls)).await);
    }
    let group: Vec<String> = servers.iter().map(|s| s.addr().to_string()).collect();
    let meta: Arc<dyn MetaStore> =
        Arc::new(LogDriveMetaStore::new(Arc::new(MemLogDrive::new()), 1));
    let first = sequencer(&pki, 0, vec![group.clone()], Arc::clone(&meta)).await;
    let second = sequencer(&pki, 1, vec![group.clone()], Arc::clone(&meta)).await;
    let options = LogClientOptions {
        sequencers: vec![first.addr().to_string(), second.addr().to_string()],
        remote: pki.remote("app", Role::Client),
        atomic: atomic(),
        virtual_options: virtual_options(),
    };
    let client = LogClient::open(Arc::clone(&meta), options, true)
        .await
        .expect("create the log");
    let mut acked = BTreeMap::new();
    append_all(&client, 0, 30, &mut acked).await;

    // A replica down: a write quorum of two remains.
    servers.remove(2).stop().await;
    append_all(&client, 30, 30, &mut acked).await;

    // The active sequencer dies: the client asks the other to take over.
    let old = client.chain().await.unwrap().active().clone();
    first.stop().await;
    append_all(&client, 60, 30, &mut acked).await;
    let chain = client.chain().await.unwrap();
    assert_eq!(chain.segments.len(), 2, "{chain:?}");
    let new = chain.active();
    assert_eq!(
        LogletSpec::decode(&new.loglet).unwrap().sequencer,
        second.addr().to_string()
    );
    assert!(new.epoch > old.epoch);

    // Every acknowledged append at its position, each position once, nothing past them.
    assert_eq!(client.tail().await.unwrap(), acked.len() as u64);
    for (position, value) in &acked {
        assert_eq!(
            client.read(*position).await.unwrap().as_ref(),
            Some(value),
            "at {position}"
        );
    }

    // ZW-1: the old segment's data drive, fenced by the reconfiguration, refuses a write of
    // the old epoch from a writer that still believes in it.
    let old_spec = LogletSpec::decode(&old.loglet).unwrap();
    let pool = Arc::new(Pool::new(pki.remote("zombie", Role::Client)));
    let (data, _) = pool.drives(&old_spec).await.unwrap();
    let zombie = data
        .write(10_000, old.epoch, Bytes::from_static(b"zombie"))
        .await
        .unwrap_err();
    assert!(
        matches!(
            zombie.cause(),
            LogDriveError::Fenced { .. } | LogDriveError::Sealed { .. }
        ),
        "{zombie}"
    );
    second.stop().await;
    for server in servers {
        server.stop().await;
    }
}
