//! [`WriteBufferManager`]: one memory budget for the memtables of several databases.
//!
//! RocksDB's `WriteBufferManager` (`include/rocksdb/write_buffer_manager.h`, the
//! `db_write_buffer_size` option) bounds the memory of every memtable of the column families
//! and databases given the same manager. This is the same idea with the same two rules:
//!
//! - **flush**: when the *mutable* (active) memtables hold more than 7/8 of the budget, or the
//!   memtables in all hold the whole budget and the active ones at least half of it, a
//!   database that writes freezes its largest active memtable and flushes it;
//! - **stall**: when the memtables in all hold the whole budget, a database that writes asks
//!   for its immutable memtables to be flushed at once, however few
//!   (`Options::min_write_buffer_number_to_merge` is not waited for), and its writers wait for
//!   that flush before writing more.
//!
//! A memtable is counted from its first write until it is dropped (after its flush, once no
//! iterator or read holds it), so memory pinned by a long scan still counts. Counting is by
//! the memtable's own estimate ([`crate::memtable::MemTable::approximate_size`]: key, value
//! and a fixed overhead per entry), settled once per write group, not by the allocator.
//!
//! A database only stalls while it has flushes of its own to wait for, so memtables of idle
//! databases cannot hold a writer forever; the budget is therefore a target that writes keep
//! to within about one active memtable per database, not a hard limit.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A memory budget, in bytes, shared by the memtables of every database whose
/// [`crate::Options::write_buffer_manager`] holds it. `Send + Sync`; share it through `Arc`.
///
/// ```
/// use strata_engine::{Db, Options, WriteBufferManager};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dir = tempfile::tempdir()?;
/// // Two databases whose memtables together stay near 64 MiB.
/// let budget = WriteBufferManager::new(64 << 20);
/// let options = Options::default().write_buffer_manager(Some(budget.clone()));
/// let a = Db::open(dir.path().join("a"), options.clone())?;
/// let b = Db::open(dir.path().join("b"), options)?;
/// a.put(b"k", b"v")?;
/// b.put(b"k", b"v")?;
/// assert!(budget.memory_usage() > 0);
/// # Ok(())
/// # }
/// ```
pub struct WriteBufferManager {
    /// The budget, in bytes.
    buffer_size: usize,
    /// Bytes of every counted memtable, active and immutable.
    memory: AtomicUsize,
    /// Bytes of the counted memtables that are frozen (immutable).
    immutable: AtomicUsize,
}

impl WriteBufferManager {
    /// A manager with a budget of `buffer_size` bytes of memtables (at least 1).
    pub fn new(buffer_size: usize) -> Arc<Self> {
        Arc::new(WriteBufferManager {
            buffer_size: buffer_size.max(1),
            memory: AtomicUsize::new(0),
            immutable: AtomicUsize::new(0),
        })
    }

    /// The budget, in bytes.
    pub fn buffer_size(&self) -> usize {
        self.buffer_size
    }

    /// Bytes held by the counted memtables, active and immutable.
    pub fn memory_usage(&self) -> usize {
        self.memory.load(Ordering::Relaxed)
    }

    /// Bytes held by the counted active (mutable) memtables.
    pub fn mutable_memory_usage(&self) -> usize {
        self.memory_usage()
            .saturating_sub(self.immutable.load(Ordering::Relaxed))
    }

    /// True when a writing database should freeze and flush its largest active memtable
    /// (RocksDB's `ShouldFlush`): the active memtables hold more than 7/8 of the budget, or
    /// all memtables hold the whole budget and the active ones at least half.
    pub fn should_flush(&self) -> bool {
        let mutable = self.mutable_memory_usage();
        mutable > self.buffer_size / 8 * 7
            || (self.memory_usage() >= self.buffer_size && mutable >= self.buffer_size / 2)
    }

    /// True when the memtables hold the whole budget: a writing database flushes its immutable
    /// memtables and waits for them.
    pub fn is_full(&self) -> bool {
        self.memory_usage() >= self.buffer_size
    }

    /// Counts `bytes` more of an active memtable.
    pub(crate) fn reserve(&self, bytes: usize) {
        self.memory.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Moves `bytes` of a memtable being frozen from active to immutable.
    pub(crate) fn mark_immutable(&self, bytes: usize) {
        self.immutable.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Stops counting a dropped memtable of `bytes`, frozen or not.
    pub(crate) fn release(&self, bytes: usize, frozen: bool) {
        if frozen {
            self.immutable.fetch_sub(bytes, Ordering::Relaxed);
        }
        self.memory.fetch_sub(bytes, Ordering::Relaxed);
    }
}

impl fmt::Debug for WriteBufferManager {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WriteBufferManager")
            .field("buffer_size", &self.buffer_size)
            .field("memory_usage", &self.memory_usage())
            .field("mutable_memory_usage", &self.mutable_memory_usage())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::WriteBufferManager;

    #[test]
    fn the_flush_and_full_rules_follow_rocksdb() {
        let m = WriteBufferManager::new(800);
        m.reserve(700);
        assert!(!m.should_flush(), "700 of 800 active is not over 7/8");
        m.reserve(1);
        assert!(m.should_flush(), "701 active is over 7/8 of 800");
        m.mark_immutable(701);
        assert_eq!(m.mutable_memory_usage(), 0);
        assert!(!m.should_flush() && !m.is_full());
        m.reserve(399);
        assert!(m.is_full(), "1,100 in all");
        assert!(!m.should_flush(), "active 399 is under half the budget");
        m.reserve(1);
        assert!(m.should_flush(), "full, and active at half the budget");
        m.release(701, true);
        m.release(400, false);
        assert_eq!((m.memory_usage(), m.mutable_memory_usage()), (0, 0));
    }
}
