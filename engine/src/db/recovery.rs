//! Opening a database: lock, manifest, WAL replay, obsolete-file cleanup
//! (order specified in `docs/format/files.md`).
//!
//! WAL records are replayed in log order into one memtable per keyspace, each written to
//! level-0 tables of its keyspace (whenever it reaches the keyspace's `write_buffer_size` times
//! its `min_write_buffer_number_to_merge`, what one background flush writes, and at the end),
//! so that the database starts with a fresh, empty WAL. A keyspace's entries are replayed only
//! from WALs numbered at or above its log number (older ones are in its tables); entries of
//! dropped keyspaces are skipped. Damaged records are handled according to
//! [`WalRecoveryMode`]; in the default mode a damaged tail of the newest WAL (a crash
//! mid-append) is cut off, so the recovered state is a prefix of the acknowledged writes, with
//! no holes.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64};

use bytes::Bytes;
use parking_lot::{Condvar, Mutex, RwLock};

use super::background::spawn_background;
use super::flush::write_level0_table;
use super::lock::lock_dir;
use super::state::{BgState, DbInner, KeyspaceState, LogState, Stats, WriteQueue};
use super::write::insert_batch;
use crate::batch::WriteBatch;
use crate::cache::{BlockCache, TableCache};
use crate::error::{Error, IoContext, Result};
use crate::filename::{self, FileKind};
use crate::fs::FileSystem;
use crate::memtable::MemTable;
use crate::options::{Options, WalRecoveryMode};
use crate::snapshot::SnapshotList;
use crate::types::{FileNumber, SeqNo};
use crate::version::{DEFAULT_KEYSPACE, VersionEdit, VersionSet};
use crate::wal::{self, ReadOutcome};
use std::io::ErrorKind;

/// Attempts of a read-only open whose files change under it (see [`open`]).
const READ_ONLY_OPEN_ATTEMPTS: usize = 5;

/// Opens or creates the database in `dir`; see [`crate::Db::open`].
///
/// A read-only open takes no lock, so the process that has the database open may switch the
/// manifest, or delete a table or WAL it has just made obsolete, while this one reads them:
/// the open then fails on a file that is gone. When it fails and the directory's table, WAL and
/// manifest names (or `CURRENT`) changed during the attempt, it starts over, up to
/// [`READ_ONLY_OPEN_ATTEMPTS`] times; a failure in an unchanging directory is returned at once.
pub(crate) fn open(dir: &Path, options: Options) -> Result<Arc<DbInner>> {
    if !options.read_only {
        return open_once(dir, options);
    }
    let fs = Arc::clone(&options.file_system);
    let mut attempt = 1;
    loop {
        let before = files_fingerprint(&*fs, dir);
        match open_once(dir, options.clone()) {
            Err(e)
                if attempt < READ_ONLY_OPEN_ATTEMPTS && files_fingerprint(&*fs, dir) != before =>
            {
                tracing::debug!(dir = %dir.display(), attempt, error = %e, "files changed during a read-only open; retrying");
                attempt += 1;
            }
            result => return result,
        }
    }
}

/// The names of the database's tables, WALs and manifests, sorted, and `CURRENT`'s contents:
/// what a concurrent writer changes when it flushes, compacts or switches manifests.
fn files_fingerprint(fs: &dyn FileSystem, dir: &Path) -> (Vec<FileKind>, Option<Vec<u8>>) {
    let mut kinds: Vec<FileKind> = list_dir(fs, dir)
        .map(|files| files.into_iter().map(|(_, _, kind)| kind).collect())
        .unwrap_or_default();
    kinds.sort_unstable();
    let current = fs.read(&dir.join(filename::CURRENT)).ok();
    (kinds, current)
}

/// Open files left for purposes other than tables (WALs, the manifest, the directory, the
/// LOCK file, a server's sockets and the other databases it opens).
const NON_TABLE_FILES: u64 = 64;

/// Table files this process may keep open: its open-file limit (`RLIMIT_NOFILE`, soft) less
/// [`NON_TABLE_FILES`], at least 16; `usize::MAX` when unlimited. The table cache holds at
/// most this many tables whatever `max_open_files` says, so a low `ulimit -n` makes reads
/// reopen tables rather than fail with "Too many open files".
fn table_file_budget() -> usize {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
    limit.map_or(usize::MAX, |n| {
        usize::try_from(n.saturating_sub(NON_TABLE_FILES).max(16)).unwrap_or(usize::MAX)
    })
}

