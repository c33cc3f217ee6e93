//! A concurrent bloom filter over a memtable's user keys, so a point lookup of a key the
//! memtable does not hold skips the skiplist search (RocksDB's memtable whole-key filtering,
//! `memtable_prefix_bloom_size_ratio`).
//!
//! Blocked layout (Putze, Sanders and Singler, "Cache-, hash- and space-efficient bloom
//! filters", 2007): the key's hash picks one 64-byte cache line, and [`PROBES`] bits inside
//! that line are set or tested, so an insert or a lookup touches one cache line. Bits are set
//! with `fetch_or` and never cleared; the filter lives as long as its memtable.
//!
//! Memory ordering: writers set the bits before inserting the entry, and entries become
//! visible to readers only through the database's visible sequence number (a release store
//! after the insert, an acquire load before the read), so a reader that may see an entry also
//! sees its bits. Relaxed operations suffice inside the filter.

use std::sync::atomic::{AtomicU64, Ordering};

/// Bits tested per key. With about 10 bits per key this gives roughly 1-2% false positives in
/// the blocked layout.
const PROBES: u32 = 3;

/// 64-bit words per cache line.
const WORDS_PER_LINE: usize = 8;

/// The filter: `lines` cache lines of 512 bits.
#[derive(Debug)]
pub(crate) struct MemBloom {
    words: Box<[AtomicU64]>,
    lines: u64,
}

impl MemBloom {
    /// A filter of about `bytes` bytes (at least one cache line).
    pub(crate) fn with_bytes(bytes: usize) -> MemBloom {
        let lines = (bytes / (WORDS_PER_LINE * 8)).max(1);
        let words = (0..lines * WORDS_PER_LINE)
            .map(|_| AtomicU64::new(0))
            .collect();
        MemBloom {
            words,
            lines: lines as u64,
        }
    }

    /// The word index and bit mask of each probe for `hash`.
    fn probes(&self, hash: u64) -> impl Iterator<Item = (usize, u64)> {
        // The high half picks the line (multiply-shift instead of a modulo); the low half
        // gives 9-bit positions inside it.
        let line = usize::try_from((u128::from(hash >> 32) * u128::from(self.lines)) >> 32)
            .unwrap_or_default();
        let low = hash & 0xffff_ffff;
        (0..PROBES).map(move |i| {
            let bit = (low >> (i * 9)) & 511;
            let word = line * WORDS_PER_LINE + (bit / 64) as usize;
            (word, 1u64 << (bit % 64))
        })
    }

    /// Adds the key whose [`crate::sstable::filter::key_hash`] is `hash`.
    pub(crate) fn insert(&self, hash: u64) {
        for (word, mask) in self.probes(hash) {
            if let Some(w) = self.words.get(word) {
                w.fetch_or(mask, Ordering::Relaxed);
            }
        }
    }

    /// False when the key was certainly never inserted.
    pub(crate) fn may_contain(&self, hash: u64) -> bool {
        self.probes(hash).all(|(word, mask)| {
            self.words
                .get(word)
                .is_none_or(|w| w.load(Ordering::Relaxed) & mask != 0)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sstable::filter::key_hash;

    #[test]
    fn inserted_keys_are_found_and_most_others_are_not() {
        let bloom = MemBloom::with_bytes(16 << 10); // ~10 bits per key for 12,800 keys
        for i in 0..12_800u32 {
            bloom.insert(key_hash(&i.to_le_bytes()));
        }
        for i in 0..12_800u32 {
            assert!(bloom.may_contain(key_hash(&i.to_le_bytes())), "key {i}");
        }
        let false_positives = (100_000..200_000u32)
            .filter(|i| bloom.may_contain(key_hash(&i.to_le_bytes())))
            .count();
        assert!(
            false_positives < 5_000,
            "{false_positives} false positives in 100,000"
        );
    }

    #[test]
    fn a_tiny_filter_still_works() {
        let bloom = MemBloom::with_bytes(0);
        bloom.insert(key_hash(b"k"));
        assert!(bloom.may_contain(key_hash(b"k")));
    }
}
