//! The batch encoder: packs records into one buffer that starts and ends on a block boundary,
//! ready for one O_DIRECT write. It owns the in-batch layout (records back to back, a padding
//! record or zeros up to the block boundary, every header recording the batch's length and the
//! record's index); where the batch goes and which LSN it starts at are the writer's
//! ([`crate::layout`]), and the bytes of each header are [`crate::format`]'s.
//!
//! Worked example, 4096-byte blocks, two 100-byte payloads:
//!
//! ```text
//!  offset 0    record LSN 7: header (96) + payload (100)       ends at 196
//!  offset 196  record LSN 8: header (96) + payload (100)       ends at 392
//!  offset 392  padding:      header (96) + 3608 zero bytes     ends at 4096 = batch bytes
//! ```
//!
//! Had the records ended 40 bytes short of the boundary (less than one header), those 40 bytes
//! would simply be zeros: replay knows the batch's end from `batch bytes` in every header.

use crate::error::EncodeError;
use crate::format::{
    payload_crc, seal_entry_header, EmbedderHeader, EntryHeader, Kind, Position, RingId,
    ENTRY_HEADER_SIZE,
};

/// Everything a batch's headers share, fixed before the first record is added.
#[derive(Clone, Copy, Debug)]
pub struct BatchStart {
    /// The ring the batch is written to.
    pub ring_id: RingId,
    /// Where the batch's first byte goes.
    pub position: Position,
    /// The LSN its first record takes.
    pub first_lsn: u64,
    /// The highest LSN acknowledged now: must be below `first_lsn`.
    pub watermark: u64,
    /// The writer's incarnation.
    pub incarnation: u32,
    /// The ring's block size.
    pub block_size_bytes: u32,
    /// The most bytes this batch may take (a block multiple): the smaller of the ring's batch
    /// limit and the room left in the segment.
    pub capacity_bytes: u32,
    /// The ring's payload limit.
    pub payload_size_max_bytes: u32,
}

/// A finished batch: `bytes` of the builder's buffer, ready to write at its position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EncodedBatch {
    /// Where the batch goes.
    pub position: Position,
    /// Its length: a multiple of the block size.
    pub bytes: u32,
    /// The LSN of its first record (also the next LSN when it holds none).
    pub first_lsn: u64,
    /// Number of LSN-consuming records in it.
    pub records: u32,
}

impl EncodedBatch {
    /// The LSN the batch after this one starts at.
    pub fn next_lsn(&self) -> u64 {
        self.first_lsn + u64::from(self.records)
    }

    /// The LSN of its last record, if it holds any.
    pub fn last_lsn(&self) -> Option<u64> {
        (self.records > 0).then(|| self.next_lsn() - 1)
    }
}

/// Builds one batch in a caller-owned buffer (the engine's registered O_DIRECT buffer), without
/// allocating.
pub struct BatchBuilder<'buf> {
    buf: &'buf mut [u8],
    start: BatchStart,
    used_bytes: u32,
    records: u32,
}

