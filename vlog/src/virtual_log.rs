//! [`VirtualLog`]: one log made of a chain of loglets (docs/composition.md, "The
//! VirtualLog"). Appends and `check_tail` go to the active segment's AtomicLog; reads go to
//! the segment that holds the position; a reconfiguration (`reconfig.rs`) seals the active
//! segment, records its stop and installs a new one by compare-and-swap in the MetaStore.
//!
//! An append that meets the seal settles its own fate before it answers: it waits for the
//! sealed segment's stop to be recorded (rolling a stalled reconfiguration forward, or
//! starting one when its slot stalled), and then its slot is either below the stop, so the
//! entry is in the log at `start + slot` and that is the answer, or at or past it, so it is
//! a zombie no reader will see, and the append is made again on the new segment. Either way
//! the entry appears once. Duplicates come only from a caller that retries an append that
//! answered with an indeterminate error (a MetaStore or drive failure it could not see past);
//! such a caller dedupes on read, by a sequence number of its own in the payload.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use sealog_logdrive::{Clock, LogDriveError, ReadOutcome, SystemClock};

use crate::atomic::AtomicLog;
use crate::chain::{Chain, LogletConfig, Segment};
use crate::delegate::Reconfigurer;
use crate::error::{LogError, MetaError};
use crate::loglet::LogletFactory;
use crate::meta::MetaStore;

/// How a [`VirtualLog`] handle runs.
#[derive(Clone)]
pub struct VirtualOptions {
    /// How long a reconfiguration found under way (its segment claimed, its stop not yet
    /// recorded) is waited for before this handle rolls it forward.
    pub roll_forward_after: Duration,
    /// How long to wait between looks at a reconfiguration under way.
    pub poll_interval: Duration,
    /// Tries of one operation across reconfigurations before it gives up.
    pub attempts_max: u32,
    /// Where time comes from.
    pub clock: Arc<dyn Clock>,
}

impl Default for VirtualOptions {
    fn default() -> Self {
        VirtualOptions {
            roll_forward_after: Duration::from_millis(500),
            poll_interval: Duration::from_millis(5),
            attempts_max: 16,
            clock: Arc::new(SystemClock),
        }
    }
}

/// A handle on a VirtualLog: see the module doc. Handles of many clients may share one
/// MetaStore and one loglet factory (whose AtomicLogs hold the sequencers).
pub struct VirtualLog {
    pub(crate) meta: Arc<dyn MetaStore>,
    pub(crate) factory: Arc<dyn LogletFactory>,
    pub(crate) options: VirtualOptions,
    /// The chain as last read or written.
    pub(crate) chain: Mutex<Option<Chain>>,
    /// A claimed segment seen under way: its chain version and when it was first seen.
    pub(crate) under_way: Mutex<Option<(u64, Duration)>>,
    /// Who reconfigures for this handle, when it may not itself (see [`Reconfigurer`]).
    pub(crate) delegate: Option<Arc<dyn Reconfigurer>>,
}

impl VirtualLog {
    /// A handle on the VirtualLog in `meta`, creating it with one segment on `first` if the
    /// register is empty.
    pub async fn create(
        meta: Arc<dyn MetaStore>,
        factory: Arc<dyn LogletFactory>,
        first: LogletConfig,
        options: VirtualOptions,
    ) -> Result<VirtualLog, LogError> {
        let log = VirtualLog::new(meta, factory, options);
        if log.meta.read().await?.is_none() {
            match log
                .meta
                .compare_and_swap(0, Chain::first(first).encode())
                .await
            {
                Ok(_) | Err(MetaError::Conflict { .. }) => {}
                Err(error) => return Err(error.into()),
            }
        }
        log.refresh().await?;
        Ok(log)
    }

    /// A handle on the VirtualLog in `meta`, which must exist.
    pub async fn open(
        meta: Arc<dyn MetaStore>,
        factory: Arc<dyn LogletFactory>,
        options: VirtualOptions,
    ) -> Result<VirtualLog, LogError> {
        let log = VirtualLog::new(meta, factory, options);
        log.refresh().await?;
        Ok(log)
    }

    /// A handle on the VirtualLog in `meta` that reads the chain on its first operation (a
    /// caller that cannot wait here, such as a simulation building its clients).
    pub fn new(
        meta: Arc<dyn MetaStore>,
        factory: Arc<dyn LogletFactory>,
        options: VirtualOptions,
    ) -> VirtualLog {
        VirtualLog {
            meta,
            factory,
            options,
            chain: Mutex::new(None),
            under_way: Mutex::new(None),
            delegate: None,
        }
    }

