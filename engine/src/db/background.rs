//! Background work: a small pool of threads (`Options::max_background_jobs`) that run flushes
//! and compactions, flushes first. Also manual compaction (`Db::compact_range`) and the
//! deletion of tables no live version references.
//!
//! A compaction is picked under the `bg` lock with the tables of running compactions marked
//! busy, run without any lock, then its edit is appended to the manifest and the new version
//! installed. Input tables are deleted only when no live version (held by a read, an iterator
//! or a snapshot's super version) references them.

use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Instant;

use super::state::{DbInner, ImmMemTable, KeyspaceState, ResourceRetry};
use crate::compaction::{self, CompactionTask, JobContext};
use crate::error::{Error, Result};
use crate::filename;
use crate::types::{FileNumber, SeqNo};
use crate::version::{NUM_LEVELS, Version, VersionEdit, VersionSet};

/// Longest a background thread (or a flush waiter) sleeps before looking for work again
/// without being woken.
pub(crate) const BACKGROUND_RECHECK: std::time::Duration = std::time::Duration::from_secs(1);

/// Longest wait before a flush that failed for want of a resource is retried: writers held
/// at `max_write_buffer_number` get its error until then.
const FLUSH_RETRY_MAX: std::time::Duration = std::time::Duration::from_secs(8);

/// Longest wait before automatic compactions are retried after one failed for want of a
/// resource: a big compaction may write much before failing again.
const COMPACTION_RETRY_MAX: std::time::Duration = std::time::Duration::from_secs(64);

/// A resume this long after the one before starts a new run of attempts, from the shortest
/// wait ([`crate::Options::auto_resume`]).
const RESUME_RUN_GAP: std::time::Duration = std::time::Duration::from_secs(60);

/// Longest wait between two automatic resumes ([`crate::Options::auto_resume`]): a full disk
/// freed is noticed within this.
const RESUME_RETRY_MAX: std::time::Duration = std::time::Duration::from_secs(8);

/// How [`DbInner::run_compaction_task`] failed.
#[derive(Debug)]
pub(crate) enum CompactionFailure {
    /// The job (reading the inputs, writing the outputs) failed; nothing changed.
    Job(Error),
    /// Logging or installing the job's edit failed.
    Install(Error),
}

impl CompactionFailure {
    fn into_error(self) -> Error {
        match self {
            CompactionFailure::Job(e) | CompactionFailure::Install(e) => e,
        }
    }
}

/// Work a background thread took.
enum Job {
    /// The keyspace and its immutable memtables to merge into one table, oldest first.
    Flush(Arc<KeyspaceState>, Vec<Arc<ImmMemTable>>),
    Compaction(Arc<KeyspaceState>, CompactionTask),
    /// The database is poisoned resumably and [`crate::Options::auto_resume`] is on: try
    /// [`DbInner::resume`].
    Resume,
    /// Idle for [`BACKGROUND_RECHECK`]: delete the obsolete tables whose deletion waited for
    /// readers (an iterator or a read holding an old version) that have finished since.
    DeleteObsolete,
}

/// Starts the background threads.
pub(crate) fn spawn_background(inner: &Arc<DbInner>) -> Result<Vec<JoinHandle<()>>> {
    (0..inner.options.max_background_jobs)
        .map(|i| {
            let inner = Arc::clone(inner);
            std::thread::Builder::new()
                .name(format!("strata-bg-{i}"))
                .spawn(move || background_main(&inner))
                .map_err(|e| Error::io(Path::new("<thread>"), e))
        })
        .collect()
}

