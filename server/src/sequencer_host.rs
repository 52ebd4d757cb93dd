//! The sequencer process's core: it hosts the sequencers of the loglets it installed, and
//! installs segments of one VirtualLog on request (`Install`): the log's first, or, when a
//! client found the active segment's sequencer gone, a new segment after it.
//!
//! Installing a segment: create the new loglet's data and seal LogDrives on every server
//! (ids of this sequencer's own, so that two sequencers racing never share one), write its
//! description naming this sequencer into the chain by compare-and-swap (the VirtualLog's
//! reconfiguration: claim, seal and fence the old loglet, install), then, if this
//! sequencer's segment won, fence the new data LogDrive with the epoch its compare-and-swap
//! won, and only then hand out slots. A sequencer holds nothing durable: one that restarts
//! hosts nothing, answers `down` for its old loglets, and is replaced by reconfiguration.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use sealog_vlog::loglet::LogletFuture;
use sealog_vlog::{
    AtomicLog, AtomicOptions, Chain, LogError, LogletConfig, LogletFactory, MetaStore, Segment,
    Sequencer, Slots, VirtualLog, VirtualOptions,
};

use crate::loglet_spec::{DriveName, LogletSpec, Pool, Replica};
use crate::sequencer_client::{open_loglet, Sequencers};

/// What a sequencer process serves.
#[derive(Clone)]
pub struct HostConfig {
    /// Its name, for status and logs.
    pub name: String,
    /// The address clients reach it at (named in the chain).
    pub advertise: String,
    /// This sequencer's index among the cluster's sequencers (0 to 255): part of the ids of
    /// the drives it creates.
    pub index: u64,
    /// The LogDrive servers, in quorum groups.
    pub groups: Vec<Vec<String>>,
    /// Replicas of a group that must take a write.
    pub write_quorum: usize,
    /// K, the window of slots in flight per loglet.
    pub window: u64,
    /// Calls that may wait here (for a slot, or for lower slots to complete); past that
    /// the answer is `Overloaded`.
    pub waiting_max: usize,
    /// Addresses each created LogDrive holds.
    pub capacity: u64,
    /// How the host's own VirtualLog handle runs.
    pub virtual_options: VirtualOptions,
    /// How its AtomicLogs run (for sealing old loglets).
    pub atomic: AtomicOptions,
}

struct HostedLoglet {
    epoch: u64,
    sequencer: Arc<Sequencer>,
}

/// A sequencer process's state: see the module doc.
pub struct Host {
    config: HostConfig,
    pool: Arc<Pool>,
    log: VirtualLog,
    meta: Arc<dyn MetaStore>,
    factory: Arc<HostFactory>,
    hosted: Arc<Mutex<HashMap<u64, HostedLoglet>>>,
    waiting: AtomicUsize,
    installing: tokio::sync::Mutex<()>,
}

/// One call's appends counted among those waiting, until dropped.
struct Counted<'a>(&'a AtomicUsize, usize);

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(self.1, Ordering::AcqRel);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// The id of loglet `loglet`'s data (`seal` false) or seal LogDrive in quorum group
/// `group`, made by sequencer `index`: distinct per group, so that groups striped over the
/// same servers never share a LogDrive, and per sequencer, so that two racing never do.
pub fn drive_id(loglet: u64, index: u64, group: usize, seal: bool) -> u64 {
    (loglet << 13) | ((group as u64 & 0xf) << 9) | ((index & 0xff) << 1) | u64::from(seal)
}

impl Host {
    /// A host over `meta` (the chain), reaching servers through `pool` and other
    /// sequencers through `sequencers`.
    pub fn new(
        config: HostConfig,
        meta: Arc<dyn MetaStore>,
        pool: Arc<Pool>,
        sequencers: Arc<Sequencers>,
    ) -> Host {
        let hosted = Arc::new(Mutex::new(HashMap::new()));
        let factory = Arc::new(HostFactory {
            pool: Arc::clone(&pool),
            sequencers,
            hosted: Arc::clone(&hosted),
            atomic: config.atomic.clone(),
            open: Mutex::new(HashMap::new()),
        });
        let log = VirtualLog::new(
            Arc::clone(&meta),
            factory.clone(),
            config.virtual_options.clone(),
        );
        Host {
            config,
            pool,
            log,
            meta,
            factory,
            hosted,
            waiting: AtomicUsize::new(0),
            installing: tokio::sync::Mutex::new(()),
        }
    }

