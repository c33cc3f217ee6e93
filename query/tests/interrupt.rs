//! Stopping statements with an `Interrupt` (Ctrl-C in the REPL, a PostgreSQL cancel
//! request): the statement ends with `QueryError::Interrupted` and has changed nothing; the
//! database goes on as before, and the same statement runs once the flag is cleared.
#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "a panic is how a test fails"
)]

use std::time::{Duration, Instant};

use strata_query::{Database, DbStore, Interrupt, KvStore, Output, QueryError, Value};

fn count<S: KvStore>(db: &Database<S>, sql: &str) -> i64 {
    match db.execute(sql).unwrap().pop().unwrap() {
        Output::Rows { rows, .. } => match rows.first().and_then(|r| r.first()) {
            Some(Value::Int(n)) => *n,
            Some(Value::Null) => 0,
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }
}

/// `reads (seq TEXT PRIMARY KEY, count BIGINT)` with `n` rows, counts `i % 100`.
fn fill<S: KvStore>(db: &Database<S>, n: usize) {
    db.execute("CREATE TABLE reads (seq TEXT PRIMARY KEY, count BIGINT NOT NULL)")
        .unwrap();
    let ids: Vec<usize> = (0..n).collect();
    for chunk in ids.chunks(10_000) {
        let rows = chunk
            .iter()
            .map(|i| {
                vec![
                    Value::Text(format!("read{i:08}")),
                    Value::Int((i % 100) as i64),
                ]
            })
            .collect();
        db.insert_values("reads", None, rows, strata_query::OnConflict::Error)
            .unwrap();
    }
}

fn run<S: KvStore>(db: &Database<S>, sql: &str, interrupt: &Interrupt) -> Result<(), QueryError> {
    db.execute_each_with(sql, interrupt, |_| {})
}

const STATEMENTS: [&str; 5] = [
    "SELECT count(*) FROM reads WHERE count > 10",
    "SELECT seq FROM reads WHERE count > 90 ORDER BY count DESC LIMIT 5",
    "UPDATE reads SET count = count + 1 WHERE count < 50",
    "DELETE FROM reads WHERE count >= 0",
    "CREATE INDEX by_count ON reads (count)",
];

/// What the statements above may change: every row's count, and the index.
fn state<S: KvStore>(db: &Database<S>) -> (i64, i64, usize) {
    let total = count(db, "SELECT count(*) FROM reads");
    let sum = count(db, "SELECT sum(count) FROM reads");
    let indexes = db.catalog().table("reads").unwrap().indexes.len();
    (total, sum, indexes)
}

#[test]
fn a_flag_set_before_the_statement_stops_it_before_it_starts() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path()).unwrap();
    fill(&db, 3_000);
    let before = state(&db);
    let interrupt = Interrupt::new();
    interrupt.interrupt();
    for sql in STATEMENTS {
        let e = run(&db, sql, &interrupt).unwrap_err();
        assert!(matches!(e, QueryError::Interrupted), "{sql}: {e}");
        assert_eq!(e.to_string(), "interrupted; the statement changed nothing");
    }
    assert_eq!(state(&db), before);
    // Cleared, the same statements run.
    interrupt.clear();
    for sql in STATEMENTS {
        run(&db, sql, &interrupt).unwrap();
    }
    assert_eq!(state(&db), (0, 0, 1));
}

/// Each statement on a table big enough that it runs for a while (50,000 rows; hundreds of
/// milliseconds in a debug build), interrupted from another thread while it runs.
#[test]
fn statements_stopped_while_they_run_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path()).unwrap();
    fill(&db, 50_000);
    let before = state(&db);
    let full = Instant::now();
    run(&db, STATEMENTS[0], &Interrupt::new()).unwrap();
    let full = full.elapsed();
    for sql in STATEMENTS {
        let interrupt = Interrupt::new();
        let started = Instant::now();
        let result = std::thread::scope(|s| {
            let setter = interrupt.clone();
            s.spawn(move || {
                std::thread::sleep(Duration::from_millis(1));
                setter.interrupt();
            });
            run(&db, sql, &interrupt)
        });
        let stopped = started.elapsed();
        let e = result.expect_err(sql);
        assert!(matches!(e, QueryError::Interrupted), "{sql}: {e}");
        assert_eq!(state(&db), before, "{sql} changed the table");
        eprintln!("{sql}: stopped after {stopped:?} (a whole count scan takes {full:?})");
    }
    // No scratch directory of the interrupted index build is left behind.
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    // The index built after an interrupted build is exact.
    db.execute("CREATE INDEX by_count ON reads (count)")
        .unwrap();
    assert_eq!(
        count(&db, "SELECT count(*) FROM reads WHERE count = 42"),
        500
    );
    drop(db);
    let db: Database<DbStore> = Database::open(dir.path()).unwrap();
    assert_eq!(state(&db).0, 50_000);
}
