//! [`MergingIterator`]: merges several sorted [`InternalIterator`]s into one sorted stream.
//!
//! The children (memtable, immutable memtables, level-0 tables, one [`super::level`] iterator
//! per deeper level) each yield entries in internal-key order; the merge yields the union in
//! internal-key order without dropping duplicates (hiding old versions is [`super::db_iter`]'s
//! job). LevelDB's `table/merger.cc` has the same shape.
//!
//! # Order and tie-break
//! Entries are yielded in ascending order of `(internal key, child index)`: if two children hold
//! the same internal key (the engine never writes one), the earlier child's entry comes first
//! going forward and last going backward, so reverse iteration is exactly the mirror of
//! forward iteration.
//!
//! # Direction switching
//! Going forward, every valid child sits on its first entry after the current one; going
//! backward, on its last entry before it. When the caller turns around, every child except the
//! current one is re-sought relative to the current key before the step is taken.
//!
//! # Cost
//! Children are kept in a binary heap of indices (a min-heap forward, a max-heap backward), so
//! a step costs one child step plus O(log n) key comparisons; a seek or a turn-around costs one
//! seek per child. While one child keeps yielding (a scan over the largest level), a step
//! costs one comparison: the stepped child against the remembered runner-up.

use std::cmp::Ordering;
use std::fmt;

use super::InternalIterator;
use crate::error::Result;
use crate::types::{InternalKeyRef, SeqNo, ValueKind};

/// Which way the merge last moved; decides where the non-current children sit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    Forward,
    Reverse,
}

/// Merges sorted children into one sorted stream (see the module docs for order and cost).
///
/// An error from any child is returned at once; the merging iterator is then unpositioned
/// (`valid()` is false) until the next seek.
pub struct MergingIterator {
    children: Vec<Box<dyn InternalIterator>>,
    /// Indices of the valid children, heap-ordered for `direction`: `heap[0]` is the current
    /// child. Invariant: a child index is in the heap iff that child is valid.
    heap: Vec<usize>,
    direction: Direction,
    /// Heap position (1 or 2) of the child yielded after the current one, once found. The
    /// children at positions 1 and 2 neither move nor step while the current child stays on
    /// top, so it stays right until the heap changes below the top; then it is `None`.
    runner_up: Option<usize>,
}

impl MergingIterator {
    /// Builds an unpositioned merge of `children`. Earlier children win ties (see module docs).
    pub fn new(children: Vec<Box<dyn InternalIterator>>) -> Self {
        let heap = Vec::with_capacity(children.len());
        MergingIterator {
            children,
            heap,
            direction: Direction::Forward,
            runner_up: None,
        }
    }

    /// Number of children.
    pub fn num_children(&self) -> usize {
        self.children.len()
    }

    /// Runs `op`; on error, leaves the iterator unpositioned so no half-moved state is visible.
    fn guard(&mut self, op: impl FnOnce(&mut Self) -> Result<()>) -> Result<()> {
        let result = op(self);
        if result.is_err() {
            self.heap.clear();
            self.runner_up = None;
        }
        result
    }

    /// Applies `position` to every child, then rebuilds the heap for `direction`.
    fn position_all(
        &mut self,
        direction: Direction,
        mut position: impl FnMut(&mut dyn InternalIterator) -> Result<()>,
    ) -> Result<()> {
        self.heap.clear();
        for child in &mut self.children {
            position(child.as_mut())?;
        }
        self.rebuild(direction);
        Ok(())
    }

    /// Refills the heap with every valid child, ordered for `direction`.
    fn rebuild(&mut self, direction: Direction) {
        self.direction = direction;
        self.runner_up = None;
        self.heap.clear();
        self.heap
            .extend((0..self.children.len()).filter(|&i| self.children[i].valid()));
        let heap_len = self.heap.len();
        for root in (0..heap_len / 2).rev() {
            sift_down(&self.children, &mut self.heap, direction, root);
        }
    }

    /// Turns the merge around to `direction`, re-seeking every non-current child relative to
    /// the current entry (the tie-break by child index decides `<` versus `<=`).
    fn switch_direction(&mut self, direction: Direction) -> Result<()> {
        let Some(&cur) = self.heap.first() else {
            return Ok(());
        };
        let (before, rest) = self.children.split_at_mut(cur);
        let Some((cur_child, after)) = rest.split_first_mut() else {
            debug_assert!(false, "heap holds an out-of-range child index");
            return Ok(());
        };
        let key = cur_child.key();
        for child in before {
            // Earlier children sort before the current child on equal keys.
            match direction {
                Direction::Forward => seek_after(child.as_mut(), key)?,
                Direction::Reverse => child.seek_for_prev(key)?,
            }
        }
        for child in after {
            // Later children sort after the current child on equal keys.
            match direction {
                Direction::Forward => child.seek(key)?,
                Direction::Reverse => seek_before(child.as_mut(), key)?,
            }
        }
        self.rebuild(direction);
        Ok(())
    }

