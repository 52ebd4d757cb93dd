//! The AtomicLog's scenarios (docs/composition.md, "The AtomicLog"): the window, completion
//! order, the fast and slow paths of check_tail, a write racing the seal, and zombies.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use common::{atomic_options, payload, HookDrive};
use sealog_logdrive::{wait, LogDrive, MemLogDrive};
use sealog_vlog::{AtomicLog, LogError, Tail};

/// An AtomicLog whose sequencer starts at `first`, on a data drive holding every slot
/// below it (the appends before the scenario).
fn log_on(data: &Arc<MemLogDrive>, seal: Arc<dyn LogDrive>, first: u64, window: u64) -> AtomicLog {
    prefill(data, first);
    let options = atomic_options(window, Duration::from_secs(10));
    AtomicLog::new(data.clone(), seal, first, options)
}

fn prefill(data: &MemLogDrive, first: u64) {
    for slot in 0..first {
        wait(data.write(slot, 0, payload(slot))).unwrap();
    }
}

/// Writes and completes `slot` by hand, as its appender would.
fn finish(log: &AtomicLog, slot: u64) {
    wait(log.data().write(slot, 0, payload(slot))).unwrap();
    wait(log.sequencer().expect("a local sequencer").complete(slot)).unwrap();
}

fn pause() {
    thread::sleep(Duration::from_millis(30));
}

#[test]
fn al_1_the_fifth_append_waits_for_the_first_slot() {
    let data = Arc::new(MemLogDrive::new());
    let log = Arc::new(log_on(&data, Arc::new(MemLogDrive::new()), 0, 4));
    for expected in 0..4 {
        assert_eq!(
            wait(log.sequencer().expect("a local sequencer").acquire()).unwrap(),
            expected
        );
    }
    let fifth = {
        let log = log.clone();
        thread::spawn(move || wait(log.append(payload(4))))
    };
    pause();
    assert!(
        !data.contents().contains_key(&4),
        "slot 4 was handed out inside a full window"
    );
    for slot in 0..4 {
        finish(&log, slot);
    }
    assert_eq!(fifth.join().unwrap().unwrap(), 4);
}

#[test]
fn al_1_figure_3_slot_13_waits_while_slot_5_is_unwritten() {
    let data = Arc::new(MemLogDrive::new());
    let log = Arc::new(log_on(&data, Arc::new(MemLogDrive::new()), 0, 8));
    for slot in 0..5 {
        wait(log.sequencer().expect("a local sequencer").acquire()).unwrap();
        finish(&log, slot);
    }
    for _ in 5..13 {
        wait(log.sequencer().expect("a local sequencer").acquire()).unwrap();
    }
    let thirteenth = {
        let log = log.clone();
        thread::spawn(move || wait(log.sequencer().expect("a local sequencer").acquire()))
    };
    pause();
    assert!(
        !thirteenth.is_finished(),
        "slot 13 was handed out with slot 5 unwritten"
    );
    finish(&log, 5);
    assert_eq!(thirteenth.join().unwrap().unwrap(), 13);
}

#[test]
fn al_2_completions_are_acknowledged_in_slot_order() {
    let data = Arc::new(MemLogDrive::new());
    let log = Arc::new(log_on(&data, Arc::new(MemLogDrive::new()), 3, 8));
    assert_eq!(
        wait(log.sequencer().expect("a local sequencer").acquire()).unwrap(),
        3
    );
    let appends: Vec<_> = (4..6)
        .map(|i| {
            let log = log.clone();
            thread::spawn(move || wait(log.append(payload(i))))
        })
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let tails = {
        let (log, stop) = (log.clone(), stop.clone());
        thread::spawn(move || {
            let mut seen = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                seen.push(wait(log.check_tail()).unwrap().position);
            }
            seen
        })
    };
    pause();
    assert!(appends.iter().all(|append| !append.is_finished()));
    finish(&log, 3);
    let mut positions: Vec<u64> = appends
        .into_iter()
        .map(|a| a.join().unwrap().unwrap())
        .collect();
    positions.sort();
    assert_eq!(positions, [4, 5]);
    stop.store(true, Ordering::Relaxed);
    let seen = tails.join().unwrap();
    assert!(
        seen.iter().all(|tail| *tail == 3 || *tail == 6),
        "tails seen: {seen:?}"
    );
    assert_eq!(wait(log.check_tail()).unwrap().position, 6);
}

