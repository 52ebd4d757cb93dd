//! Golden bytes: the encoding of each on-disk structure, pinned as hex. A change to any of
//! these is a format change: it needs a new format version, an update of the drawing in
//! `src/format/`, and of the hash in `docs/format.md`.

use sealog_wal::batch::{BatchBuilder, BatchStart};
use sealog_wal::format::{
    ControlBlock, ControlDefect, EmbedderHeader, EntryHeader, Geometry, Kind, Position, RingId,
    RingPurpose, SegmentHeader, SyncChoice, SyncMeasurement, SyncMethod, TailHint, CONTROL_SIZE,
    CONTROL_SIZE_V1, CONTROL_SIZE_V1_BEFORE_SYNC, ENTRY_HEADER_SIZE, FORMAT_VERSION,
    SEGMENT_HEADER_SIZE,
};

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn ring_id() -> RingId {
    RingId([
        0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee,
        0xff,
    ])
}

fn geometry() -> Geometry {
    Geometry {
        block_size_bytes: 4096,
        segment_size_bytes: 1 << 20,
        segment_count: 8,
        batch_size_max_bytes: 1 << 16,
        window_batches_max: 4,
        window_bytes_max: 1 << 18,
    }
}

/// The control block the golden bytes encode, with `sync` as given (of a LogDrive store's
/// ring, so that the purpose byte is pinned as something other than zero).
fn control(sync: SyncChoice) -> ControlBlock {
    ControlBlock {
        sequence: 7,
        ring_id: ring_id(),
        geometry: geometry(),
        incarnation: 3,
        trim_lsn: 41,
        head: Position {
            lap: 2,
            segment: 5,
            offset: 8192,
        },
        head_lsn: 40,
        head_incarnation: 2,
        cut: Position {
            lap: 2,
            segment: 6,
            offset: 12288,
        },
        cut_incarnation: 3,
        sync,
        tail_hint: TailHint {
            limit: Position {
                lap: 2,
                segment: 7,
                offset: 20480,
            },
            incarnation: 3,
        },
        purpose: RingPurpose::LogDriveStore,
    }
}

fn measured() -> SyncChoice {
    SyncChoice::Measured {
        method: SyncMethod::Dsync,
        measurement: SyncMeasurement {
            write_size_bytes: 8192,
            rounds: 32,
            writes_per_round: 8,
            margin_percent: 10,
            fua: true,
            fdatasync_p50_us: 150,
            fdatasync_p99_us: 400,
            dsync_p50_us: 100,
            dsync_p99_us: 300,
        },
    }
}

#[test]
fn control_block_bytes_are_pinned() {
    let control = control(measured());
    let mut block = vec![0xffu8; 4096];
    control.encode(&mut block);
    assert!(
        block[CONTROL_SIZE..].iter().all(|&byte| byte == 0),
        "rest of the block zeroed"
    );
    assert_eq!(
        hex(&block[..CONTROL_SIZE]),
        GOLDEN_CONTROL,
        "control block encoding changed"
    );
    assert_eq!(ControlBlock::decode(&block), Ok(control));
}

#[test]
fn every_sync_choice_round_trips_through_the_control_block() {
    for sync in [
        SyncChoice::NotRecorded,
        SyncChoice::Named(SyncMethod::Fdatasync),
        SyncChoice::Named(SyncMethod::Dsync),
        measured(),
        SyncChoice::Measured {
            method: SyncMethod::Fdatasync,
            measurement: SyncMeasurement {
                fua: false,
                ..measured().measurement().expect("measured")
            },
        },
    ] {
        let control = control(sync);
        let mut block = vec![0u8; 4096];
        control.encode(&mut block);
        assert_eq!(ControlBlock::decode(&block), Ok(control), "{sync:?}");
    }
}

