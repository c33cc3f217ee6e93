//! Crash at every I/O point (issue #8): a seeded workload (puts, deletes, batches across
//! keyspaces, merges, flushes, compactions, keyspace create and drop, ingest) runs on a
//! [`MemFs`]; a first run counts its mutating file-system calls, then for every k the workload
//! runs again with the power cut at call k, the file system loses everything not synced
//! (sometimes tearing the unsynced tail, sometimes flipping a bit in it), and the database is
//! reopened and checked against the oracle:
//! - every operation acknowledged as durable (a synced write, a flush, a keyspace create or
//!   drop, an ingest) is there;
//! - the recovered state equals the oracle after some prefix of the operations, at or after the
//!   last durable one and at most up to the one in flight: no holes, batches all-or-nothing.
//!
//! Every third crash point also cuts the power again during the recovery itself, then
//! recovers once more. Odd crash points tear the unsynced tails at a random byte; every fourth
//! also flips a bit in the torn last write.
//!
//! Prints its seeds; `STRATA_SEED=<seed>` replays one, `STRATA_CRASH_POINT_SEEDS=<n>` /
//! `STRATA_CRASH_POINT_OPS=<n>` run more and longer workloads (default 2 seeds of 120
//! operations, about 700 crash points each), `STRATA_CRASH_POINT_FROM=<k>` /
//! `STRATA_CRASH_POINT_TO=<k>` only some crash points, `STRATA_CRASH_POINT_NO_DOUBLE=1` without
//! the second power cut. Background flushes and compactions run on their own threads, so the
//! k-th call is not exactly the same point in every run; a failure names its seed and call.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "a panic is how a test fails"
)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata_engine::fs::{CrashOptions, FileSystem, MemFs};
use strata_engine::{
    CounterAdd, Db, Keyspace, Options, ReadOptions, Result, TableWriter, WriteBatch, WriteOptions,
};

const DB: &str = "/db";
const EXT: &str = "/ext";
const NAMES: [&str; 3] = ["default", "a", "counts"];

/// Keyspace name -> contents; a missing name is a keyspace that does not exist.
type State = BTreeMap<String, BTreeMap<Vec<u8>, Vec<u8>>>;

#[derive(Debug, Clone)]
enum Op {
    /// One atomic batch: (keyspace, key, `Some(value)` put / `None` delete / merge delta).
    Write {
        entries: Vec<(String, Vec<u8>, Entry)>,
        sync: bool,
    },
    Flush(String),
    Compact(String),
    Create(String),
    Drop(String),
    /// Sorted, distinct keys written to a table outside the database, then ingested.
    Ingest {
        keyspace: String,
        file: u32,
        pairs: Vec<(Vec<u8>, Vec<u8>)>,
    },
}

#[derive(Debug, Clone)]
enum Entry {
    Put(Vec<u8>),
    Delete,
    Add(u64),
}

impl Op {
    /// Whether an acknowledgement means the operation survives a power loss.
    fn durable(&self) -> bool {
        match self {
            Op::Write { sync, .. } => *sync,
            Op::Compact(_) => false,
            Op::Flush(_) | Op::Create(_) | Op::Drop(_) | Op::Ingest { .. } => true,
        }
    }
}

fn options(fs: &MemFs) -> Options {
    let tiny = Options::default()
        .write_buffer_size(4096)
        .block_size(128)
        .target_file_size(1024)
        .max_bytes_for_level_base(2048)
        .level_size_multiplier(2)
        .level0_file_num_compaction_trigger(2)
        .file_system(Arc::new(fs.clone()));
    // Keyspace "a" cuts tables at 64 KiB, so its flushed tables are small against that and
    // the merges of small tables run there too.
    tiny.clone()
        .with_keyspace_options("a", tiny.clone().target_file_size(64 << 10))
        .with_keyspace_options("counts", tiny.merge_operator(Some(Arc::new(CounterAdd))))
}

