//! The completion thread of a drive: runs the callbacks of `sealog_append_cb`, so that no
//! caller's code ever runs on the drive thread (where it would stall every append) and none
//! runs on a caller's thread by surprise.
//!
//! Appends are queued here in submission order, with their tickets. The drive acknowledges in
//! LSN order, which is submission order, so the thread waits on each ticket in turn and calls
//! its callback: callbacks run one at a time, in LSN order, on this one thread. A callback
//! that blocks delays every later one (but never the drive). `finish` is called after the
//! drive closed, when every ticket has its outcome (durable, or `CLOSED`): the thread runs
//! what is queued and stops, so every accepted callback runs exactly once.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Mutex;
use std::thread::JoinHandle;

use sealog::{AppendOutcome, Ticket};

/// What a completed append hands its caller (the C callback, wrapped).
pub type Callback = Box<dyn FnOnce(AppendOutcome) + Send>;

/// An append waiting for its outcome, and what to call with it.
struct Pending {
    ticket: Ticket,
    callback: Callback,
}

/// A drive's completion thread and the queue that feeds it.
pub struct Completions {
    /// `None` once `finish` began: nothing more is queued.
    sender: Mutex<Option<Sender<Pending>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Completions {
    /// Starts the thread, named after the drive's path.
    pub fn start(name: &str) -> std::io::Result<Completions> {
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
    pub fn push(&self, ticket: Ticket, callback: Callback) -> Result<(), Callback> {
        let sender = lock(&self.sender);
        match sender.as_ref() {
            Some(sender) => sender
                .send(Pending { ticket, callback })
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

impl Drop for Completions {
    fn drop(&mut self) {
        self.finish();
    }
}

/// The thread: each ticket in turn, its callback once it completes.
fn run(receiver: Receiver<Pending>) {
    while let Ok(pending) = receiver.recv() {
        let outcome = pending.ticket.wait();
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
