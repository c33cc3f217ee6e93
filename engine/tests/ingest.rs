//! Bulk ingest: tables built by `TableWriter` and linked in by `Db::ingest` land in the right
//! level, shadow older values, stay invisible to older snapshots, and survive reopen and
//! compaction.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "a panic is how a test fails"
)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use strata_engine::{CounterAdd, Db, Error, Options, ReadOptions, TableWriter};

fn options() -> Options {
    Options::default()
        .write_buffer_size(64 << 10)
        .block_size(512)
        .target_file_size(16 << 10)
}

/// Writes a table at `dir/name` holding `key{i:05} -> value` for `i` in `keys`.
fn build(dir: &Path, name: &str, keys: impl Iterator<Item = u32>, value: &str) -> PathBuf {
    let path = dir.join(name);
    let mut w = TableWriter::create(&path, &options()).expect("create");
    for i in keys {
        w.put(format!("key{i:05}").as_bytes(), value.as_bytes())
            .expect("put");
    }
    w.finish().expect("finish").path
}

fn get(db: &Db, i: u32) -> Option<String> {
    db.get(format!("key{i:05}").as_bytes())
        .expect("get")
        .map(|v| String::from_utf8(v.to_vec()).expect("utf8"))
}

fn levels(db: &Db) -> Vec<usize> {
    db.stats().levels.iter().map(|l| l.files).collect()
}

#[test]
fn ingest_into_empty_db_lands_in_last_level_and_survives_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = tempfile::tempdir().expect("tempdir");
    let a = build(src.path(), "a.sst", 0..1000, "a");
    let b = build(src.path(), "b.sst", 1000..2000, "b");
    let db = Db::open(dir.path().join("db"), options()).expect("open");
    let before = db.stats().last_seqno;
    db.ingest(&[b.clone(), a.clone()]).expect("ingest");
    assert_eq!(db.stats().last_seqno, before + 1, "one sequence number");
    assert_eq!(levels(&db), vec![0, 0, 0, 0, 0, 0, 2]);
    assert!(!a.exists() && !b.exists(), "sources are moved in");
    assert_eq!(get(&db, 5).as_deref(), Some("a"));
    assert_eq!(get(&db, 1999).as_deref(), Some("b"));
    assert_eq!(get(&db, 2000), None);
    assert_eq!(db.iter(&ReadOptions::default()).count(), 2000);
    let rev: Vec<_> = db
        .range(
            &ReadOptions::default(),
            b"key00990".as_ref()..b"key01010".as_ref(),
        )
        .rev()
        .map(|kv| kv.expect("scan").0)
        .collect();
    assert_eq!(rev.len(), 20);
    assert_eq!(&rev[0][..], b"key01009");
    db.put(b"key00005", b"newer").expect("put");
    db.close().expect("close");

    let db = Db::open(dir.path().join("db"), options()).expect("reopen");
    assert_eq!(get(&db, 5).as_deref(), Some("newer"));
    assert_eq!(get(&db, 6).as_deref(), Some("a"));
    assert_eq!(get(&db, 1500).as_deref(), Some("b"));
    let snap = db.snapshot();
    assert_eq!(
        db.get_opt(&ReadOptions::at(&snap), b"key01500")
            .expect("get")
            .as_deref(),
        Some(&b"b"[..])
    );
    db.check_integrity().expect("integrity");
}

