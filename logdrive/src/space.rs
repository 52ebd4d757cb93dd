//! Ring room for the store's records, and the records that wait for it.
//!
//! Relocation keeps a reserve of the ring for itself, so that a ring clients filled can
//! always be reclaimed, and control records keep a smaller one above it, so that a client
//! refused a write can still delete, trim, fence and seal (`geometry` says how large each
//! is and which rings can keep them). A record is admitted when what the ring would have left
//! after it covers the reserves below its class.
//!
//! **Exact room.** The engine publishes the ring's usable bytes and the bytes of every append
//! it has settled, placed in a batch or refused (`sealog::Drive::room`); the store counts the
//! bytes of every record it sends. Sent less settled is what still waits in the engine to take
//! room, so the room left is the usable bytes less that, and a record placed is never counted
//! both as taken and as waiting (the store once held each record's bytes until its outcome came
//! back, which counted a window of placed batches, and the reclaimer's copies while it waited
//! for them, twice, and refused control records on a ring that had room for them). An
//! admission counts its bytes as sent at once, before its record is handed over, and gives
//! them back if the record is never sent (refused by its checks, or a rewrite that writes
//! nothing).
//!
//! **Waiting.** A write or a control record that finds no room may wait for it, up to the
//! store's deadline ([`crate::StoreOptions::full_wait`]). It waits here, in the store's own
//! admission, not in the engine's queue (whose first-in, first-out order would put the
//! reclaimer's copies and the clients' deletions behind the very writes waiting for the room
//! only they can make) and not under its LogDrive's mutex. Waiting writes are admitted in
//! the order they came; a control record needs less room than a write, so it never waits
//! behind one. A waiting record's work (its checks and its queueing, under its LogDrive's
//! mutex) is a continuation that runs when room is granted, on the thread that granted it (the
//! reclaimer's, once it has trimmed the ring), whether or not anyone still awaits its future:
//! an operation is issued when it is called.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use sealog::{AppendRoom, Geometry};

use crate::api::LogDriveError;
use crate::reclaim::policy::ReclaimPolicy;
use crate::sync::lock;

/// Who is asking for room.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Class {
    /// A client's write: leaves both reserves.
    Write,
    /// A creation, seal or fence: may use the control reserve.
    Control,
    /// A deletion or trim: may use the control reserve and the relocation reserve's last
    /// batch (it frees records, which relocation then wins back).
    Release,
    /// A relocated copy: may use everything.
    Relocation,
}

impl Class {
    /// Its refusal counter: writes, control records (deletions and trims among them),
    /// copies.
    pub fn counter(self) -> usize {
        match self {
            Class::Write => 0,
            Class::Control | Class::Release => 1,
            Class::Relocation => 2,
        }
    }
}

/// What a waiting record does once it is granted room (`Ok`) or given up on (`Err`: its
/// deadline passed, the ring has nothing left to reclaim, or the store stopped).
pub(crate) type Continuation = Box<dyn FnOnce(Result<Admission, LogDriveError>) + Send>;

/// A record waiting for room.
struct Waiter {
    class: Class,
    bytes: u64,
    deadline: Instant,
    resume: Continuation,
}

/// The room the store's records take.
pub(crate) struct Space {
    /// Ring bytes of the records the store has sent (or is about to send) to its drive
    /// since the open.
    sent_bytes: AtomicU64,
    /// What relocation keeps.
    pub reserve_bytes: u64,
    /// What relocation needs to free the head's segment: what deletions and trims keep.
    pub need_bytes: u64,
    /// What control records keep below client writes.
    pub control_reserve_bytes: u64,
    /// Records refused for room, by class (write, control, relocation).
    refusals: [AtomicU64; 3],
    waiters: Mutex<Waiters>,
    /// Some write waits (set under `waiters`' lock): a new write queues behind it.
    writes_wait: AtomicBool,
}

#[derive(Default)]
struct Waiters {
    queue: VecDeque<Waiter>,
}

impl Waiters {
    fn writes_wait(&self) -> bool {
        self.queue.iter().any(|waiter| waiter.class == Class::Write)
    }
}

impl std::fmt::Debug for Space {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Space")
            .field("sent_bytes", &self.sent_bytes)
            .field("reserve_bytes", &self.reserve_bytes)
            .field("control_reserve_bytes", &self.control_reserve_bytes)
            .finish_non_exhaustive()
    }
}

/// The room one sent record takes: its payload and its entry header.
pub(crate) fn record_bytes(payload_len: u64) -> u64 {
    crate::record::RECORD_HEADER_BYTES + payload_len
}

