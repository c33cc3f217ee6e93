//! The databases a server holds: one engine [`Db`] per name, in `DIR/<name>/`, opened on
//! first use and closed when idle ([`Databases::close_idle`]) or at shutdown.
//!
//! # Key space inside a database
//! Redis keys are stored under the one-byte prefix [`KV_PREFIX`] (`k`), so they never meet
//! the SQL layer's catalog, table and index keys (prefixes `0xF0`..`0xF2`, see
//! `docs/format/keys.md`): `SET foo bar` writes the engine key `kfoo`. `KEYS`, `SCAN`,
//! `DBSIZE` and `FLUSHDB` see only Redis keys; SQL tables are untouched by them.
//!
//! # Atomic read-modify-write
//! Commands that read a key and write it depending on what they read (`INCR*`, `APPEND`,
//! `SET NX/XX/GET`, `GETDEL`, `DEL`) hold the key's stripe lock exclusively from the read
//! to the write; blind writes (`SET`, `MSET`) hold their stripes shared during the write.
//! So a blind write can never land between the read and the write of an `INCR` on the same
//! key, while blind writes still run (and group-commit) concurrently. Stripes are always
//! taken in increasing index order, which rules out deadlock. Locks are never held across
//! an `.await`.
//!
//! A pipeline's blind writes are queued with [`Database::write_async`], which holds the
//! stripes shared only while the batch is queued (not while it commits) and counts it as in
//! flight on its stripes until it is committed. A read-modify-write that takes a stripe with
//! writes in flight first waits for the write queue ([`Db::wait_for_queued_writes`]), so its
//! read sees them: the same order as if the blind write had held its stripes throughout.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::{Condvar, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use strata_engine::filename::holds_database;
use strata_engine::{
    BlockCache, CounterAdd, Db, DbRange, Options, ReadOptions, SharedTableCache, WriteBatch,
    WriteBufferManager, WriteOptions,
};

use crate::config::{Config, SyncMode};
use crate::error::ServerError;

/// Prefix byte of every Redis key in the engine's key space.
pub const KV_PREFIX: u8 = b'k';

/// Longest database name, in bytes.
pub const MAX_NAME_LEN: usize = 64;

/// Number of key-lock stripes per database.
const STRIPES: usize = 256;

/// Checks a database name: 1 to 64 ASCII letters, digits, `_` or `-` (so it can never name
/// anything outside `DIR`).
///
/// # Errors
/// A message saying what is wrong, for the client.
pub fn validate_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_NAME_LEN {
        return Err(format!(
            "database name must be 1 to {MAX_NAME_LEN} characters long"
        ));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        return Err(format!(
            "invalid database name {name:?}: use letters, digits, '_' and '-' only"
        ));
    }
    Ok(())
}

/// The engine key of Redis key `key`.
pub fn storage_key(key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(key.len() + 1);
    set_storage_key(&mut k, key);
    k
}

/// Replaces the contents of `out` with the storage key of Redis key `key`.
fn set_storage_key(out: &mut Vec<u8>, key: &[u8]) {
    out.clear();
    push_storage_key(out, key);
}

/// Appends the storage key of Redis key `key` to `out`.
fn push_storage_key(out: &mut Vec<u8>, key: &[u8]) {
    out.push(KV_PREFIX);
    out.extend_from_slice(key);
}

/// One open database.
#[derive(Debug)]
pub struct Database {
    name: String,
    db: Db,
    write_options: WriteOptions,
    /// Set by every write in [`SyncMode::Batch`]; cleared by the background sync.
    dirty: AtomicBool,
    stripes: Box<[RwLock<()>]>,
    /// Per stripe: blind writes queued by [`Database::write_async`] and not yet committed.
    in_flight: Box<[AtomicU32]>,
    /// The SQL layer over this database, loaded on first use.
    sql: Mutex<Option<Arc<SqlDatabase>>>,
    /// When a connection last took this database from the registry
    /// ([`Databases::close_idle`]).
    last_taken: Mutex<Instant>,
    /// The last sequence number [`Databases::flush_quiet`] saw, and since when it has not
    /// moved.
    quiet_since: Mutex<(u64, Instant)>,
}

/// A new reference to `db` for a connection, noting when it was taken.
fn take(db: &Arc<Database>) -> Arc<Database> {
    *db.last_taken.lock() = Instant::now();
    Arc::clone(db)
}

/// The SQL layer's handle type.
pub type SqlDatabase = strata_query::Database<strata_query::DbStore>;

