//! The key-value interface the executor runs on, with two implementations: the engine
//! ([`DbStore`]) and an in-memory map ([`MemStore`], for tests and as a reference).

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, PoisonError, RwLock};

use bytes::Bytes;
use strata_engine::{Db, DbRange, ReadOptions, TableSorter, WriteBatch, WriteOptions};

/// Result of a store operation.
pub type KvResult<T> = Result<T, strata_engine::Error>;

/// An iterator over `(key, value)` pairs in key order (or reverse key order).
pub type KvIter<'a> = Box<dyn Iterator<Item = KvResult<(Bytes, Bytes)>> + 'a>;

/// A forward or reverse cursor over `(key, value)` pairs that lends each entry instead of
/// copying it: what the executor's row source reads (see [`KvRead::cursor`]).
pub trait KvScan {
    /// Moves to the next pair and lends it, or `Ok(None)` at the end. The slices are valid
    /// until the next call.
    ///
    /// # Errors
    /// The store's read errors; the cursor yields nothing more after one.
    fn next_entry(&mut self) -> KvResult<Option<(&[u8], &[u8])>>;
}

/// A boxed [`KvScan`] borrowing its read view.
pub type KvCursor<'a> = Box<dyn KvScan + 'a>;

/// A consistent read view: every call sees the same state (a snapshot). Shared by the
/// threads of a parallel scan, hence `Sync`.
pub trait KvRead: Sync {
    /// The value of `key`, or `None`.
    ///
    /// # Errors
    /// The store's read errors.
    fn get(&self, key: &[u8]) -> KvResult<Option<Bytes>>;

    /// Pairs with keys between `lower` and `upper`, ascending, or descending when `reverse`.
    /// Lazy: nothing is read before the first `next`.
    fn scan(&self, lower: Bound<&[u8]>, upper: Bound<&[u8]>, reverse: bool) -> KvIter<'_>;

    /// The pairs of [`KvRead::scan`] as a lending cursor: no copy or allocation per pair.
    /// Lazy like `scan`. `cache` says whether the blocks it reads stay cached.
    fn cursor(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
        cache: ScanCache,
    ) -> KvCursor<'_>;

    /// Number of keys between `lower` and `upper`, or `Ok(None)` once `stop` is set; `cache`
    /// as for [`KvRead::cursor`]. The default counts a cursor's pairs, looking at `stop` every
    /// [`CHECK_EVERY`](crate::interrupt::CHECK_EVERY) pairs; the engine counts without
    /// reading the pairs where it can ([`Db::count_until`]).
    ///
    /// # Errors
    /// The store's read errors.
    fn count(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        cache: ScanCache,
        stop: &AtomicBool,
    ) -> KvResult<Option<u64>> {
        let mut cursor = self.cursor(lower, upper, false, cache);
        let mut n = 0u64;
        while cursor.next_entry()?.is_some() {
            n += 1;
            if n.is_multiple_of(u64::from(crate::interrupt::CHECK_EVERY))
                && stop.load(std::sync::atomic::Ordering::Acquire)
            {
                return Ok(None);
            }
        }
        Ok(Some(n))
    }

    /// Up to `parts - 1` ascending keys strictly between `lower` and `upper` that cut the
    /// range into `parts` of about equal size, for scanning them on `parts` threads; empty
    /// when the range is not worth splitting (the default). A hint: the parts' rows together
    /// are the range's rows however it is cut.
    fn split_keys(&self, lower: Bound<&[u8]>, upper: Bound<&[u8]>, parts: usize) -> Vec<Vec<u8>> {
        let _ = (lower, upper, parts);
        Vec::new()
    }
}

/// How a scan uses the engine's block cache (the engine's `ReadOptions::fill_cache`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScanCache {
    /// Cache the blocks the scan reads: bounded scans, whose blocks are likely read again.
    Fill,
    /// Use blocks already cached, but do not cache the ones read: scans of a whole table
    /// (full scans, index builds, drops), which would otherwise evict the blocks point
    /// lookups keep reading, for blocks that one scan reads once (RocksDB's advice for bulk
    /// scans).
    NoFill,
}

