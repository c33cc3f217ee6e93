//! Keys over the engine's limit (`strata_engine::MAX_KEY_SIZE`): a primary key or an indexed
//! value too long to be a key fails its statement with an error naming the table or index,
//! and leaves nothing behind.
#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "a panic is how a test fails"
)]

use std::ops::Bound;

use strata_query::{Database, KvRead, KvStore, MemStore};

/// Every key/value pair in the store.
fn entries(db: &Database<MemStore>) -> usize {
    db.store()
        .reader()
        .scan(Bound::Unbounded, Bound::Unbounded, false)
        .count()
}

#[test]
fn over_long_keys_fail_their_statement_and_name_what_they_belong_to() {
    let db = Database::new(MemStore::new()).unwrap();
    db.execute("CREATE TABLE t (k TEXT PRIMARY KEY, v TEXT)")
        .unwrap();
    let long = "x".repeat(strata_engine::MAX_KEY_SIZE + 10);
    let err = db
        .execute(&format!(
            "INSERT INTO t VALUES ('a', 'ok'), ('{long}', 'v')"
        ))
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("the primary key of a row of t is ") && err.contains("over the key limit"),
        "{err}"
    );
    // Nothing of the statement was written.
    let before = entries(&db);
    db.execute("INSERT INTO t VALUES ('a', 'short')").unwrap();
    // 60,000 more rows, so the index build below has gathered many entries before it
    // reaches the long value, in the last row.
    let values: Vec<String> = (0..60_000)
        .map(|i| format!("('r{i:05}', 'v{i}')"))
        .collect();
    db.execute(&format!("INSERT INTO t VALUES {}", values.join(", ")))
        .unwrap();
    db.execute(&format!("INSERT INTO t VALUES ('zz', '{long}')"))
        .unwrap();
    // Building an index over the long value fails and leaves no entries behind.
    let with_rows = entries(&db);
    assert_eq!(with_rows, before + 60_002);
    let err = db
        .execute("CREATE INDEX t_v ON t (v)")
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("the entry of index t_v on t(v) is "),
        "{err}"
    );
    // (The catalog's id counter is updated in place.)
    assert_eq!(entries(&db), with_rows);
    // With an index, an UPDATE that makes a value too long fails as a whole.
    db.execute("DELETE FROM t WHERE k = 'zz'").unwrap();
    db.execute("CREATE INDEX t_v ON t (v)").unwrap();
    let err = db
        .execute(&format!("UPDATE t SET v = '{long}'"))
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("the entry of index t_v on t(v)"), "{err}");
    let err = db
        .execute(&format!("UPDATE t SET k = '{long}'"))
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("the primary key of a row of t"), "{err}");
    let rows = db.execute("SELECT k, v FROM t WHERE k = 'a'").unwrap();
    assert_eq!(format!("{rows:?}").matches("short").count(), 1);
}

/// On the engine, a failed index build (a value too long, in the last row) leaves no entry and
/// no scratch directory; the build that then succeeds is ingested and survives a reopen.
#[test]
fn a_failed_index_build_on_the_engine_leaves_nothing_and_a_good_one_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let long = "x".repeat(strata_engine::MAX_KEY_SIZE + 10);
    let dir_names = || -> Vec<String> {
        std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect()
    };
    {
        let db = Database::open(dir.path()).unwrap();
        db.execute("CREATE TABLE t (k TEXT PRIMARY KEY, v TEXT)")
            .unwrap();
        let values: Vec<String> = (0..20_000)
            .map(|i| format!("('r{i:05}', 'v{}')", i % 7))
            .collect();
        db.execute(&format!("INSERT INTO t VALUES {}", values.join(", ")))
            .unwrap();
        db.execute(&format!("INSERT INTO t VALUES ('zz', '{long}')"))
            .unwrap();
        let before: usize = db
            .store()
            .reader()
            .scan(Bound::Unbounded, Bound::Unbounded, false)
            .count();
        let err = db
            .execute("CREATE INDEX t_v ON t (v)")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("the entry of index t_v on t(v)"), "{err}");
        let after: usize = db
            .store()
            .reader()
            .scan(Bound::Unbounded, Bound::Unbounded, false)
            .count();
        assert_eq!(after, before);
        assert!(
            !dir_names().iter().any(|n| n.starts_with("strata-index-")),
            "{:?}",
            dir_names()
        );
        db.execute("DELETE FROM t WHERE k = 'zz'").unwrap();
        db.execute("CREATE INDEX t_v ON t (v)").unwrap();
        assert!(!dir_names().iter().any(|n| n.ends_with(".tmp")));
    }
    let db = Database::open(dir.path()).unwrap();
    let explain = format!(
        "{:?}",
        db.execute("EXPLAIN SELECT count(*) FROM t WHERE v = 'v3'")
            .unwrap()
    );
    assert!(explain.contains("index"), "{explain}");
    let got = format!(
        "{:?}",
        db.execute("SELECT count(*) FROM t WHERE v = 'v3'").unwrap()
    );
    let want = (0..20_000).filter(|i| i % 7 == 3).count();
    assert!(got.contains(&format!("Int({want})")), "{got} vs {want}");
}
