//! The write path: batch → WAL → memtable, with group commit.
//!
//! Writers queue their batches. The first writer to find no active leader becomes the leader:
//! it takes every queued batch (up to [`MAX_GROUP_BYTES`]), assigns them consecutive sequence
//! numbers, appends them to the WAL as **one** record with one `write` call, fsyncs once if any
//! member asked for `sync`, inserts them into the memtable, publishes the new visible sequence
//! number, wakes the members, and hands leadership to the next queued writer. So concurrent
//! synced writers share fsyncs instead of paying one each.
//!
//! # Asynchronous writers
//! [`crate::Db::write_async`] queues a batch without blocking the calling thread while it
//! waits: its [`WriteFuture`] is woken when the group holding it is committed. Leadership is
//! never handed to an asynchronous writer, because its task might not be polled until the
//! thread that would poll it is free (an async runtime's worker blocked in a synchronous write
//! waiting for that very leader would deadlock). When the next queued writer is
//! asynchronous, leadership goes to the database's **committer thread** instead, started by the
//! first `write_async`, which leads group after group until the queue is empty or its front is
//! a blocking writer. An asynchronous writer that finds no leader at all leads its own group
//! in the calling thread, at once, as a blocking writer would, unless it asks for a hand-off
//! ([`crate::WriteOptions::hand_off`]): then the committer thread leads that group too, and
//! the calling thread goes on at once. This is the role of RocksDB's write thread for
//! `allow_concurrent_memtable_write = false`, with the waiting moved out of the caller's
//! thread.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use bytes::Bytes;
use parking_lot::{Condvar, Mutex};

use super::state::{DbInner, ImmMemTable, KeyspaceState, LogState, SuperVersion, share_error};
use crate::batch::{Owner, WriteBatch};
use crate::error::{Error, Result};
use crate::filename;
use crate::memtable::MemTable;
use crate::types::{FileNumber, SeqNo, ValueKind};
use crate::wal;
use crate::write_buffer::WriteBufferManager;

/// Largest group a leader assembles, in encoded bytes. Bounds the latency a small write pays
/// for riding along with big ones (LevelDB uses 1 MiB).
const MAX_GROUP_BYTES: usize = 1 << 20;

/// A queued write and the slot its writer waits on.
pub(crate) struct PendingWrite {
    batch: WriteBatch,
    sync: bool,
    /// Keys plus values in the batch, for statistics.
    user_bytes: u64,
    /// Queued by [`crate::Db::write_async`]: never handed leadership.
    asynchronous: bool,
    slot: Arc<Slot>,
}

enum SlotState {
    Waiting,
    /// This writer must lead the next group (blocking writers only).
    Leader,
    /// Set once by the leader; its writer takes the result exactly once.
    Done(Result<()>),
}

struct SlotInner {
    state: SlotState,
    /// The task of an asynchronous writer that is waiting.
    waker: Option<Waker>,
}

struct Slot {
    inner: Mutex<SlotInner>,
    cv: Condvar,
}

impl Slot {
    fn new() -> Arc<Slot> {
        Arc::new(Slot {
            inner: Mutex::new(SlotInner {
                state: SlotState::Waiting,
                waker: None,
            }),
            cv: Condvar::new(),
        })
    }

    fn set(&self, state: SlotState) {
        let waker = {
            let mut inner = self.inner.lock();
            inner.state = state;
            inner.waker.take()
        };
        self.cv.notify_one();
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// Blocks until the write is done, leading a group if handed leadership.
    fn wait(&self, db: &DbInner, me: &Arc<Slot>) -> Result<()> {
        let mut inner = self.inner.lock();
        loop {
            match std::mem::replace(&mut inner.state, SlotState::Waiting) {
                SlotState::Waiting => self.cv.wait(&mut inner),
                SlotState::Done(result) => return result,
                SlotState::Leader => {
                    drop(inner);
                    return db.lead_group(me);
                }
            }
        }
    }
}

/// What a leader does after its group.
#[derive(Clone, Copy, PartialEq, Eq)]
enum AfterGroup {
    /// Leadership was passed on (or nobody is queued).
    Stop,
    /// The committer leads the next group too.
    Continue,
}

/// The commit of a batch queued by [`crate::Db::write_async`]; resolves to the write's result.
///
/// The batch is queued (or, if no group commit is in progress, committed in the calling
/// thread) when `write_async` is called, not when the future is first polled. Dropping the
/// future before it resolves **blocks** until the batch is committed: the write is not
/// cancelled, and every resource the caller tied to it (locks, counters) stays held until it
/// is in the WAL and memtable.
#[must_use = "the write is committed anyway, but its result is only known by awaiting"]
pub struct WriteFuture {
    db: Arc<DbInner>,
    state: FutureState,
}

enum FutureState {
    Ready(Option<Result<()>>),
    Queued(Arc<Slot>),
}

impl std::fmt::Debug for WriteFuture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let queued = matches!(self.state, FutureState::Queued(_));
        f.debug_struct("WriteFuture")
            .field("queued", &queued)
            .finish_non_exhaustive()
    }
}

