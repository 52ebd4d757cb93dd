//! The io_uring backend of [`IoBackend`]: one ring per drive thread, the ring's files
//! registered, as much of the buffer pool registered (WRITE_FIXED/READ_FIXED) as
//! RLIMIT_MEMLOCK allows ([`memlock`]: the lowest indices first, the rest plain READ/WRITE),
//! a flush linked behind its write with IOSQE_IO_LINK, and an eventfd polled by the ring so a
//! client can wake a drive thread blocked in io_uring_enter. This module (with [`sys`]) is the
//! only place in the workspace with `unsafe`: every SQE points at memory the backend owns until
//! its CQE is reaped, which is what makes pushing it sound. [`lend`] is the same contract one
//! step earlier: a client's borrowed payload, lent to the drive thread until it is copied into
//! a registered buffer.
//!
//! Short and interrupted transfers never reach the drive loop: a short write or read is
//! resubmitted for its remainder (and a flush that was linked behind it, which the kernel
//! cancels when the link breaks, is linked again behind the remainder); EINTR and EAGAIN are
//! resubmitted; a write that transfers 0 bytes fails with EIO.

pub mod lend;
pub mod memlock;
pub mod sys;

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;

use io_uring::{opcode, squeue, types, IoUring};
use nix::sys::eventfd::{EfdFlags, EventFd};
use nix::unistd::{sysconf, SysconfVar};

use crate::io::{CacheInfo, Completion, FlushOrder, IoBackend, Tag, Waker, WriteSync};
use crate::pool::{BufferPool, BUFFER_ALIGN_BYTES};
use crate::storage::files::RingFiles;
use memlock::{charged_bytes, BufferRegistration, MemlockBudget};

/// Submission queue entries per ring.
const RING_ENTRIES: u32 = 256;
/// `user_data` of the eventfd poll.
const WAKE_USER_DATA: u64 = u64::MAX;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OpKind {
    Write,
    Flush,
    Read,
}

/// One operation in flight: everything needed to resubmit its remainder.
#[derive(Clone, Copy, Debug)]
struct Op {
    tag: Tag,
    kind: OpKind,
    file: usize,
    file_offset: u64,
    buffer: usize,
    buffer_offset: usize,
    len: u32,
    transferred: u32,
    sync: WriteSync,
    /// Bumped on every resubmission, so a stale CQE (a flush cancelled by a broken link) is
    /// told apart from the current one.
    generation: u32,
    /// The flush linked behind this write, if any.
    linked_flush: Option<usize>,
}

/// The io_uring backend.
pub struct UringBackend {
    ring: IoUring,
    files: RingFiles,
    raw_fds: Vec<RawFd>,
    files_registered: bool,
    pool: BufferPool,
    /// What of the pool is registered: buffers below `registration.buffers_registered` use
    /// READ_FIXED and WRITE_FIXED, the others plain READ and WRITE.
    registration: BufferRegistration,
    ops: Vec<Option<Op>>,
    free_slots: Vec<usize>,
    /// A write pushed last, not yet handed to the kernel, so a following flush can link to it.
    unlinked_write: Option<(usize, squeue::Entry)>,
    wake: Arc<EventFd>,
    wake_armed: bool,
    size_bytes: u64,
    /// CQEs copied out of the ring before they are handled (reused, so reaping never
    /// allocates once warm).
    reaped: Vec<(u64, i32)>,
    /// Microseconds to spin for completions before blocking (0: block at once).
    spin_us: u64,
}

/// What the backend registered of its pool and why not all of it, when it did not register
/// all of it (for the caller to report once).
pub type RegistrationNote = Option<String>;

