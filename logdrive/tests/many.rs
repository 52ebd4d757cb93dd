//! Many LogDrives on one drive: 1,000 of them, eight writer threads each pipelining writes
//! across its share (every write of a round in flight before any is waited for), then every
//! LogDrive tailed and read, before and after a restart.

mod common;

use common::{create, open, payload, read, ring, tail, value};
use sealog_logdrive::{wait, LocalLogDrive, LogDrive, TailDesc};

const DRIVES: u64 = 1_000;
const WRITERS: u64 = 8;
const ADDRESSES: u64 = 8;

/// Writes every address of every LogDrive in `share`, a round of all of them in flight at a
/// time, highest address first within the K window so holes come and go.
fn write_share(share: &[LocalLogDrive]) {
    for address in (0..ADDRESSES).rev() {
        let in_flight: Vec<_> = share
            .iter()
            .map(|drive| drive.write(address, 1, payload(drive.id(), address)))
            .collect();
        for future in in_flight {
            wait(future).unwrap();
        }
    }
}

fn check_all(store: &sealog_logdrive::LogDriveStore) {
    assert_eq!(store.ids().expect("ids").len() as u64, DRIVES);
    for id in 0..DRIVES {
        let drive = store.get(id).unwrap();
        let expect = TailDesc {
            n: ADDRESSES,
            holes: Default::default(),
            holes_below_window: false,
        };
        assert_eq!(tail(&drive, ADDRESSES), expect);
        for address in [0, ADDRESSES - 1] {
            assert_eq!(read(&drive, address), value(&payload(id, address)));
        }
    }
}

#[test]
fn a_thousand_logdrives_with_eight_concurrent_writers() {
    let ring = ring();
    let store = open(&ring);
    let drives: Vec<LocalLogDrive> = (0..DRIVES).map(|id| create(&store, id)).collect();
    let started = std::time::Instant::now();
    std::thread::scope(|scope| {
        for share in drives.chunks((DRIVES / WRITERS) as usize) {
            scope.spawn(move || write_share(share));
        }
    });
    let elapsed = started.elapsed();
    println!(
        "{} writes on {DRIVES} LogDrives by {WRITERS} writers in {elapsed:?}",
        DRIVES * ADDRESSES
    );
    check_all(&store);
    let durable = wait(drives[0].length()).unwrap();
    assert_eq!((durable.n, durable.t), (ADDRESSES, ADDRESSES));
    drop(drives);
    store.close();
    drop(store);
    let store = open(&ring);
    check_all(&store);
}
