//! Keyspaces: a model test with several keyspaces (batches spanning them, snapshots across
//! them, merges, drops and re-creation, per-keyspace flushes, reopen) against one `BTreeMap`
//! per keyspace, plus scenario tests for the WAL and manifest rules. Prints its seed; rerun
//! one with `STRATA_SEED=<seed>`; more steps with `STRATA_MODEL_STEPS=<n>`.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "a panic is how a test fails"
)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata_engine::{
    CounterAdd, Db, Error, Keyspace, Options, ReadOptions, Snapshot, WriteBatch, WriteOptions,
};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;
/// Keyspace name -> contents.
type Models = BTreeMap<String, Model>;

/// Names the model test uses; "often" flushes every few KiB, "rarely" almost never, "counts"
/// holds decimal counters.
const NAMES: [&str; 4] = ["default", "often", "rarely", "counts"];

fn options() -> Options {
    let tiny = Options::default()
        .write_buffer_size(4096)
        .block_size(64)
        .target_file_size(1024)
        .max_bytes_for_level_base(2048)
        .level_size_multiplier(2)
        .level0_file_num_compaction_trigger(2);
    let rarely = Options::default().write_buffer_size(8 << 20);
    let counts = tiny.clone().merge_operator(Some(Arc::new(CounterAdd)));
    tiny.clone()
        .level0_slowdown_writes_trigger(8)
        .level0_stop_writes_trigger(12)
        // Small, so the rarely flushed keyspace gets frozen for holding the oldest WAL.
        .max_total_wal_size(64 << 10)
        .with_keyspace_options("often", tiny)
        .with_keyspace_options("rarely", rarely)
        .with_keyspace_options("counts", counts)
}

fn random_key(rng: &mut StdRng) -> Vec<u8> {
    let len = rng.random_range(0..4);
    (0..len)
        .map(|_| b"ab\xff"[rng.random_range(0..3)])
        .collect()
}

fn random_value(rng: &mut StdRng) -> Vec<u8> {
    let len = if rng.random_bool(0.05) {
        rng.random_range(200..2000)
    } else {
        rng.random_range(0..12)
    };
    (0..len).map(|_| rng.random()).collect()
}

struct Handles {
    db: Db,
    ks: BTreeMap<String, Keyspace>,
}

impl Handles {
    fn open(dir: &Path, models: &Models) -> Handles {
        let db = Db::open(dir, options()).expect("open");
        let ks = models
            .keys()
            .map(|name| (name.clone(), db.keyspace(name).expect("keyspace")))
            .collect();
        Handles { db, ks }
    }
}

fn scan(ks: &Keyspace, ro: &ReadOptions, reverse: bool) -> Vec<(Vec<u8>, Vec<u8>)> {
    let it = ks.iter(ro);
    let mut out: Vec<_> = if reverse {
        it.rev()
            .map(|kv| kv.map(|(k, v)| (k.to_vec(), v.to_vec())).expect("item"))
            .collect()
    } else {
        it.map(|kv| kv.map(|(k, v)| (k.to_vec(), v.to_vec())).expect("item"))
            .collect()
    };
    if reverse {
        out.reverse();
    }
    out
}

fn check(h: &Handles, models: &Models, snaps: &[(Snapshot, Models)], ctx: &str) {
    let mut listed = h.db.list_keyspaces();
    assert_eq!(listed.first().map(String::as_str), Some("default"), "{ctx}");
    listed.sort();
    assert_eq!(
        listed,
        models.keys().cloned().collect::<Vec<_>>(),
        "{ctx}: keyspaces"
    );
    for (name, model) in models {
        let ks = &h.ks[name];
        let expected: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        assert_eq!(
            scan(ks, &ReadOptions::default(), false),
            expected,
            "{ctx}: {name} scan"
        );
        assert_eq!(
            scan(ks, &ReadOptions::default(), true),
            expected,
            "{ctx}: {name} reverse"
        );
        for (k, v) in model {
            assert_eq!(
                ks.get(k).expect("get").as_deref(),
                Some(&v[..]),
                "{ctx}: {name} {k:?}"
            );
        }
    }
    for (snap, at) in snaps {
        let ro = ReadOptions::at(snap);
        for (name, model) in at {
            let Some(ks) = h.ks.get(name) else { continue };
            let expected: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            assert_eq!(
                scan(ks, &ro, false),
                expected,
                "{ctx}: {name} at snapshot {}",
                snap.seqno()
            );
        }
    }
}

