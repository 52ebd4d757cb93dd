//! `format` of a block device refuses one that carries something format would destroy, and
//! says what it found: a file system (ext4, XFS, btrfs), a swap area, an LVM2 physical volume,
//! a partition table (MBR, GPT), or a sealog ring; each is formatted anyway only when its
//! name is passed to `--overwrite`. A mounted or partitioned device is refused whatever is
//! named. Each signature is made by its real tool on a loop device (btrfs and LVM2 by their
//! magic bytes where `mkfs.btrfs` or `pvcreate` is missing), and each test fails if the
//! detection of its signature is removed: the format would then succeed.
//!
//! These need root and loop devices, and the tools of util-linux (`mkswap`, `sfdisk`,
//! `mount`), e2fsprogs and xfsprogs: they print `SKIP` without them, and fail under `CI=true`.

mod common;

use common::{sealog, text};

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use sealog_tests::{loop_device_or_skip, must_run_privileged_tests, LoopDevice};

/// What format reads of a device to look for signatures (and what must stay unchanged when it
/// refuses).
const PROBE_BYTES: usize = 256 << 10;

/// Whether `tool` is installed; without it the test skips, or fails under CI.
fn have(tool: &str, test: &str) -> bool {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|output| output.status.success());
    if !found {
        assert!(!must_run_privileged_tests(), "{test}: CI must have {tool}");
        println!("SKIP: {test}: {tool} is not installed");
    }
    found
}

/// Runs a tool that must succeed.
fn tool(program: &str, args: &[&str]) {
    let output = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|error| panic!("{program}: {error}"));
    assert!(
        output.status.success(),
        "{program} {args:?}: {}{}",
        text(&output.stdout),
        text(&output.stderr)
    );
}

/// Runs `sfdisk` on `target` with `script` on its stdin, telling the kernel nothing.
fn sfdisk(target: &Path, script: &str) {
    let mut child = Command::new("sfdisk")
        .args(["--no-reread", "--no-tell-kernel", "--quiet"])
        .arg(target)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("runs sfdisk");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(script.as_bytes())
        .expect("writes the script");
    let output = child.wait_with_output().expect("sfdisk ends");
    assert!(output.status.success(), "sfdisk: {}", text(&output.stderr));
}

fn first_bytes(path: &Path) -> Vec<u8> {
    let mut bytes = vec![0u8; PROBE_BYTES];
    std::fs::File::open(path)
        .expect("opens the device")
        .read_exact(&mut bytes)
        .expect("reads the device");
    bytes
}

fn write_at(path: &Path, offset: u64, bytes: &[u8]) {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .expect("opens the device");
    file.seek(SeekFrom::Start(offset)).expect("seeks");
    file.write_all(bytes).expect("writes");
    file.sync_all().expect("syncs");
}

fn format_args<'a>(path: &'a str, overwrite: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "format",
        path,
        "--size",
        "16M",
        "--sync-method",
        "fdatasync",
    ];
    for name in overwrite {
        args.extend(["--overwrite", name]);
    }
    args
}

