//! The controls through a quorum: `fence` (Qr children, so that no write quorum of an older
//! epoch can still form), `trim` (Qw children), `length` (Qf children), and which children
//! a window scan or a length may take answers from once this handle fenced: only those known
//! to hold its fence, the others fenced again first (an unfenced child's "unwritten" can be
//! overtaken by an old writer's late write).

use std::sync::Arc;

use super::ask::{errors, oks, Answer, Ask};
use super::outcome::{failure, first_error};
use super::shared::Shared;
use crate::api::{Length, LogDriveError, OpFuture};

/// Fences every child at `epoch`; Ok once Qr took it. The children that took it are noted.
pub(crate) fn fence(shared: &Arc<Shared>, epoch: u64) -> OpFuture<()> {
    shared.note_epoch(epoch);
    let all: Vec<usize> = (0..shared.sizes.replicas).collect();
    let ask = Ask::start(shared, all, shared.sizes.replicas, move |child| {
        child.fence(epoch)
    });
    let shared = Arc::clone(shared);
    Box::pin(async move {
        let (need, replicas) = (shared.sizes.read, shared.sizes.replicas);
        let answers = ask
            .gather(
                |_| true,
                |answers| oks(answers) >= need || errors(answers) + need > replicas,
            )
            .await;
        if oks(&answers) < need {
            return Err(failure(&answers));
        }
        shared.note_fence(epoch, took(&answers));
        Ok(())
    })
}

/// The children whose answer was Ok.
fn took<T>(answers: &[Answer<T>]) -> Vec<usize> {
    answers
        .iter()
        .filter(|(_, outcome)| outcome.is_ok())
        .map(|(child, _)| *child)
        .collect()
}

/// Trims every child below `upto`; Ok once Qw took it. (A write quorum trimmed is what a
/// read quorum is sure to meet; a lagging child that refuses the trim point keeps its slots
/// until it is trimmed again.)
pub(crate) fn trim(shared: &Arc<Shared>, upto: u64) -> OpFuture<()> {
    let all: Vec<usize> = (0..shared.sizes.replicas).collect();
    let (need, replicas) = (shared.sizes.write, shared.sizes.replicas);
    let ask = Ask::start(shared, all, replicas, move |child| child.trim(upto));
    Box::pin(async move {
        let answers = ask
            .gather(
                |_| true,
                |answers| oks(answers) >= need || errors(answers) + need > replicas,
            )
            .await;
        if oks(&answers) >= need {
            Ok(())
        } else {
            Err(failure(&answers))
        }
    })
}

/// The children a window scan or a length may take answers from, in the preferred order:
/// every child before this handle fenced; after, those known to hold the fence, the others
/// fenced again first (with the fence's epoch) while fewer than Qf hold it.
pub(crate) async fn responders(shared: &Arc<Shared>) -> Vec<usize> {
    let order = shared.order();
    let Some(fence) = shared.fence() else {
        return order;
    };
    let missing = shared.sizes.tail.saturating_sub(fence.acked.len());
    if missing > 0 {
        let rest: Vec<usize> = order
            .iter()
            .copied()
            .filter(|child| !fence.acked.contains(child))
            .collect();
        let first = rest.len();
        let epoch = fence.epoch;
        let ask = Ask::start(shared, rest, first, move |child| child.fence(epoch));
        let answers = ask
            .gather(|_| true, |answers| oks(answers) >= missing)
            .await;
        shared.note_fence(epoch, took(&answers));
    }
    let acked = shared.fence().map(|fence| fence.acked).unwrap_or_default();
    order
        .into_iter()
        .filter(|child| acked.contains(child))
        .collect()
}

/// Qf answers of `issue` from the responders (hedged), or the error when fewer answer.
pub(crate) async fn from_tail_quorum<T: Send + 'static>(
    shared: &Arc<Shared>,
    issue: impl Fn(&dyn crate::api::LogDrive) -> OpFuture<T> + Send + Sync + 'static,
) -> Result<Vec<(usize, T)>, LogDriveError> {
    let candidates = responders(shared).await;
    let need = shared.sizes.tail;
    let ask = Ask::start(shared, candidates, need, issue);
    let answers = ask
        .gather(|outcome| outcome.is_ok(), |answers| oks(answers) >= need)
        .await;
    if oks(&answers) < need {
        return Err(first_error(&answers).unwrap_or(LogDriveError::Io {
            reason: format!("fewer than {need} children (fenced, once fenced) answered"),
        }));
    }
    Ok(answers
        .into_iter()
        .filter_map(|(child, outcome)| outcome.ok().map(|answer| (child, answer)))
        .collect())
}

/// The quorum's lengths from Qf children's (see docs/composition.md): N the highest N; T
/// the Qw-th highest T (every slot below it is on Qw children); the sealed length any
/// answering child holds (the highest); the highest fence and trim point.
pub(crate) fn length(shared: &Arc<Shared>) -> OpFuture<Length> {
    let shared = Arc::clone(shared);
    Box::pin(async move {
        let lengths = from_tail_quorum(&shared, |child| child.length()).await?;
        let mut ts: Vec<u64> = lengths.iter().map(|(_, length)| length.t).collect();
        ts.sort_unstable_by(|a, b| b.cmp(a));
        let lengths = lengths.iter().map(|(_, length)| length);
        Ok(Length {
            n: lengths.clone().map(|length| length.n).max().unwrap_or(0),
            t: ts.get(shared.sizes.write - 1).copied().unwrap_or(0),
            sealed: lengths.clone().filter_map(|length| length.sealed).max(),
            fence: lengths
                .clone()
                .map(|length| length.fence)
                .max()
                .unwrap_or(0),
            first: lengths.map(|length| length.first).max().unwrap_or(0),
        })
    })
}