fn counter(model: &Model, key: &[u8]) -> i64 {
    model
        .get(key)
        .map_or(0, |v| std::str::from_utf8(v).unwrap().parse().unwrap())
}

fn run(seed: u64, steps: usize) {
    println!("keyspace model seed {seed} ({steps} steps); rerun with STRATA_SEED={seed}");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rng = StdRng::seed_from_u64(seed);
    let mut models: Models = NAMES
        .iter()
        .map(|n| (n.to_string(), Model::new()))
        .collect();
    let mut h = Handles::open(dir.path(), &models);
    let mut snaps: Vec<(Snapshot, Models)> = Vec::new();
    for step in 0..steps {
        let ctx = format!("seed {seed} step {step}");
        let names: Vec<String> = models.keys().cloned().collect();
        let name = names[rng.random_range(0..names.len())].clone();
        match rng.random_range(0..100) {
            0..=39 => {
                let (k, v) = (random_key(&mut rng), random_value(&mut rng));
                if name == "counts" {
                    let n = rng.random_range(-5..20_i64);
                    h.ks[&name]
                        .merge(&k, n.to_string().as_bytes())
                        .expect("merge");
                    let m = models.get_mut(&name).unwrap();
                    let total = counter(m, &k) + n;
                    m.insert(k, total.to_string().into_bytes());
                } else {
                    h.ks[&name].put(&k, &v).expect("put");
                    models.get_mut(&name).unwrap().insert(k, v);
                }
            }
            40..=49 => {
                let k = random_key(&mut rng);
                h.ks[&name].delete(&k).expect("delete");
                models.get_mut(&name).unwrap().remove(&k);
            }
            50..=69 => {
                // One batch across keyspaces.
                let mut batch = WriteBatch::new();
                for _ in 0..rng.random_range(1..10) {
                    let name = &names[rng.random_range(0..names.len())];
                    let ks = &h.ks[name];
                    let k = random_key(&mut rng);
                    let m = models.get_mut(name).unwrap();
                    if rng.random_bool(0.3) {
                        batch.delete_in(ks, &k);
                        m.remove(&k);
                    } else if name == "counts" {
                        batch.merge_in(ks, &k, b"1");
                        let total = counter(m, &k) + 1;
                        m.insert(k, total.to_string().into_bytes());
                    } else {
                        let v = random_value(&mut rng);
                        batch.put_in(ks, &k, &v);
                        m.insert(k, v);
                    }
                }
                let sync = rng.random_bool(0.1);
                h.db.write(
                    batch,
                    &WriteOptions {
                        sync,
                        ..Default::default()
                    },
                )
                .expect("write");
            }
            70..=74 => {
                if snaps.len() > 2 {
                    snaps.remove(0);
                }
                snaps.push((h.db.snapshot(), models.clone()));
            }
            75..=79 => {
                if rng.random_bool(0.5) {
                    h.ks[&name].flush().expect("flush keyspace");
                } else {
                    h.db.flush().expect("flush all");
                }
            }
            80..=81 => h.ks[&name].compact_range(None, None).expect("compact"),
            82..=83 => {
                // Drop and re-create "often": it comes back empty.
                if let Some(ks) = h.ks.remove("often") {
                    h.db.drop_keyspace("often").expect("drop");
                    assert!(ks.get(b"a").is_err(), "{ctx}: dropped handle must fail");
                    models.remove("often");
                    for (_, at) in &mut snaps {
                        at.remove("often");
                    }
                } else {
                    h.ks.insert("often".into(), h.db.keyspace("often").expect("create"));
                    models.insert("often".into(), Model::new());
                }
            }
            84..=86 => {
                let k = random_key(&mut rng);
                let got = h.ks[&name].get(&k).expect("get");
                assert_eq!(
                    got.as_deref(),
                    models[&name].get(&k).map(Vec::as_slice),
                    "{ctx}"
                );
            }
            87..=97 => {
                let (a, b) = (random_key(&mut rng), random_key(&mut rng));
                let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                let expected: Vec<_> = models[&name]
                    .range(lo.clone()..=hi.clone())
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                let mut got: Vec<_> = h.ks[&name]
                    .range(&ReadOptions::default(), &lo[..]..=&hi[..])
                    .rev()
                    .map(|kv| kv.map(|(k, v)| (k.to_vec(), v.to_vec())).expect("item"))
                    .collect();
                got.reverse();
                assert_eq!(got, expected, "{ctx}: {name} reverse range {lo:?}..={hi:?}");
            }
            _ => {
                snaps.clear();
                let Handles { db, ks } = h;
                drop(ks);
                db.close().expect("close");
                h = Handles::open(dir.path(), &models);
            }
        }
        if step % 400 == 399 {
            check(&h, &models, &snaps, &ctx);
        }
    }
    check(&h, &models, &snaps, &format!("seed {seed} end"));
    drop(snaps);
    let Handles { db, ks } = h;
    drop(ks);
    db.close().expect("close");
    let h = Handles::open(dir.path(), &models);
    check(&h, &models, &[], &format!("seed {seed} after reopen"));
    h.db.check_integrity().expect("integrity");
}