impl Future for WriteFuture {
    type Output = Result<()>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        let this = &mut *self;
        let slot = match &mut this.state {
            FutureState::Ready(result) => {
                return Poll::Ready(result.take().unwrap_or_else(|| {
                    Err(Error::InvalidArgument(
                        "WriteFuture polled again after it resolved".to_owned(),
                    ))
                }));
            }
            FutureState::Queued(slot) => Arc::clone(slot),
        };
        let mut inner = slot.inner.lock();
        match std::mem::replace(&mut inner.state, SlotState::Waiting) {
            SlotState::Waiting => {
                if !inner
                    .waker
                    .as_ref()
                    .is_some_and(|w| w.will_wake(cx.waker()))
                {
                    inner.waker = Some(cx.waker().clone());
                }
                Poll::Pending
            }
            SlotState::Done(result) => {
                drop(inner);
                this.state = FutureState::Ready(None);
                Poll::Ready(result)
            }
            SlotState::Leader => {
                // Not handed to asynchronous writers; lead rather than stall if it ever is.
                drop(inner);
                this.state = FutureState::Ready(None);
                Poll::Ready(this.db.lead_group(&slot))
            }
        }
    }
}

impl Drop for WriteFuture {
    fn drop(&mut self) {
        if let FutureState::Queued(slot) = &self.state {
            slot.inner.lock().waker = None;
            // The result was the caller's to see; the write itself goes on either way.
            let _ = slot.wait(&self.db, slot);
        }
    }
}

impl DbInner {
    /// [`DbInner::write`] with `between` run after the batch was checked and before it is
    /// queued: a test's way into the window where another thread drops a keyspace.
    #[cfg(test)]
    pub(crate) fn write_with_pause(&self, batch: WriteBatch, between: impl FnOnce()) -> Result<()> {
        let Some(user_bytes) = self.admit(&batch, false)? else {
            return Ok(());
        };
        between();
        let slot = self.enqueue(batch, false, user_bytes, false);
        slot.wait(self, &slot)
    }

    /// Commits `batch`; see [`crate::Db::write`].
    pub(crate) fn write(&self, batch: WriteBatch, sync: bool) -> Result<()> {
        let Some(user_bytes) = self.admit(&batch, sync)? else {
            return Ok(());
        };
        let slot = self.enqueue(batch, sync, user_bytes, false);
        slot.wait(self, &slot)
    }

    /// Returns once every write queued before the call is committed (in the WAL and the
    /// memtables, visible to reads); see [`crate::Db::wait_for_queued_writes`].
    pub(crate) fn write_barrier(&self) -> Result<()> {
        self.check_writable()?;
        let slot = self.enqueue(WriteBatch::new(), false, 0, false);
        slot.wait(self, &slot)
    }

    /// Queues `batch` without waiting; see [`crate::Db::write_async`]. With `hand_off`, a
    /// batch that would lead its own group goes to the committer thread instead.
    pub(crate) fn write_async(
        self: &Arc<Self>,
        batch: WriteBatch,
        sync: bool,
        hand_off: bool,
    ) -> WriteFuture {
        let ready = |result| WriteFuture {
            db: Arc::clone(self),
            state: FutureState::Ready(Some(result)),
        };
        let user_bytes = match self.admit(&batch, sync) {
            Ok(Some(n)) => n,
            Ok(None) => return ready(Ok(())),
            Err(e) => return ready(Err(e)),
        };
        if let Err(e) = self.start_committer() {
            return ready(Err(e));
        }
        let slot = self.enqueue(batch, sync, user_bytes, true);
        let lead = matches!(slot.inner.lock().state, SlotState::Leader);
        if lead {
            if hand_off {
                let mut q = self.queue.lock();
                // A closing database's committer may be gone: lead here then.
                if !q.committer_stop {
                    // No other leader is active, so nobody else touches this slot meanwhile.
                    slot.inner.lock().state = SlotState::Waiting;
                    q.committer_lead = true;
                    self.committer_cv.notify_one();
                    drop(q);
                    return WriteFuture {
                        db: Arc::clone(self),
                        state: FutureState::Queued(slot),
                    };
                }
            }
            return ready(self.lead_group(&slot));
        }
        WriteFuture {
            db: Arc::clone(self),
            state: FutureState::Queued(slot),
        }
    }

