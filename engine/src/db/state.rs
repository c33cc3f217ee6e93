//! The shared state behind a [`crate::Db`] and the locks that guard it.

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, RwLock};

use super::write::PendingWrite;
use crate::cache::TableCache;
use crate::error::{Error, Result};
use crate::fs::{FileLock, FileSystem};
use crate::memtable::MemTable;
use crate::options::Options;
use crate::snapshot::{Snapshot, SnapshotList};
use crate::types::{FileNumber, SeqNo};
use crate::version::{Version, VersionSet};
use crate::wal;

/// What a poisoned database's error says when a write, fsync or manifest update failed.
pub(crate) const DOUBT_ADVICE: &str = "the durable state is in doubt: close and reopen the \
     database to recover from its files (free disk space first if the disk is full)";

/// What a resumable poisoning's error says: the WAL could not be written for want of space or
/// quota, but every acknowledged write is whole in the memtables.
pub(crate) const RESUME_ADVICE: &str = "writes are refused until disk space is freed; then \
     the database takes writes again by itself within seconds (it first writes its memtables \
     to tables, so the freed space must hold them)";

/// Why writes stopped: the first failure, and whether [`DbInner::resume`] may clear it.
#[derive(Debug, Clone)]
pub(crate) struct Poison {
    /// What failed first, and what to do about it.
    pub(crate) reason: String,
    /// A WAL append, fsync or creation, or a manifest append, failed for want of a resource
    /// ([`Error::is_resource_exhausted`]): the memtables hold every acknowledged write whole
    /// and the version set every installed edit, so a new manifest, flushing the memtables and
    /// starting a new WAL clear it. Damaged data and other I/O errors are not resumable: only
    /// a reopen, which reads the files again, is.
    pub(crate) resumable: bool,
}

impl Poison {
    /// The error a refused write gets.
    pub(crate) fn error(&self) -> Error {
        Error::Poisoned {
            reason: self.reason.clone(),
            resumable: self.resumable,
        }
    }
}

/// An immutable memtable waiting to be flushed, with the WALs that hold its writes.
#[derive(Debug)]
pub(crate) struct ImmMemTable {
    pub(crate) mem: Arc<MemTable>,
    /// The WAL that was active when the memtable was frozen: the newest one holding its
    /// writes. Once the memtable is in a table, the keyspace's log number becomes this plus one.
    pub(crate) wal_number: FileNumber,
    /// The WAL that was active when the memtable got its first write: the oldest one holding
    /// its writes. WALs from here to `wal_number` are kept until it is flushed.
    pub(crate) first_wal: FileNumber,
}

/// One keyspace's in-memory state: its options and its super version. The default keyspace
/// (id 0) always exists.
pub(crate) struct KeyspaceState {
    pub(crate) id: u32,
    pub(crate) name: String,
    /// The keyspace's options ([`Options::for_keyspace`]).
    pub(crate) options: Options,
    pub(crate) super_version: RwLock<Arc<SuperVersion>>,
    /// Number of the WAL that was active when the active memtable got its first write; 0
    /// while the memtable is empty. Changed only by the holder of the `log` lock.
    pub(crate) mem_first_wal: AtomicU64,
    /// Immutable memtables frozen while the WAL numbered below this was active must be
    /// flushed even when fewer than `min_write_buffer_number_to_merge` wait (an explicit flush
    /// or the WAL size limit asked for it); 0 when nothing was asked. Raised under `log`.
    pub(crate) flush_requested_below: AtomicU64,
    /// Set (under `log` and `versions`) when the keyspace is dropped.
    pub(crate) dropped: AtomicBool,
}

