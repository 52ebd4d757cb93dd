//! kill -9 of a real LogDrive writer (issue 13): `sealog-fault logdrive-writer` runs the
//! LogDrive workload on a small file ring (io_uring, O_DIRECT), its background reclaimer
//! relocating as eagerly as it can so the ring laps, and prints every operation it issues and
//! every acknowledgement; the test kills it with SIGKILL at a random moment, opens the store
//! itself and checks everything printed against the model (acknowledged writes read back
//! unless an acknowledged seal, trim or deletion removed them, seals, fences, trims and
//! deletions hold, nothing reads as bytes never written for its address), then lets the next
//! writer go on with the same ring. `SEALOG_LOGDRIVE_KILL9_ROUNDS` sets the rounds. Needs
//! no root.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sealog::{FormatOptions, SyncMethod};
use sealog_fault::logdrive::by_hand;
use sealog_fault::logdrive::model::{check, Base, Model};
use sealog_fault::logdrive::writer::facts_from_lines;
use sealog_logdrive::{LogDriveStore, StoreOptions};

/// A small deterministic generator for the kill times.
struct Rng(u64);

impl Rng {
    fn below(&mut self, bound: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % bound
    }
}

#[test]
fn kill9_of_a_logdrive_writer_loses_nothing_acknowledged() {
    let rounds = std::env::var("SEALOG_LOGDRIVE_KILL9_ROUNDS")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(16u64);
    let seed = 0x5ea1_0d00;
    let directory = tempfile::tempdir().expect("a temporary directory");
    let ring = directory.path().join("ring");
    // 4 MiB in 256 KiB segments: the writers lap it within a round or two.
    let options = FormatOptions {
        size_bytes: 2 * 4096 + 16 * (256 << 10),
        segment_size_bytes: Some(256 << 10),
        batch_size_max_bytes: Some(64 << 10),
        window_batches_max: Some(4),
        sync_method: Some(SyncMethod::Fdatasync),
        ..FormatOptions::default()
    };
    sealog::format(&ring, &options).expect("formats");
    let mut rng = Rng(seed | 1);
    let mut base = Base::default();
    let (mut acknowledged, mut in_flight, mut relocated, mut relocation_steps) = (0, 0, 0, 0);
    for round in 0..rounds {
        let mut child = Command::new(env!("CARGO_BIN_EXE_sealog-fault"))
            .arg("logdrive-writer")
            .arg(&ring)
            .args(["--seed", &(seed + round).to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the writer starts");
        let stdout = child.stdout.take().expect("stdout");
        let reader = std::thread::spawn(move || {
            BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
                .collect::<Vec<String>>()
        });
        let delay = Duration::from_millis(300 + rng.below(900));
        let started = Instant::now();
        while started.elapsed() < delay {
            std::thread::sleep(Duration::from_millis(5));
        }
        child.kill().expect("SIGKILL");
        child.wait().expect("reaped");
        let lines = reader.join().expect("the reader");
        let heard = facts_from_lines(&lines)
            .unwrap_or_else(|what| panic!("round {round}: the writer's lines: {what}"));
        // Every acknowledged creation took a generation above every one issued before.
        let mut floor = base.generation_max;
        for generation in &heard.generations {
            assert!(
                *generation > floor,
                "round {round}: a creation took generation {generation}, not above {floor}"
            );
            floor = *generation;
        }
        let store =
            LogDriveStore::open_with_options(&ring, StoreOptions::default().reclaim(by_hand()))
                .unwrap_or_else(|error| panic!("round {round}: the store did not open: {error}"));
        let model = Model {
            base,
            facts: heard.facts.clone(),
            lenient: false,
        };
        let checked = check(&store, &model)
            .unwrap_or_else(|what| panic!("round {round} (writer seed {}): {what}", seed + round));
        store.close();
        base = checked.base;
        acknowledged += heard.acknowledged;
        in_flight += heard.in_flight;
        relocated += heard.stats.0;
        relocation_steps += heard.stats.1;
    }
    println!(
        "kill -9 of a LogDrive writer: {rounds} rounds, {acknowledged} acknowledged operations \
         checked, {in_flight} in flight at the kills; the writers' reclaimer relocated \
         {relocated} records in {relocation_steps} steps; 0 violations"
    );
    assert!(acknowledged > 0);
    assert!(relocated > 0, "the writers never relocated");
}
