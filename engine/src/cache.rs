//! The block cache (decompressed SSTable blocks, LRU by bytes) and the table cache (open
//! [`Table`]s, LRU by count).
//!
//! Both are shared by every reader of a database (`Send + Sync`, behind `Arc`); the storage
//! of each can also be shared by several databases ([`BlockCache::sharing`],
//! [`TableCache::sharing`]). The block cache is split into shards, each an LRU under its own
//! `parking_lot::Mutex`, so concurrent readers rarely contend; a shard's lock is held only
//! for a hash-map lookup and a list splice, never during I/O. The table cache has one mutex, also never held during I/O: two threads
//! missing on the same table may both open it, and the second insert wins.

use std::collections::HashMap;
use std::hash::Hash;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::filename::table_path;
use crate::fs::FileSystem;
use crate::sstable::Table;
use crate::sstable::block::Block;
use crate::types::FileNumber;
use crate::version::FileMeta;

/// Sentinel "no node" index in [`Lru`]'s list.
const NIL: usize = usize::MAX;

/// One entry of [`Lru`]'s slab.
#[derive(Debug)]
struct Node<K, V> {
    key: K,
    value: Option<V>,
    weight: usize,
    prev: usize,
    next: usize,
}

/// A weighted LRU map: a hash map into a slab of nodes linked most- to least-recently used.
/// Not synchronized; callers wrap it in a mutex.
#[derive(Debug)]
struct Lru<K, V> {
    map: HashMap<K, usize>,
    nodes: Vec<Node<K, V>>,
    free: Vec<usize>,
    /// Most recently used.
    head: usize,
    /// Least recently used.
    tail: usize,
    usage: usize,
    capacity: usize,
}

impl<K: Copy + Eq + Hash, V: Clone> Lru<K, V> {
    fn new(capacity: usize) -> Self {
        Lru {
            map: HashMap::new(),
            nodes: Vec::new(),
            free: Vec::new(),
            head: NIL,
            tail: NIL,
            usage: 0,
            capacity,
        }
    }

    fn unlink(&mut self, i: usize) {
        let (prev, next) = (self.nodes[i].prev, self.nodes[i].next);
        if prev == NIL {
            self.head = next;
        } else {
            self.nodes[prev].next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            self.nodes[next].prev = prev;
        }
    }

    fn push_front(&mut self, i: usize) {
        self.nodes[i].prev = NIL;
        self.nodes[i].next = self.head;
        if self.head != NIL {
            self.nodes[self.head].prev = i;
        }
        self.head = i;
        if self.tail == NIL {
            self.tail = i;
        }
    }

    fn get(&mut self, key: &K) -> Option<V> {
        let i = *self.map.get(key)?;
        self.unlink(i);
        self.push_front(i);
        self.nodes[i].value.clone()
    }

    fn remove(&mut self, key: &K) -> Option<V> {
        let i = self.map.remove(key)?;
        self.unlink(i);
        self.usage -= self.nodes[i].weight;
        self.free.push(i);
        self.nodes[i].value.take()
    }

    /// Inserts or replaces `key`, then evicts least-recently-used entries until the total
    /// weight fits. An entry heavier than the whole capacity is not kept.
    fn insert(&mut self, key: K, value: V, weight: usize) {
        self.remove(&key);
        if weight > self.capacity {
            return;
        }
        let node = Node {
            key,
            value: Some(value),
            weight,
            prev: NIL,
            next: NIL,
        };
        let i = if let Some(i) = self.free.pop() {
            self.nodes[i] = node;
            i
        } else {
            self.nodes.push(node);
            self.nodes.len() - 1
        };
        self.map.insert(key, i);
        self.push_front(i);
        self.usage += weight;
        while self.usage > self.capacity && self.tail != NIL {
            let victim = self.nodes[self.tail].key;
            self.remove(&victim);
        }
    }

    /// Removes every entry that fails `keep` and returns the removed values, so the caller can
    /// drop them after releasing its lock.
    fn retain(&mut self, mut keep: impl FnMut(&K, &V) -> bool) -> Vec<V> {
        let doomed: Vec<K> = self
            .map
            .iter()
            .filter(|&(k, &i)| self.nodes[i].value.as_ref().is_some_and(|v| !keep(k, v)))
            .map(|(&k, _)| k)
            .collect();
        doomed.iter().filter_map(|k| self.remove(k)).collect()
    }
}

