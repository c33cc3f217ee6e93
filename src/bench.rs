//! `strata bench fill`: the insert benchmark the users asked for.
//!
//! Writes N records of `u64` big-endian key → 8-byte value (two `u32`) in batches through the
//! public API and reports the time of every batch, so a slowdown as the database grows shows
//! up as a rising line. Keys come from the splitmix64 finalizer (`mix64(i ^ seed)`, a bijection,
//! so random keys never repeat) or are sequential; values are derived from the key so any
//! lookup can be verified without a stored copy (`shared/data/README.md`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use clap::{Args, ValueEnum};
use strata_engine::{Db, Options, WriteBatch, WriteOptions};

/// Key order for `bench fill`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Order {
    /// splitmix64 of the index: uniformly random, unique.
    Random,
    /// Ascending indices.
    Sequential,
}

/// Arguments of `strata bench fill`.
#[derive(Debug, Args)]
pub(crate) struct FillArgs {
    /// Database directory (left in place for inspection).
    #[arg(long)]
    dir: PathBuf,
    /// Records to write.
    #[arg(long)]
    keys: u64,
    /// Records per batch.
    #[arg(long, default_value_t = 65_536)]
    batch: u64,
    /// Key order.
    #[arg(long, value_enum, default_value_t = Order::Random)]
    order: Order,
    /// Value size in bytes (at least 8: two u32 derived from the key, then padding).
    #[arg(long, default_value_t = 8)]
    value_size: usize,
    /// fsync every batch.
    #[arg(long)]
    sync: bool,
    /// Write one row per batch: batch,keys_inserted,batch_seconds,elapsed_seconds.
    #[arg(long)]
    csv: Option<PathBuf>,
    /// Draw batch time against keys inserted (SVG).
    #[arg(long)]
    plot: Option<PathBuf>,
    /// Compact everything at the end and report bytes on disk per record.
    #[arg(long)]
    compact: bool,
    /// Memtable size in MiB.
    #[arg(long, default_value_t = 64)]
    write_buffer_mb: usize,
    /// Block cache size in MiB.
    #[arg(long, default_value_t = 64)]
    cache_mb: usize,
    /// Key ranges each compaction is split into, merged on threads of their own
    /// (`Options::max_subcompactions`; 1 turns splitting off).
    #[arg(long, default_value_t = Options::default().max_subcompactions)]
    subcompactions: usize,
    /// Seed of the key stream.
    #[arg(long, default_value_t = 0x5eed)]
    seed: u64,
}

/// The splitmix64 finalizer: a bijection on u64.
pub(crate) fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[expect(
    clippy::big_endian_bytes,
    reason = "big-endian keys sort like the integers"
)]
fn key_bytes(k: u64) -> [u8; 8] {
    k.to_be_bytes()
}

fn value_bytes(key: u64, size: usize, out: &mut Vec<u8>) {
    out.clear();
    let h = mix64(key);
    out.extend_from_slice(&h.to_le_bytes());
    out.resize(size.max(8), 0);
}

/// Peak resident set size of this process in bytes (VmHWM), if the platform reports it.
pub(crate) fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

fn dir_bytes(dir: &Path) -> std::io::Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir)? {
        let meta = entry?.metadata()?;
        if meta.is_file() {
            total += meta.len();
        }
    }
    Ok(total)
}

fn median(sorted: &[f64]) -> f64 {
    match sorted.len() {
        0 => 0.0,
        n if n % 2 == 1 => sorted[n / 2],
        n => f64::midpoint(sorted[n / 2 - 1], sorted[n / 2]),
    }
}

fn sorted(v: &[f64]) -> Vec<f64> {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v
}

#[expect(clippy::cast_precision_loss, reason = "benchmark figures")]
fn f(v: u64) -> f64 {
    v as f64
}

