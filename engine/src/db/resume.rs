//! Resuming writes after the WAL could not be written for want of space: RocksDB's
//! `DB::Resume` for a retryable WAL write error (its `ErrorHandler`).
//!
//! A WAL append, fsync or creation, or a manifest append, that fails with `ENOSPC`, `EDQUOT`,
//! `EMFILE` or `ENFILE` poisons the database resumably ([`super::state::Poison::resumable`]).
//! A manifest with a doubtful tail is replaced first (step 0 below). What is on disk is then
//! in doubt only in the active WAL: its tail may hold part of the failed group (which
//! reached no memtable), and after a failed fsync the kernel may have dropped pages of
//! acknowledged writes. The memtables hold every acknowledged write whole, so a resume makes
//! them durable elsewhere and retires the doubtful WAL, in an order where a crash at any step
//! recovers every acknowledged write:
//!
//! 0. if a manifest append failed, the current state (which never took the failed edit) is
//!    written into a new manifest, `CURRENT` switched to it and the old one deleted
//!    ([`crate::version::VersionSet::recover_from_failed_write`]);
//! 1. every keyspace's active memtable is frozen and all immutable memtables are flushed into
//!    level-0 tables (each flush's manifest edit moves its keyspace's log number past the WAL);
//! 2. a new WAL number `M` is allocated, and every keyspace whose log number is still below
//!    it gets an edit setting it to `M` (with the manifest's last sequence number raised to
//!    the last one assigned): from here on recovery replays no WAL below `M`, so the doubtful
//!    one is never read again, and no torn tail sits in a WAL older than the newest;
//! 3. the WALs below `M` are deleted (a failed delete is harmless now: the next open removes
//!    them);
//! 4. WAL `M` is created and the directory synced, and the poisoning is cleared.
//!
//! With [`crate::Options::auto_resume`] a background thread runs this by itself
//! (`background.rs`, `Job::Resume`), with waits of 1 s doubling up to 8 s between attempts.
//!
//! A step that fails for want of space leaves the database poisoned and resumable, and a
//! later resume starts again (steps already done find nothing left to do). A failure of any
//! other kind (`EIO`, damaged data) poisons it for good: only a reopen helps.

use std::sync::Arc;

use super::background::BACKGROUND_RECHECK;
use super::state::DbInner;
use crate::error::{Error, Result};
use crate::filename;
use crate::version::VersionEdit;
use crate::wal;

/// Free space, in bytes, below which the automatic resume does not try: on a disk this full
/// the resume's new WAL and manifest, let alone the memtables' tables, would not fit, and a
/// resume with nothing to flush would succeed only to fail at the next write.
const RESUME_MIN_SPACE: u64 = 1 << 20;

/// Holds the flush slot (`BgState::flush_running`) for a resume, so no background flush runs
/// beside it; releases it when dropped.
struct FlushSlot<'a>(&'a DbInner);

impl Drop for FlushSlot<'_> {
    fn drop(&mut self) {
        let mut bg = self.0.bg.lock();
        bg.flush_running = false;
        bg.flushes_done += 1;
        drop(bg);
        self.0.wake_background();
    }
}

impl DbInner {
    /// Whether the database is poisoned by a failure [`DbInner::resume`] may clear.
    pub(crate) fn is_resumable(&self) -> bool {
        self.poison.lock().as_ref().is_some_and(|p| p.resumable)
    }

    /// True when the file system reports less than [`RESUME_MIN_SPACE`] bytes available to
    /// this process in the database's directory ([`crate::fs::FileSystem::available_space`];
    /// false when it cannot tell): the automatic resume waits for space instead of trying.
    pub(crate) fn disk_still_full(&self) -> bool {
        matches!(self.fs().available_space(&self.dir), Ok(Some(n)) if n < RESUME_MIN_SPACE)
    }

    /// Lets background jobs waiting after a resource failure go at once, forgetting the
    /// flushes' error until a flush fails again: what a resume that found nothing to clear
    /// does ([`crate::Db::resume`]), and what a successful one does for the same reason.
    pub(crate) fn retry_background_now(&self) {
        {
            let mut bg = self.bg.lock();
            bg.flush_retry = super::state::ResourceRetry::default();
            bg.compaction_retry.retry_now();
        }
        self.wake_background();
    }

