//! The engine's scenarios, each written once and run on the simulated device and on io_uring
//! over a real file ring (see `common`): group commit from many threads, laps with trims, a
//! full ring (refused, or waited out until a trim), bad input as typed errors, awaitable
//! tickets, reads by more clients than the read lane has buffers (alone and beside writers),
//! iteration from a trimmed LSN, and tail markers (after an idle period, on close, never while
//! busy, never twice for the same entries) that make damage to the newest acknowledged entry
//! corruption rather than a torn tail. Scenarios that need a scripted device fault (fail-stop
//! on the N-th write or flush, a panicking drive thread) run on the simulated device only.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{payload, within, Backend, Shape, TestRing};
use sealog::{AppendError, DriveClosed, DriveFailure, DriveOptions, ReadError, TrimError};
use sealog::{DriveState, Entry, WhenFull};
use sealog_fault::FaultConfig;
use sealog_wal::{Kind, ReplayError};

/// Options whose tail marker is written after `idle_us` of idle time.
fn marker_after_us(idle_us: u64) -> DriveOptions {
    DriveOptions {
        tail_marker_idle_us: idle_us,
        ..DriveOptions::default()
    }
}

/// Options for scenarios that count tail markers themselves: a timer long enough never to
/// fire while the scenario runs.
fn without_idle_markers() -> DriveOptions {
    marker_after_us(3_600_000_000)
}

/// Appends `count` payloads of `len` bytes (seeds from 0) and waits for them: the last LSN.
fn append_and_wait(drive: &sealog::Drive, count: u64, len: usize) -> u64 {
    let tickets: Vec<_> = (0..count)
        .map(|seed| drive.append(payload(seed, len)).expect("queued"))
        .collect();
    tickets
        .into_iter()
        .map(|ticket| ticket.wait().expect("durable"))
        .max()
        .expect("at least one append")
}

