//! What a server serves: the LogDrives of one store, behind [`Drives`]. A process serves a
//! `LogDriveStore` (the engine's rings); a simulated server serves [`MemDrives`], LogDrives
//! held in memory whose operations complete at once and in call order, so that a seeded
//! simulation of a cluster replays exactly. The service (`service`) sees only the trait.

use std::collections::BTreeMap;
use std::future::ready;
use std::sync::{Arc, Mutex, MutexGuard};

use sealog_logdrive::{LogDrive, LogDriveError, LogDriveStore, MemLogDrive, OpFuture};

/// One live LogDrive of a store: its id, its generation and a handle on it.
#[derive(Clone)]
pub struct Hosted {
    /// The LogDrive's id.
    pub id: u64,
    /// Its generation: a deleted id created again has a higher one.
    pub generation: u64,
    /// The handle.
    pub drive: Arc<dyn LogDrive>,
}

/// The store operations the service needs.
pub trait Drives: Send + Sync {
    /// The live LogDrive `id` (`Missing` when there is none).
    fn get(&self, id: u64) -> Result<Hosted, LogDriveError>;

    /// Creates LogDrive `id` with `capacity` addresses at the store's next generation
    /// (`Exists` while one is live).
    fn create(&self, id: u64, capacity: u64) -> OpFuture<Hosted>;

    /// Deletes the live LogDrive `id`.
    fn delete(&self, id: u64) -> OpFuture<()>;

    /// The ids of the live LogDrives, in order.
    fn ids(&self) -> Result<Vec<u64>, LogDriveError>;
}

impl Drives for LogDriveStore {
    fn get(&self, id: u64) -> Result<Hosted, LogDriveError> {
        let handle = LogDriveStore::get(self, id)?;
        Ok(Hosted {
            id,
            generation: handle.generation(),
            drive: Arc::new(handle),
        })
    }

    fn create(&self, id: u64, capacity: u64) -> OpFuture<Hosted> {
        let created = LogDriveStore::create(self, id, capacity);
        Box::pin(async move {
            let handle = created.await?;
            Ok(Hosted {
                id,
                generation: handle.generation(),
                drive: Arc::new(handle),
            })
        })
    }

    fn delete(&self, id: u64) -> OpFuture<()> {
        LogDriveStore::delete(self, id)
    }

    fn ids(&self) -> Result<Vec<u64>, LogDriveError> {
        LogDriveStore::ids(self)
    }
}

/// A live in-memory LogDrive and its generation.
struct MemEntry {
    generation: u64,
    drive: Arc<MemLogDrive>,
}

#[derive(Default)]
struct MemState {
    live: BTreeMap<u64, MemEntry>,
    /// The highest generation given out, as a store's registry keeps it.
    generation_max: u64,
}

/// LogDrives held in memory (see the module doc). What they hold survives a simulated
/// restart of their server, as a ring's records do; faults are injected on the drives
/// themselves ([`MemDrives::drive`]).
#[derive(Default)]
pub struct MemDrives {
    state: Mutex<MemState>,
}

impl MemDrives {
    /// An empty store.
    pub fn new() -> MemDrives {
        MemDrives::default()
    }

    fn lock(&self) -> MutexGuard<'_, MemState> {
        // Every operation changes the state in one step: a poisoned lock holds a whole one.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The in-memory LogDrive behind the live `id`, and its generation.
    pub fn drive(&self, id: u64) -> Option<(u64, Arc<MemLogDrive>)> {
        let state = self.lock();
        let entry = state.live.get(&id)?;
        Some((entry.generation, Arc::clone(&entry.drive)))
    }
}

fn hosted(id: u64, entry: &MemEntry) -> Hosted {
    Hosted {
        id,
        generation: entry.generation,
        drive: Arc::clone(&entry.drive) as Arc<dyn LogDrive>,
    }
}

impl Drives for MemDrives {
    fn get(&self, id: u64) -> Result<Hosted, LogDriveError> {
        let state = self.lock();
        let entry = state
            .live
            .get(&id)
            .ok_or(LogDriveError::Missing { id, generation: 0 })?;
        Ok(hosted(id, entry))
    }

    fn create(&self, id: u64, capacity: u64) -> OpFuture<Hosted> {
        let mut state = self.lock();
        if state.live.contains_key(&id) {
            return Box::pin(ready(Err(LogDriveError::Exists { id })));
        }
        state.generation_max += 1;
        let entry = MemEntry {
            generation: state.generation_max,
            drive: Arc::new(MemLogDrive::with_limits(
                capacity,
                sealog_logdrive::MEM_WEAK_TAIL_K_MAX,
            )),
        };
        let created = hosted(id, &entry);
        state.live.insert(id, entry);
        Box::pin(ready(Ok(created)))
    }

    fn delete(&self, id: u64) -> OpFuture<()> {
        let removed = self.lock().live.remove(&id);
        Box::pin(ready(match removed {
            Some(_) => Ok(()),
            None => Err(LogDriveError::Missing { id, generation: 0 }),
        }))
    }

    fn ids(&self) -> Result<Vec<u64>, LogDriveError> {
        Ok(self.lock().live.keys().copied().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sealog_logdrive::wait;

    #[test]
    fn a_deleted_id_comes_back_at_a_higher_generation() {
        let drives = MemDrives::new();
        let first = wait(drives.create(7, 64)).expect("created");
        assert!(matches!(
            wait(drives.create(7, 64)),
            Err(LogDriveError::Exists { id: 7 })
        ));
        wait(drives.delete(7)).expect("deleted");
        assert!(matches!(
            drives.get(7),
            Err(LogDriveError::Missing { id: 7, .. })
        ));
        let second = wait(drives.create(7, 64)).expect("created again");
        assert!(second.generation > first.generation);
        assert_eq!(drives.ids().expect("ids"), vec![7]);
        assert_eq!(drives.get(7).expect("live").generation, second.generation);
    }
}
