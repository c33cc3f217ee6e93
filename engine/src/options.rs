//! Options for opening a database, reading and writing.
//!
//! `Db::open` validates the options and returns [`crate::Error::InvalidArgument`] for values out of
//! range; the setters themselves never fail.

use std::sync::Arc;

use crate::cache::{BlockCache, SharedTableCache};
use crate::fs::FileSystem;
use crate::merge::MergeOperator;
use crate::snapshot::Snapshot;
use crate::sstable::{BlockCachePolicy, TableFormat};
use crate::write_buffer::WriteBufferManager;

/// Largest user key accepted, in bytes (64 KiB). Keys longer than this get
/// [`crate::Error::InvalidArgument`].
pub const MAX_KEY_SIZE: usize = 64 * 1024;

/// Largest readahead window accepted by [`Options::validate`], in bytes (64 MiB).
const MAX_READAHEAD: usize = 64 << 20;

/// Largest [`Options::bloom_bits_per_key`] accepted. A table's bloom filter uses
/// `round(bits * ln 2)` hash functions, where `bits` is its size per key rounded up to whole
/// bytes (8 bits per key more for a filter over one key); readers treat more than 64 hash
/// functions as corruption, and 88 bits per key (a multiple of 8) give 61. Past about 20 bits
/// per key the false-positive rate (0.0001% at 20) no longer pays for the memory.
pub const MAX_BLOOM_BITS_PER_KEY: u32 = 88;

/// Largest [`Options::write_buffer_size`] accepted, in bytes (64 GiB, RocksDB's clamp).
pub const MAX_WRITE_BUFFER_SIZE: usize = 64 << 30;

/// Largest [`Options::block_cache_size`], [`Options::target_file_size`] and
/// [`Options::max_bytes_for_level_base`] accepted, in bytes (1 PiB): larger values would
/// overflow the level-size and table-size arithmetic.
pub const MAX_SIZE_OPTION: u64 = 1 << 50;

/// Largest [`Options::max_background_jobs`] and [`Options::max_subcompactions`] accepted: each
/// job and each subcompaction is a thread, and the open starts every background thread.
pub const MAX_THREADS_OPTION: usize = 256;

/// Largest memtable bloom filter, in bytes (128 MiB: 10 bits per key for 100 million keys),
/// whatever [`Options::memtable_bloom_size_ratio`] of [`Options::write_buffer_size`] asks for.
/// The filter is allocated (and zeroed) whole when the memtable is created.
pub const MAX_MEMTABLE_BLOOM_BYTES: usize = 128 << 20;

/// How recovery treats damaged WAL records (names follow RocksDB's `WALRecoveryMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WalRecoveryMode {
    /// Default. A torn or checksum-failing record at the tail of the newest WAL (what a crash
    /// mid-write leaves) is dropped, the log is truncated there, and the database opens with a
    /// prefix of the acknowledged writes. Damage anywhere else is [`crate::Error::Corruption`].
    #[default]
    TolerateCorruptedTail,
    /// Any damaged or torn record, even at the tail, fails the open with
    /// [`crate::Error::Corruption`]. For setups that sync every write and want to know of any loss.
    AbsoluteConsistency,
    /// Replay stops at the first damaged record in any WAL; everything after it (in that log and
    /// in later logs) is dropped. The result is still a prefix of the writes, with no holes.
    PointInTime,
    /// Damaged records are skipped and replay goes on. May leave holes (a later batch present
    /// while an earlier one is lost): a last resort for salvaging data.
    SkipAnyCorruptedRecords,
}

