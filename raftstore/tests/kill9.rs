//! kill -9 of a process running many Raft groups: a child appends, votes, truncates and
//! purges on every group at once and prints what each call acknowledged (and, before
//! issuing, what it is about to do); the parent kills it with SIGKILL at a seeded moment,
//! reopens the ring and checks each group against the acknowledged history: every
//! acknowledged entry and vote is there, nothing truncated reappears, and the one operation
//! each group had in flight either took effect or did not (an append, any prefix of it).
//! The next round's child carries on from what the ring holds.
//!
//! 100 rounds by default; `SEALOG_RAFT_KILL9_ROUNDS` sets more, `SEALOG_RAFT_KILL9_SEED`
//! replays a failing seed (printed with the command on failure).

mod common;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::time::Duration;

use common::{entry, format, log_id, open, payload, read_until, runtime, spawn_child, Config};
use openraft::storage::{RaftLogStorage, RaftLogStorageExt};
use openraft::{RaftLogReader, Vote};
use sealog_openraft::{GroupLogStore, SealogRaftStore};

/// Groups the child runs at once.
const GROUPS: u64 = 16;

/// The environment variable carrying a child's seed.
const SEED_ENV: &str = "SEALOG_RAFT_KILL9_CHILD_SEED";

/// A small seeded generator (xorshift64*): the test needs reproducible choices, not quality.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// One group's log as the test sees it: entries by index (term, payload), the purge point
/// and the vote's term.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Model {
    entries: BTreeMap<u64, (u64, String)>,
    purged: Option<(u64, u64)>,
    vote: u64,
}

impl Model {
    fn last(&self) -> Option<(u64, u64)> {
        match (self.entries.last_key_value(), self.purged) {
            (Some((&index, &(term, _))), _) => Some((term, index)),
            (None, purged) => purged,
        }
    }

    fn apply(&mut self, operation: &Operation) {
        match operation {
            Operation::Append { term, entries } => {
                for (index, payload) in entries {
                    self.entries.insert(*index, (*term, payload.clone()));
                }
            }
            Operation::Vote { term } => self.vote = *term,
            Operation::Truncate { index } => {
                self.entries.split_off(index);
            }
            Operation::Purge { term, index } => {
                self.entries = self.entries.split_off(&(index + 1));
                self.purged = Some((*term, *index));
            }
        }
    }
}

/// An operation a child issued on a group.
#[derive(Clone, Debug)]
enum Operation {
    Append {
        term: u64,
        entries: Vec<(u64, String)>,
    },
    Vote {
        term: u64,
    },
    Truncate {
        index: u64,
    },
    Purge {
        term: u64,
        index: u64,
    },
}

/// The child's side: every group runs a random sequence of operations until killed.
#[test]
fn child() {
    let Ok(seed) = std::env::var(SEED_ENV) else {
        return;
    };
    let seed: u64 = seed.parse().expect("a seed");
    let ring = std::env::var_os(common::RING_ENV).expect("a ring");
    let store = open(Path::new(&ring));
    let runtime = runtime();
    let logs: Vec<_> = (1..=GROUPS)
        .map(|group| store.group(group).expect("group"))
        .collect();
    // Printed before any group prints: the test harness's own words share its line.
    say("STARTED".to_string());
    runtime.block_on(async {
        let mut tasks = Vec::new();
        for (log, group) in logs.into_iter().zip(1..) {
            let random = Random(seed.wrapping_mul(31).wrapping_add(group) | 1);
            tasks.push(tokio::spawn(run_group(group, log, random, seed)));
        }
        for task in tasks {
            task.await.expect("the group's task");
        }
    });
}

/// Prints one line and flushes it, so that what the parent reads was acknowledged.
fn say(line: String) {
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{line}").expect("stdout");
    stdout.flush().expect("stdout");
}

