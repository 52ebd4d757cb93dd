//! [`Executor`]: a single-threaded executor for a simulation's tasks, seeded. Tasks are
//! boxed futures (they need not be `Send`); a task's waker marks it ready, and the
//! simulation picks which ready task to poll next with its random number generator, so that
//! a seed fixes the interleaving. No threads: wakers only record a task's id, and the order
//! in which tasks are taken depends on nothing but the seed.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::task::{Context, Wake, Waker};

use rand::Rng;

/// A task: a boxed future of nothing, not necessarily `Send`.
pub type Task = Pin<Box<dyn Future<Output = ()>>>;

/// Hands tasks to an [`Executor`] from inside its tasks (or from anywhere on its thread).
#[derive(Clone, Default)]
pub struct Spawner {
    spawned: Rc<RefCell<Vec<Task>>>,
}

impl Spawner {
    /// Spawns `future`: it runs once the executor next takes its spawned tasks in.
    pub fn spawn(&self, future: impl Future<Output = ()> + 'static) {
        self.spawned.borrow_mut().push(Box::pin(future));
    }
}

/// The ids of the tasks woken since they were last polled.
type ReadySet = Arc<Mutex<BTreeSet<u64>>>;

/// A task's waker: it puts the task's id in the ready set.
struct TaskWaker {
    id: u64,
    ready: ReadySet,
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        lock(&self.ready).insert(self.id);
    }
}

fn lock(ready: &ReadySet) -> std::sync::MutexGuard<'_, BTreeSet<u64>> {
    ready
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The executor: see the module doc.
#[derive(Default)]
pub struct Executor {
    tasks: BTreeMap<u64, Task>,
    ready: ReadySet,
    spawner: Spawner,
    next_id: u64,
}

impl Executor {
    /// An executor with no tasks.
    pub fn new() -> Executor {
        Executor::default()
    }

    /// A handle that spawns onto this executor.
    pub fn spawner(&self) -> Spawner {
        self.spawner.clone()
    }

    /// Spawns `future`, ready to be polled.
    pub fn spawn(&mut self, future: impl Future<Output = ()> + 'static) {
        self.spawner.spawn(future);
        self.take_spawned();
    }

    /// Takes in the tasks spawned through [`Spawner`]s, each ready to be polled.
    fn take_spawned(&mut self) {
        let spawned = std::mem::take(&mut *self.spawner.spawned.borrow_mut());
        for task in spawned {
            let id = self.next_id;
            self.next_id += 1;
            self.tasks.insert(id, task);
            lock(&self.ready).insert(id);
        }
    }

    /// Whether some task is ready to be polled.
    pub fn has_ready(&mut self) -> bool {
        self.take_spawned();
        !lock(&self.ready).is_empty()
    }

    /// How many tasks have not finished.
    pub fn unfinished(&mut self) -> usize {
        self.take_spawned();
        self.tasks.len()
    }

    /// Polls one ready task, picked with `rng`; false when none was ready.
    pub fn poll_one(&mut self, rng: &mut impl Rng) -> bool {
        self.take_spawned();
        let id = {
            let mut ready = lock(&self.ready);
            if ready.is_empty() {
                return false;
            }
            let pick = rng.gen_range(0..ready.len());
            let id = *ready.iter().nth(pick).expect("pick is within the set");
            ready.remove(&id);
            id
        };
        // A waker may outlive its task: a wake of a finished task is ignored.
        let Some(task) = self.tasks.get_mut(&id) else {
            return true;
        };
        let waker = Waker::from(Arc::new(TaskWaker {
            id,
            ready: Arc::clone(&self.ready),
        }));
        if task
            .as_mut()
            .poll(&mut Context::from_waker(&waker))
            .is_ready()
        {
            self.tasks.remove(&id);
        }
        self.take_spawned();
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;
    use std::task::Poll;

    /// A future pending on its first poll, waking itself, and ready on its second.
    struct YieldOnce(bool);

    impl Future for YieldOnce {
        type Output = ();

        fn poll(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<()> {
            if self.0 {
                return Poll::Ready(());
            }
            self.0 = true;
            context.waker().wake_by_ref();
            Poll::Pending
        }
    }

    /// The order tasks run in, for a seed.
    fn order(seed: u64) -> Vec<u32> {
        let mut executor = Executor::new();
        let log = Rc::new(RefCell::new(Vec::new()));
        for task in 0..4u32 {
            let log = Rc::clone(&log);
            let spawner = executor.spawner();
            executor.spawn(async move {
                for step in 0..3 {
                    log.borrow_mut().push(task * 10 + step);
                    YieldOnce(false).await;
                }
                let log = Rc::clone(&log);
                spawner.spawn(async move { log.borrow_mut().push(100 + task) });
            });
        }
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        while executor.poll_one(&mut rng) {}
        assert_eq!(executor.unfinished(), 0);
        let order = log.borrow().clone();
        order
    }

    #[test]
    fn a_seed_fixes_the_interleaving_and_every_task_finishes() {
        assert_eq!(order(5), order(5));
        assert_eq!(order(5).len(), 16);
        assert!((0..20).any(|seed| order(seed) != order(5)));
    }
}