impl<'buf> BatchBuilder<'buf> {
    /// Starts a batch. `buf` must hold at least `capacity_bytes`.
    pub fn new(buf: &'buf mut [u8], start: BatchStart) -> BatchBuilder<'buf> {
        assert!(start.block_size_bytes.is_power_of_two());
        assert_eq!(start.capacity_bytes % start.block_size_bytes, 0);
        assert!(start.capacity_bytes >= start.block_size_bytes);
        assert!(buf.len() >= start.capacity_bytes as usize);
        assert!(
            start.watermark < start.first_lsn,
            "watermark must be below the batch's LSNs"
        );
        assert_eq!(start.position.offset % start.block_size_bytes, 0);
        BatchBuilder {
            buf,
            start,
            used_bytes: 0,
            records: 0,
        }
    }

    /// Number of records added so far.
    pub fn records(&self) -> u32 {
        self.records
    }

    /// Bytes the records take so far (before padding).
    pub fn used_bytes(&self) -> u32 {
        self.used_bytes
    }

    /// Bytes still free for records (before padding).
    pub fn free_bytes(&self) -> u32 {
        self.start.capacity_bytes - self.used_bytes
    }

    /// Bytes a record with this payload would take, header included.
    pub fn record_bytes(payload_len: usize) -> u64 {
        ENTRY_HEADER_SIZE as u64 + payload_len as u64
    }

    /// Adds a record and returns its LSN. A payload over the ring's limit is refused for good;
    /// [`EncodeError::BatchFull`] means "finish this batch and put it in the next one".
    pub fn push(&mut self, kind: Kind, payload: &[u8]) -> Result<u64, EncodeError> {
        self.push_parts(kind, EmbedderHeader::ZERO, &[payload], payload_crc(payload))
    }

    /// [`BatchBuilder::push`] with an embedder header.
    pub fn push_with(
        &mut self,
        kind: Kind,
        embedder: EmbedderHeader,
        payload: &[u8],
    ) -> Result<u64, EncodeError> {
        self.push_parts(kind, embedder, &[payload], payload_crc(payload))
    }

    /// Adds a record whose payload is `parts` in order (copied straight into the batch, never
    /// concatenated elsewhere), with its CRC32C computed by the caller (on another thread, so
    /// that the engine's drive thread only copies): `crc` must be [`payload_crc`] of the
    /// concatenated parts, which debug builds check.
    pub fn push_parts(
        &mut self,
        kind: Kind,
        embedder: EmbedderHeader,
        parts: &[&[u8]],
        crc: u32,
    ) -> Result<u64, EncodeError> {
        if kind == Kind::Padding {
            return Err(EncodeError::PaddingKind);
        }
        let payload_len: usize = parts.iter().map(|part| part.len()).sum();
        if payload_len as u64 > u64::from(self.start.payload_size_max_bytes) {
            return Err(EncodeError::PayloadTooLarge {
                payload_len: payload_len as u64,
                payload_size_max_bytes: self.start.payload_size_max_bytes,
            });
        }
        let record_bytes = Self::record_bytes(payload_len);
        let free_bytes = u64::from(self.start.capacity_bytes - self.used_bytes);
        if record_bytes > free_bytes {
            return Err(EncodeError::BatchFull {
                free_bytes,
                record_bytes,
            });
        }
        let lsn = self.start.first_lsn + u64::from(self.records);
        let index = self.records;
        // Checked above: payload_len is at most the payload limit, a u32.
        let payload_len = u32::try_from(payload_len).expect("payload below the u32 limit");
        self.write_record(kind, embedder, (lsn, index), payload_len, crc);
        let mut offset = self.used_bytes as usize + ENTRY_HEADER_SIZE;
        let payload_start = offset;
        for part in parts {
            self.buf[offset..offset + part.len()].copy_from_slice(part);
            offset += part.len();
        }
        debug_assert_eq!(
            payload_crc(&self.buf[payload_start..offset]),
            crc,
            "the caller's CRC is the payload's"
        );
        self.used_bytes += ENTRY_HEADER_SIZE as u32 + payload_len;
        self.records += 1;
        Ok(lsn)
    }

    /// Writes a header with `batch bytes` still unknown (0); [`BatchBuilder::finish`] patches it.
    fn write_record(
        &mut self,
        kind: Kind,
        embedder: EmbedderHeader,
        (lsn, index): (u64, u32),
        len: u32,
        crc: u32,
    ) {
        let offset = self.used_bytes as usize;
        let header = EntryHeader {
            kind,
            payload_len: len,
            payload_crc: crc,
            incarnation: self.start.incarnation,
            lsn,
            watermark: self.start.watermark,
            position: Position {
                lap: self.start.position.lap,
                segment: self.start.position.segment,
                offset: self.start.position.offset + self.used_bytes,
            },
            batch_bytes: 0,
            batch_index: index,
            embedder,
        };
        header.encode_unsealed(self.start.ring_id, &mut self.buf[offset..]);
    }

    /// Pads the batch to its block boundary, records its length in every header and returns
    /// it. A batch with no records is a tail marker: one block carrying the watermark.
    pub fn finish(mut self) -> EncodedBatch {
        let block = self.start.block_size_bytes;
        let bytes = self.used_bytes.div_ceil(block).max(1) * block;
        assert!(bytes <= self.start.capacity_bytes);
        let tail = (bytes - self.used_bytes) as usize;
        let tail_start = self.used_bytes as usize;
        self.buf[tail_start..bytes as usize].fill(0);
        if tail >= ENTRY_HEADER_SIZE {
            let padding_len = (tail - ENTRY_HEADER_SIZE) as u32;
            let zeros = &self.buf[tail_start + ENTRY_HEADER_SIZE..bytes as usize];
            debug_assert!(zeros.iter().all(|&byte| byte == 0));
            let crc = payload_crc(zeros);
            let next_lsn = self.start.first_lsn + u64::from(self.records);
            let at = (next_lsn, self.records);
            self.write_record(Kind::Padding, EmbedderHeader::ZERO, at, padding_len, crc);
            self.used_bytes = bytes;
        }
        // Second pass: every header learns the batch's length, then gets its CRC.
        let mut offset = 0usize;
        while offset < self.used_bytes as usize {
            offset +=
                seal_entry_header(self.start.ring_id, &mut self.buf[offset..], bytes) as usize;
        }
        debug_assert_eq!(offset, self.used_bytes as usize);
        EncodedBatch {
            position: self.start.position,
            bytes,
            first_lsn: self.start.first_lsn,
            records: self.records,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::RingId;

    fn start() -> BatchStart {
        BatchStart {
            ring_id: RingId([7; 16]),
            position: Position {
                lap: 1,
                segment: 0,
                offset: 4096,
            },
            first_lsn: 10,
            watermark: 9,
            incarnation: 3,
            block_size_bytes: 4096,
            capacity_bytes: 4 * 4096,
            payload_size_max_bytes: 8000,
        }
    }

    #[test]
    fn a_record_pushed_in_parts_is_byte_for_byte_the_record_of_their_concatenation() {
        let parts: [&[u8]; 4] = [b"header:", b"", &[0x42; 3000], b"trailer"];
        let whole = parts.concat();
        let mut from_parts = vec![0xeeu8; 4 * 4096];
        let mut from_whole = vec![0x11u8; 4 * 4096];
        let mut builder = BatchBuilder::new(&mut from_parts, start());
        builder
            .push_parts(
                Kind::Data,
                EmbedderHeader::ZERO,
                &parts,
                payload_crc(&whole),
            )
            .expect("fits");
        builder
            .push_parts(Kind::Data, EmbedderHeader::ZERO, &[], payload_crc(&[]))
            .expect("fits");
        let parted = builder.finish();
        let mut builder = BatchBuilder::new(&mut from_whole, start());
        builder.push(Kind::Data, &whole).expect("fits");
        builder.push(Kind::Data, &[]).expect("fits");
        let whole_batch = builder.finish();
        assert_eq!(parted, whole_batch);
        let bytes = parted.bytes as usize;
        assert_eq!(from_parts[..bytes], from_whole[..bytes]);
    }

    #[test]
    fn parts_over_the_payload_limit_are_refused_whole() {
        let mut buffer = vec![0u8; 4 * 4096];
        let mut builder = BatchBuilder::new(&mut buffer, start());
        let half = vec![1u8; 4001];
        let crc = payload_crc(&[half.as_slice(), half.as_slice()].concat());
        assert_eq!(
            builder.push_parts(Kind::Data, EmbedderHeader::ZERO, &[&half, &half], crc),
            Err(EncodeError::PayloadTooLarge {
                payload_len: 8002,
                payload_size_max_bytes: 8000
            })
        );
        assert_eq!(builder.records(), 0);
    }
}
