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

/// Most memory one batch may take (its records, key and value), so that a `--batch` or
/// `--value-size` typed wrong is an argument error instead of an allocation that kills the
/// process.
const MAX_BATCH_BYTES: u64 = 1 << 30;

/// Bytes one record takes in a `WriteBatch` (key, value and about 2 bytes of framing).
fn record_bytes(value_size: usize) -> u64 {
    8 + value_size as u64 + 2
}

/// Checks the arguments before anything is created; returns the records per batch (`--batch`,
/// at most `--keys`).
///
/// # Errors
/// Naming the flag that is out of range, and its limit.
fn check_args(args: &FillArgs) -> anyhow::Result<u64> {
    anyhow::ensure!(args.batch > 0, "--batch must be positive");
    anyhow::ensure!(args.keys > 0, "--keys must be positive");
    anyhow::ensure!(
        args.value_size >= 8,
        "--value-size must be at least 8 (two u32 derived from the key)"
    );
    let max_value = Options::default().max_value_size;
    anyhow::ensure!(
        args.value_size <= max_value,
        "--value-size must be at most {max_value} (the engine's max_value_size)"
    );
    anyhow::ensure!(
        args.write_buffer_mb >= 1,
        "--write-buffer-mb must be at least 1"
    );
    anyhow::ensure!(
        args.write_buffer_mb.checked_mul(1 << 20).is_some(),
        "--write-buffer-mb {} is too large",
        args.write_buffer_mb
    );
    anyhow::ensure!(
        args.cache_mb.checked_mul(1 << 20).is_some(),
        "--cache-mb {} is too large",
        args.cache_mb
    );
    let batch = args.batch.min(args.keys);
    let per_record = record_bytes(args.value_size);
    let most = (MAX_BATCH_BYTES / per_record).max(1);
    anyhow::ensure!(
        batch.saturating_mul(per_record) <= MAX_BATCH_BYTES,
        "a batch of {batch} records of {per_record} bytes needs {} MiB, more than the {} MiB \
         a batch may take: lower --batch (at most {most} records of this size) or --value-size",
        batch.saturating_mul(per_record) >> 20,
        MAX_BATCH_BYTES >> 20
    );
    Ok(batch)
}

