//! The read path of the drive's state machine: point reads of acknowledged, untrimmed entries.
//! A read fetches only the blocks of the batch that holds its entry (the read index records
//! each batch's place and length) into a buffer of the read lane, and checks it with replay's
//! own record checks. Reads wait in arrival order for a read buffer (never spinning, never
//! taking a batch buffer), run in parallel with appends, never wait for a flush, and never
//! serve anything unacknowledged. A failed or damaged read is that read's outcome only; it
//! never stops the drive.

use sealog_wal::validate::{check_batch, BatchExpectation, IncarnationRule};
use sealog_wal::Check;

use super::buffers::Lane;
use super::core::{DriveCore, IndexedBatch};
use super::op::Op;
use super::{ReadEntries, ReadSender};
use crate::error::{errno_text, IoOperation, ReadError};
use crate::io::{Completion, IoBackend};

/// A read waiting for a buffer.
pub(super) struct ReadRequest {
    pub(super) lsn: u64,
    pub(super) reply: ReadSender,
}

/// A read on the device.
pub(super) struct PendingRead {
    sequence: u64,
    buffer: usize,
    batch: IndexedBatch,
    lsn: u64,
    /// Taken when the reply is sent early (the drive failed while the read was on the device).
    pub(super) reply: Option<ReadSender>,
}

impl<B: IoBackend> DriveCore<B> {
    /// Starts waiting reads, oldest first, while the read lane has buffers.
    pub(super) fn start_reads(&mut self) {
        while self.lanes.has_free(Lane::Read) {
            let Some(request) = self.reads_waiting.pop_front() else {
                break;
            };
            self.start_read(request);
        }
    }

    /// Answers a read at once when its LSN is not live, or submits the read of its batch.
    fn start_read(&mut self, request: ReadRequest) {
        let ReadRequest { lsn, reply } = request;
        let first_live = self.control.trim_lsn + 1;
        if lsn < first_live {
            self.reads_served += 1;
            let _ = reply.send(Err(ReadError::Trimmed {
                lsn,
                first_lsn: first_live,
            }));
            return;
        }
        let found = self.index.partition_point(|batch| batch.next_lsn <= lsn);
        let batch = match self.index.get(found).copied() {
            Some(batch) if lsn <= self.lsn_durable && batch.first_lsn <= lsn => batch,
            _ => {
                // Every acknowledged live LSN is in the index; anything else is not durable.
                debug_assert!(
                    lsn > self.lsn_durable,
                    "live LSN {lsn} missing from the index"
                );
                self.reads_served += 1;
                let _ = reply.send(Err(ReadError::NotYetDurable {
                    lsn,
                    durable_lsn: self.lsn_durable,
                }));
                return;
            }
        };
        let buffer = self
            .lanes
            .acquire(Lane::Read)
            .expect("reads start only while the read lane has a buffer");
        let sequence = self.next_sequence();
        let ring_offset = self.geometry.ring_offset(batch.position);
        self.reads.push(PendingRead {
            sequence,
            buffer,
            batch,
            lsn,
            reply: Some(reply),
        });
        let submitted = self.backend.submit_read(
            Op::Read { sequence }.tag(),
            ring_offset,
            buffer,
            batch.bytes,
        );
        if let Err(error) = submitted {
            // The backend could not take it: it is broken as a whole (this read's reply gets
            // the drive's failure), and nothing it holds can be trusted to complete.
            self.device_broken(IoOperation::Submit, ring_offset, &error);
        }
    }

    /// A read finished: check what it read and answer it.
    pub(super) fn on_read_completion(&mut self, sequence: u64, completion: Completion) {
        let Some(position) = self.reads.iter().position(|read| read.sequence == sequence) else {
            // Only reads abandoned by a broken backend complete unknown.
            debug_assert!(self.failed.is_some(), "a completion for no read in flight");
            return;
        };
        let read = self.reads.swap_remove(position);
        let outcome = match completion.result {
            // Trimmed while on the device: trimmed entries are hidden from reads at once.
            _ if read.lsn <= self.control.trim_lsn => Err(ReadError::Trimmed {
                lsn: read.lsn,
                first_lsn: self.control.trim_lsn + 1,
            }),
            Err(errno) => Err(ReadError::Io {
                lsn: read.lsn,
                ring_offset: self.geometry.ring_offset(read.batch.position),
                errno,
                message: errno_text(errno),
            }),
            Ok(_) => self.parse_batch(read.buffer, read.batch, read.lsn),
        };
        self.lanes.release(Lane::Read, read.buffer);
        self.reads_served += 1;
        if let Some(reply) = read.reply {
            let _ = reply.send(outcome);
        }
    }

    /// The entries of a batch read into `buffer`, from `lsn` on, checked with replay's own
    /// validator (every record of the batch, whatever LSN was asked for: a batch is written
    /// and validated whole), and expected to carry the incarnation the index recorded.
    fn parse_batch(
        &mut self,
        buffer: usize,
        batch: IndexedBatch,
        lsn: u64,
    ) -> Result<ReadEntries, ReadError> {
        let expect = BatchExpectation {
            ring_id: self.control.ring_id,
            geometry: self.geometry,
            position: batch.position,
            first_lsn: batch.first_lsn,
            incarnation: IncarnationRule::Exactly(batch.incarnation),
        };
        let bytes = &self.backend.pool().buffer(buffer)[..batch.bytes as usize];
        let checked = check_batch(&expect, bytes).map_err(|failure| ReadError::Damaged {
            lsn: failure.lsn,
            position: failure.position,
            check: failure.check,
        })?;
        if checked.next_lsn() != batch.next_lsn {
            // The batch checks out but holds other records than the index says: the ring
            // changed under the drive (a misdirected write of a valid batch, say).
            return Err(ReadError::Damaged {
                lsn,
                position: batch.position,
                check: Check::BatchLayout,
            });
        }
        let mut records = checked.records().skip_while(|record| record.lsn < lsn);
        let first = records
            .next()
            .expect("the index puts every live LSN in its batch's range");
        debug_assert_eq!(first.lsn, lsn);
        Ok(ReadEntries {
            lsn,
            payload: first.payload.to_vec(),
            following: records
                .map(|record| (record.lsn, record.payload.to_vec()))
                .collect(),
        })
    }
}
