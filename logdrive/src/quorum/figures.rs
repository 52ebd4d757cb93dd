//! What a quorum counts about its repairs: [`ScrubStats`], a scrub's figures, and the names
//! of the counters reported through the `metrics` facade.

/// What one scrub of a child did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScrubStats {
    /// Slots of the child read.
    pub checked: u64,
    /// Slots the child had damaged or lacked, written back from a peer's value.
    pub repaired: u64,
    /// Damaged slots no other child holds the value of: they stay `Damaged`.
    pub unrepairable: u64,
}

/// The metric names quorums report through the `metrics` facade (counters, no labels).
pub mod metrics {
    /// Slots a scrub checked.
    pub const SCRUB_CHECKED_TOTAL: &str = "sealog_quorum_scrub_checked_total";
    /// Slots a scrub repaired from a peer.
    pub const SCRUB_REPAIRED_TOTAL: &str = "sealog_quorum_scrub_repaired_total";
    /// Damaged slots a scrub found no peer value for.
    pub const SCRUB_UNREPAIRABLE_TOTAL: &str = "sealog_quorum_scrub_unrepairable_total";
    /// Repairs a read or a window scan made: a value found on fewer than Qw children and
    /// written to the others.
    pub const READ_REPAIRS_TOTAL: &str = "sealog_quorum_read_repairs_total";
}