/// A batch of writes applied atomically by [`KvStore::write`]. Later entries for the same
/// key win.
pub trait KvBatch: Default {
    /// Sets `key` to `value`.
    fn put(&mut self, key: &[u8], value: &[u8]);
    /// Deletes `key`.
    fn delete(&mut self, key: &[u8]);
    /// Number of entries.
    fn len(&self) -> usize;
    /// True when there are no entries.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Many new keys written in any order (an index being built over a table's rows), handed
/// back to [`KvStore::finish_bulk`] to make them visible.
pub trait KvBulk {
    /// Adds `key -> value`. Keys must be distinct and not held by the store.
    ///
    /// # Errors
    /// The store's errors: a key or value over its size limits,
    /// [`strata_engine::Error::DuplicateKey`] for a key given twice (here or, for a sorting
    /// store, at [`KvStore::finish_bulk`]), I/O writing what does not fit in memory.
    fn put(&mut self, key: &[u8], value: &[u8]) -> KvResult<()>;
}

/// A key-value store the SQL layer can run on.
pub trait KvStore: Send + Sync {
    /// The read view type.
    type Reader: KvRead;
    /// The write batch type.
    type Batch: KvBatch;
    /// The bulk write type.
    type Bulk: KvBulk;

    /// A read view of the current state.
    fn reader(&self) -> Self::Reader;

    /// Applies `batch` atomically.
    ///
    /// # Errors
    /// The store's write errors; nothing of the batch is applied then.
    fn write(&self, batch: Self::Batch) -> KvResult<()>;

    /// Starts a bulk write: keys the store does not hold, in any order, visible once
    /// [`KvStore::finish_bulk`] returns. Faster than batches for many keys (the engine sorts
    /// them into tables and ingests those, writing them once).
    ///
    /// # Errors
    /// The store's errors setting up the write (creating its scratch directory).
    fn bulk(&self) -> KvResult<Self::Bulk>;

    /// Makes the keys of `bulk` visible, atomically: on an error none of them is.
    ///
    /// # Errors
    /// [`strata_engine::Error::DuplicateKey`] for a key given twice; the store's write errors.
    fn finish_bulk(&self, bulk: Self::Bulk) -> KvResult<()>;

    /// Drops, without tombstones, the stored data of keys in `[begin, end)` where it is cheap:
    /// whole storage units holding only such keys (the engine's tables: RocksDB's
    /// `DeleteFilesInRange`). Returns how many stored entries went. For a range being
    /// deleted (a dropped table's id): until the deletes that must follow, a read of the
    /// range may miss some keys (never see an older value). The default drops nothing.
    ///
    /// # Errors
    /// The store's I/O errors.
    fn forget_range(&self, begin: &[u8], end: &[u8]) -> KvResult<u64> {
        let _ = (begin, end);
        Ok(0)
    }

    /// Rewrites the stored data of the keys from `begin` (inclusive) to `end` (inclusive;
    /// `None`: to the last key) after a large delete there, so its tombstones and the values they hide stop costing disk space and
    /// scan time (RocksDB's advice: `CompactRange` after deleting a key range). Returns when
    /// done; the contents do not change. The default does nothing (a store without
    /// tombstones).
    ///
    /// # Errors
    /// The store's I/O and corruption errors.
    fn reclaim(&self, begin: &[u8], end: Option<&[u8]>) -> KvResult<()> {
        let _ = (begin, end);
        Ok(())
    }
}

impl KvBatch for WriteBatch {
    fn put(&mut self, key: &[u8], value: &[u8]) {
        WriteBatch::put(self, key, value);
    }
    fn delete(&mut self, key: &[u8]) {
        WriteBatch::delete(self, key);
    }
    fn len(&self) -> usize {
        WriteBatch::len(self)
    }
}

/// The engine as a [`KvStore`]. Readers are engine snapshots; writes are unsynced (they
/// survive a killed process, not a power loss) unless [`DbStore::synced`] is used.
#[derive(Debug, Clone)]
pub struct DbStore {
    db: Db,
    write_options: WriteOptions,
}

impl DbStore {
    /// Wraps an open database.
    pub fn new(db: Db) -> Self {
        DbStore {
            db,
            write_options: WriteOptions::default(),
        }
    }

