//! `Drive::stats` never crosses the drive thread: statistics are read while the drive thread
//! is stuck waiting on the device (here, a device whose completions are held back), by more
//! threads at once than the drive's channel has slots, and after the drive closed; the
//! counters match the appends made, and the final histograms hold every batch.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use common::{payload, within, Backend, Shape, TestRing};
use sealog::io::{Completion, FlushOrder, IoBackend, Tag, WriteSync};
use sealog::{DriveOptions, DriveState};
use sealog_fault::{FaultConfig, SimDevice};

/// Holds the drive's waits for completions while closed.
#[derive(Default)]
struct Gate {
    closed: Mutex<bool>,
    opened: Condvar,
    /// The drive thread is waiting at the closed gate.
    holding: AtomicBool,
}

impl Gate {
    fn set_closed(&self, closed: bool) {
        *self.closed.lock().expect("gate") = closed;
        self.opened.notify_all();
    }

    fn pass(&self) {
        let mut closed = self.closed.lock().expect("gate");
        while *closed {
            self.holding.store(true, Ordering::SeqCst);
            closed = self.opened.wait(closed).expect("gate");
        }
        self.holding.store(false, Ordering::SeqCst);
    }
}

/// The simulated device behind a gate.
struct GatedDevice {
    device: SimDevice,
    gate: Arc<Gate>,
}

impl IoBackend for GatedDevice {
    fn pool(&mut self) -> &mut sealog::pool::BufferPool {
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
    ) -> std::io::Result<()> {
        self.device
            .submit_write(tag, ring_offset, buffer, buffer_offset, len, sync)
    }
    fn submit_flush(
        &mut self,
        tag: Tag,
        ring_offset: u64,
        order: FlushOrder,
    ) -> std::io::Result<()> {
        self.device.submit_flush(tag, ring_offset, order)
    }
    fn submit_read(
        &mut self,
        tag: Tag,
        ring_offset: u64,
        buffer: usize,
        len: u32,
    ) -> std::io::Result<()> {
        self.device.submit_read(tag, ring_offset, buffer, len)
    }
    fn wait(&mut self, min_complete: usize, out: &mut Vec<Completion>) -> std::io::Result<()> {
        if min_complete > 0 {
            self.gate.pass();
        }
        self.device.wait(min_complete, out)
    }
    fn waker(&self) -> sealog::io::Waker {
        self.device.waker()
    }
}

#[test]
fn stats_are_read_while_the_drive_thread_is_stuck_by_many_threads_and_after_close() {
    let geometry = TestRing::new(Backend::Simulated, &Shape::small()).geometry;
    let image = sealog_wal_kit::model::ModelWriter::format(geometry, sealog_wal::RingId([5; 16]));
    let gate = Arc::new(Gate::default());
    let device_gate = Arc::clone(&gate);
    // A channel of 4 slots: a stats request through it would queue behind the appends.
    let options = DriveOptions {
        channel_capacity: 4,
        ..DriveOptions::default()
    };
    let drive = sealog::Drive::open_with(
        std::path::Path::new("gated"),
        geometry,
        options,
        move || {
            let device = SimDevice::for_ring(image, &geometry, FaultConfig::none(), 7)?;
            Ok(GatedDevice {
                device,
                gate: device_gate,
            })
        },
    )
    .expect("opens");
    let drive = Arc::new(drive);
    for i in 0..10u64 {
        drive
            .append(payload(i, 500))
            .expect("queued")
            .wait()
            .expect("durable");
    }
    assert_eq!(
        drive.stats().appends,
        10,
        "counted before the tickets completed"
    );
    gate.set_closed(true);
    let writer = std::thread::spawn({
        let drive = Arc::clone(&drive);
        move || {
            let tickets: Vec<_> = (10..210u64)
                .map(|i| drive.append(payload(i, 500)).expect("queued"))
                .collect();
            tickets
                .into_iter()
                .map(|ticket| ticket.wait().expect("durable"))
                .max()
        }
    });
    within(
        "the drive thread stuck at the gate",
        Duration::from_secs(10),
        {
            let gate = Arc::clone(&gate);
            move || {
                while !gate.holding.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        },
    );
    // 32 readers, more than the channel's slots and the drive's read buffers, while the drive
    // thread cannot take anything.
    let seen = within("stats from 32 threads", Duration::from_secs(30), {
        let drive = Arc::clone(&drive);
        move || {
            let readers: Vec<_> = (0..32)
                .map(|_| {
                    let drive = Arc::clone(&drive);
                    std::thread::spawn(move || {
                        (0..200).map(|_| drive.stats().appends).max().unwrap_or(0)
                    })
                })
                .collect();
            readers
                .into_iter()
                .map(|reader| reader.join().expect("reader"))
                .max()
        }
    });
    assert_eq!(
        seen,
        Some(10),
        "nothing acknowledged while the device holds the batch"
    );
    assert!(
        gate.holding.load(Ordering::SeqCst),
        "still stuck while they read"
    );
    gate.set_closed(false);
    let last = writer.join().expect("writer");
    assert_eq!(last, Some(210));
    let stats = drive.stats();
    assert_eq!(stats.appends, 210);
    assert_eq!(stats.payload_bytes, 210 * 500);
    assert_eq!(stats.lsn_durable, 210);
    assert!(
        (2..=210).contains(&stats.batches),
        "{} batches",
        stats.batches
    );
    drive.close();
    let closed = drive.stats();
    assert_eq!(
        closed.appends, 210,
        "a closed drive reports its final counters"
    );
    assert_eq!(closed.batches, stats.batches);
    assert_eq!(closed.state, DriveState::Running);
    assert_eq!(
        closed.sync_latency_us.len(),
        closed.batches,
        "every batch's latency"
    );
    assert_eq!(closed.batch_entries.len(), closed.batches);
    assert_eq!(closed.queues, sealog::drive::QueueDepths::default());
}
