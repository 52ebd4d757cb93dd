//! Blocking on an [`OpFuture`](crate::OpFuture) (or any future) from a plain thread: the
//! thread polls the future, spins briefly for its waker (yielding the CPU on every turn), and
//! then parks until the waker unparks it. Tests and simple embedders use it; an embedder with
//! an executor awaits the futures instead.
//!
//! Why the spin: a drive completes a batch's tickets one after another in one turn of its
//! thread, calling each awaited ticket's waker as it goes. A pipelining writer woken for its
//! oldest write usually finds the next one not completed yet, a few microseconds before the
//! drive gets to it; parking again at once costs a futex wait here and a futex wake on the
//! drive thread for every write. Measured on the workload of `sealog-bench --section
//! logdrive` (8 writers x 32 writes in flight x 4 KiB, each way in adjacent 3 s runs of a
//! harness of its own): parking at once made 0.26-0.30 futex calls per write on one LogDrive
//! and 0.14-0.22 on 1,000 (the raw engine's appends 0.05); a 50 us spin halved them (0.13 and
//! 0.07-0.09) and wrote more per second in 9 of 10 pairs. The spin is shorter than a flush
//! (about 100 us here): it catches the rest of a turn's completions, not the next flush, so a
//! lone writer still parks (the engine's `Ticket::wait` spins up to 200 us for that case). At
//! most [`SPINNERS_MAX`] threads spin at once, the others park at once, so that many waiters
//! never take the CPUs the drive thread needs (32 blocking writers, each allowed to spin,
//! raised the CPU per write from 22 to 26 us in one of two pairs).

use std::future::Future;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::Thread;
use std::time::{Duration, Instant};

/// How long a waiter spins for its waker before it parks.
pub const SPIN: Duration = Duration::from_micros(50);

/// Threads of the process spinning at once at most (the rest park at once): two, which with
/// a drive thread fill the two CPUs of the smallest machine a log server runs on.
pub const SPINNERS_MAX: u32 = 2;

/// Threads spinning now.
static SPINNERS: AtomicU32 = AtomicU32::new(0);

/// A waiting thread and whether its future's waker was called since its last poll.
struct Signal {
    woken: AtomicBool,
    thread: Thread,
}

impl Wake for Signal {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::SeqCst);
        // Costs a system call only when the thread is parked, not while it spins.
        self.thread.unpark();
    }
}

/// Runs `future` to completion on this thread.
pub fn wait<F: Future>(future: F) -> F::Output {
    let future = pin!(future);
    run_until(future, None).expect("no deadline to pass")
}

/// Runs `future` on this thread until it completes, or until `deadline`: then it is handed
/// back, not yet complete, to wait for again (or to drop: an operation of a LogDrive goes on
/// once issued, whatever happens to its future).
pub fn wait_deadline<F: Future + Unpin>(mut future: F, deadline: Instant) -> Result<F::Output, F> {
    match run_until(Pin::new(&mut future), Some(deadline)) {
        Some(output) => Ok(output),
        None => Err(future),
    }
}

/// Polls `future` on this thread, spinning briefly and then parking between polls, until it
/// completes (its output) or `deadline` passes (`None`).
fn run_until<F: Future>(mut future: Pin<&mut F>, deadline: Option<Instant>) -> Option<F::Output> {
    let signal = Arc::new(Signal {
        woken: AtomicBool::new(false),
        thread: std::thread::current(),
    });
    let waker = Waker::from(Arc::clone(&signal));
    let mut context = Context::from_waker(&waker);
    loop {
        // Cleared before the poll: a wake during or after it is seen below.
        signal.woken.store(false, Ordering::SeqCst);
        if let Poll::Ready(output) = future.as_mut().poll(&mut context) {
            return Some(output);
        }
        if spin_until_woken(&signal.woken) {
            continue;
        }
        // A park may return without a wake-up (or on an unpark left from a spin): the flag
        // says whether the waker ran.
        while !signal.woken.load(Ordering::SeqCst) {
            match deadline {
                None => std::thread::park(),
                Some(deadline) => {
                    let now = Instant::now();
                    if now >= deadline {
                        return None;
                    }
                    std::thread::park_timeout(deadline - now);
                }
            }
        }
    }
}

/// Spins (yielding) for up to [`SPIN`] until `woken` is set, if fewer than [`SPINNERS_MAX`]
/// threads spin already; returns whether it was set.
fn spin_until_woken(woken: &AtomicBool) -> bool {
    if SPINNERS.fetch_add(1, Ordering::Relaxed) >= SPINNERS_MAX {
        SPINNERS.fetch_sub(1, Ordering::Relaxed);
        return false;
    }
    let until = Instant::now() + SPIN;
    let woke = loop {
        if woken.load(Ordering::SeqCst) {
            break true;
        }
        if Instant::now() >= until {
            break false;
        }
        // Yield, not a tight spin: the drive thread or the flush's kernel worker may need
        // this CPU.
        std::thread::yield_now();
    };
    SPINNERS.fetch_sub(1, Ordering::Relaxed);
    woke
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A future that is pending until another thread completes it, waking its waker then.
    struct Later {
        done: Arc<AtomicBool>,
        waker: Arc<std::sync::Mutex<Option<Waker>>>,
    }

    impl Future for Later {
        type Output = u32;

        fn poll(self: std::pin::Pin<&mut Self>, context: &mut Context<'_>) -> Poll<u32> {
            *self.waker.lock().expect("lock") = Some(context.waker().clone());
            if self.done.load(Ordering::SeqCst) {
                Poll::Ready(7)
            } else {
                Poll::Pending
            }
        }
    }

    /// A ready future returns at once; a wake within the spin and one long after it (the
    /// waiter parked by then) both end the wait.
    #[test]
    fn waits_end_on_a_wake_whether_spinning_or_parked() {
        assert_eq!(wait(std::future::ready(3)), 3);
        for delay in [Duration::ZERO, Duration::from_millis(20)] {
            let done = Arc::new(AtomicBool::new(false));
            let waker = Arc::new(std::sync::Mutex::new(None::<Waker>));
            let later = Later {
                done: Arc::clone(&done),
                waker: Arc::clone(&waker),
            };
            let completer = std::thread::spawn(move || {
                std::thread::sleep(delay);
                done.store(true, Ordering::SeqCst);
                let taken = waker.lock().expect("lock").take();
                if let Some(waker) = taken {
                    waker.wake();
                }
            });
            assert_eq!(wait(later), 7, "woken after {delay:?}");
            completer.join().expect("completer");
        }
    }

    /// A future that is not done by the deadline is handed back, and can be waited for again.
    #[test]
    fn a_wait_with_a_deadline_hands_the_future_back() {
        let done = Arc::new(AtomicBool::new(false));
        let waker = Arc::new(std::sync::Mutex::new(None::<Waker>));
        let later = Later {
            done: Arc::clone(&done),
            waker: Arc::clone(&waker),
        };
        let started = Instant::now();
        let deadline = started + Duration::from_millis(30);
        let later = wait_deadline(later, deadline).expect_err("not done yet");
        assert!(started.elapsed() >= Duration::from_millis(30));
        done.store(true, Ordering::SeqCst);
        let deadline = Instant::now() + Duration::from_secs(5);
        assert_eq!(wait_deadline(later, deadline).ok(), Some(7));
    }
}
