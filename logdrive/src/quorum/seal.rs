//! Sealing a quorum at a stop, and bringing a child that missed the seal to it: each child
//! is first made to hold every slot below the stop (what it lacks or holds damaged is copied
//! from a peer and written with the sealer's epoch), then sealed at the stop (which drops
//! what it held at or past it), so that the sealed children are byte-identical below the
//! stop. The seal succeeds once Qr children are sealed (no write quorum can then form at or
//! past the stop); the children that could not be reached are remembered as owed the seal,
//! and [`rejoin`] pays it when they are back.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::ask::{oks, Answer};
use super::outcome::failure;
use super::read::peer_value;
use super::shared::Shared;
use crate::api::{Length, LogDriveError, OpFuture, ReadOutcome};

/// Seals every child at `stop` under `epoch`, filling each first: see the module doc.
pub(crate) fn seal(shared: &Arc<Shared>, stop: u64, epoch: u64) -> OpFuture<()> {
    shared.note_epoch(epoch);
    let lengths: Vec<OpFuture<Length>> =
        shared.children.iter().map(|child| child.length()).collect();
    let shared = Arc::clone(shared);
    Box::pin(async move {
        let mut answers: Vec<Answer<()>> = Vec::with_capacity(lengths.len());
        for (child, length) in lengths.into_iter().enumerate() {
            let outcome = match length.await {
                Ok(length) => seal_child(&shared, child, length, stop, epoch).await,
                Err(error) => Err(error),
            };
            answers.push((child, outcome));
        }
        let owed: BTreeSet<usize> = answers
            .iter()
            .filter(|(_, outcome)| outcome.is_err())
            .map(|(child, _)| *child)
            .collect();
        shared.note_seal(stop, epoch, owed);
        if let Some(sealed) = answers.iter().find_map(|(_, outcome)| match outcome {
            Err(LogDriveError::Sealed { length }) if *length != stop => Some(*length),
            _ => None,
        }) {
            return Err(LogDriveError::Sealed { length: sealed });
        }
        if oks(&answers) >= shared.sizes.read {
            Ok(())
        } else {
            Err(failure(&answers))
        }
    })
}

/// Brings `child` to the seal this handle made: fenced at its fence (when it set one),
/// filled below the stop and sealed at it. Ok at once when this handle sealed nothing.
pub(crate) fn rejoin(shared: &Arc<Shared>, child: usize) -> OpFuture<()> {
    let shared = Arc::clone(shared);
    Box::pin(async move {
        let Some(made) = shared.seal() else {
            return Ok(());
        };
        let drive = Arc::clone(&shared.children[child]);
        if let Some(fence) = shared.fence() {
            drive.fence(fence.epoch).await?;
            shared.note_fence(fence.epoch, [child]);
        }
        let length = drive.length().await?;
        seal_child(&shared, child, length, made.stop, made.epoch).await?;
        shared.note_sealed(child);
        Ok(())
    })
}

/// Fills `child` (whose lengths are `length`) below `stop` and seals it there. A child
/// sealed at another length is `Sealed` naming it.
async fn seal_child(
    shared: &Arc<Shared>,
    child: usize,
    length: Length,
    stop: u64,
    epoch: u64,
) -> Result<(), LogDriveError> {
    if let Some(sealed) = length.sealed.filter(|sealed| *sealed != stop) {
        return Err(LogDriveError::Sealed { length: sealed });
    }
    fill(shared, child, length.t.max(length.first), stop, epoch).await?;
    shared.children[child].seal(stop, epoch).await
}

/// Writes to `child` every slot in [from, stop) it lacks or holds damaged, with a peer's
/// value.
async fn fill(
    shared: &Arc<Shared>,
    child: usize,
    from: u64,
    stop: u64,
    epoch: u64,
) -> Result<(), LogDriveError> {
    let drive = &shared.children[child];
    for address in from..stop {
        match drive.read(address).await? {
            ReadOutcome::Value(_) | ReadOutcome::Trimmed { .. } => continue,
            ReadOutcome::Unwritten | ReadOutcome::Damaged => {}
        }
        let value = peer_value(shared, child, address).await?;
        tracing::debug!(child, address, "a seal fills a slot the child lacks");
        drive.write(address, epoch, value).await?;
    }
    Ok(())
}
