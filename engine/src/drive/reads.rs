//! The read path of the drive's state machine: point reads submitted on the drive's own
//! io_uring (async reads, and every read of a drive on a simulated device). The read index
//! says where the entry lies; a cached entry is answered at once, any other is read (only the
//! blocks holding it) into a buffer of the read lane, several in flight, and checked with
//! replay's record checks. Reads wait in arrival order for a read buffer (never spinning, never
//! taking a batch buffer), run in parallel with appends, never wait for a flush, and never
//! serve anything unacknowledged. A failed or damaged read is that read's outcome only; it
//! never stops the drive.

use super::buffers::Lane;
use super::core::DriveCore;
use super::inflight::PendingRead;
use super::op::Op;
use super::requests::ReadRequest;
use super::view::{Lookup, RecordRead};
use crate::error::{IoOperation, ReadError};
use crate::io::{Completion, IoBackend};

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

    /// Answers a read at once when its LSN is not live or its entry is cached, or submits the
    /// read of the blocks that hold it.
    fn start_read(&mut self, request: ReadRequest) {
        let ReadRequest { lsn, reply } = request;
        let record = match self.view.lookup(lsn) {
            Ok(Lookup::Device(record)) => record,
            Ok(Lookup::Cached(payload)) => {
                self.reads_served += 1;
                reply.send(Ok(payload));
                return;
            }
            Err(error) => {
                self.reads_served += 1;
                reply.send(Err(error));
                return;
            }
        };
        let buffer = self
            .lanes
            .acquire(Lane::Read)
            .expect("reads start only while the read lane has a buffer");
        let read = RecordRead::new(&self.geometry, record);
        let sequence = self.next_sequence();
        self.reads.push(PendingRead {
            sequence,
            buffer,
            read,
            reply: Some(reply),
        });
        let submitted = self.backend.submit_read(
            Op::Read { sequence }.tag(),
            read.ring_offset,
            buffer,
            read.len as u32,
        );
        if let Err(error) = submitted {
            // The backend could not take it: it is broken as a whole (this read's reply gets
            // the drive's failure), and nothing it holds can be trusted to complete.
            self.device_broken(IoOperation::Submit, read.ring_offset, &error);
        }
    }

    /// A read finished: check what it read and answer it.
    pub(super) fn on_read_completion(&mut self, sequence: u64, completion: Completion) {
        let Some(position) = self.reads.iter().position(|read| read.sequence == sequence) else {
            // Only reads abandoned by a broken backend complete unknown.
            debug_assert!(self.failed.is_some(), "a completion for no read in flight");
            return;
        };
        let pending = self.reads.swap_remove(position);
        let read = pending.read;
        self.view.count_device_read(read.len);
        self.telemetry.ring_reads += 1;
        let outcome = match completion.result {
            // Trimmed while on the device: trimmed entries are hidden from reads at once.
            _ if read.record.lsn <= self.control.trim_lsn => Err(ReadError::Trimmed {
                lsn: read.record.lsn,
                first_live: self.control.trim_lsn + 1,
            }),
            Err(errno) => self.view.read_failed(&read, errno),
            Ok(_) => {
                let bytes = &self.backend.pool().buffer(pending.buffer)[..read.len];
                self.view.check_read(&read, bytes)
            }
        };
        self.lanes.release(Lane::Read, pending.buffer);
        self.reads_served += 1;
        if let Some(reply) = pending.reply {
            reply.send(outcome);
        }
    }
}
