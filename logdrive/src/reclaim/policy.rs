//! The reclamation policy and the decision it makes on each look: [`ReclaimPolicy`] (when
//! and how fast the ring's space is reclaimed), the figures a look at the ring yields
//! ([`Survey`]), and whether a step only advances the head or relocates too ([`mode`]).

use std::time::Duration;

/// When and how fast the ring's space is reclaimed.
#[derive(Clone, Debug, PartialEq)]
pub struct ReclaimPolicy {
    /// Relocate while the ring's occupied bytes are over this many times the live bytes
    /// (the records live LogDrives need, headers included). At least 1.
    pub space_amplification_max: f64,
    /// ... and the ring is at least this full (0, the default: whenever the bound is
    /// passed; relocation then copies less than it frees). Between 0 and 1. Whatever it
    /// says, relocation waits for a segment's worth of garbage: segments are freed whole,
    /// so less wins nothing.
    pub occupancy_min_fraction: f64,
    /// Relocate too, unpaced, while the room clients may still take (the usable bytes less
    /// the reserves and what is queued) is under this share of the ring and there is garbage
    /// to win: so that a ring whose live bytes sit near the bound is reclaimed before clients
    /// are refused, not after. Between 0 and 1.
    pub free_min_fraction: f64,
    /// The share of the reclaimer's time it may spend relocating while no client is refused
    /// room: after a step that took t, it pauses t * (1 - share) / share. 1 runs flat out.
    pub bandwidth_share: f64,
    /// Ring bytes kept for relocation; `None` for the least this ring needs (one segment,
    /// two batches and the in-flight window). An explicit value below that is refused.
    pub reserve_bytes: Option<u64>,
    /// Ring bytes one step walks before it trims; `None` for a quarter of a segment, at
    /// least a batch and at most 8 MiB.
    pub step_bytes: Option<u64>,
    /// Run the reclaimer on the store's thread; off, it runs only in
    /// [`LogDriveStore::reclaim_now`](crate::LogDriveStore::reclaim_now) (the store's
    /// thread then only refuses the records whose wait for room has run out).
    pub background: bool,
    /// How often the background reclaimer looks when nothing wakes it.
    pub interval: Duration,
}

impl Default for ReclaimPolicy {
    fn default() -> ReclaimPolicy {
        ReclaimPolicy {
            space_amplification_max: 2.0,
            occupancy_min_fraction: 0.0,
            free_min_fraction: 0.25,
            bandwidth_share: 0.25,
            reserve_bytes: None,
            step_bytes: None,
            background: true,
            interval: Duration::from_millis(50),
        }
    }
}

impl ReclaimPolicy {
    /// This policy with relocation's trigger at `space_amplification_max`.
    pub fn space_amplification_max(mut self, space_amplification_max: f64) -> ReclaimPolicy {
        self.space_amplification_max = space_amplification_max;
        self
    }

    /// This policy with relocation waiting for the ring to be `fraction` full.
    pub fn occupancy_min_fraction(mut self, fraction: f64) -> ReclaimPolicy {
        self.occupancy_min_fraction = fraction;
        self
    }

    /// This policy relocating unpaced once clients' room is under `fraction` of the ring.
    pub fn free_min_fraction(mut self, fraction: f64) -> ReclaimPolicy {
        self.free_min_fraction = fraction;
        self
    }

    /// This policy with relocation paced to `share` of its time.
    pub fn bandwidth_share(mut self, share: f64) -> ReclaimPolicy {
        self.bandwidth_share = share;
        self
    }

    /// This policy with `reserve_bytes` kept for relocation.
    pub fn reserve_bytes(mut self, reserve_bytes: Option<u64>) -> ReclaimPolicy {
        self.reserve_bytes = reserve_bytes;
        self
    }

    /// This policy walking `step_bytes` per step.
    pub fn step_bytes(mut self, step_bytes: Option<u64>) -> ReclaimPolicy {
        self.step_bytes = step_bytes;
        self
    }

    /// This policy with the reclaimer on its own thread (or not).
    pub fn background(mut self, background: bool) -> ReclaimPolicy {
        self.background = background;
        self
    }

    /// Checks the policy's numbers.
    pub(crate) fn check(&self) -> Result<(), String> {
        let amplification = self.space_amplification_max;
        if amplification.is_nan() || amplification < 1.0 {
            return Err(format!(
                "a space amplification bound of {amplification} is below 1"
            ));
        }
        let occupancy = self.occupancy_min_fraction;
        if !(0.0..=1.0).contains(&occupancy) {
            return Err(format!(
                "an occupancy fraction of {occupancy} is not in 0..=1"
            ));
        }
        let free = self.free_min_fraction;
        if !(0.0..=1.0).contains(&free) {
            return Err(format!("a free room fraction of {free} is not in 0..=1"));
        }
        let share = self.bandwidth_share;
        if share.is_nan() || share <= 0.0 || share > 1.0 {
            return Err(format!("a bandwidth share of {share} is not in (0, 1]"));
        }
        if self.step_bytes == Some(0) {
            return Err("a step of 0 bytes walks nothing".to_string());
        }
        Ok(())
    }
}

