//! The client side: [`RemoteStore`], a connection to one server's LogDrive service, and
//! [`RemoteLogDrive`], one of its LogDrives behind the `LogDrive` trait, so that the striped
//! and quorum compositions and the AtomicLog run over remote children unchanged.
//!
//! Operations are issued when called, like a local drive's: the call spawns the RPC on the
//! client runtime (`runtime`), so that the futures can be awaited from any executor or
//! waited on from a plain thread with `sealog_logdrive::wait`. Many operations share one
//! HTTP/2 connection. Writes to one server go out in batches (`WriteQueue`): a write
//! queues, and up to [`WRITE_BATCHES_IN_FLIGHT`] senders each take what is queued into one
//! `WriteBatch` message, so that a server sees one message per round trip rather than one
//! per write, and a lone write goes out at once, alone. A connection that fails is made
//! again on the next try; idempotent operations (every LogDrive operation is: the same
//! write, seal, fence or trim again changes nothing) are retried with backoff until their
//! deadline, while the server cannot be reached. What a caller gets when the server stays
//! unreachable, or a reply is cut off, is an indeterminate `Io` naming the server: the
//! operation may have taken effect, and a quorum above decides.

use std::collections::VecDeque;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use sealog_logdrive::{Length, LogDrive, LogDriveError, OpFuture, ReadOutcome, TailDesc};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};
use tonic::{Code, Request, Status};

use crate::certs::SERVER_NAME;
use crate::pb::log_drive_service_client::LogDriveServiceClient;
use crate::pb::{self, create_reply, list_reply};
use crate::wire;

/// A client's TLS material: the CA to verify servers against, and its own certificate and
/// key (`None`: it presents none, and the server refuses it).
#[derive(Clone, Debug)]
pub struct ClientTls {
    /// The cluster's CA certificate, PEM.
    pub ca_pem: Vec<u8>,
    /// The client's certificate and key, PEM.
    pub identity: Option<(Vec<u8>, Vec<u8>)>,
    /// The name the server's certificate must carry.
    pub server_name: String,
}

impl ClientTls {
    /// Material from `sealog-server certs`'s files for client `name` in `dir`.
    pub fn from_dir(dir: &std::path::Path, name: &str) -> Result<ClientTls, crate::TlsError> {
        let pem = crate::tls::TlsFiles::in_dir(dir, name).read()?;
        Ok(ClientTls {
            ca_pem: pem.ca,
            identity: Some((pem.cert, pem.key)),
            server_name: SERVER_NAME.into(),
        })
    }
}

/// How a client reaches a server.
#[derive(Clone, Debug)]
pub struct RemoteOptions {
    /// The longest one operation may take, retries included.
    pub op_deadline: Duration,
    /// The longest one connection attempt may take.
    pub connect_timeout: Duration,
    /// The first pause after an unreachable server.
    pub backoff_initial: Duration,
    /// The longest pause.
    pub backoff_max: Duration,
    /// TLS; `None` speaks plain HTTP/2 to a server started without TLS.
    pub tls: Option<ClientTls>,
}

impl Default for RemoteOptions {
    fn default() -> RemoteOptions {
        RemoteOptions {
            op_deadline: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(1),
            backoff_initial: Duration::from_millis(10),
            backoff_max: Duration::from_millis(500),
            tls: None,
        }
    }
}

/// Runs `task` on the client runtime now and returns its outcome's future.
fn spawn<T: Send + 'static>(
    task: impl Future<Output = Result<T, LogDriveError>> + Send + 'static,
) -> OpFuture<T> {
    let task = crate::runtime::spawn(task);
    Box::pin(async move {
        task.await.unwrap_or_else(|error| {
            Err(LogDriveError::Io {
                reason: format!("the remote call's task ended: {error}"),
            }
            .indeterminate())
        })
    })
}

/// The limits a server announced when the client connected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerLimits {
    /// The largest payload one write may carry.
    pub payload_size_max_bytes: u64,
    /// The store's largest write window.
    pub write_window_max: u64,
    /// The store's largest weak_tail window.
    pub weak_tail_k_max: u64,
}

