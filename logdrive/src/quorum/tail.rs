//! The window scan through a quorum (Algorithm 3): Qf children are asked for the same k;
//! with N_max the highest N they answer and L = N_max - k, every slot in [L, N_max) is
//! unwritten when Qr of them say so (tested first), written when Qw of them hold it, and
//! otherwise ambiguous: its value is read from the children and written until Qw
//! children do, which makes it written (a scan can complete an interrupted write). N is one
//! past the highest written slot (L when none is; everything below L counts as written) and
//! the holes are the unwritten slots below it. A slot that cannot be repaired fails the
//! scan: it is never reported written or unwritten on a guess.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::ask::Ask;
use super::control::from_tail_quorum;
use super::shared::Shared;
use super::write::replicate;
use crate::api::{LogDriveError, OpFuture, ReadOutcome, TailDesc};

/// One child's view of a slot in the window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Seen {
    Written,
    Unwritten,
}

/// The window scan for `k`: see the module doc.
pub(crate) fn weak_tail(shared: &Arc<Shared>, k: u64) -> OpFuture<TailDesc> {
    let shared = Arc::clone(shared);
    Box::pin(async move {
        let tails = from_tail_quorum(&shared, move |child| child.weak_tail(k)).await?;
        let n_max = tails.iter().map(|(_, tail)| tail.n).max().unwrap_or(0);
        let window_start = n_max.saturating_sub(k);
        let mut written = BTreeSet::new();
        for address in window_start..n_max {
            let seen: BTreeMap<usize, Seen> = tails
                .iter()
                .map(|(child, tail)| (*child, seen(tail, address)))
                .collect();
            if classify(&shared, &seen, address).await? {
                written.insert(address);
            }
        }
        let n = written.last().map_or(window_start, |last| last + 1);
        let found = TailDesc {
            n,
            holes: (window_start..n)
                .filter(|address| !written.contains(address))
                .collect(),
            holes_below_window: false,
        };
        shared.note_durable(found.t());
        Ok(found)
    })
}

/// What a child's window scan says of `address` (at or above its own window's start).
fn seen(tail: &TailDesc, address: u64) -> Seen {
    if address >= tail.n || tail.holes.contains(&address) {
        Seen::Unwritten
    } else {
        Seen::Written
    }
}

/// Whether `address` is globally written (true) or unwritten, repairing it when the
/// answers are ambiguous.
async fn classify(
    shared: &Arc<Shared>,
    seen: &BTreeMap<usize, Seen>,
    address: u64,
) -> Result<bool, LogDriveError> {
    let count = |what: Seen| seen.values().filter(|view| **view == what).count();
    if count(Seen::Unwritten) >= shared.sizes.read {
        return Ok(false);
    }
    if count(Seen::Written) >= shared.sizes.write {
        return Ok(true);
    }
    repair(shared, address).await?;
    Ok(true)
}

/// Reads `address` on every child and writes a value found until Qw children hold it. A
/// slot with no intact value is written when Qw children hold it damaged (a damaged slot
/// counts as written); otherwise the scan fails with `Damaged`, or when Qw cannot be
/// reached.
async fn repair(shared: &Arc<Shared>, address: u64) -> Result<(), LogDriveError> {
    let all: Vec<usize> = (0..shared.sizes.replicas).collect();
    let first = all.len();
    let ask = Ask::start(shared, all, first, move |child| child.read(address));
    let answers = ask.gather(|_| true, |_| false).await;
    let (mut holders, mut damaged) = (BTreeSet::new(), BTreeSet::new());
    let mut value = None;
    for (child, outcome) in answers {
        match outcome {
            Ok(ReadOutcome::Value(bytes)) => {
                holders.insert(child);
                value.get_or_insert(bytes);
            }
            Ok(ReadOutcome::Damaged) => {
                damaged.insert(child);
            }
            _ => {}
        }
    }
    match value {
        Some(value) => {
            tracing::debug!(address, "a window scan repairs an ambiguous slot");
            replicate(shared, address, value, &holders, &damaged).await
        }
        None if damaged.len() >= shared.sizes.write => Ok(()),
        None => Err(LogDriveError::Damaged {
            addresses: address..address + 1,
        }),
    }
}
