//! Reclaiming the ring's space (issue 13, item 5). The engine's ring frees space only at its
//! head, a segment at a time, once a trim passes every entry in it; LogDrives write into one
//! ring in any interleaving, so one long-lived LogDrive's records pin the head and with it
//! every deleted, trimmed or sealed-off record behind them. The reclaimer walks the ring
//! from its head, as BookKeeper's compactor walks an entry log and raft-engine rewrites its
//! oldest files: every record is judged against the LogDrives' state (as known durable), and
//!
//! - a record nothing needs any more (a deleted LogDrive's, a trimmed or sealed-off address,
//!   a rewrite of the same bytes, a superseded fence) is passed over;
//! - a record a live LogDrive needs (an address's value, its creation, the record holding its
//!   seal, fence or trim point, a damage its quarantined open found) is *relocated* when the
//!   policy asks for it: copied forward as a new entry flagged as a copy ([`crate::record`]),
//!   its LogDrive's state moved to the copy once durable; otherwise the walk stops there;
//! - then the ring is trimmed past everything walked, and its segments are freed.
//!
//! The highest generation issued is carried forward with a generation record before a trim
//! could take the last record carrying it, so that no (id, generation) is ever issued twice.
//!
//! When it runs: advancing the head past records nothing needs costs reads only and happens
//! whenever there are some. Relocation copies, and runs while the ring's occupied bytes are
//! over [`ReclaimPolicy::space_amplification_max`] times the live bytes and the ring is at
//! least [`ReclaimPolicy::occupancy_min_fraction`] full, or while clients are refused room
//! and there is garbage to win; paced to [`ReclaimPolicy::bandwidth_share`] of the time
//! unless clients are refused. Its copies may use the reserve the store keeps from clients
//! (`space`), so a full ring can always be reclaimed.
//!
//! Why this is safe across crashes: a copy is made under its LogDrive's mutex, so it takes
//! an LSN after every record that LogDrive had queued, and replay applies it after them (the
//! creations one walk meets are copied together as one group, under the registry's mutex,
//! which a deletion holds to queue its record: a creation's copy never lands after its
//! LogDrive's deletion); the head moves only once every copy is durable; a record is garbage
//! only by what is known durable (a deletion still in flight holds the walk, a durable record
//! whose completion is not yet taken in is needed), so no trim can take a record a crash could
//! make needed again.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use sealog::{Drive, LogEntry, ReadError, Ticket};

use crate::api::LogDriveError;
use crate::complete::Shared;
use crate::record::{Record, RecordType};
use crate::space::Class;
use crate::state::{Control, Suspect, RECORD_HEADER_BYTES};
use crate::store::{append_error, lock, read_error, Inner};

/// When and how fast the ring's space is reclaimed.
#[derive(Clone, Debug, PartialEq)]
pub struct ReclaimPolicy {
    /// Relocate while the ring's occupied bytes are over this many times the live bytes
    /// (the records live LogDrives need, headers included). At least 1.
    pub space_amplification_max: f64,
    /// ... and the ring is at least this full (0, the default: whenever the bound is
    /// passed; relocation then copies less than it frees). Between 0 and 1. Whatever it
    /// says, relocation waits for a segment's worth of garbage: segments are freed whole,
    /// so less wins nothing.
    pub occupancy_min_fraction: f64,
    /// Relocate too, unpaced, while the room clients may still take (the usable bytes less
    /// the reserves and what is queued) is under this share of the ring and there is garbage
    /// to win: so that a ring whose live bytes sit near the bound is reclaimed before clients
    /// are refused, not after. Between 0 and 1.
    pub free_min_fraction: f64,
    /// The share of the reclaimer's time it may spend relocating while no client is refused
    /// room: after a step that took t, it pauses t * (1 - share) / share. 1 runs flat out.
    pub bandwidth_share: f64,
    /// Ring bytes kept for relocation; `None` for the least this ring needs (one segment,
    /// two batches and the in-flight window). An explicit value below that is refused.
    pub reserve_bytes: Option<u64>,
    /// Ring bytes one step walks before it trims; `None` for a quarter of a segment, at
    /// least a batch and at most 8 MiB.
    pub step_bytes: Option<u64>,
    /// Run the reclaimer on the store's thread; off, it runs only in
    /// [`LogDriveStore::reclaim_now`](crate::LogDriveStore::reclaim_now) (the store's
    /// thread then only refuses the records whose wait for room has run out).
    pub background: bool,
    /// How often the background reclaimer looks when nothing wakes it.
    pub interval: Duration,
}

impl Default for ReclaimPolicy {
    fn default() -> ReclaimPolicy {
        ReclaimPolicy {
            space_amplification_max: 2.0,
            occupancy_min_fraction: 0.0,
            free_min_fraction: 0.25,
            bandwidth_share: 0.25,
            reserve_bytes: None,
            step_bytes: None,
            background: true,
            interval: Duration::from_millis(50),
        }
    }
}

impl ReclaimPolicy {
    /// This policy with relocation's trigger at `space_amplification_max`.
    pub fn space_amplification_max(mut self, space_amplification_max: f64) -> ReclaimPolicy {
        self.space_amplification_max = space_amplification_max;
        self
    }

    /// This policy with relocation waiting for the ring to be `fraction` full.
    pub fn occupancy_min_fraction(mut self, fraction: f64) -> ReclaimPolicy {
        self.occupancy_min_fraction = fraction;
        self
    }

    /// This policy relocating unpaced once clients' room is under `fraction` of the ring.
    pub fn free_min_fraction(mut self, fraction: f64) -> ReclaimPolicy {
        self.free_min_fraction = fraction;
        self
    }

    /// This policy with relocation paced to `share` of its time.
    pub fn bandwidth_share(mut self, share: f64) -> ReclaimPolicy {
        self.bandwidth_share = share;
        self
    }

    /// This policy with `reserve_bytes` kept for relocation.
    pub fn reserve_bytes(mut self, reserve_bytes: Option<u64>) -> ReclaimPolicy {
        self.reserve_bytes = reserve_bytes;
        self
    }

    /// This policy walking `step_bytes` per step.
    pub fn step_bytes(mut self, step_bytes: Option<u64>) -> ReclaimPolicy {
        self.step_bytes = step_bytes;
        self
    }

    /// This policy with the reclaimer on its own thread (or not).
    pub fn background(mut self, background: bool) -> ReclaimPolicy {
        self.background = background;
        self
    }

    /// Checks the policy's numbers.
    pub(crate) fn check(&self) -> Result<(), String> {
        let amplification = self.space_amplification_max;
        if amplification.is_nan() || amplification < 1.0 {
            return Err(format!(
                "a space amplification bound of {amplification} is below 1"
            ));
        }
        let occupancy = self.occupancy_min_fraction;
        if !(0.0..=1.0).contains(&occupancy) {
            return Err(format!(
                "an occupancy fraction of {occupancy} is not in 0..=1"
            ));
        }
        let free = self.free_min_fraction;
        if !(0.0..=1.0).contains(&free) {
            return Err(format!("a free room fraction of {free} is not in 0..=1"));
        }
        let share = self.bandwidth_share;
        if share.is_nan() || share <= 0.0 || share > 1.0 {
            return Err(format!("a bandwidth share of {share} is not in (0, 1]"));
        }
        if self.step_bytes == Some(0) {
            return Err("a step of 0 bytes walks nothing".to_string());
        }
        Ok(())
    }
}

