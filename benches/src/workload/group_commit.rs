//! `group-commit`: many threads each writing one small synced batch at a time.

use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::{Config, Opened, describe};
use crate::keys::{KEY_LEN, KeyStream, VALUE_LEN};
use crate::stats::{Samples, print_table};

/// Default number of writer threads.
const DEFAULT_THREADS: usize = 64;

/// Runs `threads` writers against one fresh database for `duration`; each writes one 16-byte
/// record per batch with `sync: true`. Returns (writes, elapsed).
fn one_run(
    opened: &Opened,
    threads: usize,
    duration: Duration,
    seed: u64,
) -> Result<(u64, Duration)> {
    let engine = opened.engine();
    let stream = KeyStream::new(seed);
    let stop = AtomicBool::new(false);
    let barrier = Barrier::new(threads + 1);
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads as u64)
            .map(|t| {
                let (stop, barrier) = (&stop, &barrier);
                s.spawn(move || -> Result<u64> {
                    barrier.wait();
                    let mut i = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        engine.write(&[stream.record((t << 40) | i)], true)?;
                        i += 1;
                    }
                    Ok(i)
                })
            })
            .collect();
        barrier.wait();
        let start = Instant::now();
        std::thread::sleep(duration);
        stop.store(true, Ordering::Relaxed);
        let mut total = 0;
        let mut first_err = None;
        for w in workers {
            match w.join() {
                Ok(Ok(n)) => total += n,
                Ok(Err(e)) => first_err = first_err.or(Some(e)),
                Err(_) => first_err = first_err.or(Some(anyhow::anyhow!("writer thread panicked"))),
            }
        }
        // Writers finish their in-flight write after `stop`: count the time until they all did.
        let elapsed = start.elapsed();
        match first_err {
            Some(e) => Err(e),
            None => Ok((total, elapsed)),
        }
    })
}

/// Measures synced writes/s with `cfg.threads` writers (default 64) and with one writer, per
/// engine, and the ratio of the two.
pub(super) fn group_commit(cfg: &Config) -> Result<()> {
    let threads = cfg.threads.unwrap_or(DEFAULT_THREADS).max(1);
    let tuning = cfg.tuning(64 << 20);
    println!(
        "== group-commit: {threads} threads vs 1 thread, each write one {KEY_LEN}+{VALUE_LEN}-byte record with sync=true, {} s per run, {} runs",
        cfg.duration.as_secs_f64(),
        cfg.runs
    );
    println!("   {}", describe(&tuning));

    let mut table = Vec::new();
    let mut shapes = Vec::new();
    for t in [threads, 1] {
        let mut results: Vec<(String, Samples)> = cfg
            .engines
            .iter()
            .map(|e| (e.clone(), Samples::new()))
            .collect();
        for run in 0..cfg.runs {
            for (name, samples) in &mut results {
                let opened = Opened::new(name, &cfg.dir, "group-commit", &tuning)?;
                let (ops, elapsed) = one_run(&opened, t, cfg.duration, cfg.seed ^ run as u64)
                    .with_context(|| format!("{name} with {t} threads"))?;
                samples.push(ops, elapsed);
                if run + 1 == cfg.runs {
                    shapes.push(format!(
                        "{name} ({t} thread(s), last run): {}",
                        opened.engine().shape()
                    ));
                }
            }
        }
        print_table(&format!("synced writes/s, {t} thread(s)"), &results);
        table.push(results);
    }
    if let [many, one] = table.as_slice() {
        println!("  scaling: {threads} threads / 1 thread (median over median)");
        for ((name, m), (_, o)) in many.iter().zip(one) {
            let ratio = if o.median() > 0.0 {
                m.median() / o.median()
            } else {
                0.0
            };
            println!("    {name:<8} {ratio:>8.1}x");
        }
    }
    for s in shapes {
        println!("  {s}");
    }
    Ok(())
}
