//! The LogDrive service: the gRPC handlers over one store ([`Drives`]). Every request is
//! authorized from its connection's certificate before anything else, then admitted under
//! the server's bound on operations in flight (a bounded number wait for a slot; past that
//! the answer is a definite `Overloaded`), then run on the LogDrive its id and generation
//! name. Outcomes, errors included, travel in the reply (see `wire`); a gRPC status means the
//! request never reached a LogDrive (refused, malformed, or cut off).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use sealog_logdrive::{LogDriveError, OpFuture};
use tokio::sync::{Semaphore, SemaphorePermit};
use tonic::{Request, Response, Status};

use crate::auth::Op;
use crate::drives::{Drives, Hosted};
use crate::pb::log_drive_service_server::LogDriveService;
use crate::pb::{self, create_reply, list_reply};
use crate::tls::authorize;
use crate::wire;

/// The limits a server announces and enforces.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Operations running at once; as many more may wait for a slot.
    pub in_flight_max: usize,
    /// The largest payload the ring holds in one record.
    pub payload_size_max_bytes: u64,
    /// The store's largest write window.
    pub write_window_max: u64,
    /// The store's largest weak_tail window.
    pub weak_tail_k_max: u64,
}

/// What the service counts.
#[derive(Debug, Default)]
pub struct ServiceStats {
    /// Requests refused for their caller (no certificate, or a role that may not).
    pub refused_requests: AtomicU64,
    /// Operations refused with `Overloaded` (each write of a refused batch counts).
    pub overloaded: AtomicU64,
    /// Requests that ran on a LogDrive (whatever their outcome); each write of a batch
    /// counts as one.
    pub served: AtomicU64,
    /// Batches of writes admitted.
    pub write_batches: AtomicU64,
}

/// The service over one store.
pub struct Service {
    store: Arc<dyn Drives>,
    /// Handles of the LogDrives asked for so far, by id (a handle names its generation).
    drives: Mutex<HashMap<u64, Hosted>>,
    slots: Semaphore,
    waiting: AtomicUsize,
    limits: Limits,
    stats: Arc<ServiceStats>,
}

/// A slot in flight, and the waiting count it took while it waited.
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Service {
    /// A service over `store` with `limits`.
    pub fn new(store: Arc<dyn Drives>, limits: Limits, stats: Arc<ServiceStats>) -> Service {
        Service {
            store,
            drives: Mutex::new(HashMap::new()),
            slots: Semaphore::new(limits.in_flight_max),
            waiting: AtomicUsize::new(0),
            limits,
            stats,
        }
    }

    fn authorize<T>(&self, request: &Request<T>, op: Op) -> Result<(), Status> {
        authorize(request, op, &self.stats.refused_requests)
    }

    /// A slot to run in, waiting while fewer than `in_flight_max` others wait.
    async fn admit(&self) -> Result<SemaphorePermit<'_>, LogDriveError> {
        if let Ok(permit) = self.slots.try_acquire() {
            return Ok(permit);
        }
        let overloaded = LogDriveError::Overloaded {
            in_flight_max: self.limits.in_flight_max as u64,
        };
        if self.waiting.fetch_add(1, Ordering::AcqRel) >= self.limits.in_flight_max {
            self.waiting.fetch_sub(1, Ordering::AcqRel);
            self.stats.overloaded.fetch_add(1, Ordering::Relaxed);
            return Err(overloaded);
        }
        let _waiting = Waiting(&self.waiting);
        // The semaphore is never closed.
        self.slots.acquire().await.map_err(|_| overloaded)
    }

    /// The handle of the LogDrive `drive` names, if that generation is live.
    fn drive(&self, drive: &pb::DriveRef) -> Result<Hosted, LogDriveError> {
        let missing = LogDriveError::Missing {
            id: drive.id,
            generation: drive.generation,
        };
        let mut drives = lock(&self.drives);
        if let Some(handle) = drives.get(&drive.id) {
            if handle.generation == drive.generation {
                return Ok(handle.clone());
            }
        }
        let handle = self.store.get(drive.id).map_err(|_| missing.clone())?;
        let generation = handle.generation;
        drives.insert(drive.id, handle.clone());
        if generation == drive.generation {
            Ok(handle)
        } else {
            Err(missing)
        }
    }

    /// Admits the request and runs `op` on the LogDrive it names.
    async fn run<T>(
        &self,
        drive: Option<pb::DriveRef>,
        op: impl FnOnce(&Hosted) -> OpFuture<T>,
    ) -> Result<Result<T, LogDriveError>, Status> {
        let drive = drive.ok_or_else(|| Status::invalid_argument("the request names no drive"))?;
        let _slot = match self.admit().await {
            Ok(slot) => slot,
            Err(error) => return Ok(Err(error)),
        };
        let handle = match self.drive(&drive) {
            Ok(handle) => handle,
            Err(error) => return Ok(Err(error)),
        };
        self.stats.served.fetch_add(1, Ordering::Relaxed);
        Ok(op(&handle).await)
    }

    /// Admits a store operation and runs it.
    async fn run_store<T>(
        &self,
        op: impl FnOnce(&dyn Drives) -> OpFuture<T>,
    ) -> Result<T, LogDriveError> {
        let _slot = self.admit().await?;
        self.stats.served.fetch_add(1, Ordering::Relaxed);
        op(&*self.store).await
    }

    fn list(&self) -> Result<Vec<pb::DriveRef>, LogDriveError> {
        let mut drives = Vec::new();
        for id in self.store.ids()? {
            // A LogDrive deleted between the two calls is simply not listed.
            if let Ok(handle) = self.store.get(id) {
                drives.push(pb::DriveRef {
                    id,
                    generation: handle.generation,
                });
            }
        }
        Ok(drives)
    }
}

