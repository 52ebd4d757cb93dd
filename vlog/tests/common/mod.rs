//! What the log tests share: loglets on in-memory LogDrives, kept by id so that a test can
//! reach a loglet's replicas, and VirtualLog handles over one MetaStore drive.

#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use sealog_logdrive::{wait, LogDrive, MemLogDrive, SystemClock};
use sealog_vlog::{
    AtomicOptions, DriveLogletFactory, LogDriveMetaStore, LogletConfig, LogletDrives, VirtualLog,
    VirtualOptions,
};

/// One loglet's in-memory drives.
#[derive(Clone)]
pub struct MemLoglet {
    pub data: Arc<MemLogDrive>,
    pub seal: Arc<MemLogDrive>,
}

/// Loglets by id, made on first use.
#[derive(Clone, Default)]
pub struct Loglets(Arc<Mutex<HashMap<u64, MemLoglet>>>);

impl Loglets {
    pub fn get(&self, id: u64) -> MemLoglet {
        self.0
            .lock()
            .unwrap()
            .entry(id)
            .or_insert_with(|| MemLoglet {
                data: Arc::new(MemLogDrive::new()),
                seal: Arc::new(MemLogDrive::new()),
            })
            .clone()
    }
}

/// A loglet configuration on memory drive set `id`.
pub fn config(id: u64) -> LogletConfig {
    LogletConfig {
        id,
        spec: Bytes::from(format!("memory {id}")),
    }
}

pub fn atomic_options(window: u64, slot_deadline: Duration) -> AtomicOptions {
    AtomicOptions {
        window,
        slot_deadline,
        retry_after: Duration::from_millis(1),
        ..AtomicOptions::default()
    }
}

/// A factory over `loglets`; a successor takes the next id.
pub fn factory(loglets: &Loglets, options: AtomicOptions) -> Arc<DriveLogletFactory> {
    let loglets = loglets.clone();
    Arc::new(DriveLogletFactory::new(
        Box::new(move |config: &LogletConfig| {
            let loglet = loglets.get(config.id);
            Ok(LogletDrives {
                data: loglet.data as Arc<dyn LogDrive>,
                seal: loglet.seal as Arc<dyn LogDrive>,
            })
        }),
        Box::new(|config: &LogletConfig| crate::common::config(config.id + 1)),
        options,
    ))
}

pub fn virtual_options(roll_forward_after: Duration) -> VirtualOptions {
    VirtualOptions {
        roll_forward_after,
        poll_interval: Duration::from_millis(1),
        attempts_max: 16,
        clock: Arc::new(SystemClock),
    }
}

/// A VirtualLog world: the MetaStore's drive, the loglets and one factory (the sequencers).
pub struct World {
    pub meta_drive: Arc<MemLogDrive>,
    pub loglets: Loglets,
    pub factory: Arc<DriveLogletFactory>,
    pub options: VirtualOptions,
}

impl World {
    pub fn new(atomic: AtomicOptions, options: VirtualOptions) -> World {
        let loglets = Loglets::default();
        World {
            meta_drive: Arc::new(MemLogDrive::new()),
            factory: factory(&loglets, atomic),
            loglets,
            options,
        }
    }

    /// The handle of client `client` (its MetaStore proposer id), creating the log on
    /// loglet 1 if it has none.
    pub fn client(&self, client: u64) -> VirtualLog {
        let meta = Arc::new(LogDriveMetaStore::new(self.meta_drive.clone(), client));
        wait(VirtualLog::create(
            meta,
            self.factory.clone(),
            config(1),
            self.options.clone(),
        ))
        .unwrap()
    }
}

pub fn payload(i: u64) -> Bytes {
    Bytes::from(format!("entry {i}"))
}

/// A LogDrive that runs a hook once, before its next read: to land a seal between an
/// append's completion and its seal check.
pub struct HookDrive {
    pub inner: Arc<dyn LogDrive>,
    pub before_read: Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

impl HookDrive {
    pub fn new(inner: Arc<dyn LogDrive>) -> HookDrive {
        HookDrive {
            inner,
            before_read: Mutex::new(None),
        }
    }

