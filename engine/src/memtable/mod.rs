//! The memtable: an in-memory, sorted, concurrent map from internal key to value.
//!
//! Built on `crossbeam_skiplist::SkipMap`, so readers never block writers. Entries are ordered
//! by internal key (user key ascending, sequence number descending), so the newest version of a
//! key comes first. A full memtable is frozen (it becomes an *immutable memtable*) and flushed to
//! a level-0 SSTable; after that it is only read.
//!
//! Keys and values are `Bytes`, so entries written by one batch can share the batch's buffer
//! instead of being copied one by one (see [`MemTable::add_bytes`]).

mod bloom;
mod iter;
mod key;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use bytes::Bytes;
use crossbeam_skiplist::SkipMap;

pub use iter::MemTableIter;
pub(crate) use key::{MemKey, SmallBytes};

use crate::types::{SeqNo, ValueKind};
use crate::write_buffer::WriteBufferManager;

/// Bytes charged per entry on top of key and value, for skiplist nodes and bookkeeping. An
/// estimate (a node holds the key, value, a tower of pointers and a refcount), so that
/// `write_buffer_size` bounds real memory rather than payload bytes only.
const ENTRY_OVERHEAD_BYTES: usize = 64;

/// A sorted in-memory table of versioned entries.
#[derive(Debug, Default)]
pub struct MemTable {
    map: SkipMap<MemKey, SmallBytes>,
    size_bytes: AtomicUsize,
    /// Filter over the user keys, when the memtable serves point lookups.
    bloom: Option<bloom::MemBloom>,
    /// What this memtable has counted against a shared memory budget, if it has one.
    charge: Option<Charge>,
}

/// A memtable's account with a [`WriteBufferManager`]: the bytes it has counted so far
/// ([`MemTable::settle_charge`]) and whether they moved to the immutable side.
#[derive(Debug)]
struct Charge {
    manager: Arc<WriteBufferManager>,
    charged: AtomicUsize,
    frozen: AtomicBool,
}

impl MemTable {
    /// An empty memtable without a key filter.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty memtable with a bloom filter of about `bloom_bytes` bytes over its user keys
    /// (none for 0), so [`MemTable::get`] of an absent key usually skips the skiplist search.
    /// Sized from `Options::memtable_bloom_size_ratio` by the database.
    pub fn with_bloom(bloom_bytes: usize) -> Self {
        Self::with_manager(bloom_bytes, None)
    }

    /// [`MemTable::with_bloom`], counting its memory against `manager` when there is one: what
    /// it holds ([`MemTable::approximate_size`]) is counted after each write group the database
    /// inserts, and no longer once it is dropped.
    pub fn with_manager(bloom_bytes: usize, manager: Option<Arc<WriteBufferManager>>) -> Self {
        MemTable {
            map: SkipMap::new(),
            size_bytes: AtomicUsize::new(0),
            bloom: (bloom_bytes > 0).then(|| bloom::MemBloom::with_bytes(bloom_bytes)),
            charge: manager.map(|manager| Charge {
                manager,
                charged: AtomicUsize::new(0),
                frozen: AtomicBool::new(false),
            }),
        }
    }

    /// Counts what this memtable has grown by since the last call against its
    /// [`WriteBufferManager`] (nothing without one). Called by the single writer of an active
    /// memtable (the write group's leader, under the `log` lock, as freezing is): a frozen
    /// memtable takes no more writes, so what it counts stays on the active side until
    /// [`MemTable::freeze_charge`] moves it.
    pub(crate) fn settle_charge(&self) {
        if let Some(c) = &self.charge {
            debug_assert!(
                !c.frozen.load(Ordering::Relaxed),
                "a write into a frozen memtable"
            );
            let size = self.approximate_size();
            let before = c.charged.swap(size, Ordering::Relaxed);
            c.manager.reserve(size.saturating_sub(before));
        }
    }

