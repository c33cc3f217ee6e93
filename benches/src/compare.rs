//! `compare`: runs the same workloads against Strata and its peers, side by side.
//!
//! ```text
//! cargo run --release -p strata-benches --features rocksdb,fjall --bin compare -- \
//!     --engines strata,rocksdb,fjall --workload fill-mem --runs 3
//! ```
//!
//! Workloads: fill-mem, group-commit, read-random, read-missing, scan (a comma-separated list, or
//! `all` for these five), and fill-batches (a large load timed batch by batch, then a full
//! compaction; docs/scale.md). Method and results: docs/benchmarks.md.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use clap::Parser;
use strata_benches::keys::DEFAULT_SEED;
use strata_benches::workload::{self, Workload};
use strata_benches::{engine, sys};

/// Compares Strata with RocksDB and fjall on the same workloads.
#[derive(Debug, Parser)]
#[command(name = "compare")]
struct Args {
    /// Engines, comma-separated (strata, rocksdb, fjall). Default: every engine compiled in.
    #[arg(long, value_delimiter = ',')]
    engines: Option<Vec<String>>,
    /// Workloads, comma-separated, or `all`.
    #[arg(long, value_delimiter = ',', default_value = "all")]
    workload: Vec<String>,
    /// Records written (fill-mem: default 1,000,000; fill-batches: per engine, default
    /// 10,000,000) or loaded (read workloads; default 10,000,000).
    #[arg(long)]
    n: Option<u64>,
    /// Threads: writers in group-commit (default 64), readers in read workloads (default 1).
    #[arg(long)]
    threads: Option<usize>,
    /// Base directory for the databases (each run gets a fresh subdirectory, removed after).
    #[arg(long, default_value_os_t = std::env::temp_dir())]
    dir: PathBuf,
    /// Where fill-batches writes fill-batches-ENGINE.csv and fill-batches.svg (default: --dir).
    #[arg(long)]
    out_dir: Option<PathBuf>,
    /// Runs per engine; the median is reported.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Point reads per run of read-random and read-missing.
    #[arg(long, default_value_t = 1_000_000)]
    ops: u64,
    /// Seconds per group-commit run.
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Records per batch in fill-mem, fill-batches and loads.
    #[arg(long, default_value_t = 65_536)]
    batch: usize,
    /// Memtable size in MiB (default: 256 for fill-mem, 64 otherwise).
    #[arg(long)]
    write_buffer_mib: Option<usize>,
    /// Block cache size in MiB (default 64).
    #[arg(long)]
    cache_mib: Option<usize>,
    /// Seed of the key stream.
    #[arg(long, default_value_t = DEFAULT_SEED)]
    seed: u64,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let engines = args.engines.unwrap_or_else(|| {
        engine::available()
            .iter()
            .map(ToString::to_string)
            .collect()
    });
    let workloads: Vec<Workload> = if args.workload.iter().any(|w| w == "all") {
        Workload::ALL.to_vec()
    } else {
        args.workload
            .iter()
            .map(|w| w.parse())
            .collect::<Result<_>>()?
    };
    let cfg = workload::Config {
        engines,
        n: args.n,
        threads: args.threads,
        runs: args.runs,
        ops: args.ops,
        duration: Duration::try_from_secs_f64(args.seconds)?,
        batch: args.batch,
        seed: args.seed,
        dir: args.dir,
        out_dir: args.out_dir,
        write_buffer_bytes: args.write_buffer_mib.map(|m| m << 20),
        block_cache_bytes: args.cache_mib.map(|m| m << 20),
    };
    println!(
        "compare: {} | load average {} | engines {} | data in {}{}",
        sys::cpu_summary(),
        sys::load_average().unwrap_or_else(|| "?".into()),
        cfg.engines.join(","),
        cfg.dir.display(),
        if cfg!(debug_assertions) {
            " | WARNING: debug build, use --release"
        } else {
            ""
        }
    );
    workload::run(&workloads, &cfg)?;
    println!(
        "done | load average {}",
        sys::load_average().unwrap_or_else(|| "?".into())
    );
    Ok(())
}
