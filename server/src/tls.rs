//! The server's connections: a TCP accept loop that, with TLS on, runs the rustls handshake
//! itself (bounded in time) so that a refused handshake (another CA's certificate, an
//! expired one) is logged and counted with the peer's address, and every connection carries
//! the [`Caller`] its certificate proves into the requests made on it. The client side is
//! tonic's own TLS (see `remote`), given the same PEM files.

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use rustls::server::WebPkiClientVerifier;
use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;
use tonic::transport::server::Connected;

use crate::auth::{Caller, Identity};

/// How long a connection may take to finish its TLS handshake: a peer that stalls in it
/// holds a task, not the accept loop, and not for long.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Where a node's TLS material lies: the cluster's CA certificate, and the node's own
/// certificate and private key, all PEM.
#[derive(Clone, Debug)]
pub struct TlsFiles {
    /// The CA certificate every peer's certificate must chain to.
    pub ca: PathBuf,
    /// This node's certificate.
    pub cert: PathBuf,
    /// This node's private key.
    pub key: PathBuf,
}

impl TlsFiles {
    /// The files `sealog-server certs` writes for `name` in `dir`: `ca.pem`, `NAME.pem` and
    /// `NAME.key`.
    pub fn in_dir(dir: &Path, name: &str) -> TlsFiles {
        TlsFiles {
            ca: dir.join("ca.pem"),
            cert: dir.join(format!("{name}.pem")),
            key: dir.join(format!("{name}.key")),
        }
    }

    /// The three files' contents.
    pub fn read(&self) -> Result<TlsPem, TlsError> {
        let read = |path: &Path| {
            std::fs::read(path).map_err(|source| TlsError::Read {
                path: path.display().to_string(),
                source,
            })
        };
        Ok(TlsPem {
            ca: read(&self.ca)?,
            cert: read(&self.cert)?,
            key: read(&self.key)?,
        })
    }
}

/// A node's TLS material, PEM-encoded.
#[derive(Clone, Debug)]
pub struct TlsPem {
    /// The CA certificate.
    pub ca: Vec<u8>,
    /// The node's certificate.
    pub cert: Vec<u8>,
    /// The node's private key.
    pub key: Vec<u8>,
}

/// Why TLS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: io::Error,
    },
    /// The material is not what it should be (no certificate, a bad key, ...).
    #[error("TLS material: {0}")]
    Material(String),
}

fn material(what: &str, error: impl std::fmt::Display) -> TlsError {
    TlsError::Material(format!("{what}: {error}"))
}

/// The rustls server config: this node's certificate, and client certificates verified
/// against the CA when presented. A client may present none (its requests are then
/// refused with `UNAUTHENTICATED`, which it can read, rather than a failed handshake).
pub fn server_config(pem: &TlsPem) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    // ring, as tonic's client side uses (its `tls-ring` feature): one provider for both
    // ends, and no C toolchain to build. rustls deprecates it for lacking post-quantum key
    // exchange, which aws-lc-rs has; moving both ends to it is a feature switch.
    #[allow(deprecated)]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = RootCertStore::empty();
    for ca in CertificateDer::pem_slice_iter(&pem.ca) {
        let ca = ca.map_err(|e| material("the CA certificate", e))?;
        roots
            .add(ca)
            .map_err(|e| material("the CA certificate", e))?;
    }
    if roots.is_empty() {
        return Err(TlsError::Material(
            "the CA file holds no certificate".into(),
        ));
    }
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .allow_unauthenticated()
        .build()
        .map_err(|e| material("the client verifier", e))?;
    let chain = CertificateDer::pem_slice_iter(&pem.cert)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| material("the node certificate", e))?;
    let key = PrivateKeyDer::from_pem_slice(&pem.key).map_err(|e| material("the node key", e))?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| material("the protocol versions", e))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .map_err(|e| material("the node certificate and key", e))?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Arc::new(config))
}

/// What the accept loop counts, for tests and the operator.
#[derive(Debug, Default)]
pub struct ConnectionStats {
    /// Connections accepted (and, with TLS, whose handshake completed).
    pub accepted: AtomicU64,
    /// TLS handshakes refused or timed out.
    pub refused_handshakes: AtomicU64,
}

/// A connection as the gRPC server sees it: who is on the other end.
#[derive(Clone, Debug)]
pub struct ConnInfo {
    /// The peer's address.
    pub remote: SocketAddr,
    /// What its certificate proves.
    pub caller: Caller,
}

/// An accepted connection, plain or TLS.
pub enum Conn {
    /// Without TLS.
    Plain(TcpStream, ConnInfo),
    /// With TLS, handshake done.
    Tls(Box<TlsStream<TcpStream>>, ConnInfo),
}

