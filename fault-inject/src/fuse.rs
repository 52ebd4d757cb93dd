//! Loop-over-FUSE: a one-file FUSE file system (the `fuser` crate) whose file backs a loop
//! device, so the real engine runs on a real block device through the real kernel (io_uring,
//! O_DIRECT, the loop driver) while this layer sees every block write and every flush. It keeps
//! the written bytes apart from the flushed ones, can fail writes or flushes with EIO, and can
//! cut the power (drop what no flush covered). A userspace dm-log-writes and dm-flakey.

use std::ffi::OsStr;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, UNIX_EPOCH};

use fuser::{
    BackgroundSession, Config, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags,
    INodeNo, LockOwner, MountOption, OpenFlags, ReplyAttr, ReplyData, ReplyEmpty, ReplyEntry,
    ReplyOpen, ReplyWrite, Request, WriteFlags,
};

/// Name of the one file.
pub const DISK_FILE: &str = "disk";
const DISK_INODE: u64 = 2;
const TTL: Duration = Duration::from_secs(1);

/// One block-layer event that reached the disk, in order (a userspace dm-log-writes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiskEvent {
    /// A write of `len` bytes at `offset`, and whether it was failed.
    Write {
        /// Byte offset in the disk file.
        offset: u64,
        /// Bytes written.
        len: u64,
        /// Whether EIO was returned.
        failed: bool,
    },
    /// A flush (the loop driver's fsync), and whether it was failed.
    Flush {
        /// Whether EIO was returned.
        failed: bool,
    },
}

/// What the disk holds and what it has been told to do.
#[derive(Debug, Default)]
pub struct DiskState {
    /// What reads see.
    pub live: Vec<u8>,
    /// What survives a power cut: what a completed flush covered.
    pub durable: Vec<u8>,
    /// Writes since the last successful flush: (offset, length).
    pending: Vec<(u64, usize)>,
    /// Fail every write with EIO while set.
    pub fail_writes: bool,
    /// Fail every flush with EIO while set.
    pub fail_flushes: bool,
    /// Writes and flushes seen (failed ones included).
    pub writes: u64,
    /// Flushes seen.
    pub flushes: u64,
    /// Every write and flush, in the order they arrived.
    pub events: Vec<DiskEvent>,
}

struct DiskFs {
    state: Arc<Mutex<DiskState>>,
}

