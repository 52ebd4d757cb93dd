//! The LogDrive writer a kill -9 test runs as a real process (`sealog-fault logdrive-writer`),
//! and the lines it speaks. It opens a store on a real ring (io_uring) with the background
//! reclaimer at its most eager (relocating whenever a segment is garbage, unpaced), goes on
//! with the LogDrives the ring holds, and runs the workload ([`super::workload`]) until it is
//! killed, printing every operation when it issues it and when it is done, one line each,
//! flushed before the next step:
//!
//! ```text
//! issue 7 write 3 12 40 2 1711 3954221101 .     (id, generation, address, epoch, length, CRC)
//! done 7 ok .
//! issue 8 create 5 1048576 .                    (id, capacity)
//! done 8 created 13 .                           (the generation)
//! issue 9 seal 3 12 41 .   issue 10 fence 3 12 3 .   issue 11 trim 1 1 200 .
//! issue 12 delete 4 9 .    issue 13 reclaim .
//! done 12 failed definite the ring is full .    (or indeterminate)
//! stats 4120 211 215 .                          (records relocated, relocation steps, ring trims)
//! ```
//!
//! Every line ends with ` .`, so a line the kill cut short is never taken for a whole one.
//! [`facts_from_lines`] turns what the parent read into the model's facts: an operation done
//! `ok` (or `created`) was acknowledged, one issued and not done (or failed indeterminately)
//! may or may not have happened, a definite refusal did nothing.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use sealog_logdrive::{LogDriveStore, ReclaimPolicy, StoreOptions};

use super::model::{payload, Fact, Op, Status};
use super::workload::{Journal, Outcome, Progress, Workload};

/// Prints the journal's lines on stdout, each flushed.
struct PrintJournal {
    out: std::io::Stdout,
}

impl PrintJournal {
    fn line(&mut self, text: &str) {
        let mut out = self.out.lock();
        // A parent that stopped reading has killed us, or will.
        let _ = writeln!(out, "{text} .");
        let _ = out.flush();
    }
}

/// An operation as the words of its line.
fn words(op: &Op) -> String {
    match *op {
        Op::Create { id, capacity } => format!("create {id} {capacity}"),
        Op::Write {
            id,
            generation,
            address,
            epoch,
        } => {
            let bytes = payload(id, generation, address);
            let crc = crc32c::crc32c(&bytes);
            let len = bytes.len();
            format!("write {id} {generation} {address} {epoch} {len} {crc}")
        }
        Op::Seal {
            id,
            generation,
            length,
        } => format!("seal {id} {generation} {length}"),
        Op::Fence {
            id,
            generation,
            epoch,
        } => format!("fence {id} {generation} {epoch}"),
        Op::Trim {
            id,
            generation,
            upto,
        } => format!("trim {id} {generation} {upto}"),
        Op::Delete { id, generation } => format!("delete {id} {generation}"),
        Op::Reclaim => "reclaim".to_string(),
    }
}

impl Journal for PrintJournal {
    fn issued(&mut self, index: usize, op: &Op) {
        self.line(&format!("issue {index} {}", words(op)));
    }

    fn done(&mut self, index: usize, _op: &Op, outcome: &Outcome) {
        let text = match outcome {
            Outcome::Done => "ok".to_string(),
            Outcome::Created(generation) => format!("created {generation}"),
            Outcome::Failed(error) if error.is_definite() => format!("failed definite {error}"),
            Outcome::Failed(error) => format!("failed indeterminate {error}"),
        };
        self.line(&format!("done {index} {text}"));
    }
}

/// The policy of the writer's reclaimer: in the background, relocating whenever a segment's
/// worth is garbage, unpaced, looking often.
pub fn eager() -> ReclaimPolicy {
    let mut policy = ReclaimPolicy::default()
        .background(true)
        .space_amplification_max(1.0)
        .bandwidth_share(1.0);
    policy.interval = Duration::from_millis(10);
    policy
}

/// Runs the writer on the ring at `path` until killed; returns only when something went
/// wrong (a line `violation ...` says what).
pub fn run_writer(path: &Path, seed: u64) -> Result<(), String> {
    let options = StoreOptions::default().reclaim(eager());
    let store = LogDriveStore::open_with_options(path, options)
        .map_err(|error| format!("the store did not open: {error}"))?;
    let mut journal = PrintJournal {
        out: std::io::stdout(),
    };
    let mut work = Workload::resume(&store, seed, 0);
    work.start(&store, &mut journal)?;
    for group in 0u64.. {
        if work.step(&store, &mut journal)? == Progress::Stopped {
            return Err("the store stopped on a real ring".into());
        }
        if work.ring_full {
            work.reclaim(&store, &mut journal)?;
        }
        if group % 8 == 0 {
            let stats = store.reclaim_stats();
            journal.line(&format!(
                "stats {} {} {}",
                stats.relocated_records, stats.relocation_steps, stats.ring_trims
            ));
        }
    }
    Ok(())
}

/// What a parent read from one writer: the facts, and what the lines said besides.
#[derive(Debug, Default)]
pub struct Heard {
    /// The operations issued, acknowledged or in flight at the kill.
    pub facts: Vec<Fact>,
    /// Of those, acknowledged (reclaimer runs left out).
    pub acknowledged: u64,
    /// Of those, in flight at the kill (reclaimer runs left out).
    pub in_flight: u64,
    /// The generations acknowledged creations took, in order.
    pub generations: Vec<u64>,
    /// The last reclaimer figures: records relocated, relocation steps, ring trims.
    pub stats: (u64, u64, u64),
}

