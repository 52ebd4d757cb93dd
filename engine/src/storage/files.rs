//! A ring's open files ([`RingFiles`]): the kind of storage it is on, its files in ring order
//! (the device; or `control`, then every segment file), and the map from ring offsets to
//! (file, offset); with how its files are opened (O_DIRECT; a directory held for its lock) and
//! how much of a directory ring's segment files is still in unwritten extents.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use sealog_wal::Geometry;

use super::device::{cache_info, sysfs_queue_of};
use crate::uring::sys;

/// Name of the file holding the two control blocks in a directory ring.
pub const CONTROL_FILE: &str = "control";

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
    pub(super) _lock: Option<File>,
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

pub(super) fn segment_file_name(segment: u32) -> String {
    format!("segment-{segment:05}")
}

/// A directory ring's files (`control` first, then every segment), with the cache settings of
/// the device under them; `lock` is the directory, held for as long as the files live (`None`
/// when the caller holds it).
pub(super) fn directory_files(
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
pub(super) fn open_directory(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY)
        .open(path)
}

pub(super) fn open_direct(path: &Path, access: Access, exclusive: bool) -> io::Result<File> {
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
