//! What format looks for on a block device before it writes anything: a mount or a holder
//! (device-mapper, md), partitions, and the signatures of what a device commonly carries (file
//! systems, swap, an LVM physical volume, partition tables, a sealog ring). Format refuses a
//! device where it finds any of them, unless its caller names each signature found in
//! [`crate::FormatOptions::overwrite`]; a mount, a holder or partitions cannot be overridden
//! (unmount, or format the partition instead).
//!
//! Detection is pure: [`detect`] looks at the device's first bytes ([`PROBE_BYTES`], read with
//! a plain read) and [`device_facts`] at text and directories the caller hands it (the
//! process's mountinfo and a sysfs directory), so both are unit-tested on crafted input. The
//! offsets are the ones `blkid` (util-linux's libblkid) probes.

use std::fmt;
use std::path::Path;

use sealog_wal::format::{ControlBlock, ControlDefect, BLOCK_SIZE_MAX_BYTES, BLOCK_SIZE_MIN_BYTES};

/// How much of a device format reads to look for signatures: past btrfs's superblock (at
/// 64 KiB) and a swap signature on 64 KiB pages, with room to spare.
pub const PROBE_BYTES: usize = 256 << 10;

/// A recognizable signature on a block device, each one something format would destroy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Signature {
    /// An ext2, ext3 or ext4 file system: superblock magic 0xEF53 at byte 1080.
    Ext4,
    /// An XFS file system: `XFSB` at byte 0.
    Xfs,
    /// A btrfs file system: `_BHRfS_M` at byte 65600 (the superblock at 64 KiB, plus 64).
    Btrfs,
    /// A swap area: `SWAPSPACE2` (or the old `SWAP-SPACE`) ten bytes before the end of the
    /// first page, for pages of 4, 8, 16, 32 or 64 KiB.
    Swap,
    /// An LVM2 physical volume: `LABELONE` at the start of one of the first four 512-byte
    /// sectors.
    Lvm2,
    /// An MBR partition table: 0x55AA at byte 510 and a partition entry in use.
    Mbr,
    /// A GPT partition table: `EFI PART` at LBA 1, for 512- or 4096-byte sectors.
    Gpt,
    /// A sealog ring: a control block (valid, of another format version, or with its magic
    /// and a damaged CRC) at byte 0 or one block in. Format gives the ring a new identity, so
    /// any ring already there, its entries with it, would be lost.
    Sealog,
}

impl Signature {
    /// Every signature, in the order [`detect`] reports them.
    pub const ALL: [Signature; 8] = [
        Signature::Sealog,
        Signature::Ext4,
        Signature::Xfs,
        Signature::Btrfs,
        Signature::Swap,
        Signature::Lvm2,
        Signature::Gpt,
        Signature::Mbr,
    ];

    /// The name an override takes (`--overwrite NAME`).
    pub fn name(self) -> &'static str {
        match self {
            Signature::Ext4 => "ext4",
            Signature::Xfs => "xfs",
            Signature::Btrfs => "btrfs",
            Signature::Swap => "swap",
            Signature::Lvm2 => "lvm2",
            Signature::Mbr => "mbr",
            Signature::Gpt => "gpt",
            Signature::Sealog => "sealog",
        }
    }

    /// The signature named `name` (any case), as [`Signature::name`] writes it.
    pub fn from_name(name: &str) -> Option<Signature> {
        let name = name.to_ascii_lowercase();
        Signature::ALL.into_iter().find(|s| s.name() == name)
    }
}

impl fmt::Display for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A signature found, where, and what it is in words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    /// Which signature.
    pub signature: Signature,
    /// The byte offset of its magic.
    pub offset_bytes: u64,
    /// What it is, for the refusal's sentence: "an ext4 file system (superblock magic at byte
    /// 1080)".
    pub what: String,
}

impl fmt::Display for Found {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.what)
    }
}

/// The page sizes a swap signature may be written for (its magic ends the first page).
const SWAP_PAGE_SIZES_BYTES: [usize; 5] = [4096, 8192, 16384, 32768, 65536];
/// The logical sector sizes a GPT header may follow (it sits at LBA 1).
const GPT_SECTOR_SIZES_BYTES: [usize; 2] = [512, 4096];
/// Where an MBR's four 16-byte partition entries start.
const MBR_ENTRIES_OFFSET: usize = 446;
/// The partition type of a GPT's protective MBR entry.
const MBR_TYPE_GPT_PROTECTIVE: u8 = 0xee;