    /// Checks a write before it is queued: the database takes writes and the batch is valid
    /// ([`DbInner::validate_batch`]). Returns the batch's key plus value bytes, or `None` when
    /// there is nothing to commit (an empty batch without `sync`).
    fn admit(&self, batch: &WriteBatch, sync: bool) -> Result<Option<u64>> {
        self.check_writable()?;
        let user_bytes = self.validate_batch(batch)?;
        Ok((!batch.is_empty() || sync).then_some(user_bytes))
    }

    /// Appends a write to the queue; its slot says `Leader` when no leader was active.
    fn enqueue(
        &self,
        batch: WriteBatch,
        sync: bool,
        user_bytes: u64,
        asynchronous: bool,
    ) -> Arc<Slot> {
        let slot = Slot::new();
        let mut q = self.queue.lock();
        if !q.leader_active {
            q.leader_active = true;
            slot.inner.lock().state = SlotState::Leader;
        }
        q.pending.push_back(PendingWrite {
            batch,
            sync,
            user_bytes,
            asynchronous,
            slot: Arc::clone(&slot),
        });
        slot
    }

    /// Starts the committer thread unless it runs already.
    fn start_committer(self: &Arc<Self>) -> Result<()> {
        if self.committer_started.load(Ordering::Acquire) {
            return Ok(());
        }
        let mut threads = self.bg_threads.lock();
        if self.committer_started.load(Ordering::Acquire) {
            return Ok(());
        }
        let inner = Arc::clone(self);
        let handle = std::thread::Builder::new()
            .name("strata-commit".to_owned())
            .spawn(move || inner.committer_main())
            .map_err(|e| Error::io(std::path::Path::new("<thread>"), e))?;
        threads.push(handle);
        self.committer_started.store(true, Ordering::Release);
        Ok(())
    }

    /// The committer thread: leads whenever leadership is handed to it, until the database
    /// closes.
    fn committer_main(&self) {
        loop {
            {
                let mut q = self.queue.lock();
                while !q.committer_lead {
                    if q.committer_stop {
                        return;
                    }
                    self.committer_cv.wait(&mut q);
                }
                q.committer_lead = false;
            }
            while self.lead_one_group(None, true).1 == AfterGroup::Continue {}
        }
    }

    /// Checks that every keyspace the batch names is live, and the size limits; returns the
    /// batch's key plus value bytes.
    fn validate_batch(&self, batch: &WriteBatch) -> Result<u64> {
        match batch.owner() {
            Owner::Any => {}
            Owner::Db(db) if db == std::ptr::from_ref(self).addr() => {}
            Owner::Db(_) | Owner::Mixed => {
                return Err(Error::InvalidArgument(
                    "the batch holds keyspace handles of another database".to_owned(),
                ));
            }
        }
        let mut user_bytes = 0u64;
        let mut ks: Arc<KeyspaceState> = Arc::clone(&self.default_ks);
        for entry in batch.iter() {
            let (id, _, key, value) = entry.map_err(Error::InvalidArgument)?;
            if id != ks.id {
                ks = self.keyspace_by_id(id).ok_or_else(|| {
                    match self.dropped_keyspaces.lock().get(&id) {
                        Some(name) => Error::InvalidArgument(format!(
                            "keyspace {name:?} was dropped (the write went through a handle \
                             taken before the drop)"
                        )),
                        None => Error::InvalidArgument(format!(
                            "the batch writes to keyspace id {id}, which this database does \
                             not have (a handle of another database)"
                        )),
                    }
                })?;
            }
            ks.check_live()?;
            ks.options.check_entry_size(key, value)?;
            user_bytes += (key.len() + value.len()) as u64;
        }
        Ok(user_bytes)
    }

    /// Runs one commit group as leader, then passes leadership on. Returns the leader's own
    /// result.
    fn lead_group(&self, me: &Arc<Slot>) -> Result<()> {
        let (mine, mut after) = self.lead_one_group(Some(me), false);
        // Only while closing (the committer thread may be gone): lead until the queue is empty.
        while after == AfterGroup::Continue {
            after = self.lead_one_group(None, false).1;
        }
        mine.unwrap_or(Ok(()))
    }

