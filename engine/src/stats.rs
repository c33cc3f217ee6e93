//! Database statistics: a point-in-time report of levels, bytes written, amplification,
//! background work, stalls and cache behaviour, returned by [`crate::Db::stats`].

use std::fmt;

/// Tables and bytes in one level.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LevelStats {
    /// Number of tables.
    pub files: usize,
    /// Total size of the tables, in bytes.
    pub bytes: u64,
    /// Target size of the level in bytes (0 for level 0 and for levels not in use).
    pub target_bytes: u64,
    /// Entries stored in the level's tables, tombstones and overwritten versions included
    /// (the tables' properties, summed).
    pub entries: u64,
    /// Tombstones among [`LevelStats::entries`].
    pub deletions: u64,
}

/// A snapshot of the database's counters since it was opened.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct DbStats {
    /// Per level, 0 first.
    pub levels: Vec<LevelStats>,
    /// Keys plus values written by users (logical bytes).
    pub user_bytes: u64,
    /// Bytes appended to WALs.
    pub wal_bytes: u64,
    /// WAL fsyncs.
    pub wal_syncs: u64,
    /// Commit groups (one WAL append each).
    pub write_groups: u64,
    /// Bytes of tables written by flushes.
    pub flush_bytes: u64,
    /// Flushes completed.
    pub flushes: u64,
    /// Bytes of tables read by compactions.
    pub compaction_bytes_read: u64,
    /// Bytes of tables written by compactions.
    pub compaction_bytes_written: u64,
    /// Compactions completed (trivial moves included).
    pub compactions: u64,
    /// Trivial moves (tables moved to the next level without rewriting).
    pub trivial_moves: u64,
    /// Time spent in compactions, in microseconds.
    pub compaction_micros: u64,
    /// Time writers waited for a flush or compaction (hard stall), in microseconds.
    pub stall_micros: u64,
    /// Time writers were delayed by the soft limit (smooth backpressure), in microseconds.
    pub delay_micros: u64,
    /// Block cache hits.
    pub block_cache_hits: u64,
    /// Block cache misses (blocks read from disk).
    pub block_cache_misses: u64,
    /// Bytes of uncompressed blocks in the block cache. With a cache shared by several
    /// databases (`Options::block_cache`), this and the capacity are the shared cache's.
    pub block_cache_usage_bytes: u64,
    /// Capacity of the block cache, in bytes.
    pub block_cache_capacity_bytes: u64,
    /// Tables held open in the table cache. With a cache shared by several databases
    /// (`Options::table_cache`), this and the capacity are the shared cache's.
    pub open_tables: u64,
    /// Most tables the table cache holds open.
    pub open_tables_capacity: u64,
    /// Why writes are refused ([`crate::Error::Poisoned`]'s reason), or `None` while they are
    /// taken.
    pub writes_stopped: Option<String>,
    /// The stop is one [`crate::Db::resume`] can clear (a WAL or manifest write failed for
    /// want of space).
    pub writes_resumable: bool,
    /// Background flushes and compactions that failed for want of a resource and wait to be
    /// retried (not counted after they succeed).
    pub background_retries: u64,
    /// Point lookups that consulted a bloom filter.
    pub bloom_checked: u64,
    /// Of those, lookups the filter answered "absent" (no data block read).
    pub bloom_useful: u64,
    /// Estimated bytes compaction must rewrite to bring every level under its target.
    pub pending_compaction_bytes: u64,
    /// Bytes in memtables (active and immutable).
    pub memtable_bytes: u64,
    /// Immutable memtables waiting for flush.
    pub immutable_memtables: usize,
    /// Last visible sequence number.
    pub last_seqno: u64,
}

impl DbStats {
    /// Write amplification: bytes of tables written (flush + compaction) per byte flushed
    /// from memtables, the way RocksDB's compaction statistics report it ("W-Amp" of the
    /// sum row). 0 before the first flush. WAL bytes are not counted; see
    /// [`DbStats::write_amplification_with_wal`].
    pub fn write_amplification(&self) -> f64 {
        if self.flush_bytes == 0 {
            return 0.0;
        }
        to_f64(self.flush_bytes + self.compaction_bytes_written) / to_f64(self.flush_bytes)
    }

