//! The shared state behind a [`crate::Db`] and the locks that guard it.

use std::collections::VecDeque;
use std::fs::File;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;

use parking_lot::{Condvar, Mutex, RwLock};

use super::write::PendingWrite;
use crate::cache::TableCache;
use crate::error::{Error, Result};
use crate::memtable::MemTable;
use crate::options::Options;
use crate::snapshot::{Snapshot, SnapshotList};
use crate::types::{FileNumber, SeqNo};
use crate::version::{Version, VersionSet};
use crate::wal;

/// An immutable memtable waiting to be flushed, with the WAL that holds its writes.
#[derive(Debug)]
pub(crate) struct ImmMemTable {
    pub(crate) mem: Arc<MemTable>,
    /// The WAL holding this memtable's writes; obsolete once the memtable is in a table.
    pub(crate) wal_number: FileNumber,
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
    /// Last sequence number assigned (may run ahead of the visible one while a group commits).
    pub(crate) last_seqno: SeqNo,
}

/// Group-commit queue.
#[derive(Default)]
pub(crate) struct WriteQueue {
    pub(crate) pending: VecDeque<PendingWrite>,
    pub(crate) leader_active: bool,
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
}

/// Everything shared by the user handles and the background thread.
pub(crate) struct DbInner {
    pub(crate) dir: PathBuf,
    pub(crate) options: Options,
    /// The flock'd `LOCK` file; taken out (releasing the lock) by `close`.
    pub(crate) lock_file: Mutex<Option<File>>,
    /// Last sequence number whose write is fully in the memtable: reads see up to here.
    pub(crate) visible_seqno: AtomicU64,
    pub(crate) super_version: RwLock<Arc<SuperVersion>>,
    pub(crate) queue: Mutex<WriteQueue>,
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
    /// First failure that put durable state in doubt; once set, writes are refused.
    pub(crate) poison: Mutex<Option<String>>,
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
    /// The current super version (a cheap `Arc` clone under a read lock).
    pub(crate) fn super_version(&self) -> Arc<SuperVersion> {
        Arc::clone(&self.super_version.read())
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
    pub(crate) fn read_view(&self, snapshot: Option<&Snapshot>) -> (SeqNo, Arc<SuperVersion>) {
        let guard = self.super_version.read();
        let seqno = snapshot.map_or_else(|| self.visible_seqno(), Snapshot::seqno);
        (seqno, Arc::clone(&guard))
    }

    pub(crate) fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        Ok(())
    }

    pub(crate) fn check_writable(&self) -> Result<()> {
        self.check_open()?;
        if let Some(reason) = self.poison.lock().as_ref() {
            return Err(Error::Poisoned {
                reason: reason.clone(),
            });
        }
        Ok(())
    }

    /// Records the first durability failure; later writes get [`Error::Poisoned`].
    pub(crate) fn set_poison(&self, reason: String) {
        tracing::error!(%reason, "database poisoned; writes are refused until reopen");
        let mut p = self.poison.lock();
        if p.is_none() {
            *p = Some(reason);
        }
        drop(p);
        self.bg_cv.notify_all();
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
        let handles = std::mem::take(&mut *self.bg_threads.lock());
        for handle in handles {
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
            source: std::io::Error::new(source.kind(), source.to_string()),
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
        Error::Locked { path } => Error::Locked { path: path.clone() },
        Error::Poisoned { reason } => Error::Poisoned {
            reason: reason.clone(),
        },
        Error::Closed => Error::Closed,
        Error::SeqNoExhausted { last } => Error::SeqNoExhausted { last: *last },
    }
}
