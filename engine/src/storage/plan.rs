//! What format is asked for ([`FormatOptions`], with its progress hook and the modes it gives a
//! ring's directory and files), the geometry it lays out from that ([`plan_geometry`]) with
//! the defaults it falls back on, and a new ring's identity ([`new_ring_id`]).

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;
use std::sync::Arc;

use sealog_wal::format::{RingPurpose, SyncMethod};
use sealog_wal::{Geometry, RingId};

use crate::error::FormatError;
use crate::signature::Signature;

/// The mode format gives a ring's directory: its owner's only, as etcd's WAL directory and
/// PostgreSQL's data directory are (a ring holds whatever its log servers were handed).
pub const RING_DIRECTORY_MODE: u32 = 0o700;

/// The mode format gives a ring's files (the control file and every segment file).
pub const RING_FILE_MODE: u32 = 0o600;

/// The permission bits of `mode` that let others than the owner in (group and other).
pub fn open_to_others(mode: u32) -> bool {
    mode & 0o077 != 0
}

/// What `format` is asked for. Build it with [`FormatOptions::new`] and the builder methods,
/// or as a struct with `..FormatOptions::default()`, so that a new option changes no caller.
///
/// ```
/// use sealog::{FormatOptions, SyncMethod};
/// use sealog::signature::Signature;
///
/// let options = FormatOptions::new(64 << 20)
///     .segment_size_bytes(8 << 20)
///     .sync_method(SyncMethod::Fdatasync)
///     .overwrite(Signature::Sealog);
/// assert_eq!(options.directory_mode, 0o700);
/// assert_eq!(options.overwrite, [Signature::Sealog]);
/// ```
#[derive(Clone, Debug)]
pub struct FormatOptions {
    /// Total bytes of the ring (control area and segments); the default, 0, is refused as too
    /// small.
    pub size_bytes: u64,
    /// Segment size; default 64 MiB or size/4, whichever is smaller, rounded down to the block.
    pub segment_size_bytes: Option<u64>,
    /// Format a directory that is not empty.
    pub force: bool,
    /// The largest batch; default 1 MiB (or a segment's data area if smaller).
    pub batch_size_max_bytes: Option<u32>,
    /// Batches in flight; default 4.
    pub window_batches_max: Option<u32>,
    /// The ring's default durability, recorded in its control block (a drive's options may
    /// still override it). `None`: measure both methods on the device and choose (see
    /// [`crate::sync_probe`], about 0.1 s); a method: record it and measure nothing.
    pub sync_method: Option<SyncMethod>,
    /// The mode of a ring's directory; default [`RING_DIRECTORY_MODE`] (owner-only).
    pub directory_mode: u32,
    /// The mode of a ring's files; default [`RING_FILE_MODE`] (owner-only).
    pub file_mode: u32,
    /// The signatures a block device may carry and be formatted anyway (each one found must
    /// be named; see [`crate::signature`]). A mount, a holder or partitions are never
    /// overridden.
    pub overwrite: Vec<Signature>,
    /// Called as format writes the ring, with the bytes written so far and the bytes it will
    /// write in all (zero-filled segments on a directory, segment headers on a device).
    pub progress: Option<FormatProgress>,
    /// What the ring will hold, recorded in its control block; default [`RingPurpose::Log`],
    /// a plain log. A LogDrive store's ring says so, so that the operator CLI leaves its head
    /// to the store's reclaimer.
    pub purpose: RingPurpose,
}

impl Default for FormatOptions {
    fn default() -> FormatOptions {
        FormatOptions {
            size_bytes: 0,
            segment_size_bytes: None,
            force: false,
            batch_size_max_bytes: None,
            window_batches_max: None,
            sync_method: None,
            directory_mode: RING_DIRECTORY_MODE,
            file_mode: RING_FILE_MODE,
            overwrite: Vec::new(),
            progress: None,
            purpose: RingPurpose::Log,
        }
    }
}

impl FormatOptions {
    /// A ring of `size_bytes`, everything else by default.
    pub fn new(size_bytes: u64) -> FormatOptions {
        FormatOptions {
            size_bytes,
            ..FormatOptions::default()
        }
    }

    /// Segments of `bytes` instead of the default.
    pub fn segment_size_bytes(mut self, bytes: u64) -> FormatOptions {
        self.segment_size_bytes = Some(bytes);
        self
    }

    /// Whether a directory that is not empty is formatted anyway.
    pub fn force(mut self, force: bool) -> FormatOptions {
        self.force = force;
        self
    }

    /// Batches of at most `bytes` instead of the default.
    pub fn batch_size_max_bytes(mut self, bytes: u32) -> FormatOptions {
        self.batch_size_max_bytes = Some(bytes);
        self
    }

    /// At most `batches` in flight instead of the default.
    pub fn window_batches_max(mut self, batches: u32) -> FormatOptions {
        self.window_batches_max = Some(batches);
        self
    }

    /// Records `method` as the ring's durability, measuring nothing.
    pub fn sync_method(mut self, method: SyncMethod) -> FormatOptions {
        self.sync_method = Some(method);
        self
    }

    /// The ring directory's mode instead of 0700.
    pub fn directory_mode(mut self, mode: u32) -> FormatOptions {
        self.directory_mode = mode;
        self
    }

    /// The ring files' mode instead of 0600.
    pub fn file_mode(mut self, mode: u32) -> FormatOptions {
        self.file_mode = mode;
        self
    }

