//! An entry's header and the embedder's header inside it: their encoding, what makes one
//! defective, and the payload CRC the header records.

use super::constants::*;
use super::ids::*;

/// A decoded entry header: every field of the 96 bytes but the checksums, which decoding checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryHeader {
    /// The record's kind.
    pub kind: Kind,
    /// Payload length in bytes.
    pub payload_len: u32,
    /// CRC32C of the payload.
    pub payload_crc: u32,
    /// The writer's incarnation.
    pub incarnation: u32,
    /// The record's LSN (for padding: the LSN the next record takes).
    pub lsn: u64,
    /// The highest LSN acknowledged when the batch was built.
    pub watermark: u64,
    /// Where the header was written.
    pub position: Position,
    /// Length of the record's batch in bytes.
    pub batch_bytes: u32,
    /// The record's index within its batch.
    pub batch_index: u32,
    /// The embedder's header: theirs, carried and checked (the header CRC covers it), never
    /// interpreted.
    pub embedder: EmbedderHeader,
}

/// Why an entry header was not accepted, in the order the checks run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeaderDefect {
    /// All 96 bytes are zero: nothing was written here.
    Zeroed,
    /// No entry magic.
    Magic,
    /// Another format version.
    Version,
    /// The ring tag names another ring.
    RingId,
    /// The header CRC does not match.
    HeaderCrc,
    /// The kind byte names no kind, or the flags are not zero.
    Kind,
}

impl EntryHeader {
    /// The LSN of the first record of this record's batch. Wrapping on purpose: both fields
    /// come from disk, and a header whose index exceeds its LSN is garbage that replay refuses
    /// by LSN continuity; here it only yields an identity no real batch has.
    pub fn batch_first_lsn(&self) -> u64 {
        self.lsn.wrapping_sub(u64::from(self.batch_index))
    }

    /// Bytes of this record: header (the embedder's included) plus payload.
    pub fn record_bytes(&self) -> u64 {
        ENTRY_HEADER_SIZE as u64 + u64::from(self.payload_len)
    }

    /// Encodes into the first [`ENTRY_HEADER_SIZE`] bytes of `buf`, header CRC included.
    pub fn encode(&self, ring_id: RingId, buf: &mut [u8]) {
        self.encode_unsealed(ring_id, buf);
        seal_entry_header(ring_id, buf, self.batch_bytes);
    }

    /// Encodes every field but the header CRC, which [`seal_entry_header`] computes once the
    /// batch's length is known (so the encoder computes each header CRC once).
    pub(crate) fn encode_unsealed(&self, ring_id: RingId, buf: &mut [u8]) {
        let header = &mut buf[..ENTRY_HEADER_SIZE];
        put_u32(header, ENTRY_MAGIC_OFFSET, ENTRY_MAGIC);
        put_u16(header, ENTRY_VERSION_OFFSET, FORMAT_VERSION);
        header[ENTRY_KIND_OFFSET] = self.kind as u8;
        header[ENTRY_FLAGS_OFFSET] = 0;
        put_u32(header, ENTRY_HEADER_CRC_OFFSET, 0);
        put_u32(header, ENTRY_PAYLOAD_LEN_OFFSET, self.payload_len);
        put_u32(header, ENTRY_PAYLOAD_CRC_OFFSET, self.payload_crc);
        put_u32(header, ENTRY_INCARNATION_OFFSET, self.incarnation);
        put_u64(header, ENTRY_LSN_OFFSET, self.lsn);
        put_u64(header, ENTRY_WATERMARK_OFFSET, self.watermark);
        put_u32(header, ENTRY_LAP_OFFSET, self.position.lap);
        put_u32(header, ENTRY_SEGMENT_OFFSET, self.position.segment);
        put_u32(header, ENTRY_OFFSET_OFFSET, self.position.offset);
        put_u32(header, ENTRY_BATCH_BYTES_OFFSET, self.batch_bytes);
        put_u32(header, ENTRY_BATCH_INDEX_OFFSET, self.batch_index);
        put_u32(header, ENTRY_RING_TAG_OFFSET, ring_id.tag());
        header[ENTRY_EMBEDDER_OFFSET..ENTRY_HEADER_SIZE].copy_from_slice(&self.embedder.to_bytes());
    }