/// Key of a cached block: the handle's owner id ([`BlockCache::sharing`]), the table's file
/// number and the block's byte offset in it. File numbers restart in every database, so the
/// owner keeps two databases sharing one cache from reading each other's blocks.
type BlockKey = (u64, FileNumber, u64);

/// Smallest capacity of one block-cache shard, in bytes; smaller caches use fewer shards so a
/// large block still fits in its shard.
const MIN_SHARD_BYTES: usize = 4 << 20;
/// Most block-cache shards.
const MAX_SHARDS: usize = 16;

/// The storage of a block cache: LRU shards bounded by bytes, shared by every
/// [`BlockCache`] handle made by [`BlockCache::sharing`].
#[derive(Debug)]
struct BlockStore {
    shards: Vec<Mutex<Lru<BlockKey, Arc<Block>>>>,
    capacity_bytes: usize,
    /// Next owner id handed to a handle.
    next_owner: AtomicU64,
}

/// A handle on an LRU cache of decompressed blocks, bounded by their total size in bytes,
/// keyed by (owner, file number, block offset); thread safe.
///
/// A database reads all its tables through one handle. Handles made by
/// [`BlockCache::sharing`] share one storage and one byte budget (RocksDB's `Cache` passed
/// to several databases through `BlockBasedTableOptions::block_cache`), so a process holding
/// many databases bounds their cached blocks together: pass one cache to each database with
/// [`crate::Options::block_cache`]. Each handle has its own owner id, so databases never see
/// each other's blocks, and its own counters: block hits and misses, and the bloom filter
/// statistics (see [`BlockCache::bloom_checks`]), all for the tables read through it.
#[derive(Debug)]
pub struct BlockCache {
    store: Arc<BlockStore>,
    owner: u64,
    hits: StripedCounter,
    misses: StripedCounter,
    bloom_checks: StripedCounter,
    bloom_useful: StripedCounter,
}

/// Stripes of a [`StripedCounter`]: more than the cores of the machines we run on, so threads
/// rarely share one.
const COUNTER_STRIPES: usize = 8;

/// A statistics counter that many threads add to: one cache-line-padded atomic per stripe,
/// each thread adding to its own stripe, summed when read. A single shared atomic would bounce
/// its cache line between the cores on every point lookup (RocksDB keeps its statistics per
/// core for the same reason). Reads are not a consistent snapshot across stripes; the counters
/// only grow, so a read lies between the true values at its start and at its end.
#[derive(Debug, Default)]
pub(crate) struct StripedCounter {
    stripes: [crossbeam_utils::CachePadded<AtomicU64>; COUNTER_STRIPES],
}

impl StripedCounter {
    /// Adds `n` on the calling thread's stripe.
    pub(crate) fn add(&self, n: u64) {
        self.stripes[counter_stripe()].fetch_add(n, Ordering::Relaxed);
    }

    /// The sum of all stripes.
    pub(crate) fn get(&self) -> u64 {
        self.stripes
            .iter()
            .map(|s| s.load(Ordering::Relaxed))
            .fold(0, u64::wrapping_add)
    }
}

/// The calling thread's stripe: threads are numbered in the order they first count, so the
/// first [`COUNTER_STRIPES`] threads never share one.
fn counter_stripe() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static STRIPE: usize = NEXT.fetch_add(1, Ordering::Relaxed) % COUNTER_STRIPES;
    }
    STRIPE.with(|s| *s)
}

impl BlockCache {
    /// A cache holding up to `capacity_bytes` bytes of decompressed blocks, and its first
    /// handle. 0 disables caching (every block read goes to the file). A block larger than its
    /// shard (at least 4 MiB, or the whole capacity when that is smaller) is not cached.
    pub fn new(capacity_bytes: usize) -> Arc<Self> {
        let n = (capacity_bytes / MIN_SHARD_BYTES).clamp(1, MAX_SHARDS);
        let per_shard = capacity_bytes / n;
        let store = Arc::new(BlockStore {
            shards: (0..n).map(|_| Mutex::new(Lru::new(per_shard))).collect(),
            capacity_bytes,
            next_owner: AtomicU64::new(0),
        });
        Self::handle(store)
    }

    /// A new handle on this cache's storage, with its own owner id and zeroed counters: what
    /// a database opened with [`crate::Options::block_cache`] reads through. The storage's
    /// byte budget is shared by all handles; blocks cached through one handle are never
    /// served through another.
    pub fn sharing(&self) -> Arc<Self> {
        Self::handle(Arc::clone(&self.store))
    }