impl Space {
    /// The room accounting for a ring of `geometry` under `policy` (an explicit reserve below
    /// what relocation needs is refused).
    pub fn for_ring(geometry: &Geometry, policy: &ReclaimPolicy) -> Result<Space, String> {
        let minimum = crate::geometry::relocation_reserve_min_bytes(geometry);
        let reserve_bytes = match policy.reserve_bytes {
            Some(reserve) if reserve < minimum => {
                return Err(format!(
                    "a relocation reserve of {reserve} bytes is below the {minimum} relocation \
                     needs on this ring (a segment of {} bytes and two batches)",
                    geometry.segment_size_bytes
                ))
            }
            Some(reserve) => reserve,
            None => minimum,
        };
        let control_reserve_bytes = crate::geometry::control_reserve_bytes(geometry);
        let capacity = geometry.segment_size_bytes * u64::from(geometry.segment_count);
        if 2 * (reserve_bytes + control_reserve_bytes) > capacity {
            return Err(format!(
                "a relocation reserve of {reserve_bytes} bytes and a control reserve of \
                 {control_reserve_bytes} would take over half of the ring's {capacity} bytes"
            ));
        }
        let need_bytes = crate::geometry::relocation_need_bytes(geometry).min(reserve_bytes);
        Ok(Space::with_reserves(
            (reserve_bytes, need_bytes),
            control_reserve_bytes,
        ))
    }

    fn with_reserves((reserve_bytes, need_bytes): (u64, u64), control_reserve_bytes: u64) -> Space {
        Space {
            sent_bytes: AtomicU64::new(0),
            reserve_bytes,
            need_bytes,
            control_reserve_bytes,
            refusals: Default::default(),
            waiters: Mutex::new(Waiters::default()),
            writes_wait: AtomicBool::new(false),
        }
    }

    /// What a record of `class` must leave of the ring.
    fn kept(&self, class: Class) -> u64 {
        match class {
            Class::Write => self.reserve_bytes + self.control_reserve_bytes,
            Class::Control => self.reserve_bytes,
            Class::Release => self.need_bytes,
            Class::Relocation => 0,
        }
    }

    /// The room left for what the store sends next: the usable bytes less what it sent that
    /// the drive has not yet settled.
    pub fn room_bytes(&self, room: AppendRoom) -> u64 {
        // The drive's figures first: the sent bytes read after them count every record the
        // settled bytes count (a record is sent before the drive can settle it).
        let sent = self.sent_bytes.load(Ordering::Acquire);
        let waiting = sent.saturating_sub(room.settled_append_bytes);
        room.usable_bytes.saturating_sub(waiting)
    }

    /// Admits `bytes` of a record of `class` if the room `room` reads (the drive's, read
    /// now) leaves the reserves below it; the sent bytes count it from now on.
    fn try_admit(
        self: &Arc<Space>,
        room: &dyn Fn() -> AppendRoom,
        bytes: u64,
        class: Class,
    ) -> Option<Admission> {
        let needed = bytes.saturating_add(self.kept(class));
        loop {
            let drive = room();
            let sent = self.sent_bytes.load(Ordering::Acquire);
            let waiting = sent.saturating_sub(drive.settled_append_bytes);
            if drive.usable_bytes.saturating_sub(waiting) < needed {
                return None;
            }
            let exchanged = self.sent_bytes.compare_exchange_weak(
                sent,
                sent + bytes,
                Ordering::AcqRel,
                Ordering::Acquire,
            );
            if exchanged.is_ok() {
                return Some(Admission {
                    space: Arc::clone(self),
                    bytes,
                });
            }
        }
    }

    /// Admits a record at once if there is room for it now and no earlier write of its
    /// class waits (writes keep their order); `None` when it must wait (or be refused).
    pub fn admit(
        self: &Arc<Space>,
        room: &dyn Fn() -> AppendRoom,
        bytes: u64,
        class: Class,
    ) -> Option<Admission> {
        if class == Class::Write && self.writes_wait.load(Ordering::Acquire) {
            self.refused(class);
            return None;
        }
        let admitted = self.try_admit(room, bytes, class);
        if admitted.is_none() {
            self.refused(class);
        }
        admitted
    }

    fn refused(&self, class: Class) {
        self.refusals[class.counter()].fetch_add(1, Ordering::Relaxed);
    }

    /// Queues a record of `class` and `bytes` to wait for room until `deadline`, then grants
    /// what the room allows now (room may have come between the refusal and the queueing).
    pub fn wait(
        self: &Arc<Space>,
        room: &dyn Fn() -> AppendRoom,
        (class, bytes): (Class, u64),
        deadline: Instant,
        resume: Continuation,
    ) {
        {
            let mut waiters = lock(&self.waiters);
            waiters.queue.push_back(Waiter {
                class,
                bytes,
                deadline,
                resume,
            });
            self.writes_wait
                .store(waiters.writes_wait(), Ordering::Release);
        }
        self.grant(room);
    }

