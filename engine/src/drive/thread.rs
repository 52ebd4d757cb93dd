//! The drive thread: it builds the backend (the io_uring backend must be built by the thread
//! that submits to it), recovers the ring, reports the open to the handle, runs the state
//! machine, and whatever way it ends (a clean close, fail-stop, a panic), leaves no request
//! without an outcome. Also the open's handoff of a recovery visitor to the thread and back.

use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::atomic::{fence, AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;

use crossbeam_channel::Receiver;
use sealog_wal::format::RingPurpose;
use sealog_wal::RecoveryReport;

use super::clock::SystemClock;
use super::core::DriveCore;
use super::entry::RecoveryVisitor;
use super::options::DriveOptions;
use super::requests::Request;
use super::view::ReadView;
use crate::error::{DriveFailure, OpenError};
use crate::io::{Durability, IoBackend, Waker};
use crate::ticket::Notifier;

/// What recovery hands back to `open`.
pub(super) struct Opened {
    pub(super) report: RecoveryReport,
    pub(super) waker: Waker,
    pub(super) cache: Option<crate::io::CacheInfo>,
    pub(super) durability: Durability,
    pub(super) purpose: RingPurpose,
    pub(super) view: Arc<ReadView>,
}

/// Waits for the drive thread to report its open: what recovery found, with the thread back,
/// or why it failed once the thread (which stops then) is joined.
pub(super) fn await_open(
    path: &Path,
    thread: JoinHandle<()>,
    opened: &mpsc::Receiver<Result<Opened, OpenError>>,
) -> Result<(Opened, JoinHandle<()>), OpenError> {
    match opened.recv() {
        Ok(Ok(opened)) => Ok((opened, thread)),
        Ok(Err(error)) => {
            let _ = thread.join();
            Err(error)
        }
        Err(_) => {
            let _ = thread.join();
            Err(OpenError::Io {
                path: path.to_path_buf(),
                action: "recover (the drive thread stopped)",
                source: io::Error::other("drive thread exited"),
            })
        }
    }
}

/// A recovery visitor shared with the drive thread for the open (the thread drops its
/// reference before it reports the open, so the opener takes the visitor back whole).
pub(super) type SharedVisitor = Arc<Mutex<dyn RecoveryVisitor>>;

/// Takes the visitor back once the drive thread has let go of it.
pub(super) fn take_visitor<V>(path: &Path, slot: Arc<Mutex<V>>) -> Result<V, OpenError> {
    match Arc::try_unwrap(slot) {
        Ok(visitor) => Ok(visitor
            .into_inner()
            .unwrap_or_else(|poisoned| poisoned.into_inner())),
        Err(_) => Err(OpenError::Io {
            path: path.to_path_buf(),
            action: "take the recovery visitor back",
            source: io::Error::other("the drive thread kept the recovery visitor"),
        }),
    }
}

/// What the drive thread opens with: where, how, the visitor, and where to report.
pub(super) struct ThreadOpen<'a> {
    pub(super) path: &'a Path,
    pub(super) options: &'a DriveOptions,
    pub(super) visitor: Option<SharedVisitor>,
    pub(super) opened: mpsc::Sender<Result<Opened, OpenError>>,
}

/// Recovers the ring on the drive thread, the visitor (if any) seeing every live entry; the
/// thread's reference to the visitor is gone when this returns.
fn recover_on_thread<B: IoBackend>(
    backend: B,
    path: &Path,
    options: &DriveOptions,
    visitor: Option<SharedVisitor>,
) -> Result<DriveCore<B>, OpenError> {
    let recovered = {
        let mut guard = visitor.as_ref().map(|visitor| {
            visitor
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
        });
        let visiting = guard
            .as_deref_mut()
            .map(|visitor| visitor as &mut dyn RecoveryVisitor);
        DriveCore::recover_visiting(backend, path, options, visiting)
    };
    drop(visitor);
    let mut core = recovered?;
    core.start_timers(options, Box::new(SystemClock));
    Ok(core)
}

/// The drive thread: build the backend, recover, report the open, run the state machine, and
/// whatever way it ends, leave no request without an outcome.
pub(super) fn drive_thread<B, F>(open: ThreadOpen<'_>, make_backend: F, channel: ThreadChannel<'_>)
where
    B: IoBackend,
    F: FnOnce() -> io::Result<B>,
{
    let ThreadOpen {
        path,
        options,
        visitor,
        opened: opened_sender,
    } = open;
    let _drive_span = tracing::info_span!("sealog_drive", path = %path.display()).entered();
    if let Some(cpu) = options.cpu {
        let mut set = nix::sched::CpuSet::new();
        if set.set(cpu).is_ok() {
            let _ = nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set);
        }
    }
    let backend = match make_backend() {
        Ok(backend) => backend,
        Err(source) => {
            let _ = opened_sender.send(Err(OpenError::Io {
                path: path.to_path_buf(),
                action: "set up the I/O backend",
                source,
            }));
            return;
        }
    };
    let recovering = super::metrics::Recovering::start();
    let mut drive = match recover_on_thread(backend, path, options, visitor) {
        Ok(drive) => drive,
        Err(error) => {
            let _ = opened_sender.send(Err(error));
            return;
        }
    };
    drive.attach_telemetry(path, options, recovering);
    let opened = Opened {
        report: drive.recovery_report().clone(),
        waker: drive.backend_mut().waker(),
        cache: drive.backend_mut().cache_info(),
        durability: drive.durability(),
        purpose: drive.purpose(),
        view: Arc::clone(&drive.view),
    };
    if opened_sender.send(Ok(opened)).is_err() {
        return;
    }
    let ThreadChannel {
        receiver,
        sleeping,
        stopped,
        notifier,
    } = channel;
    drive.adopt_notifier(notifier);
    // Whatever way this thread ends from here (returning, or unwinding from anywhere below),
    // the guard marks the drive stopped and drops what is left in the channel.
    let _stop = StopGuard { stopped, receiver };
    let outcome = catch_unwind(AssertUnwindSafe(|| drive.run(receiver, sleeping)));
    if let Err(panic) = outcome {
        let message = panic_message(panic.as_ref());
        tracing::error!(path = %path.display(), "the drive thread panicked: {message}");
        drive.fail_all(DriveFailure::ThreadPanicked { message });
    }
    // Dropping the core drops whatever it still holds; each completer completes its ticket.
    drop(drive);
}

/// What the drive thread shares with the drive's handle.
pub(super) struct ThreadChannel<'a> {
    pub(super) receiver: &'a Receiver<Request>,
    /// The thread is (about to be) blocked: a client that sends wakes it.
    pub(super) sleeping: &'a AtomicBool,
    /// The thread has stopped taking requests.
    pub(super) stopped: &'a AtomicBool,
    /// Where the drive's tickets park.
    pub(super) notifier: Arc<Notifier>,
}

/// Marks the drive stopped and drops every request left in its channel, when the drive thread
/// ends for whatever reason (its drop runs on a panic too). From then on no request is taken:
/// clients see `stopped` and stop sending, and a request that lands after the drain is dropped
/// by its sender (see `Drive::send`), which completes its ticket or reply with `DriveClosed`.
struct StopGuard<'a> {
    stopped: &'a AtomicBool,
    receiver: &'a Receiver<Request>,
}

impl Drop for StopGuard<'_> {
    fn drop(&mut self) {
        self.stopped.store(true, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        while self.receiver.try_recv().is_ok() {}
    }
}

/// The text of a panic's payload.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_string()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic without a message".to_string()
    }
}