/// Registers the longest prefix of `pool` that the process's locked-memory budget allows
/// (see [`memlock`]).
fn register_pool(ring: &IoUring, pool: &mut BufferPool, at_most: usize) -> BufferRegistration {
    let budget = MemlockBudget::of_this_process();
    if budget.available_bytes().is_some() {
        // A huge page backing part of a buffer is charged whole, which would make the charge
        // of a prefix larger than its pages; small pages keep it what `charged_bytes` says.
        // Best effort: where the advice fails, the kernel's refusal still bounds the prefix.
        let _ = pool.advise_small_pages();
    }
    let page_bytes = match sysconf(SysconfVar::PAGE_SIZE) {
        Ok(Some(bytes)) if bytes > 0 => bytes as usize,
        _ => BUFFER_ALIGN_BYTES,
    };
    let base = pool.as_mut_ptr();
    let iovecs: Vec<libc::iovec> = (0..pool.count().min(at_most))
        .map(|index| libc::iovec {
            // SAFETY: `index` is below the pool's count, so the offset stays inside the one
            // mapping `base` points at.
            iov_base: unsafe { base.add(index * pool.buffer_bytes()) }.cast(),
            iov_len: pool.buffer_bytes(),
        })
        .collect();
    let charged: Vec<u64> = iovecs
        .iter()
        .map(|iovec| charged_bytes(iovec.iov_base as usize, iovec.iov_len, page_bytes))
        .collect();
    BufferRegistration::register(&charged, pool.buffer_bytes(), budget, |count| {
        // SAFETY: every iovec covers memory of the pool's mapping, which the backend owns and
        // keeps mapped until after the ring is dropped (fields drop in declaration order:
        // `ring` before `pool`), so the kernel never sees a dangling registered buffer.
        unsafe { ring.submitter().register_buffers(&iovecs[..count]) }
    })
}

impl UringBackend {
    /// Builds the ring for `files` and a pool of `buffers` buffers of `buffer_bytes`, on the
    /// calling thread (which must be the drive thread: the ring is single-issuer).
    pub fn new(
        files: RingFiles,
        buffers: usize,
        buffer_bytes: usize,
    ) -> io::Result<(UringBackend, RegistrationNote)> {
        Self::with_sqpoll(files, buffers, buffer_bytes, None)
    }

    /// [`UringBackend::new`], with a kernel thread polling the submission queue
    /// (IORING_SETUP_SQPOLL, asleep after `sqpoll_idle_ms` without work) when asked for: then
    /// submitting needs no system call while that thread is awake, and completions are posted
    /// without the task entering the kernel (SQPOLL excludes COOP_TASKRUN).
    pub fn with_sqpoll(
        files: RingFiles,
        buffers: usize,
        buffer_bytes: usize,
        sqpoll_idle_ms: Option<u32>,
    ) -> io::Result<(UringBackend, RegistrationNote)> {
        Self::for_drive(files, (buffers, buffer_bytes, buffers), sqpoll_idle_ms)
    }

    /// [`UringBackend::with_sqpoll`] registering at most the first `register_at_most` of its
    /// `buffers` (the lanes that gain from fixed buffers; see `crate::drive::buffers`), within
    /// the memlock budget as ever.
    pub fn for_drive(
        files: RingFiles,
        (buffers, buffer_bytes, register_at_most): (usize, usize, usize),
        sqpoll_idle_ms: Option<u32>,
    ) -> io::Result<(UringBackend, RegistrationNote)> {
        let mut builder = IoUring::builder();
        builder.setup_single_issuer();
        match sqpoll_idle_ms {
            Some(idle_ms) => builder.setup_sqpoll(idle_ms),
            None => builder.setup_coop_taskrun(),
        };
        let ring = build_ring(&builder)?;
        let mut pool = BufferPool::new(buffers, buffer_bytes)?;
        let raw_fds: Vec<RawFd> = files.files.iter().map(AsRawFd::as_raw_fd).collect();
        let files_registered = ring.submitter().register_files(&raw_fds).is_ok();
        let registration = register_pool(&ring, &mut pool, register_at_most);
        let note = (!registration.is_complete()).then(|| registration.to_string());
        let wake = Arc::new(EventFd::from_flags(
            EfdFlags::EFD_NONBLOCK | EfdFlags::EFD_CLOEXEC,
        )?);
        let size_bytes = files.geometry.ring_size_bytes().unwrap_or(0);
        let backend = UringBackend {
            ring,
            files,
            raw_fds,
            files_registered,
            pool,
            registration,
            ops: Vec::new(),
            free_slots: Vec::new(),
            unlinked_write: None,
            wake,
            wake_armed: false,
            size_bytes,
            reaped: Vec::with_capacity(RING_ENTRIES as usize),
            spin_us: 0,
        };
        Ok((backend, note))
    }

