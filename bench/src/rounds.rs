//! The single-writer comparison with the peers as issue 10 judges it: 1 writer x 4 KiB, one
//! append in flight, measured in three interleaved rounds (sealog, raft-engine and okaywal in
//! turn, each a short run), each engine's p50 taken as the median over the rounds, and sealog's
//! over the best peer's. On a shared machine the device's latency drifts by a factor of two
//! within seconds, so one run per engine, far apart in time, compares the drift as much as the
//! engines; interleaved rounds put every engine under the same drift, and the median drops a
//! round that a stall spoiled. This module owns the order of the runs, the bookkeeping of their
//! figures, and the rounds' table, JSON and target; the runs themselves are
//! `cells::sealog_cell` and `peers::peer_cell`.

use serde_json::{json, Value};

use crate::cell::{Cell, PEERS};
use crate::target::Target;

/// Rounds of the comparison. It and the runs' helpers below are built only where they are
/// used: with the peers (which the rounds compare sealog with) and in the tests.
#[cfg(any(feature = "peers", test))]
pub const ROUNDS: usize = 3;

/// The workload: 4 KiB payloads, one writer, one append in flight.
pub const PAYLOAD_BYTES: usize = 4096;

/// The engines, in the first round's order: sealog, then the peers.
pub const ENGINES: [&str; 3] = ["sealog", PEERS[0], PEERS[1]];

/// The target's goal: sealog's median p50 at most the best peer's.
const SEALOG_OVER_BEST_PEER_P50_GOAL: f64 = 1.0;

/// The order in which round `round` runs `engines` engines (indices into the engines): a
/// Williams design, so that over as many rounds as engines (twice as many for an odd count)
/// each engine runs in every position equally often and follows every other engine equally
/// often. Whatever runs first follows a different workload (the previous round's last engine,
/// or before the first round a cell that may leave the device busy), and a fixed order would
/// give that handicap or advantage to one engine every time; likewise what a run follows
/// matters, not only its position: a run after one whose teardown rested the device (a
/// thousand LogDrives deleted and the ring reclaimed) starts on a virtual disk that has
/// drained its host's write-back, and a plain rotation (0 1 2 3, 1 2 3 0, ...) puts the same
/// engine after the same one in every round, which showed here as the raw engine over its
/// own control at 0.91 on average over five runs. Round `r`'s order is the first row
/// (0, 1, n - 1, 2, n - 2, ...) plus `r`, mod n; the rounds from n to 2n run those orders
/// backwards. Three engines get the plain rotation in their first three rounds.
pub fn round_order(engines: usize, round: usize) -> Vec<usize> {
    let mut first = Vec::with_capacity(engines);
    let (mut low, mut high) = (0, engines);
    for slot in 0..engines {
        if slot % 2 == 1 || slot == 0 {
            first.push(low);
            low += 1;
        } else {
            high -= 1;
            first.push(high);
        }
    }
    let row = round % (2 * engines.max(1));
    let shift = row % engines.max(1);
    let order = first.into_iter().map(|engine| (engine + shift) % engines);
    if row < engines {
        order.collect()
    } else {
        order.rev().collect()
    }
}

/// A run of the rounds measures a cell's time over this. The quick run's 3 s cells make 0.75 s
/// runs (some 5,000 appends at 150 us each, plenty for a p50) after 0.15 s of warm-up; with the
/// setup of each run's fresh ring or store (0.3 s on a loaded machine) the nine runs add about
/// 11 s to the quick run.
#[cfg(any(feature = "peers", test))]
const CELL_OVER_RUN_DURATION: u32 = 4;

/// One run of the rounds: a quarter of a cell's measured time (see
/// [`CELL_OVER_RUN_DURATION`]), after a warm-up of a fifth of that.
#[cfg(any(feature = "peers", test))]
pub fn run_workload(cell_duration: std::time::Duration) -> crate::cells::Workload {
    let duration = cell_duration / CELL_OVER_RUN_DURATION;
    crate::cells::Workload {
        payload_bytes: PAYLOAD_BYTES,
        writers: 1,
        in_flight: 1,
        duration,
        warmup: duration / 5,
    }
}

