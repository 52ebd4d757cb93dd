//! Reconfiguring a [`VirtualLog`] (docs/composition.md, "Sealing a segment"): sealing the
//! active segment at a stop every replica agrees on and installing the next, by two
//! compare-and-swaps in the MetaStore.
//!
//! 1. **Claim.** The chain is rewritten with the active segment marked as being sealed. The
//!    version this write wins is the reconfiguration's epoch: only one coordinator wins a
//!    version, so no two share an epoch. A coordinator that loses re-reads the chain.
//! 2. **Seal and fence.** The loglet's seal bit is set (appends completing from now on fail)
//!    and its data LogDrive fenced at the epoch, which for a quorum takes at least a read
//!    quorum of replicas, so no write of an older epoch can gather a write quorum again.
//! 3. **Tail.** The tail is the loglet's slow path (`weak_tail`, on a quorum counted only
//!    from replicas that took the fence), or a sealed length already found on the drive.
//! 4. **Install.** The chain is rewritten with the segment's stop and a new active segment
//!    starting there, whose writes carry the version this write wins.
//! 5. **Seal the replicas** at the stop, only now: a tail a coordinator merely computed is
//!    not the stop until it is installed (two coordinators can compute different tails).
//!    Sealing drops what a replica holds past the stop and fills one short of it.
//!
//! A coordinator that stops between 1 and 4 leaves a claim; another handle waits
//! `roll_forward_after` and then claims again at a newer epoch and goes on, with a new
//! segment like the old one.

use crate::chain::{Chain, LogletConfig, Segment};
use crate::error::{LogError, MetaError};
use crate::virtual_log::VirtualLog;

/// What a reconfiguration did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reconfigured {
    /// The chain afterwards.
    pub chain: Chain,
    /// Whether this handle installed it (false: another reconfiguration did first).
    pub won: bool,
}

impl VirtualLog {
    /// Seals the active segment as this handle last saw it and installs a new one on `next`
    /// after it. If another reconfiguration got there first (the segment this handle saw
    /// is no longer the active one), nothing is sealed: the chain that won is returned,
    /// with `won` false.
    pub async fn reconfig_extend(&self, next: LogletConfig) -> Result<Reconfigured, LogError> {
        let active = self.chain().await?.active().loglet.id;
        self.extend_from(active, Some(next)).await
    }

    /// Seals the segment on loglet `from` if it is still the active one, and installs a new
    /// one on `next` after it; as [`VirtualLog::reconfig_extend`] otherwise.
    pub async fn reconfig_extend_from(
        &self,
        from: u64,
        next: LogletConfig,
    ) -> Result<Reconfigured, LogError> {
        self.extend_from(from, Some(next)).await
    }

    /// Seals the segment on loglet `from` if it is still the active one, and installs a new
    /// one after it (on `next`, or the factory's successor of it). Waiting for another
    /// coordinator's claim costs no attempt; each claim and install does.
    pub(crate) async fn extend_from(
        &self,
        from: u64,
        next: Option<LogletConfig>,
    ) -> Result<Reconfigured, LogError> {
        if let Some(delegate) = &self.delegate {
            // The delegate chooses the next segment; this handle only learns of it.
            delegate.extend_from(from).await?;
            let chain = self.refresh().await?;
            return Ok(Reconfigured { chain, won: false });
        }
        let mut attempts = 0;
        let mut last = None;
        // Our claim, when one was won and its sealing failed on the way: taken up again.
        let mut ours: Option<Chain> = None;
        while attempts < self.options.attempts_max {
            let chain = self.refresh().await?;
            let active = chain.active().clone();
            if active.loglet.id != from {
                return Ok(Reconfigured { chain, won: false });
            }
            if let Some(next) = &next {
                check_unused(&chain, next)?;
            }
            let resumed = ours
                .take()
                .filter(|claimed| claimed.version == chain.version);
            // A claim under way is waited out, then rolled forward at a newer epoch.
            if resumed.is_none()
                && active.sealing.is_some()
                && !self.waited_out(chain.version).await
            {
                continue;
            }
            attempts += 1;
            let claimed = match resumed {
                Some(claimed) => claimed,
                None => match self.claim(&chain).await {
                    Ok(claimed) => claimed,
                    Err(error) => {
                        last = Some(error);
                        self.options.clock.sleep(self.options.poll_interval).await;
                        continue;
                    }
                },
            };
            match self.seal_and_install(claimed.clone(), next.clone()).await {
                Ok(reconfigured) => return Ok(reconfigured),
                // A factory whose successor the chain holds already: no retry mends it.
                Err(error @ LogError::InvalidConfig { .. }) => return Err(error),
                Err(error) => {
                    // A lost race re-reads; a failed step is taken up again from our claim.
                    tracing::debug!(%error, "a reconfiguration step failed; trying again");
                    if !is_conflict(&error) {
                        ours = Some(claimed);
                    }
                    last = Some(error);
                    self.options.clock.sleep(self.options.poll_interval).await;
                }
            }
        }
        Err(LogError::gave_up(attempts, last))
    }

