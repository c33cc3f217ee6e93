//! [`Range`]: the public iterator over user keys and values (`Db::range`, `Db::iter`).
//!
//! A [`DbIter`] is a cursor (any [`Cursor`] is); `Range` adapts it to Rust's [`Iterator`] and
//! [`DoubleEndedIterator`]. It holds two cursors over the same view, one walking up from the
//! lower bound (`next`) and one walking down from the upper bound (`next_back`), each built on
//! first use, and stops both when they meet, so every key is yielded exactly once.
//!
//! Besides the owning [`Iterator`] items, [`Range::next_entry`] and [`Range::next_back_entry`]
//! lend the current key and value as slices borrowed from the cursor, so a scan that only
//! looks at each entry copies and allocates nothing per entry.
//!
//! # Invariant
//! While the range is not done, a built cursor is valid and sits on the last key its end
//! yielded. The meeting test compares one cursor's key with the other cursor's key, so no
//! copy of the last yielded key is kept.

use std::fmt;
use std::iter::FusedIterator;

use bytes::Bytes;

use super::InternalIterator;
use super::db_iter::DbIter;
use crate::error::Result;

/// A cursor over the visible user keys and values of one read view within bounds, as
/// [`DbIter`] is: what a [`Range`] steps from each end. Not positioned (`valid()` false) until
/// a seek; `key()` and `value()` only while `valid()`, borrowed until the cursor moves.
pub trait Cursor: Send {
    /// True when positioned on a key.
    fn valid(&self) -> bool;
    /// Positions at the first key at or after the lower bound.
    ///
    /// # Errors
    /// Read errors of the cursor's sources.
    fn seek_to_first(&mut self) -> Result<()>;
    /// Positions at the last key at or before the upper bound.
    ///
    /// # Errors
    /// As [`Cursor::seek_to_first`].
    fn seek_to_last(&mut self) -> Result<()>;
    /// Moves to the next key; invalid past the upper bound.
    ///
    /// # Errors
    /// As [`Cursor::seek_to_first`].
    fn next(&mut self) -> Result<()>;
    /// Moves to the previous key; invalid before the lower bound.
    ///
    /// # Errors
    /// As [`Cursor::seek_to_first`].
    fn prev(&mut self) -> Result<()>;
    /// The current user key.
    fn key(&self) -> &[u8];
    /// The current value.
    fn value(&self) -> &[u8];
}

impl<I: InternalIterator> Cursor for DbIter<I> {
    fn valid(&self) -> bool {
        DbIter::valid(self)
    }

    fn seek_to_first(&mut self) -> Result<()> {
        DbIter::seek_to_first(self)
    }

    fn seek_to_last(&mut self) -> Result<()> {
        DbIter::seek_to_last(self)
    }

    fn next(&mut self) -> Result<()> {
        DbIter::next(self)
    }

    fn prev(&mut self) -> Result<()> {
        DbIter::prev(self)
    }

    fn key(&self) -> &[u8] {
        DbIter::key(self)
    }

    fn value(&self) -> &[u8] {
        DbIter::value(self)
    }
}

/// Builds a fresh cursor over the range's view (same snapshot, bounds and merge function).
pub type MakeCursor<C> = Box<dyn FnMut() -> Result<C> + Send>;

/// An iterator over `(key, value)` pairs of a snapshot within user-key bounds, ascending from
/// the front and descending from the back.
///
/// As an [`Iterator`], keys and values are copied out into [`Bytes`], so they outlive the
/// iterator; [`Range::next_entry`] and [`Range::next_back_entry`] lend them instead. Each key is
/// yielded once even when the two ends (and the two styles) are mixed. After an error (a
/// corrupt block, an I/O failure, a failed merge) the range yields nothing more in either
/// direction.
pub struct Range<C: Cursor> {
    make: MakeCursor<C>,
    /// Cursor for the front end, built on its first step.
    front: Option<C>,
    /// Cursor for the back end, built on its first step.
    back: Option<C>,
    /// Set when the ends meet, a cursor runs out, or an error was returned.
    done: bool,
}