#[test]
fn random_operations_over_keyspaces_match_the_model() {
    let steps = std::env::var("STRATA_MODEL_STEPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000);
    if let Some(seed) = std::env::var("STRATA_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        run(seed, steps);
        return;
    }
    let base: u64 = rand::random();
    for i in 0..2 {
        run(base.wrapping_add(i), steps);
    }
}

fn wal_files(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".wal"))
        .collect();
    out.sort();
    out
}

#[test]
fn a_rarely_flushed_keyspace_keeps_its_wal_until_flushed_and_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    // No WAL size limit: only flushes free WALs.
    let opts = || {
        Options::default()
            .write_buffer_size(16 << 10)
            .max_total_wal_size(u64::MAX)
            .with_keyspace_options("rare", Options::default().write_buffer_size(64 << 20))
    };
    let db = Db::open(dir.path(), opts()).unwrap();
    let rare = db.keyspace("rare").unwrap();
    rare.put(b"early", b"kept in the first WAL").unwrap();
    // Many flushes of the default keyspace, each starting a new WAL.
    for i in 0..2000u32 {
        db.put(&i.to_le_bytes(), &[7; 64]).unwrap();
    }
    assert!(db.stats().levels[0].files + db.stats().levels[1].files > 0);
    let wals = wal_files(dir.path());
    assert!(
        wals.len() > 2,
        "the WAL holding rare's write must be kept: {wals:?}"
    );
    rare.flush().unwrap();
    db.put(b"x", b"y").unwrap();
    db.flush().unwrap();
    assert!(
        wal_files(dir.path()).len() <= 2,
        "{:?}",
        wal_files(dir.path())
    );
    rare.put(b"late", b"in a later WAL").unwrap();
    drop(rare);
    db.close().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    let rare = db.keyspace("rare").unwrap();
    assert_eq!(
        rare.get(b"early").unwrap().as_deref(),
        Some(&b"kept in the first WAL"[..])
    );
    assert_eq!(
        rare.get(b"late").unwrap().as_deref(),
        Some(&b"in a later WAL"[..])
    );
    assert_eq!(
        rare.get(&5u32.to_le_bytes()).unwrap(),
        None,
        "keyspaces are separate"
    );
    assert_eq!(
        db.get(&5u32.to_le_bytes()).unwrap().as_deref(),
        Some(&[7; 64][..])
    );
    assert_eq!(rare.iter(&ReadOptions::default()).count(), 2);
}

#[test]
fn max_total_wal_size_freezes_the_keyspace_holding_the_oldest_wal() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(
        dir.path(),
        Options::default()
            .write_buffer_size(16 << 10)
            .max_total_wal_size(128 << 10)
            .with_keyspace_options("rare", Options::default().write_buffer_size(64 << 20)),
    )
    .unwrap();
    let rare = db.keyspace("rare").unwrap();
    rare.put(b"early", b"v").unwrap();
    for i in 0..20_000u32 {
        db.put(&i.to_le_bytes(), &[1; 32]).unwrap();
    }
    db.flush().unwrap();
    db.put(b"one more", b"write").unwrap();
    let wal_bytes: u64 = wal_files(dir.path())
        .iter()
        .map(|n| std::fs::metadata(dir.path().join(n)).unwrap().len())
        .sum();
    assert!(wal_bytes < 256 << 10, "WALs total {wal_bytes} bytes");
    assert!(
        rare.stats().levels[0].files >= 1,
        "rare was flushed for the oldest WAL"
    );
    assert_eq!(rare.get(b"early").unwrap().as_deref(), Some(&b"v"[..]));
}