    /// Steps the current child one entry in `direction` and restores the heap.
    fn step(&mut self, direction: Direction) -> Result<()> {
        debug_assert!(self.valid(), "step on an unpositioned MergingIterator");
        if self.direction != direction {
            self.switch_direction(direction)?;
        }
        let Some(&cur) = self.heap.first() else {
            return Ok(());
        };
        let child = &mut self.children[cur];
        match direction {
            Direction::Forward => child.next()?,
            Direction::Reverse => child.prev()?,
        }
        if child.valid() {
            if self.top_stays(direction, cur) {
                return Ok(());
            }
            sift_down(&self.children, &mut self.heap, direction, 0);
        } else {
            self.heap.swap_remove(0);
            if !self.heap.is_empty() {
                sift_down(&self.children, &mut self.heap, direction, 0);
            }
        }
        self.runner_up = None;
        Ok(())
    }

    /// True if child `cur`, on top of the heap and just stepped, still yields first. It is
    /// compared with the runner-up alone, which is found once and remembered while `cur` stays
    /// on top: a long run of entries from one child (a scan over one large level) costs one
    /// key comparison per entry instead of the two of a sift-down.
    fn top_stays(&mut self, direction: Direction, cur: usize) -> bool {
        let second = match self.runner_up {
            Some(p) => p,
            None => match self.heap.as_slice() {
                [] | [_] => return true,
                [_, _] => 1,
                [_, a, b, ..] => {
                    if yields_first(&self.children, direction, *b, *a) {
                        2
                    } else {
                        1
                    }
                }
            },
        };
        let Some(&other) = self.heap.get(second) else {
            debug_assert!(false, "runner-up position {second} outside the heap");
            return false;
        };
        self.runner_up = Some(second);
        yields_first(&self.children, direction, cur, other)
    }
}

/// Positions `child` at its first entry strictly after `key`.
fn seek_after(child: &mut dyn InternalIterator, key: InternalKeyRef<'_>) -> Result<()> {
    child.seek_for_prev(key)?;
    if child.valid() {
        child.next()
    } else {
        child.seek_to_first()
    }
}

/// Positions `child` at its last entry strictly before `key`.
fn seek_before(child: &mut dyn InternalIterator, key: InternalKeyRef<'_>) -> Result<()> {
    child.seek(key)?;
    if child.valid() {
        child.prev()
    } else {
        child.seek_to_last()
    }
}

/// True if child `a`'s entry is yielded before child `b`'s when moving in `direction`.
fn yields_first(
    children: &[Box<dyn InternalIterator>],
    direction: Direction,
    a: usize,
    b: usize,
) -> bool {
    let order = children[a].key().cmp(&children[b].key()).then(a.cmp(&b));
    match direction {
        Direction::Forward => order == Ordering::Less,
        Direction::Reverse => order == Ordering::Greater,
    }
}

/// Restores the heap property below `root` (the entry yielded first goes to the top).
fn sift_down(
    children: &[Box<dyn InternalIterator>],
    heap: &mut [usize],
    direction: Direction,
    mut root: usize,
) {
    loop {
        let left = 2 * root + 1;
        if left >= heap.len() {
            return;
        }
        let right = left + 1;
        let mut best = left;
        if right < heap.len() && yields_first(children, direction, heap[right], heap[left]) {
            best = right;
        }
        if !yields_first(children, direction, heap[best], heap[root]) {
            return;
        }
        heap.swap(root, best);
        root = best;
    }
}

impl fmt::Debug for MergingIterator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MergingIterator")
            .field("children", &self.children.len())
            .field("valid_children", &self.heap.len())
            .field("direction", &self.direction)
            .finish()
    }
}

impl InternalIterator for MergingIterator {
    fn valid(&self) -> bool {
        !self.heap.is_empty()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.guard(|m| m.position_all(Direction::Forward, |c| c.seek_to_first()))
    }

    fn seek_to_last(&mut self) -> Result<()> {
        self.guard(|m| m.position_all(Direction::Reverse, |c| c.seek_to_last()))
    }

    fn seek(&mut self, target: InternalKeyRef<'_>) -> Result<()> {
        self.guard(|m| m.position_all(Direction::Forward, |c| c.seek(target)))
    }

    fn seek_for_prev(&mut self, target: InternalKeyRef<'_>) -> Result<()> {
        self.guard(|m| m.position_all(Direction::Reverse, |c| c.seek_for_prev(target)))
    }

    fn next(&mut self) -> Result<()> {
        self.guard(|m| m.step(Direction::Forward))
    }

    fn prev(&mut self) -> Result<()> {
        self.guard(|m| m.step(Direction::Reverse))
    }

    fn key(&self) -> InternalKeyRef<'_> {
        match self.heap.first() {
            Some(&i) => self.children[i].key(),
            None => {
                debug_assert!(false, "key() on an unpositioned MergingIterator");
                InternalKeyRef::new(&[], SeqNo::ZERO, ValueKind::Delete)
            }
        }
    }

    fn value(&self) -> &[u8] {
        match self.heap.first() {
            Some(&i) => self.children[i].value(),
            None => {
                debug_assert!(false, "value() on an unpositioned MergingIterator");
                &[]
            }
        }
    }
}

#[cfg(test)]
mod tests;
