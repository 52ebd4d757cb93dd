//! The trim path of the drive's state machine: a trim writes a control block with the new
//! trim point and head to the copy that is not current, flushes it, and only then releases
//! the old head (segments before the new head may be reused) and hides the trimmed entries.
//! Trims never need log space, so a full ring can always be trimmed. One control write is on
//! the device at a time, with the control lane's buffer it owns; trims wait in arrival order.
//! The same path writes the control blocks that only move the tail hint ([`super::hints`]):
//! a control write in flight is a trim's or a hint's, and a trim carries a further hint when
//! one is due.

use sealog_wal::format::ControlBlock;

use super::buffers::Lane;
use super::core::DriveCore;
use super::inflight::{OpState, PendingTrim};
use super::op::Op;
use super::requests::{TrimRequest, TrimSender};
use crate::error::{DriveFailure, IoOperation, TrimError};
use crate::io::{Completion, FlushOrder, IoBackend, WriteSync};

impl<B: IoBackend> DriveCore<B> {
    /// Starts the next trim, if no control write is on the device: answered at once when it
    /// needs no control block, else its control block written and flushed. With no trim
    /// waiting, a hint that is due goes instead.
    pub(super) fn start_trim(&mut self) {
        if self.trim_in_flight.is_some() {
            return;
        }
        let Some(TrimRequest { lsn, reply }) = self.trims.pop_front() else {
            self.start_hint_write();
            return;
        };
        let sequence = match self.control_sequence_for_trim(lsn) {
            Ok(sequence) => sequence,
            Err(answer) => {
                reply.send(answer);
                return;
            }
        };
        let control = self.trimmed_control(lsn, sequence);
        self.submit_control_block(control, lsn, Some(reply));
    }

    /// The sequence number of the control block a trim to `lsn` writes, or the trim's answer
    /// when it needs none: refused past the durable tail, done at or below the trim point
    /// already, refused when the control block's sequence is exhausted.
    fn control_sequence_for_trim(&self, lsn: u64) -> Result<u64, Result<(), TrimError>> {
        if lsn > self.lsn_durable {
            return Err(Err(TrimError::BeyondDurable {
                lsn,
                durable_lsn: self.lsn_durable,
            }));
        }
        if lsn <= self.control.trim_lsn {
            return Err(Ok(()));
        }
        self.control.next_sequence().map_err(|_| {
            Err(TrimError::ControlSequenceExhausted {
                sequence: self.control.sequence,
            })
        })
    }

    /// The control block after a trim to `lsn`, numbered `sequence`: its head is the oldest
    /// batch that keeps a live entry (or where a replay reaches the oldest damage a quarantine
    /// open found above `lsn`, when that comes first), else the oldest batch on the device,
    /// else where the next batch goes.
    fn trimmed_control(&self, lsn: u64, sequence: u64) -> ControlBlock {
        let keep = self.view.index().first_keeping(lsn);
        let (head, head_lsn, head_incarnation) = match keep {
            Some(head) => (head.position, head.first_lsn, head.incarnation),
            None => match self.inflight_front() {
                Some(front) => front,
                None => (self.cursor.position, self.lsn_durable + 1, self.incarnation),
            },
        };
        ControlBlock {
            sequence,
            trim_lsn: lsn,
            head,
            head_lsn,
            head_incarnation,
            tail_hint: self.hint_for_control_write(),
            ..self.control
        }
    }