fn open_once(dir: &Path, options: Options) -> Result<Arc<DbInner>> {
    options.validate()?;
    let fs = Arc::clone(&options.file_system);
    let read_only = options.read_only;
    // A CURRENT that cannot be looked at (permission denied) is not a missing database.
    let current = dir.join(filename::CURRENT);
    match fs.file_size(&current) {
        Err(e) if !matches!(e.kind(), ErrorKind::NotFound | ErrorKind::IsADirectory) => {
            return Err(Error::io(&current, e));
        }
        _ => {}
    }
    let has_current = fs.exists(&current);
    if read_only {
        if !has_current {
            return Err(Error::InvalidArgument(format!(
                "no database in {} (no CURRENT file); a read-only open creates nothing",
                dir.display()
            )));
        }
    } else if !options.create_if_missing && !has_current {
        // As RocksDB: without create_if_missing, a directory that exists but holds no
        // database (no CURRENT) is refused too, not turned into one.
        return Err(Error::InvalidArgument(if fs.exists(dir) {
            format!(
                "no database in {} (no CURRENT file) and create_if_missing is off",
                dir.display()
            )
        } else {
            format!(
                "database directory {} does not exist and create_if_missing is off",
                dir.display()
            )
        }));
    } else if !fs.exists(dir) {
        // A new database inside another's directory would share its file names (a mistyped
        // `db/000004.wal` becomes a directory the outer database then fails to delete).
        if let Some(parent) = dir.parent()
            && fs.exists(&parent.join(filename::CURRENT))
        {
            return Err(Error::InvalidArgument(format!(
                "{} would be a new database inside the database directory {}; give a path \
                 outside it",
                dir.display(),
                parent.display()
            )));
        }
        fs.create_dir_all(dir).ctx(dir)?;
    }
    let dir = dir.to_path_buf();
    // A read-only open takes no lock (RocksDB's `OpenForReadOnly` does not either): it writes
    // nothing, and may read beside the process that has the database open.
    let lock = if read_only {
        None
    } else {
        Some(lock_dir(&*fs, &dir)?)
    };
    // Tables no manifest record names, moved to `lost/` because the manifest's damaged last
    // record was ignored: their numbers stay used, and an open that fails before the manifest
    // is rewritten moves them back.
    let mut kept_tables = KeptTables::none(&fs);
    let mut ignored_manifest_tail = None;
    // With a damaged last manifest record ignored: the tables no record names (in `lost/`
    // after a writing open moved them), for the error of a WAL hole that record explains.
    let mut unnamed_tables: Vec<PathBuf> = Vec::new();
    let mut versions = if read_only {
        let recovered = VersionSet::replay(&fs, &dir)?;
        recovered.check_tables()?;
        ignored_manifest_tail = recovered
            .torn_tail()
            .map(|(path, offset)| (path.to_path_buf(), offset));
        if ignored_manifest_tail.is_some() {
            let named = recovered.table_numbers();
            unnamed_tables = list_dir(&*fs, &dir)?
                .into_iter()
                .filter_map(|(path, _, kind)| match kind {
                    FileKind::Table(n) if !named.contains(&n) => Some(path),
                    _ => None,
                })
                .collect();
        }
        recovered.into_read_only()
    } else if fs.exists(&dir.join(filename::CURRENT)) {
        if options.error_if_exists {
            return Err(Error::InvalidArgument(format!(
                "database {} already exists and error_if_exists is on",
                dir.display()
            )));
        }
        // Nothing is written before every table the manifest names is known to exist.
        let recovered = VersionSet::replay(&fs, &dir)?;
        recovered.check_tables()?;
        if let Some((path, offset)) = recovered.torn_tail() {
            ignored_manifest_tail = Some((path.to_path_buf(), offset));
            // A read-only open beside a writer may meet an edit being appended: it says
            // nothing. Here the edit is gone for good once the manifest is rewritten.
            tracing::warn!(path = %path.display(), offset, "ignoring a torn last manifest record (a write cut short by a crash)");
            // Before the manifest is rewritten: if a table cannot be kept, the open fails
            // with the damaged record still there and nothing changed.
            kept_tables.move_unnamed(&dir, &recovered.table_numbers())?;
            unnamed_tables = kept_tables
                .moved
                .iter()
                .map(|(_, _, to)| to.clone())
                .collect();
        }
        let versions = recovered.install()?;
        // The damaged record is gone from now on: the tables stay in `lost/` even if the open
        // fails later (the WAL check below), or the next open would delete them.
        kept_tables.keep();
        versions
    } else {
        if list_dir(&*fs, &dir)?.iter().any(|(_, _, kind)| match kind {
            FileKind::Table(_) => true,
            // A lone MANIFEST-000001 is what a crash inside `create_new` leaves (files.md).
            FileKind::Manifest(n) => *n != FileNumber(1),
            _ => false,
        }) {
            return Err(Error::corruption(
                dir.join(filename::CURRENT),
                0,
                "CURRENT is missing but the directory holds tables or manifests",
            ));
        }
        VersionSet::create_new(&fs, &dir)?
    };

    // Replay every WAL at or after the manifest's log number, oldest first.
    let mut wals: Vec<FileNumber> = Vec::new();
    for n in kept_tables.numbers() {
        versions.mark_file_number_used(n);
    }
    for (_, _, kind) in list_dir(&*fs, &dir)? {
        match kind {
            FileKind::Wal(n) | FileKind::Table(n) | FileKind::Manifest(n) => {
                versions.mark_file_number_used(n);
                if matches!(kind, FileKind::Wal(_)) && n >= versions.log_number() {
                    wals.push(n);
                }
            }
            _ => {}
        }
    }
    wals.sort();
    let keyspaces = versions.keyspaces();
    let mut max_seqno = versions.last_seqno();
    for (id, _) in &keyspaces {
        if let Some(version) = versions.current_of(*id) {
            for f in version.levels.iter().flatten() {
                max_seqno = max_seqno.max(f.largest_seqno);
            }
        }
    }
    let mut replay = Replay {
        fs: &*fs,
        dir: &dir,
        keyspaces: keyspaces
            .iter()
            .map(|(id, name)| {
                let ks = ReplayKeyspace {
                    options: options.for_keyspace(name),
                    log_number: versions.keyspace_log_number(*id).unwrap_or(FileNumber(0)),
                    mem: Arc::new(MemTable::new()),
                    edit: VersionEdit {
                        keyspace: *id,
                        ..VersionEdit::default()
                    },
                };
                (*id, ks)
            })
            .collect(),
        recovery_mode: options.wal_recovery_mode,
        max_seqno,
        horizon: versions.last_seqno(),
        next_seqno: None,
        stop: false,
        read_only,
        unreplayed_tail: None,
        lost_tables: fs
            .list_dir(&dir.join(filename::LOST_DIR))
            .is_ok_and(|entries| !entries.is_empty()),
        manifest_tail: ignored_manifest_tail
            .clone()
            .map(|(path, offset)| (path, offset, unnamed_tables)),
    };
    for (i, &number) in wals.iter().enumerate() {
        let newest = i + 1 == wals.len();
        replay.replay_wal(number, newest, &mut versions)?;
    }
    let max_seqno = replay.max_seqno;
    let unreplayed_wal_tail = replay.unreplayed_tail.take();

    versions.set_last_seqno(max_seqno);
    let mut states = BTreeMap::new();
    let (wal_writer, wal_number) = if read_only {
        // Everything replayed stays in memory, as each keyspace's active memtable.
        for (id, name) in keyspaces {
            let (Some(ks), Some(version)) = (replay.keyspaces.remove(&id), versions.current_of(id))
            else {
                continue;
            };
            let state = KeyspaceState::with_memtable(id, name, ks.options, version, ks.mem);
            states.insert(id, Arc::new(state));
        }
        (None, FileNumber(0))
    } else {
        // Start a fresh WAL and record the recovered state, one edit per keyspace. A crash
        // between two of them is harmless: the old WALs stay until all are durable, and a
        // keyspace whose edit is missing replays them again.
        let wal_number = versions.new_file_number();
        let wal_writer = wal::Writer::create(&*fs, &filename::wal_path(&dir, wal_number))?;
        for (id, name) in keyspaces {
            let Some(mut ks) = replay.keyspaces.remove(&id) else {
                continue;
            };
            replay_flush(&dir, &mut ks, &mut versions)?;
            ks.edit.log_number = Some(wal_number);
            let version = versions.log_and_apply(ks.edit)?;
            states.insert(
                id,
                Arc::new(KeyspaceState::new(id, name, ks.options, version)),
            );
        }
        filename::sync_dir(&*fs, &dir)?;
        delete_obsolete_files(&*fs, &dir, &versions, wal_number)?;
        (Some(wal_writer), wal_number)
    };
    let default_ks = states.get(&DEFAULT_KEYSPACE).cloned().ok_or_else(|| {
        Error::corruption(
            filename::manifest_path(&dir, versions.manifest_number()),
            0,
            "the manifest has no default keyspace",
        )
    })?;

    let block_cache = match &options.block_cache {
        Some(shared) => shared.sharing(),
        None => BlockCache::new(options.block_cache_size),
    };
    // A read-only open opens every table now and keeps them all open when the process may
    // hold that many files: the writer beside it may delete a table its compactions replaced
    // at any moment, and an open file stays readable after its name is gone. (A table deleted
    // before this point fails the open, which then starts over; see `open`.) With more
    // tables than that, they are opened as reads need them, as in a writing open.
    let fd_budget = table_file_budget();
    let cache_capacity = match &options.table_cache {
        Some(shared) => shared.capacity(),
        None => options.max_open_files,
    }
    .min(fd_budget);
    let mut tables: Vec<Arc<crate::version::FileMeta>> = if read_only {
        states
            .values()
            .flat_map(|ks| {
                let sv = ks.super_version();
                sv.version
                    .levels
                    .iter()
                    .flatten()
                    .cloned()
                    .collect::<Vec<_>>()
            })
            .collect()
    } else {
        Vec::new()
    };
    // A table cache of its own grows to hold them all; a shared one keeps its capacity, and
    // tables opened beyond it would only push out the other databases' tables.
    let preopen_limit = if options.table_cache.is_some() {
        cache_capacity
    } else {
        fd_budget
    };
    if tables.len() > preopen_limit {
        tracing::info!(
            tables = tables.len(),
            budget = fd_budget,
            "more tables than open files allowed: the read-only open opens them as needed"
        );
        tables.clear();
    }
    let table_cache = match &options.table_cache {
        Some(shared) => TableCache::sharing(shared, Arc::clone(&fs), dir.clone(), block_cache),
        None => TableCache::new(
            Arc::clone(&fs),
            dir.clone(),
            cache_capacity.max(tables.len()),
            block_cache,
        ),
    };
    for file in &tables {
        table_cache.get(file)?;
    }
    tracing::debug!(dir = %dir.display(), last_seqno = max_seqno.get(), wal = %wal_number, "database opened");
    let inner = Arc::new(DbInner {
        dir,
        ignored_manifest_tail,
        unreplayed_wal_tail,
        lock_file: Mutex::new(lock),
        visible_seqno: AtomicU64::new(max_seqno.get()),
        default_ks,
        keyspaces: RwLock::new(states),
        queue: Mutex::new(WriteQueue::default()),
        committer_cv: Condvar::new(),
        committer_started: AtomicBool::new(false),
        log: Mutex::new(LogState {
            wal: wal_writer,
            wal_number,
            sealed_wals: BTreeMap::new(),
            last_seqno: max_seqno,
        }),
        versions: Mutex::new(versions),
        table_cache,
        snapshots: Arc::new(SnapshotList::default()),
        bg: Mutex::new(BgState::default()),
        bg_cv: Condvar::new(),
        bg_threads: Mutex::new(Vec::new()),
        live_versions: Mutex::new(Vec::new()),
        pending_deletes: Mutex::new(Vec::new()),
        pending_compaction_bytes: AtomicU64::new(0),
        poison: Mutex::new(None),
        dropped_keyspaces: Mutex::new(BTreeMap::new()),
        closed: AtomicBool::new(false),
        stats: Stats::default(),
        options,
    });
    for ks in inner.all_keyspaces() {
        inner.track_version(&ks.super_version().version);
    }
    inner.refresh_pending_compaction_bytes();
    if read_only {
        tracing::debug!(dir = %inner.dir.display(), "database opened read-only");
        return Ok(inner);
    }
    let handles = spawn_background(&inner)?;
    *inner.bg_threads.lock() = handles;
    // Work may be due right away (level 0 over its trigger after recovery).
    inner.wake_background();
    Ok(inner)
}

