//! The drive on the in-memory backend: group commit from many threads, reads, trims that let
//! the ring wrap, ring-full backpressure, and fail-stop when the N-th write or flush fails
//! (nothing acknowledged after the failure; a reopen recovers exactly what was acknowledged).

use std::path::Path;
use std::sync::{Arc, Mutex};

use sealog::drive::{buffer_bytes, buffer_count};
use sealog::memory::{MemoryBackend, MemoryFaults, MemoryImage};
use sealog::{AppendError, Drive, DriveOptions, ReadError, TrimError, WhenFull};
use sealog_wal::model::ModelWriter;
use sealog_wal::{Geometry, RingId};

fn geometry() -> Geometry {
    Geometry {
        block_size_bytes: 4096,
        segment_size_bytes: 32 * 4096,
        segment_count: 16,
        batch_size_max_bytes: 8 * 4096,
        window_batches_max: 3,
        window_bytes_max: 24 * 4096,
    }
}

fn new_image() -> Arc<Mutex<MemoryImage>> {
    let bytes = ModelWriter::format(geometry(), RingId(*b"memory-ring-test"));
    Arc::new(Mutex::new(MemoryImage::from_durable(bytes)))
}

fn open(image: &Arc<Mutex<MemoryImage>>, faults: MemoryFaults, options: DriveOptions) -> Drive {
    let image = Arc::clone(image);
    let g = geometry();
    Drive::open_with(Path::new("memory"), g, options, move || {
        MemoryBackend::new(image, buffer_count(&g), buffer_bytes(&g), faults)
    })
    .expect("opens")
}

fn payload(lsn_hint: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|index| (lsn_hint as usize * 7 + index) as u8)
        .collect()
}

#[test]
fn appends_from_many_threads_are_acknowledged_in_order_and_replay() {
    let image = new_image();
    let drive = Arc::new(open(
        &image,
        MemoryFaults::default(),
        DriveOptions::default(),
    ));
    let mut handles = Vec::new();
    for thread in 0..8u64 {
        let drive = Arc::clone(&drive);
        handles.push(std::thread::spawn(move || {
            let mut acked = Vec::new();
            for round in 0..50u64 {
                let bytes = payload(thread * 1000 + round, 100 + (round as usize % 7) * 300);
                let lsn = drive
                    .append(bytes.clone())
                    .expect("queued")
                    .wait()
                    .expect("durable");
                acked.push((lsn, bytes));
            }
            acked
        }));
    }
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
        .collect::<Result<_, _>>()
        .expect("iterates");
    assert_eq!(iterated, acked);
    let stats = drive.stats().expect("stats");
    assert_eq!(stats.appends, 400);
    assert!(
        stats.batches < 400,
        "group commit shares flushes: {} batches",
        stats.batches
    );
    drive.close();
    drop(drive);
    // Power cut: only durable bytes survive; every acknowledged entry replays.
    let crashed = Arc::new(Mutex::new(image.lock().expect("image").crash()));
    let reopened = open(&crashed, MemoryFaults::default(), DriveOptions::default());
    let replayed: Vec<(u64, Vec<u8>)> = reopened
        .iter_from(1)
        .collect::<Result<_, _>>()
        .expect("iterates");
    assert_eq!(replayed, acked);
}

#[test]
fn trims_let_the_ring_wrap_for_laps_and_a_full_ring_says_so() {
    let image = new_image();
    let drive = open(&image, MemoryFaults::default(), DriveOptions::default());
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
    let report_lap = drive.recovery_report().next_position.lap;
    assert_eq!(report_lap, 1);
    assert_eq!(drive.read(last).expect("live").len(), 3000);
    assert!(matches!(
        drive.read(last - 20),
        Err(ReadError::Trimmed { first_lsn, .. }) if first_lsn > last - 20
    ));
    // Without trims the ring fills: appends fail with RingFull rather than overwrite.
    let mut full = None;
    for round in 0..200u64 {
        match drive.append(payload(round, 30_000)).expect("queued").wait() {
            Ok(_) => {}
            Err(error) => {
                full = Some(error);
                break;
            }
        }
    }
    assert!(
        matches!(full, Some(AppendError::RingFull { .. })),
        "{full:?}"
    );
    drive.close();
    drop(drive);
    let reopened = open(&image, MemoryFaults::default(), DriveOptions::default());
    let report = reopened.recovery_report();
    assert!(
        report.next_position.lap >= 3,
        "wrapped several laps: {report:?}"
    );
}

#[test]
fn a_full_ring_waits_for_a_trim_when_asked_to() {
    let image = new_image();
    let options = DriveOptions {
        when_full: WhenFull::Wait(std::time::Duration::from_secs(5)),
        ..Default::default()
    };
    let drive = Arc::new(open(&image, MemoryFaults::default(), options));
    let mut lsns = Vec::new();
    loop {
        let ticket = drive.append(payload(1, 30_000)).expect("queued");
        match ticket.wait_timeout(std::time::Duration::from_millis(300)) {
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

fn fail_stop(faults: MemoryFaults) {
    let image = new_image();
    let drive = Arc::new(open(&image, faults, DriveOptions::default()));
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
                Err(AppendError::Failed(_)) => {
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
    drive.close();
    drop(drive);
    let crashed = Arc::new(Mutex::new(image.lock().expect("image").crash()));
    let reopened = open(&crashed, MemoryFaults::default(), DriveOptions::default());
    let replayed: Vec<u64> = reopened
        .iter_from(1)
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
    fail_stop(MemoryFaults {
        fail_write_number: Some(9),
        ..Default::default()
    });
}

#[test]
fn a_failed_flush_stops_the_drive() {
    fail_stop(MemoryFaults {
        fail_flush_number: Some(40),
        ..Default::default()
    });
}

#[test]
fn bad_input_is_typed() {
    let image = new_image();
    let drive = open(&image, MemoryFaults::default(), DriveOptions::default());
    let limit = geometry().payload_size_max_bytes() as usize;
    assert!(matches!(
        drive.append(vec![0; limit + 1]),
        Err(AppendError::PayloadTooLarge { .. })
    ));
    assert!(matches!(
        drive.append_kind(sealog_wal::Kind::Padding, vec![1]),
        Err(AppendError::ReservedKind { .. })
    ));
    assert_eq!(
        drive.read(1),
        Err(ReadError::NotYetDurable {
            lsn: 1,
            durable_lsn: 0
        })
    );
    assert!(matches!(
        drive.trim(5),
        Err(TrimError::BeyondDurable { .. })
    ));
    let lsn = drive
        .append(vec![0; limit])
        .expect("queued")
        .wait()
        .expect("fits exactly");
    assert_eq!(drive.read(lsn).expect("live").len(), limit);
}

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

#[test]
fn a_ticket_can_be_awaited() {
    let image = new_image();
    let drive = open(&image, MemoryFaults::default(), DriveOptions::default());
    let tickets: Vec<_> = (0..10)
        .map(|i| drive.append(vec![i; 10]).expect("queued"))
        .collect();
    let lsns: Vec<u64> = tickets
        .into_iter()
        .map(|ticket| block_on(ticket).expect("durable"))
        .collect();
    assert_eq!(lsns, (1..=10).collect::<Vec<u64>>());
}