/// Measures the rounds when the run includes the 1 x 4 KiB cell (else says why not): sealog's
/// runs each on a fresh ring at `ring` opened with `options`, the peers' each on a fresh store
/// in a new directory under `peers_dir`.
#[cfg(feature = "peers")]
pub fn measure(
    ring: &std::path::Path,
    shape: crate::cells::RingShape,
    options: &sealog::DriveOptions,
    peers_dir: &std::path::Path,
    cell_workloads: &[crate::cells::Workload],
) -> Result<Outcome, String> {
    let single = cell_workloads.iter().find(|workload| {
        (workload.payload_bytes, workload.writers, workload.in_flight) == (PAYLOAD_BYTES, 1, 1)
    });
    let Some(single) = single else {
        return Ok(Err("this run has no 1 writer x 4 KiB x 1 in flight cell"));
    };
    let workload = run_workload(single.duration);
    let started = std::time::Instant::now();
    let cells = interleave(ROUNDS, ENGINES.len(), |engine, round| {
        crate::progress::progress(&format!(
            "single-writer round {}/{ROUNDS}: {}",
            round + 1,
            ENGINES[engine]
        ));
        let peer = crate::peers::Peer::ALL
            .into_iter()
            .find(|peer| peer.name() == ENGINES[engine]);
        match peer {
            Some(peer) => crate::peers::peer_cell(peer, peers_dir, workload),
            None => crate::cells::sealog_cell(ring, shape, workload, options.clone()),
        }
    })?;
    Ok(Ok(SingleWriterRounds {
        cells,
        seconds_per_run: workload.duration.as_secs_f64(),
        warmup_seconds_per_run: workload.warmup.as_secs_f64(),
        total_seconds: started.elapsed().as_secs_f64(),
    }))
}

/// Runs `rounds` rounds of `engines` engines, each round in [`round_order`], by calling
/// `measure(engine, round)`; returns the figures (cells, read rows) by round, then by engine
/// (in the engines' own order, not the order they ran in). The LogDrive section interleaves
/// its raw and LogDrive runs with it too.
pub fn interleave<T>(
    rounds: usize,
    engines: usize,
    mut measure: impl FnMut(usize, usize) -> Result<T, String>,
) -> Result<Vec<Vec<T>>, String> {
    let mut by_round = Vec::with_capacity(rounds);
    for round in 0..rounds {
        let mut by_engine: Vec<Option<T>> = (0..engines).map(|_| None).collect();
        for engine in round_order(engines, round) {
            by_engine[engine] = Some(measure(engine, round)?);
        }
        let figures: Option<Vec<T>> = by_engine.into_iter().collect();
        by_round.push(figures.expect("a rotation runs every engine once"));
    }
    Ok(by_round)
}

/// What the rounds measured.
#[derive(Clone, Debug)]
pub struct SingleWriterRounds {
    /// Cells by round, then by engine ([`ENGINES`]'s order).
    pub cells: Vec<Vec<Cell>>,
    /// Measured time of each run, after its warm-up.
    pub seconds_per_run: f64,
    /// Warm-up of each run.
    pub warmup_seconds_per_run: f64,
    /// What the rounds added to the run, setup of every ring and store included.
    pub total_seconds: f64,
}

/// The rounds, or why this run has none (the target is then not judged).
pub type Outcome = Result<SingleWriterRounds, &'static str>;

impl SingleWriterRounds {
    /// The median over the rounds of engine `engine`'s `figure`.
    pub fn median(&self, engine: usize, figure: impl Fn(&Cell) -> f64) -> f64 {
        let mut values: Vec<f64> = self
            .cells
            .iter()
            .map(|round| figure(&round[engine]))
            .collect();
        crate::median::median(&mut values)
    }

