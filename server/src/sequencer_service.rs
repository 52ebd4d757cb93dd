//! The sequencer's gRPC service over a [`Host`], and [`SequencerServer`], the running
//! process's server (the same accept loop, TLS and roles as the LogDrive servers'). Every
//! call needs a certificate of the cluster's CA; clients, sequencers and operators may all
//! make them (a client's appends need slots, and a client that finds a sequencer gone asks
//! another to install a segment).

use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use sealog_vlog::LogError;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::{Request, Response, Status};

use crate::auth::Op;
use crate::pb::sequencer::sequencer_server::{Sequencer as SequencerRpc, SequencerServer as Rpc};
use crate::pb::sequencer::{self as pb, install_reply, sequencer_error, slot_reply};
use crate::sequencer_host::Host;
use crate::serve::{bind, builder, run, ServerError};
use crate::tls::{authorize, server_config, ConnectionStats, TlsPem};

/// The service: see the module doc.
struct Service {
    host: Arc<Host>,
    refused: AtomicU64,
}

fn error_to_pb(error: &LogError) -> pb::SequencerError {
    use sequencer_error::Kind;
    let kind = match error {
        LogError::SequencerDown => Kind::Down(pb::Empty {}),
        LogError::Sealed { .. } => Kind::Sealed(pb::Empty {}),
        LogError::Overloaded { waiting_max } => Kind::OverloadedWaitingMax(*waiting_max),
        other => Kind::Failed(other.to_string()),
    };
    pb::SequencerError { kind: Some(kind) }
}

/// The loglet a request names, or `InvalidArgument`.
fn named(loglet: Option<pb::LogletRef>) -> Result<pb::LogletRef, Status> {
    loglet.ok_or_else(|| Status::invalid_argument("the request names no loglet"))
}

fn slots(outcome: Result<Vec<u64>, LogError>) -> Response<pb::SlotsReply> {
    let result = match outcome {
        Ok(slots) => pb::slots_reply::Result::Slots(pb::Slots { slots }),
        Err(error) => pb::slots_reply::Result::Error(error_to_pb(&error)),
    };
    Response::new(pb::SlotsReply {
        result: Some(result),
    })
}

fn slot(outcome: Result<u64, LogError>) -> Response<pb::SlotReply> {
    let result = match outcome {
        Ok(slot) => slot_reply::Result::Slot(slot),
        Err(error) => slot_reply::Result::Error(error_to_pb(&error)),
    };
    Response::new(pb::SlotReply {
        result: Some(result),
    })
}

impl Service {
    fn sequencer(&self, loglet: &pb::LogletRef) -> Result<Arc<sealog_vlog::Sequencer>, LogError> {
        self.host
            .sequencer(loglet.loglet, loglet.epoch)
            .ok_or(LogError::SequencerDown)
    }
}

#[tonic::async_trait]
impl SequencerRpc for Service {
    async fn acquire(
        &self,
        request: Request<pb::LogletRef>,
    ) -> Result<Response<pb::SlotReply>, Status> {
        authorize(&request, Op::Sequence, &self.refused)?;
        let loglet = request.into_inner();
        let outcome = async {
            let sequencer = self.sequencer(&loglet)?;
            self.host.waiting(1, sequencer.acquire()).await
        };
        Ok(slot(outcome.await))
    }

    async fn complete(
        &self,
        request: Request<pb::CompleteRequest>,
    ) -> Result<Response<pb::SlotReply>, Status> {
        authorize(&request, Op::Sequence, &self.refused)?;
        let request = request.into_inner();
        let loglet = named(request.loglet)?;
        let outcome = async {
            let sequencer = self.sequencer(&loglet)?;
            let completed = sequencer.complete(request.slot);
            self.host.waiting(1, completed).await.map(|()| request.slot)
        };
        Ok(slot(outcome.await))
    }

    async fn acquire_many(
        &self,
        request: Request<pb::AcquireManyRequest>,
    ) -> Result<Response<pb::SlotsReply>, Status> {
        authorize(&request, Op::Sequence, &self.refused)?;
        let request = request.into_inner();
        let loglet = named(request.loglet)?;
        let outcome = async {
            let sequencer = self.sequencer(&loglet)?;
            // Never more than the window: the rest could not be handed out now anyway.
            let count = request.count.clamp(1, sequencer.window());
            let appends = usize::try_from(count).unwrap_or(usize::MAX);
            let acquired = sequencer.acquire_many(count);
            let range = self.host.waiting(appends, acquired).await?;
            Ok(range.collect())
        };
        Ok(slots(outcome.await))
    }

