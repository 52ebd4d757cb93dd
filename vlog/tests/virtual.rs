//! The VirtualLog's scenarios (docs/composition.md, "The VirtualLog"): racing and stalled
//! reconfigurations, sealed segments, zombies past a recorded stop, duplicates, takeover.

mod common;

use std::sync::Arc;
use std::thread;
use std::time::Duration;

use bytes::Bytes;
use common::{atomic_options, config, payload, virtual_options, World};
use sealog_logdrive::{wait, LogDrive, LogDriveError};
use sealog_vlog::{Chain, LogDriveMetaStore, LogError, MetaStore};

fn world() -> World {
    World::new(
        atomic_options(16, Duration::from_secs(5)),
        virtual_options(Duration::from_millis(50)),
    )
}

fn append_all(log: &sealog_vlog::VirtualLog, range: std::ops::Range<u64>) {
    for i in range {
        assert_eq!(wait(log.append(payload(i))).unwrap(), i);
    }
}

#[test]
fn appends_reads_and_tails_cross_a_reconfiguration() {
    let world = world();
    let log = world.client(1);
    append_all(&log, 0..5);
    let reconfigured = wait(log.reconfig_extend(config(2))).unwrap();
    assert!(reconfigured.won);
    assert_eq!(reconfigured.chain.segments[0].stop, Some(5));
    assert_eq!(reconfigured.chain.active().start, 5);
    append_all(&log, 5..9);
    assert_eq!(wait(log.check_tail()).unwrap(), 9);
    for i in 0..9 {
        assert_eq!(wait(log.read(i)).unwrap(), Some(payload(i)));
    }
    assert_eq!(wait(log.read(9)).unwrap(), None);
    // The new segment's slot 0 is virtual position 5.
    assert_eq!(world.loglets.get(2).data.contents()[&0], payload(5));
    assert_eq!(wait(log.read_next(3, 100)).unwrap(), Some((3, payload(3))));
}

#[test]
fn dl_1_of_racing_reconfigurations_exactly_one_wins() {
    for round in 0..20u64 {
        let world = world();
        let first = world.client(1);
        append_all(&first, 0..40);
        // Both coordinators read the chain (v5 in the scenario) before either starts: a
        // handle made after the other's reconfiguration would rightly seal the new segment.
        let logs: Vec<_> = (0..2u64).map(|c| Arc::new(world.client(10 + c))).collect();
        let handles: Vec<_> = logs
            .into_iter()
            .zip(100u64..)
            .map(|(log, next)| {
                thread::spawn(move || wait(log.reconfig_extend(config(next))).unwrap())
            })
            .collect();
        let outcomes: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        let winners = outcomes.iter().filter(|outcome| outcome.won).count();
        assert_eq!(winners, 1, "round {round}: {outcomes:?}");
        let chain = wait(first.refresh()).unwrap();
        assert_eq!(chain.segments.len(), 2, "round {round}: {chain:?}");
        assert_eq!(chain.segments[0].stop, Some(40));
        assert_eq!(chain.segments[1].start, 40);
        // Position 40 maps to the new loglet's slot 0.
        assert_eq!(wait(first.append(payload(40))).unwrap(), 40);
        let id = chain.active().loglet.id;
        assert_eq!(world.loglets.get(id).data.contents()[&0], payload(40));
    }
}

#[test]
fn dl_2_a_reconfiguration_stalled_after_its_seal_is_rolled_forward() {
    let world = world();
    let log = world.client(1);
    append_all(&log, 0..7);
    // C1 claims the segment and seals it, then dies before installing the stop.
    let c1 = LogDriveMetaStore::new(world.meta_drive.clone(), 2);
    let stored = wait(c1.read()).unwrap().unwrap();
    let mut claimed = Chain::decode(stored.version, stored.value).unwrap();
    let epoch = claimed.version + 1;
    claimed.segments[0].sealing = Some(epoch);
    wait(c1.compare_and_swap(claimed.version, claimed.encode())).unwrap();
    let sealer = world.factory.opened(1).unwrap();
    wait(sealer.seal(epoch)).unwrap();
    // C3 appends: it finds the claim, waits it out, rolls it forward on a clone.
    let c3 = world.client(3);
    assert_eq!(wait(c3.append(payload(7))).unwrap(), 7);
    let chain = wait(c3.refresh()).unwrap();
    assert_eq!(chain.segments[0].stop, Some(7));
    assert_eq!(
        chain.active().loglet.id,
        2,
        "the successor clones loglet 1's configuration"
    );
    assert!(chain.segments[0].sealing.is_none());
    append_all(&log, 8..10);
}

#[test]
fn dl_3_a_sealed_segment_reads_and_is_truncated_once_trimmed() {
    let world = world();
    let log = world.client(1);
    append_all(&log, 0..6);
    wait(log.reconfig_extend(config(2))).unwrap();
    let old = world.factory.opened(1).unwrap();
    assert!(matches!(
        wait(old.append(payload(99))),
        Err(LogError::Sealed { .. })
    ));
    let tail = wait(old.check_tail()).unwrap();
    assert_eq!((tail.position, tail.sealed), (6, true));
    assert_eq!(wait(old.read_next(0, 5)).unwrap(), Some((0, payload(0))));
    append_all(&log, 6..8);
    assert_eq!(wait(log.prefix_trim(7)).unwrap(), 7);
    let chain = wait(log.reconfig_truncate()).unwrap();
    assert_eq!(chain.segments.len(), 1);
    assert_eq!(chain.segments[0].start, 6);
    assert!(matches!(wait(log.read(2)), Err(LogError::Trimmed { .. })));
    assert_eq!(wait(log.read(7)).unwrap(), Some(payload(7)));
}

