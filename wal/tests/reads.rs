//! How replay reads its source: a sequential scan reads each byte of the log once (a batch that
//! straddles the end of a chunk is not read again from its start), and the reads of the
//! sequential path are ones hinted before (same offset and length), so a source that reads
//! ahead is never wasted on them.

mod common;

use std::io;

use common::*;
use sealog_wal::{replay, Geometry, ReplayOptions, RingSource};

/// A source over an image that records every read and hint.
struct Recording<'a> {
    image: &'a [u8],
    reads: Vec<(u64, usize)>,
    hints: Vec<(u64, usize)>,
    /// For each read: whether a hint named exactly it before.
    hinted: Vec<bool>,
}

impl RingSource for Recording<'_> {
    fn size_bytes(&self) -> u64 {
        self.image.len() as u64
    }

    fn read_at(&mut self, ring_offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let read = (ring_offset, buf.len());
        self.hinted.push(self.hints.contains(&read));
        self.reads.push(read);
        let mut image = self.image;
        image.read_at(ring_offset, buf)
    }

    fn read_ahead(&mut self, ring_offset: u64, len: usize) {
        self.hints.push((ring_offset, len));
    }
}

#[test]
fn a_sequential_scan_reads_each_byte_once_and_hints_its_reads() {
    // Segments of 64 blocks, batches of 3 blocks read through 4-block chunks: most batches
    // straddle a chunk's end.
    let geometry = Geometry {
        block_size_bytes: BLOCK as u32,
        segment_size_bytes: 64 * BLOCK as u64,
        segment_count: 4,
        batch_size_max_bytes: 4 * BLOCK as u32,
        window_batches_max: 2,
        window_bytes_max: 8 * BLOCK as u64,
    };
    let mut writer = new_writer(geometry);
    let mut appended = 0u64;
    while writer
        .append(&[&payload(writer.next_lsn(), 7, 3 * BLOCK - 200)])
        .is_ok()
    {
        writer.flush();
        appended += 1;
        if appended == 60 {
            break;
        }
    }
    let image = writer.durable().to_vec();
    let options = ReplayOptions {
        read_chunk_bytes: 4 * BLOCK as u32,
        ..ReplayOptions::default()
    };
    let mut source = Recording {
        image: &image,
        reads: Vec::new(),
        hints: Vec::new(),
        hinted: Vec::new(),
    };
    let mut recovered = 0u64;
    let report = replay(&mut source, &options, &mut |_| recovered += 1).expect("replays");
    assert_eq!(recovered, appended);
    assert_eq!(report.entries, appended);

    // Blocks of the segments read more than once: before the change, most batches were read
    // twice (once in the chunk they straddle, again from their start); only the blocks where
    // the log ends may be looked at again (the probe beyond the end).
    let control_bytes = geometry.segment_ring_offset(0);
    let mut times_read = vec![0u32; image.len() / BLOCK];
    for &(offset, len) in source
        .reads
        .iter()
        .filter(|(offset, _)| *offset >= control_bytes)
    {
        let first = offset as usize / BLOCK;
        for count in &mut times_read[first..first + len / BLOCK] {
            *count += 1;
        }
    }
    let reread = times_read.iter().filter(|&&count| count > 1).count();
    let log_blocks: usize = writer
        .written()
        .iter()
        .map(|b| b.bytes as usize / BLOCK)
        .sum();
    assert!(
        log_blocks >= 150,
        "the log spans many chunks ({log_blocks} blocks)"
    );
    assert!(
        reread <= 4,
        "{reread} blocks read more than once: {:?}",
        source.reads
    );

    // Apart from each segment's header block and first chunk (and a probe past the end of the
    // log), the scan's reads are the ones it hinted.
    assert!(
        !source.hints.is_empty(),
        "a multi-chunk scan hints what comes next"
    );
    let control_reads = source
        .reads
        .iter()
        .filter(|(offset, _)| *offset < control_bytes)
        .count();
    let unhinted = source.hinted.iter().filter(|hinted| !**hinted).count() - control_reads;
    assert!(
        unhinted <= 2 * geometry.segment_count as usize + 4,
        "{unhinted} reads were not hinted: {:?}",
        source
            .reads
            .iter()
            .zip(&source.hinted)
            .filter(|(_, hinted)| !**hinted)
            .collect::<Vec<_>>()
    );
}
