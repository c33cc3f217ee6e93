//! Bulk ingest, inside half: [`DbInner::ingest`] links tables built by
//! [`crate::TableWriter`] into the database with one manifest edit.
//!
//! Steps (`docs/design.md`, "Bulk ingest"): validate the files; hard-link (or copy) each file
//! to a new table number and fsync; take the `log` lock (no write in flight) and pause
//! compactions; flush the memtables if they hold a key inside a file's range; assign one
//! sequence number `S`; pick each file's level; append one edit adding every file with tag 8
//! (`global_seqno = S`, `docs/format/manifest.md` section 2.1); install the version and
//! publish `S`; remove the source paths.
//!
//! Lock order as everywhere: `log` → `versions` → `super_version` → `bg`. Waiting for a flush
//! with `log` held is safe because the flush thread never takes `log`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::state::{DbInner, KeyspaceState, LogState, SuperVersion};
use crate::cache::BlockCache;
use crate::error::{Error, IoContext, Result};
use crate::filename;
use crate::fs::FileSystem;
use crate::iterator::InternalIterator;
use crate::sstable::Table;
use crate::sstable::TableId;
use crate::types::{FileNumber, InternalKey, InternalKeyRef, SeqNo, ValueKind};
use crate::version::{FileMeta, NUM_LEVELS, Version, VersionEdit};

/// A validated file to ingest.
#[derive(Debug)]
struct Candidate {
    /// The path as the caller gave it (named in errors).
    source: PathBuf,
    /// `source` with symbolic links resolved: the file that is linked or copied in, so the
    /// database holds the table itself, never a link to it.
    resolved: PathBuf,
    /// Whether `source` is a symbolic link (its directory entry is not `resolved`'s), to be
    /// removed with the file once the table moved in.
    is_link: bool,
    size: u64,
    num_entries: u64,
    smallest: Bytes,
    smallest_kind: ValueKind,
    largest: Bytes,
    largest_kind: ValueKind,
    /// The id in the file's properties, recorded in the manifest as it is.
    table_id: Option<TableId>,
}

impl DbInner {
    /// Ingests `files` into keyspace `ks`; see [`crate::Db::ingest`].
    pub(crate) fn ingest(&self, ks: &Arc<KeyspaceState>, files: &[PathBuf]) -> Result<()> {
        self.check_writable()?;
        ks.check_live()?;
        if files.is_empty() {
            return Ok(());
        }
        let candidates = self.validate_ingest(files)?;
        self.link_and_install(ks, &candidates)?;
        for c in &candidates {
            // The table moved in: remove the file, and the symbolic link the caller named it
            // by, if any (it would dangle).
            for path in std::iter::once(&c.resolved).chain(c.is_link.then_some(&c.source)) {
                if let Err(e) = self.fs().remove_file(path) {
                    tracing::warn!(path = %path.display(), error = %e, "could not remove ingested source file");
                }
            }
        }
        Ok(())
    }

    /// Opens every file and checks it holds what `TableWriter` writes; returns them sorted by
    /// key range, which must not overlap.
    fn validate_ingest(&self, files: &[PathBuf]) -> Result<Vec<Candidate>> {
        let fs = self.fs();
        let dir = fs.canonicalize(&self.dir).ctx(&self.dir)?;
        let mut out = Vec::with_capacity(files.len());
        let mut seen = std::collections::HashSet::with_capacity(files.len());
        for path in files {
            let invalid = |what: &str| {
                Error::InvalidArgument(format!("cannot ingest {}: {what}", path.display()))
            };
            // A file of this database (a live table, say) must never be moved away, whether
            // it is named directly or through a symbolic link; and a link named by the
            // caller is resolved, so the database links (or copies) the table itself.
            let parent = path
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            let parent = fs.canonicalize(parent).ctx(path)?;
            let resolved = fs.canonicalize(path).ctx(path)?;
            let own_file = |dir_of: Option<&Path>, name: Option<&std::ffi::OsStr>| {
                dir_of == Some(dir.as_path())
                    && name
                        .and_then(|n| n.to_str())
                        .and_then(filename::parse)
                        .is_some()
            };
            if own_file(Some(&parent), path.file_name())
                || own_file(resolved.parent(), resolved.file_name())
            {
                return Err(invalid("it is one of the database's own files"));
            }
            if !seen.insert(resolved.clone()) {
                return Err(invalid("the file is given twice"));
            }
            let table = Table::open(fs, &resolved, FileNumber(0), None, BlockCache::new(0))
                .map_err(|e| rename_path(e, &resolved, path))?;
            let p = table.properties();
            if p.num_entries == 0 {
                return Err(invalid("the table is empty"));
            }
            if p.smallest_seqno != SeqNo::ZERO || p.largest_seqno != SeqNo::ZERO {
                return Err(invalid(&format!(
                    "entries have sequence numbers {}..={}, not 0 (not written by TableWriter)",
                    p.smallest_seqno, p.largest_seqno
                )));
            }
            if p.num_deletions != 0 {
                return Err(invalid("the table holds tombstones"));
            }
            // A relative or non-canonical path to the file itself names the same entry as
            // `resolved` once its directory is resolved; a link's entry differs.
            let is_link = path.file_name().is_none_or(|n| parent.join(n) != resolved);
            out.push(Candidate {
                source: path.clone(),
                resolved,
                is_link,
                size: table.file_size(),
                num_entries: p.num_entries,
                smallest: p.smallest_key.user_key.clone(),
                smallest_kind: p.smallest_key.kind,
                largest: p.largest_key.user_key.clone(),
                largest_kind: p.largest_key.kind,
                table_id: p.table_id,
            });
        }
        out.sort_by(|a, b| a.smallest.cmp(&b.smallest));
        for pair in out.windows(2) {
            if let [a, b] = pair
                && a.largest >= b.smallest
            {
                return Err(Error::InvalidArgument(format!(
                    "cannot ingest {} and {}: their key ranges overlap",
                    a.source.display(),
                    b.source.display()
                )));
            }
        }
        Ok(out)
    }