    /// Commits the group at the front of the queue and decides who leads next: the next
    /// blocking writer, the committer thread (for an asynchronous one), or nobody when the
    /// queue is empty. Returns the result of `me`'s write (when `me` is in the group), and
    /// whether the committer (`committer` true) goes on to lead the next group itself.
    fn lead_one_group(
        &self,
        me: Option<&Arc<Slot>>,
        committer: bool,
    ) -> (Option<Result<()>>, AfterGroup) {
        let mut group = {
            let mut q = self.queue.lock();
            let mut group = Vec::new();
            let mut bytes = 0;
            while let Some(front) = q.pending.front() {
                let size = front.batch.size_bytes();
                if !group.is_empty() && bytes + size > MAX_GROUP_BYTES {
                    break;
                }
                bytes += size;
                if let Some(w) = q.pending.pop_front() {
                    group.push(w);
                }
            }
            group
        };
        let result = self.commit_group(&mut group);
        // Hand leadership on before waking the members, so the next group's WAL write and
        // fsync overlap the wake-ups instead of waiting for them (measured in
        // docs/benchmarks.md: waking 60 members one by one took 5-7 ms on a busy machine).
        let after = {
            let mut q = self.queue.lock();
            match q.pending.front() {
                None => {
                    q.leader_active = false;
                    AfterGroup::Stop
                }
                Some(next) if !next.asynchronous => {
                    next.slot.set(SlotState::Leader);
                    AfterGroup::Stop
                }
                Some(_) if committer || q.committer_stop => AfterGroup::Continue,
                Some(_) => {
                    q.committer_lead = true;
                    self.committer_cv.notify_one();
                    AfterGroup::Stop
                }
            }
        };
        let mut mine = None;
        for w in group {
            let r = match &result {
                Ok(()) => Ok(()),
                Err(e) => Err(share_error(e)),
            };
            if me.is_some_and(|me| Arc::ptr_eq(&w.slot, me)) {
                mine = Some(r);
            } else {
                w.slot.set(SlotState::Done(r));
            }
        }
        (mine.or(me.map(|_| result)), after)
    }

    fn commit_group(&self, group: &mut [PendingWrite]) -> Result<()> {
        self.check_writable()?;
        let count: usize = group.iter().map(|w| w.batch.len()).sum();
        let sync = group.iter().any(|w| w.sync);
        let mut log = self.log.lock();
        let write_bytes = group.iter().map(|w| w.batch.size_bytes() as u64).sum();
        self.make_room_for_write(&mut log, write_bytes)?;
        let first = SeqNo(log.last_seqno.get() + 1);
        let last = log
            .last_seqno
            .checked_add(count as u64)
            .ok_or(Error::SeqNoExhausted {
                last: log.last_seqno.get(),
            })?;
        // One WAL record for the whole group.
        let mut data = if let [only] = group {
            std::mem::take(&mut only.batch).into_data()
        } else {
            let mut combined =
                WriteBatch::with_capacity(group.iter().map(|w| w.batch.size_bytes()).sum());
            for w in group.iter() {
                combined.append(&w.batch);
            }
            combined.into_data()
        };
        data[0..8].copy_from_slice(&first.get().to_le_bytes());
        if count > 0 {
            let wal = log.wal.as_mut().ok_or(Error::Closed)?;
            if let Err(e) = wal.add_record(&data) {
                self.poison_after("WAL append", &e);
                return Err(e);
            }
            self.stats
                .wal_bytes
                .fetch_add(data.len() as u64, Ordering::Relaxed);
            let user_bytes: u64 = group.iter().map(|w| w.user_bytes).sum();
            self.stats
                .user_bytes
                .fetch_add(user_bytes, Ordering::Relaxed);
        }
        if sync {
            self.sync_wal(&mut log)?;
        }
        self.stats.write_groups.fetch_add(1, Ordering::Relaxed);
        // Insert into the keyspaces' active memtables, sharing one buffer for all keys and
        // values. A keyspace dropped since validation is skipped: its data is gone anyway.
        let wal_number = log.wal_number;
        let mut skipped_dropped = false;
        insert_batch(Bytes::from(data), first, |id| {
            let ks = if id == self.default_ks.id {
                Arc::clone(&self.default_ks)
            } else if let Some(ks) = self.keyspace_by_id(id) {
                ks
            } else {
                skipped_dropped = true;
                return None;
            };
            if ks.mem_first_wal.load(Ordering::Acquire) == 0 {
                ks.mem_first_wal.store(wal_number.0, Ordering::Release);
            }
            Some(Arc::clone(&ks.super_version().mem))
        })?;
        if skipped_dropped {
            // Entries of a keyspace dropped after this write was validated are in the WAL but
            // will be in no table: the manifest's last sequence number must cover them, as
            // `drop_keyspace` does for the writes before it, or a reopen after their WAL is
            // deleted takes them for lost records (`docs/format/wal.md` section 8). The next
            // manifest edit (before any WAL is deleted) carries the raised number.
            let mut versions = self.versions.lock();
            let horizon = versions.last_seqno().max(last);
            versions.set_last_seqno(horizon);
        }
        log.last_seqno = last;
        self.visible_seqno.store(last.get(), Ordering::Release);
        Ok(())
    }

