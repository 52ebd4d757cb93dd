//! The random choices of the read cells and the random-read ceiling (which LSN, which block):
//! SplitMix64, seeded per thread. The bench needs numbers that are spread evenly and cost a few
//! nanoseconds, not cryptographic ones, and a fixed seed per thread makes two runs read the same
//! sequence, so this small generator stands in for a dependency.

/// A SplitMix64 generator (Steele, Lea and Flood, "Fast splittable pseudorandom number
/// generators", 2014): one add and three multiply-xorshift steps per number.
#[derive(Clone, Debug)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator whose sequence is fixed by `seed` (threads take different seeds).
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut mixed = self.state;
        mixed = (mixed ^ (mixed >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        mixed = (mixed ^ (mixed >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        mixed ^ (mixed >> 31)
    }

    /// A number in `0..bound` (`bound` above 0). The multiply-shift maps 64 random bits onto
    /// the range without a division; its bias is below `bound / 2^64`, nothing at these sizes.
    pub fn below(&mut self, bound: u64) -> u64 {
        debug_assert!(bound > 0);
        ((u128::from(self.next_u64()) * u128::from(bound)) >> 64) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every value stays in range, and a small range is covered evenly enough to spread reads.
    #[test]
    fn below_stays_in_range_and_covers_it() {
        let mut random = SplitMix64::new(7);
        let mut seen = [0u32; 10];
        for _ in 0..10_000 {
            let value = random.below(10);
            assert!(value < 10);
            seen[value as usize] += 1;
        }
        assert!(seen.iter().all(|&count| count > 800), "{seen:?}");
    }
}
