//! [`StripedLogDrive`]: one address space striped over S child LogDrives, RAID-0 style, for
//! bandwidth (docs/composition.md). Global address `a` lives on child `a mod S` at local
//! address `a / S`; child `i`'s local address `j` is global `S * j + i`. Writes and reads go to
//! the one child an address maps to; `weak_tail`, `seal`, `fence`, `trim` and `length` go to
//! every child at once and combine what they answer. It sees its children only through the
//! [`LogDrive`] trait, so a child may be a local LogDrive, a quorum or a remote one.
//!
//! The tails combine by the exact rule, not by "the largest tail and the union of the holes":
//! the global N is one past the highest written global address, and the global holes are the
//! children's holes mapped back plus each child's *tail gaps*, the global addresses of that
//! child at or past its own N and below the global N, which no child reports. (Taking the
//! largest mapped tail instead reports a T whose predecessor is unwritten when the children's
//! tails differ.) The global T is then `min_i (S * T_i + i)`.

use std::collections::BTreeSet;
use std::sync::Arc;

use bytes::Bytes;

use crate::api::{ready, Length, LogDrive, LogDriveError, OpFuture, ReadOutcome, TailDesc};

/// A LogDrive striped over children: see the module doc.
pub struct StripedLogDrive {
    children: Vec<Arc<dyn LogDrive>>,
    striper: Striper,
}

/// The address arithmetic and the combining rules of a striping over S children, apart from
/// the children, so that the futures that outlive a call (they are `'static`) carry it.
#[derive(Clone, Copy, Debug)]
struct Striper {
    stripes: u64,
}

impl StripedLogDrive {
    /// Stripes over `children`, in order: child `i` holds the global addresses congruent to
    /// `i` modulo S. An empty list is refused as `OutOfRange` (0 children, at least 1).
    pub fn new(children: Vec<Arc<dyn LogDrive>>) -> Result<StripedLogDrive, LogDriveError> {
        if children.is_empty() {
            return Err(LogDriveError::OutOfRange {
                address: 0,
                valid: 1..u64::MAX,
            });
        }
        let striper = Striper {
            stripes: children.len() as u64,
        };
        Ok(StripedLogDrive { children, striper })
    }

    /// S, the number of stripes.
    pub fn stripes(&self) -> u64 {
        self.striper.stripes
    }

    /// Sends `control` to every child with its share of the global `length` (how many of
    /// its addresses lie below it), and combines the outcomes.
    fn each_share(
        &self,
        length: u64,
        control: impl Fn(&dyn LogDrive, u64) -> OpFuture<()>,
    ) -> OpFuture<()> {
        let futures = self
            .children
            .iter()
            .enumerate()
            .map(|(child, drive)| control(drive.as_ref(), self.striper.local_length(child, length)))
            .collect();
        self.every_child(futures)
    }

    /// Waits for a control every child was sent and combines the outcomes.
    fn every_child(&self, futures: Vec<OpFuture<()>>) -> OpFuture<()> {
        let striper = self.striper;
        Box::pin(async move { striper.control_outcome(all(futures).await) })
    }
}

impl Striper {
    /// The child and local address a global address maps to.
    fn locate(self, address: u64) -> (usize, u64) {
        ((address % self.stripes) as usize, address / self.stripes)
    }

    /// The global address of child `child`'s local address `local` (saturating: a local
    /// address near `u64::MAX` has no global one, and the largest is answered).
    fn global(self, child: usize, local: u64) -> u64 {
        local
            .saturating_mul(self.stripes)
            .saturating_add(child as u64)
    }

    /// How many of child `child`'s addresses lie below the global length `length`,
    /// `ceil((length - child) / S)`: the local length a seal or trim at `length` maps to.
    fn local_length(self, child: usize, length: u64) -> u64 {
        let child = child as u64;
        if length <= child {
            return 0;
        }
        (length - child).div_ceil(self.stripes)
    }