fn generate(seed: u64, count: usize) -> Vec<Op> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut exists: BTreeMap<&str, bool> = NAMES.iter().map(|n| (*n, *n == "default")).collect();
    let mut ops = Vec::with_capacity(count);
    let mut files = 0;
    let key = |rng: &mut StdRng| format!("k{:02}", rng.random_range(0..40)).into_bytes();
    let value = |rng: &mut StdRng, i: usize| {
        let len = rng.random_range(1..120);
        let mut v = format!("v{i}-").into_bytes();
        v.resize(len.max(v.len()), b'x');
        v
    };
    for i in 0..count {
        let live: Vec<&str> = exists
            .iter()
            .filter(|(_, e)| **e)
            .map(|(n, _)| *n)
            .collect();
        let pick = |rng: &mut StdRng| live[rng.random_range(0..live.len())].to_owned();
        let op = match rng.random_range(0..100) {
            0..=59 => {
                let n = if rng.random_bool(0.3) {
                    rng.random_range(2..6)
                } else {
                    1
                };
                let entries = (0..n)
                    .map(|_| {
                        let ks = pick(&mut rng);
                        let entry = if ks == "counts" {
                            if rng.random_bool(0.9) {
                                Entry::Add(rng.random_range(1..100))
                            } else {
                                Entry::Delete
                            }
                        } else if rng.random_bool(0.8) {
                            Entry::Put(value(&mut rng, i))
                        } else {
                            Entry::Delete
                        };
                        (ks, key(&mut rng), entry)
                    })
                    .collect();
                Op::Write {
                    entries,
                    sync: rng.random_bool(0.3),
                }
            }
            60..=69 => Op::Flush(pick(&mut rng)),
            70..=77 => Op::Compact(pick(&mut rng)),
            78..=85 => {
                let name = if rng.random_bool(0.5) { "a" } else { "counts" };
                if exists[name] {
                    exists.insert(name, false);
                    Op::Drop(name.to_owned())
                } else {
                    exists.insert(name, true);
                    Op::Create(name.to_owned())
                }
            }
            _ => {
                let mut keys: Vec<Vec<u8>> =
                    (0..rng.random_range(1..8)).map(|_| key(&mut rng)).collect();
                keys.sort();
                keys.dedup();
                files += 1;
                let keyspace = loop {
                    let ks = pick(&mut rng);
                    if ks != "counts" {
                        break ks;
                    }
                };
                Op::Ingest {
                    keyspace,
                    file: files,
                    pairs: keys.into_iter().map(|k| (k, value(&mut rng, i))).collect(),
                }
            }
        };
        ops.push(op);
    }
    ops
}

fn apply(state: &mut State, op: &Op) {
    match op {
        Op::Write { entries, .. } => {
            for (ks, key, entry) in entries {
                let map = state.get_mut(ks).expect("generated for a live keyspace");
                match entry {
                    Entry::Put(v) => {
                        map.insert(key.clone(), v.clone());
                    }
                    Entry::Delete => {
                        map.remove(key);
                    }
                    Entry::Add(d) => {
                        let old: u64 = map
                            .get(key)
                            .map_or(0, |v| std::str::from_utf8(v).unwrap().parse().unwrap());
                        map.insert(key.clone(), (old + d).to_string().into_bytes());
                    }
                }
            }
        }
        Op::Flush(_) | Op::Compact(_) => {}
        Op::Create(name) => {
            state.insert(name.clone(), BTreeMap::new());
        }
        Op::Drop(name) => {
            state.remove(name);
        }
        Op::Ingest {
            keyspace, pairs, ..
        } => {
            let map = state.get_mut(keyspace).expect("live keyspace");
            for (k, v) in pairs {
                map.insert(k.clone(), v.clone());
            }
        }
    }
}

fn initial_state() -> State {
    State::from([("default".to_owned(), BTreeMap::new())])
}

fn handle(db: &Db, name: &str) -> Result<Keyspace> {
    if name == "default" {
        Ok(db.default_keyspace())
    } else {
        db.keyspace(name)
    }
}