/// Format of `device` is refused (exit 2) with a sentence naming the device and `found`, and
/// `--overwrite name`; the device is left as it was; then format with `--overwrite name`
/// succeeds, and the ring it makes is refused in turn as a sealog ring.
fn refused_then_overwritten(device: &Path, name: &str, found: &str) {
    let path = device.to_str().expect("utf-8");
    let before = first_bytes(device);
    let output = sealog(&format_args(path, &[]));
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{name}: {stderr}");
    assert!(stderr.contains(path), "names the device: {stderr}");
    assert!(
        stderr.contains(found),
        "says what it found ({found}): {stderr}"
    );
    assert!(
        stderr.contains(&format!("pass --overwrite {name} to format it anyway")),
        "names the override: {stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "one sentence: {stderr}");
    assert!(
        first_bytes(device) == before,
        "{name}: the refusal wrote nothing"
    );
    let output = sealog(&format_args(path, &[name]));
    assert_eq!(
        output.status.code(),
        Some(0),
        "{name}: {}",
        text(&output.stderr)
    );
    let output = sealog(&["inspect", path]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    if name != "sealog" {
        let output = sealog(&format_args(path, &[name]));
        assert_eq!(
            output.status.code(),
            Some(2),
            "now a ring: {}",
            text(&output.stderr)
        );
        assert!(text(&output.stderr).contains("carries a sealog ring"));
    }
}

fn device(test: &str, size_bytes: u64) -> Option<(tempfile::TempDir, LoopDevice)> {
    let directory = tempfile::tempdir().expect("tempdir");
    let device = loop_device_or_skip(directory.path(), size_bytes, 4096, test)?;
    Some((directory, device))
}

#[test]
fn format_refuses_an_ext4_file_system() {
    let test = "format refuses ext4";
    let Some((_directory, device)) = device(test, 32 << 20) else {
        return;
    };
    if !have("mkfs.ext4", test) {
        return;
    }
    tool(
        "mkfs.ext4",
        &["-q", "-F", device.path.to_str().expect("utf-8")],
    );
    refused_then_overwritten(&device.path, "ext4", "an ext4 file system");
}

#[test]
fn format_refuses_an_xfs_file_system() {
    let test = "format refuses xfs";
    // mkfs.xfs makes nothing under 300 MiB; the backing file is sparse.
    let Some((_directory, device)) = device(test, 320 << 20) else {
        return;
    };
    if !have("mkfs.xfs", test) {
        return;
    }
    tool(
        "mkfs.xfs",
        &["-q", "-f", "-K", device.path.to_str().expect("utf-8")],
    );
    refused_then_overwritten(&device.path, "xfs", "an XFS file system");
}

#[test]
fn format_refuses_a_swap_area() {
    let test = "format refuses swap";
    let Some((_directory, device)) = device(test, 32 << 20) else {
        return;
    };
    if !have("mkswap", test) {
        return;
    }
    tool("mkswap", &[device.path.to_str().expect("utf-8")]);
    refused_then_overwritten(&device.path, "swap", "a swap area");
}

#[test]
fn format_refuses_a_btrfs_file_system() {
    let test = "format refuses btrfs";
    // mkfs.btrfs makes nothing under about 114 MiB.
    let Some((_directory, device)) = device(test, 160 << 20) else {
        return;
    };
    let path = device.path.to_str().expect("utf-8");
    let made = Command::new("mkfs.btrfs").args(["-q", "-f", path]).status();
    if !made.is_ok_and(|status| status.success()) {
        // No mkfs.btrfs here (CI has none): the superblock's magic, where btrfs puts it.
        write_at(&device.path, 65536 + 64, b"_BHRfS_M");
    }
    refused_then_overwritten(&device.path, "btrfs", "a btrfs file system");
}

#[test]
fn format_refuses_an_lvm2_physical_volume() {
    let test = "format refuses lvm2";
    let Some((_directory, device)) = device(test, 32 << 20) else {
        return;
    };
    let path = device.path.to_str().expect("utf-8");
    let made = Command::new("pvcreate")
        .args(["-qq", "-y", "-ff", path])
        .status();
    if !made.is_ok_and(|status| status.success()) {
        // No pvcreate here: the label pvcreate writes in the second 512-byte sector.
        write_at(
            &device.path,
            512,
            b"LABELONE\x01\0\0\0\0\0\0\0\0\0\0\0 \0\0\0LVM2 001",
        );
    }
    refused_then_overwritten(&device.path, "lvm2", "an LVM2 physical volume");
}

#[test]
fn format_refuses_an_mbr_partition_table() {
    let test = "format refuses mbr";
    let Some((_directory, device)) = device(test, 32 << 20) else {
        return;
    };
    if !have("sfdisk", test) {
        return;
    }
    sfdisk(&device.path, "label: dos\n,,83\n");
    refused_then_overwritten(&device.path, "mbr", "an MBR partition table");
}

#[test]
fn format_refuses_a_gpt_partition_table() {
    let test = "format refuses gpt";
    let Some((_directory, device)) = device(test, 32 << 20) else {
        return;
    };
    if !have("sfdisk", test) {
        return;
    }
    // On 4096-byte sectors the header is at byte 4096; the protective MBR is the GPT's own
    // and is not named separately.
    sfdisk(&device.path, "label: gpt\n,,L\n");
    refused_then_overwritten(
        &device.path,
        "gpt",
        "a GPT partition table (header EFI PART at byte 4096)",
    );
}

#[test]
fn format_refuses_an_existing_sealog_ring_unless_told_to_destroy_it() {
    let test = "format refuses a sealog ring";
    let Some((_directory, device)) = device(test, 32 << 20) else {
        return;
    };
    let path = device.path.to_str().expect("utf-8");
    let output = sealog(&format_args(path, &[]));
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let first = text(&output.stdout);
    let ring_id = first
        .split_whitespace()
        .nth(3)
        .expect("ring id")
        .to_string();
    let mut append = Command::new(env!("CARGO_BIN_EXE_sealog"))
        .args(["append", path])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("runs append");
    append
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"kept\n")
        .expect("writes");
    assert!(append.wait().expect("append ends").success());
    // `--force` is about directories that are not empty; it does not destroy a ring.
    let output = sealog(&[
        "format",
        path,
        "--size",
        "16M",
        "--sync-method",
        "fdatasync",
        "--force",
    ]);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output.stderr));
    assert!(text(&output.stderr).contains(&format!("a sealog ring (ring {ring_id}")));
    let output = sealog(&["dump", path]);
    assert_eq!(text(&output.stdout), "1\tkept\n", "the ring is intact");
    refused_then_overwritten(&device.path, "sealog", "a sealog ring");
    let output = sealog(&["dump", path]);
    assert_eq!(text(&output.stdout), "", "a new, empty ring");
}

