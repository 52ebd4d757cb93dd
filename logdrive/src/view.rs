//! A read-only look at a ring's LogDrive store, for an operator's tools (`sealog logdrive`):
//! [`StoreView`] rebuilds every LogDrive with the same replay pass a writable open makes, over
//! a reader that holds the ring's shared lock and writes nothing. No control block or tail
//! marker is written and no reclaimer runs, so the next process to open the ring finds it as
//! its last writer left it. Values are read by a second pass over the same reader, which
//! keeps the lock between the passes, so both see one ring.

use std::collections::{BTreeSet, HashMap};
use std::ops::Range;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use sealog::reader::RingReader;
use sealog::{EntryRef, OpenError, RecoveryMode, RecoveryReport, RingPurpose, ScanPolicy};

use crate::api::{Length, LogDriveError, ReadOutcome, TailDesc};
use crate::options::{StoreOptions, WEAK_TAIL_K_MAX_DEFAULT};
use crate::replay::{DamageFound, Replay};
use crate::state::{LogState, Lookup};

/// Why a view could not be made or read.
#[derive(Debug, thiserror::Error)]
pub enum ViewError {
    /// The ring did not open or replay (a strict replay that met corruption among them).
    #[error(transparent)]
    Open(#[from] OpenError),
    /// The ring's control block does not mark it as holding a LogDrive store.
    #[error(
        "{path}: the ring holds no LogDrive store (its control block marks it for {purpose}; \
         `sealog format --logdrive` makes one)"
    )]
    NotAStore {
        /// The ring.
        path: PathBuf,
        /// The purpose it is marked for.
        purpose: &'static str,
    },
    /// The LogDrive refused the operation (`Missing`, `OutOfRange`, `InvalidWindow`,
    /// `Damaged`), as a live store would.
    #[error(transparent)]
    LogDrive(#[from] LogDriveError),
    /// A read of more addresses than one call answers (each is looked up, and its value
    /// held, before any is handed back).
    #[error("a read of {count} addresses is over the {max} one read answers")]
    TooManyAddresses {
        /// The addresses asked for.
        count: u64,
        /// The most one read answers.
        max: u64,
    },
}

/// The most addresses one [`StoreView::read`] answers.
pub const READ_ADDRESSES_MAX: u64 = 1 << 20;

/// One LogDrive as the ring holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DriveSummary {
    /// Its id.
    pub id: u64,
    /// Its generation.
    pub generation: u64,
    /// Its addresses lie below this.
    pub capacity: u64,
    /// N, T, the sealed length, the fence epoch and the trim point, as durable.
    pub length: Length,
    /// Unwritten addresses in [T, N).
    pub holes: u64,
    /// Addresses holding a value (or a damaged one).
    pub values: u64,
    /// Records it needs: its values' and those holding its creation, seal, fence and trim
    /// point.
    pub records: u64,
    /// The ring bytes of those records, headers included.
    pub bytes: u64,
    /// Addresses whose record failed its checks.
    pub damaged: BTreeSet<u64>,
    /// Addresses a record that lost its header may have held (its tails are unknown until
    /// they are repaired or it is sealed).
    pub suspects: Vec<Range<u64>>,
    /// The LSN of the oldest record it needs: the ring's head cannot pass it.
    pub oldest_lsn: Option<u64>,
}

/// A ring's LogDrive store, read-only.
pub struct StoreView {
    reader: RingReader,
    mode: RecoveryMode,
    scan: ScanPolicy,
    report: RecoveryReport,
    drives: HashMap<u64, LogState>,
    damage: Vec<DamageFound>,
    skipped: u64,
    generation_max: u64,
}

impl StoreView {
    /// Replays the ring at `path` under its shared lock, in `mode` (strict, or quarantine to
    /// step over damage and report it); `scan` full reads past the recorded tail hint too.
    /// Damage whose headers are gone is judged against the default store's write window.
    pub fn open(path: &Path, mode: RecoveryMode, scan: ScanPolicy) -> Result<StoreView, ViewError> {
        StoreView::from_reader(path, RingReader::open(path)?, mode, scan)
    }

    /// [`StoreView::open`] over a reader however it was opened (`sealog stat` opens the
    /// ring without its lock, and counts LogDrives that may be a moment old).
    pub fn from_reader(
        path: &Path,
        mut reader: RingReader,
        mode: RecoveryMode,
        scan: ScanPolicy,
    ) -> Result<StoreView, ViewError> {
        let control = reader.control()?;
        if control.purpose != RingPurpose::LogDriveStore {
            return Err(ViewError::NotAStore {
                path: path.to_path_buf(),
                purpose: control.purpose.name(),
            });
        }
        let mut replay = Replay::new(StoreOptions::default().write_window_max);
        let report = reader.replay_visiting(mode, scan, &mut replay)?;
        let rebuilt = replay.finish();
        Ok(StoreView {
            reader,
            mode,
            scan,
            report,
            drives: rebuilt.live,
            damage: rebuilt.damage,
            skipped: rebuilt.skipped,
            generation_max: rebuilt.generation_max,
        })
    }

