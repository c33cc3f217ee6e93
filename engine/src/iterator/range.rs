//! [`Range`]: the public iterator over user keys and values (`Db::range`, `Db::iter`).
//!
//! A [`DbIter`] is a cursor; `Range` adapts it to Rust's [`Iterator`] and
//! [`DoubleEndedIterator`]. It holds two cursors over the same view, one walking up from the
//! lower bound (`next`) and one walking down from the upper bound (`next_back`), each built on
//! first use, and stops both when they meet, so every key is yielded exactly once.

use std::fmt;
use std::iter::FusedIterator;

use bytes::Bytes;

use super::InternalIterator;
use super::db_iter::DbIter;
use crate::error::Result;

/// Builds a fresh cursor over the range's view (same snapshot, bounds and merge function).
pub type MakeCursor<I> = Box<dyn FnMut() -> Result<DbIter<I>> + Send>;

/// An iterator over `(key, value)` pairs of a snapshot within user-key bounds, ascending from
/// the front and descending from the back.
///
/// Keys and values are copied out into [`Bytes`], so they outlive the iterator. Each key is
/// yielded once even when `next` and `next_back` are mixed. After an error (a corrupt block,
/// an I/O failure, a failed merge) the iterator yields `None` in both directions.
pub struct Range<I: InternalIterator> {
    make: MakeCursor<I>,
    /// Cursor for `next`, built on the first call.
    front: Option<DbIter<I>>,
    /// Cursor for `next_back`, built on the first call.
    back: Option<DbIter<I>>,
    /// Last key yielded by `next`.
    front_key: Option<Bytes>,
    /// Last key yielded by `next_back`.
    back_key: Option<Bytes>,
    /// Set when the ends meet, a cursor runs out, or an error was returned.
    done: bool,
}

impl<I: InternalIterator> Range<I> {
    /// Builds a range whose cursors come from `make`. Every call of `make` must return an
    /// unpositioned cursor over the same view; it is called at most twice (once per end),
    /// when that end is first used.
    pub fn new(make: impl FnMut() -> Result<DbIter<I>> + Send + 'static) -> Self {
        Range {
            make: Box::new(make),
            front: None,
            back: None,
            front_key: None,
            back_key: None,
            done: false,
        }
    }

    /// Advances the front cursor and returns its entry if it lies before the back end.
    fn step_front(&mut self) -> Result<Option<(Bytes, Bytes)>> {
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
            return Ok(None);
        }
        if self
            .back_key
            .as_ref()
            .is_some_and(|b| cursor.key() >= b.as_ref())
        {
            return Ok(None);
        }
        let key = Bytes::copy_from_slice(cursor.key());
        let value = Bytes::copy_from_slice(cursor.value());
        self.front_key = Some(key.clone());
        Ok(Some((key, value)))
    }

    /// Moves the back cursor back and returns its entry if it lies after the front end.
    fn step_back(&mut self) -> Result<Option<(Bytes, Bytes)>> {
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
            return Ok(None);
        }
        if self
            .front_key
            .as_ref()
            .is_some_and(|f| cursor.key() <= f.as_ref())
        {
            return Ok(None);
        }
        let key = Bytes::copy_from_slice(cursor.key());
        let value = Bytes::copy_from_slice(cursor.value());
        self.back_key = Some(key.clone());
        Ok(Some((key, value)))
    }

    /// Turns a step's outcome into an iterator item, ending the range unless it yielded.
    fn finish_step(
        &mut self,
        step: Result<Option<(Bytes, Bytes)>>,
    ) -> Option<Result<(Bytes, Bytes)>> {
        match step {
            Ok(Some(entry)) => Some(Ok(entry)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

impl<I: InternalIterator> Iterator for Range<I> {
    type Item = Result<(Bytes, Bytes)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let step = self.step_front();
        self.finish_step(step)
    }
}

impl<I: InternalIterator> DoubleEndedIterator for Range<I> {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let step = self.step_back();
        self.finish_step(step)
    }
}

impl<I: InternalIterator> FusedIterator for Range<I> {}

impl<I: InternalIterator> fmt::Debug for Range<I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Range")
            .field("front", &self.front)
            .field("back", &self.back)
            .field("front_key", &self.front_key)
            .field("back_key", &self.back_key)
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests;
