//! A linearizability checker for a log's history against [`model`](crate::replicated::model)'s
//! sequential specification: a port of Porcupine's checker (Wing & Gong's search with
//! Lowe's memoization), written afresh here rather than taken as a dependency because it is
//! tens of lines, brings no dependency tree, and must take operations that never returned.
//!
//! The invocations and returns lie in one list in time order. The search walks it from the
//! front: at an invocation it tries to linearize that operation next (the model must accept
//! its answer); if it can, and the pair (set of operations linearized, model state) was not
//! met before, the operation is taken out of the list and the walk starts over from the
//! front; otherwise the walk moves on. Reaching a return means the operation returning there
//! had to be linearized by now and was not: the last choice is undone (the operation goes
//! back into the list) and the walk goes on past it. The history is linearizable once every
//! operation that returned is linearized, and not when there is nothing left to undo.
//!
//! An operation that never returned has no return in the list: nothing forces it in, so it
//! may be linearized anywhere after its invocation, or never. Two rewrites keep such
//! operations from multiplying the search: an append whose value some read returned must
//! take effect before the first such read returns, so it gets that return (with its answer
//! unknown); an append whose value no read returned is appended as [`UNREAD`], and the
//! memo counts how many of those were linearized rather than which, since any two of them
//! whose invocations the walk has passed are alike. A read or check_tail that never
//! returned changed nothing and is dropped. The search counts its steps; past a budget it
//! gives up with [`Verdict::Unknown`] rather than run on.

use std::collections::HashSet;

use crate::replicated::history::History;
use crate::replicated::model::{self, LogInput, LogOutput, LogState, UNREAD};

/// The steps a search takes at most by default before it answers [`Verdict::Unknown`].
pub const DEFAULT_STEP_BUDGET: u64 = 2_000_000;

/// What the checker found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Some order of the operations explains every answer.
    Linearizable,
    /// No order does; `longest` operations were the most the search linearized at once.
    NotLinearizable {
        /// The deepest the search got.
        longest: usize,
    },
    /// The search gave up after `steps` steps.
    Unknown {
        /// The steps taken.
        steps: u64,
    },
}

/// No node: the end of the list.
const NONE: usize = usize::MAX;
/// The list's head sentinel.
const HEAD: usize = 0;

/// The events of a history as a doubly linked list over arrays (node 0 is the head).
struct Events {
    next: Vec<usize>,
    prev: Vec<usize>,
    /// For each node, its operation and whether it is the invocation.
    event: Vec<(usize, bool)>,
    /// For each operation, its return's node (`NONE` when it never returned).
    return_node: Vec<usize>,
}

impl Events {
    fn new(entries: &[Entry]) -> Events {
        let mut sorted = Vec::new();
        for (index, entry) in entries.iter().enumerate() {
            sorted.push((entry.call, 0u8, index));
            if let Some(time) = entry.ret {
                sorted.push((time, 1u8, index));
            }
        }
        // At equal times invocations come first: the operations then overlap.
        sorted.sort_unstable();
        let count = sorted.len() + 1;
        let mut events = Events {
            next: (1..=count)
                .map(|n| if n == count { NONE } else { n })
                .collect(),
            prev: (0..count).map(|n| n.wrapping_sub(1)).collect(),
            event: vec![(0, false)],
            return_node: vec![NONE; entries.len()],
        };
        for (node, (_, kind, op)) in sorted.into_iter().enumerate() {
            events.event.push((op, kind == 0));
            if kind == 1 {
                events.return_node[op] = node + 1;
            }
        }
        events
    }

    fn unlink(&mut self, node: usize) {
        let (prev, next) = (self.prev[node], self.next[node]);
        self.next[prev] = next;
        if next != NONE {
            self.prev[next] = prev;
        }
    }

    fn relink(&mut self, node: usize) {
        let (prev, next) = (self.prev[node], self.next[node]);
        self.next[prev] = node;
        if next != NONE {
            self.prev[next] = node;
        }
    }

    /// Takes an invocation and its return out of the list.
    fn lift(&mut self, call: usize) {
        self.unlink(call);
        let ret = self.return_node[self.event[call].0];
        if ret != NONE {
            self.unlink(ret);
        }
    }

    /// Puts them back, in the reverse order.
    fn unlift(&mut self, call: usize) {
        let ret = self.return_node[self.event[call].0];
        if ret != NONE {
            self.relink(ret);
        }
        self.relink(call);
    }
}