fn run_op(db: &Db, fs: &MemFs, op: &Op) -> Result<()> {
    match op {
        Op::Write { entries, sync } => {
            let mut batch = WriteBatch::new();
            for (ks, key, entry) in entries {
                let ks = handle(db, ks)?;
                match entry {
                    Entry::Put(v) => batch.put_in(&ks, key, v),
                    Entry::Delete => batch.delete_in(&ks, key),
                    Entry::Add(d) => batch.merge_in(&ks, key, d.to_string().as_bytes()),
                }
            }
            let options = if *sync {
                WriteOptions::synced()
            } else {
                WriteOptions::default()
            };
            db.write(batch, &options)
        }
        Op::Flush(ks) => handle(db, ks)?.flush(),
        Op::Compact(ks) => handle(db, ks)?.compact_range(None, None),
        Op::Create(ks) => db.keyspace(ks).map(|_| ()),
        Op::Drop(ks) => db.drop_keyspace(ks),
        Op::Ingest {
            keyspace,
            file,
            pairs,
        } => {
            let path = PathBuf::from(format!("{EXT}/{file}.sst"));
            if fs.exists(&path) {
                // Left by an earlier run of this op that failed before ingesting it.
                let _ = fs.remove_file(&path);
            }
            let mut w = TableWriter::create(&path, &options(fs))?;
            for (k, v) in pairs {
                w.put(k, v)?;
            }
            let file = w.finish()?;
            handle(db, keyspace)?.ingest(&[file.path])
        }
    }
}

fn read_state(db: &Db) -> Result<State> {
    let mut state = State::new();
    for name in db.list_keyspaces() {
        let ks = handle(db, &name)?;
        let mut map = BTreeMap::new();
        for item in ks.iter(&ReadOptions::default()) {
            let (k, v) = item?;
            map.insert(k.to_vec(), v.to_vec());
        }
        state.insert(name, map);
    }
    Ok(state)
}

/// Runs `ops` until one fails; returns how many were acknowledged.
fn run_until_failure(fs: &MemFs, ops: &[Op]) -> usize {
    let db = match Db::open(DB, options(fs)) {
        Ok(db) => db,
        Err(e) => {
            if !fs.powered_off() {
                println!("open failed: {e}");
            }
            return 0;
        }
    };
    let mut acked = 0;
    for op in ops {
        if let Err(e) = run_op(&db, fs, op) {
            if !fs.powered_off() {
                println!("op {acked} ({op:?}) failed: {e}");
            }
            break;
        }
        acked += 1;
    }
    drop(db);
    acked
}

fn differences(expected: &State, got: &State) -> String {
    let mut out = Vec::new();
    for (name, map) in expected {
        let Some(other) = got.get(name) else {
            out.push(format!("keyspace {name} missing"));
            continue;
        };
        for (k, v) in map {
            if other.get(k) != Some(v) {
                out.push(format!(
                    "{name}/{}: expected {:?}, got {:?}",
                    String::from_utf8_lossy(k),
                    String::from_utf8_lossy(v),
                    other
                        .get(k)
                        .map(|v| String::from_utf8_lossy(v).into_owned())
                ));
            }
        }
        for k in other.keys().filter(|k| !map.contains_key(*k)) {
            out.push(format!("{name}/{}: unexpected", String::from_utf8_lossy(k)));
        }
    }
    out.join("; ")
}

