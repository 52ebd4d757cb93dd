//! openraft's network over gRPC: a [`RaftNetworkFactory`] whose per-peer clients are tonic
//! channels, connected lazily so a peer that is down at start (or killed later) costs nothing
//! until a request is due and reconnects by itself when it comes back.
//!
//! openraft's requests and replies cross the wire as postcard bytes inside the `Raft`
//! service's messages (proto/raft.proto). Transport failures are mapped to what openraft
//! should do about them: a peer that refuses connections is `Unreachable` (openraft backs off
//! before retrying), anything else is a `NetworkError` (openraft retries at once), and an
//! error the peer's Raft returned comes back as a `RemoteError`.

use std::error::Error;
use std::time::Duration;

use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::{Backoff, RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::BasicNode;
use serde::de::DeserializeOwned;
use serde::Serialize;
use tonic::transport::{Channel, Endpoint};

use super::pb::raft_client::RaftClient;
use super::pb::{RaftReply, RaftRequest};
use super::types::{NodeId, TypeConfig};

/// The largest gRPC message a node sends or accepts: snapshot chunks are 3 MiB by default
/// and append batches of large values can pass tonic's 4 MiB default.
pub const MAX_MESSAGE_BYTES: usize = 64 << 20;

/// How long to wait for a TCP connection to a peer before calling it unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// Makes one [`PeerClient`] per peer openraft replicates to or asks for votes.
#[derive(Clone, Debug, Default)]
pub struct KvNetwork {}

impl RaftNetworkFactory<TypeConfig> for KvNetwork {
    type Network = PeerClient;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> PeerClient {
        PeerClient {
            target,
            node: node.clone(),
            client: None,
        }
    }
}

/// The connection to one peer, opened on first use.
pub struct PeerClient {
    target: NodeId,
    node: BasicNode,
    client: Option<RaftClient<Channel>>,
}

/// A tonic channel to `addr` (`host:port`), connected on first use.
pub fn lazy_channel(addr: &str) -> Result<Channel, tonic::transport::Error> {
    let endpoint = Endpoint::from_shared(format!("http://{addr}"))?
        .connect_timeout(CONNECT_TIMEOUT)
        .tcp_nodelay(true);
    Ok(endpoint.connect_lazy())
}

/// Which `Raft` service method to call.
#[derive(Clone, Copy)]
enum Method {
    AppendEntries,
    Vote,
    InstallSnapshot,
}

type RpcResult<T, E> = Result<T, RPCError<NodeId, BasicNode, RaftError<NodeId, E>>>;

impl PeerClient {
    fn client(&mut self) -> Result<RaftClient<Channel>, NetworkError> {
        if let Some(client) = &self.client {
            return Ok(client.clone());
        }
        let channel = lazy_channel(&self.node.addr).map_err(|e| NetworkError::new(&e))?;
        let client = RaftClient::new(channel)
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        self.client = Some(client.clone());
        Ok(client)
    }

    async fn call<Req, Resp, E>(
        &mut self,
        method: Method,
        req: &Req,
        option: &RPCOption,
    ) -> RpcResult<Resp, E>
    where
        Req: Serialize,
        Resp: DeserializeOwned,
        E: Error + DeserializeOwned,
    {
        let payload = postcard::to_allocvec(req).map_err(|e| NetworkError::new(&e))?;
        let mut request = tonic::Request::new(RaftRequest { payload });
        request.set_timeout(option.hard_ttl());
        let mut client = self.client()?;
        let reply = match method {
            Method::AppendEntries => client.append_entries(request).await,
            Method::Vote => client.vote(request).await,
            Method::InstallSnapshot => client.install_snapshot(request).await,
        };
        let RaftReply { payload } = reply.map_err(status_to_rpc_error)?.into_inner();
        let result: Result<Resp, RaftError<NodeId, E>> =
            postcard::from_bytes(&payload).map_err(|e| NetworkError::new(&e))?;
        result.map_err(|e| {
            RPCError::RemoteError(RemoteError::new_with_node(
                self.target,
                self.node.clone(),
                e,
            ))
        })
    }
}

/// A refused or dropped connection is `Unreachable`: openraft should back off, not spin.
fn status_to_rpc_error<E: Error>(status: tonic::Status) -> RPCError<NodeId, BasicNode, E> {
    match status.code() {
        tonic::Code::Unavailable => RPCError::Unreachable(Unreachable::new(&status)),
        _ => RPCError::Network(NetworkError::new(&status)),
    }
}

impl RaftNetwork<TypeConfig> for PeerClient {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<AppendEntriesResponse<NodeId>, openraft::error::Infallible> {
        self.call(Method::AppendEntries, &rpc, &option).await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<InstallSnapshotResponse<NodeId>, InstallSnapshotError> {
        self.call(Method::InstallSnapshot, &rpc, &option).await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> RpcResult<VoteResponse<NodeId>, openraft::error::Infallible> {
        self.call(Method::Vote, &rpc, &option).await
    }

    /// A killed peer comes back within a second or two in the example; retrying every 200 ms
    /// lets it catch up soon after, at little cost while it is down.
    fn backoff(&self) -> Backoff {
        Backoff::new(std::iter::repeat(Duration::from_millis(200)))
    }
}
