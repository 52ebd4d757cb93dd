//! A running server: the accept loop (`tls`), the gRPC server with its HTTP/2 and message
//! limits, and the service over one store, until stopped; and how a server opens its ring
//! ([`open_store`]), damaged or not.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use sealog::{DriveOptions, RecoveryMode};
use sealog_logdrive::{LogDriveStore, StoreOpenError, StoreOptions};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_stream::wrappers::ReceiverStream;

use crate::pb::log_drive_service_server::LogDriveServiceServer;
use crate::service::{Limits, Service, ServiceStats};
use crate::tls::{accept_loop, server_config, ConnectionStats, TlsError, TlsPem};

/// Room in a request or reply beyond its payload: ids, addresses and framing.
pub const MESSAGE_OVERHEAD_BYTES: usize = 4096;

/// The longest a request may run on the server, whatever deadline its client asked for.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// How a server is started.
#[derive(Clone, Debug)]
pub struct ServerOptions {
    /// Where it listens (port 0: the OS picks one).
    pub listen: SocketAddr,
    /// TLS material; `None` serves plain HTTP/2 to every caller (a trusted network only).
    pub tls: Option<TlsPem>,
    /// Operations running at once; as many more may wait.
    pub in_flight_max: usize,
}

impl ServerOptions {
    /// Listens on `listen` with `tls`, 1,024 operations in flight.
    pub fn new(listen: SocketAddr, tls: Option<TlsPem>) -> ServerOptions {
        ServerOptions {
            listen,
            tls,
            in_flight_max: 1024,
        }
    }
}

/// How a server opens a ring that holds damaged records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Recovery {
    /// The open fails, and the server does not start.
    Strict,
    /// The damage is reported and its addresses answer `Damaged`; everything else is
    /// served. A replica's peers hold what it lost, and a repair writes it back: a server
    /// that refused to start would instead take its whole ring out of every quorum, and
    /// one that started without the damaged records would answer them as never written.
    Quarantine,
}

/// Opens the store on `ring` with `recovery`, logging each damaged range a quarantined
/// open found (its LSNs, and the LogDrive address it held where its header survived).
pub fn open_store(
    ring: &std::path::Path,
    recovery: Recovery,
) -> Result<LogDriveStore, StoreOpenError> {
    let mode = match recovery {
        Recovery::Strict => RecoveryMode::Strict,
        Recovery::Quarantine => RecoveryMode::Quarantine,
    };
    let options = StoreOptions::default().drive(DriveOptions::default().recovery(mode));
    let store = LogDriveStore::open_with_options(ring, options)?;
    for damage in store.quarantine_report() {
        tracing::warn!(
            ring = %ring.display(),
            lsns = ?damage.lsns,
            address = ?damage.address,
            "damaged records: served as Damaged until a repair writes them back from peers"
        );
    }
    Ok(store)
}

/// Why a server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The address could not be bound.
    #[error("listening on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The TLS material is unusable.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// The store could not say its limits.
    #[error("the store: {0}")]
    Store(String),
}

/// What a server counts, read at one moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerStats {
    /// Connections accepted.
    pub accepted: u64,
    /// TLS handshakes refused.
    pub refused_handshakes: u64,
    /// Requests refused for their caller.
    pub refused_requests: u64,
    /// Operations refused as `Overloaded` (each write of a refused batch counts).
    pub overloaded: u64,
    /// Operations that ran on a LogDrive (each write of a batch counts).
    pub served: u64,
    /// Batches of writes admitted (their writes count in `served`).
    pub write_batches: u64,
}

/// A server running on the current tokio runtime.
pub struct LogServer {
    addr: SocketAddr,
    store: LogDriveStore,
    connections: Arc<ConnectionStats>,
    service: Arc<ServiceStats>,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl LogServer {
    /// Serves `store`'s LogDrives as `options` say. Must be called within a tokio runtime.
    pub async fn start(
        store: LogDriveStore,
        options: ServerOptions,
    ) -> Result<LogServer, ServerError> {
        let tls = options.tls.as_ref().map(server_config).transpose()?;
        let (listener, addr) = bind(options.listen).await?;
        let limits = limits(&store, options.in_flight_max);
        let message_max = limits.payload_size_max_bytes as usize + MESSAGE_OVERHEAD_BYTES;
        let connections = Arc::new(ConnectionStats::default());
        let service_stats = Arc::new(ServiceStats::default());
        let service = Service::new(Arc::new(store.clone()), limits, Arc::clone(&service_stats));
        let service = LogDriveServiceServer::new(service)
            .max_decoding_message_size(message_max)
            .max_encoding_message_size(message_max);
        let router = builder(options.in_flight_max).add_service(service);
        let (stop, task) = run(listener, tls, Arc::clone(&connections), router);
        Ok(LogServer {
            addr,
            store,
            connections,
            service: service_stats,
            stop: Some(stop),
            task,
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its counters now.
    pub fn stats(&self) -> ServerStats {
        ServerStats {
            accepted: self.connections.accepted.load(Ordering::Relaxed),
            refused_handshakes: self.connections.refused_handshakes.load(Ordering::Relaxed),
            refused_requests: self.service.refused_requests.load(Ordering::Relaxed),
            overloaded: self.service.overloaded.load(Ordering::Relaxed),
            served: self.service.served.load(Ordering::Relaxed),
            write_batches: self.service.write_batches.load(Ordering::Relaxed),
        }
    }

    /// Stops serving (requests running finish first) and closes the store.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = (&mut self.task).await;
        self.store.close();
    }
}

impl Drop for LogServer {
    fn drop(&mut self) {
        // Dropped without `stop`: stop serving at once; the store closes with its last
        // handle.
        self.task.abort();
    }
}

/// Binds `listen`: the listener and the address it got.
pub(crate) async fn bind(listen: SocketAddr) -> Result<(TcpListener, SocketAddr), ServerError> {
    let error = |source| ServerError::Listen {
        addr: listen,
        source,
    };
    let listener = TcpListener::bind(listen).await.map_err(error)?;
    let addr = listener.local_addr().map_err(error)?;
    Ok((listener, addr))
}

/// The gRPC server's settings: requests bounded in time, a connection to `in_flight_max`
/// streams, keepalives that find dead peers.
pub(crate) fn builder(in_flight_max: usize) -> tonic::transport::Server {
    tonic::transport::Server::builder()
        .timeout(REQUEST_TIMEOUT)
        .max_concurrent_streams(Some(in_flight_max as u32))
        .http2_keepalive_interval(Some(Duration::from_secs(10)))
}

/// Serves `router` on the connections the accept loop hands on, until the sender is used
/// or dropped.
pub(crate) fn run(
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    connections: Arc<ConnectionStats>,
    router: tonic::transport::server::Router,
) -> (oneshot::Sender<()>, JoinHandle<()>) {
    let incoming = accept_loop(listener, tls, connections);
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let serving = router.serve_with_incoming_shutdown(ReceiverStream::new(incoming), async {
            let _ = stopped.await;
        });
        if let Err(error) = serving.await {
            tracing::error!(%error, "the gRPC server stopped");
        }
    });
    (stop, task)
}

fn limits(store: &LogDriveStore, in_flight_max: usize) -> Limits {
    let options = store.options();
    Limits {
        in_flight_max: in_flight_max.max(1),
        payload_size_max_bytes: u64::from(store.drive().geometry().payload_size_max_bytes()),
        write_window_max: options.write_window_max,
        weak_tail_k_max: options.weak_tail_k_max,
    }
}