    /// Makes every statement fsync the WAL before it returns.
    #[must_use]
    pub fn synced(mut self) -> Self {
        self.write_options = WriteOptions::synced();
        self
    }

    /// The underlying database.
    pub fn db(&self) -> &Db {
        &self.db
    }
}

/// A [`DbStore`] read view: an engine snapshot.
#[derive(Debug)]
pub struct DbReader {
    db: Db,
    options: ReadOptions,
}

impl KvRead for DbReader {
    fn get(&self, key: &[u8]) -> KvResult<Option<Bytes>> {
        self.db.get_opt(&self.options, key)
    }

    fn scan(&self, lower: Bound<&[u8]>, upper: Bound<&[u8]>, reverse: bool) -> KvIter<'_> {
        let range = self.db.range(&self.options, (lower, upper));
        if reverse {
            Box::new(range.rev())
        } else {
            Box::new(range)
        }
    }

    fn cursor(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
        cache: ScanCache,
    ) -> KvCursor<'_> {
        let range = match cache {
            ScanCache::Fill => self.db.range(&self.options, (lower, upper)),
            ScanCache::NoFill => {
                let options = ReadOptions {
                    fill_cache: Some(false),
                    ..self.options.clone()
                };
                self.db.range(&options, (lower, upper))
            }
        };
        Box::new(DbScan { range, reverse })
    }

    /// [`Db::count_until`]: from the tables' entries where the range is settled.
    fn count(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        cache: ScanCache,
        stop: &AtomicBool,
    ) -> KvResult<Option<u64>> {
        let options = ReadOptions {
            fill_cache: Some(cache == ScanCache::Fill),
            ..self.options.clone()
        };
        self.db.count_until(&options, (lower, upper), stop)
    }

    /// [`Db::split_keys`]: table boundaries of about equal bytes.
    fn split_keys(&self, lower: Bound<&[u8]>, upper: Bound<&[u8]>, parts: usize) -> Vec<Vec<u8>> {
        self.db
            .split_keys((lower, upper), parts)
            .into_iter()
            .map(|k| k.to_vec())
            .collect()
    }
}

/// An engine range as a [`KvScan`], ascending or descending.
struct DbScan {
    range: DbRange,
    reverse: bool,
}

impl KvScan for DbScan {
    fn next_entry(&mut self) -> KvResult<Option<(&[u8], &[u8])>> {
        if self.reverse {
            self.range.next_back_entry()
        } else {
            self.range.next_entry()
        }
    }
}

/// Memory a [`DbBulk`] holds (two buffers of half this; each full one is written to disk as a
/// sorted run), in bytes. A `CREATE INDEX` over 2.8 million 150-byte reads took the same time
/// with 64 MiB buffers as with 512 MiB ones, and 0.74x that time with 16 MiB ones, which
/// fault in fewer fresh pages (slow on VMs that hand freed memory back to their host); the
/// `.import` of those reads 0.72x (docs/sql.md, "Index builds by sort and ingest").
pub const BULK_MEMORY_BYTES: usize = 32 << 20;

/// Where a [`DbStore`] bulk write keeps its sorted runs and tables: a `*.tmp` directory inside
/// the database directory (same file system, so the ingest links the tables in; the engine
/// deletes `*.tmp` left by a crash at the next writing open), named by the process id and a
/// counter.
pub fn bulk_scratch_dir(db_dir: &std::path::Path) -> std::path::PathBuf {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    db_dir.join(format!("strata-index-{}-{n}.tmp", std::process::id()))
}

/// True for a name [`bulk_scratch_dir`] gives (of any process).
pub fn is_bulk_scratch_name(name: &str) -> bool {
    name.strip_prefix("strata-index-")
        .and_then(|rest| rest.strip_suffix(".tmp"))
        .and_then(|rest| rest.split_once('-'))
        .is_some_and(|(pid, n)| {
            [pid, n]
                .iter()
                .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        })
}

