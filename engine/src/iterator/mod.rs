//! Internal iterators: cursors over internal keys (`user_key, seqno, kind`) used to merge
//! memtables and tables.
//!
//! Every source (memtable, data block, table, level) implements [`InternalIterator`]; a
//! [`merging::MergingIterator`] merges several in internal-key order, and a [`db_iter::DbIter`]
//! turns the result into the user's view (newest visible version per key, tombstones hidden).
//! Seeks and steps return `Result`, so a corrupt block surfaces as an error at the step that
//! touched it (unlike LevelDB's separate `status()`, which callers forget to check).

pub mod db_iter;
pub mod level;
pub mod merging;
pub mod range;
#[cfg(test)]
pub(crate) mod test_support;
pub mod vec_iter;

pub use db_iter::{DbIter, MergeFn};
pub use level::LevelIterator;
pub use merging::MergingIterator;
pub use range::Range;
pub use vec_iter::VecIterator;

use std::ops::Bound;

use crate::error::Result;
use crate::types::{InternalKeyRef, SeqNo, ValueKind};

/// Positions `it` at the first entry whose user key is `>= user_key` (that key's newest
/// version sorts first, whatever its sequence number, ingested tables' 0 included), or at the
/// first entry for `None`.
///
/// # Errors
/// As [`InternalIterator::seek`].
pub(crate) fn seek_to_user_key<I: InternalIterator + ?Sized>(
    it: &mut I,
    user_key: Option<&[u8]>,
) -> Result<()> {
    match user_key {
        Some(k) => it.seek(InternalKeyRef::new(k, SeqNo::MAX, ValueKind::FOR_SEEK)),
        None => it.seek_to_first(),
    }
}

/// The key of a bound, whether included or excluded; `None` when unbounded.
pub(crate) fn bound_key(b: Bound<&[u8]>) -> Option<&[u8]> {
    match b {
        Bound::Included(k) | Bound::Excluded(k) => Some(k),
        Bound::Unbounded => None,
    }
}

/// A bidirectional cursor over entries sorted by internal-key order.
///
/// A fresh iterator is not positioned (`valid()` is false) until a seek. `key()` and `value()`
/// may only be called while `valid()`; they borrow from the iterator and stay valid until the
/// next call that moves it.
pub trait InternalIterator: Send {
    /// True when positioned on an entry.
    fn valid(&self) -> bool;
    /// Positions at the first entry; invalid if there is none.
    ///
    /// # Errors
    /// [`crate::Error::Corruption`] or [`crate::Error::Io`] from reading the source.
    fn seek_to_first(&mut self) -> Result<()>;
    /// Positions at the last entry; invalid if there is none.
    ///
    /// # Errors
    /// As [`InternalIterator::seek_to_first`].
    fn seek_to_last(&mut self) -> Result<()>;
    /// Positions at the first entry `>= target` in internal-key order.
    ///
    /// # Errors
    /// As [`InternalIterator::seek_to_first`].
    fn seek(&mut self, target: InternalKeyRef<'_>) -> Result<()>;
    /// Positions at the last entry `<= target` in internal-key order.
    ///
    /// # Errors
    /// As [`InternalIterator::seek_to_first`].
    fn seek_for_prev(&mut self, target: InternalKeyRef<'_>) -> Result<()>;
    /// Moves to the next entry. Requires `valid()`.
    ///
    /// # Errors
    /// As [`InternalIterator::seek_to_first`].
    fn next(&mut self) -> Result<()>;
    /// Moves to the previous entry. Requires `valid()`.
    ///
    /// # Errors
    /// As [`InternalIterator::seek_to_first`].
    fn prev(&mut self) -> Result<()>;
    /// The current entry's key. Requires `valid()`.
    fn key(&self) -> InternalKeyRef<'_>;
    /// The current entry's value. Requires `valid()`.
    fn value(&self) -> &[u8];
}

/// Boxed iterators are iterators too, so merging code can hold `Box<dyn InternalIterator>`.
impl<I: InternalIterator + ?Sized> InternalIterator for Box<I> {
    fn valid(&self) -> bool {
        (**self).valid()
    }
    fn seek_to_first(&mut self) -> Result<()> {
        (**self).seek_to_first()
    }
    fn seek_to_last(&mut self) -> Result<()> {
        (**self).seek_to_last()
    }
    fn seek(&mut self, target: InternalKeyRef<'_>) -> Result<()> {
        (**self).seek(target)
    }
    fn seek_for_prev(&mut self, target: InternalKeyRef<'_>) -> Result<()> {
        (**self).seek_for_prev(target)
    }
    fn next(&mut self) -> Result<()> {
        (**self).next()
    }
    fn prev(&mut self) -> Result<()> {
        (**self).prev()
    }
    fn key(&self) -> InternalKeyRef<'_> {
        (**self).key()
    }
    fn value(&self) -> &[u8] {
        (**self).value()
    }
}
