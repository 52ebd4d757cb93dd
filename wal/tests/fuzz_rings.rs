//! The structure-aware fuzzer (`sealog_wal_kit::fuzz`) in every test run: a fixed seed and ten
//! thousand mutated rings (a second or two in release), each replayed in every recovery mode
//! against the invariants and required to reach every row of the decision table, plus checks
//! that its parts do what they claim (crafted metadata passes its CRC, unreadable blocks reach
//! replay through the failing source, a case is reproduced from its seed, the fuzzer's byte
//! stream drives the same mutator). CI's bounded run is the `fuzz_rings` example (60 s);
//! `SEALOG_FUZZ_RING_CASES=N` runs N cases here.

use sealog_wal::decision::ROWS;
use sealog_wal::format::{ControlBlock, EntryHeader, SegmentHeader, CONTROL_SEQUENCE_LIMIT};
use sealog_wal::{read_control, Check, RecoveryMode, ReplayError};
use sealog_wal_kit::fuzz::{
    catch_panic, craft_control, craft_control_with, craft_segment_header, failure_text, fuzz_bytes,
    reseal_entry_header, run, run_case, sample_bases, workload, Bases, CaseResult, Choices,
    ControlField, Mutation, RunOptions,
};
use sealog_wal_kit::fuzz::{check_image, replay_image, Image, ModelCheck};

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

#[test]
fn mutated_rings_keep_every_invariant_and_reach_every_row() {
    let seed = 20_250_609;
    let options = RunOptions {
        seed,
        cases: Some(env_number("SEALOG_FUZZ_RING_CASES", 10_000)),
        duration: None,
        only_case: None,
        workload_seeds: 64,
    };
    let mut failures = Vec::new();
    let tally = run(&options, &mut |index, case| {
        if !matches!(case.result, CaseResult::Passed(_)) {
            failures.push(failure_text(seed, index, case));
        }
    });
    for line in tally.lines() {
        println!("fuzz rings: {line}");
    }
    assert!(
        failures.is_empty(),
        "{} of {} inputs failed; the first:\n{}",
        failures.len(),
        tally.inputs,
        failures[..failures.len().min(5)].join("\n")
    );
    // A mutator that no longer reaches a row of the decision table has lost reach: say which.
    for (index, row) in ROWS.iter().enumerate() {
        assert!(
            tally.row_inputs[index] > 0,
            "no input reached row {} in {} cases",
            row.label,
            tally.inputs
        );
    }
}

#[test]
fn crafted_metadata_passes_its_crc() {
    let bases = sample_bases();
    for seed in 0..400u64 {
        let ring = &bases[seed as usize % bases.len()];
        let mut choices = Choices::from_seed(seed);
        let mut image = ring.image.clone();
        let block = ring.geometry.block_size_bytes as usize;
        match craft_control(ring, &mut image, &mut choices) {
            Mutation::Control { slot, sequence, .. } => {
                let at = slot as usize * block;
                let control = ControlBlock::decode(&image[at..at + block]).expect("a valid CRC");
                assert_eq!(control.sequence, sequence);
            }
            other => panic!("seed {seed}: {other:?}"),
        }
        match craft_segment_header(ring, &mut image, &mut choices) {
            Mutation::SegmentHeader {
                segment,
                other_ring: false,
                ..
            } => {
                let at = ring.geometry.segment_ring_offset(segment) as usize;
                SegmentHeader::decode(ring.ring_id, &image[at..at + block]).expect("a valid CRC");
            }
            Mutation::SegmentHeader { .. } => {}
            other => panic!("seed {seed}: {other:?}"),
        }
        if let Mutation::EntryHeader { ring_offset, .. } =
            reseal_entry_header(ring, &mut image, &mut choices)
        {
            EntryHeader::decode(ring.ring_id, &image[ring_offset as usize..]).expect("resealed");
        }
    }
}

