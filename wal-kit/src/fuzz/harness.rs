//! Running cases: one case is a base ring, a stack of mutations (on its bytes and its set of
//! unreadable blocks) and the checks, all chosen by one [`Choices`]; a run is many cases from
//! one seed, bounded by a count or a time, with every panic caught (and its message and place
//! kept) and every failure printed with the command that reproduces it; the tally counts
//! inputs, failures, outcomes, mutations, model checks (and why one was skipped) and, per row
//! of the decision table, how many inputs reached it. The libFuzzer target's body is here too,
//! where a failure must panic instead. It owns no mutation and no check of its own.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::panic::{self, AssertUnwindSafe};
use std::sync::{Mutex, Once, OnceLock};
use std::time::{Duration, Instant};

use super::check::check_image;
use super::choices::{case_seed, Choices};
use super::mutate::mutate;
use super::mutation::Mutation;
use super::observe::Observed;
use super::rings::Bases;
use super::source::Image;
use sealog_wal::decision::ROWS;

thread_local! {
    static CAPTURING: Cell<bool> = const { Cell::new(false) };
    static CAPTURED: RefCell<Option<String>> = const { RefCell::new(None) };
}

static HOOK: Once = Once::new();

/// Runs `body`, catching a panic: `Err` holds the panic's place and message. While it runs,
/// a panic on this thread is not printed by the panic hook (the caller reports it); panics
/// elsewhere still are.
pub fn catch_panic<T>(body: impl FnOnce() -> T) -> Result<T, String> {
    HOOK.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if CAPTURING.with(Cell::get) {
                CAPTURED.with(|captured| *captured.borrow_mut() = Some(info.to_string()));
            } else {
                previous(info);
            }
        }));
    });
    let was_capturing = CAPTURING.with(|capturing| capturing.replace(true));
    let result = panic::catch_unwind(AssertUnwindSafe(body));
    CAPTURING.with(|capturing| capturing.set(was_capturing));
    result.map_err(|payload| {
        let captured = CAPTURED.with(|captured| captured.borrow_mut().take());
        captured.unwrap_or_else(|| {
            payload
                .downcast_ref::<&str>()
                .map(|text| text.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".into())
        })
    })
}

/// How a case ended.
#[derive(Clone, Debug)]
pub enum CaseResult {
    /// Every invariant held (what the checks saw, boxed: it is far larger than the others).
    Passed(Box<Observed>),
    /// An invariant broke (or the base ring's workload found its own breakage).
    Violation(String),
    /// Something panicked: its place and message.
    Panicked(String),
}

/// One case: what it started from, what was done to it, and how it ended.
#[derive(Clone, Debug)]
pub struct Case {
    /// The base ring's name.
    pub base: String,
    /// The mutations, in the order applied.
    pub mutations: Vec<Mutation>,
    /// How it ended.
    pub result: CaseResult,
}

/// The most mutations stacked on one input.
const MUTATIONS_MAX: u64 = 6;

/// Chooses a base ring and mutations, applies them and checks the image; `Err` is a broken
/// invariant. Panics propagate. `case` records the base and the mutations as they are chosen,
/// so a panic's report still has them.
fn case_body(
    bases: &mut Bases,
    choices: &mut Choices<'_>,
    fresh: bool,
    case: &mut Case,
) -> Result<Observed, String> {
    let ring = bases.pick(choices, fresh)?;
    case.base.clone_from(&ring.name);
    let mut image = Image::new(ring.image.clone(), ring.geometry.block_size_bytes);
    let count = if choices.chance(1, 16) {
        0
    } else {
        choices.between(1, MUTATIONS_MAX)
    };
    for _ in 0..count {
        let mutation = mutate(&ring, &mut image, choices);
        case.mutations.push(mutation);
    }
    check_image(&image)
}

