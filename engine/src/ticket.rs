//! Tickets: how an append's outcome reaches its client, and what the handoff between a client
//! and its drive thread costs. A ticket can be waited on from a plain thread ([`Ticket::wait`])
//! or awaited from any async runtime (it implements [`Future`]); the engine depends on no
//! runtime. The drive completes each ticket exactly once, in LSN order, with the LSN (after the
//! sync covering it succeeded) or an error, through the ticket's [`TicketCompleter`]. A
//! completer that is dropped without completing (the request was dropped in a channel, or the
//! drive thread unwound) completes its ticket with [`DriveClosed`]: no ticket ever waits on a
//! drive that is gone.
//!
//! Looking at a ticket never consumes its outcome ([`Ticket::try_outcome`],
//! [`Ticket::wait_timeout`] return a copy); only [`Ticket::wait`] and awaiting take it.
//!
//! The handoff back is built so that a busy drive makes one system call per batch, not one per
//! append (measured in the benchmark's group-commit table):
//! - tickets come from a per-drive [`TicketPool`]: a ticket's state is recycled when both the
//!   ticket and its completer are done with it, so a warm drive allocates nothing per append;
//! - the outcome is two atomics (status and LSN); an error, rare, sits behind a mutex;
//! - a waiting client first spins briefly on its status (a lone writer usually sees its
//!   acknowledgement within microseconds of the flush's completion), then parks on one futex
//!   per drive ([`Notifier`]); the drive bumps that futex once per round of completions and
//!   wakes every parked client with a single `FUTEX_WAKE`, only when one is parked.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use crossbeam_queue::ArrayQueue;
use hdrhistogram::Histogram;
use linux_futex::{Futex, Private};

use crate::error::{AppendError, DriveClosed};

/// What an append comes to: its LSN once durable, or why not.
pub type AppendOutcome = Result<u64, AppendError>;

/// The ticket's status word.
const PENDING: u32 = 0;
/// Completed with an LSN.
const DURABLE: u32 = 1;
/// Completed with an error (in `TicketState::error`).
const FAILED: u32 = 2;

/// Ticket states a pool keeps for reuse: the most appends a drive is expected to have pending
/// at once (a pipelining client's window times its writers); beyond it, states are allocated
/// and freed as before, which costs an allocation, not correctness.
pub const TICKET_POOL_STATES: usize = 16_384;

/// Default time a waiting client spins on its ticket before it parks, in microseconds: about a
/// flush on this machine, so a lone writer usually sees its acknowledgement without parking
/// (parking costs a futex wait and a wake-up: 21-23 us p50 of completion-to-wake-up here,
/// against 1 us spinning). The spin yields the CPU on every turn (`sched_yield`), because the
/// flush itself runs on a kernel worker thread (io_uring's io-wq) that needs a CPU: a tight spin
/// on a machine with two CPUs held the flush off until the spin ended. Measured with
/// `sealog-bench --quick --cell 4096x1x1 --cell 4096x32x1 --client-spin-us 0|200`, three
/// interleaved rounds each, p50 of a lone writer: parking at once 112-125 us; a tight 200 us
/// spin 74-98 us or 249 us (the flush held off); a yielding 200 us spin 78-103 us; 32 writers
/// unchanged (one client spins at most, and none while others are parked).
pub const CLIENT_SPIN_US_DEFAULT: u64 = 200;

/// How many clients of one drive spin at once (the others park at once): one, which with the
/// drive thread fills two CPUs, the fewest a machine running a log server has.
pub const CLIENT_SPINNERS_MAX: u32 = 1;

