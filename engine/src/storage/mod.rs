//! Where a ring lives: a raw block device (segments are fixed regions of it) or a directory of
//! pre-allocated segment files (`control` holding the two control blocks, then
//! `segment-00000`, ...). This module owns formatting (the identity and geometry; segment files
//! created under a temporary name, allocated, zero-filled by real writes, synced, renamed, the
//! directory synced), opening with the right flags and lock, the block size rule, and the map
//! from ring offsets to (file, offset). It does no I/O on the log itself. Format also records
//! the ring's default durability: named by the caller, or measured on the finished segments
//! (with [`crate::sync_probe`]) before the control block that records it is written.
//!
//! Locks (docs/recovery.md, I-17): a directory ring is locked on the directory itself, which format
//! never replaces (it replaces `control` and the segment files); a device ring on the device.
//! Writers, recovery and format take the exclusive `flock`, readers the shared one; on a device,
//! writers and format also open with O_EXCL. Format takes the lock before it looks at the ring
//! (the emptiness check, any removal) and holds it until the ring is complete. A lock held
//! elsewhere (by a process just killed, say) is waited for up to [`LOCK_WAIT`], then refused.
//!
//! - `files`: a ring's open files and the map from ring offsets onto them;
//! - `device`: what the storage says of itself (block device or not, the block size rule,
//!   the write cache) and the check that a ring's blocks fit it;
//! - `locks`: the locks and the bounded waits for them;
//! - `plan`: what format is asked for, and the geometry it lays out;
//! - `format`: formatting a block device or a directory;
//! - `open`: opening a ring, locked or not.
//!
//! This module is only a hub: its children import from each other, never from here.

mod device;
pub(crate) mod files;
mod format;
mod locks;
mod open;
mod plan;

pub use self::files::{unwritten_bytes, Access, RingFiles, RingKind, CONTROL_FILE};
pub use self::format::format;
pub use self::locks::LOCK_WAIT;
pub use self::open::{open, open_unlocked};
pub use self::plan::{
    new_ring_id, open_to_others, plan_geometry, FormatOptions, FormatProgress,
    BATCH_SIZE_DEFAULT_MAX_BYTES, RING_DIRECTORY_MODE, RING_FILE_MODE,
    SEGMENT_SIZE_DEFAULT_MAX_BYTES, WINDOW_BATCHES_DEFAULT,
};
