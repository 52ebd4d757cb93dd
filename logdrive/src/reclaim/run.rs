//! The store's thread and a reclaiming pass: [`spawn`] starts the thread that refuses records
//! whose wait for room ran out and reclaims in the background; [`run`] takes steps until the
//! policy is met, advancing the head by the counts where it can and walking where it must.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Instant;

use super::copy::{apply, generation_record};
use super::policy::{mode, tight, Mode, Pressure, Survey, ADVANCE_LSNS_MIN};
use super::survey::survey;
use super::walk::step;
use crate::api::LogDriveError;
use crate::errors::append_error;
use crate::inner::Inner;
use crate::sync::lock;

/// Starts the store's thread: it refuses the records whose wait for room has run out, and,
/// with [`ReclaimPolicy::background`], reclaims whenever something may let the head move or
/// the policy's interval passes.
pub(crate) fn spawn(inner: &Arc<Inner>) -> std::io::Result<JoinHandle<()>> {
    let weak: Weak<Inner> = Arc::downgrade(inner);
    let reclaimer = Arc::clone(&inner.reclaimer);
    let space = Arc::clone(&inner.space);
    let interval = inner.options.reclaim.interval;
    let background = inner.options.reclaim.background;
    let name = format!("sealog-reclaim {}", inner.drive.path().display());
    std::thread::Builder::new().name(name).spawn(move || {
        loop {
            // Woken by a client's refusal, a trim or deletion becoming durable, a stop, or
            // the first waiter's deadline.
            let timeout = space.next_deadline().map_or(interval, |deadline| {
                interval.min(deadline.saturating_duration_since(Instant::now()))
            });
            if !reclaimer.wait(timeout) {
                return;
            }
            space.expire(Instant::now());
            if !background {
                continue;
            }
            reclaimer.settle();
            let Some(inner) = weak.upgrade() else {
                return;
            };
            if let Err(error) = run(&inner, true) {
                if inner.check_running().is_err() {
                    return;
                }
                reclaimer.note_error(error.to_string());
            }
        }
    })
}

/// Runs steps until the policy is met or nothing more can be done; `paced` pauses after
/// relocating steps as the bandwidth share says (the background thread).
pub(crate) fn run(inner: &Inner, paced: bool) -> Result<(), LogDriveError> {
    let reclaimer = &inner.reclaimer;
    let _walking = lock(&reclaimer.walking);
    let policy = &inner.options.reclaim;
    // A pass rewrites the live data at most once: past that, relocating more cannot lower
    // the amplification until something changes (what is left is the ring's own overhead).
    let mut relocated_this_pass = 0;
    loop {
        if reclaimer.stopped() {
            return Ok(());
        }
        inner.check_running()?;
        let survey = survey(inner);
        let refused = reclaimer.pressure.swap(false, Ordering::AcqRel);
        let short = if inner.space.controls_wait() {
            Pressure::Controls
        } else if refused || inner.space.waiting() > 0 {
            Pressure::Writes
        } else {
            Pressure::None
        };
        let pressure = short != Pressure::None || tight(policy, &survey);
        let segment_bytes = inner.drive.geometry().segment_size_bytes;
        let mut mode = mode(policy, &survey, segment_bytes, short);
        if mode == Mode::Relocate && relocated_this_pass > survey.live_bytes + segment_bytes {
            mode = Mode::Advance;
        }
        if advance(inner, &survey, pressure)? {
            inner.grant();
            continue;
        }
        // A segment half relocated is finished first, unpaced.
        let finishing = reclaimer.finishing(inner.drive.first_live_lsn());
        if finishing {
            mode = Mode::Relocate;
        }
        let pressure = pressure || finishing;
        let started = Instant::now();
        let walked = step(inner, mode, pressure, survey.advance_to)?;
        relocated_this_pass += walked.relocated_bytes;
        if !walked.progress {
            refuse_hopeless_writes(inner, &survey, segment_bytes);
            return Ok(());
        }
        inner.grant();
        if walked.relocated_bytes > 0 {
            let elapsed = started.elapsed();
            let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
            reclaimer
                .counters
                .relocation_micros
                .fetch_add(micros, Ordering::Relaxed);
            let share = policy.bandwidth_share;
            if paced && share < 1.0 && !pressure && !reclaimer.pressure.load(Ordering::Acquire) {
                reclaimer.pace(elapsed.mul_f64((1.0 - share) / share));
            }
        }
    }
}

/// Refuses the writes waiting for room once a look finds nothing left to reclaim for them:
/// no dead records a relocation under pressure would win (less than [`PRESSURE_DEAD_MIN`]
/// of the ring), no amplification over the policy's bound, and no head to advance. Only a
/// client's trim or deletion can make room then, and those do not wait behind writes; a
/// writer is told the ring is full now rather than at its deadline.
pub(crate) fn refuse_hopeless_writes(inner: &Inner, survey: &Survey, segment_bytes: u64) {
    if inner.space.waiting() == 0 {
        return;
    }
    if mode(
        &inner.options.reclaim,
        survey,
        segment_bytes,
        Pressure::Writes,
    ) == Mode::Relocate
    {
        return;
    }
    let refused = inner.space.refuse_writes();
    if refused > 0 {
        tracing::debug!(
            refused,
            live_bytes = survey.live_bytes,
            occupied_bytes = survey.occupied_bytes,
            "writes waiting for room refused: the ring holds nothing to reclaim"
        );
    }
}

/// Moves the ring's head past every record below the first one a LogDrive needs, by the
/// counts the states keep, without reading the ring (what the walk would only pass over):
/// when that is at least a chunk of LSNs, or clients wait for room. Whether it moved.
pub(crate) fn advance(
    inner: &Inner,
    survey: &Survey,
    pressure: bool,
) -> Result<bool, LogDriveError> {
    let drive = &inner.drive;
    let head = drive.first_live_lsn();
    let upto = survey.advance_to;
    if upto < head || (upto + 1 - head < ADVANCE_LSNS_MIN && !pressure) {
        return Ok(false);
    }
    let mut upto = upto;
    match generation_record(inner, upto) {
        Some(Ok(marker)) => match marker.ticket.wait() {
            Ok(to) => {
                for copy in &marker.copies {
                    apply(inner, &copy.live, copy.from, &copy.carried, to);
                }
            }
            Err(error) => return Err(append_error(error)),
        },
        // No room for the generation record: the head stays until there is.
        Some(Err(())) => upto = head - 1,
        None => {}
    }
    if upto < head {
        return Ok(false);
    }
    drive.trim(upto).map_err(|error| LogDriveError::Io {
        reason: format!("trimming the ring to LSN {upto}: {error}"),
    })?;
    let reclaimer = &inner.reclaimer;
    reclaimer
        .counters
        .ring_trims
        .fetch_add(1, Ordering::Relaxed);
    reclaimer.counters.advances.fetch_add(1, Ordering::Relaxed);
    reclaimer.handles.ring_trims.increment(1);
    Ok(true)
}