#[test]
fn a_control_block_crafted_by_hand_is_the_one_replay_reads() {
    // Up to the limit, a crafted sequence is the current control block; past it, replay refuses
    // the ring with its typed error. A block at the limit reads but cannot be bumped again.
    let ring = &sample_bases()[3];
    for sequence in [
        CONTROL_SEQUENCE_LIMIT - 1,
        CONTROL_SEQUENCE_LIMIT,
        CONTROL_SEQUENCE_LIMIT + 1,
        u64::MAX,
    ] {
        let mut image = ring.image.clone();
        let mutation = craft_control_with(ring, &mut image, &[(ControlField::Sequence, sequence)]);
        let Mutation::Control {
            slot,
            sequence: written,
            ..
        } = mutation
        else {
            panic!("{mutation:?}");
        };
        // Written to the slot its sequence names, so it is the copy replay takes.
        assert_eq!((slot, written), (sequence % 2, sequence));
        let mut source: &[u8] = &image;
        match read_control(&mut source) {
            Ok(control) if sequence <= CONTROL_SEQUENCE_LIMIT => {
                assert_eq!(control.sequence, sequence);
                assert_eq!(
                    control.next_sequence().is_ok(),
                    sequence < CONTROL_SEQUENCE_LIMIT
                );
            }
            Err(ReplayError::ControlSequence { sequence: found })
                if sequence > CONTROL_SEQUENCE_LIMIT =>
            {
                assert_eq!(found, sequence);
            }
            other => panic!("sequence {sequence}: {other:?}"),
        }
    }
}

#[test]
fn unreadable_blocks_reach_replay_through_the_failing_source() {
    // From the first live batch to the ring's end nothing can be read: far more than the
    // in-flight window, so strict replay fails on the unreadable run, truncating replay cuts
    // there, and the model writer (which replays bytes) is not asked. The same image with every
    // block readable opens, and the model writer reopens it.
    let ring = sample_bases()
        .into_iter()
        .find(|ring| ring.batches.len() >= 2)
        .expect("a sample ring with batches");
    let block = u64::from(ring.geometry.block_size_bytes);
    let first = ring.batches[0].0 / block;
    let run = ring.image.len() as u64 / block - first;
    assert!(run * block > ring.geometry.window_bytes_max);
    let mut image = Image::new(ring.image.clone(), ring.geometry.block_size_bytes);
    let readable = check_image(&image).expect("the base ring keeps every invariant");
    assert_eq!(readable.model, ModelCheck::Reopened);
    image.unreadable.add_run(first, run);
    let observed = check_image(&image).expect("every invariant holds");
    let row = |label| {
        ROWS.iter()
            .position(|row| row.label == label)
            .expect("a row")
    };
    assert_eq!(observed.strict, "Corruption");
    assert_eq!(observed.truncating, "truncated");
    assert_eq!(observed.strict_rows[row("@unreadable")], 1);
    assert_eq!(observed.truncating_rows[row("@salvage_unreadable")], 1);
    assert_eq!(observed.model, ModelCheck::SkippedUnreadable);
    let (strict, _) = replay_image(&image.bytes, &image.unreadable, RecoveryMode::Strict);
    match strict {
        Err(ReplayError::Corruption(found)) => {
            assert_eq!(found.check, Check::ReadError);
            assert_eq!(found.ring_offset, first * block);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_case_is_reproduced_from_its_seed() {
    let mut first = Bases::new(5, 8);
    let mut second = Bases::new(5, 8);
    for index in 0..40 {
        let seed = sealog_wal_kit::fuzz::case_seed(5, index);
        let a = run_case(&mut first, &mut Choices::from_seed(seed));
        let b = run_case(&mut second, &mut Choices::from_seed(seed));
        assert_eq!(a.base, b.base);
        assert_eq!(a.mutations, b.mutations);
        assert_eq!(format!("{:?}", a.result), format!("{:?}", b.result));
    }
}

#[test]
fn workloads_keep_the_writers_own_invariants() {
    // Each workload checks, at every crash and reopen, that every acknowledged entry came back
    // and nothing else did; an error is what it found broken.
    for seed in 0..40 {
        if let Err(violation) = workload(seed) {
            panic!("{violation}");
        }
    }
}

#[test]
fn fuzzer_bytes_drive_the_same_mutator() {
    let inputs: [&[u8]; 4] = [&[], &[0; 64], &[0xff; 300], b"a few bytes of choices"];
    for input in inputs {
        fuzz_bytes(input);
    }
}

#[test]
fn a_panic_is_caught_with_its_place() {
    let caught = catch_panic(|| {
        let values: Vec<u64> = Vec::new();
        values[3]
    });
    let message = caught.expect_err("the index panics");
    assert!(message.contains("fuzz_rings.rs"), "{message}");
    assert_eq!(catch_panic(|| 7), Ok(7));
}
