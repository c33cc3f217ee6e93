//! What a crash leaves under ids no catalog record uses (a `CREATE INDEX` cut short, the
//! chunked deletes of `DROP TABLE`/`DROP INDEX`) is deleted by the next writable open; keys
//! under ids the SQL layer never handed out are left alone.
#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "a panic is how a test fails"
)]
#![expect(
    clippy::big_endian_bytes,
    reason = "table and index ids are 4 big-endian bytes in keys (docs/format/keys.md)"
)]

use std::ops::Bound;

use strata_engine::{Db, Options, WriteBatch, WriteOptions};
use strata_query::{Database, DbStore, KvRead, KvStore, Output};

/// Every key of the store under `prefix`.
fn keys_under(db: &Database<DbStore>, prefix: &[u8]) -> Vec<Vec<u8>> {
    db.store()
        .reader()
        .scan(Bound::Included(prefix), Bound::Unbounded, false)
        .map(|kv| kv.unwrap().0.to_vec())
        .take_while(|k| k.starts_with(prefix))
        .collect()
}

fn count(db: &Database<DbStore>, sql: &str) -> String {
    match db.execute(sql).unwrap().pop().unwrap() {
        Output::Rows { rows, .. } => format!("{:?}", rows),
        other => panic!("{other:?}"),
    }
}

fn id_prefix(tag: u8, id: u32) -> Vec<u8> {
    let mut k = vec![tag];
    k.extend_from_slice(&id.to_be_bytes());
    k
}

#[test]
fn a_writable_open_deletes_what_a_crash_left_under_unused_ids() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Database::open(dir.path()).unwrap();
        db.execute(
            "CREATE TABLE reads (seq TEXT PRIMARY KEY, count BIGINT);
             INSERT INTO reads VALUES ('ACGT', 12), ('TTGA', 3), ('CCCC', 40);
             CREATE INDEX by_count ON reads (count);
             CREATE TABLE gone (k BIGINT PRIMARY KEY);
             INSERT INTO gone VALUES (1), (2);",
        )
        .unwrap();
    }
    // Find how ids are laid out: the live table's rows and index entries.
    let engine = Db::open(dir.path(), Options::default()).unwrap();
    let store = DbStore::new(engine.clone());
    let db = Database::new(store).unwrap();
    let rows_before = keys_under(&db, &[0xF1]);
    let index_before = keys_under(&db, &[0xF2]);
    assert_eq!((rows_before.len(), index_before.len()), (5, 3));
    let reads_prefix = rows_before[0][..5].to_vec();
    let index_prefix = index_before[0][..5].to_vec();
    // `gone` is dropped, but a crash stops its chunked delete: its rows are put back.
    let gone_rows: Vec<Vec<u8>> = rows_before
        .iter()
        .filter(|k| !k.starts_with(&reads_prefix))
        .cloned()
        .collect();
    db.execute("DROP TABLE gone").unwrap();
    // And a CREATE INDEX cut short: entries under an id reserved past every live one.
    let next_id = {
        let last = u32::from_be_bytes(gone_rows[0][1..5].try_into().unwrap());
        last + 1
    };
    db.execute("CREATE INDEX tmp ON reads (count); DROP INDEX tmp")
        .unwrap();
    let mut batch = WriteBatch::new();
    for k in &gone_rows {
        batch.put(k, b"\x00");
    }
    let aborted = id_prefix(0xF2, next_id);
    batch.put(&[aborted.as_slice(), b"\x01entry"].concat(), b"");
    // Keys the SQL layer did not write: an id it never handed out, a key too short for an id.
    let foreign = [id_prefix(0xF2, 1_000_000), b"x".to_vec()].concat();
    batch.put(&foreign, b"raw");
    batch.put(&[0xF1, 0x00], b"short");
    engine.write(batch, &WriteOptions::default()).unwrap();
    drop(db);
    engine.close().unwrap();

    let db = Database::open(dir.path()).unwrap();
    let mut rows = keys_under(&db, &[0xF1]);
    rows.retain(|k| k.len() >= 5);
    assert!(
        rows.iter().all(|k| k.starts_with(&reads_prefix)),
        "{rows:?}"
    );
    assert_eq!(rows.len(), 3);
    let entries = keys_under(&db, &[0xF2]);
    assert_eq!(
        entries
            .iter()
            .filter(|k| k.starts_with(&index_prefix))
            .count(),
        3
    );
    assert!(!entries.iter().any(|k| k.starts_with(&aborted)));
    assert!(entries.contains(&foreign), "{entries:?}");
    assert!(db.store().reader().get(&[0xF1, 0x00]).unwrap().is_some());
    assert_eq!(
        count(&db, "SELECT count(*) FROM reads WHERE count > 10"),
        "[[Int(2)]]"
    );
}
