//! Compaction regressions: deletes stay deleted, snapshots keep what they saw, tombstones
//! compact away, and writes keep going while compactions run.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "a panic is how a test fails"
)]

use strata_engine::{Db, Options, ReadOptions};

fn small() -> Options {
    Options::default()
        .write_buffer_size(16 << 10)
        .block_size(256)
        .target_file_size(8 << 10)
        .max_bytes_for_level_base(32 << 10)
        .level_size_multiplier(4)
        .level0_file_num_compaction_trigger(2)
}

fn table_count(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir)
        .expect("read_dir")
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().ends_with(".sst"))
        .count()
}

#[test]
fn deletes_stay_deleted_after_compaction_and_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), small()).expect("open");
    for i in 0..3000u32 {
        db.put(format!("k{i:05}").as_bytes(), &[7; 40])
            .expect("put");
    }
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact");
    for i in (0..3000u32).filter(|i| i % 3 == 0) {
        db.delete(format!("k{i:05}").as_bytes()).expect("delete");
    }
    db.compact_range(None, None).expect("compact");
    db.close().expect("close");
    let db = Db::open(dir.path(), small()).expect("reopen");
    for i in 0..3000u32 {
        let got = db.get(format!("k{i:05}").as_bytes()).expect("get");
        assert_eq!(got.is_some(), i % 3 != 0, "key {i}");
    }
    assert_eq!(db.iter(&ReadOptions::default()).count(), 2000);
    db.check_integrity().expect("integrity");
}

#[test]
fn snapshot_reads_the_value_it_saw_after_compaction() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), small()).expect("open");
    for i in 0..2000u32 {
        db.put(format!("k{i:05}").as_bytes(), b"old").expect("put");
    }
    let snap = db.snapshot();
    for i in 0..2000u32 {
        if i % 2 == 0 {
            db.put(format!("k{i:05}").as_bytes(), b"new").expect("put");
        } else {
            db.delete(format!("k{i:05}").as_bytes()).expect("delete");
        }
    }
    db.compact_range(None, None).expect("compact");
    let ro = ReadOptions::at(&snap);
    for i in 0..2000u32 {
        let k = format!("k{i:05}");
        assert_eq!(
            db.get_opt(&ro, k.as_bytes()).expect("get").as_deref(),
            Some(&b"old"[..])
        );
        let now = db.get(k.as_bytes()).expect("get");
        assert_eq!(now.as_deref(), (i % 2 == 0).then_some(&b"new"[..]));
    }
    assert_eq!(db.iter(&ro).count(), 2000);
    drop(snap);
    db.compact_range(None, None).expect("compact");
    assert_eq!(db.iter(&ReadOptions::default()).count(), 1000);
}

/// Entries and tombstones stored in the database's tables (the current version's).
fn stored_entries(db: &Db) -> (u64, u64) {
    db.stats().table_entries()
}

#[test]
fn manual_compaction_rewrites_tombstones_a_snapshot_kept_in_the_last_level() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), small()).expect("open");
    for i in 0..2000u32 {
        db.put(format!("k{i:05}").as_bytes(), &[1; 30])
            .expect("put");
    }
    db.compact_range(None, None).expect("compact");
    // A snapshot between the values and their tombstones: the compaction must keep both, and
    // they meet in the last level.
    let snap = db.snapshot();
    for i in (0..2000u32).filter(|i| i % 4 != 0) {
        db.delete(format!("k{i:05}").as_bytes()).expect("delete");
    }
    db.compact_range(None, None).expect("compact");
    let (entries, deletions) = stored_entries(&db);
    assert_eq!((entries, deletions), (3500, 1500), "kept for the snapshot");
    assert_eq!(db.iter(&ReadOptions::at(&snap)).count(), 2000);
    // Compacting with the snapshot still live changes nothing and ends.
    db.compact_range(Some(b"k00100"), Some(b"k00900"))
        .expect("compact");
    assert_eq!(stored_entries(&db), (3500, 1500));
    drop(snap);
    // The range asked for is rewritten (at table granularity: every table it overlaps; the
    // background may meanwhile rewrite the rest, now that no snapshot needs it).
    db.compact_range(Some(b"k00000"), Some(b"k00999"))
        .expect("compact");
    let (entries, deletions) = stored_entries(&db);
    assert!(
        deletions < 1500,
        "{entries} entries, {deletions} tombstones"
    );
    db.compact_range(None, None).expect("compact");
    assert_eq!(stored_entries(&db), (500, 0));
    assert_eq!(db.iter(&ReadOptions::default()).count(), 500);
    db.close().expect("close");
    let db = Db::open(dir.path(), small()).expect("reopen");
    for i in 0..2000u32 {
        let got = db.get(format!("k{i:05}").as_bytes()).expect("get");
        assert_eq!(got.is_some(), i % 4 == 0, "key {i}");
    }
    db.check_integrity().expect("integrity");
}