/// Options for [`crate::Db::open`]. Build with `Options::default()` and the setters.
#[derive(Debug, Clone)]
pub struct Options {
    /// Create the directory (and an empty database) when missing. Default `true`. When off, a
    /// directory without a database (no `CURRENT` file) is refused, as in RocksDB.
    pub create_if_missing: bool,
    /// Fail the open when a database already exists. Default `false`.
    pub error_if_exists: bool,
    /// Open an existing database without writing anything (RocksDB's `OpenForReadOnly`), for
    /// inspection, for a disk that is full, or beside the process that has it open. Default
    /// `false`. The `LOCK` file is not taken; the manifest is read but not rewritten; the
    /// WALs are replayed into memory (a torn tail is left in place, not cut off); no file is
    /// created or deleted and no background thread runs. Reads see the state as of the open.
    /// Every table is opened at once and kept open, unless there are more than the process's
    /// open-file limit allows (see [`Options::max_open_files`]); then they are opened as reads
    /// need them.
    /// Writes, merges, flushes, compactions, ingests and keyspace creation or drops fail with
    /// [`crate::Error::ReadOnly`] ([`crate::Db::checkpoint`] works: it writes only to its
    /// destination). Beside a writer, a table that its
    /// compactions delete after the open makes reads of it fail with [`crate::Error::Io`];
    /// they never return other data. A missing database is an error (with
    /// [`crate::Error::InvalidArgument`]), whatever [`Options::create_if_missing`] says.
    pub read_only: bool,
    /// Largest value accepted, in bytes. Default 256 MiB. Larger values get
    /// [`crate::Error::InvalidArgument`].
    pub max_value_size: usize,
    /// Memtable size, in bytes, at which it is frozen (becomes an immutable memtable) and
    /// flushed to a level-0 SSTable. Default 64 MiB. Larger values speed up bulk writes and
    /// make recovery replay longer. From 4096 bytes to 64 GiB;
    /// other values get [`crate::Error::InvalidArgument`] at open.
    pub write_buffer_size: usize,
    /// Memtables (the active one plus immutable ones waiting for flush) kept in memory at most;
    /// past it writers wait for a flush. Default 2. Must exceed
    /// [`Options::min_write_buffer_number_to_merge`].
    pub max_write_buffer_number: usize,
    /// Immutable memtables a flush waits for and merges into one level-0 SSTable (RocksDB's
    /// option of the same name). Default 1: each memtable is flushed on its own. With small
    /// memtables (say 4 MiB, 16 to merge) random writes are faster, because each skiplist
    /// insert walks a skiplist that fits in the CPU cache instead of one of 64 MiB, while
    /// level 0 still gets tables of `write_buffer_size * min_write_buffer_number_to_merge`;
    /// point reads then probe more memtables (each behind its bloom filter). An explicit
    /// [`crate::Db::flush`], an ingest over the memtables' keys and the WAL size limit flush
    /// fewer. Measured in `docs/server.md`, "Memtable size".
    pub min_write_buffer_number_to_merge: usize,
    /// A memory budget for memtables shared with other databases and keyspaces (RocksDB's
    /// `WriteBufferManager`, its `db_write_buffer_size`): when the memtables of every database
    /// given the same manager hold most of its budget, a database that writes freezes and
    /// flushes its largest active memtable, and when they hold all of it, it flushes its
    /// immutable memtables without waiting for `min_write_buffer_number_to_merge` of them, and
    /// its writers wait for that flush (counted in `DbStats::stall_micros`). The rules are in
    /// [`WriteBufferManager`]. Each keyspace's own `write_buffer_size` and
    /// `max_write_buffer_number` still apply. Default `None`: only those per-keyspace limits.
    pub write_buffer_manager: Option<Arc<WriteBufferManager>>,
    /// How recovery treats damaged WAL records. Default [`WalRecoveryMode::TolerateCorruptedTail`].
    pub wal_recovery_mode: WalRecoveryMode,
    /// Uncompressed bytes of entries per SSTable data block. Default 4 KiB. Larger blocks
    /// compress better and make the index smaller; smaller blocks make point reads cheaper.
    pub block_size: usize,
    /// Keys between restart points in a data block. Default 16.
    pub block_restart_interval: usize,
    /// Bloom filter bits per key; 0 disables filters. Default 10 (about 1% false positives).
    /// At most 88 (readers refuse filters with more than 64 hash
    /// functions, which larger values would give); larger values get
    /// [`crate::Error::InvalidArgument`] at open.
    pub bloom_bits_per_key: u32,
    /// Compress blocks with LZ4 when that saves at least 12.5%. Default `true`.
    pub compression: bool,
    /// SSTable format version new tables are written in. Default [`TableFormat::V3`] (varint
    /// sequence numbers, omitted when 0, a hash-partitioned bloom filter, and each data
    /// block's entry count in the index block: `docs/format/sstable.md` sections 3 and 4);
    /// choose [`TableFormat::V1`] or [`TableFormat::V2`] only while a build that reads only
    /// those must still open the directory. All three are always read.
    pub table_format: TableFormat,
    /// Capacity of the database's block cache, in bytes of uncompressed blocks, when
    /// [`Options::block_cache`] is `None`. Default 64 MiB. The cache is filled as blocks are
    /// read, not allocated up front. At most 1 PiB.
    pub block_cache_size: usize,
    /// A block cache to share with other databases (RocksDB's
    /// `BlockBasedTableOptions::block_cache`): the database reads through a new handle on its
    /// storage ([`BlockCache::sharing`]), so every database given the same cache counts against
    /// one byte budget, and `block_cache_size` is ignored. Its statistics (`DbStats` hits,
    /// misses, bloom checks) stay per database. Default `None`: a cache of its own.
    pub block_cache: Option<Arc<BlockCache>>,
    /// Largest readahead window of an iterator, in bytes; 0 turns readahead off. Default
    /// 256 KiB (RocksDB's `max_auto_readahead_size`). Once an iterator has read two data blocks
    /// of a table in file order (forward or backward), each read from that table's file
    /// covers a window that starts at 8 KiB and doubles up to this size, so a long scan makes
    /// one system call per window instead of one per 4 KiB block. Point lookups never read
    /// ahead. Measured in `docs/design.md`, "Scan readahead".
    pub max_auto_readahead_size: usize,
    /// Largest readahead window of a compaction's input tables, in bytes; 0 turns it off.
    /// Default 256 KiB. RocksDB's `compaction_readahead_size` is 2 MiB, but a compaction holds
    /// up to two windows per input table and subcompaction, a server runs many databases, and
    /// 256 KiB windows already make 1/64 of the reads of 4 KiB blocks. Grows as
    /// [`Options::max_auto_readahead_size`] does.
    pub compaction_readahead_size: usize,
    /// Table files kept open at most (the table cache). Default 1000. Lowered to the
    /// process's open-file limit (`ulimit -n`, soft) less 64, so a low limit makes reads
    /// reopen tables rather than fail with "Too many open files".
    pub max_open_files: usize,
    /// A table cache to share with other databases: the database keeps its open tables in
    /// this storage ([`crate::TableCache::sharing`]), so every database given the same one
    /// counts against one limit on open table files, and `max_open_files` is ignored. A
    /// process holding many databases, as `strata serve` does, sizes it below its open-file
    /// limit, leaving room for its other files; with a cache each, every database could fill
    /// the limit on its own. Default `None`: a cache of its own.
    pub table_cache: Option<Arc<SharedTableCache>>,
    /// Size multiplier between consecutive levels. Default 10.
    pub level_size_multiplier: u64,
    /// Target size of level 1, in bytes. Default 256 MiB. From 1024 bytes to
    /// 1 PiB.
    pub max_bytes_for_level_base: u64,
    /// Size at which compaction output tables are cut, in bytes. Default 64 MiB. From 1024
    /// bytes to 1 PiB.
    pub target_file_size: u64,
    /// Level-0 table count that triggers a compaction. Default 6 (RocksDB's is 4): with the
    /// memtable's per-entry overhead, a flush of 16-byte records writes a table of about a
    /// third of `write_buffer_size`, and 6 of them make L0 → base compactions large enough to
    /// keep write amplification below RocksDB's (`docs/compaction.md` section 2.8).
    pub level0_file_num_compaction_trigger: usize,
    /// Level-0 table count past which writes are delayed. Default 20.
    pub level0_slowdown_writes_trigger: usize,
    /// Level-0 table count at which writes wait for compaction. Default 36.
    pub level0_stop_writes_trigger: usize,
    /// Estimated pending compaction bytes past which writes are delayed. Default 64 GiB.
    /// 0 disables the limit (as in RocksDB). When both limits are set, it must not exceed
    /// [`Options::hard_pending_compaction_bytes_limit`].
    pub soft_pending_compaction_bytes_limit: u64,
    /// Estimated pending compaction bytes at which writes wait for compaction. Default 256 GiB.
    /// 0 disables the limit (as in RocksDB): writes then never stop for pending bytes (the
    /// soft limit still delays them, at [`Options::delayed_write_rate`]).
    pub hard_pending_compaction_bytes_limit: u64,
    /// Write rate, in bytes per second, allowed when a soft limit is first passed; it falls
    /// linearly towards a tenth of it as the hard limit nears. Default 16 MiB/s.
    pub delayed_write_rate: u64,
    /// Background threads for flush and compaction. Default 2. As in RocksDB, a quarter of
    /// them (at least one) are kept for flushes: at most `max(1, jobs - max(1, jobs / 4))`
    /// compactions run at once (1 of the default 2), so a flush never waits behind compactions
    /// that occupy every thread. From 1 to 256 ([`MAX_THREADS_OPTION`]); the open starts them
    /// all.
    pub max_background_jobs: usize,
    /// After a WAL write fails for want of a resource (a full disk, a quota, no descriptor
    /// left) and writes are refused, a background thread tries [`crate::Db::resume`] by
    /// itself: at once, then after 1 s, the wait doubling with each failure up to 8 s, until
    /// it succeeds (RocksDB's automatic recovery from a no-space error,
    /// `bgerror_resume_retry_interval`). Default true; false leaves resuming to the caller.
    pub auto_resume: bool,
    /// Key ranges a compaction is split into at most, each merged on its own thread (RocksDB's
    /// `max_subcompactions`; `docs/compaction.md` section 2.7). Default 2. The split points are
    /// first user keys of the compaction's tables in its output level, chosen so each range
    /// holds about the same bytes of them; a compaction with fewer than 2 such tables, or a
    /// trivial move, is not split. 1 turns splitting off. From 1 to 256
    /// ([`MAX_THREADS_OPTION`]; [`crate::Error::InvalidArgument`] at open otherwise).
    pub max_subcompactions: usize,
    /// Folds merge operands written by `Db::merge`. Default `None`: reading a key that has
    /// merge operands is then [`crate::Error::InvalidArgument`]. [`crate::CounterAdd`] gives
    /// decimal counters.
    pub merge_operator: Option<Arc<dyn MergeOperator>>,
    /// Total bytes of WAL files past which the keyspaces holding the oldest WAL are flushed, so
    /// a keyspace written rarely does not keep old WALs alive for ever. Default 0: four times
    /// `write_buffer_size * max_write_buffer_number`.
    pub max_total_wal_size: u64,
    /// Size of each memtable's bloom filter over its user keys, as a fraction of
    /// `write_buffer_size` (RocksDB's `memtable_prefix_bloom_size_ratio` with whole-key
    /// filtering). A point lookup of a key the memtable does not hold then usually skips the
    /// skiplist search. Default 0.02 (1.3 MiB for a 64 MiB memtable: about 10 bits per entry
    /// for entries of 64 bytes and their node); 0 turns it off. From 0 to 0.25; the filter is
    /// capped at 128 MiB whatever the ratio.
    pub memtable_bloom_size_ratio: f64,
    /// Options for named keyspaces, by name (see [`Options::with_keyspace_options`]); a
    /// keyspace without an entry uses these options.
    pub keyspace_options: Vec<(String, Options)>,
    /// Where every file of the database is read and written. Default [`crate::fs::os()`], the
    /// real file system; tests pass a [`crate::fs::MemFs`] to simulate power loss and I/O
    /// errors. Database-wide (a keyspace's entry is ignored).
    pub file_system: Arc<dyn FileSystem>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            create_if_missing: true,
            error_if_exists: false,
            read_only: false,
            max_value_size: 256 << 20,
            write_buffer_size: 64 << 20,
            max_write_buffer_number: 2,
            min_write_buffer_number_to_merge: 1,
            write_buffer_manager: None,
            wal_recovery_mode: WalRecoveryMode::default(),
            block_size: 4096,
            block_restart_interval: 16,
            bloom_bits_per_key: 10,
            compression: true,
            table_format: TableFormat::V3,
            block_cache_size: 64 << 20,
            block_cache: None,
            max_auto_readahead_size: 256 << 10,
            compaction_readahead_size: 256 << 10,
            max_open_files: 1000,
            table_cache: None,
            level_size_multiplier: 10,
            max_bytes_for_level_base: 256 << 20,
            target_file_size: 64 << 20,
            level0_file_num_compaction_trigger: 6,
            level0_slowdown_writes_trigger: 20,
            level0_stop_writes_trigger: 36,
            soft_pending_compaction_bytes_limit: 64 << 30,
            hard_pending_compaction_bytes_limit: 256 << 30,
            delayed_write_rate: 16 << 20,
            max_background_jobs: 2,
            auto_resume: true,
            max_subcompactions: 2,
            merge_operator: None,
            max_total_wal_size: 0,
            memtable_bloom_size_ratio: 0.02,
            keyspace_options: Vec::new(),
            file_system: crate::fs::os(),
        }
    }
}

