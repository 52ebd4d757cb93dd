//! The drive loop's I/O seam: a small completion-based trait (submit a write, a flush or a read
//! with a tag; reap completions), with the buffer pool the I/O reads from and writes into. The
//! io_uring backend ([`crate::uring`]) is the real one; the fault-injection crate's simulated
//! drive is the other (correct or faulty, seeded), and every engine scenario runs on both. The
//! drive loop never sees a file descriptor, an SQE or an errno outside this module's types.

use std::io;
use std::sync::Arc;

use crate::pool::BufferPool;

/// Identifies one submitted operation in its completion.
pub type Tag = u64;

/// How appends are made durable.
///
/// A drive's setting, the second of three sync types that are three different things: it says
/// what one drive does with its batches for as long as it is open. It comes from the drive's
/// options ([`DriveOptions::durability`](crate::DriveOptions::durability)) or, without one,
/// from the ring's recorded choice, the [`SyncMethod`](crate::SyncMethod) in its control block,
/// which maps onto it one to one ([`crate::sync_probe::resolve`]). It is never recorded on
/// disk, and it has a mode no ring records: no sync at all, for benchmarks. The drive carries
/// it out one write at a time: each batch write's [`WriteSync`] flag is [`WriteSync::Dsync`]
/// under [`Durability::Dsync`] and [`WriteSync::None`] otherwise, with a flush linked behind
/// the write under [`Durability::Fdatasync`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Durability {
    /// A write, then IORING_OP_FSYNC with IORING_FSYNC_DATASYNC linked behind it. The default.
    #[default]
    Fdatasync,
    /// Every write with RWF_DSYNC (FUA on drives that have it).
    Dsync,
    /// No flush at all: acknowledged entries can be lost by a power cut. For benchmarks only.
    NoSyncBenchmarkOnly,
}

/// How a write is made durable by itself, if at all.
///
/// One I/O's flag, the third of three sync types that are three different things: it belongs
/// to a single submitted write, not to a drive or a ring. A drive's [`Durability`] sets it on
/// each batch write ([`WriteSync::Dsync`] only under [`Durability::Dsync`]); recovery, trims
/// and tail hints write with [`WriteSync::None`] and flush after; format's measurement, which
/// chooses the ring's [`SyncMethod`](crate::SyncMethod), times writes with each flag
/// ([`crate::sync_probe`]). Neither of the other two is ever derived from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteSync {
    /// A plain write; a later flush makes it durable.
    None,
    /// The write is durable when it completes (RWF_DSYNC; FUA where the drive has it).
    Dsync,
}

/// Where a flush stands relative to the write submitted just before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlushOrder {
    /// Linked behind the previous write (IOSQE_IO_LINK): it starts only once that write
    /// completed, so it covers it; if the write fails, the flush is cancelled.
    AfterPreviousWrite,
    /// Submitted on its own: it covers only writes that completed before it.
    Independent,
}

/// A finished operation: bytes transferred, or the errno it failed with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    /// The tag given at submission.
    pub tag: Tag,
    /// Bytes transferred (the whole request: backends finish short transfers themselves), or
    /// the positive errno of the failure.
    pub result: Result<u32, i32>,
}

/// Wakes a drive thread that is blocked in [`IoBackend::wait`], from any thread.
pub type Waker = Arc<dyn Fn() + Send + Sync>;

/// The operations the drive loop needs from a device. Offsets are ring offsets; lengths and
/// offsets are multiples of the ring's block size; a write or read never crosses a segment or
/// the control area (so a backend over segment files never spans two files).
///
/// Errors: a failed operation is a [`Completion`] with its errno. An `Err` from a `submit_*`
/// call or from [`IoBackend::wait`] means the backend itself is broken: operations handed to
/// it before may or may not complete, and the drive fail-stops and waits for none of them
/// again (their buffers stay lent for good).
pub trait IoBackend: Send {
    /// The aligned buffers I/O goes through.
    fn pool(&mut self) -> &mut BufferPool;

    /// Bytes of the ring the backend serves.
    fn size_bytes(&self) -> u64;

    /// Queues a write of `len` bytes from `buffer` (starting `buffer_offset` bytes in).
    fn submit_write(
        &mut self,
        tag: Tag,
        ring_offset: u64,
        buffer: usize,
        buffer_offset: usize,
        len: u32,
        sync: WriteSync,
    ) -> io::Result<()>;

    /// Queues a flush of the device's volatile cache for the file holding `ring_offset` (the
    /// whole device for a block device; one segment or control file for a directory ring).
    fn submit_flush(&mut self, tag: Tag, ring_offset: u64, order: FlushOrder) -> io::Result<()>;

    /// Which file a flush of `ring_offset` flushes: offsets with the same unit share one flush
    /// (a block device is one unit; a directory ring has one per file). Recovery flushes each
    /// unit once per step rather than once per segment. The default treats every offset as its
    /// own unit, which is never wrong, only slower.
    fn flush_unit(&self, ring_offset: u64) -> u64 {
        ring_offset
    }

    /// Queues a read of `len` bytes into the start of `buffer`.
    fn submit_read(
        &mut self,
        tag: Tag,
        ring_offset: u64,
        buffer: usize,
        len: u32,
    ) -> io::Result<()>;

    /// Hands queued operations to the device and appends finished ones to `out`, blocking
    /// until at least `min_complete` have finished or the waker is called.
    fn wait(&mut self, min_complete: usize, out: &mut Vec<Completion>) -> io::Result<()>;

    /// A handle that interrupts [`IoBackend::wait`] from another thread.
    fn waker(&self) -> Waker;

    /// How long the next blocking [`IoBackend::wait`] spins for completions before it blocks
    /// in the kernel, microseconds (the drive decides per wait; backends that never block
    /// ignore it).
    fn spin_next_wait_us(&mut self, _spin_us: u64) {}

    /// The device's write cache and FUA settings, for `inspect` (None where unknown).
    fn cache_info(&self) -> Option<CacheInfo> {
        None
    }
}

/// What the device says about its volatile cache.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheInfo {
    /// `write back` or `write through`, from sysfs.
    pub write_cache: String,
    /// Whether the device honours FUA writes.
    pub fua: bool,
}

/// Runs one operation to completion on a backend with nothing else in flight: the blocking
/// helper recovery and format use, so that even their I/O goes through the seam.
pub fn run_sync(backend: &mut dyn IoBackend, tag: Tag) -> io::Result<u32> {
    let mut completions = Vec::with_capacity(1);
    loop {
        backend.wait(1, &mut completions)?;
        if let Some(found) = completions.iter().find(|completion| completion.tag == tag) {
            return found.result.map_err(io::Error::from_raw_os_error);
        }
        completions.clear();
    }
}