#[tonic::async_trait]
impl LogDriveService for Service {
    async fn write(
        &self,
        request: Request<pb::WriteRequest>,
    ) -> Result<Response<pb::UnitReply>, Status> {
        self.authorize(&request, Op::Write)?;
        let r = request.into_inner();
        let outcome = self
            .run(r.drive, |d| d.drive.write(r.address, r.epoch, r.payload))
            .await?;
        Ok(Response::new(wire::unit_to_pb(outcome)))
    }

    async fn write_batch(
        &self,
        request: Request<pb::WriteBatchRequest>,
    ) -> Result<Response<pb::WriteBatchReply>, Status> {
        self.authorize(&request, Op::Write)?;
        let writes = request.into_inner().writes;
        if writes.iter().any(|write| write.drive.is_none()) {
            return Err(Status::invalid_argument(
                "a write of the batch names no drive",
            ));
        }
        let count = writes.len() as u64;
        let _slot = match self.admit().await {
            Ok(slot) => slot,
            Err(error) => {
                // `overloaded` counts writes refused: admit counted one.
                let more = count.saturating_sub(1);
                self.stats.overloaded.fetch_add(more, Ordering::Relaxed);
                let results = writes
                    .iter()
                    .map(|_| wire::unit_to_pb(Err(error.clone())))
                    .collect();
                return Ok(Response::new(pb::WriteBatchReply { results }));
            }
        };
        self.stats.write_batches.fetch_add(1, Ordering::Relaxed);
        // Every write is issued before any is awaited, so that they share a group commit.
        let issued: Vec<OpFuture<()>> = writes
            .into_iter()
            .map(|write| {
                let drive = write.drive.unwrap_or_default();
                match self.drive(&drive) {
                    Ok(handle) => {
                        self.stats.served.fetch_add(1, Ordering::Relaxed);
                        handle
                            .drive
                            .write(write.address, write.epoch, write.payload)
                    }
                    Err(error) => Box::pin(std::future::ready(Err(error))),
                }
            })
            .collect();
        let mut results = Vec::with_capacity(issued.len());
        for write in issued {
            results.push(wire::unit_to_pb(write.await));
        }
        Ok(Response::new(pb::WriteBatchReply { results }))
    }

    async fn read(
        &self,
        request: Request<pb::ReadRequest>,
    ) -> Result<Response<pb::ReadReply>, Status> {
        self.authorize(&request, Op::Read)?;
        let r = request.into_inner();
        let outcome = self.run(r.drive, |d| d.drive.read(r.address)).await?;
        Ok(Response::new(wire::read_to_pb(outcome)))
    }

    async fn weak_tail(
        &self,
        request: Request<pb::WeakTailRequest>,
    ) -> Result<Response<pb::WeakTailReply>, Status> {
        use pb::weak_tail_reply::Result as R;
        self.authorize(&request, Op::WeakTail)?;
        let r = request.into_inner();
        let outcome = self.run(r.drive, |d| d.drive.weak_tail(r.k)).await?;
        let result = match outcome {
            Ok(tail) => R::Tail(wire::tail_to_pb(&tail)),
            Err(error) => R::Error(wire::error_to_pb(&error)),
        };
        Ok(Response::new(pb::WeakTailReply {
            result: Some(result),
        }))
    }

    async fn seal(
        &self,
        request: Request<pb::SealRequest>,
    ) -> Result<Response<pb::UnitReply>, Status> {
        self.authorize(&request, Op::Seal)?;
        let r = request.into_inner();
        let outcome = self
            .run(r.drive, |d| d.drive.seal(r.length, r.epoch))
            .await?;
        Ok(Response::new(wire::unit_to_pb(outcome)))
    }