/// A [`DbStore`] bulk write: an engine [`TableSorter`] whose tables are ingested at the end.
#[derive(Debug)]
pub struct DbBulk {
    sorter: TableSorter,
}

impl KvBulk for DbBulk {
    fn put(&mut self, key: &[u8], value: &[u8]) -> KvResult<()> {
        self.sorter.add(key, value)
    }
}

impl KvStore for DbStore {
    type Reader = DbReader;
    type Batch = WriteBatch;
    type Bulk = DbBulk;

    fn reader(&self) -> DbReader {
        let snapshot = self.db.snapshot();
        DbReader {
            db: self.db.clone(),
            options: ReadOptions::at(&snapshot),
        }
    }

    fn write(&self, batch: WriteBatch) -> KvResult<()> {
        if batch.is_empty() {
            return Ok(());
        }
        self.db.write(batch, &self.write_options)
    }

    fn bulk(&self) -> KvResult<DbBulk> {
        let dir = bulk_scratch_dir(self.db.path());
        Ok(DbBulk {
            sorter: TableSorter::new(&dir, &self.db.options(), BULK_MEMORY_BYTES)?,
        })
    }

    /// Sorts, writes the tables and ingests them (the ingest fsyncs them, so the keys are
    /// durable whatever the store's sync setting).
    fn finish_bulk(&self, bulk: DbBulk) -> KvResult<()> {
        let sorted = bulk.sorter.finish()?;
        if sorted.files.is_empty() {
            return Ok(());
        }
        self.db.ingest(&sorted.paths())
    }

    /// [`Db::delete_files_in_range`].
    fn forget_range(&self, begin: &[u8], end: &[u8]) -> KvResult<u64> {
        Ok(self.db.delete_files_in_range(begin, end)?.1)
    }

    /// [`Db::compact_range`] from `begin` to `end`: the tombstones there reach the last level
    /// and are dropped with what they delete.
    fn reclaim(&self, begin: &[u8], end: Option<&[u8]>) -> KvResult<()> {
        self.db.compact_range(Some(begin), end)
    }
}

/// An in-memory [`KvStore`] over a `BTreeMap`. Readers share the map copy-on-write, so a
/// reader is O(1) and a write after a reader was taken copies the map once.
#[derive(Debug, Default)]
pub struct MemStore {
    map: RwLock<Arc<BTreeMap<Bytes, Bytes>>>,
}

impl MemStore {
    /// An empty store.
    pub fn new() -> Self {
        MemStore::default()
    }
}

/// A [`MemStore`] read view.
#[derive(Debug)]
pub struct MemReader {
    map: Arc<BTreeMap<Bytes, Bytes>>,
}

impl MemReader {
    /// The map's pairs within the bounds, in key order (empty for an empty range, where
    /// `BTreeMap::range` would panic).
    fn pairs<'a>(
        &'a self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
    ) -> Option<std::collections::btree_map::Range<'a, Bytes, Bytes>> {
        if let (Bound::Included(l) | Bound::Excluded(l), Bound::Included(u) | Bound::Excluded(u)) =
            (lower, upper)
            && (l > u
                || (l == u && !matches!((lower, upper), (Bound::Included(_), Bound::Included(_)))))
        {
            return None;
        }
        Some(self.map.range::<[u8], _>((lower, upper)))
    }
}

/// A [`MemReader`] range as a [`KvScan`].
struct MemScan<'a> {
    range: Option<std::collections::btree_map::Range<'a, Bytes, Bytes>>,
    reverse: bool,
}

impl KvScan for MemScan<'_> {
    fn next_entry(&mut self) -> KvResult<Option<(&[u8], &[u8])>> {
        let Some(range) = &mut self.range else {
            return Ok(None);
        };
        let pair = if self.reverse {
            range.next_back()
        } else {
            range.next()
        };
        Ok(pair.map(|(k, v)| (k.as_ref(), v.as_ref())))
    }
}