/// Where clients park, per drive: one futex word the drive bumps once per round of
/// completions, a count of parked clients so the bump costs no system call when none is
/// parked, and the latency from a completion to its waiter running again.
pub struct Notifier {
    /// Bumped (and woken, when clients are parked) after every round of completions.
    epoch: Futex<Private>,
    /// Clients parked on `epoch` or about to park.
    parked: AtomicU32,
    /// Clients spinning now: at most [`CLIENT_SPINNERS_MAX`] do, the rest park at once, so
    /// that many waiting clients never take the CPUs the drive thread and the device's
    /// completions need.
    spinners: AtomicU32,
    /// Completions since the last bump: a round with none costs nothing.
    completed: AtomicBool,
    /// Completions bump at once (tickets made outside a drive); a drive's notifier is bumped
    /// by its thread at the end of each turn instead ([`Notifier::publish`]).
    immediate: bool,
    /// How long clients spin before parking.
    spin: Duration,
    /// Nanosecond timestamps are counted from here.
    origin: Instant,
    /// Microseconds from a ticket's completion to its waiter running again.
    wake_latency: WakeLatency,
}

impl Notifier {
    /// A drive's notifier: completions are published by the drive thread, once per turn.
    pub(crate) fn for_drive(client_spin_us: u64) -> Arc<Notifier> {
        Arc::new(Notifier::new(false, client_spin_us))
    }

    fn new(immediate: bool, client_spin_us: u64) -> Notifier {
        Notifier {
            epoch: Futex::new(0),
            parked: AtomicU32::new(0),
            spinners: AtomicU32::new(0),
            completed: AtomicBool::new(false),
            immediate,
            spin: Duration::from_micros(client_spin_us),
            origin: Instant::now(),
            wake_latency: WakeLatency::new(),
        }
    }

    /// Nanoseconds since this notifier's origin (saturating, never 0: 0 means "not stamped").
    fn now_ns(&self) -> u64 {
        (self.origin.elapsed().as_nanos() as u64).max(1)
    }

    fn note_completion(&self) {
        if self.immediate {
            self.completed.store(true, Ordering::SeqCst);
            self.publish();
        } else {
            self.completed.store(true, Ordering::Relaxed);
        }
    }

    /// Makes the completions since the last call visible to parked clients: bumps the epoch
    /// and, only when a client is parked, wakes them all with one system call. The drive thread
    /// calls it at the end of each turn (and whoever drops requests outside it, after).
    pub fn publish(&self) {
        if !self.completed.swap(false, Ordering::SeqCst) {
            return;
        }
        self.epoch.value.fetch_add(1, Ordering::SeqCst);
        // Pairs with `park_until`'s increment of `parked` before it reads the epoch: either the
        // client read the epoch after this bump (and does not sleep on it), or it is counted
        // here and woken.
        if self.parked.load(Ordering::SeqCst) > 0 {
            self.epoch.wake(i32::MAX);
        }
    }

    /// Blocks until `done()` holds: spins for the notifier's spin time, then parks on the
    /// epoch, rechecking after every bump. Returns false when `deadline` passed first.
    fn park_until(&self, done: impl Fn() -> bool, deadline: Option<Instant>) -> bool {
        if done() {
            return true;
        }
        // Spinning pays for a client that waits alone (a lone writer, whose acknowledgement
        // follows its flush by microseconds); where others are parked already, many clients
        // wait on one batch, and the CPUs are better left to the drive and the device.
        if !self.spin.is_zero() && self.parked.load(Ordering::Relaxed) == 0 {
            let spinning = self.spinners.fetch_add(1, Ordering::Relaxed) < CLIENT_SPINNERS_MAX;
            let spin_until = Instant::now() + self.spin.min(Duration::from_millis(10));
            while spinning && Instant::now() < spin_until {
                if done() {
                    self.spinners.fetch_sub(1, Ordering::Relaxed);
                    return true;
                }
                // Yield, not a tight spin: the flush's kernel worker may need this CPU.
                std::thread::yield_now();
            }
            self.spinners.fetch_sub(1, Ordering::Relaxed);
        }
        self.parked.fetch_add(1, Ordering::SeqCst);
        let finished = loop {
            let epoch = self.epoch.value.load(Ordering::SeqCst);
            if done() {
                break true;
            }
            match deadline {
                None => {
                    let _ = self.epoch.wait(epoch);
                }
                Some(deadline) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        break done();
                    }
                    let _ = self.epoch.wait_for(epoch, left);
                }
            }
        };
        self.parked.fetch_sub(1, Ordering::SeqCst);
        finished
    }

    /// The completion-to-wake-up latency of the tickets waited on so far.
    pub fn wake_latency_us(&self) -> Histogram<u64> {
        self.wake_latency.histogram()
    }
}

