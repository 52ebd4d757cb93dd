//! `sealog stat` reads a ring's shape without taking the ring's lock, so it works while a
//! writer holds the ring: a drive in this very process appending and trimming, and a
//! `sealog append` in another process. Its figures must be sane (first live LSN past the trim
//! point, the next LSN after the last, no more entries than were appended, no fewer than were
//! acknowledged before it started, occupancy within capacity), name the writer's process, and
//! say that they may be a moment old.

mod common;

use common::{sealog, text};

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use sealog::{Drive, DriveOptions, FormatOptions, SyncMethod};
use serde_json::Value;

fn format_ring(ring: &Path) {
    let options = FormatOptions::new(16 << 20)
        .segment_size_bytes(1 << 20)
        .sync_method(SyncMethod::Fdatasync);
    sealog::format(ring, &options).expect("formats");
}

/// `sealog stat --json` on `ring`, which must succeed, parsed.
fn stat_json(ring: &Path) -> Value {
    let output = sealog(&["stat", ring.to_str().expect("utf-8"), "--json"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    serde_json::from_slice(&output.stdout).expect("one JSON object")
}

fn number(stat: &Value, field: &str) -> u64 {
    stat[field]
        .as_u64()
        .unwrap_or_else(|| panic!("{field} in {stat}"))
}

/// The figures any stat must show, with `acknowledged` entries acknowledged before it started
/// and at most `appended` ever appended, none trimmed above `trimmed_max`.
fn assert_sane(stat: &Value, acknowledged: u64, appended: u64, trimmed_max: u64) {
    let trim = number(stat, "trim_lsn");
    assert!(trim <= trimmed_max, "{stat}");
    assert_eq!(number(stat, "first_live_lsn"), trim + 1, "{stat}");
    let next = number(stat, "next_lsn");
    assert!(next > acknowledged && next <= appended + 1, "{stat}");
    let live = number(stat, "live_entries");
    assert_eq!(
        live,
        next - 1 - trim,
        "every LSN up to the next is an entry: {stat}"
    );
    match stat["last_lsn"].as_u64() {
        Some(last) => assert_eq!(last + 1, next, "{stat}"),
        None => assert_eq!(live, 0, "{stat}"),
    }
    assert!(number(stat, "occupied_bytes") <= number(stat, "capacity_bytes"));
    assert!(number(stat, "occupied_bytes") > 0, "{stat}");
    assert_eq!(stat["snapshot"], "may be a moment old");
    assert_eq!(stat["consistent"], false);
}

#[test]
fn stat_works_while_a_drive_in_this_process_appends_and_trims() {
    let directory = tempfile::tempdir().expect("tempdir");
    let ring = directory.path().join("ring");
    format_ring(&ring);
    let drive = Arc::new(Drive::open(&ring, DriveOptions::default()).expect("opens"));
    for _ in 0..10 {
        drive
            .append(vec![7u8; 100])
            .expect("appends")
            .wait()
            .expect("durable");
    }
    let acknowledged = Arc::new(AtomicU64::new(10));
    let appended = Arc::new(AtomicU64::new(10));
    let writer = {
        let (drive, acknowledged, appended) = (
            Arc::clone(&drive),
            Arc::clone(&acknowledged),
            Arc::clone(&appended),
        );
        std::thread::spawn(move || {
            for _ in 0..400 {
                appended.fetch_add(1, Ordering::SeqCst);
                let lsn = drive.append(vec![9u8; 3000]).expect("appends").wait();
                acknowledged.store(lsn.expect("durable"), Ordering::SeqCst);
            }
        })
    };
    let mut live_before = 0;
    let mut trimmed = 0;
    for round in 0..6 {
        let before = acknowledged.load(Ordering::SeqCst);
        let stat = stat_json(&ring);
        assert_sane(&stat, before, appended.load(Ordering::SeqCst), trimmed);
        assert_eq!(
            stat["writer_pid"].as_u64(),
            Some(u64::from(std::process::id()))
        );
        assert!(
            number(&stat, "trim_lsn") >= trimmed,
            "a trim done is seen: {stat}"
        );
        let next = number(&stat, "next_lsn");
        assert!(next >= live_before, "the log only grows: {stat}");
        live_before = next;
        // In process too: the engine's own function, while this process's drive holds it.
        let inner = sealog::stat::stat(&ring).expect("stats in process");
        assert!(inner.next_lsn > before);
        assert_eq!(inner.holders.writer_pid, Some(std::process::id()));
        if round == 2 {
            trimmed = acknowledged.load(Ordering::SeqCst) / 2;
            drive.trim(trimmed).expect("trims");
        }
    }
    writer.join().expect("the writer finishes");
    let last = acknowledged.load(Ordering::SeqCst);
    let stat = stat_json(&ring);
    assert_eq!(
        number(&stat, "next_lsn"),
        last + 1,
        "all of it, once quiet: {stat}"
    );
    assert_eq!(number(&stat, "trim_lsn"), trimmed);
    Arc::try_unwrap(drive).ok().expect("one handle").close();
    let stat = stat_json(&ring);
    assert_eq!(
        stat["writer_pid"],
        Value::Null,
        "nobody holds it now: {stat}"
    );
}

#[test]
fn stat_works_while_sealog_append_runs_in_another_process() {
    let directory = tempfile::tempdir().expect("tempdir");
    let ring = directory.path().join("ring");
    format_ring(&ring);
    let path = ring.to_str().expect("utf-8");
    let mut append = Command::new(env!("CARGO_BIN_EXE_sealog"))
        .args(["append", path])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("append runs");
    let mut stdin = append.stdin.take().expect("stdin");
    let mut acknowledged = BufReader::new(append.stdout.take().expect("stdout")).lines();
    let mut sent = 0u64;
    for round in 0..4 {
        for _ in 0..25 {
            writeln!(stdin, "payload {sent}").expect("writes");
            sent += 1;
        }
        stdin.flush().expect("flushes");
        let mut last = 0;
        while last < sent {
            last = acknowledged
                .next()
                .expect("an LSN")
                .expect("reads")
                .parse()
                .expect("a number");
        }
        let stat = stat_json(&ring);
        assert_sane(&stat, sent, sent, 0);
        assert_eq!(number(&stat, "live_entries"), sent, "round {round}: {stat}");
        assert_eq!(stat["writer_pid"].as_u64(), Some(u64::from(append.id())));
        let plain = sealog(&["stat", path]);
        assert_eq!(plain.status.code(), Some(0), "{}", text(&plain.stderr));
        let plain = text(&plain.stdout);
        assert!(plain.contains("may be a moment old"), "{plain}");
        assert!(plain.contains(&format!("writer: process {} holds", append.id())));
        assert!(plain.contains(&format!("live entries: {sent} ")), "{plain}");
    }
    drop(stdin);
    assert!(append.wait().expect("append ends").success());
    let stat = stat_json(&ring);
    assert_eq!(stat["writer_pid"], Value::Null);
    assert_eq!(number(&stat, "live_entries"), sent);
}

#[test]
fn stat_of_a_path_that_is_no_ring_is_exit_2_naming_it() {
    let directory = tempfile::tempdir().expect("tempdir");
    let path = directory.path().to_str().expect("utf-8");
    let output = sealog(&["stat", path]);
    assert_eq!(output.status.code(), Some(2));
    assert!(text(&output.stderr).contains(path));
}

/// On a block device ring (a loop device): the lock is a `flock` on the device itself, and
/// the ring is read with O_DIRECT from the device, while a drive in this process holds it and
/// appends.
#[test]
fn stat_works_on_a_device_ring_a_drive_holds() {
    let test = "stat on a device ring";
    let directory = tempfile::tempdir().expect("tempdir");
    let Some(device) = sealog_tests::loop_device_or_skip(directory.path(), 64 << 20, 4096, test)
    else {
        return;
    };
    let options = FormatOptions::new(64 << 20)
        .segment_size_bytes(4 << 20)
        .sync_method(SyncMethod::Fdatasync);
    sealog::format(&device.path, &options).expect("formats the device");
    let drive = Drive::open(&device.path, DriveOptions::default()).expect("opens");
    let tickets: Vec<_> = (0..200u64)
        .map(|index| drive.append(vec![index as u8; 2000]).expect("appends"))
        .collect();
    let last = tickets
        .into_iter()
        .map(|ticket| ticket.wait().expect("durable"))
        .max()
        .expect("some");
    drive.trim(50).expect("trims");
    let stat = stat_json(&device.path);
    assert_sane(&stat, last, last, 50);
    assert_eq!(stat["kind"], "block_device", "{stat}");
    assert_eq!(number(&stat, "live_entries"), last - 50, "{stat}");
    assert_eq!(
        stat["writer_pid"].as_u64(),
        Some(u64::from(std::process::id())),
        "{stat}"
    );
    drive.close();
    let stat = stat_json(&device.path);
    assert_eq!(stat["writer_pid"], Value::Null, "{stat}");
    assert_eq!(number(&stat, "next_lsn"), last + 1, "{stat}");
}