/// Every signature in `bytes`, a device's first bytes (up to [`PROBE_BYTES`]; a shorter
/// buffer is probed as far as it goes), in [`Signature::ALL`]'s order.
pub fn detect(bytes: &[u8]) -> Vec<Found> {
    let at = |offset: usize, magic: &[u8]| bytes.get(offset..offset + magic.len()) == Some(magic);
    let mut found = Vec::new();
    let mut push = |signature, offset_bytes: usize, what: String| {
        found.push(Found {
            signature,
            offset_bytes: offset_bytes as u64,
            what,
        })
    };
    if let Some((offset, what)) = sealog_ring(bytes) {
        push(Signature::Sealog, offset, what);
    }
    file_systems(bytes, &mut push);
    let gpt = GPT_SECTOR_SIZES_BYTES
        .iter()
        .copied()
        .find(|&sector| at(sector, b"EFI PART"));
    if let Some(offset) = gpt {
        push(
            Signature::Gpt,
            offset,
            format!("a GPT partition table (header EFI PART at byte {offset})"),
        );
    }
    if let Some(what) = mbr(bytes, gpt.is_some()) {
        push(Signature::Mbr, 510, what);
    }
    found
}

/// The file systems, swap areas and LVM2 labels in `bytes`, each handed to `push`.
fn file_systems(bytes: &[u8], push: &mut dyn FnMut(Signature, usize, String)) {
    let at = |offset: usize, magic: &[u8]| bytes.get(offset..offset + magic.len()) == Some(magic);
    // The magic alone is two bytes; an ext superblock's block size (1 KiB << n) is also
    // checked, so that two stray bytes of other data are not taken for a file system.
    let ext_log_block = bytes
        .get(1048..1052)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
    if at(1080, &[0x53, 0xef]) && ext_log_block.is_some_and(|log| log <= 6) {
        push(
            Signature::Ext4,
            1080,
            "an ext4 file system (superblock magic 0xEF53 at byte 1080)".into(),
        );
    }
    if at(0, b"XFSB") {
        push(
            Signature::Xfs,
            0,
            "an XFS file system (superblock magic XFSB at byte 0)".into(),
        );
    }
    if at(65600, b"_BHRfS_M") {
        push(
            Signature::Btrfs,
            65600,
            "a btrfs file system (superblock magic _BHRfS_M at byte 65600)".into(),
        );
    }
    let swap = SWAP_PAGE_SIZES_BYTES
        .iter()
        .map(|page| page - 10)
        .find(|&offset| at(offset, b"SWAPSPACE2") || at(offset, b"SWAP-SPACE"));
    if let Some(offset) = swap {
        push(
            Signature::Swap,
            offset,
            format!("a swap area (signature SWAPSPACE2 at byte {offset})"),
        );
    }
    if let Some(offset) = (0..4)
        .map(|sector| sector * 512)
        .find(|&o| at(o, b"LABELONE"))
    {
        push(
            Signature::Lvm2,
            offset,
            format!("an LVM2 physical volume (label LABELONE at byte {offset})"),
        );
    }
}

/// An MBR partition table: the boot signature and at least one entry in use. A GPT's
/// protective MBR (an entry of type 0xEE) is part of the GPT found beside it, not reported
/// again.
fn mbr(bytes: &[u8], gpt_found: bool) -> Option<String> {
    if bytes.get(510..512) != Some(&[0x55, 0xaa][..]) {
        return None;
    }
    let entries = bytes.get(MBR_ENTRIES_OFFSET..MBR_ENTRIES_OFFSET + 64)?;
    let in_use: Vec<&[u8]> = entries
        .chunks(16)
        .filter(|entry| entry.iter().any(|&byte| byte != 0))
        .collect();
    if in_use.is_empty() {
        return None;
    }
    let protective = in_use
        .iter()
        .all(|entry| entry[4] == MBR_TYPE_GPT_PROTECTIVE);
    if protective && gpt_found {
        return None;
    }
    Some(format!(
        "an MBR partition table (boot signature 0x55AA at byte 510, {} partition entries in use)",
        in_use.len()
    ))
}