    /// Formats a block device that carries `signature` (add one call per signature).
    pub fn overwrite(mut self, signature: Signature) -> FormatOptions {
        if !self.overwrite.contains(&signature) {
            self.overwrite.push(signature);
        }
        self
    }

    /// Records `purpose` as what the ring holds instead of a plain log.
    pub fn purpose(mut self, purpose: RingPurpose) -> FormatOptions {
        self.purpose = purpose;
        self
    }

    /// Calls `progress(bytes_done, bytes_total)` as format writes the ring.
    pub fn progress(mut self, progress: impl Fn(u64, u64) + Send + Sync + 'static) -> Self {
        self.progress = Some(FormatProgress(Arc::new(progress)));
        self
    }

    pub(super) fn report_progress(&self, bytes_done: u64, bytes_total: u64) {
        if let Some(progress) = &self.progress {
            (progress.0)(bytes_done, bytes_total);
        }
    }
}

/// A format's progress hook ([`FormatOptions::progress`]): bytes written so far, bytes in all.
#[derive(Clone)]
pub struct FormatProgress(pub Arc<dyn Fn(u64, u64) + Send + Sync>);

impl std::fmt::Debug for FormatProgress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FormatProgress(..)")
    }
}

/// Default segment size cap.
pub const SEGMENT_SIZE_DEFAULT_MAX_BYTES: u64 = 64 << 20;

/// Default batch size cap.
pub const BATCH_SIZE_DEFAULT_MAX_BYTES: u32 = 1 << 20;

/// Default number of batches in flight.
pub const WINDOW_BATCHES_DEFAULT: u32 = 4;

/// Chooses the geometry for a ring of `size_bytes` on storage with `block` byte blocks.
pub fn plan_geometry(
    options: &FormatOptions,
    block_size_bytes: u32,
    path: &Path,
) -> Result<Geometry, FormatError> {
    let block = u64::from(block_size_bytes);
    let control = sealog_wal::format::CONTROL_COPIES * block;
    let too_small = || FormatError::TooSmall {
        path: path.to_path_buf(),
        size_bytes: options.size_bytes,
    };
    let segment_size = match options.segment_size_bytes {
        Some(size) => size,
        None => SEGMENT_SIZE_DEFAULT_MAX_BYTES.min(options.size_bytes / 4),
    };
    let segment_size = segment_size / block * block;
    if segment_size == 0 || options.size_bytes < control {
        return Err(too_small());
    }
    let segment_count = (options.size_bytes - control) / segment_size;
    if segment_count < 2 {
        return Err(too_small());
    }
    let data = segment_size.saturating_sub(block);
    let batch = u64::from(
        options
            .batch_size_max_bytes
            .unwrap_or(BATCH_SIZE_DEFAULT_MAX_BYTES),
    )
    .min(data)
        / block
        * block;
    // The window never holds more than the ring's data area (small rings get a smaller one).
    let requested = options.window_batches_max.unwrap_or(WINDOW_BATCHES_DEFAULT);
    let data_total = data.saturating_mul(segment_count);
    let window = u64::from(requested).min(data_total / batch.max(1)).max(1);
    let window = u32::try_from(window).map_err(|_| too_small())?;
    let geometry = Geometry {
        block_size_bytes,
        segment_size_bytes: segment_size,
        segment_count: u32::try_from(segment_count).map_err(|_| too_small())?,
        batch_size_max_bytes: u32::try_from(batch).map_err(|_| too_small())?,
        window_batches_max: window,
        window_bytes_max: u64::from(window) * batch,
    };
    geometry
        .validate()
        .map_err(|source| FormatError::Geometry {
            path: path.to_path_buf(),
            source,
        })?;
    Ok(geometry)
}

/// A fresh random ring id from the kernel's generator.
pub fn new_ring_id() -> io::Result<RingId> {
    let mut id = [0u8; 16];
    File::open("/dev/urandom")?.read_exact(&mut id)?;
    Ok(RingId(id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_geometry_follows_the_contract() {
        let options = FormatOptions {
            size_bytes: 1 << 30,
            ..FormatOptions::default()
        };
        let geometry = plan_geometry(&options, 4096, Path::new("ring")).expect("plans");
        assert_eq!(
            geometry.segment_size_bytes,
            64 << 20,
            "64 MiB or size/4, the smaller"
        );
        let small = FormatOptions {
            size_bytes: 16 << 20,
            ..options.clone()
        };
        let geometry = plan_geometry(&small, 4096, Path::new("ring")).expect("plans");
        assert_eq!(geometry.segment_size_bytes, 4 << 20);
        assert!(geometry.segment_count >= 2);
        let tiny = FormatOptions {
            size_bytes: 8 << 10,
            ..options
        };
        assert!(matches!(
            plan_geometry(&tiny, 4096, Path::new("ring")),
            Err(FormatError::TooSmall { .. })
        ));
    }

    #[test]
    fn default_options_are_refused_as_too_small_and_owner_only() {
        let options = FormatOptions::default();
        assert_eq!(options.size_bytes, 0);
        assert_eq!(
            (options.directory_mode, options.file_mode),
            (RING_DIRECTORY_MODE, RING_FILE_MODE)
        );
        assert!(matches!(
            plan_geometry(&options, 4096, Path::new("ring")),
            Err(FormatError::TooSmall { size_bytes: 0, .. })
        ));
    }
}
