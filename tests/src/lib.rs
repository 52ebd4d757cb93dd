//! Workspace-wide tests live in `tests/`: the house-style check (`tidy`) now, integration tests
//! on real files, loop devices and killed processes as the engine grows. This library holds
//! only what those tests share.

#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};

/// The workspace's root directory.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the root")
        .to_path_buf()
}

/// A loop device made by a test over a file of its own, detached (exactly that device) when
/// dropped. Loop devices stand in for NVMe namespaces: `losetup --direct-io=on` with a 4096- or
/// 512-byte logical sector size.
pub struct LoopDevice {
    /// `/dev/loopN`.
    pub path: PathBuf,
    backing: PathBuf,
}

/// Why a loop device test cannot run here.
#[derive(Debug)]
pub struct Unavailable(pub String);

impl LoopDevice {
    /// Creates a backing file of `size_bytes` in `directory` and attaches it.
    pub fn create(
        directory: &Path,
        size_bytes: u64,
        sector_size_bytes: u32,
    ) -> Result<LoopDevice, Unavailable> {
        let backing = directory.join(format!("loop-backing-{sector_size_bytes}"));
        let file = std::fs::File::create(&backing).map_err(|e| Unavailable(e.to_string()))?;
        file.set_len(size_bytes)
            .map_err(|e| Unavailable(e.to_string()))?;
        drop(file);
        let output = std::process::Command::new("losetup")
            .args(["--find", "--show", "--direct-io=on", "--sector-size"])
            .arg(sector_size_bytes.to_string())
            .arg(&backing)
            .output()
            .map_err(|e| Unavailable(format!("losetup: {e}")))?;
        if !output.status.success() {
            return Err(Unavailable(format!(
                "losetup failed: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            )));
        }
        let path = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim().to_string());
        Ok(LoopDevice { path, backing })
    }
}

impl Drop for LoopDevice {
    fn drop(&mut self) {
        let _ = std::process::Command::new("losetup")
            .arg("-d")
            .arg(&self.path)
            .status();
        let _ = std::fs::remove_file(&self.backing);
    }
}

/// Whether this run must not skip tests that need root and loop devices (CI sets CI=true).
pub fn must_run_privileged_tests() -> bool {
    std::env::var("CI").is_ok_and(|value| value == "true" || value == "1")
}

/// Makes a loop device, or reports why not: a failure under CI, a printed `SKIP` otherwise.
pub fn loop_device_or_skip(
    directory: &Path,
    size_bytes: u64,
    sector_size_bytes: u32,
    test: &str,
) -> Option<LoopDevice> {
    match LoopDevice::create(directory, size_bytes, sector_size_bytes) {
        Ok(device) => Some(device),
        Err(Unavailable(why)) if !must_run_privileged_tests() => {
            println!("SKIP: {test}: no loop device ({why})");
            None
        }
        Err(Unavailable(why)) => panic!("{test}: CI must run loop-device tests: {why}"),
    }
}