#[test]
fn ingest_over_existing_data_wins_and_older_snapshot_keeps_old_values() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), options()).expect("open");
    // Old values in tables (key 0..600) and in the memtable (key 300..400, newer).
    for i in 0..600 {
        db.put(format!("key{i:05}").as_bytes(), b"table")
            .expect("put");
    }
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact");
    for i in 300..400 {
        db.put(format!("key{i:05}").as_bytes(), b"memtable")
            .expect("put");
    }
    let snap = db.snapshot();
    let file = build(src.path(), "new.sst", (0..1000).step_by(2), "ingested");
    db.ingest(&[file]).expect("ingest");
    // The memtable overlapped: it was flushed, so the file went to level 0, newest.
    assert_eq!(levels(&db)[0], 2);

    let check_new = |db: &Db| {
        assert_eq!(get(db, 0).as_deref(), Some("ingested"));
        assert_eq!(get(db, 1).as_deref(), Some("table"));
        assert_eq!(get(db, 300).as_deref(), Some("ingested"));
        assert_eq!(get(db, 301).as_deref(), Some("memtable"));
        assert_eq!(get(db, 998).as_deref(), Some("ingested"));
        assert_eq!(get(db, 999), None);
        let all: Vec<_> = db
            .iter(&ReadOptions::default())
            .map(|kv| kv.expect("scan"))
            .collect();
        assert_eq!(all.len(), 800);
    };
    check_new(&db);
    let old = ReadOptions::at(&snap);
    let at_snap = |i: u32| {
        db.get_opt(&old, format!("key{i:05}").as_bytes())
            .expect("get")
            .map(|v| v.to_vec())
    };
    assert_eq!(at_snap(0).as_deref(), Some(&b"table"[..]));
    assert_eq!(at_snap(300).as_deref(), Some(&b"memtable"[..]));
    assert_eq!(at_snap(998), None);
    assert_eq!(db.iter(&old).count(), 600);
    // Compaction keeps what the snapshot needs and what the present needs.
    db.compact_range(None, None).expect("compact");
    assert_eq!(at_snap(0).as_deref(), Some(&b"table"[..]));
    assert_eq!(at_snap(998), None);
    check_new(&db);
    drop(snap);
    db.close().expect("close");

    let db = Db::open(dir.path(), options()).expect("reopen");
    check_new(&db);
    db.compact_range(None, None).expect("compact");
    check_new(&db);
    db.check_integrity().expect("integrity");
}

#[test]
fn ingest_below_unrelated_tables_picks_deepest_free_level() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), options()).expect("open");
    for i in 0..100 {
        db.put(format!("key{i:05}").as_bytes(), b"old")
            .expect("put");
    }
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact");
    let deepest = levels(&db).iter().rposition(|&n| n > 0).expect("a level");
    // Disjoint from the existing keys: goes to the last level beside them.
    let far = build(src.path(), "far.sst", 5000..5100, "far");
    db.ingest(&[far]).expect("ingest");
    assert_eq!(levels(&db)[6], if deepest == 6 { 2 } else { 1 });
    // Overlapping the existing keys, with an empty memtable: one level above them.
    let over = build(src.path(), "over.sst", 50..150, "over");
    db.ingest(&[over]).expect("ingest");
    assert_eq!(levels(&db)[deepest - 1], 1);
    assert_eq!(get(&db, 49).as_deref(), Some("old"));
    assert_eq!(get(&db, 50).as_deref(), Some("over"));
    assert_eq!(get(&db, 5050).as_deref(), Some("far"));
    db.check_integrity().expect("integrity");
}

#[test]
fn ingest_of_overlapping_files_is_invalid_and_changes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = tempfile::tempdir().expect("tempdir");
    let a = build(src.path(), "a.sst", 0..100, "a");
    let b = build(src.path(), "b.sst", 99..200, "b");
    let db = Db::open(dir.path(), options()).expect("open");
    let err = db.ingest(&[a.clone(), b.clone()]).expect_err("overlap");
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    assert!(a.exists() && b.exists());
    assert_eq!(db.iter(&ReadOptions::default()).count(), 0);
    assert_eq!(levels(&db).iter().sum::<usize>(), 0);
    // The same file twice, under two spellings of its path.
    let again = src.path().join(".").join("a.sst");
    match db.ingest(&[a.clone(), again]) {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("given twice"), "{m}"),
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
    assert!(a.exists());
    // Not TableWriter tables: a database's own table (sequence numbers above 0).
    db.put(b"x", b"1").expect("put");
    db.flush().expect("flush");
    let own = std::fs::read_dir(dir.path())
        .expect("read_dir")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "sst"))
        .expect("a table");
    let copy = src.path().join("copy.sst");
    std::fs::copy(&own, &copy).expect("copy");
    assert!(matches!(db.ingest(&[copy]), Err(Error::InvalidArgument(_))));
    assert!(matches!(
        db.ingest(std::slice::from_ref(&own)),
        Err(Error::InvalidArgument(_))
    ));
    assert!(own.exists());
    // Not a table at all.
    let junk = src.path().join("junk.sst");
    std::fs::write(&junk, b"not a table").expect("write");
    assert!(matches!(db.ingest(&[junk]), Err(Error::Corruption { .. })));
    assert_eq!(db.get(b"x").expect("get").as_deref(), Some(&b"1"[..]));
}

