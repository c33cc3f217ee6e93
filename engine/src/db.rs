//! The database handle: open, put, get, delete, write, iterate, flush, close.
//!
//! `Db` is thin; the work happens in `db/`: [`write`] (batch → WAL → memtable, group commit),
//! [`read`] (memtables then tables, newest first), [`recovery`] (replay WALs on open) and
//! [`flush`] (immutable memtable → level-0 SSTable, in a background thread).
//!
//! # Lock order
//! `write queue` (never held while waiting) → `log` (held by the group-commit leader) →
//! `versions` → a keyspace's `super_version` → `bg`. No code takes an earlier lock while
//! holding a later one. The keyspace map (`keyspaces`) is a leaf: held only to look up or
//! clone keyspaces, never while taking another lock.
//!
//! The plain `Db` methods read and write the default keyspace; [`Db::keyspace`] gives handles
//! to named ones (`keyspace.rs`).

mod background;
mod checkpoint;
mod flush;
mod ingest;
mod keyspace;
mod lock;
mod read;
mod recovery;
mod resume;
mod state;
mod write;

use std::ops::RangeBounds;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;

pub use keyspace::{Keyspace, MAX_KEYSPACE_NAME_LEN};
pub use read::{DbCursor, DbRange, prefix_successor};
use state::DbInner;
pub use write::WriteFuture;

use crate::batch::WriteBatch;
use crate::error::Result;
use crate::options::{Options, ReadOptions, WriteOptions};
use crate::snapshot::Snapshot;

/// An open database.
///
/// `Db` is `Send + Sync + Clone`: clones share one database, and any number of threads may
/// read and write at once. Concurrent writers are committed in groups (one WAL append and at
/// most one fsync per group). The database is closed by [`Db::close`] or, best effort, when
/// the last clone is dropped.
#[derive(Clone)]
pub struct Db {
    handle: Arc<Handle>,
}

/// Owned by the user-facing clones only (background threads hold `DbInner` directly), so
/// dropping the last `Db` runs the best-effort close.
struct Handle {
    inner: Arc<DbInner>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        if let Err(e) = self.inner.close() {
            tracing::warn!(error = %e, "closing database on drop failed");
        }
    }
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db")
            .field("dir", &self.inner().dir)
            .finish_non_exhaustive()
    }
}

impl Db {
    fn inner(&self) -> &Arc<DbInner> {
        &self.handle.inner
    }

    /// Opens (or creates) the database in directory `path`.
    ///
    /// Creates the directory when [`Options::create_if_missing`] is set (the default), takes an
    /// exclusive lock on `path/LOCK`, reads the manifest and replays the WALs (see
    /// `docs/format/files.md` for the order). Replayed writes are flushed to a level-0 table
    /// before `open` returns.
    ///
    /// # Errors
    /// - [`crate::Error::InvalidArgument`]: options out of range, the directory is missing or
    ///   holds no database (no `CURRENT`) and `create_if_missing` is off, it holds a
    ///   database and `error_if_exists` is on, or it is missing and its parent directory
    ///   holds a database (a database is not created inside another's directory).
    /// - [`crate::Error::Locked`]: another `Db`, in this process or another, has the directory open.
    /// - [`crate::Error::Corruption`] / [`crate::Error::ChecksumMismatch`]: a damaged manifest, table or WAL
    ///   record that the [`Options::wal_recovery_mode`] does not tolerate.
    /// - [`crate::Error::Io`]: the file system failed.
    pub fn open(path: impl AsRef<Path>, options: Options) -> Result<Db> {
        let inner = recovery::open(path.as_ref(), options)?;
        Ok(Db {
            handle: Arc::new(Handle { inner }),
        })
    }

