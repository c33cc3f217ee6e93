//! The read path: point lookups and range iterators.
//!
//! A read first takes the visible sequence number, *then* the super version (memtable,
//! immutable memtables, version). In that order every write at or below the sequence number is
//! in the captured memtables or tables: a flush swaps "memtable gone, table added" in one step,
//! and a memtable switch happens before any write lands in the new memtable.

use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};

use bytes::Bytes;

use super::state::{DbInner, KeyspaceState, SuperVersion};
use crate::cache::TableCache;
use crate::error::{Error, Result};
use crate::iterator::db_iter::{DbIter, MergeFn};
use crate::iterator::level::LevelIterator;
use crate::iterator::merging::MergingIterator;
use crate::iterator::range::{Cursor, Range};
use crate::iterator::{InternalIterator, bound_key, seek_to_user_key};
use crate::options::ReadOptions;
use crate::sstable::{BlockCachePolicy, Table};
use crate::types::{FileNumber, InternalKeyRef, SeqNo, ValueKind};
use crate::version::FileMeta;

mod walk;

/// Iterator over `(key, value)` pairs returned by [`crate::Db::range`] and [`crate::Db::iter`].
///
/// Ascending with `next`, descending with `next_back` (`.rev()`); mixing both yields each key
/// once. Holds the memtables and tables of the moment it was created alive. After an `Err` item
/// it yields `None`.
pub struct DbRange {
    inner: Range<ScanCursor>,
}

/// The cursor each end of a [`DbRange`] steps: over a settled range ([`settled`]) a walk of
/// the one level's tables, else a [`DbIter`] over the merge of every source.
pub(crate) enum ScanCursor {
    /// Every source, merged, versions resolved.
    Merged(Box<DbIter<MergingIterator>>),
    /// A settled range.
    Settled(Box<walk::SettledWalk>),
}

/// Runs `$op` on whichever cursor `$cursor` holds.
macro_rules! on_cursor {
    ($cursor:expr, $c:ident => $op:expr) => {
        match $cursor {
            ScanCursor::Merged($c) => $op,
            ScanCursor::Settled($c) => $op,
        }
    };
}

impl Cursor for ScanCursor {
    fn valid(&self) -> bool {
        on_cursor!(self, c => c.valid())
    }

    fn seek_to_first(&mut self) -> Result<()> {
        on_cursor!(self, c => c.seek_to_first())
    }

    fn seek_to_last(&mut self) -> Result<()> {
        on_cursor!(self, c => c.seek_to_last())
    }

    fn next(&mut self) -> Result<()> {
        on_cursor!(self, c => c.next())
    }

    fn prev(&mut self) -> Result<()> {
        on_cursor!(self, c => c.prev())
    }

    fn key(&self) -> &[u8] {
        on_cursor!(self, c => c.key())
    }

    fn value(&self) -> &[u8] {
        on_cursor!(self, c => c.value())
    }
}

impl std::fmt::Debug for DbRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DbRange").finish_non_exhaustive()
    }
}

impl DbRange {
    /// Advances the ascending end and lends its pair, or `Ok(None)` at the end: the same
    /// pairs as [`Iterator::next`], without copying them. The slices borrow from the range and
    /// are valid until its next step, so a scan that only inspects each pair allocates nothing
    /// per pair. Mixing it with `next`, `next_back` and [`DbRange::next_back_entry`] still
    /// yields each key once.
    ///
    /// # Errors
    /// [`Error::Corruption`] / [`Error::ChecksumMismatch`] when a table block it reads is
    /// damaged; [`Error::Io`]; [`Error::InvalidArgument`] when a merge fails;
    /// [`Error::Closed`] when the database was closed (or the keyspace dropped) before the
    /// range was made, [`Error::InvalidArgument`] for a snapshot of another database instance:
    /// both on the first step. A range made before a close goes on reading the tables and
    /// memtables it holds. After an error the range yields `Ok(None)` in both directions.
    ///
    /// # Examples
    /// ```
    /// # fn main() -> strata_engine::Result<()> {
    /// # let dir = tempfile::tempdir().map_err(|e| strata_engine::Error::InvalidArgument(e.to_string()))?;
    /// use strata_engine::{Db, Options, ReadOptions};
    /// let db = Db::open(dir.path(), Options::default())?;
    /// db.put(b"a", b"1")?;
    /// db.put(b"b", b"22")?;
    /// let mut range = db.iter(&ReadOptions::default());
    /// let mut value_bytes = 0;
    /// while let Some((_key, value)) = range.next_entry()? {
    ///     value_bytes += value.len();
    /// }
    /// assert_eq!(value_bytes, 3);
    /// # Ok(())
    /// # }
    /// ```
    pub fn next_entry(&mut self) -> Result<Option<(&[u8], &[u8])>> {
        self.inner.next_entry()
    }

