//! [`QuorumLogDrive`]: one address space replicated over N child LogDrives with a write
//! quorum Qw, a read quorum Qr = N - Qw + 1 and a window-scan quorum Qf = max(Qw, Qr)
//! (docs/composition.md, "Quorums"). It sees its children only through the [`LogDrive`]
//! trait and is one itself, so quorums and stripes nest either way.
//!
//! - `write` goes to every child at once and is acknowledged by Qw of them; a failure is
//!   indeterminate whenever a child took the write (`outcome`);
//! - `read` asks Qr children, hedging to the others, and repairs a value it finds to Qw
//!   children before returning it; a damaged slot never reads as unwritten (`read`);
//! - `weak_tail` asks Qf children for the same window and repairs ambiguous slots
//!   (`tail`); after this handle fenced, only children holding the fence answer
//!   (`control`);
//! - `seal` fills every reachable child below the stop before sealing it, and remembers the
//!   children owed the seal for [`QuorumLogDrive::rejoin`] (`seal`);
//! - [`QuorumLogDrive::scrub`] walks a child and repairs it from its peers (`scrub`).
//!
//! The other files: `options` (sizes, options, pace), `shared` (what the futures
//! share), `ask` (hedged asking), `write`, `figures` (scrub figures, metric names).
//!
//! The multi-step operations (a read's repair, a scan's repairs, a seal's fills, a rejoin,
//! a scrub) make their later steps while their future is awaited: only their first requests
//! are issued when called.

mod ask;
mod control;
mod figures;
mod options;
mod outcome;
mod read;
mod scrub;
mod seal;
mod shared;
mod tail;
mod write;

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;

pub use self::figures::{metrics, ScrubStats};
use self::options::Sizes;
pub use self::options::{QuorumOptions, ScrubPace};
use self::shared::Shared;
use crate::api::{ready, Length, LogDrive, LogDriveError, OpFuture, ReadOutcome, TailDesc};

/// A LogDrive replicated over children with quorums: see the module doc.
pub struct QuorumLogDrive {
    shared: Arc<Shared>,
}

impl QuorumLogDrive {
    /// Replicates over `children` with write quorum `write_quorum`. No children, or a write
    /// quorum outside 1..=N, is `OutOfRange` (naming the write quorum and the range allowed).
    pub fn new(
        children: Vec<Arc<dyn LogDrive>>,
        write_quorum: usize,
        options: QuorumOptions,
    ) -> Result<QuorumLogDrive, LogDriveError> {
        let sizes = Sizes::new(children.len(), write_quorum)?;
        Ok(QuorumLogDrive {
            shared: Arc::new(Shared::new(children, sizes, options)),
        })
    }

    /// N, the children.
    pub fn replicas(&self) -> usize {
        self.shared.sizes.replicas
    }

    /// Qw, the children a write needs.
    pub fn write_quorum(&self) -> usize {
        self.shared.sizes.write
    }

    /// Qr = N - Qw + 1, the children a read needs.
    pub fn read_quorum(&self) -> usize {
        self.shared.sizes.read
    }

    /// Qf = max(Qw, Qr), the children a window scan (and a length) needs.
    pub fn tail_quorum(&self) -> usize {
        self.shared.sizes.tail
    }

    /// The children owed the seal this handle made (unreachable when it sealed), in order.
    pub fn owed_seal(&self) -> Vec<usize> {
        self.shared
            .seal()
            .map(|made| made.owed.into_iter().collect())
            .unwrap_or_default()
    }

    /// Brings `child` back after the seal this handle made: fenced at this handle's fence,
    /// filled from its peers below the stop and sealed at it (which drops what it held past
    /// it), so that it is byte-identical to the others below the stop. Ok at once when this
    /// handle sealed nothing; `OutOfRange` for a child that does not exist.
    pub fn rejoin(&self, child: usize) -> OpFuture<()> {
        match self.check_child(child) {
            Ok(()) => seal::rejoin(&self.shared, child),
            Err(error) => ready(Err(error)),
        }
    }

    /// Scrubs `range` of `child` at `pace`: its damaged slots, and the slots it lacks that a
    /// peer holds, are written back from a peer's value; see [`ScrubStats`] for what is
    /// counted (and [`metrics`] for the counters). A read or write of the child that fails
    /// fails the scrub.
    pub fn scrub(&self, child: usize, range: Range<u64>, pace: ScrubPace) -> OpFuture<ScrubStats> {
        match self.check_child(child) {
            Ok(()) => scrub::scrub(&self.shared, child, range, pace),
            Err(error) => ready(Err(error)),
        }
    }

    fn check_child(&self, child: usize) -> Result<(), LogDriveError> {
        let replicas = self.replicas() as u64;
        if (child as u64) < replicas {
            return Ok(());
        }
        Err(LogDriveError::OutOfRange {
            address: child as u64,
            valid: 0..replicas,
        })
    }
}

impl LogDrive for QuorumLogDrive {
    fn write(&self, address: u64, epoch: u64, payload: Bytes) -> OpFuture<()> {
        write::write(&self.shared, address, epoch, payload)
    }

    fn read(&self, address: u64) -> OpFuture<ReadOutcome> {
        read::read(&self.shared, address)
    }

    fn weak_tail(&self, k: u64) -> OpFuture<TailDesc> {
        tail::weak_tail(&self.shared, k)
    }

    fn seal(&self, length: u64, epoch: u64) -> OpFuture<()> {
        seal::seal(&self.shared, length, epoch)
    }

    fn fence(&self, epoch: u64) -> OpFuture<()> {
        control::fence(&self.shared, epoch)
    }

    fn trim(&self, upto: u64) -> OpFuture<()> {
        control::trim(&self.shared, upto)
    }

    fn length(&self) -> OpFuture<Length> {
        control::length(&self.shared)
    }
}
