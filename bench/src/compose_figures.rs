//! The composition section's figures, which `compose.rs` measures and `compose_report.rs`
//! prints and judges: the engines (the AtomicLogs over each composition and what each is
//! compared with), the comparisons (one group of engines under one load, their cells by
//! round, each judged on the median over the rounds of each round's ratio to its base), and
//! the constants the runner and the report share. A leaf: it imports only other leaves.

use crate::cell::Cell;
use crate::median::median;

/// The payload of every append and write of the section: 4 KiB, as the LogDrive section's.
pub const PAYLOAD_BYTES: usize = 4096;
/// K, the AtomicLogs' window: twice the deepest load's appends in flight, so that the window
/// never holds an append back (a stripe of two scans K / 2 on each child).
pub const WINDOW_K: u64 = 512;
/// The quorums' write quorum (of three children).
pub const WRITE_QUORUM: usize = 2;
/// The rings (drives) of the section: one Engine of three.
pub const RINGS: usize = 3;

/// Which engine a run uses. The AtomicLogs' seal bit lives on a LogDrive composed like their
/// data's, on the same stores.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ComposeEngine {
    /// The raw engine's appends (`Drive::append`) on the first ring.
    Raw,
    /// LogDrive writes on one LogDrive on the first ring.
    LogDrive,
    /// An AtomicLog over one LogDrive.
    AtomicOne,
    /// Three LogDrive writes issued together, one on each ring, an operation done when all
    /// three are: the quorum's comparison.
    Together3,
    /// An AtomicLog over a quorum of three LogDrives on the three rings (Qw = 2).
    AtomicQuorum,
    /// An AtomicLog over a stripe of two quorums of three (six LogDrives, two on each ring).
    AtomicStripeOfQuorums,
    /// Two LogDrives on the first two rings driven at once, each operation one write to
    /// either in turn: the stripe's comparison.
    AtOnce2,
    /// An AtomicLog over a stripe of two LogDrives on the first two rings.
    AtomicStripe,
}

impl ComposeEngine {
    /// The engine's name in the cells and the JSON.
    pub fn name(self) -> &'static str {
        match self {
            ComposeEngine::Raw => "sealog",
            ComposeEngine::LogDrive => "logdrive",
            ComposeEngine::AtomicOne => "atomic-1",
            ComposeEngine::Together3 => "logdrive-x3-together",
            ComposeEngine::AtomicQuorum => "atomic-quorum-3",
            ComposeEngine::AtomicStripeOfQuorums => "atomic-stripe-2xq3",
            ComposeEngine::AtOnce2 => "logdrive-x2-at-once",
            ComposeEngine::AtomicStripe => "atomic-stripe-2",
        }
    }

    /// Rings written.
    pub fn rings(self) -> usize {
        match self {
            ComposeEngine::Raw | ComposeEngine::LogDrive | ComposeEngine::AtomicOne => 1,
            ComposeEngine::AtOnce2 | ComposeEngine::AtomicStripe => 2,
            _ => 3,
        }
    }

    /// Data LogDrives written (0: the raw engine; the AtomicLogs' seal LogDrives aside).
    pub fn logdrives(self) -> usize {
        match self {
            ComposeEngine::Raw => 0,
            ComposeEngine::LogDrive | ComposeEngine::AtomicOne => 1,
            ComposeEngine::AtOnce2 | ComposeEngine::AtomicStripe => 2,
            ComposeEngine::Together3 | ComposeEngine::AtomicQuorum => 3,
            ComposeEngine::AtomicStripeOfQuorums => 6,
        }
    }

    /// Whether it appends through an AtomicLog.
    pub fn atomic(self) -> bool {
        matches!(
            self,
            ComposeEngine::AtomicOne
                | ComposeEngine::AtomicQuorum
                | ComposeEngine::AtomicStripeOfQuorums
                | ComposeEngine::AtomicStripe
        )
    }

    /// What its ratios are taken against, in the same rounds (`None`: a base itself).
    pub fn base(self) -> Option<ComposeEngine> {
        match self {
            ComposeEngine::Raw | ComposeEngine::Together3 | ComposeEngine::AtOnce2 => None,
            ComposeEngine::LogDrive => Some(ComposeEngine::Raw),
            ComposeEngine::AtomicOne => Some(ComposeEngine::LogDrive),
            ComposeEngine::AtomicQuorum | ComposeEngine::AtomicStripeOfQuorums => {
                Some(ComposeEngine::Together3)
            }
            ComposeEngine::AtomicStripe => Some(ComposeEngine::AtOnce2),
        }
    }

    /// For progress lines.
    pub fn label(self) -> &'static str {
        match self {
            ComposeEngine::Raw => "the raw engine's appends",
            ComposeEngine::LogDrive => "LogDrive writes on one LogDrive",
            ComposeEngine::AtomicOne => "an AtomicLog over one LogDrive",
            ComposeEngine::Together3 => "three LogDrive writes issued together",
            ComposeEngine::AtomicQuorum => "an AtomicLog over a quorum of three",
            ComposeEngine::AtomicStripeOfQuorums => "an AtomicLog over a stripe of two quorums",
            ComposeEngine::AtOnce2 => "two LogDrives driven at once",
            ComposeEngine::AtomicStripe => "an AtomicLog over a stripe of two",
        }
    }
}

