//! Only those who belong get in: a caller without a certificate is refused with
//! `UNAUTHENTICATED`, one whose certificate another CA signed or that has expired fails its
//! handshake, a client asking to fence, seal, trim, create or delete is refused with
//! `PERMISSION_DENIED`; each refusal is counted (and logged), and changes nothing. A stream
//! of malformed requests, raw garbage and stalled handshakes leaves the server serving.

mod common;

use std::io::Write;
use std::time::Duration;

use bytes::Bytes;
use common::{loopback, quick_options, server};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use sealog_logdrive::{LogDrive, LogDriveError, ReadOutcome};
use sealog_server::certs::SERVER_NAME;
use sealog_server::pb::log_drive_service_client::LogDriveServiceClient;
use sealog_server::pb::{self};
use sealog_server::{
    CertAuthority, ClientTls, Issued, Leaf, LogServer, RemoteOptions, RemoteStore, Role, TlsPem,
};
use time::OffsetDateTime;

struct Pki {
    ca: CertAuthority,
    server: TlsPem,
}

impl Pki {
    fn new() -> Pki {
        let ca = CertAuthority::new("test CA").unwrap();
        let issued = ca.issue(&Leaf::server("s1", &[])).unwrap();
        let server = TlsPem {
            ca: ca.pem().as_bytes().to_vec(),
            cert: issued.cert_pem.into_bytes(),
            key: issued.key_pem.into_bytes(),
        };
        Pki { ca, server }
    }

    fn options(&self, identity: Option<Issued>) -> RemoteOptions {
        RemoteOptions {
            tls: Some(ClientTls {
                ca_pem: self.ca.pem().as_bytes().to_vec(),
                identity: identity.map(|i| (i.cert_pem.into_bytes(), i.key_pem.into_bytes())),
                server_name: SERVER_NAME.into(),
            }),
            ..quick_options()
        }
    }

    fn client(&self, name: &str, role: Role) -> RemoteOptions {
        self.options(Some(self.ca.issue(&Leaf::client(name, role)).unwrap()))
    }
}

/// A server with TLS, an operator's connection, and LogDrive 1 with "v" at address 0.
async fn setup(pki: &Pki, dir: &std::path::Path) -> (LogServer, RemoteStore, u64) {
    let server = server(dir, "a", loopback(), Some(pki.server.clone())).await;
    let addr = server.addr().to_string();
    let operator = RemoteStore::connect(&addr, pki.client("op", Role::Operator))
        .await
        .expect("an operator connects");
    let drive = operator.create(1, 1024).await.expect("create");
    drive.write(0, 1, Bytes::from_static(b"v")).await.unwrap();
    (server, operator, drive.generation())
}

