//! [`SimFaults`], the probabilities of the faults a simulated network injects, and
//! [`FaultCounts`], how many of each it injected. Faults on one operation are drawn when the
//! operation is delivered; faults on a replica (crash, slowness, a forgotten write) are drawn
//! once per step of the simulation.

use std::ops::AddAssign;
use std::time::Duration;

/// The faults a simulation's network injects, each a probability.
#[derive(Clone, Debug, PartialEq)]
pub struct SimFaults {
    /// Per delivery: the request is lost (nothing applied; the caller sees an I/O error).
    pub drop_request: f64,
    /// Per delivery: the replica answers EIO (nothing applied).
    pub eio: f64,
    /// Per delivery: the operation is applied and its reply lost (the caller sees an I/O
    /// error).
    pub lose_reply: f64,
    /// Per step: a replica that is up crashes. Its pending operations fail and it is down
    /// (every operation fails) until it restarts, holding what it held.
    pub crash: f64,
    /// How long a crashed replica stays down at most.
    pub down_for_max: Duration,
    /// Replicas down at once at most.
    pub down_max: usize,
    /// Per step: a replica turns slow: nothing sent to it is delivered for a while.
    pub slow: f64,
    /// How long a slow spell lasts at most.
    pub slow_for_max: Duration,
    /// Per write whose reply is lost on a replica that did not hold its address before: the
    /// replica forgets it at once, before anything else reaches it (a write lost before it
    /// was made durable, never seen by anyone), on at most write quorum - 1 replicas of an
    /// address. A value a replica held already, or that a later operation may have seen, is
    /// never forgotten: that would be a drive losing acknowledged data, a different fault.
    pub forget: f64,
}

impl SimFaults {
    /// No faults: a correct network.
    pub fn none() -> SimFaults {
        SimFaults {
            drop_request: 0.0,
            eio: 0.0,
            lose_reply: 0.0,
            crash: 0.0,
            down_for_max: Duration::ZERO,
            down_max: 0,
            slow: 0.0,
            slow_for_max: Duration::ZERO,
            forget: 0.0,
        }
    }

    /// Every fault, often enough that a history of 200 operations meets each several times.
    pub fn standard() -> SimFaults {
        SimFaults {
            drop_request: 0.03,
            eio: 0.02,
            lose_reply: 0.04,
            crash: 0.004,
            down_for_max: Duration::from_millis(20),
            down_max: 1,
            slow: 0.004,
            slow_for_max: Duration::from_millis(10),
            forget: 0.5,
        }
    }
}

/// How many of each fault a network injected (and how many operations it delivered).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultCounts {
    /// Operations delivered with their reply.
    pub delivered: u64,
    /// Requests lost.
    pub dropped: u64,
    /// EIO answers.
    pub eio: u64,
    /// Replies lost after the operation was applied.
    pub replies_lost: u64,
    /// Replica crashes.
    pub crashes: u64,
    /// Pending operations failed by a crash.
    pub failed_by_crash: u64,
    /// Replica restarts.
    pub restarts: u64,
    /// Slow spells.
    pub slowed: u64,
    /// Writes forgotten.
    pub forgotten: u64,
}

impl AddAssign for FaultCounts {
    fn add_assign(&mut self, other: FaultCounts) {
        self.delivered += other.delivered;
        self.dropped += other.dropped;
        self.eio += other.eio;
        self.replies_lost += other.replies_lost;
        self.crashes += other.crashes;
        self.failed_by_crash += other.failed_by_crash;
        self.restarts += other.restarts;
        self.slowed += other.slowed;
        self.forgotten += other.forgotten;
    }
}