#[test]
fn al_3_after_a_seal_no_tail_falls_back_to_the_sequencers() {
    let data = Arc::new(MemLogDrive::new());
    let log = log_on(&data, Arc::new(MemLogDrive::new()), 0, 16);
    for i in 0..9 {
        assert_eq!(wait(log.append(payload(i))).unwrap(), i);
    }
    // The writer of slot 9 writes, then stalls before completing.
    assert_eq!(
        wait(log.sequencer().expect("a local sequencer").acquire()).unwrap(),
        9
    );
    wait(data.write(9, 0, payload(9))).unwrap();
    assert_eq!(
        log.sequencer().expect("a local sequencer").tail().unwrap(),
        9
    );
    wait(log.seal(1)).unwrap();
    let sealed = Tail {
        position: 10,
        sealed: true,
    };
    assert_eq!(wait(log.check_tail()).unwrap(), sealed);
    // The fast path reads 9 from the sequencer, then the seal bit, and discards the 9.
    for _ in 0..3 {
        assert_eq!(wait(log.check_tail()).unwrap(), sealed);
    }
}

#[test]
fn al_4_an_append_that_meets_the_seal_fails_and_is_in_the_log() {
    let data = Arc::new(MemLogDrive::new());
    let seal_drive = Arc::new(MemLogDrive::new());
    let hooked = Arc::new(HookDrive::new(seal_drive.clone()));
    let log = Arc::new(log_on(&data, hooked.clone(), 10, 16));
    // The seal lands between the append's completion and its seal check.
    let sealer = log_on(&data, seal_drive.clone(), 10, 16);
    hooked.on_next_read(move || wait(sealer.seal(1)).unwrap());
    let failed = wait(log.append(payload(10))).unwrap_err();
    assert_eq!(
        failed,
        LogError::Sealed {
            position: Some(10),
            written: true
        }
    );
    assert!(!failed.is_definite());
    let tail = wait(log.check_tail()).unwrap();
    assert_eq!((tail.position, tail.sealed), (11, true));
    // Slot 10 is in the log though its append failed: a retry appends it again, and a
    // reader dedupes by the entry's own sequence number.
    assert_eq!(wait(log.read(10)).unwrap(), Some(payload(10)));
}

#[test]
fn al_5_a_zombie_append_raises_a_sealed_logs_tail() {
    let data = Arc::new(MemLogDrive::new());
    let log = log_on(&data, Arc::new(MemLogDrive::new()), 0, 16);
    for i in 0..11 {
        wait(log.append(payload(i))).unwrap();
    }
    // B takes slot 11 before the seal and writes it after the sealed tail was taken.
    assert_eq!(
        wait(log.sequencer().expect("a local sequencer").acquire()).unwrap(),
        11
    );
    wait(log.seal(1)).unwrap();
    assert_eq!(wait(log.check_tail()).unwrap().position, 11);
    wait(data.write(11, 0, payload(11))).unwrap();
    wait(log.sequencer().expect("a local sequencer").complete(11)).unwrap();
    let later = wait(log.check_tail()).unwrap();
    assert_eq!((later.position, later.sealed), (12, true));
    // Its append fails at the seal check.
    let zombie = wait(log.append(payload(12))).unwrap_err();
    assert!(matches!(zombie, LogError::Sealed { .. }));
}

#[test]
fn al_6_a_slot_held_by_a_dead_client_stalls_the_slots_after_it() {
    let data = Arc::new(MemLogDrive::new());
    prefill(&data, 7);
    let options = atomic_options(4, Duration::from_millis(100));
    let log = Arc::new(AtomicLog::new(
        data.clone(),
        Arc::new(MemLogDrive::new()),
        7,
        options,
    ));
    // Slot 7 is acquired by a client that dies.
    assert_eq!(
        wait(log.sequencer().expect("a local sequencer").acquire()).unwrap(),
        7
    );
    let later: Vec<_> = (8..10)
        .map(|i| {
            let log = log.clone();
            thread::spawn(move || wait(log.append(payload(i))))
        })
        .collect();
    for append in later {
        let stalled = append.join().unwrap().unwrap_err();
        assert!(
            matches!(stalled, LogError::Stalled { written: true, .. }),
            "{stalled:?}"
        );
        assert!(!stalled.is_definite());
    }
    // Sealed, the slow path finds T = 7: slots 8 and 9 are written but past it.
    wait(log.seal(1)).unwrap();
    assert_eq!(wait(log.check_tail()).unwrap().position, 7);
}