/// Runs one case, catching panics.
pub fn run_case(bases: &mut Bases, choices: &mut Choices<'_>) -> Case {
    let mut case = Case {
        base: "(not chosen yet)".into(),
        mutations: Vec::new(),
        result: CaseResult::Violation(String::new()),
    };
    let outcome = catch_panic(|| case_body(bases, choices, false, &mut case));
    case.result = match outcome {
        Ok(Ok(observed)) => CaseResult::Passed(Box::new(observed)),
        Ok(Err(violation)) => CaseResult::Violation(violation),
        Err(panic) => CaseResult::Panicked(panic),
    };
    case
}

/// The libFuzzer target's body: the input's bytes are the choices (which base ring, which
/// mutations, which fields and values). A broken invariant panics, so libFuzzer keeps the input.
pub fn fuzz_bytes(bytes: &[u8]) {
    static BASES: OnceLock<Mutex<Bases>> = OnceLock::new();
    let bases = BASES.get_or_init(|| Mutex::new(Bases::new(0, 64)));
    let mut bases = bases
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let mut choices = Choices::from_bytes(bytes);
    let mut case = Case {
        base: String::new(),
        mutations: Vec::new(),
        result: CaseResult::Violation(String::new()),
    };
    if let Err(violation) = case_body(&mut bases, &mut choices, true, &mut case) {
        panic!(
            "{violation}\n  base: {}\n  mutations: {:?}",
            case.base, case.mutations
        );
    }
}

/// What a run does.
#[derive(Clone, Copy, Debug)]
pub struct RunOptions {
    /// The run's seed: case `i` is `case_seed(seed, i)`.
    pub seed: u64,
    /// Run at most this many cases.
    pub cases: Option<u64>,
    /// Stop starting cases after this long.
    pub duration: Option<Duration>,
    /// Run only case `i` (to reproduce it).
    pub only_case: Option<u64>,
    /// How many workload rings the run draws its bases from.
    pub workload_seeds: u64,
}

/// Counts over a run.
#[derive(Clone, Debug, Default)]
pub struct Tally {
    /// Inputs run (each replayed in every mode).
    pub inputs: u64,
    /// Inputs that panicked.
    pub panics: u64,
    /// Inputs that broke an invariant.
    pub violations: u64,
    /// Inputs that reached each row (in any mode), in [`ROWS`] order.
    pub row_inputs: [u64; ROWS.len()],
    /// Inputs whose strict replay reached each row.
    pub row_inputs_strict: [u64; ROWS.len()],
    /// Inputs whose truncating replay reached each row.
    pub row_inputs_truncating: [u64; ROWS.len()],
    /// Inputs whose quarantine replay reached each row.
    pub row_inputs_quarantine: [u64; ROWS.len()],
    /// Times each row was taken, every mode together.
    pub row_decisions: [u64; ROWS.len()],
    /// Strict replay's outcomes and error kinds.
    pub strict: BTreeMap<String, u64>,
    /// Truncating replay's outcomes and error kinds.
    pub truncating: BTreeMap<String, u64>,
    /// Quarantine replay's outcomes and error kinds.
    pub quarantine: BTreeMap<String, u64>,
    /// The model writer's reopen checks.
    pub model: BTreeMap<&'static str, u64>,
    /// The model writer's quarantine reopen checks.
    pub quarantine_model: BTreeMap<&'static str, u64>,
    /// Mutations applied, by kind.
    pub mutations: BTreeMap<&'static str, u64>,
}

impl Tally {
    /// Counts a case.
    pub fn add(&mut self, case: &Case) {
        self.inputs += 1;
        for mutation in &case.mutations {
            *self.mutations.entry(mutation.name()).or_default() += 1;
        }
        let observed = match &case.result {
            CaseResult::Passed(observed) => observed,
            CaseResult::Violation(_) => {
                self.violations += 1;
                return;
            }
            CaseResult::Panicked(_) => {
                self.panics += 1;
                return;
            }
        };
        *self.strict.entry(observed.strict.clone()).or_default() += 1;
        *self
            .truncating
            .entry(observed.truncating.clone())
            .or_default() += 1;
        *self
            .quarantine
            .entry(observed.quarantine.clone())
            .or_default() += 1;
        *self.model.entry(observed.model.name()).or_default() += 1;
        *self
            .quarantine_model
            .entry(observed.quarantine_model.name())
            .or_default() += 1;
        for row in 0..ROWS.len() {
            let (strict, truncating) = (observed.strict_rows[row], observed.truncating_rows[row]);
            let quarantine = observed.quarantine_rows[row];
            self.row_inputs[row] += u64::from(strict + truncating + quarantine > 0);
            self.row_inputs_strict[row] += u64::from(strict > 0);
            self.row_inputs_truncating[row] += u64::from(truncating > 0);
            self.row_inputs_quarantine[row] += u64::from(quarantine > 0);
            self.row_decisions[row] += strict + truncating + quarantine;
        }
    }

