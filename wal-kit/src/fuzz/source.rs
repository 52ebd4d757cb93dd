//! Unreadable blocks: what a drive with latent sector errors gives replay. A mutated image is
//! its bytes plus a set of blocks that cannot be read ([`Image`]), and replay reads it through
//! [`FailingSource`], a [`RingSource`] that fails with EIO (`io::Error::from_raw_os_error(5)`)
//! every read overlapping an unreadable block and serves every other read from the bytes. Replay
//! retries a failed chunk with just what it needs and probes two blocks and then one, so every
//! readable block is still read. The model writer replays bytes only (its open takes a
//! `Vec<u8>`), so the model check cannot see these blocks ([`super::check`] skips it for them).

use std::collections::BTreeSet;
use std::io;

use sealog_wal::source::RingSource;

/// The errno a latent sector error reads as.
const EIO: i32 = 5;

/// Blocks of an image that cannot be read, as block indices in the base ring's block size.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Unreadable {
    block_bytes: u64,
    blocks: BTreeSet<u64>,
}

impl Unreadable {
    /// No unreadable block.
    pub fn none() -> Unreadable {
        Unreadable::default()
    }

    /// No unreadable block yet, in blocks of `block_bytes` (at least 1).
    pub fn new(block_bytes: u32) -> Unreadable {
        Unreadable {
            block_bytes: u64::from(block_bytes.max(1)),
            blocks: BTreeSet::new(),
        }
    }

    /// Makes `count` blocks from `first` on unreadable.
    pub fn add_run(&mut self, first: u64, count: u64) {
        debug_assert!(
            self.block_bytes > 0,
            "an unreadable set made with a block size"
        );
        self.blocks.extend(first..first.saturating_add(count));
    }

    /// Whether every block is readable.
    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }

    /// How many blocks are unreadable.
    pub fn len(&self) -> u64 {
        self.blocks.len() as u64
    }

    /// Whether a read of `len` bytes at `ring_offset` touches an unreadable block.
    pub fn overlaps(&self, ring_offset: u64, len: u64) -> bool {
        if self.blocks.is_empty() || len == 0 {
            return false;
        }
        let first = ring_offset / self.block_bytes;
        let last = ring_offset.saturating_add(len - 1) / self.block_bytes;
        self.blocks.range(first..=last).next().is_some()
    }
}

/// A mutated image: its bytes and the blocks that cannot be read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Image {
    /// The bytes.
    pub bytes: Vec<u8>,
    /// The blocks whose reads fail.
    pub unreadable: Unreadable,
}

impl Image {
    /// `bytes`, every block readable; blocks later made unreadable are `block_bytes` long.
    pub fn new(bytes: Vec<u8>, block_bytes: u32) -> Image {
        Image {
            bytes,
            unreadable: Unreadable::new(block_bytes),
        }
    }

    /// The image as replay reads it.
    pub fn source(&self) -> FailingSource<'_> {
        FailingSource::new(&self.bytes, &self.unreadable)
    }
}

/// A byte slice whose reads fail with EIO wherever they overlap an unreadable block.
#[derive(Clone, Copy, Debug)]
pub struct FailingSource<'a> {
    bytes: &'a [u8],
    unreadable: &'a Unreadable,
}

impl<'a> FailingSource<'a> {
    /// `bytes`, with `unreadable`'s blocks failing.
    pub fn new(bytes: &'a [u8], unreadable: &'a Unreadable) -> FailingSource<'a> {
        FailingSource { bytes, unreadable }
    }
}

impl RingSource for FailingSource<'_> {
    fn size_bytes(&self) -> u64 {
        self.bytes.len() as u64
    }

    fn read_at(&mut self, ring_offset: u64, buf: &mut [u8]) -> io::Result<()> {
        if self.unreadable.overlaps(ring_offset, buf.len() as u64) {
            return Err(io::Error::from_raw_os_error(EIO));
        }
        let mut bytes = self.bytes;
        bytes.read_at(ring_offset, buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_fails_exactly_when_it_overlaps_an_unreadable_block() {
        let bytes = vec![7u8; 8 * 4096];
        let mut unreadable = Unreadable::new(4096);
        unreadable.add_run(3, 2);
        let mut source = FailingSource::new(&bytes, &unreadable);
        let mut buf = vec![0u8; 4096];
        for (block, fails) in [(2, false), (3, true), (4, true), (5, false)] {
            let read = source.read_at(block * 4096, &mut buf);
            assert_eq!(read.is_err(), fails, "block {block}");
            if let Err(error) = read {
                assert_eq!(error.raw_os_error(), Some(EIO));
            }
        }
        // Reads straddling the run's edges fail; a read ending just before it does not.
        let mut two = vec![0u8; 2 * 4096];
        assert!(source.read_at(2 * 4096 + 1, &mut two).is_err());
        assert!(source.read_at(4096, &mut two).is_ok());
        assert!(source.read_at(4 * 4096 + 4095, &mut [0u8; 1]).is_err());
        assert!(source.read_at(5 * 4096, &mut [0u8; 1]).is_ok());
        assert_eq!(unreadable.len(), 2);
        assert!(!Unreadable::none().overlaps(0, u64::MAX));
    }
}