fn background_main(inner: &Arc<DbInner>) {
    loop {
        let job = {
            let mut bg = inner.bg.lock();
            loop {
                if bg.shutting_down {
                    return;
                }
                if inner.options.auto_resume
                    && !bg.resume_running
                    && bg.resume_at.is_none_or(|at| Instant::now() >= at)
                    && inner.is_resumable()
                {
                    bg.resume_running = true;
                    break Job::Resume;
                }
                if !inner.is_poisoned() {
                    let keyspaces = inner.all_keyspaces();
                    // The keyspace with the oldest immutable memtable ready to flush first, so
                    // the oldest WAL becomes obsolete first.
                    let oldest = keyspaces
                        .iter()
                        .map(|ks| (ks, ks.imms_to_flush()))
                        .filter(|(_, imms)| !imms.is_empty())
                        .min_by_key(|(_, imms)| imms.first().map(|imm| imm.wal_number));
                    if !bg.flush_running
                        && bg.flush_retry.is_due()
                        && let Some((ks, imms)) = oldest
                    {
                        bg.flush_running = true;
                        break Job::Flush(Arc::clone(ks), imms);
                    }
                    let bg_state = &mut *bg;
                    if !bg_state.manual_compaction
                        && bg_state.compaction_retry.is_due()
                        && bg_state.compactions_running < max_compactions(&inner.options)
                        && let Some((ks, task)) = pick_any_compaction(
                            &keyspaces,
                            &bg_state.busy,
                            &mut bg_state.next_keyspace,
                            inner.snapshots.oldest(),
                        )
                    {
                        for (_, f) in task.all_inputs() {
                            bg.busy.insert(f.number);
                        }
                        bg.compactions_running += 1;
                        break Job::Compaction(ks, task);
                    }
                }
                // Changes are announced by `wake_background`, which cannot be missed; the
                // timeout is a safety net for `set_poison`, which notifies without the lock,
                // and the moment to delete tables whose last reader has gone meanwhile.
                if inner
                    .bg_cv
                    .wait_for(&mut bg, BACKGROUND_RECHECK)
                    .timed_out()
                {
                    break Job::DeleteObsolete;
                }
            }
        };
        match job {
            Job::Resume => {
                // While the disk is still full, an attempt would fail, or succeed with nothing
                // to write and fail again at the next write: wait for space without trying.
                let result = if inner.disk_still_full() {
                    Err(Error::Io {
                        path: inner.dir.clone(),
                        source: std::io::Error::from_raw_os_error(crate::fs::ENOSPC),
                    })
                } else {
                    inner.resume()
                };
                let now = Instant::now();
                let mut bg = inner.bg.lock();
                bg.resume_running = false;
                // Attempts are counted in a row, successes too: a resume that has nothing
                // needing space succeeds on a disk still full, and the next write fails
                // again, so the waits must grow anyway. A database that stayed writable for
                // a while starts over from the shortest wait.
                if bg
                    .last_resume
                    .is_some_and(|at| now.duration_since(at) > RESUME_RUN_GAP)
                {
                    bg.resume_attempts = 0;
                }
                bg.resume_attempts = bg.resume_attempts.saturating_add(1);
                bg.last_resume = Some(now);
                let wait = ResourceRetry::backoff(bg.resume_attempts, RESUME_RETRY_MAX);
                bg.resume_at = Some(now + wait);
                let first = bg.resume_attempts == 1;
                drop(bg);
                match result {
                    Ok(_) => {}
                    Err(e) if e.is_resource_exhausted() && first => {
                        tracing::warn!(error = %e, "resuming writes failed; retrying until it succeeds");
                    }
                    Err(e) if e.is_resource_exhausted() => {
                        tracing::debug!(error = %e, retry_in_secs = wait.as_secs(), "resuming writes failed");
                    }
                    Err(e) => {
                        tracing::error!(error = %e, "resuming writes failed for good: reopen the database");
                    }
                }
                continue;
            }
            Job::DeleteObsolete => {
                // Nothing else to do: no one to wake.
                inner.delete_obsolete_tables(Vec::new());
                continue;
            }
            Job::Flush(ks, imms) => {
                let newest = imms.last().map_or(0, |imm| imm.wal_number.0);
                let what = format!("flush of keyspace {:?} (WALs up to {newest})", ks.name);
                match inner.flush_imms(&ks, &imms) {
                    Ok(()) => inner.bg.lock().flush_retry.succeeded(&what, "flushes"),
                    // The table was not written (its partial file is gone) and nothing was
                    // installed: the memtables stay readable, and the flush is tried again
                    // later. Writers held at `max_write_buffer_number` get the error meanwhile,
                    // and `Db::flush` retries at once (`DbInner::retry_flushes_now`). A failed
                    // manifest edit (`Poisoned`, resumable or not) is not such a failure.
                    Err(e) if e.is_resource_exhausted() && !matches!(e, Error::Poisoned { .. }) => {
                        let mut bg = inner.bg.lock();
                        bg.flush_errors += 1;
                        bg.flush_retry.failed(&what, "flushes", e, FLUSH_RETRY_MAX);
                    }
                    Err(e) => inner.set_background_error(&what, &e),
                }
                let mut bg = inner.bg.lock();
                bg.flush_running = false;
                bg.flushes_done += 1;
            }
            Job::Compaction(ks, task) => {
                // A panic (a merge operator's, which must not panic) poisons the database
                // instead of ending this thread with the task's tables busy and the running
                // count up, which stalled every write for good once level 0 filled.
                let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    inner.run_compaction_task(&ks, &task)
                }))
                .unwrap_or_else(|panic| {
                    let what = panic
                        .downcast_ref::<&str>()
                        .map(|s| (*s).to_owned())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_default();
                    inner.set_poison(format!(
                        "compaction of level {} of keyspace {:?} panicked (does the merge \
                         operator panic?): {what}",
                        task.level, ks.name
                    ));
                    Ok(())
                });
                let what = format!(
                    "compaction of level {} of keyspace {:?}",
                    task.level, ks.name
                );
                match result {
                    Ok(()) => inner
                        .bg
                        .lock()
                        .compaction_retry
                        .succeeded(&what, "automatic compactions"),
                    // The job changed nothing (its inputs stay, its outputs are removed,
                    // nothing was logged): compactions wait, then retry.
                    Err(CompactionFailure::Job(e)) if e.is_resource_exhausted() => inner
                        .bg
                        .lock()
                        .compaction_retry
                        .failed(&what, "automatic compactions", e, COMPACTION_RETRY_MAX),
                    Err(CompactionFailure::Job(e) | CompactionFailure::Install(e)) => {
                        inner.set_background_error(&what, &e);
                    }
                }
                let mut bg = inner.bg.lock();
                for (_, f) in task.all_inputs() {
                    bg.busy.remove(&f.number);
                }
                bg.compactions_running -= 1;
                bg.compactions_done += 1;
                drop(bg);
                // The inputs were busy until now, so their deletion waited.
                inner.delete_obsolete_tables(Vec::new());
            }
        }
        inner.refresh_pending_compaction_bytes();
        inner.wake_background();
    }
}

