//! The replicated log end to end in one process, over TLS on loopback: three LogDrive
//! servers, two sequencers and a client. The client appends while a server is stopped (a
//! write quorum remains), then the active sequencer is stopped: the client's next append
//! finds it gone, asks the other sequencer to install a segment, and goes on. Afterwards
//! every acknowledged append reads back at its position, no two share one, the old
//! segment's data drive refuses the old epoch's writes (ZW-1), and the chain names each
//! segment's sequencer. Then a replica whose ring is corrupted under it (seed 002's torn
//! records): its server refuses a strict open, serves the rest of the ring in quarantine,
//! the log reads every value through the quorum, and once the segment is sealed a repair
//! writes the damaged slots back from the replica's peers, durably.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::{append_acked, loopback, quick_options, ring_path, server};
use sealog_logdrive::{LogDrive, LogDriveError, MemLogDrive, ReadOutcome};
use sealog_server::log_client::{LogClient, LogClientOptions};
use sealog_server::loglet_spec::{LogletSpec, Pool};
use sealog_server::repair::repair_sealed;
use sealog_server::sequencer_client::Sequencers;
use sealog_server::sequencer_host::{Host, HostConfig};
use sealog_server::sequencer_service::SequencerServer;
use sealog_server::serve::{open_store, Recovery};
use sealog_server::{
    CertAuthority, ClientTls, Leaf, LogServer, RemoteOptions, Role, ServerOptions, TlsPem,
};
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

/// Three servers on rings in `dir`, `sequencers` sequencers, and a client that created the
/// log.
struct Cluster {
    servers: Vec<LogServer>,
    sequencers: Vec<SequencerServer>,
    client: LogClient,
}

