//! [`DbIter`]: the user's view of an internal iterator.
//!
//! The internal stream holds every version of every key, newest first within a user key. The
//! DB iterator shows, for each user key inside the bounds, the newest version visible at its
//! snapshot sequence number, and hides the key if that version is a tombstone. Merge operands
//! are folded into a value with the configured [`MergeFn`]. It moves both ways, and reverse
//! iteration yields exactly the reverse of forward iteration. LevelDB's `db/db_iter.cc` has the
//! same two-direction design (`FindNextUserEntry`, `FindPrevUserEntry`).
//!
//! # Where the inner iterator sits
//! - Forward, current key a plain value: the inner iterator is on that entry, and `key()` and
//!   `value()` borrow from it.
//! - Forward, current key a merge result: the inner iterator is past the operands it folded (on
//!   the base entry, on a later key, or unpositioned); the key and value are copied out.
//! - Reverse: the inner iterator is before every entry of the current key (on an earlier entry,
//!   or unpositioned); the key and value are copied out.
//!
//! Scans of a settled range (one level of tables, one visible put per key) do not come here:
//! `Db::range` walks those tables directly (`engine/src/db/read/walk.rs`).

use std::fmt;
use std::ops::Bound;
use std::sync::Arc;

use super::InternalIterator;
use crate::error::{Error, Result};
use crate::types::{InternalKeyRef, SeqNo, ValueKind};

/// A merge operator: `(user key, existing base value, operands oldest to newest)` to the merged
/// value, or `None` if the operands cannot be merged (reported as
/// [`Error::InvalidArgument`]). The base is `None` when the key had no value before the
/// operands (never written, or deleted). It must be deterministic: a key is merged again each
/// time it is read.
pub type MergeFn = Arc<dyn Fn(&[u8], Option<&[u8]>, &[&[u8]]) -> Option<Vec<u8>> + Send + Sync>;

/// Which way the DB iterator last moved; decides where the inner iterator sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    Forward,
    Reverse,
}

/// Merge operands stored back to back in one buffer, reused across keys.
#[derive(Debug, Default)]
struct Operands {
    buf: Vec<u8>,
    ends: Vec<usize>,
}

impl Operands {
    fn clear(&mut self) {
        self.buf.clear();
        self.ends.clear();
    }

    fn push(&mut self, operand: &[u8]) {
        self.buf.extend_from_slice(operand);
        self.ends.push(self.buf.len());
    }

    /// The operands in push order.
    fn slices(&self) -> Vec<&[u8]> {
        let mut start = 0;
        self.ends
            .iter()
            .map(|&end| {
                let s = self.buf.get(start..end).unwrap_or_default();
                start = end;
                s
            })
            .collect()
    }
}

/// The user's view of an internal iterator at one snapshot, within user-key bounds.
///
/// Entries with a sequence number above `seqno` are invisible. For each user key the newest
/// visible entry decides: a put gives its value; a delete hides the key; a merge operand
/// collects operands going older until a put (the base), a delete or the key's last entry (no
/// base), and the value is the merge function's result.
///
/// A fresh iterator is unpositioned until a seek. `key()` and `value()` require `valid()` and
/// borrow until the next move. After a move returns an error the iterator is unpositioned;
/// seek again to continue.
pub struct DbIter<I: InternalIterator> {
    inner: I,
    seqno: SeqNo,
    lower: Bound<Vec<u8>>,
    upper: Bound<Vec<u8>>,
    merge: Option<MergeFn>,
    direction: Direction,
    valid: bool,
    /// Forward and valid on a plain value: the current entry is `inner`'s current entry.
    at_inner: bool,
    /// The current user key when not `at_inner`; while scanning, the key being skipped or
    /// assembled.
    saved_key: Vec<u8>,
    /// The current value when not `at_inner`; while scanning, the merge base.
    saved_value: Vec<u8>,
    operands: Operands,
}

impl<I: InternalIterator> DbIter<I> {
    /// Builds an unpositioned view of `inner` as of `seqno` (entries with a larger sequence
    /// number are invisible), limited to user keys within `(lower, upper)`, folding merge
    /// operands with `merge`. An empty range (`lower` after `upper`) yields nothing.
    pub fn new(
        inner: I,
        seqno: SeqNo,
        lower: Bound<Vec<u8>>,
        upper: Bound<Vec<u8>>,
        merge: Option<MergeFn>,
    ) -> Self {
        DbIter {
            inner,
            // Larger values do not fit the trailer; every write is at or below MAX anyway.
            seqno: seqno.min(SeqNo::MAX),
            lower,
            upper,
            merge,
            direction: Direction::Forward,
            valid: false,
            at_inner: false,
            saved_key: Vec::new(),
            saved_value: Vec::new(),
            operands: Operands::default(),
        }
    }

