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

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sealog_wal::format::{ControlBlock, RingPurpose, SyncChoice, SyncMethod, BLOCK_SIZE_MIN_BYTES};
use sealog_wal::{Geometry, RingId};

use crate::error::{FormatError, OpenError};
use crate::signature::Signature;
use crate::uring::sys;

/// Name of the file holding the two control blocks in a directory ring.
pub const CONTROL_FILE: &str = "control";
/// How long an open waits for a lock held by another process (one just killed, say).
pub const LOCK_WAIT: Duration = Duration::from_secs(5);

/// The mode format gives a ring's directory: its owner's only, as etcd's WAL directory and
/// PostgreSQL's data directory are (a ring holds whatever its log servers were handed).
pub const RING_DIRECTORY_MODE: u32 = 0o700;

/// The mode format gives a ring's files (the control file and every segment file).
pub const RING_FILE_MODE: u32 = 0o600;

/// The permission bits of `mode` that let others than the owner in (group and other).
pub fn open_to_others(mode: u32) -> bool {
    mode & 0o077 != 0
}

/// The kind of storage a ring is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RingKind {
    /// A raw block device.
    BlockDevice,
    /// A directory of segment files.
    Directory,
}

/// Whether an open may write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// `dump`, `verify`, `inspect`: a shared lock.
    ReadOnly,
    /// A writer: an exclusive lock (and O_EXCL on a block device).
    ReadWrite,
}

/// The open files of a ring and how ring offsets map onto them.
pub struct RingFiles {
    /// The path the ring was opened at.
    pub path: PathBuf,
    /// Block device or directory.
    pub kind: RingKind,
    /// For a device: the device. For a directory: `control`, then every segment file.
    pub files: Vec<File>,
    /// The ring's geometry, from its control block.
    pub geometry: Geometry,
    /// The storage's own block size (the largest of 4096, logical, physical, DIO alignment).
    pub storage_block_bytes: u32,
    /// The device's write-cache mode and FUA support, from sysfs, where known.
    pub cache: Option<crate::io::CacheInfo>,
    /// For a directory: the directory, open only to hold the ring's lock for as long as these
    /// files live (a device's lock is on the device itself). Last, so it is released last.
    _lock: Option<File>,
}

impl RingFiles {
    /// The file holding `ring_offset` and the offset inside it. Every request lies inside one
    /// file: a write or read never crosses a segment or the control area.
    pub fn locate(&self, ring_offset: u64) -> (usize, u64) {
        RingFiles::locate_in(self.kind, &self.geometry, ring_offset)
    }

    /// [`RingFiles::locate`] for a ring of `kind` and `geometry` (for readers holding
    /// duplicates of its files).
    pub fn locate_in(kind: RingKind, geometry: &Geometry, ring_offset: u64) -> (usize, u64) {
        match kind {
            RingKind::BlockDevice => (0, ring_offset),
            RingKind::Directory => {
                let control = geometry.control_area_bytes();
                if ring_offset < control {
                    (0, ring_offset)
                } else {
                    let segment = (ring_offset - control) / geometry.segment_size_bytes;
                    let inside = (ring_offset - control) % geometry.segment_size_bytes;
                    (1 + segment as usize, inside)
                }
            }
        }
    }
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

