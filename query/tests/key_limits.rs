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
    // 60,000 more rows, so the index build below writes a chunk of entries (50,000) before
    // it reaches the long value, in the last row.
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