    /// One past the highest written global address, from each child's N.
    fn global_n(self, locals: impl Iterator<Item = u64>) -> u64 {
        locals
            .enumerate()
            .filter(|(_, n)| *n > 0)
            .map(|(child, n)| self.global(child, n - 1).saturating_add(1))
            .max()
            .unwrap_or(0)
    }

    /// The smallest global position `min_i (S * p_i + i)` of per-child local positions: a
    /// global T, trim point or sealed length from the children's.
    fn first_global(self, locals: impl Iterator<Item = u64>) -> u64 {
        locals
            .enumerate()
            .map(|(child, local)| self.global(child, local))
            .min()
            .unwrap_or(0)
    }

    /// A child's error with the local addresses it names mapped back to global ones.
    fn map_error(self, child: usize, error: LogDriveError) -> LogDriveError {
        match error {
            LogDriveError::Conflict { address } => LogDriveError::Conflict {
                address: self.global(child, address),
            },
            LogDriveError::Sealed { length } => LogDriveError::Sealed {
                length: self.global(child, length),
            },
            LogDriveError::OutOfRange { address, valid } => LogDriveError::OutOfRange {
                address: self.global(child, address),
                valid: self.global(child, valid.start)..self.global(child, valid.end),
            },
            LogDriveError::InvalidWindow { k, max } => LogDriveError::InvalidWindow {
                k: k.saturating_mul(self.stripes),
                max: max.saturating_mul(self.stripes),
            },
            LogDriveError::Damaged { addresses } => LogDriveError::Damaged {
                addresses: self.global(child, addresses.start)..self.global(child, addresses.end),
            },
            LogDriveError::Indeterminate { cause } => LogDriveError::Indeterminate {
                cause: Box::new(self.map_error(child, *cause)),
            },
            other => other,
        }
    }

    /// The combined outcome of a control sent to every child: Ok when all took it;
    /// otherwise the first child's error (mapped), definite only when no child took it,
    /// since a control some children applied has taken effect in part.
    fn control_outcome(self, outcomes: Outcomes<()>) -> Result<(), LogDriveError> {
        let took = outcomes.iter().filter(|outcome| outcome.is_ok()).count();
        let Some((child, error)) = outcomes
            .into_iter()
            .enumerate()
            .find_map(|(child, outcome)| outcome.err().map(|error| (child, error)))
        else {
            return Ok(());
        };
        let error = self.map_error(child, error);
        if took == 0 || !error.is_definite() {
            return Err(error);
        }
        Err(LogDriveError::Indeterminate {
            cause: Box::new(error),
        })
    }

    /// Every child's answer, or the first child's error mapped back.
    fn every_answer<T>(self, outcomes: Outcomes<T>) -> Result<Vec<T>, LogDriveError> {
        outcomes
            .into_iter()
            .enumerate()
            .map(|(child, outcome)| outcome.map_err(|error| self.map_error(child, error)))
            .collect()
    }

    /// The global window scan for `k` from the children's answers for `k / S` each: their
    /// holes mapped back, plus their tail gaps (see the module doc).
    fn combine_tails(self, k: u64, tails: &[TailDesc]) -> TailDesc {
        let n = self.global_n(tails.iter().map(|tail| tail.n));
        let window_start = n.saturating_sub(k);
        let mut combined = TailDesc {
            n,
            holes: BTreeSet::new(),
            holes_below_window: tails.iter().any(|tail| tail.holes_below_window),
        };
        let mut note_hole = |address: u64| {
            if address < window_start {
                combined.holes_below_window = true;
            } else if address < n {
                combined.holes.insert(address);
            }
        };
        for (child, tail) in tails.iter().enumerate() {
            for &local in &tail.holes {
                note_hole(self.global(child, local));
            }
            // This child's addresses at or past its own N and below the global N (the tail
            // gaps); those below the window are only noted, so that the cost stays O(k)
            // however far behind a child is.
            let window_first = self.local_length(child, window_start);
            if tail.n < window_first {
                note_hole(self.global(child, tail.n));
            }
            let mut local = tail.n.max(window_first);
            while self.global(child, local) < n {
                note_hole(self.global(child, local));
                local += 1;
            }
        }
        combined
    }