/// A loop device over `backing` scanned for partitions (`losetup -P`), detached (exactly
/// this device) when dropped.
struct PartitionedLoop {
    path: PathBuf,
}

impl Drop for PartitionedLoop {
    fn drop(&mut self) {
        let _ = Command::new("partx").arg("-d").arg(&self.path).status();
        let _ = Command::new("losetup").arg("-d").arg(&self.path).status();
    }
}

#[test]
fn format_refuses_a_partitioned_device_whatever_is_named() {
    let test = "format refuses a partitioned device";
    let directory = tempfile::tempdir().expect("tempdir");
    // A loop device proves loop devices can be made here (or skips, or fails under CI).
    let Some(probe) = loop_device_or_skip(directory.path(), 1 << 20, 512, test) else {
        return;
    };
    drop(probe);
    if !have("sfdisk", test) {
        return;
    }
    let backing = directory.path().join("partitioned");
    std::fs::File::create(&backing)
        .and_then(|file| file.set_len(32 << 20))
        .expect("backing file");
    sfdisk(&backing, "label: dos\n,8M,83\n,,83\n");
    let output = Command::new("losetup")
        .args(["--find", "--show", "--partscan", "--direct-io=on"])
        .arg(&backing)
        .output()
        .expect("runs losetup");
    assert!(
        output.status.success(),
        "losetup -P: {}",
        text(&output.stderr)
    );
    let device = PartitionedLoop {
        path: PathBuf::from(text(&output.stdout).trim()),
    };
    let name = device
        .path
        .file_name()
        .expect("name")
        .to_string_lossy()
        .into_owned();
    let path = device.path.to_str().expect("utf-8");
    let partition = format!("/sys/class/block/{name}/{name}p1/partition");
    for _ in 0..50 {
        if Path::new(&partition).exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    if !Path::new(&partition).exists() {
        // Some kernels read no partition table themselves (no parser built in): tell them.
        tool("partx", &["-a", path]);
    }
    assert!(Path::new(&partition).exists(), "{name}p1 shows in sysfs");
    let output = sealog(&format_args(path, &["mbr"]));
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{path}: the device has partitions ({name}p1, {name}p2)"
        )),
        "{stderr}"
    );
}

#[test]
fn format_refuses_a_mounted_device_whatever_is_named() {
    let test = "format refuses a mounted device";
    let Some((directory, device)) = device(test, 32 << 20) else {
        return;
    };
    if !have("mkfs.ext4", test) {
        return;
    }
    let path = device.path.to_str().expect("utf-8");
    tool("mkfs.ext4", &["-q", "-F", path]);
    let mount_point = directory.path().join("mnt");
    std::fs::create_dir(&mount_point).expect("mkdir");
    let mount_point = mount_point.to_str().expect("utf-8");
    let mounted = Command::new("mount").args([path, mount_point]).output();
    match mounted {
        Ok(output) if output.status.success() => {}
        Ok(output) => {
            let why = text(&output.stderr);
            assert!(!must_run_privileged_tests(), "{test}: CI must mount: {why}");
            println!("SKIP: {test}: cannot mount ({})", why.trim());
            return;
        }
        Err(error) => panic!("mount: {error}"),
    }
    let output = sealog(&format_args(path, &["ext4"]));
    let _ = Command::new("umount").arg(mount_point).status();
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{path}: the device is mounted at {mount_point}; unmount it first"
        )),
        "{stderr}"
    );
}
