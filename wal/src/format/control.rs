//! The control block: what must survive outside the log (identity, geometry, trim point and
//! head, incarnation, tail hint, sync choice, purpose), its encoding, and what makes a copy
//! defective.

use super::constants::*;
use super::geometry::*;
use super::ids::*;
use super::sync::*;
use crate::error::SequenceExhausted;

/// What a control block records: identity, geometry, incarnation, trim point, how the ring's
/// default durability was chosen, and what the ring holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ControlBlock {
    /// Bumped on every rewrite; the valid copy with the highest sequence is current.
    pub sequence: u64,
    /// The ring's identity.
    pub ring_id: RingId,
    /// The ring's geometry.
    pub geometry: Geometry,
    /// The incarnation of the last writable open (0 on a freshly formatted ring).
    pub incarnation: u32,
    /// Entries with an LSN at or below this are released (trim is inclusive).
    pub trim_lsn: u64,
    /// The batch boundary where replay starts.
    pub head: Position,
    /// LSN of the first record of the batch at `head`.
    pub head_lsn: u64,
    /// The incarnation that wrote the batch at `head` (the writer's, when nothing is live):
    /// the oldest incarnation replay accepts.
    pub head_incarnation: u32,
    /// Where the last writable open ended the log (lap 0: no open yet).
    pub cut: Position,
    /// The incarnation that open began: the oldest accepted at or after `cut`.
    pub cut_incarnation: u32,
    /// How format chose the ring's default durability; every rewrite carries it over.
    pub sync: SyncChoice,
    /// How far the log can reach (see [`TailHint`]).
    pub tail_hint: TailHint,
    /// What the ring holds; every rewrite carries it over (a writable open may set it).
    pub purpose: RingPurpose,
}

/// What a ring holds, recorded in its control block so that a tool can tell, before it
/// appends or trims raw entries, whether a layer above owns the ring's head.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[repr(u8)]
pub enum RingPurpose {
    /// A plain log: the embedder appends and trims as it likes. The default.
    #[default]
    Log = 0,
    /// A LogDrive store's records: the store's reclaimer owns the ring's head, so raw trims
    /// (and raw appends, which the store's index would never know) are not the operator's.
    LogDriveStore = 1,
}

impl RingPurpose {
    /// Decodes a purpose byte; `None` for a byte that names no purpose.
    pub fn from_byte(byte: u8) -> Option<RingPurpose> {
        match byte {
            0 => Some(RingPurpose::Log),
            1 => Some(RingPurpose::LogDriveStore),
            _ => None,
        }
    }

    /// Lower-case name, for reports and the CLI's JSON.
    pub fn name(self) -> &'static str {
        match self {
            RingPurpose::Log => "log",
            RingPurpose::LogDriveStore => "logdrive_store",
        }
    }
}

/// How far the log can reach: the writer of `incarnation` never ends a batch past `limit`.
/// It is an upper bound made durable before it is relied on: a writer puts a further limit in
/// a control block, and waits for that block's flush, before it submits a batch that ends past
/// the limit in force. Within one incarnation the limit never moves back. Replay uses it to
/// bound its probe after the log's end (see the module doc and `replay/probe.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct TailHint {
    /// No batch of `incarnation` ends past this position. A limit at a segment's end is
    /// recorded as the next segment's first data position ([`TailHint::normalized_limit`]).
    pub limit: Position,
    /// The incarnation that set it. It counts only in a control block of the same incarnation.
    pub incarnation: u32,
}

impl TailHint {
    /// The limit as a batch boundary: a position at a segment's end (or inside its header
    /// block) becomes the first data position of the segment it leads into, so that a log
    /// whose last batch ends exactly at the limit has its end (the next batch's position) at
    /// the limit, not past it. `None` when the limit names no place of this ring (a segment
    /// past the count, an offset off a block boundary or past the segment, lap 0, or a lap
    /// that cannot be followed by another).
    pub fn normalized_limit(&self, geometry: &Geometry) -> Option<Position> {
        let limit = self.limit;
        let block = geometry.block_size_bytes;
        let in_ring = limit.lap >= 1
            && limit.segment < geometry.segment_count
            && limit.offset % block == 0
            && u64::from(limit.offset) <= geometry.segment_size_bytes;
        if !in_ring {
            return None;
        }
        if u64::from(limit.offset) == geometry.segment_size_bytes {
            return geometry.checked_next_segment_start(limit);
        }
        Some(Position {
            offset: limit.offset.max(geometry.segment_data_offset()),
            ..limit
        })
    }
}

