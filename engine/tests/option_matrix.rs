//! Metamorphic test: one seeded operation list runs under several configurations (block size,
//! restart interval, bloom filter on/off, compression on/off, tiny and default write buffers
//! and table sizes, 1 and 4 background jobs); every get, every scan and the final contents must
//! be identical across them. Seed printed; `STRATA_SEED=<seed>` to rerun one.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "a panic is how a test fails"
)]

use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata_engine::{CounterAdd, Db, Options, ReadOptions, WriteBatch, WriteOptions};

#[derive(Debug, Clone)]
enum Op {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
    Merge(Vec<u8>, i64),
    Batch(Vec<(Vec<u8>, Option<Vec<u8>>)>),
    Get(Vec<u8>),
    Scan(Vec<u8>, Vec<u8>, bool),
    Flush,
    Compact,
    Reopen,
}

fn ops(seed: u64, n: usize) -> Vec<Op> {
    let mut rng = StdRng::seed_from_u64(seed);
    let key = |rng: &mut StdRng| format!("k{:03}", rng.random_range(0..300)).into_bytes();
    let counter = |rng: &mut StdRng| format!("c{:02}", rng.random_range(0..20)).into_bytes();
    (0..n)
        .map(|_| match rng.random_range(0..100) {
            0..=39 => {
                let len = rng.random_range(0..200);
                Op::Put(key(&mut rng), (0..len).map(|_| rng.random()).collect())
            }
            40..=49 => Op::Delete(key(&mut rng)),
            50..=57 => Op::Merge(counter(&mut rng), rng.random_range(-5..10)),
            58..=64 => Op::Batch(
                (0..rng.random_range(1..10))
                    .map(|_| {
                        let k = key(&mut rng);
                        let v = rng.random_bool(0.7).then(|| vec![rng.random(); 30]);
                        (k, v)
                    })
                    .collect(),
            ),
            65..=79 => Op::Get(if rng.random_bool(0.2) {
                counter(&mut rng)
            } else {
                key(&mut rng)
            }),
            80..=89 => {
                let (a, b) = (key(&mut rng), key(&mut rng));
                let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                Op::Scan(lo, hi, rng.random_bool(0.5))
            }
            90..=94 => Op::Flush,
            95..=97 => Op::Compact,
            _ => Op::Reopen,
        })
        .collect()
}

/// Runs `ops` and returns a transcript of every read result.
fn run(options: &Options, ops: &[Op]) -> Vec<String> {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut db = Db::open(dir.path(), options.clone()).expect("open");
    let mut out = Vec::new();
    for op in ops {
        match op {
            Op::Put(k, v) => db.put(k, v).expect("put"),
            Op::Delete(k) => db.delete(k).expect("delete"),
            Op::Merge(k, d) => db.merge(k, d.to_string().as_bytes()).expect("merge"),
            Op::Batch(entries) => {
                let mut b = WriteBatch::new();
                for (k, v) in entries {
                    match v {
                        Some(v) => b.put(k, v),
                        None => b.delete(k),
                    }
                }
                db.write(b, &WriteOptions::default()).expect("write");
            }
            Op::Get(k) => out.push(format!("get {k:?} = {:?}", db.get(k).expect("get"))),
            Op::Scan(lo, hi, rev) => {
                let it = db.range(&ReadOptions::default(), &lo[..]..&hi[..]);
                let items: Vec<_> = if *rev {
                    it.rev().map(|kv| kv.expect("scan")).collect()
                } else {
                    it.map(|kv| kv.expect("scan")).collect()
                };
                out.push(format!("scan {lo:?}..{hi:?} rev={rev} = {items:?}"));
            }
            Op::Flush => db.flush().expect("flush"),
            Op::Compact => db.compact_range(None, None).expect("compact"),
            Op::Reopen => {
                db.close().expect("close");
                db = Db::open(dir.path(), options.clone()).expect("reopen");
            }
        }
    }
    let all: Vec<_> = db
        .iter(&ReadOptions::default())
        .map(|kv| kv.expect("final scan"))
        .collect();
    out.push(format!("final {all:?}"));
    db.check_integrity().expect("integrity");
    out
}

fn configurations() -> Vec<(&'static str, Options)> {
    let base = || Options::default().merge_operator(Some(Arc::new(CounterAdd)));
    let tiny = || {
        base()
            .write_buffer_size(4096)
            .target_file_size(1024)
            .max_bytes_for_level_base(4096)
            .level_size_multiplier(2)
            .level0_file_num_compaction_trigger(2)
    };
    vec![
        ("defaults", base()),
        ("tiny, 1 job", tiny().max_background_jobs(1)),
        ("tiny, 4 jobs", tiny().max_background_jobs(4)),
        (
            "tiny blocks, restart 1",
            tiny().block_size(64).block_restart_interval(1),
        ),
        (
            "no bloom, no compression",
            tiny().bloom_bits_per_key(0).compression(false),
        ),
        (
            "4 memtables merged per level-0 table",
            tiny()
                .min_write_buffer_number_to_merge(4)
                .max_write_buffer_number(6),
        ),
        (
            "big blocks, restart 16",
            tiny().block_size(16 << 10).block_restart_interval(16),
        ),
    ]
}

#[test]
fn same_operations_give_same_results_under_every_configuration() {
    let seed = std::env::var("STRATA_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random::<u64>);
    println!("option matrix seed {seed}; rerun with STRATA_SEED={seed}");
    let ops = ops(seed, 800);
    let configs = configurations();
    let (first_name, first_opts) = &configs[0];
    let expected = run(first_opts, &ops);
    for (name, opts) in &configs[1..] {
        let got = run(opts, &ops);
        for (i, (a, b)) in expected.iter().zip(&got).enumerate() {
            assert_eq!(
                a, b,
                "seed {seed}: read {i} differs between '{first_name}' and '{name}'"
            );
        }
        assert_eq!(expected.len(), got.len(), "seed {seed}: '{name}'");
    }
}
