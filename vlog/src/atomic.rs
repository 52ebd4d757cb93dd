//! [`AtomicLog`]: a loglet over a LogDrive (docs/composition.md, "The AtomicLog"). A
//! [`Sequencer`] hands out slots; an append writes its slot on the data LogDrive, completes
//! it in slot order, then reads the seal bit. The seal bit is address 0 of a second LogDrive,
//! composed like the data's (a quorum for a replicated log), so it is as durable as the data.
//!
//! The orderings that make it linearizable, each for a reason:
//! - an append reads the seal bit only after its slot completed, and fails if it is set: an
//!   acknowledged append is then ordered before the seal, and every tail taken after the seal
//!   passes it;
//! - `check_tail`'s fast path reads the sequencer's tail and *then* the seal bit, and takes the
//!   slow path (`weak_tail`) if the bit is set: a fast path that read a tail of t - 1 while the
//!   writer of slot t - 1 had written but not completed can never be returned after a slow
//!   path has returned t;
//! - with the sequencer gone, `check_tail` seals first and then takes the slow path.
//!
//! A write is retried with the same bytes until it is acknowledged, the log is sealed, or its
//! deadline passes; a slot that cannot complete by its deadline (its own write failing, or a
//! lower slot's writer gone) is [`LogError::Stalled`], which the VirtualLog answers with a
//! reconfiguration.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use sealog_logdrive::{Clock, LogDrive, LogDriveError, ReadOutcome, SystemClock};

use crate::deadline::within;
use crate::error::LogError;
use crate::seal_reads::SealReads;
use crate::sequencer::Sequencer;
use crate::slots::Slots;

/// The seal bit's address in the seal LogDrive.
pub const SEAL_ADDRESS: u64 = 0;

/// The seal bit's bytes: every sealer writes the same, so sealing is idempotent.
pub const SEAL_BYTES: &[u8] = b"sealog seal bit";

/// How an [`AtomicLog`] runs.
#[derive(Clone)]
pub struct AtomicOptions {
    /// K: slots in flight at most; the window every `weak_tail` asks for.
    pub window: u64,
    /// The epoch the log's writes carry (the segment's, in a VirtualLog).
    pub epoch: u64,
    /// How long an append waits before writing its slot again after a failed write.
    pub retry_after: Duration,
    /// How long an append may take from acquiring its slot to completing it.
    pub slot_deadline: Duration,
    /// Where time comes from.
    pub clock: Arc<dyn Clock>,
}

impl Default for AtomicOptions {
    fn default() -> Self {
        AtomicOptions {
            window: 16,
            epoch: 0,
            retry_after: Duration::from_millis(5),
            slot_deadline: Duration::from_secs(5),
            clock: Arc::new(SystemClock),
        }
    }
}

/// What `check_tail` answers: the first unwritten position and whether the log is sealed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tail {
    /// The first position not written: every position below it holds an entry.
    pub position: u64,
    /// Whether the log is sealed.
    pub sealed: bool,
}

/// An append's slot past its deadline.
fn stalled(position: u64, written: bool) -> LogError {
    LogError::Stalled { position, written }
}

/// A loglet over a LogDrive: see the module doc.
pub struct AtomicLog {
    data: Arc<dyn LogDrive>,
    seal: Arc<dyn LogDrive>,
    /// Where slots come from: `local` in this process, or a sequencer elsewhere.
    slots: Arc<dyn Slots>,
    local: Option<Arc<Sequencer>>,
    options: AtomicOptions,
    /// The seal bit once seen set (it is never unset).
    sealed_seen: AtomicBool,
    /// The seal-bit reads appends share.
    seal_reads: SealReads,
}

impl AtomicLog {
    /// An AtomicLog over `data` with its seal bit in `seal`, its sequencer starting at
    /// `first` (0 for a new segment). A window the data LogDrive cannot keep (over its
    /// `write_window_max`, K / S per child of a stripe of S) or cannot scan (not split
    /// evenly among a stripe's children) is refused here, before any append: the drive is
    /// asked for `weak_tail(K)` once.
    pub async fn open(
        data: Arc<dyn LogDrive>,
        seal: Arc<dyn LogDrive>,
        first: u64,
        options: AtomicOptions,
    ) -> Result<AtomicLog, LogError> {
        if options.window == 0 || options.window > data.write_window_max() {
            return Err(LogError::InvalidConfig {
                reason: format!(
                    "the window K = {} must be at least 1 and at most the data LogDrive's \
                     write_window_max, {}",
                    options.window,
                    data.write_window_max()
                ),
            });
        }
        match data.weak_tail(options.window).await {
            Err(LogDriveError::InvalidWindow { k, max }) => {
                return Err(LogError::InvalidConfig {
                    reason: format!("the data LogDrive cannot scan a window of {k} (most {max})"),
                })
            }
            Err(error)
                if error.is_definite() && !matches!(error, LogDriveError::Damaged { .. }) =>
            {
                return Err(LogError::drive(None, error))
            }
            // A replica down or a quarantined window does not make the window wrong.
            _ => {}
        }
        Ok(AtomicLog::new(data, seal, first, options))
    }