    /// Clears a resumable poisoning (see the module docs). Returns `true` when writes are
    /// taken again, `false` when the database was not poisoned.
    ///
    /// # Errors
    /// - [`Error::Poisoned`] when the poisoning is not resumable (or became so here: a
    ///   manifest write failed with `EIO`).
    /// - [`Error::Io`] from a flush, the manifest or creating the new WAL, when space is still
    ///   short: the database stays poisoned and resumable.
    /// - [`Error::Closed`].
    pub(crate) fn resume(&self) -> Result<bool> {
        self.check_open()?;
        if !self.needs_resume()? {
            return Ok(false);
        }
        let _slot = self.take_flush_slot()?;
        // No writer gets past `check_writable` while poisoned, and the lock keeps out the
        // group that failed, if it has not let go yet.
        let mut log = self.log.lock();
        // Another resume may have finished, or a job failed for good, while this one waited.
        if !self.needs_resume()? {
            return Ok(false);
        }
        // 0. A manifest with a doubtful tail is replaced by a snapshot of the state.
        self.versions.lock().recover_from_failed_write()?;
        let doubtful = log.wal_number;
        // 1. Every write into a table.
        for ks in self.all_keyspaces() {
            let sv = ks.super_version();
            if !sv.mem.is_empty() {
                self.freeze_into_imm(&log, &ks, &sv);
            }
            let imms: Vec<_> = ks.super_version().imms.iter().rev().cloned().collect();
            if imms.is_empty() {
                continue;
            }
            if let Err(e) = self.flush_imms(&ks, &imms) {
                if !e.is_resource_exhausted() {
                    self.set_background_error(
                        &format!("flush of keyspace {:?} while resuming", ks.name),
                        &e,
                    );
                }
                return Err(e);
            }
        }
        // 2. No WAL below the new one is needed by any keyspace.
        let next = {
            let mut versions = self.versions.lock();
            let next = versions.new_file_number();
            let last = versions.last_seqno().max(log.last_seqno);
            versions.set_last_seqno(last);
            for (id, _) in versions.keyspaces() {
                if versions.keyspace_log_number(id).is_some_and(|n| n < next) {
                    let edit = VersionEdit {
                        keyspace: id,
                        log_number: Some(next),
                        ..VersionEdit::default()
                    };
                    match versions.log_and_apply(edit) {
                        Ok(version) => {
                            if let Some(ks) = self.keyspace_by_id(id) {
                                ks.install_version(Arc::clone(&version));
                            }
                            self.track_version(&version);
                        }
                        Err(e) => return Err(self.manifest_write_failed("while resuming", &e)),
                    }
                }
            }
            next
        };
        // 3. Retire the WALs, the doubtful one with them.
        if let Some(old) = log.wal.take() {
            let (number, len) = (log.wal_number, old.len());
            log.sealed_wals.insert(number, len);
        }
        log.wal_number = next;
        self.delete_obsolete_wals(&mut log);
        // 4. A new WAL.
        let path = filename::wal_path(&self.dir, next);
        let created = wal::Writer::create(self.fs(), &path)
            .and_then(|w| filename::sync_dir(self.fs(), &self.dir).map(|()| w));
        match created {
            Ok(w) => log.wal = Some(w),
            Err(e) => {
                let _ = self.fs().remove_file(&path);
                return Err(e);
            }
        }
        // Cleared only while still resumable: a background job may have failed for good
        // meanwhile.
        let mut poison = self.poison.lock();
        if poison.as_ref().is_some_and(|p| p.resumable) {
            let reason = poison.take().map(|p| p.reason).unwrap_or_default();
            drop(poison);
            // The flushes above succeeded, so there is space: background jobs waiting after
            // resource failures go at once, and held writers no longer get them.
            self.retry_background_now();
            tracing::info!(
                retired_wal = %doubtful,
                wal = %next,
                %reason,
                "resumed writes: memtables flushed and a new WAL started"
            );
            return Ok(true);
        }
        match poison.as_ref() {
            None => Ok(false),
            Some(p) => Err(p.error()),
        }
    }

    /// Whether the database is poisoned resumably (`true`) or not at all (`false`).
    ///
    /// # Errors
    /// [`Error::Poisoned`] when it is poisoned for good.
    fn needs_resume(&self) -> Result<bool> {
        match self.poison.lock().as_ref() {
            None => Ok(false),
            Some(p) if p.resumable => Ok(true),
            Some(p) => Err(p.error()),
        }
    }

    /// Waits for the running flush, if any, and takes the flush slot.
    fn take_flush_slot(&self) -> Result<FlushSlot<'_>> {
        let mut bg = self.bg.lock();
        while bg.flush_running {
            if bg.shutting_down {
                return Err(Error::Closed);
            }
            self.bg_cv.wait_for(&mut bg, BACKGROUND_RECHECK);
        }
        if bg.shutting_down {
            return Err(Error::Closed);
        }
        bg.flush_running = true;
        Ok(FlushSlot(self))
    }
}