    /// Sets `key` to `value` (a one-entry batch with `sync: false`).
    ///
    /// # Errors
    /// [`crate::Error::InvalidArgument`] for a key over [`crate::MAX_KEY_SIZE`] bytes or a value over
    /// [`Options::max_value_size`]; [`crate::Error::Poisoned`], [`crate::Error::Closed`],
    /// [`crate::Error::SeqNoExhausted`], [`crate::Error::Io`] as for [`Db::write`].
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let mut batch = WriteBatch::with_capacity(key.len() + value.len() + 8);
        batch.put(key, value);
        self.write(batch, &WriteOptions::default())
    }

    /// Deletes `key` by writing a tombstone. Deleting an absent key is not an error.
    ///
    /// # Errors
    /// As [`Db::put`].
    pub fn delete(&self, key: &[u8]) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.delete(key);
        self.write(batch, &WriteOptions::default())
    }

    /// Applies `batch` atomically: after a crash either all of its entries are present or
    /// none. With `options.sync` the write survives a power loss once this returns; without it,
    /// it survives a killed process but may be lost on power loss (see [`WriteOptions::sync`]).
    /// Writes are ordered: a `get` that starts after `write` returns sees it.
    ///
    /// # Errors
    /// - [`crate::Error::InvalidArgument`]: an entry over the key or value size limit (nothing of the
    ///   batch is written).
    /// - [`crate::Error::Poisoned`]: an earlier WAL write, fsync or flush failed; close and reopen.
    /// - [`crate::Error::Io`]: the WAL append or fsync failed (the database is poisoned afterwards).
    /// - [`crate::Error::Closed`], [`crate::Error::SeqNoExhausted`].
    pub fn write(&self, batch: WriteBatch, options: &WriteOptions) -> Result<()> {
        self.inner().write(batch, options.sync)
    }

    /// Like [`Db::write`], but the caller's thread does not wait for the commit: the batch is
    /// queued for the next commit group and the returned [`WriteFuture`] resolves when that
    /// group is in the WAL (fsynced with `options.sync`) and the memtables. For async servers:
    /// a runtime's worker thread goes on serving other connections meanwhile, and their writes
    /// join the same group.
    ///
    /// The batch is validated and queued during this call; if no group commit is in progress
    /// it is committed during this call, in the calling thread, unless `options.hand_off`
    /// hands it to the committer thread (see [`WriteOptions::hand_off`]). The first call
    /// starts the database's committer thread, which leads the commit groups of queued
    /// asynchronous writes (see `docs/design.md`, "Write path"). Dropping the future before it
    /// resolves blocks until the batch is committed; the write is never cancelled. Writes are
    /// ordered as with [`Db::write`]: once the future resolves, reads see the batch.
    ///
    /// # Errors
    /// The future resolves to the errors of [`Db::write`]; the thread start failing gives
    /// [`crate::Error::Io`].
    pub fn write_async(&self, batch: WriteBatch, options: &WriteOptions) -> WriteFuture {
        self.inner()
            .write_async(batch, options.sync, options.hand_off)
    }

    /// Returns once every write queued before this call ([`Db::write`] and
    /// [`Db::write_async`] from any thread) is committed and visible to reads. For
    /// read-modify-write code that must see writes other threads queued but whose futures
    /// have not resolved yet.
    ///
    /// # Errors
    /// [`crate::Error::Poisoned`], [`crate::Error::Closed`]; the errors of the group commit it
    /// waits for.
    pub fn wait_for_queued_writes(&self) -> Result<()> {
        self.inner().write_barrier()
    }

    /// The latest value of `key`, or `Ok(None)` when it is absent or deleted.
    ///
    /// The returned `Bytes` is an independent handle: it stays valid after later writes,
    /// flushes and compactions.
    ///
    /// # Errors
    /// [`crate::Error::Corruption`] / [`crate::Error::ChecksumMismatch`] when a table block the lookup reads
    /// is damaged; [`crate::Error::Io`]; [`crate::Error::Closed`].
    pub fn get(&self, key: &[u8]) -> Result<Option<Bytes>> {
        let inner = self.inner();
        inner.get(&inner.default_ks, &ReadOptions::default(), key)
    }

    /// Like [`Db::get`], reading at `options.snapshot` when set, using the block cache as
    /// `options.fill_cache` and `options.verify_checksums` say.
    ///
    /// # Errors
    /// As [`Db::get`]; with `verify_checksums`, [`crate::Error::ChecksumMismatch`] also for a
    /// block that was cached before it was damaged on disk; [`crate::Error::InvalidArgument`]
    /// for a snapshot taken from another database instance (see [`ReadOptions::snapshot`]).
    pub fn get_opt(&self, options: &ReadOptions, key: &[u8]) -> Result<Option<Bytes>> {
        let inner = self.inner();
        inner.get(&inner.default_ks, options, key)
    }

    /// The values of `keys`, in their order: for each, what [`Db::get_opt`] would return, all
    /// read at one sequence number (`options.snapshot`, or the latest when the call starts), so
    /// the answers are consistent with each other. Cheaper than one `get` per key: the read
    /// view (memtables, tables, sequence number) is taken once, and each table once from the
    /// table cache. RocksDB's `MultiGet`.
    ///
    /// # Errors
    /// Per key, as [`Db::get_opt`]: a damaged block fails only the keys that read it.
    pub fn multi_get<K: AsRef<[u8]>>(
        &self,
        options: &ReadOptions,
        keys: &[K],
    ) -> Vec<Result<Option<Bytes>>> {
        let inner = self.inner();
        inner.multi_get(&inner.default_ks, options, keys)
    }

    /// A snapshot of the current state: reads through [`ReadOptions::at`] see exactly the
    /// writes acknowledged before this call. Released when dropped.
    ///
    /// On a closed database it still returns a snapshot (of the state at the close; it
    /// returns no `Result`), but nothing can read through it: every read fails with
    /// [`crate::Error::Closed`].
    pub fn snapshot(&self) -> Snapshot {
        self.inner().snapshot()
    }

    /// Iterates `(key, value)` pairs with keys in `range`, ascending (or descending with
    /// `.rev()`), as of `options.snapshot` or, without one, as of this call. The iterator
    /// holds the memtables and tables it reads alive, so concurrent flushes don't disturb it.
    /// Items are `Err` when a block read fails; the iterator ends after an error.
    pub fn range<'a, R>(&self, options: &ReadOptions, range: R) -> DbRange
    where
        R: RangeBounds<&'a [u8]>,
    {
        let lower = range.start_bound().map(|k| k.to_vec());
        let upper = range.end_bound().map(|k| k.to_vec());
        let inner = self.inner();
        inner.range(&inner.default_ks, options, lower, upper)
    }

    /// Number of keys in `range` with a value, as of `options.snapshot` or, without one, as
    /// of this call: what `range(options, range).count()` returns, without copying or
    /// returning the pairs.
    ///
    /// Where the range's data lies in one level of tables that hold one put per key (the
    /// settled state after compactions or a bulk load, with nothing in the memtables there),
    /// the count comes from the tables' entries: data blocks wholly inside the range are
    /// counted from the index block's entry counts (SSTable format version 3; the blocks are
    /// not read, so a damaged one there is not noticed: [`Db::check_integrity`] finds it) or,
    /// in older tables, from their entry headers, without assembling or comparing keys.
    /// Otherwise it merges the sources as [`Db::range`] does (`docs/design.md`, "Counting a
    /// range").
    ///
    /// # Errors
    /// As [`Db::range`]'s items: [`crate::Error::Io`], [`crate::Error::Corruption`] or
    /// [`crate::Error::ChecksumMismatch`] reading a block; [`crate::Error::Closed`];
    /// [`crate::Error::InvalidArgument`] for a snapshot of another database, or a merge
    /// without a merge operator.
    pub fn count<'a, R>(&self, options: &ReadOptions, range: R) -> Result<u64>
    where
        R: RangeBounds<&'a [u8]>,
    {
        let inner = self.inner();
        let (lower, upper) = (range.start_bound().cloned(), range.end_bound().cloned());
        inner
            .count(&inner.default_ks, options, lower, upper, None)
            .map(Option::unwrap_or_default)
    }

    /// [`Db::count`] that gives up once `stop` is set (looked at between tables, or every
    /// 4,096 keys when it merges), returning `Ok(None)`: for a caller that cancels long
    /// statements, as the SQL layer's interrupt does.
    ///
    /// # Errors
    /// As [`Db::count`].
    pub fn count_until<'a, R>(
        &self,
        options: &ReadOptions,
        range: R,
        stop: &std::sync::atomic::AtomicBool,
    ) -> Result<Option<u64>>
    where
        R: RangeBounds<&'a [u8]>,
    {
        let inner = self.inner();
        let (lower, upper) = (range.start_bound().cloned(), range.end_bound().cloned());
        inner.count(&inner.default_ks, options, lower, upper, Some(stop))
    }

    /// Up to `parts - 1` keys, ascending, that cut the user keys of `range` into `parts`
    /// ranges holding about equal bytes of table data, for reading them on `parts` threads
    /// (each with its own [`Db::range`] at one snapshot). The cuts come from the tables of the
    /// level that holds most of the range (in LevelDB's and RocksDB's leveled layout, the
    /// last), weighed by their file sizes: a table's first key, or a data block boundary
    /// inside a table read from its index block (no data block is read). Empty when
    /// `parts < 2`, when that level holds under 16 MiB of the range (or under one
    /// [`Options::target_file_size`], if smaller), or when it is level 0; fewer than
    /// `parts - 1` cuts when some fall outside `range` (the range's share of its first and
    /// last tables is not estimated). `parts` above 65536 is treated as 65536, and as no more
    /// than the cuts the level's data blocks can give (so `usize::MAX` is safe).
    /// Every cut lies strictly inside `range`. An estimate from the current version: data
    /// still in memtables or in other levels is not weighed, and the result never affects
    /// what a read returns.
    pub fn split_keys<'a, R>(&self, range: R, parts: usize) -> Vec<Bytes>
    where
        R: RangeBounds<&'a [u8]>,
    {
        let inner = self.inner();
        inner.split_keys(
            &inner.default_ks,
            range.start_bound().map(|k| *k),
            range.end_bound().map(|k| *k),
            parts,
        )
    }

    /// Iterates the pairs whose key starts with `prefix`, in key order (reverse with `.rev()`).
    /// The upper bound is the prefix's successor, computed correctly for trailing `0xFF` bytes
    /// (see [`prefix_successor`]).
    pub fn prefix(&self, options: &ReadOptions, prefix: &[u8]) -> DbRange {
        let upper = prefix_successor(prefix);
        let lower = std::ops::Bound::Included(prefix);
        match &upper {
            Some(u) => self.range(options, (lower, std::ops::Bound::Excluded(u.as_slice()))),
            None => self.range(options, (lower, std::ops::Bound::Unbounded)),
        }
    }

    /// A cursor with `seek`, `seek_for_prev`, `next` and `prev`, reading as of
    /// `options.snapshot` or this call.
    ///
    /// # Errors
    /// [`crate::Error::Closed`]; [`crate::Error::Corruption`] / [`crate::Error::Io`] opening a
    /// table; [`crate::Error::InvalidArgument`] for a snapshot taken from another database
    /// instance.
    pub fn cursor(&self, options: &ReadOptions) -> Result<DbCursor> {
        let inner = self.inner();
        inner.cursor(&inner.default_ks, options)
    }

    /// Adds merge operand `operand` to `key` (a one-entry batch, `sync: false`). Reads fold the
    /// operands with [`Options::merge_operator`]; with [`crate::CounterAdd`], `merge(k, b"1")`
    /// increments a decimal counter without reading it.
    ///
    /// # Errors
    /// As [`Db::put`].
    pub fn merge(&self, key: &[u8], operand: &[u8]) -> Result<()> {
        let mut batch = WriteBatch::with_capacity(key.len() + operand.len() + 8);
        batch.merge(key, operand);
        self.write(batch, &WriteOptions::default())
    }

    /// Iterates every `(key, value)` pair; see [`Db::range`].
    pub fn iter(&self, options: &ReadOptions) -> DbRange {
        self.range::<std::ops::RangeFull>(options, ..)
    }

    /// Freezes the memtable of every keyspace, writes them (and any other immutable memtable,
    /// however few wait for [`crate::Options::min_write_buffer_number_to_merge`]) to level-0
    /// tables and returns once they are recorded in the manifest and fsynced; memtables frozen
    /// by concurrent writers after the call started are not waited for. The WAL is fsynced
    /// first, so every write acknowledged before the call survives a power loss once it
    /// returns. [`Keyspace::flush`] flushes one keyspace (and syncs the WAL too).
    ///
    /// # Errors
    /// [`crate::Error::Io`] or [`crate::Error::Poisoned`] when a flush failed; [`crate::Error::Closed`].
    pub fn flush(&self) -> Result<()> {
        self.inner().flush(None)
    }

    /// Takes writes again after a WAL append, fsync or creation, or a manifest append, failed
    /// for want of a resource (`ENOSPC`, `EDQUOT`, `EMFILE`, `ENFILE`), once it is back:
    /// writes the state into a new manifest if the manifest's tail is in doubt, flushes every
    /// keyspace's
    /// memtables to level-0 tables, moves every keyspace's log number past the WAL whose tail
    /// is in doubt, deletes that WAL and starts a new one, in an order where a crash at any
    /// point loses no acknowledged write (RocksDB's `DB::Resume`; the steps are in
    /// `docs/design.md`, "Resuming after a full disk"). The write that failed may or may not
    /// be in the database afterwards, as after a crash. With [`crate::Options::auto_resume`]
    /// (the default) a background thread calls this by itself, within about 8 s of the
    /// resource coming back.
    ///
    /// Returns `true` when writes are taken again, `false` when the database was not
    /// poisoned. Either way, flushes and compactions that failed for want of a resource and
    /// wait before retrying (1 s doubling up to 8 s) retry at once, and writers no longer get
    /// the error of such a flush until it fails again: a write refused because the shared
    /// memtable budget waited on a flush that failed on a full disk (the database itself not
    /// poisoned) goes through after `resume` once space is back.
    ///
    /// # Errors
    /// - [`crate::Error::Poisoned`] when the failure is of another kind (damaged data, `EIO`),
    ///   which only a reopen can clear: see [`Db::is_resumable`].
    /// - [`crate::Error::Io`] (`ENOSPC`, ...) when a flush or the new WAL still cannot be
    ///   written: the database stays poisoned, and a later call tries again.
    /// - [`crate::Error::Closed`].
    pub fn resume(&self) -> Result<bool> {
        let inner = self.inner();
        let resumed = inner.resume()?;
        if !resumed {
            inner.retry_background_now();
        }
        Ok(resumed)
    }

    /// Whether writes are refused ([`crate::Error::Poisoned`]) for a failure that
    /// [`Db::resume`] can clear once the resource is back.
    pub fn is_resumable(&self) -> bool {
        self.inner().is_resumable()
    }

    /// Compacts every table overlapping the user-key range `[begin, end]` (`None` =
    /// unbounded on that side) down level by level, after flushing the memtables, then
    /// rewrites the last level's tables in the range that may still hold something to drop or
    /// fold: tombstones, or any entry above sequence number 0 (RocksDB's
    /// `BottommostLevelCompaction::kForceOptimized`; `docs/compaction.md` section 2.5), and
    /// returns when done. Old versions no live snapshot needs and tombstones at the bottom are
    /// dropped, and merge operands folded with the keyspace's merge operator (section 3), so
    /// with no snapshot live each key is left with one entry (unless the operator declines
    /// its operands). Automatic compactions pause meanwhile; reads and writes go on.
    ///
    /// # Errors
    /// [`crate::Error::Io`], [`crate::Error::Corruption`] from reading or writing tables (the
    /// database is poisoned then); [`crate::Error::Poisoned`]; [`crate::Error::Closed`].
    pub fn compact_range(&self, begin: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        let inner = self.inner();
        inner.compact_range(&inner.default_ks, begin, end)
    }

    /// Removes tables whose keys all lie in the user-key range `[begin, end)`, by one
    /// manifest edit, without reading or rewriting anything, and returns how many tables and
    /// entries (as stored, tombstones included) went (RocksDB's `DeleteFilesInRange`). Only
    /// tables of levels 1 and deeper go, and only those no staying table below overlaps
    /// (`compaction::pick_range_deletion`). Keys of the range in the memtables, in level 0 and
    /// in the tables that stay remain: delete those with writes, then [`Db::compact_range`]
    /// frees their space. Automatic compactions pause meanwhile; the files go once no reader
    /// holds them. The WAL is fsynced first, so a crash cannot keep the removal and lose a
    /// write acknowledged before the call (such as a record saying the range is unused).
    ///
    /// **Not an atomic delete.** A read after the call sees each key of the range with its
    /// newest value or not at all (some keys vanish, as if a delete of the range had begun),
    /// never an older value back; a snapshot taken before the call loses those keys too.
    /// Except with merges: a key whose merge operands stay (in a memtable, level 0 or a table
    /// that stays) while its base value's table goes reads as the operands merged onto no
    /// value (a counter at 100 with `+1` above reads `1`) until it is deleted. Iterators
    /// created before the call are unaffected. For a range being deleted anyway.
    ///
    /// # Errors
    /// [`crate::Error::Io`] when the WAL fsync fails and [`crate::Error::Poisoned`] when the
    /// manifest write fails (the database is poisoned either way) or failed before;
    /// [`crate::Error::Closed`]; [`crate::Error::ReadOnly`] on a read-only database.
    pub fn delete_files_in_range(&self, begin: &[u8], end: &[u8]) -> Result<(usize, u64)> {
        let inner = self.inner();
        inner.delete_files_in_range(&inner.default_ks, begin, end)
    }

    /// Links SSTables built by [`crate::TableWriter`] into the database, atomically: after a
    /// crash either every file is part of the database or none is.
    ///
    /// The whole ingest gets **one** new sequence number, newer than every write acknowledged
    /// before the call, so ingested values shadow older values of the same keys; a snapshot
    /// taken before the call does not see them, every read started after it returns does
    /// (after a reopen too). Each file is placed in the deepest level where no table of that
    /// level or any level above overlaps its key range (the last level, for a load into an
    /// empty database: the data is written once). If the memtables hold keys inside a file's
    /// range they are flushed first.
    ///
    /// The files are **moved** in: each is hard-linked into the database directory (copied
    /// when linking fails, e.g. across file systems) and fsynced, and on success the source
    /// paths are removed. A path that is a symbolic link is resolved first: the file it
    /// points to is what is linked or copied in (the database never holds a link), and on
    /// success both the file and the link are removed. Errors name the path as given. On
    /// error the sources are left as they were and nothing is left in the database
    /// directory. While the ingest
    /// installs the files, writes wait and automatic compactions pause (a running compaction
    /// is waited for, and a flush, if one is needed, happens meanwhile). `ingest(&[])` does
    /// nothing.
    ///
    /// # Errors
    /// - [`crate::Error::InvalidArgument`]: a file is empty, holds entries other than
    ///   `TableWriter`'s (sequence number not 0, tombstones), is one of the database's own
    ///   files, is given twice, or two files' key ranges overlap. Nothing changed.
    /// - [`crate::Error::Corruption`] / [`crate::Error::ChecksumMismatch`]: a file is not a
    ///   readable table. Nothing changed.
    /// - [`crate::Error::Io`]: a file is missing (one ingested before has been moved into the
    ///   database), or linking, copying or syncing failed. Nothing changed.
    /// - [`crate::Error::Poisoned`]: the manifest write failed (the database is poisoned; reopen
    ///   to learn whether the ingest happened), or an earlier failure poisoned it.
    /// - [`crate::Error::Closed`], [`crate::Error::SeqNoExhausted`].
    ///
    /// # Examples
    /// See [`crate::TableWriter`].
    pub fn ingest(&self, files: &[std::path::PathBuf]) -> Result<()> {
        let inner = self.inner();
        inner.ingest(&inner.default_ks, files)
    }

    /// Writes a consistent, openable copy of the database into the new directory `dest`
    /// (tables hard-linked where the file system allows, else copied; manifest and WALs
    /// copied) and returns the sequence number it is consistent at: the copy holds exactly the
    /// writes acknowledged before this call. Writers pause while the manifest and WALs are
    /// copied; reads go on.
    ///
    /// Every table of the current version is opened first (through the table cache: footer,
    /// index and filter checked), so a damaged table fails the checkpoint instead of making a
    /// copy that does not open. The copy is written into the sibling directory
    /// `DEST.checkpoint-tmp` and renamed to `dest` once complete (as RocksDB does), so on any
    /// error, and even when the process dies during the call, nothing is left at `dest`; the
    /// next checkpoint to `dest` removes what a death left in `DEST.checkpoint-tmp`.
    ///
    /// # Errors
    /// [`crate::Error::InvalidArgument`] when `dest` exists, lies inside the database
    /// directory, has no name (`/`), or when `DEST.checkpoint-tmp` exists and holds anything
    /// but database files (it is not deleted then); [`crate::Error::Corruption`] /
    /// [`crate::Error::ChecksumMismatch`] for a table that is missing, has the wrong size or
    /// does not open; [`crate::Error::Io`]; [`crate::Error::Closed`].
    pub fn checkpoint(&self, dest: impl AsRef<Path>) -> Result<crate::SeqNo> {
        self.inner().checkpoint(dest.as_ref())
    }

    /// Counters since open: tables and bytes per level (of the default keyspace; see
    /// [`Keyspace::stats`]), bytes written by the WAL, flushes and compactions, write
    /// amplification, stalls, cache and bloom filter hits (database-wide). `Display` gives a
    /// text report.
    pub fn stats(&self) -> crate::stats::DbStats {
        let inner = self.inner();
        inner.stats(&inner.default_ks)
    }

    /// Verifies every table's checksums and the version invariants of every keyspace.
    ///
    /// # Errors
    /// The first [`crate::Error::Corruption`] / [`crate::Error::ChecksumMismatch`] found, or [`crate::Error::Io`].
    pub fn check_integrity(&self) -> Result<()> {
        self.inner().check_integrity()
    }

    /// Verifies like [`Db::check_integrity`] but returns every problem found (damaged blocks,
    /// missing or truncated tables, manifest invariants such as overlapping tables in a level),
    /// each naming its file and offset. An empty list means the database is intact.
    ///
    /// # Errors
    /// [`crate::Error::Closed`].
    pub fn integrity_problems(&self) -> Result<Vec<crate::Error>> {
        self.inner().integrity_problems()
    }

    /// The table files (`NNNNNN.sst`) in the database directory that no version of any
    /// keyspace names, sorted by path. They are not part of the database: outputs of a flush,
    /// compaction or ingest that a crash cut short (a writing open deletes them), tables the
    /// process that has the database open is writing right now (seen from a read-only
    /// handle), or, rarely, tables a lost last manifest edit had added. For a handle that
    /// writes, the outputs of its own running flushes and compactions are listed too. What
    /// `strata check` notes (RocksDB's `ldb` lists live files the same way).
    ///
    /// # Errors
    /// [`crate::Error::Closed`]; [`crate::Error::Io`] when the directory cannot be listed.
    pub fn unreferenced_tables(&self) -> Result<Vec<PathBuf>> {
        self.inner().unreferenced_tables()
    }

    /// The manifest file and byte offset of a damaged last manifest record this open ignored,
    /// if any (`docs/format/manifest.md`, "the torn-tail rule"): a crash that cut an append
    /// short, or damage to an edit that was acknowledged, which nothing can tell apart. A
    /// read-only open changes nothing, so it reports the damage on every open until a writing
    /// open rewrites the manifest (moving the tables no record names to `lost/`). What
    /// `strata check` notes.
    pub fn ignored_manifest_tail(&self) -> Option<(&Path, u64)> {
        self.inner()
            .ignored_manifest_tail
            .as_ref()
            .map(|(path, offset)| (path.as_path(), *offset))
    }

    /// For a read-only open, the newest WAL and the byte offset of the partial or damaged
    /// record it ends with, which the open did not replay (`docs/format/wal.md`, torn tails):
    /// a write a crash cut short, a record a writer beside this reader is appending, or damage
    /// to the last record, which nothing tells apart. A writing open drops such a tail (it
    /// truncates the WAL there, logging a warning) and this is then `None`. What `strata check`
    /// notes.
    pub fn unreplayed_wal_tail(&self) -> Option<(&Path, u64)> {
        self.inner()
            .unreplayed_wal_tail
            .as_ref()
            .map(|(path, offset)| (path.as_path(), *offset))
    }

    /// The database directory.
    pub fn path(&self) -> &Path {
        &self.inner().dir
    }

    /// The default keyspace's options (a copy): what tables built outside the database for
    /// [`Db::ingest`] (with [`crate::TableWriter`] or [`crate::TableSorter`]) should be laid
    /// out with.
    pub fn options(&self) -> Options {
        self.inner().default_ks.options.clone()
    }

    /// Closes the database: waits for in-flight writes and background flushes, syncs the WAL
    /// and releases the `LOCK` file. Every clone of this handle returns [`crate::Error::Closed`]
    /// afterwards. Dropping the last clone does the same, ignoring errors.
    ///
    /// # Errors
    /// [`crate::Error::Io`] when the final WAL sync fails (writes acknowledged with `sync: false` may
    /// then be lost on power loss).
    pub fn close(self) -> Result<()> {
        self.inner().close()
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod write_buffer_tests;
