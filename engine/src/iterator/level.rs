//! [`LevelIterator`]: concatenates sorted sources whose key ranges do not overlap.
//!
//! The tables of one level >= 1 are sorted by key and disjoint, so iterating the level is
//! iterating its tables one after another. The level iterator keeps at most one table open: it
//! opens a table (through the caller's `open` function, typically the table cache) only when
//! the cursor enters it, and a seek binary-searches the tables' key ranges to open just one.
//! LevelDB builds the same thing from `Version::LevelFileNumIterator` and a two-level iterator.
//!
//! A file whose iterator turns out to hold no entry in the searched direction (an empty table,
//! or a seek landing past its last entry) is skipped.

use std::fmt;

use super::InternalIterator;
use crate::error::Result;
use crate::types::{InternalKey, InternalKeyRef, SeqNo, ValueKind};

/// An open file: its index in the level and its iterator.
struct OpenFile<C> {
    index: usize,
    iter: C,
}

/// A cursor over the concatenation of non-overlapping sorted sources ("files").
///
/// `files[i]` is the smallest and largest internal key of file `i`; the files are sorted and
/// disjoint (`files[i].1 < files[i + 1].0`). `open(i)` returns an iterator over file `i`, whose
/// entries must lie within `files[i]`. Errors from `open` or from a file's iterator are
/// returned at once, and the level iterator is then unpositioned until the next seek.
///
/// `C` is the files' iterator type: boxed by default, or one concrete type (a table's
/// iterator) so that each step calls it directly.
pub struct LevelIterator<F, C = Box<dyn InternalIterator>>
where
    F: FnMut(usize) -> Result<C> + Send,
    C: InternalIterator,
{
    files: Vec<(InternalKey, InternalKey)>,
    open: F,
    /// The file the cursor is in, if any. Kept open while the cursor moves within it.
    current: Option<OpenFile<C>>,
}

impl<F, C> LevelIterator<F, C>
where
    F: FnMut(usize) -> Result<C> + Send,
    C: InternalIterator,
{
    /// Builds an unpositioned iterator over `files` (`(smallest, largest)` per file, sorted
    /// and disjoint), opening file `i` with `open(i)` when the cursor first needs it.
    pub fn new(files: Vec<(InternalKey, InternalKey)>, open: F) -> Self {
        debug_assert!(
            files.iter().all(|(lo, hi)| lo <= hi),
            "a file's smallest key exceeds its largest"
        );
        debug_assert!(
            files.windows(2).all(|w| w[0].1 < w[1].0),
            "level files overlap or are out of order"
        );
        LevelIterator {
            files,
            open,
            current: None,
        }
    }

    /// Index of the file the cursor is in, if positioned.
    pub fn file_index(&self) -> Option<usize> {
        self.current
            .as_ref()
            .filter(|f| f.iter.valid())
            .map(|f| f.index)
    }

    /// Runs `op`; on error, closes the current file so the iterator is unpositioned.
    fn guard(&mut self, op: impl FnOnce(&mut Self) -> Result<()>) -> Result<()> {
        let result = op(self);
        if result.is_err() {
            self.current = None;
        }
        result
    }

    /// Returns the iterator of file `index`, reusing the open one when it is that file.
    fn open_file(&mut self, index: usize) -> Result<&mut C> {
        let file = match self.current.take() {
            Some(file) if file.index == index => file,
            other => {
                // Close the old file before opening the next, so at most one is open.
                drop(other);
                OpenFile {
                    index,
                    iter: (self.open)(index)?,
                }
            }
        };
        Ok(&mut self.current.insert(file).iter)
    }

    /// From the current file, moves forward over files without entries until positioned on
    /// an entry or past the last file.
    fn skip_empty_forward(&mut self) -> Result<()> {
        loop {
            let Some(file) = &self.current else {
                return Ok(());
            };
            if file.iter.valid() {
                return Ok(());
            }
            let next = file.index + 1;
            if next >= self.files.len() {
                self.current = None;
                return Ok(());
            }
            self.open_file(next)?.seek_to_first()?;
        }
    }

    /// From the current file, moves backward over files without entries until positioned on
    /// an entry or before the first file.
    fn skip_empty_backward(&mut self) -> Result<()> {
        loop {
            let Some(file) = &self.current else {
                return Ok(());
            };
            if file.iter.valid() {
                return Ok(());
            }
            let Some(prev) = file.index.checked_sub(1) else {
                self.current = None;
                return Ok(());
            };
            self.open_file(prev)?.seek_to_last()?;
        }
    }

    fn do_seek_to_first(&mut self) -> Result<()> {
        if self.files.is_empty() {
            self.current = None;
            return Ok(());
        }
        self.open_file(0)?.seek_to_first()?;
        self.skip_empty_forward()
    }

    fn do_seek_to_last(&mut self) -> Result<()> {
        let Some(last) = self.files.len().checked_sub(1) else {
            self.current = None;
            return Ok(());
        };
        self.open_file(last)?.seek_to_last()?;
        self.skip_empty_backward()
    }

    fn do_seek(&mut self, target: InternalKeyRef<'_>) -> Result<()> {
        // The first file whose largest key is >= target holds the answer, if any file does.
        let index = self.files.partition_point(|(_, hi)| hi.as_ref() < target);
        if index >= self.files.len() {
            self.current = None;
            return Ok(());
        }
        self.open_file(index)?.seek(target)?;
        self.skip_empty_forward()
    }

    fn do_seek_for_prev(&mut self, target: InternalKeyRef<'_>) -> Result<()> {
        // The last file whose smallest key is <= target holds the answer, if any file does.
        let Some(index) = self
            .files
            .partition_point(|(lo, _)| lo.as_ref() <= target)
            .checked_sub(1)
        else {
            self.current = None;
            return Ok(());
        };
        self.open_file(index)?.seek_for_prev(target)?;
        self.skip_empty_backward()
    }

    fn do_next(&mut self) -> Result<()> {
        if let Some(file) = &mut self.current {
            file.iter.next()?;
        }
        self.skip_empty_forward()
    }

    fn do_prev(&mut self) -> Result<()> {
        if let Some(file) = &mut self.current {
            file.iter.prev()?;
        }
        self.skip_empty_backward()
    }
}

