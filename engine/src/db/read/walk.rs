//! [`SettledWalk`]: the cursor a range scan uses over a settled range (`super::settled`).
//!
//! There every entry of the level's tables within the range is one visible put of its own
//! key, so the scan needs neither the merging iterator nor the [`DbIter`]'s version handling:
//! the walk steps the tables' own iterators one after another and checks the bound ahead.
//! Stepping the same entries through the `DbIter`, a level iterator and a merge of one child
//! made the filtered full scan of the 2.8 M genomic reads 10-15% slower (docs/benchmarks.md,
//! "Settled scans without the merge").
//!
//! [`DbIter`]: crate::iterator::db_iter::DbIter

use std::ops::Bound;
use std::sync::Arc;

use crate::error::Result;
use crate::iterator::InternalIterator;
use crate::iterator::db_iter::{above_upper, below_lower};
use crate::iterator::range::Cursor;
use crate::sstable::{BlockCachePolicy, Table, TableIter};
use crate::types::{InternalKeyRef, SeqNo, ValueKind};

/// A [`Cursor`] over the entries within `(lower, upper)` of tables that are sorted and
/// disjoint by user key and hold only visible puts of distinct keys (the tables of a settled
/// range, in level order). Blocks are read under `policy` with readahead windows of up to
/// `readahead` bytes, as the merging iterator's tables are.
pub(crate) struct SettledWalk {
    tables: Vec<Arc<Table>>,
    lower: Bound<Vec<u8>>,
    upper: Bound<Vec<u8>>,
    policy: BlockCachePolicy,
    readahead: usize,
    /// The table the cursor is in and its iterator; the walk is valid when this iterator is
    /// (an entry outside the bounds closes it).
    current: Option<(usize, TableIter)>,
}

impl SettledWalk {
    /// An unpositioned walk over `tables` within `(lower, upper)`.
    pub(crate) fn new(
        tables: Vec<Arc<Table>>,
        lower: Bound<Vec<u8>>,
        upper: Bound<Vec<u8>>,
        policy: BlockCachePolicy,
        readahead: usize,
    ) -> Self {
        SettledWalk {
            tables,
            lower,
            upper,
            policy,
            readahead,
            current: None,
        }
    }

    /// Opens table `i`'s iterator, unpositioned; `None` past either end.
    fn open(&self, i: usize) -> Option<(usize, TableIter)> {
        self.tables
            .get(i)
            .map(|t| (i, t.iter_with(self.policy).with_readahead(self.readahead)))
    }

    /// Runs `op`; on error, leaves the walk unpositioned.
    fn guard(&mut self, op: impl FnOnce(&mut Self) -> Result<()>) -> Result<()> {
        let result = op(self);
        if result.is_err() {
            self.current = None;
        }
        result
    }

    /// From the current table, moves on to the first entry of the next tables while the
    /// current one has none left; then closes the walk if the entry lies past the upper bound.
    fn settle_forward(&mut self) -> Result<()> {
        loop {
            let Some((i, it)) = &self.current else {
                return Ok(());
            };
            if it.valid() {
                if above_upper(&self.upper, it.key().user_key) {
                    self.current = None;
                }
                return Ok(());
            }
            let next = *i + 1;
            self.current = self.open(next);
            if let Some((_, it)) = &mut self.current {
                it.seek_to_first()?;
            }
        }
    }

    /// The mirror of [`SettledWalk::settle_forward`], against the lower bound.
    fn settle_backward(&mut self) -> Result<()> {
        loop {
            let Some((i, it)) = &self.current else {
                return Ok(());
            };
            if it.valid() {
                if below_lower(&self.lower, it.key().user_key) {
                    self.current = None;
                }
                return Ok(());
            }
            self.current = i.checked_sub(1).and_then(|prev| self.open(prev));
            if let Some((_, it)) = &mut self.current {
                it.seek_to_last()?;
            }
        }
    }

    /// The current table's iterator, while the walk is valid.
    fn iter(&self) -> Option<&TableIter> {
        self.current.as_ref().map(|(_, it)| it)
    }
}

impl Cursor for SettledWalk {
    fn valid(&self) -> bool {
        self.iter().is_some_and(InternalIterator::valid)
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.guard(|w| {
            // The first table whose keys reach the lower bound.
            let first = match &w.lower {
                Bound::Unbounded => 0,
                Bound::Included(l) | Bound::Excluded(l) => w
                    .tables
                    .partition_point(|t| t.properties().largest_key.user_key.as_ref() < &l[..]),
            };
            w.current = w.open(first);
            if let Some((_, it)) = &mut w.current {
                match &w.lower {
                    Bound::Unbounded => it.seek_to_first()?,
                    Bound::Included(l) => {
                        it.seek(InternalKeyRef::new(l, SeqNo::MAX, ValueKind::FOR_SEEK))?;
                    }
                    Bound::Excluded(l) => {
                        // The last internal key of `l`, then past `l` itself.
                        it.seek(InternalKeyRef::new(l, SeqNo::ZERO, ValueKind::Delete))?;
                        if it.valid() && it.key().user_key == &l[..] {
                            it.next()?;
                        }
                    }
                }
            }
            w.settle_forward()
        })
    }

    fn seek_to_last(&mut self) -> Result<()> {
        self.guard(|w| {
            // The last table whose keys start at or before the upper bound.
            let last = match &w.upper {
                Bound::Unbounded => w.tables.len(),
                Bound::Included(u) | Bound::Excluded(u) => w
                    .tables
                    .partition_point(|t| t.properties().smallest_key.user_key.as_ref() <= &u[..]),
            };
            w.current = last.checked_sub(1).and_then(|i| w.open(i));
            if let Some((_, it)) = &mut w.current {
                match &w.upper {
                    Bound::Unbounded => it.seek_to_last()?,
                    Bound::Included(u) => {
                        it.seek_for_prev(InternalKeyRef::new(u, SeqNo::ZERO, ValueKind::Delete))?;
                    }
                    Bound::Excluded(u) => {
                        // The first internal key of `u`, then before `u` itself.
                        it.seek_for_prev(InternalKeyRef::new(u, SeqNo::MAX, ValueKind::FOR_SEEK))?;
                        if it.valid() && it.key().user_key == &u[..] {
                            it.prev()?;
                        }
                    }
                }
            }
            w.settle_backward()
        })
    }

    fn next(&mut self) -> Result<()> {
        self.guard(|w| {
            if let Some((_, it)) = &mut w.current
                && it.valid()
            {
                it.next()?;
                return w.settle_forward();
            }
            Ok(())
        })
    }

    fn prev(&mut self) -> Result<()> {
        self.guard(|w| {
            if let Some((_, it)) = &mut w.current
                && it.valid()
            {
                it.prev()?;
                return w.settle_backward();
            }
            Ok(())
        })
    }

    fn key(&self) -> &[u8] {
        self.iter().map_or(&[], |it| it.key().user_key)
    }

    fn value(&self) -> &[u8] {
        self.iter().map_or(&[], InternalIterator::value)
    }
}

impl std::fmt::Debug for SettledWalk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SettledWalk")
            .field("tables", &self.tables.len())
            .field("current", &self.current.as_ref().map(|(i, _)| *i))
            .finish_non_exhaustive()
    }
}
