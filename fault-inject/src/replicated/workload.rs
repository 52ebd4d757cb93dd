//! A simulation's clients and what they record. The seed plans every operation up front (its
//! client, its kind, for a read a random number that picks the position); each client runs
//! its operations one after another as a task, and the [`Recorder`] keeps the history:
//! every invocation and return ticks one counter, an indeterminate failure is recorded as
//! never returning, a definite one (and any failed read or check_tail, which changed
//! nothing) is left out, and reconfigurations are counted but not recorded.

use std::cell::RefCell;
use std::rc::Rc;

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::replicated::executor::Spawner;
use crate::replicated::history::Operation;
use crate::replicated::model::{LogInput, LogOutput};
use crate::replicated::report::SimReport;
use crate::replicated::sim_log::{SimError, SimLog};

/// The weights of the kinds of operation the clients run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpMix {
    /// Appends.
    pub append: u32,
    /// Check_tails.
    pub check_tail: u32,
    /// Reads.
    pub read: u32,
    /// Reconfigurations.
    pub reconfigure: u32,
}

/// One planned operation.
#[derive(Clone, Copy, Debug)]
enum Planned {
    Append,
    CheckTail,
    /// A read; the number picks the position among those appended so far and two more.
    Read(u64),
    Reconfigure,
}

/// Plans `operations` operations of `mix` among `clients` clients.
fn plan(rng: &mut ChaCha8Rng, clients: usize, operations: usize, mix: OpMix) -> Vec<Vec<Planned>> {
    let mut plans = vec![Vec::new(); clients];
    let total = mix.append + mix.check_tail + mix.read + mix.reconfigure;
    assert!(total > 0, "an operation mix needs some weight");
    for _ in 0..operations {
        let client = rng.gen_range(0..clients);
        let draw = rng.gen_range(0..total);
        let planned = if draw < mix.append {
            Planned::Append
        } else if draw < mix.append + mix.check_tail {
            Planned::CheckTail
        } else if draw < mix.append + mix.check_tail + mix.read {
            Planned::Read(rng.gen())
        } else {
            Planned::Reconfigure
        };
        plans[client].push(planned);
    }
    plans
}

/// What the clients record as they go.
#[derive(Debug, Default)]
pub struct Recorder {
    ticks: u64,
    values: u64,
    /// The history so far.
    pub operations: Vec<Operation>,
    /// The counts so far.
    pub report: SimReport,
}

impl Recorder {
    fn tick(&mut self) -> u64 {
        self.ticks += 1;
        self.ticks
    }

    /// The input of a planned operation other than a reconfiguration.
    fn input(&mut self, planned: Planned) -> Option<LogInput> {
        Some(match planned {
            Planned::Append => {
                self.values += 1;
                LogInput::Append(self.values)
            }
            Planned::CheckTail => LogInput::CheckTail,
            Planned::Read(pick) => LogInput::Read(pick % (self.values + 2)),
            Planned::Reconfigure => return None,
        })
    }

    fn finish(&mut self, client: usize, input: LogInput, call: u64, outcome: Outcome) {
        let ret = match outcome {
            Ok(output) => Some((self.tick(), output)),
            Err(SimError::Indeterminate(_)) => {
                self.report.indeterminate += 1;
                if !matches!(input, LogInput::Append(_)) {
                    return;
                }
                None
            }
            Err(SimError::Definite(_)) => {
                self.report.definite += 1;
                return;
            }
        };
        if let Some((_, LogOutput::Appended(_))) = ret {
            self.report.appends_acked += 1;
        }
        self.operations.push(Operation {
            client,
            input,
            call,
            ret,
        });
    }

    fn reconfigured(&mut self, outcome: Result<(), SimError>) {
        match outcome {
            Ok(()) => self.report.reconfigurations += 1,
            Err(SimError::Indeterminate(_)) => self.report.indeterminate += 1,
            Err(SimError::Definite(_)) => self.report.definite += 1,
        }
    }
}

type Outcome = Result<LogOutput, SimError>;

/// Plans the workload and spawns one task per client, client `i` on `logs[i % len]`.
pub fn spawn_clients(
    spawner: &Spawner,
    rng: &mut ChaCha8Rng,
    logs: &[Rc<dyn SimLog>],
    (clients, operations, mix): (usize, usize, OpMix),
    recorder: &Rc<RefCell<Recorder>>,
) {
    for (client, planned) in plan(rng, clients, operations, mix).into_iter().enumerate() {
        let log = Rc::clone(&logs[client % logs.len()]);
        spawner.spawn(run_client(client, log, planned, Rc::clone(recorder)));
    }
}

async fn run_client(
    client: usize,
    log: Rc<dyn SimLog>,
    plan: Vec<Planned>,
    recorder: Rc<RefCell<Recorder>>,
) {
    for planned in plan {
        let (input, call) = {
            let mut recorder = recorder.borrow_mut();
            recorder.report.operations += 1;
            (recorder.input(planned), recorder.tick())
        };
        let Some(input) = input else {
            let outcome = log.reconfigure().await;
            recorder.borrow_mut().reconfigured(outcome);
            continue;
        };
        let outcome = match input {
            LogInput::Append(value) => log.append(value).await.map(LogOutput::Appended),
            LogInput::CheckTail => log.check_tail().await.map(LogOutput::Tail),
            LogInput::Read(position) => log.read(position).await.map(LogOutput::Value),
        };
        recorder.borrow_mut().finish(client, input, call, outcome);
    }
}
