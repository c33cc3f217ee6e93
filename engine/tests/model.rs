//! Model-based randomized test: random puts, deletes, counter merges (`CounterAdd`, folded by
//! compaction), batches, snapshots, flushes, manual compactions and close/reopen against a
//! `BTreeMap` oracle, with tiny size knobs so every run makes many
//! tables. Odd seeds run on the in-memory file system and also fill the disk now and then:
//! every file-system call fails with `ENOSPC` for a few writes, then space is back and the
//! database resumes (`Db::resume`), with nothing acknowledged lost and nothing refused kept.
//! Prints its seed; rerun one with `STRATA_SEED=<seed>`; more iterations with
//! `STRATA_MODEL_STEPS=<n>`.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "a panic is how a test fails"
)]

use std::collections::BTreeMap;
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata_engine::fs::{ENOSPC, Fault, FaultOp, MemFs};
use strata_engine::{
    Bytes, CounterAdd, Db, Error, Options, ReadOptions, Snapshot, WriteBatch, WriteBufferManager,
    WriteOptions,
};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Tiny size knobs, so every run makes many tables and levels. `merge` memtables are merged
/// into each level-0 table (`min_write_buffer_number_to_merge`); compaction output tables are
/// cut at `target` bytes (1 KiB, or 64 KiB so flushed tables are small against it and the
/// merges of small tables run).
fn tiny_options(merge: usize, target: u64) -> Options {
    Options::default()
        .write_buffer_size(4096)
        .min_write_buffer_number_to_merge(merge)
        .max_write_buffer_number(merge + 2)
        .block_size(64)
        .block_restart_interval(1)
        .bloom_bits_per_key(4)
        .target_file_size(target)
        .max_bytes_for_level_base(2048)
        .level_size_multiplier(2)
        .level0_file_num_compaction_trigger(2)
        .level0_slowdown_writes_trigger(8)
        .level0_stop_writes_trigger(12)
        .merge_operator(Some(Arc::new(CounterAdd)))
}

/// A merge operand for `key` when the model holds a counter there or nothing (a merge onto
/// another value would fail every read of the key), with the model updated to the sum.
fn counter_operand(rng: &mut StdRng, model: &mut Model, key: &[u8]) -> Option<Vec<u8>> {
    // Only a canonical decimal counts, as `CounterAdd` reads it (not "+1", "007", "-0").
    let base: i64 = match model.get(key) {
        None => 0,
        Some(v) => {
            let n: i64 = std::str::from_utf8(v).ok()?.parse().ok()?;
            if n.to_string().as_bytes() != v.as_slice() {
                return None;
            }
            n
        }
    };
    let delta: i64 = rng.random_range(-50..=100);
    model.insert(key.to_vec(), (base + delta).to_string().into_bytes());
    Some(delta.to_string().into_bytes())
}

/// Keys from a small alphabet with shared prefixes and the edge cases; some longer than the
/// 8-byte key prefixes the index seek compares first, sharing them.
fn random_key(rng: &mut StdRng) -> Vec<u8> {
    match rng.random_range(0..10) {
        0 => b"".to_vec(),
        1 => vec![0xff],
        2 => vec![0xff, 0xff],
        3 => vec![0x00],
        4 => {
            let mut key = b"ab\x00\xffab\x00".to_vec();
            let len = rng.random_range(0..4);
            let alphabet = b"ab\x00\xff";
            key.extend((0..len).map(|_| alphabet[rng.random_range(0..alphabet.len())]));
            key
        }
        _ => {
            let len = rng.random_range(1..6);
            let alphabet = b"ab\x00\xff";
            (0..len)
                .map(|_| alphabet[rng.random_range(0..alphabet.len())])
                .collect()
        }
    }
}

fn random_value(rng: &mut StdRng) -> Vec<u8> {
    let len = match rng.random_range(0..20) {
        0 => 0,
        1 => rng.random_range(100..3000),
        _ => rng.random_range(1..20),
    };
    (0..len).map(|_| rng.random()).collect()
}

fn scan(db: &Db, ro: &ReadOptions) -> Vec<(Vec<u8>, Vec<u8>)> {
    db.iter(ro)
        .map(|kv| {
            kv.map(|(k, v)| (k.to_vec(), v.to_vec()))
                .expect("scan item")
        })
        .collect()
}