async fn run_group(group: u64, mut log: GroupLogStore<Config>, mut random: Random, seed: u64) {
    let state = log.get_log_state().await.expect("state");
    let mut vote = log
        .read_vote()
        .await
        .expect("vote")
        .map_or(1, |vote| vote.leader_id.term);
    let mut last = state.last_log_id.map(|id| (id.leader_id.term, id.index));
    let mut purged = state.last_purged_log_id.map(|id| id.index);
    let mut seq = seed << 20;
    loop {
        seq += 1;
        let next = last.map_or(1, |(_, index)| index + 1);
        let floor = purged.map_or(1, |index| index + 1);
        match random.below(10) {
            0 => {
                vote += 1;
                say(format!("v {group} {seq} {vote}"));
                log.save_vote(&Vote::new_committed(vote, 1))
                    .await
                    .expect("votes");
                say(format!("V {group} {seq}"));
            }
            1 if next > floor => {
                let index = floor + random.below(next - floor);
                let term = read_term(&mut log, index).await;
                say(format!("t {group} {seq} {index}"));
                log.truncate(log_id(term, index)).await.expect("truncates");
                say(format!("T {group} {seq}"));
            }
            2 if next > floor + 8 => {
                let index = floor + random.below(next - floor - 4);
                let term = read_term(&mut log, index).await;
                say(format!("p {group} {seq} {index} {term}"));
                log.purge(log_id(term, index)).await.expect("purges");
                say(format!("P {group} {seq}"));
            }
            _ => {
                let count = 1 + random.below(8);
                let entries: Vec<_> = (next..next + count)
                    .map(|index| entry(vote, index, &format!("{group}:{seq}:{index}")))
                    .collect();
                say(format!(
                    "a {group} {seq} {next} {} {vote}",
                    next + count - 1
                ));
                log.blocking_append(entries).await.expect("appends");
                say(format!("A {group} {seq}"));
            }
        }
        let state = log.get_log_state().await.expect("state");
        last = state.last_log_id.map(|id| (id.leader_id.term, id.index));
        purged = state.last_purged_log_id.map(|id| id.index);
    }
}

/// The term of the entry at `index`.
async fn read_term(log: &mut GroupLogStore<Config>, index: u64) -> u64 {
    let entries = log.try_get_log_entries(index..=index).await.expect("reads");
    entries
        .first()
        .map(|entry| entry.log_id.leader_id.term)
        .expect("the entry is there")
}

/// Each group's operations in the order issued, with whether each was acknowledged (an
/// acknowledgement names its operation's sequence number).
fn parse(lines: &[String]) -> BTreeMap<u64, Vec<(Operation, bool)>> {
    let mut groups: BTreeMap<u64, Vec<(u64, Operation, bool)>> = BTreeMap::new();
    for line in lines {
        let fields: Vec<&str> = line.split(' ').collect();
        let number = |at: usize| -> u64 { fields[at].parse().expect("a number") };
        let group = match fields.first() {
            Some(&("a" | "v" | "t" | "p" | "A" | "V" | "T" | "P")) => number(1),
            _ => continue,
        };
        let operations = groups.entry(group).or_default();
        let seq = number(2);
        let operation = match fields[0] {
            "a" => Operation::Append {
                term: number(5),
                entries: (number(3)..=number(4))
                    .map(|index| (index, format!("{group}:{seq}:{index}")))
                    .collect(),
            },
            "v" => Operation::Vote { term: number(3) },
            "t" => Operation::Truncate { index: number(3) },
            "p" => Operation::Purge {
                term: number(4),
                index: number(3),
            },
            _ => {
                let issued = operations.iter_mut().find(|(issued, ..)| *issued == seq);
                issued
                    .unwrap_or_else(|| panic!("an acknowledgement without its issue: {line}"))
                    .2 = true;
                continue;
            }
        };
        operations.push((seq, operation, false));
    }
    groups
        .into_iter()
        .map(|(group, operations)| {
            let operations = operations.into_iter().map(|(_, op, acked)| (op, acked));
            (group, operations.collect())
        })
        .collect()
}

/// The states the group may be in after a kill: the acknowledged operations applied to
/// `before`, and besides, the one in flight applied (an append, any prefix of it).
fn acceptable(before: &Model, operations: &[(Operation, bool)]) -> Vec<Model> {
    let mut model = before.clone();
    let mut pending = None;
    for (operation, acknowledged) in operations {
        if *acknowledged {
            model.apply(operation);
        } else {
            pending = Some(operation);
        }
    }
    let mut states = vec![model.clone()];
    match pending {
        Some(Operation::Append { term, entries }) => {
            for end in 1..=entries.len() {
                let mut prefix = model.clone();
                prefix.apply(&Operation::Append {
                    term: *term,
                    entries: entries[..end].to_vec(),
                });
                states.push(prefix);
            }
        }
        Some(operation) => {
            let mut applied = model.clone();
            applied.apply(operation);
            states.push(applied);
        }
        None => {}
    }
    states
}