    /// What the replay found (LSNs, entries, the damage's outcome).
    pub fn report(&self) -> &RecoveryReport {
        &self.report
    }

    /// The damage a quarantine replay stepped over, in LSN order.
    pub fn damage(&self) -> &[DamageFound] {
        &self.damage
    }

    /// Entries that took no effect on any live LogDrive.
    pub fn skipped_records(&self) -> u64 {
        self.skipped
    }

    /// The highest generation the store has issued.
    pub fn generation_max(&self) -> u64 {
        self.generation_max
    }

    /// The live LogDrives' ids, in order.
    pub fn ids(&self) -> Vec<u64> {
        let mut ids: Vec<u64> = self.drives.keys().copied().collect();
        ids.sort_unstable();
        ids
    }

    fn drive(&mut self, id: u64) -> Result<&mut LogState, LogDriveError> {
        self.drives
            .get_mut(&id)
            .ok_or(LogDriveError::Missing { id, generation: 0 })
    }

    /// LogDrive `id` (`Missing` when the ring holds none).
    pub fn summary(&mut self, id: u64) -> Result<DriveSummary, LogDriveError> {
        let state = self.drive(id)?;
        let length = state.length()?;
        let acknowledged = state
            .slots
            .range(length.t..length.n)
            .filter(|(_, slot)| slot.acknowledged())
            .count() as u64;
        Ok(DriveSummary {
            id,
            generation: state.generation,
            capacity: state.capacity,
            length,
            holes: (length.n - length.t) - acknowledged,
            values: state.slots.len() as u64,
            records: state.slots.len() as u64 + state.holders.count(),
            bytes: state.live_bytes(),
            damaged: state.damaged_addresses(),
            suspects: state.open_suspects().map(|s| s.addresses.clone()).collect(),
            oldest_lsn: state.advance_bound(),
        })
    }

    /// Every live LogDrive, by id.
    pub fn summaries(&mut self) -> Vec<DriveSummary> {
        let ids = self.ids();
        ids.into_iter()
            .filter_map(|id| self.summary(id).ok())
            .collect()
    }

    /// weakTail(k) of LogDrive `id`, with the default store's bound on k.
    pub fn weak_tail(&mut self, id: u64, k: u64) -> Result<TailDesc, LogDriveError> {
        self.drive(id)?.weak_tail(k, WEAK_TAIL_K_MAX_DEFAULT)
    }

    /// What reads of LogDrive `id` at `addresses` answer, address by address: the values
    /// come from a second pass over the ring. An address at or past the capacity is
    /// `OutOfRange`, as a live read would be.
    pub fn read(
        &mut self,
        id: u64,
        addresses: Range<u64>,
    ) -> Result<Vec<(u64, ReadOutcome)>, ViewError> {
        let count = addresses.end.saturating_sub(addresses.start);
        if count > READ_ADDRESSES_MAX {
            let max = READ_ADDRESSES_MAX;
            return Err(ViewError::TooManyAddresses { count, max });
        }
        let state = self.drive(id)?;
        let lookups = addresses
            .map(|address| state.lookup(address).map(|lookup| (address, lookup)))
            .collect::<Result<Vec<_>, _>>()?;
        let mut wanted: HashMap<u64, Option<Bytes>> = lookups
            .iter()
            .filter_map(|(_, lookup)| match lookup {
                Lookup::Record(lsn) => Some((*lsn, None)),
                _ => None,
            })
            .collect();
        if !wanted.is_empty() {
            let mut collect = |entry: &EntryRef<'_>| {
                if let Some(value) = wanted.get_mut(&entry.lsn) {
                    *value = Some(Bytes::copy_from_slice(entry.payload));
                }
            };
            let (mode, scan) = (self.mode, self.scan);
            self.reader.replay_visiting(mode, scan, &mut collect)?;
        }
        Ok(lookups
            .into_iter()
            .map(|(address, lookup)| (address, outcome(lookup, &wanted)))
            .collect())
    }
}

/// A read's outcome for `lookup`, with the values the second pass found. A record the first
/// pass named and the second did not find reads `Damaged`: the ring is held under the lock
/// between the passes, so that would take a device that changed under it.
fn outcome(lookup: Lookup, values: &HashMap<u64, Option<Bytes>>) -> ReadOutcome {
    match lookup {
        Lookup::Trimmed { first } => ReadOutcome::Trimmed { first },
        Lookup::Unwritten => ReadOutcome::Unwritten,
        Lookup::Damaged => ReadOutcome::Damaged,
        Lookup::Record(lsn) => match values.get(&lsn) {
            Some(Some(value)) => ReadOutcome::Value(value.clone()),
            _ => ReadOutcome::Damaged,
        },
    }
}