    /// A host over `meta` reaching servers and other sequencers with `remote` (its TLS
    /// material and deadlines).
    pub fn reaching(
        config: HostConfig,
        meta: Arc<dyn MetaStore>,
        remote: crate::remote::RemoteOptions,
    ) -> Host {
        let pool = Arc::new(Pool::new(remote.clone()));
        Host::new(config, meta, pool, Arc::new(Sequencers::new(remote)))
    }

    /// The configuration.
    pub fn config(&self) -> &HostConfig {
        &self.config
    }

    /// The sequencer of `loglet` if this process hosts it at `epoch`.
    pub fn sequencer(&self, loglet: u64, epoch: u64) -> Option<Arc<Sequencer>> {
        let hosted = lock(&self.hosted);
        let found = hosted.get(&loglet)?;
        (found.epoch == epoch).then(|| Arc::clone(&found.sequencer))
    }

    /// Loglets hosted here: (loglet, epoch, sequencer).
    pub fn hosted(&self) -> Vec<(u64, u64, Arc<Sequencer>)> {
        let hosted = lock(&self.hosted);
        let mut all: Vec<_> = hosted
            .iter()
            .map(|(id, h)| (*id, h.epoch, Arc::clone(&h.sequencer)))
            .collect();
        all.sort_by_key(|(id, _, _)| *id);
        all
    }

    /// Runs `call`, on behalf of `appends` appends, among the appends waiting here; or
    /// refuses it with `Overloaded` when `waiting_max` are waiting already.
    pub async fn waiting<T>(
        &self,
        appends: usize,
        call: impl std::future::Future<Output = Result<T, LogError>>,
    ) -> Result<T, LogError> {
        let max = self.config.waiting_max;
        if self.waiting.fetch_add(appends, Ordering::AcqRel) >= max {
            self.waiting.fetch_sub(appends, Ordering::AcqRel);
            return Err(LogError::Overloaded {
                waiting_max: max as u64,
            });
        }
        // Counted out however the call ends: a caller that goes away mid-call drops this
        // future, and the count must not keep its place (it would refuse calls for good).
        let _counted = Counted(&self.waiting, appends);
        call.await
    }

    /// Calls waiting now, and the most that may.
    pub fn waiting_now(&self) -> (usize, usize) {
        (
            self.waiting.load(Ordering::Acquire),
            self.config.waiting_max,
        )
    }

    /// Installs a segment hosted here after loglet `from` if it is still the active one
    /// (`None`: creates the log with its first segment, if it does not exist): the loglet
    /// active afterwards, this sequencer's or the one that got there first.
    pub async fn install(&self, from: Option<u64>) -> Result<u64, LogError> {
        let _one_at_a_time = self.installing.lock().await;
        let chain = match self.meta.read().await? {
            Some(stored) => Some(Chain::decode(stored.version, stored.value)?),
            None => None,
        };
        let active = chain.as_ref().map(|chain| chain.active().loglet.id);
        match (from, active) {
            (None, Some(active)) => return Ok(active),
            (Some(from), Some(active)) if from != active => return Ok(active),
            (Some(_), None) => {
                return Err(LogError::InvalidConfig {
                    reason: "the MetaStore holds no chain to reconfigure".into(),
                })
            }
            _ => {}
        }
        let id = chain.as_ref().map_or(1, |chain| {
            chain
                .segments
                .iter()
                .map(|s| s.loglet.id)
                .max()
                .unwrap_or(0)
                + 1
        });
        let next = self.create_loglet(id).await?;
        let installed = match from {
            None => {
                let log = VirtualLog::create(
                    Arc::clone(&self.meta),
                    self.factory.clone(),
                    next,
                    self.config.virtual_options.clone(),
                )
                .await?;
                log.refresh().await?
            }
            Some(from) => self.log.reconfig_extend_from(from, next).await?.chain,
        };
        let active = installed.active().clone();
        if active.loglet.id == id {
            self.host(&active).await?;
            // The segment just sealed, and any before it, brought whole on every replica
            // (one that was down when it was sealed missed writes and the seal).
            let (pool, chain) = (Arc::clone(&self.pool), installed.clone());
            tokio::spawn(async move {
                match crate::repair::repair_sealed(&pool, &chain).await {
                    Ok(repaired) => tracing::info!(?repaired, "repaired sealed segments"),
                    Err(error) => tracing::warn!(%error, "repairing sealed segments"),
                }
            });
        } else {
            self.delete_loglet(id).await;
        }
        Ok(active.loglet.id)
    }

