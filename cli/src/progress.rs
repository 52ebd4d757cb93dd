//! Progress of a long operation (format zero-filling its segments, verify reading the whole
//! ring) on stderr, only when stderr is a terminal: scripts and tests, which read stderr from
//! a pipe or a file, see exactly what they saw without it. One line, rewritten in place at
//! most every [`REDRAW_INTERVAL`], cleared when the operation ends.

use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sealog_wal::RingSource;

/// How often the line is redrawn at most (a format calls back once per MiB written).
const REDRAW_INTERVAL: Duration = Duration::from_millis(100);

/// A progress line for one operation; clones share it.
#[derive(Clone)]
pub struct Progress {
    what: &'static str,
    state: Arc<Mutex<State>>,
}

struct State {
    started: Instant,
    drawn: Option<Instant>,
}

impl Progress {
    /// A progress line labelled `what`, or `None` when stderr is not a terminal.
    pub fn on_terminal(what: &'static str) -> Option<Progress> {
        std::io::stderr().is_terminal().then(|| Progress {
            what,
            state: Arc::new(Mutex::new(State {
                started: Instant::now(),
                drawn: None,
            })),
        })
    }

    /// Shows `done` of `total` bytes, unless the line was drawn a moment ago.
    pub fn show(&self, done: u64, total: u64) {
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        let now = Instant::now();
        if state
            .drawn
            .is_some_and(|drawn| now.duration_since(drawn) < REDRAW_INTERVAL)
            && done < total
        {
            return;
        }
        state.drawn = Some(now);
        let seconds = now.duration_since(state.started).as_secs_f64().max(1e-3);
        let percent = (done * 100).checked_div(total).unwrap_or(100);
        let mib = |bytes: u64| bytes as f64 / f64::from(1u32 << 20);
        // Best effort: a terminal that cannot be written to only loses the progress line.
        let _ = write!(
            std::io::stderr(),
            "\r{}: {:.0} of {:.0} MiB ({percent}%), {:.0} MiB/s\x1b[K",
            self.what,
            mib(done),
            mib(total),
            mib(done) / seconds
        );
    }

    /// Clears the line, so what the command prints next starts on a clean one.
    pub fn finish(self) {
        if let Ok(state) = self.state.lock() {
            if state.drawn.is_some() {
                let _ = write!(std::io::stderr(), "\r\x1b[K");
            }
        }
    }
}

/// A [`RingSource`] that shows the bytes read through it on a [`Progress`], when there is one
/// (verify's full scan reads the whole ring: the total is the ring's size).
pub struct Counted<S> {
    inner: S,
    progress: Option<Progress>,
    bytes_read: u64,
}

impl<S: RingSource> Counted<S> {
    /// Counts what `inner` reads, shown on `progress`.
    pub fn new(inner: S, progress: Option<Progress>) -> Counted<S> {
        Counted {
            inner,
            progress,
            bytes_read: 0,
        }
    }
}

impl<S: RingSource> RingSource for Counted<S> {
    fn size_bytes(&self) -> u64 {
        self.inner.size_bytes()
    }

    fn read_at(&mut self, ring_offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        self.inner.read_at(ring_offset, buf)?;
        self.bytes_read += buf.len() as u64;
        if let Some(progress) = &self.progress {
            let total = self.inner.size_bytes();
            progress.show(self.bytes_read.min(total), total);
        }
        Ok(())
    }

    fn read_ahead(&mut self, ring_offset: u64, len: usize) {
        self.inner.read_ahead(ring_offset, len);
    }
}
