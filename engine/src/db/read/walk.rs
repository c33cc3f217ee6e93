//! [`SettledWalk`]: the cursor a range scan uses over a settled range (`super::settled`).
//!
//! There every entry of the level's tables within the range is one visible put of its own
//! key, so the scan needs neither the merging iterator nor the [`DbIter`]'s version handling:
//! the walk steps the level's tables with a [`LevelIterator`] over their own iterators and
//! checks the bound ahead.
//! Stepping the same entries through the `DbIter`, a level iterator and a merge of one child
//! made the filtered full scan of the 2.8 M genomic reads 10-15% slower (docs/benchmarks.md,
//! "Settled scans without the merge").
//!
//! [`DbIter`]: crate::iterator::db_iter::DbIter

use std::ops::Bound;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::iterator::InternalIterator;
use crate::iterator::db_iter::{above_upper, below_lower, seek_for_prev_user_key, seek_user_key};
use crate::iterator::level::LevelIterator;
use crate::iterator::range::Cursor;
use crate::sstable::{BlockCachePolicy, Table, TableIter};
use crate::types::SeqNo;
use crate::version::FileMeta;

/// Opens table `i` of a walk's level for its [`LevelIterator`].
type TableOpener = Box<dyn FnMut(usize) -> Result<TableIter> + Send>;

/// A [`Cursor`] over the entries within `(lower, upper)` of tables that are sorted and
/// disjoint by user key and hold only visible puts of distinct keys (the tables of a settled
/// range, in level order): a [`LevelIterator`] over the tables' own iterators (unboxed), with
/// the bounds checked after each move. Blocks are read under `policy` with readahead windows
/// of up to `readahead` bytes, as the merging iterator's tables are.
pub(crate) struct SettledWalk {
    tables: LevelIterator<TableOpener, TableIter>,
    lower: Bound<Vec<u8>>,
    upper: Bound<Vec<u8>>,
    /// On an entry within the bounds (an entry past them ends the walk).
    valid: bool,
}

impl SettledWalk {
    /// An unpositioned walk over `tables` within `(lower, upper)`.
    pub(crate) fn new(
        tables: Vec<(Arc<FileMeta>, Arc<Table>)>,
        lower: Bound<Vec<u8>>,
        upper: Bound<Vec<u8>>,
        policy: BlockCachePolicy,
        readahead: usize,
    ) -> Self {
        let bounds = tables
            .iter()
            .map(|(f, _)| (f.smallest.clone(), f.largest.clone()))
            .collect();
        let open: TableOpener = Box::new(move |i| {
            let (_, table) = tables.get(i).ok_or_else(|| {
                Error::InvalidArgument(format!("settled walk asked for table index {i}"))
            })?;
            Ok(table.iter_with(policy).with_readahead(readahead))
        });
        SettledWalk {
            tables: LevelIterator::new(bounds, open),
            lower,
            upper,
            valid: false,
        }
    }

    /// Runs `op`, a move `forward` or backward that cannot pass the bound behind it, then
    /// notes whether the walk is on an entry within the bound ahead (not after an error).
    fn moved(&mut self, forward: bool, op: impl FnOnce(&mut Self) -> Result<()>) -> Result<()> {
        let result = op(self);
        self.valid = result.is_ok()
            && self.tables.valid()
            && if forward {
                !above_upper(&self.upper, self.tables.key().user_key)
            } else {
                !below_lower(&self.lower, self.tables.key().user_key)
            };
        result
    }
}

impl Cursor for SettledWalk {
    fn valid(&self) -> bool {
        self.valid
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.moved(true, |w| match &w.lower {
            Bound::Unbounded => w.tables.seek_to_first(),
            Bound::Included(l) => seek_user_key(&mut w.tables, l, true, SeqNo::MAX),
            Bound::Excluded(l) => seek_user_key(&mut w.tables, l, false, SeqNo::MAX),
        })
    }

    fn seek_to_last(&mut self) -> Result<()> {
        self.moved(false, |w| match &w.upper {
            Bound::Unbounded => w.tables.seek_to_last(),
            Bound::Included(u) => seek_for_prev_user_key(&mut w.tables, u, true),
            Bound::Excluded(u) => seek_for_prev_user_key(&mut w.tables, u, false),
        })
    }

    fn next(&mut self) -> Result<()> {
        if !self.valid {
            return Ok(());
        }
        self.moved(true, |w| w.tables.next())
    }

    fn prev(&mut self) -> Result<()> {
        if !self.valid {
            return Ok(());
        }
        self.moved(false, |w| w.tables.prev())
    }

    fn key(&self) -> &[u8] {
        if self.valid {
            self.tables.key().user_key
        } else {
            &[]
        }
    }

    fn value(&self) -> &[u8] {
        if self.valid { self.tables.value() } else { &[] }
    }
}

impl std::fmt::Debug for SettledWalk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SettledWalk")
            .field("valid", &self.valid)
            .finish_non_exhaustive()
    }
}
