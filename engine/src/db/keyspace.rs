//! Keyspaces (column families): named, independent key spaces in one database, each with its
//! own memtable, levels and options, sharing one WAL and one sequence of sequence numbers.
//!
//! Design (`docs/design.md`, "Keyspaces"; formats: `docs/format/manifest.md` tags 6, 9, 10,
//! 11 and `docs/format/wal.md` section 8): a keyspace is created and dropped by a manifest
//! edit; every other edit names the keyspace whose tables it changes. A keyspace's log number
//! is where recovery starts replaying its records; a WAL is deleted only once no keyspace has
//! an unflushed write in it. Ids are never reused, so a record of a dropped keyspace can never
//! be replayed into a new one.

use std::ops::RangeBounds;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::state::{DbInner, KeyspaceState};
use super::{Db, DbCursor, DbRange, prefix_successor};
use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::options::{ReadOptions, WriteOptions};
use crate::types::FileNumber;
use crate::version::{DEFAULT_KEYSPACE, DEFAULT_KEYSPACE_NAME, VersionEdit};

/// Longest keyspace name, in bytes.
pub const MAX_KEYSPACE_NAME_LEN: usize = 255;

/// A handle to one keyspace of a [`Db`], returned by [`Db::keyspace`].
///
/// Cheap to clone; `Send + Sync`. It keeps the database open (like a `Db` clone). After
/// [`Db::drop_keyspace`] every operation through it returns [`Error::InvalidArgument`];
/// iterators created before the drop keep reading what they saw.
///
/// # Examples
/// ```
/// # fn main() -> strata_engine::Result<()> {
/// use strata_engine::{Db, Options, WriteBatch, WriteOptions};
/// let dir = tempfile::tempdir().expect("temp dir");
/// let db = Db::open(dir.path(), Options::default())?;
/// let run42 = db.keyspace("run42")?;
/// let run43 = db.keyspace("run43")?;
/// run42.put(b"ACGTACGT", b"7")?;
/// // One batch, two keyspaces: applied atomically.
/// let mut batch = WriteBatch::new();
/// batch.put_in(&run42, b"TTGACA", b"1");
/// batch.delete_in(&run43, b"ACGTACGT");
/// db.write(batch, &WriteOptions::default())?;
/// assert_eq!(run42.get(b"ACGTACGT")?.as_deref(), Some(&b"7"[..]));
/// assert_eq!(db.get(b"ACGTACGT")?, None); // the default keyspace is separate
/// assert_eq!(db.list_keyspaces(), vec!["default", "run42", "run43"]);
/// db.drop_keyspace("run43")?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Keyspace {
    db: Db,
    state: Arc<KeyspaceState>,
}

impl std::fmt::Debug for Keyspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keyspace")
            .field("name", &self.state.name)
            .field("id", &self.state.id)
            .finish_non_exhaustive()
    }
}

impl Keyspace {
    fn inner(&self) -> &Arc<DbInner> {
        self.db.inner()
    }

    /// The keyspace's name.
    pub fn name(&self) -> &str {
        &self.state.name
    }

    /// Identity of the database the handle belongs to (for [`WriteBatch::put_in`]'s check).
    pub(crate) fn db_identity(&self) -> usize {
        Arc::as_ptr(self.inner()).addr()
    }

    /// The keyspace's id as stored in WAL records and manifest edits (0 for the default
    /// keyspace; ids are never reused).
    pub fn id(&self) -> u32 {
        self.state.id
    }