    fn handle(store: Arc<BlockStore>) -> Arc<Self> {
        let owner = store.next_owner.fetch_add(1, Ordering::Relaxed);
        Arc::new(BlockCache {
            store,
            owner,
            hits: StripedCounter::default(),
            misses: StripedCounter::default(),
            bloom_checks: StripedCounter::default(),
            bloom_useful: StripedCounter::default(),
        })
    }

    fn shard(&self, key: &BlockKey) -> &Mutex<Lru<BlockKey, Arc<Block>>> {
        let mixed = (key.1.0 ^ key.2.rotate_left(32) ^ key.0.rotate_left(17))
            .wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let shards = &self.store.shards;
        let i = usize::try_from((mixed >> 32) % shards.len() as u64).unwrap_or(0);
        &shards[i]
    }

    /// The cached block at `offset` of table `file`, counting a hit or a miss.
    pub(crate) fn get(&self, file: FileNumber, offset: u64) -> Option<Arc<Block>> {
        let key = (self.owner, file, offset);
        let found = self.shard(&key).lock().get(&key);
        let counter = if found.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        counter.add(1);
        found
    }

    /// Caches `block` (read at `offset` of table `file`), evicting least recently used blocks
    /// of any handle sharing the storage.
    pub(crate) fn insert(&self, file: FileNumber, offset: u64, block: Arc<Block>) {
        let key = (self.owner, file, offset);
        let weight = block.size_bytes();
        self.shard(&key).lock().insert(key, block, weight);
    }

    /// The byte budget of the storage (shared by every handle on it), as passed to
    /// [`BlockCache::new`].
    pub fn capacity_bytes(&self) -> usize {
        self.store.capacity_bytes
    }

    /// Block lookups through this handle answered from the cache since it was created.
    pub fn hits(&self) -> u64 {
        self.hits.get()
    }

    /// Block lookups through this handle that had to read the file since it was created.
    pub fn misses(&self) -> u64 {
        self.misses.get()
    }

    /// Bytes of decompressed blocks currently cached by every handle sharing the storage.
    pub fn usage_bytes(&self) -> usize {
        self.store.shards.iter().map(|s| s.lock().usage).sum()
    }

    /// Drops every block of table `n` cached through this handle (when the file is deleted).
    /// Scans the whole storage: O(cached blocks). Not required for correctness: a database
    /// never reuses a file number, so stale blocks would only age out.
    pub fn erase_file(&self, n: FileNumber) {
        let owner = self.owner;
        for shard in &self.store.shards {
            shard
                .lock()
                .retain(|&(o, file, _), _| o != owner || file != n);
        }
    }

    /// Bloom filter checks made by [`Table::get`] and [`Table::may_contain`] on tables read
    /// through this handle (tables without a filter block are not counted).
    pub fn bloom_checks(&self) -> u64 {
        self.bloom_checks.get()
    }

    /// Of [`BlockCache::bloom_checks`], those where the filter proved the key absent (each one
    /// saved reading a data block).
    pub fn bloom_useful(&self) -> u64 {
        self.bloom_useful.get()
    }

    /// Counts one filter check and its outcome.
    pub(crate) fn record_bloom_check(&self, may_contain: bool) {
        self.bloom_checks.add(1);
        if !may_contain {
            self.bloom_useful.add(1);
        }
    }
}

/// A handle's blocks can never be served again once it is gone (a database reopened gets a
/// new owner id), so they are dropped rather than left to age out of a shared storage.
impl Drop for BlockCache {
    fn drop(&mut self) {
        if Arc::strong_count(&self.store) > 1 {
            let owner = self.owner;
            for shard in &self.store.shards {
                shard.lock().retain(|&(o, _, _), _| o != owner);
            }
        }
    }
}

/// The storage of table caches: an LRU of open tables bounded by their count, keyed by
/// (owner, file number), which the table caches of several databases can share
/// ([`crate::Options::table_cache`]), so a process holding many databases (a server) bounds
/// their open table files together, below its open-file limit. Each database's
/// [`TableCache`] is a handle with its own owner id: databases never see each other's tables,
/// and a database's tables leave the storage when it closes.
#[derive(Debug)]
pub struct SharedTableCache {
    tables: Mutex<Lru<(u64, FileNumber), Arc<Table>>>,
    capacity: usize,
    /// Next owner id handed to a handle.
    next_owner: AtomicU64,
}

