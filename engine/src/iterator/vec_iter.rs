//! [`VecIterator`]: an in-memory [`InternalIterator`] over a sorted vector of entries.
//!
//! It is a test and utility source: unit tests of the merging, level and DB iterators feed it
//! hand-written entries, and small callers may wrap a few owned entries in it. It never fails.

use std::fmt;

use bytes::Bytes;

use super::InternalIterator;
use crate::error::Result;
use crate::types::{InternalKey, InternalKeyRef, SeqNo, ValueKind};

/// An [`InternalIterator`] over owned `(internal key, value)` entries held in a vector.
///
/// The entries are sorted by internal-key order when the iterator is built (a stable sort, so
/// identical internal keys keep their input order). Seeks are binary searches; steps are O(1).
#[derive(Clone)]
pub struct VecIterator {
    /// Entries in internal-key order.
    entries: Vec<(InternalKey, Bytes)>,
    /// Index of the current entry; `None` when not positioned.
    pos: Option<usize>,
}

impl VecIterator {
    /// Builds an unpositioned iterator over `entries`, sorting them by internal key first.
    pub fn new(mut entries: Vec<(InternalKey, Bytes)>) -> Self {
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        VecIterator { entries, pos: None }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when the iterator holds no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entry at the current position, if any.
    fn current(&self) -> Option<&(InternalKey, Bytes)> {
        self.pos.and_then(|i| self.entries.get(i))
    }

    /// Positions at index `i`, or unpositions when `i` is out of range.
    fn set(&mut self, i: Option<usize>) {
        self.pos = i.filter(|&i| i < self.entries.len());
    }
}

impl fmt::Debug for VecIterator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VecIterator")
            .field("len", &self.entries.len())
            .field("pos", &self.pos)
            .finish()
    }
}

impl InternalIterator for VecIterator {
    fn valid(&self) -> bool {
        self.current().is_some()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.set(Some(0));
        Ok(())
    }

    fn seek_to_last(&mut self) -> Result<()> {
        self.set(self.entries.len().checked_sub(1));
        Ok(())
    }

    fn seek(&mut self, target: InternalKeyRef<'_>) -> Result<()> {
        let i = self.entries.partition_point(|(k, _)| k.as_ref() < target);
        self.set(Some(i));
        Ok(())
    }

    fn seek_for_prev(&mut self, target: InternalKeyRef<'_>) -> Result<()> {
        let i = self.entries.partition_point(|(k, _)| k.as_ref() <= target);
        self.set(i.checked_sub(1));
        Ok(())
    }

    fn next(&mut self) -> Result<()> {
        debug_assert!(self.valid(), "next() on an unpositioned VecIterator");
        self.set(self.pos.and_then(|i| i.checked_add(1)));
        Ok(())
    }

    fn prev(&mut self) -> Result<()> {
        debug_assert!(self.valid(), "prev() on an unpositioned VecIterator");
        self.set(self.pos.and_then(|i| i.checked_sub(1)));
        Ok(())
    }

    fn key(&self) -> InternalKeyRef<'_> {
        match self.current() {
            Some((k, _)) => k.as_ref(),
            None => {
                debug_assert!(false, "key() on an unpositioned VecIterator");
                InternalKeyRef::new(&[], SeqNo::ZERO, ValueKind::Delete)
            }
        }
    }

    fn value(&self) -> &[u8] {
        match self.current() {
            Some((_, v)) => v,
            None => {
                debug_assert!(false, "value() on an unpositioned VecIterator");
                &[]
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(k: &'static [u8], s: u64) -> (InternalKey, Bytes) {
        (
            InternalKey::new(k, SeqNo(s), ValueKind::Put),
            Bytes::from(format!("{}@{s}", String::from_utf8_lossy(k))),
        )
    }

    #[test]
    fn vec_iterator_sorts_and_walks_both_ways() -> Result<()> {
        let mut it = VecIterator::new(vec![entry(b"b", 1), entry(b"a", 1), entry(b"a", 5)]);
        assert!(!it.valid());
        it.seek_to_first()?;
        assert_eq!(
            it.key(),
            InternalKeyRef::new(b"a", SeqNo(5), ValueKind::Put)
        );
        it.next()?;
        assert_eq!(it.value(), b"a@1");
        it.next()?;
        assert_eq!(it.key().user_key, b"b");
        it.next()?;
        assert!(!it.valid());
        it.seek_to_last()?;
        assert_eq!(it.key().user_key, b"b");
        it.prev()?;
        it.prev()?;
        it.prev()?;
        assert!(!it.valid());
        Ok(())
    }

    #[test]
    fn vec_iterator_seeks_between_and_outside_entries() -> Result<()> {
        let mut it = VecIterator::new(vec![entry(b"b", 3), entry(b"d", 3)]);
        it.seek(InternalKeyRef::new(b"c", SeqNo::MAX, ValueKind::FOR_SEEK))?;
        assert_eq!(it.key().user_key, b"d");
        it.seek_for_prev(InternalKeyRef::new(b"c", SeqNo::MAX, ValueKind::FOR_SEEK))?;
        assert_eq!(it.key().user_key, b"b");
        it.seek(InternalKeyRef::new(b"e", SeqNo::MAX, ValueKind::FOR_SEEK))?;
        assert!(!it.valid());
        it.seek_for_prev(InternalKeyRef::new(b"a", SeqNo::ZERO, ValueKind::Delete))?;
        assert!(!it.valid());
        // Same user key, older than the entry: the entry sorts first.
        it.seek(InternalKeyRef::new(b"b", SeqNo(2), ValueKind::Put))?;
        assert_eq!(it.key().user_key, b"d");
        let mut empty = VecIterator::new(Vec::new());
        empty.seek_to_last()?;
        assert!(!empty.valid() && empty.is_empty());
        Ok(())
    }
}
