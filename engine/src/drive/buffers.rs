//! Which pool buffer serves what: the drive's buffer pool is cut into lanes, one buffer per
//! batch the ring's window allows in flight, one for control block writes (trims), and a few
//! for reads. Appends and reads never take each other's buffers, so a crowd of readers cannot
//! starve the writer of batch buffers, nor a deep pipeline of appends starve readers; within a
//! lane, requests that find no free buffer wait in their queue in arrival order.
//!
//! Layout of buffer indices: `[0, window)` batches, `window` the control buffer,
//! `(window, window + READ_BUFFERS]` reads. Recovery, which runs before any lane is in use,
//! borrows buffer 0 and the next few for its reads ahead. The order is also what the io_uring
//! backend registers first where the locked-memory limit holds only part of the pool (it
//! registers a prefix): every batch is written from a buffer, and a batch is where a fixed
//! buffer saves the most (a megabyte of pages not pinned per write); trims come next, reads
//! last.

use sealog_wal::Geometry;

/// Reads the drive keeps in flight at most on its own ring (each in a buffer of its own): async
/// reads and a simulated drive's, as deep as the benchmark's random-read ceiling.
pub const READ_BUFFERS: usize = 16;

/// Bytes of each pool buffer: a segment header block plus the largest batch.
pub fn buffer_bytes(geometry: &Geometry) -> usize {
    geometry.block_size_bytes as usize + geometry.batch_size_max_bytes as usize
}

/// Buffers per drive: one per batch in flight, one for control writes, and the read lane.
pub fn buffer_count(geometry: &Geometry) -> usize {
    geometry.window_batches_max as usize + 1 + READ_BUFFERS
}

/// Buffers worth registering with io_uring: the batch and control lanes, whose writes every
/// append waits for. The read lane's buffers stay unregistered: a read's cost is the device's,
/// a fixed buffer saves it little, and pinning the read lane (16 buffers of a batch each, 16 MiB
/// with the defaults) would add milliseconds to every open and take most of a non-root
/// process's memlock budget.
pub fn registered_buffer_count(geometry: &Geometry) -> usize {
    geometry.window_batches_max as usize + 1
}

/// The free buffers of each lane.
pub(crate) struct Lanes {
    batch: Vec<usize>,
    control: Vec<usize>,
    read: Vec<usize>,
}

/// A lane of buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lane {
    Batch,
    Control,
    Read,
}

impl Lanes {
    /// Every buffer free, laid out for `geometry`.
    pub(crate) fn new(geometry: &Geometry) -> Lanes {
        let window = geometry.window_batches_max as usize;
        Lanes {
            batch: (0..window).rev().collect(),
            control: vec![window],
            read: (window + 1..window + 1 + READ_BUFFERS).rev().collect(),
        }
    }

    fn lane(&mut self, lane: Lane) -> &mut Vec<usize> {
        match lane {
            Lane::Batch => &mut self.batch,
            Lane::Control => &mut self.control,
            Lane::Read => &mut self.read,
        }
    }

    /// Takes a free buffer of `lane`, if any.
    pub(crate) fn acquire(&mut self, lane: Lane) -> Option<usize> {
        self.lane(lane).pop()
    }

    /// Returns a buffer taken from `lane`.
    pub(crate) fn release(&mut self, lane: Lane, buffer: usize) {
        let free = self.lane(lane);
        debug_assert!(!free.contains(&buffer), "buffer {buffer} released twice");
        free.push(buffer);
    }

    /// Whether `lane` has a free buffer.
    pub(crate) fn has_free(&self, lane: Lane) -> bool {
        match lane {
            Lane::Batch => !self.batch.is_empty(),
            Lane::Control => !self.control.is_empty(),
            Lane::Read => !self.read.is_empty(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lanes_are_numbered_in_the_order_registration_prefers() {
        let geometry = Geometry {
            block_size_bytes: 4096,
            segment_size_bytes: 16 << 20,
            segment_count: 4,
            batch_size_max_bytes: 1 << 20,
            window_batches_max: 4,
            window_bytes_max: 4 << 20,
        };
        let mut lanes = Lanes::new(&geometry);
        let mut taken = |lane| {
            let mut buffers = Vec::new();
            while let Some(buffer) = lanes.acquire(lane) {
                buffers.push(buffer);
            }
            buffers.sort_unstable();
            buffers
        };
        let batches = taken(Lane::Batch);
        let control = taken(Lane::Control);
        let reads = taken(Lane::Read);
        assert_eq!(batches, [0, 1, 2, 3]);
        assert_eq!(control, [4]);
        assert_eq!(reads, (5..5 + READ_BUFFERS).collect::<Vec<_>>());
        assert_eq!(buffer_count(&geometry), 5 + READ_BUFFERS);
    }
}
