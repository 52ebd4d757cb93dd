//! Many operations in flight from few threads, for the composition section: each thread of a
//! [`Load`] keeps its share of the operations in flight as futures it polls itself (a
//! hand-written poll loop: a future's waker queues its slot on its thread's ready list and
//! unparks the thread), and starts the next operation in a slot as soon as the one there
//! completes. An AtomicLog append is an async fn, which does nothing until it is polled, so a
//! writer that blocks on its oldest operation (as the cells' writers do) would keep one in
//! flight, and a thread per append (256) would crowd the machine's two CPUs. Every engine of
//! the section, the raw engine's appends and plain LogDrive writes among them, runs through
//! this loop, so that two rows differ only in the operations they issue. Latency is from an
//! operation's start to the poll that finds it complete.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::Thread;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use nix::sys::resource::{getrusage, UsageWho};
use sealog::Drive;

use crate::cells::cpu_seconds;

/// One operation in flight: done once durable, or why not.
pub type Op<'a> = Pin<Box<dyn Future<Output = Result<(), String>> + Send + 'a>>;

/// What a load's threads issue.
pub trait Ops: Sync {
    /// Starts one operation (issued by the call, as a LogDrive's are, or at its first poll,
    /// as an async fn's are), for thread `thread`.
    fn start(&self, thread: usize) -> Op<'_>;
    /// Releases what was written but about the last `keep_writes` operations, so that the
    /// rings never fill during a run (trims of the logs, which the stores' reclaimers follow).
    fn release(&self, keep_writes: u64) -> Result<(), String>;
}

/// How many operations are in flight, and for how long they are measured.
#[derive(Clone, Copy, Debug)]
pub struct Load {
    /// Threads polling.
    pub threads: usize,
    /// Operations each thread keeps in flight.
    pub in_flight: usize,
    /// Measured time.
    pub duration: Duration,
    /// Warm-up before measuring.
    pub warmup: Duration,
    /// How long a thread with nothing ready spins (yielding the CPU) before it parks: the
    /// drives' `client_spin_us`, as long as `Ticket::wait` spins, so that a lone operation's
    /// latency is not a park and an unpark longer than a blocking waiter's. With 50 us (as
    /// `sealog_logdrive::wait`), a lone LogDrive write or raw append missed its completion
    /// (a flush of about 130 us here) and took 360 us at p50.
    pub spin: Duration,
}

impl Load {
    /// Operations in flight, all threads together.
    pub fn total_in_flight(&self) -> usize {
        self.threads * self.in_flight
    }
}

/// What the measured window saw.
pub struct Measured {
    /// Operations completed in the window.
    pub operations: u64,
    /// The window's length, seconds.
    pub seconds: f64,
    /// Their latencies, microseconds.
    pub latency_us: Histogram<u64>,
    /// The process's CPU time over the window, seconds.
    pub cpu_seconds: f64,
    /// Entries per batch of `drive` over the window (appends over batches).
    pub batch_entries: f64,
    /// The busiest polling thread's own CPU time over the window, as a share of the window
    /// (1: that thread never left its CPU, so it bounded the run).
    pub poller_cpu_share: f64,
}

/// A parked thread looks at the stop flag again after this long at most.
const PARK_MAX: Duration = Duration::from_millis(5);

/// A thread's ready list: the slots whose futures were woken since it last looked.
struct ReadyList {
    slots: Mutex<Vec<usize>>,
    any: AtomicBool,
    thread: Thread,
}

impl ReadyList {
    fn take(&self) -> Vec<usize> {
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        self.any.store(false, Ordering::SeqCst);
        std::mem::take(&mut *slots)
    }

    /// Spins for `spin`, then parks, until a slot is ready or [`PARK_MAX`] passes.
    fn idle(&self, spin: Duration) {
        let spin_until = Instant::now() + spin;
        while Instant::now() < spin_until {
            if self.any.load(Ordering::SeqCst) {
                return;
            }
            std::thread::yield_now();
        }
        if !self.any.load(Ordering::SeqCst) {
            std::thread::park_timeout(PARK_MAX);
        }
    }
}

/// One slot's waker: queues the slot on its thread's list once until it is polled again.
struct SlotWaker {
    slot: usize,
    queued: AtomicBool,
    ready: Arc<ReadyList>,
}

impl Wake for SlotWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if !self.queued.swap(true, Ordering::SeqCst) {
            let mut slots = self
                .ready
                .slots
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            slots.push(self.slot);
            self.ready.any.store(true, Ordering::SeqCst);
            drop(slots);
            self.ready.thread.unpark();
        }
    }
}

/// What the threads share: the window's flags and the release cadence.
struct Shared {
    measuring: AtomicBool,
    stop: AtomicBool,
    acknowledged: AtomicU64,
    keep: u64,
    every: u64,
}