    /// Moves the descending end down and lends its pair: [`DbRange::next_entry`] in reverse
    /// key order, the pairs of [`DoubleEndedIterator::next_back`].
    ///
    /// # Errors
    /// As [`DbRange::next_entry`].
    pub fn next_back_entry(&mut self) -> Result<Option<(&[u8], &[u8])>> {
        self.inner.next_back_entry()
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

/// Most tables a multi-get keeps open between its lookups; beyond this the list starts over
/// (it is searched linearly, and one pipeline's keys rarely touch more).
const MULTI_GET_TABLES: usize = 64;

/// The open table for `file` from `open`, else from the table cache (then kept in `open`).
fn open_table<'a>(
    open: &'a mut Vec<(FileNumber, Arc<Table>)>,
    cache: &TableCache,
    file: &FileMeta,
) -> Result<&'a Arc<Table>> {
    if let Some(i) = open.iter().position(|(n, _)| *n == file.number) {
        return Ok(&open[i].1);
    }
    if open.len() >= MULTI_GET_TABLES {
        open.clear();
    }
    let table = cache.get(file)?;
    open.push((file.number, table));
    Ok(&open[open.len() - 1].1)
}

impl DbInner {
    /// Point lookup in keyspace `ks`; see [`crate::Db::get`].
    pub(crate) fn get(
        &self,
        ks: &KeyspaceState,
        options: &ReadOptions,
        key: &[u8],
    ) -> Result<Option<Bytes>> {
        self.check_open()?;
        ks.check_live()?;
        self.check_snapshot(options.snapshot.as_ref())?;
        let (seqno, sv) = self.read_view(ks, options.snapshot.as_ref());
        self.get_in_view(ks, &sv, seqno, key, options.cache_policy(), None)
    }

    /// Point lookups of `keys` in keyspace `ks`, all at one sequence number and through one
    /// super version; see [`crate::Db::multi_get`].
    pub(crate) fn multi_get<K: AsRef<[u8]>>(
        &self,
        ks: &KeyspaceState,
        options: &ReadOptions,
        keys: &[K],
    ) -> Vec<Result<Option<Bytes>>> {
        let (seqno, sv) = self.read_view(ks, options.snapshot.as_ref());
        let mut tables = Vec::new();
        keys.iter()
            .map(|key| {
                self.check_open()?;
                ks.check_live()?;
                self.check_snapshot(options.snapshot.as_ref())?;
                let memo = Some(&mut tables);
                self.get_in_view(ks, &sv, seqno, key.as_ref(), options.cache_policy(), memo)
            })
            .collect()
    }

    /// The lookup of [`DbInner::get`] in a read view taken by the caller. With `tables`, the
    /// tables it opens are kept there and reused by the next lookups of a multi-get, which then
    /// take each table from the shared table cache (a mutex) once.
    fn get_in_view(
        &self,
        ks: &KeyspaceState,
        sv: &Arc<SuperVersion>,
        seqno: SeqNo,
        key: &[u8],
        policy: BlockCachePolicy,
        mut tables: Option<&mut Vec<(FileNumber, Arc<Table>)>>,
    ) -> Result<Option<Bytes>> {
        let mems = std::iter::once(&sv.mem).chain(sv.imms.iter().map(|imm| &imm.mem));
        // Hashed once for every memtable's and table's bloom filter (there may be many
        // memtables, `min_write_buffer_number_to_merge`, and many level-0 tables).
        let hash = crate::sstable::filter::key_hash(key);
        for mem in mems {
            if let Some((_, kind, value)) = mem.get_hashed(key, hash, seqno) {
                return self.resolve(ks, sv, seqno, key, kind, value, policy);
            }
        }
        let target = InternalKeyRef::new(key, seqno, ValueKind::FOR_SEEK);
        for (_, file) in sv.version.files_for_get(key) {
            let found = match tables.as_deref_mut() {
                None => self
                    .table_cache
                    .get(file)?
                    .get_hashed(target, hash, policy)?,
                Some(open) => {
                    open_table(open, &self.table_cache, file)?.get_hashed(target, hash, policy)?
                }
            };
            if let Some((_, kind, value)) = found {
                return self.resolve(ks, sv, seqno, key, kind, value, policy);
            }
        }
        Ok(None)
    }

