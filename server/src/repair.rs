//! Repair of sealed segments: every replica of a segment whose stop the chain records is
//! brought to its sealed length from its peers. A replica that was down or cut off when the
//! segment was sealed missed writes and the seal itself; one whose ring was torn under it
//! holds some records damaged (its server serves the rest in quarantine), and looks whole by
//! its length and seal. So every replica is scrubbed, slot by slot: the quorum's scrub writes
//! back, from a peer's value, every slot the replica lacks or holds damaged below the stop,
//! and a replica not sealed at its share of the stop is then sealed there, which drops
//! anything it held past it. A pass thus reads every slot of every sealed segment once per
//! replica, as a scrubber does. A data replica the segment was made without (its server
//! was down when the segment's LogDrives were created, so the segment names it with
//! generation 0) is created on its server once that is back, empty, fenced at the next
//! segment's epoch, and filled and sealed the same way; clients find it by its id
//! (`Pool::resolve`). A replica that cannot be reached is counted and left for the next
//! pass. Seal replicas the segment was made without are left absent: once the chain
//! records the segment's stop, its seal LogDrive is no longer what says where it ends.

use std::sync::Arc;

use sealog_logdrive::quorum::ScrubPace;
use sealog_logdrive::{LogDrive, LogDriveError, QuorumLogDrive, QuorumOptions};
use sealog_vlog::{Chain, LogError};

use crate::loglet_spec::{LogletSpec, Pool};

/// What a repair pass did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Repaired {
    /// Sealed segments looked at.
    pub segments: u64,
    /// Replicas found short of their sealed length, unsealed, or holding damaged slots,
    /// and repaired.
    pub replicas_repaired: u64,
    /// Slots written back from peers.
    pub slots_written: u64,
    /// Damaged slots no peer holds a value for.
    pub unrepairable: u64,
    /// Replicas that could not be reached.
    pub unreachable: u64,
    /// Replicas the segment was made without (their server was down when it was created)
    /// created now, empty, for the scrub to fill.
    pub created: u64,
    /// Replicas the segment was made without that are still not there (their server
    /// answered, and the creation failed).
    pub absent: u64,
}

/// Group `group`'s share of a stripe of `groups` over `slots` slots: the slots `s` with
/// `s % groups == group`.
fn share(slots: u64, groups: u64, group: u64) -> u64 {
    slots / groups + u64::from(group < slots % groups)
}

/// Repairs every sealed segment of `chain`, reaching servers through `pool`.
pub async fn repair_sealed(pool: &Arc<Pool>, chain: &Chain) -> Result<Repaired, LogError> {
    let mut repaired = Repaired::default();
    for (index, segment) in chain.segments.iter().enumerate() {
        let (Some(stop), Some(next)) = (segment.stop, chain.segments.get(index + 1)) else {
            continue;
        };
        repaired.segments += 1;
        let spec = LogletSpec::decode(&segment.loglet)?;
        let groups = spec.groups.len() as u64;
        for group in 0..spec.groups.len() {
            let length = share(stop - segment.start, groups, group as u64);
            // The next segment's epoch: above every fence the reconfiguration set.
            repair_group(pool, &spec, group, length, next.epoch, &mut repaired).await?;
        }
    }
    Ok(repaired)
}

/// Brings each replica of `group` to `length`, sealed.
async fn repair_group(
    pool: &Arc<Pool>,
    spec: &LogletSpec,
    group: usize,
    length: u64,
    epoch: u64,
    repaired: &mut Repaired,
) -> Result<(), LogError> {
    create_absent(pool, spec, group, length, epoch, repaired).await;
    let children = pool.group(spec, group).await;
    let quorum = QuorumLogDrive::new(
        children.clone(),
        spec.write_quorum,
        QuorumOptions::default(),
    )
    .map_err(|error| LogError::InvalidConfig {
        reason: format!("group {group}: {error}"),
    })?;
    // Repairs write with the highest epoch the quorum handle was given: the fence makes it
    // `epoch`, above the one the reconfiguration fenced the replicas at, so that the
    // values written back are not refused as a fenced writer's.
    if let Err(error) = quorum.fence(epoch).await {
        tracing::warn!(group, epoch, %error, "fencing a sealed group for its repair");
        repaired.unreachable += children.len() as u64;
        return Ok(());
    }
    for (child, drive) in children.iter().enumerate() {
        let found = match drive.length().await {
            Ok(found) => found,
            Err(error) if matches!(error.cause(), LogDriveError::Missing { .. }) => {
                repaired.absent += 1;
                continue;
            }
            Err(_) => {
                repaired.unreachable += 1;
                continue;
            }
        };
        let pace = ScrubPace::default();
        let scrubbed = match quorum
            .scrub(child, found.first.min(length)..length, pace)
            .await
        {
            Ok(scrubbed) => scrubbed,
            Err(error) => {
                tracing::warn!(group, child, %error, "scrubbing a replica");
                repaired.unreachable += 1;
                continue;
            }
        };
        repaired.slots_written += scrubbed.repaired;
        repaired.unrepairable += scrubbed.unrepairable;
        let sealed = found.sealed == Some(length) && found.t >= length;
        if sealed {
            repaired.replicas_repaired += u64::from(scrubbed.repaired > 0);
            continue;
        }
        match drive.seal(length, epoch).await {
            Ok(()) => repaired.replicas_repaired += 1,
            Err(error) => {
                tracing::warn!(group, child, length, %error, "sealing a repaired replica");
                repaired.unreachable += 1;
            }
        }
    }
    Ok(())
}

/// Creates, on servers that answer, the data replicas of `group` the segment was made
/// without (named with generation 0), of `length` addresses and fenced at `epoch`.
async fn create_absent(
    pool: &Arc<Pool>,
    spec: &LogletSpec,
    group: usize,
    length: u64,
    epoch: u64,
    repaired: &mut Repaired,
) {
    for replica in spec.groups.get(group).into_iter().flatten() {
        let (addr, id) = (&replica.addr, replica.data.id);
        if replica.data.generation != 0 {
            continue;
        }
        // A server that does not answer is counted unreachable by the pass.
        let Ok(store) = pool.store(addr).await else {
            continue;
        };
        let generation = match store.generation(id).await {
            Ok(Some(generation)) => generation,
            Ok(None) => match store.create(id, length.max(1)).await {
                Ok(drive) => {
                    repaired.created += 1;
                    drive.generation()
                }
                // Another pass made it meanwhile; this one finds it next time.
                Err(error) => {
                    tracing::warn!(%addr, id, %error, "creating an absent replica");
                    continue;
                }
            },
            Err(_) => continue,
        };
        pool.created(addr, id, generation);
        if let Err(error) = store.drive(id, generation).fence(epoch).await {
            tracing::warn!(%addr, id, %error, "fencing a created replica");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::share;

    #[test]
    fn a_stripes_shares_add_up_to_its_slots() {
        for slots in 0..20 {
            for groups in 1..5 {
                let total: u64 = (0..groups).map(|g| share(slots, groups, g)).sum();
                assert_eq!(total, slots, "{slots} slots over {groups} groups");
            }
        }
        assert_eq!((share(5, 2, 0), share(5, 2, 1)), (3, 2));
    }
}