impl Shared {
    /// One more operation acknowledged: every `every`, this thread releases behind the run.
    fn acknowledged<O: Ops>(&self, ops: &O) -> Result<(), String> {
        let count = self.acknowledged.fetch_add(1, Ordering::Relaxed) + 1;
        if count % self.every == 0 {
            ops.release(self.keep)?;
        }
        Ok(())
    }
}

/// Runs `load` through `ops` (releasing all but the last `keep_writes` operations' writes
/// every quarter of them), measures it after the warm-up, and drains what is in flight.
/// `drive` is the engine drive whose batches the window counts.
pub fn measure<O: Ops>(
    ops: &O,
    load: Load,
    keep_writes: u64,
    drive: &Drive,
) -> Result<Measured, String> {
    let shared = Shared {
        measuring: AtomicBool::new(false),
        stop: AtomicBool::new(false),
        acknowledged: AtomicU64::new(0),
        keep: keep_writes.max(1),
        every: (keep_writes / 4).max(1),
    };
    std::thread::scope(|scope| {
        let shared = &shared;
        let handles: Vec<_> = (0..load.threads)
            .map(|thread| {
                scope.spawn(move || poll_loop(ops, thread, (load.in_flight, load.spin), shared))
            })
            .collect();
        std::thread::sleep(load.warmup);
        let before = drive.stats();
        let cpu_before = cpu_seconds();
        shared.measuring.store(true, Ordering::SeqCst);
        let started = Instant::now();
        std::thread::sleep(load.duration);
        shared.measuring.store(false, Ordering::SeqCst);
        let seconds = started.elapsed().as_secs_f64();
        let cpu_seconds = cpu_seconds() - cpu_before;
        let after = drive.stats();
        shared.stop.store(true, Ordering::SeqCst);
        let mut latency_us = Histogram::<u64>::new(3).map_err(|error| error.to_string())?;
        let (mut operations, mut poller_cpu_seconds) = (0, 0.0f64);
        for handle in handles {
            let polled = handle
                .join()
                .unwrap_or_else(|_| Err("a polling thread panicked".to_string()))?;
            operations += polled.count;
            latency_us
                .add(polled.latency_us)
                .map_err(|error| error.to_string())?;
            poller_cpu_seconds = poller_cpu_seconds.max(polled.window_cpu_seconds);
        }
        let appends = after.appends.saturating_sub(before.appends);
        let batches = after.batches.saturating_sub(before.batches);
        Ok(Measured {
            operations,
            seconds,
            latency_us,
            cpu_seconds,
            batch_entries: appends as f64 / batches.max(1) as f64,
            poller_cpu_share: poller_cpu_seconds / seconds.max(1e-9),
        })
    })
}

/// What one polling thread saw in the window.
struct Polled {
    count: u64,
    latency_us: Histogram<u64>,
    window_cpu_seconds: f64,
}

/// This thread's CPU time (user and system), seconds.
fn thread_cpu_seconds() -> f64 {
    getrusage(UsageWho::RUSAGE_THREAD).map_or(0.0, |usage| {
        let (user, system) = (usage.user_time(), usage.system_time());
        (user.tv_sec() + system.tv_sec()) as f64 + (user.tv_usec() + system.tv_usec()) as f64 / 1e6
    })
}

/// A polling thread's CPU time over the window: taken when it first sees the window open and
/// when it first sees it closed (a parked thread sees either within [`PARK_MAX`]).
#[derive(Default)]
struct WindowCpu {
    opened: Option<f64>,
    closed: Option<f64>,
}

impl WindowCpu {
    fn look(&mut self, measuring: bool) {
        if measuring && self.opened.is_none() {
            self.opened = Some(thread_cpu_seconds());
        } else if !measuring && self.opened.is_some() && self.closed.is_none() {
            self.closed = Some(thread_cpu_seconds());
        }
    }

    fn seconds(&self) -> f64 {
        match (self.opened, self.closed) {
            (Some(opened), Some(closed)) => closed - opened,
            _ => 0.0,
        }
    }
}

/// A ready list for this thread and a waker for each of its `in_flight` slots.
fn slot_wakers(in_flight: usize) -> (Arc<ReadyList>, Vec<Arc<SlotWaker>>) {
    let ready = Arc::new(ReadyList {
        slots: Mutex::new(Vec::with_capacity(in_flight)),
        any: AtomicBool::new(false),
        thread: std::thread::current(),
    });
    let wakers = (0..in_flight)
        .map(|slot| {
            let ready = Arc::clone(&ready);
            let queued = AtomicBool::new(false);
            Arc::new(SlotWaker {
                slot,
                queued,
                ready,
            })
        })
        .collect();
    (ready, wakers)
}

