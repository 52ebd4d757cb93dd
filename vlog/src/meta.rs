//! The MetaStore (docs/composition.md, "The VirtualLog"): one versioned register with a
//! compare-and-swap, the only place the VirtualLog needs agreement, and touched only when it
//! reconfigures. [`MetaStore`] is the trait (a networked store can implement it);
//! [`LogDriveMetaStore`] is a durable one on a LogDrive.
//!
//! On a LogDrive, version v is the value written at address v. A compare-and-swap from
//! version e writes address e + 1: the single-value rule makes exactly one proposal win, and
//! every proposal carries its proposer's id and a sequence number of its own, so two
//! proposals are never the same bytes (two proposers with the same value would otherwise
//! both be told they won). A `Conflict` at e + 1 is a lost race. After an indeterminate
//! failure the proposer reads e + 1: its own bytes mean it won, another's that it lost, and
//! nothing there means the write may still surface (a quorum write that reached fewer than
//! a write quorum can be repaired later), so it writes the same bytes again until the answer
//! is definite. Versions below the newest are trimmed as it goes.
//!
//! The drive must decide racing proposals itself: one local LogDrive (or a remote one a
//! single node serves), whose conflict check is atomic. A quorum is not enough: two
//! proposals racing at one address can each reach some replicas, and no read can then tell
//! which won (the replicated simulation found two chains installed at one version that
//! way). A replicated MetaStore is a consensus service of its own, for a networked
//! implementation of the trait.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use sealog_logdrive::{LogDrive, LogDriveError, ReadOutcome};

use crate::error::MetaError;

/// What a MetaStore operation returns.
pub type MetaFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, MetaError>> + Send + 'a>>;

/// A value and its version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Versioned {
    /// The version (1 for the first value; 0 means none was ever written).
    pub version: u64,
    /// The value.
    pub value: Bytes,
}

/// A versioned register with a conditional write.
pub trait MetaStore: Send + Sync {
    /// The newest value, or `None` before the first.
    fn read(&self) -> MetaFuture<'_, Option<Versioned>>;

    /// Writes `value` as version `expected + 1` if the register is at `expected` (0: empty).
    /// `Conflict` names the version found when it is not.
    fn compare_and_swap(&self, expected: u64, value: Bytes) -> MetaFuture<'_, u64>;
}

/// A durable MetaStore on a LogDrive: see the module doc.
pub struct LogDriveMetaStore {
    drive: Arc<dyn LogDrive>,
    proposer: u64,
    proposals: AtomicU64,
    /// Tries at writing a proposal whose outcome stays unknown before giving up.
    attempts_max: u32,
}

/// A proposal's header: proposer id, then its sequence number.
const HEADER_BYTES: usize = 16;

impl LogDriveMetaStore {
    /// A MetaStore on `drive` for the proposer `proposer` (unique among the clients that
    /// share the drive).
    pub fn new(drive: Arc<dyn LogDrive>, proposer: u64) -> LogDriveMetaStore {
        LogDriveMetaStore {
            drive,
            proposer,
            proposals: AtomicU64::new(0),
            attempts_max: 16,
        }
    }

    fn encode(&self, value: &[u8]) -> Bytes {
        let mut bytes = BytesMut::with_capacity(HEADER_BYTES + value.len());
        bytes.put_u64_le(self.proposer);
        bytes.put_u64_le(self.proposals.fetch_add(1, Ordering::Relaxed));
        bytes.put_slice(value);
        bytes.freeze()
    }

    fn decode(version: u64, bytes: Bytes) -> Result<Bytes, MetaError> {
        if bytes.len() < HEADER_BYTES {
            return Err(MetaError::Corrupt {
                version,
                reason: format!("{} bytes, shorter than a proposal's header", bytes.len()),
            });
        }
        Ok(bytes.slice(HEADER_BYTES..))
    }

