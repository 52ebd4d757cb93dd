//! Formatting a ring ([`format`]). On a block device: refused while mounted, held or
//! partitioned, or carrying a signature the caller did not name; then the signature area and
//! every segment header zeroed. In a directory: refused when not empty (unless forced); then
//! each segment file made whole under a temporary name and renamed, the control file last.
//! Either way under the ring's lock, with the ring's default durability named by the caller or
//! measured on the finished segments before the control block that records it is written.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::time::Instant;

use sealog_wal::format::{ControlBlock, RingPurpose, SyncChoice};
use sealog_wal::{Geometry, RingId};

use super::device::sysfs_queue_of_device;
use super::device::{cache_info, device_block, directory_block, is_block_device};
use super::files::{directory_files, open_direct, open_directory, segment_file_name};
use super::files::{Access, RingFiles, RingKind, CONTROL_FILE};
use super::locks::{lock_for_format, retry_busy, DeviceOpen, LOCK_WAIT};
use super::plan::{new_ring_id, plan_geometry, FormatOptions};
use crate::error::FormatError;

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
    backend.set_spin_us(crate::drive::options::SPIN_BEFORE_BLOCK_US_DEFAULT);
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use sealog_wal::format::SyncMethod;

    use super::*;

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
}