impl std::fmt::Debug for KeyspaceState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyspaceState")
            .field("id", &self.id)
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl KeyspaceState {
    pub(crate) fn new(id: u32, name: String, options: Options, version: Arc<Version>) -> Self {
        let mem = Arc::new(options.new_memtable());
        KeyspaceState::with_memtable(id, name, options, version, mem)
    }

    /// A keyspace whose active memtable is `mem` (a read-only open's replayed WAL records).
    pub(crate) fn with_memtable(
        id: u32,
        name: String,
        options: Options,
        version: Arc<Version>,
        mem: Arc<MemTable>,
    ) -> Self {
        KeyspaceState {
            id,
            name,
            options,
            super_version: RwLock::new(Arc::new(SuperVersion {
                mem,
                imms: Vec::new(),
                version,
            })),
            mem_first_wal: AtomicU64::new(0),
            flush_requested_below: AtomicU64::new(0),
            dropped: AtomicBool::new(false),
        }
    }

    /// The immutable memtables the background should flush now, oldest first: all of them
    /// once there are `min_write_buffer_number_to_merge`, or once the oldest was frozen before
    /// a flush was requested (`flush_requested_below`); else none.
    pub(crate) fn imms_to_flush(&self) -> Vec<Arc<ImmMemTable>> {
        let sv = self.super_version();
        let Some(oldest) = sv.imms.last() else {
            return Vec::new();
        };
        let requested = oldest.wal_number.0 < self.flush_requested_below.load(Ordering::Acquire);
        if sv.imms.len() < self.options.min_write_buffer_number_to_merge && !requested {
            return Vec::new();
        }
        sv.imms.iter().rev().cloned().collect()
    }

    /// Asks for every immutable memtable frozen so far to be flushed (see
    /// `flush_requested_below`); `active_wal` is the WAL now active. Returns true when this
    /// asked for more than before. Call under the `log` lock.
    pub(crate) fn request_flush(&self, active_wal: FileNumber) -> bool {
        self.flush_requested_below
            .fetch_max(active_wal.0, Ordering::AcqRel)
            < active_wal.0
    }

    /// The current super version (a cheap `Arc` clone under a read lock).
    pub(crate) fn super_version(&self) -> Arc<SuperVersion> {
        Arc::clone(&self.super_version.read())
    }

    /// Replaces the version, keeping the memtables.
    pub(crate) fn install_version(&self, version: Arc<Version>) {
        let mut sv = self.super_version.write();
        *sv = Arc::new(SuperVersion {
            mem: Arc::clone(&sv.mem),
            imms: sv.imms.clone(),
            version,
        });
    }

    pub(crate) fn is_dropped(&self) -> bool {
        self.dropped.load(Ordering::Acquire)
    }

    /// [`Error::InvalidArgument`] once the keyspace is dropped.
    pub(crate) fn check_live(&self) -> Result<()> {
        if self.is_dropped() {
            return Err(Error::InvalidArgument(format!(
                "keyspace {:?} was dropped",
                self.name
            )));
        }
        Ok(())
    }

    /// The oldest WAL holding a write of this keyspace that is not in a table yet, if any.
    /// Exact under the `log` lock.
    pub(crate) fn oldest_needed_wal(&self) -> Option<FileNumber> {
        let sv = self.super_version();
        let mem = match self.mem_first_wal.load(Ordering::Acquire) {
            0 => None,
            n => Some(FileNumber(n)),
        };
        sv.imms.iter().map(|imm| imm.first_wal).chain(mem).min()
    }
}

/// What a read needs, captured together: the active memtable, the immutable memtables (newest
/// first) and the current version. Swapped as a whole, so a reader never sees a memtable's data
/// both in a table and missing from the memtable list, or neither.
#[derive(Debug)]
pub(crate) struct SuperVersion {
    pub(crate) mem: Arc<MemTable>,
    pub(crate) imms: Vec<Arc<ImmMemTable>>,
    pub(crate) version: Arc<Version>,
}

/// State touched only by the group-commit leader (and by `flush`/`close`, which take the lock
/// the same way): the active WAL and its memtable.
#[derive(Debug)]
pub(crate) struct LogState {
    pub(crate) wal: Option<wal::Writer>,
    pub(crate) wal_number: FileNumber,
    /// Earlier WALs not deleted yet, with their sizes in bytes, oldest first.
    pub(crate) sealed_wals: BTreeMap<FileNumber, u64>,
    /// Last sequence number assigned (may run ahead of the visible one while a group commits).
    pub(crate) last_seqno: SeqNo,
}

/// Group-commit queue.
#[derive(Default)]
pub(crate) struct WriteQueue {
    pub(crate) pending: VecDeque<PendingWrite>,
    pub(crate) leader_active: bool,
    /// Leadership was handed to the committer thread.
    pub(crate) committer_lead: bool,
    /// The database is closing: the committer exits once it is not leading.
    pub(crate) committer_stop: bool,
}

/// Background jobs of one kind (flushes or automatic compactions) waiting after failing for
/// want of a resource (a full disk, too many open files; [`Error::is_resource_exhausted`]):
/// such a job changed nothing, so it is retried after a wait that doubles with each failure
/// in a row, from 1 s up to a cap (8 s for flushes, which writers may be held on; 64 s for
/// compactions, which may write much before failing again), instead of poisoning the
/// database.
#[derive(Debug, Default)]
pub(crate) struct ResourceRetry {
    /// When the next job may start, and the last failure's error.
    pub(crate) waiting: Option<(Instant, Error)>,
    /// Failures in a row; 0 after a success.
    pub(crate) failures: u32,
}