/// While clients are refused room, relocation runs once at least this share of the ring's
/// occupied bytes (and at least a batch) is dead records, whatever the bound: records of
/// deleted LogDrives, trimmed or sealed-off addresses, superseded rewrites and controls. Not
/// the padding and segment ends around live records: a ring of live records written one to a
/// batch has a tenth of its bytes in padding, and rewriting it all again and again to pack
/// that tenth tighter cost ten times the clients' bytes (a LogDrive's copies go out in full
/// batches); the amplification bound relocates such a ring once it is worth it.
pub(crate) const PRESSURE_DEAD_MIN: f64 = 1.0 / 64.0;

/// What a look at the ring found.
pub(crate) struct Survey {
    pub(crate) live_bytes: u64,
    pub(crate) capacity_bytes: u64,
    pub(crate) occupied_bytes: u64,
    /// The ring bytes clients may still take (usable, less the reserves and what is queued).
    pub(crate) client_room_bytes: u64,
    /// The bytes of the records in the ring (live or dead), without the padding and segment
    /// ends around them.
    pub(crate) record_bytes: u64,
    /// The ring's largest batch.
    pub(crate) batch_bytes: u64,
    /// The ring's block.
    pub(crate) block_bytes: u64,
    /// The last LSN the head may pass without a read: below the first record any LogDrive
    /// needs or may need, and at most the durable tail as of the look.
    pub(crate) advance_to: u64,
}

impl Survey {
    /// The bytes of records no LogDrive needs (what relocating the rest wins, besides the
    /// padding it packs): every record in the ring less the live ones (those in flight among
    /// them, which the ring may not hold yet: an estimate that errs low).
    pub(crate) fn dead_bytes(&self) -> u64 {
        self.record_bytes.saturating_sub(self.live_bytes)
    }

    pub(crate) fn amplification(&self) -> f64 {
        if self.live_bytes == 0 {
            return if self.occupied_bytes == 0 {
                1.0
            } else {
                f64::INFINITY
            };
        }
        self.occupied_bytes as f64 / self.live_bytes as f64
    }
}

/// What clients are short of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pressure {
    /// Nothing: relocation follows the policy's bound.
    None,
    /// Writes were refused room or wait for it.
    Writes,
    /// A control record waits for room.
    Controls,
}

/// How a step walks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Pass garbage only; stop at the first needed record.
    Advance,
    /// Relocate needed records too.
    Relocate,
}

/// Whether clients' room is short: under the policy's share of the ring.
pub(crate) fn tight(policy: &ReclaimPolicy, survey: &Survey) -> bool {
    (survey.client_room_bytes as f64) < policy.free_min_fraction * survey.capacity_bytes as f64
}

/// Whether a step relocates. Without pressure, only for the policy's bound and once a
/// segment's worth is garbage (segments are freed whole: less wins nothing a later pass
/// would not). Under pressure (clients refused room, or their room under the policy's
/// share), whenever a real share of the ring is dead records, however little of a segment:
/// the head's segment frees once its live records are copied forward, and that wins what is
/// dead in it whatever the rest of the ring holds. (Requiring a segment of garbage there too
/// wedged a small ring for good: with less than a segment of garbage left and the head's
/// segment still pinned, nothing moved the head, and clients were refused forever.)
///
/// A control record waiting for room (the control reserve spent: by fences or seals written
/// one to a batch, each with its padding and the tail marker an idle drive writes after it)
/// is what makes room, so then any dead record is worth a relocation. (Not padding: on a ring
/// of records as large as a batch, whose padding no copy packs tighter, relocating for it
/// rewrote the ring hundreds of times over and won nothing.)
pub(crate) fn mode(
    policy: &ReclaimPolicy,
    survey: &Survey,
    segment_bytes: u64,
    pressure: Pressure,
) -> Mode {
    let occupied = survey.occupied_bytes as f64;
    let live = survey.live_bytes as f64;
    let garbage_bytes = survey.occupied_bytes.saturating_sub(survey.live_bytes);
    let dead_min = (PRESSURE_DEAD_MIN * occupied).max(survey.batch_bytes as f64);
    let pressed = pressure != Pressure::None || tight(policy, survey);
    if pressed && survey.dead_bytes() as f64 >= dead_min {
        return Mode::Relocate;
    }
    if pressure == Pressure::Controls && survey.dead_bytes() >= survey.block_bytes {
        return Mode::Relocate;
    }
    let full_enough = occupied >= policy.occupancy_min_fraction * survey.capacity_bytes as f64;
    let amplified = occupied > policy.space_amplification_max * live;
    if garbage_bytes >= segment_bytes && amplified && full_enough {
        Mode::Relocate
    } else {
        Mode::Advance
    }
}

/// The fewest LSNs the head moves by the counts alone, unless clients wait for room: every
/// ring trim is a control block written and flushed.
pub(crate) const ADVANCE_LSNS_MIN: u64 = 256;