    fn report_progress(&self, bytes_done: u64, bytes_total: u64) {
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

fn is_block_device(path: &Path) -> io::Result<bool> {
    Ok(fs::metadata(path)?.file_type().is_block_device())
}

/// The block size of a block device by the rule: the largest of 4096, logical and physical.
fn device_block(file: &File) -> io::Result<(u32, u64)> {
    let geometry = sys::block_device_geometry(file)?;
    let block = BLOCK_SIZE_MIN_BYTES
        .max(geometry.logical_block_bytes)
        .max(geometry.physical_block_bytes);
    Ok((block, geometry.size_bytes))
}

/// The block size for files in a directory: the largest of 4096, statx's DIO alignment and the
/// physical block size of the device under the file system (from sysfs).
fn directory_block(probe: &File) -> io::Result<u32> {
    let dio = sys::dio_alignment(probe)?.map_or(0, |(memory, offset)| memory.max(offset));
    let physical = underlying_physical_block(probe).unwrap_or(0);
    Ok(BLOCK_SIZE_MIN_BYTES.max(dio).max(physical))
}

/// sysfs directory of the block device holding `file` (its parent disk for a partition).
fn sysfs_queue_of(file: &File) -> Option<PathBuf> {
    let stat = nix::sys::stat::fstat(file.as_raw_fd()).ok()?;
    let (major, minor) = (
        nix::sys::stat::major(stat.st_dev),
        nix::sys::stat::minor(stat.st_dev),
    );
    let device = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
    let queue = device.join("queue");
    if queue.exists() {
        return Some(queue);
    }
    let parent = device.join("..").join("queue");
    parent.exists().then_some(parent)
}

fn sysfs_queue_of_device(file: &File) -> Option<PathBuf> {
    let stat = nix::sys::stat::fstat(file.as_raw_fd()).ok()?;
    let (major, minor) = (
        nix::sys::stat::major(stat.st_rdev),
        nix::sys::stat::minor(stat.st_rdev),
    );
    let queue = PathBuf::from(format!("/sys/dev/block/{major}:{minor}/queue"));
    queue.exists().then_some(queue)
}

fn underlying_physical_block(file: &File) -> Option<u32> {
    let queue = sysfs_queue_of(file)?;
    fs::read_to_string(queue.join("physical_block_size"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

fn cache_info(queue: Option<PathBuf>) -> Option<crate::io::CacheInfo> {
    let queue = queue?;
    let write_cache = fs::read_to_string(queue.join("write_cache"))
        .ok()?
        .trim()
        .to_string();
    let fua = fs::read_to_string(queue.join("fua"))
        .ok()
        .is_some_and(|text| text.trim() == "1");
    Some(crate::io::CacheInfo { write_cache, fua })
}

fn segment_file_name(segment: u32) -> String {
    format!("segment-{segment:05}")
}

fn io_error<'a>(path: &'a Path, action: &'static str) -> impl Fn(io::Error) -> FormatError + 'a {
    move |source| FormatError::Io {
        path: path.to_path_buf(),
        action,
        source,
    }
}

/// Formats a ring at `path`: a directory (created if missing) or a block device.
pub fn format(path: &Path, options: &FormatOptions) -> Result<ControlBlock, FormatError> {
    let _span = tracing::info_span!("format", path = %path.display()).entered();
    let started = std::time::Instant::now();
    let ring_id = new_ring_id().map_err(io_error(path, "read /dev/urandom"))?;
    let control = if path.exists() && is_block_device(path).map_err(io_error(path, "stat"))? {
        format_device(path, options, ring_id)
    } else {
        format_directory(path, options, ring_id)
    }?;
    let geometry = control.geometry;
    tracing::info!(
        segment_count = geometry.segment_count,
        segment_size_bytes = geometry.segment_size_bytes,
        block_size_bytes = geometry.block_size_bytes,
        duration_ms = started.elapsed().as_secs_f64() * 1e3,
        "formatted"
    );
    Ok(control)
}

fn format_device(
    path: &Path,
    options: &FormatOptions,
    ring_id: RingId,
) -> Result<ControlBlock, FormatError> {
    // A mount or a holder would only show as EBUSY from the O_EXCL open below (and a wait
    // for a holder that never lets go): say what holds the device instead, at once.
    let facts = crate::signature::facts_of(path).map_err(io_error(path, "stat"))?;
    crate::signature::refusal(path, facts, Vec::new(), &options.overwrite)?;
    let mut file = open_device_for_format(path)?;
    refuse_what_the_device_carries(&file, path, options)?;
    let (block, device_size) = device_block(&file).map_err(io_error(path, "read block sizes"))?;
    if options.size_bytes > device_size {
        return Err(FormatError::DeviceTooSmall {
            path: path.to_path_buf(),
            size_bytes: options.size_bytes,
            device_bytes: device_size,
        });
    }
    let geometry = plan_geometry(options, block, path)?;
    // Zero the bytes signatures are looked for in (the caller named every one found): no old
    // file system's or swap area's magic survives inside the ring for blkid or the next
    // format to find. A fresh ring's segment data may hold anything; zeros are fine.
    let probed = (crate::signature::PROBE_BYTES as u64).min(options.size_bytes) as usize;
    pwrite_all(&file, &vec![0u8; probed], 0).map_err(io_error(path, "clear old signatures"))?;
    // Zero every segment header block: nothing of an earlier ring on this device may look
    // like a started segment (another ring's records also fail its id-seeded checksums).
    let zeros = vec![0u8; block as usize];
    let total = u64::from(geometry.segment_count) * u64::from(block);
    for segment in 0..geometry.segment_count {
        let offset = geometry.segment_ring_offset(segment);
        pwrite_all(&file, &zeros, offset).map_err(io_error(path, "zero a segment header"))?;
        options.report_progress(u64::from(segment + 1) * u64::from(block), total);
    }
    let sync = match options.sync_method {
        Some(method) => SyncChoice::Named(method),
        None => {
            // A second, O_DIRECT descriptor for the measurement; the format's own one keeps
            // the O_EXCL claim and the lock (a second O_EXCL open would fail with EBUSY).
            let direct = open_direct(path, Access::ReadWrite, false).map_err(io_error(
                path,
                "open the device to measure the sync methods (naming one skips this)",
            ))?;
            let files = RingFiles {
                path: path.to_path_buf(),
                kind: RingKind::BlockDevice,
                cache: cache_info(sysfs_queue_of_device(&direct)),
                files: vec![direct],
                geometry,
                storage_block_bytes: block,
                _lock: None,
            };
            measure_sync(files)?
        }
    };
    let control = write_control_copies(&mut file, path, ring_id, geometry, sync, options.purpose)?;
    Ok(control)
}

/// Opens the device at `path` for format: exclusively, and locked.
fn open_device_for_format(path: &Path) -> Result<File, FormatError> {
    // O_EXCL keeps out every other exclusive opener (a writer, a mount); the flock, the one
    // writers and readers take on the device, keeps out readers too. Both before anything is
    // read or written.
    let deadline = Instant::now() + LOCK_WAIT;
    let open = || {
        OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_EXCL)
            .open(path)
    };
    let file = retry_busy(open, deadline).map_err(|error| match error {
        DeviceOpen::Busy => FormatError::InUse {
            path: path.to_path_buf(),
            lock: "O_EXCL",
        },
        DeviceOpen::Io(source) => FormatError::Io {
            path: path.to_path_buf(),
            action: "open the device exclusively",
            source,
        },
    })?;
    lock_for_format(&file, path, deadline)?;
    Ok(file)
}

/// Refuses a device that carries a signature the caller did not name, reading its first
/// [`crate::signature::PROBE_BYTES`] with a plain read; with the device open exclusively and
/// locked, so that nothing changes it between this look and the format's writes.
fn refuse_what_the_device_carries(
    file: &File,
    path: &Path,
    options: &FormatOptions,
) -> Result<(), FormatError> {
    use std::os::unix::fs::FileExt;
    let mut bytes = vec![0u8; crate::signature::PROBE_BYTES];
    let mut filled = 0;
    while filled < bytes.len() {
        let read = file
            .read_at(&mut bytes[filled..], filled as u64)
            .map_err(io_error(path, "read the device's first bytes"))?;
        if read == 0 {
            break;
        }
        filled += read;
    }
    bytes.truncate(filled);
    // Facts again, now that the device is ours: a partition table reread meanwhile shows.
    let facts = crate::signature::facts_of(path).map_err(io_error(path, "stat"))?;
    let found = crate::signature::detect(&bytes);
    crate::signature::refusal(path, facts, found, &options.overwrite)
}

/// Measures both sync methods on a ring whose segments are in place (the control area is
/// never touched) and returns the choice with its figures.
fn measure_sync(files: RingFiles) -> Result<SyncChoice, FormatError> {
    use crate::sync_probe::{append_write_bytes, measure, ProbePlan, PROBE_PAYLOAD_BYTES};
    let path = files.path.clone();
    let geometry = files.geometry;
    let write_bytes = append_write_bytes(&geometry, PROBE_PAYLOAD_BYTES) as usize;
    let (mut backend, _) =
        crate::uring::UringBackend::new(files, 1, write_bytes).map_err(io_error(
            &path,
            "set up io_uring to measure the sync methods (naming one skips this)",
        ))?;
    // Wait for completions as a drive thread does by default, so the figures are the ones
    // the drive will see.
    backend.set_spin_us(crate::drive::SPIN_BEFORE_BLOCK_US_DEFAULT);
    let probe = measure(&mut backend, &geometry, &ProbePlan::FORMAT)
        .map_err(|source| FormatError::SyncProbe { path, source })?;
    Ok(probe.choice())
}

/// Writes both copies of a fresh ring's control block, recording `sync` and `purpose`, and
/// syncs them.
fn write_control_copies(
    file: &mut File,
    path: &Path,
    ring_id: RingId,
    geometry: Geometry,
    sync: SyncChoice,
    purpose: RingPurpose,
) -> Result<ControlBlock, FormatError> {
    let block = geometry.block_size_bytes as usize;
    let mut bytes = vec![0u8; 2 * block];
    let mut control = ControlBlock {
        sync,
        purpose,
        ..ControlBlock::new_ring(ring_id, geometry)
    };
    for sequence in 0..2u64 {
        control.sequence = sequence;
        let at = control.copy() as usize * block;
        control.encode(&mut bytes[at..at + block]);
    }
    pwrite_all(file, &bytes, 0).map_err(io_error(path, "write the control blocks"))?;
    file.sync_all()
        .map_err(io_error(path, "sync the control blocks"))?;
    Ok(control)
}

fn pwrite_all(file: &File, bytes: &[u8], offset: u64) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    file.write_all_at(bytes, offset)
}

fn format_directory(
    path: &Path,
    options: &FormatOptions,
    ring_id: RingId,
) -> Result<ControlBlock, FormatError> {
    // Nothing of what is there is looked at before the lock: a ring that a writer or a reader
    // holds is refused whole, `force` or not.
    fs::create_dir_all(path).map_err(io_error(path, "create the directory"))?;
    let directory = open_directory(path).map_err(io_error(path, "open the directory"))?;
    lock_for_format(&directory, path, Instant::now() + LOCK_WAIT)?;
    // The mode asked for (owner-only by default), whether format made the directory or was
    // given an empty one (after the lock: a ring someone holds is left as it is).
    fs::set_permissions(path, fs::Permissions::from_mode(options.directory_mode))
        .map_err(io_error(path, "set the directory's mode"))?;
    let mut entries = fs::read_dir(path).map_err(io_error(path, "list the directory"))?;
    if entries.next().is_some() && !options.force {
        return Err(FormatError::NotEmpty {
            path: path.to_path_buf(),
        });
    }
    let block = directory_block(&directory).map_err(io_error(path, "read the DIO alignment"))?;
    let geometry = plan_geometry(options, block, path)?;
    // Segments first, each complete before it gets its final name; the control file last, so
    // a half-made ring has no control file and is never taken for a ring.
    let _ = fs::remove_file(path.join(CONTROL_FILE));
    let total = u64::from(geometry.segment_count) * geometry.segment_size_bytes;
    for segment in 0..geometry.segment_count {
        let name = segment_file_name(segment);
        let before = u64::from(segment) * geometry.segment_size_bytes;
        create_zeroed(path, &name, geometry.segment_size_bytes, options, |done| {
            options.report_progress(before + done, total)
        })?;
    }
    let temporary = path.join(format!("{CONTROL_FILE}.tmp"));
    let mut control_file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .mode(options.file_mode)
        .open(&temporary)
        .map_err(io_error(path, "create the control file"))?;
    control_file
        .set_permissions(fs::Permissions::from_mode(options.file_mode))
        .map_err(io_error(path, "set the control file's mode"))?;
    let sync = match options.sync_method {
        Some(method) => SyncChoice::Named(method),
        None => measure_sync(segment_files_for_measurement(
            path,
            &control_file,
            geometry,
            block,
        )?)?,
    };
    let purpose = options.purpose;
    let control = write_control_copies(&mut control_file, path, ring_id, geometry, sync, purpose)?;
    fs::rename(&temporary, path.join(CONTROL_FILE)).map_err(io_error(path, "rename"))?;
    // The directory's descriptor holds the lock: it is released only after this sync.
    directory
        .sync_all()
        .map_err(io_error(path, "sync the directory"))?;
    Ok(control)
}

/// The files of a directory ring still being formatted, for the measurement: its segments
/// (complete, opened O_DIRECT) behind the control file not yet written, which the measurement
/// never touches. The format holds the directory's lock meanwhile.
fn segment_files_for_measurement(
    path: &Path,
    control_file: &File,
    geometry: Geometry,
    block: u32,
) -> Result<RingFiles, FormatError> {
    let mut files = vec![control_file
        .try_clone()
        .map_err(io_error(path, "duplicate the control file"))?];
    for segment in 0..geometry.segment_count {
        let segment_path = path.join(segment_file_name(segment));
        let file = open_direct(&segment_path, Access::ReadWrite, false).map_err(io_error(
            path,
            "open a segment file to measure the sync methods (naming one skips this)",
        ))?;
        files.push(file);
    }
    Ok(directory_files(path, files, geometry, block, None))
}

/// A directory ring's files (`control` first, then every segment), with the cache settings of
/// the device under them; `lock` is the directory, held for as long as the files live (`None`
/// when the caller holds it).
fn directory_files(
    path: &Path,
    files: Vec<File>,
    geometry: Geometry,
    block: u32,
    lock: Option<File>,
) -> RingFiles {
    let cache = cache_info(sysfs_queue_of(&files[0]));
    RingFiles {
        path: path.to_path_buf(),
        kind: RingKind::Directory,
        files,
        geometry,
        storage_block_bytes: block,
        cache,
        _lock: lock,
    }
}

/// Opens a directory (only a directory) to hold its lock and sync it.
fn open_directory(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY)
        .open(path)
}

/// Format's exclusive lock on `file` (the directory, or the device), waited for until
/// `deadline`: a ring another process holds is [`FormatError::InUse`].
fn lock_for_format(file: &File, path: &Path, deadline: Instant) -> Result<(), FormatError> {
    match flock_until(file, sys::LockKind::Exclusive, deadline) {
        Ok(true) => Ok(()),
        Ok(false) => Err(FormatError::InUse {
            path: path.to_path_buf(),
            lock: "exclusive",
        }),
        Err(source) => Err(FormatError::Io {
            path: path.to_path_buf(),
            action: "lock the ring",
            source,
        }),
    }
}

/// Creates `name` in `directory` with `size` bytes: temporary name, fallocate, zeros written
/// for real (so no extent stays unwritten), fsync, rename. `written` hears the bytes zeroed
/// so far.
fn create_zeroed(
    directory: &Path,
    name: &str,
    size: u64,
    options: &FormatOptions,
    written: impl Fn(u64),
) -> Result<(), FormatError> {
    let temporary = directory.join(format!("{name}.tmp"));
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(options.file_mode)
        .open(&temporary)
        .map_err(io_error(directory, "create a segment file"))?;
    // Exactly this mode, whatever was there under the temporary name before (`mode` applies
    // only to a file it creates).
    file.set_permissions(fs::Permissions::from_mode(options.file_mode))
        .map_err(io_error(directory, "set a segment file's mode"))?;
    let length = i64::try_from(size).map_err(|_| FormatError::TooSmall {
        path: directory.to_path_buf(),
        size_bytes: size,
    })?;
    nix::fcntl::fallocate(
        file.as_raw_fd(),
        nix::fcntl::FallocateFlags::empty(),
        0,
        length,
    )
    .map_err(|errno| io_error(directory, "allocate a segment file")(errno.into()))?;
    let zeros = vec![0u8; 1 << 20];
    let mut left = size;
    while left > 0 {
        let chunk = left.min(zeros.len() as u64) as usize;
        file.write_all(&zeros[..chunk])
            .map_err(io_error(directory, "zero a segment file"))?;
        left -= chunk as u64;
        written(size - left);
    }
    file.sync_all()
        .map_err(io_error(directory, "sync a segment file"))?;
    fs::rename(&temporary, directory.join(name)).map_err(io_error(directory, "rename"))?;
    Ok(())
}

/// Takes a `flock` of `kind` on `file`, retrying until `deadline`: `Ok(false)` when another
/// open description still holds a conflicting one then.
fn flock_until(file: &File, kind: sys::LockKind, deadline: Instant) -> io::Result<bool> {
    loop {
        if sys::try_flock(file, kind)? {
            return Ok(true);
        }
        if Instant::now() >= deadline {
            return Ok(false);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The lock an open of `access` needs (shared or exclusive), waited for until `deadline`.
fn lock(file: &File, path: &Path, access: Access, deadline: Instant) -> Result<(), OpenError> {
    let (kind, name) = match access {
        Access::ReadOnly => (sys::LockKind::Shared, "shared"),
        Access::ReadWrite => (sys::LockKind::Exclusive, "exclusive"),
    };
    match flock_until(file, kind, deadline) {
        Ok(true) => Ok(()),
        Ok(false) => Err(OpenError::Locked {
            path: path.to_path_buf(),
            lock: name,
        }),
        Err(source) => Err(OpenError::Io {
            path: path.to_path_buf(),
            action: "lock the ring",
            source,
        }),
    }
}

enum DeviceOpen {
    Busy,
    Io(io::Error),
}

/// Opens a block device, with O_EXCL for a writer. EBUSY (another holder, or the references of
/// a just-closed io_uring that the kernel releases asynchronously) is retried until `deadline`.
fn open_device_waiting(path: &Path, access: Access, deadline: Instant) -> Result<File, DeviceOpen> {
    retry_busy(
        || open_direct(path, access, access == Access::ReadWrite),
        deadline,
    )
}

/// Calls `open` until it succeeds, fails with anything but EBUSY, or `deadline` passes.
fn retry_busy(open: impl Fn() -> io::Result<File>, deadline: Instant) -> Result<File, DeviceOpen> {
    loop {
        match open() {
            Ok(file) => return Ok(file),
            Err(error) if error.raw_os_error() == Some(libc::EBUSY) => {
                if Instant::now() >= deadline {
                    return Err(DeviceOpen::Busy);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(error) => return Err(DeviceOpen::Io(error)),
        }
    }
}

fn open_direct(path: &Path, access: Access, exclusive: bool) -> io::Result<File> {
    let mut flags = libc::O_DIRECT;
    if exclusive {
        flags |= libc::O_EXCL;
    }
    OpenOptions::new()
        .read(true)
        .write(access == Access::ReadWrite)
        .custom_flags(flags)
        .open(path)
}

/// Reads the control block through a plain O_DIRECT read, to learn the geometry before the
/// backend (which needs it) exists.
fn read_geometry(file: &File, path: &Path) -> Result<Geometry, OpenError> {
    let mut pool =
        crate::pool::BufferPool::new(1, 2 * sealog_wal::format::BLOCK_SIZE_MAX_BYTES as usize)
            .map_err(|source| OpenError::Io {
                path: path.to_path_buf(),
                action: "map a buffer",
                source,
            })?;
    let size = file
        .metadata()
        .map(|meta| meta.len())
        .map_err(|source| OpenError::Io {
            path: path.to_path_buf(),
            action: "stat",
            source,
        })?;
    let buffer = pool.buffer_mut(0);
    // The control file holds only the control area; the ring's size is checked later, against
    // the segment files.
    let mut source = DirectFileSource {
        file,
        size: u64::MAX / 2,
        file_len: size,
        buffer,
    };
    let control = sealog_wal::read_control(&mut source).map_err(|source| OpenError::Ring {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(control.geometry)
}

/// A [`sealog_wal::RingSource`] over one file with O_DIRECT reads into an aligned buffer;
/// used only to read the control block before the engine's backend exists.
struct DirectFileSource<'a> {
    file: &'a File,
    size: u64,
    /// Reads at or past this offset return zeros (the control file is shorter than a ring).
    file_len: u64,
    buffer: &'a mut [u8],
}

impl sealog_wal::RingSource for DirectFileSource<'_> {
    fn size_bytes(&self) -> u64 {
        self.size
    }

    fn read_at(&mut self, ring_offset: u64, buf: &mut [u8]) -> io::Result<()> {
        use std::os::unix::fs::FileExt;
        let len = buf.len();
        if len > self.buffer.len() {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        if ring_offset >= self.file_len {
            buf.fill(0);
            return Ok(());
        }
        self.file
            .read_exact_at(&mut self.buffer[..len], ring_offset)?;
        buf.copy_from_slice(&self.buffer[..len]);
        Ok(())
    }
}

/// Opens the ring at `path` with the lock `access` needs, checks that its block size still
/// fits the storage, and returns its files (replay is the engine's next step).
pub fn open(path: &Path, access: Access) -> Result<RingFiles, OpenError> {
    let metadata = fs::metadata(path).map_err(open_io_error(path, "stat"))?;
    // One bounded wait for everything that another holder can make this open wait for.
    let deadline = Instant::now() + LOCK_WAIT;
    if metadata.file_type().is_block_device() {
        return open_device_ring(path, access, deadline);
    }
    if !metadata.is_dir() {
        return Err(OpenError::NotARing {
            path: path.to_path_buf(),
            why: "neither a directory nor a block device",
        });
    }
    open_directory_ring(path, access, deadline)
}

/// Opens the ring at `path` for reading without taking its lock (not even the shared one), so
/// that it works while a writer holds the ring: for [`crate::stat`], which reads only what is
/// safe to read under a writer (the control block copies, each checked by its CRC, and the
/// log, read-only with O_DIRECT so no stale page is seen). Nothing here can change the ring.
pub fn open_unlocked(path: &Path) -> Result<RingFiles, OpenError> {
    let io = |action| open_io_error(path, action);
    let metadata = fs::metadata(path).map_err(io("stat"))?;
    if metadata.file_type().is_block_device() {
        // No O_EXCL: that is a writer's claim, and a writer holds it.
        let file = open_direct(path, Access::ReadOnly, false).map_err(io("open"))?;
        let (block, device_size) = device_block(&file).map_err(io("read block sizes"))?;
        let geometry = DeviceSized {
            file: &file,
            size: device_size,
        }
        .geometry(path)?;
        check_block(path, geometry, block)?;
        let cache = cache_info(sysfs_queue_of_device(&file));
        return Ok(RingFiles {
            path: path.to_path_buf(),
            kind: RingKind::BlockDevice,
            files: vec![file],
            geometry,
            storage_block_bytes: block,
            cache,
            _lock: None,
        });
    }
    if !metadata.is_dir() {
        return Err(OpenError::NotARing {
            path: path.to_path_buf(),
            why: "neither a directory nor a block device",
        });
    }
    let control_path = path.join(CONTROL_FILE);
    if !control_path.exists() {
        return Err(OpenError::NotARing {
            path: path.to_path_buf(),
            why: "no control file",
        });
    }
    let control =
        open_direct(&control_path, Access::ReadOnly, false).map_err(io("open the control file"))?;
    let geometry = read_geometry(&control, path)?;
    let block = directory_block(&control).map_err(io("read the DIO alignment"))?;
    check_block(path, geometry, block)?;
    let mut files = vec![control];
    files.extend(open_segment_files(path, Access::ReadOnly, &geometry)?);
    Ok(directory_files(path, files, geometry, block, None))
}

/// The error of an open's I/O `action` on `path`.
fn open_io_error<'a>(path: &'a Path, action: &'static str) -> impl Fn(io::Error) -> OpenError + 'a {
    move |source| OpenError::Io {
        path: path.to_path_buf(),
        action,
        source,
    }
}

/// A ring on a block device: the device opened (with O_EXCL for a writer, waiting while
/// another holds it) and locked, its geometry read and its block size checked.
fn open_device_ring(
    path: &Path,
    access: Access,
    deadline: Instant,
) -> Result<RingFiles, OpenError> {
    let file = open_device_waiting(path, access, deadline).map_err(|error| match error {
        DeviceOpen::Busy => OpenError::Locked {
            path: path.to_path_buf(),
            lock: "O_EXCL",
        },
        DeviceOpen::Io(source) => OpenError::Io {
            path: path.to_path_buf(),
            action: "open",
            source,
        },
    })?;
    lock(&file, path, access, deadline)?;
    let (block, device_size) =
        device_block(&file).map_err(open_io_error(path, "read block sizes"))?;
    let mut source_size = DeviceSized {
        file: &file,
        size: device_size,
    };
    let geometry = source_size.geometry(path)?;
    check_block(path, geometry, block)?;
    let cache = cache_info(sysfs_queue_of_device(&file));
    Ok(RingFiles {
        path: path.to_path_buf(),
        kind: RingKind::BlockDevice,
        files: vec![file],
        geometry,
        storage_block_bytes: block,
        cache,
        _lock: None,
    })
}

/// A ring in a directory: the directory locked first (a ring being formatted has no control
/// file until format is done, and format holds the directory's lock until then), then its
/// control file read for the geometry, the block size checked, and every segment file opened.
fn open_directory_ring(
    path: &Path,
    access: Access,
    deadline: Instant,
) -> Result<RingFiles, OpenError> {
    let io = |action| open_io_error(path, action);
    let directory = open_directory(path).map_err(io("open the directory"))?;
    lock(&directory, path, access, deadline)?;
    let control_path = path.join(CONTROL_FILE);
    if !control_path.exists() {
        return Err(OpenError::NotARing {
            path: path.to_path_buf(),
            why: "no control file",
        });
    }
    let control = open_direct(&control_path, access, false).map_err(io("open the control file"))?;
    let geometry = read_geometry(&control, path)?;
    let block = directory_block(&control).map_err(io("read the DIO alignment"))?;
    check_block(path, geometry, block)?;
    let mut files = vec![control];
    files.extend(open_segment_files(path, access, &geometry)?);
    Ok(directory_files(
        path,
        files,
        geometry,
        block,
        Some(directory),
    ))
}

/// Every segment file of a directory ring, in order, each checked to be a segment long.
fn open_segment_files(
    path: &Path,
    access: Access,
    geometry: &Geometry,
) -> Result<Vec<File>, OpenError> {
    let io = |action| open_io_error(path, action);
    let mut files = Vec::with_capacity(geometry.segment_count as usize);
    for segment in 0..geometry.segment_count {
        let segment_path = path.join(segment_file_name(segment));
        let file = open_direct(&segment_path, access, false).map_err(io("open a segment file"))?;
        let length = file.metadata().map_err(io("stat a segment file"))?.len();
        if length != geometry.segment_size_bytes {
            return Err(OpenError::SegmentFile {
                path: segment_path,
                length_bytes: length,
                expected_bytes: geometry.segment_size_bytes,
            });
        }
        files.push(file);
    }
    Ok(files)
}

/// Reads the geometry of a device ring, whose size the ioctl gives (not its metadata).
struct DeviceSized<'a> {
    file: &'a File,
    size: u64,
}

impl DeviceSized<'_> {
    fn geometry(&mut self, path: &Path) -> Result<Geometry, OpenError> {
        let mut pool =
            crate::pool::BufferPool::new(1, 2 * sealog_wal::format::BLOCK_SIZE_MAX_BYTES as usize)
                .map_err(|source| OpenError::Io {
                    path: path.to_path_buf(),
                    action: "map a buffer",
                    source,
                })?;
        let mut source = DirectFileSource {
            file: self.file,
            size: self.size,
            file_len: self.size,
            buffer: pool.buffer_mut(0),
        };
        let control = sealog_wal::read_control(&mut source).map_err(|source| OpenError::Ring {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(control.geometry)
    }
}

fn check_block(path: &Path, geometry: Geometry, storage_block: u32) -> Result<(), OpenError> {
    if storage_block > geometry.block_size_bytes {
        return Err(OpenError::BlockSizeMismatch {
            path: path.to_path_buf(),
            ring_block_bytes: geometry.block_size_bytes,
            storage_block_bytes: storage_block,
        });
    }
    Ok(())
}

/// Bytes of the directory ring's segment files still in unwritten extents (0 for devices).
pub fn unwritten_bytes(files: &RingFiles) -> io::Result<u64> {
    if files.kind == RingKind::BlockDevice {
        return Ok(0);
    }
    let mut total = 0;
    for file in &files.files[1..] {
        total += sys::unwritten_bytes(file)?;
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ring_whose_blocks_are_smaller_than_the_storage_needs_is_refused() {
        let options = FormatOptions {
            size_bytes: 16 << 20,
            segment_size_bytes: Some(1 << 20),
            ..FormatOptions::default()
        };
        let geometry = plan_geometry(&options, 4096, Path::new("ring")).expect("plans");
        assert!(check_block(Path::new("ring"), geometry, 4096).is_ok());
        assert!(matches!(
            check_block(Path::new("ring"), geometry, 8192),
            Err(OpenError::BlockSizeMismatch {
                ring_block_bytes: 4096,
                storage_block_bytes: 8192,
                ..
            })
        ));
    }

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
    fn format_reports_monotone_progress_reaching_the_total_and_takes_the_modes_asked_for() {
        use std::sync::Mutex;
        let directory = tempfile::tempdir().expect("tempdir");
        let ring = directory.path().join("ring");
        let seen: Arc<Mutex<Vec<(u64, u64)>>> = Arc::default();
        let hook = Arc::clone(&seen);
        let options = FormatOptions::new(8 << 20)
            .segment_size_bytes(2 << 20)
            .sync_method(SyncMethod::Fdatasync)
            .directory_mode(0o750)
            .file_mode(0o640)
            .progress(move |done, total| hook.lock().expect("lock").push((done, total)));
        let control = format(&ring, &options).expect("formats");
        let seen = seen.lock().expect("lock").clone();
        let geometry = control.geometry;
        let total = u64::from(geometry.segment_count) * geometry.segment_size_bytes;
        assert!(seen.len() >= geometry.segment_count as usize, "{seen:?}");
        assert!(
            seen.iter().all(|&(_, all)| all == total),
            "one total throughout"
        );
        assert!(
            seen.windows(2).all(|pair| pair[0].0 <= pair[1].0),
            "{seen:?}"
        );
        assert_eq!(seen.last(), Some(&(total, total)), "ends at the total");
        let mode = |path: &Path| fs::metadata(path).expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode(&ring), 0o750);
        assert_eq!(mode(&ring.join(CONTROL_FILE)), 0o640);
        assert_eq!(mode(&ring.join(segment_file_name(0))), 0o640);
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
