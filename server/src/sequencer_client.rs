//! The client side of the sequencer service: [`RemoteSlots`], an AtomicLog's slots from a
//! sequencer in another process (a client's concurrent appends acquire and complete their
//! slots in batches, a call for what queued together); [`SequencerReconfigurer`], which asks
//! a sequencer to reconfigure on a client's behalf (a client may not seal or fence); and
//! [`ClientFactory`], which opens a segment's loglet from its description in the chain.
//! Calls run on the client library's runtime, so their futures can be awaited from any
//! executor.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sealog_vlog::loglet::LogletFuture;
use sealog_vlog::{
    AtomicLog, AtomicOptions, LogError, LogletConfig, LogletFactory, ReconfigFuture, Reconfigurer,
    Segment, SlotFuture, Slots,
};
use tonic::transport::Channel;

use crate::loglet_spec::{LogletSpec, Pool};
use crate::pb::sequencer::sequencer_client::SequencerClient;
use crate::pb::sequencer::{
    self as pb, install_reply, sequencer_error, slot_reply, SequencerError,
};
use crate::remote::{endpoint, RemoteOptions};

/// Connections to sequencers, one per address.
pub struct Sequencers {
    options: RemoteOptions,
    clients: Mutex<HashMap<String, SequencerClient<Channel>>>,
}

impl Sequencers {
    /// Connections made with `options` (TLS, deadlines).
    pub fn new(options: RemoteOptions) -> Sequencers {
        Sequencers {
            options,
            clients: Mutex::new(HashMap::new()),
        }
    }

    /// The client of the sequencer at `addr` (connected lazily, on the client runtime).
    pub fn client(&self, addr: &str) -> Result<SequencerClient<Channel>, LogError> {
        let mut clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(client) = clients.get(addr) {
            return Ok(client.clone());
        }
        let endpoint = endpoint(addr, &self.options).map_err(|error| LogError::InvalidConfig {
            reason: format!("sequencer {addr}: {error}"),
        })?;
        let channel = crate::runtime::enter(|| endpoint.connect_lazy());
        let client = SequencerClient::new(channel);
        clients.insert(addr.into(), client.clone());
        Ok(client)
    }

    /// The longest one call may take.
    pub fn deadline(&self) -> Duration {
        self.options.op_deadline
    }
}

/// What a sequencer's error means to an AtomicLog.
pub(crate) fn from_pb(error: Option<SequencerError>) -> LogError {
    match error.and_then(|e| e.kind) {
        Some(sequencer_error::Kind::Sealed(_)) => LogError::Sealed {
            position: None,
            written: false,
        },
        Some(sequencer_error::Kind::OverloadedWaitingMax(waiting_max)) => {
            LogError::Overloaded { waiting_max }
        }
        // Down, failed, or an answer this client does not know: the sequencer cannot serve
        // this loglet, which only a reconfiguration mends.
        _ => LogError::SequencerDown,
    }
}

/// Acquire calls one `RemoteSlots` has in flight at most. Completions are not capped: a
/// completion call answers only once every slot below its highest is complete, so a capped
/// sender could wait on a completion queued behind it (and time out).
pub const SLOT_CALLS_IN_FLIGHT: usize = 2;

/// Where an acquire's slot goes.
type Acquirer = tokio::sync::oneshot::Sender<Result<u64, LogError>>;
/// A completion and where its outcome goes.
type Completer = (u64, tokio::sync::oneshot::Sender<Result<(), LogError>>);

/// The acquires and completions waiting to be sent, and the senders taking them.
#[derive(Default)]
struct SlotQueues {
    acquirers: VecDeque<Acquirer>,
    /// Slots handed out for acquirers that had gone away: the next acquirers take them
    /// (left unwritten, they would stall every slot after them).
    spare: VecDeque<u64>,
    acquire_senders: usize,
    completers: Vec<Completer>,
    /// A completion sender is spawned and has not yet taken the queue.
    complete_sender_pending: bool,
}

/// What a sender task needs of its `RemoteSlots`.
#[derive(Clone)]
struct SlotLink {
    sequencers: Arc<Sequencers>,
    addr: String,
    loglet: pb::LogletRef,
    queues: Arc<Mutex<SlotQueues>>,
}

/// The slots of loglet `loglet` (at `epoch`) from the sequencer at `addr`.
pub struct RemoteSlots {
    link: SlotLink,
    /// T as last heard.
    tail: AtomicU64,
    refused: AtomicBool,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

impl RemoteSlots {
    /// Slots of `loglet` at `epoch` from the sequencer at `addr`.
    pub fn new(sequencers: Arc<Sequencers>, addr: &str, loglet: u64, epoch: u64) -> RemoteSlots {
        RemoteSlots {
            link: SlotLink {
                sequencers,
                addr: addr.into(),
                loglet: pb::LogletRef { loglet, epoch },
                queues: Arc::default(),
            },
            tail: AtomicU64::new(0),
            refused: AtomicBool::new(false),
        }
    }