#[test]
fn ingested_merge_operands_add_to_existing_counters() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = tempfile::tempdir().expect("tempdir");
    let opts = || options().merge_operator(Some(Arc::new(CounterAdd)));
    let db = Db::open(dir.path(), opts()).expect("open");
    db.put(b"read:A", b"10").expect("put");
    db.merge(b"read:B", b"5").expect("merge");
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact");
    let path = src.path().join("counts.sst");
    let mut w = TableWriter::create(&path, &opts()).expect("create");
    for (k, n) in [("read:A", "3"), ("read:B", "4"), ("read:C", "1")] {
        w.merge(k.as_bytes(), n.as_bytes()).expect("merge");
    }
    db.ingest(&[w.finish().expect("finish").path])
        .expect("ingest");
    let check = |db: &Db| {
        for (k, n) in [("read:A", "13"), ("read:B", "9"), ("read:C", "1")] {
            assert_eq!(
                db.get(k.as_bytes()).expect("get").as_deref(),
                Some(n.as_bytes()),
                "{k}"
            );
        }
    };
    check(&db);
    db.merge(b"read:C", b"1").expect("merge");
    db.compact_range(None, None).expect("compact");
    db.close().expect("close");
    let db = Db::open(dir.path(), opts()).expect("reopen");
    assert_eq!(db.get(b"read:C").expect("get").as_deref(), Some(&b"2"[..]));
    db.put(b"read:C", b"1").expect("put");
    check(&db);
}

/// Writers run into the level-0 stop trigger (the leader then waits for a compaction while
/// holding the WAL lock) while ingests need that lock and pause compactions: no deadlock.
#[test]
fn concurrent_writes_during_ingest_stay_consistent() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = tempfile::tempdir().expect("tempdir");
    let stalling = options()
        .write_buffer_size(8 << 10)
        .level0_file_num_compaction_trigger(1)
        .level0_slowdown_writes_trigger(2)
        .level0_stop_writes_trigger(3);
    let db = Db::open(dir.path(), stalling).expect("open");
    let files: Vec<_> = (0..4)
        .map(|f| {
            build(
                src.path(),
                &format!("{f}.sst"),
                f * 1000..f * 1000 + 1000,
                "ingested",
            )
        })
        .collect();
    let writer = {
        let db = db.clone();
        std::thread::spawn(move || {
            for i in 0..4000u32 {
                db.put(format!("key{i:05}").as_bytes(), b"written")
                    .expect("put");
            }
        })
    };
    for f in files {
        db.ingest(&[f]).expect("ingest");
    }
    writer.join().expect("writer");
    // Every key holds whichever came last; both are consistent with some order, and no
    // key is missing.
    assert_eq!(db.iter(&ReadOptions::default()).count(), 4000);
    db.compact_range(None, None).expect("compact");
    assert_eq!(db.iter(&ReadOptions::default()).count(), 4000);
    db.check_integrity().expect("integrity");
}

/// The names in the database directory that are tables, sorted.
fn table_files(db_dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(db_dir)
        .expect("read_dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".sst"))
        .collect();
    names.sort();
    names
}

#[cfg(unix)]
#[test]
fn ingest_through_an_absolute_symlink_moves_the_table_itself_in() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = tempfile::tempdir().expect("tempdir");
    let staging = build(src.path(), "staging.sst", 0..100, "s");
    let link = src.path().join("link.sst");
    std::os::unix::fs::symlink(&staging, &link).expect("symlink");
    let db_dir = dir.path().join("db");
    let db = Db::open(&db_dir, options()).expect("open");
    db.ingest(std::slice::from_ref(&link)).expect("ingest");
    assert!(
        !staging.exists() && std::fs::symlink_metadata(&link).is_err(),
        "both moved in"
    );
    for name in table_files(&db_dir) {
        let meta = std::fs::symlink_metadata(db_dir.join(&name)).expect("meta");
        assert!(meta.file_type().is_file(), "{name} is a regular file");
    }
    assert_eq!(get(&db, 7).as_deref(), Some("s"));
    drop(db);
    let db = Db::open(&db_dir, options()).expect("reopen");
    assert_eq!(get(&db, 99).as_deref(), Some("s"));
    db.check_integrity().expect("check");
}