/// Lists the directory entries Strata owns.
fn list_dir(fs: &dyn FileSystem, dir: &Path) -> Result<Vec<(PathBuf, bool, FileKind)>> {
    let mut out = Vec::new();
    for entry in fs.list_dir(dir).ctx(dir)? {
        let name = entry.path.file_name().and_then(|n| n.to_str());
        if let Some(kind) = name.and_then(filename::parse) {
            out.push((entry.path, entry.is_dir, kind));
        }
    }
    Ok(out)
}

/// The tables an open moved to [`filename::LOST_DIR`] (see [`KeptTables::move_unnamed`]).
/// Dropped before [`KeptTables::keep`] (the open failed before the manifest was rewritten), it
/// moves them back, so such a failed open leaves the tables where they were.
struct KeptTables {
    fs: Arc<dyn FileSystem>,
    /// Each table's number, and its path in the database directory and in `lost/`.
    moved: Vec<(FileNumber, PathBuf, PathBuf)>,
    /// Whether a drop moves the tables back (until [`KeptTables::keep`]).
    armed: bool,
}

impl KeptTables {
    fn none(fs: &Arc<dyn FileSystem>) -> Self {
        KeptTables {
            fs: Arc::clone(fs),
            moved: Vec::new(),
            armed: true,
        }
    }