impl<C: Cursor> Range<C> {
    /// Builds a range whose cursors come from `make`. Every call of `make` must return an
    /// unpositioned cursor over the same view; it is called at most twice (once per end),
    /// when that end is first used.
    pub fn new(make: impl FnMut() -> Result<C> + Send + 'static) -> Self {
        Range {
            make: Box::new(make),
            front: None,
            back: None,
            done: false,
        }
    }

    /// Advances the front end and lends its entry: `Ok(None)` at the end (the lower cursor ran
    /// out or met the back end). The slices borrow from the range and are valid until its
    /// next step. Never copies or allocates per entry; the first call builds the cursor and
    /// seeks it.
    ///
    /// # Errors
    /// [`crate::Error::Corruption`], [`crate::Error::ChecksumMismatch`] or [`crate::Error::Io`]
    /// from a table read; [`crate::Error::InvalidArgument`] when a merge fails;
    /// the errors the range was made with (as [`crate::DbRange::next_entry`] says), on the
    /// first step. The range is done after an error (later calls return `Ok(None)`).
    pub fn next_entry(&mut self) -> Result<Option<(&[u8], &[u8])>> {
        self.lend(true)
    }

    /// Moves the back end down and lends its entry: like [`Range::next_entry`], descending.
    ///
    /// # Errors
    /// As [`Range::next_entry`].
    pub fn next_back_entry(&mut self) -> Result<Option<(&[u8], &[u8])>> {
        self.lend(false)
    }

    /// Steps the front (`front`) or back end and lends its entry; the range is done at the
    /// end or after an error.
    fn lend(&mut self, front: bool) -> Result<Option<(&[u8], &[u8])>> {
        if self.done {
            return Ok(None);
        }
        let stepped = if front {
            self.step_front()
        } else {
            self.step_back()
        };
        if !matches!(stepped, Ok(true)) {
            self.done = true;
            return stepped.map(|_| None);
        }
        let cursor = if front { &self.front } else { &self.back };
        Ok(cursor.as_ref().map(|c| (c.key(), c.value())))
    }

    /// Advances the front cursor; true if it is on an entry before the back end.
    fn step_front(&mut self) -> Result<bool> {
        let cursor = match &mut self.front {
            Some(cursor) => {
                cursor.next()?;
                cursor
            }
            None => {
                let mut cursor = (self.make)()?;
                cursor.seek_to_first()?;
                self.front.insert(cursor)
            }
        };
        if !cursor.valid() {
            return Ok(false);
        }
        // The back cursor, if built, is on the last key the back end yielded.
        Ok(self.back.as_ref().is_none_or(|b| cursor.key() < b.key()))
    }

    /// Moves the back cursor back; true if it is on an entry after the front end.
    fn step_back(&mut self) -> Result<bool> {
        let cursor = match &mut self.back {
            Some(cursor) => {
                cursor.prev()?;
                cursor
            }
            None => {
                let mut cursor = (self.make)()?;
                cursor.seek_to_last()?;
                self.back.insert(cursor)
            }
        };
        if !cursor.valid() {
            return Ok(false);
        }
        // The front cursor, if built, is on the last key the front end yielded.
        Ok(self.front.as_ref().is_none_or(|f| cursor.key() > f.key()))
    }
}

/// Copies a lent entry out, for the owning [`Iterator`] items.
fn owned(entry: Result<Option<(&[u8], &[u8])>>) -> Option<Result<(Bytes, Bytes)>> {
    match entry {
        Ok(Some((k, v))) => Some(Ok((Bytes::copy_from_slice(k), Bytes::copy_from_slice(v)))),
        Ok(None) => None,
        Err(e) => Some(Err(e)),
    }
}

impl<C: Cursor> Iterator for Range<C> {
    type Item = Result<(Bytes, Bytes)>;

    fn next(&mut self) -> Option<Self::Item> {
        owned(self.next_entry())
    }
}

impl<C: Cursor> DoubleEndedIterator for Range<C> {
    fn next_back(&mut self) -> Option<Self::Item> {
        owned(self.next_back_entry())
    }
}

impl<C: Cursor> FusedIterator for Range<C> {}

impl<C: Cursor + fmt::Debug> fmt::Debug for Range<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Range")
            .field("front", &self.front)
            .field("back", &self.back)
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests;
