//! RocksDB (through the `rocksdb` crate) behind the [`Engine`] trait.
//!
//! Matched to Strata: memtable size, two memtables, LRU block cache, full-filter bloom with the
//! same bits per key, LZ4 on every level, 4 KiB blocks, WAL on, fdatasync for synced writes,
//! the same number of background jobs. Everything else is RocksDB's default (leveled
//! compaction with dynamic level sizes, 64 MiB target files, level-0 triggers 4/20/36).
//! Statistics are on at the cheapest level (tickers only, no histograms or timers) so write
//! amplification can be read from the flush and compaction byte counters.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use rocksdb::statistics::{StatsLevel, Ticker};
use rocksdb::{
    BlockBasedOptions, BottommostLevelCompaction, Cache, CompactOptions, DB, DBCompressionType,
    Options, WriteBatch, WriteOptions,
};

use super::{Direction, Engine, ScanCounter, ScanStats, Tuning};
use crate::keys::Record;

/// A RocksDB database opened with the shared [`Tuning`].
pub struct RocksDbEngine {
    db: DB,
    // The options the database was opened with: they hold its statistics object.
    options: Options,
    // Kept alive for as long as the database uses it.
    _cache: Cache,
}

impl std::fmt::Debug for RocksDbEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RocksDbEngine").finish_non_exhaustive()
    }
}

/// RocksDB options matching Strata's `tuning` (block cache, block size, bloom bits, LZ4, write
/// buffers, background jobs), creating the database if missing, and the block cache they use
/// (keep it alive as long as the database).
///
/// # Errors
/// A background job count that does not fit RocksDB's `i32`.
pub fn tuned_options(tuning: &Tuning) -> Result<(Options, Cache)> {
    let cache = Cache::new_lru_cache(tuning.block_cache_bytes);
    let mut table = BlockBasedOptions::default();
    table.set_block_cache(&cache);
    table.set_block_size(tuning.block_size_bytes);
    table.set_bloom_filter(f64::from(tuning.bloom_bits_per_key), false);
    let mut opts = Options::default();
    opts.create_if_missing(true);
    opts.set_block_based_table_factory(&table);
    opts.set_compression_type(DBCompressionType::Lz4);
    opts.set_write_buffer_size(tuning.write_buffer_bytes);
    opts.set_max_write_buffer_number(2);
    opts.set_max_background_jobs(i32::try_from(tuning.background_jobs)?);
    Ok((opts, cache))
}

impl RocksDbEngine {
    /// Opens (creating) a database in `dir`.
    ///
    /// # Errors
    /// RocksDB's open error.
    pub fn open(dir: &Path, tuning: &Tuning) -> Result<Self> {
        let (mut opts, cache) = tuned_options(tuning)?;
        opts.enable_statistics();
        opts.set_statistics_level(StatsLevel::ExceptHistogramOrTimers);
        let db = DB::open(&opts, dir)
            .with_context(|| format!("opening rocksdb in {}", dir.display()))?;
        Ok(RocksDbEngine {
            db,
            options: opts,
            _cache: cache,
        })
    }

    fn int_property(&self, name: &str) -> Result<u64> {
        Ok(self.db.property_int_value(name)?.unwrap_or(0))
    }
}

impl Engine for RocksDbEngine {
    fn name(&self) -> &'static str {
        "rocksdb"
    }

    fn write(&self, records: &[Record], sync: bool) -> Result<()> {
        let mut batch = WriteBatch::default();
        for r in records {
            batch.put(r.key, r.value);
        }
        let mut wo = WriteOptions::default();
        wo.set_sync(sync);
        self.db.write_opt(batch, &wo)?;
        Ok(())
    }

    fn get(&self, key: &[u8], value: &mut Vec<u8>) -> Result<bool> {
        Ok(match self.db.get_pinned(key)? {
            Some(v) => {
                value.clear();
                value.extend_from_slice(&v);
                true
            }
            None => false,
        })
    }

    fn flush(&self) -> Result<()> {
        self.db.flush()?;
        Ok(())
    }

    fn wait_for_background(&self) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(600);
        while Instant::now() < deadline {
            let busy = self.int_property("rocksdb.num-running-compactions")?
                + self.int_property("rocksdb.num-running-flushes")?
                + self.int_property("rocksdb.compaction-pending")?
                + self.int_property("rocksdb.mem-table-flush-pending")?;
            if busy == 0 {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    fn shape(&self) -> String {
        let files: Vec<String> = (0..7)
            .map(|l| {
                self.int_property(&format!("rocksdb.num-files-at-level{l}"))
                    .map_or_else(|_| "?".to_string(), |n| n.to_string())
            })
            .collect();
        format!("files per level [{}]", files.join(" "))
    }

    fn compact_all(&self) -> Result<()> {
        self.db.flush()?;
        let mut opts = CompactOptions::default();
        // The default skips the last level; rewrite it too, as Strata's compact_range does.
        opts.set_bottommost_level_compaction(BottommostLevelCompaction::Force);
        self.db
            .compact_range_opt(None::<&[u8]>, None::<&[u8]>, &opts);
        Ok(())
    }

    fn write_amplification(&self) -> Option<f64> {
        let flushed = self.options.get_ticker_count(Ticker::FlushWriteBytes);
        let compacted = self.options.get_ticker_count(Ticker::CompactWriteBytes);
        #[expect(clippy::cast_precision_loss, reason = "a ratio of byte counts")]
        let amp = (flushed > 0).then(|| (flushed + compacted) as f64 / flushed as f64);
        amp
    }

    fn scan(&self, direction: Direction) -> Result<ScanStats> {
        let mut counter = ScanCounter::new(direction);
        let mut it = self.db.raw_iterator();
        match direction {
            Direction::Forward => it.seek_to_first(),
            Direction::Reverse => it.seek_to_last(),
        }
        while let Some((k, v)) = it.item() {
            counter.see(k, v);
            match direction {
                Direction::Forward => it.next(),
                Direction::Reverse => it.prev(),
            }
        }
        it.status()?;
        Ok(counter.finish())
    }
}
