//! The `sealog-server` processes of a test, each logging to `NAME.log` in the test's
//! directory, SIGKILLed when the test ends however it ends; on a failure their logs' last
//! lines are printed.

use std::collections::BTreeMap;
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_sealog-server");

/// The processes, by name.
pub struct Procs {
    dir: PathBuf,
    children: BTreeMap<String, Child>,
}

impl Procs {
    /// None yet; their logs go in `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Procs {
        Procs {
            dir: dir.into(),
            children: BTreeMap::new(),
        }
    }

    /// Starts `sealog-server ARGS` as `name`, inside network namespace `netns` if given.
    pub fn spawn(&mut self, name: &str, netns: Option<&str>, args: &[String]) {
        let log = std::fs::File::options()
            .create(true)
            .append(true)
            .open(self.dir.join(format!("{name}.log")))
            .unwrap();
        let mut command = match netns {
            Some(ns) => {
                let mut command = Command::new("ip");
                command.args(["netns", "exec", ns, BIN]);
                command
            }
            None => Command::new(BIN),
        };
        let child = command
            .args(args)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn sealog-server");
        self.children.insert(name.into(), child);
    }

    /// SIGKILLs `name` and reaps it.
    pub fn kill(&mut self, name: &str) {
        if let Some(mut child) = self.children.remove(name) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Procs {
    fn drop(&mut self) {
        for name in self.children.keys().cloned().collect::<Vec<_>>() {
            self.kill(&name);
        }
        if !std::thread::panicking() {
            return;
        }
        for entry in std::fs::read_dir(&self.dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "log") {
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(15).collect();
                eprintln!("--- {} (newest first)\n{}", path.display(), tail.join("\n"));
            }
        }
    }
}

/// Waits until something listens on `addr` (20 s at most).
pub fn listening(addr: &str) {
    let started = Instant::now();
    let addr = addr.parse().expect("a socket address");
    while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "nothing listens on {addr}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
