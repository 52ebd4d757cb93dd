//! Tail hints on the write path: the drive keeps the control block's tail hint ahead of its
//! write cursor, so that an open after a crash probes past the log's end only as far as the
//! hint (docs/recovery.md, wal's `TailHint`). The rule it keeps: no batch (data or tail
//! marker) is submitted that could end past the hint of the durable control block. To keep a
//! steady writer from ever waiting on that, the next hint is written ahead, off the append's
//! critical path: once the room left under the furthest hint durable or on its way falls
//! below `HINT_REFRESH_WINDOWS` windows, a control block with a hint `HINT_AHEAD_WINDOWS`
//! windows past the cursor goes to the device (write, then the linked flush), beside the
//! batches in flight. A batch that finds the room short all the same waits for it, and
//! [`crate::Stats::hint_waits`] counts that, so a benchmark can show it does not happen.
//!
//! Control blocks carry trims as well, and one control write is on the device at a time (the
//! trim path's, [`super::trim`]): a trim written while a hint is due carries the further hint,
//! and a hint written alone carries the trim point in force. Within an incarnation the limit
//! only moves forward, which replay cross-checks between the two control copies.

use sealog_wal::format::{ControlBlock, TailHint};
use sealog_wal::layout::BatchSlot;
use sealog_wal::Position;

use super::core::DriveCore;
use crate::error::DriveFailure;
use crate::io::IoBackend;

impl<B: IoBackend> DriveCore<B> {
    /// The hint of the durable control block, as a batch boundary. Recovery's plan wrote one
    /// of this incarnation and every control write since carries one, so it is always a place
    /// of the ring; were it not, the cursor stands in (no room: a further hint is written
    /// before anything else).
    fn hint_in_force(&self) -> Position {
        let hint = self.control.tail_hint;
        debug_assert_eq!(hint.incarnation, self.incarnation);
        hint.normalized_limit(&self.geometry)
            .unwrap_or(self.cursor.position)
    }

    /// The furthest hint durable or on its way to the device (in the control write in flight).
    fn hint_furthest(&self) -> Position {
        let pending = self
            .trim_in_flight
            .as_ref()
            .and_then(|write| write.control.tail_hint.normalized_limit(&self.geometry));
        pending.map_or(self.hint_in_force(), |pending| {
            pending.max(self.hint_in_force())
        })
    }

    /// Whether a batch in `slot` may be submitted now: it cannot end past the durable hint.
    /// Otherwise the wait is counted (once) and a further hint is put on its way, and the
    /// batch starts once it is durable.
    pub(super) fn hint_allows(&mut self, slot: &BatchSlot) -> bool {
        if slot.within_hint(self.hint_in_force()) {
            self.hints.blocked = false;
            return true;
        }
        if !self.hints.blocked {
            self.hints.blocked = true;
            self.hints.waits += 1;
        }
        self.start_hint_write();
        false
    }

    /// Whether a batch waits for a hint that is on its way: work is in flight for it, so a
    /// close (or an idle timer) that wants a tail marker comes back for it.
    pub(super) fn waiting_for_hint(&self) -> bool {
        self.hints.blocked && self.trim_in_flight.is_some()
    }

    /// After a batch was submitted: writes the next hint ahead once the room left under the
    /// furthest one is short ([`sealog_wal::WriteCursor::hint_due`]).
    pub(super) fn refresh_hint(&mut self) {
        if self.cursor.hint_due(&self.geometry, self.hint_furthest()) {
            self.start_hint_write();
        }
    }

    /// The hint the next control write records: a further one, from the cursor, when one is
    /// due; the one in force otherwise. Never one that moves back.
    pub(super) fn hint_for_control_write(&self) -> TailHint {
        let in_force = self.hint_in_force();
        let limit = if self.hints.blocked || self.cursor.hint_due(&self.geometry, in_force) {
            self.cursor.hint_limit(&self.geometry).max(in_force)
        } else {
            in_force
        };
        TailHint {
            limit,
            incarnation: self.incarnation,
        }
    }

    /// A control write that moves the hint alone, unless one is on the device already (its
    /// completion lets `start_trim` look again) or the drive has failed. A control block whose
    /// sequence is exhausted can never be written again: the drive fail-stops rather than
    /// leave appends waiting for a hint forever.
    pub(super) fn start_hint_write(&mut self) {
        if self.trim_in_flight.is_some() || self.failed.is_some() {
            return;
        }
        let hint = self.hint_for_control_write();
        if hint == self.control.tail_hint {
            return;
        }
        let Ok(sequence) = self.control.next_sequence() else {
            self.fail(DriveFailure::ControlSequenceExhausted {
                sequence: self.control.sequence,
            });
            return;
        };
        let control = ControlBlock {
            sequence,
            tail_hint: hint,
            ..self.control
        };
        self.hints.writes += 1;
        let trim_lsn = self.control.trim_lsn;
        self.submit_control_block(control, trim_lsn, None);
    }
}
