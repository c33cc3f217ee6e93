//! The real-data scenario on a committed sample: 300 distinct reads with their counts from
//! the real Illumina example reads Debian ships (`real_counts.tsv` built by
//! `shared/data/make_reads.sh`, sampled to keep the high counts and the `ACGT` prefix).
//! Loaded with `.import`'s code into the engine, queried with and without an index on
//! `count`, checked against answers computed directly from the file, and again after a
//! reopen.
#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "a panic is how a test fails"
)]

use std::path::Path;

use strata_query::{Database, DbStore, Output, Value};

const SAMPLE: &str = include_str!("data/real_reads_sample.tsv");

fn sample() -> Vec<(String, i64)> {
    SAMPLE
        .lines()
        .map(|l| {
            let (s, c) = l.split_once('\t').unwrap();
            (s.to_owned(), c.parse().unwrap())
        })
        .collect()
}

fn rows(db: &Database<DbStore>, sql: &str) -> Vec<Vec<Value>> {
    match db.execute(sql).unwrap().remove(0) {
        Output::Rows { rows, .. } => rows,
        o => panic!("{o:?}"),
    }
}

fn plan(db: &Database<DbStore>, sql: &str) -> String {
    rows(db, &format!("EXPLAIN {sql}"))
        .into_iter()
        .map(|r| r[0].to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

fn check_queries(db: &Database<DbStore>, reads: &[(String, i64)]) {
    // Point lookups by primary key.
    for (seq, count) in reads.iter().step_by(17) {
        let sql = format!("SELECT count FROM reads WHERE seq = '{seq}'");
        assert_eq!(rows(db, &sql), vec![vec![Value::Int(*count)]]);
        assert!(plan(db, &sql).starts_with("access: point get on reads"));
    }
    assert!(rows(db, "SELECT count FROM reads WHERE seq = 'NOTAREAD'").is_empty());

    // Top reads by count: the counts are the 20 largest above 10, each row is a real pair.
    let sql = "SELECT seq, count FROM reads WHERE count > 10 ORDER BY count DESC LIMIT 20";
    let got = rows(db, sql);
    let mut want: Vec<i64> = reads.iter().map(|r| r.1).filter(|&c| c > 10).collect();
    want.sort_by(|a, b| b.cmp(a));
    want.truncate(20);
    let got_counts: Vec<i64> = got
        .iter()
        .map(|r| match r[1] {
            Value::Int(c) => c,
            _ => panic!(),
        })
        .collect();
    assert_eq!(got_counts, want);
    for r in &got {
        let Value::Text(seq) = &r[0] else { panic!() };
        assert!(
            reads
                .iter()
                .any(|(s, c)| s == seq && Value::Int(*c) == r[1])
        );
    }

    // Prefix count: a bounded key-range scan.
    let sql = "SELECT count(*) FROM reads WHERE seq LIKE 'ACGT%'";
    let want = reads.iter().filter(|r| r.0.starts_with("ACGT")).count();
    assert_eq!(rows(db, sql), vec![vec![Value::Int(want as i64)]]);
    assert!(
        plan(db, sql).starts_with("access: primary-key range scan of reads (seq LIKE 'ACGT%')")
    );

    let sql = "SELECT sum(count), max(length(seq)) FROM reads";
    let total: i64 = reads.iter().map(|r| r.1).sum();
    let longest = reads.iter().map(|r| r.0.len()).max().unwrap();
    assert_eq!(
        rows(db, sql),
        vec![vec![Value::Int(total), Value::Int(longest as i64)]]
    );
}

fn load(dir: &Path) -> Database<DbStore> {
    let db = Database::open(dir).unwrap();
    db.execute("CREATE TABLE reads (seq TEXT PRIMARY KEY, count BIGINT NOT NULL)")
        .unwrap();
    let n = strata_query::import::import(
        &db,
        "reads",
        SAMPLE.as_bytes(),
        b'\t',
        &strata_query::Interrupt::new(),
        |_| {},
    )
    .unwrap();
    assert_eq!(n, 300);
    db
}

#[test]
fn real_reads_sample_answers_the_scenario_queries() {
    let dir = tempfile::tempdir().unwrap();
    let reads = sample();
    let db = load(dir.path());
    check_queries(&db, &reads);
    let top = "SELECT seq, count FROM reads WHERE count > 10 ORDER BY count DESC LIMIT 20";
    assert!(plan(&db, top).starts_with("access: full scan of reads"));

    db.execute("CREATE INDEX reads_count ON reads (count)")
        .unwrap();
    check_queries(&db, &reads);
    assert!(plan(&db, top).starts_with("access: index range scan of reads_count"));

    // Everything, the catalog included, survives a flush and a reopen.
    db.store().db().flush().unwrap();
    drop(db);
    let db = Database::open(dir.path()).unwrap();
    check_queries(&db, &reads);
    assert!(plan(&db, top).starts_with("access: index range scan of reads_count"));
    assert_eq!(
        rows(&db, "SHOW TABLES"),
        vec![vec![Value::Text("reads".into())]]
    );
}

#[test]
fn catalog_survives_reopen_without_flush() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Database::open(dir.path()).unwrap();
        db.execute(
            "CREATE TABLE a (x INT PRIMARY KEY, y TEXT); CREATE TABLE b (k TEXT PRIMARY KEY)",
        )
        .unwrap();
        db.execute("INSERT INTO a VALUES (1, 'one'); CREATE INDEX a_y ON a (y); DROP TABLE b")
            .unwrap();
    }
    let db = Database::open(dir.path()).unwrap();
    assert_eq!(
        rows(&db, "SHOW TABLES"),
        vec![vec![Value::Text("a".into())]]
    );
    assert_eq!(
        rows(&db, "SELECT x FROM a WHERE y = 'one'"),
        vec![vec![Value::Int(1)]]
    );
    // Ids are not reused: a new table gets a fresh key prefix.
    db.execute("CREATE TABLE c (k INT PRIMARY KEY)").unwrap();
    let c = db.catalog().table("c").unwrap().id;
    let a = db.catalog().table("a").unwrap().id;
    assert!(c > a + 2, "ids a={a} c={c}");
}