fn check_all(db: &Db, model: &Model, snaps: &[(Snapshot, Model)], seed: u64, step: usize) {
    let ctx = format!("seed {seed} step {step}");
    for (k, v) in model {
        assert_eq!(
            db.get(k).expect("get").as_deref(),
            Some(&v[..]),
            "{ctx} key {k:?}"
        );
    }
    // One multi-get of every key the model or a snapshot holds, present now or not.
    let mut keys: Vec<&Vec<u8>> = model
        .keys()
        .chain(snaps.iter().flat_map(|(_, at)| at.keys()))
        .collect();
    // And keys never written (0xfe is not in the random keys' alphabet).
    let absent: Vec<Vec<u8>> = (0..8u8).map(|i| vec![0xfe, i, 0xfe]).collect();
    keys.extend(absent.iter());
    keys.sort();
    keys.dedup();
    let views = std::iter::once((ReadOptions::default(), model))
        .chain(snaps.iter().map(|(snap, at)| (ReadOptions::at(snap), at)));
    for (ro, expected) in views {
        let got = db.multi_get(&ro, &keys);
        assert_eq!(got.len(), keys.len(), "{ctx} multi_get");
        for (k, value) in keys.iter().zip(got) {
            assert_eq!(
                value.expect("multi_get").as_deref(),
                expected.get(*k).map(Vec::as_slice),
                "{ctx} multi_get key {k:?} at {:?}",
                ro.snapshot.as_ref().map(Snapshot::seqno)
            );
        }
    }
    let expected: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(
        scan(db, &ReadOptions::default()),
        expected,
        "{ctx} forward scan"
    );
    assert_eq!(
        db.count(&ReadOptions::default(), ..).expect("count"),
        expected.len() as u64,
        "{ctx} count"
    );
    let mut reversed: Vec<_> = db
        .iter(&ReadOptions::default())
        .rev()
        .map(|kv| {
            kv.map(|(k, v)| (k.to_vec(), v.to_vec()))
                .expect("reverse scan item")
        })
        .collect();
    reversed.reverse();
    assert_eq!(reversed, expected, "{ctx} reverse scan");
    for (snap, at) in snaps {
        let ro = ReadOptions::at(snap);
        let expected: Vec<_> = at.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        assert_eq!(
            scan(db, &ro),
            expected,
            "{ctx} snapshot {} scan",
            snap.seqno()
        );
        assert_eq!(
            db.count(&ro, ..).expect("count"),
            expected.len() as u64,
            "{ctx} snapshot {} count",
            snap.seqno()
        );
        for (k, v) in at.iter().take(20) {
            assert_eq!(
                db.get_opt(&ro, k).expect("get").as_deref(),
                Some(&v[..]),
                "{ctx}"
            );
        }
    }
}

