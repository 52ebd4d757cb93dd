//! The simulation driver: runs a log that implements [`SimLog`] under one seed and checks
//! what its clients saw. The seed (one ChaCha8 generator) builds the log through the test's
//! builder, plans the clients' operations, picks at every step whether a ready task is
//! polled or a replica operation delivered (and which), draws the network's faults, and
//! moves the simulated time: by a small step now and then, and to the next timer or
//! restart when nothing else can happen. Once the clients are done, the history must be
//! linearizable, no two acknowledged appends may share a position, no check_tail may go
//! back, and, with the faults off, every acknowledged position must read back its value.
//! A failure carries the command that replays its seed and the file its history went to.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sealog_logdrive::Clock;

use crate::replicated::checks::{acknowledged_positions, tails_never_go_back};
use crate::replicated::clock::SimClock;
use crate::replicated::executor::{Executor, Spawner};
use crate::replicated::faults::SimFaults;
use crate::replicated::history::History;
use crate::replicated::linearizability::{check, Verdict, DEFAULT_STEP_BUDGET};
use crate::replicated::network::Network;
use crate::replicated::report::{SimFailure, SimReport};
use crate::replicated::seeds::{replay_command, save_history};
use crate::replicated::sim_log::SimLog;
use crate::replicated::workload::{spawn_clients, OpMix, Recorder};

/// How a simulation test runs its seeds.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// The package whose integration test runs the simulation, for the replay command.
    pub package: String,
    /// The integration test target and the test's name, for the replay command.
    pub target: String,
    /// The test's name.
    pub test: String,
    /// Clients running at once (each one operation at a time).
    pub clients: usize,
    /// Operations in one history, all clients together.
    pub operations: usize,
    /// The kinds of operation.
    pub mix: OpMix,
    /// The faults the network injects.
    pub faults: SimFaults,
    /// The linearizability checker's step budget.
    pub step_budget: u64,
    /// Steps a run may take before it is a failure (a log that never finishes).
    pub max_steps: u64,
}

impl SimConfig {
    /// The defaults for the test `test` of the integration test `target` of sealog-fault
    /// (set `package` for another's): 4 clients, 200
    /// operations, appends, check_tails and reads alike and no reconfiguration, the
    /// standard faults.
    pub fn new(target: &str, test: &str) -> SimConfig {
        SimConfig {
            package: "sealog-fault".to_owned(),
            target: target.to_owned(),
            test: test.to_owned(),
            clients: 4,
            operations: 200,
            mix: OpMix {
                append: 4,
                check_tail: 3,
                read: 3,
                reconfigure: 0,
            },
            faults: SimFaults::standard(),
            step_budget: DEFAULT_STEP_BUDGET,
            max_steps: 1_000_000,
        }
    }
}

/// What a builder gets to build a seed's log(s) with.
pub struct SimContext<'a> {
    /// The network every replica sits behind.
    pub network: &'a Arc<Network>,
    /// The clock every sleep and deadline reads.
    pub clock: &'a SimClock,
    /// Spawns background tasks of the log.
    pub spawner: &'a Spawner,
    /// The seed's generator, for the log's own random choices.
    pub rng: &'a mut ChaCha8Rng,
    /// How many clients will run.
    pub clients: usize,
}

/// One seed's run: its counts and its history.
#[derive(Clone, Debug)]
pub struct SeedRun {
    /// The counts.
    pub report: SimReport,
    /// The history recorded.
    pub history: History,
}

/// What a run moves: its tasks, network, clock and generator.
struct World {
    executor: Executor,
    network: Arc<Network>,
    clock: SimClock,
    rng: ChaCha8Rng,
    steps: u64,
}

