//! Checkpoints: a consistent, openable copy of a live database in another directory.
//!
//! With the group-commit `log` lock and the `versions` lock held (writers and version changes
//! pause; reads go on), the tables of the current version are hard-linked into the destination
//! (copied when linking fails, e.g. across file systems), and the live manifest and every WAL
//! still needed are copied, then `CURRENT` is written. Tables are immutable, so a link is a
//! safe copy. Opening the copy replays the copied WALs, so it holds every write acknowledged
//! before the call.

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
        fs.create_dir_all(dest).ctx(dest)?;
        match self.write_checkpoint(dest) {
            Ok(seqno) => Ok(seqno),
            Err(e) => {
                // Leave no half-written copy behind (it might look like a database).
                let _ = fs.remove_dir_all(dest);
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

/// Copies `src` to the new file `dst` and fsyncs the copy.
fn copy_synced(fs: &dyn FileSystem, src: &Path, dst: &Path) -> Result<()> {
    fs.copy(src, dst).map(|_| ())
}
