//! The VirtualLog over quorums of in-memory replicas: the Azure stream layer's partition load
//! and primary-chosen offsets (AZ-5, AZ-6), a zombie writer after a fence at a newer epoch
//! (ZW-1), and a damaged record on one replica that the log reads past and repairs.

mod common;

use std::sync::Arc;
use std::thread;

use common::{payload, QuorumWorld};
use sealog_logdrive::{wait, LogDrive, LogDriveError, ReadOutcome};

/// Every replica of `children` reads the same below `stop`, and nothing at or past it.
fn identical_below(children: &[Arc<sealog_logdrive::MemLogDrive>], stop: u64) {
    let first = children[0].contents();
    assert_eq!(first.len() as u64, stop);
    assert!(first.keys().all(|address| *address < stop));
    for child in children {
        assert_eq!(child.contents(), first);
    }
}

/// AZ-5: at a partition's load the last segment's replicas differ (one missed appends while
/// unreachable). The loader seals the segment and replays only below the recorded stop, from
/// replicas the seal made identical, never from the stale one as it was.
#[test]
fn az_5_a_load_seals_the_last_segment_and_replays_below_its_stop() {
    let world = QuorumWorld::new(3, 2);
    let writer = world.client(1);
    let loglet = world.loglets.get(1);
    for i in 0..5 {
        wait(writer.append(payload(i))).unwrap();
    }
    loglet.data[2].set_down(Some("unreachable"));
    for i in 5..9 {
        wait(writer.append(payload(i))).unwrap();
    }
    loglet.data[2].set_down(None);
    assert_eq!(loglet.data[2].contents().len(), 5, "the stale replica");
    let loader = world.client(2);
    let sealed = wait(loader.reconfig_extend(common::config(2))).unwrap();
    let stop = sealed.chain.segments[0].stop.unwrap();
    assert_eq!(stop, 9);
    let replay: Vec<_> = (0..stop)
        .map(|p| wait(loader.read(p)).unwrap().unwrap())
        .collect();
    assert_eq!(replay, (0..9).map(payload).collect::<Vec<_>>());
    identical_below(&loglet.data, stop);
}

/// AZ-6: concurrent appends get distinct, increasing positions, acknowledged in position
/// order, and every replica (Qw = N = 3) holds the same bytes at each.
#[test]
fn az_6_concurrent_appends_get_distinct_positions_acknowledged_in_order() {
    let world = QuorumWorld::new(3, 3);
    let log = Arc::new(world.client(1));
    let acknowledged = Arc::new(std::sync::Mutex::new(Vec::new()));
    let clients: Vec<_> = (0..4u64)
        .map(|client| {
            let (log, acknowledged) = (log.clone(), acknowledged.clone());
            thread::spawn(move || {
                for i in 0..25 {
                    let position = wait(log.append(payload(client * 100 + i))).unwrap();
                    acknowledged.lock().unwrap().push(position);
                }
            })
        })
        .collect();
    for client in clients {
        client.join().unwrap();
    }
    let mut positions = acknowledged.lock().unwrap().clone();
    positions.sort();
    positions.dedup();
    assert_eq!(positions, (0..100).collect::<Vec<_>>());
    let loglet = world.loglets.get(1);
    for child in &loglet.data {
        assert_eq!(child.contents(), loglet.data[0].contents());
    }
}

/// ZW-1: a segment written at epoch e is fenced and sealed by a reconfiguration at a newer
/// epoch while one replica is unreachable. The old writer's write past the stop reaches only
/// that replica, meets `Fenced` on the others, cannot gather a write quorum and is
/// indeterminate; it never appears in the log. Once the replica is back, `settle` fences and
/// seals it at the stop, and the fence outlives a restart of every replica.
#[test]
fn zw_1_a_zombie_writer_is_refused_after_a_fence_at_a_newer_epoch() {
    let world = QuorumWorld::new(3, 2);
    let log = world.client(1);
    for i in 0..100 {
        wait(log.append(payload(i))).unwrap();
    }
    let old = world.factory.opened(1).unwrap();
    let old_epoch = old.options().epoch;
    let loglet = world.loglets.get(1);
    loglet.data[2].set_down(Some("partitioned during the recovery"));
    let recovery = world.client(2);
    let installed = wait(recovery.reconfig_extend(common::config(2)))
        .unwrap()
        .chain;
    assert_eq!(installed.segments[0].stop, Some(100));
    loglet.data[2].set_down(None);
    let zombie = wait(old.data().write(100, old_epoch, payload(100))).unwrap_err();
    assert!(
        !zombie.is_definite(),
        "the unfenced replica took it: {zombie:?}"
    );
    assert!(
        matches!(zombie.cause(), LogDriveError::Fenced { .. }),
        "{zombie:?}"
    );
    assert_eq!(wait(old.data().read(100)).unwrap(), ReadOutcome::Unwritten);
    wait(recovery.settle()).unwrap();
    for child in &loglet.data {
        child.set_down(Some("restart"));
        child.set_down(None);
        let length = wait(child.length()).unwrap();
        assert!(length.fence > old_epoch, "the fence outlives the restart");
        assert_eq!(length.sealed, Some(100));
    }
    identical_below(&loglet.data, 100);
    // The next segment takes position 100, at its own epoch.
    assert_eq!(wait(log.append(payload(100))).unwrap(), 100);
    assert_eq!(wait(log.read(100)).unwrap(), Some(payload(100)));
    assert!(world.factory.opened(2).unwrap().options().epoch > old_epoch);
}