    /// Waits for running compactions (and a manual compaction) to finish and keeps new ones
    /// from starting until `manual_compaction` is cleared. Called with `log` held: then no
    /// write leader can be stalled waiting for a compaction meanwhile (it would hold `log`),
    /// and compactions never take `log`, so the wait ends.
    fn pause_compactions(&self, _log: &LogState) -> Result<()> {
        self.pause_automatic_compactions()
    }

    /// Links the files in (no lock held: no version names them yet), then installs them.
    fn link_and_install(&self, ks: &Arc<KeyspaceState>, candidates: &[Candidate]) -> Result<()> {
        let mut linked: Vec<FileNumber> = Vec::with_capacity(candidates.len());
        let linking = candidates.iter().try_for_each(|c| {
            let number = self.versions.lock().new_file_number();
            let dest = filename::table_path(&self.dir, number);
            link_or_copy(self.fs(), &c.resolved, &dest).map_err(|e| match e {
                Error::Io { source, .. } => Error::Io {
                    path: c.source.clone(),
                    source: std::io::Error::new(
                        source.kind(),
                        format!("linking or copying it into the database failed: {source}"),
                    ),
                },
                other => other,
            })?;
            linked.push(number);
            Ok(())
        });
        let result = linking
            .and_then(|()| filename::sync_dir(self.fs(), &self.dir))
            .and_then(|()| self.install_ingested(ks, candidates, &linked));
        if let Err(e) = &result
            && !matches!(e, Error::Poisoned { .. })
        {
            // Nothing names the tables: remove them.
            for &n in &linked {
                let _ = self.fs().remove_file(&filename::table_path(&self.dir, n));
            }
        }
        result
    }

    /// Under the `log` lock (no write in flight) and with compactions paused (none installs a
    /// table into a range being filled): flushes the memtables if they overlap, assigns the
    /// sequence number, appends the edit and installs the version. On a manifest write failure
    /// the database is poisoned and [`Error::Poisoned`] returned (the edit may be durable, so
    /// the linked tables must stay).
    fn install_ingested(
        &self,
        ks: &Arc<KeyspaceState>,
        candidates: &[Candidate],
        linked: &[FileNumber],
    ) -> Result<()> {
        let mut log = self.log.lock();
        self.check_writable()?;
        self.pause_compactions(&log)?;
        let result = self.install_paused(&mut log, ks, candidates, linked);
        self.resume_automatic_compactions();
        result
    }

