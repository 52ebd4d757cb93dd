//! An in-memory backend for unit tests: a ring image with live and durable bytes (a flush makes
//! every completed write durable), completions delivered at the next wait, and two switchable
//! faults for fail-stop tests: fail the N-th write or the N-th flush with EIO. It is not the
//! fault simulator (that is the fault-injection crate's); it is the smallest correct device.

use std::io;
use std::sync::{Arc, Mutex};

use crate::io::{Completion, FlushOrder, IoBackend, Tag, Waker, WriteSync};
use crate::pool::BufferPool;

/// The bytes of an in-memory ring, shared between the backend and the test that made it.
#[derive(Debug, Default)]
pub struct MemoryImage {
    /// What reads see: every completed write.
    pub live: Vec<u8>,
    /// What survives a power cut: writes covered by a completed flush (or written with dsync).
    pub durable: Vec<u8>,
    /// Completed writes not yet covered by a flush: (ring offset, length).
    pending: Vec<(u64, usize)>,
}

impl MemoryImage {
    /// A zeroed image of `size` bytes.
    pub fn new(size: usize) -> MemoryImage {
        MemoryImage {
            live: vec![0; size],
            durable: vec![0; size],
            pending: Vec::new(),
        }
    }

    /// An image holding `bytes`, all durable (a freshly formatted ring, say).
    pub fn from_durable(bytes: Vec<u8>) -> MemoryImage {
        MemoryImage {
            live: bytes.clone(),
            durable: bytes,
            pending: Vec::new(),
        }
    }

    /// The image after a power cut: the durable bytes, as both live and durable.
    pub fn crash(&self) -> MemoryImage {
        MemoryImage {
            live: self.durable.clone(),
            durable: self.durable.clone(),
            pending: vec![],
        }
    }
}

/// Faults the memory backend can inject (1-based operation numbers).
#[derive(Clone, Copy, Debug, Default)]
pub struct MemoryFaults {
    /// Fail this write (counting every write since the backend was made) with EIO.
    pub fail_write_number: Option<u64>,
    /// Fail this flush with EIO.
    pub fail_flush_number: Option<u64>,
}

/// The in-memory backend.
pub struct MemoryBackend {
    image: Arc<Mutex<MemoryImage>>,
    pool: BufferPool,
    done: Vec<Completion>,
    faults: MemoryFaults,
    writes: u64,
    flushes: u64,
    last_write_failed: bool,
}

impl MemoryBackend {
    /// A backend over `image` with `buffers` buffers of `buffer_bytes`.
    pub fn new(
        image: Arc<Mutex<MemoryImage>>,
        buffers: usize,
        buffer_bytes: usize,
        faults: MemoryFaults,
    ) -> io::Result<MemoryBackend> {
        Ok(MemoryBackend {
            image,
            pool: BufferPool::new(buffers, buffer_bytes)?,
            done: Vec::new(),
            faults,
            writes: 0,
            flushes: 0,
            last_write_failed: false,
        })
    }

    fn range(&self, ring_offset: u64, len: usize) -> io::Result<std::ops::Range<usize>> {
        let size = self.image.lock().expect("image lock").live.len();
        let start = usize::try_from(ring_offset).map_err(|_| io::Error::other("offset"))?;
        if start.checked_add(len).is_none_or(|end| end > size) {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        Ok(start..start + len)
    }
}

impl IoBackend for MemoryBackend {
    fn pool(&mut self) -> &mut BufferPool {
        &mut self.pool
    }

    fn size_bytes(&self) -> u64 {
        self.image.lock().expect("image lock").live.len() as u64
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
        self.writes += 1;
        let range = self.range(ring_offset, len as usize)?;
        if self.faults.fail_write_number == Some(self.writes) {
            self.last_write_failed = true;
            self.done.push(Completion {
                tag,
                result: Err(libc::EIO),
            });
            return Ok(());
        }
        self.last_write_failed = false;
        let bytes = &self.pool.buffer(buffer)[buffer_offset..buffer_offset + len as usize];
        let mut image = self.image.lock().expect("image lock");
        image.live[range.clone()].copy_from_slice(bytes);
        match sync {
            WriteSync::Dsync => image.durable[range].copy_from_slice(bytes),
            WriteSync::None => image.pending.push((ring_offset, len as usize)),
        }
        self.done.push(Completion {
            tag,
            result: Ok(len),
        });
        Ok(())
    }

    fn submit_flush(&mut self, tag: Tag, _ring_offset: u64, order: FlushOrder) -> io::Result<()> {
        if order == FlushOrder::AfterPreviousWrite && self.last_write_failed {
            // A linked flush behind a failed write is cancelled, as io_uring does.
            self.done.push(Completion {
                tag,
                result: Err(libc::ECANCELED),
            });
            return Ok(());
        }
        self.flushes += 1;
        if self.faults.fail_flush_number == Some(self.flushes) {
            self.done.push(Completion {
                tag,
                result: Err(libc::EIO),
            });
            return Ok(());
        }
        let mut image = self.image.lock().expect("image lock");
        let pending = std::mem::take(&mut image.pending);
        for (offset, len) in pending {
            let start = offset as usize;
            let (live, durable) = (&image.live[start..start + len].to_vec(), start..start + len);
            image.durable[durable].copy_from_slice(live);
        }
        self.done.push(Completion { tag, result: Ok(0) });
        Ok(())
    }

    fn submit_read(
        &mut self,
        tag: Tag,
        ring_offset: u64,
        buffer: usize,
        len: u32,
    ) -> io::Result<()> {
        let range = self.range(ring_offset, len as usize)?;
        let image = self.image.lock().expect("image lock");
        self.pool.buffer_mut(buffer)[..len as usize].copy_from_slice(&image.live[range]);
        self.done.push(Completion {
            tag,
            result: Ok(len),
        });
        Ok(())
    }

    fn wait(&mut self, _min_complete: usize, out: &mut Vec<Completion>) -> io::Result<()> {
        out.append(&mut self.done);
        Ok(())
    }

    fn waker(&self) -> Waker {
        // Completions are delivered at the next wait; nothing ever blocks.
        Arc::new(|| {})
    }
}