    /// Moves the tables in `dir` that `named` (the tables the manifest's records name) does
    /// not hold to `lost/`. Called when the manifest's damaged last record is ignored, before
    /// the manifest is rewritten: that record may have been an acknowledged edit that added
    /// them (bit rot of an fsynced record looks like a torn append), and then they hold the
    /// only copy of their data. A name already taken in `lost/` (a table kept by an earlier
    /// open of a copied or restored directory) gets a suffix: `000012.sst.2`, `.3`, ...
    ///
    /// # Errors
    /// [`Error::Io`] when `lost/` cannot be created or a table not moved into it (a file
    /// named `lost`, a full disk): the open fails before anything is written.
    fn move_unnamed(&mut self, dir: &Path, named: &HashSet<FileNumber>) -> Result<()> {
        let fs = Arc::clone(&self.fs);
        let lost = dir.join(filename::LOST_DIR);
        for (path, _, kind) in list_dir(&*fs, dir)? {
            let FileKind::Table(n) = kind else { continue };
            if named.contains(&n) {
                continue;
            }
            if self.moved.is_empty() {
                fs.create_dir_all(&lost).ctx(&lost)?;
            }
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            let mut to = lost.join(&*name);
            let mut suffix = 1u32;
            while fs.exists(&to) {
                suffix += 1;
                to = lost.join(format!("{name}.{suffix}"));
            }
            fs.rename(&path, &to).ctx(&path)?;
            self.moved.push((n, path, to));
        }
        if !self.moved.is_empty() {
            // Both directories, before the manifest is rewritten without the damaged record.
            filename::sync_dir(&*fs, &lost)?;
            filename::sync_dir(&*fs, dir)?;
        }
        Ok(())
    }