/// Guards returned by [`Database::lock_keys`].
#[derive(Debug)]
pub enum KeyLocks<'a> {
    /// Shared stripes (blind writes).
    Shared(Vec<RwLockReadGuard<'a, ()>>),
    /// Exclusive stripes (read-modify-write).
    Exclusive(Vec<RwLockWriteGuard<'a, ()>>),
}

impl Database {
    /// The database's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The engine handle (for statistics and the SQL layer).
    pub fn db(&self) -> &Db {
        &self.db
    }

    /// The value of Redis key `key`.
    ///
    /// # Errors
    /// Engine read errors.
    pub fn get(&self, key: &[u8]) -> strata_engine::Result<Option<Bytes>> {
        self.db.get(&storage_key(key))
    }

    /// The values of the Redis keys `keys`, in their order, read at one sequence number
    /// (`strata_engine::Db::multi_get`).
    ///
    /// # Errors
    /// Per key, as [`Database::get`].
    pub fn multi_get(&self, keys: &[&[u8]]) -> Vec<strata_engine::Result<Option<Bytes>>> {
        // The storage keys side by side in one buffer: one allocation, not one per key.
        let mut buffer = Vec::with_capacity(keys.iter().map(|k| k.len() + 1).sum());
        for key in keys {
            push_storage_key(&mut buffer, key);
        }
        let mut rest = &buffer[..];
        let stored: Vec<&[u8]> = keys
            .iter()
            .map(|key| {
                let (this, after) = rest.split_at(key.len() + 1);
                rest = after;
                this
            })
            .collect();
        self.db.multi_get(&ReadOptions::default(), &stored)
    }

    /// Applies `batch` (built with [`KvBatch`]) with the server's sync mode.
    ///
    /// # Errors
    /// Engine write errors; nothing of the batch is applied then.
    pub fn write(&self, batch: KvBatch) -> strata_engine::Result<()> {
        if batch.batch.is_empty() {
            return Ok(());
        }
        check_key_length(&batch)?;
        self.db.write(batch.batch, &self.write_options)?;
        self.mark_dirty();
        Ok(())
    }

    /// Applies a batch of blind writes to `keys` (the Redis keys `batch` writes) like
    /// [`Database::write`] with their stripes locked shared, but without blocking the thread
    /// while the group commit runs. The batch is checked and queued during this call (with the
    /// stripes held shared only while it is queued, not while it commits); it counts as in
    /// flight on its stripes until it is committed (see the module docs). The returned future
    /// resolves to the write's result; dropping it early blocks until the batch is committed.
    ///
    /// With `hand_off`, the batch goes to the engine's committer thread even when no group
    /// commit is running ([`WriteOptions::hand_off`]; the RESP session decides when).
    ///
    /// # Errors
    /// As [`Database::write`].
    pub fn write_async<'a>(
        &'a self,
        batch: KvBatch,
        keys: &[Bytes],
        hand_off: bool,
    ) -> impl Future<Output = strata_engine::Result<()>> + Send + use<'a> {
        let queued = if batch.batch.is_empty() {
            Ok(None)
        } else {
            check_key_length(&batch).map(|()| {
                let mut in_flight = InFlight::new(self, keys);
                let future = {
                    let _locks = self.lock_stripes(&in_flight.idx, false);
                    in_flight.mark();
                    let options = WriteOptions {
                        hand_off,
                        ..self.write_options
                    };
                    self.db.write_async(batch.batch, &options)
                };
                Some(QueuedWrite {
                    future,
                    _in_flight: in_flight,
                })
            })
        };
        async move {
            let Some(mut queued) = queued? else {
                return Ok(());
            };
            let result = (&mut queued.future).await;
            drop(queued);
            result?;
            self.mark_dirty();
            Ok(())
        }
    }

    /// Records that the WAL has unsynced writes (for [`SyncMode::Batch`]).
    pub fn mark_dirty(&self) {
        if !self.write_options.sync {
            self.dirty.store(true, Ordering::Release);
        }
    }

    /// Iterates the Redis keys (without prefix) and values from `start` (inclusive; `None`
    /// = first key), in key order.
    pub fn scan_from(&self, start: Option<&[u8]>) -> KvScan {
        let lower = match start {
            Some(k) => storage_key(k),
            None => vec![KV_PREFIX],
        };
        let upper = [KV_PREFIX + 1];
        let range = self.db.range(
            &ReadOptions {
                fill_cache: Some(false),
                ..ReadOptions::default()
            },
            (
                std::ops::Bound::Included(lower.as_slice()),
                std::ops::Bound::Excluded(&upper[..]),
            ),
        );
        KvScan { range }
    }

    /// Locks the stripes of `keys`, shared or exclusive, in increasing stripe order. Exclusive
    /// stripes with blind writes in flight wait for the write queue first, so a read made
    /// under the locks sees those writes.
    pub fn lock_keys<K: AsRef<[u8]>>(
        &self,
        keys: impl IntoIterator<Item = K>,
        exclusive: bool,
    ) -> KeyLocks<'_> {
        self.lock_stripes(&stripes_of(keys), exclusive)
    }

    /// [`Database::lock_keys`] for stripes `idx`, in increasing order.
    fn lock_stripes(&self, idx: &[usize], exclusive: bool) -> KeyLocks<'_> {
        let stripes = idx.iter().filter_map(|&i| self.stripes.get(i));
        if exclusive {
            let guards = stripes.map(RwLock::write).collect();
            self.wait_for_in_flight(self.in_flight_counters(idx));
            KeyLocks::Exclusive(guards)
        } else {
            KeyLocks::Shared(stripes.map(RwLock::read).collect())
        }
    }

    /// Locks every stripe exclusively (`FLUSHDB`).
    pub fn lock_all(&self) -> KeyLocks<'_> {
        let guards = self.stripes.iter().map(RwLock::write).collect();
        self.wait_for_in_flight(self.in_flight.iter());
        KeyLocks::Exclusive(guards)
    }

    /// The in-flight counters of stripes `idx`.
    fn in_flight_counters<'a>(&'a self, idx: &'a [usize]) -> impl Iterator<Item = &'a AtomicU32> {
        idx.iter().filter_map(|&i| self.in_flight.get(i))
    }

    /// Waits for the write queue when one of `counters` (of stripes held exclusively) counts
    /// blind writes in flight. An error is left to the caller's own write, which meets the
    /// same state.
    fn wait_for_in_flight<'a>(&self, mut counters: impl Iterator<Item = &'a AtomicU32>) {
        let busy = counters.any(|n| n.load(Ordering::Acquire) > 0);
        if busy && let Err(e) = self.db.wait_for_queued_writes() {
            tracing::debug!(database = %self.name, error = %e, "waiting for queued writes failed");
        }
    }

    /// True once [`Database::sql`] has loaded the SQL layer: from then on it answers without
    /// reading the engine.
    pub fn sql_loaded(&self) -> bool {
        self.sql.lock().is_some()
    }

    /// The SQL layer over this database (loading its catalog on first use; may block).
    ///
    /// # Errors
    /// [`strata_query::QueryError::Corruption`] for a damaged catalog, engine errors.
    pub fn sql(&self) -> Result<Arc<SqlDatabase>, strata_query::QueryError> {
        let mut slot = self.sql.lock();
        if let Some(sql) = slot.as_ref() {
            return Ok(Arc::clone(sql));
        }
        let mut store = strata_query::DbStore::new(self.db.clone());
        if self.write_options.sync {
            store = store.synced();
        }
        let sql = Arc::new(strata_query::Database::new(store)?);
        *slot = Some(Arc::clone(&sql));
        Ok(sql)
    }

    /// fsyncs the WAL if there were unsynced writes since the last call.
    ///
    /// # Errors
    /// Engine errors from the synced write.
    pub fn sync_if_dirty(&self) -> strata_engine::Result<()> {
        if self.dirty.swap(false, Ordering::AcqRel) {
            self.sync_now()?;
        }
        Ok(())
    }

    /// fsyncs the WAL now.
    ///
    /// # Errors
    /// Engine errors from the synced write.
    pub fn sync_now(&self) -> strata_engine::Result<()> {
        self.db.write(WriteBatch::new(), &WriteOptions::synced())
    }
}

