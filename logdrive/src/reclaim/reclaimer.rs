//! The reclaimer's shared state ([`Reclaimer`]): the signals that wake its thread (a client
//! refused room, a trim or deletion made durable, a stop), its counters, where the last walk
//! was pinned, the segment it is finishing, the last generation record it wrote.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use sealog::Drive;

use super::figures::{Counters, Handles};
use crate::space::Class;
use crate::sync::lock;

/// Where the last relocating walk stopped at a record it could not copy, and why, so that the
/// next look needs no read while nothing changed there. (A record a LogDrive needs stops an
/// advancing walk only, and an advancing step reads nothing unless clients wait for room, so
/// no pin is kept for it.)
#[derive(Clone, Debug)]
pub(crate) enum Pin {
    /// A record of a LogDrive whose deletion is not yet known durable.
    Dying { lsn: u64, key: (u64, u64) },
    /// A damaged record no state accounts for: the walk never passes it (a quarantined
    /// reopen will account for it).
    Unknown { lsn: u64 },
}

impl Pin {
    pub(crate) fn lsn(&self) -> u64 {
        match self {
            Pin::Dying { lsn, .. } | Pin::Unknown { lsn } => *lsn,
        }
    }
}

/// The last generation record relocation wrote: its LSN and the generation it carries.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Marker {
    pub(crate) lsn: u64,
    pub(crate) generation: u64,
}

#[derive(Default)]
pub(crate) struct Signal {
    pub(crate) woken: bool,
    pub(crate) stopped: bool,
}

/// The reclaimer's shared state: its signals, counters, pin and metrics.
pub(crate) struct Reclaimer {
    pub(crate) signal: Mutex<Signal>,
    pub(crate) condvar: Condvar,
    /// One walk at a time (the background thread, or a caller's `reclaim_now`).
    pub(crate) walking: Mutex<()>,
    /// A client was refused room since the last look.
    pub(crate) pressure: AtomicBool,
    pub(crate) counters: Counters,
    pub(crate) pin: Mutex<Option<Pin>>,
    /// The last LSN of a segment the head is in that relocation has copied records out of
    /// and not yet freed. Its copies took ring room that only freeing the segment gives
    /// back (with more: its garbage), so the reclaimer finishes it before it decides
    /// anything else, whatever the policy now says; otherwise a pass that stopped halfway
    /// (its bound met, or its pressure gone) left the relocation reserve spent, control
    /// records found no room, and nothing relocated again. Each relocating walk therefore
    /// ends at its head's segment's end, so one segment is finished before the next is
    /// begun.
    pub(crate) partial: Mutex<Option<u64>>,
    pub(crate) marker: Mutex<Option<Marker>>,
    pub(crate) last_error: Mutex<Option<String>>,
    pub(crate) handles: Handles,
}

impl Reclaimer {
    pub(crate) fn new(drive: &Drive) -> Arc<Reclaimer> {
        Arc::new(Reclaimer {
            signal: Mutex::new(Signal::default()),
            condvar: Condvar::new(),
            walking: Mutex::new(()),
            pressure: AtomicBool::new(false),
            counters: Counters::default(),
            pin: Mutex::new(None),
            partial: Mutex::new(None),
            marker: Mutex::new(None),
            last_error: Mutex::new(None),
            handles: Handles::new(drive),
        })
    }

    /// Something changed that may let the head move (a deletion, a trim, a seal, a client
    /// refused room).
    pub(crate) fn wake(&self) {
        lock(&self.signal).woken = true;
        self.condvar.notify_one();
    }

    /// A record of `class` was refused room: counted, and for a client's record, reclaim
    /// now, unpaced.
    pub(crate) fn refused(&self, class: Class) {
        self.handles.refused[class.counter()].increment(1);
        if class != Class::Relocation {
            self.pressure.store(true, Ordering::Release);
            self.wake();
        }
    }

    pub(crate) fn stop(&self) {
        lock(&self.signal).stopped = true;
        self.condvar.notify_all();
    }

    pub(crate) fn stopped(&self) -> bool {
        lock(&self.signal).stopped
    }

    /// Waits up to `timeout` for a wake; false once stopped.
    pub(crate) fn wait(&self, timeout: Duration) -> bool {
        let signal = lock(&self.signal);
        let (mut signal, _) = self
            .condvar
            .wait_timeout_while(signal, timeout, |signal| !signal.woken && !signal.stopped)
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        signal.woken = false;
        !signal.stopped
    }

    /// Waits, after a wake, until the wakes stop for [`SETTLE`] (at most [`SETTLE_MAX`] in
    /// all), unless a client is refused room or the reclaimer stops. Wakes come in bursts: a
    /// server trims or deletes many LogDrives at once, and their completions each wake the
    /// reclaimer as they are taken in, one by one, over a millisecond or more. A look in the
    /// middle of a burst sees some of them and not the rest, and its walk then reads, off the
    /// device, records the rest made garbage while it read them; a look after the burst moves
    /// the head past all of it by the counts, reading nothing.
    pub(crate) fn settle(&self) {
        let started = Instant::now();
        let mut signal = lock(&self.signal);
        while started.elapsed() < SETTLE_MAX {
            if signal.stopped || self.pressure.load(Ordering::Acquire) {
                return;
            }
            signal.woken = false;
            let (next, timeout) = self
                .condvar
                .wait_timeout_while(signal, SETTLE, |signal| !signal.woken && !signal.stopped)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            signal = next;
            if timeout.timed_out() {
                return;
            }
        }
    }

    /// Pauses for `pause` (relocation's pacing), cut short by a stop or a client refused.
    pub(crate) fn pace(&self, pause: Duration) {
        let until = Instant::now() + pause;
        let signal = lock(&self.signal);
        let _ = self
            .condvar
            .wait_timeout_while(signal, pause, |signal| {
                !signal.stopped && !self.pressure.load(Ordering::Acquire) && Instant::now() < until
            })
            .unwrap_or_else(std::sync::PoisonError::into_inner);
    }

    /// Whether the head is in a segment relocation has copied records out of.
    pub(crate) fn finishing(&self, head: u64) -> bool {
        let mut partial = lock(&self.partial);
        match *partial {
            Some(last) if head <= last => true,
            Some(_) => {
                *partial = None;
                false
            }
            None => false,
        }
    }

    pub(crate) fn note_error(&self, error: String) {
        tracing::warn!(reason = %error, "reclaiming the ring stopped short");
        *lock(&self.last_error) = Some(error);
    }
}

/// How long the wakes must stop before the background reclaimer looks ([`Reclaimer::settle`]).
pub(crate) const SETTLE: Duration = Duration::from_millis(1);
/// The longest a burst of wakes delays a look.
pub(crate) const SETTLE_MAX: Duration = Duration::from_millis(10);