/// Version 1 control blocks, in both of their forms (with the sync choice, a CRC over 160
/// bytes; from before it, a CRC over 128): intact blocks of another version, so a version 1
/// ring is refused naming its version (and the reader's), not reported as damaged. A bit
/// flipped in one is damage.
#[test]
fn a_version_1_control_block_is_another_version_not_damage() {
    assert_eq!(FORMAT_VERSION, 4);
    for (golden, size) in [
        (GOLDEN_CONTROL_V1, CONTROL_SIZE_V1),
        (GOLDEN_CONTROL_V1_BEFORE_SYNC, CONTROL_SIZE_V1_BEFORE_SYNC),
    ] {
        let mut block = vec![0u8; 4096];
        let old = unhex(golden);
        assert_eq!(old.len(), size);
        block[..old.len()].copy_from_slice(&old);
        assert_eq!(ControlBlock::decode(&block), Err(ControlDefect::Version(1)));
        assert_flips_are_damage(&block, &[0x18, size - 1, size, CONTROL_SIZE - 1]);
        // A block of this version's layout that only covers a version 1 size is not one of
        // this version: claiming this version does not make it so.
        let mut claims_current = block.clone();
        claims_current[4..6].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        claims_current[8..12].fill(0);
        let crc = crc32c::crc32c(&claims_current[..size]);
        claims_current[8..12].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(
            ControlBlock::decode(&claims_current),
            Err(ControlDefect::Crc)
        );
    }
}

/// A version 2 control block (entries without the embedder header) is an intact block of
/// another version: the ring is refused naming both versions, never read as this version's.
#[test]
fn a_version_2_control_block_is_another_version_not_damage() {
    let mut block = vec![0u8; 4096];
    let old = unhex(GOLDEN_CONTROL_V2);
    block[..old.len()].copy_from_slice(&old);
    assert_eq!(ControlBlock::decode(&block), Err(ControlDefect::Version(2)));
    assert_flips_are_damage(&block, &[0x18]);
}

/// A version 3 control block (no purpose byte: zero where version 4 records it) is an intact
/// block of another version: the ring is refused naming both versions, never read as a
/// plain log of this version. A bit flipped in one is damage.
#[test]
fn a_version_3_control_block_is_another_version_not_damage() {
    let mut block = vec![0u8; 4096];
    let old = unhex(GOLDEN_CONTROL_V3);
    assert_eq!(old.len(), CONTROL_SIZE);
    block[..old.len()].copy_from_slice(&old);
    assert_eq!(ControlBlock::decode(&block), Err(ControlDefect::Version(3)));
    // The layout is this version's: a plain log's block differs only in version and CRC.
    let mut current = vec![0u8; 4096];
    ControlBlock {
        purpose: RingPurpose::Log,
        ..control(measured())
    }
    .encode(&mut current);
    for range in [0..4, 6..8, 12..CONTROL_SIZE] {
        assert_eq!(current[range.clone()], block[range.clone()], "{range:?}");
    }
    assert_flips_are_damage(&block, &[0x18, 164, CONTROL_SIZE - 1]);
}

/// A bit flipped at each of `offsets` in the intact control block `block` makes it damaged,
/// never a block of some version.
fn assert_flips_are_damage(block: &[u8], offsets: &[usize]) {
    for &at in offsets {
        let mut damaged = block.to_vec();
        damaged[at] ^= 1;
        assert_eq!(
            ControlBlock::decode(&damaged),
            Err(ControlDefect::Crc),
            "byte {at}"
        );
    }
}

/// Both purposes round-trip through byte 164, each as its own value; a byte that names no
/// purpose is refused naming the byte, not read as a plain log.
#[test]
fn the_purpose_byte_round_trips_and_an_unknown_one_is_a_defect() {
    for (purpose, byte) in [(RingPurpose::Log, 0u8), (RingPurpose::LogDriveStore, 1)] {
        let control = ControlBlock {
            purpose,
            ..control(measured())
        };
        let mut block = vec![0u8; 4096];
        control.encode(&mut block);
        assert_eq!(block[164], byte, "{purpose:?}");
        assert_eq!(ControlBlock::decode(&block), Ok(control), "{purpose:?}");
    }
    for purpose_byte in [2u8, 0x80, u8::MAX] {
        let mut block = vec![0u8; 4096];
        control(measured()).encode(&mut block);
        block[164] = purpose_byte;
        reseal(&mut block);
        assert_eq!(
            ControlBlock::decode(&block),
            Err(ControlDefect::Purpose { purpose_byte })
        );
    }
}