    async fn complete_many(
        &self,
        request: Request<pb::CompleteManyRequest>,
    ) -> Result<Response<pb::SlotsReply>, Status> {
        authorize(&request, Op::Sequence, &self.refused)?;
        let request = request.into_inner();
        let loglet = named(request.loglet)?;
        let outcome = async {
            let sequencer = self.sequencer(&loglet)?;
            let completed = sequencer.complete_many(&request.slots);
            let appends = request.slots.len().max(1);
            self.host.waiting(appends, completed).await?;
            Ok(request.slots.clone())
        };
        Ok(slots(outcome.await))
    }

    async fn tail(
        &self,
        request: Request<pb::LogletRef>,
    ) -> Result<Response<pb::SlotReply>, Status> {
        authorize(&request, Op::Sequence, &self.refused)?;
        let loglet = request.into_inner();
        Ok(slot(self.sequencer(&loglet).and_then(|s| s.tail())))
    }

    async fn refuse(
        &self,
        request: Request<pb::LogletRef>,
    ) -> Result<Response<pb::SlotReply>, Status> {
        authorize(&request, Op::Sequence, &self.refused)?;
        let loglet = request.into_inner();
        let outcome = self.sequencer(&loglet).map(|sequencer| {
            sequencer.refuse_slots();
            sequencer.first_incomplete()
        });
        Ok(slot(outcome))
    }

    async fn install(
        &self,
        request: Request<pb::InstallRequest>,
    ) -> Result<Response<pb::InstallReply>, Status> {
        authorize(&request, Op::Sequence, &self.refused)?;
        let from = request.into_inner().from;
        let result = match self.host.install(from).await {
            Ok(loglet) => install_reply::Result::Loglet(loglet),
            Err(error) => {
                tracing::warn!(?from, %error, "installing a segment failed");
                install_reply::Result::Error(error_to_pb(&error))
            }
        };
        Ok(Response::new(pb::InstallReply {
            result: Some(result),
        }))
    }

    async fn status(
        &self,
        request: Request<pb::StatusRequest>,
    ) -> Result<Response<pb::StatusReply>, Status> {
        authorize(&request, Op::Sequence, &self.refused)?;
        let loglets = self
            .host
            .hosted()
            .into_iter()
            .map(|(loglet, epoch, sequencer)| pb::Hosted {
                loglet,
                epoch,
                tail: sequencer.first_incomplete(),
                in_flight: sequencer.in_flight(),
                sealed: sequencer.tail().is_err(),
            })
            .collect();
        let (waiting, waiting_max) = self.host.waiting_now();
        Ok(Response::new(pb::StatusReply {
            name: self.host.config().name.clone(),
            loglets,
            waiting: waiting as u64,
            waiting_max: waiting_max as u64,
        }))
    }
}

/// A sequencer serving on the current tokio runtime.
pub struct SequencerServer {
    addr: SocketAddr,
    host: Arc<Host>,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl SequencerServer {
    /// Serves `host` on `listen` with `tls` (`None`: plain, every caller trusted).
    pub async fn start(
        host: Arc<Host>,
        listen: SocketAddr,
        tls: Option<TlsPem>,
    ) -> Result<SequencerServer, ServerError> {
        let tls = tls.as_ref().map(server_config).transpose()?;
        let (listener, addr) = bind(listen).await?;
        let service = Service {
            host: Arc::clone(&host),
            refused: AtomicU64::new(0),
        };
        let router = builder(host.config().waiting_max.max(1)).add_service(Rpc::new(service));
        let (stop, task) = run(listener, tls, Arc::new(ConnectionStats::default()), router);
        Ok(SequencerServer {
            addr,
            host,
            stop: Some(stop),
            task,
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The host it serves.
    pub fn host(&self) -> &Arc<Host> {
        &self.host
    }

    /// Stops serving, as a killed process would: its loglets can take no more slots.
    pub async fn stop(mut self) {
        for (_, _, sequencer) in self.host.hosted() {
            sequencer.fail();
        }
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.task.abort();
        let _ = (&mut self.task).await;
    }
}

impl Drop for SequencerServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}
