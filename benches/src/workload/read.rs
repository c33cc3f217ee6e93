//! `read-random`, `read-missing` and `scan`: one load per engine, then interleaved read runs.

use std::time::{Duration, Instant};

use anyhow::{Result, bail};

use super::{Config, Opened, Workload, describe};
use crate::engine::{Direction, Engine};
use crate::keys::{KEY_LEN, KeyStream, Picker, VALUE_LEN};
use crate::stats::{Samples, mib, print_table, rate, thousands};
use crate::sys;

/// Default records loaded.
const DEFAULT_N: u64 = 10_000_000;

/// What one engine's load cost.
#[derive(Debug)]
struct LoadReport {
    elapsed: Duration,
    peak_rss_delta: Option<u64>,
    rss_after: Option<u64>,
    written_bytes: Option<u64>,
    disk_bytes: u64,
}

/// Writes records `0..n` in unsynced batches, flushes, waits for background work to stop.
fn load(opened: &Opened, n: u64, batch: usize, stream: &KeyStream) -> Result<LoadReport> {
    let engine = opened.engine();
    let rss_before = sys::rss_bytes();
    let peak_reset = sys::reset_peak_rss();
    let written_before = sys::process_write_bytes();
    let start = Instant::now();
    let mut records = Vec::with_capacity(batch);
    let mut next = 0;
    while next < n {
        let count = (n - next).min(batch as u64);
        stream.fill(&mut records, next, count);
        engine.write(&records, false)?;
        next += count;
    }
    engine.flush()?;
    let elapsed = start.elapsed();
    engine.wait_for_background()?;
    let peak_rss_delta = match (peak_reset, sys::peak_rss_bytes(), rss_before) {
        (true, Some(peak), Some(before)) => Some(peak.saturating_sub(before)),
        _ => None,
    };
    let written_bytes = match (written_before, sys::process_write_bytes()) {
        (Some(b), Some(a)) => Some(a.saturating_sub(b)),
        _ => None,
    };
    Ok(LoadReport {
        elapsed,
        peak_rss_delta,
        rss_after: sys::rss_bytes(),
        written_bytes,
        disk_bytes: sys::dir_size_bytes(opened.path()),
    })
}

/// Random point reads spread over `threads` threads; returns (reads, wrong answers, elapsed).
/// `present` reads keys `0..n` and checks each value; otherwise keys `n..2n`, which must miss.
fn point_reads(
    engine: &dyn Engine,
    stream: &KeyStream,
    n: u64,
    ops: u64,
    threads: usize,
    present: bool,
    seed: u64,
) -> Result<(u64, u64, Duration)> {
    let per_thread = ops / threads as u64;
    let start = Instant::now();
    let results: Vec<Result<u64>> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads as u64)
            .map(|t| {
                s.spawn(move || -> Result<u64> {
                    let mut picker = Picker::new(seed ^ (t << 48));
                    let mut value = Vec::with_capacity(VALUE_LEN);
                    let mut wrong = 0;
                    for _ in 0..per_thread {
                        let i = picker.below(n);
                        if present {
                            let hit = engine.get(&stream.key(i), &mut value)?;
                            if !hit || value.as_slice() != KeyStream::value(i).as_slice() {
                                wrong += 1;
                            }
                        } else if engine.get(&stream.key(n + i), &mut value)? {
                            wrong += 1;
                        }
                    }
                    Ok(wrong)
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| {
                w.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("reader panicked")))
            })
            .collect()
    });
    let elapsed = start.elapsed();
    let mut wrong = 0;
    for r in results {
        wrong += r?;
    }
    Ok((per_thread * threads as u64, wrong, elapsed))
}