/// Seed 002's lesson at the log: one replica's damaged record is read past (the others hold
/// it), repaired from them, and appends go on.
#[test]
fn a_record_damaged_on_one_replica_is_read_and_repaired_and_appends_go_on() {
    let world = QuorumWorld::new(3, 2);
    let log = world.client(1);
    for i in 0..10 {
        wait(log.append(payload(i))).unwrap();
    }
    let loglet = world.loglets.get(1);
    assert!(loglet.data[0].damage(4));
    for _ in 0..3 {
        assert_eq!(wait(log.read(4)).unwrap(), Some(payload(4)));
    }
    assert_eq!(wait(log.append(payload(10))).unwrap(), 10);
    assert_eq!(
        wait(loglet.data[0].read(4)).unwrap(),
        ReadOutcome::Value(payload(4)),
        "the damaged copy is repaired"
    );
}

/// A log starts on one drive and moves to a quorum of three: the new segment's composition
/// is the factory's reading of its configuration, not the old segment's.
#[test]
fn a_log_moves_from_one_drive_to_a_quorum_of_three() {
    use sealog_logdrive::{MemLogDrive, QuorumLogDrive, QuorumOptions};
    use sealog_vlog::{DriveLogletFactory, LogDriveMetaStore, LogletConfig, LogletDrives};
    let quorum_replicas: Arc<Vec<Arc<MemLogDrive>>> =
        Arc::new((0..3).map(|_| Arc::new(MemLogDrive::new())).collect());
    let replicas = quorum_replicas.clone();
    let build = move |config: &LogletConfig| {
        let data: Arc<dyn LogDrive> = if &config.spec[..] == b"one drive" {
            Arc::new(MemLogDrive::new())
        } else {
            let children = replicas
                .iter()
                .map(|r| r.clone() as Arc<dyn LogDrive>)
                .collect();
            Arc::new(QuorumLogDrive::new(children, 2, QuorumOptions::default()).unwrap())
        };
        Ok(LogletDrives {
            data,
            seal: Arc::new(MemLogDrive::new()),
        })
    };
    let factory = Arc::new(DriveLogletFactory::new(
        Box::new(build),
        Box::new(|config: &LogletConfig| common::config(config.id + 1)),
        common::atomic_options(16, std::time::Duration::from_secs(5)),
    ));
    let meta = Arc::new(LogDriveMetaStore::new(Arc::new(MemLogDrive::new()), 1));
    let first = LogletConfig {
        id: 1,
        spec: bytes::Bytes::from_static(b"one drive"),
    };
    let options = common::virtual_options(std::time::Duration::from_millis(50));
    let log = wait(sealog_vlog::VirtualLog::create(
        meta, factory, first, options,
    ))
    .unwrap();
    for i in 0..5 {
        wait(log.append(payload(i))).unwrap();
    }
    let next = LogletConfig {
        id: 2,
        spec: bytes::Bytes::from_static(b"a quorum of three"),
    };
    wait(log.reconfig_extend(next)).unwrap();
    for i in 5..10 {
        assert_eq!(wait(log.append(payload(i))).unwrap(), i);
    }
    for i in 0..10 {
        assert_eq!(wait(log.read(i)).unwrap(), Some(payload(i)));
    }
    for replica in quorum_replicas.iter() {
        assert!(
            replica.contents().len() >= 4,
            "the quorum took the second segment"
        );
    }
}