    /// Fences segment `segment`'s data LogDrive with its epoch (no write of an older epoch
    /// lands after this) and starts handing out its slots here.
    async fn host(&self, segment: &Segment) -> Result<(), LogError> {
        let spec = LogletSpec::decode(&segment.loglet)?;
        let (data, _) = self.pool.drives(&spec).await?;
        data.fence(segment.epoch)
            .await
            .map_err(|error| LogError::Drive {
                position: None,
                error,
            })?;
        let sequencer = Arc::new(Sequencer::new(0, self.config.window));
        lock(&self.hosted).insert(
            segment.loglet.id,
            HostedLoglet {
                epoch: segment.epoch,
                sequencer,
            },
        );
        lock(&self.factory.open).remove(&segment.loglet.id);
        tracing::info!(loglet = segment.loglet.id, epoch = segment.epoch, "hosting");
        Ok(())
    }
}

impl Host {
    /// Creates loglet `id`'s LogDrives on every server and describes them. A server that
    /// cannot create its replica (down now) is described with generation 0, which it
    /// answers `Missing` for: a replica the quorum does without. Each group needs a write
    /// quorum of replicas created.
    async fn create_loglet(&self, id: u64) -> Result<LogletConfig, LogError> {
        let mut groups = Vec::new();
        for (group, addrs) in self.config.groups.iter().enumerate() {
            let replicas = self.create_replicas(id, group, addrs).await?;
            let created = replicas
                .iter()
                .filter(|(_, data, seal)| {
                    data.is_some() && seal.as_ref().is_none_or(Option::is_some)
                })
                .count();
            if created < self.config.write_quorum {
                self.delete_loglet(id).await;
                return Err(LogError::InvalidConfig {
                    reason: format!(
                        "loglet {id}: group {group} has {created} replicas created, fewer than \
                         a write quorum of {}",
                        self.config.write_quorum
                    ),
                });
            }
            let index = self.config.index;
            let unnamed = |drive: u64| DriveName {
                id: drive,
                generation: 0,
            };
            let replicas = replicas.into_iter().map(|(addr, data, seal)| Replica {
                addr,
                data: data.unwrap_or(unnamed(drive_id(id, index, group, false))),
                seal: seal.map(|s| s.unwrap_or(unnamed(drive_id(id, index, group, true)))),
            });
            groups.push(replicas.collect());
        }
        let spec = LogletSpec {
            sequencer: self.config.advertise.clone(),
            window: self.config.window,
            write_quorum: self.config.write_quorum,
            groups,
        };
        Ok(spec.config(id))
    }

    /// Creates group `group`'s replicas of loglet `id` on `addrs`, every server at once (one
    /// that is down costs one deadline, not one each): per server, in order, its address and
    /// the data and seal LogDrives made there (`None` where it could not).
    async fn create_replicas(
        &self,
        id: u64,
        group: usize,
        addrs: &[String],
    ) -> Result<Vec<Made>, LogError> {
        let index = self.config.index;
        let mut creating = tokio::task::JoinSet::new();
        for (position, addr) in addrs.iter().enumerate() {
            let (pool, addr) = (Arc::clone(&self.pool), addr.clone());
            let capacity = self.config.capacity;
            creating.spawn(async move {
                let data = drive_id(id, index, group, false);
                let data = create_drive(&pool, &addr, data, capacity).await;
                let seal = match group {
                    0 => Some(create_drive(&pool, &addr, drive_id(id, index, 0, true), 16).await),
                    _ => None,
                };
                (position, (addr, data, seal))
            });
        }
        let mut made = Vec::new();
        while let Some(replica) = creating.join_next().await {
            made.push(replica.map_err(|e| LogError::InvalidConfig {
                reason: format!("creating loglet {id}'s replicas: {e}"),
            })?);
        }
        made.sort_by_key(|(position, _)| *position);
        Ok(made.into_iter().map(|(_, replica)| replica).collect())
    }

    /// Deletes what `create_loglet(id)` made, as far as it can (a loglet that lost the race
    /// to be installed).
    async fn delete_loglet(&self, id: u64) {
        for (group, addrs) in self.config.groups.iter().enumerate() {
            for addr in addrs {
                let Ok(store) = self.pool.store(addr).await else {
                    continue;
                };
                let Ok(live) = store.list().await else {
                    continue;
                };
                for seal in [false, true] {
                    let drive = drive_id(id, self.config.index, group, seal);
                    if let Some((_, generation)) = live.iter().find(|(i, _)| *i == drive) {
                        let _ = store.delete(drive, *generation).await;
                    }
                }
            }
        }
    }
}