/// Compactions that may run at once: `max_background_jobs` less the threads kept free for
/// flushes (a quarter, at least one), and at least one. As RocksDB splits
/// `max_background_jobs` into flushes and compactions: with the default of 2, one thread is
/// always free to flush, so a memtable never waits behind two long compactions (that wait was
/// a 4.5 s batch, 13x the median, in the 100 M-record run under a 1 GiB memory cap).
fn max_compactions(options: &crate::Options) -> usize {
    let jobs = options.max_background_jobs;
    jobs.saturating_sub((jobs / 4).max(1)).max(1)
}

/// The first compaction due in any keyspace, starting the search at keyspace index `*next`
/// and moving it on, so that keyspaces take turns; when none is due by size, the first
/// tombstone compaction ([`compaction::pick_tombstone_compaction`], `oldest_snapshot` being
/// the oldest live snapshot's sequence number); when none of those either, the first merge of
/// small tables ([`compaction::pick_small_table_merge`]).
fn pick_any_compaction(
    keyspaces: &[Arc<KeyspaceState>],
    busy: &HashSet<FileNumber>,
    next: &mut usize,
    oldest_snapshot: Option<SeqNo>,
) -> Option<(Arc<KeyspaceState>, CompactionTask)> {
    let n = keyspaces.len();
    let pick = |ks: &KeyspaceState, pass: usize| {
        let version = &ks.super_version().version;
        match pass {
            0 => compaction::pick_compaction(version, &ks.options, busy),
            1 => compaction::pick_tombstone_compaction(version, &ks.options, busy, oldest_snapshot),
            _ => compaction::pick_small_table_merge(version, &ks.options, busy),
        }
    };
    for pass in 0..3 {
        for i in 0..n {
            let ks = keyspaces.get((*next + i) % n)?;
            if let Some(task) = pick(ks, pass) {
                *next = (*next + i + 1) % n;
                return Some((Arc::clone(ks), task));
            }
        }
    }
    None
}

/// Resumes automatic compactions when dropped ([`DbInner::resume_automatic_compactions`]).
struct ResumeOnDrop<'a>(&'a DbInner);

impl Drop for ResumeOnDrop<'_> {
    fn drop(&mut self) {
        self.0.resume_automatic_compactions();
    }
}