    /// Ensures every keyspace's active memtable has room: a full one (past its
    /// `write_buffer_size`) is frozen into an immutable memtable, a new WAL is started and the
    /// flush thread woken. Waits while a full keyspace already has `max_write_buffer_number`
    /// memtables in memory. When the WALs total more than [`Options::max_total_wal_size`], the
    /// keyspaces holding the oldest WAL are frozen too, so it can be deleted once flushed.
    ///
    /// Also applies write backpressure for a group of `write_bytes`:
    /// - past a soft limit (`level0_slowdown_writes_trigger` tables in level 0 of any keyspace,
    ///   or `soft_pending_compaction_bytes_limit` summed over keyspaces) the group is delayed by
    ///   `write_bytes / rate`, where the rate falls linearly from `delayed_write_rate` to a tenth
    ///   of it as the hard limit nears, so writers slow down smoothly instead of hitting a wall;
    /// - at a hard limit (`level0_stop_writes_trigger`, `hard_pending_compaction_bytes_limit`)
    ///   the leader waits until a compaction finishes.
    ///
    /// A pending-bytes limit of 0 is disabled, as in RocksDB.
    ///
    /// [`Options::max_total_wal_size`]: crate::Options::max_total_wal_size
    pub(crate) fn make_room_for_write(&self, log: &mut LogState, write_bytes: u64) -> Result<()> {
        let mut delayed = false;
        'retry: loop {
            self.check_writable()?;
            // Counters first, then the versions: a flush or compaction that finishes after this
            // point changes the counters, so the wait below cannot miss it.
            let progress = self.background_progress();
            let keyspaces = self.all_keyspaces();
            let o = &self.options;
            let l0 = keyspaces
                .iter()
                .map(|ks| ks.super_version().version.files(0).len())
                .max()
                .unwrap_or(0);
            let pending = self.pending_compaction_bytes.load(Ordering::Relaxed);
            let (_, hard_pending) = o.pending_compaction_bytes_limits();
            if l0 >= o.level0_stop_writes_trigger || hard_pending.is_some_and(|h| pending >= h) {
                // Compactions that failed for want of a resource wait before retrying: the
                // writer gets their error rather than waiting for as long as the disk is full.
                if let Some(e) = self.bg.lock().compaction_retry.error() {
                    return Err(share_error(e));
                }
                self.wait_for_background_progress(progress)?;
                continue;
            }
            if !delayed {
                delayed = true;
                if let Some(delay) = self.write_delay(l0, pending, write_bytes) {
                    std::thread::sleep(delay);
                    let micros = u64::try_from(delay.as_micros()).unwrap_or(u64::MAX);
                    self.stats.delay_micros.fetch_add(micros, Ordering::Relaxed);
                }
            }
            if let Some(manager) = &o.write_buffer_manager
                && self.make_room_in_budget(log, &keyspaces, manager)?
            {
                self.check_flush_failed_since(None)?;
                self.wait_for_background_progress(progress)?;
                continue;
            }
            let oldest_wal = self.oldest_wal_over_limit(log);
            for ks in &keyspaces {
                let sv = ks.super_version();
                let full = sv.mem.approximate_size() >= ks.options.write_buffer_size;
                let holds_oldest = oldest_wal.is_some_and(|w| {
                    let first = ks.mem_first_wal.load(Ordering::Acquire);
                    first != 0 && first <= w.0
                });
                if oldest_wal.is_some_and(|w| sv.imms.iter().any(|imm| imm.first_wal <= w))
                    && ks.request_flush(log.wal_number)
                {
                    // Immutable memtables waiting to be merged hold the oldest WAL: flush them
                    // now (`min_write_buffer_number_to_merge`).
                    self.wake_background();
                }
                if !(full || holds_oldest) {
                    continue;
                }
                if sv.imms.len() + 1 >= ks.options.max_write_buffer_number {
                    // Stall until the flush thread frees a slot; flushes that failed for want
                    // of a resource wait before retrying, so the writer gets their error.
                    self.check_flush_failed_since(None)?;
                    self.wait_for_background_progress(progress)?;
                    continue 'retry;
                }
                self.switch_memtable(log, ks, &sv)?;
                if holds_oldest && ks.request_flush(log.wal_number) {
                    // The oldest WAL goes only once this keyspace's memtables are flushed. The
                    // switch woke the background threads before this request: wake them again.
                    self.wake_background();
                }
            }
            return Ok(());
        }
    }

    /// Applies the shared memtable budget of [`Options::write_buffer_manager`] for a write
    /// group (the rules are in [`WriteBufferManager`]). When the budget's active memtables
    /// need a flush, freezes this database's largest active memtable if it holds at least an
    /// eighth of the budget (a smaller one is not what fills it: another database's writes
    /// freeze theirs). When the budget is full, asks for every immutable memtable of this
    /// database to be flushed now, and returns true if there are any: the writer then waits
    /// for a flush. A database with nothing to flush never waits here, so the idle memtables
    /// of other databases cannot hold it.
    ///
    /// # Errors
    /// Those of [`DbInner::switch_memtable`].
    ///
    /// [`Options::write_buffer_manager`]: crate::Options::write_buffer_manager
    fn make_room_in_budget(
        &self,
        log: &mut LogState,
        keyspaces: &[Arc<KeyspaceState>],
        manager: &WriteBufferManager,
    ) -> Result<bool> {
        if manager.should_flush() {
            let largest = keyspaces
                .iter()
                .map(|ks| (ks, ks.super_version()))
                .max_by_key(|(_, sv)| sv.mem.approximate_size());
            if let Some((ks, sv)) = largest
                && sv.mem.approximate_size() >= manager.buffer_size() / 8
                && sv.imms.len() + 1 < ks.options.max_write_buffer_number
            {
                self.switch_memtable(log, ks, &sv)?;
                ks.request_flush(log.wal_number);
                self.wake_background();
            }
        }
        if !manager.is_full() {
            return Ok(false);
        }
        let mut flushing = false;
        for ks in keyspaces {
            if !ks.super_version().imms.is_empty() {
                flushing = true;
                if ks.request_flush(log.wal_number) {
                    self.wake_background();
                }
            }
        }
        Ok(flushing)
    }

    /// Freezes keyspace `ks`'s active memtable if it holds anything (for `flush`), waiting
    /// while it already has `max_write_buffer_number` memtables, and asks for all its immutable
    /// memtables to be flushed (however few: `min_write_buffer_number_to_merge`). The caller
    /// wakes the background threads. While waiting, a flush that fails for want of a resource
    /// after `errors_before` such failures ([`DbInner::retry_flushes_now`]) ends the wait with
    /// its error.
    pub(crate) fn freeze_memtable(
        &self,
        log: &mut LogState,
        ks: &KeyspaceState,
        errors_before: u64,
    ) -> Result<()> {
        loop {
            self.check_writable()?;
            let progress = self.background_progress();
            let sv = ks.super_version();
            if !sv.mem.is_empty() {
                if sv.imms.len() + 1 >= ks.options.max_write_buffer_number {
                    self.check_flush_failed_since(Some(errors_before))?;
                    self.wait_for_background_progress(progress)?;
                    continue;
                }
                self.switch_memtable(log, ks, &sv)?;
            }
            ks.request_flush(log.wal_number);
            return Ok(());
        }
    }

    /// The oldest sealed WAL when the WALs together exceed `max_total_wal_size`.
    fn oldest_wal_over_limit(&self, log: &LogState) -> Option<FileNumber> {
        let (&oldest, _) = log.sealed_wals.first_key_value()?;
        let current = log.wal.as_ref().map_or(0, wal::Writer::len);
        let total: u64 = log.sealed_wals.values().sum::<u64>() + current;
        (total > self.options.effective_max_total_wal_size()).then_some(oldest)
    }

    /// Deletes the sealed WALs that hold no write still missing from a table: those older
    /// than every keyspace's oldest needed WAL. Called under the `log` lock.
    pub(crate) fn delete_obsolete_wals(&self, log: &mut LogState) {
        let needed = self
            .all_keyspaces()
            .iter()
            .filter_map(|ks| ks.oldest_needed_wal())
            .fold(log.wal_number, FileNumber::min);
        let obsolete: Vec<FileNumber> = log.sealed_wals.range(..needed).map(|(&n, _)| n).collect();
        for number in obsolete {
            log.sealed_wals.remove(&number);
            let path = filename::wal_path(&self.dir, number);
            match self.fs().remove_file(&path) {
                Ok(()) => tracing::debug!(path = %path.display(), "deleted obsolete WAL"),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "could not delete obsolete WAL");
                }
            }
        }
    }

    /// Flushes and compactions finished so far.
    fn background_progress(&self) -> (u64, u64) {
        let bg = self.bg.lock();
        (bg.flushes_done, bg.compactions_done)
    }

    /// Waits until a flush or compaction finishes after `seen` was read (a write stall, counted
    /// in statistics). Also returns after 100 ms, so the caller re-checks its condition even if
    /// a wake-up it needed came from elsewhere.
    fn wait_for_background_progress(&self, seen: (u64, u64)) -> Result<()> {
        let start = Instant::now();
        let mut bg = self.bg.lock();
        while (bg.flushes_done, bg.compactions_done) == seen
            && !bg.shutting_down
            && !self.is_poisoned()
            && start.elapsed() < std::time::Duration::from_millis(100)
        {
            self.bg_cv
                .wait_for(&mut bg, std::time::Duration::from_millis(100));
        }
        let micros = u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX);
        self.stats.stall_micros.fetch_add(micros, Ordering::Relaxed);
        if bg.shutting_down {
            return Err(Error::Closed);
        }
        Ok(())
    }

    /// The delay for a group of `write_bytes` under the soft limits, or `None` below them.
    fn write_delay(
        &self,
        l0: usize,
        pending: u64,
        write_bytes: u64,
    ) -> Option<std::time::Duration> {
        let o = &self.options;
        // How far between soft (0.0) and hard (1.0) limit each signal is; the worse one counts.
        let frac = |value: f64, soft: f64, hard: f64| {
            if value < soft {
                None
            } else {
                Some(((value - soft) / (hard - soft).max(1.0)).clamp(0.0, 1.0))
            }
        };
        #[expect(
            clippy::cast_precision_loss,
            reason = "ratios of counts and byte sizes"
        )]
        let severity = [
            frac(
                l0 as f64,
                o.level0_slowdown_writes_trigger as f64,
                o.level0_stop_writes_trigger as f64,
            ),
            match o.pending_compaction_bytes_limits() {
                // A disabled (0) soft limit never delays; a disabled hard limit leaves the
                // soft one delaying at the full `delayed_write_rate`.
                (None, _) => None,
                (Some(soft), hard) => frac(
                    pending as f64,
                    soft as f64,
                    hard.map_or(f64::INFINITY, |h| h as f64),
                ),
            },
        ]
        .into_iter()
        .flatten()
        .fold(None, |acc: Option<f64>, s| {
            Some(acc.map_or(s, |a| a.max(s)))
        })?;
        #[expect(clippy::cast_precision_loss, reason = "rates in bytes per second")]
        let rate = o.delayed_write_rate as f64 * (1.0 - 0.9 * severity);
        #[expect(clippy::cast_precision_loss, reason = "bytes")]
        let secs = (write_bytes as f64 / rate).min(1.0);
        Some(std::time::Duration::from_secs_f64(secs))
    }

    /// fdatasyncs the active WAL (the caller holds the `log` lock). Called for synced writes,
    /// and before an operation that is durable on its own (a keyspace create or drop, an
    /// ingest) is recorded in the manifest: otherwise a power loss could keep that operation and
    /// lose earlier unsynced writes, leaving a hole (`docs/design.md`, "Durability
    /// order").
    ///
    /// # Errors
    /// [`Error::Io`] from the sync; the database is then poisoned. [`Error::Closed`].
    pub(crate) fn sync_wal(&self, log: &mut LogState) -> Result<()> {
        let wal = log.wal.as_mut().ok_or(Error::Closed)?;
        if let Err(e) = wal.sync() {
            self.poison_after("WAL fsync", &e);
            return Err(e);
        }
        self.stats.wal_syncs.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Freezes `ks`'s active memtable (captured in `sv`) and starts a new WAL, so the
    /// keyspace's log number can move past every WAL holding the frozen memtable's writes.
    fn switch_memtable(
        &self,
        log: &mut LogState,
        ks: &KeyspaceState,
        sv: &SuperVersion,
    ) -> Result<()> {
        // The old WAL is synced first, so a synced write in the new WAL implies every earlier
        // write is durable too (recovery replays logs in order and must not find holes), and a
        // new WAL never exists beside an old one with an unsynced tail: only the newest WAL may
        // end torn (`docs/design.md`, "Durability order").
        if let Some(old) = log.wal.as_mut()
            && let Err(e) = old.sync()
        {
            self.poison_after("WAL fsync", &e);
            return Err(e);
        }
        let number = self.versions.lock().new_file_number();
        let path = filename::wal_path(&self.dir, number);
        let new_wal = match wal::Writer::create(self.fs(), &path)
            .and_then(|w| filename::sync_dir(self.fs(), &self.dir).map(|()| w))
        {
            Ok(w) => w,
            Err(e) => {
                // The new, empty WAL may exist: writes must not go on into the old one. It
                // holds nothing, so it goes (if it can) before a resume starts yet another.
                let _ = self.fs().remove_file(&path);
                self.poison_after("creating a WAL", &e);
                return Err(e);
            }
        };
        self.freeze_into_imm(log, ks, sv);
        let old_len = log.wal.as_ref().map_or(0, wal::Writer::len);
        log.sealed_wals.insert(log.wal_number, old_len);
        log.wal = Some(new_wal);
        log.wal_number = number;
        self.delete_obsolete_wals(log);
        self.wake_background();
        Ok(())
    }

    /// Makes `ks`'s active memtable (captured in `sv`) its newest immutable memtable, holding
    /// writes of the WALs up to the active one, and gives it a new, empty active memtable. The
    /// WAL stays as it is (the caller starts a new one, or retires it: [`DbInner::resume`]).
    pub(crate) fn freeze_into_imm(&self, log: &LogState, ks: &KeyspaceState, sv: &SuperVersion) {
        let first_wal = match ks.mem_first_wal.swap(0, Ordering::AcqRel) {
            0 => log.wal_number,
            n => FileNumber(n),
        };
        sv.mem.freeze_charge();
        let imm = Arc::new(ImmMemTable {
            mem: Arc::clone(&sv.mem),
            wal_number: log.wal_number,
            first_wal,
        });
        tracing::debug!(
            keyspace = %ks.name,
            wal = %log.wal_number,
            size_bytes = sv.mem.approximate_size(),
            entries = sv.mem.len(),
            "freezing memtable"
        );
        let mut guard = ks.super_version.write();
        let mut imms = Vec::with_capacity(guard.imms.len() + 1);
        imms.push(imm);
        imms.extend(guard.imms.iter().cloned());
        *guard = Arc::new(SuperVersion {
            mem: Arc::new(ks.options.new_memtable()),
            imms,
            version: Arc::clone(&guard.version),
        });
    }
}