    /// Encodes `control` (recording the trim point `lsn`) into the control lane's buffer and
    /// hands the device its write to the copy it belongs in, with the flush linked behind it;
    /// it is on the device until both complete. `reply` is the trim's (`None` for a write
    /// that only moves the tail hint). A backend that refuses either is broken.
    pub(super) fn submit_control_block(
        &mut self,
        control: ControlBlock,
        lsn: u64,
        reply: Option<TrimSender>,
    ) {
        debug_assert!(self.trim_in_flight.is_none());
        debug_assert_eq!(control.tail_hint.incarnation, self.incarnation);
        let buffer = self
            .lanes
            .acquire(Lane::Control)
            .expect("the control buffer is free while no trim is on the device");
        let block = self.geometry.block_size_bytes as usize;
        control.encode(&mut self.backend.pool().buffer_mut(buffer)[..block]);
        let offset = self.geometry.control_offset(control.copy());
        let sequence = self.next_sequence();
        self.trim_in_flight = Some(PendingTrim {
            sequence,
            buffer,
            control,
            lsn,
            reply,
            write: OpState::Pending,
            flush: OpState::Pending,
        });
        let mut submitted = self.backend.submit_write(
            Op::ControlWrite { sequence }.tag(),
            offset,
            buffer,
            0,
            block as u32,
            WriteSync::None,
        );
        if submitted.is_ok() {
            submitted = self.backend.submit_flush(
                Op::ControlFlush { sequence }.tag(),
                offset,
                FlushOrder::AfterPreviousWrite,
            );
        }
        if let Err(error) = submitted {
            // The backend could not take it: nothing it holds can be trusted to complete.
            self.device_broken(IoOperation::Submit, offset, &error);
        }
    }

    /// The control block write or flush of the trim on the device completed.
    pub(super) fn on_trim_completion(
        &mut self,
        sequence: u64,
        is_flush: bool,
        completion: Completion,
    ) {
        let Some(trim) = self
            .trim_in_flight
            .as_mut()
            .filter(|trim| trim.sequence == sequence)
        else {
            // Only a trim abandoned after a failed wait completes unknown (see `fail`).
            debug_assert!(self.failed.is_some(), "a completion for no trim in flight");
            return;
        };
        let state = match completion.result {
            Ok(_) => OpState::Done,
            Err(_) => OpState::Failed,
        };
        if is_flush {
            trim.flush = state;
        } else {
            trim.write = state;
        }
        let offset = self.geometry.control_offset(trim.control.copy());
        if let Err(errno) = completion.result {
            let operation = if is_flush {
                IoOperation::Flush
            } else {
                IoOperation::Write
            };
            self.fail(DriveFailure::io(operation, offset, errno));
        }
        let Some(trim) = self.trim_in_flight.as_ref() else {
            return;
        };
        if self.failed.is_some() {
            // The trim's buffer goes back once the device is done with it.
            if trim.finished() {
                let trim = self.trim_in_flight.take().expect("checked");
                self.lanes.release(Lane::Control, trim.buffer);
            }
            return;
        }
        // Durable once both the write and the flush behind it succeeded, in whatever order
        // their completions arrive.
        if (trim.write, trim.flush) != (OpState::Done, OpState::Done) {
            return;
        }
        let trim = self.trim_in_flight.take().expect("checked");
        self.control_durable(trim);
    }

    /// A control write's block is durable: it is the drive's control block from now on; a
    /// trim releases the old head and answers.
    fn control_durable(&mut self, trim: PendingTrim) {
        self.lanes.release(Lane::Control, trim.buffer);
        let trimmed = trim.control.trim_lsn != self.control.trim_lsn;
        // Within an incarnation the hint only moves forward (replay cross-checks the copies).
        debug_assert!(trim.control.tail_hint.limit >= self.control.tail_hint.limit);
        self.control = trim.control;
        // Readers see the entries trimmed before their index entries go, and before any later
        // batch can reuse their blocks.
        self.view.publish_trim(trim.lsn);
        self.view.cache.trim(trim.lsn);
        let mut index = self
            .view
            .index
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        index.trim(trim.lsn);
        let record_bytes = index.record_bytes();
        drop(index);
        self.view.set_record_bytes(record_bytes);
        // Trimmed entries need no watermark: damage to them is never a question again.
        self.lsn_covered = self.lsn_covered.max(trim.lsn);
        self.on_trim_durable(trimmed, trim.lsn);
        if trimmed {
            self.on_head_moved();
        }
        // The shape a client reads once its trim returns shows the head moved.
        self.publish_shape();
        if let Some(reply) = trim.reply {
            reply.send(Ok(()));
        }
    }
}