    /// As [`AtomicLog::open`] without the window check (a caller that checked it).
    pub fn new(
        data: Arc<dyn LogDrive>,
        seal: Arc<dyn LogDrive>,
        first: u64,
        options: AtomicOptions,
    ) -> AtomicLog {
        let sequencer = Arc::new(Sequencer::new(first, options.window));
        let mut log = AtomicLog::with_slots(data, seal, sequencer.clone(), options);
        log.local = Some(sequencer);
        log
    }

    /// An AtomicLog whose slots come from `slots` (a sequencer in another process), without
    /// the window check of [`AtomicLog::open`]. The window in `options` must be the one that
    /// sequencer keeps.
    pub fn with_slots(
        data: Arc<dyn LogDrive>,
        seal: Arc<dyn LogDrive>,
        slots: Arc<dyn Slots>,
        options: AtomicOptions,
    ) -> AtomicLog {
        AtomicLog {
            data,
            seal,
            slots,
            local: None,
            options,
            sealed_seen: AtomicBool::new(false),
            seal_reads: SealReads::default(),
        }
    }

    /// The data LogDrive (a sealing coordinator fences and seals it).
    pub fn data(&self) -> &Arc<dyn LogDrive> {
        &self.data
    }

    /// The sequencer, when it lives in this process.
    pub fn sequencer(&self) -> Option<&Sequencer> {
        self.local.as_deref()
    }

    /// The options.
    pub fn options(&self) -> &AtomicOptions {
        &self.options
    }

    /// Appends `payload`: its position, or why not (see [`LogError`] for which failures may
    /// still have put it in the log).
    pub async fn append(&self, payload: Bytes) -> Result<u64, LogError> {
        if self.sealed_seen.load(Ordering::Acquire) {
            return Err(LogError::Sealed {
                position: None,
                written: false,
            });
        }
        let clock = self.options.clock.clone();
        let deadline = self.options.slot_deadline;
        let slot = match within(clock.as_ref(), deadline, self.slots.acquire()).await {
            Some(slot) => slot?,
            None => {
                return Err(LogError::WindowFull {
                    tail: self.slots.first_incomplete(),
                })
            }
        };
        // One deadline for the slot's whole way: its write, the lower slots' completion
        // (a writer of one may have died), and learning the seal bit.
        let written = AtomicBool::new(false);
        let steps = async {
            self.write_slot(slot, payload).await?;
            written.store(true, Ordering::Relaxed);
            match self.slots.complete(slot).await {
                Ok(()) => {}
                Err(LogError::SequencerDown) => return Err(stalled(slot, true)),
                Err(other) => return Err(other),
            }
            self.seal_after_completion(slot).await
        };
        match within(clock.as_ref(), deadline, steps).await {
            Some(Ok(false)) => Ok(slot),
            Some(Ok(true)) => Err(LogError::Sealed {
                position: Some(slot),
                written: true,
            }),
            Some(Err(error)) => Err(error),
            None => Err(stalled(slot, written.load(Ordering::Relaxed))),
        }
    }

    /// The seal bit for an append whose slot completed, from a read started after the
    /// completion (shared with the appends completed with it), read again after a failure
    /// (the entry is written; only whether it is acknowledged is left to learn).
    async fn seal_after_completion(&self, slot: u64) -> Result<bool, LogError> {
        loop {
            match self.seal_reads.check(|| self.read_seal()).await {
                Ok(sealed) => return Ok(sealed),
                Err(LogError::Drive { error, .. }) if !error.is_definite() => {
                    self.options.clock.sleep(self.options.retry_after).await;
                }
                Err(LogError::Drive { error, .. }) => {
                    return Err(LogError::drive(Some(slot), error.indeterminate()))
                }
                Err(other) => return Err(other),
            }
        }
    }

