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
    /// The backing file, when the helper created it (removed on drop).
    backing: Option<PathBuf>,
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
        let mut device = LoopDevice::attach(&backing, sector_size_bytes)?;
        device.backing = Some(backing);
        Ok(device)
    }

    /// Attaches a loop device (direct I/O on) to an existing file, which is left in place.
    pub fn attach(file: &Path, sector_size_bytes: u32) -> Result<LoopDevice, Unavailable> {
        let output = std::process::Command::new("losetup")
            .args(["--find", "--show", "--direct-io=on", "--sector-size"])
            .arg(sector_size_bytes.to_string())
            .arg(file)
            .output()
            .map_err(|e| Unavailable(format!("losetup: {e}")))?;
        if !output.status.success() {
            return Err(Unavailable(format!(
                "losetup failed: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            )));
        }
        let path = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim().to_string());
        Ok(LoopDevice {
            path,
            backing: None,
        })
    }
}

impl Drop for LoopDevice {
    fn drop(&mut self) {
        // A device still open (a drive's io_uring being torn down) is detached once closed:
        // `losetup -d` sets autoclear. Retry briefly in case the first attempt races the last
        // close, then wait until the kernel has let go of the backing file, so that whatever
        // holds that file (a FUSE mount, say) can go too.
        for _ in 0..20 {
            let detached = std::process::Command::new("losetup")
                .arg("-d")
                .arg(&self.path)
                .status()
                .is_ok_and(|status| status.success());
            if detached {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        if let Some(name) = self.path.file_name() {
            let backing = PathBuf::from("/sys/block")
                .join(name)
                .join("loop")
                .join("backing_file");
            for _ in 0..200 {
                if !backing.exists() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(25));
            }
        }
        if let Some(backing) = &self.backing {
            let _ = std::fs::remove_file(backing);
        }
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