    /// Turns the newest visible entry for `key` into the user's answer. A merge operand needs
    /// every older version down to a put or delete, which the merged iterator gathers (reading
    /// blocks under `policy`).
    #[expect(
        clippy::too_many_arguments,
        reason = "the read's state, passed through from `get`"
    )]
    fn resolve(
        &self,
        ks: &KeyspaceState,
        sv: &Arc<SuperVersion>,
        seqno: SeqNo,
        key: &[u8],
        kind: ValueKind,
        value: Bytes,
        policy: BlockCachePolicy,
    ) -> Result<Option<Bytes>> {
        match kind {
            ValueKind::Put => Ok(Some(value)),
            ValueKind::Delete => Ok(None),
            ValueKind::Merge => {
                // A merge reads few blocks per table: no readahead.
                let merged = merging_iterator(sv, &self.table_cache, policy, 0)?;
                let bound = || Bound::Included(key.to_vec());
                let mut it = DbIter::new(merged, seqno, bound(), bound(), merge_fn(ks));
                it.seek(key)?;
                Ok(it.valid().then(|| Bytes::copy_from_slice(it.value())))
            }
        }
    }

    /// A cursor over keyspace `ks`; see [`crate::Db::cursor`].
    pub(crate) fn cursor(&self, ks: &KeyspaceState, options: &ReadOptions) -> Result<DbCursor> {
        self.check_open()?;
        ks.check_live()?;
        self.check_snapshot(options.snapshot.as_ref())?;
        let (seqno, sv) = self.read_view(ks, options.snapshot.as_ref());
        let merged = merging_iterator(
            &sv,
            &self.table_cache,
            options.cache_policy(),
            self.options.max_auto_readahead_size,
        )?;
        Ok(DbCursor {
            iter: DbIter::new(
                merged,
                seqno,
                Bound::Unbounded,
                Bound::Unbounded,
                merge_fn(ks),
            ),
        })
    }

    /// Range iterator over keyspace `ks`; see [`crate::Db::range`].
    pub(crate) fn range(
        &self,
        ks: &KeyspaceState,
        options: &ReadOptions,
        lower: Bound<Vec<u8>>,
        upper: Bound<Vec<u8>>,
    ) -> DbRange {
        let (seqno, sv) = self.read_view(ks, options.snapshot.as_ref());
        let cache = Arc::clone(&self.table_cache);
        let closed = self
            .check_open()
            .and_then(|()| ks.check_live())
            .and_then(|()| self.check_snapshot(options.snapshot.as_ref()));
        let mut closed = Some(closed);
        let merge = merge_fn(ks);
        let policy = options.cache_policy();
        let readahead = self.options.max_auto_readahead_size;
        DbRange {
            inner: Range::new(move || {
                if let Some(Err(e)) = closed.take() {
                    return Err(e);
                }
                let (lo, hi) = (
                    lower.as_ref().map(Vec::as_slice),
                    upper.as_ref().map(Vec::as_slice),
                );
                // A settled range is walked table by table; anything else merges.
                if let Some(s) = settled(&sv, &cache, seqno, lo, hi)? {
                    return Ok(ScanCursor::Settled(Box::new(walk::SettledWalk::new(
                        s.tables,
                        lower.clone(),
                        upper.clone(),
                        policy,
                        readahead,
                    ))));
                }
                let merged = merging_iterator(&sv, &cache, policy, readahead)?;
                Ok(ScanCursor::Merged(Box::new(DbIter::new(
                    merged,
                    seqno,
                    lower.clone(),
                    upper.clone(),
                    merge.clone(),
                ))))
            }),
        }
    }

    /// Visible keys of keyspace `ks` within `(lower, upper)`; see [`crate::Db::count_until`].
    /// `None` once `stop` is set.
    pub(crate) fn count(
        &self,
        ks: &KeyspaceState,
        options: &ReadOptions,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        stop: Option<&AtomicBool>,
    ) -> Result<Option<u64>> {
        self.check_open()?;
        ks.check_live()?;
        self.check_snapshot(options.snapshot.as_ref())?;
        let (seqno, sv) = self.read_view(ks, options.snapshot.as_ref());
        let stopped = || stop.is_some_and(|s| s.load(AtomicOrdering::Relaxed));
        let policy = options.cache_policy();
        let readahead = self.options.max_auto_readahead_size;
        if let Some(settled) = settled(&sv, &self.table_cache, seqno, lower, upper)? {
            let mut count = 0u64;
            let mut previous_last: Option<&[u8]> = None;
            for (file, table) in &settled.tables {
                if stopped() {
                    return Ok(None);
                }
                count += table.count_in_range(lower, upper, policy, readahead)?;
                // A user key split across two tables of the level is one key.
                if previous_last == Some(&file.smallest.user_key[..])
                    && within(lower, upper, &file.smallest.user_key)
                {
                    count = count.saturating_sub(1);
                }
                previous_last = Some(&file.largest.user_key[..]);
            }
            return Ok(Some(count));
        }
        let merged = merging_iterator(&sv, &self.table_cache, policy, readahead)?;
        let mut it = DbIter::new(
            merged,
            seqno,
            lower.map(<[u8]>::to_vec),
            upper.map(<[u8]>::to_vec),
            merge_fn(ks),
        );
        it.seek_to_first()?;
        let mut count = 0u64;
        while it.valid() {
            count += 1;
            if count.is_multiple_of(COUNT_STOP_EVERY) && stopped() {
                return Ok(None);
            }
            it.next()?;
        }
        Ok(Some(count))
    }

    /// Table files in the directory that nothing of this handle names; see
    /// [`crate::Db::unreferenced_tables`].
    pub(crate) fn unreferenced_tables(&self) -> Result<Vec<std::path::PathBuf>> {
        self.check_open()?;
        let mut named = self.versions.lock().live_files();
        named.extend(self.tables_in_use());
        named.extend(self.pending_deletes.lock().iter().copied());
        let mut found: Vec<_> = self
            .fs()
            .list_dir(&self.dir)
            .map_err(|e| Error::io(&self.dir, e))?
            .into_iter()
            .filter(|entry| {
                matches!(
                    entry.path.file_name().and_then(|n| n.to_str()).and_then(crate::filename::parse),
                    Some(crate::filename::FileKind::Table(n)) if !named.contains(&n)
                )
            })
            .map(|entry| entry.path)
            .collect();
        found.sort();
        Ok(found)
    }

    /// Verifies every table's checksums and the version invariants of every keyspace,
    /// collecting every problem.
    pub(crate) fn integrity_problems(&self) -> Result<Vec<Error>> {
        self.check_open()?;
        let mut problems = Vec::new();
        for ks in self.all_keyspaces() {
            self.keyspace_problems(&ks, &mut problems);
        }
        Ok(problems)
    }

    fn keyspace_problems(&self, ks: &KeyspaceState, problems: &mut Vec<Error>) {
        let sv = ks.super_version();
        let manifest =
            crate::filename::manifest_path(&self.dir, self.versions.lock().manifest_number());
        problems.extend(
            sv.version
                .check_invariants()
                .into_iter()
                .map(|p| Error::corruption(&manifest, 0, format!("keyspace {:?}: {p}", ks.name))),
        );
        for level in 0..sv.version.levels.len() {
            for file in sv.version.files(level) {
                match self.open_listed_table(level, file) {
                    Ok(table) => problems.extend(table.block_problems()),
                    Err(e) => problems.push(e),
                }
            }
        }
    }

    /// Opens table `file` of `level`, as a version lists it, through the table cache (footer,
    /// index and filter checked) after checking that its file exists and has the size the
    /// manifest records. Used by the integrity check and by checkpoints.
    ///
    /// # Errors
    /// [`Error::Corruption`] for a missing file or a wrong size; the table cache's errors.
    pub(crate) fn open_listed_table(&self, level: usize, file: &FileMeta) -> Result<Arc<Table>> {
        let path = crate::filename::table_path(&self.dir, file.number);
        match self.fs().file_size(&path) {
            Err(_) => Err(Error::corruption(
                &path,
                0,
                format!("table of level {level} referenced by the manifest is missing"),
            )),
            Ok(meta) if meta != file.size => Err(Error::corruption(
                &path,
                meta,
                format!("table is {meta} bytes, the manifest says {}", file.size),
            )),
            Ok(_) => self.table_cache.get(file),
        }
    }

    /// The first integrity problem, if any.
    pub(crate) fn check_integrity(&self) -> Result<()> {
        match self.integrity_problems()?.into_iter().next() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// A positioned cursor over the database at one snapshot, returned by [`crate::Db::cursor`]:
/// `seek`, `seek_for_prev`, `next`, `prev` like RocksDB's `Iterator`. Unpositioned until a
/// seek; `key()`/`value()` borrow until the next move. Unlike RocksDB, stepping or reading an
/// invalid cursor is defined: steps do nothing, `key()`/`value()` are empty. Holds the
/// memtables and tables of its creation alive.
pub struct DbCursor {
    iter: DbIter<MergingIterator>,
}

impl std::fmt::Debug for DbCursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DbCursor")
            .field("valid", &self.valid())
            .finish_non_exhaustive()
    }
}