    /// Sets `key` to `value` in this keyspace; see [`Db::put`].
    ///
    /// # Errors
    /// As [`Db::put`]; [`Error::InvalidArgument`] once the keyspace is dropped.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let mut batch = WriteBatch::with_capacity(key.len() + value.len() + 12);
        batch.put_in(self, key, value);
        self.db.write(batch, &WriteOptions::default())
    }

    /// Deletes `key` in this keyspace; see [`Db::delete`].
    ///
    /// # Errors
    /// As [`Keyspace::put`].
    pub fn delete(&self, key: &[u8]) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.delete_in(self, key);
        self.db.write(batch, &WriteOptions::default())
    }

    /// Adds merge operand `operand` to `key`, folded by this keyspace's merge operator; see
    /// [`Db::merge`].
    ///
    /// # Errors
    /// As [`Keyspace::put`].
    pub fn merge(&self, key: &[u8], operand: &[u8]) -> Result<()> {
        let mut batch = WriteBatch::with_capacity(key.len() + operand.len() + 12);
        batch.merge_in(self, key, operand);
        self.db.write(batch, &WriteOptions::default())
    }

    /// The latest value of `key` in this keyspace; see [`Db::get`].
    ///
    /// # Errors
    /// As [`Db::get`]; [`Error::InvalidArgument`] once the keyspace is dropped.
    pub fn get(&self, key: &[u8]) -> Result<Option<Bytes>> {
        self.inner().get(&self.state, &ReadOptions::default(), key)
    }

    /// Like [`Keyspace::get`], reading at `options.snapshot` when set. Snapshots are
    /// database-wide: one snapshot gives a consistent view across keyspaces.
    ///
    /// # Errors
    /// As [`Keyspace::get`].
    pub fn get_opt(&self, options: &ReadOptions, key: &[u8]) -> Result<Option<Bytes>> {
        self.inner().get(&self.state, options, key)
    }

    /// The values of `keys` in this keyspace, read at one sequence number; see
    /// [`Db::multi_get`].
    ///
    /// # Errors
    /// Per key, as [`Keyspace::get_opt`].
    pub fn multi_get<K: AsRef<[u8]>>(
        &self,
        options: &ReadOptions,
        keys: &[K],
    ) -> Vec<Result<Option<Bytes>>> {
        self.inner().multi_get(&self.state, options, keys)
    }

    /// Iterates this keyspace's pairs with keys in `range`; see [`Db::range`]. After a drop the
    /// iterator yields one [`Error::InvalidArgument`].
    pub fn range<'a, R>(&self, options: &ReadOptions, range: R) -> DbRange
    where
        R: RangeBounds<&'a [u8]>,
    {
        let lower = range.start_bound().map(|k| k.to_vec());
        let upper = range.end_bound().map(|k| k.to_vec());
        self.inner().range(&self.state, options, lower, upper)
    }

    /// Number of this keyspace's keys in `range` with a value; see [`Db::count`].
    ///
    /// # Errors
    /// As [`Db::count`]; [`crate::Error::InvalidArgument`] once the keyspace is dropped.
    pub fn count<'a, R>(&self, options: &ReadOptions, range: R) -> Result<u64>
    where
        R: RangeBounds<&'a [u8]>,
    {
        let (lower, upper) = (range.start_bound().cloned(), range.end_bound().cloned());
        self.inner()
            .count(&self.state, options, lower, upper, None)
            .map(Option::unwrap_or_default)
    }

    /// [`Keyspace::count`] that gives up once `stop` is set; see [`Db::count_until`].
    ///
    /// # Errors
    /// As [`Keyspace::count`].
    pub fn count_until<'a, R>(
        &self,
        options: &ReadOptions,
        range: R,
        stop: &std::sync::atomic::AtomicBool,
    ) -> Result<Option<u64>>
    where
        R: RangeBounds<&'a [u8]>,
    {
        let (lower, upper) = (range.start_bound().cloned(), range.end_bound().cloned());
        self.inner()
            .count(&self.state, options, lower, upper, Some(stop))
    }

    /// Iterates this keyspace's pairs whose key starts with `prefix`; see [`Db::prefix`].
    pub fn prefix(&self, options: &ReadOptions, prefix: &[u8]) -> DbRange {
        let lower = std::ops::Bound::Included(prefix);
        match prefix_successor(prefix) {
            Some(u) => self.range(options, (lower, std::ops::Bound::Excluded(u.as_slice()))),
            None => self.range(options, (lower, std::ops::Bound::Unbounded)),
        }
    }

    /// Iterates every pair of this keyspace; see [`Db::iter`].
    pub fn iter(&self, options: &ReadOptions) -> DbRange {
        self.range::<std::ops::RangeFull>(options, ..)
    }

    /// A cursor over this keyspace; see [`Db::cursor`].
    ///
    /// # Errors
    /// As [`Db::cursor`]; [`Error::InvalidArgument`] once the keyspace is dropped.
    pub fn cursor(&self, options: &ReadOptions) -> Result<DbCursor> {
        self.inner().cursor(&self.state, options)
    }

    /// Freezes this keyspace's memtable and waits until it is in level-0 tables; see
    /// [`Db::flush`] (which flushes every keyspace). Syncs the WAL first, so every write
    /// acknowledged before the call (in any keyspace) is durable once it returns.
    ///
    /// # Errors
    /// As [`Db::flush`]; [`Error::InvalidArgument`] once the keyspace is dropped.
    pub fn flush(&self) -> Result<()> {
        self.inner().flush(Some(&self.state))
    }

    /// Compacts this keyspace's tables overlapping `[begin, end]`; see [`Db::compact_range`].
    ///
    /// # Errors
    /// As [`Db::compact_range`]; [`Error::InvalidArgument`] once the keyspace is dropped.
    pub fn compact_range(&self, begin: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        self.inner().compact_range(&self.state, begin, end)
    }

    /// Removes this keyspace's tables whose keys all lie in `[begin, end)`; see
    /// [`Db::delete_files_in_range`] (not an atomic delete).
    ///
    /// # Errors
    /// As [`Db::delete_files_in_range`]; [`Error::InvalidArgument`] once the keyspace is
    /// dropped.
    pub fn delete_files_in_range(&self, begin: &[u8], end: &[u8]) -> Result<(usize, u64)> {
        self.inner().delete_files_in_range(&self.state, begin, end)
    }

    /// Links tables built by [`crate::TableWriter`] into this keyspace; see [`Db::ingest`].
    ///
    /// # Errors
    /// As [`Db::ingest`]; [`Error::InvalidArgument`] once the keyspace is dropped.
    pub fn ingest(&self, files: &[std::path::PathBuf]) -> Result<()> {
        self.inner().ingest(&self.state, files)
    }

    /// Statistics with this keyspace's levels and memtables (counters are database-wide); see
    /// [`Db::stats`].
    pub fn stats(&self) -> crate::stats::DbStats {
        self.inner().stats(&self.state)
    }
}

