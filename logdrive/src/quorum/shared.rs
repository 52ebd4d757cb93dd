//! What a quorum's handle and its operations' futures share ([`Shared`]): the children, the
//! quorum sizes and options, the order children are asked in, and what the handle remembers
//! between calls: the epoch repairs write with, the fence it set and which children took
//! it, and the seal it made and which children are still owed it.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use super::options::{QuorumOptions, Sizes};
use crate::api::LogDrive;

/// The children, the sizes, the options and the remembered state; the futures that outlive
/// a call (they are `'static`) hold it by `Arc`.
pub(crate) struct Shared {
    pub(crate) children: Vec<Arc<dyn LogDrive>>,
    pub(crate) sizes: Sizes,
    pub(crate) options: QuorumOptions,
    /// Where the next preferred order starts, so that reads spread over the children.
    rotation: AtomicUsize,
    /// Every slot below it is held by at least Qw children: the highest T a window scan of
    /// this handle returned (write-once slots stay held).
    durable_below: AtomicU64,
    memory: Mutex<Memory>,
}

/// A fence this handle set: its epoch and the children known to hold it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Fence {
    pub(crate) epoch: u64,
    pub(crate) acked: BTreeSet<usize>,
}

/// A seal this handle made, and the children that did not take it yet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SealMade {
    pub(crate) stop: u64,
    pub(crate) epoch: u64,
    pub(crate) owed: BTreeSet<usize>,
}

#[derive(Debug, Default)]
struct Memory {
    /// The highest epoch this handle wrote, fenced or sealed with: what repairs write with.
    repair_epoch: u64,
    fence: Option<Fence>,
    seal: Option<SealMade>,
}

impl Shared {
    pub(crate) fn new(
        children: Vec<Arc<dyn LogDrive>>,
        sizes: Sizes,
        options: QuorumOptions,
    ) -> Shared {
        Shared {
            children,
            sizes,
            options,
            rotation: AtomicUsize::new(0),
            durable_below: AtomicU64::new(0),
            memory: Mutex::new(Memory::default()),
        }
    }

    fn memory(&self) -> MutexGuard<'_, Memory> {
        // Every change below is one assignment, so a poisoned lock holds a whole state.
        self.memory
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Every child, in the preferred order of this call: a rotation, so that the first Qr
    /// children asked differ from call to call.
    pub(crate) fn order(&self) -> Vec<usize> {
        let replicas = self.sizes.replicas;
        let start = self.rotation.fetch_add(1, Ordering::Relaxed) % replicas;
        (start..replicas).chain(0..start).collect()
    }

    /// Notes that every slot below `t` is held by at least Qw children.
    pub(crate) fn note_durable(&self, t: u64) {
        self.durable_below.fetch_max(t, Ordering::Relaxed);
    }

    /// Whether `address` is known to be held by at least Qw children.
    pub(crate) fn durable(&self, address: u64) -> bool {
        address < self.durable_below.load(Ordering::Relaxed)
    }

    /// Notes an epoch the handle was called with: repairs write with the highest one.
    pub(crate) fn note_epoch(&self, epoch: u64) {
        let mut memory = self.memory();
        memory.repair_epoch = memory.repair_epoch.max(epoch);
    }

    /// The epoch repairs write with.
    pub(crate) fn repair_epoch(&self) -> u64 {
        self.memory().repair_epoch
    }

    /// The fence this handle set, if any.
    pub(crate) fn fence(&self) -> Option<Fence> {
        self.memory().fence.clone()
    }

    /// Notes that `acked` took a fence at `epoch`: a higher epoch replaces what was known,
    /// the same one adds to it, a lower one is forgotten.
    pub(crate) fn note_fence(&self, epoch: u64, acked: impl IntoIterator<Item = usize>) {
        let mut memory = self.memory();
        let fence = memory.fence.get_or_insert(Fence {
            epoch,
            acked: BTreeSet::new(),
        });
        if epoch > fence.epoch {
            *fence = Fence {
                epoch,
                acked: BTreeSet::new(),
            };
        }
        if epoch == fence.epoch {
            fence.acked.extend(acked);
        }
    }

    /// The seal this handle made, if any.
    pub(crate) fn seal(&self) -> Option<SealMade> {
        self.memory().seal.clone()
    }

    /// Notes a seal at `stop` and which children still owe it.
    pub(crate) fn note_seal(&self, stop: u64, epoch: u64, owed: BTreeSet<usize>) {
        self.memory().seal = Some(SealMade { stop, epoch, owed });
    }

    /// Notes that `child` took the seal.
    pub(crate) fn note_sealed(&self, child: usize) {
        if let Some(seal) = self.memory().seal.as_mut() {
            seal.owed.remove(&child);
        }
    }
}
