//! What the system says of a block device ([`DeviceFacts`]: its mounts, holders and
//! partitions, from mountinfo and sysfs) and the refusal of a format ([`refusal`]) that the
//! facts and the signatures found make, unless the caller named each signature.

use std::path::Path;

use super::found::{Found, Signature};
use crate::error::FormatError;

/// What the system says of a block device: where it is mounted, what holds it, its
/// partitions. Any of them refuses a format, with no override.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeviceFacts {
    /// Mount points of the device itself (from mountinfo, by major:minor).
    pub mount_points: Vec<String>,
    /// Devices stacked on it (`holders/` in sysfs: device-mapper, md, ...).
    pub holders: Vec<String>,
    /// Its partitions (subdirectories of its sysfs directory with a `partition` file).
    pub partitions: Vec<String>,
}

/// The facts of device `major:minor`, from `mountinfo` (the text of `/proc/self/mountinfo`)
/// and `sysfs_device` (its directory in sysfs, `/sys/dev/block/MAJOR:MINOR`). Unreadable
/// parts count as nothing found: the O_EXCL open format makes next still refuses a device
/// that the kernel holds.
pub fn device_facts(mountinfo: &str, sysfs_device: &Path, major: u64, minor: u64) -> DeviceFacts {
    let device = format!("{major}:{minor}");
    // mountinfo: "ID PARENT MAJOR:MINOR ROOT MOUNT_POINT ...".
    let mount_points = mountinfo
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let number = fields.nth(2)?;
            let mount_point = fields.nth(1)?;
            (number == device).then(|| mount_point.to_string())
        })
        .collect();
    let names = |directory: &Path, keep: &dyn Fn(&Path) -> bool| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(directory)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|entry| keep(&entry.path()))
            .map(|entry| entry.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    DeviceFacts {
        mount_points,
        holders: names(&sysfs_device.join("holders"), &|_| true),
        partitions: names(sysfs_device, &|path| path.join("partition").is_file()),
    }
}

/// The facts of the block device at `path`, from this process's mountinfo and sysfs.
pub fn facts_of(path: &Path) -> std::io::Result<DeviceFacts> {
    use std::os::unix::fs::MetadataExt;
    let rdev = std::fs::metadata(path)?.rdev();
    let (major, minor) = (nix::sys::stat::major(rdev), nix::sys::stat::minor(rdev));
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let sysfs = format!("/sys/dev/block/{major}:{minor}");
    Ok(device_facts(&mountinfo, Path::new(&sysfs), major, minor))
}

/// Refuses a format of the device at `path` with these `facts` and these `found` signatures,
/// unless each signature is named in `overwrite`; a mount, a holder or partitions always.
pub fn refusal(
    path: &Path,
    facts: DeviceFacts,
    found: Vec<Found>,
    overwrite: &[Signature],
) -> Result<(), FormatError> {
    let path = path.to_path_buf();
    if !facts.mount_points.is_empty() {
        let mount_points = facts.mount_points;
        return Err(FormatError::Mounted { path, mount_points });
    }
    if !facts.holders.is_empty() {
        let holders = facts.holders;
        return Err(FormatError::Held { path, holders });
    }
    if !facts.partitions.is_empty() {
        let partitions = facts.partitions;
        return Err(FormatError::Partitioned { path, partitions });
    }
    match found
        .into_iter()
        .find(|found| !overwrite.contains(&found.signature))
    {
        Some(found) => Err(FormatError::Signature { path, found }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_come_from_mountinfo_and_sysfs() {
        let sysfs = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(sysfs.path().join("holders/dm-0")).expect("holder");
        std::fs::create_dir_all(sysfs.path().join("loop3p1")).expect("partition");
        std::fs::write(sysfs.path().join("loop3p1/partition"), "1\n").expect("partition");
        std::fs::create_dir_all(sysfs.path().join("queue")).expect("queue");
        let mountinfo = "22 1 7:3 / /mnt/data rw,relatime shared:1 - ext4 /dev/loop3 rw\n\
                         23 1 7:30 / /mnt/other rw - ext4 /dev/loop30 rw\n";
        let facts = device_facts(mountinfo, sysfs.path(), 7, 3);
        assert_eq!(facts.mount_points, ["/mnt/data"]);
        assert_eq!(facts.holders, ["dm-0"]);
        assert_eq!(facts.partitions, ["loop3p1"]);
        let none = device_facts("", Path::new("/nonexistent"), 7, 3);
        assert_eq!(none, DeviceFacts::default());
    }
}
