//! Phase 2 of a load, when the runs overlap: merge the runs into the final tables.
//!
//! The rocksdb crate cannot read a table file on its own, so the runs are ingested, oldest
//! first and one ingest per run, into a scratch database (automatic compactions off): each
//! ingest that overlaps gets a newer sequence number, so one forward iteration over the scratch
//! database is a k-way merge of the runs in which, for a key in several runs, the latest run
//! wins, as in `strata load`. The iteration bypasses the block cache, reads ahead 2 MiB, and is
//! written into `<tmp>/final-NNNNN.sst` by one thread, as Strata's merge is.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use rocksdb::{DB, IngestExternalFileOptions, Options, ReadOptions, SstFileWriter};

use super::runs::RunTables;

/// Merges `runs` (in input order) into final tables written with `final_options`; returns
/// their paths in key order.
pub(crate) fn merge_runs(
    runs: Vec<RunTables>,
    tmp: &Path,
    final_options: &Options,
    table_size_bytes: u64,
) -> Result<Vec<PathBuf>> {
    let dir = tmp.join("merge-db");
    let mut opts = Options::default();
    opts.create_if_missing(true);
    opts.set_disable_auto_compactions(true);
    // Many overlapping level-0 tables are the point here: never stall on them.
    opts.set_level_zero_slowdown_writes_trigger(1 << 30);
    opts.set_level_zero_stop_writes_trigger(1 << 30);
    let scratch =
        DB::open(&opts, &dir).with_context(|| format!("opening scratch db {}", dir.display()))?;
    let mut ingest = IngestExternalFileOptions::default();
    ingest.set_move_files(true);
    for run in runs {
        scratch
            .ingest_external_file_opts(&ingest, run.files)
            .context("ingesting a run into the scratch database")?;
    }
    let mut read = ReadOptions::default();
    read.fill_cache(false);
    read.set_readahead_size(2 << 20);
    let mut it = scratch.raw_iterator_opt(read);
    it.seek_to_first();
    let mut files = Vec::new();
    while it.valid() {
        let path = tmp.join(format!("final-{:05}.sst", files.len()));
        let mut writer = SstFileWriter::create(final_options);
        writer
            .open(&path)
            .with_context(|| format!("creating {}", path.display()))?;
        while let Some((key, value)) = it.item() {
            writer.put(key, value)?;
            it.next();
            if writer.file_size() >= table_size_bytes {
                break;
            }
        }
        writer
            .finish()
            .with_context(|| format!("finishing {}", path.display()))?;
        files.push(path);
    }
    it.status().context("reading the scratch database")?;
    Ok(files)
}
