//! What the benchmark ran on, for the JSON: kernel, CPUs, memory, and the storage under the
//! measured directory (file system, block device, its write cache and FUA, its logical and
//! physical block sizes, the I/O scheduler), read from /proc and sysfs. A figure is only
//! comparable with another measured on the same kind of storage, so the report carries it.
//! Anything that cannot be read is reported as null, never guessed.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

fn read_trimmed(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|text| text.trim().to_string())
}

/// The `model name` of the first CPU in /proc/cpuinfo.
fn cpu_model() -> Option<String> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    text.lines()
        .find(|line| line.starts_with("model name"))
        .and_then(|line| line.split_once(':'))
        .map(|(_, model)| model.trim().to_string())
}

/// Total memory in bytes, from /proc/meminfo.
fn memory_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|line| line.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The file system type and source holding device `major:minor`, from /proc/self/mountinfo.
fn mount_of(device: &str) -> Option<(String, String)> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    text.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(' ').collect();
        if fields.get(2) != Some(&device) {
            return None;
        }
        let separator = fields.iter().position(|field| *field == "-")?;
        let fs_type = fields.get(separator + 1)?.to_string();
        let source = fields.get(separator + 2)?.to_string();
        Some((fs_type, source))
    })
}

/// The sysfs directory of the whole disk behind `major:minor` (the parent of a partition).
fn disk_dir(device: &str) -> Option<PathBuf> {
    let dir = std::fs::canonicalize(format!("/sys/dev/block/{device}")).ok()?;
    if dir.join("queue").exists() {
        return Some(dir);
    }
    let parent = dir.parent()?.to_path_buf();
    parent.join("queue").exists().then_some(parent)
}

/// The size of the block device at `path`, in bytes (an error names the path when it is not
/// a block device or cannot be opened).
pub fn block_device_bytes(path: &Path) -> Result<u64, String> {
    use std::io::{Seek, SeekFrom};
    use std::os::unix::fs::FileTypeExt;
    let metadata =
        std::fs::metadata(path).map_err(|error| format!("{}: {error}", path.display()))?;
    if !metadata.file_type().is_block_device() {
        return Err(format!("{}: not a block device", path.display()));
    }
    let mut device =
        std::fs::File::open(path).map_err(|error| format!("{}: {error}", path.display()))?;
    device
        .seek(SeekFrom::End(0))
        .map_err(|error| format!("{}: size: {error}", path.display()))
}

/// The storage at `path`: for a directory, the file system holding it and its device; for a
/// block device, the device itself. File system, device, cache, FUA, block sizes, scheduler.
pub fn storage_of(path: &Path) -> Value {
    use std::os::unix::fs::FileTypeExt;
    let dir = path;
    let Ok(metadata) = std::fs::metadata(dir) else {
        return json!({ "path": dir.display().to_string() });
    };
    let is_device = metadata.file_type().is_block_device();
    let dev = if is_device {
        metadata.rdev()
    } else {
        metadata.dev()
    };
    let device = format!(
        "{}:{}",
        nix::sys::stat::major(dev),
        nix::sys::stat::minor(dev)
    );
    let (fs_type, source) = if is_device {
        (None, None)
    } else {
        mount_of(&device).unzip()
    };
    let disk = disk_dir(&device);
    let queue = |name: &str| {
        disk.as_ref()
            .and_then(|disk| read_trimmed(&disk.join("queue").join(name)))
    };
    let number = |name: &str| queue(name).and_then(|text| text.parse::<u64>().ok());
    let name = disk
        .as_ref()
        .and_then(|disk| disk.file_name())
        .map(|name| name.to_string_lossy().into_owned());
    let model = disk
        .as_ref()
        .and_then(|disk| read_trimmed(&disk.join("device").join("model")));
    json!({
        "path": dir.display().to_string(),
        "raw_block_device": is_device,
        "file_system": fs_type,
        "mount_source": source,
        "device": name,
        "device_model": model,
        "write_cache": queue("write_cache"),
        "fua": queue("fua").map(|text| text == "1"),
        "logical_block_bytes": number("logical_block_size"),
        "physical_block_bytes": number("physical_block_size"),
        "rotational": queue("rotational").map(|text| text == "1"),
        "scheduler": queue("scheduler"),
    })
}