#[test]
fn a_window_the_drive_cannot_scan_is_refused_when_the_log_is_built() {
    let data: Arc<dyn LogDrive> = Arc::new(MemLogDrive::with_limits(1 << 20, 8));
    let refused = wait(AtomicLog::open(
        data,
        Arc::new(MemLogDrive::new()),
        0,
        atomic_options(16, Duration::from_secs(1)),
    ));
    assert!(matches!(refused, Err(LogError::InvalidConfig { .. })));
}

#[test]
fn with_the_sequencer_gone_check_tail_seals_first() {
    let data = Arc::new(MemLogDrive::new());
    let log = log_on(&data, Arc::new(MemLogDrive::new()), 0, 16);
    for i in 0..3 {
        wait(log.append(payload(i))).unwrap();
    }
    log.sequencer().expect("a local sequencer").fail();
    let tail = wait(log.check_tail()).unwrap();
    assert_eq!((tail.position, tail.sealed), (3, true));
    assert_eq!(
        wait(log.append(payload(3))),
        Err(LogError::Sealed {
            position: None,
            written: false
        })
    );
}

#[test]
fn a_window_over_a_stripes_share_of_its_childrens_window_is_refused() {
    // Two children keeping windows of 8 each: a stripe keeps 16, split 8 and 8.
    let stripe = |_: ()| -> Arc<dyn LogDrive> {
        let children = (0..2)
            .map(|_| Arc::new(MemLogDrive::with_limits(1 << 20, 8)) as Arc<dyn LogDrive>)
            .collect();
        Arc::new(sealog_logdrive::StripedLogDrive::new(children).unwrap())
    };
    let open = |window: u64| {
        let options = atomic_options(window, Duration::from_secs(1));
        wait(AtomicLog::open(
            stripe(()),
            Arc::new(MemLogDrive::new()),
            0,
            options,
        ))
    };
    assert!(
        matches!(open(32), Err(LogError::InvalidConfig { .. })),
        "16 per child"
    );
    assert!(
        matches!(open(15), Err(LogError::InvalidConfig { .. })),
        "not split in two"
    );
    assert!(open(16).is_ok());
}

#[test]
fn an_append_behind_a_full_window_gives_up_at_its_deadline_holding_nothing() {
    let data = Arc::new(MemLogDrive::new());
    let options = atomic_options(2, Duration::from_millis(50));
    let log = Arc::new(AtomicLog::new(
        data.clone(),
        Arc::new(MemLogDrive::new()),
        0,
        options,
    ));
    // Slot 0's client dies; slot 1's append stalls behind it; a third finds no room.
    assert_eq!(
        wait(log.sequencer().expect("a local sequencer").acquire()).unwrap(),
        0
    );
    let second = {
        let log = log.clone();
        thread::spawn(move || wait(log.append(payload(1))))
    };
    pause();
    let third = wait(log.append(payload(2))).unwrap_err();
    assert_eq!(third, LogError::WindowFull { tail: 0 });
    assert!(third.is_definite());
    assert!(matches!(
        second.join().unwrap(),
        Err(LogError::Stalled { position: 1, .. })
    ));
    assert!(!data.contents().contains_key(&2));
}

#[test]
fn once_the_seal_is_seen_no_slot_is_handed_out() {
    let data = Arc::new(MemLogDrive::new());
    let log = Arc::new(log_on(&data, Arc::new(MemLogDrive::new()), 0, 1));
    assert_eq!(
        wait(log.sequencer().expect("a local sequencer").acquire()).unwrap(),
        0
    );
    let waiting = {
        let log = log.clone();
        thread::spawn(move || wait(log.append(payload(1))))
    };
    pause();
    wait(log.seal(1)).unwrap();
    let refused = waiting.join().unwrap().unwrap_err();
    assert_eq!(
        refused,
        LogError::Sealed {
            position: None,
            written: false
        }
    );
}