/// One thread: keeps `in_flight` operations of `ops` going until the stop flag, then polls
/// the rest to completion. Counts and times what completes while the window is open.
fn poll_loop<O: Ops>(
    ops: &O,
    thread: usize,
    (in_flight, spin): (usize, Duration),
    shared: &Shared,
) -> Result<Polled, String> {
    let (ready, wakers) = slot_wakers(in_flight);
    let mut slots: Vec<Option<(Instant, Op<'_>)>> = (0..in_flight).map(|_| None).collect();
    let mut latency_us = Histogram::<u64>::new(3).map_err(|error| error.to_string())?;
    let (mut count, mut live, mut window_cpu) = (0u64, 0usize, WindowCpu::default());
    wakers.iter().for_each(|waker| waker.wake_by_ref());
    loop {
        window_cpu.look(shared.measuring.load(Ordering::Relaxed));
        let batch = ready.take();
        if batch.is_empty() {
            if live == 0 && shared.stop.load(Ordering::SeqCst) {
                let window_cpu_seconds = window_cpu.seconds();
                return Ok(Polled {
                    count,
                    latency_us,
                    window_cpu_seconds,
                });
            }
            ready.idle(spin);
            continue;
        }
        for slot in batch {
            wakers[slot].queued.store(false, Ordering::SeqCst);
            let stopping = shared.stop.load(Ordering::SeqCst);
            let (started, op) = match &mut slots[slot] {
                Some(running) => running,
                empty if !stopping => {
                    live += 1;
                    empty.insert((Instant::now(), ops.start(thread)))
                }
                None => continue,
            };
            let waker = Waker::from(Arc::clone(&wakers[slot]));
            let Poll::Ready(outcome) = op.as_mut().poll(&mut Context::from_waker(&waker)) else {
                continue;
            };
            let elapsed = started.elapsed();
            slots[slot] = None;
            live -= 1;
            outcome?;
            if shared.measuring.load(Ordering::Relaxed) {
                latency_us.record(elapsed.as_micros().max(1) as u64).ok();
                count += 1;
            }
            shared.acknowledged(ops)?;
            if !stopping {
                wakers[slot].wake_by_ref();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Operations that complete on another thread after a short sleep, counting how many are
    /// in flight at once.
    struct Sleepy {
        in_flight: AtomicU64,
        most: AtomicU64,
        released: AtomicU64,
    }

    impl Ops for Sleepy {
        fn start(&self, _thread: usize) -> Op<'_> {
            let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            self.most.fetch_max(now, Ordering::SeqCst);
            let done = Arc::new(AtomicBool::new(false));
            let setter = Arc::clone(&done);
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(2));
                setter.store(true, Ordering::SeqCst);
            });
            Box::pin(async move {
                // A future that yields until the sleeper is done, waking itself each time.
                std::future::poll_fn(|context| {
                    if done.load(Ordering::SeqCst) {
                        Poll::Ready(())
                    } else {
                        context.waker().wake_by_ref();
                        Poll::Pending
                    }
                })
                .await;
                self.in_flight.fetch_sub(1, Ordering::SeqCst);
                Ok(())
            })
        }

        fn release(&self, _keep_writes: u64) -> Result<(), String> {
            self.released.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
    }

    /// Each thread keeps its share in flight, the run drains, and releases come every quarter
    /// of `keep`.
    #[test]
    fn keeps_the_load_in_flight_and_drains() {
        let dir = tempfile::tempdir().unwrap();
        let ring = dir.path().join("ring");
        sealog::format(
            &ring,
            &sealog::FormatOptions {
                size_bytes: 64 << 20,
                segment_size_bytes: Some(4 << 20),
                force: true,
                ..sealog::FormatOptions::default()
            },
        )
        .unwrap();
        let drive = Drive::open(&ring, sealog::DriveOptions::default()).unwrap();
        let ops = Sleepy {
            in_flight: AtomicU64::new(0),
            most: AtomicU64::new(0),
            released: AtomicU64::new(0),
        };
        let load = Load {
            threads: 2,
            in_flight: 8,
            duration: Duration::from_millis(200),
            warmup: Duration::from_millis(20),
            spin: Duration::from_micros(50),
        };
        let measured = measure(&ops, load, 40, &drive).unwrap();
        drive.close();
        assert_eq!(ops.in_flight.load(Ordering::SeqCst), 0, "drained");
        assert_eq!(ops.most.load(Ordering::SeqCst), 16);
        assert!(measured.operations > 100, "{}", measured.operations);
        assert!(ops.released.load(Ordering::SeqCst) > 0);
        assert!(measured.latency_us.value_at_quantile(0.5) >= 2000);
        assert!((0.0..=1.5).contains(&measured.poller_cpu_share));
    }
}
