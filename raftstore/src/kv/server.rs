//! The gRPC services of a node around its `Raft` handle: `Raft` hands peers' requests to
//! openraft, `KV` serves clients. A node that is not the leader answers leader-only calls
//! with the leader it knows of instead of forwarding them, so a client learns where to go
//! and the node never holds a client's request across a leader change.

use std::collections::BTreeMap;
use std::time::Duration;

use openraft::error::{
    CheckIsLeaderError, ClientWriteError, ForwardToLeader, InitializeError, RaftError,
};
use openraft::raft::{AppendEntriesRequest, InstallSnapshotRequest, VoteRequest};
use openraft::{BasicNode, ChangeMembers, RaftMetrics};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tonic::{Request as GrpcRequest, Response as GrpcResponse, Status};

use super::pb::{self, read_reply, write_reply};
use super::state_machine::KvStateMachine;
use super::types::{KvRaft, NodeId, Request, TypeConfig};

/// How long `init` waits for the first node to lead alone, and each learner to catch up.
const INIT_STEP_TIMEOUT: Duration = Duration::from_secs(10);

/// The `Raft` service: openraft's RPCs from peers.
pub struct RaftService {
    raft: KvRaft,
}

impl RaftService {
    /// Serves `raft`'s peers.
    pub fn new(raft: KvRaft) -> Self {
        RaftService { raft }
    }
}

fn decode<T: DeserializeOwned>(request: GrpcRequest<pb::RaftRequest>) -> Result<T, Status> {
    postcard::from_bytes(&request.into_inner().payload)
        .map_err(|e| Status::invalid_argument(format!("undecodable raft request: {e}")))
}

fn encode<T: Serialize>(result: &T) -> Result<GrpcResponse<pb::RaftReply>, Status> {
    let payload = postcard::to_allocvec(result)
        .map_err(|e| Status::internal(format!("unencodable raft reply: {e}")))?;
    Ok(GrpcResponse::new(pb::RaftReply { payload }))
}

#[tonic::async_trait]
impl pb::raft_server::Raft for RaftService {
    async fn append_entries(
        &self,
        request: GrpcRequest<pb::RaftRequest>,
    ) -> Result<GrpcResponse<pb::RaftReply>, Status> {
        let rpc: AppendEntriesRequest<TypeConfig> = decode(request)?;
        encode(&self.raft.append_entries(rpc).await)
    }

    async fn vote(
        &self,
        request: GrpcRequest<pb::RaftRequest>,
    ) -> Result<GrpcResponse<pb::RaftReply>, Status> {
        let rpc: VoteRequest<NodeId> = decode(request)?;
        encode(&self.raft.vote(rpc).await)
    }

    async fn install_snapshot(
        &self,
        request: GrpcRequest<pb::RaftRequest>,
    ) -> Result<GrpcResponse<pb::RaftReply>, Status> {
        let rpc: InstallSnapshotRequest<TypeConfig> = decode(request)?;
        encode(&self.raft.install_snapshot(rpc).await)
    }
}

/// The `KV` service: clients' writes, reads, status and cluster initialization.
pub struct KvService {
    raft: KvRaft,
    state_machine: KvStateMachine,
}

impl KvService {
    /// Serves clients from `raft` and the state machine it applies to.
    pub fn new(raft: KvRaft, state_machine: KvStateMachine) -> Self {
        KvService {
            raft,
            state_machine,
        }
    }
}

fn not_leader(forward: ForwardToLeader<NodeId, BasicNode>) -> pb::NotLeader {
    let leader = match (forward.leader_id, forward.leader_node) {
        (Some(id), Some(node)) => Some(pb::Member {
            id,
            addr: node.addr,
        }),
        _ => None,
    };
    pb::NotLeader { leader }
}

/// openraft stopped (a fatal error or shutdown): the client should try another node.
fn fatal(e: impl std::fmt::Display) -> Status {
    Status::unavailable(format!("raft stopped: {e}"))
}