    /// True when positioned on a visible key.
    pub fn valid(&self) -> bool {
        self.valid
    }

    /// Positions at the first visible key at or after the lower bound.
    ///
    /// # Errors
    /// Errors of the inner iterator; [`Error::InvalidArgument`] if a key's value needs a merge
    /// and there is no merge function or it fails.
    pub fn seek_to_first(&mut self) -> Result<()> {
        self.guard(|it| {
            it.direction = Direction::Forward;
            match &it.lower {
                Bound::Unbounded => it.inner.seek_to_first()?,
                Bound::Included(l) => seek_user_key(&mut it.inner, l, true, it.seqno)?,
                Bound::Excluded(l) => seek_user_key(&mut it.inner, l, false, it.seqno)?,
            }
            it.find_next_user_entry(false)
        })
    }

    /// Positions at the last visible key at or before the upper bound.
    ///
    /// # Errors
    /// As [`DbIter::seek_to_first`].
    pub fn seek_to_last(&mut self) -> Result<()> {
        self.guard(|it| {
            it.direction = Direction::Reverse;
            match &it.upper {
                Bound::Unbounded => it.inner.seek_to_last()?,
                Bound::Included(u) => seek_for_prev_user_key(&mut it.inner, u, true)?,
                Bound::Excluded(u) => seek_for_prev_user_key(&mut it.inner, u, false)?,
            }
            it.find_prev_user_entry()
        })
    }

    /// Positions at the first visible key `>= user_key`, and not before the lower bound.
    ///
    /// # Errors
    /// As [`DbIter::seek_to_first`].
    pub fn seek(&mut self, user_key: &[u8]) -> Result<()> {
        self.guard(|it| {
            it.direction = Direction::Forward;
            let (target, inclusive) = match &it.lower {
                Bound::Included(l) if user_key < l.as_slice() => (l.as_slice(), true),
                Bound::Excluded(l) if user_key <= l.as_slice() => (l.as_slice(), false),
                _ => (user_key, true),
            };
            seek_user_key(&mut it.inner, target, inclusive, it.seqno)?;
            it.find_next_user_entry(false)
        })
    }

    /// Positions at the last visible key `<= user_key`, and not after the upper bound.
    ///
    /// # Errors
    /// As [`DbIter::seek_to_first`].
    pub fn seek_for_prev(&mut self, user_key: &[u8]) -> Result<()> {
        self.guard(|it| {
            it.direction = Direction::Reverse;
            let (target, inclusive) = match &it.upper {
                Bound::Included(u) if user_key > u.as_slice() => (u.as_slice(), true),
                Bound::Excluded(u) if user_key >= u.as_slice() => (u.as_slice(), false),
                _ => (user_key, true),
            };
            seek_for_prev_user_key(&mut it.inner, target, inclusive)?;
            it.find_prev_user_entry()
        })
    }