impl<F, C> fmt::Debug for LevelIterator<F, C>
where
    F: FnMut(usize) -> Result<C> + Send,
    C: InternalIterator,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LevelIterator")
            .field("files", &self.files.len())
            .field("current_file", &self.current.as_ref().map(|f| f.index))
            .finish_non_exhaustive()
    }
}

impl<F, C> InternalIterator for LevelIterator<F, C>
where
    F: FnMut(usize) -> Result<C> + Send,
    C: InternalIterator,
{
    fn valid(&self) -> bool {
        self.current.as_ref().is_some_and(|f| f.iter.valid())
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.guard(Self::do_seek_to_first)
    }

    fn seek_to_last(&mut self) -> Result<()> {
        self.guard(Self::do_seek_to_last)
    }

    fn seek(&mut self, target: InternalKeyRef<'_>) -> Result<()> {
        self.guard(|l| l.do_seek(target))
    }

    fn seek_for_prev(&mut self, target: InternalKeyRef<'_>) -> Result<()> {
        self.guard(|l| l.do_seek_for_prev(target))
    }

    fn next(&mut self) -> Result<()> {
        debug_assert!(self.valid(), "next() on an unpositioned LevelIterator");
        self.guard(Self::do_next)
    }

    fn prev(&mut self) -> Result<()> {
        debug_assert!(self.valid(), "prev() on an unpositioned LevelIterator");
        self.guard(Self::do_prev)
    }

    fn key(&self) -> InternalKeyRef<'_> {
        match &self.current {
            Some(file) => file.iter.key(),
            None => {
                debug_assert!(false, "key() on an unpositioned LevelIterator");
                InternalKeyRef::new(&[], SeqNo::ZERO, ValueKind::Delete)
            }
        }
    }

    fn value(&self) -> &[u8] {
        match &self.current {
            Some(file) => file.iter.value(),
            None => {
                debug_assert!(false, "value() on an unpositioned LevelIterator");
                &[]
            }
        }
    }
}

#[cfg(test)]
mod tests;