impl ResourceRetry {
    /// The wait after the `n`th attempt in a row (from 1): 1 s, doubling with each further
    /// one, at most `cap`. Automatic resumes wait the same way.
    pub(crate) fn backoff(n: u32, cap: Duration) -> Duration {
        (Duration::from_secs(1) * (1u32 << n.saturating_sub(1).min(6))).min(cap)
    }

    /// No wait is running out: a job may start.
    pub(crate) fn is_due(&self) -> bool {
        self.waiting
            .as_ref()
            .is_none_or(|(at, _)| Instant::now() >= *at)
    }

    /// The error jobs are waiting after, if any.
    pub(crate) fn error(&self) -> Option<&Error> {
        self.waiting.as_ref().map(|(_, e)| e)
    }

    /// Records the job `what` failing with `e`, the next waiting at most `cap`; `jobs` names
    /// the kind in the log ("flushes").
    pub(crate) fn failed(&mut self, what: &str, jobs: &str, e: Error, cap: Duration) {
        self.failures = self.failures.saturating_add(1);
        let wait = Self::backoff(self.failures, cap);
        tracing::warn!(
            error = %e,
            retry_in_secs = wait.as_secs(),
            failures = self.failures,
            "{what} failed for want of a resource; {jobs} wait, then retry"
        );
        self.waiting = Some((Instant::now() + wait, e));
    }

    /// Lets the next job start at once (space may be back: a resume succeeded, or a caller
    /// asks for the job).
    pub(crate) fn retry_now(&mut self) {
        if let Some((at, _)) = self.waiting.as_mut() {
            *at = Instant::now();
        }
    }

    /// Records the job `what` succeeding: the waits end.
    pub(crate) fn succeeded(&mut self, what: &str, jobs: &str) {
        if self.failures > 0 {
            tracing::info!(
                failures = self.failures,
                "{what} succeeded: {jobs} go on again"
            );
        }
        *self = ResourceRetry::default();
    }
}

/// Background-work state, guarded by `DbInner::bg` and signalled through `DbInner::bg_cv`.
#[derive(Debug, Default)]
pub(crate) struct BgState {
    pub(crate) shutting_down: bool,
    pub(crate) flush_running: bool,
    /// Bumped after every finished flush, so waiters can tell progress happened.
    pub(crate) flushes_done: u64,
    /// Compactions running now.
    pub(crate) compactions_running: usize,
    /// Bumped after every finished compaction.
    pub(crate) compactions_done: u64,
    /// Tables that running compactions read or replace.
    pub(crate) busy: std::collections::HashSet<FileNumber>,
    /// A manual compaction is running; automatic ones are not picked meanwhile.
    pub(crate) manual_compaction: bool,
    /// Index (in id order) of the keyspace the next automatic compaction search starts at.
    pub(crate) next_keyspace: usize,
    /// Automatic compactions waiting after failing for want of a resource; the error goes to
    /// writers held at a hard limit (`level0_stop_writes_trigger`) meanwhile.
    pub(crate) compaction_retry: ResourceRetry,
    /// Flushes waiting after failing for want of a resource; the error goes to writers held
    /// at `max_write_buffer_number` meanwhile.
    pub(crate) flush_retry: ResourceRetry,
    /// A background thread runs [`DbInner::resume`] ([`crate::Options::auto_resume`]).
    pub(crate) resume_running: bool,
    /// When the next automatic resume may run.
    pub(crate) resume_at: Option<std::time::Instant>,
    /// When the last automatic resume ran.
    pub(crate) last_resume: Option<std::time::Instant>,
    /// Automatic resumes in a row, each within a minute of the one before (the wait after
    /// each doubles, up to 8 s).
    pub(crate) resume_attempts: u32,
    /// Flushes failed for want of a resource since the open (never reset), so `Db::flush`
    /// can tell a failure of its own flush from an earlier one.
    pub(crate) flush_errors: u64,
}

