//! The stress test (docs/recovery.md, I-19): for a bounded time, many threads at once on one file
//! ring through io_uring: blocking and pipelined appenders, readers of old and new LSNs,
//! iterators, trimmers and a stats poller, with a client channel far smaller than the
//! requests in flight. A watchdog fails the test, with the drive's state and every operation
//! in progress, if any operation takes longer than a few seconds; at the end every live
//! acknowledged entry must read back with its payload, before and after a reopen.
//!
//! `SEALOG_STRESS_SECONDS` sets the time (default 8; CI runs the default).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sealog::{format, Drive, DriveOptions, FormatOptions, ReadError, SyncMethod, Ticket};

/// An operation that takes longer than this is a liveness failure.
const OPERATION_LIMIT: Duration = Duration::from_secs(5);

/// What each client is doing now, and since when.
#[derive(Default)]
struct Watch {
    slots: Mutex<HashMap<String, (String, Instant)>>,
}

impl Watch {
    fn begin(&self, client: &str, operation: String) {
        self.slots
            .lock()
            .expect("watch lock")
            .insert(client.to_string(), (operation, Instant::now()));
    }

    fn end(&self, client: &str) {
        self.slots.lock().expect("watch lock").remove(client);
    }

    /// Operations running longer than the limit.
    fn overdue(&self) -> Vec<String> {
        self.slots
            .lock()
            .expect("watch lock")
            .iter()
            .filter(|(_, (_, since))| since.elapsed() > OPERATION_LIMIT)
            .map(|(client, (operation, since))| {
                format!("{client}: {operation} for {:?}", since.elapsed())
            })
            .collect()
    }
}

/// The payload of the `sequence`-th append of `writer`: its identity, then filler, so a reader
/// can check what it got against what was acknowledged for the LSN.
fn payload(writer: u64, sequence: u64) -> Vec<u8> {
    let len = 64 + ((writer * 7919 + sequence * 104_729) % 6000) as usize;
    let mut bytes = Vec::with_capacity(len);
    bytes.extend_from_slice(&writer.to_le_bytes());
    bytes.extend_from_slice(&sequence.to_le_bytes());
    while bytes.len() < len {
        bytes.push((writer + sequence + bytes.len() as u64) as u8);
    }
    bytes
}

/// Shared by the clients: the drive, what was acknowledged, the watch and the stop flag.
struct Shared {
    drive: Drive,
    acknowledged: Mutex<HashMap<u64, Vec<u8>>>,
    trimmed_to: AtomicU64,
    watch: Watch,
    stop: AtomicBool,
    operations: AtomicU64,
}

impl Shared {
    fn record(&self, lsn: u64, bytes: Vec<u8>) {
        let previous = self
            .acknowledged
            .lock()
            .expect("acknowledged lock")
            .insert(lsn, bytes);
        assert!(previous.is_none(), "LSN {lsn} acknowledged twice");
    }

    fn check_read(&self, lsn: u64, read: &[u8]) {
        if let Some(expected) = self.acknowledged.lock().expect("lock").get(&lsn) {
            assert_eq!(read, &expected[..], "LSN {lsn} read back other bytes");
        }
    }

    fn timed<T>(&self, client: &str, operation: String, work: impl FnOnce() -> T) -> T {
        self.watch.begin(client, operation);
        let outcome = work();
        self.watch.end(client);
        self.operations.fetch_add(1, Ordering::Relaxed);
        outcome
    }
}

fn blocking_appender(shared: &Shared, writer: u64) {
    let client = format!("blocking appender {writer}");
    let mut sequence = 0;
    while !shared.stop.load(Ordering::Relaxed) {
        let bytes = payload(writer, sequence);
        let outcome = shared.timed(&client, format!("append #{sequence}"), || {
            shared.drive.append(bytes.clone()).expect("queued").wait()
        });
        let lsn = outcome.expect("durable");
        shared.record(lsn, bytes);
        sequence += 1;
    }
}