/// One server's connection: its address, the gRPC client and how calls are made.
struct Link {
    addr: String,
    grpc: LogDriveServiceClient<Channel>,
    options: RemoteOptions,
}

/// A connection and the limits the server announced on it.
struct Remote {
    link: Link,
    limits: ServerLimits,
    writes: WriteQueue,
}

/// Batches of writes one connection sends at once at most.
pub const WRITE_BATCHES_IN_FLIGHT: usize = 4;

/// A write's room in a batch beyond its payload (ids, address, epoch, framing): a batch
/// holds writes up to the server's message limit.
const WRITE_OVERHEAD_BYTES: u64 = 64;

/// A queued write and where its outcome goes.
type QueuedWrite = (
    pb::WriteRequest,
    tokio::sync::oneshot::Sender<Result<(), LogDriveError>>,
);

/// The writes to one server not yet sent, and how many senders are taking them.
#[derive(Default)]
struct WriteQueue {
    state: Mutex<(VecDeque<QueuedWrite>, usize)>,
}

/// A connection to one server's LogDrive service. Clones share it.
#[derive(Clone)]
pub struct RemoteStore {
    remote: Arc<Remote>,
}

/// The error for a status the server (or the transport) answered with `operation` at
/// `addr`: definite when the request was refused before it ran, indeterminate otherwise.
pub fn status_error(addr: &str, operation: &str, status: &Status) -> LogDriveError {
    let what = format!("{operation} at {addr}: {}", status.message());
    match status.code() {
        // Refused before it ran: nothing was done.
        Code::Unauthenticated | Code::PermissionDenied => LogDriveError::Denied { reason: what },
        Code::InvalidArgument | Code::ResourceExhausted | Code::OutOfRange => {
            LogDriveError::Denied { reason: what }
        }
        // Cut off, timed out, or failed inside: it may have run.
        _ => LogDriveError::Io {
            reason: format!("{what} ({:?})", status.code()),
        }
        .indeterminate(),
    }
}

pub(crate) fn endpoint(addr: &str, options: &RemoteOptions) -> Result<Endpoint, LogDriveError> {
    let bad = |error: tonic::transport::Error| LogDriveError::Io {
        reason: format!("connecting to {addr}: {error}"),
    };
    let scheme = if options.tls.is_some() {
        "https"
    } else {
        "http"
    };
    let mut endpoint = Endpoint::from_shared(format!("{scheme}://{addr}"))
        .map_err(bad)?
        .connect_timeout(options.connect_timeout)
        .tcp_nodelay(true)
        .http2_keep_alive_interval(Duration::from_secs(5))
        .keep_alive_timeout(Duration::from_secs(5));
    if let Some(tls) = &options.tls {
        let mut config = ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(&tls.ca_pem))
            .domain_name(tls.server_name.clone());
        if let Some((cert, key)) = &tls.identity {
            config = config.identity(Identity::from_pem(cert, key));
        }
        endpoint = endpoint.tls_config(config).map_err(bad)?;
    }
    Ok(endpoint)
}

impl std::fmt::Debug for RemoteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteStore")
            .field("addr", &self.remote.link.addr)
            .field("limits", &self.remote.limits)
            .finish()
    }
}

impl std::fmt::Debug for RemoteLogDrive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteLogDrive")
            .field("addr", &self.remote.link.addr)
            .field("id", &self.drive.id)
            .field("generation", &self.drive.generation)
            .finish()
    }
}

impl RemoteStore {
    /// Connects to the server at `addr` (`host:port`) and asks for its limits, retrying
    /// while it cannot be reached until the options' deadline.
    pub fn connect(addr: &str, options: RemoteOptions) -> OpFuture<RemoteStore> {
        let addr = addr.to_string();
        spawn(async move {
            let grpc = LogDriveServiceClient::new(endpoint(&addr, &options)?.connect_lazy())
                .max_decoding_message_size(usize::MAX)
                .max_encoding_message_size(usize::MAX);
            let link = Link {
                addr,
                grpc,
                options,
            };
            let reply = link
                .call(
                    "limits",
                    |mut grpc, request| async move { grpc.limits(request).await },
                    pb::LimitsRequest {},
                )
                .await?;
            let limits = ServerLimits {
                payload_size_max_bytes: reply.payload_size_max_bytes,
                write_window_max: reply.write_window_max,
                weak_tail_k_max: reply.weak_tail_k_max,
            };
            Ok(RemoteStore {
                remote: Arc::new(Remote {
                    link,
                    limits,
                    writes: WriteQueue::default(),
                }),
            })
        })
    }