impl DbCursor {
    /// True when positioned on a key.
    pub fn valid(&self) -> bool {
        self.iter.valid()
    }
    /// Positions at the first key.
    ///
    /// # Errors
    /// [`Error::Corruption`], [`Error::ChecksumMismatch`] or [`Error::Io`] from a table read;
    /// [`Error::InvalidArgument`] when a merge fails.
    pub fn seek_to_first(&mut self) -> Result<()> {
        self.iter.seek_to_first()
    }
    /// Positions at the last key.
    ///
    /// # Errors
    /// As [`DbCursor::seek_to_first`].
    pub fn seek_to_last(&mut self) -> Result<()> {
        self.iter.seek_to_last()
    }
    /// Positions at the first key `>= key`.
    ///
    /// # Errors
    /// As [`DbCursor::seek_to_first`].
    pub fn seek(&mut self, key: &[u8]) -> Result<()> {
        self.iter.seek(key)
    }
    /// Positions at the last key `<= key`.
    ///
    /// # Errors
    /// As [`DbCursor::seek_to_first`].
    pub fn seek_for_prev(&mut self, key: &[u8]) -> Result<()> {
        self.iter.seek_for_prev(key)
    }
    /// Moves to the next key. On a cursor that is not `valid()` (never positioned, or run off
    /// either end) it does nothing: seek again to go on.
    ///
    /// # Errors
    /// As [`DbCursor::seek_to_first`].
    #[expect(
        clippy::should_implement_trait,
        reason = "a fallible cursor step, not Iterator::next"
    )]
    pub fn next(&mut self) -> Result<()> {
        self.iter.next()
    }
    /// Moves to the previous key; does nothing on a cursor that is not `valid()`, as
    /// [`DbCursor::next`].
    ///
    /// # Errors
    /// As [`DbCursor::seek_to_first`].
    pub fn prev(&mut self) -> Result<()> {
        self.iter.prev()
    }
    /// The current key; empty when the cursor is not `valid()`.
    pub fn key(&self) -> &[u8] {
        self.iter.key()
    }
    /// The current value; empty when the cursor is not `valid()`.
    pub fn value(&self) -> &[u8] {
        self.iter.value()
    }
}