/// While clients are refused room, relocation runs once at least this share of the ring's
/// occupied bytes (and at least a batch) is dead records, whatever the bound: records of
/// deleted LogDrives, trimmed or sealed-off addresses, superseded rewrites and controls. Not
/// the padding and segment ends around live records: a ring of live records written one to a
/// batch has a tenth of its bytes in padding, and rewriting it all again and again to pack
/// that tenth tighter cost ten times the clients' bytes (a LogDrive's copies go out in full
/// batches); the amplification bound relocates such a ring once it is worth it.
const PRESSURE_DEAD_MIN: f64 = 1.0 / 64.0;

/// What the reclaimer has done since the store opened (the counters start from zero on
/// every open: they describe this process's work, not the ring's history), and the ring's
/// space as it sees it now.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReclaimStats {
    /// The ring's bytes for the log.
    pub capacity_bytes: u64,
    /// The ring's bytes from its head to its write position.
    pub occupied_bytes: u64,
    /// The ring's bytes the writer can still take.
    pub usable_bytes: u64,
    /// The ring bytes of the records the live LogDrives need (headers included).
    pub live_bytes: u64,
    /// The ring bytes of the records in the ring that no LogDrive needs (what relocation
    /// wins besides the padding it packs).
    pub dead_bytes: u64,
    /// The ring bytes of the store's records sent to the drive and not yet placed in a batch
    /// (or refused) by it.
    pub queued_bytes: u64,
    /// Records waiting for ring room now (writes and control records).
    pub waiting_records: u64,
    /// Occupied over live bytes (1 when nothing is live and nothing occupied).
    pub space_amplification: f64,
    /// The bytes kept for relocation, and for control records below client writes.
    pub reserve_bytes: u64,
    /// The bytes kept for control records.
    pub control_reserve_bytes: u64,
    /// The ring's first live LSN.
    pub head_lsn: u64,
    /// Steps taken (each walks part of the ring from its head), and of those, relocating.
    pub steps: u64,
    /// Steps that relocated.
    pub relocation_steps: u64,
    /// Records relocated, and their ring bytes (headers included).
    pub relocated_records: u64,
    /// The relocated records' ring bytes.
    pub relocated_bytes: u64,
    /// Records walked and passed over as garbage.
    pub garbage_records: u64,
    /// Trims of the ring the reclaimer made.
    pub ring_trims: u64,
    /// Of those, advances past records no LogDrive needs made without reading them (by the
    /// counts the LogDrives keep of the records they need).
    pub advances: u64,
    /// Generation records written to carry the highest generation forward.
    pub generation_records: u64,
    /// Client writes, control records and copies refused room.
    pub refused_writes: u64,
    /// Control records refused room.
    pub refused_controls: u64,
    /// Relocated copies refused room (the reserve exhausted: a policy too small).
    pub refused_copies: u64,
    /// Seconds spent in relocating steps.
    pub relocation_seconds: f64,
    /// Why reclaiming last stopped short, if it did (a damaged record it cannot attribute,
    /// an engine error).
    pub last_error: Option<String>,
}

/// The metric names the reclaimer reports through the `metrics` facade, labelled `drive`.
pub mod metrics {
    /// Records relocated (counter).
    pub const RELOCATED_RECORDS_TOTAL: &str = "sealog_logdrive_relocated_records_total";
    /// Ring bytes of the records relocated (counter, bytes).
    pub const RELOCATED_BYTES_TOTAL: &str = "sealog_logdrive_relocated_bytes_total";
    /// Records passed over as garbage (counter).
    pub const GARBAGE_RECORDS_TOTAL: &str = "sealog_logdrive_garbage_records_total";
    /// Trims of the ring the reclaimer made (counter).
    pub const RING_TRIMS_TOTAL: &str = "sealog_logdrive_ring_trims_total";
    /// Records refused room, by `class` (write, control, relocation) (counter).
    pub const REFUSED_TOTAL: &str = "sealog_logdrive_refused_total";
    /// The ring bytes of the records live LogDrives need (gauge, bytes).
    pub const LIVE_BYTES: &str = "sealog_logdrive_live_bytes";
    /// Occupied over live bytes (gauge).
    pub const SPACE_AMPLIFICATION: &str = "sealog_logdrive_space_amplification";
}

/// The reclaimer's metric handles.
struct Handles {
    relocated_records: ::metrics::Counter,
    relocated_bytes: ::metrics::Counter,
    garbage_records: ::metrics::Counter,
    ring_trims: ::metrics::Counter,
    refused: [::metrics::Counter; 3],
    live_bytes: ::metrics::Gauge,
    space_amplification: ::metrics::Gauge,
}

impl Handles {
    fn new(drive: &Drive) -> Handles {
        use self::metrics::*;
        let label = drive.path().display().to_string();
        let counter = |name: &'static str| ::metrics::counter!(name, "drive" => label.clone());
        let gauge = |name: &'static str| ::metrics::gauge!(name, "drive" => label.clone());
        let refused = |class: &'static str| {
            let drive = label.clone();
            ::metrics::counter!(REFUSED_TOTAL, "drive" => drive, "class" => class)
        };
        Handles {
            relocated_records: counter(RELOCATED_RECORDS_TOTAL),
            relocated_bytes: counter(RELOCATED_BYTES_TOTAL),
            garbage_records: counter(GARBAGE_RECORDS_TOTAL),
            ring_trims: counter(RING_TRIMS_TOTAL),
            refused: [refused("write"), refused("control"), refused("relocation")],
            live_bytes: gauge(LIVE_BYTES),
            space_amplification: gauge(SPACE_AMPLIFICATION),
        }
    }
}

/// The counters behind [`ReclaimStats`].
#[derive(Default)]
struct Counters {
    steps: AtomicU64,
    relocation_steps: AtomicU64,
    relocated_records: AtomicU64,
    relocated_bytes: AtomicU64,
    garbage_records: AtomicU64,
    ring_trims: AtomicU64,
    generation_records: AtomicU64,
    advances: AtomicU64,
    relocation_micros: AtomicU64,
}

/// Where the last relocating walk stopped at a record it could not copy, and why, so that the
/// next look needs no read while nothing changed there. (A record a LogDrive needs stops an
/// advancing walk only, and an advancing step reads nothing unless clients wait for room, so
/// no pin is kept for it.)
#[derive(Clone, Debug)]
enum Pin {
    /// A record of a LogDrive whose deletion is not yet known durable.
    Dying { lsn: u64, key: (u64, u64) },
    /// A damaged record no state accounts for: the walk never passes it (a quarantined
    /// reopen will account for it).
    Unknown { lsn: u64 },
}

impl Pin {
    fn lsn(&self) -> u64 {
        match self {
            Pin::Dying { lsn, .. } | Pin::Unknown { lsn } => *lsn,
        }
    }
}

/// The last generation record relocation wrote: its LSN and the generation it carries.
#[derive(Clone, Copy, Debug)]
struct Marker {
    lsn: u64,
    generation: u64,
}

#[derive(Default)]
struct Signal {
    woken: bool,
    stopped: bool,
}

