//! `rocksdb_load DB FILE`: RocksDB's side of the bulk-load benchmark (issue 5): loads a
//! tab-separated `key<TAB>value` file into a RocksDB database with `SstFileWriter` and
//! `DB::ingest_external_file`, doing the work `strata load` does (`src/load.rs`), step for
//! step, so `benches/scripts/load-vs-sqlite.sh` can time both on the same file.
//!
//! 1. **Read and sort runs** (`runs.rs`): the input file is mapped and cut into runs bounded by
//!    `--memory` (run bytes plus two 24-byte entries per pair, as Strata counts a mapped file),
//!    each parsed by one thread per core; each run is sorted by key (an 8-byte key prefix taken
//!    after the prefix every key of the run shares, then the remaining bytes; two halves on two
//!    threads, then merged), reduced to the last occurrence of each key, and split among the
//!    cores in parts of about equal bytes, each part written by its own `SstFileWriter` into
//!    tables of about `--table-size`.
//! 2. **Merge** (`merge.rs`), only when runs overlap: the runs are ingested, oldest first, into
//!    a scratch RocksDB database with compactions off, and one forward iteration over it (RocksDB's
//!    own k-way merge, newest run winning) is written into the final tables.
//!    Sorted input (every run above the previous one) skips this step: its run tables are final.
//! 3. **Ingest**: every final table in one `ingest_external_file` call with `move_files`
//!    (hard links, as Strata's ingest makes).
//!
//! Final tables use the settings the comparison harness gives RocksDB (and Strata's defaults):
//! 4 KiB blocks, LZ4, a full bloom filter of 10 bits per key. Run tables that will be merged
//! again skip compression and the filter, as Strata's do. The time reported runs from before
//! the database is opened until the ingest returns.
//!
//! Bad lines (no tab, key over Strata's 64 KiB limit, value over Strata's `max_value_size`)
//! stop the load with their line number; nothing is ingested.

mod merge;
mod runs;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Parser;
use rocksdb::{
    BlockBasedOptions, Cache, DB, DBCompressionType, IngestExternalFileOptions, Options,
};
use strata_benches::engine::{Tuning, tuned_options};
use strata_benches::sys;

use runs::{ReadStats, RunReader};

/// Loads a `key<TAB>value` file into RocksDB through `SstFileWriter` and one ingest.
#[derive(Debug, Parser)]
#[command(name = "rocksdb_load")]
struct Args {
    /// Database directory (created if missing).
    db: PathBuf,
    /// Input file of `key<TAB>value` lines.
    file: PathBuf,
    /// Memory for sorting, in MiB (as `strata load --memory`).
    #[arg(long, default_value_t = 256)]
    memory: usize,
    /// Target size of each table, in MiB (as `strata load --table-size`).
    #[arg(long, default_value_t = 64)]
    table_size: u64,
}

/// How to load.
#[derive(Debug, Clone)]
pub(crate) struct LoadConfig {
    /// Sort memory: arena bytes plus [`runs::ENTRY_SIZE`] per pair.
    pub(crate) memory_bytes: usize,
    /// Target size of each table, in bytes.
    pub(crate) table_size_bytes: u64,
    /// Threads writing the tables of one run (the cores, by default).
    pub(crate) threads: usize,
}

/// What a load did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LoadReport {
    /// Input bytes read.
    pub(crate) bytes: u64,
    /// Pairs read, duplicates included.
    pub(crate) pairs: u64,
    /// Sorted runs (1 when the input fit in memory).
    pub(crate) runs: usize,
    /// Tables ingested.
    pub(crate) tables: usize,
    /// Whether the runs overlapped and were merged.
    pub(crate) merged: bool,
    pub(crate) elapsed: Duration,
}

impl std::fmt::Display for LoadReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let secs = self.elapsed.as_secs_f64().max(1e-9);
        #[expect(clippy::cast_precision_loss, reason = "rates for display")]
        let (pairs, bytes) = (self.pairs as f64, self.bytes as f64);
        write!(
            f,
            "loaded {} pairs ({:.1} MB) in {:.2} s: {:.0} pairs/s, {:.1} MB/s; {} runs{}, {} tables",
            self.pairs,
            bytes / 1e6,
            secs,
            pairs / secs,
            bytes / 1e6 / secs,
            self.runs,
            if self.merged { " merged" } else { "" },
            self.tables
        )
    }
}