    /// Sends one call; a transport failure or timeout is `SequencerDown`.
    fn call<F, Fut>(&self, what: &'static str, send: F) -> SlotFuture<'static, u64>
    where
        F: FnOnce(SequencerClient<Channel>, pb::LogletRef) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = Result<tonic::Response<pb::SlotReply>, tonic::Status>>
            + Send,
    {
        let client = self.link.sequencers.client(&self.link.addr);
        let (loglet, deadline) = (self.link.loglet, self.link.sequencers.deadline());
        let task = crate::runtime::spawn(async move {
            let reply = tokio::time::timeout(deadline, send(client?, loglet)).await;
            match answered(what, reply)?.result {
                Some(slot_reply::Result::Slot(slot)) => Ok(slot),
                Some(slot_reply::Result::Error(error)) => Err(from_pb(Some(error))),
                None => Err(from_pb(None)),
            }
        });
        Box::pin(async move { task.await.unwrap_or(Err(LogError::SequencerDown)) })
    }
}

/// A call's reply, or its timeout.
type Call<T> = Result<Result<tonic::Response<T>, tonic::Status>, tokio::time::error::Elapsed>;

/// The message a call answered; a transport failure or a timeout is `SequencerDown`.
fn answered<T>(what: &str, reply: Call<T>) -> Result<T, LogError> {
    match reply {
        Ok(Ok(reply)) => Ok(reply.into_inner()),
        Ok(Err(status)) => {
            tracing::debug!(what, %status, "a sequencer call failed");
            Err(LogError::SequencerDown)
        }
        Err(_) => {
            tracing::debug!(what, "a sequencer call timed out");
            Err(LogError::SequencerDown)
        }
    }
}

/// The slots a batch call answered, or why it failed.
fn slots_outcome(what: &str, reply: Call<pb::SlotsReply>) -> Result<Vec<u64>, LogError> {
    match answered(what, reply)?.result {
        Some(pb::slots_reply::Result::Slots(slots)) => Ok(slots.slots),
        Some(pb::slots_reply::Result::Error(error)) => Err(from_pb(Some(error))),
        None => Err(from_pb(None)),
    }
}

impl SlotLink {
    /// Up to `count` slots in one call.
    async fn acquire_many(&self, count: u64) -> Result<Vec<u64>, LogError> {
        let mut client = self.sequencers.client(&self.addr)?;
        let request = pb::AcquireManyRequest {
            loglet: Some(self.loglet),
            count,
        };
        let deadline = self.sequencers.deadline();
        let reply = tokio::time::timeout(deadline, client.acquire_many(request)).await;
        slots_outcome("acquire", reply)
    }

    /// Completes `slots` in one call.
    async fn complete_many(&self, slots: Vec<u64>) -> Result<Vec<u64>, LogError> {
        let mut client = self.sequencers.client(&self.addr)?;
        let request = pb::CompleteManyRequest {
            loglet: Some(self.loglet),
            slots,
        };
        let deadline = self.sequencers.deadline();
        let reply = tokio::time::timeout(deadline, client.complete_many(request)).await;
        slots_outcome("complete", reply)
    }

    /// Takes the queued acquirers (after giving spare slots to the first of them): none
    /// when nothing is queued, and then this sender stops.
    fn take_acquirers(&self) -> Vec<Acquirer> {
        let mut queues = lock(&self.queues);
        while !queues.spare.is_empty() && !queues.acquirers.is_empty() {
            let (slot, acquirer) = (queues.spare.pop_front(), queues.acquirers.pop_front());
            if let (Some(slot), Some(acquirer)) = (slot, acquirer) {
                if let Err(Ok(slot)) = acquirer.send(Ok(slot)) {
                    queues.spare.push_front(slot);
                }
            }
        }
        if queues.acquirers.is_empty() {
            queues.acquire_senders -= 1;
        }
        queues.acquirers.drain(..).collect()
    }

    /// Sends the queued acquires, a call for all of them at a time, until none is queued.
    async fn send_acquires(self) {
        loop {
            let acquirers = self.take_acquirers();
            if acquirers.is_empty() {
                return;
            }
            match self.acquire_many(acquirers.len() as u64).await {
                Ok(slots) => self.hand_out(slots, acquirers),
                Err(error) => {
                    for acquirer in acquirers {
                        let _ = acquirer.send(Err(error.clone()));
                    }
                }
            }
        }
    }