    /// The value at `version`, `None` if unwritten.
    async fn read_version(&self, version: u64) -> Result<Option<Bytes>, MetaError> {
        match self.drive.read(version).await.map_err(MetaError::Store)? {
            ReadOutcome::Value(bytes) => Ok(Some(bytes)),
            ReadOutcome::Unwritten => Ok(None),
            ReadOutcome::Trimmed { first } => Err(MetaError::Conflict {
                current: first.max(version + 1),
            }),
            ReadOutcome::Damaged => Err(MetaError::Store(LogDriveError::Damaged {
                addresses: version..version + 1,
            })),
        }
    }

    /// The newest version: the highest address written.
    async fn newest(&self) -> Result<u64, MetaError> {
        let tail = self.drive.weak_tail(1).await.map_err(MetaError::Store)?;
        Ok(tail.n.saturating_sub(1))
    }

    /// Writes `proposal` at `version` until the outcome is known: true if it is there.
    async fn propose(&self, version: u64, proposal: Bytes) -> Result<bool, MetaError> {
        let mut last = None;
        for _ in 0..self.attempts_max {
            let error = match self.drive.write(version, version, proposal.clone()).await {
                Ok(()) => return Ok(true),
                Err(error) => error,
            };
            match error.cause() {
                LogDriveError::Conflict { .. } | LogDriveError::OutOfRange { .. }
                    if error.is_definite() =>
                {
                    return Ok(false)
                }
                _ => {}
            }
            // Unknown: what is at the version now says, unless it is still nothing.
            match self.read_version(version).await {
                Ok(Some(found)) => return Ok(found == proposal),
                Ok(None) => {}
                Err(MetaError::Conflict { .. }) => return Ok(false),
                Err(_) => {}
            }
            last = Some(error);
        }
        Err(MetaError::Store(
            last.unwrap_or(LogDriveError::Io {
                reason: "no attempt made".into(),
            })
            .indeterminate(),
        ))
    }
}

impl MetaStore for LogDriveMetaStore {
    fn read(&self) -> MetaFuture<'_, Option<Versioned>> {
        Box::pin(async move {
            let mut tries = 0;
            loop {
                let version = self.newest().await?;
                if version == 0 {
                    return Ok(None);
                }
                match self.read_version(version).await {
                    Ok(Some(bytes)) => {
                        let value = Self::decode(version, bytes)?;
                        return Ok(Some(Versioned { version, value }));
                    }
                    // A newer version trimmed this one meanwhile: find the newest again.
                    Err(MetaError::Conflict { .. }) if tries < self.attempts_max => tries += 1,
                    Err(error) => return Err(error),
                    Ok(None) => {
                        return Err(MetaError::Store(LogDriveError::Io {
                            reason: format!("version {version} was the newest and reads unwritten"),
                        }))
                    }
                }
            }
        })
    }

    fn compare_and_swap(&self, expected: u64, value: Bytes) -> MetaFuture<'_, u64> {
        Box::pin(async move {
            let version = expected + 1;
            let proposal = self.encode(&value);
            if !self.propose(version, proposal).await? {
                let current = self.newest().await?.max(version);
                return Err(MetaError::Conflict { current });
            }
            // Only the newest version is ever read: the older ones can go (best effort; a
            // failed trim leaves them for the next).
            if version > 1 {
                let _ = self.drive.trim(version - 1).await;
            }
            Ok(version)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sealog_logdrive::{wait, MemLogDrive};

    #[test]
    fn one_of_two_racing_proposals_wins_and_the_loser_learns_the_version() {
        let drive: Arc<dyn LogDrive> = Arc::new(MemLogDrive::new());
        let first = LogDriveMetaStore::new(drive.clone(), 1);
        let second = LogDriveMetaStore::new(drive.clone(), 2);
        assert_eq!(wait(first.read()).unwrap(), None);
        assert_eq!(
            wait(first.compare_and_swap(0, Bytes::from("a"))).unwrap(),
            1
        );
        let lost = wait(second.compare_and_swap(0, Bytes::from("a"))).unwrap_err();
        assert_eq!(lost, MetaError::Conflict { current: 1 });
        assert_eq!(
            wait(second.compare_and_swap(1, Bytes::from("b"))).unwrap(),
            2
        );
        let read = wait(first.read()).unwrap().unwrap();
        assert_eq!((read.version, read.value), (2, Bytes::from("b")));
    }
}