impl Db {
    /// Opens keyspace `name`, creating it (durably, with one manifest edit) if it does not
    /// exist. Its options are [`crate::Options::with_keyspace_options`]'s entry for `name`, else
    /// the database's. `"default"` is the keyspace the plain `Db` methods use.
    ///
    /// # Errors
    /// - [`Error::InvalidArgument`]: `name` is empty or longer than [`MAX_KEYSPACE_NAME_LEN`]
    ///   bytes, or every keyspace id has been used.
    /// - [`Error::Poisoned`] / [`Error::Io`]: the manifest write failed (the database is
    ///   poisoned); [`Error::Closed`].
    pub fn keyspace(&self, name: &str) -> Result<Keyspace> {
        let inner = self.inner();
        inner.check_open()?;
        if name.is_empty() || name.len() > MAX_KEYSPACE_NAME_LEN {
            return Err(Error::InvalidArgument(format!(
                "keyspace name must be 1 to {MAX_KEYSPACE_NAME_LEN} bytes long"
            )));
        }
        if let Some(state) = inner.keyspace_by_name(name) {
            return Ok(self.handle(state));
        }
        inner.check_writable()?;
        let mut log = inner.log.lock();
        if let Some(state) = inner.keyspace_by_name(name) {
            return Ok(self.handle(state));
        }
        inner.sync_wal(&mut log)?;
        let mut versions = inner.versions.lock();
        let id = versions.next_keyspace_id()?;
        let edit = VersionEdit {
            keyspace: id,
            keyspace_create: Some(name.to_owned()),
            // No earlier WAL can hold a record of a new id.
            log_number: Some(log.wal_number),
            ..VersionEdit::default()
        };
        let version = versions.log_and_apply(edit).inspect_err(|e| {
            if !matches!(e, Error::InvalidArgument(_)) {
                // Resumable when the disk is full: nothing in memory changed.
                inner.manifest_write_failed(&format!("creating keyspace {name:?}"), e);
            }
        })?;
        inner.track_version(&version);
        let state = Arc::new(KeyspaceState::new(
            id,
            name.to_owned(),
            inner.options.for_keyspace(name),
            version,
        ));
        inner.keyspaces.write().insert(id, Arc::clone(&state));
        drop(versions);
        drop(log);
        tracing::debug!(keyspace = name, id, "created keyspace");
        Ok(self.handle(state))
    }

