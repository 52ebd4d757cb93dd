//! The stream of choices that drives ring generation and mutation: either a seeded generator
//! (the stable-toolchain run and the tests, where a case is reproduced from its seed) or the
//! bytes libFuzzer hands its target (where coverage guides which choices are made). Both give
//! the same calls the same meaning, so one generator and one mutator serve both. It owns no
//! knowledge of rings; it only turns seeds or bytes into numbers.

/// Where the numbers come from.
#[derive(Clone, Debug)]
enum Stream<'a> {
    /// SplitMix64 from a seed: endless and uniform.
    Seeded { state: u64 },
    /// A fuzzer's input, read front to back; past its end every number is 0, so a short input
    /// makes the simplest choices and libFuzzer grows it only where that finds new coverage.
    Bytes { bytes: &'a [u8], at: usize },
}

/// A source of choices.
#[derive(Clone, Debug)]
pub struct Choices<'a> {
    stream: Stream<'a>,
}

impl Choices<'static> {
    /// Choices from a seed: the same seed makes the same choices.
    pub fn from_seed(seed: u64) -> Choices<'static> {
        Choices {
            stream: Stream::Seeded { state: seed },
        }
    }
}

impl<'a> Choices<'a> {
    /// Choices read from a fuzzer's bytes.
    pub fn from_bytes(bytes: &'a [u8]) -> Choices<'a> {
        Choices {
            stream: Stream::Bytes { bytes, at: 0 },
        }
    }

    /// Whether a byte stream has been read to its end (never, for a seeded one).
    pub fn is_exhausted(&self) -> bool {
        match &self.stream {
            Stream::Seeded { .. } => false,
            Stream::Bytes { bytes, at } => *at >= bytes.len(),
        }
    }

    /// The next number made of `width_bytes` bytes (1 to 8).
    fn next_bytes(&mut self, width_bytes: usize) -> u64 {
        debug_assert!((1..=8).contains(&width_bytes));
        match &mut self.stream {
            Stream::Seeded { state } => {
                *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
                mix64(*state)
            }
            Stream::Bytes { bytes, at } => {
                let mut word = [0u8; 8];
                let available = bytes.len().saturating_sub(*at).min(width_bytes);
                word[..available].copy_from_slice(&bytes[*at..*at + available]);
                *at += available;
                u64::from_le_bytes(word)
            }
        }
    }

    /// Any `u64`.
    pub fn next_u64(&mut self) -> u64 {
        self.next_bytes(8)
    }

    /// A number in `0..bound` (0 when `bound` is 0 or 1). From a byte stream it takes only the
    /// bytes the bound needs, so each choice maps onto a few input bytes libFuzzer can mutate.
    pub fn below(&mut self, bound: u64) -> u64 {
        if bound <= 1 {
            return 0;
        }
        let bits = u64::BITS - (bound - 1).leading_zeros();
        let width_bytes = bits.div_ceil(8) as usize;
        self.next_bytes(width_bytes) % bound
    }

    /// A number in `low..=high`.
    pub fn between(&mut self, low: u64, high: u64) -> u64 {
        debug_assert!(low <= high);
        match (high - low).checked_add(1) {
            Some(span) => low + self.below(span),
            None => self.next_u64(),
        }
    }

    /// True with probability `numerator / denominator`.
    pub fn chance(&mut self, numerator: u64, denominator: u64) -> bool {
        self.below(denominator) < numerator
    }

    /// One of `items` (which must not be empty).
    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        assert!(!items.is_empty(), "a choice among nothing");
        items[self.below(items.len() as u64) as usize]
    }
}

/// SplitMix64's finalizer: a well-mixed 64-bit hash of `value`.
pub fn mix64(value: u64) -> u64 {
    let mut z = value;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The seed of case `index` of a run seeded with `run_seed`.
pub fn case_seed(run_seed: u64, index: u64) -> u64 {
    mix64(mix64(run_seed) ^ index.wrapping_mul(0xd6e8_feb8_6659_fd93))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_makes_the_same_choices() {
        let mut a = Choices::from_seed(7);
        let mut b = Choices::from_seed(7);
        for bound in 1..200 {
            assert_eq!(a.below(bound), b.below(bound));
        }
        assert_ne!(
            Choices::from_seed(7).next_u64(),
            Choices::from_seed(8).next_u64()
        );
    }

    #[test]
    fn bytes_are_read_as_narrowly_as_the_bound_allows() {
        let bytes = [3u8, 0x34, 0x12, 9];
        let mut choices = Choices::from_bytes(&bytes);
        assert_eq!(choices.below(10), 3);
        assert_eq!(choices.below(0x10000), 0x1234);
        assert!(!choices.is_exhausted());
        assert_eq!(choices.below(1000), 9);
        assert!(choices.is_exhausted());
        assert_eq!(choices.next_u64(), 0);
    }

    #[test]
    fn below_stays_below_its_bound() {
        let mut choices = Choices::from_seed(1);
        for bound in [2u64, 3, 255, 256, 257, 1 << 40, u64::MAX] {
            for _ in 0..100 {
                assert!(choices.below(bound) < bound);
            }
        }
        assert_eq!(choices.between(5, 5), 5);
        assert!(choices.between(u64::MAX - 1, u64::MAX) >= u64::MAX - 1);
        let whole_range: Vec<u64> = (0..64).map(|_| choices.between(0, u64::MAX)).collect();
        assert!(whole_range.iter().any(|&value| value > u64::MAX / 2));
    }
}
