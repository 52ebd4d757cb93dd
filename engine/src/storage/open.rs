//! Opening a ring ([`open`]): with the lock its access needs (waiting a bounded time for
//! another holder), its geometry read from the control block with plain O_DIRECT reads (the
//! backend that needs it does not exist yet), its block size checked against the storage, and
//! every segment file of a directory ring opened and checked; or, for [`crate::stat`], without
//! any lock ([`open_unlocked`]).

use std::fs::{self, File};
use std::io;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::time::Instant;

use sealog_wal::Geometry;

use super::device::cache_info;
use super::device::{check_block, device_block, directory_block, sysfs_queue_of_device};
use super::files::{directory_files, open_direct, open_directory, segment_file_name};
use super::files::{Access, RingFiles, RingKind, CONTROL_FILE};
use super::locks::{lock, open_device_waiting, DeviceOpen, LOCK_WAIT};
use crate::error::OpenError;

/// One aligned buffer large enough for both control blocks of any ring: what a plain
/// O_DIRECT read of the control block needs before the backend (and its pool) exists.
fn control_pool(path: &Path) -> Result<crate::pool::BufferPool, OpenError> {
    crate::pool::BufferPool::new(1, 2 * sealog_wal::format::BLOCK_SIZE_MAX_BYTES as usize).map_err(
        |source| OpenError::Io {
            path: path.to_path_buf(),
            action: "map a buffer",
            source,
        },
    )
}

/// Reads the control block through a plain O_DIRECT read, to learn the geometry before the
/// backend (which needs it) exists.
fn read_geometry(file: &File, path: &Path) -> Result<Geometry, OpenError> {
    let mut pool = control_pool(path)?;
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
        let mut pool = control_pool(path)?;
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
