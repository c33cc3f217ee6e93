//! `fill-batches`: the data engineer's load (issue #4), timed batch by batch.
//!
//! Inserts `n` records of `strata bench fill`'s layout (`u64` big-endian random key -> two
//! `u32`, 16 bytes) in unsynced batches through each engine in turn, timing every batch, then
//! flushes, waits for background work, compacts everything and measures the size on disk
//! before and after. Engines run one after the other over the same key stream, each in a fresh
//! directory that is removed afterwards. Writes one CSV per engine and one SVG with every
//! engine's batch times; prints the figures that say whether insert time stays flat.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::{Config, Opened, describe};
use crate::keys::{KEY_LEN, KeyStream, VALUE_LEN};
use crate::plot::{self, Series};
use crate::stats::{BatchSummary, mib, rate, thousands};
use crate::sys;

/// Default records inserted per engine.
const DEFAULT_N: u64 = 10_000_000;

/// What one engine's run measured.
#[derive(Debug)]
struct FillReport {
    engine: String,
    /// (keys inserted after the batch, batch seconds), in order.
    points: Vec<(u64, f64)>,
    /// Inserting every batch plus the final flush.
    load: Duration,
    /// Waiting for background work after the flush.
    settle: Duration,
    /// The final full compaction.
    compact: Duration,
    disk_before_compact: u64,
    disk_after_compact: u64,
    write_amp_load: Option<f64>,
    write_amp_after_compact: Option<f64>,
    /// Bytes the process wrote during the load and settle (`/proc/self/io`).
    written_bytes: Option<u64>,
    peak_rss_delta: Option<u64>,
}

#[expect(clippy::cast_precision_loss, reason = "byte counts in reports")]
fn per(bytes: u64, n: u64) -> f64 {
    bytes as f64 / n.max(1) as f64
}

fn amp(a: Option<f64>) -> String {
    a.map_or_else(|| "not measured".to_string(), |a| format!("{a:.2}"))
}

/// The CSV of one engine's batches: `batch,keys_inserted,batch_seconds,elapsed_seconds`, as
/// `strata bench fill --csv` writes it.
fn csv_path(out_dir: &Path, engine: &str) -> PathBuf {
    out_dir.join(format!("fill-batches-{engine}.csv"))
}

/// Inserts `n` records into one freshly opened engine and measures it.
fn fill_one(name: &str, cfg: &Config, n: u64, out_dir: &Path) -> Result<FillReport> {
    let tuning = cfg.tuning(64 << 20);
    let opened = Opened::new(name, &cfg.dir, "fill-batches", &tuning)?;
    let engine = opened.engine();
    let stream = KeyStream::new(cfg.seed);
    let csv_file = csv_path(out_dir, name);
    let mut csv = BufWriter::new(
        File::create(&csv_file).with_context(|| format!("creating {}", csv_file.display()))?,
    );
    writeln!(csv, "batch,keys_inserted,batch_seconds,elapsed_seconds")?;

    let rss_before = sys::rss_bytes();
    let peak_reset = sys::reset_peak_rss();
    let written_before = sys::process_write_bytes();
    let mut records = Vec::with_capacity(cfg.batch);
    let mut points = Vec::with_capacity(usize::try_from(n / cfg.batch as u64 + 1)?);
    let mut inserted = 0;
    let mut next_report = n / 10;
    let start = Instant::now();
    while inserted < n {
        let count = (n - inserted).min(cfg.batch as u64);
        stream.fill_bench_fill(&mut records, inserted, count);
        let t = Instant::now();
        engine.write(&records, false)?;
        let secs = t.elapsed().as_secs_f64();
        inserted += count;
        points.push((inserted, secs));
        writeln!(
            csv,
            "{},{inserted},{secs:.6},{:.6}",
            points.len(),
            start.elapsed().as_secs_f64()
        )?;
        if inserted >= next_report && next_report > 0 {
            csv.flush()?;
            eprintln!(
                "  {name}: {} keys, {:.1} s, last batch {secs:.3} s | load average {}",
                thousands(inserted as f64),
                start.elapsed().as_secs_f64(),
                sys::load_average().unwrap_or_default()
            );
            while next_report <= inserted {
                next_report += n / 10;
            }
        }
    }
    engine.flush()?;
    let load = start.elapsed();
    csv.flush()?;
    drop(csv);

    let t = Instant::now();
    engine.wait_for_background()?;
    let settle = t.elapsed();
    let written_bytes = match (written_before, sys::process_write_bytes()) {
        (Some(b), Some(a)) => Some(a.saturating_sub(b)),
        _ => None,
    };
    let peak_rss_delta = match (peak_reset, sys::peak_rss_bytes(), rss_before) {
        (true, Some(peak), Some(before)) => Some(peak.saturating_sub(before)),
        _ => None,
    };
    let write_amp_load = engine.write_amplification();
    let disk_before_compact = sys::dir_size_bytes(opened.path());
    println!("  {name}: after the load: {}", engine.shape());

    let t = Instant::now();
    engine.compact_all()?;
    engine.wait_for_background()?;
    let compact = t.elapsed();
    let write_amp_after_compact = engine.write_amplification();
    let disk_after_compact = sys::dir_size_bytes(opened.path());
    println!("  {name}: after compacting: {}", engine.shape());
    println!("  {name}: batch times in {}", csv_file.display());
    Ok(FillReport {
        engine: name.to_string(),
        points,
        load,
        settle,
        compact,
        disk_before_compact,
        disk_after_compact,
        write_amp_load,
        write_amp_after_compact,
        written_bytes,
        peak_rss_delta,
    })
}