/// Runs `seeds` in turn, stopping at the first failure; their counts summed.
pub fn run_seeds<B>(seeds: &[u64], config: &SimConfig, build: &B) -> Result<SimReport, SimFailure>
where
    B: Fn(&mut SimContext<'_>) -> Vec<Rc<dyn SimLog>>,
{
    let mut total = SimReport::default();
    for seed in seeds {
        total += run_seed(*seed, config, build)?.report;
    }
    Ok(total)
}

/// Runs one seed: `build` makes one handle on the log per client (client `i` takes handle
/// `i % len`; handle 0 reads back the acknowledged appends at the end).
pub fn run_seed<B>(seed: u64, config: &SimConfig, build: &B) -> Result<SeedRun, SimFailure>
where
    B: Fn(&mut SimContext<'_>) -> Vec<Rc<dyn SimLog>>,
{
    let mut world = World {
        executor: Executor::new(),
        network: Network::new(config.faults.clone()),
        clock: SimClock::new(),
        rng: ChaCha8Rng::seed_from_u64(seed),
        steps: 0,
    };
    let spawner = world.executor.spawner();
    let logs = build(&mut SimContext {
        network: &world.network,
        clock: &world.clock,
        spawner: &spawner,
        rng: &mut world.rng,
        clients: config.clients,
    });
    assert!(!logs.is_empty(), "the builder made no log handle");
    let recorder = Rc::new(RefCell::new(Recorder::default()));
    let shape = (config.clients, config.operations, config.mix);
    spawn_clients(&spawner, &mut world.rng, &logs, shape, &recorder);
    let ran = world.run(config.max_steps);
    let (operations, mut report) = {
        let recorder = recorder.borrow();
        (recorder.operations.clone(), recorder.report)
    };
    let history = History::new(operations);
    let fail = |message: String| failure(config, seed, message, &history);
    ran.map_err(&fail)?;
    let acknowledged = acknowledged_positions(&history).map_err(&fail)?;
    tails_never_go_back(&history).map_err(&fail)?;
    report.checker_unknown = match check(&history, config.step_budget) {
        Verdict::Linearizable => 0,
        Verdict::Unknown { .. } => 1,
        Verdict::NotLinearizable { longest } => {
            return Err(fail(format!(
                "the history is not linearizable (at most {longest} of its {} operations \
                 could be linearized)",
                history.operations.len()
            )));
        }
    };
    report.histories_checked = 1 - report.checker_unknown;
    world
        .read_back(&logs[0], acknowledged, config.max_steps)
        .map_err(&fail)?;
    report.seeds = 1;
    report.steps = world.steps;
    report.faults = world.network.counts();
    Ok(SeedRun { report, history })
}

fn failure(config: &SimConfig, seed: u64, message: String, history: &History) -> SimFailure {
    let replay = replay_command(&config.package, &config.target, &config.test, seed);
    let text = format!("{message}\nreplay: {replay}\n\n{}", history.render());
    SimFailure {
        seed,
        message,
        history: save_history(&config.test, seed, &text),
        replay,
    }
}

impl World {
    /// Runs every task to its end: an error when the tasks wait on nothing or the steps
    /// run out.
    fn run(&mut self, max_steps: u64) -> Result<(), String> {
        while self.executor.unfinished() > 0 {
            self.steps += 1;
            if self.steps > max_steps {
                return Err(format!("the run did not finish in {max_steps} steps"));
            }
            let now = self.clock.now();
            self.network.inject(&mut self.rng, now);
            let poll = self.executor.has_ready();
            let deliver = self.network.can_deliver(now);
            let moved = match (poll, deliver) {
                (true, true) if self.rng.gen_bool(0.5) => self.executor.poll_one(&mut self.rng),
                (true, false) => self.executor.poll_one(&mut self.rng),
                (_, true) => self.network.deliver_one(&mut self.rng, now),
                (false, false) => false,
            };
            if moved {
                if self.rng.gen_bool(0.05) {
                    let step = self.rng.gen_range(1..=200);
                    self.clock.advance(Duration::from_micros(step));
                }
                continue;
            }
            let next = [self.clock.next_deadline(), self.network.next_event(now)];
            match next.into_iter().flatten().min() {
                Some(time) => self.clock.advance_to(time),
                None => {
                    let waiting = self.executor.unfinished();
                    return Err(format!("stuck: {waiting} tasks wait on nothing"));
                }
            }
        }
        Ok(())
    }

    /// With the faults off, reads every acknowledged position through `log`: an error
    /// when one does not hold its value.
    fn read_back(
        &mut self,
        log: &Rc<dyn SimLog>,
        acknowledged: std::collections::BTreeMap<u64, u64>,
        max_steps: u64,
    ) -> Result<(), String> {
        self.network.heal();
        let lost = Rc::new(RefCell::new(Vec::new()));
        let (log, found) = (Rc::clone(log), Rc::clone(&lost));
        self.executor.spawn(async move {
            for (position, value) in acknowledged {
                let mut outcome = log.read(position).await;
                for _ in 0..10 {
                    if outcome.is_ok() {
                        break;
                    }
                    outcome = log.read(position).await;
                }
                if outcome != Ok(Some(value)) {
                    found.borrow_mut().push(format!(
                        "acknowledged append of {value} at {position} reads back {outcome:?}"
                    ));
                }
            }
        });
        self.run(self.steps + max_steps)?;
        let lost = lost.borrow();
        match lost.first() {
            None => Ok(()),
            Some(first) => Err(format!("{} acknowledged appends lost; {first}", lost.len())),
        }
    }
}