#[test]
fn dropped_keyspace_is_gone_after_reopen_and_its_name_can_be_reused() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let old = db.keyspace("run42").unwrap();
    for i in 0..1000u32 {
        old.put(&i.to_le_bytes(), b"old").unwrap();
    }
    old.flush().unwrap();
    old.put(b"in the memtable", b"old").unwrap();
    let tables_before = std::fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "sst")
        })
        .count();
    assert!(tables_before >= 1);
    db.drop_keyspace("run42").unwrap();
    assert!(matches!(old.get(b"x"), Err(Error::InvalidArgument(_))));
    let mut batch = WriteBatch::new();
    batch.put_in(&old, b"k", b"v");
    assert!(matches!(
        db.write(batch, &WriteOptions::default()),
        Err(Error::InvalidArgument(_))
    ));
    let tables_after = std::fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "sst")
        })
        .count();
    assert_eq!(tables_after, 0, "the dropped keyspace's tables are deleted");
    assert!(db.drop_keyspace("run42").is_err());
    assert!(db.drop_keyspace("default").is_err());
    assert!(db.keyspace("").is_err());
    let new = db.keyspace("run42").unwrap();
    assert_ne!(new.id(), old.id(), "ids are never reused");
    assert_eq!(new.get(b"in the memtable").unwrap(), None);
    new.put(b"fresh", b"new").unwrap();
    drop((old, new));
    db.close().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.list_keyspaces(), vec!["default", "run42"]);
    let new = db.keyspace("run42").unwrap();
    let all: Vec<_> = new
        .iter(&ReadOptions::default())
        .map(|kv| kv.unwrap())
        .collect();
    assert_eq!(all.len(), 1, "only the new keyspace's write: {all:?}");
    db.check_integrity().unwrap();
}

#[test]
fn a_batch_across_keyspaces_is_atomic_and_visible_at_one_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let (a, b) = (db.keyspace("a").unwrap(), db.keyspace("b").unwrap());
    let before = db.snapshot();
    let mut batch = WriteBatch::new();
    batch.put_in(&a, b"k", b"in a");
    batch.put_in(&b, b"k", b"in b");
    batch.put(b"k", b"in default");
    db.write(batch, &WriteOptions::synced()).unwrap();
    let at = ReadOptions::at(&before);
    assert_eq!(a.get_opt(&at, b"k").unwrap(), None);
    assert_eq!(b.get_opt(&at, b"k").unwrap(), None);
    assert_eq!(a.get(b"k").unwrap().as_deref(), Some(&b"in a"[..]));
    assert_eq!(b.get(b"k").unwrap().as_deref(), Some(&b"in b"[..]));
    assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"in default"[..]));
    // A bad entry anywhere in the batch rejects all of it.
    let mut batch = WriteBatch::new();
    batch.put_in(&a, b"k2", b"v");
    batch.put_in(&b, &vec![0; 70_000], b"key too long");
    assert!(db.write(batch, &WriteOptions::default()).is_err());
    assert_eq!(a.get(b"k2").unwrap(), None);
}

#[test]
fn keyspaces_survive_manifest_rollover_without_reusing_ids() {
    let dir = tempfile::tempdir().unwrap();
    let mut ids = Vec::new();
    for round in 0..3u32 {
        let db = Db::open(dir.path(), Options::default()).unwrap();
        let ks = db.keyspace(&format!("round{round}")).unwrap();
        ks.put(b"round", &round.to_le_bytes()).unwrap();
        ids.push(ks.id());
        if round > 0 {
            db.drop_keyspace(&format!("round{}", round - 1)).unwrap();
        }
        drop(ks);
        db.close().unwrap();
    }
    // Every open writes a new manifest snapshot: ids stay unique across them.
    assert_eq!(ids, vec![1, 2, 3]);
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.list_keyspaces(), vec!["default", "round2"]);
    assert_eq!(db.keyspace("again").unwrap().id(), 4);
}

