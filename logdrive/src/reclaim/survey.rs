//! A look at the ring: every outcome that completed taken in, the live bytes summed, the
//! advance bounded ([`survey`]), and the figures a caller asks for ([`stats`]).

use std::sync::atomic::{AtomicU64, Ordering};

use super::figures::ReclaimStats;
use super::policy::Survey;
use crate::inner::Inner;
use crate::live::Shared;
use crate::sync::lock;

/// Takes in every outcome that completed, sums the live bytes and bounds the advance.
pub(crate) fn survey(inner: &Inner) -> Survey {
    // Read before the states: a record queued after a state is looked at takes an LSN past
    // this durable tail, so the bound below needs only what the states hold.
    let durable = inner.drive.durable_lsn();
    let (live, dying): (Vec<Shared>, Vec<Shared>) = {
        let mut registry = lock(&inner.registry);
        registry.take_in();
        (
            registry.live.values().cloned().collect(),
            registry.dying.values().cloned().collect(),
        )
    };
    let mut live_bytes = 0;
    let mut bound = durable + 1;
    for shared in &live {
        let mut live = lock(shared);
        live.take_in(inner);
        live_bytes += live.state.live_bytes();
        bound = live.state.advance_bound().map_or(bound, |at| bound.min(at));
    }
    // A deletion not yet known durable: its LogDrive's records may be needed again.
    for shared in &dying {
        let mut dying = lock(shared);
        dying.take_in(inner);
        bound = dying
            .state
            .advance_bound()
            .map_or(bound, |at| bound.min(at));
    }
    let shape = inner.drive.shape();
    let reclaimer = &inner.reclaimer;
    let space = &inner.space;
    let kept = space.reserve_bytes + space.control_reserve_bytes;
    let room = space.room_bytes(inner.drive.room());
    let survey = Survey {
        live_bytes,
        capacity_bytes: shape.capacity_bytes,
        occupied_bytes: shape.occupied_bytes,
        client_room_bytes: room.saturating_sub(kept),
        record_bytes: shape.live_record_bytes,
        batch_bytes: u64::from(inner.drive.geometry().batch_size_max_bytes),
        block_bytes: u64::from(inner.drive.geometry().block_size_bytes),
        advance_to: bound.saturating_sub(1),
    };
    reclaimer.handles.live_bytes.set(live_bytes as f64);
    let amplification = survey.amplification();
    if amplification.is_finite() {
        reclaimer.handles.space_amplification.set(amplification);
    }
    survey
}

/// The reclaimer's figures and the ring's space now.
pub(crate) fn stats(inner: &Inner) -> ReclaimStats {
    let reclaimer = &inner.reclaimer;
    let counters = &reclaimer.counters;
    let survey = survey(inner);
    let shape = inner.drive.shape();
    let live_bytes = survey.live_bytes;
    let refusals = inner.space.refusals();
    let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
    ReclaimStats {
        capacity_bytes: survey.capacity_bytes,
        occupied_bytes: survey.occupied_bytes,
        usable_bytes: shape.usable_bytes,
        live_bytes,
        dead_bytes: survey.dead_bytes(),
        queued_bytes: inner
            .space
            .sent_bytes()
            .saturating_sub(shape.settled_append_bytes),
        waiting_records: inner.space.waiting() as u64,
        space_amplification: survey.amplification(),
        reserve_bytes: inner.space.reserve_bytes,
        control_reserve_bytes: inner.space.control_reserve_bytes,
        head_lsn: shape.first_live_lsn,
        steps: load(&counters.steps),
        relocation_steps: load(&counters.relocation_steps),
        relocated_records: load(&counters.relocated_records),
        relocated_bytes: load(&counters.relocated_bytes),
        garbage_records: load(&counters.garbage_records),
        ring_trims: load(&counters.ring_trims),
        advances: load(&counters.advances),
        generation_records: load(&counters.generation_records),
        refused_writes: refusals[0],
        refused_controls: refusals[1],
        refused_copies: refusals[2],
        relocation_seconds: load(&counters.relocation_micros) as f64 / 1e6,
        last_error: lock(&reclaimer.last_error).clone(),
    }
}