    /// Writes the claim on the active segment: the chain at the version won, whose number
    /// is the epoch.
    async fn claim(&self, chain: &Chain) -> Result<Chain, LogError> {
        let mut claimed = chain.clone();
        claimed.active_mut().sealing = Some(chain.version + 1);
        claimed.version = self
            .meta
            .compare_and_swap(chain.version, claimed.encode())
            .await?;
        self.keep(claimed.clone());
        Ok(claimed)
    }

    /// Whether a claim seen at chain version `version` has been under way for longer than
    /// `roll_forward_after`; sleeps a poll interval when not.
    async fn waited_out(&self, version: u64) -> bool {
        let now = self.options.clock.now();
        let since = {
            let mut under_way = self.under_way.lock().unwrap_or_else(|p| p.into_inner());
            match *under_way {
                Some((seen, since)) if seen == version => since,
                _ => {
                    *under_way = Some((version, now));
                    now
                }
            }
        };
        if now.saturating_sub(since) >= self.options.roll_forward_after {
            return true;
        }
        self.options.clock.sleep(self.options.poll_interval).await;
        false
    }

    /// Steps 2 to 5 for a claimed chain.
    async fn seal_and_install(
        &self,
        claimed: Chain,
        next: Option<LogletConfig>,
    ) -> Result<Reconfigured, LogError> {
        let segment = claimed.active().clone();
        let epoch = claimed.version;
        let loglet = self.loglet(&segment).await?;
        loglet.seal(epoch).await?;
        let data = loglet.data().clone();
        data.fence(epoch)
            .await
            .map_err(|error| LogError::drive(None, error))?;
        let sealed = data.length().await.ok().and_then(|length| length.sealed);
        let tail = match sealed {
            // A replica sealed by an installed chain: that length is the stop.
            Some(length) => length,
            None => loglet.check_tail().await?.position,
        };
        let stop = segment.start + tail;
        let installed = self.install(&claimed, stop, next).await?;
        if let Err(error) = data.seal(tail, epoch).await {
            // The stop is recorded: sealing the replicas is finished by `settle`.
            tracing::warn!(loglet = segment.loglet.id, stop, %error, "sealing replicas failed");
        }
        Ok(Reconfigured {
            chain: installed,
            won: true,
        })
    }

    /// Step 4: the chain with the claimed segment stopped at `stop` and a new segment.
    async fn install(
        &self,
        claimed: &Chain,
        stop: u64,
        next: Option<LogletConfig>,
    ) -> Result<Chain, LogError> {
        let mut installed = claimed.clone();
        let previous = installed.active().loglet.clone();
        let next = next.unwrap_or_else(|| self.factory.successor(&previous));
        if let Some(used) = installed.segments.iter().find(|s| s.loglet.id == next.id) {
            // One loglet, one range of positions: its slots would answer for both.
            return Err(LogError::InvalidConfig {
                reason: format!(
                    "loglet {} holds the segment at {} already",
                    next.id, used.start
                ),
            });
        }
        let active = installed.active_mut();
        active.stop = Some(stop);
        active.sealing = None;
        installed.segments.push(Segment {
            start: stop,
            stop: None,
            epoch: claimed.version + 1,
            sealing: None,
            loglet: next,
        });
        installed.version = self
            .meta
            .compare_and_swap(claimed.version, installed.encode())
            .await?;
        self.keep(installed.clone());
        Ok(installed)
    }

