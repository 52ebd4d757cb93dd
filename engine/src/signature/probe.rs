//! Looking for signatures in a device's first bytes ([`detect`], up to [`PROBE_BYTES`]): file
//! systems, swap, an LVM physical volume, partition tables and a sealog ring, at the offsets
//! `blkid` (util-linux's libblkid) probes. Pure: it sees only the bytes it is handed.

use sealog_wal::format::{ControlBlock, ControlDefect, BLOCK_SIZE_MAX_BYTES, BLOCK_SIZE_MIN_BYTES};

use super::found::{Found, Signature};

/// How much of a device format reads to look for signatures: past btrfs's superblock (at
/// 64 KiB) and a swap signature on 64 KiB pages, with room to spare.
pub const PROBE_BYTES: usize = 256 << 10;

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
}