impl SharedTableCache {
    /// A storage keeping up to `capacity` tables open (at least 1), across every database
    /// given it.
    pub fn new(capacity: usize) -> Arc<Self> {
        let capacity = capacity.max(1);
        Arc::new(SharedTableCache {
            tables: Mutex::new(Lru::new(capacity)),
            capacity,
            next_owner: AtomicU64::new(0),
        })
    }

    /// The most tables kept open, as passed to [`SharedTableCache::new`] (at least 1).
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Tables the storage holds open now, for every database sharing it. Tables evicted but
    /// still read by an iterator are not counted (their files close when the iterator ends).
    pub fn len(&self) -> usize {
        self.tables.lock().usage
    }

    /// True when no table is held open.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops every cached table nothing else holds (no iterator or read in progress), which
    /// closes its file, and returns how many went. For a process out of file descriptors.
    fn close_unused(&self) -> usize {
        let unused = self
            .tables
            .lock()
            .retain(|_, table| Arc::strong_count(table) > 1);
        tracing::warn!(
            closed = unused.len(),
            "out of file descriptors: closed the table cache's unused tables"
        );
        unused.len()
    }
}

/// A database's cache of open tables, LRU by count (`Options::max_open_files`, or a
/// [`SharedTableCache`] shared with other databases), keyed by file number. Opening a table
/// reads its footer, index, filter and properties blocks, so keeping tables open saves that
/// work and the file descriptor churn.
#[derive(Debug)]
pub struct TableCache {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    store: Arc<SharedTableCache>,
    owner: u64,
    block_cache: Arc<BlockCache>,
}

impl TableCache {
    /// A cache of up to `capacity` open tables from directory `dir` of `fs` (at least 1),
    /// reading blocks through `block_cache`.
    pub fn new(
        fs: Arc<dyn FileSystem>,
        dir: PathBuf,
        capacity: usize,
        block_cache: Arc<BlockCache>,
    ) -> Arc<Self> {
        Self::sharing(&SharedTableCache::new(capacity), fs, dir, block_cache)
    }

    /// A cache of the tables in directory `dir` of `fs` kept in `store`, whose capacity it
    /// shares with every other handle on it, reading blocks through `block_cache`.
    pub fn sharing(
        store: &Arc<SharedTableCache>,
        fs: Arc<dyn FileSystem>,
        dir: PathBuf,
        block_cache: Arc<BlockCache>,
    ) -> Arc<Self> {
        Arc::new(TableCache {
            fs,
            dir,
            owner: store.next_owner.fetch_add(1, Ordering::Relaxed),
            store: Arc::clone(store),
            block_cache,
        })
    }

    /// The storage this cache keeps its tables in (its own, or one shared with other
    /// databases).
    pub fn store(&self) -> &Arc<SharedTableCache> {
        &self.store
    }

    /// The open table for `file` (`filename::table_path(dir, file.number)`), opening it on a
    /// miss. An evicted table stays usable by whoever still holds its `Arc`; its file closes
    /// when the last holder drops it.
    ///
    /// A table opened here is checked against what the manifest records for it (`file`): its
    /// size, its entry count, its first and last user keys and (unless ingested) its sequence
    /// number range must match, so a table file replaced by another valid table (a misdirected
    /// write, a file restored from another backup) is an error rather than wrong reads.
    /// `file.global_seqno` (`Some` for an ingested table; see [`Table::open`]) is used when the
    /// table is opened; a table number always comes with the same value, since both are fixed
    /// when the table enters the manifest.
    ///
    /// # Errors
    /// As [`Table::open`]: [`crate::Error::Io`] (e.g. the file is missing),
    /// [`crate::Error::Corruption`] or [`crate::Error::ChecksumMismatch`];
    /// [`crate::Error::Corruption`] also for a table that does not match `file`.
    pub fn get(&self, file: &FileMeta) -> Result<Arc<Table>> {
        let number = file.number;
        if let Some(t) = self.store.tables.lock().get(&(self.owner, number)) {
            debug_assert_eq!(t.global_seqno(), file.global_seqno, "table {number}");
            return Ok(t);
        }
        let path = table_path(&self.dir, number);
        let open = || {
            Table::open(
                &*self.fs,
                &path,
                number,
                file.global_seqno,
                Arc::clone(&self.block_cache),
            )
        };
        let table = match open() {
            // Out of file descriptors: tables an iterator still reads after the cache let
            // them go hold theirs beyond the capacity. Close the cached tables no one else
            // holds (of every database sharing the storage) and try once more.
            Err(e) if e.is_out_of_descriptors() && self.store.close_unused() > 0 => open()?,
            other => other?,
        };
        check_matches_manifest(&table, file)?;
        self.store
            .tables
            .lock()
            .insert((self.owner, number), Arc::clone(&table), 1);
        Ok(table)
    }

