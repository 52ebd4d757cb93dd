//! The sequential specification the linearizability checker holds a history against: a log
//! whose state is the list of values appended so far. An append of `v` answers the position
//! it took (valid iff that is the current length; `v` is pushed), a check_tail answers the
//! length, and a read of a position answers its value, or nothing at or past the length.
//! Values are `u64` ids: a simulation maps each payload it appends to a fresh id.

/// What a client asked of the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LogInput {
    /// Append this value.
    Append(u64),
    /// Ask for the tail: the first unwritten position.
    CheckTail,
    /// Read this position.
    Read(u64),
}

/// What the log answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LogOutput {
    /// An append's position.
    Appended(u64),
    /// A check_tail's tail.
    Tail(u64),
    /// A read's value, or `None` at or past the tail.
    Value(Option<u64>),
}

/// The state of the sequential log: every value appended, in order.
pub type LogState = Vec<u64>;

/// A value that no read returned: the checker appends it in place of the value of an
/// append that never returned and that no read saw, so that such appends are alike. No
/// read's answer matches it.
pub const UNREAD: u64 = u64::MAX;

/// Applies `input` to `state` if `output` is a valid answer to it there: the state after,
/// or `None` when the answer is impossible. An `output` of `None` is an operation that never
/// returned: any answer would do, so an append always takes the next position.
pub fn step(state: &LogState, input: LogInput, output: Option<LogOutput>) -> Option<LogState> {
    let length = state.len() as u64;
    match (input, output) {
        (LogInput::Append(value), None) => Some(pushed(state, value)),
        (LogInput::Append(value), Some(LogOutput::Appended(position))) => {
            (position == length).then(|| pushed(state, value))
        }
        (LogInput::CheckTail, None) | (LogInput::Read(_), None) => Some(state.clone()),
        (LogInput::CheckTail, Some(LogOutput::Tail(tail))) => {
            (tail == length).then(|| state.clone())
        }
        (LogInput::Read(position), Some(LogOutput::Value(found))) => {
            let held = usize::try_from(position)
                .ok()
                .and_then(|index| state.get(index).copied());
            (held == found && found != Some(UNREAD)).then(|| state.clone())
        }
        // An answer of the wrong kind is never valid.
        _ => None,
    }
}

fn pushed(state: &LogState, value: u64) -> LogState {
    let mut next = state.clone();
    next.push(value);
    next
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_answer_is_valid_exactly_where_the_spec_says() {
        let empty = LogState::new();
        let one = step(&empty, LogInput::Append(7), Some(LogOutput::Appended(0))).unwrap();
        assert_eq!(one, vec![7]);
        assert!(step(&empty, LogInput::Append(7), Some(LogOutput::Appended(1))).is_none());
        assert!(step(&one, LogInput::CheckTail, Some(LogOutput::Tail(1))).is_some());
        assert!(step(&one, LogInput::CheckTail, Some(LogOutput::Tail(0))).is_none());
        assert!(step(&one, LogInput::Read(0), Some(LogOutput::Value(Some(7)))).is_some());
        assert!(step(&one, LogInput::Read(0), Some(LogOutput::Value(Some(8)))).is_none());
        assert!(step(&one, LogInput::Read(1), Some(LogOutput::Value(None))).is_some());
        assert!(step(&one, LogInput::Read(0), Some(LogOutput::Value(None))).is_none());
        assert!(step(&one, LogInput::Read(0), Some(LogOutput::Tail(1))).is_none());
        assert_eq!(step(&one, LogInput::Append(9), None).unwrap(), vec![7, 9]);
    }
}
