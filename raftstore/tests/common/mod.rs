//! What the crash tests share: a type configuration whose entries carry a string, entry
//! builders, and the child-process harness (the test binary runs itself again with a
//! scenario named in the environment; the parent kills it with SIGKILL).

#![allow(dead_code)]

use std::io::Cursor;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::Duration;

use openraft::{BasicNode, CommittedLeaderId, Entry, EntryPayload, LogId};
use sealog_openraft::{RaftStoreOptions, SealogRaftStore};

openraft::declare_raft_types!(
    /// The crash tests' types: entries carry a string naming who wrote them.
    pub Config:
        D = String,
        R = String,
        NodeId = u64,
        Node = BasicNode,
        Entry = Entry<Config>,
        SnapshotData = Cursor<Vec<u8>>,
);

/// The environment variable naming the scenario a child runs.
pub const SCENARIO_ENV: &str = "SEALOG_RAFT_CRASH_SCENARIO";

/// The environment variable naming the child's ring.
pub const RING_ENV: &str = "SEALOG_RAFT_CRASH_RING";

/// The log id of `index` written under `term` (by node 1).
pub fn log_id(term: u64, index: u64) -> LogId<u64> {
    LogId::new(CommittedLeaderId::new(term, 1), index)
}

/// An entry at `index` of `term` carrying `payload`.
pub fn entry(term: u64, index: u64, payload: &str) -> Entry<Config> {
    Entry {
        log_id: log_id(term, index),
        payload: EntryPayload::Normal(payload.to_string()),
    }
}

/// The payload of a normal entry (none for others).
pub fn payload(entry: &Entry<Config>) -> Option<&str> {
    match &entry.payload {
        EntryPayload::Normal(payload) => Some(payload),
        _ => None,
    }
}

/// Formats a ring of `size_bytes` at `path`.
pub fn format(path: &Path, size_bytes: u64) {
    SealogRaftStore::<Config>::format(path, size_bytes).expect("formats");
}

/// Opens the ring at `path`.
pub fn open(path: &Path) -> SealogRaftStore<Config> {
    SealogRaftStore::open(path, RaftStoreOptions::default()).expect("opens")
}

/// Starts this test binary again as a child running `scenario` (the test named `child`
/// in it) on the ring at `ring`, with `envs` besides, its stdout piped.
pub fn spawn_child(scenario: &str, ring: &Path, envs: &[(&str, String)]) -> Child {
    Command::new(std::env::current_exe().expect("the test binary"))
        .args(["--exact", "child", "--nocapture", "--test-threads", "1"])
        .envs(envs.iter().map(|(key, value)| (*key, value.as_str())))
        .env(SCENARIO_ENV, scenario)
        .env(RING_ENV, ring)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the child starts")
}

/// A tokio runtime for a test's async steps.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime")
}

/// The lines of `child`'s stdout, read on a thread of their own: those up to the first that
/// ends with `marker` (the test harness may print its own words before it on that line),
/// waited for at most `timeout`, and the receiver the rest arrive on.
pub fn read_until(
    child: &mut Child,
    marker: &str,
    timeout: Duration,
) -> (Vec<String>, Receiver<String>) {
    let stdout = child.stdout.take().expect("stdout");
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if sender.send(line).is_err() {
                break;
            }
        }
    });
    let mut lines = Vec::new();
    while let Ok(line) = receiver.recv_timeout(timeout) {
        let found = line.ends_with(marker);
        lines.push(line);
        if found {
            return (lines, receiver);
        }
    }
    let _ = child.kill();
    panic!("the child never printed {marker}: {lines:?}");
}
