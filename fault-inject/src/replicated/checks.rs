//! The checks a finished history must pass besides linearizability, each with a message
//! that says what broke: no two acknowledged appends share a position, and a check_tail
//! that started after another returned never answers less.

use std::collections::BTreeMap;

use crate::replicated::history::History;
use crate::replicated::model::{LogInput, LogOutput};

/// The acknowledged appends by position; an error when two share one.
pub fn acknowledged_positions(history: &History) -> Result<BTreeMap<u64, u64>, String> {
    let mut positions = BTreeMap::new();
    for op in &history.operations {
        if let (LogInput::Append(value), Some((_, LogOutput::Appended(position)))) =
            (op.input, op.ret)
        {
            if let Some(other) = positions.insert(position, value) {
                return Err(format!(
                    "position {position} reused: values {other} and {value} were both \
                     acknowledged there"
                ));
            }
        }
    }
    Ok(positions)
}

/// An error when a check_tail answers less than one that returned before it started.
pub fn tails_never_go_back(history: &History) -> Result<(), String> {
    let tails: Vec<(u64, u64, u64)> = history
        .operations
        .iter()
        .filter_map(|op| match op.ret {
            Some((ret, LogOutput::Tail(tail))) => Some((op.call, ret, tail)),
            _ => None,
        })
        .collect();
    for (_, first_ret, first_tail) in &tails {
        for (call, _, tail) in &tails {
            if call > first_ret && tail < first_tail {
                return Err(format!(
                    "check_tail went back: {first_tail} returned at {first_ret}, then a \
                     check_tail called at {call} answered {tail}"
                ));
            }
        }
    }
    Ok(())
}
