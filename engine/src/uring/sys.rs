//! The raw system calls the engine needs that no safe wrapper covers: the block-device ioctls
//! (BLKSSZGET, BLKPBSZGET, BLKGETSIZE64), statx's direct-I/O alignment and FIEMAP. They live
//! beside the io_uring backend because this is the one module of the workspace allowed to use
//! `unsafe`; each call is a thin, checked wrapper.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

/// `_IOR(0x12, 114, size_t)`: the device's size in bytes.
const BLKGETSIZE64: libc::c_ulong = 0x8008_1272;
/// `_IOWR('f', 11, struct fiemap)`.
const FS_IOC_FIEMAP: libc::c_ulong = 0xc020_660b;
const FIEMAP_EXTENT_LAST: u32 = 0x1;
const FIEMAP_EXTENT_UNWRITTEN: u32 = 0x800;
const FIEMAP_EXTENTS_PER_CALL: usize = 64;

/// A block device's logical and physical block sizes and its size in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockDeviceGeometry {
    /// BLKSSZGET.
    pub logical_block_bytes: u32,
    /// BLKPBSZGET.
    pub physical_block_bytes: u32,
    /// BLKGETSIZE64.
    pub size_bytes: u64,
}

/// Reads a block device's geometry with its ioctls.
pub fn block_device_geometry(file: &File) -> io::Result<BlockDeviceGeometry> {
    let fd = file.as_raw_fd();
    let mut logical: libc::c_int = 0;
    let mut physical: libc::c_uint = 0;
    let mut size: u64 = 0;
    // SAFETY: `fd` is an open descriptor owned by `file` for the whole call; BLKSSZGET writes
    // one c_int through the pointer, which points at a live, aligned local of that type.
    let rc = unsafe { libc::ioctl(fd, libc::BLKSSZGET, &mut logical as *mut libc::c_int) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above; BLKPBSZGET writes one c_uint into a live local of that type.
    let rc = unsafe { libc::ioctl(fd, libc::BLKPBSZGET, &mut physical as *mut libc::c_uint) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above; BLKGETSIZE64 writes one u64 into a live local of that type.
    let rc = unsafe { libc::ioctl(fd, BLKGETSIZE64, &mut size as *mut u64) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(BlockDeviceGeometry {
        logical_block_bytes: u32::try_from(logical).map_err(|_| io::Error::other("BLKSSZGET"))?,
        physical_block_bytes: physical,
        size_bytes: size,
    })
}

/// The direct-I/O alignment statx reports for an open file: (memory, offset) in bytes, or
/// `None` where the file system does not report it.
pub fn dio_alignment(file: &File) -> io::Result<Option<(u32, u32)>> {
    // SAFETY: an all-zero `statx` is a valid value of this plain C struct.
    let mut stat: libc::statx = unsafe { std::mem::zeroed() };
    let empty = c"";
    // SAFETY: the descriptor is open for the call, the path is a valid NUL-terminated string,
    // AT_EMPTY_PATH makes statx describe the descriptor itself, and `stat` is a live, writable
    // statx the kernel fills.
    let rc = unsafe {
        libc::statx(
            file.as_raw_fd(),
            empty.as_ptr(),
            libc::AT_EMPTY_PATH,
            libc::STATX_DIOALIGN,
            &mut stat,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    if stat.stx_mask & libc::STATX_DIOALIGN == 0 || stat.stx_dio_offset_align == 0 {
        return Ok(None);
    }
    Ok(Some((stat.stx_dio_mem_align, stat.stx_dio_offset_align)))
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct FiemapExtent {
    fe_logical: u64,
    fe_physical: u64,
    fe_length: u64,
    fe_reserved64: [u64; 2],
    fe_flags: u32,
    fe_reserved: [u32; 3],
}

#[repr(C)]
struct Fiemap {
    fm_start: u64,
    fm_length: u64,
    fm_flags: u32,
    fm_mapped_extents: u32,
    fm_extent_count: u32,
    fm_reserved: u32,
    fm_extents: [FiemapExtent; FIEMAP_EXTENTS_PER_CALL],
}

/// Bytes of `file` in extents still marked unwritten (allocated by fallocate, never written):
/// the first write into one makes fdatasync commit metadata.
pub fn unwritten_bytes(file: &File) -> io::Result<u64> {
    let mut unwritten = 0u64;
    let mut start = 0u64;
    loop {
        let mut map = Fiemap {
            fm_start: start,
            fm_length: u64::MAX - start,
            fm_flags: 0,
            fm_mapped_extents: 0,
            fm_extent_count: FIEMAP_EXTENTS_PER_CALL as u32,
            fm_reserved: 0,
            fm_extents: [FiemapExtent::default(); FIEMAP_EXTENTS_PER_CALL],
        };
        // SAFETY: the descriptor is open for the call; `map` is a live `struct fiemap` with
        // room for `fm_extent_count` extents, which is all the kernel writes.
        let rc = unsafe { libc::ioctl(file.as_raw_fd(), FS_IOC_FIEMAP, &mut map as *mut Fiemap) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        let mapped = (map.fm_mapped_extents as usize).min(FIEMAP_EXTENTS_PER_CALL);
        if mapped == 0 {
            return Ok(unwritten);
        }
        for extent in &map.fm_extents[..mapped] {
            if extent.fe_flags & FIEMAP_EXTENT_UNWRITTEN != 0 {
                unwritten += extent.fe_length;
            }
            if extent.fe_flags & FIEMAP_EXTENT_LAST != 0 {
                return Ok(unwritten);
            }
        }
        let last = map.fm_extents[mapped - 1];
        start = last.fe_logical + last.fe_length;
    }
}

/// Which advisory lock to take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockKind {
    /// Readers.
    Shared,
    /// A writer.
    Exclusive,
}

/// Tries to take a `flock` without blocking: `Ok(false)` when another holder has it. The lock
/// lives as long as the file's open description.
pub fn try_flock(file: &File, kind: LockKind) -> io::Result<bool> {
    let operation = match kind {
        LockKind::Shared => libc::LOCK_SH,
        LockKind::Exclusive => libc::LOCK_EX,
    } | libc::LOCK_NB;
    // SAFETY: flock takes a descriptor and an integer; the descriptor is open for the call.
    let rc = unsafe { libc::flock(file.as_raw_fd(), operation) };
    if rc == 0 {
        return Ok(true);
    }
    let error = io::Error::last_os_error();
    match error.raw_os_error() {
        Some(libc::EWOULDBLOCK) => Ok(false),
        _ => Err(error),
    }
}