    /// Whether every input kept every invariant.
    pub fn passed(&self) -> bool {
        self.panics == 0 && self.violations == 0
    }

    /// The summary: a line of totals, a line per decision row, then outcomes, model checks and
    /// mutations.
    pub fn lines(&self) -> Vec<String> {
        let mut lines = vec![format!(
            "inputs {}, panics {}, invariant violations {} (each input replayed twice in each \
             of the three recovery modes)",
            self.inputs, self.panics, self.violations
        )];
        let width = ROWS.iter().map(|row| row.label.len()).max().unwrap_or(0);
        for (index, row) in ROWS.iter().enumerate() {
            lines.push(format!(
                "row {:<width$} {:>8} inputs (strict {}, truncating {}, quarantine {}), {} \
                 decisions",
                row.label,
                self.row_inputs[index],
                self.row_inputs_strict[index],
                self.row_inputs_truncating[index],
                self.row_inputs_quarantine[index],
                self.row_decisions[index]
            ));
        }
        let join = |counts: &BTreeMap<String, u64>| {
            counts
                .iter()
                .map(|(name, count)| format!("{name} {count}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let join_static = |counts: &BTreeMap<&'static str, u64>| {
            join(&counts.iter().map(|(k, v)| (k.to_string(), *v)).collect())
        };
        lines.push(format!("strict replay: {}", join(&self.strict)));
        lines.push(format!("truncating replay: {}", join(&self.truncating)));
        lines.push(format!("quarantine replay: {}", join(&self.quarantine)));
        lines.push(format!("model writer reopen: {}", join_static(&self.model)));
        lines.push(format!(
            "model writer quarantine reopen: {}",
            join_static(&self.quarantine_model)
        ));
        lines.push(format!("mutations: {}", join_static(&self.mutations)));
        lines
    }
}

/// The report of a failed case, with the command that reproduces it.
pub fn failure_text(seed: u64, index: u64, case: &Case) -> String {
    let (kind, what) = match &case.result {
        CaseResult::Passed(_) => return String::new(),
        CaseResult::Violation(what) => ("invariant violation", what),
        CaseResult::Panicked(what) => ("panic", what),
    };
    format!(
        "{kind} in case {index} of seed {seed}: {what}\n  base: {}\n  mutations: {:?}\n  \
         reproduce: cargo run --release -p sealog-wal-kit --example fuzz_rings -- --seed {seed} \
         --case {index}",
        case.base, case.mutations
    )
}

/// Runs cases until the count or the time is reached; `on_case` sees each case with its index
/// (to print failures as they happen).
pub fn run(options: &RunOptions, on_case: &mut dyn FnMut(u64, &Case)) -> Tally {
    let mut bases = Bases::new(options.seed, options.workload_seeds);
    let mut tally = Tally::default();
    let started = Instant::now();
    let indices: Box<dyn Iterator<Item = u64>> = match options.only_case {
        Some(index) => Box::new(std::iter::once(index)),
        None => Box::new(0..options.cases.unwrap_or(u64::MAX)),
    };
    for index in indices {
        if options
            .duration
            .is_some_and(|duration| started.elapsed() >= duration)
        {
            break;
        }
        let mut choices = Choices::from_seed(case_seed(options.seed, index));
        let case = run_case(&mut bases, &mut choices);
        tally.add(&case);
        on_case(index, &case);
    }
    tally
}