    /// Before blocking, spin for up to `spin_us` on the completion queue. Each turn enters the
    /// kernel (submit), since with COOP_TASKRUN completions are posted when the task next
    /// enters it; a thread that stays busy sees a flush completion far sooner than one whose CPU
    /// went idle (a scheduler tick on this machine).
    fn spin_for_completions(&mut self) -> io::Result<()> {
        if self.spin_us == 0 {
            return Ok(());
        }
        let spin = std::time::Duration::from_micros(self.spin_us);
        // A spin too long to represent as a deadline is taken as no spin at all.
        let now = std::time::Instant::now();
        let deadline = now.checked_add(spin).unwrap_or(now);
        loop {
            match self.ring.submit() {
                Ok(_) => {}
                Err(error) if error.raw_os_error() == Some(libc::EINTR) => {}
                Err(error) if error.raw_os_error() == Some(libc::EBUSY) => return Ok(()),
                Err(error) => return Err(error),
            }
            if !self.ring.completion().is_empty() || std::time::Instant::now() >= deadline {
                return Ok(());
            }
            // Yield rather than spin tight: what completes the I/O may be a kernel worker bound
            // to this CPU (the deferred completion of an RWF_DSYNC write, io-wq's flush), and a
            // tight spin holds it off until the spin ends (RWF_DSYNC writes of 256 us instead of
            // 90 on a machine with two CPUs).
            std::thread::yield_now();
        }
    }

    /// Sets how long [`IoBackend::wait`] spins on the completion queue before it blocks.
    pub fn set_spin_us(&mut self, spin_us: u64) {
        self.spin_us = spin_us;
    }

    /// What of the pool is registered with the ring, and why not all of it.
    pub fn registration(&self) -> &BufferRegistration {
        &self.registration
    }

    /// How many buffers are registered: the pool's lowest indices, `[0, count)`.
    pub fn registered_buffers(&self) -> usize {
        self.registration.buffers_registered
    }

    /// Bytes of the buffers registered, all charged to the user's locked memory unless the
    /// process has CAP_IPC_LOCK.
    pub fn registered_buffer_bytes(&self) -> u64 {
        self.registration.registered_bytes()
    }

    fn slot(&mut self, op: Op) -> usize {
        match self.free_slots.pop() {
            Some(slot) => {
                self.ops[slot] = Some(op);
                slot
            }
            None => {
                self.ops.push(Some(op));
                self.ops.len() - 1
            }
        }
    }

    fn user_data(slot: usize, generation: u32) -> u64 {
        (u64::from(generation) << 32) | slot as u64
    }