    /// Forgets table `number` (call when its file is deleted) and drops its blocks from the
    /// block cache.
    pub fn evict(&self, number: FileNumber) {
        self.store.tables.lock().remove(&(self.owner, number));
        self.block_cache.erase_file(number);
    }

    /// The block cache tables opened here read through.
    pub fn block_cache(&self) -> &Arc<BlockCache> {
        &self.block_cache
    }
}

/// A closed database's tables can never be read through its cache again, so their files are
/// closed now rather than left to age out of a shared storage.
impl Drop for TableCache {
    fn drop(&mut self) {
        if Arc::strong_count(&self.store) > 1 {
            let owner = self.owner;
            // Bound, so the files close after the lock is released.
            let closed = self.store.tables.lock().retain(|&(o, _), _| o != owner);
            drop(closed);
        }
    }
}

/// [`Error::Corruption`] unless `table` is the table the manifest describes as `file`: the same
/// size, entry count, first and last user keys, sequence number range (an ingested table
/// stores its entries at 0, so only its other facts are compared) and, when the manifest
/// records one, table id (`docs/format/manifest.md` section 2.3; the one fact that tells two
/// ingested tables of the same keys apart).
fn check_matches_manifest(table: &Table, file: &FileMeta) -> Result<()> {
    let p = table.properties();
    let mut differences = Vec::new();
    if table.file_size() != file.size {
        differences.push(format!(
            "it is {} bytes, the manifest says {}",
            table.file_size(),
            file.size
        ));
    }
    if p.num_entries != file.num_entries {
        differences.push(format!(
            "it holds {} entries, the manifest says {}",
            p.num_entries, file.num_entries
        ));
    }
    if p.num_entries > 0
        && (p.smallest_key.user_key != file.smallest.user_key
            || p.largest_key.user_key != file.largest.user_key)
    {
        differences.push(format!(
            "its keys run from \"{}\" to \"{}\", the manifest says \"{}\" to \"{}\"",
            p.smallest_key.user_key.escape_ascii(),
            p.largest_key.user_key.escape_ascii(),
            file.smallest.user_key.escape_ascii(),
            file.largest.user_key.escape_ascii(),
        ));
    }
    if file.global_seqno.is_none()
        && p.num_entries > 0
        && (p.smallest_seqno, p.largest_seqno) != (file.smallest_seqno, file.largest_seqno)
    {
        differences.push(format!(
            "its sequence numbers run from {} to {}, the manifest says {} to {}",
            p.smallest_seqno.get(),
            p.largest_seqno.get(),
            file.smallest_seqno.get(),
            file.largest_seqno.get()
        ));
    }
    if let Some(id) = file.table_id
        && p.table_id != Some(id)
    {
        differences.push(match p.table_id {
            Some(other) => format!("its table id is {other}, the manifest says {id}"),
            None => format!("it has no table id, the manifest says {id}"),
        });
    }
    if differences.is_empty() {
        return Ok(());
    }
    Err(Error::corruption(
        table.path(),
        0,
        format!(
            "table {} is not the table the manifest lists under its number ({}); was the file \
             replaced?",
            file.number,
            differences.join("; ")
        ),
    ))
}

