//! What the storage says of itself: whether a path is a block device, the block size rule (the
//! largest of 4096, the logical and physical block sizes, the DIO alignment), the device's
//! write cache and FUA support (from sysfs), and the check that a ring's blocks still fit the
//! storage it is opened on.

use std::fs::{self, File};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use sealog_wal::format::BLOCK_SIZE_MIN_BYTES;
use sealog_wal::Geometry;

use crate::error::OpenError;
use crate::uring::sys;

pub(super) fn is_block_device(path: &Path) -> io::Result<bool> {
    Ok(fs::metadata(path)?.file_type().is_block_device())
}

/// The block size of a block device by the rule: the largest of 4096, logical and physical.
pub(super) fn device_block(file: &File) -> io::Result<(u32, u64)> {
    let geometry = sys::block_device_geometry(file)?;
    let block = BLOCK_SIZE_MIN_BYTES
        .max(geometry.logical_block_bytes)
        .max(geometry.physical_block_bytes);
    Ok((block, geometry.size_bytes))
}

/// The block size for files in a directory: the largest of 4096, statx's DIO alignment and the
/// physical block size of the device under the file system (from sysfs).
pub(super) fn directory_block(probe: &File) -> io::Result<u32> {
    let dio = sys::dio_alignment(probe)?.map_or(0, |(memory, offset)| memory.max(offset));
    let physical = underlying_physical_block(probe).unwrap_or(0);
    Ok(BLOCK_SIZE_MIN_BYTES.max(dio).max(physical))
}

/// sysfs directory of the block device holding `file` (its parent disk for a partition).
pub(super) fn sysfs_queue_of(file: &File) -> Option<PathBuf> {
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

pub(super) fn sysfs_queue_of_device(file: &File) -> Option<PathBuf> {
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

pub(super) fn cache_info(queue: Option<PathBuf>) -> Option<crate::io::CacheInfo> {
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

pub(super) fn check_block(
    path: &Path,
    geometry: Geometry,
    storage_block: u32,
) -> Result<(), OpenError> {
    if storage_block > geometry.block_size_bytes {
        return Err(OpenError::BlockSizeMismatch {
            path: path.to_path_buf(),
            ring_block_bytes: geometry.block_size_bytes,
            storage_block_bytes: storage_block,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::storage::plan::{plan_geometry, FormatOptions};

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
}