#[test]
fn a_batch_with_another_databases_keyspace_is_refused() {
    let (d1, d2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let db1 = Db::open(d1.path(), Options::default()).unwrap();
    let db2 = Db::open(d2.path(), Options::default()).unwrap();
    // Both get id 1: only the handle's database tells them apart.
    let (a, b) = (db1.keyspace("a").unwrap(), db2.keyspace("b").unwrap());
    assert_eq!(a.id(), b.id());
    let mut batch = WriteBatch::new();
    batch.put_in(&a, b"k", b"v");
    assert!(matches!(
        db2.write(batch.clone(), &WriteOptions::default()),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(b.get(b"k").unwrap(), None);
    db1.write(batch, &WriteOptions::default()).unwrap();
    assert_eq!(a.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
    let mut mixed = WriteBatch::new();
    mixed.put_in(&a, b"x", b"1");
    mixed.put_in(&b, b"x", b"2");
    assert!(db1.write(mixed, &WriteOptions::default()).is_err());
}

#[test]
fn a_crash_after_dropping_a_keyspace_with_unflushed_writes_reopens_with_every_write() {
    // The dropped keyspace held the only unflushed writes of the oldest WAL, which the drop
    // lets go: the WAL records replayed afterwards must not look like they follow a hole.
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let db = Db::open(&path, Options::default()).expect("open");
    let def = db.default_keyspace();
    def.put(b"k0", b"v").expect("put");
    let a = db.keyspace("a").expect("keyspace");
    for i in 0..10u32 {
        a.put(&i.to_le_bytes(), b"x").expect("put");
    }
    def.flush().expect("flush");
    def.put(b"k1", b"v").expect("put");
    db.drop_keyspace("a").expect("drop");
    // A crash now: each recovery mode opens a copy of the files as they are (the handle's
    // LOCK is not copied).
    for mode in [
        strata_engine::WalRecoveryMode::TolerateCorruptedTail,
        strata_engine::WalRecoveryMode::PointInTime,
    ] {
        let run = dir.path().join(format!("{mode:?}"));
        std::fs::create_dir_all(&run).expect("mkdir");
        for e in std::fs::read_dir(&path).expect("read_dir") {
            let e = e.expect("entry");
            if e.file_name() != "LOCK" {
                std::fs::copy(e.path(), run.join(e.file_name())).expect("copy");
            }
        }
        let reopened = Db::open(&run, Options::default().wal_recovery_mode(mode)).expect("reopen");
        assert_eq!(
            reopened.get(b"k0").expect("get").as_deref(),
            Some(&b"v"[..])
        );
        assert_eq!(
            reopened.get(b"k1").expect("get").as_deref(),
            Some(&b"v"[..]),
            "{mode:?}"
        );
    }
    // And after a clean close.
    drop((a, def));
    db.close().expect("close");
    let reopened = Db::open(&path, Options::default()).expect("reopen");
    assert_eq!(
        reopened.get(b"k1").expect("get").as_deref(),
        Some(&b"v"[..])
    );
}

#[test]
fn a_write_through_a_dropped_keyspaces_handle_names_the_keyspace() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let old = db.keyspace("events").unwrap();
    old.put(b"k", b"v").unwrap();
    db.drop_keyspace("events").unwrap();
    let err = old.put(b"k", b"v").unwrap_err();
    assert!(
        matches!(&err, Error::InvalidArgument(m) if m.contains("\"events\"") && m.contains("dropped")),
        "{err}"
    );
    let mut batch = WriteBatch::new();
    batch.put(b"default key", b"v");
    batch.put_in(&old, b"k", b"v");
    let err = db.write(batch, &WriteOptions::default()).unwrap_err();
    assert!(
        matches!(&err, Error::InvalidArgument(m) if m.contains("\"events\"") && !m.contains(" id ")),
        "{err}"
    );
    assert_eq!(
        db.get(b"default key").unwrap(),
        None,
        "the batch is all or nothing"
    );
}

#[test]
fn a_closed_database_lists_keyspaces_and_gives_snapshots_that_no_read_can_use() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    db.keyspace("a").unwrap();
    db.clone().close().unwrap();
    // Documented: these return no Result.
    assert_eq!(
        db.list_keyspaces(),
        vec!["default".to_owned(), "a".to_owned()]
    );
    let snapshot = db.snapshot();
    assert!(matches!(
        db.get_opt(&ReadOptions::at(&snapshot), b"k"),
        Err(Error::Closed)
    ));
    assert!(matches!(db.keyspace("a"), Err(Error::Closed)));
}