/// Runs `fill-batches` for every engine in turn, then prints the comparison and draws the chart.
pub(super) fn fill_batches(cfg: &Config) -> Result<()> {
    let n = cfg.n.unwrap_or(DEFAULT_N);
    if n == 0 {
        bail!("--n must be positive for fill-batches");
    }
    let out_dir = cfg.out_dir.clone().unwrap_or_else(|| cfg.dir.clone());
    std::fs::create_dir_all(&out_dir).with_context(|| format!("creating {}", out_dir.display()))?;
    let user_bytes = n * (KEY_LEN + VALUE_LEN) as u64;
    println!(
        "== fill-batches: {} records ({KEY_LEN}-byte big-endian random key, {VALUE_LEN}-byte value, \
         strata bench fill's layout, seed {}) in batches of {}, sync=false, engines one after the \
         other; then flush, wait for background work, compact everything",
        thousands(n as f64),
        cfg.seed,
        cfg.batch
    );
    println!("   {}", describe(&cfg.tuning(64 << 20)));

    let mut reports = Vec::new();
    for name in &cfg.engines {
        println!(
            "  {name}: start | load average {}",
            sys::load_average().unwrap_or_default()
        );
        let report = fill_one(name, cfg, n, &out_dir)?;
        println!(
            "  {name}: done | load average {}",
            sys::load_average().unwrap_or_default()
        );
        reports.push(report);
    }

    let strata = reports
        .iter()
        .find(|r| r.engine == "strata")
        .map(|r| (r, BatchSummary::of(&times(r))));
    println!(
        "  {:<8} {:>9} {:>11} {:>9} {:>9} {:>9} {:>8} {:>9} {:>9} {:>12} {:>12} {:>9} {:>9}",
        "engine",
        "load s",
        "keys/s",
        "median s",
        "p99 s",
        "max s",
        "last/1st",
        "settle s",
        "compact s",
        "B/rec before",
        "B/rec after",
        "write amp",
        "written x"
    );
    for r in &reports {
        let s = BatchSummary::of(&times(r));
        println!(
            "  {:<8} {:>9.1} {:>11} {:>9.4} {:>9.4} {:>9.4} {:>7.2}x {:>9.1} {:>9.1} {:>12.2} {:>12.2} {:>9} {:>8.2}x",
            r.engine,
            r.load.as_secs_f64(),
            thousands(rate(n, r.load)),
            s.median,
            s.p99,
            s.max,
            s.flatness(),
            r.settle.as_secs_f64(),
            r.compact.as_secs_f64(),
            per(r.disk_before_compact, n),
            per(r.disk_after_compact, n),
            amp(r.write_amp_load),
            per(r.written_bytes.unwrap_or(0), user_bytes),
        );
        println!(
            "           first tenth median {:.4} s, last tenth median {:.4} s over {} batches; \
             peak RSS +{}; on disk {} before / {} after compacting; write amp {} after compacting",
            s.first_tenth_median,
            s.last_tenth_median,
            s.batches,
            r.peak_rss_delta.map_or_else(|| "?".into(), mib),
            mib(r.disk_before_compact),
            mib(r.disk_after_compact),
            amp(r.write_amp_after_compact),
        );
        if let Some((st, st_summary)) = &strata
            && r.engine != "strata"
        {
            println!(
                "           strata/{}: keys/s {:.2}x, median batch time {:.2}x faster, p99 {:.2}x, \
                 flatness {:.2} vs {:.2}",
                r.engine,
                rate(n, st.load) / rate(n, r.load).max(f64::MIN_POSITIVE),
                s.median / st_summary.median.max(f64::MIN_POSITIVE),
                s.p99 / st_summary.p99.max(f64::MIN_POSITIVE),
                st_summary.flatness(),
                s.flatness(),
            );
        }
    }
    println!(
        "  (load s: all batches plus the final flush; median/p99/max: one batch's write; \
         last/1st: median of the last tenth of the batches over the first tenth; settle: waiting \
         for background work after the flush; B/rec: bytes on disk per record; write amp: table \
         bytes written per byte flushed, during the load; written x: bytes the process wrote \
         during the load and settle per user byte)"
    );

    let svg = out_dir.join("fill-batches.svg");
    let series: Vec<Series<'_>> = reports
        .iter()
        .map(|r| Series {
            label: &r.engine,
            points: &r.points,
        })
        .collect();
    plot::batch_times_svg(
        &svg,
        &format!(
            "{} random u64 -> (u32, u32) records in batches of {}: time per batch",
            thousands(n as f64),
            thousands(cfg.batch as f64)
        ),
        &series,
    )?;
    println!("  chart: {}", svg.display());
    Ok(())
}

fn times(r: &FillReport) -> Vec<f64> {
    r.points.iter().map(|p| p.1).collect()
}