/// Everything shared by the user handles and the background thread.
pub(crate) struct DbInner {
    pub(crate) dir: PathBuf,
    pub(crate) options: Options,
    /// The manifest and offset of a damaged last record the open ignored (a torn append, or
    /// bit rot of an acknowledged edit): what `Db::ignored_manifest_tail` reports.
    pub(crate) ignored_manifest_tail: Option<(PathBuf, u64)>,
    /// In a read-only open, the newest WAL and the offset of the partial or damaged record it
    /// ends with, not replayed: what `Db::unreplayed_wal_tail` reports.
    pub(crate) unreplayed_wal_tail: Option<(PathBuf, u64)>,
    /// The flock'd `LOCK` file; taken out (releasing the lock) by `close`.
    pub(crate) lock_file: Mutex<Option<Box<dyn FileLock>>>,
    /// Last sequence number whose write is fully in the memtable: reads see up to here.
    pub(crate) visible_seqno: AtomicU64,
    /// The default keyspace (also in `keyspaces`).
    pub(crate) default_ks: Arc<KeyspaceState>,
    /// Every live keyspace by id. Lock order: after `versions`.
    pub(crate) keyspaces: RwLock<BTreeMap<u32, Arc<KeyspaceState>>>,
    pub(crate) queue: Mutex<WriteQueue>,
    /// Signals the committer thread (with `queue`).
    pub(crate) committer_cv: Condvar,
    /// The committer thread was started (by the first `write_async`).
    pub(crate) committer_started: AtomicBool,
    pub(crate) log: Mutex<LogState>,
    pub(crate) versions: Mutex<VersionSet>,
    pub(crate) table_cache: Arc<TableCache>,
    pub(crate) snapshots: Arc<SnapshotList>,
    pub(crate) bg: Mutex<BgState>,
    pub(crate) bg_cv: Condvar,
    pub(crate) bg_threads: Mutex<Vec<JoinHandle<()>>>,
    /// Every installed version, weakly: tables of versions still alive are not deleted.
    pub(crate) live_versions: Mutex<Vec<std::sync::Weak<Version>>>,
    /// Tables waiting to be deleted until no live version references them.
    pub(crate) pending_deletes: Mutex<Vec<FileNumber>>,
    /// Estimated bytes compaction must still rewrite (for write backpressure).
    pub(crate) pending_compaction_bytes: AtomicU64,
    /// First failure that stopped writes (durable state in doubt, or damaged data met by a
    /// background job), with what to do; once set, writes are refused.
    pub(crate) poison: Mutex<Option<Poison>>,
    /// Names of the keyspaces dropped since the open, by id (ids are never reused), so a
    /// write through a dropped keyspace's handle can name it.
    pub(crate) dropped_keyspaces: Mutex<BTreeMap<u32, String>>,
    pub(crate) closed: AtomicBool,
    pub(crate) stats: Stats,
}

/// Counters reported by the database.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    pub(crate) user_bytes: AtomicU64,
    pub(crate) wal_bytes: AtomicU64,
    pub(crate) wal_syncs: AtomicU64,
    pub(crate) flush_bytes: AtomicU64,
    pub(crate) flushes: AtomicU64,
    pub(crate) write_groups: AtomicU64,
    pub(crate) stall_micros: AtomicU64,
    pub(crate) delay_micros: AtomicU64,
    pub(crate) compactions: AtomicU64,
    pub(crate) trivial_moves: AtomicU64,
    pub(crate) compaction_bytes_read: AtomicU64,
    pub(crate) compaction_bytes_written: AtomicU64,
    pub(crate) compaction_micros: AtomicU64,
}

impl DbInner {
    /// The file system every file of the database goes through ([`Options::file_system`]).
    pub(crate) fn fs(&self) -> &dyn FileSystem {
        &*self.options.file_system
    }

    /// Every live keyspace, by id.
    pub(crate) fn all_keyspaces(&self) -> Vec<Arc<KeyspaceState>> {
        self.keyspaces.read().values().cloned().collect()
    }

    /// The live keyspace with id `id`.
    pub(crate) fn keyspace_by_id(&self, id: u32) -> Option<Arc<KeyspaceState>> {
        self.keyspaces.read().get(&id).cloned()
    }

    pub(crate) fn visible_seqno(&self) -> SeqNo {
        SeqNo(self.visible_seqno.load(Ordering::Acquire))
    }

    pub(crate) fn snapshot(&self) -> Snapshot {
        self.snapshots.take(|| self.visible_seqno())
    }

