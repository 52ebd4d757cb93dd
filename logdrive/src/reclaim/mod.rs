//! Reclaiming the ring's space (issue 13, item 5). The engine's ring frees space only at its
//! head, a segment at a time, once a trim passes every entry in it; LogDrives write into one
//! ring in any interleaving, so one long-lived LogDrive's records pin the head and with it
//! every deleted, trimmed or sealed-off record behind them. The reclaimer walks the ring
//! from its head, as BookKeeper's compactor walks an entry log and raft-engine rewrites its
//! oldest files: every record is judged against the LogDrives' state (as known durable), and
//!
//! - a record nothing needs any more (a deleted LogDrive's, a trimmed or sealed-off address,
//!   a rewrite of the same bytes, a superseded fence) is passed over;
//! - a record a live LogDrive needs (an address's value, its creation, the record holding its
//!   seal, fence or trim point, a damage its quarantined open found) is *relocated* when the
//!   policy asks for it: copied forward as a new entry flagged as a copy ([`crate::record`]),
//!   its LogDrive's state moved to the copy once durable; otherwise the walk stops there;
//! - then the ring is trimmed past everything walked, and its segments are freed.
//!
//! The highest generation issued is carried forward with a generation record before a trim
//! could take the last record carrying it, so that no (id, generation) is ever issued twice.
//!
//! When it runs: advancing the head past records nothing needs costs reads only and happens
//! whenever there are some. Relocation copies, and runs while the ring's occupied bytes are
//! over [`ReclaimPolicy::space_amplification_max`] times the live bytes and the ring is at
//! least [`ReclaimPolicy::occupancy_min_fraction`] full, or while clients are refused room
//! and there is garbage to win; paced to [`ReclaimPolicy::bandwidth_share`] of the time
//! unless clients are refused. Its copies may use the reserve the store keeps from clients
//! (`space`), so a full ring can always be reclaimed.
//!
//! Why this is safe across crashes: a copy is made under its LogDrive's mutex, so it takes
//! an LSN after every record that LogDrive had queued, and replay applies it after them (the
//! creations one walk meets are copied together as one group, under the registry's mutex,
//! which a deletion holds to queue its record: a creation's copy never lands after its
//! LogDrive's deletion); the head moves only once every copy is durable; a record is garbage
//! only by what is known durable (a deletion still in flight holds the walk, a durable record
//! whose completion is not yet taken in is needed), so no trim can take a record a crash could
//! make needed again.
//!
//! - `policy`: [`ReclaimPolicy`] and the decision each look makes;
//! - `figures`: [`ReclaimStats`] and [`metrics`];
//! - `reclaimer`: the shared state its thread and the store signal through;
//! - `survey`: a look at the ring, and the figures a caller asks for;
//! - `run`: the store's thread and a reclaiming pass;
//! - `walk`: one step, a walk from the head; `judge`: each record it meets; `copy`: the
//!   copies it makes.

mod copy;
pub(crate) mod figures;
mod judge;
pub(crate) mod policy;
pub(crate) mod reclaimer;
pub(crate) mod run;
pub(crate) mod survey;
mod walk;

pub use figures::{metrics, ReclaimStats};
pub use policy::ReclaimPolicy;