    /// Settles this memtable's count and moves it to the immutable side of its
    /// [`WriteBufferManager`]: called once, as the memtable is frozen.
    pub(crate) fn freeze_charge(&self) {
        if let Some(c) = &self.charge
            && !c.frozen.load(Ordering::Relaxed)
        {
            self.settle_charge();
            c.frozen.store(true, Ordering::Relaxed);
            c.manager.mark_immutable(c.charged.load(Ordering::Relaxed));
        }
    }

    /// Inserts a copy of `user_key -> value` tagged with `seqno` and `kind`. `value` is ignored
    /// (stored empty) for tombstones by convention of the callers, not checked here.
    pub fn add(&self, seqno: SeqNo, kind: ValueKind, user_key: &[u8], value: &[u8]) {
        self.add_bytes(
            seqno,
            kind,
            Bytes::copy_from_slice(user_key),
            Bytes::copy_from_slice(value),
        );
    }

    /// Inserts `user_key -> value` without copying (the `Bytes` may share a larger buffer).
    /// Sequence numbers are unique per entry, so an insert never replaces another entry.
    pub fn add_bytes(&self, seqno: SeqNo, kind: ValueKind, user_key: Bytes, value: Bytes) {
        let charge = user_key.len() + value.len() + ENTRY_OVERHEAD_BYTES;
        // Bits first: readers find the entry only after it is published (see `bloom.rs`).
        if let Some(bloom) = &self.bloom {
            bloom.insert(crate::sstable::filter::key_hash(&user_key));
        }
        self.map.insert(
            MemKey::from_bytes(user_key, seqno, kind),
            SmallBytes::from_bytes(value),
        );
        self.size_bytes.fetch_add(charge, Ordering::Relaxed);
    }

    /// The newest entry for `user_key` with sequence number `<= seqno`:
    /// `(entry seqno, kind, value)`, or `None` when the memtable has no visible version.
    /// A `Delete` result means the key is deleted as of that entry; a `Merge` result means the
    /// caller must collect older operands (see the database's read path).
    pub fn get(&self, user_key: &[u8], seqno: SeqNo) -> Option<(SeqNo, ValueKind, Bytes)> {
        self.get_hashed(user_key, crate::sstable::filter::key_hash(user_key), seqno)
    }

    /// [`MemTable::get`] with the key's [`crate::sstable::filter::key_hash`] computed by the
    /// caller, so a lookup through several memtables hashes the key once.
    pub(crate) fn get_hashed(
        &self,
        user_key: &[u8],
        hash: u64,
        seqno: SeqNo,
    ) -> Option<(SeqNo, ValueKind, Bytes)> {
        if let Some(bloom) = &self.bloom
            && !bloom.may_contain(hash)
        {
            return None;
        }
        let target = MemKey::from_slice(user_key, seqno, ValueKind::FOR_SEEK);
        let entry = self.map.lower_bound(std::ops::Bound::Included(&target))?;
        let key = entry.key().as_ref();
        (key.user_key == user_key).then(|| (key.seqno, key.kind, entry.value().to_bytes()))
    }

    /// Approximate memory used, in bytes (payload plus a per-entry estimate).
    pub fn approximate_size(&self) -> usize {
        self.size_bytes.load(Ordering::Relaxed)
    }

    /// Number of entries (every version counts).
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True when the memtable holds no entries.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Largest sequence number stored, if any (scans; used at flush time only).
    pub fn max_seqno(&self) -> Option<SeqNo> {
        self.map.iter().map(|e| e.key().as_ref().seqno).max()
    }

    pub(crate) fn map(&self) -> &SkipMap<MemKey, SmallBytes> {
        &self.map
    }
}

