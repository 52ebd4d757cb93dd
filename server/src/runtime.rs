//! The client library's runtime: one per process, two threads, started on first use and
//! never shut down (so it is never dropped inside another runtime). Remote LogDrive calls and
//! etcd calls run on it, so that their futures can be awaited from any executor, or waited
//! on from a plain thread, and still have tokio's I/O and timers underneath.

use std::future::Future;
use std::sync::OnceLock;

fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("sealog-client")
            .enable_all()
            .build()
            .expect("the client runtime starts (threads and an epoll instance)")
    })
}

/// Starts `task` on the client runtime now; the future of its output. `Err` carries why the
/// task ended without one (it panicked).
pub fn spawn<T: Send + 'static>(
    task: impl Future<Output = T> + Send + 'static,
) -> impl Future<Output = Result<T, String>> + Send + 'static {
    let handle = runtime().spawn(task);
    async move { handle.await.map_err(|error| error.to_string()) }
}

/// Runs `f` inside the client runtime's context (what tonic's lazy channels need to spawn
/// their workers there).
pub fn enter<T>(f: impl FnOnce() -> T) -> T {
    let _guard = runtime().enter();
    f()
}