    /// The sequence number a read uses (the snapshot's, or the latest visible one) and the
    /// super version it reads, taken together under the super-version lock. Then a compaction
    /// installed before the read has dropped only versions that a newer version, visible at
    /// this sequence number, shadows; and a memtable switch or flush cannot slip between the two.
    pub(crate) fn read_view(
        &self,
        ks: &KeyspaceState,
        snapshot: Option<&Snapshot>,
    ) -> (SeqNo, Arc<SuperVersion>) {
        let guard = ks.super_version.read();
        let seqno = snapshot.map_or_else(|| self.visible_seqno(), Snapshot::seqno);
        (seqno, Arc::clone(&guard))
    }

    /// [`Error::InvalidArgument`] for a snapshot taken from another database instance (another
    /// database, or an earlier open of this one): its sequence number means nothing here, and
    /// reading at it would return another state than the one it pinned.
    pub(crate) fn check_snapshot(&self, snapshot: Option<&Snapshot>) -> Result<()> {
        match snapshot {
            Some(s) if !s.taken_from(&self.snapshots) => Err(Error::InvalidArgument(
                "the snapshot in ReadOptions was taken from another database, or from an \
                 earlier open of this one"
                    .into(),
            )),
            _ => Ok(()),
        }
    }

    pub(crate) fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        Ok(())
    }

    pub(crate) fn check_writable(&self) -> Result<()> {
        self.check_open()?;
        if self.options.read_only {
            return Err(Error::ReadOnly);
        }
        if let Some(p) = self.poison.lock().as_ref() {
            return Err(p.error());
        }
        Ok(())
    }

    /// Wakes the background threads after a change they act on (a memtable frozen, a flush
    /// requested, a keyspace dropped). The `bg` lock is taken and released first: a background
    /// thread checks for work and starts waiting under that lock, so a change made before this
    /// call is either seen by its check or followed by this notification, never lost between
    /// the two. Never call it while holding `bg`.
    pub(crate) fn wake_background(&self) {
        drop(self.bg.lock());
        self.bg_cv.notify_all();
    }

    /// Records a durability failure (a write, fsync or manifest update that failed, so what
    /// is on disk is in doubt), unless the database is already poisoned; later writes get
    /// [`Error::Poisoned`] with `reason` and what to do. Returns the error writes get now.
    pub(crate) fn set_poison(&self, reason: String) -> Error {
        self.poison_with(format!("{reason}; {DOUBT_ADVICE}"), false)
    }

    /// Poisons the database after the write `what` ("WAL append", "manifest write of a
    /// flush of keyspace \"default\"") failed with `e`, and returns the error writes get now.
    /// A resource running out ([`Error::is_resource_exhausted`]: a full disk, a quota) is
    /// resumable ([`DbInner::resume`]): a failed WAL group reached no memtable and a failed
    /// manifest edit was not installed, and the WAL or manifest with the doubtful tail is
    /// replaced, as RocksDB's `DB::Resume` does after a write error. Any other error is a
    /// durability failure ([`DbInner::set_poison`]).
    pub(crate) fn poison_after(&self, what: &str, e: &Error) -> Error {
        if e.is_resource_exhausted() {
            self.poison_with(format!("{what} failed: {e}; {RESUME_ADVICE}"), true)
        } else {
            self.set_poison(format!("{what} failed: {e}"))
        }
    }

    /// Poisons the database after the manifest write for `what` ("of a flush of keyspace
    /// \"default\"") failed with `e` ([`DbInner::poison_after`]), and returns the
    /// [`Error::Poisoned`] for the caller. The version set is poisoned too (its manifest's tail
    /// is in doubt); a resume writes the state into a new manifest
    /// ([`crate::version::VersionSet::recover_from_failed_write`]). When `e` is the version
    /// set's own refusal ([`Error::Poisoned`]), the database was poisoned with it already.
    pub(crate) fn manifest_write_failed(&self, what: &str, e: &Error) -> Error {
        match e {
            Error::Poisoned { reason, resumable } => {
                let existing = self.poison.lock().as_ref().map(Poison::error);
                existing.unwrap_or_else(|| self.poison_with(reason.clone(), *resumable))
            }
            _ => self.poison_after(&format!("manifest write {what}"), e),
        }
    }

    /// Poisons the database for a failed flush or compaction `what` ("compaction of level 2 of
    /// keyspace \"default\""). Damaged data read by it ([`Error::is_corruption`]) puts nothing
    /// durable in doubt, so the reason says so and points at `strata check` and the damaged
    /// table; writes and background work still stop, as RocksDB stops on a background
    /// `Corruption` error (going on would keep failing on the same table, and a flush would
    /// pile tables onto level 0 that never compact). Any other error is a durability failure
    /// ([`DbInner::set_poison`]).
    pub(crate) fn set_background_error(&self, what: &str, e: &Error) {
        if let Error::Poisoned { reason, .. } = e {
            // Poisoned already (a manifest write of this job failed): the first reason stays,
            // resumable or not.
            if !self.is_poisoned() {
                self.poison_with(reason.clone(), false);
            }
        } else if e.is_corruption() {
            self.poison_with(
                format!(
                    "{what} read damaged data: {e}. Nothing durable is in doubt, but writes and \
                 background work are stopped (reads go on): run `strata check` on the \
                 database, restore the damaged table from a backup or checkpoint (or repair it), \
                 then reopen"
                ),
                false,
            );
        } else {
            self.set_poison(format!("{what} failed: {e}"));
        }
    }

    /// Poisons the database with `reason` (see [`Poison`]) and returns the error writes get
    /// now: the first failure's, unless it was resumable and this one is not.
    fn poison_with(&self, reason: String, resumable: bool) -> Error {
        tracing::error!(%reason, "database poisoned; writes are refused");
        let mut p = self.poison.lock();
        // The first failure stays, unless it was resumable and this one is not: then only a
        // reopen helps, and the reason must say so.
        let in_force = match p.as_ref() {
            Some(old) if !old.resumable || resumable => old.clone(),
            _ => Poison { reason, resumable },
        };
        *p = Some(in_force.clone());
        drop(p);
        self.bg_cv.notify_all();
        in_force.error()
    }

    pub(crate) fn is_poisoned(&self) -> bool {
        self.poison.lock().is_some()
    }

    /// Releases the `LOCK` file.
    pub(crate) fn release_lock(&self) {
        self.lock_file.lock().take();
    }

    /// Closes: stops accepting operations, waits for the background thread, syncs the WAL and
    /// releases the lock. Idempotent.
    pub(crate) fn close(&self) -> Result<()> {
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        {
            let mut bg = self.bg.lock();
            bg.shutting_down = true;
        }
        self.bg_cv.notify_all();
        self.queue.lock().committer_stop = true;
        self.committer_cv.notify_all();
        let handles = std::mem::take(&mut *self.bg_threads.lock());
        for handle in handles {
            // The last handle can be dropped on the committer thread (by a task its wake-up
            // ran): that thread exits by itself once `committer_stop` is seen.
            if handle.thread().id() == std::thread::current().id() {
                continue;
            }
            if handle.join().is_err() {
                tracing::error!("background thread panicked");
            }
        }
        self.delete_obsolete_tables(Vec::new());
        let result = {
            let mut log = self.log.lock();
            match log.wal.as_mut() {
                Some(w) if !self.is_poisoned() => w.sync(),
                _ => Ok(()),
            }
        };
        self.release_lock();
        tracing::debug!(dir = %self.dir.display(), "database closed");
        result
    }
}