/// An iterator over Redis keys, see [`Database::scan_from`].
#[derive(Debug)]
pub struct KvScan {
    range: DbRange,
}

impl Iterator for KvScan {
    type Item = strata_engine::Result<(Bytes, Bytes)>;

    fn next(&mut self) -> Option<Self::Item> {
        let item = self.range.next()?;
        Some(item.map(|(k, v)| (k.slice(1..), v)))
    }
}

/// The longest Redis key, in bytes: the engine's [`strata_engine::MAX_KEY_SIZE`] less the
/// one-byte [`KV_PREFIX`].
pub const MAX_REDIS_KEY_SIZE: usize = strata_engine::MAX_KEY_SIZE - 1;

/// A write batch over Redis keys (adds the prefix).
#[derive(Debug, Default)]
pub struct KvBatch {
    batch: WriteBatch,
    /// Length of the longest Redis key in the batch, in bytes.
    longest_key: usize,
    /// The storage key being added, reused so a put allocates nothing once warm.
    scratch: Vec<u8>,
}

impl KvBatch {
    /// An empty batch.
    pub fn new() -> Self {
        KvBatch::default()
    }

    /// An empty batch with room for about `bytes` bytes of keys and values, so a pipeline's
    /// writes fill it without reallocating.
    pub fn with_capacity(bytes: usize) -> Self {
        KvBatch {
            batch: WriteBatch::with_capacity(bytes),
            ..KvBatch::default()
        }
    }

    /// Sets `key` to `value`.
    pub fn put(&mut self, key: &[u8], value: &[u8]) {
        self.longest_key = self.longest_key.max(key.len());
        set_storage_key(&mut self.scratch, key);
        self.batch.put(&self.scratch, value);
    }

    /// Deletes `key`.
    pub fn delete(&mut self, key: &[u8]) {
        self.longest_key = self.longest_key.max(key.len());
        set_storage_key(&mut self.scratch, key);
        self.batch.delete(&self.scratch);
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.batch.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.batch.is_empty()
    }
}

/// Refuses a batch with a Redis key over [`MAX_REDIS_KEY_SIZE`] bytes. Checked here so the
/// error names the client's key length, not the engine's (which counts the prefix byte).
fn check_key_length(batch: &KvBatch) -> strata_engine::Result<()> {
    if batch.longest_key > MAX_REDIS_KEY_SIZE {
        return Err(key_length_error(batch.longest_key));
    }
    Ok(())
}

/// The error for a Redis key of `len` bytes, over [`MAX_REDIS_KEY_SIZE`].
pub(crate) fn key_length_error(len: usize) -> strata_engine::Error {
    strata_engine::Error::InvalidArgument(format!(
        "key of {len} bytes exceeds the limit of {MAX_REDIS_KEY_SIZE} bytes"
    ))
}

/// The distinct stripes of `keys`, in increasing order.
fn stripes_of<K: AsRef<[u8]>>(keys: impl IntoIterator<Item = K>) -> Vec<usize> {
    let mut idx: Vec<usize> = keys.into_iter().map(|k| stripe_of(k.as_ref())).collect();
    idx.sort_unstable();
    idx.dedup();
    idx
}

/// A write queued by [`Database::write_async`]. The fields drop in order: the future first
/// (blocking until the batch is committed), then the in-flight count.
struct QueuedWrite<'a> {
    future: strata_engine::WriteFuture,
    /// Held for its `Drop`.
    _in_flight: InFlight<'a>,
}

/// Counts a queued blind write as in flight on its stripes until dropped.
struct InFlight<'a> {
    db: &'a Database,
    idx: Vec<usize>,
    marked: bool,
}

impl<'a> InFlight<'a> {
    fn new<K: AsRef<[u8]>>(db: &'a Database, keys: impl IntoIterator<Item = K>) -> Self {
        InFlight {
            db,
            idx: stripes_of(keys),
            marked: false,
        }
    }

    /// Counts the write (called with the stripes held, before it is queued).
    fn mark(&mut self) {
        for n in self.db.in_flight_counters(&self.idx) {
            n.fetch_add(1, Ordering::AcqRel);
        }
        self.marked = true;
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if self.marked {
            for n in self.db.in_flight_counters(&self.idx) {
                n.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }
}

/// FNV-1a: spreads keys over the lock stripes.
fn stripe_of(key: &[u8]) -> usize {
    let h = key.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    #[expect(
        clippy::cast_possible_truncation,
        reason = "the remainder is below STRIPES"
    )]
    let i = (h % STRIPES as u64) as usize;
    i
}

/// A registry entry.
#[derive(Debug)]
enum Slot {
    Open(Arc<Database>),
    /// Being opened or closed by some thread, without the registry lock held; whoever wants
    /// it waits for [`Databases::changed`].
    Busy,
}