/// The tail hint round-trips, and a limit that names no place of the ring is no limit.
#[test]
fn the_tail_hint_normalizes_to_a_batch_boundary_or_nothing() {
    let geometry = geometry();
    let segment = geometry.segment_size_bytes as u32;
    let at = |lap, segment, offset| TailHint {
        limit: Position {
            lap,
            segment,
            offset,
        },
        incarnation: 1,
    };
    let position = |lap, segment, offset| Position {
        lap,
        segment,
        offset,
    };
    assert_eq!(
        at(2, 3, 8192).normalized_limit(&geometry),
        Some(position(2, 3, 8192))
    );
    // A segment's end is the next segment's first data position, the last segment's on the
    // next lap; its header block is its first data position.
    assert_eq!(
        at(2, 3, segment).normalized_limit(&geometry),
        Some(position(2, 4, 4096))
    );
    assert_eq!(
        at(2, 7, segment).normalized_limit(&geometry),
        Some(position(3, 0, 4096))
    );
    assert_eq!(
        at(2, 3, 0).normalized_limit(&geometry),
        Some(position(2, 3, 4096))
    );
    for nowhere in [
        at(0, 3, 8192),
        at(2, 8, 8192),
        at(2, 3, 8191),
        at(2, 3, segment + 4096),
        at(u32::MAX, 7, segment),
    ] {
        assert_eq!(nowhere.normalized_limit(&geometry), None, "{nowhere:?}");
    }
}

#[test]
fn a_sync_choice_this_version_never_writes_is_a_defect() {
    for (method_byte, source_byte) in [(3u8, 1u8), (1, 0), (0, 1), (1, 3), (0, 2)] {
        let mut block = vec![0u8; 4096];
        control(measured()).encode(&mut block);
        block[120] = method_byte;
        block[121] = source_byte;
        reseal(&mut block);
        assert_eq!(
            ControlBlock::decode(&block),
            Err(ControlDefect::SyncChoice {
                method_byte,
                source_byte
            })
        );
    }
}

/// Recomputes a control block's CRC over today's layout, as a crafted block would.
fn reseal(block: &mut [u8]) {
    block[8..12].fill(0);
    let crc = crc32c::crc32c(&block[..CONTROL_SIZE]);
    block[8..12].copy_from_slice(&crc.to_le_bytes());
}

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(&text[at..at + 2], 16).expect("hex"))
        .collect()
}

#[test]
fn segment_header_bytes_are_pinned() {
    let header = SegmentHeader {
        segment: 5,
        lap: 2,
        incarnation: 3,
        first_lsn: 1234,
    };
    let mut block = vec![0xffu8; 4096];
    header.encode(ring_id(), &mut block);
    assert_eq!(
        hex(&block[..SEGMENT_HEADER_SIZE]),
        GOLDEN_SEGMENT,
        "segment header changed"
    );
    assert_eq!(SegmentHeader::decode(ring_id(), &block), Ok(header));
}

#[test]
fn entry_header_bytes_are_pinned() {
    let header = EntryHeader {
        kind: Kind::Data,
        payload_len: 5,
        payload_crc: sealog_wal::format::payload_crc(b"hello"),
        incarnation: 3,
        lsn: 1234,
        watermark: 1200,
        position: Position {
            lap: 2,
            segment: 5,
            offset: 8192,
        },
        batch_bytes: 4096,
        batch_index: 0,
        embedder: EmbedderHeader {
            log_id: 0x0102_0304_0506_0708,
            address: 42,
            epoch: 7,
            extra: u64::MAX,
        },
    };
    let mut bytes = [0u8; ENTRY_HEADER_SIZE];
    header.encode(ring_id(), &mut bytes);
    assert_eq!(hex(&bytes), GOLDEN_ENTRY, "entry header changed");
    assert_eq!(EntryHeader::decode(ring_id(), &bytes), Ok(header));
}

#[test]
fn a_batch_is_records_then_padding_to_the_block() {
    let mut buf = vec![0xeeu8; 4096];
    let mut builder = BatchBuilder::new(
        &mut buf,
        BatchStart {
            ring_id: ring_id(),
            position: Position {
                lap: 2,
                segment: 5,
                offset: 8192,
            },
            first_lsn: 1234,
            watermark: 1200,
            incarnation: 3,
            block_size_bytes: 4096,
            capacity_bytes: 4096,
            payload_size_max_bytes: geometry().payload_size_max_bytes(),
        },
    );
    assert_eq!(builder.push(Kind::Data, b"hello"), Ok(1234));
    assert_eq!(builder.push(Kind::Data, b""), Ok(1235));
    let batch = builder.finish();
    assert_eq!(
        (batch.bytes, batch.records, batch.last_lsn()),
        (4096, 2, Some(1235))
    );
    // Record 1: header + "hello"; record 2 at 101: header only; padding at 197 to the end.
    assert_eq!(
        hex(&buf[..197 + ENTRY_HEADER_SIZE]),
        GOLDEN_BATCH_PREFIX,
        "batch changed"
    );
    assert!(
        buf[197 + ENTRY_HEADER_SIZE..].iter().all(|&byte| byte == 0),
        "padding is zeros"
    );
    let padding = EntryHeader::decode(ring_id(), &buf[197..]).expect("padding header");
    assert_eq!(padding.kind, Kind::Padding);
    assert_eq!((padding.lsn, padding.batch_index), (1236, 2));
    assert_eq!(padding.payload_len as usize, 4096 - 197 - ENTRY_HEADER_SIZE);
}

