//! A trace of what a simulated drive did (docs/faults.md, "Crash states"): every
//! write submitted, every write completed with the bytes the medium got, every flush that
//! made writes durable, in the order the device applied them, interleaved with the
//! workload's own marks (an operation issued, an operation done). A [`SimDevice`] records
//! into one when asked ([`SimDevice::record_into`]); the drive thread appends its events and
//! the workload's thread its marks under one lock, so an operation's "done" mark always comes
//! after the flush that made it durable, and its "issued" mark before any write of it.
//!
//! [`TraceDisk`] replays the device's events on a [`SimDisk`] of the same first image: at any
//! index it holds exactly the bytes, durable and unflushed, and the writes in flight that the
//! device had after that many events, so a crash image can be built for every cut point
//! after the run ([`crate::enumerate::crash_image`]).
//!
//! [`SimDevice`]: crate::SimDevice
//! [`SimDevice::record_into`]: crate::SimDevice::record_into

use std::sync::{Arc, Mutex};

use sealog::io::Tag;
use sealog_wal_kit::disk::{FlushCover, SimDisk, WriteDurability};

/// One thing the device or the workload did.
#[derive(Clone, Debug)]
pub enum Event {
    /// A write handed to the device (in flight until it completes).
    Submitted {
        /// Its tag.
        tag: Tag,
        /// Where it goes.
        ring_offset: u64,
        /// What it writes.
        bytes: Arc<Vec<u8>>,
    },
    /// A write completed: what the medium got, if anything (a lost write stores nothing).
    Completed {
        /// Its tag.
        tag: Tag,
        /// What was stored, where, and how durable, as handed to the disk.
        stored: Option<Stored>,
    },
    /// A flush completed: the writes completed through this sequence are durable.
    Flushed {
        /// The disk's completion sequence it covers ([`SimDisk::completed_writes`]).
        through: u64,
    },
    /// The workload issued its operation of this index.
    Issued(usize),
    /// The workload saw its operation of this index done (acknowledged or failed).
    Done(usize),
}

/// A completed write's bytes, as the device handed them to its disk.
#[derive(Clone, Debug)]
pub struct Stored {
    /// Where they landed (another block than the target for a misdirected write).
    pub ring_offset: u64,
    /// What the medium got.
    pub stored: Arc<Vec<u8>>,
    /// What the write meant.
    pub intended: Arc<Vec<u8>>,
    /// Durable at once (RWF_DSYNC) or volatile.
    pub durable: bool,
}

/// The shared trace a device and a workload record into.
#[derive(Debug, Default)]
pub struct Trace {
    events: Mutex<Vec<Event>>,
}

impl Trace {
    /// A new, empty trace to share.
    pub fn new() -> Arc<Trace> {
        Arc::new(Trace::default())
    }

    /// Appends `event`; returns its index.
    pub fn push(&self, event: Event) -> usize {
        let mut events = self.events.lock().unwrap_or_else(|p| p.into_inner());
        events.push(event);
        events.len() - 1
    }

    /// The events recorded so far.
    pub fn len(&self) -> usize {
        self.events.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A copy of the events recorded so far.
    pub fn events(&self) -> Vec<Event> {
        self.events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

/// The device's disk rebuilt from a trace, event by event.
#[derive(Clone, Debug)]
pub struct TraceDisk {
    disk: SimDisk,
    /// The writes submitted and not completed, in submission order.
    in_flight: Vec<(Tag, u64, Arc<Vec<u8>>)>,
    /// Events applied so far.
    applied: usize,
}

impl TraceDisk {
    /// The disk as it was before the first event: `image`, all durable.
    pub fn new(image: Vec<u8>) -> TraceDisk {
        TraceDisk {
            disk: SimDisk::new(image),
            in_flight: Vec::new(),
            applied: 0,
        }
    }

    /// Applies the events up to (not including) `index`, from where it stands.
    pub fn advance_to(&mut self, events: &[Event], index: usize) {
        assert!(index >= self.applied, "a trace disk only moves forward");
        for event in &events[self.applied..index] {
            self.apply(event);
        }
        self.applied = index;
    }

    fn apply(&mut self, event: &Event) {
        match event {
            Event::Submitted {
                tag,
                ring_offset,
                bytes,
            } => self.in_flight.push((*tag, *ring_offset, Arc::clone(bytes))),
            Event::Completed { tag, stored } => {
                self.in_flight.retain(|(flying, ..)| flying != tag);
                if let Some(stored) = stored {
                    let durability = if stored.durable {
                        WriteDurability::Durable
                    } else {
                        WriteDurability::Volatile
                    };
                    self.disk
                        .write_stored(
                            stored.ring_offset,
                            &stored.stored,
                            &stored.intended,
                            durability,
                        )
                        .expect("the device checked the write against its disk");
                }
            }
            Event::Flushed { through } => {
                self.disk.flush(FlushCover::Through(*through));
            }
            Event::Issued(_) | Event::Done(_) => {}
        }
    }

    /// The disk now: durable bytes and the completed writes not yet flushed.
    pub fn disk(&self) -> &SimDisk {
        &self.disk
    }

    /// The writes on the device now (ring offset, bytes), in submission order.
    pub fn in_flight(&self) -> Vec<(u64, Vec<u8>)> {
        self.in_flight
            .iter()
            .map(|(_, offset, bytes)| (*offset, bytes.as_ref().clone()))
            .collect()
    }
}