    /// Moves to the next visible key; does nothing when not `valid()`.
    ///
    /// # Errors
    /// As [`DbIter::seek_to_first`].
    #[expect(
        clippy::should_implement_trait,
        reason = "a fallible cursor step like InternalIterator::next; Range is the Iterator"
    )]
    pub fn next(&mut self) -> Result<()> {
        if !self.valid {
            return Ok(());
        }
        self.guard(|it| {
            match it.direction {
                Direction::Reverse => {
                    // The inner iterator is before the current key's entries: step into them,
                    // and let the skip below pass over them.
                    it.direction = Direction::Forward;
                    if it.inner.valid() {
                        it.inner.next()?;
                    } else {
                        seek_user_key(&mut it.inner, &it.saved_key, true, it.seqno)?;
                    }
                }
                Direction::Forward if it.at_inner => {
                    set_bytes(&mut it.saved_key, it.inner.key().user_key);
                    it.inner.next()?;
                }
                // A merge result: the inner iterator is already past the newest entries.
                Direction::Forward => {}
            }
            it.find_next_user_entry(true)
        })
    }

    /// Moves to the previous visible key; does nothing when not `valid()`.
    ///
    /// # Errors
    /// As [`DbIter::seek_to_first`].
    pub fn prev(&mut self) -> Result<()> {
        if !self.valid {
            return Ok(());
        }
        self.guard(|it| {
            if it.direction == Direction::Forward {
                // Move the inner iterator before every entry of the current key.
                if it.at_inner {
                    set_bytes(&mut it.saved_key, it.inner.key().user_key);
                }
                if it.inner.valid() {
                    loop {
                        it.inner.prev()?;
                        if !it.inner.valid() || it.inner.key().user_key < it.saved_key.as_slice() {
                            break;
                        }
                    }
                } else {
                    seek_for_prev_user_key(&mut it.inner, &it.saved_key, false)?;
                }
                it.direction = Direction::Reverse;
            }
            it.find_prev_user_entry()
        })
    }

    /// The current user key; empty when not `valid()`.
    pub fn key(&self) -> &[u8] {
        if !self.valid {
            return &[];
        }
        if self.at_inner {
            self.inner.key().user_key
        } else {
            &self.saved_key
        }
    }

    /// The current value (for merged keys, the merge result); empty when not `valid()`.
    pub fn value(&self) -> &[u8] {
        if !self.valid {
            return &[];
        }
        if self.at_inner {
            self.inner.value()
        } else {
            &self.saved_value
        }
    }

    /// Runs `op`; on error, leaves the iterator unpositioned.
    fn guard(&mut self, op: impl FnOnce(&mut Self) -> Result<()>) -> Result<()> {
        let result = op(self);
        if result.is_err() {
            self.valid = false;
            self.at_inner = false;
        }
        result
    }

    /// Forward scan from the inner iterator's entry to the first visible, undeleted key within
    /// the upper bound. With `skipping`, entries whose user key is `<= saved_key` are passed
    /// over (they belong to keys already yielded or deleted).
    fn find_next_user_entry(&mut self, mut skipping: bool) -> Result<()> {
        self.valid = false;
        self.at_inner = false;
        while self.inner.valid() {
            let k = self.inner.key();
            if above_upper(&self.upper, k.user_key) {
                return Ok(());
            }
            if k.seqno <= self.seqno && !(skipping && k.user_key <= self.saved_key.as_slice()) {
                match k.kind {
                    ValueKind::Delete => {
                        // Hide this key's older versions.
                        set_bytes(&mut self.saved_key, k.user_key);
                        skipping = true;
                    }
                    ValueKind::Put => {
                        self.valid = true;
                        self.at_inner = true;
                        return Ok(());
                    }
                    ValueKind::Merge => {
                        self.collect_merge_forward()?;
                        self.valid = true;
                        return Ok(());
                    }
                }
            }
            self.inner.next()?;
        }
        Ok(())
    }

    /// The inner iterator is on the newest visible entry of a key, a merge operand: gathers
    /// operands going older until a base and stores the merged value.
    fn collect_merge_forward(&mut self) -> Result<()> {
        let k = self.inner.key();
        set_bytes(&mut self.saved_key, k.user_key);
        self.operands.clear();
        self.operands.push(self.inner.value());
        let mut has_base = false;
        loop {
            self.inner.next()?;
            if !self.inner.valid() {
                break;
            }
            let k = self.inner.key();
            if k.user_key != self.saved_key.as_slice() {
                break;
            }
            // Older than a visible entry of the same key, so visible too.
            match k.kind {
                ValueKind::Put => {
                    set_bytes(&mut self.saved_value, self.inner.value());
                    has_base = true;
                    break;
                }
                ValueKind::Delete => break,
                ValueKind::Merge => self.operands.push(self.inner.value()),
            }
        }
        self.resolve_merge(has_base, true)
    }

    /// Backward scan from the inner iterator's entry to the last visible, undeleted key within
    /// the lower bound; leaves the inner iterator before that key's entries.
    fn find_prev_user_entry(&mut self) -> Result<()> {
        debug_assert_eq!(self.direction, Direction::Reverse);
        self.valid = false;
        self.at_inner = false;
        // Kind of the newest visible entry seen so far of `saved_key` (Delete: none pending).
        let mut kind = ValueKind::Delete;
        // Whether `saved_value` holds a put older than the pending merge operands.
        let mut has_base = false;
        self.saved_key.clear();
        self.saved_value.clear();
        self.operands.clear();
        while self.inner.valid() {
            let k = self.inner.key();
            if below_lower(&self.lower, k.user_key) {
                break;
            }
            if k.seqno <= self.seqno {
                if kind != ValueKind::Delete && k.user_key < self.saved_key.as_slice() {
                    // `saved_key` is complete and visible; `k` belongs to an earlier key.
                    break;
                }
                // Entries of one key arrive oldest first: each newer one overrides.
                match k.kind {
                    ValueKind::Delete => {
                        self.saved_key.clear();
                        self.saved_value.clear();
                        self.operands.clear();
                        has_base = false;
                    }
                    ValueKind::Put => {
                        set_bytes(&mut self.saved_key, k.user_key);
                        set_bytes(&mut self.saved_value, self.inner.value());
                        self.operands.clear();
                        has_base = true;
                    }
                    // On top of a put of this key (`has_base`), or of nothing.
                    ValueKind::Merge => {
                        set_bytes(&mut self.saved_key, k.user_key);
                        self.operands.push(self.inner.value());
                    }
                }
                kind = k.kind;
            }
            self.inner.prev()?;
        }
        match kind {
            ValueKind::Delete => {}
            ValueKind::Put => self.valid = true,
            ValueKind::Merge => {
                self.resolve_merge(has_base, false)?;
                self.valid = true;
            }
        }
        Ok(())
    }

    /// Folds the collected operands of `saved_key` (on top of `saved_value` if `has_base`)
    /// into `saved_value`.
    fn resolve_merge(&mut self, has_base: bool, newest_first: bool) -> Result<()> {
        let Some(merge) = &self.merge else {
            return Err(Error::InvalidArgument(
                "merge operand found but no merge operator configured".to_owned(),
            ));
        };
        let mut operands = self.operands.slices();
        if newest_first {
            operands.reverse();
        }
        let base = has_base.then_some(self.saved_value.as_slice());
        match merge(&self.saved_key, base, &operands) {
            Some(value) => {
                self.saved_value = value;
                Ok(())
            }
            None => Err(Error::InvalidArgument(format!(
                "merge operator failed for key \"{}\"",
                self.saved_key.escape_ascii()
            ))),
        }
    }
}

