//! The client of the example: finds the leader, follows redirects, and retries with backoff
//! across leader changes and transport errors, until a deadline.
//!
//! A write counts as acknowledged only when a leader's `client_write` returned Ok (the reply
//! carries the log index it committed at). A write whose outcome is unknown (the connection
//! broke, the leader died) is retried, so a write may be applied more than once: `Set` is
//! idempotent, which makes that harmless for this example.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tonic::transport::Channel;
use tonic::Code;

use super::network::lazy_channel;
use super::pb::kv_client::KvClient as GrpcKvClient;
use super::pb::{self, read_reply, write_reply};
use super::types::NodeId;

/// Why a client call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// No leader accepted the call before the deadline.
    #[error("no leader answered within {waited:?} ({attempts} attempts; last: {last})")]
    GaveUp {
        /// How long the client tried.
        waited: Duration,
        /// How many calls it made.
        attempts: u32,
        /// The last failure it met.
        last: String,
    },
    /// The node could not be reached (a call made once, without retries).
    #[error("cannot reach {addr}: {message}")]
    Unreachable {
        /// The node.
        addr: String,
        /// What the transport said.
        message: String,
    },
    /// A node refused the call for a reason retrying cannot fix.
    #[error("{addr} refused: {status}")]
    Rejected {
        /// The node.
        addr: String,
        /// Its answer.
        status: String,
    },
    /// The address is not a valid `host:port`.
    #[error("invalid address {addr}: {message}")]
    BadAddress {
        /// The address.
        addr: String,
        /// Why.
        message: String,
    },
    /// The node answered with a reply this client does not understand.
    #[error("{0} sent an empty reply")]
    EmptyReply(String),
}

/// How long calls are retried, and how the pause between tries grows.
#[derive(Clone, Copy, Debug)]
pub struct RetryPolicy {
    /// Give up after trying this long.
    pub deadline: Duration,
    /// The first pause after a failure.
    pub initial_backoff: Duration,
    /// The longest pause.
    pub max_backoff: Duration,
    /// The limit on one call.
    pub call_timeout: Duration,
}

impl Default for RetryPolicy {
    /// Long enough to ride out an election (under a second with the default raft config).
    fn default() -> Self {
        RetryPolicy {
            deadline: Duration::from_secs(15),
            initial_backoff: Duration::from_millis(20),
            max_backoff: Duration::from_millis(500),
            call_timeout: Duration::from_secs(3),
        }
    }
}

#[derive(Default)]
struct State {
    /// The address of the node believed to lead.
    leader: Option<String>,
    /// Which seed to try next when no leader is known.
    next_seed: usize,
    channels: HashMap<String, Channel>,
}

/// A client of the example cluster. Clones share the leader they learned and their
/// connections, so many tasks can write through one client concurrently.
#[derive(Clone)]
pub struct KvClient {
    seeds: Arc<Vec<String>>,
    retry: RetryPolicy,
    state: Arc<Mutex<State>>,
}

/// What one try at a leader-only call came to.
enum Outcome<T> {
    Done(T),
    /// The node is not the leader; it named the leader, or knew of none.
    Redirect(Option<String>),
    /// Try again (transport failure, stopped node, no quorum).
    Retry(String),
}

impl KvClient {
    /// A client that starts from `seeds` (`host:port` of any cluster members).
    pub fn new(seeds: impl IntoIterator<Item = impl Into<String>>) -> Self {
        let seeds = Arc::new(seeds.into_iter().map(Into::into).collect());
        KvClient {
            seeds,
            retry: RetryPolicy::default(),
            state: Arc::default(),
        }
    }

    /// Uses `retry` instead of the default policy.
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Nothing in State can be half-updated; a panic elsewhere leaves it usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The gRPC client for `addr`, connecting lazily and reusing connections.
    fn grpc(&self, addr: &str) -> Result<GrpcKvClient<Channel>, ClientError> {
        let mut state = self.state();
        if let Some(channel) = state.channels.get(addr) {
            return Ok(GrpcKvClient::new(channel.clone()));
        }
        let channel = lazy_channel(addr).map_err(|e| ClientError::BadAddress {
            addr: addr.into(),
            message: e.to_string(),
        })?;
        state.channels.insert(addr.into(), channel.clone());
        Ok(GrpcKvClient::new(channel))
    }

    /// The node to try next: the known leader, else the seeds in turn.
    fn target(&self) -> String {
        let mut state = self.state();
        if let Some(leader) = &state.leader {
            return leader.clone();
        }
        let seed = self.seeds[state.next_seed % self.seeds.len().max(1)].clone();
        state.next_seed = state.next_seed.wrapping_add(1);
        seed
    }

    fn request<T>(&self, message: T) -> tonic::Request<T> {
        let mut request = tonic::Request::new(message);
        request.set_timeout(self.retry.call_timeout);
        request
    }

    /// Sets `key` to `value`; returns the log index the write committed at.
    pub async fn write(&self, key: &str, value: &str) -> Result<u64, ClientError> {
        let message = pb::WriteRequest {
            key: key.into(),
            value: value.into(),
        };
        self.leader_call(|mut grpc, addr| {
            let request = self.request(message.clone());
            async move {
                let reply = match grpc.write(request).await {
                    Ok(reply) => reply.into_inner(),
                    Err(status) => return classify(&addr, status),
                };
                Ok(match reply.result {
                    Some(write_reply::Result::LogIndex(index)) => Outcome::Done(index),
                    Some(write_reply::Result::NotLeader(n)) => redirect(n),
                    None => return Err(ClientError::EmptyReply(addr)),
                })
            }
        })
        .await
    }