    pub fn on_next_read(&self, hook: impl FnOnce() + Send + 'static) {
        *self.before_read.lock().unwrap() = Some(Box::new(hook));
    }
}

impl LogDrive for HookDrive {
    fn write(&self, address: u64, epoch: u64, payload: Bytes) -> sealog_logdrive::OpFuture<()> {
        self.inner.write(address, epoch, payload)
    }
    fn read(&self, address: u64) -> sealog_logdrive::OpFuture<sealog_logdrive::ReadOutcome> {
        if let Some(hook) = self.before_read.lock().unwrap().take() {
            hook();
        }
        self.inner.read(address)
    }
    fn weak_tail(&self, k: u64) -> sealog_logdrive::OpFuture<sealog_logdrive::TailDesc> {
        self.inner.weak_tail(k)
    }
    fn seal(&self, length: u64, epoch: u64) -> sealog_logdrive::OpFuture<()> {
        self.inner.seal(length, epoch)
    }
    fn fence(&self, epoch: u64) -> sealog_logdrive::OpFuture<()> {
        self.inner.fence(epoch)
    }
    fn trim(&self, upto: u64) -> sealog_logdrive::OpFuture<()> {
        self.inner.trim(upto)
    }
    fn length(&self) -> sealog_logdrive::OpFuture<sealog_logdrive::Length> {
        self.inner.length()
    }
    fn write_window_max(&self) -> u64 {
        self.inner.write_window_max()
    }
}

/// One loglet's replicas: its data quorum's and its seal quorum's children.
#[derive(Clone)]
pub struct QuorumLoglet {
    pub data: Vec<Arc<MemLogDrive>>,
    pub seal: Vec<Arc<MemLogDrive>>,
}

/// Quorum loglets by id, `replicas` children each, written with `write_quorum`.
#[derive(Clone)]
pub struct QuorumLoglets {
    pub replicas: usize,
    pub write_quorum: usize,
    pub made: Arc<Mutex<HashMap<u64, QuorumLoglet>>>,
}

impl QuorumLoglets {
    pub fn new(replicas: usize, write_quorum: usize) -> QuorumLoglets {
        QuorumLoglets {
            replicas,
            write_quorum,
            made: Arc::default(),
        }
    }

    pub fn get(&self, id: u64) -> QuorumLoglet {
        let fresh = || {
            (0..self.replicas)
                .map(|_| Arc::new(MemLogDrive::new()))
                .collect()
        };
        self.made
            .lock()
            .unwrap()
            .entry(id)
            .or_insert_with(|| QuorumLoglet {
                data: fresh(),
                seal: fresh(),
            })
            .clone()
    }

    fn quorum(&self, children: &[Arc<MemLogDrive>]) -> Arc<dyn LogDrive> {
        let children = children
            .iter()
            .map(|c| c.clone() as Arc<dyn LogDrive>)
            .collect();
        let options = sealog_logdrive::QuorumOptions::default();
        Arc::new(
            sealog_logdrive::QuorumLogDrive::new(children, self.write_quorum, options).unwrap(),
        )
    }

    /// A factory over these loglets; a successor takes the next id.
    pub fn factory(&self, options: AtomicOptions) -> Arc<DriveLogletFactory> {
        let loglets = self.clone();
        Arc::new(DriveLogletFactory::new(
            Box::new(move |config: &LogletConfig| {
                let loglet = loglets.get(config.id);
                Ok(LogletDrives {
                    data: loglets.quorum(&loglet.data),
                    seal: loglets.quorum(&loglet.seal),
                })
            }),
            Box::new(|config: &LogletConfig| crate::common::config(config.id + 1)),
            options,
        ))
    }
}

/// A VirtualLog over quorum loglets, its MetaStore on one in-memory drive.
pub struct QuorumWorld {
    pub meta_drive: Arc<MemLogDrive>,
    pub loglets: QuorumLoglets,
    pub factory: Arc<DriveLogletFactory>,
}

impl QuorumWorld {
    pub fn new(replicas: usize, write_quorum: usize) -> QuorumWorld {
        let loglets = QuorumLoglets::new(replicas, write_quorum);
        QuorumWorld {
            meta_drive: Arc::new(MemLogDrive::new()),
            factory: loglets.factory(atomic_options(16, Duration::from_secs(5))),
            loglets,
        }
    }

    pub fn client(&self, client: u64) -> VirtualLog {
        let meta = Arc::new(LogDriveMetaStore::new(self.meta_drive.clone(), client));
        let options = virtual_options(Duration::from_millis(50));
        wait(VirtualLog::create(
            meta,
            self.factory.clone(),
            config(1),
            options,
        ))
        .unwrap()
    }
}
