//! The replicated log on real file rings: three rings, a LogDriveStore on each (a drive
//! thread each), segments whose data and seal bits are quorums of three LogDrives (write
//! quorum two), one per ring, and the MetaStore on a LogDrive of the first ring. Writers
//! append through VirtualLog handles of their own while the third ring's store is closed
//! and opened again under them, and the log is reconfigured mid-run; every acknowledged
//! append then reads back at its position, no position is given twice, and once settled
//! every replica of a sealed segment holds the same bytes below its stop.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock};
use std::thread;
use std::time::Duration;

use bytes::Bytes;
use sealog::DriveOptions;
use sealog_logdrive::{
    wait, Length, LogDrive, LogDriveError, LogDriveStore, OpFuture, QuorumLogDrive, QuorumOptions,
    ReadOutcome, TailDesc,
};
use sealog_vlog::{
    AtomicOptions, DriveLogletFactory, LogDriveMetaStore, LogletConfig, LogletDrives, VirtualLog,
    VirtualOptions,
};

const RINGS: usize = 3;
const WRITERS: u64 = 3;
const APPENDS_PER_WRITER: u64 = 150;

/// A replica that follows its ring's store across a close and a reopen.
struct Replica {
    id: u64,
    current: RwLock<Arc<dyn LogDrive>>,
}

impl Replica {
    fn drive(&self) -> Arc<dyn LogDrive> {
        self.current.read().unwrap().clone()
    }
}

impl LogDrive for Replica {
    fn write(&self, address: u64, epoch: u64, payload: Bytes) -> OpFuture<()> {
        self.drive().write(address, epoch, payload)
    }
    fn read(&self, address: u64) -> OpFuture<ReadOutcome> {
        self.drive().read(address)
    }
    fn weak_tail(&self, k: u64) -> OpFuture<TailDesc> {
        self.drive().weak_tail(k)
    }
    fn seal(&self, length: u64, epoch: u64) -> OpFuture<()> {
        self.drive().seal(length, epoch)
    }
    fn fence(&self, epoch: u64) -> OpFuture<()> {
        self.drive().fence(epoch)
    }
    fn trim(&self, upto: u64) -> OpFuture<()> {
        self.drive().trim(upto)
    }
    fn length(&self) -> OpFuture<Length> {
        self.drive().length()
    }
    fn write_window_max(&self) -> u64 {
        self.drive().write_window_max()
    }
}

/// The three rings, their stores, and every replica made on them.
struct Rings {
    _directory: tempfile::TempDir,
    paths: Vec<std::path::PathBuf>,
    stores: Vec<Mutex<LogDriveStore>>,
    replicas: Mutex<Vec<(usize, Arc<Replica>)>>,
}

impl Rings {
    fn new() -> Arc<Rings> {
        let directory = tempfile::tempdir().expect("temporary directory");
        let paths: Vec<_> = (0..RINGS)
            .map(|ring| directory.path().join(format!("ring-{ring}")))
            .collect();
        let stores = paths
            .iter()
            .map(|path| {
                sealog::format(path, &sealog::FormatOptions::new(64 << 20)).expect("format");
                Mutex::new(LogDriveStore::open(path, DriveOptions::default()).expect("open"))
            })
            .collect();
        Arc::new(Rings {
            _directory: directory,
            paths,
            stores,
            replicas: Mutex::new(Vec::new()),
        })
    }

    /// LogDrive `id` on ring `ring`, created if new; while the ring's store is closed for
    /// its restart, once it is open again.
    fn replica(&self, ring: usize, id: u64) -> Arc<Replica> {
        let drive = loop {
            let store = self.stores[ring].lock().unwrap().clone();
            let made = match store.get(id) {
                Ok(drive) => Ok(drive),
                Err(_) => wait(store.create(id, 1 << 40)),
            };
            match made {
                Ok(drive) => break drive,
                // Another handle made it meanwhile: the next look gets it.
                Err(LogDriveError::Exists { .. }) => continue,
                Err(error) if error.is_definite() => {
                    panic!("LogDrive {id} on ring {ring}: {error}")
                }
                Err(_) => thread::sleep(Duration::from_millis(5)),
            }
        };
        let replica = Arc::new(Replica {
            id,
            current: RwLock::new(Arc::new(drive)),
        });
        self.replicas.lock().unwrap().push((ring, replica.clone()));
        replica
    }

    /// A quorum of LogDrive `id` on every ring.
    fn quorum(&self, id: u64) -> Arc<dyn LogDrive> {
        let children = (0..RINGS)
            .map(|ring| self.replica(ring, id) as Arc<dyn LogDrive>)
            .collect();
        Arc::new(QuorumLogDrive::new(children, 2, QuorumOptions::default()).expect("quorum"))
    }

