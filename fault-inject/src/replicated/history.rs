//! A recorded history: every operation a simulation's clients ran, with its client, its
//! input, when it was invoked and, if it returned, when and with what. An operation whose
//! outcome is unknown (an indeterminate error) is recorded as never returning: it may have
//! taken effect at any moment after its invocation, or not at all. Times are the ticks of
//! one counter shared by every event of a run, so that they order invocations and returns
//! exactly as the simulation interleaved them.

use std::fmt::Write as _;

use crate::replicated::model::{LogInput, LogOutput};

/// One operation of a history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Operation {
    /// The client that ran it (each client runs one operation at a time).
    pub client: usize,
    /// What it asked.
    pub input: LogInput,
    /// When it was invoked.
    pub call: u64,
    /// When it returned and what it answered; `None` when it never returned.
    pub ret: Option<(u64, LogOutput)>,
}

/// A history: operations in the order they were invoked.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct History {
    /// The operations.
    pub operations: Vec<Operation>,
}

impl History {
    /// A history of `operations`.
    pub fn new(operations: Vec<Operation>) -> History {
        History { operations }
    }

    /// The history as text, one operation a line, for a failure's file.
    pub fn render(&self) -> String {
        let mut text = String::new();
        for (index, op) in self.operations.iter().enumerate() {
            let ret = match op.ret {
                Some((time, output)) => format!("returned at {time}: {output:?}"),
                None => "never returned".to_owned(),
            };
            let _ = writeln!(
                text,
                "#{index} client {} {:?} called at {} {ret}",
                op.client, op.input, op.call
            );
        }
        text
    }
}