    /// The server's address.
    pub fn addr(&self) -> &str {
        &self.remote.link.addr
    }

    /// The limits the server announced.
    pub fn limits(&self) -> ServerLimits {
        self.remote.limits
    }

    /// LogDrive `id` at `generation` on this server, without a call (its operations say
    /// `Missing` if it is not live there).
    pub fn drive(&self, id: u64, generation: u64) -> RemoteLogDrive {
        RemoteLogDrive {
            remote: Arc::clone(&self.remote),
            drive: pb::DriveRef { id, generation },
        }
    }

    /// Creates LogDrive `id` with `capacity` addresses. Not retried: a create whose reply
    /// was lost is indeterminate, and `list` says what is there.
    pub fn create(&self, id: u64, capacity: u64) -> OpFuture<RemoteLogDrive> {
        let remote = Arc::clone(&self.remote);
        spawn(async move {
            let request = pb::CreateRequest { id, capacity };
            let reply = remote
                .link
                .call_once("create", request, |mut grpc, request| async move {
                    grpc.create(request).await
                })
                .await?;
            match reply.result {
                Some(create_reply::Result::Drive(drive)) => Ok(RemoteLogDrive { remote, drive }),
                Some(create_reply::Result::Error(error)) => Err(wire::error_from_pb(error)),
                None => Err(wire::malformed_reply("create").indeterminate()),
            }
        })
    }

    /// Deletes LogDrive `id` if `generation` is the live one. Not retried (as `create`).
    pub fn delete(&self, id: u64, generation: u64) -> OpFuture<()> {
        let remote = Arc::clone(&self.remote);
        spawn(async move {
            let request = pb::DriveRef { id, generation };
            let reply = remote
                .link
                .call_once("delete", request, |mut grpc, request| async move {
                    grpc.delete(request).await
                })
                .await?;
            wire::unit_from_pb(reply, "delete")
        })
    }

    /// The live generation of LogDrive `id` on the server, `None` when none is live.
    pub fn generation(&self, id: u64) -> OpFuture<Option<u64>> {
        use pb::generation_reply::Result as R;
        let remote = Arc::clone(&self.remote);
        spawn(async move {
            let reply = remote
                .link
                .call(
                    "generation",
                    |mut grpc, request| async move { grpc.generation(request).await },
                    pb::Id { id },
                )
                .await?;
            match reply.result {
                Some(R::Generation(0)) => Ok(None),
                Some(R::Generation(generation)) => Ok(Some(generation)),
                Some(R::Error(error)) => Err(wire::error_from_pb(error)),
                None => Err(wire::malformed_reply("generation")),
            }
        })
    }

    /// The live LogDrives on the server: (id, generation).
    pub fn list(&self) -> OpFuture<Vec<(u64, u64)>> {
        let remote = Arc::clone(&self.remote);
        spawn(async move {
            let reply = remote
                .link
                .call(
                    "list",
                    |mut grpc, request| async move { grpc.list(request).await },
                    pb::ListRequest {},
                )
                .await?;
            match reply.result {
                Some(list_reply::Result::Drives(drives)) => Ok(drives
                    .drives
                    .into_iter()
                    .map(|d| (d.id, d.generation))
                    .collect()),
                Some(list_reply::Result::Error(error)) => Err(wire::error_from_pb(error)),
                None => Err(wire::malformed_reply("list")),
            }
        })
    }
}