    /// The peer (an index into [`ENGINES`]) with the lowest median p50, among those measured.
    pub fn best_peer(&self) -> Option<usize> {
        (1..ENGINES.len())
            .map(|engine| (engine, self.median(engine, |cell| cell.p50_us)))
            .filter(|(_, p50_us)| *p50_us > 0.0)
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(engine, _)| engine)
    }

    /// The judged figure: sealog's median p50 over the best peer's median p50.
    pub fn sealog_over_best_peer_p50(&self) -> Option<f64> {
        let best = self.best_peer()?;
        let sealog_p50_us = self.median(0, |cell| cell.p50_us);
        (sealog_p50_us > 0.0).then(|| sealog_p50_us / self.median(best, |cell| cell.p50_us))
    }

    /// Round `round`'s own ratio, shown beside (not judged): sealog's p50 over the lowest peer
    /// p50 of that round.
    fn round_ratio(&self, round: usize) -> Option<f64> {
        let cells = &self.cells[round];
        let best_peer_p50_us = cells[1..]
            .iter()
            .map(|cell| cell.p50_us)
            .filter(|p50_us| *p50_us > 0.0)
            .min_by(f64::total_cmp)?;
        Some(cells[0].p50_us / best_peer_p50_us)
    }

    /// The rounds' table: p50/p99 per engine per round, their medians, and the judged ratio.
    pub fn table(&self) -> Vec<String> {
        let column = |engine: &str| format!("{engine} p50/p99 us");
        let mut header = format!("{:<8} {:<28}", "1x4KiB", "order");
        for engine in ENGINES {
            header.push_str(&format!(" {:>22}", column(engine)));
        }
        header.push_str(&format!(" {:>10}", "xbest p50"));
        let mut lines = vec![
            format!(
                "single writer, 4 KiB, 1 in flight: {} interleaved rounds, each run {:.2} s \
                 after {:.2} s of warm-up, each round starting one engine later ({:.1} s in all)",
                self.cells.len(),
                self.seconds_per_run,
                self.warmup_seconds_per_run,
                self.total_seconds
            ),
            header,
        ];
        let figures =
            |p50_us: f64, p99_us: f64| format!(" {:>22}", format!("{p50_us:.0}/{p99_us:.0}"));
        let ratio =
            |value: Option<f64>| value.map_or("-".to_string(), |value| format!("{value:.2}"));
        for (round, cells) in self.cells.iter().enumerate() {
            let order: Vec<&str> = round_order(ENGINES.len(), round)
                .into_iter()
                .map(|engine| ENGINES[engine])
                .collect();
            let mut line = format!(
                "{:<8} {:<28}",
                format!("round {}", round + 1),
                order.join(" ")
            );
            for cell in cells {
                line.push_str(&figures(cell.p50_us, cell.p99_us));
            }
            line.push_str(&format!(" {:>10}", ratio(self.round_ratio(round))));
            lines.push(line);
        }
        let mut line = format!("{:<8} {:<28}", "median", "");
        for engine in 0..ENGINES.len() {
            line.push_str(&figures(
                self.median(engine, |cell| cell.p50_us),
                self.median(engine, |cell| cell.p99_us),
            ));
        }
        line.push_str(&format!(" {:>10}", ratio(self.sealog_over_best_peer_p50())));
        lines.push(line);
        lines.push(match self.best_peer() {
            Some(best) => format!(
                "judged: sealog's median p50 {:.0} us over {}'s {:.0} us (the best peer's) = {}; \
                 the rounds' own ratios are shown beside, not judged",
                self.median(0, |cell| cell.p50_us),
                ENGINES[best],
                self.median(best, |cell| cell.p50_us),
                ratio(self.sealog_over_best_peer_p50())
            ),
            None => "judged: no peer measured a p50".to_string(),
        });
        lines
    }

    /// The rounds as JSON: every run in the order it ran, each engine's medians, and the judged
    /// ratio (MB means 10^6 bytes, as in the cells).
    pub fn to_json(&self) -> Value {
        let mut runs = Vec::new();
        for (round, cells) in self.cells.iter().enumerate() {
            for (position, engine) in round_order(ENGINES.len(), round).into_iter().enumerate() {
                let cell = &cells[engine];
                runs.push(json!({
                    "round": round + 1,
                    "position": position + 1,
                    "engine": cell.engine,
                    "appends_per_sec": cell.appends_per_sec,
                    "mb_per_sec": cell.mb_per_sec,
                    "p50_us": cell.p50_us,
                    "p99_us": cell.p99_us,
                    "p999_us": cell.p999_us,
                }));
            }
        }
        let medians: Vec<Value> = ENGINES
            .iter()
            .enumerate()
            .map(|(engine, name)| {
                json!({
                    "engine": name,
                    "appends_per_sec": self.median(engine, |cell| cell.appends_per_sec),
                    "mb_per_sec": self.median(engine, |cell| cell.mb_per_sec),
                    "p50_us": self.median(engine, |cell| cell.p50_us),
                    "p99_us": self.median(engine, |cell| cell.p99_us),
                })
            })
            .collect();
        json!({
            "judged": true,
            "payload_bytes": PAYLOAD_BYTES,
            "writers": 1,
            "in_flight": 1,
            "rounds": self.cells.len(),
            "seconds_per_run": self.seconds_per_run,
            "warmup_seconds_per_run": self.warmup_seconds_per_run,
            "total_seconds": self.total_seconds,
            "runs": runs,
            "medians": medians,
            "best_peer": self.best_peer().map(|engine| ENGINES[engine]),
            "sealog_p50_over_best_peer_p50": self.sealog_over_best_peer_p50(),
        })
    }
}