/// The reclaimer's shared state: its signals, counters, pin and metrics.
pub(crate) struct Reclaimer {
    signal: Mutex<Signal>,
    condvar: Condvar,
    /// One walk at a time (the background thread, or a caller's `reclaim_now`).
    walking: Mutex<()>,
    /// A client was refused room since the last look.
    pressure: AtomicBool,
    counters: Counters,
    pin: Mutex<Option<Pin>>,
    /// The last LSN of a segment the head is in that relocation has copied records out of
    /// and not yet freed. Its copies took ring room that only freeing the segment gives
    /// back (with more: its garbage), so the reclaimer finishes it before it decides
    /// anything else, whatever the policy now says; otherwise a pass that stopped halfway
    /// (its bound met, or its pressure gone) left the relocation reserve spent, control
    /// records found no room, and nothing relocated again. Each relocating walk therefore
    /// ends at its head's segment's end, so one segment is finished before the next is
    /// begun.
    partial: Mutex<Option<u64>>,
    marker: Mutex<Option<Marker>>,
    last_error: Mutex<Option<String>>,
    handles: Handles,
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

    fn stopped(&self) -> bool {
        lock(&self.signal).stopped
    }

    /// Waits up to `timeout` for a wake; false once stopped.
    fn wait(&self, timeout: Duration) -> bool {
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
    fn settle(&self) {
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
    fn pace(&self, pause: Duration) {
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
    fn finishing(&self, head: u64) -> bool {
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

    fn note_error(&self, error: String) {
        tracing::warn!(reason = %error, "reclaiming the ring stopped short");
        *lock(&self.last_error) = Some(error);
    }
}

/// The fewest LSNs the head moves by the counts alone, unless clients wait for room: every
/// ring trim is a control block written and flushed.
const ADVANCE_LSNS_MIN: u64 = 256;

/// How long the wakes must stop before the background reclaimer looks ([`Reclaimer::settle`]).
const SETTLE: Duration = Duration::from_millis(1);
/// The longest a burst of wakes delays a look.
const SETTLE_MAX: Duration = Duration::from_millis(10);

/// Starts the store's thread: it refuses the records whose wait for room has run out, and,
/// with [`ReclaimPolicy::background`], reclaims whenever something may let the head move or
/// the policy's interval passes.
pub(crate) fn spawn(inner: &Arc<Inner>) -> std::io::Result<JoinHandle<()>> {
    let weak: Weak<Inner> = Arc::downgrade(inner);
    let reclaimer = Arc::clone(&inner.reclaimer);
    let space = Arc::clone(&inner.space);
    let interval = inner.options.reclaim.interval;
    let background = inner.options.reclaim.background;
    let name = format!("sealog-reclaim {}", inner.drive.path().display());
    std::thread::Builder::new().name(name).spawn(move || {
        loop {
            // Woken by a client's refusal, a trim or deletion becoming durable, a stop, or
            // the first waiter's deadline.
            let timeout = space.next_deadline().map_or(interval, |deadline| {
                interval.min(deadline.saturating_duration_since(Instant::now()))
            });
            if !reclaimer.wait(timeout) {
                return;
            }
            space.expire(Instant::now());
            if !background {
                continue;
            }
            reclaimer.settle();
            let Some(inner) = weak.upgrade() else {
                return;
            };
            if let Err(error) = run(&inner, true) {
                if inner.check_running().is_err() {
                    return;
                }
                reclaimer.note_error(error.to_string());
            }
        }
    })
}

/// What a look at the ring found.
struct Survey {
    live_bytes: u64,
    capacity_bytes: u64,
    occupied_bytes: u64,
    /// The ring bytes clients may still take (usable, less the reserves and what is queued).
    client_room_bytes: u64,
    /// The bytes of the records in the ring (live or dead), without the padding and segment
    /// ends around them.
    record_bytes: u64,
    /// The ring's largest batch.
    batch_bytes: u64,
    /// The ring's block.
    block_bytes: u64,
    /// The last LSN the head may pass without a read: below the first record any LogDrive
    /// needs or may need, and at most the durable tail as of the look.
    advance_to: u64,
}

impl Survey {
    /// The bytes of records no LogDrive needs (what relocating the rest wins, besides the
    /// padding it packs): every record in the ring less the live ones (those in flight among
    /// them, which the ring may not hold yet: an estimate that errs low).
    fn dead_bytes(&self) -> u64 {
        self.record_bytes.saturating_sub(self.live_bytes)
    }

    fn amplification(&self) -> f64 {
        if self.live_bytes == 0 {
            return if self.occupied_bytes == 0 {
                1.0
            } else {
                f64::INFINITY
            };
        }
        self.occupied_bytes as f64 / self.live_bytes as f64
    }
}

/// Takes in every outcome that completed, sums the live bytes and bounds the advance.
fn survey(inner: &Inner) -> Survey {
    // Read before the states: a record queued after a state is looked at takes an LSN past
    // this durable tail, so the bound below needs only what the states hold.
    let durable = inner.drive.durable_lsn();
    let (live, dying): (Vec<Shared>, Vec<Shared>) = {
        let mut registry = lock(&inner.registry);
        registry.take_in();
        (
            registry.live.values().cloned().collect(),
            registry.dying.values().cloned().collect(),
        )
    };
    let mut live_bytes = 0;
    let mut bound = durable + 1;
    for shared in &live {
        let mut live = lock(shared);
        live.take_in(inner);
        live_bytes += live.state.live_bytes();
        bound = live.state.advance_bound().map_or(bound, |at| bound.min(at));
    }
    // A deletion not yet known durable: its LogDrive's records may be needed again.
    for shared in &dying {
        let mut dying = lock(shared);
        dying.take_in(inner);
        bound = dying
            .state
            .advance_bound()
            .map_or(bound, |at| bound.min(at));
    }
    let shape = inner.drive.shape();
    let reclaimer = &inner.reclaimer;
    let space = &inner.space;
    let kept = space.reserve_bytes + space.control_reserve_bytes;
    let room = space.room_bytes(inner.drive.room());
    let survey = Survey {
        live_bytes,
        capacity_bytes: shape.capacity_bytes,
        occupied_bytes: shape.occupied_bytes,
        client_room_bytes: room.saturating_sub(kept),
        record_bytes: shape.live_record_bytes,
        batch_bytes: u64::from(inner.drive.geometry().batch_size_max_bytes),
        block_bytes: u64::from(inner.drive.geometry().block_size_bytes),
        advance_to: bound.saturating_sub(1),
    };
    reclaimer.handles.live_bytes.set(live_bytes as f64);
    let amplification = survey.amplification();
    if amplification.is_finite() {
        reclaimer.handles.space_amplification.set(amplification);
    }
    survey
}

/// What clients are short of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pressure {
    /// Nothing: relocation follows the policy's bound.
    None,
    /// Writes were refused room or wait for it.
    Writes,
    /// A control record waits for room.
    Controls,
}

/// How a step walks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Pass garbage only; stop at the first needed record.
    Advance,
    /// Relocate needed records too.
    Relocate,
}

/// Whether clients' room is short: under the policy's share of the ring.
fn tight(policy: &ReclaimPolicy, survey: &Survey) -> bool {
    (survey.client_room_bytes as f64) < policy.free_min_fraction * survey.capacity_bytes as f64
}

/// Whether a step relocates. Without pressure, only for the policy's bound and once a
/// segment's worth is garbage (segments are freed whole: less wins nothing a later pass
/// would not). Under pressure (clients refused room, or their room under the policy's
/// share), whenever a real share of the ring is dead records, however little of a segment:
/// the head's segment frees once its live records are copied forward, and that wins what is
/// dead in it whatever the rest of the ring holds. (Requiring a segment of garbage there too
/// wedged a small ring for good: with less than a segment of garbage left and the head's
/// segment still pinned, nothing moved the head, and clients were refused forever.)
///
/// A control record waiting for room (the control reserve spent: by fences or seals written
/// one to a batch, each with its padding and the tail marker an idle drive writes after it)
/// is what makes room, so then any dead record is worth a relocation. (Not padding: on a ring
/// of records as large as a batch, whose padding no copy packs tighter, relocating for it
/// rewrote the ring hundreds of times over and won nothing.)
fn mode(policy: &ReclaimPolicy, survey: &Survey, segment_bytes: u64, pressure: Pressure) -> Mode {
    let occupied = survey.occupied_bytes as f64;
    let live = survey.live_bytes as f64;
    let garbage_bytes = survey.occupied_bytes.saturating_sub(survey.live_bytes);
    let dead_min = (PRESSURE_DEAD_MIN * occupied).max(survey.batch_bytes as f64);
    let pressed = pressure != Pressure::None || tight(policy, survey);
    if pressed && survey.dead_bytes() as f64 >= dead_min {
        return Mode::Relocate;
    }
    if pressure == Pressure::Controls && survey.dead_bytes() >= survey.block_bytes {
        return Mode::Relocate;
    }
    let full_enough = occupied >= policy.occupancy_min_fraction * survey.capacity_bytes as f64;
    let amplified = occupied > policy.space_amplification_max * live;
    if garbage_bytes >= segment_bytes && amplified && full_enough {
        Mode::Relocate
    } else {
        Mode::Advance
    }
}

/// Runs steps until the policy is met or nothing more can be done; `paced` pauses after
/// relocating steps as the bandwidth share says (the background thread).
pub(crate) fn run(inner: &Inner, paced: bool) -> Result<(), LogDriveError> {
    let reclaimer = &inner.reclaimer;
    let _walking = lock(&reclaimer.walking);
    let policy = &inner.options.reclaim;
    // A pass rewrites the live data at most once: past that, relocating more cannot lower
    // the amplification until something changes (what is left is the ring's own overhead).
    let mut relocated_this_pass = 0;
    loop {
        if reclaimer.stopped() {
            return Ok(());
        }
        inner.check_running()?;
        let survey = survey(inner);
        let refused = reclaimer.pressure.swap(false, Ordering::AcqRel);
        let short = if inner.space.controls_wait() {
            Pressure::Controls
        } else if refused || inner.space.waiting() > 0 {
            Pressure::Writes
        } else {
            Pressure::None
        };
        let pressure = short != Pressure::None || tight(policy, &survey);
        let segment_bytes = inner.drive.geometry().segment_size_bytes;
        let mut mode = mode(policy, &survey, segment_bytes, short);
        if mode == Mode::Relocate && relocated_this_pass > survey.live_bytes + segment_bytes {
            mode = Mode::Advance;
        }
        if advance(inner, &survey, pressure)? {
            inner.grant();
            continue;
        }
        // A segment half relocated is finished first, unpaced.
        let finishing = reclaimer.finishing(inner.drive.first_live_lsn());
        if finishing {
            mode = Mode::Relocate;
        }
        let pressure = pressure || finishing;
        let started = Instant::now();
        let walked = step(inner, mode, pressure, survey.advance_to)?;
        relocated_this_pass += walked.relocated_bytes;
        if !walked.progress {
            refuse_hopeless_writes(inner, &survey, segment_bytes);
            return Ok(());
        }
        inner.grant();
        if walked.relocated_bytes > 0 {
            let elapsed = started.elapsed();
            let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
            reclaimer
                .counters
                .relocation_micros
                .fetch_add(micros, Ordering::Relaxed);
            let share = policy.bandwidth_share;
            if paced && share < 1.0 && !pressure && !reclaimer.pressure.load(Ordering::Acquire) {
                reclaimer.pace(elapsed.mul_f64((1.0 - share) / share));
            }
        }
    }
}

/// Refuses the writes waiting for room once a look finds nothing left to reclaim for them:
/// no dead records a relocation under pressure would win (less than [`PRESSURE_DEAD_MIN`]
/// of the ring), no amplification over the policy's bound, and no head to advance. Only a
/// client's trim or deletion can make room then, and those do not wait behind writes; a
/// writer is told the ring is full now rather than at its deadline.
fn refuse_hopeless_writes(inner: &Inner, survey: &Survey, segment_bytes: u64) {
    if inner.space.waiting() == 0 {
        return;
    }
    if mode(
        &inner.options.reclaim,
        survey,
        segment_bytes,
        Pressure::Writes,
    ) == Mode::Relocate
    {
        return;
    }
    let refused = inner.space.refuse_writes();
    if refused > 0 {
        tracing::debug!(
            refused,
            live_bytes = survey.live_bytes,
            occupied_bytes = survey.occupied_bytes,
            "writes waiting for room refused: the ring holds nothing to reclaim"
        );
    }
}

/// Moves the ring's head past every record below the first one a LogDrive needs, by the
/// counts the states keep, without reading the ring (what the walk would only pass over):
/// when that is at least a chunk of LSNs, or clients wait for room. Whether it moved.
fn advance(inner: &Inner, survey: &Survey, pressure: bool) -> Result<bool, LogDriveError> {
    let drive = &inner.drive;
    let head = drive.first_live_lsn();
    let upto = survey.advance_to;
    if upto < head || (upto + 1 - head < ADVANCE_LSNS_MIN && !pressure) {
        return Ok(false);
    }
    let mut upto = upto;
    match generation_record(inner, upto) {
        Some(Ok(marker)) => match marker.ticket.wait() {
            Ok(to) => {
                for copy in &marker.copies {
                    apply(inner, &copy.live, copy.from, &copy.carried, to);
                }
            }
            Err(error) => return Err(append_error(error)),
        },
        // No room for the generation record: the head stays until there is.
        Some(Err(())) => upto = head - 1,
        None => {}
    }
    if upto < head {
        return Ok(false);
    }
    drive.trim(upto).map_err(|error| LogDriveError::Io {
        reason: format!("trimming the ring to LSN {upto}: {error}"),
    })?;
    let reclaimer = &inner.reclaimer;
    reclaimer
        .counters
        .ring_trims
        .fetch_add(1, Ordering::Relaxed);
    reclaimer.counters.advances.fetch_add(1, Ordering::Relaxed);
    reclaimer.handles.ring_trims.increment(1);
    Ok(true)
}

/// What one step did.
#[derive(Debug, Default)]
struct Walked {
    /// The head moved, or a copy was made.
    progress: bool,
    relocated_bytes: u64,
}

/// A record judged.
enum Verdict {
    /// Nothing needs it.
    Garbage,
    /// Copied; its copies are in flight.
    Copied(Vec<Queued>),
    /// A creation to copy with the others the walk meets, in one group
    /// ([`queue_creations`]).
    Deferred(Creation),
    /// Needed, and not copied (advancing only): the walk stops here.
    Needed,
    /// The walk cannot pass it now; with the pin that says, without a read, while it still
    /// cannot.
    Hold(Option<Pin>),
    /// Its copy found no room (the copies it made before are in flight).
    Full(Vec<Queued>),
}

/// What a copy carries forward, to apply to its LogDrive once durable.
#[derive(Clone, Debug)]
enum Carried {
    Write { address: u64 },
    Create,
    Control(Control),
    Damaged { address: u64 },
    Suspect,
    Generation(u64),
}

/// A relocated copy in flight.
struct Copy {
    /// The LogDrive it belongs to (none for a generation record).
    live: Option<Shared>,
    /// The LSN of the record copied.
    from: u64,
    carried: Carried,
    bytes: u64,
}

/// Copies queued as one group: all of them durable or none, at consecutive LSNs from the
/// one the ticket yields, in order.
struct Queued {
    ticket: Ticket,
    copies: Vec<Copy>,
}

/// A LogDrive's creation record the walk found needed, to be copied in a group with the
/// other creations it meets. Relocating every long-lived LogDrive's creation once per lap
/// of the ring is the reclaimer's steady work when many LogDrives live long (a bookie's
/// ledgers): copied one by one, the copies interleave with the clients' writes, and the
/// next lap reads that garbage to reach them; copied as a group, they stay together and the
/// next lap reads them alone.
struct Creation {
    live: Shared,
    from: u64,
    record: Record,
}

/// Creations copied per group at most: a sixteenth of a batch of headers (64 KiB in a
/// 1 MiB batch), so that a group never keeps the clients' records out of a batch.
fn creation_group_max(batch_size_max_bytes: u32) -> usize {
    let headers = u64::from(batch_size_max_bytes) / RECORD_HEADER_BYTES / 16;
    usize::try_from(headers).unwrap_or(usize::MAX).max(1)
}

/// Walks part of the ring from its head, then trims past what it walked. `advance_to` is
/// the survey's: the last LSN below every record a LogDrive needed or might need then.
fn step(
    inner: &Inner,
    mode: Mode,
    pressure: bool,
    advance_to: u64,
) -> Result<Walked, LogDriveError> {
    let reclaimer = &inner.reclaimer;
    let drive = &inner.drive;
    let head = drive.first_live_lsn();
    // The walk ends at the durable tail as of its start: the copies it makes take LSNs past
    // it, and the state learns of them only once the walk is over, so the walk must never
    // meet them (it would take them for garbage and trim them).
    let end = drive.durable_lsn();
    if head > end {
        return Ok(Walked::default());
    }
    // A relocating walk stays within the head's segment (see [`Reclaimer::partial`]).
    let segment_last = match mode {
        Mode::Relocate => match drive.segment_end_lsn(head) {
            Some(last) => Some(last),
            // The log ends in the head's segment: copies would land in it and never free it.
            None => return Ok(Walked::default()),
        },
        Mode::Advance => None,
    };
    let end = segment_last.map_or(end, |last| end.min(last));
    // An advancing walk would only read what the counts already say: they name the exact
    // LSN of every record a LogDrive needs, and the advance has moved the head up to the
    // first (or to within `ADVANCE_LSNS_MIN` of it, where a ring trim is not worth its
    // flush). Under pressure it still walks, to trim the garbage before its pin (past a
    // record in flight whose floor bounds the counts).
    if mode == Mode::Advance && !pressure {
        return Ok(Walked::default());
    }
    if mode == Mode::Relocate && still_pinned(inner, head) {
        return Ok(Walked::default());
    }
    let geometry = drive.geometry();
    let budget = inner.options.reclaim.step_bytes.unwrap_or_else(|| {
        let batch = u64::from(geometry.batch_size_max_bytes);
        (geometry.segment_size_bytes / 4).clamp(batch, (8 << 20).max(batch))
    });
    // The survey's bound is the LSN of a record some LogDrive needed: a walk that passes it
    // without meeting a needed record has found the state moved on since (a trim or a
    // deletion made it garbage) and stops there, so that the next survey moves the head past
    // what the counts now show to be garbage without reading it. Reading on would take
    // garbage off the device that the counts could have passed over. (A bound before the
    // head, a record in flight admitted before the head passed its floor, says nothing of
    // what lies past the head.) For the same reason a relocating walk stops once it has read
    // [`ADVANCE_LSNS_MIN`] LSNs past the last record it copied without meeting another: the
    // needed records it copied were what held the head, and what follows them is garbage the
    // counts pass over, up to the next needed record.
    let bound_last = if advance_to + 1 >= head {
        advance_to + 1
    } else {
        u64::MAX
    };
    let mut last_needed: Option<u64> = None;
    let mut copies: Vec<Queued> = Vec::new();
    let mut creations: Vec<Creation> = Vec::new();
    let group_max = creation_group_max(geometry.batch_size_max_bytes);
    // The first creation the walk passed that no group took: the head stays before it.
    let mut held: Option<u64> = None;
    let mut passed: Option<u64> = None;
    let mut walked_bytes = 0;
    let mut garbage = 0;
    let mut pin = None;
    // No read-ahead: the walk stops by what it finds, mostly within a run or two.
    let mut iterator = drive.iter_from(head).without_read_ahead();
    while walked_bytes < budget {
        let (lsn, bytes, verdict) = match iterator.next() {
            None => break,
            Some(Ok(entry)) if entry.lsn > end => break,
            Some(Err(ReadError::Damaged { lsn, .. })) if lsn > end => break,
            Some(Ok(LogEntry { lsn, .. }) | Err(ReadError::Damaged { lsn, .. }))
                if last_needed.map_or(lsn > bound_last, |at| lsn > at + ADVANCE_LSNS_MIN) =>
            {
                break
            }
            Some(Ok(entry)) => {
                let bytes = RECORD_HEADER_BYTES + entry.payload.len() as u64;
                (entry.lsn, bytes, judge(inner, entry, mode))
            }
            Some(Err(ReadError::Damaged { lsn, header, .. })) => (
                lsn,
                RECORD_HEADER_BYTES,
                judge_damaged(inner, lsn, header, mode),
            ),
            // The head moved under the walk (an embedder trimmed the drive itself).
            Some(Err(ReadError::Trimmed { .. })) => break,
            Some(Err(error)) => return Err(read_error(error)),
        };
        if !matches!(verdict, Verdict::Garbage) {
            last_needed = Some(lsn);
        }
        match verdict {
            Verdict::Garbage => garbage += 1,
            Verdict::Copied(made) => copies.extend(made),
            Verdict::Deferred(creation) => {
                creations.push(creation);
                if creations.len() == group_max {
                    let (made, unqueued) = queue_creations(inner, &mut creations);
                    copies.extend(made);
                    if let Some(lsn) = unqueued {
                        held = Some(held.map_or(lsn, |at| at.min(lsn)));
                        passed = Some(lsn);
                        break;
                    }
                }
            }
            Verdict::Needed => break,
            Verdict::Hold(at) => {
                pin = at;
                break;
            }
            Verdict::Full(made) => {
                copies.extend(made);
                break;
            }
        }
        passed = Some(lsn);
        walked_bytes += bytes;
    }
    drop(iterator);
    if !creations.is_empty() {
        let (made, unqueued) = queue_creations(inner, &mut creations);
        copies.extend(made);
        if let Some(lsn) = unqueued {
            held = Some(held.map_or(lsn, |at| at.min(lsn)));
        }
    }
    *lock(&reclaimer.pin) = pin;
    let Some(mut trim_to) = passed else {
        return Ok(Walked::default());
    };
    if let Some(lsn) = held {
        trim_to = trim_to.min(lsn - 1);
    }
    // A walk trims what it passed at once: it relocated (its copies hold the head past what
    // they copied), or it advances because clients wait for room.
    match generation_record(inner, trim_to) {
        Some(Ok(marker)) => copies.push(marker),
        Some(Err(())) => trim_to = head - 1,
        None => {}
    }
    let mut relocated_bytes = 0;
    let mut relocated_records = 0;
    for queued in copies {
        match queued.ticket.wait() {
            Ok(first) => {
                for (to, copy) in (first..).zip(&queued.copies) {
                    apply(inner, &copy.live, copy.from, &copy.carried, to);
                    if !matches!(copy.carried, Carried::Generation(_)) {
                        relocated_bytes += copy.bytes;
                        relocated_records += 1;
                    }
                }
            }
            // Not written (the reserve ran out despite the admission): the head stops
            // before them; the walk resumes there.
            Err(sealog::AppendError::RingFull { .. }) => {
                let from = queued.copies.iter().map(|copy| copy.from).min();
                trim_to = from.map_or(trim_to, |from| trim_to.min(from - 1));
            }
            Err(error) => return Err(append_error(error)),
        }
    }
    let counters = &reclaimer.counters;
    counters.steps.fetch_add(1, Ordering::Relaxed);
    counters
        .garbage_records
        .fetch_add(garbage, Ordering::Relaxed);
    reclaimer.handles.garbage_records.increment(garbage);
    if relocated_records > 0 {
        counters.relocation_steps.fetch_add(1, Ordering::Relaxed);
        counters
            .relocated_records
            .fetch_add(relocated_records, Ordering::Relaxed);
        counters
            .relocated_bytes
            .fetch_add(relocated_bytes, Ordering::Relaxed);
        reclaimer
            .handles
            .relocated_records
            .increment(relocated_records);
        reclaimer.handles.relocated_bytes.increment(relocated_bytes);
    }
    if trim_to >= head {
        drive.trim(trim_to).map_err(|error| LogDriveError::Io {
            reason: format!("trimming the ring to LSN {trim_to}: {error}"),
        })?;
        counters.ring_trims.fetch_add(1, Ordering::Relaxed);
        reclaimer.handles.ring_trims.increment(1);
    }
    if let Some(last) = segment_last {
        // Copies made out of a segment the head is still in: it must be finished.
        let partial = (relocated_records > 0 && trim_to < last).then_some(last);
        *lock(&reclaimer.partial) = partial;
    }
    Ok(Walked {
        progress: trim_to >= head || relocated_records > 0,
        relocated_bytes,
    })
}

/// Whether the last relocating walk stopped at or past the ring's head at a record that
/// still stops one (what lies before it stays garbage): no read needed to know the head
/// cannot move.
fn still_pinned(inner: &Inner, head: u64) -> bool {
    let Some(pin) = lock(&inner.reclaimer.pin).clone() else {
        return false;
    };
    if pin.lsn() < head {
        return false;
    }
    match pin {
        Pin::Unknown { .. } => true,
        Pin::Dying { key, .. } => lock(&inner.registry).dying.contains_key(&key),
    }
}

/// Who a record belongs to.
enum Owner {
    Live(Shared),
    Dying((u64, u64)),
    None,
}

fn logdrive_of(inner: &Inner, record: &Record) -> Owner {
    let registry = lock(&inner.registry);
    let key = (record.id, record.generation);
    if registry.dying.contains_key(&key) {
        return Owner::Dying(key);
    }
    match registry.live.get(&record.id) {
        Some(shared) => Owner::Live(Arc::clone(shared)),
        None => Owner::None,
    }
}

/// Judges a record at the head of the walk, and copies it when it is needed and the step
/// relocates.
fn judge(inner: &Inner, entry: LogEntry, mode: Mode) -> Verdict {
    let Some(record) = Record::decode(entry.kind, &entry.header) else {
        return Verdict::Garbage;
    };
    if matches!(
        record.record_type,
        RecordType::Delete | RecordType::Generation
    ) {
        return Verdict::Garbage;
    }
    let summary = |payload: &[u8]| {
        let len = crate::state::slot_len(payload.len() as u64);
        (crc32c::crc32c(payload), len)
    };
    let shared = match logdrive_of(inner, &record) {
        Owner::Live(shared) => shared,
        Owner::Dying(key) => {
            return Verdict::Hold(Some(Pin::Dying {
                lsn: entry.lsn,
                key,
            }))
        }
        Owner::None => return Verdict::Garbage,
    };
    let mut live = lock(&shared);
    live.take_in(inner);
    if !live
        .state
        .needs(entry.lsn, &record, || summary(&entry.payload))
    {
        return Verdict::Garbage;
    }
    if mode == Mode::Advance {
        return Verdict::Needed;
    }
    // A deletion queued and not yet durable: copying now would put a creation after it.
    if live.state.deleted {
        return Verdict::Hold(None);
    }
    let (carried, copy) = match record.record_type {
        RecordType::Write => (
            Carried::Write {
                address: record.value,
            },
            record,
        ),
        RecordType::Create => {
            return Verdict::Deferred(Creation {
                live: Arc::clone(&shared),
                from: entry.lsn,
                record: record.relocated(),
            })
        }
        RecordType::Seal | RecordType::Fence | RecordType::Trim => {
            let control = Control::of(&record).expect("a control record");
            (Carried::Control(control), record)
        }
        RecordType::Damaged => (
            Carried::Damaged {
                address: record.value,
            },
            record,
        ),
        RecordType::Suspect => (Carried::Suspect, record),
        RecordType::Delete | RecordType::Generation => unreachable!("garbage above"),
    };
    let payload = match carried {
        Carried::Write { .. } => Bytes::from(entry.payload),
        _ => Bytes::new(),
    };
    match queue_copy(
        inner,
        Some(&shared),
        entry.lsn,
        copy.relocated(),
        payload,
        carried,
    ) {
        Some(queued) => Verdict::Copied(vec![queued]),
        None => Verdict::Full(Vec::new()),
    }
}

/// Judges a damaged record at the head of the walk: the damage a quarantined open accounted
/// for is carried forward as a damaged or suspect record; damage nothing accounts for holds
/// the walk (reads of it already answer `Damaged`; a quarantined reopen will account for it).
fn judge_damaged(
    inner: &Inner,
    lsn: u64,
    header: Option<sealog::EmbedderHeader>,
    mode: Mode,
) -> Verdict {
    let unknown = || {
        inner.reclaimer.note_error(format!(
            "the record at LSN {lsn} is damaged and no LogDrive state accounts for it: the \
             ring's head stays before it until a quarantined reopen accounts for it"
        ));
        Verdict::Hold(Some(Pin::Unknown { lsn }))
    };
    let Some(header) = header else {
        return carry_suspects(inner, lsn, mode).unwrap_or_else(unknown);
    };
    // The header survived: which record it was is known.
    let decoded = [sealog::Kind::Data, sealog::Kind::Seal, sealog::Kind::Fence]
        .into_iter()
        .chain([sealog::Kind::Trim])
        .find_map(|kind| Record::decode(kind, &header));
    let Some(record) = decoded else {
        return Verdict::Garbage;
    };
    let shared = match logdrive_of(inner, &record) {
        Owner::Live(shared) => shared,
        Owner::Dying(key) => return Verdict::Hold(Some(Pin::Dying { lsn, key })),
        Owner::None => return Verdict::Garbage,
    };
    let mut live = lock(&shared);
    live.take_in(inner);
    if live.state.generation != record.generation {
        return Verdict::Garbage;
    }
    let known = live.state.damage_at(lsn);
    // Rot found since the open, in the record an address names: the address is damaged from
    // now on (reads already answer so), and the damage is carried forward like any other.
    let found = || match record.record_type {
        RecordType::Write if live.state.record_of(record.value) == Some(lsn) => Some(record.value),
        _ => None,
    };
    let damage = match (known, found()) {
        (Some(known), _) => Some(known),
        (None, Some(address)) => live.state.damage_found(address, lsn),
        (None, None) => None,
    };
    let Some((address, crc, len)) = damage else {
        // A damaged rewrite of a value held intact elsewhere: nothing to carry.
        if record.record_type == RecordType::Write && live.state.record_of(record.value).is_some() {
            return Verdict::Garbage;
        }
        drop(live);
        return unknown();
    };
    if mode == Mode::Advance {
        return Verdict::Needed;
    }
    if live.state.deleted {
        return Verdict::Hold(None);
    }
    let marker = Record::damaged(record.id, record.generation, address, crc, len);
    let carried = Carried::Damaged { address };
    match queue_copy(inner, Some(&shared), lsn, marker, Bytes::new(), carried) {
        Some(queued) => Verdict::Copied(vec![queued]),
        None => Verdict::Full(Vec::new()),
    }
}

/// A header-less damaged record at `lsn`: the suspect ranges it left on LogDrives, carried
/// forward, each copy queued under its LogDrive's mutex (`None` when no LogDrive accounts
/// for it).
fn carry_suspects(inner: &Inner, lsn: u64, mode: Mode) -> Option<Verdict> {
    let shared: Vec<Shared> = lock(&inner.registry).live.values().cloned().collect();
    let holders: Vec<Shared> = shared
        .into_iter()
        .filter(|live| {
            let mut live = lock(live);
            live.take_in(inner);
            !live.state.deleted && live.state.open_suspects().any(|suspect| suspect.lsn == lsn)
        })
        .collect();
    if holders.is_empty() {
        // A later damaged record of a range whose first LSN names its suspects, or one of a
        // range nothing was suspected of (every LogDrive sealed): nothing to carry.
        return was_damage_range(inner, lsn).then_some(Verdict::Garbage);
    }
    if mode == Mode::Advance {
        return Some(Verdict::Needed);
    }
    // Several LogDrives may hold suspects from one damaged range: a record each.
    let mut copies: Vec<Queued> = Vec::new();
    for live in holders {
        let guard = lock(&live);
        let (id, generation) = (guard.state.id, guard.state.generation);
        let suspects: Vec<Suspect> = guard
            .state
            .open_suspects()
            .filter(|suspect| suspect.lsn == lsn)
            .cloned()
            .collect();
        for suspect in suspects {
            let record = Record::new(
                RecordType::Suspect,
                id,
                generation,
                suspect.addresses.start,
                suspect.addresses.end,
            )
            .relocated();
            let carried = Carried::Suspect;
            match queue_copy(inner, Some(&live), lsn, record, Bytes::new(), carried) {
                Some(queued) => copies.push(queued),
                // The copies queued so far are waited for and applied; the head stays
                // before this record.
                None => return Some(Verdict::Full(copies)),
            }
        }
        drop(guard);
    }
    Some(Verdict::Copied(copies))
}

/// Whether `lsn` lies inside a header-less damaged range the open accounted for.
fn was_damage_range(inner: &Inner, lsn: u64) -> bool {
    inner
        .quarantine
        .iter()
        .any(|range| range.header.is_none() && range.lsns.contains(&lsn))
}

/// Queues a relocated copy under its LogDrive's mutex (held by the caller for LogDrive
/// records): `None` when it found no room.
fn queue_copy(
    inner: &Inner,
    live: Option<&Shared>,
    from: u64,
    record: Record,
    payload: Bytes,
    carried: Carried,
) -> Option<Queued> {
    let bytes = RECORD_HEADER_BYTES + payload.len() as u64;
    let admission = inner.admit(payload.len() as u64, Class::Relocation)?;
    let ticket = inner.append(&record, payload, admission).ok()?;
    let copy = Copy {
        live: live.cloned(),
        from,
        carried,
        bytes,
    };
    Some(Queued {
        ticket,
        copies: vec![copy],
    })
}

/// Queues copies of the creations the walk found needed, as one group, and empties
/// `creations`; also the LSN of the first creation it could not queue (its LogDrive's
/// deletion was queued since it was judged, or the ring had no room), before which the head
/// must stay.
///
/// The copies are queued under the registry's mutex, which a deletion holds while it
/// queues its record: so a creation's copy either lands before its LogDrive's deletion
/// (which replay then applies after it) or is not made, and never lands after it (which
/// replay would take for the LogDrive created again). The LogDrive's other records may land
/// on either side of the copy: replay keeps the records it meets before a creation.
fn queue_creations(inner: &Inner, creations: &mut Vec<Creation>) -> (Option<Queued>, Option<u64>) {
    let registry = lock(&inner.registry);
    let mut copies = Vec::with_capacity(creations.len());
    let mut entries = Vec::with_capacity(creations.len());
    let mut unqueued = None;
    let mut room: Option<crate::space::Admission> = None;
    for creation in creations.drain(..) {
        let current = registry
            .live
            .get(&creation.record.id)
            .is_some_and(|live| Arc::ptr_eq(live, &creation.live) && !lock(live).state.deleted);
        let admission = if current {
            inner.admit(0, Class::Relocation)
        } else {
            None
        };
        let Some(admission) = admission else {
            unqueued = unqueued.or(Some(creation.from));
            continue;
        };
        match room.as_mut() {
            Some(room) => room.merge(admission),
            None => room = Some(admission),
        }
        entries.push(creation.record.entry(Bytes::new()));
        copies.push(Copy {
            live: Some(creation.live),
            from: creation.from,
            carried: Carried::Create,
            bytes: RECORD_HEADER_BYTES,
        });
    }
    let Some(room) = room else {
        return (None, unqueued);
    };
    match inner.append_group(entries, room) {
        Ok(ticket) => (Some(Queued { ticket, copies }), unqueued),
        // Not queued (the drive stopped: the next look says so): none of them was made.
        Err(_) => {
            let first = copies.iter().map(|copy| copy.from).min();
            (None, first.into_iter().chain(unqueued).min())
        }
    }
}

/// A copy is durable at `to`: its LogDrive's state (or the generation marker) moves to it.
fn apply(inner: &Inner, live: &Option<Shared>, from: u64, carried: &Carried, to: u64) {
    if let Carried::Generation(generation) = carried {
        *lock(&inner.reclaimer.marker) = Some(Marker {
            lsn: to,
            generation: *generation,
        });
        return;
    }
    let Some(live) = live else {
        return;
    };
    let mut live = lock(live);
    let state = &mut live.state;
    match carried {
        Carried::Write { address } => state.relocated_write(*address, from, to),
        Carried::Create => state.hold_create(to),
        Carried::Control(control) => state.relocated_control(*control, to),
        Carried::Damaged { address } => state.relocated_damage(*address, from, to),
        Carried::Suspect => state.relocated_suspect(from, to),
        Carried::Generation(_) => {}
    }
}

/// The generation record a trim to `trim_to` needs written first, if any (unless the last
/// one carries the highest generation issued and lies past the trim); `Err` when it found
/// no room, and the trim must wait.
fn generation_record(inner: &Inner, trim_to: u64) -> Option<Result<Queued, ()>> {
    let generation = lock(&inner.registry).generation_max;
    if generation == 0 {
        return None;
    }
    let marker = *lock(&inner.reclaimer.marker);
    if marker.is_some_and(|marker| marker.generation == generation && marker.lsn > trim_to) {
        return None;
    }
    let record = Record::new(RecordType::Generation, 0, generation, generation, 0);
    let carried = Carried::Generation(generation);
    let copy = queue_copy(inner, None, 0, record, Bytes::new(), carried).ok_or(());
    if copy.is_ok() {
        let counters = &inner.reclaimer.counters;
        counters.generation_records.fetch_add(1, Ordering::Relaxed);
    }
    Some(copy)
}

/// The reclaimer's figures and the ring's space now.
pub(crate) fn stats(inner: &Inner) -> ReclaimStats {
    let reclaimer = &inner.reclaimer;
    let counters = &reclaimer.counters;
    let survey = survey(inner);
    let shape = inner.drive.shape();
    let live_bytes = survey.live_bytes;
    let refusals = inner.space.refusals();
    let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
    ReclaimStats {
        capacity_bytes: survey.capacity_bytes,
        occupied_bytes: survey.occupied_bytes,
        usable_bytes: shape.usable_bytes,
        live_bytes,
        dead_bytes: survey.dead_bytes(),
        queued_bytes: inner
            .space
            .sent_bytes()
            .saturating_sub(shape.settled_append_bytes),
        waiting_records: inner.space.waiting() as u64,
        space_amplification: survey.amplification(),
        reserve_bytes: inner.space.reserve_bytes,
        control_reserve_bytes: inner.space.control_reserve_bytes,
        head_lsn: shape.first_live_lsn,
        steps: load(&counters.steps),
        relocation_steps: load(&counters.relocation_steps),
        relocated_records: load(&counters.relocated_records),
        relocated_bytes: load(&counters.relocated_bytes),
        garbage_records: load(&counters.garbage_records),
        ring_trims: load(&counters.ring_trims),
        advances: load(&counters.advances),
        generation_records: load(&counters.generation_records),
        refused_writes: refusals[0],
        refused_controls: refusals[1],
        refused_copies: refusals[2],
        relocation_seconds: load(&counters.relocation_micros) as f64 / 1e6,
        last_error: lock(&reclaimer.last_error).clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{wait, LogDrive, LogDriveStore, StoreOptions};

    /// A store on a fresh 16 MiB ring, its reclaimer run by hand only.
    fn store() -> (tempfile::TempDir, LogDriveStore) {
        let directory = tempfile::tempdir().expect("temporary directory");
        let path = directory.path().join("ring");
        let format = sealog::FormatOptions::new(16 << 20).segment_size_bytes(1 << 20);
        sealog::format(&path, &format).expect("format");
        let policy = ReclaimPolicy::default().background(false);
        let options = StoreOptions::default().reclaim(policy);
        let store = LogDriveStore::open_with_options(&path, options).expect("open");
        (directory, store)
    }

    /// LogDrive `id`'s creation as a walk defers it: its state and its record's LSN.
    fn creation_of(store: &LogDriveStore, id: u64) -> Creation {
        let live = Arc::clone(&lock(&store.inner().registry).live[&id]);
        let (from, record) = {
            let mut guard = lock(&live);
            guard.take_in(store.inner());
            let state = &guard.state;
            let record = Record::new(RecordType::Create, id, state.generation, 1 << 40, 0);
            (state.holders.create.expect("durable"), record.relocated())
        };
        Creation { live, from, record }
    }

    /// A creation judged needed whose LogDrive's deletion is queued before the group is: no
    /// copy is made (it would land after the deletion, and replay would take the LogDrive
    /// for created again), and the head must stay before the creation. The live one beside
    /// it is copied; after a reopen the deleted LogDrive stays deleted.
    #[test]
    fn a_creation_whose_deletion_was_queued_since_the_walk_met_it_is_not_copied() {
        let (directory, store) = store();
        let kept = wait(store.create(1, 1 << 40)).expect("create");
        let deleted = wait(store.create(2, 1 << 40)).expect("create");
        let mut creations = vec![creation_of(&store, 1), creation_of(&store, 2)];
        let deleted_from = creations[1].from;
        drop(deleted);
        wait(store.delete(2)).expect("delete");
        let (queued, unqueued) = queue_creations(store.inner(), &mut creations);
        assert_eq!(unqueued, Some(deleted_from));
        let queued = queued.expect("the live LogDrive's copy");
        assert_eq!(queued.copies.len(), 1);
        assert!(Arc::ptr_eq(
            queued.copies[0].live.as_ref().expect("a LogDrive's copy"),
            &lock(&store.inner().registry).live[&1]
        ));
        queued.ticket.wait().expect("the copy");
        drop(kept);
        let path = store.drive().path().to_path_buf();
        store.close();
        drop(store);
        let store = LogDriveStore::open(&path, sealog::DriveOptions::default()).expect("reopen");
        assert_eq!(store.ids().expect("ids"), [1]);
        drop(directory);
    }

    /// A LogDrive whose deletion is queued and not yet durable is still needed: a crash
    /// could lose the deletion and bring the LogDrive back, so the head must not pass its
    /// records, whether the counts would let it skip them or a relocating walk meets them.
    /// Its 600 records of 4 KiB lie at the head (two segments and more, so that relocation
    /// has a segment's worth to win), before a live LogDrive's creation; with the deletion
    /// durable, they are garbage and the head moves past them.
    #[test]
    fn a_logdrive_whose_deletion_is_not_yet_durable_holds_the_head() {
        let (directory, store) = store();
        let dying = wait(store.create(1, 1 << 40)).expect("create");
        let value = Bytes::from(vec![7u8; 4096]);
        let writes: Vec<_> = (0..600)
            .map(|address| dying.write(address, 1, value.clone()))
            .collect();
        for write in writes {
            wait(write).expect("write");
        }
        let kept = wait(store.create(2, 1 << 40)).expect("create");
        wait(kept.write(0, 1, Bytes::from_static(b"kept"))).expect("write");
        let first_record = creation_of(&store, 1).from;
        // The deletion as queued (the LogDrive out of the live set, its state deleted) and
        // its record not yet known durable: what `delete` leaves until its flush completes.
        let generation = {
            let mut registry = lock(&store.inner().registry);
            let shared = registry.live.remove(&1).expect("live");
            let generation = {
                let mut live = lock(&shared);
                live.state.deleted = true;
                live.state.generation
            };
            registry.dying.insert((1, generation), shared);
            generation
        };
        store.reclaim_now().expect("reclaim");
        let head = store.drive().first_live_lsn();
        assert!(
            head <= first_record,
            "the head moved to {head}, past the dying LogDrive's creation at {first_record}"
        );
        // Durable: nothing holds its records any more.
        lock(&store.inner().registry).dying.remove(&(1, generation));
        store.reclaim_now().expect("reclaim");
        let head = store.drive().first_live_lsn();
        assert!(head > first_record + 600, "the head stayed at {head}");
        assert_eq!(
            wait(kept.read(0)).expect("read"),
            crate::ReadOutcome::Value(Bytes::from_static(b"kept"))
        );
        drop((dying, kept));
        store.close();
        drop(directory);
    }
}
