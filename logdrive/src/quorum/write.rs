//! Writes through a quorum (Algorithm 2's write) and the replication a repair makes: the
//! value goes to every child at once, and the outcome is decided as soon as Qw children
//! hold it, or as soon as Qw can no longer be reached.

use std::collections::BTreeSet;
use std::sync::Arc;

use bytes::Bytes;

use super::ask::{errors, oks, Ask};
use super::outcome::failure;
use super::shared::Shared;
use crate::api::{LogDriveError, OpFuture};

/// Writes `payload` at `address` on every child at once; Ok after Qw acknowledgements.
pub(crate) fn write(
    shared: &Arc<Shared>,
    address: u64,
    epoch: u64,
    payload: Bytes,
) -> OpFuture<()> {
    shared.note_epoch(epoch);
    let all: Vec<usize> = (0..shared.sizes.replicas).collect();
    let need = shared.sizes.write;
    let ask = send(shared, all, address, epoch, payload);
    Box::pin(ask_for(ask, need))
}

/// Makes at least Qw children hold `value` at `address`, `holders` holding it already.
/// While fewer than Qw do, it is written, with the repair epoch, to every other child at
/// once (so that damaged and lagging children are repaired too), and Ok once enough of them
/// acknowledged. When Qw hold it already (or the slot is known durable: below a T this
/// handle's window scan found), it is only sent to the children in `damaged` (issued, not
/// awaited: the caller's outcome does not depend on them).
pub(crate) async fn replicate(
    shared: &Arc<Shared>,
    address: u64,
    value: Bytes,
    holders: &BTreeSet<usize>,
    damaged: &BTreeSet<usize>,
) -> Result<(), LogDriveError> {
    let need = if shared.durable(address) {
        0
    } else {
        shared.sizes.write.saturating_sub(holders.len())
    };
    let targets: Vec<usize> = (0..shared.sizes.replicas)
        .filter(|child| !holders.contains(child) && (need > 0 || damaged.contains(child)))
        .collect();
    if targets.is_empty() {
        return Ok(());
    }
    ::metrics::counter!(super::figures::metrics::READ_REPAIRS_TOTAL).increment(1);
    let ask = send(shared, targets, address, shared.repair_epoch(), value);
    ask_for(ask, need).await
}

/// Sends the write to `children` at once.
fn send(
    shared: &Arc<Shared>,
    children: Vec<usize>,
    address: u64,
    epoch: u64,
    payload: Bytes,
) -> Ask<()> {
    let first = children.len();
    Ask::start(shared, children, first, move |child| {
        child.write(address, epoch, payload.clone())
    })
}

/// Ok once `need` of the children asked acknowledged; the quorum's failure once that can
/// no longer happen.
async fn ask_for(ask: Ask<()>, need: usize) -> Result<(), LogDriveError> {
    if need == 0 {
        return Ok(());
    }
    let asked = ask.asked();
    let answers = ask
        .gather(
            |_| true,
            |answers| oks(answers) >= need || errors(answers) + need > asked,
        )
        .await;
    if oks(&answers) >= need {
        Ok(())
    } else {
        Err(failure(&answers))
    }
}
