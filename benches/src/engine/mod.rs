//! The engines under comparison, behind one small trait.
//!
//! Every engine is opened with the same [`Tuning`] (memtable size, block cache, bloom bits, block
//! size, LZ4) and a WAL. Each adapter uses its engine's idiomatic fast path (RocksDB's pinned
//! gets and raw iterators, Strata's `Bytes`, fjall's `Slice`), copying values into the caller's
//! buffer so every engine pays for the same copy.

mod strata_db;
pub use strata_db::StrataEngine;

#[cfg(feature = "rocksdb")]
mod rocksdb_peer;
#[cfg(feature = "rocksdb")]
pub use rocksdb_peer::{RocksDbEngine, tuned_options};

#[cfg(feature = "fjall")]
mod fjall_peer;
#[cfg(feature = "fjall")]
pub use fjall_peer::FjallEngine;

use std::path::Path;

use anyhow::{Result, bail};

use crate::keys::Record;

/// Settings applied identically to every engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tuning {
    /// Memtable size at which it is frozen and flushed, in bytes.
    pub write_buffer_bytes: usize,
    /// Block cache capacity, in bytes.
    pub block_cache_bytes: usize,
    /// Bloom filter bits per key.
    pub bloom_bits_per_key: u32,
    /// Uncompressed data block size, in bytes.
    pub block_size_bytes: usize,
    /// Background flush/compaction threads.
    pub background_jobs: usize,
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            write_buffer_bytes: 64 << 20,
            block_cache_bytes: 64 << 20,
            bloom_bits_per_key: 10,
            block_size_bytes: 4096,
            background_jobs: 2,
        }
    }
}

/// Scan direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Ascending keys.
    Forward,
    /// Descending keys.
    Reverse,
}

/// What a full scan saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ScanStats {
    /// Entries returned.
    pub count: u64,
    /// Entries whose key was not strictly after (forward) or before (reverse) the previous one.
    pub out_of_order: u64,
}

/// A key-value engine driven by the workloads. Implementations are thread safe: workloads call
/// `write` and `get` from many threads at once.
pub trait Engine: Send + Sync {
    /// Short lowercase name (`strata`, `rocksdb`, `fjall`).
    fn name(&self) -> &'static str;

    /// Applies `records` as one atomic batch; with `sync`, returns once the batch is durable
    /// (fdatasync of the WAL or journal).
    ///
    /// # Errors
    /// The engine's write error.
    fn write(&self, records: &[Record], sync: bool) -> Result<()>;

    /// Looks `key` up; on a hit copies the value into `value` (replacing its contents) and
    /// returns true.
    ///
    /// # Errors
    /// The engine's read error.
    fn get(&self, key: &[u8], value: &mut Vec<u8>) -> Result<bool>;

    /// Writes the memtable out to table files and returns once that is durable.
    ///
    /// # Errors
    /// The engine's flush error.
    fn flush(&self) -> Result<()>;

    /// Best effort: returns once background flushes and compactions have stopped (or after a
    /// timeout), so a measurement does not compete with work left over from the load.
    ///
    /// # Errors
    /// The engine's error, if asking for its state fails.
    fn wait_for_background(&self) -> Result<()>;

    /// One line on the tree's shape: table files per level (level 0 first).
    fn shape(&self) -> String;

    /// Compacts the whole key range into the last level (flushing the memtable first), the last
    /// level included, and returns when that is done.
    ///
    /// # Errors
    /// The engine's compaction error.
    fn compact_all(&self) -> Result<()>;

    /// Write amplification as the engine counts it: bytes of tables written by flushes and
    /// compactions per byte flushed (WAL not counted). `None` when the engine does not report it.
    fn write_amplification(&self) -> Option<f64>;

    /// Iterates over every entry in `direction`, counting them and checking key order.
    ///
    /// # Errors
    /// The engine's read error.
    fn scan(&self, direction: Direction) -> Result<ScanStats>;
}

/// Which engines this build can run.
pub fn available() -> Vec<&'static str> {
    let mut v = vec!["strata"];
    if cfg!(feature = "rocksdb") {
        v.push("rocksdb");
    }
    if cfg!(feature = "fjall") {
        v.push("fjall");
    }
    v
}

/// Opens (creating) engine `name` in the empty directory `dir`.
///
/// # Errors
/// An unknown name, a peer not compiled in, or the engine's open error.
pub fn open(name: &str, dir: &Path, tuning: &Tuning) -> Result<Box<dyn Engine>> {
    match name {
        "strata" => Ok(Box::new(StrataEngine::open(dir, tuning)?)),
        #[cfg(feature = "rocksdb")]
        "rocksdb" => Ok(Box::new(RocksDbEngine::open(dir, tuning)?)),
        #[cfg(feature = "fjall")]
        "fjall" => Ok(Box::new(FjallEngine::open(dir, tuning)?)),
        #[cfg(not(feature = "rocksdb"))]
        "rocksdb" => bail!("engine rocksdb is not compiled in: build with `--features rocksdb`"),
        #[cfg(not(feature = "fjall"))]
        "fjall" => bail!("engine fjall is not compiled in: build with `--features fjall`"),
        other => bail!("unknown engine {other}; known: strata, rocksdb, fjall"),
    }
}

/// Counts a scan's entries and order violations; shared by the adapters.
#[derive(Debug)]
pub(crate) struct ScanCounter {
    direction: Direction,
    last: Option<Vec<u8>>,
    stats: ScanStats,
}

impl ScanCounter {
    pub(crate) fn new(direction: Direction) -> Self {
        ScanCounter {
            direction,
            last: None,
            stats: ScanStats::default(),
        }
    }

    /// Notes one entry.
    #[inline]
    pub(crate) fn see(&mut self, key: &[u8], value: &[u8]) {
        std::hint::black_box(value);
        self.stats.count += 1;
        match &mut self.last {
            Some(last) => {
                let ordered = match self.direction {
                    Direction::Forward => key > last.as_slice(),
                    Direction::Reverse => key < last.as_slice(),
                };
                if !ordered {
                    self.stats.out_of_order += 1;
                }
                last.clear();
                last.extend_from_slice(key);
            }
            None => self.last = Some(key.to_vec()),
        }
    }

    pub(crate) fn finish(self) -> ScanStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scan_counter_flags_out_of_order_keys() {
        let mut c = ScanCounter::new(Direction::Forward);
        for k in [b"a", b"b", b"b", b"a", b"c"] {
            c.see(k, b"");
        }
        assert_eq!(
            c.finish(),
            ScanStats {
                count: 5,
                out_of_order: 2
            }
        );
        let mut c = ScanCounter::new(Direction::Reverse);
        for k in [b"c", b"b", b"a"] {
            c.see(k, b"");
        }
        assert_eq!(c.finish().out_of_order, 0);
    }

    #[test]
    fn unknown_engines_are_refused() {
        let dir = std::env::temp_dir();
        assert!(open("leveldb", &dir, &Tuning::default()).is_err());
    }
}
