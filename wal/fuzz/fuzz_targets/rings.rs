//! Fuzz target `rings`: structure-aware. The input is not a ring but a stream of choices
//! (`sealog_wal_kit::fuzz::Choices::from_bytes`) that picks a valid base ring (a sample ring, one
//! of 64 seeded workloads, or a workload the input itself drives), then the mutations to stack on
//! it: damaged, torn, stale or moved blocks, runs of blocks whose reads fail with EIO, and control
//! blocks, segment headers and entry headers crafted with valid CRCs. Each image is replayed in
//! both recovery modes (through `sealog_wal_kit::fuzz::FailingSource`) against the invariants of
//! `sealog_wal_kit::fuzz::check`; a broken one panics, so libFuzzer keeps the input. Coverage then
//! guides which choices are made, so mutations of whole valid rings reach deep into replay while
//! the inputs stay a few hundred bytes (see `wal/fuzz/README.md`). The same body runs on stable in
//! CI: `cargo run --release -p sealog-wal-kit --example fuzz_rings`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    sealog_wal_kit::fuzz::fuzz_bytes(bytes);
});
