//! What the LogDrive tests share: a formatted file ring in a temporary directory, opening a
//! store on it, and blocking forms of the operations.

#![allow(dead_code)]

use std::path::PathBuf;

use bytes::Bytes;
use sealog::DriveOptions;
use sealog_logdrive::{wait, LogDrive, LogDriveError, LogDriveStore, ReadOutcome, TailDesc};

/// A 64 MiB file ring in a temporary directory.
pub struct Ring {
    _directory: tempfile::TempDir,
    pub path: PathBuf,
}

impl Ring {
    /// A ring formatted at `path` inside `directory`, which it keeps.
    pub fn from_parts(directory: tempfile::TempDir, path: PathBuf) -> Ring {
        Ring {
            _directory: directory,
            path,
        }
    }
}

/// A freshly formatted ring.
pub fn ring() -> Ring {
    let directory = tempfile::tempdir().expect("temporary directory");
    let path = directory.path().join("ring");
    sealog::format(&path, &sealog::FormatOptions::new(64 << 20)).expect("format");
    Ring {
        _directory: directory,
        path,
    }
}

/// Opens (or reopens) the store on `ring`.
pub fn open(ring: &Ring) -> LogDriveStore {
    LogDriveStore::open(&ring.path, DriveOptions::default()).expect("open")
}

/// Creates LogDrive `id` with a large capacity and waits for it.
pub fn create(store: &LogDriveStore, id: u64) -> sealog_logdrive::LocalLogDrive {
    wait(store.create(id, 1 << 40)).expect("create")
}

/// The payload the tests write at `address` of LogDrive `id`.
pub fn payload(id: u64, address: u64) -> Bytes {
    Bytes::from(format!("logdrive {id} address {address}"))
}

pub fn write(
    drive: &dyn LogDrive,
    address: u64,
    epoch: u64,
    bytes: &[u8],
) -> Result<(), LogDriveError> {
    wait(drive.write(address, epoch, Bytes::copy_from_slice(bytes)))
}

pub fn read(drive: &dyn LogDrive, address: u64) -> ReadOutcome {
    wait(drive.read(address)).expect("read")
}

pub fn value(bytes: &[u8]) -> ReadOutcome {
    ReadOutcome::Value(Bytes::copy_from_slice(bytes))
}

pub fn tail(drive: &dyn LogDrive, k: u64) -> TailDesc {
    wait(drive.weak_tail(k)).expect("weak_tail")
}

pub fn holes(addresses: &[u64]) -> std::collections::BTreeSet<u64> {
    addresses.iter().copied().collect()
}
