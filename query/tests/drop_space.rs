//! `DROP TABLE` and `DROP INDEX` of many entries free their space on the engine: the dropped
//! key range is compacted after the deletes, so no table keeps the rows or their tombstones
//! (which later opens and scans would otherwise step over).
#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "a panic is how a test fails"
)]

use std::path::Path;
use std::sync::Arc;

use strata_engine::FileNumber;
use strata_engine::cache::BlockCache;
use strata_engine::sstable::Table;
use strata_query::exec::RECLAIM_MIN_ENTRIES;
use strata_query::{Database, Output};

/// Entries stored in the tables of the database in `dir` (tombstones included).
fn stored_entries(dir: &Path) -> u64 {
    let cache = BlockCache::new(1 << 20);
    let mut entries = 0;
    for e in std::fs::read_dir(dir).unwrap().filter_map(Result::ok) {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(number) = name.strip_suffix(".sst") else {
            continue;
        };
        let number = FileNumber(number.parse().unwrap());
        let table = Table::open(
            &strata_engine::fs::OsFs,
            &e.path(),
            number,
            None,
            Arc::clone(&cache),
        )
        .unwrap();
        entries += table.properties().num_entries;
    }
    entries
}

fn rows(db: &Database<strata_query::DbStore>, sql: &str) -> Vec<Vec<strata_query::Value>> {
    match db.execute(sql).unwrap().pop().unwrap() {
        Output::Rows { rows, .. } => rows,
        other => panic!("{other:?}"),
    }
}

#[test]
fn dropping_many_entries_leaves_no_table_holding_them() {
    let dir = tempfile::tempdir().unwrap();
    let n = RECLAIM_MIN_ENTRIES + 5_000;
    let db = Database::open(dir.path()).unwrap();
    db.execute(
        "CREATE TABLE keep (k BIGINT PRIMARY KEY, v TEXT);
         INSERT INTO keep VALUES (1, 'one'), (2, 'two');
         CREATE TABLE reads (seq BIGINT PRIMARY KEY, count BIGINT NOT NULL)",
    )
    .unwrap();
    for start in (0..n).step_by(5_000) {
        let values: Vec<String> = (start..start + 5_000)
            .map(|i| format!("({i}, {})", i % 97))
            .collect();
        db.execute(&format!("INSERT INTO reads VALUES {}", values.join(",")))
            .unwrap();
    }
    db.execute("CREATE INDEX by_count ON reads (count)")
        .unwrap();
    db.store().db().flush().unwrap();
    let full = stored_entries(dir.path());
    assert!(full >= 2 * n as u64, "{full} entries stored");

    db.execute("DROP INDEX by_count").unwrap();
    let after_index = stored_entries(dir.path());
    assert!(
        after_index < full - n as u64 + 100,
        "{after_index} entries stored after DROP INDEX (of {full})"
    );
    assert_eq!(
        rows(&db, "SELECT count(*) FROM reads WHERE count = 5").len(),
        1
    );

    db.execute("DROP TABLE reads").unwrap();
    let after_table = stored_entries(dir.path());
    assert!(
        after_table < 100,
        "{after_table} entries stored after DROP TABLE"
    );
    assert_eq!(
        rows(&db, "SELECT v FROM keep ORDER BY k"),
        vec![
            vec![strata_query::Value::Text("one".into())],
            vec![strata_query::Value::Text("two".into())]
        ]
    );
    drop(db);
    let db = Database::open(dir.path()).unwrap();
    assert_eq!(
        rows(&db, "SELECT count(*) FROM keep"),
        vec![vec![strata_query::Value::Int(2)]]
    );
    assert!(db.execute("SELECT * FROM reads").is_err());
}