    /// Seals the replicas of every sealed segment at its stop again (idempotent): what a
    /// coordinator that stopped after installing a stop left undone.
    pub async fn settle(&self) -> Result<(), LogError> {
        let chain = self.refresh().await?;
        for segment in &chain.segments {
            let Some(stop) = segment.stop else { continue };
            let epoch = sealing_epoch(&chain, segment);
            let loglet = self.loglet(segment).await?;
            loglet
                .data()
                .seal(stop - segment.start, epoch)
                .await
                .map_err(|error| LogError::drive(None, error))?;
        }
        Ok(())
    }

    /// Trims every position below `upto` (at most the tail): the loglets' data durably,
    /// and the chain's trim point by compare-and-swap. The trim point.
    pub async fn prefix_trim(&self, upto: u64) -> Result<u64, LogError> {
        let upto = upto.min(self.check_tail().await?);
        let chain = self.refresh().await?;
        for segment in chain.segments.iter().filter(|segment| segment.start < upto) {
            let end = segment.stop.unwrap_or(u64::MAX).min(upto);
            let loglet = self.loglet(segment).await?;
            loglet
                .data()
                .trim(end - segment.start)
                .await
                .map_err(|error| LogError::drive(Some(end - segment.start), error))?;
        }
        self.rewrite(|chain| {
            chain.trimmed = chain.trimmed.max(upto);
        })
        .await?;
        Ok(upto)
    }

    /// Removes the segments wholly below the trim point from the chain.
    pub async fn reconfig_truncate(&self) -> Result<Chain, LogError> {
        self.rewrite(|chain| {
            let trimmed = chain.trimmed;
            let keep_from = chain
                .segments
                .iter()
                .position(|segment| segment.stop.is_none_or(|stop| stop > trimmed))
                .unwrap_or(chain.segments.len() - 1);
            chain.segments.drain(..keep_from);
        })
        .await
    }

    /// Applies `change` to the newest chain and installs it, again on a lost race.
    async fn rewrite(&self, change: impl Fn(&mut Chain)) -> Result<Chain, LogError> {
        let mut last = None;
        for _ in 0..self.options.attempts_max {
            let chain = self.refresh().await?;
            let mut changed = chain.clone();
            change(&mut changed);
            if changed == chain {
                return Ok(chain);
            }
            match self
                .meta
                .compare_and_swap(chain.version, changed.encode())
                .await
            {
                Ok(version) => {
                    changed.version = version;
                    self.keep(changed.clone());
                    return Ok(changed);
                }
                Err(lost @ MetaError::Conflict { .. }) => last = Some(lost.into()),
                Err(error) => return Err(error.into()),
            }
        }
        Err(LogError::gave_up(self.options.attempts_max, last))
    }
}

/// The epoch a sealed segment was sealed at: at least the epoch of the segment after it
/// minus one (the claim's version), which is what its replicas were fenced at.
fn sealing_epoch(chain: &Chain, segment: &Segment) -> u64 {
    chain
        .segments
        .iter()
        .find(|next| Some(next.start) == segment.stop && next.loglet.id != segment.loglet.id)
        .map_or(segment.epoch, |next| next.epoch.saturating_sub(1))
}

/// Refuses a next loglet the chain holds already: one loglet, one range of positions (its
/// slots would answer for both).
fn check_unused(chain: &Chain, next: &LogletConfig) -> Result<(), LogError> {
    match chain
        .segments
        .iter()
        .find(|segment| segment.loglet.id == next.id)
    {
        Some(used) => Err(LogError::InvalidConfig {
            reason: format!(
                "loglet {} holds the segment at {} already",
                next.id, used.start
            ),
        }),
        None => Ok(()),
    }
}

fn is_conflict(error: &LogError) -> bool {
    matches!(error, LogError::Meta(MetaError::Conflict { .. }))
}
