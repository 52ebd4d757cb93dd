//! A `RemoteLogDrive` behaves as the LogDrive it names: every operation's outcome, errors
//! with their fields and their definite or indeterminate nature, crosses the wire; its
//! futures can be waited on from a plain thread; a server's bound on operations in flight
//! holds with many more clients than slots; an unreachable server is an indeterminate error
//! naming it, and a server back on its address is found again; a quorum over three servers
//! writes on while one is down; many writes at once on one connection go out in a few
//! batches, each write with its own outcome.

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::{loopback, quick_options, server, store};
use sealog_logdrive::{wait, LogDrive, LogDriveError, QuorumLogDrive, QuorumOptions, ReadOutcome};
use sealog_server::{LogServer, RemoteOptions, RemoteStore, ServerOptions};

fn bytes(text: &str) -> Bytes {
    Bytes::copy_from_slice(text.as_bytes())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_operation_and_error_crosses_the_wire() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(dir.path(), "a", loopback(), None).await;
    let store = RemoteStore::connect(&server.addr().to_string(), RemoteOptions::default())
        .await
        .expect("connect");
    assert!(store.limits().payload_size_max_bytes > 0);
    let drive = store.create(7, 1 << 20).await.expect("create");
    assert!(matches!(
        store.create(7, 1 << 20).await,
        Err(LogDriveError::Exists { id: 7 })
    ));
    assert_eq!(store.list().await.unwrap(), vec![(7, drive.generation())]);

    drive.write(0, 1, bytes("zero")).await.expect("write 0");
    drive.write(2, 1, bytes("two")).await.expect("write 2");
    drive
        .write(0, 1, bytes("zero"))
        .await
        .expect("the same bytes again");
    let conflict = drive.write(0, 1, bytes("other")).await.unwrap_err();
    assert_eq!(conflict, LogDriveError::Conflict { address: 0 });
    assert!(conflict.is_definite());
    assert_eq!(
        drive.read(0).await.unwrap(),
        ReadOutcome::Value(bytes("zero"))
    );
    assert_eq!(drive.read(1).await.unwrap(), ReadOutcome::Unwritten);
    let tail = drive.weak_tail(8).await.unwrap();
    assert_eq!((tail.n, tail.holes.clone()), (3, BTreeSet::from([1])));
    let k_max = store.limits().weak_tail_k_max;
    assert_eq!(
        drive.weak_tail(k_max + 1).await.unwrap_err(),
        LogDriveError::InvalidWindow {
            k: k_max + 1,
            max: k_max
        }
    );

    drive.fence(5).await.expect("fence");
    assert_eq!(
        drive.write(1, 4, bytes("stale")).await.unwrap_err(),
        LogDriveError::Fenced { current: 5 }
    );
    drive.seal(3, 5).await.expect("seal");
    assert_eq!(
        drive.write(3, 5, bytes("late")).await.unwrap_err(),
        LogDriveError::Sealed { length: 3 }
    );
    drive.trim(1).await.expect("trim");
    assert_eq!(
        drive.read(0).await.unwrap(),
        ReadOutcome::Trimmed { first: 1 }
    );
    let length = drive.length().await.unwrap();
    assert_eq!(
        (length.n, length.sealed, length.fence, length.first),
        (3, Some(3), 5, 1)
    );
    let too_large = vec![0u8; store.limits().payload_size_max_bytes as usize + 1];
    assert!(matches!(
        drive.write(1, 5, Bytes::from(too_large)).await,
        Err(LogDriveError::TooLarge { .. })
    ));

    store.delete(7, drive.generation()).await.expect("delete");
    let missing = drive.read(2).await.unwrap_err();
    assert_eq!(
        missing,
        LogDriveError::Missing {
            id: 7,
            generation: drive.generation()
        }
    );
    let again = store.create(7, 1 << 20).await.expect("create again");
    assert!(again.generation() > drive.generation());
    assert!(
        matches!(
            store.delete(7, drive.generation()).await,
            Err(LogDriveError::Missing { .. })
        ),
        "deleting the old generation must not delete the new one"
    );
    assert_eq!(again.read(0).await.unwrap(), ReadOutcome::Unwritten);
    server.stop().await;
}