    async fn fence(
        &self,
        request: Request<pb::FenceRequest>,
    ) -> Result<Response<pb::UnitReply>, Status> {
        self.authorize(&request, Op::Fence)?;
        let r = request.into_inner();
        let outcome = self.run(r.drive, |d| d.drive.fence(r.epoch)).await?;
        Ok(Response::new(wire::unit_to_pb(outcome)))
    }

    async fn trim(
        &self,
        request: Request<pb::TrimRequest>,
    ) -> Result<Response<pb::UnitReply>, Status> {
        self.authorize(&request, Op::Trim)?;
        let r = request.into_inner();
        let outcome = self.run(r.drive, |d| d.drive.trim(r.upto)).await?;
        Ok(Response::new(wire::unit_to_pb(outcome)))
    }

    async fn length(
        &self,
        request: Request<pb::DriveRef>,
    ) -> Result<Response<pb::LengthReply>, Status> {
        use pb::length_reply::Result as R;
        self.authorize(&request, Op::Length)?;
        let drive = request.into_inner();
        let outcome = self.run(Some(drive), |d| d.drive.length()).await?;
        let result = match outcome {
            Ok(length) => R::Length(wire::length_to_pb(&length)),
            Err(error) => R::Error(wire::error_to_pb(&error)),
        };
        Ok(Response::new(pb::LengthReply {
            result: Some(result),
        }))
    }

    async fn create(
        &self,
        request: Request<pb::CreateRequest>,
    ) -> Result<Response<pb::CreateReply>, Status> {
        self.authorize(&request, Op::Create)?;
        let r = request.into_inner();
        let outcome = self.run_store(|s| s.create(r.id, r.capacity)).await;
        let result = match outcome {
            Ok(handle) => {
                let drive = pb::DriveRef {
                    id: handle.id,
                    generation: handle.generation,
                };
                lock(&self.drives).insert(handle.id, handle);
                create_reply::Result::Drive(drive)
            }
            Err(error) => create_reply::Result::Error(wire::error_to_pb(&error)),
        };
        Ok(Response::new(pb::CreateReply {
            result: Some(result),
        }))
    }

    async fn delete(
        &self,
        request: Request<pb::DriveRef>,
    ) -> Result<Response<pb::UnitReply>, Status> {
        self.authorize(&request, Op::Delete)?;
        let drive = request.into_inner();
        // Only the generation the caller names is deleted: a caller that knew an older one
        // must not delete its successor.
        let outcome = match self.drive(&drive) {
            Ok(_) => {
                let outcome = self.run_store(|s| s.delete(drive.id)).await;
                lock(&self.drives).remove(&drive.id);
                outcome
            }
            Err(error) => Err(error),
        };
        Ok(Response::new(wire::unit_to_pb(outcome)))
    }

    async fn list(
        &self,
        request: Request<pb::ListRequest>,
    ) -> Result<Response<pb::ListReply>, Status> {
        self.authorize(&request, Op::List)?;
        let result = match self.list() {
            Ok(drives) => list_reply::Result::Drives(pb::Drives { drives }),
            Err(error) => list_reply::Result::Error(wire::error_to_pb(&error)),
        };
        Ok(Response::new(pb::ListReply {
            result: Some(result),
        }))
    }

    async fn generation(
        &self,
        request: Request<pb::Id>,
    ) -> Result<Response<pb::GenerationReply>, Status> {
        use pb::generation_reply::Result as R;
        // Metadata of a LogDrive the caller names, as its length is.
        self.authorize(&request, Op::Length)?;
        let id = request.into_inner().id;
        let outcome = match self.admit().await {
            Ok(_slot) => match self.store.get(id) {
                Ok(live) => Ok(live.generation),
                Err(LogDriveError::Missing { .. }) => Ok(0),
                Err(error) => Err(error),
            },
            Err(error) => Err(error),
        };
        let result = match outcome {
            Ok(generation) => R::Generation(generation),
            Err(error) => R::Error(wire::error_to_pb(&error)),
        };
        Ok(Response::new(pb::GenerationReply {
            result: Some(result),
        }))
    }

    async fn limits(
        &self,
        request: Request<pb::LimitsRequest>,
    ) -> Result<Response<pb::LimitsReply>, Status> {
        self.authorize(&request, Op::Limits)?;
        Ok(Response::new(pb::LimitsReply {
            payload_size_max_bytes: self.limits.payload_size_max_bytes,
            write_window_max: self.limits.write_window_max,
            weak_tail_k_max: self.limits.weak_tail_k_max,
        }))
    }
}