#[tonic::async_trait]
impl pb::kv_server::Kv for KvService {
    async fn write(
        &self,
        request: GrpcRequest<pb::WriteRequest>,
    ) -> Result<GrpcResponse<pb::WriteReply>, Status> {
        let pb::WriteRequest { key, value } = request.into_inner();
        let result = match self.raft.client_write(Request::Set { key, value }).await {
            Ok(response) => write_reply::Result::LogIndex(response.log_id.index),
            Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f))) => {
                write_reply::Result::NotLeader(not_leader(f))
            }
            Err(RaftError::APIError(e)) => return Err(Status::failed_precondition(e.to_string())),
            Err(RaftError::Fatal(e)) => return Err(fatal(e)),
        };
        Ok(GrpcResponse::new(pb::WriteReply {
            result: Some(result),
        }))
    }

    async fn read(
        &self,
        request: GrpcRequest<pb::ReadRequest>,
    ) -> Result<GrpcResponse<pb::ReadReply>, Status> {
        let pb::ReadRequest { key, local } = request.into_inner();
        if !local {
            match self.raft.ensure_linearizable().await {
                Ok(_) => {}
                Err(RaftError::APIError(CheckIsLeaderError::ForwardToLeader(f))) => {
                    let result = read_reply::Result::NotLeader(not_leader(f));
                    return Ok(GrpcResponse::new(pb::ReadReply {
                        result: Some(result),
                    }));
                }
                Err(RaftError::APIError(e)) => return Err(Status::unavailable(e.to_string())),
                Err(RaftError::Fatal(e)) => return Err(fatal(e)),
            }
        }
        let found = pb::ReadValue {
            value: self.state_machine.get(&key),
        };
        let result = Some(read_reply::Result::Found(found));
        Ok(GrpcResponse::new(pb::ReadReply { result }))
    }

    async fn status(
        &self,
        _request: GrpcRequest<pb::StatusRequest>,
    ) -> Result<GrpcResponse<pb::StatusReply>, Status> {
        Ok(GrpcResponse::new(status_reply(
            &self.raft.metrics().borrow(),
        )))
    }

    async fn init(
        &self,
        request: GrpcRequest<pb::InitRequest>,
    ) -> Result<GrpcResponse<pb::InitReply>, Status> {
        let members = request
            .into_inner()
            .members
            .into_iter()
            .map(|m| (m.id, BasicNode { addr: m.addr }))
            .collect();
        match init_cluster(&self.raft, &members).await {
            Ok(()) => Ok(GrpcResponse::new(pb::InitReply {})),
            Err(e @ InitError::NotAMember(_)) => Err(Status::invalid_argument(e.to_string())),
            Err(e) => Err(Status::failed_precondition(e.to_string())),
        }
    }
}

/// A node's metrics as the `Status` call reports them.
pub fn status_reply(m: &RaftMetrics<NodeId, BasicNode>) -> pb::StatusReply {
    let membership = m.membership_config.membership();
    let member = |id: NodeId| {
        let addr = membership
            .get_node(&id)
            .map(|n| n.addr.clone())
            .unwrap_or_default();
        pb::Member { id, addr }
    };
    pb::StatusReply {
        id: m.id,
        state: format!("{:?}", m.state),
        term: m.current_term,
        leader: m.current_leader.map(member),
        last_log_index: m.last_log_index,
        last_applied: m.last_applied.map(|l| l.index),
        voters: membership.voter_ids().collect(),
        members: membership.nodes().map(|(id, _)| member(*id)).collect(),
    }
}

/// Why a cluster could not be initialized.
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    /// The node asked to initialize is not among the members.
    #[error("node {0} is not among the members it was asked to initialize")]
    NotAMember(NodeId),
    /// openraft refused or failed a step.
    #[error("cluster initialization failed at {step}: {message}")]
    Step {
        /// Which step.
        step: &'static str,
        /// What openraft said.
        message: String,
    },
}

fn step_error(step: &'static str) -> impl FnOnce(&dyn std::fmt::Display) -> InitError {
    move |e| InitError::Step {
        step,
        message: e.to_string(),
    }
}

/// Initializes a new cluster through `raft`'s node: it becomes a cluster of one, every other
/// member joins as a learner (waiting for it to catch up), then all become voters. A node
/// already initialized skips the first step, so a retried `init` finishes the job.
pub async fn init_cluster(
    raft: &KvRaft,
    members: &BTreeMap<NodeId, BasicNode>,
) -> Result<(), InitError> {
    let me = raft.metrics().borrow().id;
    let Some(my_node) = members.get(&me) else {
        return Err(InitError::NotAMember(me));
    };
    let alone = BTreeMap::from([(me, my_node.clone())]);
    match raft.initialize(alone).await {
        Ok(()) | Err(RaftError::APIError(InitializeError::NotAllowed(_))) => {}
        Err(e) => return Err(step_error("initialize")(&e)),
    }
    raft.wait(Some(INIT_STEP_TIMEOUT))
        .current_leader(me, "init: lead alone")
        .await
        .map_err(|e| step_error("becoming leader")(&e))?;
    for (id, node) in members.iter().filter(|(id, _)| **id != me) {
        raft.add_learner(*id, node.clone(), true)
            .await
            .map_err(|e| step_error("add_learner")(&e))?;
    }
    let voters: std::collections::BTreeSet<NodeId> = members.keys().copied().collect();
    raft.change_membership(ChangeMembers::ReplaceAllVoters(voters), false)
        .await
        .map_err(|e| step_error("change_membership")(&e))?;
    Ok(())
}
