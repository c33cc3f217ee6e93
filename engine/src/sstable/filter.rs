//! The filter block: one bloom filter over a table's distinct user keys.
//!
//! Spec: `docs/format/sstable.md`, section 4.
//!
//! ```text
//! filter block := bloomfilter 3.x blob of a Bloom<u64>:
//!                 version: u8 = 1 | bitmap_len: u64 LE | k: u32 LE | seed: u8[32] | bitmap
//! item         := SipHash-1-3(KEY_HASH_KEY, user_key)      (a u64 per distinct user key)
//! ```
//!
//! The writer collects 8-byte hashes (not keys) while the table is built, and sizes the filter
//! at `bits_per_key * distinct keys` bits when the count is known. The blob is portable between
//! 64-bit little-endian builds only (hashing goes through `std::hash::Hash`).

use std::hash::Hasher;
use std::path::Path;

use bloomfilter::Bloom;
use bloomfilter::reexports::siphasher::sip::SipHasher13;

use crate::error::{Error, Result};

/// Seed of every table's bloom filter, fixed so tables are deterministic:
/// SHA-256("strata-sstable-bloom-seed").
pub const BLOOM_SEED: [u8; 32] = [
    0xde, 0x8d, 0x41, 0x19, 0xf6, 0xc3, 0xba, 0x78, 0x0c, 0x60, 0xa9, 0xe3, 0x15, 0xe1, 0xcd, 0x9e,
    0x41, 0x50, 0xb5, 0xff, 0xf1, 0x3a, 0xe6, 0x68, 0xb4, 0xa1, 0x27, 0x81, 0xdd, 0x66, 0x91, 0x39,
];

/// SipHash-1-3 key reducing a user key to the `u64` stored in the filter: the first 16 bytes
/// of SHA-256("strata-sstable-key-hash").
pub const KEY_HASH_KEY: [u8; 16] = [
    0x86, 0x25, 0x2c, 0x6a, 0xbc, 0xa4, 0x48, 0x9a, 0xaa, 0x59, 0x07, 0x97, 0x2b, 0x17, 0xa4, 0x17,
];

/// Most hash functions a filter may use; larger counts in a blob are corruption.
const MAX_HASH_FUNCTIONS: u32 = 64;

/// The 64-bit hash of a user key that is inserted into the bloom filter.
pub fn key_hash(user_key: &[u8]) -> u64 {
    let mut h = SipHasher13::new_with_key(&KEY_HASH_KEY);
    h.write(user_key);
    h.finish()
}

/// Collects the hashes of a table's distinct user keys and builds the filter at the end.
#[derive(Debug)]
pub struct FilterBuilder {
    bits_per_key: u32,
    hashes: Vec<u64>,
}

impl FilterBuilder {
    /// A builder for `bits_per_key` bits per distinct user key (must be > 0).
    pub fn new(bits_per_key: u32) -> Self {
        debug_assert!(bits_per_key > 0);
        FilterBuilder {
            bits_per_key,
            hashes: Vec::new(),
        }
    }

    /// Records a user key. The caller passes each distinct user key once (keys arrive sorted,
    /// so it compares with the previous one).
    pub fn add_key(&mut self, user_key: &[u8]) {
        self.hashes.push(key_hash(user_key));
    }

    /// Number of keys recorded.
    pub fn len(&self) -> usize {
        self.hashes.len()
    }

    /// True if no key was recorded.
    pub fn is_empty(&self) -> bool {
        self.hashes.is_empty()
    }

    /// The serialized filter, or `None` when no key was recorded (no filter block then).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if the filter size overflows (absurd `bits_per_key`).
    pub fn finish(&self) -> Result<Option<Vec<u8>>> {
        let n = self.hashes.len();
        if n == 0 {
            return Ok(None);
        }
        let too_big = || Error::InvalidArgument("bloom filter size overflows".into());
        let bits = u64::from(self.bits_per_key)
            .checked_mul(n as u64)
            .ok_or_else(too_big)?;
        let bytes = usize::try_from(bits.div_ceil(8))
            .map_err(|_| too_big())?
            .max(1);
        let mut bloom = Bloom::<u64>::new_with_seed(bytes, n, &BLOOM_SEED)
            .map_err(|e| Error::InvalidArgument(format!("bloom filter: {e}")))?;
        for h in &self.hashes {
            bloom.set(h);
        }
        Ok(Some(bloom.into_bytes()))
    }
}

/// A loaded filter: answers "may this table contain `user_key`?".
pub struct Filter {
    bloom: Bloom<u64>,
}

