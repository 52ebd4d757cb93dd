//! The `replay` fuzz target's body on the stable toolchain: arbitrary bytes, and sample rings
//! with random bytes overwritten, bits flipped and tails cut off, must all replay to `Ok` or a
//! typed error, never a panic. The coverage-guided run is `cargo +nightly fuzz run replay`
//! (see `wal/fuzz/README.md`); this keeps a bounded share of it in every test run.

use proptest::prelude::*;

fn rings() -> &'static [Vec<u8>] {
    static RINGS: std::sync::OnceLock<Vec<Vec<u8>>> = std::sync::OnceLock::new();
    RINGS.get_or_init(sealog_wal_kit::model::sample_rings)
}

#[derive(Clone, Debug)]
enum Mutation {
    FlipBit(u64),
    SetByte(u64, u8),
    ZeroRun(u64, u16),
    Truncate(u64),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => any::<u64>().prop_map(Mutation::FlipBit),
        3 => (any::<u64>(), any::<u8>()).prop_map(|(at, byte)| Mutation::SetByte(at, byte)),
        1 => (any::<u64>(), any::<u16>()).prop_map(|(at, len)| Mutation::ZeroRun(at, len)),
        1 => any::<u64>().prop_map(Mutation::Truncate),
    ]
}

fn apply(ring: &mut Vec<u8>, mutation: &Mutation) {
    if ring.is_empty() {
        return;
    }
    let len = ring.len() as u64;
    match *mutation {
        Mutation::FlipBit(bit) => ring[((bit / 8) % len) as usize] ^= 1 << (bit % 8),
        Mutation::SetByte(at, byte) => ring[(at % len) as usize] = byte,
        Mutation::ZeroRun(at, run) => {
            let start = (at % len) as usize;
            let end = (start + usize::from(run)).min(ring.len());
            ring[start..end].fill(0);
        }
        Mutation::Truncate(at) => ring.truncate((at % len) as usize),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn mutated_rings_replay_without_panicking(
        pick in any::<usize>(),
        mutations in prop::collection::vec(mutation(), 1..12),
    ) {
        let mut ring = rings()[pick % rings().len()].clone();
        for mutation in &mutations {
            apply(&mut ring, mutation);
        }
        sealog_wal_kit::fuzz_replay(&ring);
    }

    #[test]
    fn arbitrary_bytes_replay_without_panicking(
        bytes in prop::collection::vec(any::<u8>(), 0..20_000),
    ) {
        sealog_wal_kit::fuzz_replay(&bytes);
    }
}

#[test]
fn every_sample_ring_replays() {
    for (index, ring) in rings().iter().enumerate() {
        let mut source: &[u8] = ring;
        let report = sealog_wal::scan(&mut source, &sealog_wal::ReplayOptions::default());
        assert!(report.is_ok(), "sample ring {index}: {report:?}");
    }
}