async fn unchanged(operator: &RemoteStore, generation: u64) {
    let drive = operator.drive(1, generation);
    assert_eq!(
        drive.read(0).await.unwrap(),
        ReadOutcome::Value(Bytes::from_static(b"v"))
    );
    assert_eq!(drive.read(1).await.unwrap(), ReadOutcome::Unwritten);
    let length = drive.length().await.unwrap();
    assert_eq!(
        (length.n, length.sealed, length.fence, length.first),
        (1, None, 0, 0)
    );
    assert_eq!(operator.list().await.unwrap(), vec![(1, generation)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_may_append_and_read_but_not_fence_seal_trim_create_or_delete() {
    let (pki, dir) = (Pki::new(), tempfile::tempdir().unwrap());
    let (server, operator, generation) = setup(&pki, dir.path()).await;
    let addr = server.addr().to_string();
    let client = RemoteStore::connect(&addr, pki.client("app", Role::Client))
        .await
        .unwrap();
    let drive = client.drive(1, generation);
    assert_eq!(
        drive.read(0).await.unwrap(),
        ReadOutcome::Value(Bytes::from_static(b"v"))
    );
    assert_eq!(drive.weak_tail(4).await.unwrap().n, 1);

    let refusals = [
        drive.fence(9).await,
        drive.seal(1, 9).await,
        drive.trim(1).await,
        client.create(2, 16).await.map(|_| ()),
        client.delete(1, generation).await,
    ];
    for refused in refusals {
        let error = refused.unwrap_err();
        assert!(error.is_definite(), "{error}");
        let LogDriveError::Denied { reason } = &error else {
            panic!("not Denied: {error}");
        };
        assert!(
            reason.contains("app") && reason.contains("client"),
            "{reason}"
        );
    }
    assert_eq!(server.stats().refused_requests, 5);
    unchanged(&operator, generation).await;
    drive
        .write(1, 0, Bytes::from_static(b"w"))
        .await
        .expect("a client writes");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_certificate_another_cas_or_an_expired_one_is_refused() {
    let (pki, dir) = (Pki::new(), tempfile::tempdir().unwrap());
    let (server, operator, generation) = setup(&pki, dir.path()).await;
    let addr = server.addr().to_string();

    // No certificate: the handshake completes, every request is UNAUTHENTICATED.
    let anonymous = RemoteStore::connect(&addr, pki.options(None))
        .await
        .unwrap_err();
    let no_certificate = |reason: &String| reason.contains("no client certificate");
    assert!(
        matches!(&anonymous, LogDriveError::Denied { reason } if no_certificate(reason)),
        "{anonymous}"
    );
    assert!(server.stats().refused_requests >= 1);

    // Another CA's operator certificate, and an expired one of ours: the handshake fails.
    let other = CertAuthority::new("another CA").unwrap();
    let foreign = other
        .issue(&Leaf::client("intruder", Role::Operator))
        .unwrap();
    let now = OffsetDateTime::now_utc();
    let expired = pki
        .ca
        .issue(&Leaf {
            not_before: now - time::Duration::days(30),
            not_after: now - time::Duration::days(1),
            ..Leaf::client("old", Role::Operator)
        })
        .unwrap();
    for identity in [foreign, expired] {
        let refused_before = server.stats().refused_handshakes;
        let error = RemoteStore::connect(&addr, pki.options(Some(identity)))
            .await
            .unwrap_err();
        assert!(
            !error.is_definite() || matches!(error, LogDriveError::Denied { .. }),
            "{error}"
        );
        // The client may learn of the refusal before the server's handshake task counts it.
        let counted = std::time::Instant::now();
        while server.stats().refused_handshakes == refused_before {
            assert!(
                counted.elapsed() < Duration::from_secs(5),
                "not counted: {error}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    unchanged(&operator, generation).await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_requests_garbage_and_stalled_handshakes_leave_the_server_serving() {
    let (pki, dir) = (Pki::new(), tempfile::tempdir().unwrap());
    let (server, operator, generation) = setup(&pki, dir.path()).await;
    let addr = server.addr();

    // Connections that never finish a handshake, and ones that send garbage.
    let stalled: Vec<_> = (0..8)
        .map(|_| std::net::TcpStream::connect(addr).unwrap())
        .collect();
    let mut runner = TestRunner::new(quiet(32));
    runner
        .run(
            &proptest::collection::vec(any::<u8>(), 1..2048),
            |garbage| {
                let mut stream = std::net::TcpStream::connect(addr).unwrap();
                let _ = stream.write_all(&garbage);
                Ok(())
            },
        )
        .unwrap();

    // Well-formed gRPC with fields anywhere in their range, from an operator.
    let probe = RemoteStore::connect(&addr.to_string(), pki.client("fuzz", Role::Operator))
        .await
        .unwrap();
    let values = prop_oneof![
        Just(0u64),
        Just(1),
        Just(u64::MAX),
        Just(generation),
        any::<u64>()
    ];
    let request = (
        values.clone(),
        values.clone(),
        values.clone(),
        values,
        0u8..6,
    );
    let mut runner = TestRunner::new(quiet(200));
    let cases = std::cell::RefCell::new(Vec::new());
    runner
        .run(&request, |case| {
            cases.borrow_mut().push(case);
            Ok(())
        })
        .unwrap();
    for (id, generation, a, b, op) in cases.into_inner() {
        let drive = probe.drive(id, generation);
        // Every one is answered (an error is an answer); none may hang or end the server.
        let _ = tokio::time::timeout(Duration::from_secs(5), async {
            match op {
                0 => drive.write(a, b, Bytes::from_static(b"x")).await.err(),
                1 => drive.read(a).await.err(),
                2 => drive.weak_tail(a).await.err(),
                3 => drive.seal(a, b).await.err(),
                4 => drive.fence(a).await.err(),
                _ => drive.trim(a).await.err(),
            }
        })
        .await
        .expect("a malformed request is answered");
    }
    // A request naming no drive, and one over the message limit.
    let mut raw = raw_client(&pki, addr).await;
    let status = raw
        .read(pb::ReadRequest {
            drive: None,
            address: 0,
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    let huge = pb::WriteRequest {
        drive: Some(pb::DriveRef { id: 1, generation }),
        address: 5,
        epoch: 0,
        payload: Bytes::from(vec![0u8; 64 << 20]),
    };
    assert!(raw.write(huge).await.is_err());
    drop(stalled);

    // Still serving: the fuzzing may have fenced, sealed or trimmed LogDrive 1 (it is an
    // operator), but it answers, and a new LogDrive takes writes; the oversized write left
    // nothing behind.
    let drive = operator.drive(1, generation);
    assert!(drive
        .read(5)
        .await
        .is_ok_and(|o| o == ReadOutcome::Unwritten));
    let fresh = operator
        .create(1 << 40, 16)
        .await
        .expect("create after the fuzzing");
    fresh.write(0, 0, Bytes::from_static(b"ok")).await.unwrap();
    assert_eq!(
        fresh.read(0).await.unwrap(),
        ReadOutcome::Value(Bytes::from_static(b"ok"))
    );
    server.stop().await;
}

/// A runner of `cases` that keeps no failure file (the cases are generated, not shrunk).
fn quiet(cases: u32) -> Config {
    Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    }
}

/// The generated client, as an operator, to send what `RemoteLogDrive` never would.
async fn raw_client(
    pki: &Pki,
    addr: std::net::SocketAddr,
) -> LogDriveServiceClient<tonic::transport::Channel> {
    let issued = pki.ca.issue(&Leaf::client("raw", Role::Operator)).unwrap();
    let tls = tonic::transport::ClientTlsConfig::new()
        .ca_certificate(tonic::transport::Certificate::from_pem(pki.ca.pem()))
        .identity(tonic::transport::Identity::from_pem(
            issued.cert_pem,
            issued.key_pem,
        ))
        .domain_name(SERVER_NAME);
    let channel = tonic::transport::Endpoint::from_shared(format!("https://{addr}"))
        .unwrap()
        .tls_config(tls)
        .unwrap()
        .connect()
        .await
        .expect("connect");
    LogDriveServiceClient::new(channel).max_encoding_message_size(usize::MAX)
}