impl std::fmt::Debug for Filter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Filter")
            .field("bits", &self.bloom.len())
            .field("hash_functions", &self.bloom.number_of_hash_functions())
            .finish()
    }
}

impl Filter {
    /// Parses a filter block's contents read at `offset` of `file`.
    ///
    /// # Errors
    /// [`Error::Corruption`] if the blob does not parse, has no bits, or more than 64 hash
    /// functions.
    pub fn decode(contents: &[u8], file: &Path, offset: u64) -> Result<Filter> {
        let bloom = Bloom::<u64>::from_slice(contents)
            .map_err(|e| Error::corruption(file, offset, format!("bad bloom filter: {e}")))?;
        let k = bloom.number_of_hash_functions();
        // Not `is_empty()`: the crate's `is_empty` means "no bit set", not "no bits".
        let bits = bloom.len();
        if bits == 0 || k == 0 || k > MAX_HASH_FUNCTIONS {
            return Err(Error::corruption(
                file,
                offset,
                format!("bad bloom filter: {bits} bits, {k} hash functions"),
            ));
        }
        Ok(Filter { bloom })
    }

    /// False only if `user_key` is certainly not in the table.
    pub fn may_contain(&self, user_key: &[u8]) -> bool {
        self.bloom.check(&key_hash(user_key))
    }

    /// Size of the filter in bits.
    pub fn len_bits(&self) -> u64 {
        self.bloom.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(keys: impl Iterator<Item = Vec<u8>>, bits: u32) -> Result<Filter> {
        let mut b = FilterBuilder::new(bits);
        for k in keys {
            b.add_key(&k);
        }
        let blob = b
            .finish()?
            .ok_or_else(|| Error::InvalidArgument("empty".into()))?;
        Filter::decode(&blob, Path::new("t.sst"), 0)
    }

    /// False-positive rate of a bloom filter with `bits_per_key` bits per key and the crate's
    /// choice of k: (1 - e^{-k/b})^k.
    fn expected_fp_rate(bits_per_key: u32) -> f64 {
        let b = f64::from(bits_per_key);
        let k = (b * std::f64::consts::LN_2).round().max(1.0);
        (1.0 - (-k / b).exp()).powf(k)
    }

    #[test]
    fn bloom_has_no_false_negatives_and_fp_rate_near_configured() -> Result<()> {
        let n = 100_000u32;
        let f = build((0..n).map(|i| format!("key{i:08}").into_bytes()), 10)?;
        for i in 0..n {
            assert!(
                f.may_contain(format!("key{i:08}").as_bytes()),
                "false negative {i}"
            );
        }
        let fps = (0..n)
            .filter(|i| f.may_contain(format!("absent{i:08}").as_bytes()))
            .count();
        let rate = f64::from(u32::try_from(fps).unwrap_or(u32::MAX)) / f64::from(n);
        let configured = expected_fp_rate(10);
        assert!(
            configured < 0.011,
            "10 bits/key should be about 1%: {configured}"
        );
        assert!(
            rate <= configured * 1.5,
            "measured fp rate {rate} vs configured {configured}"
        );
        Ok(())
    }

    #[test]
    fn filters_are_deterministic() -> Result<()> {
        let blob = |()| -> Result<Option<Vec<u8>>> {
            let mut b = FilterBuilder::new(10);
            b.add_key(b"a");
            b.add_key(b"b");
            b.finish()
        };
        assert_eq!(blob(())?, blob(())?);
        assert_eq!(FilterBuilder::new(10).finish()?, None);
        Ok(())
    }

    #[test]
    fn malformed_filter_blobs_are_corruption() -> Result<()> {
        let mut b = FilterBuilder::new(10);
        b.add_key(b"a");
        let blob = b.finish()?.unwrap_or_default();
        let p = Path::new("t.sst");
        for cut in 0..blob.len() {
            assert!(Filter::decode(&blob[..cut], p, 0).is_err(), "cut {cut}");
        }
        // k = 0 and k huge.
        for k in [0u32, 1000] {
            let mut bad = blob.clone();
            bad[9..13].copy_from_slice(&k.to_le_bytes());
            assert!(Filter::decode(&bad, p, 0).is_err());
        }
        // A header claiming zero bitmap bytes.
        let mut empty = blob[..45].to_vec();
        empty[1..9].copy_from_slice(&0u64.to_le_bytes());
        assert!(Filter::decode(&empty, p, 0).is_err());
        Ok(())
    }
}
