//! [`HeldLogDrive`]: a replica behind the simulation's [`Network`]. Every operation is
//! queued in the network when it is called (issued when called, as the LogDrive trait
//! says) and its future completes only when the simulation delivers or fails it.

use std::sync::Arc;

use bytes::Bytes;
use sealog_logdrive::{Length, LogDrive, MemLogDrive, OpFuture, ReadOutcome, TailDesc};

use crate::replicated::network::Network;

/// A held replica: see the module doc.
#[derive(Clone)]
pub struct HeldLogDrive {
    network: Arc<Network>,
    child: usize,
}

impl HeldLogDrive {
    /// `drive` behind `network`, a replica set of its own (write quorum 1: the network never
    /// makes it forget a write).
    pub fn new(network: &Arc<Network>, drive: Arc<MemLogDrive>) -> HeldLogDrive {
        let child = network.add_set(vec![drive], 1)[0];
        HeldLogDrive {
            network: Arc::clone(network),
            child,
        }
    }

    /// `drives` behind `network` as one replica set written with `write_quorum`: the network
    /// makes fewer than `write_quorum` of them forget any one address.
    pub fn replica_set(
        network: &Arc<Network>,
        drives: Vec<Arc<MemLogDrive>>,
        write_quorum: usize,
    ) -> Vec<HeldLogDrive> {
        network
            .add_set(drives, write_quorum)
            .into_iter()
            .map(|child| HeldLogDrive {
                network: Arc::clone(network),
                child,
            })
            .collect()
    }

    /// The replica itself, for a test's checks and faults.
    pub fn inner(&self) -> Arc<MemLogDrive> {
        self.network.drive(self.child)
    }

    /// Its id in the network.
    pub fn child(&self) -> usize {
        self.child
    }
}

impl LogDrive for HeldLogDrive {
    fn write(&self, address: u64, epoch: u64, payload: Bytes) -> OpFuture<()> {
        self.network
            .submit(self.child, Some(address), move |drive| {
                drive.write(address, epoch, payload)
            })
    }

    fn read(&self, address: u64) -> OpFuture<ReadOutcome> {
        self.network
            .submit(self.child, None, move |drive| drive.read(address))
    }

    fn weak_tail(&self, k: u64) -> OpFuture<TailDesc> {
        self.network
            .submit(self.child, None, move |drive| drive.weak_tail(k))
    }

    fn seal(&self, length: u64, epoch: u64) -> OpFuture<()> {
        self.network
            .submit(self.child, None, move |drive| drive.seal(length, epoch))
    }

    fn fence(&self, epoch: u64) -> OpFuture<()> {
        self.network
            .submit(self.child, None, move |drive| drive.fence(epoch))
    }

    fn trim(&self, upto: u64) -> OpFuture<()> {
        self.network
            .submit(self.child, None, move |drive| drive.trim(upto))
    }

    fn length(&self) -> OpFuture<Length> {
        self.network
            .submit(self.child, None, |drive| drive.length())
    }

    /// A setting, not an operation: answered at once, as a connection's handshake would.
    fn write_window_max(&self) -> u64 {
        self.network.drive(self.child).write_window_max()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replicated::faults::SimFaults;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;
    use sealog_logdrive::LogDriveError;
    use std::task::{Context, Poll, Waker};
    use std::time::Duration;

    fn poll<T>(future: &mut OpFuture<T>) -> Poll<Result<T, LogDriveError>> {
        future
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()))
    }

    fn set(network: &Arc<Network>) -> Vec<HeldLogDrive> {
        let drives = (0..3).map(|_| Arc::new(MemLogDrive::new())).collect();
        HeldLogDrive::replica_set(network, drives, 2)
    }

    #[test]
    fn an_operation_applies_only_when_delivered() {
        let network = Network::new(SimFaults::none());
        let replicas = set(&network);
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut write = replicas[1].write(0, 0, Bytes::from_static(b"a"));
        assert!(poll(&mut write).is_pending());
        assert!(replicas[1].inner().contents().is_empty());
        assert!(network.deliver_one(&mut rng, Duration::ZERO));
        assert_eq!(poll(&mut write), Poll::Ready(Ok(())));
        assert_eq!(replicas[1].inner().contents().len(), 1);
        assert_eq!(network.counts().delivered, 1);
    }

    #[test]
    fn a_lost_reply_applies_and_at_most_quorum_less_one_replica_forgets_it() {
        let faults = SimFaults {
            lose_reply: 1.0,
            forget: 1.0,
            ..SimFaults::none()
        };
        let network = Network::new(faults);
        let replicas = set(&network);
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        let mut writes: Vec<_> = replicas
            .iter()
            .map(|replica| replica.write(7, 0, Bytes::from_static(b"x")))
            .collect();
        while network.deliver_one(&mut rng, Duration::ZERO) {}
        for write in &mut writes {
            assert!(matches!(
                poll(write),
                Poll::Ready(Err(LogDriveError::Io { .. }))
            ));
        }
        for _ in 0..5 {
            network.inject(&mut rng, Duration::ZERO);
        }
        let holding = replicas
            .iter()
            .filter(|replica| !replica.inner().contents().is_empty())
            .count();
        assert_eq!((holding, network.counts().forgotten), (2, 1));
    }

    #[test]
    fn a_crash_fails_pending_operations_until_the_replica_restarts() {
        let faults = SimFaults {
            crash: 1.0,
            down_max: 3,
            down_for_max: Duration::from_millis(5),
            ..SimFaults::none()
        };
        let network = Network::new(faults);
        let replica = HeldLogDrive::new(&network, Arc::new(MemLogDrive::new()));
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let mut read = replica.read(0);
        network.inject(&mut rng, Duration::ZERO);
        assert!(matches!(
            poll(&mut read),
            Poll::Ready(Err(LogDriveError::Io { .. }))
        ));
        assert!(replica.inner().is_down());
        let restart = network
            .next_event(Duration::ZERO)
            .expect("a restart is due");
        assert!(restart <= Duration::from_millis(5));
        network.set_faults(SimFaults::none());
        network.can_deliver(restart);
        assert!(!replica.inner().is_down());
        assert_eq!(network.counts().crashes, 1);
    }
}