#[test]
fn a_remote_drive_is_waited_on_from_a_plain_thread() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let server = runtime.block_on(server(dir.path(), "a", loopback(), None));
    let addr = server.addr().to_string();
    let outcome = std::thread::spawn(move || {
        let store = wait(RemoteStore::connect(&addr, RemoteOptions::default())).expect("connect");
        let drive = wait(store.create(1, 1024)).expect("create");
        let writes: Vec<_> = (0..32)
            .map(|a| drive.write(a, 0, Bytes::from(vec![a as u8; 100])))
            .collect();
        for write in writes {
            wait(write).expect("write");
        }
        wait(drive.read(31)).expect("read")
    })
    .join()
    .expect("the thread");
    assert_eq!(outcome, ReadOutcome::Value(Bytes::from(vec![31u8; 100])));
    runtime.block_on(server.stop());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_clients_than_slots_are_served_or_refused_definitely() {
    let dir = tempfile::tempdir().unwrap();
    let mut options = ServerOptions::new(loopback(), None);
    options.in_flight_max = 2;
    let server = LogServer::start(store(dir.path(), "a"), options)
        .await
        .unwrap();
    let addr = server.addr().to_string();
    let store = RemoteStore::connect(&addr, RemoteOptions::default())
        .await
        .unwrap();
    let drive = store.create(1, 4096).await.unwrap();
    // 16 clients, each on a connection of its own (HTTP/2 holds one connection to the
    // server's stream limit), 16 writes each, on 2 slots and 2 waiting: most are refused
    // with Overloaded, which is definite, so those addresses must read unwritten; every
    // acknowledged one reads back.
    // The connections are made first and the writes then sent all together: a client's
    // writes go out in batches, so a client connecting while the last one's writes ran
    // could find the server idle again.
    let mut clients = Vec::new();
    for _ in 0..16u64 {
        let store = RemoteStore::connect(&addr, RemoteOptions::default())
            .await
            .unwrap();
        clients.push(store.drive(1, drive.generation()));
    }
    let mut writes = Vec::new();
    for (client, drive) in (0..16u64).zip(&clients) {
        for i in 0..16u64 {
            let address = client * 16 + i;
            let payload = Bytes::from(address.to_le_bytes().to_vec());
            writes.push((address, drive.write(address, 0, payload)));
        }
    }
    let (mut acked, mut refused) = (Vec::new(), Vec::new());
    for (address, write) in writes {
        match write.await {
            Ok(()) => acked.push(address),
            Err(LogDriveError::Overloaded { in_flight_max: 2 }) => refused.push(address),
            Err(other) => panic!("write {address}: {other}"),
        }
    }
    assert!(!acked.is_empty(), "no write got a slot");
    assert!(
        !refused.is_empty(),
        "16 clients never met the bound of 2 + 2"
    );
    for address in &acked {
        let value = Bytes::from(address.to_le_bytes().to_vec());
        assert_eq!(
            drive.read(*address).await.unwrap(),
            ReadOutcome::Value(value)
        );
    }
    for address in &refused {
        assert_eq!(drive.read(*address).await.unwrap(), ReadOutcome::Unwritten);
    }
    assert_eq!(server.stats().overloaded, refused.len() as u64);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_server_is_indeterminate_and_found_again_on_its_address() {
    let dir = tempfile::tempdir().unwrap();
    let first = server(dir.path(), "a", loopback(), None).await;
    let addr = first.addr();
    let store = RemoteStore::connect(&addr.to_string(), quick_options())
        .await
        .unwrap();
    let drive = store.create(3, 1024).await.unwrap();
    drive.write(0, 0, bytes("before")).await.unwrap();
    first.stop().await;

    let started = std::time::Instant::now();
    let error = drive.write(1, 0, bytes("while down")).await.unwrap_err();
    assert!(!error.is_definite(), "{error}");
    assert!(
        error.to_string().contains(&addr.port().to_string()),
        "{error}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );

    // The same ring, the same address: the client reconnects on its own.
    let second = server(dir.path(), "a", addr, None).await;
    drive
        .write(1, 0, bytes("after"))
        .await
        .expect("write after the restart");
    assert_eq!(
        drive.read(0).await.unwrap(),
        ReadOutcome::Value(bytes("before"))
    );
    second.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quorum_of_three_servers_writes_on_with_one_down() {
    let dir = tempfile::tempdir().unwrap();
    let mut servers = Vec::new();
    let mut children: Vec<Arc<dyn LogDrive>> = Vec::new();
    for name in ["a", "b", "c"] {
        let server = server(dir.path(), name, loopback(), None).await;
        let store = RemoteStore::connect(&server.addr().to_string(), quick_options())
            .await
            .unwrap();
        children.push(Arc::new(store.create(9, 1 << 16).await.unwrap()));
        servers.push(server);
    }
    let quorum = QuorumLogDrive::new(children, 2, QuorumOptions::default()).unwrap();
    for address in 0..20 {
        quorum
            .write(address, 1, bytes(&format!("v{address}")))
            .await
            .unwrap();
    }
    servers.remove(2).stop().await;
    for address in 20..40 {
        quorum
            .write(address, 1, bytes(&format!("v{address}")))
            .await
            .expect("a write quorum remains");
    }
    for address in 0..40 {
        let expected = ReadOutcome::Value(bytes(&format!("v{address}")));
        assert_eq!(quorum.read(address).await.unwrap(), expected);
    }
    assert_eq!(quorum.weak_tail(64).await.unwrap().n, 40);
    for server in servers {
        server.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_in_flight_together_go_out_in_batches_with_their_own_outcomes() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(dir.path(), "a", loopback(), None).await;
    let store = RemoteStore::connect(&server.addr().to_string(), RemoteOptions::default())
        .await
        .unwrap();
    let drive = store.create(1, 1 << 16).await.unwrap();
    // Generation 9 is not live: those writes alone answer Missing, in the same batches.
    let stale = store.drive(1, 9);
    let mut writes = Vec::new();
    for address in 0..512u64 {
        let payload = Bytes::from(vec![address as u8; 1000]);
        let write = match address % 64 {
            7 => stale.write(address, 0, payload),
            _ => drive.write(address, 0, payload),
        };
        writes.push((address, write));
    }
    for (address, write) in writes {
        match (address % 64, write.await) {
            (
                7,
                Err(LogDriveError::Missing {
                    id: 1,
                    generation: 9,
                }),
            ) => {}
            (7, other) => panic!("write {address} to a stale generation: {other:?}"),
            (_, outcome) => outcome.unwrap_or_else(|e| panic!("write {address}: {e}")),
        }
    }
    let stats = server.stats();
    // The create, and the 504 writes to the live generation.
    assert_eq!(stats.served, 505);
    assert!(
        stats.write_batches < 128,
        "512 writes in flight went out in {} batches",
        stats.write_batches
    );
    for address in 0..512u64 {
        let expected = match address % 64 {
            7 => ReadOutcome::Unwritten,
            _ => ReadOutcome::Value(Bytes::from(vec![address as u8; 1000])),
        };
        assert_eq!(drive.read(address).await.unwrap(), expected, "at {address}");
    }
    server.stop().await;
}