/// A [`Slot::Busy`] entry some thread is opening or closing outside the registry lock. Dropped
/// (also when that thread unwinds from a panic), it removes the entry and wakes the waiters,
/// so no one waits for it forever; [`Databases::get_or_open`] forgets it once the open has
/// returned and settles the entry itself.
struct BusyClaim<'a> {
    dbs: &'a Databases,
    name: &'a str,
}

impl Drop for BusyClaim<'_> {
    fn drop(&mut self) {
        self.dbs.open.lock().remove(self.name);
        self.dbs.changed.notify_all();
    }
}

/// The file in a server's directory that the running server holds an exclusive `flock` on,
/// so a second server on the same directory is refused at start, not only while the first
/// has a database open (each database's own `LOCK` is released when it closes, and an idle
/// one closes after `--close-idle-databases`).
pub const SERVER_LOCK: &str = "strata-serve.lock";

/// All databases of one server.
#[derive(Debug)]
pub struct Databases {
    root: PathBuf,
    /// [`SERVER_LOCK`], locked for as long as the registry lives (closing the file, also
    /// when the process dies, releases it).
    _dir_lock: std::fs::File,
    options: Options,
    sync: SyncMode,
    open: Mutex<BTreeMap<String, Slot>>,
    /// Signalled (with `open`) whenever a [`Slot::Busy`] entry is settled.
    changed: Condvar,
    closed: AtomicBool,
    /// Most databases open at once (`Config::max_databases`).
    max_open: usize,
}

/// The process's soft limit on open files (`RLIMIT_NOFILE`); `u64::MAX` when unlimited.
fn open_file_limit() -> u64 {
    rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .unwrap_or(u64::MAX)
}

/// How long after a failed quiet flush ([`Databases::flush_quiet`]) the next is tried.
const QUIET_FLUSH_RETRY: Duration = Duration::from_secs(60);