impl Link {
    /// Sends `message` once, within the deadline.
    async fn call_once<M, R, F, Fut>(
        &self,
        operation: &str,
        message: M,
        send: F,
    ) -> Result<R, LogDriveError>
    where
        F: FnOnce(LogDriveServiceClient<Channel>, Request<M>) -> Fut,
        Fut: Future<Output = Result<tonic::Response<R>, Status>>,
    {
        let deadline = self.options.op_deadline;
        let mut request = Request::new(message);
        request.set_timeout(deadline);
        match tokio::time::timeout(deadline, send(self.grpc.clone(), request)).await {
            Ok(Ok(reply)) => Ok(reply.into_inner()),
            Ok(Err(status)) => Err(status_error(&self.addr, operation, &status)),
            Err(_) => Err(self.timed_out(operation, deadline)),
        }
    }

    fn timed_out(&self, operation: &str, waited: Duration) -> LogDriveError {
        LogDriveError::Io {
            reason: format!("{operation} at {}: no reply within {waited:?}", self.addr),
        }
        .indeterminate()
    }

    /// Sends `message` (an idempotent operation), again after a pause while the server is
    /// unreachable, until the deadline.
    async fn call<M: Clone, R, F, Fut>(
        &self,
        operation: &str,
        send: F,
        message: M,
    ) -> Result<R, LogDriveError>
    where
        F: Fn(LogDriveServiceClient<Channel>, Request<M>) -> Fut,
        Fut: Future<Output = Result<tonic::Response<R>, Status>>,
    {
        let started = Instant::now();
        let deadline = started + self.options.op_deadline;
        let mut pause = self.options.backoff_initial;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(self.timed_out(operation, self.options.op_deadline));
            }
            let mut request = Request::new(message.clone());
            request.set_timeout(left);
            let status = match tokio::time::timeout(left, send(self.grpc.clone(), request)).await {
                Ok(Ok(reply)) => return Ok(reply.into_inner()),
                Ok(Err(status)) => status,
                Err(_) => return Err(self.timed_out(operation, started.elapsed())),
            };
            let unreachable = status.code() == Code::Unavailable;
            if !unreachable || Instant::now() + pause >= deadline {
                return Err(status_error(&self.addr, operation, &status));
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(self.options.backoff_max);
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// Takes from `queue` the writes of one batch: at least one, then as many as fit in
/// `bytes_max`.
fn take_batch(queue: &mut VecDeque<QueuedWrite>, bytes_max: u64) -> Vec<QueuedWrite> {
    let mut batch = Vec::new();
    let mut bytes = 0;
    while let Some((write, _)) = queue.front() {
        let size = write.payload.len() as u64 + WRITE_OVERHEAD_BYTES;
        if !batch.is_empty() && bytes + size > bytes_max {
            break;
        }
        bytes += size;
        batch.extend(queue.pop_front());
    }
    batch
}

/// A sender of `remote`'s queued writes: sends a batch, answers its writes, and takes the
/// next, until the queue is empty.
async fn send_batches(remote: Arc<Remote>) {
    loop {
        let batch = {
            let mut queue = lock(&remote.writes.state);
            let batch = take_batch(&mut queue.0, remote.limits.payload_size_max_bytes);
            if batch.is_empty() {
                queue.1 -= 1;
                return;
            }
            batch
        };
        let (writes, senders): (Vec<_>, Vec<_>) = batch.into_iter().unzip();
        let count = writes.len();
        let sent = remote
            .link
            .call(
                "write",
                |mut grpc, request| async move { grpc.write_batch(request).await },
                pb::WriteBatchRequest { writes },
            )
            .await;
        let outcomes: Vec<Result<(), LogDriveError>> = match sent {
            Ok(reply) if reply.results.len() == count => reply
                .results
                .into_iter()
                .map(|result| wire::unit_from_pb(result, "write"))
                .collect(),
            Ok(_) => vec![Err(wire::malformed_reply("write_batch").indeterminate()); count],
            Err(error) => vec![Err(error); count],
        };
        for (sender, outcome) in senders.into_iter().zip(outcomes) {
            // A caller that stopped waiting has nothing to be told.
            let _ = sender.send(outcome);
        }
    }
}

/// One LogDrive on a server, named by its id and generation.
#[derive(Clone)]
pub struct RemoteLogDrive {
    remote: Arc<Remote>,
    drive: pb::DriveRef,
}

impl RemoteLogDrive {
    /// The LogDrive's id.
    pub fn id(&self) -> u64 {
        self.drive.id
    }

    /// Its generation.
    pub fn generation(&self) -> u64 {
        self.drive.generation
    }

    /// The server's address.
    pub fn addr(&self) -> &str {
        &self.remote.link.addr
    }

    /// Runs an idempotent operation on the client runtime.
    fn op<M, R, T, F, Fut>(
        &self,
        operation: &'static str,
        message: M,
        send: F,
        decode: fn(R) -> Result<T, LogDriveError>,
    ) -> OpFuture<T>
    where
        M: Clone + Send + 'static,
        R: Send + 'static,
        T: Send + 'static,
        F: Fn(LogDriveServiceClient<Channel>, Request<M>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<tonic::Response<R>, Status>> + Send,
    {
        let remote = Arc::clone(&self.remote);
        spawn(async move { decode(remote.link.call(operation, send, message).await?) })
    }
}

impl LogDrive for RemoteLogDrive {
    fn write(&self, address: u64, epoch: u64, payload: Bytes) -> OpFuture<()> {
        let max = self.remote.limits.payload_size_max_bytes;
        if payload.len() as u64 > max {
            let len = payload.len() as u64;
            return Box::pin(std::future::ready(Err(LogDriveError::TooLarge {
                len,
                max,
            })));
        }
        let message = pb::WriteRequest {
            drive: Some(self.drive),
            address,
            epoch,
            payload,
        };
        let (sender, outcome) = tokio::sync::oneshot::channel();
        let start = {
            let mut queue = lock(&self.remote.writes.state);
            queue.0.push_back((message, sender));
            let start = queue.1 < WRITE_BATCHES_IN_FLIGHT;
            queue.1 += usize::from(start);
            start
        };
        if start {
            // The sender runs on until the queue is empty; its handle is not needed.
            drop(crate::runtime::spawn(send_batches(Arc::clone(
                &self.remote,
            ))));
        }
        Box::pin(async move {
            outcome.await.unwrap_or_else(|_| {
                Err(LogDriveError::Io {
                    reason: "the write's batch was dropped unsent".into(),
                }
                .indeterminate())
            })
        })
    }

    fn read(&self, address: u64) -> OpFuture<ReadOutcome> {
        let message = pb::ReadRequest {
            drive: Some(self.drive),
            address,
        };
        self.op(
            "read",
            message,
            |mut g, r| async move { g.read(r).await },
            wire::read_from_pb,
        )
    }

    fn weak_tail(&self, k: u64) -> OpFuture<TailDesc> {
        let message = pb::WeakTailRequest {
            drive: Some(self.drive),
            k,
        };
        self.op(
            "weak_tail",
            message,
            |mut g, r| async move { g.weak_tail(r).await },
            wire::tail_from_pb,
        )
    }

    fn seal(&self, length: u64, epoch: u64) -> OpFuture<()> {
        let message = pb::SealRequest {
            drive: Some(self.drive),
            length,
            epoch,
        };
        self.op(
            "seal",
            message,
            |mut g, r| async move { g.seal(r).await },
            |r| wire::unit_from_pb(r, "seal"),
        )
    }

    fn fence(&self, epoch: u64) -> OpFuture<()> {
        let message = pb::FenceRequest {
            drive: Some(self.drive),
            epoch,
        };
        self.op(
            "fence",
            message,
            |mut g, r| async move { g.fence(r).await },
            |r| wire::unit_from_pb(r, "fence"),
        )
    }

    fn trim(&self, upto: u64) -> OpFuture<()> {
        let message = pb::TrimRequest {
            drive: Some(self.drive),
            upto,
        };
        self.op(
            "trim",
            message,
            |mut g, r| async move { g.trim(r).await },
            |r| wire::unit_from_pb(r, "trim"),
        )
    }

    fn length(&self) -> OpFuture<Length> {
        self.op(
            "length",
            self.drive,
            |mut g, r| async move { g.length(r).await },
            wire::length_from_pb,
        )
    }

    fn write_window_max(&self) -> u64 {
        self.remote.limits.write_window_max
    }
}