    fn numbers(&self) -> impl Iterator<Item = FileNumber> + '_ {
        self.moved.iter().map(|(n, _, _)| *n)
    }

    /// The manifest has been rewritten without the damaged record: the tables stay in
    /// `lost/` whatever happens to the open from here.
    fn keep(&mut self) {
        self.armed = false;
        for (_, from, to) in &self.moved {
            tracing::warn!(
                table = %from.display(),
                moved_to = %to.display(),
                "the manifest's damaged last record was ignored and no record names this \
                 table: kept in case the record was an acknowledged edit that added it"
            );
        }
    }
}

impl Drop for KeptTables {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        for (_, from, to) in self.moved.drain(..).rev() {
            if let Err(e) = self.fs.rename(&to, &from) {
                tracing::warn!(table = %to.display(), error = %e, "could not move a table back from lost/ after a failed open");
            }
        }
    }
}

/// Deletes files no longer needed: tables the version does not reference, WALs other than the
/// active one, manifests other than the live one, temporary files.
fn delete_obsolete_files(
    fs: &dyn FileSystem,
    dir: &Path,
    versions: &VersionSet,
    active_wal: FileNumber,
) -> Result<()> {
    let live = versions.live_files();
    for (path, is_dir, kind) in list_dir(fs, dir)? {
        let obsolete = match kind {
            FileKind::Table(n) | FileKind::Manifest(n) => !live.contains(&n),
            FileKind::Wal(n) => n != active_wal,
            FileKind::Temp => true,
            FileKind::Current | FileKind::Lock => false,
        };
        if obsolete {
            tracing::debug!(path = %path.display(), "deleting obsolete file");
            // A `*.tmp` directory is scratch space of an interrupted `strata load` or SQL index
            // build.
            let removed = if kind == FileKind::Temp && is_dir {
                fs.remove_dir_all(&path)
            } else {
                fs.remove_file(&path)
            };
            if let Err(e) = removed {
                tracing::warn!(path = %path.display(), error = %e, "could not delete obsolete file");
            }
        }
    }
    Ok(())
}