    /// The value of `key`, read linearizably through the leader.
    pub async fn read(&self, key: &str) -> Result<Option<String>, ClientError> {
        let message = pb::ReadRequest {
            key: key.into(),
            local: false,
        };
        self.leader_call(|mut grpc, addr| {
            let request = self.request(message.clone());
            async move {
                let reply = match grpc.read(request).await {
                    Ok(reply) => reply.into_inner(),
                    Err(status) => return classify(&addr, status),
                };
                Ok(match reply.result {
                    Some(read_reply::Result::Found(found)) => Outcome::Done(found.value),
                    Some(read_reply::Result::NotLeader(n)) => redirect(n),
                    None => return Err(ClientError::EmptyReply(addr)),
                })
            }
        })
        .await
    }

    /// The value of `key` in `addr`'s own state machine (no leader involved, not
    /// linearizable), without retries.
    pub async fn read_local(&self, addr: &str, key: &str) -> Result<Option<String>, ClientError> {
        let request = self.request(pb::ReadRequest {
            key: key.into(),
            local: true,
        });
        let reply = self
            .grpc(addr)?
            .read(request)
            .await
            .map_err(|s| rejected(addr, &s))?;
        match reply.into_inner().result {
            Some(read_reply::Result::Found(found)) => Ok(found.value),
            _ => Err(ClientError::EmptyReply(addr.into())),
        }
    }

    /// `addr`'s raft status (its role, term, leader, last log and applied indexes), without
    /// retries.
    pub async fn status(&self, addr: &str) -> Result<pb::StatusReply, ClientError> {
        let request = self.request(pb::StatusRequest {});
        let reply = self
            .grpc(addr)?
            .status(request)
            .await
            .map_err(|s| rejected(addr, &s))?;
        Ok(reply.into_inner())
    }

    /// Initializes a new cluster of `members` through the member at `addr`.
    pub async fn init(&self, addr: &str, members: &[(NodeId, String)]) -> Result<(), ClientError> {
        let members = members
            .iter()
            .map(|(id, a)| pb::Member {
                id: *id,
                addr: a.clone(),
            })
            .collect();
        // Initialization waits for learners to catch up: allow it the whole deadline.
        let mut request = tonic::Request::new(pb::InitRequest { members });
        request.set_timeout(self.retry.deadline);
        self.grpc(addr)?
            .init(request)
            .await
            .map_err(|s| rejected(addr, &s))?;
        Ok(())
    }

    /// Runs `call` against the leader until it is done, the node rejects it, or the deadline
    /// passes; backs off after each failure that a redirect does not explain.
    async fn leader_call<T, F, Fut>(&self, call: F) -> Result<T, ClientError>
    where
        F: Fn(GrpcKvClient<Channel>, String) -> Fut,
        Fut: std::future::Future<Output = Result<Outcome<T>, ClientError>>,
    {
        let start = Instant::now();
        let mut backoff = self.retry.initial_backoff;
        let mut attempts = 0;
        let mut redirects = 0;
        loop {
            let addr = self.target();
            attempts += 1;
            let last = match call(self.grpc(&addr)?, addr.clone()).await? {
                Outcome::Done(value) => {
                    self.state().leader = Some(addr);
                    return Ok(value);
                }
                // Follow a redirect at once, but not in circles while a new leader settles.
                Outcome::Redirect(Some(leader)) if leader != addr && redirects < 3 => {
                    redirects += 1;
                    self.state().leader = Some(leader);
                    continue;
                }
                Outcome::Redirect(_) => format!("{addr} knows no leader"),
                Outcome::Retry(why) => why,
            };
            self.state().leader = None;
            let waited = start.elapsed();
            if waited >= self.retry.deadline {
                return Err(ClientError::GaveUp {
                    waited,
                    attempts,
                    last,
                });
            }
            redirects = 0;
            tokio::time::sleep(jitter(backoff)).await;
            backoff = (backoff * 2).min(self.retry.max_backoff);
        }
    }
}

fn redirect<T>(not_leader: pb::NotLeader) -> Outcome<T> {
    Outcome::Redirect(not_leader.leader.map(|m| m.addr))
}

fn rejected(addr: &str, status: &tonic::Status) -> ClientError {
    let (addr, message) = (addr.into(), status.message().into());
    match status.code() {
        Code::Unavailable => ClientError::Unreachable { addr, message },
        _ => ClientError::Rejected {
            addr,
            status: message,
        },
    }
}

/// Transport failures, stopped nodes and lost quorums pass; a refusal does not.
fn classify<T>(addr: &str, status: tonic::Status) -> Result<Outcome<T>, ClientError> {
    match status.code() {
        Code::Unavailable
        | Code::DeadlineExceeded
        | Code::Cancelled
        | Code::Unknown
        | Code::Aborted
        | Code::Internal => Ok(Outcome::Retry(format!("{addr}: {}", status.message()))),
        _ => Err(rejected(addr, &status)),
    }
}

/// `d` scaled by a factor in [0.5, 1.5), so clients that failed together do not retry
/// together; the clock's nanoseconds are random enough for that.
fn jitter(d: Duration) -> Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|t| t.subsec_nanos())
        .unwrap_or(0);
    d.mul_f64(0.5 + f64::from(nanos % 1000) / 1000.0)
}
