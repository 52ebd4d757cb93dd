//! The VirtualLog's MetaStore in etcd, against a real etcd 3.4 the test starts: the register
//! reads empty, takes a compare-and-swap from each version once, and names the version it is
//! at when one comes too late; of racing proposers exactly one wins each version; a
//! VirtualLog over it appends, reconfigures and reads across segments, from a second handle
//! too; with etcd killed, a compare-and-swap is an indeterminate error, not a verdict.

mod common;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::Etcd;
use sealog_logdrive::{LogDrive, MemLogDrive};
use sealog_server::{EtcdMetaStore, EtcdOptions};
use sealog_vlog::{
    AtomicOptions, DriveLogletFactory, LogletConfig, LogletDrives, MetaError, MetaStore,
    VirtualLog, VirtualOptions,
};

/// A handle on `key`, once etcd answers (a just-started etcd listens before it has elected
/// itself).
async fn store(etcd: &Etcd, key: &str, proposer: u64) -> EtcdMetaStore {
    let meta = EtcdMetaStore::connect(EtcdOptions::new(vec![etcd.url()], key, proposer))
        .await
        .expect("connect to etcd");
    answered(&meta).await;
    meta
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_register_swaps_once_per_version_and_names_the_one_it_is_at() {
    let Some(etcd) = Etcd::start() else { return };
    let meta = store(&etcd, "/sealog/test/register", 1).await;
    assert_eq!(meta.read().await.unwrap(), None);
    assert_eq!(
        meta.compare_and_swap(0, Bytes::from("one")).await.unwrap(),
        1
    );
    assert_eq!(
        meta.compare_and_swap(1, Bytes::from("two")).await.unwrap(),
        2
    );
    let late = meta
        .compare_and_swap(1, Bytes::from("late"))
        .await
        .unwrap_err();
    assert!(matches!(late, MetaError::Conflict { current: 2 }), "{late}");
    assert!(matches!(
        meta.compare_and_swap(0, Bytes::from("first again")).await,
        Err(MetaError::Conflict { current: 2 })
    ));
    let now = meta.read().await.unwrap().unwrap();
    assert_eq!((now.version, now.value), (2, Bytes::from("two")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_racing_proposers_exactly_one_wins_each_version() {
    let Some(etcd) = Etcd::start() else { return };
    let mut proposers = Vec::new();
    for id in 0..8 {
        proposers.push(Arc::new(store(&etcd, "/sealog/test/race", id).await));
    }
    for version in 0..10u64 {
        let races: Vec<_> = proposers
            .iter()
            .map(|meta| {
                let meta = Arc::clone(meta);
                tokio::spawn(async move {
                    let value = Bytes::from(format!("v{version}"));
                    meta.compare_and_swap(version, value).await
                })
            })
            .collect();
        let mut won = 0;
        for race in races {
            match race.await.unwrap() {
                Ok(v) => {
                    assert_eq!(v, version + 1);
                    won += 1;
                }
                Err(MetaError::Conflict { current }) => assert_eq!(current, version + 1),
                Err(other) => panic!("version {version}: {other}"),
            }
        }
        assert_eq!(won, 1, "version {version}");
    }
}

fn factory() -> Arc<DriveLogletFactory> {
    let drives: Arc<std::sync::Mutex<std::collections::HashMap<u64, LogletDrives>>> =
        Arc::default();
    Arc::new(DriveLogletFactory::new(
        Box::new(move |config: &LogletConfig| {
            let mut drives = drives.lock().unwrap();
            let loglet = drives.entry(config.id).or_insert_with(|| LogletDrives {
                data: Arc::new(MemLogDrive::new()) as Arc<dyn LogDrive>,
                seal: Arc::new(MemLogDrive::new()) as Arc<dyn LogDrive>,
            });
            Ok(LogletDrives {
                data: Arc::clone(&loglet.data),
                seal: Arc::clone(&loglet.seal),
            })
        }),
        Box::new(|config: &LogletConfig| loglet(config.id + 1)),
        AtomicOptions::default(),
    ))
}

fn loglet(id: u64) -> LogletConfig {
    LogletConfig {
        id,
        spec: Bytes::from(format!("memory {id}")),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_virtual_log_reconfigures_through_etcd() {
    let Some(etcd) = Etcd::start() else { return };
    let factory = factory();
    let meta: Arc<dyn MetaStore> = Arc::new(store(&etcd, "/sealog/test/vlog", 1).await);
    let log = VirtualLog::create(meta, factory.clone(), loglet(1), VirtualOptions::default())
        .await
        .expect("create");
    for i in 0..10u64 {
        assert_eq!(log.append(Bytes::from(format!("e{i}"))).await.unwrap(), i);
    }
    let reconfigured = log.reconfig_extend(loglet(2)).await.expect("reconfigure");
    assert!(reconfigured.won);
    assert_eq!(reconfigured.chain.segments.len(), 2);
    for i in 10..20u64 {
        assert_eq!(log.append(Bytes::from(format!("e{i}"))).await.unwrap(), i);
    }
    // A second handle, of another proposer, finds the chain in etcd.
    let other: Arc<dyn MetaStore> = Arc::new(store(&etcd, "/sealog/test/vlog", 2).await);
    let reader = VirtualLog::new(other, factory, VirtualOptions::default());
    assert_eq!(reader.check_tail().await.unwrap(), 20);
    for i in 0..20u64 {
        let entry = reader.read(i).await.unwrap();
        assert_eq!(entry, Some(Bytes::from(format!("e{i}"))), "position {i}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_etcd_down_a_swap_is_indeterminate_and_goes_on_once_it_is_back() {
    let Some(mut etcd) = Etcd::start() else {
        return;
    };
    let mut options = EtcdOptions::new(vec![etcd.url()], "/sealog/test/down", 1);
    options.call_timeout = Duration::from_millis(500);
    options.attempts_max = 3;
    options.retry_after = Duration::from_millis(50);
    let meta = EtcdMetaStore::connect(options).await.unwrap();
    // A just-started etcd listens before it has elected itself; the short call timeout
    // here would count that as down.
    assert_eq!(answered(&meta).await, None);
    assert_eq!(meta.compare_and_swap(0, Bytes::from("a")).await.unwrap(), 1);
    etcd.kill();
    let error = meta
        .compare_and_swap(1, Bytes::from("b"))
        .await
        .unwrap_err();
    assert!(!error.is_definite(), "{error}");
    assert!(error.to_string().contains("etcd"), "{error}");
    etcd.run();
    let version = answered(&meta).await.map(|found| found.version);
    assert_eq!(version, Some(1), "the swap etcd never saw did not happen");
    assert_eq!(meta.compare_and_swap(1, Bytes::from("b")).await.unwrap(), 2);
}

/// The register, once etcd answers (within 20 s).
async fn answered(meta: &EtcdMetaStore) -> Option<sealog_vlog::Versioned> {
    let started = std::time::Instant::now();
    loop {
        match meta.read().await {
            Ok(found) => return found,
            Err(_) if started.elapsed() < Duration::from_secs(20) => {
                tokio::time::sleep(Duration::from_millis(100)).await
            }
            Err(error) => panic!("etcd did not answer: {error}"),
        }
    }
}
