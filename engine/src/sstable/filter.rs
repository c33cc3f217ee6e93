//! The filter block: bloom filters over a table's distinct user keys.
//!
//! Spec: `docs/format/sstable.md`, section 4.
//!
//! ```text
//! blob         := bloomfilter 3.x serialization of a Bloom<u64>:
//!                 version: u8 = 1 | bitmap_len: u64 LE | k: u32 LE | seed: u8[32] | bitmap
//! filter_v1    := blob                                     (all keys)
//! filter_v2    := num_partitions: varint | (blob_len: varint | blob) * num_partitions
//!                 (key u in partition ((h(u) >> 32) * P) >> 32; P = max(1, ceil(n / 16384)))
//! item         := h(u) = SipHash-1-3(KEY_HASH_KEY, user_key)   (a u64 per distinct user key)
//! ```
//!
//! The writer collects 8-byte hashes (not keys) while the table is built and sizes each filter
//! at `bits_per_key` bits per key when the counts are known. In version 2 it buckets the hashes
//! by partition first and fills one small filter at a time, so the bits being set stay in the
//! cache. The blob is portable between 64-bit little-endian builds only (hashing goes through
//! `std::hash::Hash`).

use std::hash::Hasher;
use std::path::Path;

use bloomfilter::Bloom;
use bloomfilter::reexports::siphasher::sip::SipHasher13;

use super::format::TableFormat;
use crate::coding::{get_varint64, put_varint64};
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

/// Keys per partition of a version-2 filter (on average): 20 KB of bits at 10 bits per key,
/// within the L1/L2 cache while it is filled. Readers use the partition count stored in the
/// block, so a different value would change only how new tables are partitioned.
pub const KEYS_PER_PARTITION: usize = 16_384;

/// The partition of hash `h` among `partitions` (`((h >> 32) * partitions) >> 32`).
fn partition_of(h: u64, partitions: usize) -> usize {
    let scaled = ((h >> 32) * partitions as u64) >> 32;
    usize::try_from(scaled).unwrap_or(0)
}

/// One serialized bloom filter over `hashes`, `bits_per_key` bits per hash (at least 1 byte;
/// an empty set is sized as one key).
fn bloom_blob(hashes: &[u64], bits_per_key: u32) -> Result<Vec<u8>> {
    let n = hashes.len().max(1);
    let too_big = || Error::InvalidArgument("bloom filter size overflows".into());
    let bits = u64::from(bits_per_key)
        .checked_mul(n as u64)
        .ok_or_else(too_big)?;
    let bytes = usize::try_from(bits.div_ceil(8))
        .map_err(|_| too_big())?
        .max(1);
    let mut bloom = Bloom::<u64>::new_with_seed(bytes, n, &BLOOM_SEED)
        .map_err(|e| Error::InvalidArgument(format!("bloom filter: {e}")))?;
    for h in hashes {
        bloom.set(h);
    }
    Ok(bloom.into_bytes())
}

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
    format: TableFormat,
    hashes: Vec<u64>,
}

impl FilterBuilder {
    /// A builder of a `format` filter block with `bits_per_key` bits per distinct user key
    /// (must be > 0).
    pub fn new(bits_per_key: u32, format: TableFormat) -> Self {
        debug_assert!(bits_per_key > 0);
        FilterBuilder {
            bits_per_key,
            format,
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
        if self.format == TableFormat::V1 {
            return bloom_blob(&self.hashes, self.bits_per_key).map(Some);
        }
        // Bucket the hashes by partition (a counting sort), then build one partition at a time.
        let partitions = n.div_ceil(KEYS_PER_PARTITION).max(1);
        let mut starts = vec![0usize; partitions + 1];
        for &h in &self.hashes {
            starts[partition_of(h, partitions) + 1] += 1;
        }
        for p in 0..partitions {
            starts[p + 1] += starts[p];
        }
        let mut fill = starts.clone();
        let mut bucketed = vec![0u64; n];
        for &h in &self.hashes {
            let p = partition_of(h, partitions);
            bucketed[fill[p]] = h;
            fill[p] += 1;
        }
        let mut out = Vec::with_capacity(n * self.bits_per_key as usize / 8 + 64 * partitions);
        put_varint64(&mut out, partitions as u64);
        for p in 0..partitions {
            let blob = bloom_blob(&bucketed[starts[p]..starts[p + 1]], self.bits_per_key)?;
            put_varint64(&mut out, blob.len() as u64);
            out.extend_from_slice(&blob);
        }
        Ok(Some(out))
    }
}

/// A loaded filter: answers "may this table contain `user_key`?".
pub struct Filter {
    /// One bloom filter (version 1) or the partitions (version 2), in partition order.
    partitions: Vec<Bloom<u64>>,
}

impl std::fmt::Debug for Filter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Filter")
            .field("partitions", &self.partitions.len())
            .field("bits", &self.len_bits())
            .finish()
    }
}