/// The merge function of keyspace `ks`'s merge operator.
fn merge_fn(ks: &KeyspaceState) -> Option<MergeFn> {
    ks.options
        .merge_operator
        .as_ref()
        .map(crate::merge::merge_fn)
}

/// A range whose visible keys are exactly the entries of one level's tables there (see
/// [`settled`]).
pub(crate) struct Settled {
    /// The tables that overlap the range, all of one level, in the level's order, each with
    /// its open reader (none when no table overlaps it).
    tables: Vec<(Arc<FileMeta>, Arc<Table>)>,
}

/// Whether the range `(lower, upper)` of `sv` is *settled* at `seqno` (`docs/design.md`,
/// "Counting a range"): no memtable holds an entry in the range, every table that overlaps it
/// lies in one level (one table, for level 0), and each holds only puts of distinct user keys,
/// all visible at `seqno`. Then every entry of those tables in the range is one visible key
/// with its value, and counts and forward scans need no merging. `None` when any of that
/// fails, or is unknown (tables written before
/// [`TableProperties::num_user_keys`](crate::sstable::TableProperties) existed), or when the
/// range overlaps more tables than half the table cache holds (the check opens each).
///
/// # Errors
/// Opening a table ([`TableCache::get`]).
pub(crate) fn settled(
    sv: &SuperVersion,
    cache: &TableCache,
    seqno: SeqNo,
    lower: Bound<&[u8]>,
    upper: Bound<&[u8]>,
) -> Result<Option<Settled>> {
    let mems = std::iter::once(&sv.mem).chain(sv.imms.iter().map(|imm| &imm.mem));
    for mem in mems {
        let mut it = mem.iter();
        seek_to_user_key(&mut it, bound_key(lower))?;
        // An entry of the excluded lower key itself may be followed by one in range.
        while it.valid() && matches!(lower, Bound::Excluded(l) if it.key().user_key == l) {
            it.next()?;
        }
        if it.valid() && within(Bound::Unbounded, upper, it.key().user_key) {
            return Ok(None);
        }
    }
    let (lo, hi) = (bound_key(lower), bound_key(upper));
    let mut found: Option<(usize, Vec<Arc<FileMeta>>)> = None;
    for level in 0..sv.version.levels.len() {
        let files = sv.version.overlapping_files(level, lo, hi);
        if files.is_empty() {
            continue;
        }
        if found.is_some() || (level == 0 && files.len() > 1) {
            return Ok(None);
        }
        found = Some((level, files));
    }
    let Some((_, files)) = found else {
        return Ok(Some(Settled { tables: Vec::new() }));
    };
    // The check opens every table of the range: past half the table cache, that would evict
    // tables the read then opens again.
    if files.len() > cache.store().capacity() / 2 {
        return Ok(None);
    }
    let mut tables = Vec::with_capacity(files.len());
    for file in files {
        if file.largest_seqno > seqno {
            return Ok(None);
        }
        let table = cache.get(&file)?;
        let p = table.properties();
        if p.num_deletions != 0 || p.num_merges != 0 || p.num_user_keys != Some(p.num_entries) {
            return Ok(None);
        }
        tables.push((file, table));
    }
    Ok(Some(Settled { tables }))
}