fn parse_op(words: &[&str]) -> Result<Op, String> {
    let number = |index: usize| -> Result<u64, String> {
        words
            .get(index)
            .and_then(|word| word.parse().ok())
            .ok_or_else(|| format!("no number at word {index} of {words:?}"))
    };
    Ok(match words.first().copied() {
        Some("create") => Op::Create {
            id: number(1)?,
            capacity: number(2)?,
        },
        Some("write") => {
            let op = Op::Write {
                id: number(1)?,
                generation: number(2)?,
                address: number(3)?,
                epoch: number(4)?,
            };
            let bytes = payload(number(1)?, number(2)?, number(3)?);
            let printed = (number(5)?, number(6)?);
            let expected = (bytes.len() as u64, u64::from(crc32c::crc32c(&bytes)));
            if printed != expected {
                return Err(format!(
                    "{op:?} printed length and CRC {printed:?}, its payload has {expected:?}"
                ));
            }
            op
        }
        Some("seal") => Op::Seal {
            id: number(1)?,
            generation: number(2)?,
            length: number(3)?,
        },
        Some("fence") => Op::Fence {
            id: number(1)?,
            generation: number(2)?,
            epoch: number(3)?,
        },
        Some("trim") => Op::Trim {
            id: number(1)?,
            generation: number(2)?,
            upto: number(3)?,
        },
        Some("delete") => Op::Delete {
            id: number(1)?,
            generation: number(2)?,
        },
        Some("reclaim") => Op::Reclaim,
        other => return Err(format!("an operation named {other:?}")),
    })
}

/// An operation a writer issued, as its lines tell it.
struct Told {
    op: Op,
    /// Acknowledged or failed indeterminately, and a creation's generation.
    outcome: Option<(Status, Option<u64>)>,
    /// Refused with a definite error: it did nothing.
    refused: bool,
}

/// The facts of a writer's lines (a line the kill cut short, without its ` .`, is dropped).
pub fn facts_from_lines(lines: &[String]) -> Result<Heard, String> {
    let mut ops: Vec<Told> = Vec::new();
    let mut heard = Heard::default();
    for line in lines {
        let Some(line) = line.strip_suffix(" .") else {
            continue;
        };
        let words: Vec<&str> = line.split(' ').collect();
        let index = || -> Result<usize, String> {
            words
                .get(1)
                .and_then(|word| word.parse().ok())
                .ok_or_else(|| format!("no operation index in {line:?}"))
        };
        match words.first().copied() {
            Some("issue") => {
                if index()? != ops.len() {
                    return Err(format!("{line:?} is out of order"));
                }
                ops.push(Told {
                    op: parse_op(&words[2..])?,
                    outcome: None,
                    refused: false,
                });
            }
            Some("done") => {
                let slot = ops
                    .get_mut(index()?)
                    .ok_or_else(|| format!("{line:?} names no operation issued"))?;
                told_done(slot, line, &words, &mut heard)?;
            }
            Some("stats") => {
                let number = |index: usize| words.get(index).and_then(|word| word.parse().ok());
                if let (Some(a), Some(b), Some(c)) = (number(1), number(2), number(3)) {
                    heard.stats = (a, b, c);
                }
            }
            Some("violation") => return Err(format!("the writer reported: {line}")),
            _ => return Err(format!("a line not understood: {line:?}")),
        }
    }
    add_facts(ops, &mut heard);
    Ok(heard)
}

/// Takes the outcome a `done` line (`line`, split into `words`) tells of the operation in
/// `slot`; a creation's generation goes to `heard` too.
fn told_done(slot: &mut Told, line: &str, words: &[&str], heard: &mut Heard) -> Result<(), String> {
    let generation = words.get(3).and_then(|word| word.parse().ok());
    match words.get(2).copied() {
        Some("ok") => slot.outcome = Some((Status::Acked, None)),
        Some("created") => {
            let generation = generation.ok_or_else(|| format!("{line:?}"))?;
            heard.generations.push(generation);
            slot.outcome = Some((Status::Acked, Some(generation)));
        }
        Some("failed") if words.get(3) == Some(&"definite") => slot.refused = true,
        Some("failed") => slot.outcome = Some((Status::Maybe, None)),
        _ => return Err(format!("an outcome not understood: {line:?}")),
    }
    Ok(())
}

/// The operations told, as facts in `heard`: refusals did nothing, and one not done (or
/// failed indeterminately) may or may not have happened; counts them (reclaimer runs aside).
fn add_facts(ops: Vec<Told>, heard: &mut Heard) {
    for Told {
        op,
        outcome,
        refused,
    } in ops
    {
        if refused {
            continue;
        }
        let (status, created) = outcome.unwrap_or((Status::Maybe, None));
        if op != Op::Reclaim {
            heard.acknowledged += u64::from(status == Status::Acked);
            heard.in_flight += u64::from(status == Status::Maybe);
        }
        heard.facts.push(Fact {
            op,
            created,
            status,
        });
    }
}