impl Connected for Conn {
    type ConnectInfo = ConnInfo;

    fn connect_info(&self) -> ConnInfo {
        match self {
            Conn::Plain(_, info) | Conn::Tls(_, info) => info.clone(),
        }
    }
}

impl AsyncRead for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(stream, _) => Pin::new(stream).poll_read(cx, buf),
            Conn::Tls(stream, _) => Pin::new(stream.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Conn::Plain(stream, _) => Pin::new(stream).poll_write(cx, buf),
            Conn::Tls(stream, _) => Pin::new(stream.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(stream, _) => Pin::new(stream).poll_flush(cx),
            Conn::Tls(stream, _) => Pin::new(stream.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(stream, _) => Pin::new(stream).poll_shutdown(cx),
            Conn::Tls(stream, _) => Pin::new(stream.as_mut()).poll_shutdown(cx),
        }
    }
}

/// Accepts connections on `listener` until the receiver is dropped; with `tls`, each runs
/// its handshake on a task of its own, and only those that complete are handed on. The
/// channel is bounded: a server that falls behind stops accepting rather than queueing.
pub fn accept_loop(
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    stats: Arc<ConnectionStats>,
) -> mpsc::Receiver<io::Result<Conn>> {
    let (sender, receiver) = mpsc::channel(64);
    let acceptor = tls.map(TlsAcceptor::from);
    tokio::spawn(async move {
        loop {
            let (stream, remote) = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok(accepted) => accepted,
                    Err(error) => {
                        // Out of descriptors and the like: pause rather than spin.
                        tracing::warn!(%error, "accepting a connection");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
                () = sender.closed() => return,
            };
            let _ = stream.set_nodelay(true);
            let Some(acceptor) = acceptor.clone() else {
                let info = ConnInfo {
                    remote,
                    caller: Caller::Trusted,
                };
                stats.accepted.fetch_add(1, Ordering::Relaxed);
                if sender.send(Ok(Conn::Plain(stream, info))).await.is_err() {
                    return;
                }
                continue;
            };
            let (sender, stats) = (sender.clone(), Arc::clone(&stats));
            tokio::spawn(async move {
                if let Some(conn) = handshake(acceptor, stream, remote, &stats).await {
                    let _ = sender.send(Ok(conn)).await;
                }
            });
        }
    });
    receiver
}

async fn handshake(
    acceptor: TlsAcceptor,
    stream: TcpStream,
    remote: SocketAddr,
    stats: &ConnectionStats,
) -> Option<Conn> {
    let refused = |reason: String| {
        stats.refused_handshakes.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(%remote, %reason, "TLS handshake refused");
    };
    let stream = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
        Ok(Ok(stream)) => stream,
        // rustls reports what it refused (a certificate, a protocol) as invalid data; any
        // other error is the peer going away mid-handshake, which refuses nothing.
        Ok(Err(error)) if error.kind() == std::io::ErrorKind::InvalidData => {
            refused(error.to_string());
            return None;
        }
        Ok(Err(error)) => {
            tracing::debug!(%remote, %error, "TLS handshake abandoned by the peer");
            return None;
        }
        Err(_) => {
            refused(format!("no handshake within {HANDSHAKE_TIMEOUT:?}"));
            return None;
        }
    };
    let caller = match stream.get_ref().1.peer_certificates() {
        Some([leaf, ..]) => match Identity::from_certificate(leaf) {
            Some(identity) => Caller::Verified(identity),
            None => {
                refused("a verified certificate that does not parse".into());
                return None;
            }
        },
        _ => Caller::Anonymous,
    };
    stats.accepted.fetch_add(1, Ordering::Relaxed);
    Some(Conn::Tls(Box::new(stream), ConnInfo { remote, caller }))
}

/// Refuses a caller that may not do `op`, logging who and what and counting it in
/// `refused`. A request that did not come through the accept loop has no connection info
/// and is refused too (fail closed).
pub fn authorize<T>(
    request: &tonic::Request<T>,
    op: crate::auth::Op,
    refused: &AtomicU64,
) -> Result<(), tonic::Status> {
    let info = request.extensions().get::<ConnInfo>();
    let caller = info.map_or(Caller::Anonymous, |info| info.caller.clone());
    caller.authorize(op).inspect_err(|status| {
        refused.fetch_add(1, Ordering::Relaxed);
        let remote = info.map(|info| info.remote.to_string());
        tracing::warn!(?remote, %op, reason = status.message(), "request refused");
    })
}
