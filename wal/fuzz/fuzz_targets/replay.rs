//! Fuzz target `replay`: arbitrary bytes as a ring. Replay must return `Ok` or a typed error
//! in both recovery modes, never panic, never read past the source, never allocate what a
//! length field claims. The body is `sealog_wal::fuzz_replay`, which the stable test suite also
//! runs on random and mutated rings (`wal/tests/fuzz_stable.rs`).

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    sealog_wal::fuzz_replay(bytes);
});
