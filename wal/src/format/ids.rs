//! The small types every structure of the format names: a ring's identity ([`RingId`]), a
//! record's kind ([`Kind`]), a position in the ring ([`Position`]), and the little-endian
//! field helpers the encoders and decoders share.

/// A ring's identity: 16 random bytes chosen at format time (a UUID).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RingId(pub [u8; 16]);

impl RingId {
    /// The 32-bit tag stored in every entry header: CRC32C of the id.
    pub fn tag(&self) -> u32 {
        crc32c::crc32c(&self.0)
    }

    /// The CRC32C state after the id, the seed of every header checksum.
    pub(crate) fn crc_seed(&self) -> u32 {
        crc32c::crc32c(&self.0)
    }
}

impl std::fmt::Display for RingId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (index, byte) in self.0.iter().enumerate() {
            if matches!(index, 4 | 6 | 8 | 10) {
                f.write_str("-")?;
            }
            write!(f, "{byte:02x}")?;
        }
        Ok(())
    }
}

impl std::fmt::Debug for RingId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RingId({self})")
    }
}

/// The kind of a record. Zero is not a kind, so zeroed memory never parses as a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Kind {
    /// An embedder's payload.
    Data = 1,
    /// Fills a batch up to its block boundary; consumes no LSN, never returned.
    Padding = 2,
    /// Reserved for the LogDrive layer: a trim record in the log.
    Trim = 3,
    /// Reserved for the LogDrive layer: a seal record.
    Seal = 4,
    /// Reserved for the LogDrive layer: a fence record.
    Fence = 5,
}

impl Kind {
    /// Decodes a kind byte; `None` for a byte that names no kind.
    pub fn from_byte(byte: u8) -> Option<Kind> {
        match byte {
            1 => Some(Kind::Data),
            2 => Some(Kind::Padding),
            3 => Some(Kind::Trim),
            4 => Some(Kind::Seal),
            5 => Some(Kind::Fence),
            _ => None,
        }
    }

    /// Whether a record of this kind takes an LSN (every kind but padding).
    pub fn consumes_lsn(self) -> bool {
        self != Kind::Padding
    }

    /// Lower-case name, for reports.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Data => "data",
            Kind::Padding => "padding",
            Kind::Trim => "trim",
            Kind::Seal => "seal",
            Kind::Fence => "fence",
        }
    }
}

/// Where a batch or record lives: the lap of the ring, the segment, and the byte offset inside
/// the segment. Positions order by lap, then segment, then offset: the order of the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Position {
    /// Which pass over the ring (the first is lap 1; lap 0 is never written).
    pub lap: u32,
    /// Segment index, below the ring's segment count.
    pub segment: u32,
    /// Byte offset inside the segment.
    pub offset: u32,
}

impl std::fmt::Display for Position {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "lap {} segment {} offset {}",
            self.lap, self.segment, self.offset
        )
    }
}

pub(crate) fn put_u16(buf: &mut [u8], offset: usize, value: u16) {
    buf[offset..offset + 2].copy_from_slice(&value.to_le_bytes());
}

pub(crate) fn put_u32(buf: &mut [u8], offset: usize, value: u32) {
    buf[offset..offset + 4].copy_from_slice(&value.to_le_bytes());
}

pub(crate) fn put_u64(buf: &mut [u8], offset: usize, value: u64) {
    buf[offset..offset + 8].copy_from_slice(&value.to_le_bytes());
}

pub(crate) fn get_u16(buf: &[u8], offset: usize) -> u16 {
    u16::from_le_bytes([buf[offset], buf[offset + 1]])
}

pub(crate) fn get_u32(buf: &[u8], offset: usize) -> u32 {
    let mut bytes = [0u8; 4];
    bytes.copy_from_slice(&buf[offset..offset + 4]);
    u32::from_le_bytes(bytes)
}

pub(crate) fn get_u64(buf: &[u8], offset: usize) -> u64 {
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&buf[offset..offset + 8]);
    u64::from_le_bytes(bytes)
}

/// CRC32C over `bytes` with the 4-byte crc field at `crc_offset` taken as zero, starting from
/// `seed` (0 for none, or the ring id's CRC state).
pub(crate) fn crc_skipping_field(seed: u32, bytes: &[u8], crc_offset: usize) -> u32 {
    let crc = crc32c::crc32c_append(seed, &bytes[..crc_offset]);
    let crc = crc32c::crc32c_append(crc, &[0u8; 4]);
    crc32c::crc32c_append(crc, &bytes[crc_offset + 4..])
}