macro_rules! setters {
    ($($(#[$doc:meta])* $name:ident: $ty:ty;)*) => {
        impl Options {
            $(
                $(#[$doc])*
                #[must_use]
                pub fn $name(mut self, value: $ty) -> Self {
                    self.$name = value;
                    self
                }
            )*
        }
    };
}

setters! {
    /// Sets [`Options::create_if_missing`].
    create_if_missing: bool;
    /// Sets [`Options::error_if_exists`].
    error_if_exists: bool;
    /// Sets [`Options::read_only`].
    read_only: bool;
    /// Sets [`Options::max_value_size`] (bytes).
    max_value_size: usize;
    /// Sets [`Options::write_buffer_size`] (bytes).
    write_buffer_size: usize;
    /// Sets [`Options::max_write_buffer_number`].
    max_write_buffer_number: usize;
    /// Sets [`Options::min_write_buffer_number_to_merge`].
    min_write_buffer_number_to_merge: usize;
    /// Sets [`Options::wal_recovery_mode`].
    wal_recovery_mode: WalRecoveryMode;
    /// Sets [`Options::block_size`] (bytes).
    block_size: usize;
    /// Sets [`Options::block_restart_interval`] (keys).
    block_restart_interval: usize;
    /// Sets [`Options::bloom_bits_per_key`].
    bloom_bits_per_key: u32;
    /// Sets [`Options::compression`].
    compression: bool;
    /// Sets [`Options::table_format`].
    table_format: TableFormat;
    /// Sets [`Options::block_cache_size`] (bytes).
    block_cache_size: usize;
    /// Sets [`Options::block_cache`].
    block_cache: Option<Arc<BlockCache>>;
    /// Sets [`Options::write_buffer_manager`].
    write_buffer_manager: Option<Arc<WriteBufferManager>>;
    /// Sets [`Options::max_auto_readahead_size`] (bytes).
    max_auto_readahead_size: usize;
    /// Sets [`Options::compaction_readahead_size`] (bytes).
    compaction_readahead_size: usize;
    /// Sets [`Options::max_open_files`].
    max_open_files: usize;
    /// Sets [`Options::table_cache`].
    table_cache: Option<Arc<SharedTableCache>>;
    /// Sets [`Options::level_size_multiplier`].
    level_size_multiplier: u64;
    /// Sets [`Options::max_bytes_for_level_base`] (bytes).
    max_bytes_for_level_base: u64;
    /// Sets [`Options::target_file_size`] (bytes).
    target_file_size: u64;
    /// Sets [`Options::level0_file_num_compaction_trigger`] (tables).
    level0_file_num_compaction_trigger: usize;
    /// Sets [`Options::level0_slowdown_writes_trigger`] (tables).
    level0_slowdown_writes_trigger: usize;
    /// Sets [`Options::level0_stop_writes_trigger`] (tables).
    level0_stop_writes_trigger: usize;
    /// Sets [`Options::soft_pending_compaction_bytes_limit`] (bytes).
    soft_pending_compaction_bytes_limit: u64;
    /// Sets [`Options::hard_pending_compaction_bytes_limit`] (bytes).
    hard_pending_compaction_bytes_limit: u64;
    /// Sets [`Options::delayed_write_rate`] (bytes per second).
    delayed_write_rate: u64;
    /// Sets [`Options::max_background_jobs`].
    max_background_jobs: usize;
    /// Sets [`Options::auto_resume`].
    auto_resume: bool;
    /// Sets [`Options::max_subcompactions`] (key ranges per compaction).
    max_subcompactions: usize;
    /// Sets [`Options::merge_operator`].
    merge_operator: Option<Arc<dyn MergeOperator>>;
    /// Sets [`Options::max_total_wal_size`] (bytes; 0 = automatic).
    max_total_wal_size: u64;
    /// Sets [`Options::memtable_bloom_size_ratio`] (fraction of `write_buffer_size`).
    memtable_bloom_size_ratio: f64;
    /// Sets [`Options::file_system`].
    file_system: Arc<dyn FileSystem>;
}

impl Options {
    /// Gives keyspace `name` its own options, used when it is created or opened by
    /// [`crate::Db::keyspace`] and when the database reopens it. Only the per-keyspace fields
    /// are taken from `options`: `write_buffer_size`, `max_write_buffer_number`,
    /// `min_write_buffer_number_to_merge`, `max_value_size`, the table fields (`block_size`, `block_restart_interval`,
    /// `bloom_bits_per_key`, `compression`), the compaction fields (`level_size_multiplier`,
    /// `max_bytes_for_level_base`, `target_file_size`, `level0_file_num_compaction_trigger`),
    /// `memtable_bloom_size_ratio` and `merge_operator`; everything else is database-wide and comes from the options
    /// passed to [`crate::Db::open`]. Like RocksDB's column family options, they are not
    /// stored in the database: pass them on every open.
    #[must_use]
    pub fn with_keyspace_options(mut self, name: &str, options: Options) -> Self {
        self.keyspace_options.retain(|(n, _)| n != name);
        self.keyspace_options.push((name.to_owned(), options));
        self
    }

    /// The options keyspace `name` runs with: the database's, with the per-keyspace fields
    /// from [`Options::with_keyspace_options`] when it has an entry.
    pub(crate) fn for_keyspace(&self, name: &str) -> Options {
        let mut out = self.clone();
        out.keyspace_options = Vec::new();
        if let Some((_, o)) = self.keyspace_options.iter().find(|(n, _)| n == name) {
            out.write_buffer_size = o.write_buffer_size;
            out.max_write_buffer_number = o.max_write_buffer_number;
            out.min_write_buffer_number_to_merge = o.min_write_buffer_number_to_merge;
            out.max_value_size = o.max_value_size;
            out.block_size = o.block_size;
            out.block_restart_interval = o.block_restart_interval;
            out.bloom_bits_per_key = o.bloom_bits_per_key;
            out.compression = o.compression;
            out.level_size_multiplier = o.level_size_multiplier;
            out.max_bytes_for_level_base = o.max_bytes_for_level_base;
            out.target_file_size = o.target_file_size;
            out.level0_file_num_compaction_trigger = o.level0_file_num_compaction_trigger;
            out.merge_operator.clone_from(&o.merge_operator);
            out.memtable_bloom_size_ratio = o.memtable_bloom_size_ratio;
        }
        out
    }

    /// A new, empty active memtable for these options: its bloom filter sized by
    /// [`Options::memtable_bloom_size_ratio`], its memory counted by
    /// [`Options::write_buffer_manager`].
    pub(crate) fn new_memtable(&self) -> crate::memtable::MemTable {
        crate::memtable::MemTable::with_manager(
            self.memtable_bloom_bytes(),
            self.write_buffer_manager.clone(),
        )
    }

    /// Bytes of a memtable's bloom filter ([`Options::memtable_bloom_size_ratio`]), at most
    /// [`MAX_MEMTABLE_BLOOM_BYTES`].
    pub(crate) fn memtable_bloom_bytes(&self) -> usize {
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            clippy::cast_precision_loss,
            reason = "a validated ratio in [0, 0.25] of a usize"
        )]
        let bytes = (self.write_buffer_size as f64 * self.memtable_bloom_size_ratio) as usize;
        bytes.min(MAX_MEMTABLE_BLOOM_BYTES)
    }

    /// The pending-compaction-bytes limits, `None` where the option is 0 (disabled):
    /// `(soft, hard)`.
    pub(crate) fn pending_compaction_bytes_limits(&self) -> (Option<u64>, Option<u64>) {
        let nonzero = |v: u64| (v > 0).then_some(v);
        (
            nonzero(self.soft_pending_compaction_bytes_limit),
            nonzero(self.hard_pending_compaction_bytes_limit),
        )
    }

    /// [`Options::max_total_wal_size`] with 0 resolved to its automatic value.
    pub(crate) fn effective_max_total_wal_size(&self) -> u64 {
        if self.max_total_wal_size > 0 {
            return self.max_total_wal_size;
        }
        (self.write_buffer_size as u64)
            .saturating_mul(self.max_write_buffer_number as u64)
            .saturating_mul(4)
    }

    /// Bytes of memtable a flush writes to one level-0 table when it merges
    /// [`Options::min_write_buffer_number_to_merge`] memtables (recovery flushes its replayed
    /// memtable at this size).
    pub(crate) fn flush_size(&self) -> usize {
        self.write_buffer_size
            .saturating_mul(self.min_write_buffer_number_to_merge)
    }
}

impl Options {
    /// Checks one entry against the size limits: `key` at most [`MAX_KEY_SIZE`] bytes,
    /// `value` at most [`Options::max_value_size`] bytes. Used by writes, [`crate::TableWriter`]
    /// and [`crate::TableSorter`].
    ///
    /// # Errors
    /// [`crate::Error::InvalidArgument`] naming the size and the limit.
    pub fn check_entry_size(&self, key: &[u8], value: &[u8]) -> crate::Result<()> {
        if key.len() > MAX_KEY_SIZE {
            return Err(crate::Error::InvalidArgument(format!(
                "key of {} bytes exceeds the limit of {MAX_KEY_SIZE} bytes",
                key.len()
            )));
        }
        if value.len() > self.max_value_size {
            return Err(crate::Error::InvalidArgument(format!(
                "value of {} bytes exceeds max_value_size ({} bytes)",
                value.len(),
                self.max_value_size
            )));
        }
        Ok(())
    }

    /// Checks ranges; called by `Db::open`.
    ///
    /// # Errors
    /// [`crate::Error::InvalidArgument`] naming the first option out of range.
    pub fn validate(&self) -> crate::Result<()> {
        let bad = |what: &str| Err(crate::Error::InvalidArgument(what.to_string()));
        if self.write_buffer_size < 4096 || self.write_buffer_size > MAX_WRITE_BUFFER_SIZE {
            return bad("write_buffer_size must be between 4096 bytes and 64 GiB");
        }
        if self.bloom_bits_per_key > MAX_BLOOM_BITS_PER_KEY {
            return Err(crate::Error::InvalidArgument(format!(
                "bloom_bits_per_key must be at most {MAX_BLOOM_BITS_PER_KEY} (got {}): larger \
                 filters would need more hash functions than readers accept",
                self.bloom_bits_per_key
            )));
        }
        if self.block_cache_size as u64 > MAX_SIZE_OPTION {
            return bad("block_cache_size must be at most 1 PiB");
        }
        if self.max_write_buffer_number < 2 {
            return bad("max_write_buffer_number must be at least 2");
        }
        if self.min_write_buffer_number_to_merge < 1 {
            return bad("min_write_buffer_number_to_merge must be at least 1");
        }
        if self.max_write_buffer_number <= self.min_write_buffer_number_to_merge {
            return bad(
                "max_write_buffer_number must exceed min_write_buffer_number_to_merge \
                 (writers would wait for a flush that never starts)",
            );
        }
        if self.block_size < 64 || self.block_size > (64 << 20) {
            return bad("block_size must be between 64 bytes and 64 MiB");
        }
        if self.max_auto_readahead_size > MAX_READAHEAD
            || self.compaction_readahead_size > MAX_READAHEAD
        {
            return bad(
                "max_auto_readahead_size and compaction_readahead_size must be at most 64 MiB",
            );
        }
        if self.block_restart_interval == 0 {
            return bad("block_restart_interval must be at least 1");
        }
        if self.max_value_size > u32::MAX as usize {
            return bad("max_value_size must be below 4 GiB");
        }
        if self.max_open_files < 1 {
            return bad("max_open_files must be at least 1");
        }
        if self.level_size_multiplier < 2 {
            return bad("level_size_multiplier must be at least 2");
        }
        if !(1024..=MAX_SIZE_OPTION).contains(&self.target_file_size)
            || !(1024..=MAX_SIZE_OPTION).contains(&self.max_bytes_for_level_base)
        {
            return bad(
                "target_file_size and max_bytes_for_level_base must be between 1024 bytes and \
                 1 PiB",
            );
        }
        if self.level0_file_num_compaction_trigger < 1
            || self.level0_slowdown_writes_trigger < self.level0_file_num_compaction_trigger
            || self.level0_stop_writes_trigger < self.level0_slowdown_writes_trigger
        {
            return bad("level-0 triggers must satisfy 1 <= compaction <= slowdown <= stop");
        }
        if let (Some(soft), Some(hard)) = self.pending_compaction_bytes_limits()
            && soft > hard
        {
            return bad("soft_pending_compaction_bytes_limit must not exceed the hard limit");
        }
        if self.delayed_write_rate == 0 {
            return bad("delayed_write_rate must be positive");
        }
        if !(1..=MAX_THREADS_OPTION).contains(&self.max_background_jobs) {
            return bad("max_background_jobs must be between 1 and 256 (one thread each)");
        }
        if !(1..=MAX_THREADS_OPTION).contains(&self.max_subcompactions) {
            return bad("max_subcompactions must be between 1 and 256 (one thread each)");
        }
        if !(0.0..=0.25).contains(&self.memtable_bloom_size_ratio) {
            return bad("memtable_bloom_size_ratio must be between 0 and 0.25");
        }
        for (name, o) in &self.keyspace_options {
            o.validate().map_err(|e| {
                crate::Error::InvalidArgument(format!("options of keyspace {name:?}: {e}"))
            })?;
        }
        Ok(())
    }
}

/// Options for one write.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteOptions {
    /// fsync (fdatasync) the WAL before the write returns. Default `false`.
    ///
    /// - `false`: the write is in the OS page cache when the call returns. It survives the
    ///   process being killed (kill -9, panic) but not a power loss or kernel crash.
    /// - `true`: the write survives a power loss once the call returns. Concurrent writers share
    ///   one fsync (group commit).
    pub sync: bool,
    /// For [`crate::Db::write_async`] only: hand the batch to the database's committer
    /// thread even when no group commit is in progress, instead of committing it in the
    /// calling thread. Default `false`.
    ///
    /// The calling thread then goes on at once while the committer writes the WAL and the
    /// memtables, at the cost of one thread wake-up when the committer is idle. Worth it for
    /// large batches from an async runtime's worker that has other work meanwhile: `strata
    /// serve` hands off batches of 4 or more entries while it has more connections than
    /// workers, which gave `redis-benchmark`'s pipelined SET (`-P 16`) 1.14x the requests/s
    /// on 2 cores. Single writes stay inline, where the wake-up cost more than it saved (0.62x
    /// the rate with every write handed off), and so do the pipelines of a lone bulk-loading
    /// connection, whose worker would only wait (1.14x the time; docs/benchmarks.md,
    /// "Pipelined writes handed to the committer"). [`crate::Db::write`] ignores it.
    pub hand_off: bool,
    /// Reserved so more fields can be added without breaking struct literals using `..`.
    #[doc(hidden)]
    pub _non_exhaustive: (),
}