impl Filter {
    /// Parses the contents of a `format` table's filter block read at `offset` of `file`.
    ///
    /// # Errors
    /// [`Error::Corruption`] if a blob does not parse, has no bits, or more than 64 hash
    /// functions; in version 2 also for no partitions, more partitions than bytes, a blob past
    /// the end or trailing bytes.
    pub fn decode(
        contents: &[u8],
        format: TableFormat,
        file: &Path,
        offset: u64,
    ) -> Result<Filter> {
        let corrupt = |reason: String| Error::corruption(file, offset, reason);
        let partitions = match format {
            TableFormat::V1 => vec![decode_blob(contents, file, offset)?],
            TableFormat::V2 | TableFormat::V3 => {
                let (count, mut pos) = get_varint64(contents)
                    .ok_or_else(|| corrupt("bad filter: truncated partition count".into()))?;
                let count = usize::try_from(count)
                    .ok()
                    .filter(|&c| c >= 1 && c <= contents.len())
                    .ok_or_else(|| corrupt(format!("bad filter: {count} partitions")))?;
                let mut partitions = Vec::with_capacity(count);
                for p in 0..count {
                    let blob = contents
                        .get(pos..)
                        .and_then(get_varint64)
                        .and_then(|(len, n)| {
                            let start = pos.checked_add(n)?;
                            let end = start.checked_add(usize::try_from(len).ok()?)?;
                            pos = end;
                            contents.get(start..end)
                        })
                        .ok_or_else(|| {
                            corrupt(format!("bad filter: partition {p} is cut short"))
                        })?;
                    partitions.push(decode_blob(blob, file, offset)?);
                }
                if pos != contents.len() {
                    return Err(corrupt(format!(
                        "bad filter: {} bytes after the last partition",
                        contents.len() - pos
                    )));
                }
                partitions
            }
        };
        Ok(Filter { partitions })
    }

    /// False only if `user_key` is certainly not in the table.
    pub fn may_contain(&self, user_key: &[u8]) -> bool {
        self.may_contain_hash(key_hash(user_key))
    }

    /// [`Filter::may_contain`] for a key whose [`key_hash`] is `h`: a point read hashes its
    /// key once for every table it checks.
    pub fn may_contain_hash(&self, h: u64) -> bool {
        self.partitions
            .get(partition_of(h, self.partitions.len()))
            .is_none_or(|bloom| bloom.check(&h))
    }

    /// Size of the filter in bits (all partitions).
    pub fn len_bits(&self) -> u64 {
        self.partitions.iter().map(Bloom::len).sum()
    }
}

