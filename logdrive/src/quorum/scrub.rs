//! Scrubbing one child: every slot of a range is read on that child, and a slot it holds
//! damaged, or lacks while a peer holds a value, is written back from the peer's value (the
//! same bytes repair a damaged slot). A damaged slot no peer holds is counted unrepairable
//! and stays `Damaged`. The walk goes a step of slots at a time with a pause on the
//! quorum's clock between steps, so that clients keep the children.

use std::ops::Range;
use std::sync::Arc;

use super::figures::{metrics, ScrubStats};
use super::options::ScrubPace;
use super::read::peer_value;
use super::shared::Shared;
use crate::api::{LogDriveError, OpFuture, ReadOutcome};

/// What scrubbing one slot found.
enum Found {
    Intact,
    Repaired,
    Unrepairable,
}

/// Scrubs `range` of `child` at `pace`: see the module doc.
pub(crate) fn scrub(
    shared: &Arc<Shared>,
    child: usize,
    range: Range<u64>,
    pace: ScrubPace,
) -> OpFuture<ScrubStats> {
    let shared = Arc::clone(shared);
    Box::pin(async move {
        let mut stats = ScrubStats::default();
        let step = pace.slots_per_step.max(1);
        let mut address = range.start;
        while address < range.end {
            if address > range.start && (address - range.start) % step == 0 {
                shared.options.clock.sleep(pace.pause).await;
            }
            let found = scrub_slot(&shared, child, address).await?;
            stats.checked += 1;
            ::metrics::counter!(metrics::SCRUB_CHECKED_TOTAL).increment(1);
            match found {
                Found::Intact => {}
                Found::Repaired => {
                    stats.repaired += 1;
                    ::metrics::counter!(metrics::SCRUB_REPAIRED_TOTAL).increment(1);
                }
                Found::Unrepairable => {
                    stats.unrepairable += 1;
                    ::metrics::counter!(metrics::SCRUB_UNREPAIRABLE_TOTAL).increment(1);
                }
            }
            address += 1;
        }
        Ok(stats)
    })
}

/// Checks `address` on `child`, repairing it from a peer when it is damaged or missing.
async fn scrub_slot(
    shared: &Arc<Shared>,
    child: usize,
    address: u64,
) -> Result<Found, LogDriveError> {
    let damaged = match shared.children[child].read(address).await? {
        ReadOutcome::Value(_) | ReadOutcome::Trimmed { .. } => return Ok(Found::Intact),
        ReadOutcome::Damaged => true,
        ReadOutcome::Unwritten => false,
    };
    match peer_value(shared, child, address).await {
        Ok(value) => {
            let epoch = shared.repair_epoch();
            shared.children[child].write(address, epoch, value).await?;
            tracing::debug!(child, address, damaged, "a scrub repaired a slot");
            Ok(Found::Repaired)
        }
        Err(_) if damaged => Ok(Found::Unrepairable),
        Err(_) => Ok(Found::Intact),
    }
}