impl WriteOptions {
    /// Options with `sync: true`.
    pub fn synced() -> Self {
        WriteOptions {
            sync: true,
            ..Default::default()
        }
    }
}

/// Options for reads (`get`, iterators).
#[derive(Debug, Clone, Default)]
pub struct ReadOptions {
    /// Read as of this snapshot; `None` reads the latest state. The snapshot must come from
    /// the database instance read (any of its keyspaces): one taken from another database, or
    /// from an earlier open of this one, makes the read fail with
    /// [`crate::Error::InvalidArgument`] instead of reading at a sequence number that means
    /// something else there.
    pub snapshot: Option<Snapshot>,
    /// Check every data block this read uses against its stored CRC-32C. Blocks are always
    /// checked when they are read from the file; with `true` the read also skips the block
    /// cache (reading each block from the file and leaving it uncached), so a block that went
    /// bad on disk after it was cached is still caught. Default `false`. As RocksDB's
    /// `ReadOptions::verify_checksums`, stricter: RocksDB trusts cached blocks.
    pub verify_checksums: bool,
    /// Put data blocks read from the file by this read into the block cache. `None` or
    /// `Some(true)`: yes (the default); `Some(false)`: blocks already cached are still used,
    /// blocks read from the file are dropped after use, so a large scan does not evict the
    /// working set (RocksDB's `ReadOptions::fill_cache`).
    pub fill_cache: Option<bool>,
}

impl ReadOptions {
    /// How this read uses the block cache: [`BlockCachePolicy::Bypass`] with
    /// `verify_checksums`, else [`BlockCachePolicy::NoFill`] with `fill_cache: Some(false)`,
    /// else [`BlockCachePolicy::Fill`].
    pub(crate) fn cache_policy(&self) -> BlockCachePolicy {
        if self.verify_checksums {
            BlockCachePolicy::Bypass
        } else if self.fill_cache == Some(false) {
            BlockCachePolicy::NoFill
        } else {
            BlockCachePolicy::Fill
        }
    }

    /// Reads as of `snapshot`.
    pub fn at(snapshot: &Snapshot) -> Self {
        ReadOptions {
            snapshot: Some(snapshot.clone()),
            ..Default::default()
        }
    }
}