async fn cluster(dir: &std::path::Path, pki: &Pki, sequencers: u64) -> Cluster {
    let mut servers = Vec::new();
    for name in ["s1", "s2", "s3"] {
        let tls = pki.pem(Leaf::server(name, &[]));
        servers.push(server(dir, name, loopback(), Some(tls)).await);
    }
    let group: Vec<String> = servers.iter().map(|s| s.addr().to_string()).collect();
    let meta: Arc<dyn MetaStore> =
        Arc::new(LogDriveMetaStore::new(Arc::new(MemLogDrive::new()), 1));
    let mut hosts = Vec::new();
    for index in 0..sequencers {
        hosts.push(sequencer(pki, index, vec![group.clone()], Arc::clone(&meta)).await);
    }
    let options = LogClientOptions {
        sequencers: hosts.iter().map(|host| host.addr().to_string()).collect(),
        remote: pki.remote("app", Role::Client),
        atomic: atomic(),
        virtual_options: virtual_options(),
    };
    let client = LogClient::open(meta, options, true)
        .await
        .expect("create the log");
    Cluster {
        servers,
        sequencers: hosts,
        client,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_go_on_through_a_dead_replica_and_a_dead_sequencer() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki(CertAuthority::new("test CA").unwrap());
    let Cluster {
        mut servers,
        mut sequencers,
        client,
    } = cluster(dir.path(), &pki, 2).await;
    let (first, second) = (sequencers.remove(0), sequencers.remove(0));
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

/// A value of 256 bytes whose first 64 no other value shares.
fn page(i: u64) -> Bytes {
    Bytes::from(format!("{i:05}-").repeat(43)[..256].to_string())
}

/// Flips a byte inside every copy of each of the first `count` of `values` found in the
/// ring at `ring` (a torn record: its checksum fails): how many values were.
fn corrupt(ring: &std::path::Path, values: &[Bytes], count: usize) -> usize {
    let files: Vec<std::path::PathBuf> = if ring.is_dir() {
        let mut files: Vec<_> = std::fs::read_dir(ring)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.file_name().is_some_and(|name| name != "control"))
            .collect();
        files.sort();
        files
    } else {
        vec![ring.to_path_buf()]
    };
    let mut flipped = 0;
    for value in values {
        let mut found = false;
        // Every copy: a record the reclaimer relocated is in the ring twice.
        for file in &files {
            let mut bytes = std::fs::read(file).unwrap();
            let needle = &value[..64];
            let copies: Vec<usize> = bytes
                .windows(needle.len())
                .enumerate()
                .filter(|(_, w)| *w == needle)
                .map(|(at, _)| at)
                .collect();
            for at in &copies {
                bytes[at + 100] ^= 0x40;
            }
            found |= !copies.is_empty();
            std::fs::write(file, &bytes).unwrap();
        }
        flipped += usize::from(found);
        if flipped == count {
            break;
        }
    }
    flipped
}

/// Asserts that a replica's `slot` holds `value` (inside the AtomicLog's record).
fn assert_holds(slot: u64, found: &ReadOutcome, value: &[u8]) {
    match found {
        ReadOutcome::Value(bytes) => {
            assert!(
                bytes.windows(value.len()).any(|w| w == value),
                "slot {slot}"
            );
        }
        other => panic!("slot {slot}: {other:?}"),
    }
}

/// Reads every slot below `length` of LogDrive `name` on the server at `addr` straight.
async fn slots(pki: &Pki, addr: &str, id: u64, generation: u64, length: u64) -> Vec<ReadOutcome> {
    let store = sealog_server::RemoteStore::connect(addr, pki.remote("check", Role::Client))
        .await
        .unwrap();
    let drive = store.drive(id, generation);
    let mut found = Vec::new();
    for address in 0..length {
        found.push(drive.read(address).await.unwrap());
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupted_replica_is_served_around_and_repaired_from_its_peers() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki(CertAuthority::new("test CA").unwrap());
    let Cluster {
        mut servers,
        mut sequencers,
        client,
    } = cluster(dir.path(), &pki, 1).await;
    let host = sequencers.remove(0);
    let values: Vec<Bytes> = (0..40).map(page).collect();
    for (position, value) in values.iter().enumerate() {
        assert_eq!(client.append(value.clone()).await.unwrap(), position as u64);
    }

    // s1 stops; three of its records are torn on disk. A strict open refuses the ring; a
    // quarantined one reports the damage and serves the rest.
    let addr = servers[0].addr();
    servers.remove(0).stop().await;
    let ring = ring_path(dir.path(), "s1");
    let spread: Vec<Bytes> = values.iter().skip(5).step_by(7).cloned().collect();
    assert_eq!(corrupt(&ring, &spread, 3), 3);
    assert!(open_store(&ring, Recovery::Strict).is_err());
    let store = open_store(&ring, Recovery::Quarantine).unwrap();
    assert!(!store.quarantine_report().is_empty());
    let tls = pki.pem(Leaf::server("s1", &[]));
    let s1 = LogServer::start(store, ServerOptions::new(addr, Some(tls)))
        .await
        .unwrap();
    let segment = client.chain().await.unwrap().active().clone();
    let data = LogletSpec::decode(&segment.loglet).unwrap().groups[0][0].data;
    let length = values.len() as u64;
    let s1_addr = addr.to_string();
    let torn = |slots: &[ReadOutcome]| -> Vec<usize> {
        let damaged = slots.iter().enumerate();
        damaged
            .filter(|(_, slot)| **slot == ReadOutcome::Damaged)
            .map(|(address, _)| address)
            .collect()
    };
    let found = slots(&pki, &s1_addr, data.id, data.generation, length).await;
    // The torn slots read Damaged; so may a slot s1 had not written when it stopped, if the
    // quarantine cannot rule out that a torn record held it.
    let found = torn(&found);
    assert!(
        [5, 12, 19].iter().all(|slot| found.contains(slot)),
        "{found:?}"
    );
    for (position, value) in values.iter().enumerate() {
        let read = client.read(position as u64).await.unwrap();
        assert_eq!(read.as_ref(), Some(value), "at {position}");
    }

    // Sealing the segment repairs it from the peers (the sequencer that installs the next
    // segment starts a repair pass; the quorum's reads may have filled some slots already);
    // an operator's pass finds nothing it cannot repair.
    client.reconfigure().await.unwrap();
    let pool = Arc::new(Pool::new(pki.remote("operator", Role::Operator)));
    let repaired = repair_sealed(&pool, &client.chain().await.unwrap())
        .await
        .unwrap();
    assert_eq!((repaired.unrepairable, repaired.unreachable), (0, 0));

    // The repair is durable: s1 restarted reads every value back.
    s1.stop().await;
    let store = open_store(&ring, Recovery::Quarantine).unwrap();
    let tls = pki.pem(Leaf::server("s1", &[]));
    let s1 = LogServer::start(store, ServerOptions::new(addr, Some(tls)))
        .await
        .unwrap();
    let healed = slots(&pki, &s1_addr, data.id, data.generation, length).await;
    for (address, slot) in healed.iter().enumerate() {
        assert_holds(address as u64, slot, &values[address]);
    }
    host.stop().await;
    s1.stop().await;
    for server in servers {
        server.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_made_without_is_created_and_filled_once_its_server_is_back() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki(CertAuthority::new("test CA").unwrap());
    let Cluster {
        mut servers,
        mut sequencers,
        client,
    } = cluster(dir.path(), &pki, 1).await;
    let host = sequencers.remove(0);
    let values: Vec<Bytes> = (0..30).map(page).collect();
    for value in &values[..10] {
        client.append(value.clone()).await.unwrap();
    }

    // s3 is down while the next segment is made: the segment names its replica there with
    // generation 0 and runs on the other two.
    let addr = servers[2].addr();
    servers.remove(2).stop().await;
    client.reconfigure().await.unwrap();
    let made_without = client.chain().await.unwrap().active().clone();
    let spec = LogletSpec::decode(&made_without.loglet).unwrap();
    assert_eq!(spec.groups[0][2].data.generation, 0, "{spec:?}");
    for value in &values[10..] {
        client.append(value.clone()).await.unwrap();
    }

    // s3 comes back; sealing the segment and repairing it creates and fills the replica.
    let tls = pki.pem(Leaf::server("s3", &[]));
    let s3 = server(dir.path(), "s3", addr, Some(tls)).await;
    client.reconfigure().await.unwrap();
    let pool = Arc::new(Pool::new(pki.remote("operator", Role::Operator)));
    let chain = client.chain().await.unwrap();
    let repaired = repair_sealed(&pool, &chain).await.unwrap();
    assert_eq!(
        (repaired.unreachable, repaired.absent),
        (0, 0),
        "{repaired:?}"
    );

    // A client finds the replica by its id, sealed at the segment's stop, holding every
    // value the segment took.
    let segment = chain
        .segments
        .iter()
        .find(|s| s.loglet.id == made_without.loglet.id)
        .unwrap();
    let (start, stop) = (segment.start, segment.stop.unwrap());
    assert_eq!((start, stop), (10, 30));
    let reader = Arc::new(Pool::new(pki.remote("reader", Role::Client)));
    let replica = Arc::clone(&reader.group(&spec, 0).await[2]);
    let found = replica.length().await.unwrap();
    assert_eq!(found.sealed, Some(stop - start), "{found:?}");
    for slot in 0..stop - start {
        let found = replica.read(slot).await.unwrap();
        assert_holds(slot, &found, &values[(start + slot) as usize]);
    }
    host.stop().await;
    s3.stop().await;
    for server in servers {
        server.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_many_more_than_the_window_take_each_position_once() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki(CertAuthority::new("test CA").unwrap());
    let Cluster {
        servers,
        sequencers,
        client,
    } = cluster(dir.path(), &pki, 1).await;
    // 300 appends at once on a window of 16: their slots are acquired and completed in
    // batches, a call for what queued while the last was in flight.
    let client = Arc::new(client);
    let mut appends = tokio::task::JoinSet::new();
    for i in 0..300u64 {
        let client = Arc::clone(&client);
        appends.spawn(async move { (i, client.append(page(i)).await) });
    }
    let mut positions = BTreeMap::new();
    while let Some(done) = appends.join_next().await {
        let (i, position) = done.unwrap();
        let position = position.unwrap_or_else(|e| panic!("append {i}: {e}"));
        assert_eq!(
            positions.insert(position, i),
            None,
            "position {position} twice"
        );
    }
    assert_eq!(positions.len(), 300);
    assert_eq!(
        positions.keys().copied().collect::<Vec<_>>(),
        (0..300).collect::<Vec<_>>()
    );
    assert_eq!(client.tail().await.unwrap(), 300);
    for (position, i) in &positions {
        assert_eq!(client.read(*position).await.unwrap(), Some(page(*i)));
    }
    for sequencer in sequencers {
        sequencer.stop().await;
    }
    for server in servers {
        server.stop().await;
    }
}
