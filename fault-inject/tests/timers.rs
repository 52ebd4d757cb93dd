//! The drive's timers on a manual clock: a core stepped by hand and given a clock
//! (`DriveCore::recover_with_clock`) reads every time from it, so its tail marker is written
//! exactly when the idle time has passed on that clock, appends waiting for room
//! (`WhenFull::Wait`) give up exactly at their deadline on it, and group commit's gathering
//! window closes exactly when it says. Real time passes in each test too (a few milliseconds
//! of sleep, longer than every timer): a core that read the system clock anywhere would fire
//! early and fail them. A core without a clock (`DriveCore::recover`) has no timers at all.

mod common;

use std::time::Duration;

use common::{payload, Backend, Shape, TestRing};
use sealog::{AppendError, DriveCore, DriveOptions, ManualClock, Request, Ticket, Wait, WhenFull};
use sealog_fault::{FaultConfig, SimDevice};
use sealog_wal::{Kind, RingId};
use sealog_wal_kit::model::ModelWriter;

/// Longer than every timer in these tests: what a core reading the system clock would see.
const REAL_TIME_PASSING: Duration = Duration::from_millis(5);

/// A timer long enough never to fire in a test.
const AN_HOUR: Duration = Duration::from_secs(3600);

/// No gathering window.
const NO_WINDOW: Duration = Duration::ZERO;

/// Options with the tail marker's `idle` time and group commit's gathering `window`.
fn timers(idle: Duration, window: Duration) -> DriveOptions {
    DriveOptions {
        tail_marker_idle_us: idle.as_micros() as u64,
        group_gather_us: window.as_micros() as u64,
        ..DriveOptions::default()
    }
}

/// A freshly formatted simulated ring's core, recovered with `options` on `clock` (or
/// without timers when `clock` is `None`).
fn core(options: &DriveOptions, clock: Option<&ManualClock>) -> DriveCore<SimDevice> {
    let geometry = TestRing::new(Backend::Simulated, &Shape::small()).geometry;
    let image = ModelWriter::format(geometry, RingId([9; 16]));
    let device = SimDevice::for_ring(image, &geometry, FaultConfig::none(), 3).expect("a device");
    let path = std::path::Path::new("timers");
    match clock {
        Some(clock) => DriveCore::recover_with_clock(device, path, options, clock.clone()),
        None => DriveCore::recover(device, path, options),
    }
    .expect("opens")
}

/// Submits an append of `len` bytes and takes one turn without waiting.
fn append(core: &mut DriveCore<SimDevice>, seed: u64, len: usize) -> Ticket {
    let (request, ticket) = Request::append(Kind::Data, payload(seed, len));
    core.submit(request);
    core.step(Wait::No);
    ticket
}

/// Steps until nothing is on the device and nothing can start (a batch still gathering would
/// keep this turning until the clock is advanced: the tests call it when none is).
fn finish(core: &mut DriveCore<SimDevice>) {
    while core.is_busy() || core.has_queued_work() {
        core.step(Wait::ForCompletion);
    }
}

/// Appends queued for a batch (0 once their batch started, even if it completed already).
fn queued(core: &DriveCore<SimDevice>) -> usize {
    core.stats().queues.appends_queued
}

/// Lets real time pass, then takes a few turns: whatever a timer does must not happen here.
fn real_time_passes(core: &mut DriveCore<SimDevice>) {
    std::thread::sleep(REAL_TIME_PASSING);
    for _ in 0..4 {
        core.step(Wait::No);
    }
}

#[test]
fn a_tail_marker_is_written_exactly_when_the_idle_time_has_passed_on_the_clock() {
    let clock = ManualClock::new();
    let idle = Duration::from_millis(1);
    let mut core = core(&timers(idle, NO_WINDOW), Some(&clock));
    let tickets: Vec<_> = (0..3).map(|seed| append(&mut core, seed, 500)).collect();
    finish(&mut core);
    let last = tickets
        .into_iter()
        .map(|ticket| ticket.wait().expect("durable"))
        .max()
        .expect("three appends");
    assert!(core.lsn_covered() < last, "no marker yet: {last} uncovered");
    real_time_passes(&mut core);
    clock.advance(idle - Duration::from_nanos(1));
    core.step(Wait::No);
    finish(&mut core);
    assert_eq!(core.stats().tail_markers, 0, "one nanosecond short");
    clock.advance(Duration::from_nanos(1));
    core.step(Wait::No);
    finish(&mut core);
    assert_eq!(core.stats().tail_markers, 1, "the idle time passed");
    assert_eq!(core.lsn_covered(), last, "the marker covers every entry");
    // One marker per idle period: more idle time writes no second one.
    clock.advance(idle * 10);
    real_time_passes(&mut core);
    assert_eq!(core.stats().tail_markers, 1);
}

