//! The on-disk format of a sealog ring: the one place where its bytes are drawn, encoded and
//! decoded. Everything else in the workspace goes through the types here; nothing else knows
//! an offset. Integers are little-endian with explicit widths (never `usize`), every offset is a
//! constant derived from the one before it, and the sizes are pinned by compile-time asserts. A
//! golden-bytes test (`tests/golden.rs`) pins the encoding, and `docs/format.md` carries the hash
//! of this file so the two cannot drift apart.
//!
//! # The ring's address space
//!
//! A ring is one linear space of bytes (a raw block device, or the engine's concatenation of
//! segment files). `B` is the ring's block size, `S` the segment size:
//!
//! ```text
//!  ring offset 0        B               2B               2B+S             2B+N*S
//!  +---------------+---------------+----------------+----------------+---+
//!  | control copy 0| control copy 1|   segment 0    |   segment 1    |...|
//!  +---------------+---------------+----------------+----------------+---+
//!
//!  one segment (S bytes, a multiple of B):
//!  +----------------+------------------------------------------------------+
//!  | segment header | batch | batch | ... | batch |   (unwritten / older lap) |
//!  |   (block 0)    |  starts at a block boundary, ends at one             |
//!  +----------------+------------------------------------------------------+
//! ```
//!
//! A batch is written with one O_DIRECT write; the first batch a writer puts into a segment on a
//! lap is written together with the segment header in front of it. Writes are whole blocks, so no
//! write ever shares a block (and so a physical sector) with an earlier batch: the tail block is
//! never rewritten in place.
//!
//! # Control block (two copies, each in its own block; 176 bytes used, the rest zero)
//!
//! ```text
//!  0       4       8       12      16              24
//!  +-------+---+---+-------+-------+---------------+
//!  | magic |ver|rsv|  crc  | incar.|   sequence    |
//!  +-------+---+---+-------+-------+---------------+
//!  24                              40      44      48              56      60      64
//!  +-------------------------------+-------+-------+---------------+-------+-------+
//!  |           ring id             | block | seg.  | segment size  | batch | window|
//!  |          (16 bytes)           | size  | count |    (bytes)    |  max  |batches|
//!  +-------------------------------+-------+-------+---------------+-------+-------+
//!  64              72              80              88      92      96      100     104
//!  +---------------+---------------+---------------+-------+-------+-------+-------+
//!  | window bytes  |   trim LSN    |   head LSN    | head  | head  | head  | head  |
//!  |     max       |               |               | lap   | seg.  | offset| incar.|
//!  +---------------+---------------+---------------+-------+-------+-------+-------+
//!  104     108     112     116     120 121 122 123 124     128     130     132
//!  +-------+-------+-------+-------+---+---+---+---+-------+-------+-------+
//!  |  cut  |  cut  |  cut  |  cut  |syn|syn|syn|mar| probe |probe  |writes |
//!  |  lap  | seg.  | offset| incar.|mth|src|flg|gin| bytes |rounds |/round |
//!  +-------+-------+-------+-------+---+---+---+---+-------+-------+-------+
//!  132     136     140     144     148     152     156     160     164 165         176
//!  +-------+-------+-------+-------+-------+-------+-------+-------+---+-----------+
//!  |fdsync |fdsync | dsync | dsync | hint  | hint  | hint  | hint  |pur| reserved  |
//!  |p50 us |p99 us |p50 us |p99 us |  lap  | seg.  | offset| incar.|pos|           |
//!  +-------+-------+-------+-------+-------+-------+-------+-------+---+-----------+
//! ```
//!
//! `crc` is CRC32C over the 176 bytes with the crc field zeroed. The copy with the highest
//! `sequence` whose CRC checks out is current; copy `sequence % 2` is the one rewritten next, so a
//! torn control write leaves the other copy intact. `trim LSN` is inclusive: entries with
//! `lsn <= trim LSN` are released. `head` is the batch boundary where replay starts; `head LSN` is
//! the LSN of the first record of the batch there (`head LSN <= trim LSN + 1`), and
//! `head incar.` the incarnation that wrote it (or, when nothing is live, the incarnation of the
//! writer that wrote the block): replay accepts nothing older after the head, so a record of an
//! older incarnation can never line up at the head after a trim. `cut` is where the last
//! recovery ended the log and `cut incar.` the incarnation it opened: nothing of an older
//! incarnation is accepted at or after the cut. A writable open writes this block before it
//! zeroes anything past the cut, so a crash in the middle of recovery finds the same log.
//!
//! `sync` (bytes 120 to 148) records how format chose the ring's default durability: `syn mth`
//! the method (1 write + linked fdatasync, 2 write with RWF_DSYNC; 0 none recorded), `syn src`
//! how it was chosen (1 measured, 2 named by the operator; 0 none recorded), `syn flg` bit 0 set
//! when the device reported FUA, `margin` the percentage by which RWF_DSYNC had to beat the
//! fdatasync at both p50 and p99 to be chosen, and the measurement behind a measured choice:
//! the size of each timed write, the rounds and writes per method per round, and each method's
//! p50 and p99 in microseconds (all zero unless measured). Every rewrite of the control block
//! carries these bytes over unchanged.
//!
//! `hint` (bytes 148 to 164) is the tail hint: how far the log can reach. No batch of the
//! incarnation `hint incar.` ends past the position `hint lap`/`hint seg.`/`hint offset`; the
//! writer makes a control block with a further limit durable before it writes past the one
//! in force, and within one incarnation the limit never moves back. Replay trusts the hint
//! only when `hint incar.` is the block's own `incar.` (a new incarnation's open writes its
//! first hint in the same block as the incarnation, so there is never a durable incarnation
//! without its hint), the limit is a position of this ring at or after the head, and the
//! other copy, if it is of the same incarnation, does not record a further limit. It then
//! scans the live entries and probes past their end only to the later of the limit and an
//! in-flight window (`replay/mod.rs`, "the pass"). A freshly formatted ring records the head with
//! incarnation 0: nothing is written before the first writable open.
//!
//! `purpose` (byte 164, added in version 4) says what the ring holds ([`RingPurpose`]): 0 a
//! plain log, 1 a LogDrive store's records. A tool that appends or trims raw entries reads it
//! first, because a store's reclaimer owns the head of such a ring and its records are
//! otherwise ordinary entries. Any other value is refused ([`ControlDefect::Purpose`]). Every
//! rewrite of the control block carries the byte over unchanged, as it does the sync choice,
//! but for a writable open asked to record a purpose, which sets it in the block it writes
//! for its new incarnation anyway.
//!
//! Version 1 blocks (160 bytes used, no hint; or, written before the sync choice existed, a
//! CRC over the first 128 bytes and zeros after) are recognised as intact blocks of version
//! 1 by their CRC, so a version 1 ring is refused with an error naming both versions rather
//! than reported as damaged. Version 2 and 3 blocks have this layout with the purpose byte
//! zero, and a CRC over the same 176 bytes, so their version field names them.
//!
//! # Segment header (block 0 of every segment; 64 bytes used, the rest zero)
//!
//! ```text
//!  0       4       8       12      16      20      24              32
//!  +-------+---+---+-------+-------+-------+-------+---------------+
//!  | magic |ver|rsv|  crc  |segment|  lap  | incar.|   first LSN   |
//!  +-------+---+---+-------+-------+-------+-------+---------------+
//!  32                              48                              64
//!  +-------------------------------+-------------------------------+
//!  |           ring id             |           reserved            |
//!  +-------------------------------+-------------------------------+
//! ```
//!
//! `crc` is CRC32C seeded with the ring id, over the 64 bytes with the crc field zeroed.
//! `first LSN` is the LSN of the first record of the first batch in this segment on this lap.
//!
//! # Entry header (96 bytes, in front of every record's payload)
//!
//! ```text
//!  0       4   6   7   8       12      16      20      24              32
//!  +-------+---+---+---+-------+-------+-------+-------+---------------+
//!  | magic |ver|knd|flg|hdr crc|pay len|pay crc| incar.|      LSN      |
//!  +-------+---+---+---+-------+-------+-------+-------+---------------+
//!  32              40      44      48      52      56      60      64
//!  +---------------+-------+-------+-------+-------+-------+-------+
//!  |   watermark   |  lap  |segment|offset | batch | batch | ring  |
//!  | (durable LSN) |       |       |       | bytes | index |  tag  |
//!  +---------------+-------+-------+-------+-------+-------+-------+
//!  64              72              80              88              96
//!  +---------------+---------------+---------------+---------------+
//!  |    log id     |    address    |     epoch     |     extra     |
//!  +---------------+---------------+---------------+---------------+
//!  \____________________ embedder header (32 bytes) ________________/
//! ```
//!
//! - `hdr crc`: CRC32C seeded with the 16-byte ring id, over the 96 header bytes with this field
//!   zeroed. It covers every field, the payload's length and CRC among them, and through the seed
//!   the full ring identity: an entry of another ring never passes.
//! - `pay crc`: CRC32C of the payload. `pay len` is at most the ring's payload limit.
//! - `LSN`: contiguous from 1. A padding record consumes none: it carries the LSN the next record
//!   will take.
//! - `watermark`: the highest LSN acknowledged when the batch was built. Always below the batch's
//!   first LSN. Everything at or below it was durable before this batch existed.
//! - `lap`, `segment`, `offset`: where this header was written (offset within the segment), so a
//!   misdirected write or a record left from an earlier lap is caught.
//! - `batch bytes`: the length of the batch this record belongs to (a multiple of the block
//!   size); `batch index`: this record's index within the batch (0 for the first), so the batch's
//!   first LSN is `LSN - batch index`.
//! - `ring tag`: CRC32C of the ring id, so a record of another ring is named as such rather than
//!   as a checksum failure.
//! - `embedder header` (added in version 3): the layer above's own 32 bytes for the entry
//!   ([`EmbedderHeader`]), zeros when it gives none. In the header, so under the header CRC
//!   rather than the payload's: a damaged payload still names the embedder's record.
//!
//! Records follow each other without gaps inside a batch. The bytes after the last record up to
//! the batch's end are a padding record when at least [`ENTRY_HEADER_SIZE`] bytes remain (its
//! payload is zeros), else zeros.
//!
//! The code: `constants` (version, magics, limits, field offsets), `ids` (ring identity,
//! kinds, positions), `geometry`, `control` (the control block, its tail hint and purpose),
//! `sync` (the recorded sync choice), `segment` and `entry` (the headers).

mod constants;
pub(crate) mod control;
pub(crate) mod entry;
pub(crate) mod geometry;
pub(crate) mod ids;
pub(crate) mod segment;
pub(crate) mod sync;

pub use constants::*;
pub use control::*;
pub use entry::*;
pub use geometry::*;
pub use ids::*;
pub use segment::*;
pub use sync::*;