#[test]
fn al_6_a_dead_clients_slot_leads_to_a_reconfiguration_and_later_appends_move_on() {
    let world = World::new(
        atomic_options(4, Duration::from_millis(100)),
        virtual_options(Duration::from_millis(50)),
    );
    let log = Arc::new(world.client(1));
    append_all(&log, 0..7);
    let loglet = world.factory.opened(1).unwrap();
    // Slot 7 is acquired by a client that dies.
    assert_eq!(
        wait(loglet.sequencer().expect("a local sequencer").acquire()).unwrap(),
        7
    );
    let later: Vec<_> = (8..10)
        .map(|i| {
            let log = log.clone();
            thread::spawn(move || wait(log.append(payload(i))).unwrap())
        })
        .collect();
    let mut positions: Vec<u64> = later.into_iter().map(|h| h.join().unwrap()).collect();
    positions.sort();
    // The segment stopped at 7; slots 8 and 9 of it are zombies, and their entries were
    // appended again on the new segment.
    assert_eq!(positions, [7, 8]);
    let chain = wait(log.refresh()).unwrap();
    assert_eq!(chain.segments[0].stop, Some(7));
    let mut read: Vec<Bytes> = (7..9)
        .map(|p| wait(log.read(p)).unwrap().unwrap())
        .collect();
    read.sort();
    assert_eq!(read, [payload(8), payload(9)]);
    assert_eq!(wait(log.check_tail()).unwrap(), 9);
}

#[test]
fn al_5_zombies_past_a_recorded_stop_never_appear() {
    let world = world();
    let log = world.client(1);
    append_all(&log, 0..11);
    let loglet = world.factory.opened(1).unwrap();
    // B holds slot 11 from before the reconfiguration.
    assert_eq!(
        wait(loglet.sequencer().expect("a local sequencer").acquire()).unwrap(),
        11
    );
    wait(log.reconfig_extend(config(2))).unwrap();
    // Its write, stamped with the old segment's epoch, meets the fence.
    let zombie = wait(loglet.data().write(11, 1, payload(999)));
    assert!(matches!(
        zombie,
        Err(LogDriveError::Fenced { .. }) | Err(LogDriveError::Sealed { .. })
    ));
    append_all(&log, 11..12);
    assert_eq!(wait(log.read(11)).unwrap(), Some(payload(11)));
}

#[test]
fn az_4_a_retried_append_is_there_twice_and_a_reader_dedupes_it() {
    let world = world();
    let log = world.client(1);
    // The client timed out on r (its append was in fact acknowledged) and retries it.
    let record = |sequence: u64| Bytes::from(format!("client 1 sequence {sequence}"));
    let first = wait(log.append(record(1))).unwrap();
    let again = wait(log.append(record(1))).unwrap();
    wait(log.append(record(2))).unwrap();
    assert_ne!(first, again);
    let mut applied = Vec::new();
    let mut next = 0;
    while let Some((position, bytes)) = wait(log.read_next(next, u64::MAX - 1)).unwrap() {
        if !applied.contains(&bytes) {
            applied.push(bytes);
        }
        next = position + 1;
    }
    assert_eq!(applied, [record(1), record(2)]);
}

#[test]
fn bk_2_a_takeover_fences_the_old_writer_which_moves_to_the_new_segment() {
    let world = world();
    let l1 = world.client(1);
    append_all(&l1, 0..3);
    let l2 = world.client(2);
    let takeover = wait(l2.reconfig_extend(config(2))).unwrap();
    assert!(takeover.won);
    // L1's reconfiguration from the chain it knew loses: the segment it would seal is gone.
    let late = wait(l1.reconfig_extend(config(3))).unwrap();
    assert!(!late.won);
    assert_eq!(late.chain.active().loglet.id, 2, "{late:?}");
    // The old segment refuses writes of its epoch: L1's appends land after the stop.
    let old = world.factory.opened(1).unwrap();
    assert!(wait(old.data().write(3, 1, payload(3))).is_err());
    assert_eq!(wait(l1.append(payload(3))).unwrap(), 3);
}

#[test]
fn the_meta_store_keeps_the_chain_across_handles() {
    let world = world();
    let log = world.client(1);
    append_all(&log, 0..2);
    wait(log.reconfig_extend(config(5))).unwrap();
    let other = world.client(9);
    let chain = wait(other.chain()).unwrap();
    assert_eq!(chain.active().loglet.id, 5);
    let meta: Arc<dyn MetaStore> = Arc::new(LogDriveMetaStore::new(world.meta_drive.clone(), 4));
    assert_eq!(wait(meta.read()).unwrap().unwrap().version, chain.version);
    let _ = world.meta_drive.clone() as Arc<dyn LogDrive>;
}

#[test]
fn a_loglet_already_in_the_chain_is_refused_for_the_next_segment() {
    let world = world();
    let log = world.client(1);
    append_all(&log, 0..3);
    let refused = wait(log.reconfig_extend(config(1))).unwrap_err();
    assert!(
        matches!(refused, LogError::InvalidConfig { .. }),
        "{refused:?}"
    );
    assert!(refused.is_definite());
}

#[test]
fn a_handle_allowed_no_attempt_says_so_rather_than_naming_an_error_it_never_met() {
    let mut options = virtual_options(Duration::from_millis(50));
    options.attempts_max = 0;
    let world = World::new(atomic_options(16, Duration::from_secs(5)), options);
    let log = world.client(1);
    match wait(log.append(payload(0))).unwrap_err() {
        LogError::GaveUp { attempts: 0, last } => {
            assert!(matches!(*last, LogError::InvalidConfig { .. }), "{last:?}")
        }
        other => panic!("{other:?}"),
    }
}