/// The smallest key greater than every key starting with `prefix`, or `None` when there is
/// none (`prefix` is empty or all `0xFF`): `[01 FF]` → `[02]`, `[FF FF]` → none.
pub fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let last = prefix.iter().rposition(|&b| b != 0xff)?;
    let mut out = prefix.get(..=last)?.to_vec();
    if let Some(b) = out.last_mut() {
        *b += 1;
    }
    Some(out)
}

/// Merges the memtables, the level-0 tables and one concatenating iterator per deeper level,
/// newest source first; table blocks are read under `policy`, with readahead windows of up to
/// `readahead` bytes (0: none). The iterator holds `sv`'s version until it is dropped, so the
/// tables it has yet to open stay on disk.
pub(crate) fn merging_iterator(
    sv: &Arc<SuperVersion>,
    cache: &Arc<TableCache>,
    policy: BlockCachePolicy,
    readahead: usize,
) -> Result<MergingIterator> {
    let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
    children.push(Box::new(sv.mem.iter()));
    for imm in &sv.imms {
        children.push(Box::new(imm.mem.iter()));
    }
    for file in sv.version.files(0) {
        children.push(Box::new(
            cache.get(file)?.iter_with(policy).with_readahead(readahead),
        ));
    }
    for level in 1..sv.version.levels.len() {
        if let Some(child) = level_iterator(sv, cache, level, policy, readahead) {
            children.push(child);
        }
    }
    Ok(MergingIterator::new(children))
}

/// A concatenating iterator over the tables of `level` (1 or deeper), `None` when it has
/// none; blocks read as in [`merging_iterator`].
fn level_iterator(
    sv: &Arc<SuperVersion>,
    cache: &Arc<TableCache>,
    level: usize,
    policy: BlockCachePolicy,
    readahead: usize,
) -> Option<Box<dyn InternalIterator>> {
    let files = sv.version.files(level);
    if files.is_empty() {
        return None;
    }
    let bounds = files
        .iter()
        .map(|f| (f.smallest.clone(), f.largest.clone()))
        .collect();
    let cache = Arc::clone(cache);
    // The level's tables are opened when the iterator reaches them, perhaps after a
    // compaction replaced them: holding the version keeps their files from being deleted
    // (`DbInner::delete_obsolete_tables` spares the tables of every live version).
    let version = Arc::clone(&sv.version);
    Some(Box::new(LevelIterator::new(bounds, move |i| {
        let file = version.files(level).get(i).ok_or_else(|| {
            Error::InvalidArgument(format!("level iterator asked for file index {i}"))
        })?;
        let table = cache.get(file)?;
        Ok(Box::new(table.iter_with(policy).with_readahead(readahead))
            as Box<dyn InternalIterator>)
    })))
}