    /// Admits the waiting records that the room now allows, in their order (a write that
    /// does not fit holds every later write back, not the control records), and runs their
    /// continuations on this thread, outside the queue's lock. How many were granted.
    pub fn grant(self: &Arc<Space>, room: &dyn Fn() -> AppendRoom) -> usize {
        let mut granted = Vec::new();
        {
            let mut waiters = lock(&self.waiters);
            let mut writes_held = false;
            let mut index = 0;
            while index < waiters.queue.len() {
                let waiter = &waiters.queue[index];
                let admitted = match waiter.class {
                    Class::Write if writes_held => None,
                    class => self.try_admit(room, waiter.bytes, class),
                };
                match admitted {
                    Some(admission) => {
                        let waiter = waiters.queue.remove(index).expect("indexed");
                        granted.push((waiter.resume, admission));
                    }
                    None => {
                        writes_held |= waiter.class == Class::Write;
                        index += 1;
                    }
                }
            }
            self.writes_wait
                .store(waiters.writes_wait(), Ordering::Release);
        }
        let count = granted.len();
        for (resume, admission) in granted {
            resume(Ok(admission));
        }
        count
    }

    /// Gives up on the waiters that `give_up` picks (by class and deadline), answering each
    /// `error`; how many.
    fn drop_waiters(
        &self,
        give_up: impl Fn(&Waiter) -> bool,
        error: impl Fn() -> LogDriveError,
    ) -> usize {
        let dropped: VecDeque<Waiter> = {
            let mut waiters = lock(&self.waiters);
            let (dropped, kept) = std::mem::take(&mut waiters.queue)
                .into_iter()
                .partition(|waiter| give_up(waiter));
            waiters.queue = kept;
            self.writes_wait
                .store(waiters.writes_wait(), Ordering::Release);
            dropped
        };
        let count = dropped.len();
        for waiter in dropped {
            self.refused(waiter.class);
            (waiter.resume)(Err(error()));
        }
        count
    }

    /// The waiters whose deadline has passed by `now` are refused the room (`RingFull`).
    pub fn expire(&self, now: Instant) -> usize {
        self.drop_waiters(|waiter| waiter.deadline <= now, || LogDriveError::RingFull)
    }

    /// The waiting writes are refused the room at once: the ring has nothing left the
    /// reclaimer could free for them (only a client's trim or deletion can make room, and
    /// their records do not wait behind writes).
    pub fn refuse_writes(&self) -> usize {
        self.drop_waiters(
            |waiter| waiter.class == Class::Write,
            || LogDriveError::RingFull,
        )
    }

    /// Every waiter gets `error` (the store stopped).
    pub fn fail_all(&self, error: impl Fn() -> LogDriveError) -> usize {
        self.drop_waiters(|_| true, error)
    }

    /// The earliest deadline of a waiting record.
    pub fn next_deadline(&self) -> Option<Instant> {
        let waiters = lock(&self.waiters);
        waiters.queue.iter().map(|waiter| waiter.deadline).min()
    }

    /// Whether a control record waits for room (the control reserve is spent).
    pub fn controls_wait(&self) -> bool {
        let waiters = lock(&self.waiters);
        waiters
            .queue
            .iter()
            .any(|waiter| matches!(waiter.class, Class::Control | Class::Release))
    }

    /// Records waiting for room now.
    pub fn waiting(&self) -> usize {
        lock(&self.waiters).queue.len()
    }

    /// Bytes sent to the drive since the open (for the store's figures).
    pub fn sent_bytes(&self) -> u64 {
        self.sent_bytes.load(Ordering::Acquire)
    }

    /// Records refused for room: client writes, control records, relocated copies.
    pub fn refusals(&self) -> [u64; 3] {
        [0, 1, 2].map(|class| self.refusals[class].load(Ordering::Relaxed))
    }
}

/// Room taken for one record: counted as sent from its admission; given back when dropped
/// before [`Admission::sent`] (its record was never handed to the drive).
#[derive(Debug)]
pub(crate) struct Admission {
    space: Arc<Space>,
    bytes: u64,
}

impl Admission {
    /// Its record was handed to the drive, which settles its bytes from now on.
    pub fn sent(mut self) {
        self.bytes = 0;
    }

    /// Takes `other`'s room into this one (records sent together, as one group).
    pub fn merge(&mut self, mut other: Admission) {
        self.bytes += other.bytes;
        other.bytes = 0;
    }
}

