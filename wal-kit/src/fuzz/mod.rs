//! Structure-aware fuzzing of replay: valid rings from the model writer, mutated the way drives,
//! crashes and crafted metadata damage them, and replayed against the invariants of
//! docs/recovery.md. Arbitrary bytes almost never get past the control block's checks; mutations of
//! whole valid rings, with metadata re-encoded to pass its CRC, reach every row of the decision
//! table. The same generator and mutator serve the bounded stable-toolchain run
//! (`wal-kit/examples/fuzz_rings.rs`, in CI), the quick run in the tests
//! (`wal/tests/fuzz_rings.rs`), the coverage-guided libFuzzer target
//! (`wal/fuzz/fuzz_targets/rings.rs`, driven by the fuzzer's bytes as a choice stream) and the
//! engine's open fuzz test in `sealog-fault`. Test support: nothing in the engine's paths uses it.
//!
//! - [`choices`]: seeds or fuzzer bytes as a stream of choices;
//! - [`rings`]: the base rings (sample rings and seeded workloads), checked as they are written;
//! - [`mutate`]: the mutations (block damage, unreadable blocks, a short image, crafted
//!   metadata) and the choice;
//! - [`mutation`]: what a mutation did, as a value, with the metadata fields it names;
//! - `blocks` (private): the blocks worth damaging, shared by the mutations and the crafting;
//! - [`source`]: an image's bytes with its unreadable blocks, read through a failing source;
//! - [`craft`]: control blocks, segment and entry headers crafted with valid CRCs;
//! - [`check`]: the invariants a mutated image must keep; `agree` (private): what the
//!   recovery modes and the model writer must agree on; [`observe`]: what one replay saw;
//! - [`harness`]: cases, runs, caught panics, the tally of outcomes and decision rows.

mod agree;
mod blocks;
pub mod check;
pub mod choices;
pub mod craft;
pub mod harness;
pub mod mutate;
pub mod mutation;
pub mod observe;
pub mod rings;
pub mod source;

pub use check::check_image;
pub use choices::{case_seed, mix64, Choices};
pub use craft::{craft_control, craft_control_with, craft_segment_header, reseal_entry_header};
pub use harness::{
    catch_panic, failure_text, fuzz_bytes, run, run_case, Case, CaseResult, RunOptions, Tally,
};
pub use mutate::{craft_metadata, mutate};
pub use mutation::{ControlField, EntryField, Mutation, SegmentField, TornRest, UnreadablePlace};
pub use observe::{
    error_kind, replay_image, strict_counterpart, variant_name, ModelCheck, Observed,
};
pub use rings::{geometries, sample_bases, workload, Bases, Ring};
pub use source::{FailingSource, Image, Unreadable};