/// One keyspace's replay state.
struct ReplayKeyspace {
    options: Options,
    /// Entries from WALs numbered below this are already in the keyspace's tables.
    log_number: FileNumber,
    mem: Arc<MemTable>,
    /// The tables replay has written for the keyspace so far.
    edit: VersionEdit,
}

/// A hole's reason from [`Replay::follows`] without its guess at the cause (the text in
/// parentheses), for an error that gives the cause itself.
fn hole_without_cause(reason: &str) -> &str {
    reason.split(" (").next().unwrap_or(reason)
}

struct Replay<'a> {
    fs: &'a dyn FileSystem,
    dir: &'a Path,
    keyspaces: BTreeMap<u32, ReplayKeyspace>,
    recovery_mode: WalRecoveryMode,
    max_seqno: SeqNo,
    /// The manifest's last sequence number (every table's and ingest's; a flush records its
    /// table's largest, not the last one handed out): numbers up to it may be missing from the
    /// WALs (an ingest takes one without a WAL record).
    horizon: SeqNo,
    /// The first sequence number of the next WAL record, from the record before it.
    next_seqno: Option<SeqNo>,
    /// Set in point-in-time mode after the first damaged record: nothing later is applied.
    stop: bool,
    /// A read-only open: nothing is flushed during replay and a torn tail is not cut off.
    read_only: bool,
    /// In a read-only open, the newest WAL and the offset of the partial or damaged record
    /// it ends with (not replayed, not cut off): what `Db::unreplayed_wal_tail` reports.
    unreplayed_tail: Option<(PathBuf, u64)>,
    /// The manifest and offset of its damaged last record, when the open ignored one: a hole
    /// in the WALs is then most likely that record's doing (it named the table a flush wrote
    /// the missing records to), and the error names it instead of blaming a deleted WAL.
    /// With it, the tables no manifest record names (where they are now).
    manifest_tail: Option<(PathBuf, u64, Vec<PathBuf>)>,
    /// `lost/` holds tables: an earlier open ignored a damaged last manifest record and kept
    /// the tables it may have added there, which explains a hole better than a deleted WAL.
    lost_tables: bool,
}