impl Drop for MemTable {
    fn drop(&mut self) {
        if let Some(c) = &self.charge {
            c.manager.release(
                c.charged.load(Ordering::Relaxed),
                c.frozen.load(Ordering::Relaxed),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::iterator::InternalIterator;
    use crate::types::InternalKeyRef;

    #[test]
    fn get_returns_newest_visible_version() {
        let m = MemTable::new();
        m.add(SeqNo(1), ValueKind::Put, b"k", b"v1");
        m.add(SeqNo(3), ValueKind::Put, b"k", b"v3");
        m.add(SeqNo(5), ValueKind::Delete, b"k", b"");
        m.add(SeqNo(2), ValueKind::Put, b"k2", b"x");
        assert_eq!(m.get(b"k", SeqNo(0)), None);
        assert_eq!(
            m.get(b"k", SeqNo(1)),
            Some((SeqNo(1), ValueKind::Put, Bytes::from("v1")))
        );
        assert_eq!(
            m.get(b"k", SeqNo(4)),
            Some((SeqNo(3), ValueKind::Put, Bytes::from("v3")))
        );
        assert_eq!(
            m.get(b"k", SeqNo::MAX).map(|e| e.1),
            Some(ValueKind::Delete)
        );
        assert_eq!(m.get(b"", SeqNo::MAX), None);
        assert_eq!(m.get(b"k1", SeqNo::MAX), None);
        assert_eq!(m.len(), 4);
        assert!(m.approximate_size() >= 4 * ENTRY_OVERHEAD_BYTES);
    }

    #[test]
    fn empty_key_and_0xff_keys_sort_at_the_ends() -> crate::Result<()> {
        let m = Arc::new(MemTable::new());
        m.add(SeqNo(1), ValueKind::Put, b"\xff\xff", b"b");
        m.add(SeqNo(2), ValueKind::Put, b"", b"e");
        m.add(SeqNo(3), ValueKind::Put, b"\xff", b"a");
        let mut it = m.iter();
        it.seek_to_first()?;
        let mut keys = Vec::new();
        while it.valid() {
            keys.push(it.key().user_key.to_vec());
            it.next()?;
        }
        assert_eq!(
            keys,
            vec![b"".to_vec(), b"\xff".to_vec(), b"\xff\xff".to_vec()]
        );
        it.seek_to_last()?;
        assert_eq!(it.key().user_key, b"\xff\xff");
        it.prev()?;
        assert_eq!(it.key().user_key, b"\xff");
        it.seek(InternalKeyRef::new(
            b"\x00",
            SeqNo::MAX,
            ValueKind::FOR_SEEK,
        ))?;
        assert_eq!(it.key().user_key, b"\xff");
        it.seek_for_prev(InternalKeyRef::new(
            b"\x00",
            SeqNo::MAX,
            ValueKind::FOR_SEEK,
        ))?;
        assert_eq!(it.key().user_key, b"");
        it.prev()?;
        assert!(!it.valid());
        Ok(())
    }

    #[test]
    fn get_with_a_bloom_filter_finds_every_key_and_skips_absent_ones() {
        let m = MemTable::with_bloom(4096);
        for i in 0..300u32 {
            m.add(
                SeqNo(u64::from(i) + 1),
                ValueKind::Put,
                &i.to_le_bytes(),
                b"v",
            );
        }
        for i in 0..300u32 {
            assert!(m.get(&i.to_le_bytes(), SeqNo::MAX).is_some(), "key {i}");
        }
        assert!(m.get(b"absent", SeqNo::MAX).is_none());
    }

    #[test]
    fn concurrent_inserts_are_all_visible() {
        let m = Arc::new(MemTable::new());
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let m = Arc::clone(&m);
                std::thread::spawn(move || {
                    for i in 0..1000u64 {
                        let k = format!("{t}-{i}");
                        m.add(SeqNo(t * 1000 + i + 1), ValueKind::Put, k.as_bytes(), b"v");
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("writer thread panicked");
        }
        assert_eq!(m.len(), 4000);
        assert!(m.get(b"3-999", SeqNo::MAX).is_some());
    }
}