    /// Writes `slot` until acknowledged; fails once the log is sealed or fenced (the slot
    /// then never completes). True once written.
    async fn write_slot(&self, slot: u64, payload: Bytes) -> Result<bool, LogError> {
        loop {
            let error = match self
                .data
                .write(slot, self.options.epoch, payload.clone())
                .await
            {
                Ok(()) => return Ok(true),
                Err(error) => error,
            };
            match error.cause() {
                LogDriveError::Sealed { .. } | LogDriveError::Fenced { .. } => {
                    return Err(LogError::Sealed {
                        position: Some(slot),
                        written: false,
                    })
                }
                // Another value at our slot, or a slot we may not write: no retry mends it.
                LogDriveError::Conflict { .. }
                | LogDriveError::OutOfRange { .. }
                | LogDriveError::TooLarge { .. }
                | LogDriveError::Missing { .. } => {
                    return Err(LogError::drive(Some(slot), error.indeterminate()))
                }
                _ => {}
            }
            if self.read_seal().await.unwrap_or(false) {
                return Err(LogError::Sealed {
                    position: Some(slot),
                    written: false,
                });
            }
            tracing::debug!(slot, %error, "AtomicLog write failed; retrying the same bytes");
            self.options.clock.sleep(self.options.retry_after).await;
        }
    }

    /// The seal bit is set: remembered, and no more slots are handed out (an append waiting
    /// for room in the window fails at once rather than at its deadline).
    fn saw_seal(&self) {
        self.sealed_seen.store(true, Ordering::Release);
        self.slots.refuse_slots();
    }

    /// Reads the seal bit: whether the log is sealed.
    pub async fn read_seal(&self) -> Result<bool, LogError> {
        if self.sealed_seen.load(Ordering::Acquire) {
            return Ok(true);
        }
        let sealed = match self.seal.read(SEAL_ADDRESS).await {
            Ok(ReadOutcome::Value(_)) => true,
            Ok(ReadOutcome::Unwritten) => false,
            Ok(other) => {
                return Err(LogError::drive(
                    None,
                    LogDriveError::Io {
                        reason: format!("the seal bit reads {other:?}"),
                    },
                ))
            }
            Err(error) => return Err(LogError::drive(None, error)),
        };
        if sealed {
            self.saw_seal();
        }
        Ok(sealed)
    }

    /// Sets the seal bit, on behalf of a sealer of `epoch`: appends that complete after it
    /// fail. Idempotent and one-way.
    pub async fn seal(&self, epoch: u64) -> Result<(), LogError> {
        self.seal
            .write(SEAL_ADDRESS, epoch, Bytes::from_static(SEAL_BYTES))
            .await
            .map_err(|error| LogError::drive(None, error))?;
        self.saw_seal();
        Ok(())
    }

    /// The first unwritten position and the seal bit, linearizable with appends (see the
    /// module doc for the order of the reads). A sealed log's tail may still grow by
    /// appends that held slots before the seal (zombies); a VirtualLog hides them behind its
    /// recorded stop.
    pub async fn check_tail(&self) -> Result<Tail, LogError> {
        match self.slots.tail().await {
            Ok(fast) => {
                if !self.read_seal().await? {
                    return Ok(Tail {
                        position: fast,
                        sealed: false,
                    });
                }
            }
            Err(LogError::SequencerDown) => self.seal(self.options.epoch).await?,
            Err(other) => return Err(other),
        }
        self.slow_tail().await
    }

    /// The slow path: the data LogDrive's window scan. Only for a sealed log.
    async fn slow_tail(&self) -> Result<Tail, LogError> {
        let tail = self
            .data
            .weak_tail(self.options.window)
            .await
            .map_err(|error| LogError::drive(None, error))?;
        Ok(Tail {
            position: tail.t(),
            sealed: true,
        })
    }

    /// The first entry at a position in [min, max] below the tail, or `None`.
    pub async fn read_next(&self, min: u64, max: u64) -> Result<Option<(u64, Bytes)>, LogError> {
        let tail = self.check_tail().await?.position;
        let mut position = min;
        while position <= max && position < tail {
            match self.data.read(position).await {
                Ok(ReadOutcome::Value(bytes)) => return Ok(Some((position, bytes))),
                Ok(ReadOutcome::Trimmed { first }) => position = first.max(position + 1),
                Ok(ReadOutcome::Unwritten) => position += 1,
                Ok(ReadOutcome::Damaged) => {
                    return Err(LogError::drive(
                        Some(position),
                        LogDriveError::Damaged {
                            addresses: position..position + 1,
                        },
                    ))
                }
                Err(error) => return Err(LogError::drive(Some(position), error)),
            }
        }
        Ok(None)
    }

    /// The entry at `position`, or `None` at or past the tail.
    pub async fn read(&self, position: u64) -> Result<Option<Bytes>, LogError> {
        Ok(self
            .read_next(position, position)
            .await?
            .map(|(_, bytes)| bytes))
    }

    /// Trims every position below `upto` (at most the tail), durably in the data LogDrive;
    /// the trim point.
    pub async fn prefix_trim(&self, upto: u64) -> Result<u64, LogError> {
        let tail = self.check_tail().await?.position;
        let upto = upto.min(tail);
        self.data
            .trim(upto)
            .await
            .map_err(|error| LogError::drive(Some(upto), error))?;
        Ok(upto)
    }
}
