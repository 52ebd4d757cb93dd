//! Reads through a quorum (Algorithm 2's read, with damaged slots as docs/composition.md
//! says): Qr children are asked, a child whose slot is `Damaged` or that fails does not
//! count as answering (one more is asked), and a value any of them holds is repaired to Qw
//! children before it is returned. `Unwritten` needs Qr children saying so; when fewer can
//! answer and some slot was damaged, the read answers `Damaged`, never `Unwritten`.

use std::collections::BTreeSet;
use std::sync::Arc;

use bytes::Bytes;

use super::ask::{Answer, Ask};
use super::outcome::first_error;
use super::shared::Shared;
use super::write::replicate;
use crate::api::{LogDriveError, OpFuture, ReadOutcome};

/// Reads `address` through the quorum: see the module doc.
pub(crate) fn read(shared: &Arc<Shared>, address: u64) -> OpFuture<ReadOutcome> {
    let quorum = shared.sizes.read;
    let ask = Ask::start(shared, shared.order(), quorum, move |child| {
        child.read(address)
    });
    let shared = Arc::clone(shared);
    Box::pin(async move {
        let answers = ask
            .gather(answers_for_the_slot, |answers| {
                answered(answers) >= quorum || trimmed(answers).is_some()
            })
            .await;
        decide(&shared, address, &answers).await
    })
}

/// Whether a child's answer counts as answering for the slot.
fn answers_for_the_slot(outcome: &Result<ReadOutcome, LogDriveError>) -> bool {
    matches!(
        outcome,
        Ok(ReadOutcome::Value(_) | ReadOutcome::Unwritten | ReadOutcome::Trimmed { .. })
    )
}

/// How many children answered for the slot.
fn answered(answers: &[Answer<ReadOutcome>]) -> usize {
    answers
        .iter()
        .filter(|(_, outcome)| answers_for_the_slot(outcome))
        .count()
}

/// The highest trim point any child answered with.
fn trimmed(answers: &[Answer<ReadOutcome>]) -> Option<u64> {
    answers
        .iter()
        .filter_map(|(_, outcome)| match outcome {
            Ok(ReadOutcome::Trimmed { first }) => Some(*first),
            _ => None,
        })
        .max()
}

/// The read's outcome from the children's answers, repairing a value found.
async fn decide(
    shared: &Arc<Shared>,
    address: u64,
    answers: &[Answer<ReadOutcome>],
) -> Result<ReadOutcome, LogDriveError> {
    if let Some(first) = trimmed(answers) {
        return Ok(ReadOutcome::Trimmed { first });
    }
    let (mut holders, mut damaged) = (BTreeSet::new(), BTreeSet::new());
    let mut value = None;
    for (child, outcome) in answers {
        match outcome {
            Ok(ReadOutcome::Value(bytes)) => {
                holders.insert(*child);
                value.get_or_insert_with(|| bytes.clone());
            }
            Ok(ReadOutcome::Damaged) => {
                damaged.insert(*child);
            }
            _ => {}
        }
    }
    if let Some(value) = value {
        replicate(shared, address, value.clone(), &holders, &damaged).await?;
        return Ok(ReadOutcome::Value(value));
    }
    if answered(answers) >= shared.sizes.read {
        return Ok(ReadOutcome::Unwritten);
    }
    if answers
        .iter()
        .any(|(_, outcome)| matches!(outcome, Ok(ReadOutcome::Damaged)))
    {
        return Ok(ReadOutcome::Damaged);
    }
    Err(first_error(answers).unwrap_or(LogDriveError::Io {
        reason: format!("fewer than {} children answered a read", shared.sizes.read),
    }))
}

/// The value some child other than `except` holds at `address`, asking them all at once:
/// what a fill or a scrub copies. `Damaged` (naming the address) when the children that
/// answered hold none and one of them had it damaged; otherwise the first child's error, or
/// `Io` when no child holds it at all.
pub(crate) async fn peer_value(
    shared: &Arc<Shared>,
    except: usize,
    address: u64,
) -> Result<Bytes, LogDriveError> {
    let peers: Vec<usize> = (0..shared.sizes.replicas)
        .filter(|child| *child != except)
        .collect();
    let first = peers.len();
    let ask = Ask::start(shared, peers, first, move |child| child.read(address));
    let answers = ask
        .gather(
            |_| true,
            |answers| {
                answers
                    .iter()
                    .any(|(_, outcome)| matches!(outcome, Ok(ReadOutcome::Value(_))))
            },
        )
        .await;
    let mut damaged = false;
    for (_, outcome) in &answers {
        match outcome {
            Ok(ReadOutcome::Value(bytes)) => return Ok(bytes.clone()),
            Ok(ReadOutcome::Damaged) => damaged = true,
            _ => {}
        }
    }
    if damaged {
        return Err(LogDriveError::Damaged {
            addresses: address..address + 1,
        });
    }
    Err(first_error(&answers).unwrap_or(LogDriveError::Io {
        reason: format!("no other child holds address {address}"),
    }))
}