/// What the reopened store holds for `group`.
async fn observe(store: &SealogRaftStore<Config>, group: u64) -> Model {
    let mut log = store.group(group).expect("group");
    let state = log.get_log_state().await.expect("state");
    let vote = log
        .read_vote()
        .await
        .expect("vote")
        .map_or(1, |vote| vote.leader_id.term);
    let entries = log.try_get_log_entries(0..).await.expect("reads");
    let model = Model {
        entries: entries
            .iter()
            .map(|e| {
                (
                    e.log_id.index,
                    (e.log_id.leader_id.term, payload(e).unwrap_or("").into()),
                )
            })
            .collect(),
        purged: state
            .last_purged_log_id
            .map(|id| (id.leader_id.term, id.index)),
        vote,
    };
    let last = state.last_log_id.map(|id| (id.leader_id.term, id.index));
    assert_eq!(
        last,
        model.last(),
        "group {group}: the last log id and the entries disagree"
    );
    model
}

/// Runs one child with `seed` on `ring` until a seeded moment, kills it and returns what it
/// printed.
fn run_child(ring: &Path, seed: u64) -> Vec<String> {
    let mut child = spawn_child("kill9", ring, &[(SEED_ENV, seed.to_string())]);
    let (mut lines, rest) = read_until(&mut child, "STARTED", Duration::from_secs(60));
    std::thread::sleep(Duration::from_millis(20 + Random(seed | 1).below(150)));
    child.kill().expect("SIGKILL");
    child.wait().expect("the child ends");
    // The reader thread sends what the child printed before it died, then sees the pipe
    // close and hangs up.
    lines.extend(rest.iter());
    lines
}

#[test]
fn kill_9_loses_nothing_acknowledged_and_resurrects_nothing_truncated() {
    let rounds: u64 =
        std::env::var("SEALOG_RAFT_KILL9_ROUNDS").map_or(100, |v| v.parse().expect("a count"));
    let base: u64 = std::env::var("SEALOG_RAFT_KILL9_SEED")
        .map_or_else(|_| now_seed(), |v| v.parse().expect("a seed"));
    let directory = tempfile::tempdir().expect("a directory");
    let ring = directory.path().join("ring");
    format(&ring, 16 << 20);
    let mut models: BTreeMap<u64, Model> = (1..=GROUPS)
        .map(|g| {
            (
                g,
                Model {
                    vote: 1,
                    ..Model::default()
                },
            )
        })
        .collect();
    let runtime = runtime();
    let mut acknowledged = 0;
    for round in 0..rounds {
        let seed = base.wrapping_add(round);
        let lines = run_child(&ring, seed);
        acknowledged += lines
            .iter()
            .filter(|l| l.starts_with(['A', 'V', 'T', 'P']))
            .count();
        let operations = parse(&lines);
        let store = open(&ring);
        for group in 1..=GROUPS {
            let before = &models[&group];
            let states = acceptable(before, operations.get(&group).map_or(&[], Vec::as_slice));
            let seen = runtime.block_on(observe(&store, group));
            assert!(
                states.contains(&seen),
                "round {round} (seed {seed}), group {group}: the reopened store holds\n{seen:?}\n\
                 which is none of the acceptable states\n{states:?}\nreplay: \
                 SEALOG_RAFT_KILL9_SEED={base} SEALOG_RAFT_KILL9_ROUNDS={} cargo test --release \
                 -p sealog-openraft --test kill9",
                round + 1
            );
            models.insert(group, seen);
        }
        store.close();
    }
    println!(
        "kill -9: {rounds} rounds from seed {base}, {acknowledged} acknowledged operations checked"
    );
}

/// A seed from the clock, printed with any failure so that it can be replayed.
fn now_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |since| since.as_nanos() as u64)
        & 0xffff_ffff
}