fn pipelined_appender(shared: &Shared, writer: u64, depth: usize) {
    let client = format!("pipelined appender {writer}");
    let mut sequence = 0;
    let mut in_flight: std::collections::VecDeque<(Vec<u8>, Ticket)> = Default::default();
    while !shared.stop.load(Ordering::Relaxed) || !in_flight.is_empty() {
        if !shared.stop.load(Ordering::Relaxed) && in_flight.len() < depth {
            let bytes = payload(writer, sequence);
            let ticket = shared.timed(&client, format!("send #{sequence}"), || {
                shared.drive.append(bytes.clone()).expect("queued")
            });
            in_flight.push_back((bytes, ticket));
            sequence += 1;
            continue;
        }
        let (bytes, ticket) = in_flight.pop_front().expect("not empty");
        let lsn = shared
            .timed(&client, "wait for the oldest ticket".to_string(), || {
                ticket.wait()
            })
            .expect("durable");
        shared.record(lsn, bytes);
    }
}

fn reader(shared: &Shared, reader: u64) {
    let client = format!("reader {reader}");
    let mut round = 0u64;
    while !shared.stop.load(Ordering::Relaxed) {
        let durable = shared.drive.stats().lsn_durable;
        let first = shared.trimmed_to.load(Ordering::Relaxed) + 1;
        if durable < first {
            std::thread::yield_now();
            continue;
        }
        // Alternate between the oldest live entries and the newest.
        let span = durable - first + 1;
        let lsn = if round % 2 == 0 {
            first + (round * 31 + reader) % span.min(64)
        } else {
            durable - (round * 17 + reader) % span.min(64)
        };
        let outcome = shared.timed(&client, format!("read LSN {lsn}"), || {
            shared.drive.read(lsn)
        });
        match outcome {
            Ok(bytes) => shared.check_read(lsn, &bytes),
            // A trim passed it meanwhile.
            Err(ReadError::Trimmed { .. }) => {}
            Err(error) => panic!("{client}: read of LSN {lsn} failed: {error}"),
        }
        round += 1;
    }
}

fn iterator(shared: &Shared, iterator: u64) {
    let client = format!("iterator {iterator}");
    while !shared.stop.load(Ordering::Relaxed) {
        let from = shared.trimmed_to.load(Ordering::Relaxed) + 1;
        let mut entries = shared.drive.iter_from(from).payloads();
        let mut next = from;
        for _ in 0..500 {
            let item = shared.timed(&client, format!("iterate at LSN {next}"), || entries.next());
            match item {
                None => break,
                Some(Ok((lsn, bytes))) => {
                    assert_eq!(lsn, next, "{client}: iteration skipped an LSN");
                    shared.check_read(lsn, &bytes);
                    next = lsn + 1;
                }
                Some(Err(ReadError::Trimmed { .. })) => break,
                Some(Err(error)) => panic!("{client}: iteration failed at {next}: {error}"),
            }
        }
    }
}

fn trimmer(shared: &Shared, trimmer: u64) {
    let client = format!("trimmer {trimmer}");
    while !shared.stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(20 + trimmer * 7));
        let durable = shared.drive.stats().lsn_durable;
        let upto = durable.saturating_sub(2000);
        if upto == 0 {
            continue;
        }
        shared
            .timed(&client, format!("trim to LSN {upto}"), || {
                shared.drive.trim(upto)
            })
            .expect("trims");
        shared.trimmed_to.fetch_max(upto, Ordering::Relaxed);
    }
}

