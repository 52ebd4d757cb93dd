//! A ring that another process holds is left alone (docs/recovery.md, I-17): `format`, with or
//! without `--force`, refuses a ring that a live writer or a reader holds with exit 1 and a
//! sentence naming the path, and changes nothing of it; every other subcommand that cannot have
//! the ring within the bounded wait exits 1 the same way. Run against the built `sealog`
//! binary, on directory rings and on a loop device.

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::Duration;

use sealog::reader::RingReader;

fn sealog() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sealog"))
}

fn run(args: &[&str]) -> Output {
    sealog()
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("runs sealog")
}

/// Runs every command at once (each waits out the bounded lock wait) and returns the outputs
/// in order.
fn run_all(commands: &[Vec<&str>]) -> Vec<Output> {
    let children: Vec<Child> = commands
        .iter()
        .map(|args| {
            sealog()
                .args(args)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("runs sealog")
        })
        .collect();
    children
        .into_iter()
        .map(|child| child.wait_with_output().expect("waits"))
        .collect()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn format_ring(path: &str) {
    let output = run(&["format", path, "--size", "8M", "--segment-size", "1M"]);
    assert!(output.status.success(), "format: {}", text(&output.stderr));
}

/// Every file of a directory ring: name, inode and a hash of its bytes (a device: its bytes).
fn snapshot(path: &Path) -> BTreeMap<String, (u64, u64)> {
    let hash = |bytes: &[u8]| {
        let mut hasher = DefaultHasher::new();
        bytes.hash(&mut hasher);
        hasher.finish()
    };
    if !path.is_dir() {
        let bytes = std::fs::read(path).expect("reads the device");
        return BTreeMap::from([(String::new(), (0, hash(&bytes)))]);
    }
    std::fs::read_dir(path)
        .expect("lists the ring")
        .map(|entry| {
            let entry = entry.expect("an entry");
            let inode = entry.metadata().expect("stat").ino();
            let bytes = std::fs::read(entry.path()).expect("reads a ring file");
            (
                entry.file_name().to_string_lossy().into_owned(),
                (inode, hash(&bytes)),
            )
        })
        .collect()
}

/// A ring's snapshot once two taken 200 ms apart agree (a live writer may still be settling).
fn settled_snapshot(path: &Path) -> BTreeMap<String, (u64, u64)> {
    let mut last = snapshot(path);
    for _ in 0..50 {
        std::thread::sleep(Duration::from_millis(200));
        let next = snapshot(path);
        if next == last {
            return next;
        }
        last = next;
    }
    panic!("{}: the ring never settled", path.display());
}

fn assert_refused_as_in_use(output: &Output, path: &str, what: &str) {
    let stderr = text(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(1),
        "{what} on a ring in use: stdout {} stderr {stderr}",
        text(&output.stdout)
    );
    assert!(
        stderr.contains(path) && stderr.contains("in use"),
        "{what}: the sentence names the path and says the ring is in use: {stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{what}: one sentence: {stderr}");
}

/// `sealog append` on a ring, fed line by line; killed if a test fails while it runs.
struct Writer {
    child: Child,
    stdin: Option<ChildStdin>,
    acknowledged: Receiver<u64>,
    payloads: BTreeMap<u64, String>,
    sent: Vec<String>,
}

impl Writer {
    fn start(path: &str) -> Writer {
        let mut child = sealog()
            .args(["append", path])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("append runs");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("stdout");
        let (sender, acknowledged) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if sender.send(line.parse::<u64>().expect("an LSN")).is_err() {
                    return;
                }
            }
        });
        Writer {
            child,
            stdin,
            acknowledged,
            payloads: BTreeMap::new(),
            sent: Vec::new(),
        }
    }

    /// Appends `count` payloads and waits until each is acknowledged, in order.
    fn append_and_wait(&mut self, count: usize) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        let first = self.sent.len();
        for index in first..first + count {
            let payload = format!("entry {index} of the live writer");
            stdin
                .write_all(format!("{payload}\n").as_bytes())
                .expect("writes stdin");
            stdin.flush().expect("flushes stdin");
            self.sent.push(payload);
        }
        for index in first..first + count {
            let lsn = self
                .acknowledged
                .recv_timeout(Duration::from_secs(30))
                .expect("the writer acknowledges");
            assert_eq!(lsn, index as u64 + 1, "LSNs in order, none skipped");
            self.payloads.insert(lsn, self.sent[index].clone());
        }
    }

    /// Closes stdin and waits for a clean exit.
    fn finish(mut self) -> BTreeMap<u64, String> {
        drop(self.stdin.take());
        let status = self.child.wait().expect("waits for append");
        assert!(status.success(), "append exits 0 after stdin closes");
        std::mem::take(&mut self.payloads)
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The scenario: `format --force` (and plain `format`) of a ring a live `sealog
/// append` holds is refused with exit 1, changes no byte, and the writer goes on; afterwards
/// every acknowledged entry is in the ring.
#[test]
fn format_refuses_a_ring_a_live_writer_holds_and_changes_nothing() {
    let directory = tempfile::tempdir().expect("tempdir");
    let ring = directory.path().join("ring");
    let path = ring.to_str().expect("utf-8");
    format_ring(path);
    let mut writer = Writer::start(path);
    writer.append_and_wait(20);
    let before = settled_snapshot(&ring);
    let outputs = run_all(&[
        vec![
            "format",
            path,
            "--size",
            "8M",
            "--segment-size",
            "1M",
            "--force",
        ],
        vec!["format", path, "--size", "8M", "--segment-size", "1M"],
    ]);
    assert_refused_as_in_use(&outputs[0], path, "format --force");
    assert_refused_as_in_use(&outputs[1], path, "format");
    assert_eq!(
        snapshot(&ring),
        before,
        "not a byte of a ring in use changes"
    );
    writer.append_and_wait(20);
    let acknowledged = writer.finish();
    assert_eq!(acknowledged.len(), 40);
    let dump = run(&["dump", path]);
    assert_eq!(dump.status.code(), Some(0), "{}", text(&dump.stderr));
    let dumped: BTreeMap<u64, String> = text(&dump.stdout)
        .lines()
        .map(|line| {
            let (lsn, payload) = line.split_once('\t').expect("LSN, tab, payload");
            (lsn.parse().expect("an LSN"), payload.to_string())
        })
        .collect();
    assert_eq!(
        dumped, acknowledged,
        "every acknowledged entry is in the ring"
    );
}

/// A reader's shared lock (here `RingReader`, as `dump`, `verify` and `inspect` hold it) blocks
/// format too, with or without `--force`; once the reader lets go, format proceeds.
#[test]
fn format_refuses_a_ring_a_reader_holds_until_the_reader_lets_go() {
    let directory = tempfile::tempdir().expect("tempdir");
    let ring = directory.path().join("ring");
    let path = ring.to_str().expect("utf-8");
    format_ring(path);
    let appended = sealog()
        .args(["append", path, "--count", "10", "--size", "100"])
        .output()
        .expect("append runs");
    assert!(appended.status.success(), "{}", text(&appended.stderr));
    let reader = RingReader::open(&ring).expect("a reader opens the ring");
    let before = snapshot(&ring);
    let outputs = run_all(&[
        vec!["format", path, "--size", "8M", "--force"],
        vec!["format", path, "--size", "8M"],
    ]);
    assert_refused_as_in_use(&outputs[0], path, "format --force");
    assert_refused_as_in_use(&outputs[1], path, "format");
    assert_eq!(snapshot(&ring), before, "nothing of a ring in use changes");
    drop(reader);
    let verify = run(&["verify", path, "--json"]);
    assert!(
        text(&verify.stdout).contains("\"last_lsn\": 10"),
        "{}",
        text(&verify.stdout)
    );
    let plain = run(&["format", path, "--size", "8M"]);
    assert_eq!(
        plain.status.code(),
        Some(2),
        "a ring is not an empty directory"
    );
    let forced = run(&["format", path, "--size", "8M", "--force"]);
    assert_eq!(forced.status.code(), Some(0), "{}", text(&forced.stderr));
    let verify = run(&["verify", path, "--json"]);
    assert!(
        text(&verify.stdout).contains("\"last_lsn\": null"),
        "the ring was formatted afresh: {}",
        text(&verify.stdout)
    );
}

/// One exit code for "ring in use": append, trim, dump, verify and inspect on a ring a live
/// writer holds wait out the bounded lock wait, then exit 1 naming the path.
#[test]
fn every_subcommand_on_a_ring_a_writer_holds_exits_1_naming_the_path() {
    let directory = tempfile::tempdir().expect("tempdir");
    let ring = directory.path().join("ring");
    let path = ring.to_str().expect("utf-8");
    format_ring(path);
    let mut writer = Writer::start(path);
    writer.append_and_wait(3);
    let commands = [
        vec!["append", path, "--count", "1", "--size", "10"],
        vec!["trim", path, "--upto", "1"],
        vec!["dump", path],
        vec!["verify", path, "--json"],
        vec!["inspect", path],
    ];
    for (args, output) in commands.iter().zip(run_all(&commands)) {
        assert_refused_as_in_use(&output, path, args[0]);
    }
    writer.append_and_wait(1);
    assert_eq!(writer.finish().len(), 4);
}

/// The same on a raw block device: format takes the flock that readers and writers take on the
/// device (besides O_EXCL), so a reader holding the device blocks it as a writer does.
#[test]
fn format_refuses_a_device_ring_a_reader_or_a_writer_holds() {
    let directory = tempfile::tempdir().expect("tempdir");
    let test = "format of a device ring in use";
    let Some(device) = sealog_tests::loop_device_or_skip(directory.path(), 16 << 20, 4096, test)
    else {
        return;
    };
    let path = device.path.to_str().expect("utf-8").to_string();
    let path = path.as_str();
    format_ring(path);
    let mut writer = Writer::start(path);
    writer.append_and_wait(5);
    let before = settled_snapshot(&device.path);
    let outputs = run_all(&[vec!["format", path, "--size", "8M", "--force"]]);
    assert_refused_as_in_use(&outputs[0], path, "format of a device a writer holds");
    assert_eq!(snapshot(&device.path), before, "the device is unchanged");
    let acknowledged = writer.finish();
    let reader = RingReader::open(&device.path).expect("a reader opens the device");
    let before = snapshot(&device.path);
    let outputs = run_all(&[vec!["format", path, "--size", "8M"]]);
    assert_refused_as_in_use(&outputs[0], path, "format of a device a reader holds");
    assert_eq!(snapshot(&device.path), before, "the device is unchanged");
    drop(reader);
    let dump = run(&["dump", path]);
    assert_eq!(text(&dump.stdout).lines().count(), acknowledged.len());
    // Once free, the device still carries a ring: formatting over it must be asked for.
    let format = run(&["format", path, "--size", "8M"]);
    assert_eq!(format.status.code(), Some(2), "{}", text(&format.stderr));
    let format = run(&["format", path, "--size", "8M", "--overwrite", "sealog"]);
    assert_eq!(format.status.code(), Some(0), "{}", text(&format.stderr));
    drop(device);
}