    /// Closes ring `ring`'s store, waits, opens it again and moves its replicas over.
    fn restart(&self, ring: usize, down_for: Duration) {
        self.stores[ring].lock().unwrap().close();
        thread::sleep(down_for);
        let store = LogDriveStore::open(&self.paths[ring], DriveOptions::default()).expect("open");
        for (on, replica) in self.replicas.lock().unwrap().iter() {
            if *on == ring {
                let drive = store
                    .get(replica.id)
                    .expect("the replica survives the restart");
                *replica.current.write().unwrap() = Arc::new(drive);
            }
        }
        *self.stores[ring].lock().unwrap() = store;
    }
}

fn factory(rings: &Arc<Rings>) -> Arc<DriveLogletFactory> {
    let build_rings = rings.clone();
    let build = move |config: &LogletConfig| {
        Ok(LogletDrives {
            data: build_rings.quorum(config.id * 2),
            seal: build_rings.quorum(config.id * 2 + 1),
        })
    };
    let next = |config: &LogletConfig| LogletConfig {
        id: config.id + 1,
        spec: config.spec.clone(),
    };
    let options = AtomicOptions {
        window: 32,
        ..AtomicOptions::default()
    };
    Arc::new(DriveLogletFactory::new(
        Box::new(build),
        Box::new(next),
        options,
    ))
}

fn payload(writer: u64, i: u64) -> Bytes {
    Bytes::from(format!("writer {writer} entry {i}"))
}

#[test]
fn a_replicated_log_on_three_rings_survives_a_ring_restart() {
    let rings = Rings::new();
    let factory = factory(&rings);
    let meta_drive: Arc<dyn LogDrive> = rings.replica(0, 1);
    let handle = |proposer: u64| {
        let meta = Arc::new(LogDriveMetaStore::new(meta_drive.clone(), proposer));
        let first = LogletConfig {
            id: 10,
            spec: Bytes::from_static(b"quorum of three"),
        };
        let options = VirtualOptions::default();
        Arc::new(wait(VirtualLog::create(meta, factory.clone(), first, options)).expect("log"))
    };
    let writers: Vec<_> = (0..WRITERS)
        .map(|writer| {
            let log = handle(writer + 1);
            thread::spawn(move || {
                // Paced, so that appends run before, during and after the restart and the
                // reconfiguration.
                (0..APPENDS_PER_WRITER)
                    .map(|i| {
                        thread::sleep(Duration::from_millis(1));
                        (wait(log.append(payload(writer, i))).expect("append"), i)
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    thread::sleep(Duration::from_millis(30));
    rings.restart(2, Duration::from_millis(50));
    let reconfigurer = handle(100);
    let next = LogletConfig {
        id: 20,
        spec: Bytes::from_static(b"quorum of three"),
    };
    wait(reconfigurer.reconfig_extend(next)).expect("reconfigure");
    let mut acknowledged = BTreeMap::new();
    for (writer, appends) in writers.into_iter().enumerate() {
        for (position, i) in appends.join().expect("writer") {
            let before = acknowledged.insert(position, payload(writer as u64, i));
            assert!(before.is_none(), "position {position} given twice");
        }
    }
    check(&rings, &reconfigurer, &acknowledged);
}

/// Every acknowledged append reads back; once settled, the sealed segment's replicas hold
/// the same bytes below its stop.
fn check(rings: &Rings, log: &VirtualLog, acknowledged: &BTreeMap<u64, Bytes>) {
    let total = WRITERS * APPENDS_PER_WRITER;
    assert_eq!(acknowledged.len() as u64, total);
    assert!(wait(log.check_tail()).expect("tail") >= total);
    for (position, bytes) in acknowledged {
        assert_eq!(
            wait(log.read(*position)).expect("read").as_ref(),
            Some(bytes)
        );
    }
    wait(log.settle()).expect("settle");
    let chain = wait(log.refresh()).expect("chain");
    let sealed = &chain.segments[0];
    let length = sealed.stop.expect("sealed") - sealed.start;
    assert!(
        length > 0 && length < total,
        "both segments took appends: {chain:?}"
    );
    let mut held: HashMap<usize, Vec<ReadOutcome>> = HashMap::new();
    for (ring, replica) in rings.replicas.lock().unwrap().iter() {
        if replica.id == sealed.loglet.id * 2 {
            let drive = replica.drive();
            let outcomes = (0..length)
                .map(|a| wait(drive.read(a)).expect("read"))
                .collect();
            held.insert(*ring, outcomes);
        }
    }
    assert_eq!(held.len(), RINGS);
    assert!(held.values().all(|outcomes| *outcomes == held[&0]));
    assert!(held[&0]
        .iter()
        .all(|outcome| matches!(outcome, ReadOutcome::Value(_))));
}