/// Why a control block copy was not accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ControlDefect {
    /// The copy does not start with the control magic: not a sealog control block.
    Magic,
    /// The magic is there but the CRC does not match: the copy is damaged or torn.
    Crc,
    /// The copy is intact but was written by another format version.
    Version(u16),
    /// The CRC matches but the sync choice's method or source byte names nothing this
    /// version writes (a crafted block, or one of a later writer).
    SyncChoice {
        /// The method byte found.
        method_byte: u8,
        /// The source byte found.
        source_byte: u8,
    },
    /// The CRC matches but the purpose byte names no [`RingPurpose`] this version knows (a
    /// crafted block, or one of a later writer).
    Purpose {
        /// The purpose byte found.
        purpose_byte: u8,
    },
}

impl ControlBlock {
    /// The control block of a freshly formatted ring: nothing written, head at segment 0.
    pub fn new_ring(ring_id: RingId, geometry: Geometry) -> ControlBlock {
        ControlBlock {
            sequence: 1,
            ring_id,
            geometry,
            incarnation: 0,
            trim_lsn: 0,
            head: Position {
                lap: 1,
                segment: 0,
                offset: geometry.segment_data_offset(),
            },
            head_lsn: 1,
            head_incarnation: 0,
            cut: Position::default(),
            cut_incarnation: 0,
            sync: SyncChoice::NotRecorded,
            // Nothing is written before the first writable open, which records its own hint:
            // until then the log reaches no further than the head.
            tail_hint: TailHint {
                limit: Position {
                    lap: 1,
                    segment: 0,
                    offset: geometry.segment_data_offset(),
                },
                incarnation: 0,
            },
            purpose: RingPurpose::Log,
        }
    }

    /// The sequence number the next rewrite of this control block carries, or
    /// [`SequenceExhausted`] when it would pass [`CONTROL_SEQUENCE_LIMIT`] (a block the next
    /// read would refuse). Every writer of a control block takes its sequence from here, so
    /// none computes `sequence + 1` on a value read from disk.
    pub fn next_sequence(&self) -> Result<u64, SequenceExhausted> {
        self.sequence
            .checked_add(1)
            .filter(|&next| next <= CONTROL_SEQUENCE_LIMIT)
            .ok_or(SequenceExhausted {
                sequence: self.sequence,
            })
    }

    /// Which of the two copies this block is written to.
    pub fn copy(&self) -> u64 {
        self.sequence % CONTROL_COPIES
    }

    /// Encodes into the first [`CONTROL_SIZE`] bytes of `buf` and zeroes the rest.
    pub fn encode(&self, buf: &mut [u8]) {
        assert!(buf.len() >= CONTROL_SIZE);
        buf.fill(0);
        let g = &self.geometry;
        put_u32(buf, CONTROL_MAGIC_OFFSET, CONTROL_MAGIC);
        put_u16(buf, CONTROL_VERSION_OFFSET, FORMAT_VERSION);
        put_u32(buf, CONTROL_INCARNATION_OFFSET, self.incarnation);
        put_u64(buf, CONTROL_SEQUENCE_OFFSET, self.sequence);
        buf[CONTROL_RING_ID_OFFSET..CONTROL_RING_ID_OFFSET + 16].copy_from_slice(&self.ring_id.0);
        put_u32(buf, CONTROL_BLOCK_SIZE_OFFSET, g.block_size_bytes);
        put_u32(buf, CONTROL_SEGMENT_COUNT_OFFSET, g.segment_count);
        put_u64(buf, CONTROL_SEGMENT_SIZE_OFFSET, g.segment_size_bytes);
        put_u32(buf, CONTROL_BATCH_MAX_OFFSET, g.batch_size_max_bytes);
        put_u32(buf, CONTROL_WINDOW_BATCHES_OFFSET, g.window_batches_max);
        put_u64(buf, CONTROL_WINDOW_BYTES_OFFSET, g.window_bytes_max);
        put_u64(buf, CONTROL_TRIM_LSN_OFFSET, self.trim_lsn);
        put_u64(buf, CONTROL_HEAD_LSN_OFFSET, self.head_lsn);
        put_u32(buf, CONTROL_HEAD_LAP_OFFSET, self.head.lap);
        put_u32(buf, CONTROL_HEAD_SEGMENT_OFFSET, self.head.segment);
        put_u32(buf, CONTROL_HEAD_OFFSET_OFFSET, self.head.offset);
        put_u32(buf, CONTROL_HEAD_INCARNATION_OFFSET, self.head_incarnation);
        put_u32(buf, CONTROL_CUT_LAP_OFFSET, self.cut.lap);
        put_u32(buf, CONTROL_CUT_SEGMENT_OFFSET, self.cut.segment);
        put_u32(buf, CONTROL_CUT_OFFSET_OFFSET, self.cut.offset);
        put_u32(buf, CONTROL_CUT_INCARNATION_OFFSET, self.cut_incarnation);
        encode_sync(&self.sync, buf);
        put_u32(buf, CONTROL_HINT_LAP_OFFSET, self.tail_hint.limit.lap);
        put_u32(
            buf,
            CONTROL_HINT_SEGMENT_OFFSET,
            self.tail_hint.limit.segment,
        );
        put_u32(buf, CONTROL_HINT_OFFSET_OFFSET, self.tail_hint.limit.offset);
        put_u32(
            buf,
            CONTROL_HINT_INCARNATION_OFFSET,
            self.tail_hint.incarnation,
        );
        buf[CONTROL_PURPOSE_OFFSET] = self.purpose as u8;
        let crc = crc_skipping_field(0, &buf[..CONTROL_SIZE], CONTROL_CRC_OFFSET);
        put_u32(buf, CONTROL_CRC_OFFSET, crc);
    }