/// The groups of engines measured together in interleaved rounds, each AtomicLog beside its
/// base: the single LogDrive (with the raw engine under it), the quorum's, the stripe's.
pub const GROUPS: [(&str, &[ComposeEngine]); 3] = [
    (
        "one",
        &[
            ComposeEngine::LogDrive,
            ComposeEngine::AtomicOne,
            ComposeEngine::Raw,
        ],
    ),
    (
        "quorum",
        &[
            ComposeEngine::Together3,
            ComposeEngine::AtomicQuorum,
            ComposeEngine::AtomicStripeOfQuorums,
        ],
    ),
    (
        "stripe",
        &[ComposeEngine::AtOnce2, ComposeEngine::AtomicStripe],
    ),
];

/// One group's engines under one load, in interleaved rounds.
#[derive(Clone, Debug)]
pub struct ComposeComparison {
    /// The group's name ([`GROUPS`]).
    pub group: &'static str,
    /// The engines, in the first round's order.
    pub engines: Vec<ComposeEngine>,
    /// Polling threads.
    pub threads: usize,
    /// Operations in flight, all threads together.
    pub in_flight: usize,
    /// Cells by round, then by engine.
    pub cells: Vec<Vec<Cell>>,
    /// The busiest polling thread's CPU time over each run's window, as a share of it, by
    /// round, then by engine (near 1: the polling thread bounded the run).
    pub poller_cpu_share: Vec<Vec<f64>>,
    /// Measured time of each run, after its warm-up.
    pub seconds_per_run: f64,
    /// Warm-up of each run.
    pub warmup_seconds_per_run: f64,
    /// What the comparison added to the run, every open and close included.
    pub total_seconds: f64,
}

impl ComposeComparison {
    /// The median over the rounds of engine `engine`'s polling thread's share of a CPU.
    pub fn poller_median(&self, engine: usize) -> f64 {
        let mut values: Vec<f64> = self
            .poller_cpu_share
            .iter()
            .filter_map(|round| round.get(engine).copied())
            .collect();
        median(&mut values)
    }

    /// Engine `engine`'s medians as a cell (each figure's own median over the rounds).
    pub fn median_cell(&self, engine: usize) -> Cell {
        crate::cell::median_cell(&self.cells, engine)
    }

    /// The index of `engine`, if this comparison ran it.
    pub fn engine_index(&self, engine: ComposeEngine) -> Option<usize> {
        self.engines.iter().position(|ran| *ran == engine)
    }

    /// Engine `engine`'s `figure` over its base's: the median over the rounds of each round's
    /// ratio (paired by round, as the LogDrive section's, because the device's speed drifts
    /// between runs; see `WriteComparison::over_raw`). `None` for a base, or with no round
    /// measured.
    pub fn over_base(&self, engine: usize, figure: impl Fn(&Cell) -> f64) -> Option<f64> {
        let base = self.engine_index(self.engines[engine].base()?)?;
        let mut ratios: Vec<f64> = self
            .cells
            .iter()
            .filter_map(|round| {
                let (this, base) = (figure(&round[engine]), figure(&round[base]));
                (this > 0.0 && base > 0.0).then(|| this / base)
            })
            .collect();
        (!ratios.is_empty()).then(|| median(&mut ratios))
    }

    /// Appends per second over the base's.
    pub fn throughput_over_base(&self, engine: usize) -> Option<f64> {
        self.over_base(engine, |cell| cell.appends_per_sec)
    }

    /// p50 over the base's.
    pub fn p50_over_base(&self, engine: usize) -> Option<f64> {
        self.over_base(engine, |cell| cell.p50_us)
    }
}

/// What the composition section measured.
#[derive(Clone, Debug)]
pub struct ComposeFigures {
    /// Each group at one in flight, then each at the deep load.
    pub comparisons: Vec<ComposeComparison>,
    /// The section's time, the rings' format included.
    pub seconds: f64,
}

impl ComposeFigures {
    /// `engine`'s ratio at `in_flight` (`figure` picks which), if measured.
    pub fn ratio(
        &self,
        engine: ComposeEngine,
        in_flight: usize,
        figure: fn(&ComposeComparison, usize) -> Option<f64>,
    ) -> Option<f64> {
        self.comparisons
            .iter()
            .filter(|comparison| comparison.in_flight == in_flight)
            .find_map(|comparison| figure(comparison, comparison.engine_index(engine)?))
    }
}