impl DbInner {
    /// Collects statistics; see [`crate::Db::stats`]. Level and memtable figures are those of
    /// keyspace `ks`; the counters are database-wide.
    pub(crate) fn stats(&self, ks: &KeyspaceState) -> crate::stats::DbStats {
        use std::sync::atomic::Ordering::Relaxed;
        let sv = ks.super_version();
        let targets = crate::compaction::picker::LevelTargets::dynamic(&sv.version, &ks.options);
        let levels = (0..sv.version.levels.len())
            .map(|level| {
                let files = sv.version.files(level);
                crate::stats::LevelStats {
                    files: files.len(),
                    bytes: sv.version.level_bytes(level),
                    target_bytes: match targets.target_bytes(level) {
                        u64::MAX => 0,
                        t => t,
                    },
                    entries: files.iter().map(|f| f.num_entries).sum(),
                    deletions: files.iter().map(|f| f.num_deletions).sum(),
                }
            })
            .collect();
        let s = &self.stats;
        let cache = self.table_cache.block_cache();
        let poison = self.poison.lock().clone();
        let background_retries = {
            let bg = self.bg.lock();
            u64::from(bg.flush_retry.failures) + u64::from(bg.compaction_retry.failures)
        };
        crate::stats::DbStats {
            levels,
            user_bytes: s.user_bytes.load(Relaxed),
            wal_bytes: s.wal_bytes.load(Relaxed),
            wal_syncs: s.wal_syncs.load(Relaxed),
            write_groups: s.write_groups.load(Relaxed),
            flush_bytes: s.flush_bytes.load(Relaxed),
            flushes: s.flushes.load(Relaxed),
            compaction_bytes_read: s.compaction_bytes_read.load(Relaxed),
            compaction_bytes_written: s.compaction_bytes_written.load(Relaxed),
            compactions: s.compactions.load(Relaxed),
            trivial_moves: s.trivial_moves.load(Relaxed),
            compaction_micros: s.compaction_micros.load(Relaxed),
            stall_micros: s.stall_micros.load(Relaxed),
            delay_micros: s.delay_micros.load(Relaxed),
            block_cache_hits: cache.hits(),
            block_cache_misses: cache.misses(),
            block_cache_usage_bytes: cache.usage_bytes() as u64,
            block_cache_capacity_bytes: cache.capacity_bytes() as u64,
            open_tables: self.table_cache.store().len() as u64,
            open_tables_capacity: self.table_cache.store().capacity() as u64,
            writes_stopped: poison.as_ref().map(|p| p.reason.clone()),
            writes_resumable: poison.as_ref().is_some_and(|p| p.resumable),
            background_retries,
            bloom_checked: cache.bloom_checks(),
            bloom_useful: cache.bloom_useful(),
            pending_compaction_bytes: self.pending_compaction_bytes.load(Relaxed),
            memtable_bytes: (sv.mem.approximate_size()
                + sv.imms
                    .iter()
                    .map(|i| i.mem.approximate_size())
                    .sum::<usize>()) as u64,
            immutable_memtables: sv.imms.len(),
            last_seqno: self.visible_seqno().get(),
        }
    }
}

/// Tables below this many bytes in a range are not worth splitting for parallel reads (or
/// below one table of the keyspace's `target_file_size`, when that is smaller).
const MIN_SPLIT_BYTES: u64 = 16 << 20;

/// Largest `parts` [`crate::Db::split_keys`] works with; larger requests are clamped to it.
pub(crate) const MAX_SPLIT_PARTS: usize = 1 << 16;

