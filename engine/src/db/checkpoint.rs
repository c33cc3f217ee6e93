//! Checkpoints: a consistent, openable copy of a live database in another directory.
//!
//! With the group-commit `log` lock and the `versions` lock held (writers and version changes
//! pause; reads go on), the tables of the current version are hard-linked into the destination
//! (copied when linking fails, e.g. across file systems), and the live manifest and every WAL
//! still needed are copied, then `CURRENT` is written. Tables are immutable, so a link is a
//! safe copy. Opening the copy replays the copied WALs, so it holds every write acknowledged
//! before the call. All of it goes into `DEST.checkpoint-tmp`, renamed to `DEST` at the end.

use std::path::Path;

use super::state::DbInner;
use crate::error::{Error, IoContext, Result};
use crate::filename::{self, FileKind};
use crate::fs::FileSystem;
use crate::types::SeqNo;
use crate::version::manifest;

impl DbInner {
    /// Writes a checkpoint to `dest`; see [`crate::Db::checkpoint`].
    pub(crate) fn checkpoint(&self, dest: &Path) -> Result<SeqNo> {
        self.check_open()?;
        let fs = self.fs();
        if fs.exists(dest) {
            return Err(Error::InvalidArgument(format!(
                "checkpoint destination {} already exists",
                dest.display()
            )));
        }
        // A copy inside the database directory would be taken for the database's own files
        // (a name ending in `.tmp` is even deleted by the next writing open).
        let db_dir = fs.canonicalize(&self.dir).ctx(&self.dir)?;
        let anchor = dest
            .ancestors()
            .skip(1)
            .map(|a| {
                if a.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    a
                }
            })
            .find(|a| fs.exists(a))
            .unwrap_or(Path::new("."));
        if fs.canonicalize(anchor).ctx(anchor)?.starts_with(&db_dir) {
            return Err(Error::InvalidArgument(format!(
                "checkpoint destination {} is inside the database directory {}",
                dest.display(),
                self.dir.display()
            )));
        }
        // Every table of the current versions must open (footer, index and filter checked,
        // through the table cache, so usually already done): a copy holding a damaged table
        // would not open, and the writing open that made this handle reads tables lazily. A
        // compaction may replace some before the locks below; its outputs were just written.
        for ks in self.all_keyspaces() {
            let sv = ks.super_version();
            for level in 0..sv.version.levels.len() {
                for file in sv.version.files(level) {
                    self.open_listed_table(level, file)?;
                }
            }
        }
        // The copy is written into a sibling directory and renamed to `dest` once complete
        // (as RocksDB's checkpoints do), so `dest` never holds half a copy, even when the
        // process dies during it; a retry removes what such a death left.
        let tmp = checkpoint_temp_path(dest)?;
        remove_interrupted_copy(fs, &tmp)?;
        fs.create_dir_all(&tmp).ctx(&tmp)?;
        let written = self
            .write_checkpoint(&tmp)
            .and_then(|seqno| fs.rename(&tmp, dest).ctx(dest).map(|()| seqno));
        match written {
            Ok(seqno) => {
                let parent = match dest.parent() {
                    Some(p) if !p.as_os_str().is_empty() => p,
                    _ => Path::new("."),
                };
                filename::sync_dir(fs, parent)?;
                Ok(seqno)
            }
            Err(e) => {
                // Leave no half-written copy behind (it might look like a database).
                let _ = fs.remove_dir_all(&tmp);
                Err(e)
            }
        }
    }

    /// The copy itself, into the created directory `dest`.
    fn write_checkpoint(&self, dest: &Path) -> Result<SeqNo> {
        let fs = self.fs();
        let log = self.log.lock();
        let versions = self.versions.lock();
        let seqno = log.last_seqno;
        let manifest_number = versions.manifest_number();
        for number in versions.live_files() {
            if number == manifest_number {
                continue;
            }
            let src = filename::table_path(&self.dir, number);
            let dst = filename::table_path(dest, number);
            if fs.hard_link(&src, &dst).is_err() {
                copy_synced(fs, &src, &dst)?;
            }
        }
        copy_synced(
            fs,
            &filename::manifest_path(&self.dir, manifest_number),
            &filename::manifest_path(dest, manifest_number),
        )?;
        for entry in fs.list_dir(&self.dir).ctx(&self.dir)? {
            let Some(name) = entry.path.file_name() else {
                continue;
            };
            if let Some(FileKind::Wal(n)) = name.to_str().and_then(filename::parse)
                && n >= versions.log_number()
            {
                copy_synced(fs, &entry.path, &dest.join(name))?;
            }
        }
        manifest::set_current(fs, dest, manifest_number)?;
        drop(versions);
        drop(log);
        filename::sync_dir(fs, dest)?;
        tracing::debug!(dest = %dest.display(), seqno = seqno.get(), "checkpoint written");
        Ok(seqno)
    }
}

/// Where the copy for `dest` is written before it is renamed: `dest` with `.checkpoint-tmp`
/// added to its name, in the same directory (so on the same file system, where the rename is
/// atomic).
///
/// # Errors
/// [`Error::InvalidArgument`] when `dest` has no name (`/`, `..`).
fn checkpoint_temp_path(dest: &Path) -> Result<std::path::PathBuf> {
    let name = dest.file_name().ok_or_else(|| {
        Error::InvalidArgument(format!(
            "checkpoint destination {} has no directory name",
            dest.display()
        ))
    })?;
    let mut tmp_name = name.to_os_string();
    tmp_name.push(".checkpoint-tmp");
    Ok(dest.with_file_name(tmp_name))
}

/// Removes `tmp` when a checkpoint that died before its rename left it: a directory holding
/// only database files (tables, WALs, manifests, `CURRENT`). Anything else there is refused
/// rather than deleted.
///
/// # Errors
/// [`Error::InvalidArgument`] when `tmp` holds other files; [`Error::Io`] when it cannot be
/// listed or removed.
fn remove_interrupted_copy(fs: &dyn FileSystem, tmp: &Path) -> Result<()> {
    if !fs.exists(tmp) {
        return Ok(());
    }
    let entries = fs.list_dir(tmp).ctx(tmp)?;
    let ours = entries.iter().all(|e| {
        !e.is_dir
            && e.path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(filename::parse)
                .is_some()
    });
    if !ours {
        return Err(Error::InvalidArgument(format!(
            "{} exists and holds files other than an interrupted checkpoint's; move it away",
            tmp.display()
        )));
    }
    tracing::info!(path = %tmp.display(), "removing the copy of an interrupted checkpoint");
    fs.remove_dir_all(tmp).ctx(tmp)
}

/// Copies `src` to the new file `dst` and fsyncs the copy.
fn copy_synced(fs: &dyn FileSystem, src: &Path, dst: &Path) -> Result<()> {
    fs.copy(src, dst).map(|_| ())
}