#[test]
fn delete_files_in_range_removes_whole_tables_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), small()).expect("open");
    three_compacted_ranges(&db, 2);
    let before = db.iter(&ReadOptions::default());
    let (tables, entries) = db.delete_files_in_range(b"b", b"c").expect("delete files");
    assert!(
        tables > 0 && entries > 0 && entries < 1500,
        "{tables} tables, {entries} entries"
    );
    // Only tables wholly inside the range went: every key outside it is there.
    for prefix in ["a", "c"] {
        for i in 0..1500u32 {
            let k = format!("{prefix}{i:05}");
            assert!(db.get(k.as_bytes()).expect("get").is_some(), "{k}");
        }
    }
    let left: Vec<_> = db
        .prefix(&ReadOptions::default(), b"b")
        .map(|kv| kv.expect("scan").0)
        .collect();
    assert_eq!(left.len() as u64, 1500 - entries);
    // An iterator created before the call still reads the removed tables.
    assert_eq!(before.count(), 4500);
    // The rest of the range goes by deletes; a compaction then frees it.
    for k in &left {
        db.delete(k).expect("delete");
    }
    db.compact_range(Some(b"b"), Some(b"c")).expect("compact");
    assert_eq!(stored_entries(&db).1, 0);
    assert_eq!(db.delete_files_in_range(b"b", b"c").expect("again"), (0, 0));
    db.close().expect("close");
    let db = Db::open(dir.path(), small()).expect("reopen");
    assert_eq!(db.iter(&ReadOptions::default()).count(), 3000);
    assert_eq!(db.prefix(&ReadOptions::default(), b"b").count(), 0);
    db.check_integrity().expect("integrity");
    db.close().expect("close");
    let ro = Db::open(dir.path(), small().read_only(true)).expect("read-only open");
    assert!(matches!(
        ro.delete_files_in_range(b"a", b"z"),
        Err(strata_engine::Error::ReadOnly)
    ));
}

/// Random overwrites in three key ranges, flushes and partial compactions between rounds, so
/// newer versions of keys sit above older ones across levels; then the middle range's tables
/// are removed. A read of a key of the range must give its newest value or nothing, never an
/// older value, and keys outside the range must not change.
#[test]
fn delete_files_in_range_never_brings_back_an_older_value() {
    use rand::{Rng, SeedableRng};
    let mut removed = 0;
    for seed in 0..4u64 {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), small()).expect("open");
        let mut model = std::collections::BTreeMap::new();
        for round in 0..6u32 {
            for _ in 0..4000 {
                let prefix = ["a", "b", "c"][rng.random_range(0..3)];
                let key = format!("{prefix}{:04}", rng.random_range(0..3000u32));
                let value = format!("{round}-{}-{:030}", rng.random::<u32>(), 0).into_bytes();
                db.put(key.as_bytes(), &value).expect("put");
                model.insert(key.into_bytes(), value);
            }
            db.flush().expect("flush");
            if rng.random_bool(0.5) {
                let lo = ["a", "b", "c"][rng.random_range(0..3)];
                db.compact_range(Some(lo.as_bytes()), None)
                    .expect("compact");
            }
        }
        let (tables, _) = db.delete_files_in_range(b"b", b"c").expect("delete files");
        removed += tables;
        for (key, value) in &model {
            let got = db.get(key).expect("get");
            if key.starts_with(b"b") {
                assert!(
                    got.is_none() || got.as_deref() == Some(&value[..]),
                    "seed {seed}: {} came back as {:?} (newest {:?}), {tables} tables removed",
                    String::from_utf8_lossy(key),
                    got.map(|v| String::from_utf8_lossy(&v).into_owned()),
                    String::from_utf8_lossy(value)
                );
            } else {
                assert_eq!(got.as_deref(), Some(&value[..]), "seed {seed}");
            }
        }
        db.check_integrity().expect("integrity");
    }
    assert!(
        removed > 0,
        "no seed removed a table: the test tests nothing"
    );
}

/// Polls until the stored tombstones are gone (the background's tombstone compactions), or
/// fails after 30 s.
/// Writes keys `a00000..a01499`, `b...` and `c...` (30-byte values of `fill`) and compacts
/// them, so whole last-level tables hold only `b` keys.
fn three_compacted_ranges(db: &Db, fill: u8) {
    for prefix in ["a", "b", "c"] {
        for i in 0..1500u32 {
            db.put(format!("{prefix}{i:05}").as_bytes(), &[fill; 30])
                .expect("put");
        }
    }
    db.compact_range(None, None).expect("compact");
}

