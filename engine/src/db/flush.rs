//! Flush: immutable memtable → level-0 SSTable, in the background thread.
//!
//! The keyspace with the oldest immutable memtable ready to flush goes first: once it has
//! `min_write_buffer_number_to_merge` immutable memtables (or an explicit flush or the WAL size
//! limit asked), all of them are merged into one new table, fsynced, and recorded in the
//! manifest together with the keyspace's new log number (recovery replays none
//! of the keyspace's records from WALs numbered below it); only after the manifest edit is
//! durable is the new version installed, and a WAL is deleted only once no keyspace has an
//! unflushed write in it. A crash anywhere before that leaves the WALs in place, and recovery
//! replays them again.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use super::state::{BgState, DbInner, ImmMemTable, KeyspaceState, SuperVersion};
use crate::error::{Error, Result};
use crate::filename;
use crate::memtable::{MemKey, MemTable, SmallBytes};
use crate::options::Options;
use crate::sstable::{TableBuilder, TableBuilderOptions};
use crate::types::FileNumber;
use crate::version::{FileMeta, VersionEdit};

impl DbInner {
    /// Writes `imms`, the oldest immutable memtables of `ks` (oldest first), merged into one
    /// level-0 table, and installs it (see the module docs). A keyspace dropped meanwhile gets
    /// nothing installed.
    pub(crate) fn flush_imms(&self, ks: &KeyspaceState, imms: &[Arc<ImmMemTable>]) -> Result<()> {
        let Some(newest) = imms.last() else {
            return Ok(());
        };
        let start = Instant::now();
        let number = self.versions.lock().new_file_number();
        let mems: Vec<&MemTable> = imms.iter().map(|imm| &*imm.mem).collect();
        let meta = write_level0_table(&self.dir, &ks.options, &mems, number)?;
        let mut edit = VersionEdit {
            keyspace: ks.id,
            log_number: Some(FileNumber(newest.wal_number.0 + 1)),
            ..VersionEdit::default()
        };
        let bytes = meta.as_ref().map_or(0, |m| m.size);
        // The manifest's last sequence number covers what the tables hold (and ingests), not
        // writes still only in WALs: replay checks that WAL records leave no gap above it
        // (`recovery.rs`, `docs/format/wal.md` section 8).
        let flushed_up_to = meta.as_ref().map(|m| m.largest_seqno);
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
            if let Some(up_to) = flushed_up_to {
                let last = versions.last_seqno().max(up_to);
                versions.set_last_seqno(last);
            }
            let version = match versions.log_and_apply(edit) {
                Ok(version) => version,
                Err(e) => {
                    // The manifest's tail is in doubt, whatever the errno: never a resource
                    // wait (`BgState::flush_retry`), always a poisoning (resumable for a full
                    // disk). The table stays until the next open: the failed edit naming it
                    // may be durable.
                    return Err(self.manifest_write_failed(
                        &format!("of a flush of keyspace {:?}", ks.name),
                        &e,
                    ));
                }
            };
            self.track_version(&version);
            let mut sv = ks.super_version.write();
            *sv = Arc::new(SuperVersion {
                mem: Arc::clone(&sv.mem),
                imms: sv
                    .imms
                    .iter()
                    .filter(|i| !imms.iter().any(|f| Arc::ptr_eq(i, f)))
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
            memtables = imms.len(),
            entries = mems.iter().map(|m| m.len()).sum::<usize>(),
            millis = start.elapsed().as_millis(),
            "flushed immutable memtables to level 0"
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
        let errors_before = self.retry_flushes_now();
        let below = {
            let mut log = self.log.lock();
            // Every write acknowledged before the flush is durable after it, in every keyspace
            // (a keyspace with an empty memtable freezes nothing, so nothing else would sync).
            self.sync_wal(&mut log)?;
            for ks in &targets {
                self.freeze_memtable(&mut log, ks, errors_before)?;
            }
            log.wal_number
        };
        self.wake_background();
        self.wait_for_flushes(&targets, below, errors_before)
    }

    /// Lets flushes waiting after a resource failure (`BgState::flush_retry`) run again at
    /// once, for an explicit flush. Returns the count of such failures so far, for
    /// [`DbInner::check_flush_failed_since`].
    pub(crate) fn retry_flushes_now(&self) -> u64 {
        let mut bg = self.bg.lock();
        bg.flush_retry.retry_now();
        self.bg_cv.notify_all();
        bg.flush_errors
    }

    /// The error of the flushes waiting after failing for want of a resource
    /// (`BgState::flush_retry`), for a writer that would otherwise wait for them: any such
    /// error with `errors_before` `None`, else only one of a failure after `errors_before`
    /// were counted ([`DbInner::retry_flushes_now`]).
    pub(crate) fn check_flush_failed_since(&self, errors_before: Option<u64>) -> Result<()> {
        flush_failed_since(&self.bg.lock(), errors_before)
    }

    /// Waits until none of `targets` has an immutable memtable frozen while a WAL numbered
    /// below `below` was active (memtables frozen later, which may wait for others to merge
    /// with, do not count), and no flush is running. Returns the error of a flush that fails
    /// for want of a resource after `errors_before` such failures
    /// ([`DbInner::retry_flushes_now`]).
    pub(crate) fn wait_for_flushes(
        &self,
        targets: &[Arc<KeyspaceState>],
        below: FileNumber,
        errors_before: u64,
    ) -> Result<()> {
        let mut bg = self.bg.lock();
        loop {
            if let Some(p) = self.poison.lock().as_ref() {
                return Err(p.error());
            }
            flush_failed_since(&bg, Some(errors_before))?;
            if bg.shutting_down {
                return Err(Error::Closed);
            }
            let pending = targets.iter().any(|ks| {
                !ks.is_dropped()
                    && ks
                        .super_version()
                        .imms
                        .iter()
                        .any(|imm| imm.wal_number < below)
            });
            if !pending && !bg.flush_running {
                return Ok(());
            }
            self.bg_cv
                .wait_for(&mut bg, super::background::BACKGROUND_RECHECK);
        }
    }
}

/// [`DbInner::check_flush_failed_since`] under the `bg` lock.
fn flush_failed_since(bg: &BgState, errors_before: Option<u64>) -> Result<()> {
    match bg.flush_retry.error() {
        Some(e) if errors_before != Some(bg.flush_errors) => Err(super::state::share_error(e)),
        _ => Ok(()),
    }
}

/// Writes every entry of `mems` (merged in internal-key order; their sequence numbers are
/// distinct, so no two entries are equal) to table `number` in `dir` and fsyncs it. Returns
/// the table's metadata, or `None` (and no file) when every memtable is empty.
///
/// # Errors
/// [`Error::Io`] from creating, writing or syncing the file; the partial file is removed.
pub(crate) fn write_level0_table(
    dir: &Path,
    options: &Options,
    mems: &[&MemTable],
    number: FileNumber,
) -> Result<Option<FileMeta>> {
    if mems.iter().all(|m| m.is_empty()) {
        return Ok(None);
    }
    let path = filename::table_path(dir, number);
    let mut builder = TableBuilder::create(
        &options.file_system,
        &path,
        TableBuilderOptions::from_options(options),
    )?;
    let mut add = |key: &MemKey, value: &SmallBytes| builder.add(key.as_ref(), value.as_slice());
    let added = if let [only] = mems {
        only.map().iter().try_for_each(|e| add(e.key(), e.value()))
    } else {
        // A k-way merge on the skiplists' own iterators (a step is O(1), where
        // `MemTableIter` re-seeks): the heap holds each memtable's next entry.
        let mut iters: Vec<_> = mems.iter().map(|m| m.map().iter()).collect();
        let mut heap = BinaryHeap::with_capacity(iters.len());
        for (source, it) in iters.iter_mut().enumerate() {
            if let Some(entry) = it.next() {
                heap.push(Reverse(HeapEntry { entry, source }));
            }
        }
        let mut result = Ok(());
        while let Some(Reverse(HeapEntry { entry, source })) = heap.pop() {
            if let Err(e) = add(entry.key(), entry.value()) {
                result = Err(e);
                break;
            }
            if let Some(next) = iters.get_mut(source).and_then(Iterator::next) {
                heap.push(Reverse(HeapEntry {
                    entry: next,
                    source,
                }));
            }
        }
        result
    };
    if let Err(e) = added {
        builder.abandon();
        return Err(e);
    }
    // The partial or unsynced file goes on failure: on a full disk it holds the space a retry
    // needs, and no manifest names it.
    let remove_on_error = |e: Error| {
        if let Err(removed) = options.file_system.remove_file(&path)
            && removed.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(path = %path.display(), error = %removed, "could not delete a failed flush's table");
        }
        e
    };
    let (props, size) = builder.finish().map_err(remove_on_error)?;
    filename::sync_dir(&*options.file_system, dir).map_err(remove_on_error)?;
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
        table_id: props.table_id,
    }))
}

/// A memtable's next entry in the flush merge, ordered by internal key.
struct HeapEntry<'a> {
    entry: crossbeam_skiplist::map::Entry<'a, MemKey, SmallBytes>,
    source: usize,
}

impl PartialEq for HeapEntry<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == std::cmp::Ordering::Equal
    }
}

impl Eq for HeapEntry<'_> {}

impl PartialOrd for HeapEntry<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for HeapEntry<'_> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.entry.key().cmp(other.entry.key())
    }
}