/// Loads every engine once (reporting load throughput, memory, write and space amplification),
/// then runs the requested read workloads with interleaved runs.
pub(super) fn load_then_read(reads: &[Workload], cfg: &Config) -> Result<()> {
    let n = cfg.n.unwrap_or(DEFAULT_N);
    if n == 0 {
        bail!("--n must be positive for read workloads");
    }
    let threads = cfg.threads.unwrap_or(1).max(1);
    let tuning = cfg.tuning(64 << 20);
    let names: Vec<_> = reads.iter().map(|w| w.name()).collect();
    println!(
        "== {}: load {} records ({KEY_LEN}-byte random key, {VALUE_LEN}-byte value) in batches of {}, sync=false, then flush",
        names.join(", "),
        thousands(n as f64),
        cfg.batch,
    );
    println!("   {}", describe(&tuning));
    println!(
        "   point reads: {} per run over {threads} thread(s); scans: full forward and reverse; {} runs",
        thousands(cfg.ops as f64),
        cfg.runs
    );

    let stream = KeyStream::new(cfg.seed);
    let user_bytes = n * (KEY_LEN + VALUE_LEN) as u64;
    let mut opened = Vec::new();
    let mut loads = Vec::new();
    for name in &cfg.engines {
        let o = Opened::new(name, &cfg.dir, "load", &tuning)?;
        let report = load(&o, n, cfg.batch, &stream)?;
        let mut samples = Samples::new();
        samples.push(n, report.elapsed);
        loads.push((name.clone(), samples));
        println!(
            "  load {name:<8} {:>8.1} s  {:>11} puts/s  peak RSS +{}  RSS after {}  written {} ({:.2}x user bytes)  on disk {} ({:.2}x)",
            report.elapsed.as_secs_f64(),
            thousands(rate(n, report.elapsed)),
            report.peak_rss_delta.map_or("?".into(), mib),
            report.rss_after.map_or("?".into(), mib),
            report.written_bytes.map_or("?".into(), mib),
            report.written_bytes.unwrap_or(0) as f64 / user_bytes as f64,
            mib(report.disk_bytes),
            report.disk_bytes as f64 / user_bytes as f64,
        );
        println!("       {name:<8} {}", o.engine().shape());
        opened.push(o);
    }
    print_table("load puts/s (one run, includes the final flush)", &loads);

    for &w in reads {
        let directions: &[Direction] = match w {
            Workload::Scan => &[Direction::Forward, Direction::Reverse],
            _ => &[Direction::Forward],
        };
        for &direction in directions {
            let mut results: Vec<(String, Samples)> = cfg
                .engines
                .iter()
                .map(|e| (e.clone(), Samples::new()))
                .collect();
            let mut problems = Vec::new();
            for run in 0..cfg.runs {
                for ((name, samples), o) in results.iter_mut().zip(&opened) {
                    let engine = o.engine();
                    let seed = cfg.seed.rotate_left(17) ^ run as u64;
                    match w {
                        Workload::ReadRandom | Workload::ReadMissing => {
                            let present = w == Workload::ReadRandom;
                            let (ops, wrong, elapsed) =
                                point_reads(engine, &stream, n, cfg.ops, threads, present, seed)?;
                            samples.push(ops, elapsed);
                            if wrong > 0 {
                                problems
                                    .push(format!("{name}: {wrong} wrong answers in run {run}"));
                            }
                        }
                        Workload::Scan => {
                            let start = Instant::now();
                            let scan = engine.scan(direction)?;
                            samples.push(scan.count, start.elapsed());
                            if scan.count != n || scan.out_of_order > 0 {
                                problems.push(format!(
                                    "{name}: scan saw {} entries ({} out of order), expected {n}",
                                    scan.count, scan.out_of_order
                                ));
                            }
                        }
                        Workload::FillMem | Workload::GroupCommit | Workload::FillBatches => {}
                    }
                }
            }
            let what = match (w, direction) {
                (Workload::ReadRandom, _) => "read-random: gets/s (present keys)".to_string(),
                (Workload::ReadMissing, _) => "read-missing: gets/s (absent keys)".to_string(),
                (_, Direction::Forward) => "scan forward: keys/s".to_string(),
                (_, Direction::Reverse) => "scan reverse: keys/s".to_string(),
            };
            print_table(&what, &results);
            for p in &problems {
                println!("    CHECK FAILED {p}");
            }
        }
    }
    Ok(())
}