impl DbInner {
    /// Runs one compaction task of keyspace `ks` and installs its result (nothing is installed
    /// if the keyspace was dropped meanwhile).
    ///
    /// # Errors
    /// [`CompactionFailure::Job`] when the job failed (nothing changed: the inputs stay and
    /// the outputs are removed), [`CompactionFailure::Install`] when logging its edit did.
    pub(crate) fn run_compaction_task(
        &self,
        ks: &KeyspaceState,
        task: &CompactionTask,
    ) -> std::result::Result<(), CompactionFailure> {
        let start = Instant::now();
        let snapshots = self.snapshots.seqnos();
        let next_number = || self.versions.lock().new_file_number();
        let ctx = JobContext {
            dir: &self.dir,
            options: &ks.options,
            table_cache: &self.table_cache,
            snapshots: &snapshots,
            new_file_number: &next_number,
        };
        let (mut edit, job) = match compaction::run_compaction(task, &ctx) {
            Ok(done) => done,
            // Dropping the keyspace deletes the inputs under a running compaction.
            Err(e) if ks.is_dropped() => {
                tracing::debug!(keyspace = %ks.name, reason = %e, "compaction of a dropped keyspace abandoned");
                return Ok(());
            }
            Err(e) => return Err(CompactionFailure::Job(e)),
        };
        edit.keyspace = ks.id;
        let outputs: Vec<FileNumber> = edit.new_files.iter().map(|(_, f)| f.number).collect();
        let installed = {
            let mut versions = self.versions.lock();
            if versions.current_of(ks.id).is_none() {
                Err(Error::InvalidArgument(format!(
                    "keyspace {:?} was dropped during a compaction",
                    ks.name
                )))
            } else {
                versions
                    .log_and_apply(edit)
                    .map(|version| {
                        self.track_version(&version);
                        ks.install_version(version);
                    })
                    .map_err(|e| match e {
                        Error::InvalidArgument(_) => e,
                        // Poisoned under the `versions` lock, so a resume (which takes it to
                        // write a new manifest) cannot run between the two and be undone.
                        _ => self.manifest_write_failed(
                            &format!("of a compaction of keyspace {:?}", ks.name),
                            &e,
                        ),
                    })
            }
        };
        if let Err(e) = &installed
            && ks.is_dropped()
        {
            if !task.trivial_move {
                for n in outputs {
                    let _ = self.fs().remove_file(&filename::table_path(&self.dir, n));
                }
            }
            tracing::debug!(keyspace = %ks.name, reason = %e, "compaction result discarded");
            return Ok(());
        }
        if let Err(e) = installed {
            // An edit the set refused wrote nothing: its outputs go. After a failed manifest
            // write the edit may be durable (the append done, its fsync failed), so they stay
            // until the next open, which deletes them if the manifest does not name them.
            let refused = matches!(e, Error::InvalidArgument(_));
            if !task.trivial_move && refused {
                for n in outputs {
                    let _ = self.fs().remove_file(&filename::table_path(&self.dir, n));
                }
            }
            return Err(CompactionFailure::Install(e));
        }
        let s = &self.stats;
        s.compactions.fetch_add(1, Ordering::Relaxed);
        if task.trivial_move {
            s.trivial_moves.fetch_add(1, Ordering::Relaxed);
        }
        s.compaction_bytes_read
            .fetch_add(job.bytes_read, Ordering::Relaxed);
        s.compaction_bytes_written
            .fetch_add(job.bytes_written, Ordering::Relaxed);
        let micros = u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX);
        s.compaction_micros.fetch_add(micros, Ordering::Relaxed);
        tracing::debug!(
            level = task.level,
            output_level = task.output_level,
            inputs = task.inputs.len() + task.output_inputs.len(),
            outputs = job.output_files,
            subcompactions = job.subcompactions,
            bytes_read = job.bytes_read,
            bytes_written = job.bytes_written,
            dropped = job.dropped,
            trivial_move = task.trivial_move,
            millis = start.elapsed().as_millis(),
            "compaction finished"
        );
        if !task.trivial_move {
            let inputs = task.all_inputs().map(|(_, f)| f.number).collect();
            self.delete_obsolete_tables(inputs);
        }
        Ok(())
    }

    /// Appends `edit` to the manifest (the caller holds `versions`) and installs the new
    /// version for `ks`. An edit the version set refuses ([`Error::InvalidArgument`]: nothing
    /// was written) is returned as is. Any other failure may have left the edit durable, so it
    /// poisons the database (the reason names `what`; resumably for a full disk,
    /// [`DbInner::manifest_write_failed`]) and returns [`Error::Poisoned`].
    pub(crate) fn apply_and_install(
        &self,
        versions: &mut VersionSet,
        ks: &KeyspaceState,
        edit: VersionEdit,
        what: &str,
    ) -> Result<()> {
        let version = match versions.log_and_apply(edit) {
            Ok(v) => v,
            Err(Error::InvalidArgument(reason)) => return Err(Error::InvalidArgument(reason)),
            Err(e) => return Err(self.manifest_write_failed(what, &e)),
        };
        self.track_version(&version);
        ks.install_version(version);
        Ok(())
    }

    /// Remembers an installed version, so its tables are kept while anyone holds it.
    pub(crate) fn track_version(&self, version: &Arc<Version>) {
        let mut live = self.live_versions.lock();
        live.retain(|v| v.strong_count() > 0);
        live.push(Arc::downgrade(version));
    }

    /// The tables that must stay on disk for now: those of every version someone still holds,
    /// and the inputs of running compactions (of a keyspace dropped meanwhile, they are in
    /// no live version; they are deleted once the compaction is done).
    pub(crate) fn tables_in_use(&self) -> HashSet<FileNumber> {
        let mut in_use: HashSet<FileNumber> = {
            let mut live = self.live_versions.lock();
            live.retain(|v| v.strong_count() > 0);
            live.iter()
                .filter_map(Weak::upgrade)
                .flat_map(|v| v.all_file_numbers().collect::<Vec<_>>())
                .collect()
        };
        in_use.extend(self.bg.lock().busy.iter().copied());
        in_use
    }

    /// Deletes the tables in `candidates` (and earlier deferred ones) that no live version
    /// references; the rest wait for a later call (after the next flush or compaction, or an
    /// idle background thread's check once per [`BACKGROUND_RECHECK`]).
    pub(crate) fn delete_obsolete_tables(&self, candidates: Vec<FileNumber>) {
        let mut pending = self.pending_deletes.lock();
        pending.extend(candidates);
        if pending.is_empty() {
            return;
        }
        let referenced = self.tables_in_use();
        pending.retain(|&n| {
            if referenced.contains(&n) {
                return true;
            }
            self.table_cache.evict(n);
            let path = filename::table_path(&self.dir, n);
            match self.fs().remove_file(&path) {
                Ok(()) => tracing::debug!(path = %path.display(), "deleted obsolete table"),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "could not delete table")
                }
            }
            false
        });
    }

    /// Recomputes the estimated pending compaction bytes, summed over keyspaces.
    pub(crate) fn refresh_pending_compaction_bytes(&self) {
        let bytes = self
            .all_keyspaces()
            .iter()
            .map(|ks| {
                compaction::pending_compaction_bytes(&ks.super_version().version, &ks.options)
            })
            .fold(0u64, u64::saturating_add);
        self.pending_compaction_bytes
            .store(bytes, Ordering::Relaxed);
    }

    /// Compacts every table overlapping the user-key range `[begin, end]` down level by
    /// level; see [`crate::Db::compact_range`].
    pub(crate) fn compact_range(
        &self,
        ks: &Arc<KeyspaceState>,
        begin: Option<&[u8]>,
        end: Option<&[u8]>,
    ) -> Result<()> {
        self.flush(Some(ks))?;
        // Pause automatic compactions and wait for running ones, so tasks never overlap.
        self.pause_automatic_compactions()?;
        // Resumed also when a merge operator panics here (the caller may catch the panic):
        // left paused, level 0 would fill and every write stall.
        let _resume = ResumeOnDrop(self);
        self.compact_range_levels(ks, begin, end)
    }

    /// Removes from `ks`'s version the tables [`compaction::pick_range_deletion`] picks for
    /// `[begin, end)`, with one manifest edit, without reading or writing any table (RocksDB's
    /// `DeleteFilesInRange`). Returns the tables removed and their entries. Automatic compactions pause meanwhile,
    /// so none holds a table being removed.
    pub(crate) fn delete_files_in_range(
        &self,
        ks: &KeyspaceState,
        begin: &[u8],
        end: &[u8],
    ) -> Result<(usize, u64)> {
        self.check_writable()?;
        self.pause_automatic_compactions()?;
        let result = self.delete_files_in_range_paused(ks, begin, end);
        self.resume_automatic_compactions();
        result
    }

    fn delete_files_in_range_paused(
        &self,
        ks: &KeyspaceState,
        begin: &[u8],
        end: &[u8],
    ) -> Result<(usize, u64)> {
        ks.check_live()?;
        // Writes acknowledged before the call (a catalog record saying the range is dead)
        // must not be lost by a crash that keeps the edit below.
        self.sync_wal(&mut self.log.lock())?;
        let mut versions = self.versions.lock();
        let Some(version) = versions.current_of(ks.id) else {
            return Err(Error::InvalidArgument(format!(
                "keyspace {:?} was dropped",
                ks.name
            )));
        };
        let mut edit = VersionEdit {
            keyspace: ks.id,
            ..VersionEdit::default()
        };
        let (mut doomed, mut entries) = (Vec::new(), 0u64);
        for (level, f) in compaction::pick_range_deletion(&version, begin, end) {
            edit.delete_file(level, f.number);
            doomed.push(f.number);
            entries = entries.saturating_add(f.num_entries);
        }
        drop(version);
        if doomed.is_empty() {
            return Ok((0, 0));
        }
        // On a failed manifest write the tables stay until the next open, which deletes them
        // if the manifest does not name them.
        self.apply_and_install(&mut versions, ks, edit, "deleting tables in a range")?;
        drop(versions);
        let removed = doomed.len();
        tracing::debug!(tables = removed, entries, "deleted tables in a key range");
        self.delete_obsolete_tables(doomed);
        Ok((removed, entries))
    }

    /// Waits for running compactions (and another manual one) to finish and keeps new ones
    /// from starting until [`DbInner::resume_automatic_compactions`].
    ///
    /// # Errors
    /// [`Error::Closed`] when the database shuts down meanwhile.
    pub(crate) fn pause_automatic_compactions(&self) -> Result<()> {
        let mut bg = self.bg.lock();
        while bg.manual_compaction || bg.compactions_running > 0 {
            if bg.shutting_down {
                return Err(Error::Closed);
            }
            self.bg_cv.wait(&mut bg);
        }
        bg.manual_compaction = true;
        Ok(())
    }

    /// Lets automatic compactions run again and wakes the background threads.
    pub(crate) fn resume_automatic_compactions(&self) {
        self.bg.lock().manual_compaction = false;
        self.refresh_pending_compaction_bytes();
        self.wake_background();
    }

    fn compact_range_levels(
        &self,
        ks: &KeyspaceState,
        begin: Option<&[u8]>,
        end: Option<&[u8]>,
    ) -> Result<()> {
        for level in 0..NUM_LEVELS - 1 {
            self.run_manual_tasks(ks, |version| {
                compaction::pick_range_compaction(version, &ks.options, level, begin, end)
            })?;
        }
        // Then the last level's tables in the range that still hold tombstones, each once.
        let before = self.versions.lock().new_file_number();
        self.run_manual_tasks(ks, |version| {
            compaction::pick_bottom_rewrite(version, &ks.options, begin, end, before)
        })
    }

    /// Runs the tasks `pick` gives for the current version, one after another, until it gives
    /// none. A failed task poisons the database.
    fn run_manual_tasks(
        &self,
        ks: &KeyspaceState,
        pick: impl Fn(&Version) -> Option<CompactionTask>,
    ) -> Result<()> {
        loop {
            self.check_writable()?;
            ks.check_live()?;
            let version = Arc::clone(&ks.super_version().version);
            let task = pick(&version);
            // Drop our reference so the inputs can be deleted as soon as the task is done.
            drop(version);
            let Some(task) = task else {
                return Ok(());
            };
            let result = self
                .run_compaction_task(ks, &task)
                .map_err(CompactionFailure::into_error);
            // Writers stalled at a hard limit wait for a finished compaction.
            self.bg.lock().compactions_done += 1;
            self.refresh_pending_compaction_bytes();
            self.wake_background();
            if let Err(e) = result {
                self.set_background_error(
                    &format!(
                        "manual compaction of level {} of keyspace {:?}",
                        task.level, ks.name
                    ),
                    &e,
                );
                return Err(e);
            }
        }
    }
}
