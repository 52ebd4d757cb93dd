//! How a LogDrive store opens and runs: [`StoreOptions`] (the engine drive's options, the
//! reclamation policy, the window and `weak_tail` bounds, how long records wait for room) and
//! their defaults.

use std::time::Duration;

use sealog::DriveOptions;

use crate::reclaim::policy::ReclaimPolicy;

/// How a [`LogDriveStore`] opens and runs.
#[derive(Clone, Debug)]
pub struct StoreOptions {
    /// The engine drive's options (its recovery mode among them:
    /// `RecoveryMode::Quarantine` opens a ring with damaged acknowledged records). Its
    /// `when_full` must be `WhenFull::Fail`: records wait for room in the store, not in the
    /// engine's queue.
    pub drive: DriveOptions,
    /// When and how fast the ring's space is reclaimed.
    pub reclaim: ReclaimPolicy,
    /// The largest window K writers keep between T and N (an AtomicLog's K): how far past N a
    /// damaged record whose header is gone may have written, in a quarantined open.
    pub write_window_max: u64,
    /// The largest k a `weak_tail` call answers for ([`LogDriveError::InvalidWindow`] above
    /// it), so that one client call costs O(k) and no more; never below `write_window_max`.
    pub weak_tail_k_max: u64,
    /// How long a write that finds the ring full waits for the reclaimer to make room
    /// before it is refused with `RingFull` (zero: refused at once). Waiting writes are
    /// refused sooner when the ring holds nothing the reclaimer could free.
    pub full_wait: Duration,
    /// How long a control record (create, delete, seal, fence, trim) that finds even the
    /// control reserve spent waits for the reclaimer (zero: refused at once). Control
    /// records are what make room, so they wait longer than writes by default.
    pub control_wait: Duration,
}

/// The default [`StoreOptions::weak_tail_k_max`].
pub const WEAK_TAIL_K_MAX_DEFAULT: u64 = 4096;

/// The default [`StoreOptions::full_wait`].
pub const FULL_WAIT_DEFAULT: Duration = Duration::from_secs(10);

/// The default [`StoreOptions::control_wait`].
pub const CONTROL_WAIT_DEFAULT: Duration = Duration::from_secs(30);

impl Default for StoreOptions {
    fn default() -> StoreOptions {
        StoreOptions {
            drive: DriveOptions::default(),
            reclaim: ReclaimPolicy::default(),
            write_window_max: 64,
            weak_tail_k_max: WEAK_TAIL_K_MAX_DEFAULT,
            full_wait: FULL_WAIT_DEFAULT,
            control_wait: CONTROL_WAIT_DEFAULT,
        }
    }
}

impl StoreOptions {
    /// These options with `drive` for the engine drive.
    pub fn drive(mut self, drive: DriveOptions) -> StoreOptions {
        self.drive = drive;
        self
    }

    /// These options with `reclaim` as the reclamation policy.
    pub fn reclaim(mut self, reclaim: ReclaimPolicy) -> StoreOptions {
        self.reclaim = reclaim;
        self
    }

    /// These options with `write_window_max` as the largest window writers keep.
    pub fn write_window_max(mut self, write_window_max: u64) -> StoreOptions {
        self.write_window_max = write_window_max;
        self
    }

    /// These options answering `weak_tail` for k up to `weak_tail_k_max`.
    pub fn weak_tail_k_max(mut self, weak_tail_k_max: u64) -> StoreOptions {
        self.weak_tail_k_max = weak_tail_k_max;
        self
    }

    /// These options with writes waiting up to `full_wait` for room on a full ring.
    pub fn full_wait(mut self, full_wait: Duration) -> StoreOptions {
        self.full_wait = full_wait;
        self
    }

    /// These options with control records waiting up to `control_wait` for room once the
    /// control reserve is spent.
    pub fn control_wait(mut self, control_wait: Duration) -> StoreOptions {
        self.control_wait = control_wait;
        self
    }

    pub(crate) fn check(&self) -> Result<(), String> {
        if self.weak_tail_k_max < self.write_window_max {
            return Err(format!(
                "weak_tail_k_max {} is below write_window_max {}: writers could keep a window \
                 weak_tail would not answer for",
                self.weak_tail_k_max, self.write_window_max
            ));
        }
        self.reclaim.check()
    }
}