    /// Decodes a control block copy. The geometry and head are not validated here
    /// ([`Geometry::validate`] and the replay do that), only the bytes' integrity.
    pub fn decode(buf: &[u8]) -> Result<ControlBlock, ControlDefect> {
        if buf.len() < CONTROL_SIZE || get_u32(buf, CONTROL_MAGIC_OFFSET) != CONTROL_MAGIC {
            return Err(ControlDefect::Magic);
        }
        let bytes = &buf[..CONTROL_SIZE];
        let version = get_u16(bytes, CONTROL_VERSION_OFFSET);
        let crc_ok = crc_covers(bytes, CONTROL_SIZE);
        if !crc_ok {
            // Not a block of this version. An intact block of version 1 (either of its forms)
            // names its version, so the ring is refused as another version's, not as damaged.
            let v1_form = crc_covers(bytes, CONTROL_SIZE_V1)
                || crc_covers(bytes, CONTROL_SIZE_V1_BEFORE_SYNC);
            if v1_form && version != FORMAT_VERSION {
                return Err(ControlDefect::Version(version));
            }
            return Err(ControlDefect::Crc);
        }
        if version != FORMAT_VERSION {
            return Err(ControlDefect::Version(version));
        }
        let sync = decode_sync(bytes)?;
        let purpose_byte = bytes[CONTROL_PURPOSE_OFFSET];
        let purpose =
            RingPurpose::from_byte(purpose_byte).ok_or(ControlDefect::Purpose { purpose_byte })?;
        let mut ring_id = [0u8; 16];
        ring_id.copy_from_slice(&bytes[CONTROL_RING_ID_OFFSET..CONTROL_RING_ID_OFFSET + 16]);
        Ok(ControlBlock {
            sequence: get_u64(bytes, CONTROL_SEQUENCE_OFFSET),
            ring_id: RingId(ring_id),
            geometry: Geometry {
                block_size_bytes: get_u32(bytes, CONTROL_BLOCK_SIZE_OFFSET),
                segment_size_bytes: get_u64(bytes, CONTROL_SEGMENT_SIZE_OFFSET),
                segment_count: get_u32(bytes, CONTROL_SEGMENT_COUNT_OFFSET),
                batch_size_max_bytes: get_u32(bytes, CONTROL_BATCH_MAX_OFFSET),
                window_batches_max: get_u32(bytes, CONTROL_WINDOW_BATCHES_OFFSET),
                window_bytes_max: get_u64(bytes, CONTROL_WINDOW_BYTES_OFFSET),
            },
            incarnation: get_u32(bytes, CONTROL_INCARNATION_OFFSET),
            trim_lsn: get_u64(bytes, CONTROL_TRIM_LSN_OFFSET),
            head_lsn: get_u64(bytes, CONTROL_HEAD_LSN_OFFSET),
            head_incarnation: get_u32(bytes, CONTROL_HEAD_INCARNATION_OFFSET),
            cut: Position {
                lap: get_u32(bytes, CONTROL_CUT_LAP_OFFSET),
                segment: get_u32(bytes, CONTROL_CUT_SEGMENT_OFFSET),
                offset: get_u32(bytes, CONTROL_CUT_OFFSET_OFFSET),
            },
            cut_incarnation: get_u32(bytes, CONTROL_CUT_INCARNATION_OFFSET),
            head: Position {
                lap: get_u32(bytes, CONTROL_HEAD_LAP_OFFSET),
                segment: get_u32(bytes, CONTROL_HEAD_SEGMENT_OFFSET),
                offset: get_u32(bytes, CONTROL_HEAD_OFFSET_OFFSET),
            },
            sync,
            tail_hint: TailHint {
                limit: Position {
                    lap: get_u32(bytes, CONTROL_HINT_LAP_OFFSET),
                    segment: get_u32(bytes, CONTROL_HINT_SEGMENT_OFFSET),
                    offset: get_u32(bytes, CONTROL_HINT_OFFSET_OFFSET),
                },
                incarnation: get_u32(bytes, CONTROL_HINT_INCARNATION_OFFSET),
            },
            purpose,
        })
    }
}