#[test]
fn appends_waiting_for_room_give_up_exactly_at_their_deadline_on_the_clock() {
    let clock = ManualClock::new();
    let timeout = Duration::from_millis(1);
    let options = DriveOptions {
        when_full: WhenFull::Wait(timeout),
        ..timers(AN_HOUR, NO_WINDOW)
    };
    let mut core = core(&options, Some(&clock));
    // Fill the ring (nothing is trimmed) until an append waits for room.
    let mut seed = 0;
    let first = loop {
        let ticket = append(&mut core, seed, 30_000);
        seed += 1;
        finish(&mut core);
        if !ticket.is_complete() {
            break ticket;
        }
        ticket.wait().expect("durable while there is room");
        assert!(seed < 1_000, "the ring never filled");
    };
    assert_eq!(core.stats().queues.appends_queued, 1, "waiting for room");
    real_time_passes(&mut core);
    clock.advance(timeout - Duration::from_nanos(1));
    let second = append(&mut core, seed, 100);
    assert!(!first.is_complete(), "one nanosecond short of its deadline");
    clock.advance(Duration::from_nanos(1));
    core.step(Wait::No);
    assert!(matches!(
        first.try_outcome(),
        Some(Err(AppendError::RingFull { .. }))
    ));
    assert!(!second.is_complete(), "the second one's wait began later");
    clock.advance(timeout - Duration::from_nanos(2));
    core.step(Wait::No);
    assert!(
        !second.is_complete(),
        "one nanosecond short of its deadline"
    );
    clock.advance(Duration::from_nanos(1));
    core.step(Wait::No);
    assert!(matches!(
        second.try_outcome(),
        Some(Err(AppendError::RingFull { .. }))
    ));
    assert_eq!(core.stats().queues.appends_queued, 0);
}

#[test]
fn a_batch_gathers_its_group_until_the_window_closes_on_the_clock() {
    let clock = ManualClock::new();
    let window = Duration::from_micros(100);
    let mut core = core(&timers(AN_HOUR, window), Some(&clock));
    // Nothing was in flight: the first batch starts at once, with the three appends queued.
    let (requests, first_group): (Vec<_>, Vec<_>) = (0..3)
        .map(|seed| Request::append(Kind::Data, payload(seed, 200)))
        .unzip();
    requests
        .into_iter()
        .for_each(|request| core.submit(request));
    core.step(Wait::No);
    assert_eq!(queued(&core), 0);
    finish(&mut core);
    assert!(first_group.iter().all(Ticket::is_complete));
    assert_eq!(core.stats().batches, 1);
    // The three writers just acknowledged are expected back: two are not the group...
    let second_group: Vec<_> = (3..5).map(|seed| append(&mut core, seed, 200)).collect();
    real_time_passes(&mut core);
    assert_eq!(queued(&core), 2, "gathering for the third");
    // ...and the third makes it whole, so the batch starts before the window closes.
    let third = append(&mut core, 5, 200);
    assert_eq!(queued(&core), 0, "the whole group starts at once");
    finish(&mut core);
    assert!(second_group.iter().chain([&third]).all(Ticket::is_complete));
    assert_eq!(core.stats().batches, 2);
    // A smaller group waits out the window on the clock, to the nanosecond.
    let late = append(&mut core, 6, 200);
    real_time_passes(&mut core);
    clock.advance(window - Duration::from_nanos(1));
    core.step(Wait::No);
    assert_eq!(queued(&core), 1, "one nanosecond short of the window");
    clock.advance(Duration::from_nanos(1));
    core.step(Wait::No);
    assert_eq!(queued(&core), 0, "the window closed");
    finish(&mut core);
    assert_eq!(late.wait(), Ok(7));
    let stats = core.stats();
    assert_eq!(stats.batches, 3);
    // The device sat idle for exactly the window before the last batch.
    assert_eq!(stats.idle_gap_us.max(), 100);
}

#[test]
fn a_core_without_a_clock_has_no_timers() {
    let mut core = core(&timers(Duration::ZERO, Duration::from_secs(1)), None);
    let first: Vec<_> = (0..3).map(|seed| append(&mut core, seed, 200)).collect();
    finish(&mut core);
    // No gathering window: a lone append starts at once, whatever group was acknowledged.
    let lone = append(&mut core, 3, 200);
    assert_eq!(queued(&core), 0, "no gathering without a clock");
    finish(&mut core);
    assert!(first.iter().chain([&lone]).all(Ticket::is_complete));
    // No idle timer: a marker only when the caller sends the event.
    real_time_passes(&mut core);
    assert_eq!(core.stats().tail_markers, 0);
    core.on_idle_timer();
    finish(&mut core);
    assert_eq!(core.stats().tail_markers, 1);
    assert_eq!(core.lsn_covered(), core.lsn_durable());
}