/// A replica as `create_replicas` made it: its server, and its data and seal LogDrives.
type Made = (String, Option<DriveName>, Option<Option<DriveName>>);

/// Creates LogDrive `drive` of `capacity` addresses on the server at `addr` (or finds the
/// one an earlier try made): its name, or `None` when the server could not make it.
async fn create_drive(pool: &Pool, addr: &str, drive: u64, capacity: u64) -> Option<DriveName> {
    let store = pool.store(addr).await.ok()?;
    match store.create(drive, capacity).await {
        Ok(made) => Some(DriveName {
            id: drive,
            generation: made.generation(),
        }),
        Err(sealog_logdrive::LogDriveError::Exists { .. }) => {
            let live = store.list().await.ok()?;
            let (_, generation) = live.into_iter().find(|(id, _)| *id == drive)?;
            Some(DriveName {
                id: drive,
                generation,
            })
        }
        Err(error) => {
            tracing::warn!(%addr, drive, %error, "creating a replica");
            None
        }
    }
}

/// Opens loglets for the host's own VirtualLog (sealing old segments, reading tails): its
/// drives with the host's credentials, and its slots from this process when it hosts the
/// loglet, or from the sequencer the description names.
struct HostFactory {
    pool: Arc<Pool>,
    sequencers: Arc<Sequencers>,
    hosted: Arc<Mutex<HashMap<u64, HostedLoglet>>>,
    atomic: AtomicOptions,
    open: Mutex<HashMap<u64, Arc<AtomicLog>>>,
}

impl LogletFactory for HostFactory {
    fn open<'a>(&'a self, segment: &'a Segment) -> LogletFuture<'a> {
        Box::pin(async move {
            let id = segment.loglet.id;
            if let Some(log) = lock(&self.open).get(&id) {
                return Ok(Arc::clone(log));
            }
            let local = lock(&self.hosted)
                .get(&id)
                .filter(|hosted| hosted.epoch == segment.epoch)
                .map(|hosted| Arc::clone(&hosted.sequencer) as Arc<dyn Slots>);
            let log = open_loglet(&self.pool, &self.sequencers, segment, local, &self.atomic);
            let log = Arc::new(log.await?);
            Ok(Arc::clone(lock(&self.open).entry(id).or_insert(log)))
        })
    }

    /// A roll-forward by this handle (a reconfiguration found stalled) gets a description
    /// that cannot be opened: segments are installed only by `Host::install`, which always
    /// names the next loglet with drives made for it.
    fn successor(&self, config: &LogletConfig) -> LogletConfig {
        LogletConfig {
            id: config.id + 1,
            spec: bytes::Bytes::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sealog_logdrive::MemLogDrive;
    use sealog_vlog::LogDriveMetaStore;

    use crate::remote::RemoteOptions;

    fn host(waiting_max: usize) -> Host {
        let config = HostConfig {
            name: "q".into(),
            advertise: "127.0.0.1:1".into(),
            index: 0,
            groups: vec![vec!["127.0.0.1:1".into()]],
            write_quorum: 1,
            window: 4,
            waiting_max,
            capacity: 1 << 20,
            virtual_options: VirtualOptions::default(),
            atomic: AtomicOptions::default(),
        };
        let meta = Arc::new(LogDriveMetaStore::new(Arc::new(MemLogDrive::new()), 1));
        Host::reaching(config, meta, RemoteOptions::default())
    }

    #[tokio::test]
    async fn a_caller_that_goes_away_gives_its_place_back() {
        let host = host(1);
        let gone = tokio::time::timeout(
            std::time::Duration::from_millis(10),
            host.waiting(1, std::future::pending::<Result<(), LogError>>()),
        )
        .await;
        assert!(gone.is_err(), "the pending call timed out");
        assert_eq!(host.waiting_now(), (0, 1));
        host.waiting(1, async { Ok(()) })
            .await
            .expect("its place was given back");
    }

    #[tokio::test]
    async fn past_the_bound_a_call_is_refused_definitely() {
        let host = Arc::new(host(1));
        let holder = {
            let host = Arc::clone(&host);
            tokio::spawn(async move {
                host.waiting(1, async {
                    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                    Ok(())
                })
                .await
            })
        };
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        let refused = host.waiting(1, async { Ok(()) }).await.unwrap_err();
        assert_eq!(refused, LogError::Overloaded { waiting_max: 1 });
        assert!(refused.is_definite());
        holder.await.unwrap().unwrap();
    }
}
