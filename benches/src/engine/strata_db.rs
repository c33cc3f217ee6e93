//! Strata behind the [`Engine`] trait.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use strata_engine::{Db, Options, ReadOptions, WriteBatch, WriteOptions};

use super::{Direction, Engine, ScanCounter, ScanStats, Tuning};
use crate::keys::Record;

/// A Strata database opened with the shared [`Tuning`].
#[derive(Debug)]
pub struct StrataEngine {
    db: Db,
}

impl StrataEngine {
    /// Opens (creating) a database in `dir`.
    ///
    /// # Errors
    /// Strata's open error.
    pub fn open(dir: &Path, tuning: &Tuning) -> Result<Self> {
        let options = Options::default()
            .write_buffer_size(tuning.write_buffer_bytes)
            .block_cache_size(tuning.block_cache_bytes)
            .bloom_bits_per_key(tuning.bloom_bits_per_key)
            .block_size(tuning.block_size_bytes)
            .compression(true)
            .max_background_jobs(tuning.background_jobs);
        let db = Db::open(dir, options)
            .with_context(|| format!("opening strata in {}", dir.display()))?;
        Ok(StrataEngine { db })
    }
}

impl Engine for StrataEngine {
    fn name(&self) -> &'static str {
        "strata"
    }

    fn write(&self, records: &[Record], sync: bool) -> Result<()> {
        let mut batch = WriteBatch::with_capacity(records.len() * (2 + 8 + 8 + 1));
        for r in records {
            batch.put(&r.key, &r.value);
        }
        self.db.write(
            batch,
            &WriteOptions {
                sync,
                ..Default::default()
            },
        )?;
        Ok(())
    }

    fn get(&self, key: &[u8], value: &mut Vec<u8>) -> Result<bool> {
        Ok(match self.db.get(key)? {
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
        // Strata reports pending work but not running compactions: wait until nothing is
        // pending and the compaction count has stood still for a few polls.
        let deadline = Instant::now() + Duration::from_secs(600);
        let mut last_compactions = u64::MAX;
        let mut idle_polls = 0;
        while Instant::now() < deadline && idle_polls < 5 {
            let s = self.db.stats();
            let pending = s.pending_compaction_bytes > 0 || s.immutable_memtables > 0;
            if !pending && s.compactions == last_compactions {
                idle_polls += 1;
            } else {
                idle_polls = 0;
            }
            last_compactions = s.compactions;
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(())
    }

    fn shape(&self) -> String {
        let s = self.db.stats();
        let files: Vec<String> = s.levels.iter().map(|l| l.files.to_string()).collect();
        let per_group = if s.write_groups > 0 {
            s.last_seqno as f64 / s.write_groups as f64
        } else {
            0.0
        };
        format!(
            "files per level [{}], write amp {:.2} (tables per flushed byte), {} commit groups \
             ({per_group:.1} entries per group), {} WAL syncs, writers stalled {:.1} s, \
             delayed {:.1} s",
            files.join(" "),
            s.write_amplification(),
            s.write_groups,
            s.wal_syncs,
            Duration::from_micros(s.stall_micros).as_secs_f64(),
            Duration::from_micros(s.delay_micros).as_secs_f64()
        )
    }

    fn compact_all(&self) -> Result<()> {
        self.db.compact_range(None, None)?;
        Ok(())
    }

    fn write_amplification(&self) -> Option<f64> {
        Some(self.db.stats().write_amplification())
    }

    fn scan(&self, direction: Direction) -> Result<ScanStats> {
        let mut counter = ScanCounter::new(direction);
        let iter = self.db.iter(&ReadOptions::default());
        match direction {
            Direction::Forward => {
                for kv in iter {
                    let (k, v) = kv?;
                    counter.see(&k, &v);
                }
            }
            Direction::Reverse => {
                for kv in iter.rev() {
                    let (k, v) = kv?;
                    counter.see(&k, &v);
                }
            }
        }
        Ok(counter.finish())
    }
}