/// A sealog control block at byte 0, or (copy 0 damaged) one block in for each block size the
/// format allows: where it is and what it says.
fn sealog_ring(bytes: &[u8]) -> Option<(usize, String)> {
    let mut block_sizes = vec![0usize];
    let mut size = BLOCK_SIZE_MIN_BYTES as usize;
    while size <= BLOCK_SIZE_MAX_BYTES as usize {
        block_sizes.push(size);
        size *= 2;
    }
    let mut damaged = None;
    for offset in block_sizes {
        let Some(copy) = bytes.get(offset..) else {
            break;
        };
        match ControlBlock::decode(copy) {
            Ok(control) => {
                return Some((
                    offset,
                    format!(
                        "a sealog ring (ring {}, control block at byte {offset})",
                        control.ring_id
                    ),
                ))
            }
            Err(ControlDefect::Version(version)) => {
                return Some((
                    offset,
                    format!(
                        "a sealog ring of format version {version} (control block at byte \
                         {offset})"
                    ),
                ))
            }
            Err(ControlDefect::Crc) => {
                damaged.get_or_insert(offset);
            }
            Err(_) => {}
        }
    }
    damaged.map(|offset| {
        (
            offset,
            format!("a sealog ring whose control block is damaged (its magic at byte {offset})"),
        )
    })
}

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
) -> Result<(), crate::FormatError> {
    use crate::FormatError;
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
    use sealog_wal::{Geometry, RingId};

    fn image() -> Vec<u8> {
        vec![0u8; PROBE_BYTES]
    }

    fn signatures(bytes: &[u8]) -> Vec<Signature> {
        detect(bytes)
            .into_iter()
            .map(|found| found.signature)
            .collect()
    }

    #[test]
    fn zeros_and_short_buffers_carry_nothing() {
        assert!(detect(&image()).is_empty());
        assert!(detect(&[]).is_empty());
        assert!(
            detect(&[0x55; 600]).is_empty(),
            "no MBR without 0xAA at 511"
        );
    }

    #[test]
    fn an_ext4_superblock_is_found_by_its_magic_and_block_size() {
        let mut bytes = image();
        bytes[1080..1082].copy_from_slice(&[0x53, 0xef]);
        bytes[1048..1052].copy_from_slice(&2u32.to_le_bytes());
        assert_eq!(signatures(&bytes), [Signature::Ext4]);
        assert!(detect(&bytes)[0].what.contains("byte 1080"));
        bytes[1048..1052].copy_from_slice(&77u32.to_le_bytes());
        assert!(
            detect(&bytes).is_empty(),
            "no ext block size is 1 KiB << 77"
        );
    }

    #[test]
    fn xfs_btrfs_and_lvm_are_found_by_their_magic() {
        let mut bytes = image();
        bytes[..4].copy_from_slice(b"XFSB");
        assert_eq!(signatures(&bytes), [Signature::Xfs]);
        let mut bytes = image();
        bytes[65600..65608].copy_from_slice(b"_BHRfS_M");
        assert_eq!(signatures(&bytes), [Signature::Btrfs]);
        for sector in 0..4 {
            let mut bytes = image();
            bytes[sector * 512..sector * 512 + 8].copy_from_slice(b"LABELONE");
            assert_eq!(signatures(&bytes), [Signature::Lvm2], "sector {sector}");
        }
        let mut bytes = image();
        bytes[4 * 512..4 * 512 + 8].copy_from_slice(b"LABELONE");
        assert!(
            detect(&bytes).is_empty(),
            "LVM looks in the first four sectors only"
        );
    }

    #[test]
    fn swap_is_found_at_the_end_of_each_page_size() {
        for page in SWAP_PAGE_SIZES_BYTES {
            let mut bytes = image();
            bytes[page - 10..page].copy_from_slice(b"SWAPSPACE2");
            let found = detect(&bytes);
            assert_eq!(found.len(), 1, "page {page}");
            assert_eq!(found[0].signature, Signature::Swap);
            assert_eq!(found[0].offset_bytes, page as u64 - 10);
        }
    }

    #[test]
    fn partition_tables_are_found_and_a_protective_mbr_is_the_gpts() {
        let mut bytes = image();
        bytes[510..512].copy_from_slice(&[0x55, 0xaa]);
        assert!(
            detect(&bytes).is_empty(),
            "an MBR with no entry in use is no table"
        );
        bytes[446 + 4] = 0x83;
        bytes[446 + 8] = 1;
        assert_eq!(signatures(&bytes), [Signature::Mbr]);
        for sector in GPT_SECTOR_SIZES_BYTES {
            let mut bytes = image();
            bytes[510..512].copy_from_slice(&[0x55, 0xaa]);
            bytes[446 + 4] = MBR_TYPE_GPT_PROTECTIVE;
            bytes[sector..sector + 8].copy_from_slice(b"EFI PART");
            assert_eq!(signatures(&bytes), [Signature::Gpt], "sector {sector}");
        }
    }

    #[test]
    fn a_sealog_control_block_is_found_whole_damaged_or_in_its_second_copy() {
        let geometry = Geometry {
            block_size_bytes: 4096,
            segment_size_bytes: 1 << 20,
            segment_count: 4,
            batch_size_max_bytes: 64 << 10,
            window_batches_max: 4,
            window_bytes_max: 256 << 10,
        };
        let control = ControlBlock::new_ring(RingId([7; 16]), geometry);
        let mut bytes = image();
        control.encode(&mut bytes[..4096]);
        assert_eq!(signatures(&bytes), [Signature::Sealog]);
        assert!(detect(&bytes)[0]
            .what
            .contains(&RingId([7; 16]).to_string()));
        // Copy 0 torn: copy 1, one block in, is found.
        control.encode(&mut bytes[4096..8192]);
        bytes[40] ^= 0xff;
        let found = detect(&bytes);
        assert_eq!(found[0].signature, Signature::Sealog);
        assert_eq!(found[0].offset_bytes, 4096);
        // Both damaged: still a ring, said to be damaged.
        bytes[4096 + 40] ^= 0xff;
        let found = detect(&bytes);
        assert_eq!(found[0].signature, Signature::Sealog);
        assert!(found[0].what.contains("damaged"));
    }

    #[test]
    fn names_round_trip() {
        for signature in Signature::ALL {
            assert_eq!(Signature::from_name(signature.name()), Some(signature));
        }
        assert_eq!(Signature::from_name("EXT4"), Some(Signature::Ext4));
        assert_eq!(Signature::from_name("ntfs"), None);
    }

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
