//! `DROP TABLE` and `DROP INDEX` of many entries free their space on the engine: tables
//! holding only the dropped keys are removed whole, the rest is deleted and, after many
//! deletes, the range compacted, so the rows and their tombstones do not stay (later opens and
//! scans would step over them). The other tables must not lose or gain a row.
#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "a panic is how a test fails"
)]

use std::path::Path;
use strata_engine::{Db, Options};
use strata_query::exec::RECLAIM_MIN_ENTRIES;
use strata_query::{Database, DbStore, Output, Value};

/// Entries stored in the engine's tables (tombstones included).
fn stored_entries(db: &Database<DbStore>) -> u64 {
    db.store().db().stats().table_entries().0
}

fn rows(db: &Database<DbStore>, sql: &str) -> Vec<Vec<Value>> {
    match db.execute(sql).unwrap().pop().unwrap() {
        Output::Rows { rows, .. } => rows,
        other => panic!("{other:?}"),
    }
}

/// An engine with small memtables and tables, so a table's rows span many tables and a drop
/// removes whole ones (`KvStore::forget_range`) besides deleting at the edges.
fn open_small(dir: &Path) -> Database<DbStore> {
    let options = Options::default()
        .write_buffer_size(128 << 10)
        .target_file_size(128 << 10)
        .max_bytes_for_level_base(512 << 10);
    Database::new(DbStore::new(Db::open(dir, options).unwrap())).unwrap()
}

fn insert_rows(db: &Database<DbStore>, table: &str, range: std::ops::Range<usize>) {
    let ids: Vec<usize> = range.collect();
    for chunk in ids.chunks(5_000) {
        let values: Vec<String> = chunk
            .iter()
            .map(|i| format!("({i}, {}, 'row {i} of {table}')", i % 97))
            .collect();
        db.execute(&format!("INSERT INTO {table} VALUES {}", values.join(",")))
            .unwrap();
    }
}

#[test]
fn dropping_many_entries_leaves_no_table_holding_them() {
    let dir = tempfile::tempdir().unwrap();
    let n = RECLAIM_MIN_ENTRIES + 5_000;
    let db = open_small(dir.path());
    for t in ["keep", "reads", "tail"] {
        db.execute(&format!(
            "CREATE TABLE {t} (id BIGINT PRIMARY KEY, count BIGINT NOT NULL, note TEXT)"
        ))
        .unwrap();
    }
    insert_rows(&db, "keep", 0..3_000);
    insert_rows(&db, "reads", 0..n);
    insert_rows(&db, "tail", 0..20_000);
    db.execute("CREATE INDEX by_count ON reads (count); CREATE INDEX tail_count ON tail (count)")
        .unwrap();
    db.store().db().flush().unwrap();
    let full = stored_entries(&db);
    assert!(full >= 2 * n as u64, "{full} entries stored");
    let snapshot = |db: &Database<DbStore>| {
        (
            rows(db, "SELECT * FROM keep ORDER BY id"),
            rows(db, "SELECT * FROM tail ORDER BY id"),
            rows(db, "SELECT id FROM tail WHERE count = 5 ORDER BY id"),
        )
    };
    let others = snapshot(&db);
    assert_eq!((others.0.len(), others.1.len()), (3_000, 20_000));

    db.execute("DROP INDEX by_count").unwrap();
    let after_index = stored_entries(&db);
    assert!(
        after_index < full - n as u64 / 2,
        "{after_index} entries stored after DROP INDEX (of {full})"
    );
    assert_eq!(
        rows(&db, "SELECT count(*) FROM reads WHERE count = 5"),
        vec![vec![Value::Int((n / 97 + usize::from(n % 97 > 5)) as i64)]]
    );
    assert_eq!(snapshot(&db), others);

    db.execute("DROP TABLE reads").unwrap();
    let after_table = stored_entries(&db);
    assert!(
        after_table < full - 3 * n as u64 / 2,
        "{after_table} entries stored after DROP TABLE (of {full})"
    );
    assert_eq!(snapshot(&db), others);
    drop(db);
    let db = open_small(dir.path());
    assert_eq!(snapshot(&db), others);
    assert!(db.execute("SELECT * FROM reads").is_err());
    db.store().db().check_integrity().unwrap();
}

/// Bytes of the files directly in `dir` (tables, WAL, manifest).
fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|e| e.metadata().ok())
        .filter(std::fs::Metadata::is_file)
        .map(|m| m.len())
        .sum()
}

#[test]
fn dropping_few_large_rows_frees_their_space_too() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path()).unwrap();
    db.execute("CREATE TABLE keep (k BIGINT PRIMARY KEY); INSERT INTO keep VALUES (7)")
        .unwrap();
    db.execute("CREATE TABLE blobs (k BIGINT PRIMARY KEY, body TEXT)")
        .unwrap();
    // 240 rows of 100 KB, random enough not to compress: 24 MB in 240 entries, far below
    // RECLAIM_MIN_ENTRIES but above RECLAIM_MIN_BYTES.
    let mut x = 0x9e37_79b9_7f4a_7c15_u64;
    for k in 0..240 {
        let body: String = (0..100_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                char::from(b'a' + (x % 26) as u8)
            })
            .collect();
        db.execute(&format!("INSERT INTO blobs VALUES ({k}, '{body}')"))
            .unwrap();
    }
    db.store().db().flush().unwrap();
    let before = dir_bytes(dir.path());
    assert!(before > 20 << 20, "{before} bytes");
    db.execute("DROP TABLE blobs").unwrap();
    let after = dir_bytes(dir.path());
    assert!(
        after < 4 << 20,
        "{after} bytes after DROP TABLE (of {before})"
    );
    assert_eq!(rows(&db, "SELECT k FROM keep"), vec![vec![Value::Int(7)]]);
}