/// The system's load averages over 1, 5 and 15 minutes, from /proc/loadavg: the figures of a
/// run on a shared machine mean little without them.
pub fn load_average() -> Option<[f64; 3]> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let mut fields = text
        .split_whitespace()
        .map(|field| field.parse::<f64>().ok());
    Some([fields.next()??, fields.next()??, fields.next()??])
}

/// The whole disk's I/O counters at one moment, from its sysfs `stat` (all processes' I/O,
/// not only this one's: a figure from a difference of two is an upper bound on ours).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DiskCounters {
    /// Bytes read (sectors of 512 bytes, as the kernel counts them, times 512).
    pub read_bytes: u64,
    /// Flush requests completed (the 17-field format's 16th field, kernel 5.5 and later).
    pub flushes: u64,
}

impl DiskCounters {
    /// What happened between `self` (earlier) and `later`.
    pub fn until(self, later: DiskCounters) -> DiskCounters {
        DiskCounters {
            read_bytes: later.read_bytes.saturating_sub(self.read_bytes),
            flushes: later.flushes.saturating_sub(self.flushes),
        }
    }
}

/// The sysfs directory of the whole disk under `path` (a directory on a file system, or a
/// block device), or `None` where sysfs does not say.
pub fn disk_of(path: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::FileTypeExt;
    let metadata = std::fs::metadata(path).ok()?;
    let dev = if metadata.file_type().is_block_device() {
        metadata.rdev()
    } else {
        metadata.dev()
    };
    let device = format!(
        "{}:{}",
        nix::sys::stat::major(dev),
        nix::sys::stat::minor(dev)
    );
    disk_dir(&device)
}

/// The counters of the disk at `disk` (from [`disk_of`]) now, or `None` when its `stat` has
/// no flush field (kernels before 5.5) or cannot be read.
pub fn disk_counters(disk: &Path) -> Option<DiskCounters> {
    let text = std::fs::read_to_string(disk.join("stat")).ok()?;
    let fields: Vec<u64> = text
        .split_whitespace()
        .map(|field| field.parse().ok())
        .collect::<Option<_>>()?;
    Some(DiskCounters {
        read_bytes: fields.get(2)? * 512,
        flushes: *fields.get(15)?,
    })
}

/// The machine: kernel, CPUs, memory, and the storage at `dir` (a directory or a device).
pub fn describe(dir: &Path) -> Value {
    json!({
        "kernel": read_trimmed(Path::new("/proc/sys/kernel/osrelease")),
        "cpus": std::thread::available_parallelism().map_or(0, |count| count.get()),
        "cpu_model": cpu_model(),
        "memory_bytes": memory_bytes(),
        "storage": storage_of(dir),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_temporary_directory_is_described() {
        let dir = tempfile::tempdir().expect("tempdir");
        let machine = describe(dir.path());
        assert!(machine["kernel"]
            .as_str()
            .is_some_and(|kernel| !kernel.is_empty()));
        assert!(machine["cpus"].as_u64().is_some_and(|cpus| cpus > 0));
        let storage = &machine["storage"];
        assert!(storage["file_system"].as_str().is_some(), "{storage}");
    }

    /// The disk under the temporary directory has counters, and they only grow.
    #[test]
    fn the_disk_counters_are_read() {
        let dir = tempfile::tempdir().expect("tempdir");
        let Some(disk) = disk_of(dir.path()) else {
            return;
        };
        let before = disk_counters(&disk).expect("a stat with a flush field");
        std::fs::write(dir.path().join("file"), b"x").expect("write");
        let after = disk_counters(&disk).expect("counters");
        assert!(after.flushes >= before.flushes && after.read_bytes >= before.read_bytes);
    }
}
