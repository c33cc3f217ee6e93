//! The workloads. Each prints its configuration, runs every engine `runs` times interleaved
//! (engine A run 1, engine B run 1, A run 2, ...) because the machine is shared and noisy, and
//! prints median, min and max throughput per engine with the ratio Strata/engine.

mod fill;
mod fill_batches;
mod group_commit;
mod read;

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use anyhow::{Context, Result, bail};

use crate::engine::{self, Engine, Tuning};
use crate::stats::mib;

/// A named workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    /// Unsynced 65,536-record batches into a memtable big enough to hold them all.
    FillMem,
    /// Many threads each writing one record per synced batch, then the same with one thread.
    GroupCommit,
    /// Random point reads of present keys after a load and flush.
    ReadRandom,
    /// Random point reads of absent keys after a load and flush.
    ReadMissing,
    /// Full forward and reverse scans after a load and flush.
    Scan,
    /// A large load timed batch by batch, engines one after the other, then a full compaction
    /// (issue #4). Not part of `all`: it is long.
    FillBatches,
}

impl Workload {
    /// The workloads `all` runs, in order.
    pub const ALL: [Workload; 5] = [
        Workload::FillMem,
        Workload::GroupCommit,
        Workload::ReadRandom,
        Workload::ReadMissing,
        Workload::Scan,
    ];

    /// Every workload that can be named.
    pub const NAMED: [Workload; 6] = [
        Workload::FillMem,
        Workload::GroupCommit,
        Workload::ReadRandom,
        Workload::ReadMissing,
        Workload::Scan,
        Workload::FillBatches,
    ];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Workload::FillMem => "fill-mem",
            Workload::GroupCommit => "group-commit",
            Workload::ReadRandom => "read-random",
            Workload::ReadMissing => "read-missing",
            Workload::Scan => "scan",
            Workload::FillBatches => "fill-batches",
        }
    }

    fn needs_load(self) -> bool {
        matches!(
            self,
            Workload::ReadRandom | Workload::ReadMissing | Workload::Scan
        )
    }
}

impl FromStr for Workload {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> Result<Self> {
        Workload::NAMED
            .into_iter()
            .find(|w| w.name() == s)
            .with_context(|| {
                let names: Vec<_> = Workload::NAMED.iter().map(|w| w.name()).collect();
                format!("unknown workload {s}; known: {}, all", names.join(", "))
            })
    }
}

/// Settings shared by the workloads; `None` fields take each workload's default.
#[derive(Debug, Clone)]
pub struct Config {
    /// Engines to run, in order.
    pub engines: Vec<String>,
    /// Records to write (fill-mem, fill-batches) or load (read workloads).
    pub n: Option<u64>,
    /// Threads for group-commit (default 64) and the read workloads (default 1).
    pub threads: Option<usize>,
    /// Runs per engine.
    pub runs: usize,
    /// Point reads per run of a read workload.
    pub ops: u64,
    /// How long each group-commit run lasts.
    pub duration: Duration,
    /// Records per batch in fill-mem and in loads.
    pub batch: usize,
    /// Seed of the key stream.
    pub seed: u64,
    /// Directory under which each engine gets fresh subdirectories.
    pub dir: PathBuf,
    /// Where fill-batches writes its CSVs and chart (default: `dir`).
    pub out_dir: Option<PathBuf>,
    /// Memtable size override, in bytes.
    pub write_buffer_bytes: Option<usize>,
    /// Block cache size override, in bytes.
    pub block_cache_bytes: Option<usize>,
}

impl Config {
    fn tuning(&self, default_write_buffer_bytes: usize) -> Tuning {
        let base = Tuning::default();
        Tuning {
            write_buffer_bytes: self
                .write_buffer_bytes
                .unwrap_or(default_write_buffer_bytes),
            block_cache_bytes: self.block_cache_bytes.unwrap_or(base.block_cache_bytes),
            ..base
        }
    }
}

/// Runs `workloads` in order. Read workloads share one load per engine.
///
/// # Errors
/// An engine failing to open, write or read, or a directory that cannot be made.
pub fn run(workloads: &[Workload], cfg: &Config) -> Result<()> {
    if cfg.runs == 0 || cfg.batch == 0 || cfg.engines.is_empty() {
        bail!("--runs, --batch and --engines must be non-zero/non-empty");
    }
    for w in workloads {
        match w {
            Workload::FillMem => fill::fill_mem(cfg)?,
            Workload::GroupCommit => group_commit::group_commit(cfg)?,
            Workload::FillBatches => fill_batches::fill_batches(cfg)?,
            Workload::ReadRandom | Workload::ReadMissing | Workload::Scan => {}
        }
    }
    let reads: Vec<Workload> = workloads
        .iter()
        .copied()
        .filter(|w| w.needs_load())
        .collect();
    if !reads.is_empty() {
        read::load_then_read(&reads, cfg)?;
    }
    Ok(())
}

fn describe(tuning: &Tuning) -> String {
    format!(
        "write buffer {}, block cache {}, bloom {} bits/key, block {} B, LZ4, WAL on, {} background jobs",
        mib(tuning.write_buffer_bytes as u64),
        mib(tuning.block_cache_bytes as u64),
        tuning.bloom_bits_per_key,
        tuning.block_size_bytes,
        tuning.background_jobs
    )
}

/// An engine in its own directory, removed on drop. Fields drop in declaration order, so the
/// engine closes before its directory is deleted.
struct Opened {
    engine: Box<dyn Engine>,
    dir: tempfile::TempDir,
}

impl Opened {
    fn new(name: &str, base: &Path, label: &str, tuning: &Tuning) -> Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix(&format!("{label}-{name}-"))
            .tempdir_in(base)
            .with_context(|| format!("making a directory in {}", base.display()))?;
        let engine = engine::open(name, dir.path(), tuning)?;
        Ok(Opened { engine, dir })
    }

    fn engine(&self) -> &dyn Engine {
        self.engine.as_ref()
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}
