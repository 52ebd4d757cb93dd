//! The operations the drive hands its backend, as a type: each one's tag (the `u64` the I/O
//! seam carries through to the completion) encodes which operation it is and which record of
//! the drive it belongs to, and decodes back without loss. A completion whose tag decodes to
//! no operation is a broken seam, and the drive says so rather than ignoring it.

use crate::io::Tag;

/// One operation in flight on the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    /// The write of a batch (or tail marker), by the batch's sequence number.
    BatchWrite { sequence: u64 },
    /// The datasync linked behind a batch's write.
    BatchFlush { sequence: u64 },
    /// A read serving a client, by the read's sequence number.
    Read { sequence: u64 },
    /// The write of a control block (a trim, or a tail hint moved ahead), by its sequence
    /// number.
    ControlWrite { sequence: u64 },
    /// The flush linked behind a control block's write.
    ControlFlush { sequence: u64 },
    /// Recovery's one synchronous operation (read, write or flush) at a time.
    RecoverySync,
    /// A read ahead of replay into pool buffer `buffer`.
    RecoveryReadAhead { buffer: u64 },
}

/// Bits of a tag that say which kind of operation it is; the rest carry its number.
const KIND_BITS: u32 = 3;
const KIND_MASK: u64 = (1 << KIND_BITS) - 1;

const KIND_BATCH_WRITE: u64 = 0;
const KIND_BATCH_FLUSH: u64 = 1;
const KIND_READ: u64 = 2;
const KIND_CONTROL_WRITE: u64 = 3;
const KIND_CONTROL_FLUSH: u64 = 4;
const KIND_RECOVERY_SYNC: u64 = 5;
const KIND_RECOVERY_READ_AHEAD: u64 = 6;

/// The largest number an operation may carry (sequence numbers count up from 1 and never
/// come near it: 2^61 operations).
pub(crate) const OP_NUMBER_MAX: u64 = u64::MAX >> KIND_BITS;

impl Op {
    /// The tag that identifies this operation in its completion.
    pub(crate) fn tag(self) -> Tag {
        let (number, kind) = match self {
            Op::BatchWrite { sequence } => (sequence, KIND_BATCH_WRITE),
            Op::BatchFlush { sequence } => (sequence, KIND_BATCH_FLUSH),
            Op::Read { sequence } => (sequence, KIND_READ),
            Op::ControlWrite { sequence } => (sequence, KIND_CONTROL_WRITE),
            Op::ControlFlush { sequence } => (sequence, KIND_CONTROL_FLUSH),
            Op::RecoverySync => (0, KIND_RECOVERY_SYNC),
            Op::RecoveryReadAhead { buffer } => (buffer, KIND_RECOVERY_READ_AHEAD),
        };
        debug_assert!(number <= OP_NUMBER_MAX);
        number << KIND_BITS | kind
    }

    /// The operation a completion's tag names, if any.
    pub(crate) fn from_tag(tag: Tag) -> Option<Op> {
        let number = tag >> KIND_BITS;
        Some(match tag & KIND_MASK {
            KIND_BATCH_WRITE => Op::BatchWrite { sequence: number },
            KIND_BATCH_FLUSH => Op::BatchFlush { sequence: number },
            KIND_READ => Op::Read { sequence: number },
            KIND_CONTROL_WRITE => Op::ControlWrite { sequence: number },
            KIND_CONTROL_FLUSH => Op::ControlFlush { sequence: number },
            KIND_RECOVERY_SYNC if number == 0 => Op::RecoverySync,
            KIND_RECOVERY_READ_AHEAD => Op::RecoveryReadAhead { buffer: number },
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_operation_decodes_to_itself() {
        for number in [0, 1, 2, 1 << 20, OP_NUMBER_MAX] {
            let ops = [
                Op::BatchWrite { sequence: number },
                Op::BatchFlush { sequence: number },
                Op::Read { sequence: number },
                Op::ControlWrite { sequence: number },
                Op::ControlFlush { sequence: number },
                Op::RecoveryReadAhead { buffer: number },
            ];
            for op in ops {
                assert_eq!(Op::from_tag(op.tag()), Some(op), "{op:?}");
            }
        }
        assert_eq!(Op::from_tag(Op::RecoverySync.tag()), Some(Op::RecoverySync));
    }

    #[test]
    fn a_tag_of_no_operation_decodes_to_none() {
        assert_eq!(Op::from_tag(7), None);
        assert_eq!(Op::from_tag(1 << KIND_BITS | KIND_RECOVERY_SYNC), None);
        assert_eq!(Op::from_tag(u64::MAX), None);
    }
}