/// The manifest entry a flush would record for the table file `number` in `dir` (tests that
/// open tables through a [`TableCache`] without a manifest).
#[cfg(test)]
pub(crate) fn describe_table_file(dir: &std::path::Path, number: FileNumber) -> Result<FileMeta> {
    let table = Table::open(
        &*crate::fs::os(),
        &table_path(dir, number),
        number,
        None,
        BlockCache::new(0),
    )?;
    let p = table.properties();
    Ok(FileMeta {
        number,
        size: table.file_size(),
        smallest: p.smallest_key.clone(),
        largest: p.largest_key.clone(),
        smallest_seqno: p.smallest_seqno,
        largest_seqno: p.largest_seqno,
        num_entries: p.num_entries,
        num_deletions: p.num_deletions,
        global_seqno: None,
        table_id: p.table_id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn striped_counter_sums_every_thread() {
        let counter = StripedCounter::default();
        std::thread::scope(|scope| {
            for t in 0..12u64 {
                let counter = &counter;
                scope.spawn(move || {
                    for _ in 0..1_000 {
                        counter.add(t);
                    }
                });
            }
        });
        // 12 threads on 8 stripes: some share one, and no addition is lost.
        assert_eq!(counter.get(), (0..12).sum::<u64>() * 1_000);
    }

    #[test]
    fn lru_evicts_least_recently_used_by_weight() {
        let mut lru: Lru<u32, u32> = Lru::new(10);
        lru.insert(1, 10, 4);
        lru.insert(2, 20, 4);
        assert_eq!(lru.get(&1), Some(10)); // 1 is now most recent
        lru.insert(3, 30, 4); // evicts 2
        assert_eq!(lru.get(&2), None);
        assert_eq!(lru.get(&1), Some(10));
        assert_eq!(lru.get(&3), Some(30));
        assert_eq!(lru.usage, 8);
        lru.insert(4, 40, 11); // heavier than the capacity: not kept
        assert_eq!(lru.get(&4), None);
        lru.insert(1, 11, 2); // replace
        assert_eq!((lru.get(&1), lru.usage), (Some(11), 6));
        assert_eq!(lru.retain(|&k, _| k != 3), vec![30]);
        assert_eq!((lru.get(&3), lru.usage), (None, 2));
        for k in 0..1000 {
            lru.insert(k, k, 1);
        }
        assert_eq!((lru.map.len(), lru.usage), (10, 10));
        assert!(lru.nodes.len() <= 11, "slab slots are reused");
    }

    /// A block of `len` payload bytes (never iterated) and one restart point.
    fn block_of(len: usize) -> Arc<Block> {
        let mut data = vec![7u8; len];
        data.extend_from_slice(&0u32.to_le_bytes());
        data.extend_from_slice(&1u32.to_le_bytes());
        let file: Arc<std::path::Path> = Arc::from(std::path::Path::new("t.sst"));
        Arc::new(Block::new(data.into(), crate::TableFormat::V2, file, 0).unwrap())
    }

    #[test]
    fn handles_sharing_a_cache_keep_their_blocks_apart_and_share_its_budget() {
        let f = FileNumber(5);
        let a = BlockCache::new(1 << 20);
        let b = a.sharing();
        a.insert(f, 0, block_of(100));
        // Another database's table 5 at offset 0 is another block.
        assert!(b.get(f, 0).is_none());
        b.insert(f, 0, block_of(200));
        assert_eq!(a.get(f, 0).map(|x| x.size_bytes()), Some(108));
        assert_eq!(b.get(f, 0).map(|x| x.size_bytes()), Some(208));
        assert_eq!((a.usage_bytes(), b.usage_bytes()), (316, 316));
        assert_eq!((a.hits(), a.misses(), b.hits(), b.misses()), (1, 0, 1, 1));
        assert_eq!(b.capacity_bytes(), 1 << 20);
        // Deleting table 5 of one database leaves the other's cached.
        b.erase_file(f);
        assert!(b.get(f, 0).is_none());
        assert!(a.get(f, 0).is_some());

        // One budget: blocks cached through one handle evict the other's.
        let one = BlockCache::new(1_000);
        let two = one.sharing();
        one.insert(f, 0, block_of(400));
        two.insert(f, 0, block_of(400));
        two.insert(f, 8, block_of(400));
        assert!(one.get(f, 0).is_none());
        assert!(one.usage_bytes() <= 1_000);
        assert!(two.get(f, 8).is_some());
        // A closed database's blocks leave the shared storage with its handle.
        drop(two);
        assert_eq!(one.usage_bytes(), 0);
    }

    #[test]
    fn block_cache_shards_scale_with_capacity() {
        assert_eq!(BlockCache::new(0).store.shards.len(), 1);
        assert_eq!(BlockCache::new(1 << 20).store.shards.len(), 1);
        assert_eq!(BlockCache::new(64 << 20).store.shards.len(), 16);
        assert_eq!(BlockCache::new(1 << 30).store.shards.len(), 16);
    }
}
