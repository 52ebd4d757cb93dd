//! Tests of the linearizability checker: hand-made histories it must accept and reject,
//! operations that never returned taken both ways, and generated concurrent histories of
//! 200 operations from 8 clients, checked within the time a simulation can spend.

use std::time::Instant;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;
use crate::replicated::history::Operation;
use crate::replicated::model::{LogInput, LogOutput};

fn op(client: usize, input: LogInput, call: u64, ret: Option<(u64, LogOutput)>) -> Operation {
    Operation {
        client,
        input,
        call,
        ret,
    }
}

fn verdict(ops: Vec<Operation>) -> Verdict {
    check(&History::new(ops), DEFAULT_STEP_BUDGET)
}

#[test]
fn accepts_a_concurrent_linearizable_history() {
    let ops = vec![
        op(0, LogInput::Append(1), 0, Some((5, LogOutput::Appended(0)))),
        op(1, LogInput::Append(2), 1, Some((4, LogOutput::Appended(1)))),
        op(2, LogInput::CheckTail, 2, Some((3, LogOutput::Tail(1)))),
        op(
            2,
            LogInput::Read(1),
            6,
            Some((7, LogOutput::Value(Some(2)))),
        ),
        op(1, LogInput::Read(2), 6, Some((8, LogOutput::Value(None)))),
    ];
    assert_eq!(verdict(ops), Verdict::Linearizable);
}

#[test]
fn rejects_a_tail_that_misses_a_completed_append() {
    let ops = vec![
        op(0, LogInput::Append(1), 0, Some((1, LogOutput::Appended(0)))),
        op(1, LogInput::CheckTail, 2, Some((3, LogOutput::Tail(0)))),
    ];
    assert!(matches!(verdict(ops), Verdict::NotLinearizable { .. }));
}

#[test]
fn rejects_a_read_of_a_value_not_at_its_position() {
    let ops = vec![
        op(0, LogInput::Append(1), 0, Some((1, LogOutput::Appended(0)))),
        op(1, LogInput::Append(2), 0, None),
        op(
            1,
            LogInput::Read(0),
            2,
            Some((3, LogOutput::Value(Some(2)))),
        ),
    ];
    assert!(matches!(verdict(ops), Verdict::NotLinearizable { .. }));
}

#[test]
fn an_append_that_never_returned_may_be_linearized() {
    let ops = vec![
        op(0, LogInput::Append(5), 0, None),
        op(1, LogInput::CheckTail, 1, Some((2, LogOutput::Tail(1)))),
        op(
            1,
            LogInput::Read(0),
            3,
            Some((4, LogOutput::Value(Some(5)))),
        ),
    ];
    assert_eq!(verdict(ops), Verdict::Linearizable);
}

#[test]
fn an_append_that_never_returned_may_never_take_effect() {
    let ops = vec![
        op(0, LogInput::Append(5), 0, None),
        op(1, LogInput::CheckTail, 1, Some((2, LogOutput::Tail(0)))),
        op(1, LogInput::Append(6), 3, Some((4, LogOutput::Appended(0)))),
        op(
            1,
            LogInput::Read(0),
            5,
            Some((6, LogOutput::Value(Some(6)))),
        ),
        op(1, LogInput::CheckTail, 7, Some((8, LogOutput::Tail(1)))),
    ];
    assert_eq!(verdict(ops), Verdict::Linearizable);
}

#[test]
fn an_append_that_never_returned_takes_effect_only_after_its_invocation() {
    let ops = vec![
        op(1, LogInput::CheckTail, 0, Some((1, LogOutput::Tail(1)))),
        op(0, LogInput::Append(5), 2, None),
    ];
    assert!(matches!(verdict(ops), Verdict::NotLinearizable { .. }));
}

#[test]
fn a_tiny_budget_answers_unknown() {
    let ops = vec![
        op(0, LogInput::Append(1), 0, Some((5, LogOutput::Appended(0)))),
        op(1, LogInput::Append(2), 1, Some((4, LogOutput::Appended(1)))),
    ];
    assert!(matches!(
        check(&History::new(ops), 1),
        Verdict::Unknown { .. }
    ));
}

/// A history of `count` operations from `clients` clients against an atomic log, each
/// taking effect at a moment between its invocation and its return; about one append in
/// ten never returns (and takes effect or not).
fn generated(seed: u64, clients: usize, count: usize) -> History {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut free_at = vec![0u64; clients];
    // (moment of effect, index) for every operation that takes effect.
    let mut planned = Vec::new();
    let mut ops = Vec::new();
    for index in 0..count {
        let client = rng.gen_range(0..clients);
        let call = free_at[client] + rng.gen_range(1..20) * 16 + client as u64;
        let effect = call + rng.gen_range(1..40) * 16;
        let ret = effect + rng.gen_range(1..40) * 16;
        free_at[client] = ret;
        let input = match rng.gen_range(0..3) {
            0 => LogInput::Append(index as u64),
            1 => LogInput::CheckTail,
            _ => LogInput::Read(rng.gen_range(0..(index as u64 / 3 + 2))),
        };
        let lost = matches!(input, LogInput::Append(_)) && rng.gen_bool(0.1);
        if !lost || rng.gen_bool(0.5) {
            planned.push((effect, index));
        }
        ops.push(op(
            client,
            input,
            call,
            (!lost).then_some((ret, LogOutput::Tail(0))),
        ));
    }
    planned.sort_unstable();
    let mut state = LogState::new();
    for (_, index) in planned {
        let output = match ops[index].input {
            LogInput::Append(value) => {
                state.push(value);
                LogOutput::Appended(state.len() as u64 - 1)
            }
            LogInput::CheckTail => LogOutput::Tail(state.len() as u64),
            LogInput::Read(at) => LogOutput::Value(state.get(at as usize).copied()),
        };
        if let Some((_, answer)) = ops[index].ret.as_mut() {
            *answer = output;
        }
    }
    History::new(ops)
}

#[test]
fn generated_histories_of_200_operations_check_quickly() {
    for seed in 0..100 {
        let mut history = generated(seed, 8, 200);
        let started = Instant::now();
        assert_eq!(check(&history, DEFAULT_STEP_BUDGET), Verdict::Linearizable);
        // One read answers a value no one appended: no longer linearizable.
        let read = history
            .operations
            .iter_mut()
            .find_map(|op| match &mut op.ret {
                Some((_, LogOutput::Value(found))) => Some(found),
                _ => None,
            })
            .expect("a read returned");
        *read = Some(u64::MAX - 1);
        assert!(matches!(
            check(&history, DEFAULT_STEP_BUDGET),
            Verdict::NotLinearizable { .. }
        ));
        let spent = started.elapsed();
        assert!(spent.as_secs() < 1, "seed {seed} took {spent:?}");
    }
}
