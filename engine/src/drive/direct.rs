//! Reads on the caller's thread: the ring's files (opened again read-only, O_DIRECT like the
//! drive's own) and a bounded set of aligned read buffers, so that readers on many threads read
//! the device in parallel (one read in flight per reader), never through the drive thread and
//! never behind the write path. A reader that finds every buffer taken waits in a fair queue
//! (first come, first served), never spinning.

use std::collections::VecDeque;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use memmap2::MmapMut;
use sealog_wal::Geometry;

use crate::pool::BUFFER_ALIGN_BYTES;
use crate::storage::{RingFiles, RingKind};

/// The ring's files as readers see them.
pub(crate) struct DirectFiles {
    kind: RingKind,
    geometry: Geometry,
    files: Vec<File>,
}

impl DirectFiles {
    /// Opens the files of an open ring again, read-only with O_DIRECT, through
    /// `/proc/self/fd` (so the very files the drive opened, whatever their paths name now).
    /// Not duplicated descriptors: those would share the open file description, and with it
    /// a device ring's `flock`, so that the ring stayed locked after the drive closed until
    /// its handle was dropped. Without `/proc`, duplicates it is.
    pub(crate) fn from_ring(ring: &RingFiles) -> io::Result<DirectFiles> {
        Ok(DirectFiles {
            kind: ring.kind,
            geometry: ring.geometry,
            files: ring
                .files
                .iter()
                .map(reopen_read_only)
                .collect::<io::Result<_>>()?,
        })
    }

    /// Reads `buf.len()` bytes at `ring_offset` (block-aligned, inside one segment).
    pub(crate) fn read_at(&self, ring_offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let (file, offset) = RingFiles::locate_in(self.kind, &self.geometry, ring_offset);
        self.files[file].read_exact_at(buf, offset)
    }
}

/// A new open file description of `file`, read-only and O_DIRECT (see
/// [`DirectFiles::from_ring`]).
fn reopen_read_only(file: &File) -> io::Result<File> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    let by_descriptor = format!("/proc/self/fd/{}", file.as_raw_fd());
    match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT | libc::O_CLOEXEC)
        .open(&by_descriptor)
    {
        Ok(reopened) => Ok(reopened),
        Err(error) if error.kind() == io::ErrorKind::NotFound => file.try_clone(),
        Err(error) => Err(error),
    }
}

/// Aligned buffers for reads on callers' threads, handed out in arrival order: a reader that
/// finds none free queues, and a buffer given back goes straight to the reader at the head of
/// the queue (one wake-up per buffer, not one per waiting reader).
pub(crate) struct ReadBuffers {
    buffer_bytes: usize,
    count: usize,
    queue: Mutex<BufferQueue>,
}

struct BufferQueue {
    free: Vec<MmapMut>,
    /// Readers waiting, oldest first, each for a buffer handed to it.
    waiting: VecDeque<Arc<Handoff>>,
}

/// Where a waiting reader receives its buffer.
struct Handoff {
    buffer: Mutex<Option<MmapMut>>,
    handed: Condvar,
}

/// A read buffer, returned to its queue when dropped.
pub(crate) struct ReadBuffer<'a> {
    map: Option<MmapMut>,
    owner: &'a ReadBuffers,
}

/// A lock whatever a panicking holder left behind (they only ever hold plain values).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl ReadBuffers {
    /// `count` buffers of `buffer_bytes` each (rounded up to the alignment), mapped now but
    /// backed by memory only as reads touch them.
    pub(crate) fn new(count: usize, buffer_bytes: usize) -> io::Result<ReadBuffers> {
        let buffer_bytes = buffer_bytes.div_ceil(BUFFER_ALIGN_BYTES) * BUFFER_ALIGN_BYTES;
        let free = (0..count)
            .map(|_| MmapMut::map_anon(buffer_bytes))
            .collect::<io::Result<Vec<_>>>()?;
        Ok(ReadBuffers {
            buffer_bytes,
            count,
            queue: Mutex::new(BufferQueue {
                free,
                waiting: VecDeque::new(),
            }),
        })
    }

    /// Bytes of each buffer.
    pub(crate) fn buffer_bytes(&self) -> usize {
        self.buffer_bytes
    }

    /// Number of buffers.
    pub(crate) fn count(&self) -> usize {
        self.count
    }

    /// Takes a buffer, waiting behind every reader that asked earlier.
    pub(crate) fn take(&self) -> ReadBuffer<'_> {
        let handoff = {
            let mut queue = lock(&self.queue);
            if queue.waiting.is_empty() {
                if let Some(map) = queue.free.pop() {
                    return ReadBuffer {
                        map: Some(map),
                        owner: self,
                    };
                }
            }
            let handoff = Arc::new(Handoff {
                buffer: Mutex::new(None),
                handed: Condvar::new(),
            });
            queue.waiting.push_back(Arc::clone(&handoff));
            handoff
        };
        let mut slot = lock(&handoff.buffer);
        loop {
            if let Some(map) = slot.take() {
                return ReadBuffer {
                    map: Some(map),
                    owner: self,
                };
            }
            slot = handoff
                .handed
                .wait(slot)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
    }

    /// A buffer comes back: to the oldest waiting reader, else to the free list.
    fn give_back(&self, map: MmapMut) {
        let mut queue = lock(&self.queue);
        match queue.waiting.pop_front() {
            Some(handoff) => {
                drop(queue);
                *lock(&handoff.buffer) = Some(map);
                handoff.handed.notify_one();
            }
            None => queue.free.push(map),
        }
    }
}

impl ReadBuffer<'_> {
    /// The buffer's first `len` bytes.
    pub(crate) fn bytes_mut(&mut self, len: usize) -> &mut [u8] {
        &mut self.map.as_mut().expect("held until dropped")[..len]
    }
}

impl Drop for ReadBuffer<'_> {
    fn drop(&mut self) {
        if let Some(map) = self.map.take() {
            self.owner.give_back(map);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn more_readers_than_buffers_are_served_in_turn() {
        let buffers = Arc::new(ReadBuffers::new(2, 4096).expect("map"));
        let held = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let readers: Vec<_> = (0..32)
            .map(|_| {
                let (buffers, held, most) = (buffers.clone(), held.clone(), most.clone());
                std::thread::spawn(move || {
                    for _ in 0..50 {
                        let mut buffer = buffers.take();
                        let now = held.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        buffer.bytes_mut(4096)[0] = 1;
                        held.fetch_sub(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        for reader in readers {
            reader.join().expect("reader");
        }
        assert!(
            most.load(Ordering::SeqCst) <= 2,
            "never more than the buffers"
        );
        assert_eq!(lock(&buffers.queue).free.len(), 2, "every buffer came back");
    }
}