    /// Decodes the header at the start of `buf` and checks its integrity and identity: magic,
    /// version, ring, header CRC, kind and flags. Where it was found, its lap and LSN are for the
    /// caller to check against what it expects.
    pub fn decode(ring_id: RingId, buf: &[u8]) -> Result<EntryHeader, HeaderDefect> {
        let header = &buf[..ENTRY_HEADER_SIZE];
        if get_u32(header, ENTRY_MAGIC_OFFSET) != ENTRY_MAGIC {
            if header.iter().all(|&byte| byte == 0) {
                return Err(HeaderDefect::Zeroed);
            }
            return Err(HeaderDefect::Magic);
        }
        if get_u16(header, ENTRY_VERSION_OFFSET) != FORMAT_VERSION {
            return Err(HeaderDefect::Version);
        }
        if get_u32(header, ENTRY_RING_TAG_OFFSET) != ring_id.tag() {
            return Err(HeaderDefect::RingId);
        }
        let crc = crc_skipping_field(ring_id.crc_seed(), header, ENTRY_HEADER_CRC_OFFSET);
        if crc != get_u32(header, ENTRY_HEADER_CRC_OFFSET) {
            return Err(HeaderDefect::HeaderCrc);
        }
        let kind = Kind::from_byte(header[ENTRY_KIND_OFFSET]).ok_or(HeaderDefect::Kind)?;
        if header[ENTRY_FLAGS_OFFSET] != 0 {
            return Err(HeaderDefect::Kind);
        }
        Ok(EntryHeader {
            kind,
            payload_len: get_u32(header, ENTRY_PAYLOAD_LEN_OFFSET),
            payload_crc: get_u32(header, ENTRY_PAYLOAD_CRC_OFFSET),
            incarnation: get_u32(header, ENTRY_INCARNATION_OFFSET),
            lsn: get_u64(header, ENTRY_LSN_OFFSET),
            watermark: get_u64(header, ENTRY_WATERMARK_OFFSET),
            position: Position {
                lap: get_u32(header, ENTRY_LAP_OFFSET),
                segment: get_u32(header, ENTRY_SEGMENT_OFFSET),
                offset: get_u32(header, ENTRY_OFFSET_OFFSET),
            },
            batch_bytes: get_u32(header, ENTRY_BATCH_BYTES_OFFSET),
            batch_index: get_u32(header, ENTRY_BATCH_INDEX_OFFSET),
            embedder: EmbedderHeader::from_bytes(&header[ENTRY_EMBEDDER_OFFSET..]),
        })
    }
}

/// The embedder's header of an entry: 32 bytes that the layer above sealog gives each entry
/// and gets back from reads, iterators and recovery, as four little-endian 64-bit words. It
/// lies in the entry header, so the header CRC covers it and the payload's does not: when a
/// payload is damaged, the layer above can still tell which of its records it was (a ledger's
/// id and entry id, a stream's extent and offset). sealog never interprets it. The field
/// names are a convention for log servers; any use of the 32 bytes is the embedder's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct EmbedderHeader {
    /// Which of the embedder's logs the entry belongs to (a ledger, a stream, a raft group).
    pub log_id: u64,
    /// The entry's address in that log (an entry id, a byte offset, a raft index).
    pub address: u64,
    /// The epoch, term or fencing token it was written under.
    pub epoch: u64,
    /// A fourth word, for whatever else the embedder needs (flags, a checksum of its own).
    pub extra: u64,
}

impl EmbedderHeader {
    /// All zeros: what entries appended without an embedder header carry.
    pub const ZERO: EmbedderHeader = EmbedderHeader {
        log_id: 0,
        address: 0,
        epoch: 0,
        extra: 0,
    };

    /// The header's bytes as they are stored.
    pub fn to_bytes(&self) -> [u8; EMBEDDER_HEADER_SIZE] {
        let mut bytes = [0u8; EMBEDDER_HEADER_SIZE];
        for (at, word) in [self.log_id, self.address, self.epoch, self.extra]
            .into_iter()
            .enumerate()
        {
            put_u64(&mut bytes, at * 8, word);
        }
        bytes
    }

    /// Decodes the header from its stored bytes (at least [`EMBEDDER_HEADER_SIZE`]).
    pub fn from_bytes(bytes: &[u8]) -> EmbedderHeader {
        EmbedderHeader {
            log_id: get_u64(bytes, 0),
            address: get_u64(bytes, 8),
            epoch: get_u64(bytes, 16),
            extra: get_u64(bytes, 24),
        }
    }
}

/// Sets the `batch bytes` field of the encoded header at the start of `buf`, computes its
/// header CRC, and returns the record's length (header plus payload) in bytes.
pub(crate) fn seal_entry_header(ring_id: RingId, buf: &mut [u8], batch_bytes: u32) -> u64 {
    let header = &mut buf[..ENTRY_HEADER_SIZE];
    put_u32(header, ENTRY_BATCH_BYTES_OFFSET, batch_bytes);
    put_u32(header, ENTRY_HEADER_CRC_OFFSET, 0);
    let crc = crc_skipping_field(ring_id.crc_seed(), header, ENTRY_HEADER_CRC_OFFSET);
    put_u32(header, ENTRY_HEADER_CRC_OFFSET, crc);
    ENTRY_HEADER_SIZE as u64 + u64::from(get_u32(header, ENTRY_PAYLOAD_LEN_OFFSET))
}

/// CRC32C of a payload, as stored in its header.
pub fn payload_crc(payload: &[u8]) -> u32 {
    crc32c::crc32c(payload)
}
