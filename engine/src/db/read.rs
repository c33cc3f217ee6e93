//! The read path: point lookups and range iterators.
//!
//! A read first takes the visible sequence number, *then* the super version (memtable,
//! immutable memtables, version). In that order every write at or below the sequence number is
//! in the captured memtables or tables: a flush swaps "memtable gone, table added" in one step,
//! and a memtable switch happens before any write lands in the new memtable.

use std::ops::Bound;
use std::sync::Arc;

use bytes::Bytes;

use super::state::{DbInner, SuperVersion};
use crate::cache::TableCache;
use crate::error::{Error, Result};
use crate::iterator::InternalIterator;
use crate::iterator::db_iter::DbIter;
use crate::iterator::level::LevelIterator;
use crate::iterator::merging::MergingIterator;
use crate::iterator::range::Range;
use crate::options::ReadOptions;
use crate::types::{InternalKeyRef, SeqNo, ValueKind};

/// Iterator over `(key, value)` pairs returned by [`crate::Db::range`] and [`crate::Db::iter`].
///
/// Ascending with `next`, descending with `next_back` (`.rev()`); mixing both yields each key
/// once. Holds the memtables and tables of the moment it was created alive. After an `Err` item
/// it yields `None`.
pub struct DbRange {
    inner: Range<MergingIterator>,
}

impl std::fmt::Debug for DbRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DbRange").finish_non_exhaustive()
    }
}

impl Iterator for DbRange {
    type Item = Result<(Bytes, Bytes)>;

    fn next(&mut self) -> Option<Self::Item> {
        self.inner.next()
    }
}

impl DoubleEndedIterator for DbRange {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.inner.next_back()
    }
}

impl DbInner {
    fn read_seqno(&self, options: &ReadOptions) -> SeqNo {
        options
            .snapshot
            .as_ref()
            .map_or_else(|| self.visible_seqno(), crate::Snapshot::seqno)
    }

    /// Point lookup; see [`crate::Db::get`].
    pub(crate) fn get(&self, options: &ReadOptions, key: &[u8]) -> Result<Option<Bytes>> {
        self.check_open()?;
        let seqno = self.read_seqno(options);
        let sv = self.super_version();
        let mems = std::iter::once(&sv.mem).chain(sv.imms.iter().map(|imm| &imm.mem));
        for mem in mems {
            if let Some((_, kind, value)) = mem.get(key, seqno) {
                return resolve(key, kind, value);
            }
        }
        let target = InternalKeyRef::new(key, seqno, ValueKind::FOR_SEEK);
        for (_, file) in sv.version.files_for_get(key) {
            let table = self.table_cache.get(file.number)?;
            if let Some((_, kind, value)) = table.get(target)? {
                return resolve(key, kind, value);
            }
        }
        Ok(None)
    }

    /// Range iterator; see [`crate::Db::range`].
    pub(crate) fn range(
        &self,
        options: &ReadOptions,
        lower: Bound<Vec<u8>>,
        upper: Bound<Vec<u8>>,
    ) -> DbRange {
        let seqno = self.read_seqno(options);
        let sv = self.super_version();
        let cache = Arc::clone(&self.table_cache);
        let closed = self.check_open();
        let mut closed = Some(closed);
        DbRange {
            inner: Range::new(move || {
                if let Some(Err(e)) = closed.take() {
                    return Err(e);
                }
                let merged = merging_iterator(&sv, &cache)?;
                Ok(DbIter::new(
                    merged,
                    seqno,
                    lower.clone(),
                    upper.clone(),
                    None,
                ))
            }),
        }
    }

    /// Verifies every table's checksums and the version invariants.
    pub(crate) fn check_integrity(&self) -> Result<()> {
        self.check_open()?;
        let sv = self.super_version();
        let problems = sv.version.check_invariants();
        if let Some(problem) = problems.into_iter().next() {
            return Err(Error::corruption(self.dir.join("CURRENT"), 0, problem));
        }
        for level in 0..sv.version.levels.len() {
            for file in sv.version.files(level) {
                self.table_cache.get(file.number)?.verify_checksums()?;
            }
        }
        Ok(())
    }
}

/// Turns the newest visible entry for `key` into the user's answer.
fn resolve(key: &[u8], kind: ValueKind, value: Bytes) -> Result<Option<Bytes>> {
    match kind {
        ValueKind::Put => Ok(Some(value)),
        ValueKind::Delete => Ok(None),
        ValueKind::Merge => Err(Error::InvalidArgument(format!(
            "key {:?} has merge operands but no merge operator is configured",
            String::from_utf8_lossy(key)
        ))),
    }
}

/// Merges the memtables, the level-0 tables and one concatenating iterator per deeper level,
/// newest source first.
pub(crate) fn merging_iterator(
    sv: &Arc<SuperVersion>,
    cache: &Arc<TableCache>,
) -> Result<MergingIterator> {
    let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
    children.push(Box::new(sv.mem.iter()));
    for imm in &sv.imms {
        children.push(Box::new(imm.mem.iter()));
    }
    for file in sv.version.files(0) {
        children.push(Box::new(cache.get(file.number)?.iter()));
    }
    for level in 1..sv.version.levels.len() {
        let files = sv.version.files(level).to_vec();
        if files.is_empty() {
            continue;
        }
        let bounds = files
            .iter()
            .map(|f| (f.smallest.clone(), f.largest.clone()))
            .collect();
        let cache = Arc::clone(cache);
        children.push(Box::new(LevelIterator::new(bounds, move |i| {
            let file = files.get(i).ok_or_else(|| {
                Error::InvalidArgument(format!("level iterator asked for file index {i}"))
            })?;
            let table = cache.get(file.number)?;
            Ok(Box::new(table.iter()) as Box<dyn InternalIterator>)
        })));
    }
    Ok(MergingIterator::new(children))
}
