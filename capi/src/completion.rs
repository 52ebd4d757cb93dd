//! The completion thread of a drive (or of a LogDrive store): runs the callbacks of
//! `sealog_append_cb` (and of `sealog_logdrive_write_cb`), so that no caller's code ever
//! runs on the drive thread (where it would stall every append) and none runs on a caller's
//! thread by surprise.
//!
//! Appends are queued here in submission order, with their tickets. The drive acknowledges in
//! LSN order, which is submission order, so the thread waits on each ticket in turn and calls
//! its callback: callbacks run one at a time, in LSN order, on this one thread. A LogDrive
//! store's writes are queued the same way; one that waited for room in the ring may finish
//! after a later one, whose callback then waits its turn (callbacks stay in submission
//! order). A callback
//! that blocks delays every later one (but never the drive). `finish` is called after the
//! drive closed, when every ticket has its outcome (durable, or `CLOSED`): the thread runs
//! what is queued and stops, so every accepted callback runs exactly once.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Mutex;
use std::thread::JoinHandle;

use sealog::{AppendOutcome, Ticket};
use sealog_logdrive::{LogDriveError, PendingWrite};

/// Something queued whose outcome the completion thread waits for.
pub trait Awaited: Send + 'static {
    /// What it ends with.
    type Outcome;
    /// Blocks until it ends.
    fn outcome(self) -> Self::Outcome;
}

impl Awaited for Ticket {
    type Outcome = AppendOutcome;
    fn outcome(self) -> AppendOutcome {
        self.wait()
    }
}

impl Awaited for PendingWrite {
    type Outcome = Result<(), LogDriveError>;
    fn outcome(self) -> Result<(), LogDriveError> {
        self.wait()
    }
}

/// What a completed append (or write) hands its caller (the C callback, wrapped).
pub type Callback<O = AppendOutcome> = Box<dyn FnOnce(O) + Send>;

/// An append waiting for its outcome, and what to call with it.
struct Pending<P: Awaited> {
    awaited: P,
    callback: Callback<P::Outcome>,
}

/// A drive's completion thread and the queue that feeds it.
pub struct Completions<P: Awaited = Ticket> {
    /// `None` once `finish` began: nothing more is queued.
    sender: Mutex<Option<Sender<Pending<P>>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl<P: Awaited> Completions<P> {
    /// Starts the thread, named after the drive's path.
    pub fn start(name: &str) -> std::io::Result<Completions<P>> {
        let (sender, receiver) = channel();
        let thread = std::thread::Builder::new()
            .name(format!("sealog-callbacks {name}"))
            .spawn(move || run(receiver))?;
        Ok(Completions {
            sender: Mutex::new(Some(sender)),
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Queues an append's callback behind every earlier one. Once `finish` has begun the
    /// callback is handed back: it will never run, and the caller says so.
    pub fn push(
        &self,
        awaited: P,
        callback: Callback<P::Outcome>,
    ) -> Result<(), Callback<P::Outcome>> {
        let sender = lock(&self.sender);
        match sender.as_ref() {
            Some(sender) => sender
                .send(Pending { awaited, callback })
                .map_err(|returned| returned.0.callback),
            None => Err(callback),
        }
    }

    /// Whether the calling thread is this completion thread (running a callback).
    pub fn is_current_thread(&self) -> bool {
        lock(&self.thread)
            .as_ref()
            .is_some_and(|thread| thread.thread().id() == std::thread::current().id())
    }

    /// Stops taking callbacks, lets the thread run those queued, and joins it. Called after
    /// the drive closed, so every queued ticket has (or is about to have) its outcome. Never
    /// from the completion thread itself (it would join itself).
    pub fn finish(&self) {
        lock(&self.sender).take();
        if let Some(thread) = lock(&self.thread).take() {
            // The thread catches each callback's panic, so it ends normally.
            let _ = thread.join();
        }
    }
}

impl<P: Awaited> Drop for Completions<P> {
    fn drop(&mut self) {
        self.finish();
    }
}

/// The thread: each ticket in turn, its callback once it completes.
fn run<P: Awaited>(receiver: Receiver<Pending<P>>) {
    while let Ok(pending) = receiver.recv() {
        let outcome = pending.awaited.outcome();
        // A panic in a callback's Rust wrapper must not stop the callbacks queued behind it
        // (the C callback itself cannot unwind: it is extern "C").
        let _ = catch_unwind(AssertUnwindSafe(|| (pending.callback)(outcome)));
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
