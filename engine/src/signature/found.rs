//! The signatures format recognizes on a block device ([`Signature`], each named as an
//! override names it) and one found there ([`Found`]: which, where, and what it is in words),
//! which a refused format's error carries.

use std::fmt;

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
    /// Every signature, in the order [`detect`](super::probe::detect) reports them.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for signature in Signature::ALL {
            assert_eq!(Signature::from_name(signature.name()), Some(signature));
        }
        assert_eq!(Signature::from_name("EXT4"), Some(Signature::Ext4));
        assert_eq!(Signature::from_name("ntfs"), None);
    }
}