fn run(seed: u64, steps: usize) {
    println!("model test seed {seed} ({steps} steps); rerun with STRATA_SEED={seed}");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rng = StdRng::seed_from_u64(seed);
    // Half the seeds merge several memtables into each level-0 table.
    let merge = if seed.is_multiple_of(2) { 1 } else { 3 };
    let target = if seed.is_multiple_of(3) {
        64 << 10
    } else {
        1024
    };
    // Odd seeds: the in-memory file system, with full-disk episodes.
    let memfs = (seed % 2 == 1).then(MemFs::new);
    let path = match &memfs {
        Some(_) => std::path::PathBuf::from("/model"),
        None => dir.path().to_path_buf(),
    };
    // Seeds 2 and 3 modulo 4: a memtable budget of two memtables, so writes flush memtables
    // early and wait for flushes (`WriteBufferManager`).
    let budget = (seed % 4 >= 2).then(|| WriteBufferManager::new(8 << 10));
    let options = || {
        let o = tiny_options(merge, target)
            .auto_resume(false)
            .write_buffer_manager(budget.clone());
        match &memfs {
            Some(fs) => o.file_system(Arc::new(fs.clone())),
            None => o,
        }
    };
    let mut db = Db::open(&path, options()).expect("open");
    let mut model = Model::new();
    let mut snaps: Vec<(Snapshot, Model)> = Vec::new();
    for step in 0..steps {
        match rng.random_range(0..100) {
            0..=36 => {
                let (k, v) = (random_key(&mut rng), random_value(&mut rng));
                db.put(&k, &v).expect("put");
                model.insert(k, v);
            }
            37..=44 => {
                let k = random_key(&mut rng);
                if let Some(operand) = counter_operand(&mut rng, &mut model, &k) {
                    db.merge(&k, &operand).expect("merge");
                }
            }
            45..=59 => {
                let k = random_key(&mut rng);
                db.delete(&k).expect("delete");
                model.remove(&k);
            }
            60..=74 => {
                let mut batch = WriteBatch::new();
                for _ in 0..rng.random_range(0..8) {
                    let k = random_key(&mut rng);
                    if rng.random_bool(0.3) {
                        batch.delete(&k);
                        model.remove(&k);
                    } else if rng.random_bool(0.3) {
                        if let Some(operand) = counter_operand(&mut rng, &mut model, &k) {
                            batch.merge(&k, &operand);
                        }
                    } else {
                        let v = random_value(&mut rng);
                        batch.put(&k, &v);
                        model.insert(k, v);
                    }
                }
                let sync = rng.random_bool(0.2);
                db.write(
                    batch,
                    &WriteOptions {
                        sync,
                        ..Default::default()
                    },
                )
                .expect("write");
            }
            75..=79 => {
                let k = random_key(&mut rng);
                let got = db.get(&k).expect("get");
                assert_eq!(
                    got.as_deref(),
                    model.get(&k).map(Vec::as_slice),
                    "seed {seed} step {step}"
                );
            }
            80..=84 => {
                if snaps.len() > 3 {
                    snaps.remove(rng.random_range(0..snaps.len()));
                }
                snaps.push((db.snapshot(), model.clone()));
            }
            85..=87 => db.flush().expect("flush"),
            88..=89 => {
                // Whole or partial manual compaction, snapshots held across it.
                if rng.random_bool(0.5) {
                    db.compact_range(None, None).expect("compact all");
                } else {
                    let (a, b) = (random_key(&mut rng), random_key(&mut rng));
                    let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                    db.compact_range(Some(&lo), Some(&hi))
                        .expect("compact range");
                }
            }
            90..=93 => {
                // Bounded range scan in a random direction.
                let (a, b) = (random_key(&mut rng), random_key(&mut rng));
                let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                let expected: Vec<(Vec<u8>, Vec<u8>)> = model
                    .range(lo.clone()..hi.clone())
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                let it = db.range(&ReadOptions::default(), &lo[..]..&hi[..]);
                let mut got: Vec<(Vec<u8>, Vec<u8>)> = if rng.random_bool(0.5) {
                    it.map(|kv| kv.map(|(k, v)| (k.to_vec(), v.to_vec())).expect("item"))
                        .collect()
                } else {
                    let mut g: Vec<_> = it
                        .rev()
                        .map(|kv| kv.map(|(k, v)| (k.to_vec(), v.to_vec())).expect("item"))
                        .collect();
                    g.reverse();
                    g
                };
                got.dedup();
                assert_eq!(
                    got, expected,
                    "seed {seed} step {step} range {lo:?}..{hi:?}"
                );
                let counted = db
                    .count(&ReadOptions::default(), &lo[..]..&hi[..])
                    .expect("count");
                assert_eq!(
                    counted,
                    expected.len() as u64,
                    "seed {seed} step {step} count {lo:?}..{hi:?}"
                );
            }
            94 if memfs.is_some() => {
                let fs = memfs.as_ref().expect("memfs");
                // The disk is full: a few writes, each refused (`ENOSPC`, then poisoned) and
                // so not in the model, while background jobs fail too; reads go on.
                fs.inject(Fault::new(FaultOp::Any, ENOSPC).sticky());
                for _ in 0..rng.random_range(1..4) {
                    let (k, v) = (random_key(&mut rng), random_value(&mut rng));
                    match db.put(&k, &v) {
                        Ok(()) => {
                            model.insert(k, v);
                        }
                        Err(e) => assert!(
                            e.is_resource_exhausted() || matches!(e, Error::Poisoned { .. }),
                            "seed {seed} step {step}: {e}"
                        ),
                    }
                }
                let k = random_key(&mut rng);
                assert_eq!(
                    db.get(&k).expect("get on a full disk").as_deref(),
                    model.get(&k).map(Vec::as_slice),
                    "seed {seed} step {step}"
                );
                // Space is back: the resume makes the database take writes again.
                fs.clear_faults();
                db.resume().expect("resume");
                assert!(!db.is_resumable(), "seed {seed} step {step}");
            }
            _ => {
                // Close and reopen; snapshots do not survive a reopen.
                snaps.clear();
                db.close().expect("close");
                db = Db::open(&path, options()).expect("reopen");
            }
        }
        if step % 500 == 499 {
            check_all(&db, &model, &snaps, seed, step);
        }
    }
    check_all(&db, &model, &snaps, seed, steps);
    drop(snaps);
    db.close().expect("close");
    if let Some(budget) = &budget {
        assert_eq!(
            budget.memory_usage(),
            0,
            "seed {seed}: closed memtables still counted"
        );
    }
    let db = Db::open(&path, options()).expect("final reopen");
    check_all(&db, &model, &[], seed, steps);
    db.check_integrity().expect("integrity");
    let _ = Bytes::new();
}

#[test]
fn random_operations_match_btreemap_model() {
    let steps = std::env::var("STRATA_MODEL_STEPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3000);
    if let Some(seed) = std::env::var("STRATA_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        run(seed, steps);
        return;
    }
    let base: u64 = rand::random();
    for i in 0..3 {
        run(base.wrapping_add(i), steps);
    }
}
