//! What the reclaimer reports: [`ReclaimStats`] for callers, the metric names it reports
//! through the `metrics` facade, and the counters and metric handles behind both.

use std::sync::atomic::AtomicU64;

use sealog::Drive;

/// What the reclaimer has done since the store opened (the counters start from zero on
/// every open: they describe this process's work, not the ring's history), and the ring's
/// space as it sees it now.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReclaimStats {
    /// The ring's bytes for the log.
    pub capacity_bytes: u64,
    /// The ring's bytes from its head to its write position.
    pub occupied_bytes: u64,
    /// The ring's bytes the writer can still take.
    pub usable_bytes: u64,
    /// The ring bytes of the records the live LogDrives need (headers included).
    pub live_bytes: u64,
    /// The ring bytes of the records in the ring that no LogDrive needs (what relocation
    /// wins besides the padding it packs).
    pub dead_bytes: u64,
    /// The ring bytes of the store's records sent to the drive and not yet placed in a batch
    /// (or refused) by it.
    pub queued_bytes: u64,
    /// Records waiting for ring room now (writes and control records).
    pub waiting_records: u64,
    /// Occupied over live bytes (1 when nothing is live and nothing occupied).
    pub space_amplification: f64,
    /// The bytes kept for relocation, and for control records below client writes.
    pub reserve_bytes: u64,
    /// The bytes kept for control records.
    pub control_reserve_bytes: u64,
    /// The ring's first live LSN.
    pub head_lsn: u64,
    /// Steps taken (each walks part of the ring from its head), and of those, relocating.
    pub steps: u64,
    /// Steps that relocated.
    pub relocation_steps: u64,
    /// Records relocated, and their ring bytes (headers included).
    pub relocated_records: u64,
    /// The relocated records' ring bytes.
    pub relocated_bytes: u64,
    /// Records walked and passed over as garbage.
    pub garbage_records: u64,
    /// Trims of the ring the reclaimer made.
    pub ring_trims: u64,
    /// Of those, advances past records no LogDrive needs made without reading them (by the
    /// counts the LogDrives keep of the records they need).
    pub advances: u64,
    /// Generation records written to carry the highest generation forward.
    pub generation_records: u64,
    /// Client writes, control records and copies refused room.
    pub refused_writes: u64,
    /// Control records refused room.
    pub refused_controls: u64,
    /// Relocated copies refused room (the reserve exhausted: a policy too small).
    pub refused_copies: u64,
    /// Seconds spent in relocating steps.
    pub relocation_seconds: f64,
    /// Why reclaiming last stopped short, if it did (a damaged record it cannot attribute,
    /// an engine error).
    pub last_error: Option<String>,
}

/// The metric names the reclaimer reports through the `metrics` facade, labelled `drive`.
pub mod metrics {
    /// Records relocated (counter).
    pub const RELOCATED_RECORDS_TOTAL: &str = "sealog_logdrive_relocated_records_total";
    /// Ring bytes of the records relocated (counter, bytes).
    pub const RELOCATED_BYTES_TOTAL: &str = "sealog_logdrive_relocated_bytes_total";
    /// Records passed over as garbage (counter).
    pub const GARBAGE_RECORDS_TOTAL: &str = "sealog_logdrive_garbage_records_total";
    /// Trims of the ring the reclaimer made (counter).
    pub const RING_TRIMS_TOTAL: &str = "sealog_logdrive_ring_trims_total";
    /// Records refused room, by `class` (write, control, relocation) (counter).
    pub const REFUSED_TOTAL: &str = "sealog_logdrive_refused_total";
    /// The ring bytes of the records live LogDrives need (gauge, bytes).
    pub const LIVE_BYTES: &str = "sealog_logdrive_live_bytes";
    /// Occupied over live bytes (gauge).
    pub const SPACE_AMPLIFICATION: &str = "sealog_logdrive_space_amplification";
}

/// The reclaimer's metric handles.
pub(crate) struct Handles {
    pub(crate) relocated_records: ::metrics::Counter,
    pub(crate) relocated_bytes: ::metrics::Counter,
    pub(crate) garbage_records: ::metrics::Counter,
    pub(crate) ring_trims: ::metrics::Counter,
    pub(crate) refused: [::metrics::Counter; 3],
    pub(crate) live_bytes: ::metrics::Gauge,
    pub(crate) space_amplification: ::metrics::Gauge,
}

impl Handles {
    pub(crate) fn new(drive: &Drive) -> Handles {
        use self::metrics::*;
        let label = drive.path().display().to_string();
        let counter = |name: &'static str| ::metrics::counter!(name, "drive" => label.clone());
        let gauge = |name: &'static str| ::metrics::gauge!(name, "drive" => label.clone());
        let refused = |class: &'static str| {
            let drive = label.clone();
            ::metrics::counter!(REFUSED_TOTAL, "drive" => drive, "class" => class)
        };
        Handles {
            relocated_records: counter(RELOCATED_RECORDS_TOTAL),
            relocated_bytes: counter(RELOCATED_BYTES_TOTAL),
            garbage_records: counter(GARBAGE_RECORDS_TOTAL),
            ring_trims: counter(RING_TRIMS_TOTAL),
            refused: [refused("write"), refused("control"), refused("relocation")],
            live_bytes: gauge(LIVE_BYTES),
            space_amplification: gauge(SPACE_AMPLIFICATION),
        }
    }
}

/// The counters behind [`ReclaimStats`].
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) steps: AtomicU64,
    pub(crate) relocation_steps: AtomicU64,
    pub(crate) relocated_records: AtomicU64,
    pub(crate) relocated_bytes: AtomicU64,
    pub(crate) garbage_records: AtomicU64,
    pub(crate) ring_trims: AtomicU64,
    pub(crate) generation_records: AtomicU64,
    pub(crate) advances: AtomicU64,
    pub(crate) relocation_micros: AtomicU64,
}