/// A lock-free histogram clients record into when they wake (hdrhistogram is single-writer):
/// 1 us buckets up to 256 us, then one bucket per power of two.
struct WakeLatency {
    buckets: [AtomicU64; WAKE_BUCKETS],
}

const WAKE_LINEAR_US: u64 = 256;
const WAKE_BUCKETS: usize = WAKE_LINEAR_US as usize + 56;

impl WakeLatency {
    fn new() -> WakeLatency {
        WakeLatency {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    fn bucket(us: u64) -> usize {
        if us < WAKE_LINEAR_US {
            us as usize
        } else {
            let power = 63 - us.leading_zeros() as usize; // >= 8
            (WAKE_LINEAR_US as usize + power - 8).min(WAKE_BUCKETS - 1)
        }
    }

    /// The smallest value a bucket holds.
    fn bucket_floor_us(bucket: usize) -> u64 {
        if bucket < WAKE_LINEAR_US as usize {
            bucket as u64
        } else {
            1u64 << (bucket - WAKE_LINEAR_US as usize + 8)
        }
    }

    fn record(&self, us: u64) {
        self.buckets[Self::bucket(us)].fetch_add(1, Ordering::Relaxed);
    }

    fn histogram(&self) -> Histogram<u64> {
        let mut histogram = Histogram::new(3).expect("3 significant figures is a valid precision");
        for (bucket, count) in self.buckets.iter().enumerate() {
            let count = count.load(Ordering::Relaxed);
            if count > 0 {
                let _ = histogram.record_n(Self::bucket_floor_us(bucket).max(1), count);
            }
        }
        histogram
    }
}

/// The state a ticket and its completer share.
pub(crate) struct TicketState {
    status: AtomicU32,
    lsn: AtomicU64,
    /// The error of a failed append (written before `status` says FAILED).
    error: Mutex<Option<AppendError>>,
    /// An async waiter's waker, and whether one is registered (so completing a ticket nobody
    /// awaits takes no lock).
    waker: Mutex<Option<Waker>>,
    awaited: AtomicBool,
    /// Set while the drive holds slices the client lent it ([`crate::uring::lend`]).
    pub(crate) lent: AtomicBool,
    /// When the drive completed it, on the notifier's clock (0: not yet).
    completed_ns: AtomicU64,
    notifier: Arc<Notifier>,
}

impl TicketState {
    fn new(notifier: Arc<Notifier>) -> TicketState {
        TicketState {
            status: AtomicU32::new(PENDING),
            lsn: AtomicU64::new(0),
            error: Mutex::new(None),
            waker: Mutex::new(None),
            awaited: AtomicBool::new(false),
            lent: AtomicBool::new(false),
            completed_ns: AtomicU64::new(0),
            notifier,
        }
    }

    /// Makes a recycled state as good as new (the caller holds the only reference).
    fn reset(&mut self) {
        *self.status.get_mut() = PENDING;
        *self.lsn.get_mut() = 0;
        *self.error.get_mut().unwrap_or_else(|p| p.into_inner()) = None;
        *self.waker.get_mut().unwrap_or_else(|p| p.into_inner()) = None;
        *self.awaited.get_mut() = false;
        *self.lent.get_mut() = false;
        *self.completed_ns.get_mut() = 0;
    }

    fn is_complete(&self) -> bool {
        self.status.load(Ordering::SeqCst) != PENDING
    }

    fn outcome(&self) -> Option<AppendOutcome> {
        match self.status.load(Ordering::SeqCst) {
            PENDING => None,
            DURABLE => Some(Ok(self.lsn.load(Ordering::Relaxed))),
            _ => Some(Err(lock(&self.error)
                .clone()
                .unwrap_or(AppendError::Closed(DriveClosed)))),
        }
    }

    fn deliver(&self, outcome: AppendOutcome) {
        debug_assert!(!self.is_complete(), "a ticket is completed once");
        let status = match outcome {
            Ok(lsn) => {
                self.lsn.store(lsn, Ordering::Relaxed);
                DURABLE
            }
            Err(error) => {
                *lock(&self.error) = Some(error);
                FAILED
            }
        };
        self.completed_ns
            .store(self.notifier.now_ns(), Ordering::Relaxed);
        self.status.store(status, Ordering::SeqCst);
        // Pairs with `poll`, which registers its waker before it looks at the status again.
        if self.awaited.load(Ordering::SeqCst) {
            if let Some(waker) = lock(&self.waker).take() {
                waker.wake();
            }
        }
        self.notifier.note_completion();
    }

    /// Records how long after its completion this waiter got to run.
    fn record_wake(&self) {
        let completed = self.completed_ns.load(Ordering::Relaxed);
        if completed > 0 {
            let now = self.notifier.now_ns();
            self.notifier
                .wake_latency
                .record(now.saturating_sub(completed) / 1000);
        }
    }

    /// Blocks until the drive gave back what the client lent it.
    pub(crate) fn wait_until_returned(&self) {
        self.notifier
            .park_until(|| !self.lent.load(Ordering::SeqCst), None);
    }

    /// The drive is done with what the client lent it.
    pub(crate) fn give_back_lent(&self, publish_now: bool) {
        self.lent.store(false, Ordering::SeqCst);
        self.notifier.note_completion();
        if publish_now {
            self.notifier.completed.store(true, Ordering::SeqCst);
            self.notifier.publish();
        }
    }
}

/// A lock whose poisoning only means another thread panicked while holding it: what it guards
/// is written in one assignment, so it is whole.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Recycled ticket states of one drive, and the notifier their waiters park on.
pub struct TicketPool {
    free: ArrayQueue<Arc<TicketState>>,
    notifier: Arc<Notifier>,
}

impl TicketPool {
    /// A pool whose tickets park on `notifier`.
    pub(crate) fn new(notifier: Arc<Notifier>) -> Arc<TicketPool> {
        TicketPool::keeping(notifier, TICKET_POOL_STATES)
    }

    /// A pool that keeps at most `states` states for reuse.
    fn keeping(notifier: Arc<Notifier>, states: usize) -> Arc<TicketPool> {
        Arc::new(TicketPool {
            free: ArrayQueue::new(states),
            notifier,
        })
    }

    /// A ticket and the completer the drive keeps for it.
    pub(crate) fn ticket(self: &Arc<TicketPool>) -> (Ticket, TicketCompleter) {
        let state = self
            .free
            .pop()
            .unwrap_or_else(|| Arc::new(TicketState::new(Arc::clone(&self.notifier))));
        let completer = TicketCompleter {
            state: Some(Arc::clone(&state)),
            pool: Some(Arc::clone(self)),
        };
        let ticket = Ticket {
            state: Some(state),
            pool: Some(Arc::clone(self)),
        };
        (ticket, completer)
    }

    /// The notifier this pool's tickets park on.
    pub fn notifier(&self) -> &Arc<Notifier> {
        &self.notifier
    }
}

/// Gives a state back to its pool if the caller held the last reference to it.
fn recycle(state: Option<Arc<TicketState>>, pool: Option<&Arc<TicketPool>>) {
    let (Some(mut state), Some(pool)) = (state, pool) else {
        return;
    };
    // Only the last holder gets `&mut`; if the other side still holds it (or both let go at
    // once), the state is simply freed when the last reference goes.
    if let Some(exclusive) = Arc::get_mut(&mut state) {
        exclusive.reset();
        let _ = pool.free.push(state);
    }
}

/// The drive's side of a ticket: completes it exactly once. Dropping it without completing
/// completes the ticket with [`DriveClosed`].
pub struct TicketCompleter {
    state: Option<Arc<TicketState>>,
    pool: Option<Arc<TicketPool>>,
}

impl TicketCompleter {
    /// Completes the ticket (the drive does this once, in LSN order). A drive's waiters see it
    /// when the drive thread publishes its turn's completions.
    pub fn complete(mut self, outcome: AppendOutcome) {
        if let Some(state) = self.state.take() {
            state.deliver(outcome);
            recycle(Some(state), self.pool.as_ref());
        }
    }

    /// The shared state, for lending slices against it.
    pub(crate) fn state(&self) -> Option<&Arc<TicketState>> {
        self.state.as_ref()
    }
}

impl Drop for TicketCompleter {
    fn drop(&mut self) {
        if let Some(state) = self.state.take() {
            // Dropped outside the drive's turn (a request dropped in a channel, a thread
            // unwinding): nobody else will publish it, so publish now.
            state.deliver(Err(AppendError::Closed(DriveClosed)));
            state.notifier.completed.store(true, Ordering::SeqCst);
            state.notifier.publish();
        }
    }
}

/// An append's pending outcome.
#[must_use = "a ticket is the only way to learn whether the append became durable"]
pub struct Ticket {
    state: Option<Arc<TicketState>>,
    pool: Option<Arc<TicketPool>>,
}

impl Ticket {
    /// A ticket outside any drive's pool, and its completer (completions wake at once): for a
    /// [`crate::DriveCore`] stepped by hand.
    pub(crate) fn standalone() -> (Ticket, TicketCompleter) {
        let notifier = Arc::new(Notifier::new(true, 0));
        let state = Arc::new(TicketState::new(notifier));
        let completer = TicketCompleter {
            state: Some(Arc::clone(&state)),
            pool: None,
        };
        let ticket = Ticket {
            state: Some(state),
            pool: None,
        };
        (ticket, completer)
    }

    fn state(&self) -> &TicketState {
        self.state
            .as_ref()
            .expect("a ticket holds its state until dropped")
    }

    /// Blocks until the append is durable (its LSN) or failed.
    pub fn wait(self) -> AppendOutcome {
        let state = self.state();
        if !state.is_complete() {
            state.notifier.park_until(|| state.is_complete(), None);
            state.record_wake();
        }
        state.outcome().expect("complete")
    }

    /// Like [`Ticket::wait`], giving up after `timeout` (`None`: still pending). The ticket
    /// keeps its outcome: a later look or wait sees it again.
    #[must_use]
    pub fn wait_timeout(&self, timeout: Duration) -> Option<AppendOutcome> {
        let state = self.state();
        if !state.is_complete() {
            // A timeout too long to represent as a deadline is no timeout at all.
            let deadline = Instant::now().checked_add(timeout);
            if !state.notifier.park_until(|| state.is_complete(), deadline) {
                return None;
            }
            state.record_wake();
        }
        state.outcome()
    }

    /// The outcome if it is already known (a copy: the ticket keeps it).
    #[must_use]
    pub fn try_outcome(&self) -> Option<AppendOutcome> {
        self.state().outcome()
    }

    /// Whether the outcome is known.
    #[must_use]
    pub fn is_complete(&self) -> bool {
        self.state().is_complete()
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        recycle(self.state.take(), self.pool.as_ref());
    }
}

impl Future for Ticket {
    type Output = AppendOutcome;

    fn poll(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Self::Output> {
        let state = self.state();
        if let Some(outcome) = state.outcome() {
            return Poll::Ready(outcome);
        }
        *lock(&state.waker) = Some(context.waker().clone());
        state.awaited.store(true, Ordering::SeqCst);
        // The drive may have completed it between the first look and the registration.
        match state.outcome() {
            Some(outcome) => Poll::Ready(outcome),
            None => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool() -> Arc<TicketPool> {
        TicketPool::new(Notifier::for_drive(0))
    }

    #[test]
    fn looking_at_a_ticket_does_not_consume_its_outcome() {
        let (ticket, completer) = Ticket::standalone();
        assert_eq!(ticket.try_outcome(), None);
        assert_eq!(ticket.wait_timeout(Duration::from_millis(1)), None);
        completer.complete(Ok(7));
        assert!(ticket.is_complete());
        assert_eq!(ticket.try_outcome(), Some(Ok(7)));
        assert_eq!(ticket.try_outcome(), Some(Ok(7)));
        assert_eq!(ticket.wait_timeout(Duration::from_millis(1)), Some(Ok(7)));
        assert_eq!(ticket.wait_timeout(Duration::MAX), Some(Ok(7)));
        assert_eq!(ticket.wait(), Ok(7));
    }

    #[test]
    fn a_dropped_completer_completes_its_ticket_with_closed() {
        let pool = pool();
        let (ticket, completer) = pool.ticket();
        let waiter = std::thread::spawn(move || ticket.wait());
        std::thread::sleep(Duration::from_millis(20));
        drop(completer);
        assert_eq!(
            waiter.join().expect("waiter"),
            Err(AppendError::Closed(DriveClosed))
        );
    }

    #[test]
    fn a_parked_waiter_is_woken_by_the_publication_of_its_completion() {
        let pool = pool();
        let notifier = Arc::clone(pool.notifier());
        let (ticket, completer) = pool.ticket();
        let waiter = std::thread::spawn(move || ticket.wait_timeout(Duration::from_secs(30)));
        std::thread::sleep(Duration::from_millis(20));
        completer.complete(Ok(3));
        notifier.publish();
        assert_eq!(waiter.join().expect("waiter"), Some(Ok(3)));
        assert_eq!(notifier.wake_latency_us().len(), 1);
    }

    #[test]
    fn many_parked_waiters_are_woken_by_one_publication() {
        let pool = pool();
        let notifier = Arc::clone(pool.notifier());
        let mut completers = Vec::new();
        let mut waiters = Vec::new();
        for _ in 0..32 {
            let (ticket, completer) = pool.ticket();
            completers.push(completer);
            waiters.push(std::thread::spawn(move || ticket.wait()));
        }
        std::thread::sleep(Duration::from_millis(20));
        for (lsn, completer) in completers.into_iter().enumerate() {
            completer.complete(Ok(lsn as u64 + 1));
        }
        notifier.publish();
        let mut lsns: Vec<u64> = waiters
            .into_iter()
            .map(|waiter| waiter.join().expect("waiter").expect("durable"))
            .collect();
        lsns.sort_unstable();
        assert_eq!(lsns, (1..=32).collect::<Vec<u64>>());
    }

    #[test]
    fn states_are_recycled_once_both_sides_let_go() {
        let pool = pool();
        let (ticket, completer) = pool.ticket();
        completer.complete(Ok(1));
        assert_eq!(ticket.wait(), Ok(1));
        assert_eq!(pool.free.len(), 1);
        let (ticket, completer) = pool.ticket();
        assert_eq!(pool.free.len(), 0);
        assert_eq!(
            ticket.try_outcome(),
            None,
            "a recycled state starts pending"
        );
        drop(ticket);
        completer.complete(Err(AppendError::Closed(DriveClosed)));
        assert_eq!(pool.free.len(), 1);
    }

    #[test]
    fn more_tickets_pending_than_the_pool_keeps_all_complete_and_the_pool_stays_bounded() {
        let pool = TicketPool::keeping(Notifier::for_drive(0), 8);
        let notifier = Arc::clone(pool.notifier());
        let (tickets, completers): (Vec<_>, Vec<_>) = (0..100).map(|_| pool.ticket()).unzip();
        let waiters: Vec<_> = tickets
            .into_iter()
            .map(|ticket| std::thread::spawn(move || ticket.wait()))
            .collect();
        for (lsn, completer) in completers.into_iter().enumerate() {
            completer.complete(Ok(lsn as u64));
        }
        notifier.publish();
        for (lsn, waiter) in waiters.into_iter().enumerate() {
            assert_eq!(waiter.join().expect("waiter"), Ok(lsn as u64));
        }
        assert_eq!(
            pool.free.len(),
            8,
            "the pool keeps what it can, frees the rest"
        );
    }

    #[test]
    fn wake_latency_buckets_cover_every_value() {
        for us in [0, 1, 255, 256, 257, 1000, 1 << 20, u64::MAX] {
            let bucket = WakeLatency::bucket(us);
            assert!(bucket < WAKE_BUCKETS);
            assert!(WakeLatency::bucket_floor_us(bucket) <= us.max(1) || us == 0);
        }
    }
}