impl Replay<'_> {
    fn replay_wal(
        &mut self,
        number: FileNumber,
        newest: bool,
        versions: &mut VersionSet,
    ) -> Result<()> {
        let path = filename::wal_path(self.dir, number);
        // Beside a live writer (a read-only open) the log grows while it is read: only the
        // bytes there now are replayed, so a record being appended is a torn tail, never a
        // half-read record that a later intact one seems to follow.
        let end = if self.read_only {
            self.fs.file_size(&path).ctx(&path)?
        } else {
            u64::MAX
        };
        let mut reader = wal::Reader::open_prefix(self.fs, &path, end)?;
        let mut records = 0u64;
        loop {
            let outcome = reader.next_outcome()?;
            let (offset, reason) = match outcome {
                ReadOutcome::Eof => break,
                ReadOutcome::Record { offset, payload } => {
                    if self.stop {
                        continue;
                    }
                    match WriteBatch::from_data(payload) {
                        Ok(batch) => {
                            if !self.follows(&batch, &path, offset)? {
                                continue;
                            }
                            self.apply(batch, number, offset, versions)?;
                            records += 1;
                            continue;
                        }
                        // A record that passes its checksum was written whole: a payload that
                        // does not decode is corruption, never a torn tail (wal.md section 8).
                        Err(reason)
                            if self.recovery_mode == WalRecoveryMode::TolerateCorruptedTail =>
                        {
                            return Err(Error::corruption(
                                &path,
                                offset,
                                format!("bad batch in a record with a valid checksum: {reason}"),
                            ));
                        }
                        Err(reason) => (offset, format!("bad batch: {reason}")),
                    }
                }
                ReadOutcome::Bad { offset, reason, .. } => (offset, reason),
            };
            if self.stop {
                continue;
            }
            match self.recovery_mode {
                WalRecoveryMode::AbsoluteConsistency => {
                    return Err(Error::corruption(&path, offset, reason));
                }
                WalRecoveryMode::SkipAnyCorruptedRecords => {
                    tracing::warn!(path = %path.display(), offset, %reason, "skipping damaged WAL record");
                }
                WalRecoveryMode::PointInTime => {
                    tracing::warn!(path = %path.display(), offset, %reason, "WAL damaged; recovering to the point before it");
                    self.stop = true;
                }
                WalRecoveryMode::TolerateCorruptedTail => {
                    if !newest || has_valid_record_after(&mut reader)? {
                        return Err(Error::corruption(&path, offset, reason));
                    }
                    if let Some(at) =
                        wal::scan::later_record_start_before(self.fs, &path, offset, end)?
                    {
                        return Err(Error::corruption(
                            &path,
                            offset,
                            format!(
                                "{reason}; the skipped bytes hold an intact record at byte {at}, so \
                                 this is damage, not a torn tail"
                            ),
                        ));
                    }
                    if self.read_only {
                        // Most likely a record the writer beside us is appending; nothing
                        // is dropped.
                        tracing::debug!(path = %path.display(), offset, %reason, "not replaying a partial WAL record");
                        self.unreplayed_tail = Some((path.clone(), offset));
                    } else {
                        tracing::warn!(path = %path.display(), offset, %reason, "dropping torn WAL tail");
                        truncate(self.fs, &path, offset)?;
                    }
                    break;
                }
            }
        }
        tracing::debug!(wal = %number, records, "replayed WAL");
        Ok(())
    }

    /// Checks that `batch` (at `offset` of WAL `path`) continues the record replayed before it
    /// without a hole: its first sequence number is the next one, or every number skipped is
    /// at or below the manifest's horizon. The first record replayed has no record before it:
    /// every number below it must be at or below the horizon (the WALs before it were deleted
    /// once every live keyspace had flushed past them, and dropping a keyspace raises the
    /// horizon over the writes it had only in WALs). A hole means records are missing before
    /// this one (an older WAL cut short, one between two others deleted, or a WAL deleted
    /// after a flush whose manifest edit was then lost): `Corruption`, except that
    /// point-in-time recovery stops before it (returns false, and nothing later is applied)
    /// and `SkipAnyCorruptedRecords` accepts it.
    fn follows(&mut self, batch: &WriteBatch, path: &Path, offset: u64) -> Result<bool> {
        let count = batch.len() as u64;
        if count == 0 {
            return Ok(true);
        }
        let first = batch.seqno();
        let skipped_above_horizon = first.get().saturating_sub(1) > self.horizon.get();
        let cause = if self.lost_tables {
            "most likely the flush whose manifest edit an earlier open found damaged and \
             dropped: lost/ holds the tables it kept then (`strata check` lists them)"
        } else {
            "a WAL was deleted by hand, or after a flush whose manifest edit is missing"
        };
        let hole = match self.next_seqno {
            // Records below the horizon may come first: a keyspace that has not flushed them
            // beside one that flushed later writes.
            None if skipped_above_horizon => Some((
                format!(
                    "records with sequence numbers {} to {} are in no table and no WAL \
                     ({cause})",
                    self.horizon.get() + 1,
                    first.get() - 1
                ),
                true,
            )),
            None => None,
            Some(expected) if first < expected => Some((
                format!(
                    "sequence numbers go backwards: {} after records up to {}",
                    first.get(),
                    expected.get() - 1
                ),
                false,
            )),
            Some(expected) if first > expected && skipped_above_horizon => Some((
                format!(
                    "records with sequence numbers {} to {} are missing before this one (an \
                     older WAL cut short, or one between two others deleted)",
                    expected.get().max(self.horizon.get() + 1),
                    first.get() - 1
                ),
                true,
            )),
            Some(_) => None,
        };
        self.next_seqno = Some(SeqNo(first.get().saturating_add(count)));
        let Some((reason, missing)) = hole else {
            return Ok(true);
        };
        match self.recovery_mode {
            WalRecoveryMode::SkipAnyCorruptedRecords => {
                tracing::warn!(path = %path.display(), offset, %reason, "replaying past a gap in the WAL");
                Ok(true)
            }
            WalRecoveryMode::PointInTime => {
                tracing::warn!(path = %path.display(), offset, %reason, "WAL has a gap; recovering to the point before it");
                self.stop = true;
                Ok(false)
            }
            WalRecoveryMode::TolerateCorruptedTail | WalRecoveryMode::AbsoluteConsistency => {
                match &self.manifest_tail {
                    Some((manifest, tail, unnamed)) if missing => {
                        let tables = if unnamed.is_empty() {
                            "no table file is left that the manifest does not name".to_owned()
                        } else {
                            let names: Vec<String> =
                                unnamed.iter().map(|t| t.display().to_string()).collect();
                            format!(
                                "the tables the manifest does not name: {}",
                                names.join(", ")
                            )
                        };
                        Err(Error::corruption(
                            manifest,
                            *tail,
                            format!(
                                "the damaged last record here was ignored (a crash cut its \
                                 write short, or the disk damaged it), and without it the WALs \
                                 have a hole before {} (byte offset {offset}): {}. That record \
                                 most likely named the table a flush wrote them to ({tables}; \
                                 read them with `strata sst-dump --entries`). Restore the \
                                 database from a backup or checkpoint, or salvage those tables",
                                path.display(),
                                hole_without_cause(&reason),
                            ),
                        ))
                    }
                    _ => Err(Error::corruption(path, offset, reason)),
                }
            }
        }
    }

    /// Inserts `batch`, the record at `offset` of WAL `wal`, into the memtables of the
    /// keyspaces it names that have not flushed past that WAL (entries of dropped keyspaces are
    /// skipped), flushing a memtable that reached its size.
    ///
    /// # Errors
    /// [`Error::Corruption`] naming the WAL when a writing open meets a keyspace id above every
    /// id the manifest assigned (a read-only open skips it: a writer may have created the
    /// keyspace after the reader read the manifest); flush errors.
    fn apply(
        &mut self,
        batch: WriteBatch,
        wal: FileNumber,
        offset: u64,
        versions: &mut VersionSet,
    ) -> Result<()> {
        let first = batch.seqno();
        let count = batch.len() as u64;
        if count > 0 {
            let last = first
                .checked_add(count - 1)
                .ok_or(Error::SeqNoExhausted { last: first.get() })?;
            self.max_seqno = self.max_seqno.max(last);
        }
        let keyspaces = &self.keyspaces;
        let max_id = versions.max_keyspace_id();
        let unknown = std::cell::Cell::new(None);
        insert_batch(Bytes::from(batch.into_data()), first, |id| {
            if id > max_id {
                unknown.set(Some(id));
                return None;
            }
            let ks = keyspaces.get(&id)?;
            (wal >= ks.log_number).then(|| Arc::clone(&ks.mem))
        })?;
        if let Some(id) = unknown.get()
            && !self.read_only
        {
            return Err(Error::corruption(
                filename::wal_path(self.dir, wal),
                offset,
                format!(
                    "a record writes to keyspace {id}, but the manifest never assigned an id \
                     above {max_id} (a record from another database, or damage)"
                ),
            ));
        }
        for ks in self.keyspaces.values_mut() {
            // As much as a background flush writes to one table (several memtables' worth
            // with `min_write_buffer_number_to_merge`).
            if !self.read_only && ks.mem.approximate_size() >= ks.options.flush_size() {
                replay_flush(self.dir, ks, versions)?;
            }
        }
        Ok(())
    }
}