/// Parses one bloom filter blob (see the module grammar).
fn decode_blob(blob: &[u8], file: &Path, offset: u64) -> Result<Bloom<u64>> {
    let bloom = Bloom::<u64>::from_slice(blob)
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
    Ok(bloom)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FORMATS: [TableFormat; 3] = TableFormat::ALL;

    fn build(
        keys: impl Iterator<Item = Vec<u8>>,
        bits: u32,
        format: TableFormat,
    ) -> Result<Filter> {
        let mut b = FilterBuilder::new(bits, format);
        for k in keys {
            b.add_key(&k);
        }
        let blob = b
            .finish()?
            .ok_or_else(|| Error::InvalidArgument("empty".into()))?;
        Filter::decode(&blob, format, Path::new("t.sst"), 0)
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
        for format in FORMATS {
            no_false_negatives_and_fp_rate_near_configured(format)?;
        }
        Ok(())
    }

    fn no_false_negatives_and_fp_rate_near_configured(format: TableFormat) -> Result<()> {
        let n = 100_000u32;
        let f = build(
            (0..n).map(|i| format!("key{i:08}").into_bytes()),
            10,
            format,
        )?;
        if !format.v1_entries() {
            // 100,000 keys in ceil(100000 / 16384) = 7 partitions of 10 bits per key each.
            assert_eq!(f.partitions.len(), 7);
            let bits = f.len_bits();
            assert!((1_000_000..1_000_100).contains(&bits), "{bits}");
        }
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
        for format in FORMATS {
            let blob = |()| -> Result<Option<Vec<u8>>> {
                let mut b = FilterBuilder::new(10, format);
                for i in 0..40_000u32 {
                    b.add_key(&i.to_le_bytes());
                }
                b.finish()
            };
            assert_eq!(blob(())?, blob(())?);
            assert_eq!(FilterBuilder::new(10, format).finish()?, None);
        }
        Ok(())
    }

    #[test]
    fn malformed_filter_blobs_are_corruption() -> Result<()> {
        let v1 = TableFormat::V1;
        let mut b = FilterBuilder::new(10, v1);
        b.add_key(b"a");
        let blob = b.finish()?.unwrap_or_default();
        let p = Path::new("t.sst");
        for cut in 0..blob.len() {
            assert!(Filter::decode(&blob[..cut], v1, p, 0).is_err(), "cut {cut}");
        }
        // k = 0 and k huge.
        for k in [0u32, 1000] {
            let mut bad = blob.clone();
            bad[9..13].copy_from_slice(&k.to_le_bytes());
            assert!(Filter::decode(&bad, v1, p, 0).is_err());
        }
        // A header claiming zero bitmap bytes.
        let mut empty = blob[..45].to_vec();
        empty[1..9].copy_from_slice(&0u64.to_le_bytes());
        assert!(Filter::decode(&empty, v1, p, 0).is_err());
        Ok(())
    }

    #[test]
    fn malformed_partitioned_filters_are_corruption() -> Result<()> {
        let v2 = TableFormat::V2;
        let mut b = FilterBuilder::new(10, v2);
        for i in 0..20_000u32 {
            b.add_key(&i.to_le_bytes());
        }
        let good = b.finish()?.unwrap_or_default();
        assert_eq!(good[0], 2, "20,000 keys make 2 partitions");
        let p = Path::new("t.sst");
        assert_eq!(Filter::decode(&good, v2, p, 0)?.partitions.len(), 2);
        // Every truncation, and trailing bytes.
        for cut in 0..good.len() {
            assert!(Filter::decode(&good[..cut], v2, p, 0).is_err(), "cut {cut}");
        }
        let mut long = good.clone();
        long.push(0);
        assert!(Filter::decode(&long, v2, p, 0).is_err());
        // No partitions; more partitions than bytes; a partition length past the end.
        let mut bad = good.clone();
        bad[0] = 0;
        assert!(Filter::decode(&bad, v2, p, 0).is_err());
        let mut bad = vec![0xff, 0xff, 0x03];
        bad.extend_from_slice(&good[1..]);
        assert!(Filter::decode(&bad, v2, p, 0).is_err());
        let mut bad = good.clone();
        bad[1] = 0xff;
        assert!(Filter::decode(&bad, v2, p, 0).is_err());
        // A version-1 blob is not a partitioned filter, and the reverse.
        let mut b1 = FilterBuilder::new(10, TableFormat::V1);
        b1.add_key(b"a");
        let v1_blob = b1.finish()?.unwrap_or_default();
        assert!(Filter::decode(&v1_blob, v2, p, 0).is_err());
        assert!(Filter::decode(&good, TableFormat::V1, p, 0).is_err());
        Ok(())
    }

    #[test]
    fn partitions_split_keys_by_the_high_hash_bits() {
        assert_eq!(partition_of(0, 7), 0);
        assert_eq!(partition_of(u64::MAX, 7), 6);
        assert_eq!(partition_of(1 << 63, 2), 1);
        assert_eq!(partition_of((1 << 63) - 1, 2), 0);
        assert_eq!(partition_of(u64::MAX, 1), 0);
    }
}
