//! Flush: immutable memtable → level-0 SSTable, in the background thread.
//!
//! The oldest immutable memtable is written to a new table, fsynced, and recorded in the
//! manifest together with the new log number (every WAL numbered below it is then obsolete);
//! only after the manifest edit is durable is the new version installed and the WAL deleted.
//! A crash anywhere before that leaves the WAL in place, and recovery replays it again.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use super::state::{DbInner, ImmMemTable, SuperVersion};
use crate::error::{Error, Result};
use crate::filename;
use crate::memtable::MemTable;
use crate::options::Options;
use crate::sstable::{TableBuilder, TableBuilderOptions};
use crate::types::FileNumber;
use crate::version::{FileMeta, VersionEdit};

impl DbInner {
    /// Writes `imm` to a level-0 table and installs it (see the module docs).
    pub(crate) fn flush_imm(&self, imm: &Arc<ImmMemTable>) -> Result<()> {
        let start = Instant::now();
        let number = self.versions.lock().new_file_number();
        let meta = write_level0_table(&self.dir, &self.options, &imm.mem, number)?;
        let mut edit = VersionEdit::default();
        let bytes = meta.as_ref().map_or(0, |m| m.size);
        if let Some(meta) = meta {
            edit.add_file(0, meta);
        }
        edit.log_number = Some(FileNumber(imm.wal_number.0 + 1));
        {
            let mut versions = self.versions.lock();
            let last = versions.last_seqno().max(self.visible_seqno());
            versions.set_last_seqno(last);
            let version = versions.log_and_apply(edit)?;
            self.track_version(&version);
            let mut sv = self.super_version.write();
            *sv = Arc::new(SuperVersion {
                mem: Arc::clone(&sv.mem),
                imms: sv
                    .imms
                    .iter()
                    .filter(|i| !Arc::ptr_eq(i, imm))
                    .cloned()
                    .collect(),
                version,
            });
        }
        self.stats.flushes.fetch_add(1, Ordering::Relaxed);
        self.stats.flush_bytes.fetch_add(bytes, Ordering::Relaxed);
        self.delete_obsolete_tables(Vec::new());
        let wal = filename::wal_path(&self.dir, imm.wal_number);
        if let Err(e) = std::fs::remove_file(&wal) {
            tracing::warn!(path = %wal.display(), error = %e, "could not delete obsolete WAL");
        }
        tracing::debug!(
            table = %number,
            size_bytes = bytes,
            entries = imm.mem.len(),
            millis = start.elapsed().as_millis(),
            "flushed memtable to level 0"
        );
        Ok(())
    }

    /// Freezes the active memtable and waits until every immutable memtable is flushed.
    pub(crate) fn flush(&self) -> Result<()> {
        self.check_writable()?;
        {
            let mut log = self.log.lock();
            self.make_room_for_write(&mut log, true, 0)?;
        }
        self.bg_cv.notify_all();
        let mut bg = self.bg.lock();
        loop {
            if let Some(reason) = self.poison.lock().clone() {
                return Err(Error::Poisoned { reason });
            }
            if bg.shutting_down {
                return Err(Error::Closed);
            }
            if self.super_version().imms.is_empty() && !bg.flush_running {
                return Ok(());
            }
            self.bg_cv.wait(&mut bg);
        }
    }
}

/// Writes every entry of `mem` to table `number` in `dir` and fsyncs it. Returns the table's
/// metadata, or `None` (and no file) when the memtable is empty.
///
/// # Errors
/// [`Error::Io`] from creating, writing or syncing the file; the partial file is removed.
pub(crate) fn write_level0_table(
    dir: &Path,
    options: &Options,
    mem: &MemTable,
    number: FileNumber,
) -> Result<Option<FileMeta>> {
    if mem.is_empty() {
        return Ok(None);
    }
    let path = filename::table_path(dir, number);
    let mut builder = TableBuilder::create(&path, TableBuilderOptions::from_options(options))?;
    for entry in mem.map().iter() {
        if let Err(e) = builder.add(entry.key().as_ref(), entry.value().as_slice()) {
            builder.abandon();
            return Err(e);
        }
    }
    let (props, size) = builder.finish()?;
    filename::sync_dir(dir)?;
    Ok(Some(FileMeta {
        number,
        size,
        smallest: props.smallest_key,
        largest: props.largest_key,
        smallest_seqno: props.smallest_seqno,
        largest_seqno: props.largest_seqno,
        num_entries: props.num_entries,
        num_deletions: props.num_deletions,
        global_seqno: None,
    }))
}
