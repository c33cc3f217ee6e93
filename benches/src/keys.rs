//! The key stream shared by every workload and engine.
//!
//! Record `i` has the 8-byte key `mix64(i ^ seed)` (little-endian) and the 8-byte value `i`
//! (little-endian). `mix64` is SplitMix64's finalizer, a bijection on `u64`, so distinct indices
//! give distinct keys: indices `>= n` name keys that a load of `n` records never wrote, which
//! is how the "missing key" workloads find absent keys that still look random.

/// Bytes per key.
pub const KEY_LEN: usize = 8;
/// Bytes per value.
pub const VALUE_LEN: usize = 8;
/// Seed of the key stream used when none is given.
pub const DEFAULT_SEED: u64 = 0x5EED_F00D_57A7;

/// SplitMix64's output function: a bijective 64-bit mixer.
#[inline]
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// One 16-byte record: an 8-byte key and an 8-byte value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    /// The key bytes.
    pub key: [u8; KEY_LEN],
    /// The value bytes.
    pub value: [u8; VALUE_LEN],
}

/// Generates records of one seeded key stream.
#[derive(Debug, Clone, Copy)]
pub struct KeyStream {
    seed: u64,
}

impl KeyStream {
    /// The stream for `seed`.
    pub fn new(seed: u64) -> Self {
        KeyStream { seed }
    }

    /// Key of record `i`.
    #[inline]
    pub fn key(&self, i: u64) -> [u8; KEY_LEN] {
        mix64(i ^ self.seed).to_le_bytes()
    }

    /// Value of record `i`.
    #[inline]
    pub fn value(i: u64) -> [u8; VALUE_LEN] {
        i.to_le_bytes()
    }

    /// Record `i`.
    #[inline]
    pub fn record(&self, i: u64) -> Record {
        Record {
            key: self.key(i),
            value: Self::value(i),
        }
    }

    /// Fills `out` with records `start..start + count`, replacing its contents.
    pub fn fill(&self, out: &mut Vec<Record>, start: u64, count: u64) {
        out.clear();
        out.extend((start..start + count).map(|i| self.record(i)));
    }

    /// Record `i` laid out as `strata bench fill --order random` writes it (`src/bench.rs`),
    /// the data engineer's `u64 -> (u32, u32)` table: key `mix64(i ^ seed)` big-endian (so keys
    /// sort like the integers), value `mix64(key)` little-endian (two `u32` derived from the
    /// key). With seed `0x5eed` (24301, `bench fill`'s default) the records are the same.
    #[inline]
    pub fn bench_fill_record(&self, i: u64) -> Record {
        let k = mix64(i ^ self.seed);
        #[expect(
            clippy::big_endian_bytes,
            reason = "bench fill's keys are big-endian integers"
        )]
        let key = k.to_be_bytes();
        Record {
            key,
            value: mix64(k).to_le_bytes(),
        }
    }

    /// Fills `out` with [`KeyStream::bench_fill_record`]s `start..start + count`, replacing its
    /// contents.
    pub fn fill_bench_fill(&self, out: &mut Vec<Record>, start: u64, count: u64) {
        out.clear();
        out.extend((start..start + count).map(|i| self.bench_fill_record(i)));
    }
}

/// A cheap per-thread pseudo-random sequence (SplitMix64) for picking which records to read.
#[derive(Debug, Clone)]
pub struct Picker {
    state: u64,
}

impl Picker {
    /// A sequence starting from `seed`.
    pub fn new(seed: u64) -> Self {
        Picker { state: seed }
    }

    /// A uniform index in `0..bound` (`bound > 0`; the modulo bias is below 2^-40 for the
    /// bounds used here).
    #[inline]
    pub fn below(&mut self, bound: u64) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix64(self.state) % bound
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn keys_of_distinct_indices_are_distinct() {
        let s = KeyStream::new(DEFAULT_SEED);
        let keys: HashSet<_> = (0..100_000u64).map(|i| s.key(i)).collect();
        assert_eq!(keys.len(), 100_000);
    }

    #[test]
    fn values_round_trip_the_index() {
        let r = KeyStream::new(7).record(123_456);
        assert_eq!(u64::from_le_bytes(r.value), 123_456);
    }

    #[test]
    fn fill_replaces_the_buffer() {
        let s = KeyStream::new(1);
        let mut v = vec![s.record(99)];
        s.fill(&mut v, 10, 3);
        assert_eq!(v, vec![s.record(10), s.record(11), s.record(12)]);
    }

    #[test]
    fn bench_fill_records_match_strata_bench_fill() {
        let s = KeyStream::new(0x5eed);
        let r = s.bench_fill_record(7);
        let k = mix64(7 ^ 0x5eed);
        assert_eq!(u64::from_le_bytes(r.key), k.swap_bytes());
        assert_eq!(r.value, mix64(k).to_le_bytes());
        let mut v = Vec::new();
        s.fill_bench_fill(&mut v, 6, 2);
        assert_eq!(v, vec![s.bench_fill_record(6), r]);
    }

    #[test]
    fn picker_stays_below_the_bound() {
        let mut p = Picker::new(3);
        assert!((0..10_000).all(|_| p.below(17) < 17));
    }
}