    /// Gives `slots` to `acquirers` in order (a slot whose acquirer went away goes to the
    /// next); slots left over are spare, acquirers left over queue again first.
    fn hand_out(&self, slots: Vec<u64>, acquirers: Vec<Acquirer>) {
        let mut slots: VecDeque<u64> = slots.into();
        let mut acquirers: VecDeque<Acquirer> = acquirers.into();
        while let Some(slot) = slots.pop_front() {
            let Some(acquirer) = acquirers.pop_front() else {
                slots.push_front(slot);
                break;
            };
            if let Err(Ok(slot)) = acquirer.send(Ok(slot)) {
                slots.push_front(slot);
            }
        }
        let mut queues = lock(&self.queues);
        queues.spare.extend(slots);
        while let Some(acquirer) = acquirers.pop_back() {
            queues.acquirers.push_front(acquirer);
        }
    }

    /// Sends the completions queued by the time this sender runs in one call (those of
    /// one write batch's appends arrive together).
    async fn send_completes(self) {
        let completers = {
            let mut queues = lock(&self.queues);
            queues.complete_sender_pending = false;
            std::mem::take(&mut queues.completers)
        };
        if completers.is_empty() {
            return;
        }
        let (slots, senders): (Vec<u64>, Vec<_>) = completers.into_iter().unzip();
        let outcome = self.complete_many(slots).await.map(|_| ());
        for sender in senders {
            let _ = sender.send(outcome.clone());
        }
    }
}

impl Slots for RemoteSlots {
    fn acquire(&self) -> SlotFuture<'_, u64> {
        if self.refused.load(Ordering::Acquire) {
            return Box::pin(std::future::ready(Err(LogError::Sealed {
                position: None,
                written: false,
            })));
        }
        let (sender, slot) = tokio::sync::oneshot::channel();
        let start = {
            let mut queues = lock(&self.link.queues);
            if let Some(spare) = queues.spare.pop_front() {
                return Box::pin(std::future::ready(Ok(spare)));
            }
            queues.acquirers.push_back(sender);
            let start = queues.acquire_senders < SLOT_CALLS_IN_FLIGHT;
            queues.acquire_senders += usize::from(start);
            start
        };
        if start {
            // The sender runs on until nothing is queued; its handle is not needed.
            drop(crate::runtime::spawn(self.link.clone().send_acquires()));
        }
        Box::pin(async move { slot.await.unwrap_or(Err(LogError::SequencerDown)) })
    }

    fn complete(&self, slot: u64) -> SlotFuture<'_, ()> {
        let (sender, done) = tokio::sync::oneshot::channel();
        let start = {
            let mut queues = lock(&self.link.queues);
            queues.completers.push((slot, sender));
            !std::mem::replace(&mut queues.complete_sender_pending, true)
        };
        if start {
            drop(crate::runtime::spawn(self.link.clone().send_completes()));
        }
        Box::pin(async move {
            done.await.unwrap_or(Err(LogError::SequencerDown))?;
            self.tail.fetch_max(slot + 1, Ordering::AcqRel);
            Ok(())
        })
    }

    fn tail(&self) -> SlotFuture<'_, u64> {
        let tail = self.call("tail", |mut client, loglet| async move {
            client.tail(loglet).await
        });
        Box::pin(async move {
            let tail = tail.await?;
            self.tail.fetch_max(tail, Ordering::AcqRel);
            Ok(tail)
        })
    }

    fn refuse_slots(&self) {
        if self.refused.swap(true, Ordering::AcqRel) {
            return;
        }
        // Best effort: a sequencer that misses it refuses slots anyway once its own reads
        // of the seal bit see it, and every append reads the seal bit after completing.
        drop(self.call("refuse", |mut client, loglet| async move {
            client.refuse(loglet).await
        }));
    }

    fn first_incomplete(&self) -> u64 {
        self.tail.load(Ordering::Acquire)
    }
}

/// Asks the sequencers at `addrs`, in turn, to reconfigure.
pub struct SequencerReconfigurer {
    sequencers: Arc<Sequencers>,
    addrs: Vec<String>,
    next: AtomicU64,
}

impl SequencerReconfigurer {
    /// A reconfigurer over the sequencers at `addrs`.
    pub fn new(sequencers: Arc<Sequencers>, addrs: Vec<String>) -> SequencerReconfigurer {
        SequencerReconfigurer {
            sequencers,
            addrs,
            next: AtomicU64::new(0),
        }
    }

