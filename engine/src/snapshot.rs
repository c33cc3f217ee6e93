//! Snapshots: pinned sequence numbers.
//!
//! A [`Snapshot`] records the last sequence number visible when it was taken; reads through it see
//! exactly the writes with sequence numbers at or below it. The database keeps a list of live
//! snapshots so flush and compaction keep every version some snapshot can still see. A snapshot
//! is released when its last clone is dropped.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::types::SeqNo;

/// Multiset of live snapshot sequence numbers, shared by a database and its snapshots.
#[derive(Debug, Default)]
pub(crate) struct SnapshotList {
    live: Mutex<BTreeMap<SeqNo, usize>>,
}

impl SnapshotList {
    /// Registers a snapshot at the sequence number `current()` returns, called under the
    /// list's lock. Reading the sequence number under the lock matters: a compaction reads the
    /// list (also under the lock) when it starts, so a snapshot is either in its list or has a
    /// sequence number at least as new as everything the compaction reads.
    pub(crate) fn take(self: &Arc<Self>, current: impl FnOnce() -> SeqNo) -> Snapshot {
        let mut live = self.live.lock();
        let seqno = current();
        *live.entry(seqno).or_insert(0) += 1;
        drop(live);
        Snapshot {
            inner: Arc::new(SnapshotInner {
                seqno,
                list: Arc::clone(self),
            }),
        }
    }

    /// Sequence numbers of all live snapshots, ascending, without duplicates.
    pub(crate) fn seqnos(&self) -> Vec<SeqNo> {
        self.live.lock().keys().copied().collect()
    }

    /// The oldest live snapshot's sequence number, if any.
    pub(crate) fn oldest(&self) -> Option<SeqNo> {
        self.live.lock().keys().next().copied()
    }

    fn release(&self, seqno: SeqNo) {
        let mut live = self.live.lock();
        if let Some(count) = live.get_mut(&seqno) {
            *count -= 1;
            if *count == 0 {
                live.remove(&seqno);
            }
        }
    }
}

struct SnapshotInner {
    seqno: SeqNo,
    list: Arc<SnapshotList>,
}

impl Drop for SnapshotInner {
    fn drop(&mut self) {
        self.list.release(self.seqno);
    }
}

/// A consistent read view of the database as of one point in the write order.
///
/// Cloning is cheap and shares the same pin; the pin is released when the last clone is dropped.
/// A snapshot keeps old versions alive in memtables and tables, so long-lived snapshots make
/// compaction keep more data.
#[derive(Clone)]
pub struct Snapshot {
    inner: Arc<SnapshotInner>,
}

impl Snapshot {
    /// The sequence number this snapshot reads at: the last write it can see.
    pub fn seqno(&self) -> SeqNo {
        self.inner.seqno
    }

    /// True if this snapshot was taken from the database instance that owns `list`.
    pub(crate) fn taken_from(&self, list: &Arc<SnapshotList>) -> bool {
        Arc::ptr_eq(&self.inner.list, list)
    }
}

impl fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Snapshot")
            .field("seqno", &self.inner.seqno)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshots_are_released_when_last_clone_drops() {
        let list = Arc::new(SnapshotList::default());
        let a = list.take(|| SeqNo(5));
        let b = a.clone();
        let c = list.take(|| SeqNo(9));
        assert_eq!(list.seqnos(), vec![SeqNo(5), SeqNo(9)]);
        drop(a);
        assert_eq!(list.seqnos().first().copied(), Some(SeqNo(5)));
        drop(b);
        assert_eq!(list.seqnos().first().copied(), Some(SeqNo(9)));
        drop(c);
        assert_eq!(list.seqnos().first().copied(), None);
    }
}
