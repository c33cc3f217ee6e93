//! Flush: immutable memtable → level-0 SSTable, in the background thread.
//!
//! The oldest immutable memtable (of any keyspace) is written to a new table, fsynced, and
//! recorded in the manifest together with the keyspace's new log number (recovery replays none
//! of the keyspace's records from WALs numbered below it); only after the manifest edit is
//! durable is the new version installed, and a WAL is deleted only once no keyspace has an
//! unflushed write in it. A crash anywhere before that leaves the WALs in place, and recovery
//! replays them again.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use super::state::{DbInner, ImmMemTable, KeyspaceState, SuperVersion};
use crate::error::{Error, Result};
use crate::filename;
use crate::memtable::MemTable;
use crate::options::Options;
use crate::sstable::{TableBuilder, TableBuilderOptions};
use crate::types::FileNumber;
use crate::version::{FileMeta, VersionEdit};

impl DbInner {
    /// Writes `imm`, the oldest immutable memtable of `ks`, to a level-0 table and installs it
    /// (see the module docs). A keyspace dropped meanwhile gets nothing installed.
    pub(crate) fn flush_imm(&self, ks: &KeyspaceState, imm: &Arc<ImmMemTable>) -> Result<()> {
        let start = Instant::now();
        let number = self.versions.lock().new_file_number();
        let meta = write_level0_table(&self.dir, &ks.options, &imm.mem, number)?;
        let mut edit = VersionEdit {
            keyspace: ks.id,
            log_number: Some(FileNumber(imm.wal_number.0 + 1)),
            ..VersionEdit::default()
        };
        let bytes = meta.as_ref().map_or(0, |m| m.size);
        if let Some(meta) = meta {
            edit.add_file(0, meta);
        }
        {
            let mut versions = self.versions.lock();
            if versions.current_of(ks.id).is_none() {
                drop(versions);
                let _ = self
                    .fs()
                    .remove_file(&filename::table_path(&self.dir, number));
                return Ok(());
            }
            let last = versions.last_seqno().max(self.visible_seqno());
            versions.set_last_seqno(last);
            let version = versions.log_and_apply(edit)?;
            self.track_version(&version);
            let mut sv = ks.super_version.write();
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
        // A write leader may hold the log lock while it waits for this thread: never block on
        // it. A WAL left behind is deleted at the next memtable switch.
        if let Some(mut log) = self.log.try_lock() {
            self.delete_obsolete_wals(&mut log);
        }
        tracing::debug!(
            keyspace = %ks.name,
            table = %number,
            size_bytes = bytes,
            entries = imm.mem.len(),
            millis = start.elapsed().as_millis(),
            "flushed memtable to level 0"
        );
        Ok(())
    }

    /// Freezes the active memtable of `only` (or of every keyspace) and waits until each of
    /// their immutable memtables is flushed.
    pub(crate) fn flush(&self, only: Option<&Arc<KeyspaceState>>) -> Result<()> {
        self.check_writable()?;
        let targets = match only {
            Some(ks) => {
                ks.check_live()?;
                vec![Arc::clone(ks)]
            }
            None => self.all_keyspaces(),
        };
        {
            let mut log = self.log.lock();
            // Every write acknowledged before the flush is durable after it, in every keyspace
            // (a keyspace with an empty memtable freezes nothing, so nothing else would sync).
            self.sync_wal(&mut log)?;
            for ks in &targets {
                self.freeze_memtable(&mut log, ks)?;
            }
        }
        self.bg_cv.notify_all();
        self.wait_for_flushes(&targets)
    }

    /// Waits until none of `targets` has an immutable memtable and no flush is running.
    pub(crate) fn wait_for_flushes(&self, targets: &[Arc<KeyspaceState>]) -> Result<()> {
        let mut bg = self.bg.lock();
        loop {
            if let Some(reason) = self.poison.lock().clone() {
                return Err(Error::Poisoned { reason });
            }
            if bg.shutting_down {
                return Err(Error::Closed);
            }
            let pending = targets
                .iter()
                .any(|ks| !ks.is_dropped() && !ks.super_version().imms.is_empty());
            if !pending && !bg.flush_running {
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
    let mut builder = TableBuilder::create(
        &options.file_system,
        &path,
        TableBuilderOptions::from_options(options),
    )?;
    for entry in mem.map().iter() {
        if let Err(e) = builder.add(entry.key().as_ref(), entry.value().as_slice()) {
            builder.abandon();
            return Err(e);
        }
    }
    let (props, size) = builder.finish()?;
    filename::sync_dir(&*options.file_system, dir)?;
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