    /// The same handle, asking `delegate` to reconfigure wherever it would reconfigure
    /// itself (a client whose credentials may not seal or fence, asking a sequencer).
    pub fn with_reconfigurer(mut self, delegate: Arc<dyn Reconfigurer>) -> VirtualLog {
        self.delegate = Some(delegate);
        self
    }

    /// The chain read afresh from the MetaStore (and kept as the handle's).
    /// A read that fails is tried again, `attempts_max` times in all, a poll interval
    /// apart: a read changes nothing, and a MetaStore behind a network fails now and then.
    pub async fn refresh(&self) -> Result<Chain, LogError> {
        let mut tries = 1;
        let stored = loop {
            match self.meta.read().await {
                Ok(stored) => break stored,
                Err(error) if tries >= self.options.attempts_max || error.is_definite() => {
                    return Err(error.into())
                }
                Err(error) => {
                    tracing::debug!(%error, "reading the chain failed; reading it again");
                    tries += 1;
                    self.options.clock.sleep(self.options.poll_interval).await;
                }
            }
        };
        let Some(stored) = stored else {
            return Err(LogError::InvalidConfig {
                reason: "the MetaStore holds no chain".into(),
            });
        };
        let chain = Chain::decode(stored.version, stored.value)?;
        self.keep(chain.clone());
        Ok(chain)
    }

    /// Keeps `chain` as the handle's if it is newer than the one kept.
    pub(crate) fn keep(&self, chain: Chain) {
        let mut kept = self.chain.lock().unwrap_or_else(|p| p.into_inner());
        if kept.as_ref().is_none_or(|old| old.version < chain.version) {
            *kept = Some(chain);
        }
    }

    /// The chain as last read.
    pub async fn chain(&self) -> Result<Chain, LogError> {
        let kept = self.chain.lock().unwrap_or_else(|p| p.into_inner()).clone();
        match kept {
            Some(chain) => Ok(chain),
            None => self.refresh().await,
        }
    }

    pub(crate) async fn loglet(&self, segment: &Segment) -> Result<Arc<AtomicLog>, LogError> {
        self.factory.open(segment).await
    }

    /// Appends `payload`: its virtual position.
    pub async fn append(&self, payload: Bytes) -> Result<u64, LogError> {
        let mut last = None;
        for _ in 0..self.options.attempts_max {
            let segment = self.chain().await?.active().clone();
            if segment.sealing.is_some() {
                self.stop_of(&segment).await?;
                continue;
            }
            let loglet = self.loglet(&segment).await?;
            let error = match loglet.append(payload.clone()).await {
                Ok(slot) => return Ok(segment.start + slot),
                Err(error) => error,
            };
            match self
                .settle_append(&segment, &loglet, &payload, &error)
                .await?
            {
                Some(position) => return Ok(position),
                None => last = Some(error),
            }
        }
        Err(LogError::gave_up(self.options.attempts_max, last))
    }

    /// After an append on `segment` failed with `error`: its position if the entry is in
    /// the log, `None` to append again on the next segment, or the error to answer.
    async fn settle_append(
        &self,
        segment: &Segment,
        loglet: &AtomicLog,
        payload: &Bytes,
        error: &LogError,
    ) -> Result<Option<u64>, LogError> {
        let (slot, written) = match error {
            LogError::Sealed { position, written } => (*position, *written),
            LogError::Stalled { position, written } => {
                self.extend_from(segment.loglet.id, None).await?;
                (Some(*position), *written)
            }
            // No slot held: the loglet cannot take appends until it is replaced.
            LogError::SequencerDown | LogError::WindowFull { .. } => {
                self.extend_from(segment.loglet.id, None).await?;
                (None, false)
            }
            other => return Err(other.clone()),
        };
        let stop = self.stop_of(segment).await?;
        let Some(slot) = slot.filter(|slot| segment.start + slot < stop) else {
            // No slot, or a zombie past the stop that no reader will see: append again.
            return Ok(None);
        };
        if written {
            return Ok(Some(segment.start + slot));
        }
        // Below the stop every slot is written; ours holds our bytes if our write landed.
        match loglet.data().read(slot).await {
            Ok(ReadOutcome::Value(bytes)) if bytes == payload => Ok(Some(segment.start + slot)),
            Ok(other) => Err(LogError::drive(
                Some(slot),
                LogDriveError::Io {
                    reason: format!("slot {slot} below the stop {stop} reads {other:?}"),
                },
            )),
            Err(error) => Err(LogError::drive(Some(slot), error.indeterminate())),
        }
    }