    /// Asks the sequencer at `addr` to install a segment after loglet `from` (`None`: the
    /// log's first): the loglet active afterwards.
    pub async fn install(&self, addr: &str, from: Option<u64>) -> Result<u64, LogError> {
        let mut client = self.sequencers.client(addr)?;
        // An install creates drives on every server, seals and fences the old loglet and
        // writes the chain twice: several calls' worth, each bounded by the deadline.
        let deadline = self.sequencers.deadline() * 8;
        let task = crate::runtime::spawn(async move {
            let request = pb::InstallRequest { from };
            tokio::time::timeout(deadline, client.install(request)).await
        });
        let failed = |what: String| LogError::Indeterminate {
            cause: Box::new(LogError::InvalidConfig { reason: what }),
        };
        match task.await {
            Ok(Ok(Ok(reply))) => match reply.into_inner().result {
                Some(install_reply::Result::Loglet(loglet)) => Ok(loglet),
                // What went wrong, as the sequencer said it: an install that failed on its
                // way may have claimed or sealed, so it is indeterminate.
                Some(install_reply::Result::Error(SequencerError {
                    kind: Some(sequencer_error::Kind::Failed(reason)),
                })) => Err(failed(format!("sequencer {addr}: {reason}"))),
                Some(install_reply::Result::Error(error)) => Err(from_pb(Some(error))),
                None => Err(failed(format!("sequencer {addr} sent an empty reply"))),
            },
            Ok(Ok(Err(status))) => Err(failed(format!("sequencer {addr}: {status}"))),
            Ok(Err(_)) => Err(failed(format!(
                "sequencer {addr}: no reply within {deadline:?}"
            ))),
            Err(error) => Err(failed(error)),
        }
    }
}

impl Reconfigurer for SequencerReconfigurer {
    fn extend_from(&self, from: u64) -> ReconfigFuture<'_> {
        Box::pin(async move {
            let mut last = None;
            for _ in 0..self.addrs.len() {
                let index = self.next.fetch_add(1, Ordering::Relaxed) as usize % self.addrs.len();
                match self.install(&self.addrs[index], Some(from)).await {
                    Ok(_) => return Ok(()),
                    Err(error) => {
                        tracing::warn!(sequencer = %self.addrs[index], %error, "install failed");
                        last = Some(error);
                    }
                }
            }
            Err(LogError::GaveUp {
                attempts: self.addrs.len() as u32,
                last: Box::new(last.unwrap_or(LogError::SequencerDown)),
            })
        })
    }
}

/// Segment `segment`'s loglet: its drives from its description (through `pool`), its
/// slots from `local` when given (this process hosts it), else from the sequencer the
/// description names; appends run with `atomic` at the segment's window and epoch.
pub async fn open_loglet(
    pool: &Arc<Pool>,
    sequencers: &Arc<Sequencers>,
    segment: &Segment,
    local: Option<Arc<dyn Slots>>,
    atomic: &AtomicOptions,
) -> Result<AtomicLog, LogError> {
    let spec = LogletSpec::decode(&segment.loglet)?;
    let (data, seal) = pool.drives(&spec).await?;
    let slots = local.unwrap_or_else(|| {
        Arc::new(RemoteSlots::new(
            Arc::clone(sequencers),
            &spec.sequencer,
            segment.loglet.id,
            segment.epoch,
        ))
    });
    let options = AtomicOptions {
        window: spec.window,
        epoch: segment.epoch,
        ..atomic.clone()
    };
    Ok(AtomicLog::with_slots(data, seal, slots, options))
}

/// Opens a segment's loglet for a client: its drives from the chain's description, its
/// slots from the sequencer it names; one AtomicLog per loglet.
pub struct ClientFactory {
    pool: Arc<Pool>,
    sequencers: Arc<Sequencers>,
    options: AtomicOptions,
    open: Mutex<HashMap<u64, Arc<AtomicLog>>>,
}

impl ClientFactory {
    /// A factory whose drives come from `pool` and whose slots from `sequencers`; appends
    /// run with `options` (the window and epoch are each segment's).
    pub fn new(pool: Arc<Pool>, sequencers: Arc<Sequencers>, options: AtomicOptions) -> Self {
        ClientFactory {
            pool,
            sequencers,
            options,
            open: Mutex::new(HashMap::new()),
        }
    }
}

impl LogletFactory for ClientFactory {
    fn open<'a>(&'a self, segment: &'a Segment) -> LogletFuture<'a> {
        Box::pin(async move {
            let id = segment.loglet.id;
            if let Some(log) = self.open.lock().unwrap_or_else(|p| p.into_inner()).get(&id) {
                return Ok(Arc::clone(log));
            }
            let log = open_loglet(&self.pool, &self.sequencers, segment, None, &self.options);
            let log = Arc::new(log.await?);
            let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
            Ok(Arc::clone(open.entry(id).or_insert(log)))
        })
    }

    /// A client never reconfigures itself (its [`SequencerReconfigurer`] asks a sequencer,
    /// which names the next segment): a successor asked of it has no description, and
    /// opening it is refused.
    fn successor(&self, config: &LogletConfig) -> LogletConfig {
        LogletConfig {
            id: config.id + 1,
            spec: bytes::Bytes::new(),
        }
    }
}