#[cfg(unix)]
#[test]
fn ingest_through_a_relative_symlink_works_and_leaves_nothing_on_failure() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = tempfile::tempdir().expect("tempdir");
    build(src.path(), "staging.sst", 0..100, "r");
    std::fs::create_dir(src.path().join("links")).expect("mkdir");
    let link = src.path().join("links/link.sst");
    std::os::unix::fs::symlink("../staging.sst", &link).expect("symlink");
    let db_dir = dir.path().join("db");
    let db = Db::open(&db_dir, options()).expect("open");
    db.ingest(std::slice::from_ref(&link)).expect("ingest");
    assert_eq!(get(&db, 42).as_deref(), Some("r"));
    let tables = table_files(&db_dir);
    for name in &tables {
        let meta = std::fs::symlink_metadata(db_dir.join(name)).expect("meta");
        assert!(meta.file_type().is_file(), "{name} is a regular file");
    }

    // A dangling link: the error names the link as given, and no file is left behind.
    let dangling = src.path().join("links/dangling.sst");
    std::os::unix::fs::symlink("../gone.sst", &dangling).expect("symlink");
    let err = db.ingest(std::slice::from_ref(&dangling)).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, Error::Io { .. }), "{err}");
    assert!(msg.contains("dangling.sst"), "{msg}");
    assert!(!msg.contains("/db/"), "{msg}");
    assert_eq!(table_files(&db_dir), tables, "nothing left behind");
    drop(db);
    let db = Db::open(&db_dir, options()).expect("reopen");
    assert_eq!(get(&db, 42).as_deref(), Some("r"));
}

#[cfg(unix)]
#[test]
fn ingest_refuses_a_symlink_to_one_of_the_databases_own_tables() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = tempfile::tempdir().expect("tempdir");
    let db_dir = dir.path().join("db");
    let db = Db::open(&db_dir, options()).expect("open");
    db.ingest(&[build(src.path(), "a.sst", 0..100, "a")])
        .expect("ingest");
    let tables = table_files(&db_dir);
    let own = db_dir.join(&tables[0]);
    let link = src.path().join("own.sst");
    std::os::unix::fs::symlink(&own, &link).expect("symlink");
    let err = db.ingest(std::slice::from_ref(&link)).unwrap_err();
    assert!(
        matches!(&err, Error::InvalidArgument(m) if m.contains("own files") && m.contains("own.sst")),
        "{err}"
    );
    assert!(own.exists(), "the live table stays");
    // The same file given by its path and by a link to it is given twice.
    let b = build(src.path(), "b.sst", 200..300, "b");
    let b_link = src.path().join("b-link.sst");
    std::os::unix::fs::symlink(&b, &b_link).expect("symlink");
    let err = db.ingest(&[b.clone(), b_link]).unwrap_err();
    assert!(
        matches!(&err, Error::InvalidArgument(m) if m.contains("twice")),
        "{err}"
    );
    assert!(b.exists());
    assert_eq!(table_files(&db_dir), tables);
    assert_eq!(get(&db, 5).as_deref(), Some("a"));
}

#[test]
fn a_failed_link_names_the_given_path_and_leaves_no_file_in_the_database() {
    use strata_engine::fs::{EIO, Fault, FaultOp, FileSystem, MemFs};
    let fs = MemFs::new();
    let o = options().file_system(Arc::new(fs.clone()));
    fs.create_dir_all(Path::new("/src")).expect("mkdir");
    let source = PathBuf::from("/src/a.sst");
    let mut w = TableWriter::create(&source, &o).expect("create");
    w.put(b"key", b"value").expect("put");
    w.finish().expect("finish");
    let db = Db::open("/db", o).expect("open");
    let tables = |fs: &MemFs| {
        fs.list_dir(Path::new("/db"))
            .expect("list")
            .into_iter()
            .filter(|e| e.path.extension().is_some_and(|x| x == "sst"))
            .count()
    };
    // The fsync of the linked table fails.
    fs.inject(Fault::new(FaultOp::Sync, EIO).on_path(".sst"));
    let err = db.ingest(std::slice::from_ref(&source)).unwrap_err();
    assert!(
        matches!(&err, Error::Io { path, .. } if *path == source),
        "names the given path: {err}"
    );
    assert_eq!(tables(&fs), 0, "the linked table is removed");
    assert!(fs.exists(&source), "the source stays");
    fs.clear_faults();
    db.ingest(std::slice::from_ref(&source)).expect("ingest");
    assert_eq!(db.get(b"key").expect("get").as_deref(), Some(&b"value"[..]));
}