impl Drop for Admission {
    fn drop(&mut self) {
        if self.bytes > 0 {
            self.space
                .sent_bytes
                .fetch_sub(self.bytes, Ordering::AcqRel);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    fn space() -> Arc<Space> {
        Arc::new(Space::with_reserves((1000, 900), 100))
    }

    /// A drive whose usable bytes are `usable` and which has settled `settled`.
    fn room(usable: u64, settled: u64) -> impl Fn() -> AppendRoom {
        move || AppendRoom {
            usable_bytes: usable,
            settled_append_bytes: settled,
        }
    }

    #[test]
    fn writes_leave_both_reserves_controls_one_and_relocation_none() {
        let space = space();
        assert!(space.admit(&room(1199, 0), 100, Class::Write).is_none());
        let write = space
            .admit(&room(1200, 0), 100, Class::Write)
            .expect("room");
        assert_eq!(space.sent_bytes(), 100);
        // The write is not yet settled: it still takes room.
        assert!(space.admit(&room(1200, 0), 101, Class::Control).is_none());
        let control = space
            .admit(&room(1200, 0), 100, Class::Control)
            .expect("room");
        assert!(space
            .admit(&room(1200, 0), 1001, Class::Relocation)
            .is_none());
        let copy = space
            .admit(&room(1200, 0), 1000, Class::Relocation)
            .expect("room");
        assert_eq!(space.sent_bytes(), 1200);
        // Never sent: the room comes back.
        drop((write, control, copy));
        assert_eq!(space.sent_bytes(), 0);
        assert_eq!(space.refusals(), [1, 1, 1]);
    }

    /// A record the drive placed is counted once: the usable bytes shrank by it and the
    /// settled bytes grew by it, so the room is what it was less the record.
    #[test]
    fn a_placed_record_is_not_counted_twice() {
        let space = space();
        space
            .admit(&room(5000, 0), 700, Class::Write)
            .expect("room")
            .sent();
        assert_eq!(space.room_bytes(room(5000, 0)()), 4300);
        // Placed: usable down by 700 (and a padding block), settled up by 700.
        assert_eq!(space.room_bytes(room(4300 - 96, 700)()), 4204);
        // A newer usable figure than the settled one (read in between): counted twice for
        // a moment, never as neither.
        assert_eq!(space.room_bytes(room(4300 - 96, 0)()), 3504);
    }

    #[test]
    fn more_writers_than_room_get_no_more_than_the_room() {
        // 32 threads race for room for 10 records: exactly 10 are admitted at a time.
        let space = space();
        let admitted: Vec<_> = std::thread::scope(|scope| {
            let threads: Vec<_> = (0..32)
                .map(|_| {
                    let space = Arc::clone(&space);
                    scope.spawn(move || space.admit(&room(2100, 0), 100, Class::Write))
                })
                .collect();
            threads.into_iter().map(|t| t.join().unwrap()).collect()
        });
        assert_eq!(admitted.iter().flatten().count(), 10);
        drop(admitted);
        assert_eq!(space.sent_bytes(), 0);
    }

    /// Waiting writes are granted in order; a control record does not wait behind a write
    /// that does not fit; a new write queues behind the waiting ones; deadlines refuse.
    #[test]
    fn waiters_are_granted_in_order_and_controls_pass_writes() {
        let space = space();
        let order = Arc::new(Mutex::new(Vec::new()));
        let resume = |name: &'static str| -> Continuation {
            let order = Arc::clone(&order);
            Box::new(move |admitted: Result<Admission, LogDriveError>| {
                lock(&order).push((name, admitted.map(Admission::sent)));
            })
        };
        let soon = Instant::now() + Duration::from_secs(60);
        let full = room(1100, 0);
        space.wait(&full, (Class::Write, 500), soon, resume("big write"));
        space.wait(&full, (Class::Write, 10), soon, resume("small write"));
        assert!(
            space.admit(&full, 10, Class::Write).is_none(),
            "queues behind"
        );
        space.wait(&full, (Class::Control, 50), soon, resume("control"));
        assert_eq!(lock(&order).clone(), [("control", Ok(()))]);
        // Room for the small write but not the big one: the small one keeps waiting.
        assert_eq!(space.grant(&room(1100 + 60 + 100, 0)), 0);
        assert_eq!(space.grant(&room(1100 + 50 + 510, 0)), 2);
        let names: Vec<_> = lock(&order).iter().map(|(name, _)| *name).collect();
        assert_eq!(names, ["control", "big write", "small write"]);
        assert_eq!(space.waiting(), 0);
        let expired = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&expired);
        let past = Instant::now();
        let resume: Continuation = Box::new(move |admitted| {
            assert_eq!(admitted.map(|_| ()), Err(LogDriveError::RingFull));
            counter.fetch_add(1, Ordering::SeqCst);
        });
        space.wait(&full, (Class::Write, 10), past, resume);
        assert_eq!(space.expire(Instant::now()), 1);
        assert_eq!(expired.load(Ordering::SeqCst), 1);
    }
}