    /// The SQE that (re)submits what is left of a read or write.
    fn transfer_entry(&mut self, slot: usize) -> squeue::Entry {
        let op = self.ops[slot].expect("a live op");
        let start = op.buffer_offset + op.transferred as usize;
        let len = op.len - op.transferred;
        let offset = op.file_offset + u64::from(op.transferred);
        let pointer = self.pool.buffer_mut(op.buffer)[start..].as_mut_ptr();
        let index = u16::try_from(op.buffer).expect("the pool has under 65536 buffers");
        let fixed = types::Fixed(op.file as u32);
        let fd = types::Fd(self.raw_fds[op.file]);
        let rw_flags = if op.sync == WriteSync::Dsync {
            libc::RWF_DSYNC
        } else {
            0
        };
        let fixed_buffer = op.buffer < self.registration.buffers_registered;
        let entry = match (op.kind, fixed_buffer, self.files_registered) {
            (OpKind::Write, true, true) => opcode::WriteFixed::new(fixed, pointer, len, index)
                .offset(offset)
                .rw_flags(rw_flags)
                .build(),
            (OpKind::Write, true, false) => opcode::WriteFixed::new(fd, pointer, len, index)
                .offset(offset)
                .rw_flags(rw_flags)
                .build(),
            (OpKind::Write, false, true) => opcode::Write::new(fixed, pointer, len)
                .offset(offset)
                .rw_flags(rw_flags)
                .build(),
            (OpKind::Write, false, false) => opcode::Write::new(fd, pointer, len)
                .offset(offset)
                .rw_flags(rw_flags)
                .build(),
            (OpKind::Read, true, true) => opcode::ReadFixed::new(fixed, pointer, len, index)
                .offset(offset)
                .build(),
            (OpKind::Read, true, false) => opcode::ReadFixed::new(fd, pointer, len, index)
                .offset(offset)
                .build(),
            (OpKind::Read, false, true) => opcode::Read::new(fixed, pointer, len)
                .offset(offset)
                .build(),
            (OpKind::Read, false, false) => {
                opcode::Read::new(fd, pointer, len).offset(offset).build()
            }
            (OpKind::Flush, _, _) => unreachable!("a flush is not a transfer"),
        };
        entry.user_data(Self::user_data(slot, op.generation))
    }

    fn flush_entry(&self, slot: usize) -> squeue::Entry {
        let op = self.ops[slot].expect("a live op");
        let entry = if self.files_registered {
            opcode::Fsync::new(types::Fixed(op.file as u32))
                .flags(types::FsyncFlags::DATASYNC)
                .build()
        } else {
            opcode::Fsync::new(types::Fd(self.raw_fds[op.file]))
                .flags(types::FsyncFlags::DATASYNC)
                .build()
        };
        entry.user_data(Self::user_data(slot, op.generation))
    }

    fn push(&mut self, entry: squeue::Entry) -> io::Result<()> {
        loop {
            // SAFETY: every pointer in an entry refers to the pool's mapping (owned by `self`,
            // alive until the ring is dropped) at an op slot that stays allocated until its CQE
            // is reaped; the entry itself is copied into the ring by `push`.
            let pushed = unsafe { self.ring.submission().push(&entry) };
            if pushed.is_ok() {
                return Ok(());
            }
            // The submission queue is full: hand it to the kernel and retry.
            self.ring.submit()?;
        }
    }

    fn push_unlinked_write(&mut self) -> io::Result<()> {
        if let Some((_, entry)) = self.unlinked_write.take() {
            self.push(entry)?;
        }
        Ok(())
    }

    fn arm_wake(&mut self) -> io::Result<()> {
        if !self.wake_armed {
            let entry = opcode::PollAdd::new(types::Fd(self.wake.as_fd_raw()), libc::POLLIN as u32)
                .build()
                .user_data(WAKE_USER_DATA);
            self.push(entry)?;
            self.wake_armed = true;
        }
        Ok(())
    }

    fn complete(&mut self, slot: usize, result: Result<u32, i32>, out: &mut Vec<Completion>) {
        let op = self.ops[slot].take().expect("a live op");
        self.free_slots.push(slot);
        out.push(Completion {
            tag: op.tag,
            result,
        });
    }