fn appends_from_many_threads_are_acknowledged_in_order_and_replay(backend: Backend) {
    let ring = TestRing::new(backend, &Shape::small());
    let drive = Arc::new(ring.open_default());
    let handles: Vec<_> = (0..8u64)
        .map(|thread| {
            let drive = Arc::clone(&drive);
            std::thread::spawn(move || {
                (0..50u64)
                    .map(|round| {
                        let bytes =
                            payload(thread * 1000 + round, 100 + (round as usize % 7) * 300);
                        let ticket = drive.append(bytes.clone()).expect("queued");
                        (ticket.wait().expect("durable"), bytes)
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut acked: Vec<(u64, Vec<u8>)> = handles
        .into_iter()
        .flat_map(|handle| handle.join().expect("thread"))
        .collect();
    acked.sort();
    assert_eq!(acked.len(), 400);
    for (index, (lsn, _)) in acked.iter().enumerate() {
        assert_eq!(*lsn, index as u64 + 1, "LSNs are contiguous from 1");
    }
    for (lsn, bytes) in acked.iter().step_by(37) {
        assert_eq!(&drive.read(*lsn).expect("live"), bytes);
    }
    let iterated: Vec<(u64, Vec<u8>)> = drive
        .iter_from(1)
        .payloads()
        .collect::<Result<_, _>>()
        .expect("iterates");
    assert_eq!(iterated, acked);
    let stats = drive.stats();
    assert_eq!(stats.appends, 400);
    assert!(
        stats.batches < 400,
        "group commit shares flushes: {} batches",
        stats.batches
    );
    drive.close();
    drop(drive);
    let reopened = ring.open_default();
    let replayed: Vec<(u64, Vec<u8>)> = reopened
        .iter_from(1)
        .payloads()
        .collect::<Result<_, _>>()
        .expect("iterates");
    assert_eq!(replayed, acked);
}
scenario!(appends_from_many_threads_are_acknowledged_in_order_and_replay);

fn trims_let_the_ring_wrap_for_laps_and_a_full_ring_says_so(backend: Backend) {
    let ring = TestRing::new(backend, &Shape::small());
    let drive = ring.open_default();
    let mut last = 0;
    for round in 0..400u64 {
        let tickets: Vec<_> = (0..4)
            .map(|i| drive.append(payload(round * 4 + i, 3000)).expect("queued"))
            .collect();
        for ticket in tickets {
            last = ticket.wait().expect("durable");
        }
        drive.trim(last.saturating_sub(8)).expect("trim");
    }
    assert_eq!(drive.recovery_report().next_position.lap, 1);
    assert_eq!(drive.read(last).expect("live").len(), 3000);
    assert_eq!(
        drive.read(last - 20),
        Err(ReadError::Trimmed {
            lsn: last - 20,
            first_live: last - 7
        })
    );
    // Without trims the ring fills: appends fail with RingFull rather than overwrite. The
    // shape's usable bytes say beforehand whether one more fits: an append that fits in them
    // succeeds, and one refused had less than its record plus a segment's skipped rest (and
    // one record more: the shape is published at the end of the drive's turn, so it may not
    // show yet the append whose ticket just completed).
    let record_bytes = 30_000 + sealog::ENTRY_HEADER_SIZE as u64;
    let segment_bytes = Shape::small().segment_size_bytes;
    let mut full = None;
    let mut usable_before = u64::MAX;
    // The settled bytes count every append the drive placed or refused: all but the last
    // one acknowledged (see below), and, once a trim has returned (the shape is published
    // before it does), every one sent, the refused one too.
    let settled_before = drive.room().settled_append_bytes;
    let live_before = drive.shape().live_record_bytes;
    assert_eq!(live_before, 8 * (3000 + sealog::ENTRY_HEADER_SIZE as u64));
    let mut sent_bytes = 0;
    for round in 0..200u64 {
        let usable = drive.shape().usable_bytes;
        assert!(
            usable <= usable_before,
            "usable bytes shrink as the ring fills"
        );
        usable_before = usable;
        sent_bytes += record_bytes;
        match drive.append(payload(round, 30_000)).expect("queued").wait() {
            Ok(_) => {
                assert!(
                    usable >= record_bytes,
                    "{usable} usable bytes held a record"
                );
                // The live entries' bytes are what was appended less what the last trim
                // took, however the batches padded them.
                let live = drive.shape().live_record_bytes;
                assert_eq!(live, live_before + sent_bytes);
                // The room is published at the end of the drive's turn, and a client that
                // spins on its ticket can see the acknowledgement first: at most this append
                // is not counted yet (as waiting, with usable bytes as old: never as neither).
                let settled = drive.room().settled_append_bytes - settled_before;
                assert!(
                    settled + record_bytes >= sent_bytes,
                    "{settled} settled of {sent_bytes}"
                );
            }
            Err(error) => {
                let most = 2 * record_bytes + segment_bytes;
                assert!(usable < most, "{usable} usable, refused");
                full = Some(error);
                break;
            }
        }
    }
    assert!(
        matches!(full, Some(AppendError::RingFull { .. })),
        "{full:?}"
    );
    let before_trim = drive.shape().usable_bytes;
    drive.trim(drive.durable_lsn()).expect("trim");
    let after_trim = drive.shape().usable_bytes;
    let settled = drive.room().settled_append_bytes - settled_before;
    assert_eq!(settled, sent_bytes, "every append sent is settled");
    // The trim took every entry: no record bytes are left live.
    assert_eq!(drive.shape().live_record_bytes, 0);
    assert!(
        after_trim >= before_trim + 8 * segment_bytes,
        "a trim of the whole log frees its segments: {before_trim} then {after_trim}"
    );
    drive.close();
    drop(drive);
    let reopened = ring.open_default();
    let report = reopened.recovery_report();
    assert!(
        report.next_position.lap >= 3,
        "wrapped several laps: {report:?}"
    );
}
scenario!(trims_let_the_ring_wrap_for_laps_and_a_full_ring_says_so);

fn a_full_ring_waits_for_a_trim_when_asked_to(backend: Backend) {
    let ring = TestRing::new(backend, &Shape::small());
    let options = DriveOptions {
        when_full: WhenFull::Wait(Duration::from_secs(5)),
        ..DriveOptions::default()
    };
    let drive = Arc::new(ring.open(options).expect("opens"));
    let mut lsns = Vec::new();
    loop {
        let ticket = drive.append(payload(1, 30_000)).expect("queued");
        match ticket.wait_timeout(Duration::from_millis(300)) {
            Some(outcome) => lsns.push(outcome.expect("room")),
            None => {
                // Full: a trim from another thread lets it through.
                drive.trim(*lsns.last().expect("some fit")).expect("trim");
                assert!(ticket.wait().is_ok());
                break;
            }
        }
    }
}
scenario!(a_full_ring_waits_for_a_trim_when_asked_to);

fn bad_input_is_typed(backend: Backend) {
    let ring = TestRing::new(backend, &Shape::small());
    let drive = ring.open_default();
    let limit = ring.geometry.payload_size_max_bytes() as usize;
    assert!(matches!(
        drive.append(vec![0; limit + 1]),
        Err(AppendError::PayloadTooLarge { .. })
    ));
    assert!(matches!(
        drive.append(Entry::from(vec![1]).with_kind(Kind::Padding)),
        Err(AppendError::ReservedKind {
            kind: Kind::Padding
        })
    ));
    assert_eq!(
        drive.read(1),
        Err(ReadError::NotYetDurable {
            lsn: 1,
            durable_lsn: 0
        })
    );
    assert_eq!(
        drive.trim(5),
        Err(TrimError::BeyondDurable {
            lsn: 5,
            durable_lsn: 0
        })
    );
    let lsn = drive
        .append(vec![0; limit])
        .expect("queued")
        .wait()
        .expect("fits exactly");
    assert_eq!(drive.read(lsn).expect("live").len(), limit);
    assert_eq!(
        drive.read(lsn + 1),
        Err(ReadError::NotYetDurable {
            lsn: lsn + 1,
            durable_lsn: lsn
        })
    );
    assert_eq!(
        drive.read(0),
        Err(ReadError::Trimmed {
            lsn: 0,
            first_live: 1
        })
    );
}
scenario!(bad_input_is_typed);

fn iterating_from_a_trimmed_lsn_says_where_the_log_starts(backend: Backend) {
    let ring = TestRing::new(backend, &Shape::small());
    let drive = ring.open_default();
    append_and_wait(&drive, 20, 100);
    drive.trim(10).expect("trims");
    let mut from_trimmed = drive.iter_from(4).payloads();
    assert_eq!(
        from_trimmed.next(),
        Some(Err(ReadError::Trimmed {
            lsn: 4,
            first_live: 11
        }))
    );
    assert_eq!(from_trimmed.next(), None);
    let live: Vec<u64> = drive
        .iter_from(11)
        .payloads()
        .map(|entry| entry.expect("live").0)
        .collect();
    assert_eq!(live, (11..=20).collect::<Vec<_>>());
    assert_eq!(drive.iter_from(21).next(), None, "the durable tail ends it");
    assert_eq!(
        drive.iter_from(25).next(),
        Some(Err(ReadError::NotYetDurable {
            lsn: 25,
            durable_lsn: 20
        }))
    );
}
scenario!(iterating_from_a_trimmed_lsn_says_where_the_log_starts);

/// A minimal executor: polls a future, parking the thread until its waker runs.
fn block_on<F: std::future::Future>(future: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = std::task::Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut context = std::task::Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        match future.as_mut().poll(&mut context) {
            std::task::Poll::Ready(output) => return output,
            std::task::Poll::Pending => std::thread::park(),
        }
    }
}

fn a_ticket_can_be_awaited(backend: Backend) {
    let ring = TestRing::new(backend, &Shape::small());
    let drive = ring.open_default();
    let tickets: Vec<_> = (0..10)
        .map(|i| drive.append(vec![i; 10]).expect("queued"))
        .collect();
    let lsns: Vec<u64> = tickets
        .into_iter()
        .map(|ticket| block_on(ticket).expect("durable"))
        .collect();
    assert_eq!(lsns, (1..=10).collect::<Vec<_>>());
}
scenario!(a_ticket_can_be_awaited);

/// Defect 1 of issue 9: with more reads queued than free buffers and no batch in flight, the
/// drive thread popped a read, found no buffer, pushed it back and popped it again, forever:
/// eight threads reading at once from an idle drive with the default geometry never returned.
fn more_readers_than_read_buffers_all_complete(backend: Backend) {
    let ring = TestRing::new(backend, &Shape::default_geometry());
    // No cache, so every read goes to the device: through the drive thread's read lane on the
    // simulated device, through two callers' read buffers on io_uring.
    let options = DriveOptions {
        read_cache_bytes: 0,
        read_buffers: 2,
        ..DriveOptions::default()
    };
    let drive = Arc::new(ring.open(options).expect("opens"));
    let tickets: Vec<_> = (0..64u64)
        .map(|i| drive.append(payload(i, 5000)).expect("queued"))
        .collect();
    for ticket in tickets {
        ticket.wait().expect("durable");
    }
    let readers = 4 * sealog::drive::READ_BUFFERS as u64;
    let reads = within(
        "concurrent reads on an idle drive",
        Duration::from_secs(60),
        {
            let drive = Arc::clone(&drive);
            move || {
                let barrier = Arc::new(std::sync::Barrier::new(readers as usize));
                let handles: Vec<_> = (0..readers)
                    .map(|reader| {
                        let drive = Arc::clone(&drive);
                        let barrier = Arc::clone(&barrier);
                        std::thread::spawn(move || {
                            barrier.wait();
                            for round in 0..50u64 {
                                let lsn = 1 + (reader * 7 + round * 13) % 64;
                                let read = drive.read(lsn).expect("live");
                                assert_eq!(read, payload(lsn - 1, 5000));
                            }
                            50u64
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|handle| handle.join().expect("reader"))
                    .sum::<u64>()
            }
        },
    );
    assert_eq!(reads, readers * 50);
    let read_stats = drive.read_stats();
    assert_eq!(read_stats.cache_hits, 0);
    assert!(read_stats.device_reads >= reads);
    assert!(drive.stats().reads + read_stats.device_reads >= reads);
}
scenario!(more_readers_than_read_buffers_all_complete);

/// Readers never starve writers nor the other way round: pipelined writers, blocking writers
/// and readers of old and new LSNs at once, each finishing in bounded time.
fn readers_and_writers_share_the_drive(backend: Backend) {
    let ring = TestRing::new(backend, &Shape::default_geometry());
    let drive = Arc::new(ring.open_default());
    let first = drive.append(payload(0, 100)).expect("queued");
    first.wait().expect("durable");
    let done = within("readers beside writers", Duration::from_secs(120), {
        let drive = Arc::clone(&drive);
        move || {
            let mut handles = Vec::new();
            for writer in 0..4u64 {
                let drive = Arc::clone(&drive);
                handles.push(std::thread::spawn(move || {
                    for round in 0..40u64 {
                        let tickets: Vec<_> = (0..8)
                            .map(|i| {
                                let seed = writer * 100_000 + round * 8 + i;
                                drive.append(payload(seed, 300)).expect("queued")
                            })
                            .collect();
                        for ticket in tickets {
                            ticket.wait().expect("durable");
                        }
                    }
                }));
            }
            for reader in 0..(2 * sealog::drive::READ_BUFFERS as u64) {
                let drive = Arc::clone(&drive);
                handles.push(std::thread::spawn(move || {
                    for round in 0..100u64 {
                        let durable = drive.stats().lsn_durable;
                        let lsn = if round % 2 == 0 {
                            1
                        } else {
                            1 + (reader + round) % durable
                        };
                        drive.read(lsn).expect("acknowledged and live");
                    }
                }));
            }
            for handle in handles {
                handle.join().expect("client");
            }
            drive.stats().lsn_durable
        }
    });
    assert_eq!(done, 1 + 4 * 40 * 8);
}
scenario!(readers_and_writers_share_the_drive);

/// Issue 9 defect 3: once the log has been idle for the marker's idle time, one tail marker
/// covers every acknowledged entry; a second idle period with nothing new writes none.
fn an_idle_log_gets_one_tail_marker(backend: Backend) {
    let ring = TestRing::new(backend, &Shape::small());
    let options = marker_after_us(20_000);
    let drive = ring.open(options).expect("opens");
    append_and_wait(&drive, 5, 200);
    let stats = wait_for_stats(&drive, |stats| stats.tail_markers == 1);
    assert_eq!(stats.lsn_covered, stats.lsn_durable);
    std::thread::sleep(Duration::from_millis(100));
    let stats = drive.stats();
    assert_eq!(stats.tail_markers, 1, "one marker per idle period");
    // New entries, a new idle period: one more marker.
    drive
        .append(payload(9, 10))
        .expect("queued")
        .wait()
        .expect("durable");
    let stats = wait_for_stats(&drive, |stats| stats.tail_markers == 2);
    assert_eq!(stats.lsn_covered, 6);
    drive.close();
    assert_eq!(ring.replay().expect("replays").last_lsn, Some(6));
}
scenario!(an_idle_log_gets_one_tail_marker);

fn wait_for_stats(drive: &sealog::Drive, done: impl Fn(&sealog::Stats) -> bool) -> sealog::Stats {
    for _ in 0..500 {
        let stats = drive.stats();
        if done(&stats) {
            return stats;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("stats never got there: {:?}", drive.stats());
}

/// A log kept busy writes no tail marker: markers cost nothing while appends keep coming
/// (the idle time is far above any pause of this loop, so a marker here means one was written
/// without the log having been idle that long).
fn a_busy_log_writes_no_tail_marker(backend: Backend) {
    let ring = TestRing::new(backend, &Shape::small());
    let options = marker_after_us(1_000_000);
    let drive = ring.open(options).expect("opens");
    let started = std::time::Instant::now();
    let mut round = 0u64;
    while started.elapsed() < Duration::from_millis(500) {
        let lsn = drive
            .append(payload(round, 64))
            .expect("queued")
            .wait()
            .expect("durable");
        if round % 64 == 63 {
            drive.trim(lsn - 10).expect("trims");
        }
        round += 1;
    }
    assert_eq!(drive.stats().tail_markers, 0);
}
scenario!(a_busy_log_writes_no_tail_marker);

/// After a clean close, damage to the newest acknowledged entry is corruption naming its LSN,
/// never a torn tail: the close wrote a tail marker whose watermark covers it.
fn damage_to_the_newest_entry_after_a_clean_close_is_corruption(backend: Backend) {
    let ring = TestRing::new(backend, &Shape::small());
    let drive = ring.open(without_idle_markers()).expect("opens");
    let tickets: Vec<_> = (0..3)
        .map(|i| drive.append(payload(i, 500)).expect("queued"))
        .collect();
    let last = tickets
        .into_iter()
        .map(|ticket| ticket.wait().expect("durable"))
        .max()
        .expect("three");
    drive.close();
    drop(drive);
    let report = ring.replay().expect("a clean ring");
    assert_eq!(
        report.watermark_max, last,
        "the close's marker covers LSN {last}"
    );
    // Flip a byte of the newest entry's payload.
    ring.damage(
        ring.record_offset(last) + sealog_wal::format::ENTRY_HEADER_SIZE as u64 + 10,
        |bytes| bytes[0] ^= 0x40,
    );
    match ring.replay() {
        Err(ReplayError::Corruption(corruption)) => assert_eq!(corruption.lsn, last),
        other => panic!("damage to acknowledged LSN {last} must be corruption: {other:?}"),
    }
    assert!(matches!(
        ring.open(DriveOptions::default()),
        Err(sealog::OpenError::Corrupt { .. })
    ));
}
scenario!(damage_to_the_newest_entry_after_a_clean_close_is_corruption);

/// A close after the idle marker already covered every acknowledged entry writes no second
/// marker: the ring holds the entry's batch and one marker.
fn a_close_with_everything_covered_writes_no_marker(backend: Backend) {
    let ring = TestRing::new(backend, &Shape::small());
    let options = marker_after_us(10_000);
    let drive = ring.open(options).expect("opens");
    drive
        .append(payload(1, 10))
        .expect("queued")
        .wait()
        .expect("durable");
    wait_for_stats(&drive, |stats| stats.tail_markers == 1);
    drive.close();
    drop(drive);
    let reopened = ring.open(without_idle_markers()).expect("reopens");
    let report = reopened.recovery_report();
    assert_eq!(report.last_lsn, Some(1));
    assert_eq!(
        report.batches, 2,
        "the entry's batch and one marker: {report:?}"
    );
}
scenario!(a_close_with_everything_covered_writes_no_marker);

fn fail_stop(faults: FaultConfig) {
    let mut ring = TestRing::new(Backend::Simulated, &Shape::small());
    ring.set_faults(faults);
    let drive = Arc::new(ring.open_default());
    let mut acked = Vec::new();
    let mut failed_at = None;
    for round in 0..200u64 {
        let tickets: Vec<_> = (0..3)
            .map(|i| drive.append(payload(round * 3 + i, 500)).expect("queued"))
            .collect();
        for ticket in tickets {
            match ticket.wait() {
                Ok(lsn) => {
                    assert!(
                        failed_at.is_none(),
                        "LSN {lsn} acknowledged after the failure"
                    );
                    acked.push(lsn);
                }
                Err(AppendError::Failed(DriveFailure::Io { .. })) => {
                    failed_at.get_or_insert(round);
                }
                Err(other) => panic!("unexpected {other}"),
            }
        }
    }
    assert!(failed_at.is_some(), "the fault fired");
    assert!(matches!(
        drive.append(vec![1]).expect("queued").wait(),
        Err(AppendError::Failed(_))
    ));
    assert!(matches!(
        drive.stats().state,
        DriveState::Failed(DriveFailure::Io { .. })
    ));
    drive.close();
    drop(drive);
    ring.set_faults(FaultConfig::none());
    let reopened = ring.open_default();
    let replayed: Vec<u64> = reopened
        .iter_from(1)
        .payloads()
        .map(|entry| entry.expect("reads").0)
        .collect();
    assert!(
        replayed.len() >= acked.len(),
        "every acknowledged entry survives"
    );
    assert_eq!(&replayed[..acked.len()], &acked[..]);
}

#[test]
fn a_failed_write_stops_the_drive() {
    fail_stop(FaultConfig {
        fail_write_number: Some(9),
        ..FaultConfig::none()
    });
}

#[test]
fn a_failed_flush_stops_the_drive() {
    fail_stop(FaultConfig {
        fail_flush_number: Some(40),
        ..FaultConfig::none()
    });
}

/// Issue 9 defect 5: a dead drive thread left tickets waiting forever. A backend that panics
/// inside the drive thread: every queued and in-flight ticket completes with an error, later
/// calls fail at once, and nothing waits on the drive that is gone.
#[test]
fn a_panicking_drive_thread_strands_no_caller() {
    let drive = open_broken(Breakage::PanicOnWrite(5));
    let drive = Arc::new(drive);
    let outcomes = within("tickets of a panicked drive", Duration::from_secs(30), {
        let drive = Arc::clone(&drive);
        move || {
            let tickets: Vec<_> = (0..200u64)
                .filter_map(|i| drive.append(payload(i, 3000)).ok())
                .collect();
            tickets
                .into_iter()
                .map(|ticket| ticket.wait())
                .collect::<Vec<_>>()
        }
    });
    let failed = outcomes.iter().filter(|outcome| outcome.is_err()).count();
    assert!(failed > 0, "the panic failed the appends after it");
    for outcome in &outcomes {
        match outcome {
            Ok(_)
            | Err(AppendError::Failed(DriveFailure::ThreadPanicked { .. }))
            | Err(AppendError::Closed(DriveClosed)) => {}
            Err(other) => panic!("unexpected outcome {other}"),
        }
    }
    let later = within("calls after the panic", Duration::from_secs(10), {
        let drive = Arc::clone(&drive);
        move || {
            (
                drive.append(vec![1]).map(|ticket| ticket.wait()),
                drive.read(1),
                drive.trim(1),
                drive.stats().state,
            )
        }
    });
    assert!(matches!(later.0, Err(AppendError::Closed(_)) | Ok(Err(_))));
    assert!(later.1.is_err());
    assert!(later.2.is_err());
    // Statistics never cross the drive thread: a dead drive reports how it ended.
    assert!(matches!(
        later.3,
        DriveState::Failed(DriveFailure::ThreadPanicked { .. })
    ));
}

/// Ring space stays reserved for a tail marker: appends on a ring that is never trimmed are
/// refused as full, and the idle log still gets its marker, which covers every acknowledged
/// entry.
fn a_full_ring_still_has_room_for_a_tail_marker(backend: Backend) {
    let ring = TestRing::new(backend, &Shape::small());
    let options = marker_after_us(20_000);
    let drive = ring.open(options).expect("opens");
    let mut last = 0;
    let mut round = 0u64;
    loop {
        // Sizes that leave odd remainders in segments, so the reserved block is exercised.
        let len = 1000 + (round as usize * 3517) % 20_000;
        match drive.append(payload(round, len)).expect("queued").wait() {
            Ok(lsn) => last = lsn,
            Err(AppendError::RingFull { .. }) => break,
            Err(error) => panic!("unexpected {error}"),
        }
        round += 1;
    }
    assert!(last > 50, "the ring took {last} entries before it filled");
    let stats = wait_for_stats(&drive, |stats| stats.tail_markers >= 1);
    assert_eq!(stats.lsn_covered, last, "the marker covers every entry");
    drive.close();
    let report = ring.replay().expect("replays");
    assert_eq!(report.last_lsn, Some(last));
    assert_eq!(report.watermark_max, last);
}
scenario!(a_full_ring_still_has_room_for_a_tail_marker);

/// Recovery covers what it recovers: a writable open that finds acknowledged entries no
/// durable watermark covers (a power cut before the idle timer fired) writes a tail marker
/// before its first append, so damage to them is corruption from then on.
#[test]
fn a_writable_open_covers_recovered_entries_with_a_tail_marker() {
    use sealog::{DriveCore, Request, Wait};
    use sealog_fault::SimDevice;

    let geometry = TestRing::new(Backend::Simulated, &Shape::small()).geometry;
    let image = sealog_wal_kit::model::ModelWriter::format(geometry, sealog_wal::RingId([5; 16]));
    let device =
        |image| SimDevice::for_ring(image, &geometry, FaultConfig::none(), 11).expect("a device");
    let path = std::path::Path::new("recovery-marker");
    let options = DriveOptions::default();
    let mut core = DriveCore::recover(device(image), path, &options).expect("opens");
    let tickets: Vec<_> = (0..4u64)
        .map(|i| {
            let (request, ticket) = Request::append(Kind::Data, payload(i, 700));
            core.submit(request);
            core.step(Wait::No);
            ticket
        })
        .collect();
    while tickets.iter().any(|ticket| !ticket.is_complete()) {
        core.step(Wait::ForCompletion);
    }
    let last = core.lsn_durable();
    assert!(
        core.lsn_covered() < last,
        "no idle timer fired: LSN {last} is uncovered"
    );
    // Power cut: everything acknowledged is durable; no marker was written.
    let image = core.backend_mut().crash();
    let mut reopened = DriveCore::recover(device(image), path, &options).expect("reopens");
    assert_eq!(reopened.recovery_report().last_lsn, Some(last));
    assert!(reopened.recovery_report().watermark_max < last);
    assert_eq!(reopened.stats().tail_markers, 1, "the open wrote a marker");
    assert_eq!(reopened.lsn_covered(), last);
    let image = reopened.backend_mut().crash();
    let mut source: &[u8] = &image;
    let report =
        sealog_wal::scan(&mut source, &sealog_wal::ReplayOptions::default()).expect("replays");
    assert_eq!(report.watermark_max, last, "the marker is durable");
    // A third open finds everything covered and writes none.
    let again = DriveCore::recover(device(image), path, &options).expect("reopens");
    assert_eq!(again.stats().tail_markers, 0);
}

/// Review finding: reads that keep the drive busy held the idle tail marker off (the timer was
/// looked at only when nothing at all was in flight). Readers hammering the drive must not
/// keep acknowledged entries uncovered.
fn readers_do_not_hold_off_the_tail_marker(backend: Backend) {
    let ring = TestRing::new(backend, &Shape::small());
    let options = marker_after_us(10_000);
    let drive = Arc::new(ring.open(options).expect("opens"));
    append_and_wait(&drive, 5, 300);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let readers: Vec<_> = (0..4)
        .map(|_| {
            let drive = Arc::clone(&drive);
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    drive.read(1).expect("live");
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let markers = drive.stats().tail_markers;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for reader in readers {
        reader.join().expect("reader");
    }
    assert!(
        markers >= 1,
        "no marker in 500 ms of reads with a 10 ms idle time"
    );
}
scenario!(readers_do_not_hold_off_the_tail_marker);

/// Review finding: a fully trimmed log needs no marker (the trim point covers it), and the
/// drive says so in `lsn_covered`.
fn a_fully_trimmed_log_needs_no_tail_marker(backend: Backend) {
    let ring = TestRing::new(backend, &Shape::small());
    let options = marker_after_us(5_000);
    let drive = ring.open(without_idle_markers()).expect("opens");
    let last = (0..5)
        .map(|i| drive.append(payload(i, 300)).expect("queued"))
        .map(|ticket| ticket.wait().expect("durable"))
        .max()
        .expect("five");
    drive.trim(last).expect("trims");
    let stats = drive.stats();
    assert_eq!(
        stats.lsn_covered, last,
        "the trim point covers what it released"
    );
    drive.close();
    drop(drive);
    let reopened = ring.open(options).expect("reopens");
    std::thread::sleep(Duration::from_millis(100));
    let stats = reopened.stats();
    assert_eq!(stats.lsn_covered, last);
    assert_eq!(stats.tail_markers, 0, "nothing live, nothing to cover");
}
scenario!(a_fully_trimmed_log_needs_no_tail_marker);

/// Review finding: every append waiting for room had the oldest one's deadline. Each waits
/// its own `WhenFull::Wait` time, counted from when it was queued.
fn each_append_waits_for_room_its_own_time(backend: Backend) {
    let ring = TestRing::new(backend, &Shape::small());
    let wait = Duration::from_millis(600);
    let options = DriveOptions {
        when_full: WhenFull::Wait(wait),
        ..DriveOptions::default()
    };
    let drive = ring.open(options).expect("opens");
    // Fill the ring.
    let mut round = 0;
    loop {
        let ticket = drive.append(payload(round, 30_000)).expect("queued");
        if ticket.wait_timeout(Duration::from_millis(200)).is_none() {
            // Full: this one waits; let it run out.
            assert!(matches!(ticket.wait(), Err(AppendError::RingFull { .. })));
            break;
        }
        round += 1;
    }
    // Each clock starts before its append is queued: the drive counts the wait from the
    // queueing, so a clock read after `append` returned ran behind it by however long the
    // call took (a loaded CI machine saw the second refusal a hair before `wait` had passed
    // on a clock read afterwards).
    let first_at = std::time::Instant::now();
    let first = drive.append(payload(1, 30_000)).expect("queued");
    std::thread::sleep(Duration::from_millis(300));
    let second_at = std::time::Instant::now();
    let second = drive.append(payload(2, 30_000)).expect("queued");
    assert!(matches!(first.wait(), Err(AppendError::RingFull { .. })));
    assert!(first_at.elapsed() >= wait);
    assert_eq!(
        second.try_outcome(),
        None,
        "the second append still has {:?} of its own wait",
        wait.saturating_sub(second_at.elapsed())
    );
    assert!(matches!(second.wait(), Err(AppendError::RingFull { .. })));
    assert!(second_at.elapsed() >= wait);
}
scenario!(each_append_waits_for_room_its_own_time);

/// How a [`BrokenDevice`] breaks.
#[derive(Clone, Copy)]
enum Breakage {
    /// It refuses its N-th write submission.
    RefuseWrite(u64),
    /// It fails its N-th batch flush with EIO, and every wait after it (a device that stops
    /// answering once the drive has already failed).
    FailBatchFlushThenWaits(u64),
    /// It panics in its N-th write submission, on the drive thread.
    PanicOnWrite(u64),
}

/// The simulated device, broken one way for the failure paths of the drive thread.
struct BrokenDevice {
    device: sealog_fault::SimDevice,
    breakage: Breakage,
    writes: u64,
    batch_flushes: u64,
    waits_fail: bool,
}

impl sealog::io::IoBackend for BrokenDevice {
    fn pool(&mut self) -> &mut sealog::pool::BufferPool {
        self.device.pool()
    }
    fn size_bytes(&self) -> u64 {
        self.device.size_bytes()
    }
    fn submit_write(
        &mut self,
        tag: sealog::io::Tag,
        ring_offset: u64,
        buffer: usize,
        buffer_offset: usize,
        len: u32,
        sync: sealog::io::WriteSync,
    ) -> std::io::Result<()> {
        self.writes += 1;
        match self.breakage {
            Breakage::RefuseWrite(n) if n == self.writes => {
                return Err(std::io::Error::from_raw_os_error(EBUSY));
            }
            Breakage::PanicOnWrite(n) => assert!(n != self.writes, "injected panic"),
            _ => {}
        }
        self.device
            .submit_write(tag, ring_offset, buffer, buffer_offset, len, sync)
    }
    fn submit_flush(
        &mut self,
        tag: sealog::io::Tag,
        ring_offset: u64,
        order: sealog::io::FlushOrder,
    ) -> std::io::Result<()> {
        self.device.submit_flush(tag, ring_offset, order)
    }
    fn submit_read(
        &mut self,
        tag: sealog::io::Tag,
        ring_offset: u64,
        buffer: usize,
        len: u32,
    ) -> std::io::Result<()> {
        self.device.submit_read(tag, ring_offset, buffer, len)
    }
    fn wait(
        &mut self,
        min_complete: usize,
        out: &mut Vec<sealog::io::Completion>,
    ) -> std::io::Result<()> {
        if self.waits_fail {
            return Err(std::io::Error::from_raw_os_error(EIO));
        }
        let before = out.len();
        self.device.wait(min_complete, out)?;
        for completion in &mut out[before..] {
            // A batch flush's tag: kind 1 in the low three bits (the engine's `Op`).
            if completion.tag & 7 == 1 {
                self.batch_flushes += 1;
                if matches!(
                    self.breakage,
                    Breakage::FailBatchFlushThenWaits(n) if n == self.batch_flushes
                ) {
                    completion.result = Err(EIO);
                    self.waits_fail = true;
                }
            }
        }
        Ok(())
    }
    fn waker(&self) -> sealog::io::Waker {
        self.device.waker()
    }
}

/// Errnos, without a libc dependency in the tests.
const EIO: i32 = 5;
const EBUSY: i32 = 16;

/// A drive on a fresh small ring over a [`BrokenDevice`].
fn open_broken(breakage: Breakage) -> sealog::Drive {
    let geometry = TestRing::new(Backend::Simulated, &Shape::small()).geometry;
    let image = sealog_wal_kit::model::ModelWriter::format(geometry, sealog_wal::RingId([9; 16]));
    sealog::Drive::open_with(
        std::path::Path::new("broken"),
        geometry,
        DriveOptions::default(),
        move || {
            let device =
                sealog_fault::SimDevice::for_ring(image, &geometry, FaultConfig::none(), 3)?;
            Ok(BrokenDevice {
                device,
                breakage,
                writes: 0,
                batch_flushes: 0,
                waits_fail: false,
            })
        },
    )
    .expect("opens")
}

/// Review findings: a backend that refuses a submission, or whose waits fail after the drive
/// already failed, left the drive waiting on it forever (and `close` never returned). Either
/// way the drive fail-stops, every ticket completes, and close returns.
#[test]
fn a_broken_backend_fails_the_drive_and_close_returns() {
    // Recovery writes the control block first (write 1): refuse a batch's write.
    for breakage in [
        Breakage::RefuseWrite(4),
        Breakage::FailBatchFlushThenWaits(2),
    ] {
        let drive = Arc::new(open_broken(breakage));
        let outcomes = within("appends on a broken backend", Duration::from_secs(30), {
            let drive = Arc::clone(&drive);
            move || {
                let tickets: Vec<_> = (0..40u64)
                    .filter_map(|i| drive.append(payload(i, 5000)).ok())
                    .collect();
                tickets
                    .into_iter()
                    .map(|ticket| ticket.wait())
                    .collect::<Vec<_>>()
            }
        });
        assert!(
            outcomes
                .iter()
                .any(|outcome| matches!(outcome, Err(AppendError::Failed(_)))),
            "the drive failed: {outcomes:?}"
        );
        within(
            "close of a broken drive",
            Duration::from_secs(30),
            move || drive.close(),
        );
    }
}

/// Review finding: a hand-stepped core took any append request, and encoding a padding record
/// or an oversized payload panicked the drive. Both are refused with a typed error.
#[test]
fn a_core_refuses_appends_the_handle_would_refuse() {
    use sealog::{DriveCore, Request, Wait};

    let geometry = TestRing::new(Backend::Simulated, &Shape::small()).geometry;
    let image = sealog_wal_kit::model::ModelWriter::format(geometry, sealog_wal::RingId([4; 16]));
    let device = sealog_fault::SimDevice::for_ring(image, &geometry, FaultConfig::none(), 1)
        .expect("a device");
    let mut core = DriveCore::recover(device, std::path::Path::new("core"), &Default::default())
        .expect("opens");
    let (padding, padding_ticket) = Request::append(Kind::Padding, vec![0; 10]);
    let limit = geometry.payload_size_max_bytes() as usize;
    let (oversized, oversized_ticket) = Request::append(Kind::Data, vec![0; limit + 1]);
    let (fine, fine_ticket) = Request::append(Kind::Data, vec![1; 10]);
    for request in [padding, oversized, fine] {
        core.submit(request);
    }
    while !fine_ticket.is_complete() {
        core.step(Wait::ForCompletion);
    }
    assert!(matches!(
        padding_ticket.try_outcome(),
        Some(Err(AppendError::ReservedKind { .. }))
    ));
    assert!(matches!(
        oversized_ticket.try_outcome(),
        Some(Err(AppendError::PayloadTooLarge { .. }))
    ));
    assert_eq!(fine_ticket.wait(), Ok(1));
}

/// Review finding: a huge channel capacity panicked inside `Drive::open`.
#[test]
fn an_option_out_of_range_is_a_typed_error() {
    let ring = TestRing::new(Backend::Simulated, &Shape::small());
    for capacity in [0, usize::MAX] {
        let options = DriveOptions {
            channel_capacity: capacity,
            ..DriveOptions::default()
        };
        assert!(matches!(
            ring.open(options),
            Err(sealog::OpenError::Options {
                option: "channel_capacity",
                ..
            })
        ));
    }
}
