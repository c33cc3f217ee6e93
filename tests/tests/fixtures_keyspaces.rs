//! On-disk compatibility fixture of a database with keyspaces (`tests/fixtures/v1-keyspaces/`,
//! described in `tests/fixtures/README.md`): format version 1 with the keyspace records of
//! `docs/format/manifest.md` section 2.2 (tags 6, 9, 10, 11) and the keyspace-tagged batch
//! entries of `docs/format/wal.md` section 8, written by the code of 2026-11-30 and committed.
//!
//! It holds the default keyspace, `runs` (tables and WAL records), `counts` (decimal counters
//! written as merge operands, some folded into tables, some only in the WAL), and the records of
//! a keyspace `old` that was created, written and dropped (its WAL records must be skipped at
//! replay). The last WAL record is one batch spanning three keyspaces. Opening a copy must list
//! exactly `default`, `runs`, `counts` and read back `expected.tsv`
//! (`keyspace<TAB>key<TAB>value`), also after a reopen. `regenerate_keyspace_fixture` (ignored)
//! rewrites it; run it only for a new format version.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "a panic is how a test fails"
)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use strata_engine::{
    CounterAdd, Db, Keyspace, Options, ReadOptions, TableFormat, WriteBatch, WriteOptions,
};

/// Keyspace name -> key -> value.
type Contents = BTreeMap<String, BTreeMap<Vec<u8>, Vec<u8>>>;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/v1-keyspaces")
}

fn options() -> Options {
    let small = Options::default()
        .block_size(512)
        .block_restart_interval(4)
        .max_background_jobs(1)
        .table_format(TableFormat::V1);
    small
        .clone()
        .with_keyspace_options("counts", small.merge_operator(Some(Arc::new(CounterAdd))))
}

fn expected() -> Contents {
    let text = std::fs::read_to_string(fixture().join("expected.tsv")).expect("read expected.tsv");
    let mut out = Contents::new();
    for line in text.lines() {
        let mut parts = line.splitn(3, '\t');
        let (Some(ks), Some(k), Some(v)) = (parts.next(), parts.next(), parts.next()) else {
            panic!("bad line in expected.tsv: {line:?}");
        };
        out.entry(ks.to_owned())
            .or_default()
            .insert(k.as_bytes().to_vec(), v.as_bytes().to_vec());
    }
    out
}

fn handle(db: &Db, name: &str) -> Keyspace {
    if name == "default" {
        db.default_keyspace()
    } else {
        db.keyspace(name).expect("open keyspace")
    }
}

fn contents(db: &Db) -> Contents {
    let mut out = Contents::new();
    for name in db.list_keyspaces() {
        let ks = handle(db, &name);
        let map = ks
            .iter(&ReadOptions::default())
            .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())))
            .collect::<strata_engine::Result<_>>()
            .expect("scan");
        out.insert(name, map);
    }
    out
}

fn copy_dir(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).expect("mkdir");
    for entry in std::fs::read_dir(src).expect("read fixture") {
        let entry = entry.expect("entry");
        std::fs::copy(entry.path(), dst.join(entry.file_name())).expect("copy");
    }
}

#[test]
fn keyspace_database_reads_back_every_keyspace() {
    let want = expected();
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("db");
    copy_dir(&fixture().join("valid"), &dir);
    for round in 0..2 {
        let db = Db::open(&dir, options()).expect("open the fixture");
        assert_eq!(
            db.list_keyspaces(),
            ["default", "runs", "counts"],
            "round {round}"
        );
        assert_eq!(contents(&db), want, "round {round}");
        for (name, map) in &want {
            let ks = handle(&db, name);
            for (k, v) in map {
                assert_eq!(ks.get(k).expect("get").as_deref(), Some(&v[..]));
            }
        }
        db.check_integrity().expect("integrity");
    }
}

#[test]
#[ignore = "rewrites committed files; see tests/fixtures/README.md"]
fn regenerate_keyspace_fixture() {
    if std::env::var("STRATA_WRITE_FIXTURES").as_deref() != Ok("1") {
        eprintln!("set STRATA_WRITE_FIXTURES=1 to rewrite tests/fixtures/v1-keyspaces");
        return;
    }
    let root = fixture();
    if root.exists() {
        std::fs::remove_dir_all(&root).expect("clear");
    }
    let dir = root.join("valid");
    let db = Db::open(&dir, options()).expect("create");
    let runs = db.keyspace("runs").expect("runs");
    let counts = db.keyspace("counts").expect("counts");
    let old = db.keyspace("old").expect("old");
    let default = db.default_keyspace();
    for i in 0..60u32 {
        default
            .put(
                format!("d{i:03}").as_bytes(),
                format!("default-{i}").as_bytes(),
            )
            .expect("put");
        runs.put(
            format!("read{i:03}").as_bytes(),
            format!("ACGT-{i}").repeat(4).as_bytes(),
        )
        .expect("put");
        counts
            .merge(format!("read{:03}", i % 20).as_bytes(), b"1")
            .expect("merge");
        old.put(format!("gone{i:03}").as_bytes(), b"dropped")
            .expect("put");
    }
    db.flush().expect("flush");
    for i in 40..80u32 {
        runs.put(
            format!("read{i:03}").as_bytes(),
            format!("TTGCA-{i}").as_bytes(),
        )
        .expect("put");
        counts
            .merge(format!("read{:03}", i % 20).as_bytes(), b"2")
            .expect("merge");
        old.put(format!("gone{i:03}").as_bytes(), b"dropped")
            .expect("put");
    }
    runs.delete(b"read000").expect("delete");
    db.drop_keyspace("old").expect("drop old");
    let mut batch = WriteBatch::new();
    batch.put_in(&default, b"batch", b"spans three keyspaces");
    batch.put_in(&runs, b"batch", b"spans three keyspaces");
    batch.merge_in(&counts, b"batch", b"7");
    db.write(batch, &WriteOptions::synced()).expect("batch");
    let want = contents(&db);
    assert!(!db.list_keyspaces().iter().any(|n| n == "old"));
    drop((runs, counts, old, default));
    db.close().expect("close");
    std::fs::remove_file(dir.join("LOCK")).expect("remove LOCK");
    let tsv: String = want
        .iter()
        .flat_map(|(ks, map)| {
            map.iter().map(move |(k, v)| {
                format!(
                    "{ks}\t{}\t{}\n",
                    String::from_utf8_lossy(k),
                    String::from_utf8_lossy(v)
                )
            })
        })
        .collect();
    std::fs::write(root.join("expected.tsv"), tsv).expect("write expected.tsv");
}
