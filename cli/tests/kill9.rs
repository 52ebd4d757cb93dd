//! The crash test with real processes: `sealog append` runs on a file ring and on a loop
//! device and is killed with SIGKILL at a random moment, round after round. Every LSN it printed
//! (acknowledged) must replay with its payload, and `sealog verify` must exit 0 after every
//! round. Per CI run: 80 rounds on an ext4 file ring, 40 on a file ring on XFS (a file system
//! made on a loop device), 80 on a raw loop device: 200 in all. `SEALOG_KILL9_ROUNDS` sets the
//! rounds per ring, `SEALOG_KILL9_SECONDS` runs each ring for that long instead (a soak). The
//! XFS and loop-device rings need root (and mkfs.xfs); under CI=true they must run.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sealog_tests::loop_device_or_skip;

fn sealog() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sealog"))
}

/// The CLI's generated payload for index `index` (the same function as `sealog append --count`).
fn generated_payload(index: u64, size: usize) -> Vec<u8> {
    let mut payload = Vec::with_capacity(size);
    let mut state = index.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    while payload.len() < size {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        payload.extend_from_slice(&state.to_le_bytes());
    }
    payload.truncate(size);
    payload
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// A field of a one-line JSON object, as a number.
fn json_number(json: &str, field: &str) -> Option<u64> {
    let key = format!("\"{field}\": ");
    let start = json.find(&key)? + key.len();
    let digits: String = json[start..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

fn verify_next_lsn(path: &str) -> u64 {
    let output = sealog()
        .args(["verify", path, "--json"])
        .output()
        .expect("verify runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert_eq!(
        output.status.code(),
        Some(0),
        "verify after a kill: {stdout} {}",
        String::from_utf8_lossy(&output.stderr)
    );
    json_number(&stdout, "next_lsn").expect("next_lsn")
}

fn dump(path: &str) -> HashMap<u64, String> {
    let output = sealog()
        .args(["dump", path, "--json"])
        .output()
        .expect("dump runs");
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| {
            let lsn = json_number(line, "lsn").expect("lsn");
            let start = line.find("\"payload_hex\": \"").expect("payload") + 16;
            let end = line[start..].find('"').expect("closing quote") + start;
            (lsn, line[start..end].to_string())
        })
        .collect()
}

/// A small deterministic generator for the kill times and sizes.
struct Rng(u64);

impl Rng {
    fn below(&mut self, bound: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % bound
    }
}

/// How long a ring is exercised: rounds, or a time.
#[derive(Clone, Copy)]
struct Budget {
    rounds: u64,
    until: Option<Instant>,
}

impl Budget {
    fn new(default_rounds: u64) -> Budget {
        let number = |name: &str| {
            std::env::var(name)
                .ok()
                .and_then(|value| value.parse().ok())
        };
        match number("SEALOG_KILL9_SECONDS") {
            Some(seconds) => Budget {
                rounds: u64::MAX,
                until: Some(Instant::now() + Duration::from_secs(seconds)),
            },
            None => Budget {
                rounds: number("SEALOG_KILL9_ROUNDS").unwrap_or(default_rounds),
                until: None,
            },
        }
    }

    fn allows(&self, round: u64) -> bool {
        round < self.rounds && self.until.is_none_or(|until| Instant::now() < until)
    }
}

fn kill9_rounds(path: &str, budget: Budget, seed: u64) -> (u64, u64) {
    let mut rng = Rng(seed | 1);
    let mut checked = 0;
    let mut round = 0;
    while budget.allows(round) {
        round += 1;
        let base = verify_next_lsn(path) - 1;
        let size = 1 + rng.below(6000) as usize;
        let mut child = sealog()
            .args([
                "append",
                path,
                "--count",
                "1000000",
                "--size",
                &size.to_string(),
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("append runs");
        let stdout = child.stdout.take().expect("stdout");
        let reader = std::thread::spawn(move || {
            BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
                .filter_map(|line| line.parse::<u64>().ok())
                .collect::<Vec<u64>>()
        });
        let delay = Duration::from_millis(30 + rng.below(250));
        let started = Instant::now();
        while started.elapsed() < delay {
            std::thread::sleep(Duration::from_millis(5));
        }
        child.kill().expect("SIGKILL");
        child.wait().expect("reaped");
        let printed = reader.join().expect("reader");
        let entries = dump(path);
        for (position, lsn) in printed.iter().enumerate() {
            assert_eq!(
                *lsn,
                base + 1 + position as u64,
                "round {round}: LSNs printed in order"
            );
            let expected = hex(&generated_payload(lsn - base - 1, size));
            match entries.get(lsn) {
                Some(found) => assert!(found == &expected, "round {round}: LSN {lsn} payload"),
                None => panic!("round {round}: acknowledged LSN {lsn} lost (seed {seed})"),
            }
        }
        checked += printed.len() as u64;
        if let Some(last) = printed.last() {
            let trim = sealog()
                .args(["trim", path, "--upto", &last.to_string()])
                .output();
            assert!(trim.expect("trim runs").status.success());
        }
    }
    (round, checked)
}

#[test]
fn kill9_on_a_file_ring_never_loses_an_acknowledged_entry() {
    let directory = tempfile::tempdir().expect("tempdir");
    let ring = directory.path().join("ring");
    let path = ring.to_str().expect("utf-8");
    let format = sealog()
        .args(["format", path, "--size", "16M", "--segment-size", "1M"])
        .output();
    assert!(format.expect("format runs").status.success());
    let (rounds, checked) = kill9_rounds(path, Budget::new(80), 0x5ea1_0001);
    println!(
        "kill -9 rounds on an ext4 file ring: {rounds}, {checked} acknowledged entries checked"
    );
}

#[test]
fn kill9_on_a_loop_device_never_loses_an_acknowledged_entry() {
    let directory = tempfile::tempdir().expect("tempdir");
    let Some(device) = loop_device_or_skip(directory.path(), 24 << 20, 4096, "kill -9 loop") else {
        return;
    };
    let path = device.path.to_str().expect("utf-8").to_string();
    let format = sealog()
        .args(["format", &path, "--size", "16M", "--segment-size", "1M"])
        .output();
    let format = format.expect("format runs");
    assert!(
        format.status.success(),
        "{}",
        String::from_utf8_lossy(&format.stderr)
    );
    let (rounds, checked) = kill9_rounds(&path, Budget::new(80), 0x5ea1_0002);
    println!("kill -9 rounds on a loop device: {rounds}, {checked} acknowledged entries checked");
}

/// A file system mounted by the test, unmounted when dropped (before its loop device goes).
struct Mounted(std::path::PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn kill9_on_an_xfs_file_ring_never_loses_an_acknowledged_entry() {
    let test = "kill -9 on XFS";
    let directory = tempfile::tempdir().expect("tempdir");
    let Some(device) = loop_device_or_skip(directory.path(), 400 << 20, 4096, test) else {
        return;
    };
    let made = Command::new("mkfs.xfs")
        .args(["-f", "-q"])
        .arg(&device.path)
        .status();
    if !made.is_ok_and(|status| status.success()) {
        assert!(
            !sealog_tests::must_run_privileged_tests(),
            "{test}: CI must have mkfs.xfs"
        );
        println!("SKIP: {test}: mkfs.xfs is not available");
        return;
    }
    let mountpoint = directory.path().join("xfs");
    std::fs::create_dir(&mountpoint).expect("mkdir");
    let mounted = Command::new("mount")
        .arg(&device.path)
        .arg(&mountpoint)
        .status();
    assert!(
        mounted.expect("mount runs").success(),
        "{test}: mount failed"
    );
    let mounted = Mounted(mountpoint.clone());
    let ring = mountpoint.join("ring");
    let path = ring.to_str().expect("utf-8");
    let format = sealog()
        .args(["format", path, "--size", "16M", "--segment-size", "1M"])
        .output();
    assert!(format.expect("format runs").status.success());
    let (rounds, checked) = kill9_rounds(path, Budget::new(40), 0x5ea1_0003);
    println!(
        "kill -9 rounds on an XFS file ring: {rounds}, {checked} acknowledged entries checked"
    );
    drop(mounted);
    drop(device);
}