/// Table settings of the final tables: the comparison harness's RocksDB tuning.
pub(crate) fn final_table_options() -> Options {
    let tuning = Tuning::default();
    let mut table = BlockBasedOptions::default();
    table.set_block_size(tuning.block_size_bytes);
    table.set_bloom_filter(f64::from(tuning.bloom_bits_per_key), false);
    let mut opts = Options::default();
    opts.set_block_based_table_factory(&table);
    opts.set_compression_type(DBCompressionType::Lz4);
    opts
}

/// Table settings of run tables that are merged again: no compression, no filter.
pub(crate) fn scratch_table_options() -> Options {
    let mut table = BlockBasedOptions::default();
    table.set_block_size(Tuning::default().block_size_bytes);
    let mut opts = Options::default();
    opts.set_block_based_table_factory(&table);
    opts.set_compression_type(DBCompressionType::None);
    opts
}

/// Opens (creating) the target database with the comparison harness's RocksDB tuning
/// (`benches/src/engine/rocksdb_peer.rs`).
pub(crate) fn open_db(dir: &Path) -> Result<(DB, Cache)> {
    let (opts, cache) = tuned_options(&Tuning::default())?;
    let db =
        DB::open(&opts, dir).with_context(|| format!("opening rocksdb in {}", dir.display()))?;
    Ok((db, cache))
}

/// Removes the scratch directory when the load ends, however it ends.
struct ScratchDir(PathBuf);

impl Drop for ScratchDir {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.0)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            eprintln!("rocksdb_load: could not remove {}: {e}", self.0.display());
        }
    }
}

/// Loads `input` into `db`, using `scratch` (created, removed at the end) for run tables.
/// On error nothing is ingested.
///
/// # Errors
/// A bad line (with its number), I/O and RocksDB errors.
pub(crate) fn load(
    db: &DB,
    scratch: &Path,
    input: &std::fs::File,
    config: &LoadConfig,
    start: Instant,
) -> Result<LoadReport> {
    std::fs::create_dir_all(scratch).with_context(|| format!("creating {}", scratch.display()))?;
    let _cleanup = ScratchDir(scratch.to_path_buf());
    let (final_options, scratch_options) = (final_table_options(), scratch_table_options());
    let reader = RunReader {
        tmp: scratch,
        final_options: &final_options,
        scratch_options: &scratch_options,
        memory_bytes: config.memory_bytes.max(4096),
        table_size_bytes: config.table_size_bytes.max(1),
        threads: config.threads.max(1),
        max_value_size: strata_engine::Options::default().max_value_size,
    };
    let mut stats = ReadStats::default();
    let len = input
        .metadata()
        .context("reading the input's metadata")?
        .len();
    let runs = reader.read_file(input, len, &mut stats)?;
    let run_count = runs.len();
    let merged = !runs::runs_ordered(&runs);
    let files: Vec<PathBuf> = if merged {
        merge::merge_runs(
            runs,
            scratch,
            &final_options,
            config.table_size_bytes.max(1),
        )?
    } else {
        runs.into_iter().flat_map(|r| r.files).collect()
    };
    if !files.is_empty() {
        let mut ingest = IngestExternalFileOptions::default();
        ingest.set_move_files(true);
        db.ingest_external_file_opts(&ingest, files.clone())
            .context("ingesting the tables")?;
    }
    Ok(LoadReport {
        bytes: stats.bytes,
        pairs: stats.pairs,
        runs: run_count,
        tables: files.len(),
        merged,
        elapsed: start.elapsed(),
    })
}

fn main() -> Result<()> {
    let args = Args::parse();
    let start = Instant::now();
    let (db, cache) = open_db(&args.db)?;
    let input = std::fs::File::open(&args.file)
        .with_context(|| format!("opening {}", args.file.display()))?;
    let config = LoadConfig {
        memory_bytes: args.memory.max(1).saturating_mul(1 << 20),
        table_size_bytes: args.table_size.max(1).saturating_mul(1 << 20),
        threads: std::thread::available_parallelism().map_or(1, std::num::NonZero::get),
    };
    let scratch = args
        .db
        .join(format!("rocksdb-load-{}.tmp", std::process::id()));
    let report = load(&db, &scratch, &input, &config, start)
        .with_context(|| format!("loading {}", args.file.display()))?;
    drop(db);
    drop(cache);
    println!(
        "{report}; {} bytes on disk | load average {}",
        sys::dir_size_bytes(&args.db),
        sys::load_average().unwrap_or_else(|| "?".into())
    );
    Ok(())
}
