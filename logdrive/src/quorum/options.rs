//! What a [`QuorumLogDrive`](super::QuorumLogDrive) is configured with: the quorum sizes
//! derived from N and Qw ([`Sizes`]), the hedging delay and the clock ([`QuorumOptions`]),
//! and how fast a scrub walks a child ([`ScrubPace`]). See docs/composition.md, "Quorums".

use std::sync::Arc;
use std::time::Duration;

use crate::api::LogDriveError;
use crate::clock::{Clock, SystemClock};

/// How a quorum asks its children: when it asks more than a quorum, and the clock it waits on.
#[derive(Clone)]
pub struct QuorumOptions {
    /// How long a read, window scan or length waits for the first children it asked before
    /// it asks the others too; `None` asks every child at once and uses the first answers.
    pub hedge_after: Option<Duration>,
    /// The clock the hedging delay and a scrub's pauses are measured on.
    pub clock: Arc<dyn Clock>,
}

impl Default for QuorumOptions {
    /// Hedging after 2 ms, on the [`SystemClock`].
    fn default() -> Self {
        QuorumOptions {
            hedge_after: Some(Duration::from_millis(2)),
            clock: Arc::new(SystemClock),
        }
    }
}

/// How fast a scrub walks a child: `slots_per_step` slots, then a pause of `pause` on the
/// quorum's clock, so that it leaves the children to the clients.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScrubPace {
    /// Slots checked between two pauses (at least 1 is used).
    pub slots_per_step: u64,
    /// The pause after each step.
    pub pause: Duration,
}

impl Default for ScrubPace {
    /// 64 slots a step, 1 ms between steps.
    fn default() -> Self {
        ScrubPace {
            slots_per_step: 64,
            pause: Duration::from_millis(1),
        }
    }
}

/// The quorum sizes of N replicas with write quorum Qw: Qr = N - Qw + 1 (so that a read
/// quorum meets every write quorum) and Qf = max(Qw, Qr) (what a window scan needs to be
/// able to repair to Qw).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Sizes {
    /// N, the replicas.
    pub(crate) replicas: usize,
    /// Qw.
    pub(crate) write: usize,
    /// Qr.
    pub(crate) read: usize,
    /// Qf.
    pub(crate) tail: usize,
}

impl Sizes {
    /// The sizes for `replicas` children and write quorum `write`; a write quorum outside
    /// 1..=N (or no children) is `OutOfRange`.
    pub(crate) fn new(replicas: usize, write: usize) -> Result<Sizes, LogDriveError> {
        if replicas == 0 || write == 0 || write > replicas {
            return Err(LogDriveError::OutOfRange {
                address: write as u64,
                valid: 1..(replicas as u64).max(1) + 1,
            });
        }
        let read = replicas - write + 1;
        Ok(Sizes {
            replicas,
            write,
            read,
            tail: write.max(read),
        })
    }
}
