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

use super::state::{DbInner, SuperVersion};
use crate::compaction::{self, CompactionTask, JobContext};
use crate::error::{Error, Result};
use crate::filename;
use crate::types::FileNumber;
use crate::version::{NUM_LEVELS, Version};

/// Work a background thread took.
enum Job {
    Flush(Arc<super::state::ImmMemTable>),
    Compaction(CompactionTask),
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
                if !inner.is_poisoned() {
                    let sv = inner.super_version();
                    if !bg.flush_running
                        && let Some(imm) = sv.imms.last().cloned()
                    {
                        bg.flush_running = true;
                        break Job::Flush(imm);
                    }
                    if !bg.manual_compaction
                        && let Some(task) =
                            compaction::pick_compaction(&sv.version, &inner.options, &bg.busy)
                    {
                        for (_, f) in task.all_inputs() {
                            bg.busy.insert(f.number);
                        }
                        bg.compactions_running += 1;
                        break Job::Compaction(task);
                    }
                }
                inner.bg_cv.wait(&mut bg);
            }
        };
        match job {
            Job::Flush(imm) => {
                let result = inner.flush_imm(&imm);
                if let Err(e) = &result {
                    inner.set_poison(format!("flush of WAL {} failed: {e}", imm.wal_number));
                }
                let mut bg = inner.bg.lock();
                bg.flush_running = false;
                bg.flushes_done += 1;
            }
            Job::Compaction(task) => {
                let result = inner.run_compaction_task(&task);
                if let Err(e) = &result {
                    inner.set_poison(format!("compaction of level {} failed: {e}", task.level));
                }
                let mut bg = inner.bg.lock();
                for (_, f) in task.all_inputs() {
                    bg.busy.remove(&f.number);
                }
                bg.compactions_running -= 1;
                bg.compactions_done += 1;
            }
        }
        inner.refresh_pending_compaction_bytes();
        inner.bg_cv.notify_all();
    }
}

impl DbInner {
    /// Runs one compaction task and installs its result.
    pub(crate) fn run_compaction_task(&self, task: &CompactionTask) -> Result<()> {
        let start = Instant::now();
        let snapshots = self.snapshots.seqnos();
        let mut next_number = || self.versions.lock().new_file_number();
        let mut ctx = JobContext {
            dir: &self.dir,
            options: &self.options,
            table_cache: &self.table_cache,
            snapshots: &snapshots,
            new_file_number: &mut next_number,
        };
        let (edit, job) = compaction::run_compaction(task, &mut ctx)?;
        let outputs: Vec<FileNumber> = edit.new_files.iter().map(|(_, f)| f.number).collect();
        let installed = {
            let mut versions = self.versions.lock();
            versions.log_and_apply(edit).map(|version| {
                self.track_version(&version);
                let mut sv = self.super_version.write();
                *sv = Arc::new(SuperVersion {
                    mem: Arc::clone(&sv.mem),
                    imms: sv.imms.clone(),
                    version,
                });
            })
        };
        if let Err(e) = installed {
            if !task.trivial_move {
                for n in outputs {
                    let _ = std::fs::remove_file(filename::table_path(&self.dir, n));
                }
            }
            return Err(e);
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

    /// Remembers an installed version, so its tables are kept while anyone holds it.
    pub(crate) fn track_version(&self, version: &Arc<Version>) {
        let mut live = self.live_versions.lock();
        live.retain(|v| v.strong_count() > 0);
        live.push(Arc::downgrade(version));
    }

    /// Deletes the tables in `candidates` (and earlier deferred ones) that no live version
    /// references; the rest wait for a later call.
    pub(crate) fn delete_obsolete_tables(&self, candidates: Vec<FileNumber>) {
        let mut pending = self.pending_deletes.lock();
        pending.extend(candidates);
        let referenced: HashSet<FileNumber> = {
            let mut live = self.live_versions.lock();
            live.retain(|v| v.strong_count() > 0);
            live.iter()
                .filter_map(Weak::upgrade)
                .flat_map(|v| v.all_file_numbers().collect::<Vec<_>>())
                .collect()
        };
        pending.retain(|&n| {
            if referenced.contains(&n) {
                return true;
            }
            self.table_cache.evict(n);
            let path = filename::table_path(&self.dir, n);
            match std::fs::remove_file(&path) {
                Ok(()) => tracing::debug!(path = %path.display(), "deleted obsolete table"),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "could not delete table")
                }
            }
            false
        });
    }

    pub(crate) fn refresh_pending_compaction_bytes(&self) {
        let sv = self.super_version();
        let bytes = compaction::pending_compaction_bytes(&sv.version, &self.options);
        self.pending_compaction_bytes
            .store(bytes, Ordering::Relaxed);
    }

    /// Compacts every table overlapping the user-key range `[begin, end]` down level by
    /// level; see [`crate::Db::compact_range`].
    pub(crate) fn compact_range(&self, begin: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        self.flush()?;
        // Pause automatic compactions and wait for running ones, so tasks never overlap.
        {
            let mut bg = self.bg.lock();
            while bg.manual_compaction || bg.compactions_running > 0 {
                if bg.shutting_down {
                    return Err(Error::Closed);
                }
                self.bg_cv.wait(&mut bg);
            }
            bg.manual_compaction = true;
        }
        let result = self.compact_range_levels(begin, end);
        self.bg.lock().manual_compaction = false;
        self.refresh_pending_compaction_bytes();
        self.bg_cv.notify_all();
        result
    }

    fn compact_range_levels(&self, begin: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        for level in 0..NUM_LEVELS - 1 {
            loop {
                self.check_writable()?;
                let version = Arc::clone(&self.super_version().version);
                let task =
                    compaction::pick_range_compaction(&version, &self.options, level, begin, end);
                // Drop our reference so the inputs can be deleted as soon as the task is done.
                drop(version);
                let Some(task) = task else {
                    break;
                };
                let result = self.run_compaction_task(&task);
                // Writers stalled at a hard limit wait for a finished compaction.
                self.bg.lock().compactions_done += 1;
                self.refresh_pending_compaction_bytes();
                self.bg_cv.notify_all();
                if let Err(e) = result {
                    self.set_poison(format!("manual compaction failed: {e}"));
                    return Err(e);
                }
            }
        }
        Ok(())
    }
}