/// The set of operations linearized, as bits.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Bits(Vec<u64>);

impl Bits {
    fn with(&self, index: usize) -> Bits {
        let mut bits = self.clone();
        bits.0[index / 64] |= 1 << (index % 64);
        bits
    }

    fn without(&mut self, index: usize) {
        self.0[index / 64] &= !(1 << (index % 64));
    }
}

/// An operation as the search sees it, after the rewrites of the module doc.
#[derive(Clone, Debug)]
struct Entry {
    input: LogInput,
    call: u64,
    /// When it returned, or must be linearized by.
    ret: Option<u64>,
    /// Its answer, when known.
    output: Option<LogOutput>,
    /// An append that never returned and whose value no read returned.
    unread: bool,
}

/// The history's operations rewritten for the search (see the module doc).
fn entries(history: &History) -> Vec<Entry> {
    let ops = &history.operations;
    // The earliest return of a read that returned each value.
    let mut seen_by = std::collections::HashMap::new();
    for (time, output) in ops.iter().filter_map(|op| op.ret) {
        if let LogOutput::Value(Some(value)) = output {
            let by = seen_by.entry(value).or_insert(time);
            *by = time.min(*by);
        }
    }
    let mut entries = Vec::new();
    for op in ops {
        let entry = match (op.input, op.ret) {
            (_, Some((time, output))) => (op.input, Some(time), Some(output), false),
            (LogInput::Append(value), None) => match seen_by.get(&value) {
                Some(by) => (op.input, Some(*by), None, false),
                None => (LogInput::Append(UNREAD), None, None, true),
            },
            (LogInput::CheckTail | LogInput::Read(_), None) => continue,
        };
        let (input, ret, output, unread) = entry;
        entries.push(Entry {
            input,
            call: op.call,
            ret,
            output,
            unread,
        });
    }
    entries
}

/// The search's memo key: the operations linearized (those appending [`UNREAD`] only
/// counted), and the model's state.
type Memo = HashSet<(Bits, usize, LogState)>;

/// Checks `history` against the log's sequential specification, giving up after
/// `step_budget` steps.
pub fn check(history: &History, step_budget: u64) -> Verdict {
    let ops = entries(history);
    let mut events = Events::new(&ops);
    let mut linearized = Bits(vec![0; ops.len().div_ceil(64)]);
    let (mut state, mut unread) = (LogState::new(), 0usize);
    let mut seen = Memo::new();
    let mut taken: Vec<(usize, LogState)> = Vec::new();
    let mut unreturned = ops.iter().filter(|op| op.ret.is_some()).count();
    let (mut node, mut steps, mut longest) = (events.next[HEAD], 0u64, 0usize);
    // Whether the walk tries the appends of unread values (after the other operations).
    let mut unread_turn = false;
    while unreturned > 0 {
        steps += 1;
        if steps > step_budget {
            return Verdict::Unknown { steps };
        }
        if node != NONE && events.event[node].1 {
            let (index, op) = (events.event[node].0, &ops[events.event[node].0]);
            if op.unread != unread_turn {
                node = events.next[node];
                continue;
            }
            if let Some(after) = model::step(&state, op.input, op.output) {
                let bits = if op.unread {
                    linearized.clone()
                } else {
                    linearized.with(index)
                };
                let count = unread + usize::from(op.unread);
                if seen.insert((bits.clone(), count, after.clone())) {
                    taken.push((node, std::mem::replace(&mut state, after)));
                    longest = longest.max(taken.len());
                    (linearized, unread) = (bits, count);
                    unreturned -= usize::from(op.ret.is_some());
                    events.lift(node);
                    (node, unread_turn) = (events.next[HEAD], false);
                    continue;
                }
            }
            node = events.next[node];
            continue;
        }
        // A return whose operation is not linearized yet (or, defensively, the end): the
        // appends of unread values get their turn, then the last choice is undone.
        if !unread_turn {
            (node, unread_turn) = (events.next[HEAD], true);
            continue;
        }
        let Some((call, before)) = taken.pop() else {
            return Verdict::NotLinearizable { longest };
        };
        let op = &ops[events.event[call].0];
        state = before;
        if op.unread {
            unread -= 1;
        } else {
            linearized.without(events.event[call].0);
        }
        unreturned += usize::from(op.ret.is_some());
        events.unlift(call);
        (node, unread_turn) = (events.next[call], op.unread);
    }
    Verdict::Linearizable
}

#[cfg(test)]
#[path = "linearizability_tests.rs"]
mod tests;