#[test]
fn many_clients_at_once_never_stall_and_lose_nothing() {
    let seconds: u64 = std::env::var("SEALOG_STRESS_SECONDS")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(8);
    let directory = tempfile::tempdir().expect("tempdir");
    let path = directory.path().join("ring");
    let options = FormatOptions {
        size_bytes: 64 << 20,
        segment_size_bytes: Some(4 << 20),
        batch_size_max_bytes: Some(256 << 10),
        sync_method: Some(SyncMethod::Fdatasync),
        ..FormatOptions::default()
    };
    format(&path, &options).expect("formats");
    let drive_options = DriveOptions {
        // Far fewer channel slots than requests in flight: senders block on a full channel.
        channel_capacity: 16,
        tail_marker_idle_us: 5_000,
        ..DriveOptions::default()
    };
    let shared = Arc::new(Shared {
        drive: Drive::open(&path, drive_options).expect("opens"),
        acknowledged: Mutex::default(),
        trimmed_to: AtomicU64::new(0),
        watch: Watch::default(),
        stop: AtomicBool::new(false),
        operations: AtomicU64::new(0),
    });
    let mut clients = Vec::new();
    let spawn = |clients: &mut Vec<std::thread::JoinHandle<()>>, work: Box<dyn FnOnce() + Send>| {
        clients.push(std::thread::spawn(work));
    };
    for writer in 0..6 {
        let shared = Arc::clone(&shared);
        spawn(
            &mut clients,
            Box::new(move || blocking_appender(&shared, writer)),
        );
    }
    for writer in 6..9 {
        let shared = Arc::clone(&shared);
        spawn(
            &mut clients,
            Box::new(move || pipelined_appender(&shared, writer, 64)),
        );
    }
    for index in 0..8 {
        let shared = Arc::clone(&shared);
        spawn(&mut clients, Box::new(move || reader(&shared, index)));
    }
    for index in 0..2 {
        let shared = Arc::clone(&shared);
        spawn(&mut clients, Box::new(move || iterator(&shared, index)));
    }
    for index in 0..3 {
        let shared = Arc::clone(&shared);
        spawn(&mut clients, Box::new(move || trimmer(&shared, index)));
    }
    let started = Instant::now();
    while clients.iter().any(|client| !client.is_finished()) {
        std::thread::sleep(Duration::from_millis(50));
        let overdue = shared.watch.overdue();
        if !overdue.is_empty() {
            let state = watchdog_state(&shared);
            panic!(
                "operations stalled past {OPERATION_LIMIT:?}:\n  {}\ndrive: {state}",
                overdue.join("\n  ")
            );
        }
        if started.elapsed() > Duration::from_secs(seconds) {
            shared.stop.store(true, Ordering::Relaxed);
        }
    }
    for client in clients {
        client.join().expect("a client panicked");
    }
    let stats = shared.drive.stats();
    let acknowledged = shared.acknowledged.lock().expect("lock").clone();
    println!(
        "stress: {seconds} s, {} operations, {} appends acknowledged in {} batches, {} reads, \
         {} tail markers, trimmed to LSN {}",
        shared.operations.load(Ordering::Relaxed),
        stats.appends,
        stats.batches,
        stats.reads,
        stats.tail_markers,
        shared.trimmed_to.load(Ordering::Relaxed)
    );
    let durable = stats.lsn_durable;
    assert_eq!(
        acknowledged.len() as u64,
        durable,
        "every LSN up to the tail acknowledged"
    );
    let Ok(shared) = Arc::try_unwrap(shared) else {
        panic!("every client is gone")
    };
    let check = |drive: &Drive| {
        let from = drive
            .recovery_report()
            .trim_lsn
            .max(shared.trimmed_to.load(Ordering::Relaxed));
        let mut count = 0;
        for entry in drive.iter_from(from + 1).payloads() {
            let (lsn, bytes) = entry.expect("live entries read back");
            assert_eq!(Some(&bytes), acknowledged.get(&lsn), "LSN {lsn}");
            count += 1;
        }
        assert_eq!(count, durable - from, "every live entry from {from}");
    };
    check(&shared.drive);
    shared.drive.close();
    let reopened = Drive::open(&path, DriveOptions::default()).expect("reopens");
    assert_eq!(reopened.recovery_report().last_lsn, Some(durable));
    check(&reopened);
}

/// The drive's state for the watchdog's report, or why it cannot be had.
fn watchdog_state(shared: &Arc<Shared>) -> String {
    let (sender, receiver) = std::sync::mpsc::channel();
    let probe = Arc::clone(shared);
    std::thread::spawn(move || {
        let stats = probe.drive.stats();
        let state = format!(
            "{:?}, LSN durable {} covered {}, {:?}",
            stats.state, stats.lsn_durable, stats.lsn_covered, stats.queues
        );
        let _ = sender.send(state);
    });
    receiver
        .recv_timeout(Duration::from_secs(2))
        .unwrap_or_else(|_| "the drive does not answer a stats request".to_string())
}