/// Inserts a batch's entries (in its encoded form) into memtables, entry `i` at `first + i`,
/// with keys and values sharing `data`'s buffer. `route` gives the memtable of a keyspace id,
/// or `None` to skip that keyspace's entries.
///
/// Large batches are inserted in key order: each skiplist search then walks mostly the same
/// nodes as the previous one, which stay in the CPU cache, instead of a random path through a
/// memtable far larger than the cache. Sequence numbers follow the batch order, so the result
/// is the same as inserting in batch order.
pub(crate) fn insert_batch<F>(data: Bytes, first: SeqNo, mut route: F) -> Result<()>
where
    F: FnMut(u32) -> Option<Arc<MemTable>>,
{
    /// Below this many entries sorting costs more than it saves.
    const SORT_THRESHOLD: usize = 64;
    let mut entries = Vec::new();
    let mut seqno = first;
    for entry in crate::batch::entries(&data) {
        let (keyspace, kind, key, value) = entry.map_err(Error::InvalidArgument)?;
        entries.push((keyspace, key, seqno, kind, value));
        seqno = SeqNo(seqno.get() + 1);
    }
    if entries.len() >= SORT_THRESHOLD {
        entries.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(b.1)).then(b.2.cmp(&a.2)));
    }
    let mut target: Option<(u32, Option<Arc<MemTable>>)> = None;
    for (keyspace, key, seqno, kind, value) in entries {
        if target.as_ref().is_none_or(|(id, _)| *id != keyspace) {
            if let Some((_, Some(mem))) = &target {
                mem.settle_charge();
            }
            target = Some((keyspace, route(keyspace)));
        }
        let Some((_, Some(mem))) = &target else {
            continue;
        };
        let value = if kind == ValueKind::Delete {
            Bytes::new()
        } else {
            data.slice_ref(value)
        };
        mem.add_bytes(seqno, kind, data.slice_ref(key), value);
    }
    if let Some((_, Some(mem))) = &target {
        mem.settle_charge();
    }
    Ok(())
}
