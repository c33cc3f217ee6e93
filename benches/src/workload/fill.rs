//! `fill-mem`: unsynced batches into a memtable that holds them all.

use std::time::Instant;

use anyhow::Result;

use super::{Config, Opened, describe};
use crate::keys::{KEY_LEN, KeyStream, VALUE_LEN};
use crate::stats::{Samples, print_table, thousands};

/// Default records written per run.
const DEFAULT_N: u64 = 1_000_000;
/// Memtable size: far above what `DEFAULT_N` records take, so nothing is flushed.
const WRITE_BUFFER_BYTES: usize = 256 << 20;

/// Writes `n` records in batches of `cfg.batch` with `sync: false` into a fresh database per run
/// and engine, and reports puts/s. Key generation happens before the clock starts.
pub(super) fn fill_mem(cfg: &Config) -> Result<()> {
    let n = cfg.n.unwrap_or(DEFAULT_N);
    let tuning = cfg.tuning(WRITE_BUFFER_BYTES);
    println!(
        "== fill-mem: {} records ({KEY_LEN}-byte random key, {VALUE_LEN}-byte value), batches of {}, sync=false, {} runs",
        thousands(n as f64),
        cfg.batch,
        cfg.runs
    );
    println!("   {}", describe(&tuning));

    let stream = KeyStream::new(cfg.seed);
    let mut records = Vec::new();
    stream.fill(&mut records, 0, n);

    let mut results: Vec<(String, Samples)> = cfg
        .engines
        .iter()
        .map(|e| (e.clone(), Samples::new()))
        .collect();
    for _ in 0..cfg.runs {
        for (name, samples) in &mut results {
            let opened = Opened::new(name, &cfg.dir, "fill-mem", &tuning)?;
            let engine = opened.engine();
            let start = Instant::now();
            for chunk in records.chunks(cfg.batch) {
                engine.write(chunk, false)?;
            }
            samples.push(n, start.elapsed());
        }
    }
    print_table("puts/s", &results);
    Ok(())
}