/// Makes an equivalent error for every member of a commit group (errors are not `Clone`).
pub(crate) fn share_error(e: &Error) -> Error {
    match e {
        Error::Io { path, source } => Error::Io {
            path: path.clone(),
            // Keep the errno, so every member of the group can tell ENOSPC from EIO.
            source: source.raw_os_error().map_or_else(
                || std::io::Error::new(source.kind(), source.to_string()),
                std::io::Error::from_raw_os_error,
            ),
        },
        Error::Corruption {
            file,
            offset,
            reason,
        } => Error::Corruption {
            file: file.clone(),
            offset: *offset,
            reason: reason.clone(),
        },
        Error::ChecksumMismatch {
            file,
            offset,
            expected,
            actual,
        } => Error::ChecksumMismatch {
            file: file.clone(),
            offset: *offset,
            expected: *expected,
            actual: *actual,
        },
        Error::InvalidArgument(s) => Error::InvalidArgument(s.clone()),
        Error::DuplicateKey { key } => Error::DuplicateKey { key: key.clone() },
        Error::Locked { path } => Error::Locked { path: path.clone() },
        Error::Poisoned { reason, resumable } => Error::Poisoned {
            reason: reason.clone(),
            resumable: *resumable,
        },
        Error::Closed => Error::Closed,
        Error::ReadOnly => Error::ReadOnly,
        Error::SeqNoExhausted { last } => Error::SeqNoExhausted { last: *last },
    }
}
