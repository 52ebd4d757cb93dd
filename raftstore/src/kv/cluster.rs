//! An in-process cluster of example nodes on loopback, for tests and the benchmark: start N
//! nodes on one log store kind, each on its own ring in a directory, initialize them as one
//! cluster, and hand out clients.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};

use openraft::BasicNode;

use super::client::KvClient;
use super::node::{Node, NodeConfig, NodeError, StoreKind};
use super::server::{init_cluster, InitError};
use super::types::NodeId;

/// Why the cluster could not start, initialize or stop.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// A node failed.
    #[error("node {id}: {source}")]
    Node {
        /// Which node.
        id: NodeId,
        /// Its error.
        source: NodeError,
    },
    /// Initialization failed.
    #[error(transparent)]
    Init(#[from] InitError),
    /// The cluster has no nodes.
    #[error("a cluster needs at least one node")]
    Empty,
}

/// N nodes with ids 1..=N, each on its own ring `node-<id>.ring` in one directory.
pub struct Cluster {
    nodes: Vec<Node>,
    dir: PathBuf,
}

impl Cluster {
    /// Starts `n` nodes on `store`, on free loopback ports; `configure` may adjust each
    /// node's config (ring size, raft timeouts) before it starts.
    pub async fn start(
        n: usize,
        store: StoreKind,
        dir: &Path,
        configure: impl Fn(&mut NodeConfig),
    ) -> Result<Cluster, ClusterError> {
        if n == 0 {
            return Err(ClusterError::Empty);
        }
        let mut nodes = Vec::with_capacity(n);
        for id in 1..=n as NodeId {
            let listen = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
            let ring = dir.join(format!("node-{id}.ring"));
            let mut config = NodeConfig::new(id, listen, ring, store);
            configure(&mut config);
            let node = Node::start(config)
                .await
                .map_err(|source| ClusterError::Node { id, source })?;
            nodes.push(node);
        }
        Ok(Cluster {
            nodes,
            dir: dir.to_path_buf(),
        })
    }

    /// Every node's id and address.
    pub fn members(&self) -> Vec<(NodeId, String)> {
        self.nodes
            .iter()
            .map(|n| (n.id(), n.addr().to_string()))
            .collect()
    }

    /// Makes the nodes one cluster with all of them voters, led (at first) by node 1.
    pub async fn init(&self) -> Result<(), ClusterError> {
        let members: BTreeMap<NodeId, BasicNode> = self
            .members()
            .into_iter()
            .map(|(id, addr)| (id, BasicNode { addr }))
            .collect();
        init_cluster(self.nodes[0].raft(), &members).await?;
        Ok(())
    }

    /// A client that knows every node.
    pub fn client(&self) -> KvClient {
        KvClient::new(self.members().into_iter().map(|(_, addr)| addr))
    }

    /// The running nodes, in id order.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// The directory holding the nodes' rings.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Stops every node; reports the first failure after trying them all.
    pub async fn shutdown(self) -> Result<(), ClusterError> {
        let mut first = None;
        for node in self.nodes {
            let id = node.id();
            if let Err(source) = node.shutdown().await {
                first.get_or_insert(ClusterError::Node { id, source });
            }
        }
        first.map_or(Ok(()), Err)
    }
}