fn wait_for_no_tombstones(db: &Db) -> (u64, u64) {
    let start = std::time::Instant::now();
    loop {
        let stored = stored_entries(db);
        if stored.1 == 0 {
            return stored;
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(30),
            "tombstones still stored: {stored:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn background_drops_tombstones_a_released_snapshot_kept_in_the_last_level() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), small()).expect("open");
    for i in 0..2000u32 {
        db.put(format!("k{i:05}").as_bytes(), &[1; 30])
            .expect("put");
    }
    db.compact_range(None, None).expect("compact");
    let snap = db.snapshot();
    for i in 0..2000u32 {
        db.delete(format!("k{i:05}").as_bytes()).expect("delete");
    }
    db.flush().expect("flush");
    // A compaction (here a manual one) moves the tombstones down beside the values while the
    // snapshot is live: both must stay, and nothing rewrites them meanwhile.
    db.compact_range(None, None).expect("compact");
    assert_eq!(stored_entries(&db), (4000, 2000));
    assert_eq!(db.iter(&ReadOptions::at(&snap)).count(), 2000);
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(stored_entries(&db), (4000, 2000));
    drop(snap);
    // Once it is released, the background rewrites those tables without being asked.
    assert_eq!(wait_for_no_tombstones(&db), (0, 0));
    assert_eq!(db.iter(&ReadOptions::default()).count(), 0);
}

#[test]
fn background_carries_tombstones_below_every_trigger_down_and_drops_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), small().level0_file_num_compaction_trigger(8)).expect("open");
    for i in 0..2000u32 {
        db.put(format!("k{i:05}").as_bytes(), &[1; 30])
            .expect("put");
    }
    db.compact_range(None, None).expect("compact");
    // Deletes of every key, flushed into level 0 below its trigger: no level is over its
    // target, as after a crash that cut a large delete's compaction short.
    for i in 0..2000u32 {
        db.delete(format!("k{i:05}").as_bytes()).expect("delete");
    }
    db.flush().expect("flush");
    assert_eq!(wait_for_no_tombstones(&db), (0, 0));
    db.close().expect("close");
    assert_eq!(table_count(dir.path()), 0);
}

#[test]
fn tables_a_reader_kept_are_deleted_soon_after_it_finishes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), small()).expect("open");
    three_compacted_ranges(&db, 3);
    let tables = table_count(dir.path());
    let reader = db.iter(&ReadOptions::default());
    let (removed, _) = db.delete_files_in_range(b"b", b"c").expect("delete files");
    assert!(removed > 0);
    // The reader's version still names the removed tables: they stay on disk.
    assert_eq!(table_count(dir.path()), tables);
    assert_eq!(reader.count(), 4500);
    // With nothing else happening, an idle background thread deletes them.
    let start = std::time::Instant::now();
    while table_count(dir.path()) != tables - removed {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(10),
            "{} tables on disk, {} expected",
            table_count(dir.path()),
            tables - removed
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn a_run_of_only_tombstones_compacts_to_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), small()).expect("open");
    for i in 0..2000u32 {
        db.put(format!("k{i:05}").as_bytes(), &[1; 30])
            .expect("put");
    }
    db.flush().expect("flush");
    for i in 0..2000u32 {
        db.delete(format!("k{i:05}").as_bytes()).expect("delete");
    }
    db.compact_range(None, None).expect("compact");
    assert_eq!(db.iter(&ReadOptions::default()).count(), 0);
    let stats = db.stats();
    assert_eq!(stats.table_bytes(), 0, "{stats}");
    db.close().expect("close");
    assert_eq!(table_count(dir.path()), 0);
}

#[test]
fn background_compaction_keeps_levels_in_shape_under_writes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), small()).expect("open");
    for i in 0..20_000u64 {
        let k = (i.wrapping_mul(0x9e37_79b9_7f4a_7c15)).to_le_bytes();
        db.put(&k, &i.to_le_bytes()).expect("put");
    }
    db.flush().expect("flush");
    let stats = db.stats();
    assert!(stats.compactions > 0, "no compaction ran: {stats}");
    let l0 = stats.levels.first().map_or(0, |l| l.files);
    assert!(l0 < 36, "level 0 grew to {l0} tables: {stats}");
    for i in (0..20_000u64).step_by(97) {
        let k = (i.wrapping_mul(0x9e37_79b9_7f4a_7c15)).to_le_bytes();
        assert_eq!(
            db.get(&k).expect("get").as_deref(),
            Some(&i.to_le_bytes()[..])
        );
    }
    db.check_integrity().expect("integrity");
}

#[test]
fn writers_at_the_stop_trigger_make_progress_during_manual_compactions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = small()
        .level0_file_num_compaction_trigger(2)
        .level0_slowdown_writes_trigger(2)
        .level0_stop_writes_trigger(3)
        .delayed_write_rate(64 << 20);
    let db = Db::open(dir.path(), options).expect("open");
    let writer = {
        let db = db.clone();
        std::thread::spawn(move || {
            for i in 0..20_000u32 {
                db.put(format!("w{i:06}").as_bytes(), &[3; 40])
                    .expect("put");
            }
        })
    };
    for _ in 0..5 {
        db.compact_range(None, None).expect("compact");
    }
    // A hang here is the failure this test guards against.
    writer.join().expect("writer");
    assert_eq!(db.prefix(&ReadOptions::default(), b"w").count(), 20_000);
    let stats = db.stats();
    assert!(
        stats.delay_micros > 0 || stats.stall_micros > 0 || stats.compactions > 0,
        "{stats}"
    );
}