    fn install_paused(
        &self,
        log: &mut LogState,
        ks: &Arc<KeyspaceState>,
        candidates: &[Candidate],
        linked: &[FileNumber],
    ) -> Result<()> {
        ks.check_live()?;
        if memtables_overlap(&ks.super_version(), candidates)? {
            self.flush_memtables_locked(log, ks)?;
        }
        self.sync_wal(log)?;
        let seqno = log.last_seqno.checked_add(1).ok_or(Error::SeqNoExhausted {
            last: log.last_seqno.get(),
        })?;
        let mut versions = self.versions.lock();
        let mut edit = VersionEdit {
            keyspace: ks.id,
            last_seqno: Some(seqno),
            ..VersionEdit::default()
        };
        let current = versions
            .current_of(ks.id)
            .ok_or_else(|| Error::InvalidArgument(format!("keyspace {:?} was dropped", ks.name)))?;
        for (c, &number) in candidates.iter().zip(linked) {
            let level = pick_level(&current, &c.smallest, &c.largest);
            tracing::debug!(
                source = %c.source.display(),
                table = %number,
                level,
                size_bytes = c.size,
                entries = c.num_entries,
                seqno = seqno.get(),
                "ingesting table"
            );
            edit.add_file(
                level,
                FileMeta {
                    number,
                    size: c.size,
                    smallest: InternalKey::new(c.smallest.clone(), seqno, c.smallest_kind),
                    largest: InternalKey::new(c.largest.clone(), seqno, c.largest_kind),
                    smallest_seqno: seqno,
                    largest_seqno: seqno,
                    num_entries: c.num_entries,
                    num_deletions: 0,
                    global_seqno: Some(seqno),
                    table_id: c.table_id,
                },
            );
        }
        // On a failed manifest write the tables are kept; the next open deletes them if the
        // manifest does not name them.
        self.apply_and_install(&mut versions, ks, edit, "for an ingest")?;
        drop(versions);
        // Readers that take `S` from now on see the new tables (the version is installed).
        log.last_seqno = seqno;
        self.visible_seqno.store(seqno.get(), Ordering::Release);
        Ok(())
    }

    /// Freezes `ks`'s memtable and waits until its immutable memtables are flushed, with `log`
    /// held so no write slips in.
    fn flush_memtables_locked(&self, log: &mut LogState, ks: &Arc<KeyspaceState>) -> Result<()> {
        let errors_before = self.retry_flushes_now();
        self.freeze_memtable(log, ks, errors_before)?;
        self.wake_background();
        self.wait_for_flushes(std::slice::from_ref(ks), log.wal_number, errors_before)
    }
}

/// True if a memtable of `sv` holds a key inside a candidate's range.
fn memtables_overlap(sv: &SuperVersion, candidates: &[Candidate]) -> Result<bool> {
    let mems = std::iter::once(&sv.mem).chain(sv.imms.iter().map(|imm| &imm.mem));
    for mem in mems {
        if mem.is_empty() {
            continue;
        }
        let mut it = mem.iter();
        for c in candidates {
            it.seek(InternalKeyRef::new(
                &c.smallest,
                SeqNo::MAX,
                ValueKind::FOR_SEEK,
            ))?;
            if it.valid() && it.key().user_key <= &c.largest[..] {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

/// The deepest level such that no table in it or any level above overlaps `[lo, hi]`; 0 when
/// level 0 itself overlaps.
fn pick_level(version: &Version, lo: &[u8], hi: &[u8]) -> usize {
    let mut best = 0;
    for level in 0..NUM_LEVELS {
        if !version
            .overlapping_files(level, Some(lo), Some(hi))
            .is_empty()
        {
            break;
        }
        best = level;
    }
    best
}

/// Makes `dest` a durable copy of `source` (a regular file, not a symbolic link): a hard link
/// when the file system allows, else a byte copy; then fsyncs `dest`. On failure `dest` is
/// removed.
fn link_or_copy(fs: &dyn FileSystem, source: &Path, dest: &Path) -> Result<()> {
    if let Err(e) = fs.hard_link(source, dest) {
        tracing::debug!(source = %source.display(), error = %e, "hard link failed; copying");
        if let Err(e) = fs.copy(source, dest) {
            let _ = fs.remove_file(dest);
            return Err(e);
        }
    }
    let synced = fs.open_writable(dest).and_then(|mut f| f.sync()).ctx(dest);
    if synced.is_err() {
        let _ = fs.remove_file(dest);
    }
    synced
}

/// `e` with the file `from` (a resolved path) named as `to` (the caller's path), so errors
/// about an ingested file name the path the caller gave.
fn rename_path(e: Error, from: &Path, to: &Path) -> Error {
    match e {
        Error::Io { path, source } if path == from => Error::Io {
            path: to.to_path_buf(),
            source,
        },
        Error::Corruption {
            file,
            offset,
            reason,
        } if file == from => Error::Corruption {
            file: to.to_path_buf(),
            offset,
            reason,
        },
        Error::ChecksumMismatch {
            file,
            offset,
            expected,
            actual,
        } if file == from => Error::ChecksumMismatch {
            file: to.to_path_buf(),
            offset,
            expected,
            actual,
        },
        other => other,
    }
}
