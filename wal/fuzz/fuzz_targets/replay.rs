//! Fuzz target `replay`: arbitrary bytes as a ring. Replay must return `Ok` or a typed error
//! in both recovery modes, never panic, never read past the source, never allocate what a
//! length field claims. The body is `sealog_wal_kit::fuzz_replay`, which the stable test suite also
//! runs on random and mutated rings (`wal/tests/fuzz_stable.rs`). Inputs are whole rings: run
//! it on the seed corpus with `-max_len` at least the largest seed ring (65536 covers the
//! sample rings, 57,344 bytes), or libFuzzer only ever tries inputs the geometry check rejects
//! at once. The structure-aware target is `rings` (see `wal/fuzz/README.md`).

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    sealog_wal_kit::fuzz_replay(bytes);
});
