//! A LogDrive's seal and trim hide what they drop only once durable: on a simulated device
//! whose flushes are held back, a seal and a trim queued (and checked against: writes at or
//! beyond the seal are refused at once) leave every acknowledged value readable, N and the
//! lengths unchanged, until their flush completes; then reads answer unwritten and trimmed.
//! Otherwise a value read before a crash could read as unwritten and then, the crash having
//! lost the seal that hid it, as the value again (docs/logdrive.md, "Queued and durable").

use std::collections::HashSet;
use std::io;
use std::path::Path;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::Bytes;
use sealog::io::{Completion, FlushOrder, IoBackend, Tag, WriteSync};
use sealog::pool::BufferPool;
use sealog::storage::{plan_geometry, FormatOptions};
use sealog::SyncMethod;
use sealog_fault::{FaultConfig, SimDevice};
use sealog_logdrive::{
    wait, LogDrive, LogDriveError, LogDriveStore, ReadOutcome, ReclaimPolicy, StoreOptions,
};
use sealog_wal::RingId;
use sealog_wal_kit::model::ModelWriter;

/// A simulated device whose flush completions are held back while its gate is closed.
struct Gated {
    device: SimDevice,
    closed: Arc<AtomicBool>,
    flushes: HashSet<Tag>,
    held: Vec<Completion>,
}

impl IoBackend for Gated {
    fn pool(&mut self) -> &mut BufferPool {
        self.device.pool()
    }

    fn size_bytes(&self) -> u64 {
        self.device.size_bytes()
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
        assert_eq!(sync, WriteSync::None, "the ring syncs with fdatasync");
        self.device
            .submit_write(tag, ring_offset, buffer, buffer_offset, len, sync)
    }

    fn submit_flush(&mut self, tag: Tag, ring_offset: u64, order: FlushOrder) -> io::Result<()> {
        self.flushes.insert(tag);
        self.device.submit_flush(tag, ring_offset, order)
    }

    fn flush_unit(&self, ring_offset: u64) -> u64 {
        self.device.flush_unit(ring_offset)
    }

    fn submit_read(
        &mut self,
        tag: Tag,
        ring_offset: u64,
        buffer: usize,
        len: u32,
    ) -> io::Result<()> {
        self.device.submit_read(tag, ring_offset, buffer, len)
    }

    fn wait(&mut self, min_complete: usize, out: &mut Vec<Completion>) -> io::Result<()> {
        let closed = self.closed.load(Ordering::SeqCst);
        let before = out.len();
        if !closed {
            out.append(&mut self.held);
        }
        let mut done = Vec::new();
        self.device.wait(min_complete, &mut done)?;
        for completion in done {
            if closed && self.flushes.contains(&completion.tag) {
                self.held.push(completion);
            } else {
                self.flushes.remove(&completion.tag);
                out.push(completion);
            }
        }
        if out.len() == before && !self.held.is_empty() {
            // Only held flushes are left: time passes (the drive looks at its queue again).
            std::thread::sleep(Duration::from_micros(200));
        }
        Ok(())
    }

    fn waker(&self) -> sealog::io::Waker {
        self.device.waker()
    }
}

/// Whether `future` is still pending when polled once now.
fn pending<F: std::future::Future>(future: &mut std::pin::Pin<&mut F>) -> bool {
    let mut context = Context::from_waker(Waker::noop());
    matches!(future.as_mut().poll(&mut context), Poll::Pending)
}

fn page(address: u64) -> Bytes {
    Bytes::from(format!("address {address}").into_bytes())
}

#[test]
fn seals_and_trims_hide_what_they_drop_only_once_durable() {
    let options = FormatOptions {
        size_bytes: 2 * 4096 + 16 * 32 * 4096,
        segment_size_bytes: Some(32 * 4096),
        batch_size_max_bytes: Some(8 * 4096),
        window_batches_max: Some(3),
        sync_method: Some(SyncMethod::Fdatasync),
        ..FormatOptions::default()
    };
    let path = Path::new("gated-ring");
    let geometry = plan_geometry(&options, 4096, path).expect("a valid shape");
    let image = ModelWriter::format(geometry, RingId(*b"sealog-gated-dev"));
    let closed = Arc::new(AtomicBool::new(false));
    let gate = Arc::clone(&closed);
    let store_options = StoreOptions::default().reclaim(ReclaimPolicy::default().background(false));
    let store = LogDriveStore::open_with_backend(path, geometry, store_options, move || {
        let device = SimDevice::for_ring(image, &geometry, FaultConfig::none(), 7)?;
        Ok(Gated {
            device,
            closed: gate,
            flushes: HashSet::new(),
            held: Vec::new(),
        })
    })
    .expect("opens");
    let drive = wait(store.create(1, 100)).expect("create");
    for address in 0..10 {
        wait(drive.write(address, 1, page(address))).expect("write");
    }
    closed.store(true, Ordering::SeqCst);
    let mut seal = pin!(drive.seal(6, 1));
    let mut trim = pin!(drive.trim(3));
    std::thread::sleep(Duration::from_millis(50));
    let held = pending(&mut seal) && pending(&mut trim);
    // Queued: new writes are checked against them at once.
    let beyond = wait(drive.write(7, 1, page(7)));
    // Not durable: every acknowledged value still reads, and the tails still count them.
    let reads: Vec<_> = (0..10)
        .map(|a| wait(drive.read(a)).expect("read"))
        .collect();
    let length = wait(drive.length()).expect("length");
    let n = wait(drive.weak_tail(4)).expect("weak_tail").n;
    // The gate opens before anything is judged: a failed check must not leave the drive
    // waiting for its flushes forever.
    closed.store(false, Ordering::SeqCst);
    assert!(held, "flushes are held");
    assert_eq!(beyond, Err(LogDriveError::Sealed { length: 6 }));
    let values: Vec<_> = (0..10).map(|a| ReadOutcome::Value(page(a))).collect();
    assert_eq!(reads, values);
    assert_eq!(
        (length.n, length.t, length.sealed, length.first),
        (10, 10, None, 0)
    );
    assert_eq!(n, 10);
    closed.store(false, Ordering::SeqCst);
    wait(seal).expect("seal durable");
    wait(trim).expect("trim durable");
    assert_eq!(
        wait(drive.read(8)).expect("read"),
        ReadOutcome::Unwritten,
        "sealed off once durable"
    );
    assert_eq!(
        wait(drive.read(1)).expect("read"),
        ReadOutcome::Trimmed { first: 3 }
    );
    let length = wait(drive.length()).expect("length");
    assert_eq!((length.n, length.sealed, length.first), (6, Some(6), 3));
    store.close();
}
