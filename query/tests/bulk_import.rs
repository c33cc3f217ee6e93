//! `.import` of more than one batch on the engine: a bulk insert sorted by the engine's
//! `TableSorter` and ingested. The rows and their index entries are all there (checked against
//! the input, through the index and a full scan, and after a reopen), and a failing import
//! leaves neither rows nor sort files behind.
#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "a panic is how a test fails"
)]

use std::path::Path;

use strata_query::{Database, DbStore, Interrupt, Output, Value, import::import};

/// `n` distinct reads from `start` on, with counts 0..=39, as `seq<TAB>count` lines.
fn reads(start: u64, n: u64) -> Vec<(String, i64)> {
    (start..start + n)
        .map(|i| {
            // 20 bases from the bits of a mixed i: distinct for distinct i, in no order.
            let mut x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (i << 40);
            let seq: String = (0..20)
                .map(|_| {
                    let b = ['A', 'C', 'G', 'T'][(x & 3) as usize];
                    x >>= 2;
                    b
                })
                .collect();
            (format!("{seq}{i}"), i64::try_from(i % 40).unwrap())
        })
        .collect()
}

fn tsv(reads: &[(String, i64)]) -> String {
    reads.iter().map(|(s, c)| format!("{s}\t{c}\n")).collect()
}

fn one(db: &Database<DbStore>, sql: &str) -> Value {
    match db.execute(sql).unwrap().remove(0) {
        Output::Rows { mut rows, .. } => rows.remove(0).remove(0),
        o => panic!("{o:?}"),
    }
}

fn run_import(db: &Database<DbStore>, text: &str) -> strata_query::Result<u64> {
    import(
        db,
        "reads",
        text.as_bytes(),
        b'\t',
        &Interrupt::new(),
        |_| {},
    )
}

/// Every row of `expected` is there, and the index answers as a full scan does.
fn check(db: &Database<DbStore>, expected: &[(String, i64)]) {
    let n = i64::try_from(expected.len()).unwrap();
    assert_eq!(one(db, "SELECT count(*) FROM reads"), Value::Int(n));
    let over = expected.iter().filter(|(_, c)| *c > 30).count();
    let over = Value::Int(i64::try_from(over).unwrap());
    // Through the index, then a full scan (the + 0 keeps the planner off the index).
    assert_eq!(one(db, "SELECT count(*) FROM reads WHERE count > 30"), over);
    assert_eq!(
        one(db, "SELECT count(*) FROM reads WHERE count + 0 > 30"),
        over
    );
    for (seq, count) in expected.iter().step_by(997) {
        let sql = format!("SELECT count FROM reads WHERE seq = '{seq}'");
        assert_eq!(one(db, &sql), Value::Int(*count), "{seq}");
    }
}

/// No sort scratch directory is left in the database directory.
fn no_scratch(dir: &Path) {
    let left: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_long_import_is_sorted_and_ingested_with_its_index() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path()).unwrap();
    db.execute("CREATE TABLE reads (seq TEXT PRIMARY KEY, count BIGINT NOT NULL)")
        .unwrap();
    db.execute("CREATE INDEX reads_count ON reads (count)")
        .unwrap();
    let first = reads(0, 30_000);
    assert_eq!(run_import(&db, &tsv(&first)).unwrap(), 30_000);
    check(&db, &first);
    no_scratch(dir.path());

    // A second import into the table that now has rows: each key is checked against them.
    let mut all = first.clone();
    let second = reads(30_000, 12_000);
    assert_eq!(run_import(&db, &tsv(&second)).unwrap(), 12_000);
    all.extend(second);
    check(&db, &all);

    // A key the table holds, at line 11,001: reported there, nothing of the file written.
    let mut bad = reads(50_000, 11_000);
    bad.push(first[5].clone());
    bad.extend(reads(61_000, 100));
    let e = run_import(&db, &tsv(&bad)).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "line 11001: duplicate primary key ('{}') in table reads",
            first[5].0
        )
    );
    // A key twice in the file: found by the engine's sort at the end.
    let mut twice = reads(70_000, 15_000);
    twice.push(twice[100].clone());
    let e = run_import(&db, &tsv(&twice)).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "primary key ('{}') is given twice to the bulk insert into reads",
            twice[100].0
        )
    );
    check(&db, &all);
    no_scratch(dir.path());

    // The ingested tables survive a reopen.
    drop(db);
    let db = Database::open(dir.path()).unwrap();
    check(&db, &all);
}