fn short(op: &Op) -> String {
    match op {
        Op::Write { entries, sync } => format!(
            "write{}[{}]",
            if *sync { " synced" } else { "" },
            entries
                .iter()
                .map(|(ks, k, e)| format!(
                    "{ks}/{}={}",
                    String::from_utf8_lossy(k),
                    match e {
                        Entry::Put(v) => String::from_utf8_lossy(&v[..v.len().min(4)]).into_owned(),
                        Entry::Delete => "del".to_owned(),
                        Entry::Add(d) => format!("+{d}"),
                    }
                ))
                .collect::<Vec<_>>()
                .join(" ")
        ),
        Op::Ingest {
            keyspace, pairs, ..
        } => format!(
            "ingest {keyspace} [{}]",
            pairs
                .iter()
                .map(|(k, _)| String::from_utf8_lossy(k).into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        ),
        other => format!("{other:?}"),
    }
}

fn describe(state: &State) -> String {
    state
        .iter()
        .map(|(n, m)| format!("{n}: {} keys", m.len()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Checks the recovered database equals the oracle after some prefix in `min..=max`.
fn check_prefix(db: &Db, ops: &[Op], min: usize, max: usize, what: &str) {
    let got =
        read_state(db).unwrap_or_else(|e| panic!("{what}: reading the recovered database: {e}"));
    let mut at_min = initial_state();
    for op in &ops[..min] {
        apply(&mut at_min, op);
    }
    let mut expected = at_min.clone();
    if expected == got {
        return;
    }
    for op in &ops[min..max] {
        apply(&mut expected, op);
        if expected == got {
            return;
        }
    }
    panic!(
        "{what}: the recovered state ({}) matches no prefix of {min}..={max} operations \
         (at {min}: {}; differences: {}); the operations from {min} - 8 to {max}: {:?}",
        describe(&got),
        describe(&at_min),
        differences(&at_min, &got),
        ops[min.saturating_sub(8)..max.min(ops.len())]
            .iter()
            .map(short)
            .collect::<Vec<_>>()
    );
}

fn crash_options(k: u64) -> CrashOptions {
    CrashOptions {
        tear_seed: (k % 2 == 1).then_some(k),
        flip_bit: k % 4 == 3,
    }
}

fn fresh_fs() -> MemFs {
    let fs = MemFs::new();
    fs.create_dir_all(Path::new(EXT)).expect("mkdir");
    fs
}

fn run_seed(seed: u64, count: usize) {
    let ops = generate(seed, count);
    let counting = fresh_fs();
    let start = counting.calls();
    assert_eq!(
        run_until_failure(&counting, &ops),
        ops.len(),
        "seed {seed}: the workload fails without faults"
    );
    let total = counting.calls() - start;
    println!(
        "seed {seed}: {} operations, {total} file-system calls",
        ops.len()
    );
    let from = env_u64("STRATA_CRASH_POINT_FROM").unwrap_or(1);
    let to = env_u64("STRATA_CRASH_POINT_TO").unwrap_or(total + 1);
    let double = std::env::var("STRATA_CRASH_POINT_NO_DOUBLE").is_err();
    for k in from..=to {
        let fs = fresh_fs();
        fs.cut_power_at(fs.calls() + k);
        let acked = run_until_failure(&fs, &ops);
        let min = ops[..acked]
            .iter()
            .rposition(Op::durable)
            .map_or(0, |i| i + 1);
        let max = (acked + 1).min(ops.len());
        fs.crash(crash_options(k));
        let what =
            format!("seed {seed}, power cut at call {k} of {total} ({acked} ops acknowledged)");
        if double && k % 3 == 0 {
            // Cut the power again during recovery, then recover for real.
            let again = k / 3 % 40 + 1;
            fs.cut_power_at(fs.calls() + again);
            drop(Db::open(DB, options(&fs)));
            fs.crash(crash_options(k + 1));
        }
        let db =
            Db::open(DB, options(&fs)).unwrap_or_else(|e| panic!("{what}: reopen failed: {e}"));
        check_prefix(&db, &ops, min, max, &what);
        drop(db);
    }
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

#[test]
fn every_crash_point_recovers_a_prefix_with_every_durable_operation() {
    let count = env_u64("STRATA_CRASH_POINT_OPS").unwrap_or(120) as usize;
    let seeds: Vec<u64> = match env_u64("STRATA_SEED") {
        Some(s) => vec![s],
        None => {
            let n = env_u64("STRATA_CRASH_POINT_SEEDS").unwrap_or(2);
            let base: u64 = rand::random();
            (0..n).map(|i| base.wrapping_add(i)).collect()
        }
    };
    for seed in seeds {
        println!("crash points: STRATA_SEED={seed}");
        run_seed(seed, count);
    }
}