    /// Drops keyspace `name` durably: its data is gone after this returns (its tables are
    /// deleted once no iterator reads them), and handles to it fail with
    /// [`Error::InvalidArgument`]. Its id is never reused; creating a keyspace of the same name
    /// later gives a new, empty one.
    ///
    /// # Errors
    /// - [`Error::InvalidArgument`]: `name` is `"default"` or no such keyspace exists.
    /// - [`Error::Poisoned`] / [`Error::Io`]: the manifest write failed; [`Error::Closed`].
    pub fn drop_keyspace(&self, name: &str) -> Result<()> {
        let inner = self.inner();
        inner.check_writable()?;
        if name == DEFAULT_KEYSPACE_NAME {
            return Err(Error::InvalidArgument(
                "the default keyspace cannot be dropped".to_owned(),
            ));
        }
        let mut log = inner.log.lock();
        let state = inner
            .keyspace_by_name(name)
            .ok_or_else(|| Error::InvalidArgument(format!("no keyspace named {name:?}")))?;
        inner.sync_wal(&mut log)?;
        let tables: Vec<FileNumber> = {
            let mut versions = inner.versions.lock();
            // The keyspace's writes still only in WALs are in no table from now on, and their
            // WALs may be deleted: the manifest's last sequence number covers them, so replay
            // does not take their numbers for records lost (`docs/format/wal.md` section 8).
            let horizon = versions.last_seqno().max(log.last_seqno);
            versions.set_last_seqno(horizon);
            let edit = VersionEdit {
                keyspace: state.id,
                keyspace_drop: true,
                ..VersionEdit::default()
            };
            versions.log_and_apply(edit).inspect_err(|e| {
                if !matches!(e, Error::InvalidArgument(_)) {
                    inner.manifest_write_failed(&format!("dropping keyspace {:?}", state.name), e);
                }
            })?;
            state.dropped.store(true, Ordering::Release);
            inner
                .dropped_keyspaces
                .lock()
                .insert(state.id, state.name.clone());
            inner.keyspaces.write().remove(&state.id);
            // Handles must not keep the tables alive; iterators hold their own super version.
            let old = std::mem::replace(
                &mut *state.super_version.write(),
                Arc::new(super::state::SuperVersion {
                    mem: Arc::new(crate::memtable::MemTable::new()),
                    imms: Vec::new(),
                    version: Arc::new(crate::version::Version::empty()),
                }),
            );
            old.version.all_file_numbers().collect()
        };
        inner.delete_obsolete_wals(&mut log);
        drop(log);
        inner.delete_obsolete_tables(tables);
        inner.refresh_pending_compaction_bytes();
        inner.wake_background();
        tracing::debug!(keyspace = name, id = state.id, "dropped keyspace");
        Ok(())
    }

    /// Names of the live keyspaces, the default one first, then in creation order.
    ///
    /// On a closed database it still answers (with the keyspaces live at the close) instead
    /// of failing with [`Error::Closed`]: it returns no `Result`, and the answer reads no file.
    pub fn list_keyspaces(&self) -> Vec<String> {
        self.inner()
            .all_keyspaces()
            .iter()
            .map(|ks| ks.name.clone())
            .collect()
    }

    /// A handle to the default keyspace (the one the plain `Db` methods use).
    pub fn default_keyspace(&self) -> Keyspace {
        self.handle(Arc::clone(&self.inner().default_ks))
    }

    fn handle(&self, state: Arc<KeyspaceState>) -> Keyspace {
        Keyspace {
            db: self.clone(),
            state,
        }
    }
}

impl DbInner {
    /// The live keyspace named `name`.
    pub(crate) fn keyspace_by_name(&self, name: &str) -> Option<Arc<KeyspaceState>> {
        self.keyspaces
            .read()
            .values()
            .find(|ks| ks.name == name)
            .cloned()
    }
}

const _: () = assert!(
    DEFAULT_KEYSPACE == 0,
    "batches encode keyspace 0 without an id"
);