    /// The global lengths from every child's.
    fn combine_lengths(self, lengths: &[Length]) -> Length {
        let sealed = lengths
            .iter()
            .map(|length| length.sealed)
            .collect::<Option<Vec<u64>>>()
            .map(|sealed| self.first_global(sealed.into_iter()));
        Length {
            n: self.global_n(lengths.iter().map(|length| length.n)),
            t: self.first_global(lengths.iter().map(|length| length.t)),
            sealed,
            fence: lengths.iter().map(|length| length.fence).min().unwrap_or(0),
            first: self.first_global(lengths.iter().map(|length| length.first)),
        }
    }
}

/// The outcomes of one operation sent to every child, in child order.
type Outcomes<T> = Vec<Result<T, LogDriveError>>;

/// Waits for every child's future. All of them were issued when called, so waiting for them
/// in turn takes as long as the slowest.
async fn all<T>(futures: Vec<OpFuture<T>>) -> Outcomes<T> {
    let mut outcomes = Vec::with_capacity(futures.len());
    for future in futures {
        outcomes.push(future.await);
    }
    outcomes
}

impl LogDrive for StripedLogDrive {
    fn write(&self, address: u64, epoch: u64, payload: Bytes) -> OpFuture<()> {
        let (child, local) = self.striper.locate(address);
        let future = self.children[child].write(local, epoch, payload);
        let striper = self.striper;
        Box::pin(async move {
            future
                .await
                .map_err(|error| striper.map_error(child, error))
        })
    }

    fn read(&self, address: u64) -> OpFuture<ReadOutcome> {
        let (child, local) = self.striper.locate(address);
        let future = self.children[child].read(local);
        let striper = self.striper;
        Box::pin(async move {
            match future.await {
                // The first address of this stripe not trimmed, as a global address.
                Ok(ReadOutcome::Trimmed { first }) => Ok(ReadOutcome::Trimmed {
                    first: striper.global(child, first),
                }),
                Ok(outcome) => Ok(outcome),
                Err(error) => Err(striper.map_error(child, error)),
            }
        })
    }

    fn weak_tail(&self, k: u64) -> OpFuture<TailDesc> {
        let stripes = self.stripes();
        if k % stripes != 0 {
            // The window is split evenly among the children: a k that is not a multiple of S
            // cannot be. (The largest k is the children's own largest times S.)
            return ready(Err(LogDriveError::InvalidWindow {
                k,
                max: (u64::MAX / stripes) * stripes,
            }));
        }
        let futures: Vec<_> = self
            .children
            .iter()
            .map(|child| child.weak_tail(k / stripes))
            .collect();
        let striper = self.striper;
        Box::pin(async move {
            let tails = striper.every_answer(all(futures).await)?;
            Ok(striper.combine_tails(k, &tails))
        })
    }

    fn seal(&self, length: u64, epoch: u64) -> OpFuture<()> {
        self.each_share(length, |drive, share| drive.seal(share, epoch))
    }

    fn fence(&self, epoch: u64) -> OpFuture<()> {
        let futures = self
            .children
            .iter()
            .map(|child| child.fence(epoch))
            .collect();
        self.every_child(futures)
    }

    fn trim(&self, upto: u64) -> OpFuture<()> {
        self.each_share(upto, |drive, share| drive.trim(share))
    }

    fn length(&self) -> OpFuture<Length> {
        let futures: Vec<_> = self.children.iter().map(|child| child.length()).collect();
        let striper = self.striper;
        Box::pin(async move {
            let lengths = striper.every_answer(all(futures).await)?;
            Ok(striper.combine_lengths(&lengths))
        })
    }

    /// Each child keeps K / S of a global window K.
    fn write_window_max(&self) -> u64 {
        let least = self
            .children
            .iter()
            .map(|child| child.write_window_max())
            .min()
            .unwrap_or(0);
        least.saturating_mul(self.stripes())
    }
}