impl Databases {
    /// Prepares the registry for `config.dir` (creating the directory). The databases share
    /// one block cache (`config.block_cache_size`) and one table cache, sized by
    /// [`Config::table_cache_capacity`] from the open-file limit in force now (raise it first
    /// with [`Config::raise_open_file_limit`]).
    ///
    /// # Errors
    /// [`ServerError::DirIsDatabase`] when the directory is itself a database;
    /// [`ServerError::Dir`] when it (or its [`SERVER_LOCK`]) cannot be created;
    /// [`ServerError::DirInUse`] when another server holds its [`SERVER_LOCK`].
    pub fn new(config: &Config) -> Result<Databases, ServerError> {
        if holds_database(&config.dir) {
            // Named as `mv` needs it: `db/.` or a symbolic link resolved.
            return Err(ServerError::DirIsDatabase {
                path: std::fs::canonicalize(&config.dir).unwrap_or_else(|_| config.dir.clone()),
            });
        }
        std::fs::create_dir_all(&config.dir).map_err(|source| ServerError::Dir {
            path: config.dir.clone(),
            source,
        })?;
        let lock_path = config.dir.join(SERVER_LOCK);
        let dir_lock = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&lock_path)
            .map_err(|source| ServerError::Dir {
                path: lock_path.clone(),
                source,
            })?;
        match dir_lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(ServerError::DirInUse {
                    path: config.dir.clone(),
                });
            }
            Err(std::fs::TryLockError::Error(source)) => {
                return Err(ServerError::Dir {
                    path: lock_path,
                    source,
                });
            }
        }
        let options = Options::default()
            .table_format(config.table_format)
            .compression(config.compression)
            .write_buffer_size(config.write_buffer_size)
            .min_write_buffer_number_to_merge(config.memtables_per_flush)
            .max_write_buffer_number(config.memtables_per_flush.saturating_mul(2).max(2))
            .write_buffer_manager(config.memtable_budget.map(WriteBufferManager::new))
            .block_cache(Some(BlockCache::new(config.block_cache_size)))
            .table_cache(Some(SharedTableCache::new(
                config.table_cache_capacity(open_file_limit()),
            )))
            // The server writes plain values, but counts loaded offline by
            // `strata load --format counts` are `CounterAdd` operands: without the operator
            // every read, scan and FLUSHDB of such a database would fail.
            .merge_operator(Some(Arc::new(CounterAdd)))
            .max_value_size(config.limits.max_bulk_bytes.min(u32::MAX as usize - 1));
        Ok(Databases {
            root: config.dir.clone(),
            _dir_lock: dir_lock,
            options,
            sync: config.sync,
            open: Mutex::new(BTreeMap::new()),
            changed: Condvar::new(),
            closed: AtomicBool::new(false),
            max_open: config.max_databases,
        })
    }

    /// The memtable budget shared by the databases (`Config::memtable_budget`), if any.
    pub fn memtable_budget(&self) -> Option<&Arc<WriteBufferManager>> {
        self.options.write_buffer_manager.as_ref()
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The sync mode writes use.
    pub fn sync_mode(&self) -> SyncMode {
        self.sync
    }

    /// The database `name` if it is open; `None` when it is not, or when the registry is
    /// busy this instant. Never waits (for async workers): on `None`, call
    /// [`Databases::get_or_open`] from a blocking context.
    pub fn get_open(&self, name: &str) -> Option<Arc<Database>> {
        match self.open.try_lock()?.get(name) {
            Some(Slot::Open(db)) => Some(take(db)),
            _ => None,
        }
    }

    /// The database `name` if it is open, waiting for the registry's lock (held only for
    /// map updates, never during an open or a close) instead of giving up as
    /// [`Databases::get_open`] does; opens nothing. For answers that must not open a
    /// database (`INFO engine`).
    pub fn open_one(&self, name: &str) -> Option<Arc<Database>> {
        match self.open.lock().get(name) {
            Some(Slot::Open(db)) => Some(take(db)),
            _ => None,
        }
    }

    /// The database `name`, opening (or creating) it on first use. Blocks while it is being
    /// opened (recovery replays its WAL) or closed: call from a blocking context unless
    /// [`Databases::get_open`] found it. Other databases are not held up meanwhile: the
    /// registry is not locked during an open or a close.
    ///
    /// # Errors
    /// [`ServerError::BadName`] for an invalid name, [`ServerError::Engine`] when the engine
    /// cannot open it, [`ServerError::TooManyDatabases`] when `Config::max_databases` are
    /// open already, [`ServerError::ShuttingDown`] after [`Databases::close_all`].
    pub fn get_or_open(&self, name: &str) -> Result<Arc<Database>, ServerError> {
        validate_name(name).map_err(ServerError::BadName)?;
        let mut open = self.open.lock();
        loop {
            if self.closed.load(Ordering::Acquire) {
                return Err(ServerError::ShuttingDown);
            }
            match open.get(name) {
                Some(Slot::Open(db)) => return Ok(take(db)),
                Some(Slot::Busy) => self.changed.wait(&mut open),
                None => break,
            }
        }
        if open.len() >= self.max_open {
            return Err(ServerError::TooManyDatabases {
                name: name.to_owned(),
                max: self.max_open,
            });
        }
        // Claimed: no one else opens this directory, and the others are not held up.
        open.insert(name.to_owned(), Slot::Busy);
        drop(open);
        let claim = BusyClaim { dbs: self, name };
        let path = self.root.join(name);
        // A database this call creates and then fails to open (too many open files, a full
        // disk) is removed again: it would be listed, and failing, from then on.
        let fs = &self.options.file_system;
        let created = !fs.exists(&path);
        let opened = Db::open(&path, self.options.clone());
        if opened.is_err()
            && created
            && fs.exists(&path)
            && let Err(e) = fs.remove_dir_all(&path)
        {
            tracing::warn!(database = name, error = %e, "could not remove a database that failed to open");
        }
        std::mem::forget(claim);
        let mut open = self.open.lock();
        let result = match opened {
            Ok(db) if self.closed.load(Ordering::Acquire) => {
                // Shut down meanwhile: `close_all` waits for this slot, so close it here.
                open.remove(name);
                drop(open);
                self.changed.notify_all();
                if let Err(e) = db.close() {
                    tracing::error!(database = name, error = %e, "closing database failed");
                }
                return Err(ServerError::ShuttingDown);
            }
            Ok(db) => {
                tracing::info!(database = name, path = %path.display(), "opened database");
                let database = Arc::new(Database {
                    name: name.to_owned(),
                    db,
                    write_options: WriteOptions {
                        sync: self.sync == SyncMode::Always,
                        ..WriteOptions::default()
                    },
                    dirty: AtomicBool::new(false),
                    stripes: (0..STRIPES).map(|_| RwLock::new(())).collect(),
                    in_flight: (0..STRIPES).map(|_| AtomicU32::new(0)).collect(),
                    sql: Mutex::new(None),
                    last_taken: Mutex::new(Instant::now()),
                    quiet_since: Mutex::new((0, Instant::now())),
                });
                open.insert(name.to_owned(), Slot::Open(Arc::clone(&database)));
                Ok(database)
            }
            Err(source) => {
                open.remove(name);
                Err(ServerError::Engine {
                    name: name.to_owned(),
                    source,
                })
            }
        };
        drop(open);
        self.changed.notify_all();
        result
    }

    /// True when database `name` is open (or being opened) or has a database directory under
    /// the root (one with a `CURRENT` file; it may still fail to open). A stray directory
    /// that holds no database does not count. Never creates anything.
    pub fn exists(&self, name: &str) -> bool {
        validate_name(name).is_ok()
            && (self.open.lock().contains_key(name) || holds_database(&self.root.join(name)))
    }

    /// The open databases, by name.
    pub fn open_databases(&self) -> Vec<Arc<Database>> {
        self.open
            .lock()
            .values()
            .filter_map(|slot| match slot {
                Slot::Open(db) => Some(Arc::clone(db)),
                Slot::Busy => None,
            })
            .collect()
    }

    /// Names of every database under the root (open or not), sorted: subdirectories with a
    /// valid name that hold a database (a `CURRENT` file).
    pub fn list(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&self.root)
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()) && holds_database(&e.path()))
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| validate_name(n).is_ok())
            .collect();
        for name in self.open.lock().keys() {
            if !names.contains(name) {
                names.push(name.clone());
            }
        }
        names.sort();
        names
    }

    /// fsyncs every open database with writes since its last sync ([`SyncMode::Batch`]).
    pub fn sync_dirty(&self) {
        for db in self.open_databases() {
            if let Err(e) = db.sync_if_dirty() {
                tracing::error!(database = db.name(), error = %e, "background WAL sync failed");
            }
        }
    }

    /// Closes the open databases that no connection holds and none has taken for `idle` or
    /// longer; the next connection that names one opens it again. Returns their names.
    ///
    /// A database whose engine has compactions due is left for a later call (its close would
    /// wait for them). One with immutable memtables waiting for a flush (they wait for
    /// `Config::memtables_per_flush` of them) is flushed first, so its reopen replays little
    /// WAL, and closed by a later call. Close errors are logged (the WAL sync at close
    /// failing: writes acknowledged under [`SyncMode::Batch`] or `None` may then be lost on
    /// power loss, as at shutdown). The registry is not locked while they flush or close.
    pub fn close_idle(&self, idle: Duration) -> Vec<String> {
        let mut to_close: Vec<(String, Arc<Database>)> = Vec::new();
        let mut to_flush: Vec<Arc<Database>> = Vec::new();
        {
            let mut open = self.open.lock();
            if self.closed.load(Ordering::Acquire) {
                return Vec::new();
            }
            for (name, slot) in open.iter_mut() {
                let Slot::Open(db) = slot else { continue };
                // Only the registry holds an idle database, and only the registry (under
                // this lock) hands out new references: the count cannot grow meanwhile.
                if Arc::strong_count(db) != 1 || db.last_taken.lock().elapsed() < idle {
                    continue;
                }
                let stats = db.db.stats();
                if stats.pending_compaction_bytes > 0 {
                    continue;
                }
                if stats.immutable_memtables > 0 {
                    to_flush.push(Arc::clone(db));
                    continue;
                }
                if let Slot::Open(db) = std::mem::replace(slot, Slot::Busy) {
                    to_close.push((name.clone(), db));
                }
            }
        }
        for db in to_flush {
            if let Err(e) = db.db.flush() {
                tracing::error!(database = db.name(), error = %e, "flushing idle database failed");
            }
        }
        let mut closed = Vec::with_capacity(to_close.len());
        for (name, db) in to_close {
            // Settles the slot when done, also should the close panic.
            let claim = BusyClaim {
                dbs: self,
                name: &name,
            };
            // The slot is busy, so nothing took a reference since: the registry's is the last.
            if let Ok(database) = Arc::try_unwrap(db) {
                match database.sync_now().and_then(|()| database.db.close()) {
                    Ok(()) => tracing::info!(database = %name, "closed idle database"),
                    Err(e) => {
                        tracing::error!(database = %name, error = %e, "closing idle database failed");
                    }
                }
            }
            drop(claim);
            closed.push(name);
        }
        closed
    }

    /// Flushes the memtables of every open database that holds immutable memtables and has
    /// taken no write for `quiet` (its last sequence number has not moved since): they become
    /// one level-0 table. Memtables otherwise wait until `memtables_per_flush` are full, so
    /// after a load every read probes up to that many memtables, and a restart replays their
    /// WAL, for as long as no more writes come. While the memtable budget
    /// (`Config::memtable_budget`) is at least half used, a quiet database's active memtable
    /// is flushed too, even with no immutable one: otherwise it counts against the budget
    /// until the database is closed, and the databases still written get less of it. Blocks
    /// while flushing; returns the names of the databases flushed. A database being opened or
    /// closed is skipped.
    pub fn flush_quiet(&self, quiet: Duration) -> Vec<String> {
        let mut to_flush: Vec<Arc<Database>> = Vec::new();
        let budget_pressed = self
            .memtable_budget()
            .is_some_and(|b| b.memory_usage() >= b.buffer_size() / 2);
        {
            let open = self.open.lock();
            for slot in open.values() {
                let Slot::Open(db) = slot else { continue };
                let stats = db.db.stats();
                let mut seen = db.quiet_since.lock();
                if seen.0 != stats.last_seqno {
                    *seen = (stats.last_seqno, Instant::now());
                } else if (stats.immutable_memtables > 0
                    || (budget_pressed && stats.memtable_bytes > 0))
                    && seen.1.elapsed() >= quiet
                {
                    // Holding a reference keeps `close_idle` away until the flush is done.
                    to_flush.push(Arc::clone(db));
                }
            }
        }
        let mut flushed = Vec::with_capacity(to_flush.len());
        for db in to_flush {
            match db.db.flush() {
                Ok(()) => {
                    tracing::debug!(
                        database = db.name(),
                        "flushed the memtables of a quiet database"
                    );
                    flushed.push(db.name().to_owned());
                }
                Err(e) => {
                    // Not again at the next check (every half second): a full disk or a
                    // poisoned database fails the same way, and the log would fill with it.
                    db.quiet_since.lock().1 = Instant::now() + QUIET_FLUSH_RETRY;
                    tracing::error!(
                        database = db.name(),
                        error = %e,
                        retry_in_secs = QUIET_FLUSH_RETRY.as_secs(),
                        "flushing a quiet database failed"
                    );
                }
            }
        }
        flushed
    }

    /// Syncs and closes every open database, after any open or close under way; later opens
    /// fail with [`ServerError::ShuttingDown`]. Blocks.
    ///
    /// # Errors
    /// The first close error (all databases are still attempted).
    pub fn close_all(&self) -> Result<(), ServerError> {
        let dbs: Vec<Arc<Database>> = {
            let mut open = self.open.lock();
            self.closed.store(true, Ordering::Release);
            while open.values().any(|slot| matches!(slot, Slot::Busy)) {
                self.changed.wait(&mut open);
            }
            std::mem::take(&mut *open)
                .into_values()
                .filter_map(|slot| match slot {
                    Slot::Open(db) => Some(db),
                    Slot::Busy => None,
                })
                .collect()
        };
        let mut first = None;
        for database in dbs {
            let name = database.name.clone();
            let full_disk = database.db.is_resumable() && database.db.resume().is_err();
            let result = if full_disk {
                // Still no space: nothing more can be made durable now, and what was
                // acknowledged is in the WAL (synced, or in the page cache for a clean exit),
                // replayed at the next open. Not a failed close.
                tracing::warn!(
                    database = %name,
                    "closing a database that refuses writes for want of disk space; its WAL is \
                     replayed at the next open"
                );
                database.db.clone().close()
            } else {
                database
                    .sync_now()
                    .and_then(|()| database.db.clone().close())
            };
            match result {
                Ok(()) => tracing::info!(database = %name, "closed database"),
                Err(source) => {
                    tracing::error!(database = %name, error = %source, "closing database failed");
                    first.get_or_insert(ServerError::Engine { name, source });
                }
            }
        }
        first.map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests {
    use strata_engine::fs::{ENOSPC, Fault, FaultOp, MemFs};

    use super::*;

    /// A registry in a temporary directory whose databases live on the returned in-memory
    /// file system, for fault injection.
    fn registry_on_memfs() -> (tempfile::TempDir, Databases, Arc<MemFs>) {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut dbs = Databases::new(&Config::ephemeral(dir.path())).expect("registry");
        let fs = Arc::new(MemFs::new());
        dbs.options.file_system = fs.clone();
        (dir, dbs, fs)
    }

    /// Opens `run1` in `dbs`, writes `before` = `1`, fills the disk (every call of `fs` fails
    /// with `ENOSPC` from now on) and fails a write, which stops writes.
    fn run1_stopped_by_a_full_disk(dbs: &Databases, fs: &MemFs) -> Arc<Database> {
        let run = dbs.get_or_open("run1").expect("open");
        run.db().put(b"before", b"1").expect("put");
        fs.inject(Fault::new(FaultOp::Any, ENOSPC).sticky());
        let e = run.db().put(b"failed", b"2").expect_err("disk full");
        assert!(e.is_resource_exhausted(), "{e}");
        run
    }

    #[test]
    fn a_second_server_on_the_directory_is_refused_until_the_first_is_gone() {
        let dir = tempfile::tempdir().expect("tempdir");
        let first = Databases::new(&Config::ephemeral(dir.path())).expect("registry");
        // No database is open: the directory lock alone refuses the second.
        let e = Databases::new(&Config::ephemeral(dir.path())).expect_err("refused");
        assert!(matches!(e, ServerError::DirInUse { .. }), "{e}");
        assert!(e.to_string().contains("another `strata serve`"), "{e}");
        drop(first);
        Databases::new(&Config::ephemeral(dir.path())).expect("the lock went with the first");
    }

    #[test]
    fn a_database_created_by_a_failed_open_is_removed() {
        use strata_engine::fs::FileSystem as _;
        let (dir, dbs, fs) = registry_on_memfs();
        fs.inject(Fault::new(FaultOp::Create, strata_engine::fs::EIO).on_path(".wal"));
        let e = dbs
            .get_or_open("run1")
            .expect_err("the WAL cannot be created");
        assert!(matches!(e, ServerError::Engine { .. }), "{e}");
        let path = dir.path().join("run1");
        assert!(!fs.exists(&path), "the failed database was left behind");
        assert!(!dbs.exists("run1"));
        // Once the fault is gone, the database is created as usual.
        dbs.get_or_open("run1").expect("opens");
        assert!(fs.exists(&path.join("CURRENT")));
    }

    /// A database whose WAL append failed for want of space refuses writes until the engine's
    /// automatic resume finds space again; then it takes them, with nothing lost.
    #[test]
    fn a_database_poisoned_by_a_full_disk_resumes_once_there_is_space() {
        let (_dir, dbs, fs) = registry_on_memfs();
        let run = run1_stopped_by_a_full_disk(&dbs, &fs);
        let e = run.db().put(b"refused", b"3").expect_err("refused");
        assert!(matches!(e, strata_engine::Error::Poisoned { .. }), "{e}");
        assert!(run.db().is_resumable(), "no space yet");
        std::thread::sleep(Duration::from_millis(200));
        assert!(run.db().stats().writes_stopped.is_some(), "no space yet");
        fs.clear_faults();
        let deadline = Instant::now() + Duration::from_secs(30);
        while run.db().is_resumable() {
            assert!(
                Instant::now() < deadline,
                "not resumed 30 s after space came back"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        run.db()
            .put(b"after", b"4")
            .expect("writes are taken again");
        assert_eq!(
            run.db().get(b"before").expect("get").as_deref(),
            Some(&b"1"[..])
        );
        assert!(run.db().stats().writes_stopped.is_none());
        drop(run);
        dbs.close_all().expect("close");
    }

    /// A shutdown on a disk still full closes the database that refuses writes without
    /// calling it a failure: its WAL is replayed at the next open.
    #[test]
    fn closing_a_database_stopped_by_a_full_disk_is_not_a_failure() {
        let (dir, mut dbs, fs) = registry_on_memfs();
        dbs.options.auto_resume = false;
        drop(run1_stopped_by_a_full_disk(&dbs, &fs));
        dbs.close_all().expect("a full disk is not a failed close");
        fs.clear_faults();
        let db =
            strata_engine::Db::open(dir.path().join("run1"), dbs.options.clone()).expect("reopen");
        assert_eq!(db.get(b"before").expect("get").as_deref(), Some(&b"1"[..]));
    }

    #[test]
    fn a_busy_entry_is_settled_when_its_thread_panics() {
        let dir = tempfile::tempdir().expect("tempdir");
        let dbs = Arc::new(Databases::new(&Config::ephemeral(dir.path())).expect("registry"));
        dbs.open.lock().insert("run1".to_owned(), Slot::Busy);
        let holder = Arc::clone(&dbs);
        let opener = std::thread::spawn(move || {
            let _claim = BusyClaim {
                dbs: &holder,
                name: "run1",
            };
            std::thread::sleep(Duration::from_millis(50));
            panic!("an open that panics");
        });
        // Waits for the busy entry, then opens the database itself.
        let db = dbs.get_or_open("run1").expect("open after the panic");
        assert_eq!(db.name(), "run1");
        assert!(opener.join().is_err());
        drop(db);
        dbs.close_all().expect("close");
    }

    #[test]
    fn a_database_directory_is_refused_as_the_data_directory() {
        let dir = tempfile::tempdir().expect("tempdir");
        // What `strata repl` makes of ./strata-data.
        strata_engine::Db::open(dir.path(), Options::default())
            .expect("a database")
            .close()
            .expect("close");
        let e = Databases::new(&Config::ephemeral(dir.path())).expect_err("refused");
        assert!(matches!(e, ServerError::DirIsDatabase { .. }), "{e}");
        assert!(
            e.to_string()
                .contains("is a database directory (it has a CURRENT file)"),
            "{e}"
        );
        assert!(!dir.path().join("db0").exists());
    }

    #[test]
    fn stray_directories_are_not_databases() {
        let dir = tempfile::tempdir().expect("tempdir");
        let dbs = Databases::new(&Config::ephemeral(dir.path())).expect("registry");
        std::fs::create_dir(dir.path().join("emptydir")).expect("mkdir");
        assert!(!dbs.exists("emptydir"));
        let _run = dbs.get_or_open("run42").expect("open");
        assert!(dbs.exists("run42"));
        assert!(!dbs.list().contains(&"emptydir".to_owned()));
        assert!(dbs.list().contains(&"run42".to_owned()));
    }

    #[test]
    fn names_are_validated() {
        for good in ["db0", "run_42", "A-b", &"x".repeat(64)] {
            assert!(validate_name(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "..",
            "a/b",
            "a b",
            "é",
            "../etc",
            &"x".repeat(65),
            "a.b",
        ] {
            assert!(validate_name(bad).is_err(), "{bad}");
        }
    }

    /// A read under exclusive stripes sees every blind write queued on them before the locks
    /// were taken, committed or not (the wait in `Database::lock_keys`). A third thread keeps
    /// the group-commit leader busy so queued writes do wait.
    #[test]
    fn exclusive_stripes_see_queued_blind_writes() -> Result<(), Box<dyn std::error::Error>> {
        use std::sync::atomic::AtomicU64;
        const WRITES: u64 = 2_000;
        let dir = tempfile::tempdir()?;
        let dbs = Databases::new(&Config::ephemeral(dir.path()))?;
        let db = dbs.get_or_open("db0")?;
        let queued = AtomicU64::new(0);
        let done = AtomicBool::new(false);
        let key = [Bytes::from_static(b"k")];
        std::thread::scope(|s| -> Result<(), Box<dyn std::error::Error>> {
            s.spawn(|| {
                let mut j = 0u64;
                while !done.load(Ordering::Acquire) {
                    let mut batch = KvBatch::new();
                    for _ in 0..500 {
                        j += 1;
                        batch.put(format!("filler{j}").as_bytes(), &[7u8; 200]);
                    }
                    if db.write(batch).is_err() {
                        break;
                    }
                }
            });
            let writer = s.spawn(|| -> Result<(), String> {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .build()
                    .map_err(|e| e.to_string())?;
                rt.block_on(async {
                    let mut in_flight = std::collections::VecDeque::new();
                    for i in 1..=WRITES {
                        let mut batch = KvBatch::new();
                        batch.put(b"k", i.to_string().as_bytes());
                        in_flight.push_back(db.write_async(batch, &key, false));
                        queued.store(i, Ordering::Release);
                        if in_flight.len() >= 8
                            && let Some(f) = in_flight.pop_front()
                        {
                            f.await.map_err(|e| e.to_string())?;
                        }
                    }
                    for f in in_flight {
                        f.await.map_err(|e| e.to_string())?;
                    }
                    Ok(())
                })
            });
            let mut checks = 0;
            let mut stale = None;
            while !writer.is_finished() {
                let before = queued.load(Ordering::Acquire);
                let locks = db.lock_keys(&key, true);
                let seen = match db.get(b"k")? {
                    Some(v) => std::str::from_utf8(&v)?.parse::<u64>()?,
                    None => 0,
                };
                drop(locks);
                if seen < before {
                    stale = Some(format!(
                        "read {seen} under the lock after write {before} was queued"
                    ));
                    break;
                }
                checks += 1;
                // Let the writer take the stripe between checks.
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
            done.store(true, Ordering::Release);
            writer.join().map_err(|_| "writer panicked")??;
            assert_eq!(stale, None);
            assert!(checks > 0);
            Ok(())
        })?;
        assert_eq!(
            db.get(b"k")?.as_deref(),
            Some(WRITES.to_string().as_bytes())
        );
        Ok(())
    }

    #[test]
    fn stripes_are_in_range_and_spread() {
        let mut seen = std::collections::HashSet::new();
        for i in 0..10_000 {
            let s = stripe_of(format!("key:{i}").as_bytes());
            assert!(s < STRIPES);
            seen.insert(s);
        }
        assert_eq!(seen.len(), STRIPES);
    }

    #[test]
    fn redis_keys_stay_inside_their_prefix() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let dbs = Databases::new(&Config::ephemeral(dir.path()))?;
        let db = dbs.get_or_open("db0")?;
        db.db().put(&[0xF1, 1], b"sql row")?;
        let mut batch = KvBatch::new();
        batch.put(b"b", b"2");
        batch.put(b"a", b"1");
        batch.put(&[0xFF], b"3");
        db.write(batch)?;
        let keys: Vec<Bytes> = db
            .scan_from(None)
            .map(|kv| kv.map(|(k, _)| k))
            .collect::<Result<_, _>>()?;
        assert_eq!(keys, vec![&b"a"[..], b"b", &[0xFF]]);
        let from_b: Vec<Bytes> = db
            .scan_from(Some(b"b"))
            .map(|kv| kv.map(|(k, _)| k))
            .collect::<Result<_, _>>()?;
        assert_eq!(from_b, vec![&b"b"[..], &[0xFF]]);
        assert_eq!(dbs.list(), vec!["db0".to_owned()]);
        // The longest key is 64 KiB - 1 bytes; the error names the client's key length.
        let mut batch = KvBatch::new();
        batch.put(&vec![b'x'; MAX_REDIS_KEY_SIZE], b"fits");
        db.write(batch)?;
        let mut batch = KvBatch::new();
        batch.put(&vec![b'x'; MAX_REDIS_KEY_SIZE + 1], b"too long");
        let err = db
            .write(batch)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.contains("key of 65536 bytes exceeds the limit of 65535 bytes"),
            "{err}"
        );
        dbs.close_all()?;
        assert!(matches!(
            dbs.get_or_open("db0"),
            Err(ServerError::ShuttingDown)
        ));
        Ok(())
    }
}