    /// Handles one CQE: completes its op, or resubmits what is left of it.
    fn on_cqe(&mut self, user_data: u64, res: i32, out: &mut Vec<Completion>) -> io::Result<()> {
        if user_data == WAKE_USER_DATA {
            self.wake_armed = false;
            // Drain the counter; EAGAIN (already drained) is fine.
            let _ = self.wake.read();
            return Ok(());
        }
        let slot = (user_data & u64::from(u32::MAX)) as usize;
        let generation = (user_data >> 32) as u32;
        let Some(op) = self.ops.get(slot).copied().flatten() else {
            return Ok(());
        };
        if op.generation != generation {
            return Ok(()); // A flush cancelled by a broken link, already linked again.
        }
        if res == -libc::EINTR || res == -libc::EAGAIN {
            return self.resubmit(slot);
        }
        if res < 0 {
            // A linked flush behind a failed write is cancelled by the kernel; its own CQE
            // (ECANCELED) arrives and is delivered as the flush's failure.
            self.complete(slot, Err(-res), out);
            return Ok(());
        }
        match op.kind {
            OpKind::Flush => self.complete(slot, Ok(0), out),
            OpKind::Write | OpKind::Read => {
                let transferred = res as u32;
                if transferred == 0 {
                    // A write of 0 bytes makes no progress, a read of 0 bytes is past the end:
                    // neither happens inside a ring, so the device is failing.
                    self.complete(slot, Err(libc::EIO), out);
                    return Ok(());
                }
                let op = self.ops[slot].as_mut().expect("a live op");
                op.transferred += transferred;
                if op.transferred >= op.len {
                    let len = op.len;
                    self.complete(slot, Ok(len), out);
                } else {
                    self.resubmit(slot)?;
                }
            }
        }
        Ok(())
    }

    /// Resubmits an op's remainder, relinking its flush if it had one.
    fn resubmit(&mut self, slot: usize) -> io::Result<()> {
        let op = {
            let op = self.ops[slot].as_mut().expect("a live op");
            op.generation = op.generation.wrapping_add(1);
            *op
        };
        match op.kind {
            OpKind::Flush => {
                let entry = self.flush_entry(slot);
                self.push(entry)
            }
            OpKind::Write | OpKind::Read => {
                let mut entry = self.transfer_entry(slot);
                if let Some(flush) = op.linked_flush {
                    entry = entry.flags(squeue::Flags::IO_LINK);
                    self.push(entry)?;
                    let flush_op = self.ops[flush].as_mut().expect("linked flush");
                    flush_op.generation = flush_op.generation.wrapping_add(1);
                    let flush_entry = self.flush_entry(flush);
                    self.push(flush_entry)
                } else {
                    self.push(entry)
                }
            }
        }
    }
}

impl Drop for UringBackend {
    fn drop(&mut self) {
        // Release the registered files now rather than when the kernel tears the ring down
        // (asynchronously), so a reopen with O_EXCL right after a close does not find the
        // device still busy.
        if self.files_registered {
            let _ = self.ring.submitter().unregister_files();
        }
        // Likewise give the buffers' locked-memory charge back now: a drive reopened right
        // after a close plans its registration with what this process holds at that moment.
        if self.registration.buffers_registered > 0 {
            let _ = self.ring.submitter().unregister_buffers();
        }
    }
}

trait RawEventFd {
    fn as_fd_raw(&self) -> RawFd;
}

impl RawEventFd for Arc<EventFd> {
    fn as_fd_raw(&self) -> RawFd {
        use std::os::fd::AsFd;
        self.as_fd().as_raw_fd()
    }
}

impl IoBackend for UringBackend {
    fn pool(&mut self) -> &mut BufferPool {
        &mut self.pool
    }

    fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    fn submit_write(
        &mut self,
        tag: Tag,
        ring_offset: u64,
        buffer: usize,
        buffer_offset: usize,
        len: u32,
        sync: WriteSync,
    ) -> io::Result<()> {
        self.push_unlinked_write()?;
        let (file, file_offset) = self.files.locate(ring_offset);
        let slot = self.slot(Op {
            tag,
            kind: OpKind::Write,
            file,
            file_offset,
            buffer,
            buffer_offset,
            len,
            transferred: 0,
            sync,
            generation: 0,
            linked_flush: None,
        });
        let entry = self.transfer_entry(slot);
        self.unlinked_write = Some((slot, entry));
        Ok(())
    }

    fn flush_unit(&self, ring_offset: u64) -> u64 {
        self.files.locate(ring_offset).0 as u64
    }

