//! Cursor over a memtable, implementing [`InternalIterator`].
//!
//! The cursor holds the memtable by `Arc` and remembers the current entry by value (cheap
//! `Bytes` clones); each step re-seeks the skiplist from that key (`O(log n)`), which keeps the
//! iterator free of self-references and valid while writers insert concurrently. Entries inserted
//! after the iterator was created may or may not be seen; callers filter by sequence number.

use std::ops::Bound;
use std::sync::Arc;

use super::MemTable;
use super::{MemKey, SmallBytes};
use crate::error::Result;
use crate::iterator::InternalIterator;
use crate::types::InternalKeyRef;

/// An [`InternalIterator`] over one memtable.
#[derive(Debug)]
pub struct MemTableIter {
    table: Arc<MemTable>,
    current: Option<(MemKey, SmallBytes)>,
}

impl MemTable {
    /// A cursor over this memtable (unpositioned until a seek).
    pub fn iter(self: &Arc<Self>) -> MemTableIter {
        MemTableIter {
            table: Arc::clone(self),
            current: None,
        }
    }
}

impl MemTableIter {
    fn set(&mut self, entry: Option<crossbeam_skiplist::map::Entry<'_, MemKey, SmallBytes>>) {
        self.current = entry.map(|e| (e.key().clone(), e.value().clone()));
    }
}

impl InternalIterator for MemTableIter {
    fn valid(&self) -> bool {
        self.current.is_some()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        let table = Arc::clone(&self.table);
        self.set(table.map().front());
        Ok(())
    }

    fn seek_to_last(&mut self) -> Result<()> {
        let table = Arc::clone(&self.table);
        self.set(table.map().back());
        Ok(())
    }

    fn seek(&mut self, target: InternalKeyRef<'_>) -> Result<()> {
        let table = Arc::clone(&self.table);
        let target = MemKey::from_slice(target.user_key, target.seqno, target.kind);
        self.set(table.map().lower_bound(Bound::Included(&target)));
        Ok(())
    }

    fn seek_for_prev(&mut self, target: InternalKeyRef<'_>) -> Result<()> {
        let table = Arc::clone(&self.table);
        let target = MemKey::from_slice(target.user_key, target.seqno, target.kind);
        self.set(table.map().upper_bound(Bound::Included(&target)));
        Ok(())
    }

    fn next(&mut self) -> Result<()> {
        if let Some((key, _)) = self.current.take() {
            let table = Arc::clone(&self.table);
            self.set(table.map().lower_bound(Bound::Excluded(&key)));
        }
        Ok(())
    }

    fn prev(&mut self) -> Result<()> {
        if let Some((key, _)) = self.current.take() {
            let table = Arc::clone(&self.table);
            self.set(table.map().upper_bound(Bound::Excluded(&key)));
        }
        Ok(())
    }

    fn key(&self) -> InternalKeyRef<'_> {
        match &self.current {
            Some((key, _)) => key.as_ref(),
            None => InternalKeyRef::new(
                &[],
                crate::types::SeqNo::ZERO,
                crate::types::ValueKind::Delete,
            ),
        }
    }

    fn value(&self) -> &[u8] {
        self.current.as_ref().map_or(&[], |(_, v)| v.as_slice())
    }
}