/// Runs `bench fill`.
pub(crate) fn fill(args: &FillArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.batch > 0, "--batch must be positive");
    anyhow::ensure!(args.keys > 0, "--keys must be positive");
    anyhow::ensure!(
        args.value_size >= 8,
        "--value-size must be at least 8 (two u32 derived from the key)"
    );
    // A closed pipe (`| head`) ends the run with an error `main` reports quietly.
    let mut out = std::io::stdout();
    let options = Options::default()
        .write_buffer_size(args.write_buffer_mb << 20)
        .block_cache_size(args.cache_mb << 20)
        .max_subcompactions(args.subcompactions);
    crate::check_database_dir(&args.dir)?;
    let db =
        Db::open(&args.dir, options).with_context(|| format!("opening {}", args.dir.display()))?;
    writeln!(
        out,
        "bench fill: {} keys, batch {}, order {:?}, value {} B, sync {}, write buffer {} MiB, subcompactions {}, dir {}",
        args.keys,
        args.batch,
        args.order,
        args.value_size,
        args.sync,
        args.write_buffer_mb,
        args.subcompactions,
        args.dir.display()
    )?;
    // Both output files are created before the run, so a bad path fails at once.
    if let Some(p) = &args.plot {
        std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?;
    }
    let mut csv = match &args.csv {
        Some(p) => {
            let file =
                std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?;
            let mut w = std::io::BufWriter::new(file);
            writeln!(w, "batch,keys_inserted,batch_seconds,elapsed_seconds")?;
            Some(w)
        }
        None => None,
    };
    let write_options = WriteOptions {
        sync: args.sync,
        ..Default::default()
    };
    let start = Instant::now();
    let mut times = Vec::new();
    let mut points = Vec::new();
    let mut value = Vec::new();
    let mut inserted = 0u64;
    let mut next_report = args.keys / 10;
    while inserted < args.keys {
        let n = args.batch.min(args.keys - inserted);
        let mut batch = WriteBatch::with_capacity(usize::try_from(n)? * (8 + args.value_size + 2));
        for i in inserted..inserted + n {
            let k = match args.order {
                Order::Random => mix64(i ^ args.seed),
                Order::Sequential => i,
            };
            value_bytes(k, args.value_size, &mut value);
            batch.put(&key_bytes(k), &value);
        }
        let t = Instant::now();
        db.write(batch, &write_options)?;
        let secs = t.elapsed().as_secs_f64();
        inserted += n;
        times.push(secs);
        points.push((inserted, secs));
        if let Some(w) = csv.as_mut() {
            writeln!(
                w,
                "{},{inserted},{secs:.6},{:.6}",
                times.len(),
                start.elapsed().as_secs_f64()
            )?;
        }
        if inserted >= next_report && next_report > 0 {
            eprintln!(
                "  {inserted} keys, {:.1} s, last batch {:.3} s",
                start.elapsed().as_secs_f64(),
                secs
            );
            next_report += args.keys / 10;
        }
    }
    db.flush()?;
    let total = start.elapsed().as_secs_f64();
    if let Some(mut w) = csv {
        w.flush()?;
    }
    let tenth = (times.len() / 10).max(1);
    let first = sorted(&times[..tenth.min(times.len())]);
    let mid_start = (times.len() / 2).saturating_sub(tenth / 2);
    let middle = sorted(&times[mid_start..(mid_start + tenth).min(times.len())]);
    let last = sorted(&times[times.len().saturating_sub(tenth)..]);
    let all = sorted(&times);
    let p99 = all[((all.len() * 99) / 100).min(all.len() - 1)];
    let max = all.last().copied().unwrap_or(0.0);
    let stats = db.stats();
    writeln!(out, "batches: {}", times.len())?;
    writeln!(
        out,
        "median batch seconds: first tenth {:.4}, middle tenth {:.4}, last tenth {:.4} (last/middle {:.2}x)",
        median(&first),
        median(&middle),
        median(&last),
        median(&last) / median(&middle).max(1e-9)
    )?;
    writeln!(
        out,
        "p99 batch {:.4} s, max batch {:.4} s ({:.1}x the overall median {:.4} s)",
        p99,
        max,
        max / median(&all).max(1e-9),
        median(&all)
    )?;
    writeln!(
        out,
        "total {:.1} s, {:.0} keys/s (flush included)",
        total,
        f(args.keys) / total
    )?;
    writeln!(
        out,
        "write amplification {:.2}; stalled {:.2} s, delayed {:.2} s",
        stats.write_amplification(),
        f(stats.stall_micros) / 1e6,
        f(stats.delay_micros) / 1e6
    )?;
    if args.compact {
        let t = Instant::now();
        db.compact_range(None, None)?;
        writeln!(out, "compact_range: {:.1} s", t.elapsed().as_secs_f64())?;
    }
    let stats = db.stats();
    writeln!(out, "{stats}")?;
    db.close()?;
    let on_disk = dir_bytes(&args.dir)?;
    writeln!(
        out,
        "on disk: {on_disk} bytes, {:.2} bytes per record{}",
        f(on_disk) / f(args.keys.max(1)),
        if args.compact {
            " (after compacting everything)"
        } else {
            ""
        }
    )?;
    if let Some(rss) = peak_rss_bytes() {
        writeln!(out, "peak RSS: {:.1} MiB", f(rss) / f(1 << 20))?;
    }
    if let Some(plot) = &args.plot {
        draw_plot(plot, &points, args)?;
        writeln!(out, "plot: {}", plot.display())?;
    }
    Ok(())
}

fn draw_plot(path: &Path, points: &[(u64, f64)], args: &FillArgs) -> anyhow::Result<()> {
    use plotters::prelude::*;
    let max_x = points.last().map_or(1, |p| p.0).max(1);
    let max_y = points.iter().map(|p| p.1).fold(0.0, f64::max).max(1e-6) * 1.1;
    let root = SVGBackend::new(path, (1000, 500)).into_drawing_area();
    root.fill(&WHITE)
        .map_err(|e| anyhow::anyhow!("plot: {e}"))?;
    let caption = format!(
        "strata bench fill: {} {:?} keys, batches of {}",
        args.keys, args.order, args.batch
    );
    let mut chart = ChartBuilder::on(&root)
        .caption(caption, ("sans-serif", 20))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..f(max_x), 0f64..max_y)
        .map_err(|e| anyhow::anyhow!("plot: {e}"))?;
    chart
        .configure_mesh()
        .x_desc("keys inserted")
        .y_desc("batch time (s)")
        .draw()
        .map_err(|e| anyhow::anyhow!("plot: {e}"))?;
    chart
        .draw_series(LineSeries::new(
            points.iter().map(|&(x, y)| (f(x), y)),
            &BLUE,
        ))
        .map_err(|e| anyhow::anyhow!("plot: {e}"))?;
    root.present().map_err(|e| anyhow::anyhow!("plot: {e}"))?;
    Ok(())
}