    /// Everything written to disk (WAL + flush + compaction) per user byte (keys + values).
    pub fn write_amplification_with_wal(&self) -> f64 {
        if self.user_bytes == 0 {
            return 0.0;
        }
        to_f64(self.wal_bytes + self.flush_bytes + self.compaction_bytes_written)
            / to_f64(self.user_bytes)
    }

    /// Total bytes of tables in all levels.
    pub fn table_bytes(&self) -> u64 {
        self.levels.iter().map(|l| l.bytes).sum()
    }

    /// Entries stored in the tables of all levels and the tombstones among them:
    /// `(entries, deletions)`.
    pub fn table_entries(&self) -> (u64, u64) {
        self.levels
            .iter()
            .fold((0, 0), |(e, d), l| (e + l.entries, d + l.deletions))
    }
}

#[expect(
    clippy::cast_precision_loss,
    reason = "statistics; 2^53 bytes is far away"
)]
fn to_f64(v: u64) -> f64 {
    v as f64
}

fn mib(bytes: u64) -> f64 {
    to_f64(bytes) / f64::from(1u32 << 20)
}

impl fmt::Display for DbStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "level  files      size MiB    target MiB")?;
        for (i, l) in self.levels.iter().enumerate() {
            writeln!(
                f,
                "L{i:<5}{:>6}  {:>12.1}  {:>12.1}",
                l.files,
                mib(l.bytes),
                mib(l.target_bytes)
            )?;
        }
        writeln!(
            f,
            "total  {:>6}  {:>12.1}",
            self.levels.iter().map(|l| l.files).sum::<usize>(),
            mib(self.table_bytes())
        )?;
        writeln!(
            f,
            "writes: user {:.1} MiB, WAL {:.1} MiB in {} groups ({} syncs), flush {:.1} MiB in {} flushes",
            mib(self.user_bytes),
            mib(self.wal_bytes),
            self.write_groups,
            self.wal_syncs,
            mib(self.flush_bytes),
            self.flushes
        )?;
        writeln!(
            f,
            "compaction: {} runs ({} trivial moves), read {:.1} MiB, wrote {:.1} MiB, {:.1} s; pending {:.1} MiB",
            self.compactions,
            self.trivial_moves,
            mib(self.compaction_bytes_read),
            mib(self.compaction_bytes_written),
            to_f64(self.compaction_micros) / 1e6,
            mib(self.pending_compaction_bytes)
        )?;
        writeln!(
            f,
            "write amplification: {:.2} (tables per flushed byte), {:.2} (all disk writes per user byte)",
            self.write_amplification(),
            self.write_amplification_with_wal()
        )?;
        writeln!(
            f,
            "stalls: {:.3} s waiting, {:.3} s delayed",
            to_f64(self.stall_micros) / 1e6,
            to_f64(self.delay_micros) / 1e6
        )?;
        writeln!(
            f,
            "block cache: {} hits, {} misses, {:.1} of {:.1} MiB used; bloom filter: {} checked, {} useful",
            self.block_cache_hits,
            self.block_cache_misses,
            mib(self.block_cache_usage_bytes),
            mib(self.block_cache_capacity_bytes),
            self.bloom_checked,
            self.bloom_useful
        )?;
        writeln!(
            f,
            "table cache: {} of {} tables open",
            self.open_tables, self.open_tables_capacity
        )?;
        if let Some(reason) = &self.writes_stopped {
            writeln!(
                f,
                "writes stopped ({}): {reason}",
                if self.writes_resumable {
                    "resumable"
                } else {
                    "reopen to clear"
                }
            )?;
        }
        if self.background_retries > 0 {
            writeln!(
                f,
                "background jobs waiting to retry after a resource ran out: {}",
                self.background_retries
            )?;
        }
        write!(
            f,
            "memtables: {:.1} MiB, {} immutable; last sequence number {}",
            mib(self.memtable_bytes),
            self.immutable_memtables,
            self.last_seqno
        )
    }
}