    fn submit_flush(&mut self, tag: Tag, ring_offset: u64, order: FlushOrder) -> io::Result<()> {
        let (file, _) = self.files.locate(ring_offset);
        let slot = self.slot(Op {
            tag,
            kind: OpKind::Flush,
            file,
            file_offset: 0,
            buffer: 0,
            buffer_offset: 0,
            len: 0,
            transferred: 0,
            sync: WriteSync::None,
            generation: 0,
            linked_flush: None,
        });
        match (order, self.unlinked_write.take()) {
            (FlushOrder::AfterPreviousWrite, Some((write_slot, entry))) => {
                self.ops[write_slot]
                    .as_mut()
                    .expect("the write")
                    .linked_flush = Some(slot);
                self.push(entry.flags(squeue::Flags::IO_LINK))?;
            }
            (_, Some((_, entry))) => self.push(entry)?,
            (_, None) => {}
        }
        let entry = self.flush_entry(slot);
        self.push(entry)
    }

    fn submit_read(
        &mut self,
        tag: Tag,
        ring_offset: u64,
        buffer: usize,
        len: u32,
    ) -> io::Result<()> {
        self.push_unlinked_write()?;
        let (file, file_offset) = self.files.locate(ring_offset);
        let slot = self.slot(Op {
            tag,
            kind: OpKind::Read,
            file,
            file_offset,
            buffer,
            buffer_offset: 0,
            len,
            transferred: 0,
            sync: WriteSync::None,
            generation: 0,
            linked_flush: None,
        });
        let entry = self.transfer_entry(slot);
        self.push(entry)
    }

    fn wait(&mut self, min_complete: usize, out: &mut Vec<Completion>) -> io::Result<()> {
        self.push_unlinked_write()?;
        if min_complete > 0 {
            self.arm_wake()?;
            self.spin_for_completions()?;
        }
        loop {
            match self.ring.submit_and_wait(min_complete) {
                Ok(_) => break,
                Err(error) if error.raw_os_error() == Some(libc::EINTR) => continue,
                // The completion queue is full: reap first, then submit again next time.
                Err(error) if error.raw_os_error() == Some(libc::EBUSY) => break,
                Err(error) => return Err(error),
            }
        }
        let mut reaped = std::mem::take(&mut self.reaped);
        reaped.extend(
            self.ring
                .completion()
                .map(|cqe| (cqe.user_data(), cqe.result())),
        );
        let mut result = Ok(());
        for &(user_data, res) in &reaped {
            if let Err(error) = self.on_cqe(user_data, res, out) {
                result = Err(error);
            }
        }
        reaped.clear();
        self.reaped = reaped;
        result
    }

    fn spin_next_wait_us(&mut self, spin_us: u64) {
        self.spin_us = spin_us;
    }

    fn waker(&self) -> Waker {
        let wake = Arc::clone(&self.wake);
        Arc::new(move || {
            // EAGAIN means the counter is saturated: the drive will wake anyway.
            let _ = wake.write(1);
        })
    }

    fn cache_info(&self) -> Option<CacheInfo> {
        self.files.cache.clone()
    }
}

/// How long a ring's setup is retried while the kernel refuses it for memory.
const RING_SETUP_RETRY: std::time::Duration = std::time::Duration::from_secs(1);

/// Builds the ring, retrying for a while on ENOMEM. A process without CAP_IPC_LOCK has the
/// ring's own memory (its submission and completion queues) and its registered buffers charged
/// to its user's RLIMIT_MEMLOCK, and the kernel gives a closed ring's charge back only when its
/// teardown, which runs asynchronously, finishes: a drive reopened right after a close can find
/// the budget still held by the ring it just closed (seen here about one reopen in three as the
/// unprivileged test user with an 8 MiB limit). Any other error, or ENOMEM past the retry
/// time, is the open's error.
fn build_ring(builder: &io_uring::Builder) -> io::Result<IoUring> {
    let started = std::time::Instant::now();
    let mut pause = std::time::Duration::from_millis(1);
    loop {
        match builder.build(RING_ENTRIES) {
            Err(error)
                if error.raw_os_error() == Some(libc::ENOMEM)
                    && started.elapsed() < RING_SETUP_RETRY =>
            {
                std::thread::sleep(pause);
                pause = (pause * 2).min(std::time::Duration::from_millis(50));
            }
            built => return built,
        }
    }
}