const GOLDEN_CONTROL: &str = concat!(
    "534c4743040000002b32b6a60300000007000000000000000011223344556677",
    "8899aabbccddeeff001000000800000000001000000000000000010004000000",
    "0000040000000000290000000000000028000000000000000200000005000000",
    "0020000002000000020000000600000000300000030000000201010a00200000",
    "200008009600000090010000640000002c010000020000000700000000500000",
    "03000000010000000000000000000000",
);
/// The same control block as version 3 wrote it (the same layout, with zero where the
/// purpose byte is: a plain log's; only the version, that byte and the CRC differ).
const GOLDEN_CONTROL_V3: &str = concat!(
    "534c4743030000009a31cdc60300000007000000000000000011223344556677",
    "8899aabbccddeeff001000000800000000001000000000000000010004000000",
    "0000040000000000290000000000000028000000000000000200000005000000",
    "0020000002000000020000000600000000300000030000000201010a00200000",
    "200008009600000090010000640000002c010000020000000700000000500000",
    "03000000000000000000000000000000",
);
/// The same control block as version 2 wrote it (version 3's layout: only the version and
/// the CRC differ; version 3 changed the entry header).
const GOLDEN_CONTROL_V2: &str = concat!(
    "534c47430200000057398b030300000007000000000000000011223344556677",
    "8899aabbccddeeff001000000800000000001000000000000000010004000000",
    "0000040000000000290000000000000028000000000000000200000005000000",
    "0020000002000000020000000600000000300000030000000201010a00200000",
    "200008009600000090010000640000002c010000020000000700000000500000",
    "03000000000000000000000000000000",
);
/// The same control block as version 1 wrote it (no tail hint; 160 bytes).
const GOLDEN_CONTROL_V1: &str = concat!(
    "534c4743010000000bc748150300000007000000000000000011223344556677",
    "8899aabbccddeeff001000000800000000001000000000000000010004000000",
    "0000040000000000290000000000000028000000000000000200000005000000",
    "0020000002000000020000000600000000300000030000000201010a00200000",
    "200008009600000090010000640000002c010000000000000000000000000000",
);
/// A control block as version 1 rings formatted before the sync choice was recorded carry it.
const GOLDEN_CONTROL_V1_BEFORE_SYNC: &str = concat!(
    "534c474301000000f9359ae60300000007000000000000000011223344556677",
    "8899aabbccddeeff001000000800000000001000000000000000010004000000",
    "0000040000000000290000000000000028000000000000000200000005000000",
    "0020000002000000020000000600000000300000030000000000000000000000",
);
const GOLDEN_SEGMENT: &str = concat!(
    "534c475304000000854d462b050000000200000003000000d204000000000000",
    "00112233445566778899aabbccddeeff00000000000000000000000000000000",
);
const GOLDEN_ENTRY: &str = concat!(
    "534c4745040001009aea2577050000004cbb719a03000000d204000000000000",
    "b004000000000000020000000500000000200000001000000000000082e9df48",
    "08070605040302012a000000000000000700000000000000ffffffffffffffff",
);
const GOLDEN_BATCH_PREFIX: &str = concat!(
    "534c4745040001005e018110050000004cbb719a03000000d204000000000000",
    "b004000000000000020000000500000000200000001000000000000082e9df48",
    "0000000000000000000000000000000000000000000000000000000000000000",
    "68656c6c6f534c474504000100e58228b3000000000000000003000000d30400",
    "0000000000b00400000000000002000000050000006520000000100000010000",
    "0082e9df48000000000000000000000000000000000000000000000000000000",
    "0000000000534c4745040002006f7c7fd8db0e0000560cedc003000000d40400",
    "0000000000b0040000000000000200000005000000c520000000100000020000",
    "0082e9df48000000000000000000000000000000000000000000000000000000",
    "0000000000",
);