/// Whether a control block's CRC covers its first `size` bytes, with every byte after them up
/// to [`CONTROL_SIZE`] zero (a block of a layout that used only `size` bytes).
pub(crate) fn crc_covers(bytes: &[u8], size: usize) -> bool {
    debug_assert!(size <= CONTROL_SIZE && bytes.len() >= CONTROL_SIZE);
    bytes[size..CONTROL_SIZE].iter().all(|&byte| byte == 0)
        && crc_skipping_field(0, &bytes[..size], CONTROL_CRC_OFFSET)
            == get_u32(bytes, CONTROL_CRC_OFFSET)
}

/// Writes the sync choice's bytes (zeros where it has no figures).
pub(crate) fn encode_sync(sync: &SyncChoice, buf: &mut [u8]) {
    debug_assert!(buf[CONTROL_SYNC_METHOD_OFFSET..CONTROL_SIZE]
        .iter()
        .all(|&byte| byte == 0));
    let (method, source, measurement) = match *sync {
        SyncChoice::NotRecorded => return,
        SyncChoice::Named(method) => (method, SYNC_SOURCE_NAMED, SyncMeasurement::default()),
        SyncChoice::Measured {
            method,
            measurement,
        } => (method, SYNC_SOURCE_MEASURED, measurement),
    };
    buf[CONTROL_SYNC_METHOD_OFFSET] = method as u8;
    buf[CONTROL_SYNC_SOURCE_OFFSET] = source;
    buf[CONTROL_SYNC_FLAGS_OFFSET] = if measurement.fua { SYNC_FLAG_FUA } else { 0 };
    buf[CONTROL_SYNC_MARGIN_OFFSET] = measurement.margin_percent;
    put_u32(
        buf,
        CONTROL_PROBE_BYTES_OFFSET,
        measurement.write_size_bytes,
    );
    put_u16(buf, CONTROL_PROBE_ROUNDS_OFFSET, measurement.rounds);
    put_u16(
        buf,
        CONTROL_PROBE_WRITES_OFFSET,
        measurement.writes_per_round,
    );
    put_u32(
        buf,
        CONTROL_FDATASYNC_P50_OFFSET,
        measurement.fdatasync_p50_us,
    );
    put_u32(
        buf,
        CONTROL_FDATASYNC_P99_OFFSET,
        measurement.fdatasync_p99_us,
    );
    put_u32(buf, CONTROL_DSYNC_P50_OFFSET, measurement.dsync_p50_us);
    put_u32(buf, CONTROL_DSYNC_P99_OFFSET, measurement.dsync_p99_us);
}

/// Source byte of a sync choice that was measured.
pub(crate) const SYNC_SOURCE_MEASURED: u8 = 1;
/// Source byte of a sync choice the operator named.
pub(crate) const SYNC_SOURCE_NAMED: u8 = 2;

/// Reads the sync choice of a control block whose CRC checked out. The method and source
/// bytes decide what the drive does, so a value this version never writes is a defect; the
/// figures are only reported, and are taken as they are.
pub(crate) fn decode_sync(bytes: &[u8]) -> Result<SyncChoice, ControlDefect> {
    let method_byte = bytes[CONTROL_SYNC_METHOD_OFFSET];
    let source = bytes[CONTROL_SYNC_SOURCE_OFFSET];
    let defect = ControlDefect::SyncChoice {
        method_byte,
        source_byte: source,
    };
    if (method_byte, source) == (0, 0) {
        return Ok(SyncChoice::NotRecorded);
    }
    let method = SyncMethod::from_byte(method_byte).ok_or(defect)?;
    match source {
        SYNC_SOURCE_NAMED => Ok(SyncChoice::Named(method)),
        SYNC_SOURCE_MEASURED => Ok(SyncChoice::Measured {
            method,
            measurement: SyncMeasurement {
                write_size_bytes: get_u32(bytes, CONTROL_PROBE_BYTES_OFFSET),
                rounds: get_u16(bytes, CONTROL_PROBE_ROUNDS_OFFSET),
                writes_per_round: get_u16(bytes, CONTROL_PROBE_WRITES_OFFSET),
                margin_percent: bytes[CONTROL_SYNC_MARGIN_OFFSET],
                fua: bytes[CONTROL_SYNC_FLAGS_OFFSET] & SYNC_FLAG_FUA != 0,
                fdatasync_p50_us: get_u32(bytes, CONTROL_FDATASYNC_P50_OFFSET),
                fdatasync_p99_us: get_u32(bytes, CONTROL_FDATASYNC_P99_OFFSET),
                dsync_p50_us: get_u32(bytes, CONTROL_DSYNC_P50_OFFSET),
                dsync_p99_us: get_u32(bytes, CONTROL_DSYNC_P99_OFFSET),
            },
        }),
        _ => Err(defect),
    }
}