/// Refuses a `--dir` that exists and holds anything (a user's database, say): the benchmark
/// writes its own keys and `--compact` compacts everything, so it gets a new or empty
/// directory.
///
/// # Errors
/// Naming the directory; as [`crate::check_database_dir`].
fn check_dir(dir: &Path) -> anyhow::Result<()> {
    match std::fs::read_dir(dir) {
        Ok(mut entries) => anyhow::ensure!(
            entries.next().is_none(),
            "--dir {} exists and is not empty: bench fill writes its own keys into a new \
             database, so give a directory that does not exist yet or is empty",
            dir.display()
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(_) if dir.exists() && !dir.is_dir() => {
            anyhow::bail!("--dir {} is not a directory", dir.display())
        }
        Err(e) => return Err(e).with_context(|| format!("reading --dir {}", dir.display())),
    }
    crate::check_database_dir(dir)
}

/// Runs `bench fill`.
pub(crate) fn fill(args: &FillArgs) -> anyhow::Result<()> {
    let batch_records = check_args(args)?;
    check_dir(&args.dir)?;
    // Both output files are created before the database, so a bad path fails at once and
    // creates nothing in --dir.
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
    // A closed pipe (`| head`) ends the run with an error `main` reports quietly.
    let mut out = std::io::stdout();
    let options = crate::engine_options()
        .write_buffer_size(args.write_buffer_mb << 20)
        .block_cache_size(args.cache_mb << 20)
        .max_subcompactions(args.subcompactions);
    let db =
        Db::open(&args.dir, options).with_context(|| format!("opening {}", args.dir.display()))?;
    writeln!(
        out,
        "bench fill: {} keys, batch {}, order {:?}, value {} B, sync {}, write buffer {} MiB, subcompactions {}, dir {}",
        args.keys,
        batch_records,
        args.order,
        args.value_size,
        args.sync,
        args.write_buffer_mb,
        args.subcompactions,
        args.dir.display()
    )?;
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
        let n = batch_records.min(args.keys - inserted);
        let mut batch =
            WriteBatch::with_capacity(usize::try_from(n * record_bytes(args.value_size))?);
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
        args.keys,
        args.order,
        args.batch.min(args.keys)
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

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used, reason = "a panic is how a test fails")]

    use super::*;

    fn args(list: &[&str]) -> FillArgs {
        use clap::Parser;
        let cli =
            crate::Cli::try_parse_from(["strata", "bench", "fill"].iter().chain(list).copied())
                .expect("arguments parse");
        let crate::Command::Bench(crate::BenchCommand::Fill(args)) = cli.command else {
            panic!("not bench fill");
        };
        args
    }

    fn error(list: &[&str]) -> String {
        fill(&args(list)).expect_err("refused").to_string()
    }

    #[test]
    fn value_size_over_the_engine_limit_is_refused_before_anything_is_allocated() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let db = dir.path().join("bv");
        let d = db.to_str().expect("utf-8 path");
        let err = error(&["--dir", d, "--keys", "10", "--value-size", "100000000000"]);
        assert!(
            err.contains("--value-size must be at most 268435456"),
            "{err}"
        );
        let err = error(&["--dir", d, "--keys", "3", "--value-size", "300000000"]);
        assert!(err.contains("--value-size must be at most"), "{err}");
        assert!(!db.exists(), "nothing is created");
    }

    #[test]
    fn a_batch_is_capped_at_keys_and_refused_over_a_gib() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let d = dir.path().join("b");
        let d = d.to_str().expect("utf-8 path");
        let err = error(&["--dir", d, "--keys", "1000000000", "--batch", "1000000000"]);
        assert!(
            err.contains("lower --batch (at most 59652323 records"),
            "{err}"
        );
        // --batch larger than --keys is --keys: 1,000 records of 18 bytes.
        let a = args(&["--dir", d, "--keys", "1000", "--batch", "1000000000"]);
        assert_eq!(check_args(&a).expect("fits"), 1000);
        // Four values of 256 MiB do not fit one batch; one does.
        let max = Options::default().max_value_size.to_string();
        let err = error(&["--dir", d, "--keys", "4", "--value-size", &max]);
        assert!(err.contains("MiB a batch may take"), "{err}");
        let a = args(&[
            "--dir",
            d,
            "--keys",
            "4",
            "--batch",
            "1",
            "--value-size",
            &max,
        ]);
        assert_eq!(check_args(&a).expect("fits"), 1);
    }

    #[test]
    fn write_buffer_mb_is_checked_in_the_flags_terms() {
        let err = error(&["--dir", "x", "--keys", "1", "--write-buffer-mb", "0"]);
        assert_eq!(err, "--write-buffer-mb must be at least 1");
    }

    #[test]
    fn an_existing_database_or_any_non_empty_dir_is_refused() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let user = dir.path().join("user");
        let db = Db::open(&user, Options::default()).expect("open");
        db.put(b"mine", b"1").expect("put");
        db.close().expect("close");
        let u = user.to_str().expect("utf-8 path");
        let err = error(&["--dir", u, "--keys", "10", "--compact"]);
        assert!(err.contains("exists and is not empty"), "{err}");
        let db = Db::open(&user, Options::default()).expect("open");
        assert_eq!(db.iter(&strata_engine::ReadOptions::default()).count(), 1);
        db.close().expect("close");
        // An empty directory and a new one are fine.
        let empty = dir.path().join("empty");
        std::fs::create_dir(&empty).expect("mkdir");
        fill(&args(&[
            "--dir",
            empty.to_str().expect("utf-8"),
            "--keys",
            "10",
        ]))
        .expect("fill");
        let new = dir.path().join("new");
        fill(&args(&[
            "--dir",
            new.to_str().expect("utf-8"),
            "--keys",
            "10",
        ]))
        .expect("fill");
        assert!(new.join("CURRENT").exists());
    }

    #[test]
    fn a_bad_output_path_creates_no_database() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let db = dir.path().join("fresh");
        let d = db.to_str().expect("utf-8 path");
        for flag in ["--csv", "--plot"] {
            let err = error(&["--dir", d, "--keys", "10", flag, "/nonexistent/dir/out"]);
            assert!(err.contains("creating /nonexistent/dir/out"), "{err}");
            assert!(!db.exists(), "{flag}: no database is created");
        }
    }
}