/// Writes a replayed keyspace memtable to a level-0 table, recorded in the keyspace's edit.
fn replay_flush(dir: &Path, ks: &mut ReplayKeyspace, versions: &mut VersionSet) -> Result<()> {
    if ks.mem.is_empty() {
        return Ok(());
    }
    let number = versions.new_file_number();
    let mem = std::mem::replace(&mut ks.mem, Arc::new(MemTable::new()));
    if let Some(meta) = write_level0_table(dir, &ks.options, &[&*mem], number)? {
        ks.edit.add_file(0, meta);
    }
    Ok(())
}

/// True if any intact record follows the current position (the damage is not at the tail).
fn has_valid_record_after(reader: &mut wal::Reader) -> Result<bool> {
    loop {
        match reader.next_outcome()? {
            ReadOutcome::Record { .. } => return Ok(true),
            ReadOutcome::Bad { .. } => {}
            ReadOutcome::Eof => return Ok(false),
        }
    }
}

/// Cuts a WAL at `len` bytes and syncs it, so a second crash cannot resurrect the tail.
fn truncate(fs: &dyn FileSystem, path: &Path, len: u64) -> Result<()> {
    let mut file = fs.open_writable(path).ctx(path)?;
    file.truncate(len).ctx(path)?;
    file.sync().ctx(path)
}