impl<I: InternalIterator> fmt::Debug for DbIter<I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DbIter")
            .field("seqno", &self.seqno)
            .field("lower", &self.lower)
            .field("upper", &self.upper)
            .field("has_merge", &self.merge.is_some())
            .field("direction", &self.direction)
            .field("valid", &self.valid)
            .finish_non_exhaustive()
    }
}

/// Replaces `dst`'s contents with `src`, reusing its allocation.
fn set_bytes(dst: &mut Vec<u8>, src: &[u8]) {
    dst.clear();
    dst.extend_from_slice(src);
}

/// True if `user_key` is before the lower bound.
pub(crate) fn below_lower(lower: &Bound<Vec<u8>>, user_key: &[u8]) -> bool {
    match lower {
        Bound::Unbounded => false,
        Bound::Included(l) => user_key < l.as_slice(),
        Bound::Excluded(l) => user_key <= l.as_slice(),
    }
}

/// True if `user_key` is after the upper bound.
pub(crate) fn above_upper(upper: &Bound<Vec<u8>>, user_key: &[u8]) -> bool {
    match upper {
        Bound::Unbounded => false,
        Bound::Included(u) => user_key > u.as_slice(),
        Bound::Excluded(u) => user_key >= u.as_slice(),
    }
}

/// Positions `inner` at the first entry whose user key is `>= user_key` (`inclusive`) or
/// `> user_key`. Inclusive seeks also skip `user_key`'s versions newer than `seqno`.
pub(crate) fn seek_user_key(
    inner: &mut impl InternalIterator,
    user_key: &[u8],
    inclusive: bool,
    seqno: SeqNo,
) -> Result<()> {
    if inclusive {
        inner.seek(InternalKeyRef::new(user_key, seqno, ValueKind::FOR_SEEK))
    } else {
        // (user_key, 0, Delete) is the last internal key with this user key.
        inner.seek(InternalKeyRef::new(
            user_key,
            SeqNo::ZERO,
            ValueKind::Delete,
        ))?;
        if inner.valid() && inner.key().user_key == user_key {
            inner.next()?;
        }
        Ok(())
    }
}

/// Positions `inner` at the last entry whose user key is `<= user_key` (`inclusive`) or
/// `< user_key`.
pub(crate) fn seek_for_prev_user_key(
    inner: &mut impl InternalIterator,
    user_key: &[u8],
    inclusive: bool,
) -> Result<()> {
    if inclusive {
        inner.seek_for_prev(InternalKeyRef::new(
            user_key,
            SeqNo::ZERO,
            ValueKind::Delete,
        ))
    } else {
        // (user_key, MAX, FOR_SEEK) is the first internal key with this user key.
        inner.seek_for_prev(InternalKeyRef::new(
            user_key,
            SeqNo::MAX,
            ValueKind::FOR_SEEK,
        ))?;
        if inner.valid() && inner.key().user_key == user_key {
            inner.prev()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