impl KvRead for MemReader {
    fn get(&self, key: &[u8]) -> KvResult<Option<Bytes>> {
        Ok(self.map.get(key).cloned())
    }

    fn scan(&self, lower: Bound<&[u8]>, upper: Bound<&[u8]>, reverse: bool) -> KvIter<'_> {
        let Some(range) = self.pairs(lower, upper) else {
            return Box::new(std::iter::empty());
        };
        let range = range.map(|(k, v)| Ok((k.clone(), v.clone())));
        if reverse {
            Box::new(range.rev())
        } else {
            Box::new(range)
        }
    }

    fn cursor(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
        _cache: ScanCache,
    ) -> KvCursor<'_> {
        Box::new(MemScan {
            range: self.pairs(lower, upper),
            reverse,
        })
    }

    /// Cuts at equal numbers of pairs, for any range of at least `parts` pairs, so that tests
    /// on the map exercise parallel scans on every aggregate.
    fn split_keys(&self, lower: Bound<&[u8]>, upper: Bound<&[u8]>, parts: usize) -> Vec<Vec<u8>> {
        let Some(range) = self.pairs(lower, upper) else {
            return Vec::new();
        };
        let keys: Vec<&Bytes> = range.map(|(k, _)| k).collect();
        if parts < 2 || keys.len() < parts {
            return Vec::new();
        }
        let mut cuts: Vec<Vec<u8>> = (1..parts)
            .filter_map(|p| keys.get(p * keys.len() / parts).map(|k| k.to_vec()))
            .collect();
        cuts.dedup();
        // Strictly inside the range: the first key may equal an inclusive lower bound.
        cuts.retain(|c| match lower {
            Bound::Included(l) | Bound::Excluded(l) => &c[..] > l,
            Bound::Unbounded => true,
        });
        cuts
    }
}

/// A [`MemStore`] batch.
#[derive(Debug, Default)]
pub struct MemBatch {
    ops: Vec<(Bytes, Option<Bytes>)>,
}

impl KvBatch for MemBatch {
    fn put(&mut self, key: &[u8], value: &[u8]) {
        self.ops.push((
            Bytes::copy_from_slice(key),
            Some(Bytes::copy_from_slice(value)),
        ));
    }
    fn delete(&mut self, key: &[u8]) {
        self.ops.push((Bytes::copy_from_slice(key), None));
    }
    fn len(&self) -> usize {
        self.ops.len()
    }
}

/// A [`MemStore`] bulk write: a batch, applied at the end.
#[derive(Debug, Default)]
pub struct MemBulk {
    batch: MemBatch,
    keys: std::collections::HashSet<Bytes>,
}

impl KvBulk for MemBulk {
    /// Refuses a key given twice, as the engine's sort does.
    fn put(&mut self, key: &[u8], value: &[u8]) -> KvResult<()> {
        if !self.keys.insert(Bytes::copy_from_slice(key)) {
            return Err(strata_engine::Error::DuplicateKey { key: key.to_vec() });
        }
        self.batch.put(key, value);
        Ok(())
    }
}

impl KvStore for MemStore {
    type Reader = MemReader;
    type Batch = MemBatch;
    type Bulk = MemBulk;

    fn bulk(&self) -> KvResult<MemBulk> {
        Ok(MemBulk::default())
    }

    fn finish_bulk(&self, bulk: MemBulk) -> KvResult<()> {
        self.write(bulk.batch)
    }

    fn reader(&self) -> MemReader {
        let map = self.map.read().unwrap_or_else(PoisonError::into_inner);
        MemReader {
            map: Arc::clone(&map),
        }
    }

    fn write(&self, batch: MemBatch) -> KvResult<()> {
        let mut guard = self.map.write().unwrap_or_else(PoisonError::into_inner);
        let map = Arc::make_mut(&mut guard);
        for (k, v) in batch.ops {
            match v {
                Some(v) => map.insert(k, v),
                None => map.remove(&k),
            };
        }
        Ok(())
    }
}