fn attr(ino: u64, size: u64) -> FileAttr {
    let (kind, perm, nlink) = if ino == DISK_INODE {
        (FileType::RegularFile, 0o600, 1)
    } else {
        (FileType::Directory, 0o755, 2)
    };
    FileAttr {
        ino: INodeNo(ino),
        size,
        blocks: size.div_ceil(512),
        atime: UNIX_EPOCH,
        mtime: UNIX_EPOCH,
        ctime: UNIX_EPOCH,
        crtime: UNIX_EPOCH,
        kind,
        perm,
        nlink,
        uid: 0,
        gid: 0,
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

impl DiskFs {
    fn size(&self) -> u64 {
        self.state.lock().expect("disk lock").live.len() as u64
    }
}

impl Filesystem for DiskFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        if u64::from(parent) == 1 && name == DISK_FILE {
            reply.entry(&TTL, &attr(DISK_INODE, self.size()), fuser::Generation(0));
        } else {
            reply.error(Errno::ENOENT);
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match u64::from(ino) {
            1 => reply.attr(&TTL, &attr(1, 0)),
            DISK_INODE => reply.attr(&TTL, &attr(DISK_INODE, self.size())),
            _ => reply.error(Errno::ENOENT),
        }
    }

    fn open(&self, _req: &Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        // Direct I/O: every write and read reaches this layer, no page cache in between.
        reply.opened(FileHandle(0), FopenFlags::FOPEN_DIRECT_IO);
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let state = self.state.lock().expect("disk lock");
        let start = (offset as usize).min(state.live.len());
        let end = (start + size as usize).min(state.live.len());
        reply.data(&state.live[start..end]);
    }

    fn write(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let mut state = self.state.lock().expect("disk lock");
        state.writes += 1;
        let start = offset as usize;
        let failed = state.fail_writes || start + data.len() > state.live.len();
        state.events.push(DiskEvent::Write {
            offset,
            len: data.len() as u64,
            failed,
        });
        if failed {
            reply.error(Errno::EIO);
            return;
        }
        state.live[start..start + data.len()].copy_from_slice(data);
        state.pending.push((offset, data.len()));
        reply.written(data.len() as u32);
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lo: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn fsync(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _data: bool,
        reply: ReplyEmpty,
    ) {
        let mut state = self.state.lock().expect("disk lock");
        state.flushes += 1;
        let failed = state.fail_flushes;
        state.events.push(DiskEvent::Flush { failed });
        if failed {
            // What the flush would have covered stays pending: a power cut may drop it.
            reply.error(Errno::EIO);
            return;
        }
        let pending = std::mem::take(&mut state.pending);
        for (offset, len) in pending {
            let start = offset as usize;
            let bytes = state.live[start..start + len].to_vec();
            state.durable[start..start + len].copy_from_slice(&bytes);
        }
        reply.ok();
    }
}

/// A mounted disk file system. Dropping it unmounts (detach the loop device first).
pub struct FuseDisk {
    session: Option<BackgroundSession>,
    state: Arc<Mutex<DiskState>>,
    mountpoint: PathBuf,
}

impl FuseDisk {
    /// Mounts a file system at `mountpoint` (an empty directory) holding one zeroed file of
    /// `size_bytes`.
    pub fn mount(mountpoint: &Path, size_bytes: u64) -> io::Result<FuseDisk> {
        let size = usize::try_from(size_bytes).map_err(io::Error::other)?;
        let state = Arc::new(Mutex::new(DiskState {
            live: vec![0; size],
            durable: vec![0; size],
            ..DiskState::default()
        }));
        let filesystem = DiskFs {
            state: Arc::clone(&state),
        };
        let mut config = Config::default();
        config.mount_options = vec![
            MountOption::FSName("sealog-fuse-disk".to_string()),
            MountOption::NoAtime,
        ];
        let session = fuser::spawn_mount(filesystem, mountpoint, &config)?;
        Ok(FuseDisk {
            session: Some(session),
            state,
            mountpoint: mountpoint.to_path_buf(),
        })
    }

    /// The disk file, to attach a loop device to.
    pub fn disk_path(&self) -> PathBuf {
        self.mountpoint.join(DISK_FILE)
    }

    /// Fails every write with EIO from now on (or stops failing them).
    pub fn fail_writes(&self, fail: bool) {
        self.state.lock().expect("disk lock").fail_writes = fail;
    }

    /// Fails every flush with EIO from now on (or stops failing them).
    pub fn fail_flushes(&self, fail: bool) {
        self.state.lock().expect("disk lock").fail_flushes = fail;
    }

    /// Writes and flushes seen so far.
    pub fn counts(&self) -> (u64, u64) {
        let state = self.state.lock().expect("disk lock");
        (state.writes, state.flushes)
    }

    /// The writes and flushes that reached the disk, in order.
    pub fn events(&self) -> Vec<DiskEvent> {
        self.state.lock().expect("disk lock").events.clone()
    }

    /// Cuts the power: every write no completed flush covered is lost; faults are cleared.
    pub fn power_cut(&self) {
        let mut state = self.state.lock().expect("disk lock");
        state.live = state.durable.clone();
        state.pending.clear();
        state.fail_writes = false;
        state.fail_flushes = false;
    }
}

impl Drop for FuseDisk {
    fn drop(&mut self) {
        // Dropping the session unmounts the file system; if something still held the file
        // (a loop device the kernel had not let go of yet), unmount again once it has.
        drop(self.session.take());
        for _ in 0..100 {
            let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
            let mountpoint = self.mountpoint.to_string_lossy();
            if !mounts
                .lines()
                .any(|line| line.split(' ').nth(1) == Some(&*mountpoint))
            {
                return;
            }
            let _ = std::process::Command::new("umount")
                .arg(&self.mountpoint)
                .status();
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}