    /// The stop of `segment` once recorded, waiting for (and rolling forward) the
    /// reconfiguration that seals it, or starting one if none is under way.
    pub(crate) async fn stop_of(&self, segment: &Segment) -> Result<u64, LogError> {
        for _ in 0..self.options.attempts_max {
            let chain = self.refresh().await?;
            let found = chain
                .segments
                .iter()
                .find(|candidate| candidate.loglet.id == segment.loglet.id);
            match found {
                Some(Segment {
                    stop: Some(stop), ..
                }) => return Ok(*stop),
                Some(_) => {
                    self.extend_from(segment.loglet.id, None).await?;
                }
                // Truncated away: it was sealed long ago, and its stop is the next's start.
                None => return Ok(chain.segments[0].start),
            }
        }
        Err(self.still_sealed())
    }

    /// Giving up on a segment that stays sealed with no stop past it, after every attempt.
    fn still_sealed(&self) -> LogError {
        let attempts = self.options.attempts_max;
        let sealed = LogError::Sealed {
            position: None,
            written: false,
        };
        LogError::gave_up(attempts, (attempts > 0).then_some(sealed))
    }

    /// The first virtual position not written, linearizable with appends.
    pub async fn check_tail(&self) -> Result<u64, LogError> {
        for _ in 0..self.options.attempts_max {
            let segment = self.chain().await?.active().clone();
            let loglet = self.loglet(&segment).await?;
            let tail = match loglet.check_tail().await {
                Ok(tail) => tail,
                Err(error) => {
                    // A handle that knew an older chain may ask a segment sealed since,
                    // whose own tail no longer matters: the newest chain says.
                    let chain = self.refresh().await?;
                    if chain.active().loglet.id == segment.loglet.id {
                        return Err(error);
                    }
                    continue;
                }
            };
            if !tail.sealed {
                return Ok(segment.start + tail.position);
            }
            // A sealed segment's tail may grow by zombies: its recorded stop is the truth,
            // and the tail is the next segment's.
            self.stop_of(&segment).await?;
        }
        Err(self.still_sealed())
    }

    /// The entry at virtual position `position`, or `None` at or past the tail.
    pub async fn read(&self, position: u64) -> Result<Option<Bytes>, LogError> {
        let mut chain = self.chain().await?;
        if chain
            .segment_of(position)
            .is_none_or(|segment| segment.stop.is_none())
        {
            // In the active segment, or past it: only below the tail is there an entry.
            if position >= self.check_tail().await? {
                return Ok(None);
            }
            chain = self.chain().await?;
        }
        if position < chain.trimmed {
            return Err(LogError::Trimmed {
                position,
                first: chain.trimmed,
            });
        }
        let Some(segment) = chain.segment_of(position).cloned() else {
            return Err(LogError::Trimmed {
                position,
                first: chain.segments[0].start,
            });
        };
        let slot = position - segment.start;
        let loglet = self.loglet(&segment).await?;
        match loglet.data().read(slot).await {
            Ok(ReadOutcome::Value(bytes)) => Ok(Some(bytes)),
            Ok(ReadOutcome::Trimmed { .. }) => Err(LogError::Trimmed {
                position,
                first: chain.trimmed.max(position + 1),
            }),
            Ok(other) => Err(LogError::drive(
                Some(slot),
                match other {
                    ReadOutcome::Damaged => LogDriveError::Damaged {
                        addresses: slot..slot + 1,
                    },
                    _ => LogDriveError::Io {
                        reason: format!("slot {slot} below the tail reads unwritten"),
                    },
                },
            )),
            Err(error) => Err(LogError::drive(Some(slot), error)),
        }
    }

    /// The first entry at a position in [min, max] below the tail: its position and bytes.
    pub async fn read_next(&self, min: u64, max: u64) -> Result<Option<(u64, Bytes)>, LogError> {
        let tail = self.check_tail().await?;
        let first = self.chain().await?.trimmed;
        for position in min.max(first)..=max.min(tail.saturating_sub(1)) {
            if let Some(bytes) = self.read(position).await? {
                return Ok(Some((position, bytes)));
            }
        }
        Ok(None)
    }
}
