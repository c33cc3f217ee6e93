//! fjall behind the [`Engine`] trait.
//!
//! Matched to Strata: one keyspace with the same memtable size, block cache, 4 KiB blocks,
//! bloom filters with the same bits per key and LZ4 on every level, two worker threads. A synced
//! write commits its batch with `PersistMode::SyncData` (fdatasync of the journal); an unsynced
//! one hands the journal write to the OS, as Strata's does. fjall fsyncs each synced batch on its
//! own, under its journal lock: it has no group commit.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use fjall::config::{
    BlockSizePolicy, BloomConstructionPolicy, CompressionPolicy, FilterPolicy, FilterPolicyEntry,
};
use fjall::{CompressionType, Database, Keyspace, KeyspaceCreateOptions, PersistMode};

use super::{Direction, Engine, ScanCounter, ScanStats, Tuning};
use crate::keys::Record;

/// A fjall database with one keyspace, opened with the shared [`Tuning`].
pub struct FjallEngine {
    db: Database,
    keyspace: Keyspace,
}

impl std::fmt::Debug for FjallEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FjallEngine").finish_non_exhaustive()
    }
}

impl FjallEngine {
    /// Opens (creating) a database in `dir`.
    ///
    /// # Errors
    /// fjall's open error.
    pub fn open(dir: &Path, tuning: &Tuning) -> Result<Self> {
        let db = Database::builder(dir)
            .cache_size(u64::try_from(tuning.block_cache_bytes)?)
            .worker_threads(tuning.background_jobs.max(1))
            // The journal must hold more than one memtable's worth of writes.
            .max_journaling_size(u64::try_from(tuning.write_buffer_bytes)?.max(256 << 20) * 2)
            .open()
            .with_context(|| format!("opening fjall in {}", dir.display()))?;
        let memtable = u64::try_from(tuning.write_buffer_bytes)?;
        let block = u32::try_from(tuning.block_size_bytes)?;
        #[expect(clippy::cast_precision_loss, reason = "bits per key are small")]
        let bits = tuning.bloom_bits_per_key as f32;
        let keyspace = db.keyspace("bench", || {
            KeyspaceCreateOptions::default()
                .max_memtable_size(memtable)
                .data_block_size_policy(BlockSizePolicy::all(block))
                .data_block_compression_policy(CompressionPolicy::all(CompressionType::Lz4))
                .filter_policy(FilterPolicy::all(FilterPolicyEntry::Bloom(
                    BloomConstructionPolicy::BitsPerKey(bits),
                )))
        })?;
        Ok(FjallEngine { db, keyspace })
    }
}

impl Engine for FjallEngine {
    fn name(&self) -> &'static str {
        "fjall"
    }

    fn write(&self, records: &[Record], sync: bool) -> Result<()> {
        let mut batch = self
            .db
            .batch()
            .durability(sync.then_some(PersistMode::SyncData));
        for r in records {
            batch.insert(&self.keyspace, r.key, r.value);
        }
        batch.commit()?;
        Ok(())
    }

    fn get(&self, key: &[u8], value: &mut Vec<u8>) -> Result<bool> {
        Ok(match self.keyspace.get(key)? {
            Some(v) => {
                value.clear();
                value.extend_from_slice(&v);
                true
            }
            None => false,
        })
    }

    fn flush(&self) -> Result<()> {
        self.keyspace.rotate_memtable_and_wait()?;
        Ok(())
    }

    fn wait_for_background(&self) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(600);
        let mut idle_polls = 0;
        // fjall exposes running work only; require a few idle polls in a row so a compaction
        // that is about to be picked is not missed.
        while Instant::now() < deadline && idle_polls < 5 {
            if self.db.active_compactions() == 0 && self.db.outstanding_flushes() == 0 {
                idle_polls += 1;
            } else {
                idle_polls = 0;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(())
    }

    fn shape(&self) -> String {
        format!(
            "{} tables, {} in level 0",
            self.keyspace.table_count(),
            self.keyspace.l0_table_count()
        )
    }

    fn compact_all(&self) -> Result<()> {
        self.keyspace.rotate_memtable_and_wait()?;
        // Hidden from fjall's docs but public: the only way to ask for a full compaction.
        self.keyspace.major_compact()?;
        Ok(())
    }

    fn write_amplification(&self) -> Option<f64> {
        // fjall does not count bytes written by flushes and compactions.
        None
    }

    fn scan(&self, direction: Direction) -> Result<ScanStats> {
        let mut counter = ScanCounter::new(direction);
        let iter = self.keyspace.iter();
        match direction {
            Direction::Forward => {
                for guard in iter {
                    let (k, v) = guard.into_inner()?;
                    counter.see(&k, &v);
                }
            }
            Direction::Reverse => {
                for guard in iter.rev() {
                    let (k, v) = guard.into_inner()?;
                    counter.see(&k, &v);
                }
            }
        }
        Ok(counter.finish())
    }
}