/// The rounds' lines for the terminal, or the sentence saying why there are none.
pub fn report_lines(outcome: &Outcome) -> Vec<String> {
    match outcome {
        Ok(rounds) => rounds.table(),
        Err(why) => vec![format!(
            "single writer against the peers: no interleaved rounds ({why}), so that target \
             is not judged"
        )],
    }
}

/// The rounds' JSON, or `judged: false` with the reason.
pub fn outcome_json(outcome: &Outcome) -> Value {
    match outcome {
        Ok(rounds) => rounds.to_json(),
        Err(why) => json!({ "judged": false, "reason": why }),
    }
}

/// Issue 10's single-writer target (not measured when the run has no rounds).
pub fn single_writer_target(outcome: &Outcome) -> Target {
    Target {
        name: "1 writer x 4 KiB: sealog p50 over the best peer's p50 \
               (median of 3 interleaved rounds)",
        value: outcome
            .as_ref()
            .ok()
            .and_then(SingleWriterRounds::sealog_over_best_peer_p50),
        goal: SEALOG_OVER_BEST_PEER_P50_GOAL,
        higher_is_better: false,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// Each engine runs in every position once over three rounds, and round 1 is the plain
    /// order (sealog first).
    #[test]
    fn rounds_rotate_so_each_engine_runs_first_once() {
        let orders: Vec<Vec<usize>> = (0..ROUNDS)
            .map(|round| round_order(ENGINES.len(), round))
            .collect();
        assert_eq!(orders, [[0, 1, 2], [1, 2, 0], [2, 0, 1]]);
        for position in 0..ENGINES.len() {
            let mut engines: Vec<usize> = orders.iter().map(|order| order[position]).collect();
            engines.sort_unstable();
            assert_eq!(engines, [0, 1, 2], "position {position}");
        }
    }

    /// Over as many rounds as engines (4), twice as many (3, 5), each engine runs in every
    /// position equally often and every ordered pair of engines is adjacent (one right after
    /// the other within a round) equally often.
    #[test]
    fn orders_balance_positions_and_what_each_engine_follows() {
        assert_eq!(
            (0..4)
                .map(|round| round_order(4, round))
                .collect::<Vec<_>>(),
            [[0, 1, 3, 2], [1, 2, 0, 3], [2, 3, 1, 0], [3, 0, 2, 1]]
        );
        for engines in [2, 3, 4, 5, 6] {
            let rounds = if engines % 2 == 0 {
                engines
            } else {
                2 * engines
            };
            let orders: Vec<Vec<usize>> = (0..rounds)
                .map(|round| round_order(engines, round))
                .collect();
            let mut positions = vec![vec![0; engines]; engines];
            let mut follows = vec![vec![0; engines]; engines];
            for order in &orders {
                let mut sorted = order.clone();
                sorted.sort_unstable();
                assert_eq!(sorted, (0..engines).collect::<Vec<_>>(), "{order:?}");
                for (position, &engine) in order.iter().enumerate() {
                    positions[engine][position] += 1;
                }
                for pair in order.windows(2) {
                    follows[pair[0]][pair[1]] += 1;
                }
            }
            let each = rounds / engines;
            assert!(
                positions.iter().flatten().all(|&count| count == each),
                "{engines} engines: positions {positions:?}"
            );
            for (before, row) in follows.iter().enumerate() {
                for (after, &count) in row.iter().enumerate() {
                    let expected = if before == after { 0 } else { each };
                    assert_eq!(
                        count, expected,
                        "{engines} engines: {before} before {after}"
                    );
                }
            }
        }
    }

    /// A run is a quarter of a cell (the quick run's 3 s cells: 0.75 s runs after 0.15 s of
    /// warm-up), so that the nine runs add little to the quick run.
    #[test]
    fn a_run_is_a_quarter_of_a_cell() {
        let workload = run_workload(Duration::from_secs(3));
        assert_eq!(workload.duration, Duration::from_millis(750));
        assert_eq!(workload.warmup, Duration::from_millis(150));
        let shape = (workload.payload_bytes, workload.writers, workload.in_flight);
        assert_eq!(shape, (PAYLOAD_BYTES, 1, 1));
    }

    /// The runs happen in the interleaved order, and their cells come back by engine.
    #[test]
    fn interleave_runs_in_rotated_order_and_files_by_engine() -> Result<(), String> {
        let mut ran = Vec::new();
        let cells = interleave(ROUNDS, ENGINES.len(), |engine, round| {
            ran.push((round, engine));
            let mut cell = Cell::empty(ENGINES[engine], 4096, 1, 1);
            cell.p50_us = (100 * round + engine) as f64;
            Ok(cell)
        })?;
        let order: Vec<usize> = ran.iter().map(|&(_, engine)| engine).collect();
        assert_eq!(order, [0, 1, 2, 1, 2, 0, 2, 0, 1]);
        for (round, cells) in cells.iter().enumerate() {
            for (engine, cell) in cells.iter().enumerate() {
                assert_eq!(cell.engine, ENGINES[engine]);
                assert_eq!(cell.p50_us, (100 * round + engine) as f64);
            }
        }
        let failed = interleave(ROUNDS, ENGINES.len(), |engine, round| {
            if (round, engine) == (1, 2) {
                Err("okaywal failed".to_string())
            } else {
                Ok(Cell::default())
            }
        });
        assert_eq!(failed.err().as_deref(), Some("okaywal failed"));
        Ok(())
    }

    /// `(p50, p99)` of sealog, raft-engine and okaywal, per round.
    fn rounds(figures: [[(f64, f64); 3]; 3]) -> SingleWriterRounds {
        let cells = figures
            .iter()
            .map(|round| {
                round
                    .iter()
                    .zip(ENGINES)
                    .map(|(&(p50_us, p99_us), engine)| Cell {
                        p50_us,
                        p99_us,
                        ..Cell::empty(engine, 4096, 1, 1)
                    })
                    .collect()
            })
            .collect();
        SingleWriterRounds {
            cells,
            seconds_per_run: 1.0,
            warmup_seconds_per_run: 0.2,
            total_seconds: 12.0,
        }
    }

    /// The medians drop one spoiled round per engine; the best peer is the one with the lowest
    /// median p50 (here okaywal, although raft-engine had the lowest p50 of one round); the
    /// judged figure is sealog's median over that peer's median.
    #[test]
    fn medians_pick_the_best_peer_and_judge_against_it() {
        let measured = rounds([
            [(150.0, 400.0), (200.0, 500.0), (100.0, 300.0)],
            [(900.0, 4000.0), (90.0, 450.0), (110.0, 350.0)],
            [(120.0, 380.0), (210.0, 520.0), (5000.0, 9000.0)],
        ]);
        assert_eq!(measured.median(0, |cell| cell.p50_us), 150.0);
        assert_eq!(measured.median(1, |cell| cell.p50_us), 200.0);
        assert_eq!(measured.median(2, |cell| cell.p50_us), 110.0);
        assert_eq!(measured.median(0, |cell| cell.p99_us), 400.0);
        assert_eq!(measured.best_peer(), Some(2));
        let ratio = measured.sealog_over_best_peer_p50().expect("judged");
        assert!((ratio - 150.0 / 110.0).abs() < 1e-12);
        assert_eq!(measured.round_ratio(1), Some(10.0));
        let target = single_writer_target(&Ok(measured.clone()));
        assert_eq!(target.goal, 1.0);
        assert_eq!(target.held(), Some(false));
        let json = measured.to_json();
        assert_eq!(json["best_peer"], "okaywal");
        assert_eq!(json["runs"].as_array().map(Vec::len), Some(9));
        assert_eq!(json["runs"][3]["engine"], "raft-engine");
        assert_eq!(json["medians"][2]["p50_us"], 110.0);
        assert_eq!(measured.table().len(), 2 + ROUNDS + 2);

        let faster = rounds([[(90.0, 300.0), (200.0, 500.0), (100.0, 300.0)]; 3]);
        assert_eq!(single_writer_target(&Ok(faster)).held(), Some(true));
    }

    /// Without rounds the target is not judged, and the JSON and the report say why.
    #[test]
    fn no_rounds_means_not_judged() {
        let outcome: Outcome = Err("built without the peers feature");
        assert_eq!(single_writer_target(&outcome).held(), None);
        assert_eq!(outcome_json(&outcome)["judged"], false);
        let lines = report_lines(&outcome);
        assert!(lines[0].contains("not judged"), "{lines:?}");
    }
}