impl DbInner {
    /// See [`crate::Db::split_keys`].
    pub(crate) fn split_keys(
        &self,
        ks: &KeyspaceState,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        parts: usize,
    ) -> Vec<Bytes> {
        if parts < 2 {
            return Vec::new();
        }
        let sv = ks.super_version();
        let (lo, hi) = (bound_key(lower), bound_key(upper));
        let inside = |key: &[u8]| {
            let above = match lower {
                Bound::Included(l) | Bound::Excluded(l) => key > l,
                Bound::Unbounded => true,
            };
            let below = match upper {
                Bound::Included(u) | Bound::Excluded(u) => key < u,
                Bound::Unbounded => true,
            };
            above && below
        };
        // The level whose tables overlap the range with the most bytes: the cuts are taken
        // from its tables.
        let Some((level, files)) = (0..sv.version.levels.len())
            .map(|level| {
                let files: Vec<&Arc<FileMeta>> = sv
                    .version
                    .files(level)
                    .iter()
                    .filter(|f| f.overlaps(lo, hi))
                    .collect();
                (level, files)
            })
            .max_by_key(|(_, files)| files.iter().map(|f| f.size).sum::<u64>())
        else {
            return Vec::new();
        };
        // Level-0 tables overlap each other: their first keys say nothing about balance.
        if level == 0 {
            return Vec::new();
        }
        // Each table's share inside the range: all of it but at the range's two ends, where
        // the index says where the bound falls (a small range inside a large table is not
        // cut, and costs two index seeks). A table that does not open here counts whole.
        let spans: Vec<(u64, u64)> = files
            .iter()
            .map(|f| {
                let lo = lo.filter(|l| *l > &f.smallest.user_key[..]);
                let hi = hi.filter(|h| *h < &f.largest.user_key[..]);
                if lo.is_none() && hi.is_none() {
                    return (0, f.size);
                }
                self.table_cache
                    .get(f)
                    .and_then(|t| t.approximate_span(lo, hi))
                    .unwrap_or((0, f.size))
            })
            .collect();
        let sizes: Vec<u64> = spans.iter().map(|(start, end)| end - start).collect();
        let total = sizes.iter().fold(0u64, |a, &s| a.saturating_add(s));
        if total < MIN_SPLIT_BYTES.min(ks.options.target_file_size) {
            return Vec::new();
        }
        // Cut `k` goes about `total * k / parts` bytes in: at a table's first key, or inside a
        // table at a data block boundary from its index, the same share of the way through its
        // data blocks. A cut whose key cannot be had (the table does not open here) or that
        // lies outside the range is left out: the scan itself reports errors, and fewer parts
        // are still correct.
        // Every cut is a data block boundary, so there are no more cuts than 64-byte blocks
        // (the smallest `block_size`); past that (and past MAX_SPLIT_PARTS) more parts only
        // repeat cuts.
        let blocks = usize::try_from(total / 64).unwrap_or(usize::MAX);
        let parts = parts.min(MAX_SPLIT_PARTS).min(blocks.saturating_add(1));
        let mut cuts: Vec<Bytes> = Vec::with_capacity(parts.saturating_sub(1));
        for (i, within) in crate::sstable::byte_cuts(&sizes, parts) {
            let f = files[i];
            let part = spans[i].0 + within;
            let key = if part == 0 {
                Some(Bytes::copy_from_slice(&f.smallest.user_key))
            } else {
                self.table_cache
                    .get(f)
                    .and_then(|t| t.key_at_share(part, f.size))
                    .ok()
                    .flatten()
            };
            // The last data block's index key may lie past the table's last key (a short
            // successor: `\xf2` after the `\xf1...` keys of a SQL table, outside its range).
            // A cut at the end of the table is the next table's first key.
            let key = match key {
                Some(k) if k[..] > f.largest.user_key[..] => files
                    .get(i + 1)
                    .map(|next| Bytes::copy_from_slice(&next.smallest.user_key)),
                other => other,
            };
            if let Some(key) = key
                && inside(&key)
                && cuts.last().is_none_or(|c| c < &key)
            {
                cuts.push(key);
            }
        }
        cuts
    }
}

/// True if `key` lies within `(lower, upper)`.
fn within(lower: Bound<&[u8]>, upper: Bound<&[u8]>, key: &[u8]) -> bool {
    std::ops::RangeBounds::<[u8]>::contains(&(lower, upper), key)
}

/// Entries the slow path of [`DbInner::count`] counts between two looks at its stop flag.
const COUNT_STOP_EVERY: u64 = 4096;

#[cfg(test)]
mod count_tests;
#[cfg(test)]
mod tests;
